/* tokenizer/tokenize.c - `dflash tokenize` (text -> ids, ids -> text through a
 * tokenizer.json, tokenizer/tokenizer.c) and `dflash train-tokenizer` (a
 * byte-level BPE trained on text files, written as a tokenizer.json that
 * Hugging Face's library loads). docs/tokenizer.md says
 * what they do; NOTES.md, "Tokenizer", why. */
#include "tokenizer/tokenize.h"
#include "dflash.h"
#include "cli/flags.h"
#include "formats/files.h"
#include "formats/json.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const USAGE_TOKENIZE =
    "usage: dflash tokenize (--tokenizer FILE | --weights DIR | --target DIR) [--no-special] (--file F | TEXT)\n"
    "       dflash tokenize (--tokenizer FILE | --weights DIR | --target DIR) --decode I,J,...\n"
    "\n"
    "  --tokenizer FILE   a Hugging Face tokenizer.json (byte-level BPE: Qwen2/3, Llama-3/3.1, or\n"
    "                     one dflash train-tokenizer wrote)\n"
    "  --weights DIR      the tokenizer.json of a weight set: DIR/tokenizer.json, else\n"
    "                     DIR/target/tokenizer.json\n"
    "  --target DIR       the tokenizer.json in a target's folder: DIR/tokenizer.json\n"
    "  --file F           the text to encode is F's bytes (UTF-8), instead of TEXT\n"
    "  --no-special       no post-processor tokens (Hugging Face's add_special_tokens=False;\n"
    "                     special tokens written in the text are still their ids)\n"
    "  --decode I,J,...   write the tokens' bytes to stdout, nothing added (no newline); the\n"
    "                     ids comma- or space-separated, or [I J ...] as ./dflash lists them\n"
    "  -h, --help         this text\n"
    "\n"
    "Prints the ids comma-separated on one line (the form --ids takes).\n";

static const char *const USAGE_TRAIN_TOK =
    "usage: dflash train-tokenizer --vocab-size N --out FILE [--special TOKEN]... CORPUS...\n"
    "\n"
    "  --vocab-size N     the tokenizer's size, special tokens included: 256 byte tokens,\n"
    "                     N - 256 - (special tokens) merges, then the special tokens;\n"
    "                     258..1048576\n"
    "  --out FILE         the tokenizer.json to write (replaced whole when the run succeeds)\n"
    "  --special TOKEN    a special token (repeatable, at most 64; default: <|endoftext|> and\n"
    "                     <mask>); given once or more, it replaces the default list\n"
    "  CORPUS...          UTF-8 text files (at most 1 GiB in all)\n"
    "  -h, --help         this text\n"
    "\n"
    "Byte-level BPE with Qwen2/3's pre-tokenizer and NFC, deterministic: each step merges the\n"
    "most frequent adjacent pair, the smaller (left id, right id) on a tie (NOTES.md, \"Tokenizer\").\n";

/* ---- dflash tokenize */

/* --decode: the ids in the forms ./dflash prints them and takes them:
 * comma-separated (--ids), white-space-separated (--print-ids' line), or a
 * bracketed list ([5 6 7], the --rounds log with --print-ids) */
static int parse_ids(const char *s, IntList *ids) {
    const char *p = s;
    int n = 0;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    int bracket = *p == '[';
    if (bracket) p++;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (bracket && *p == ']') {
            p++;
            while (*p == ' ' || *p == '\t' || *p == '\n') p++;
            if (*p || n == 0) goto bad;
            return 0;
        }
        if (!*p && !bracket && n > 0) return 0;
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9') goto bad;
        long long v = strtoll(p, &end, 10);
        if (errno || v > 2147483647) goto bad;
        if (int_list_push(ids, (int)v)) return -1;
        n++;
        p = end;
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (*p == ',') {  /* a comma is followed by an id */
            p++;
            while (*p == ' ' || *p == '\t' || *p == '\n') p++;
            if (*p < '0' || *p > '9') goto bad;
        }
    }
bad:
    if (!*s) dflash_set_error("--decode: expected ids I,J,... (0..2147483647), got nothing");
    else dflash_set_error("--decode: expected ids I,J,... or I J ... (0..2147483647), got \"%.60s\" at \"%.20s\"", s, p);
    return -1;
}

static int is_file(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISREG(st.st_mode); }

typedef struct {
    const char *tokpath, *weights, *target, *file, *decode;
    int no_special;
} TokenizeArgs;

/* THE flags of dflash tokenize (cli/flags.h; tests/test_flags.c checks them
 * against USAGE_TOKENIZE) */
#define KA(m) offsetof(TokenizeArgs, m)
const Flag TOKENIZE_FLAGS[] = {
    {.name = "--tokenizer", .kind = FLAG_STRING, .field = KA(tokpath)},
    {.name = "--weights", .kind = FLAG_STRING, .field = KA(weights)},
    {.name = "--target", .kind = FLAG_STRING, .field = KA(target)},
    {.name = "--file", .kind = FLAG_STRING, .field = KA(file)},
    {.name = "--decode", .kind = FLAG_STRING, .field = KA(decode)},
    {.name = "--no-special", .kind = FLAG_SWITCH, .field = KA(no_special)},
    FLAG_TABLE_END};
#undef KA

int tokenize_main(int argc, char **argv) {
    TokenizeArgs ka;
    memset(&ka, 0, sizeof ka);
    const char *texts[2];
    int n_text = 0, rc = 2;
    int pa = flags_parse(TOKENIZE_FLAGS, argc, argv, &ka, "dflash tokenize", texts, 2, &n_text);
    if (pa == 1) { fputs(USAGE_TOKENIZE, stdout); return 0; }
    if (pa < 0) { dflash_print_error("dflash tokenize", ""); return 2; }
    if (n_text == 2) {
        fprintf(stderr, "dflash tokenize: one TEXT (quote it), got \"%.40s\" and \"%.40s\"\n", texts[0], texts[1]);
        return 2;
    }
    const char *tokpath = ka.tokpath, *weights = ka.weights, *target = ka.target, *file = ka.file;
    const char *decode = ka.decode, *text = n_text ? texts[0] : NULL;
    int no_special = ka.no_special;
    if (!!tokpath + !!weights + !!target != 1) {
        fprintf(stderr, "dflash tokenize: give one of --tokenizer FILE, --weights DIR, --target DIR (dflash tokenize --help)\n");
        return 2;
    }
    if (!!file + !!text + !!decode != 1) {
        fprintf(stderr, "dflash tokenize: give one of TEXT, --file F, --decode I,J,... (dflash tokenize --help)\n");
        return 2;
    }
    if (decode && no_special) { fprintf(stderr, "dflash tokenize: --no-special is for encoding, not --decode\n"); return 2; }
    char found[4200];
    if (!tokpath) {
        const char *dir = weights ? weights : target;
        snprintf(found, sizeof found, "%s/tokenizer.json", dir);
        if (weights && !is_file(found)) snprintf(found, sizeof found, "%s/target/tokenizer.json", dir);
        if (!is_file(found)) {
            if (weights)
                fprintf(stderr, "dflash tokenize: --weights %s: no tokenizer.json (looked for %s/tokenizer.json and %s/target/tokenizer.json)\n",
                        dir, dir, dir);
            else fprintf(stderr, "dflash tokenize: --target %s: no %s/tokenizer.json\n", dir, dir);
            return 2;
        }
        tokpath = found;
    }
    Tokenizer t;
    IntList ids = {0};
    char *buf = NULL, *out = NULL;
    size_t len = 0;
    /* --decode reads the file as ./dflash reads it to print output (a file
     * that cannot encode still decodes) */
    if ((decode ? tok_load_decoder(&t, tokpath) : tok_load(&t, tokpath)) != 0) {
        dflash_print_error("dflash tokenize", "");
        return 2;
    }
    if (decode) {
        size_t n;
        if (parse_ids(decode, &ids) || tok_decode(&t, ids.v, ids.n, &out, &n)) goto fail;
        if (n && fwrite(out, 1, n, stdout) != n) goto fail;
    } else {
        if (file) {
            if (file_read_max(file, (size_t)1 << 30, &buf, &len) != 0) goto fail;
        } else len = strlen(text);
        if (tok_encode(&t, file ? buf : text, len, !no_special, &ids) != 0) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("%s: %s", file ? file : "TEXT", msg);
            goto fail;
        }
        for (size_t i = 0; i < ids.n; i++) printf(i ? ",%d" : "%d", ids.v[i]);
        putchar('\n');
    }
    rc = 0;
    goto done;
fail:
    dflash_print_error("dflash tokenize", "");
done:
    free(buf);
    free(out);
    int_list_free(&ids);
    tok_free(&t);
    return rc;
}

/* ---- dflash train-tokenizer
 *
 * The corpus becomes words: the special tokens are cut out of it, the rest
 * is NFC-normalized and split by Qwen2/3's pattern; equal pieces are one
 * word with a count. A word is a list of token ids, at first its bytes (ids
 * 0..255 are the bytes). Each step takes the adjacent pair with the highest
 * count over all words (the smaller (left, right) on a tie), makes it a
 * token (or finds the token it already is: two pairs can spell one string),
 * and rewrites every place that has it, left to right within a word.
 *
 * Kept incrementally, as the BPE trainers in use keep them: each pair's
 * count, the places where it was seen (a symbol's position), and a heap of
 * (count, pair) entries, one pushed whenever a count changes (an entry whose
 * count is no longer the pair's is skipped when it comes up). A merge
 * touches only the places of its pair and their neighbours, so training
 * costs O(n log n) for n symbols of distinct words, whatever the number of
 * merges and however long a word (a corpus without spaces is one word). */

#ifndef TOK_WORK
#define TOK_WORK(n) ((void)0)  /* tokenizer/tests/test_tokenize_cli.c counts the trainer's steps */
#endif

typedef struct {
    int *sym;            /* every word's ids, back to back; -1: merged into the symbol before */
    int *next, *prev;    /* (n_sym) the neighbours within the word, -1 none */
    size_t n_sym;
    size_t *start;       /* (n_words) */
    int *len;            /* (n_words) */
    long long *count;    /* (n_words) */
    size_t *hash;        /* (n_words) the piece's keyed_hash (while counting) */
    int n_words, cap_words;
    int *wslot; size_t n_wslots;   /* piece bytes -> word (while counting) */
    size_t cap_sym;
} Words;

typedef struct {
    uint64_t *key; long long *cnt; int n, cap;   /* pairs: key = left << 32 | right */
    int **at; int *n_at, *cap_at;                /* (n) positions where the pair was seen (some no longer hold it) */
    int *slot; size_t n_slots;                   /* key -> index + 1 */
    int *stamp;                                  /* (n) the last merge that changed the count */
} Pairs;

typedef struct { long long cnt; uint64_t key; int pair; } PairTop;   /* a heap entry */
typedef struct { PairTop *e; size_t n, cap; } PairHeap;

static size_t pair_hash(uint64_t k) { return (size_t)keyed_hash(&k, sizeof k); }

static int pairs_rehash(Pairs *p, size_t n_slots) {
    int *s = calloc(n_slots, sizeof *s);
    if (!s) return -1;
    for (int i = 0; i < p->n; i++) {
        size_t h = pair_hash(p->key[i]) & (n_slots - 1);
        while (s[h]) h = (h + 1) & (n_slots - 1);
        s[h] = i + 1;
    }
    free(p->slot);
    p->slot = s, p->n_slots = n_slots;
    return 0;
}

/* count(a, b) += d; the pair's index, or -1 out of memory */
static int pairs_add(Pairs *p, int a, int b, long long d) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    if (2 * ((size_t)p->n + 1) > p->n_slots && pairs_rehash(p, p->n_slots ? p->n_slots * 2 : 1024)) return -1;
    size_t h = pair_hash(k) & (p->n_slots - 1);
    for (; p->slot[h]; h = (h + 1) & (p->n_slots - 1))
        if (p->key[p->slot[h] - 1] == k) { p->cnt[p->slot[h] - 1] += d; return p->slot[h] - 1; }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 1024;
        uint64_t *nk = realloc(p->key, sizeof *nk * (size_t)cap);
        if (nk) p->key = nk;
        long long *nc = realloc(p->cnt, sizeof *nc * (size_t)cap);
        if (nc) p->cnt = nc;
        int **na = realloc(p->at, sizeof *na * (size_t)cap);
        if (na) p->at = na;
        int *nn = realloc(p->n_at, sizeof *nn * (size_t)cap);
        if (nn) p->n_at = nn;
        int *np = realloc(p->cap_at, sizeof *np * (size_t)cap);
        if (np) p->cap_at = np;
        int *ns = realloc(p->stamp, sizeof *ns * (size_t)cap);
        if (ns) p->stamp = ns;
        if (!nk || !nc || !na || !nn || !np || !ns) return -1;
        p->cap = cap;
    }
    int i = p->n;
    p->key[i] = k, p->cnt[i] = d, p->at[i] = NULL, p->n_at[i] = p->cap_at[i] = 0, p->stamp[i] = -1;
    p->slot[h] = ++p->n;
    return i;
}

/* the pair i was seen at position x */
static int pairs_seen(Pairs *p, int i, int x) {
    if (p->n_at[i] == p->cap_at[i]) {
        int cap = p->cap_at[i] ? 2 * p->cap_at[i] : 2;
        int *na = realloc(p->at[i], sizeof *na * (size_t)cap);
        if (!na) return -1;
        p->at[i] = na, p->cap_at[i] = cap;
    }
    p->at[i][p->n_at[i]++] = x;
    return 0;
}

static void pairs_free(Pairs *p) {
    for (int i = 0; i < p->n; i++) free(p->at[i]);
    free(p->key); free(p->cnt); free(p->at); free(p->n_at); free(p->cap_at); free(p->slot); free(p->stamp);
}

/* the heap's order: the higher count first, then the smaller pair */
static int top_before(const PairTop *x, const PairTop *y) { return x->cnt > y->cnt || (x->cnt == y->cnt && x->key < y->key); }

static int top_push(PairHeap *h, const Pairs *p, int i) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        PairTop *ne = realloc(h->e, sizeof *ne * cap);
        if (!ne) return -1;
        h->e = ne, h->cap = cap;
    }
    PairTop e = {p->cnt[i], p->key[i], i};
    size_t k = h->n++;
    for (; k > 0 && top_before(&e, &h->e[(k - 1) / 2]); k = (k - 1) / 2) TOK_WORK(1), h->e[k] = h->e[(k - 1) / 2];
    h->e[k] = e;
    return 0;
}

static PairTop top_pop(PairHeap *h) {
    PairTop top = h->e[0], last = h->e[--h->n];
    size_t k = 0;
    for (;;) {
        size_t c = 2 * k + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && top_before(&h->e[c + 1], &h->e[c])) c++;
        if (!top_before(&h->e[c], &last)) break;
        TOK_WORK(1);
        h->e[k] = h->e[c];
        k = c;
    }
    if (h->n > 0) h->e[k] = last;
    return top;
}

/* the first counts: every adjacent pair of every word, where it is; every
 * pair on the heap. Links the words' symbols. -1 out of memory */
static int pairs_init(Pairs *p, PairHeap *h, Words *w) {
    if (w->n_sym > (size_t)1 << 30) return -1;
    w->next = malloc(sizeof(int) * (w->n_sym + 1)), w->prev = malloc(sizeof(int) * (w->n_sym + 1));
    if (!w->next || !w->prev) return -1;
    for (int i = 0; i < w->n_words; i++) {
        int s0 = (int)w->start[i], n = w->len[i];
        for (int k = 0; k < n; k++) {
            w->next[s0 + k] = k + 1 < n ? s0 + k + 1 : -1, w->prev[s0 + k] = k > 0 ? s0 + k - 1 : -1;
            if (k + 1 < n) {
                int j = pairs_add(p, w->sym[s0 + k], w->sym[s0 + k + 1], w->count[i]);
                if (j < 0 || pairs_seen(p, j, s0 + k)) return -1;
            }
        }
    }
    for (int i = 0; i < p->n; i++) if (top_push(h, p, i)) return -1;
    return 0;
}

static size_t piece_hash(const char *s, size_t n) { return (size_t)keyed_hash(s, n); }

static int words_grow_slots(Words *w) {
    size_t n = w->n_wslots ? w->n_wslots * 2 : 1 << 16;
    int *s = calloc(n, sizeof *s);
    if (!s) return -1;
    for (int i = 0; i < w->n_words; i++) {
        size_t j = w->hash[i] & (n - 1);
        while (s[j]) j = (j + 1) & (n - 1);
        s[j] = i + 1;
    }
    free(w->wslot);
    w->wslot = s, w->n_wslots = n;
    return 0;
}

static int count_piece(void *ctx, const char *p, size_t n) {
    Words *w = ctx;
    if (2 * ((size_t)w->n_words + 1) > w->n_wslots && words_grow_slots(w)) goto oom;
    size_t hash = piece_hash(p, n), h = hash & (w->n_wslots - 1);
    for (; w->wslot[h]; h = (h + 1) & (w->n_wslots - 1)) {
        int i = w->wslot[h] - 1;
        if ((size_t)w->len[i] != n) continue;
        const int *s = w->sym + w->start[i];
        size_t k = 0;
        while (k < n && s[k] == (unsigned char)p[k]) k++;
        if (k == n) { w->count[i]++; return 0; }
    }
    if (n > (size_t)1 << 30) { dflash_set_error("a piece of the corpus is over 1 GiB"); return -1; }
    if (w->n_words == w->cap_words) {
        int cap = w->cap_words ? w->cap_words * 2 : 4096;
        size_t *ns = realloc(w->start, sizeof *ns * (size_t)cap);
        if (ns) w->start = ns;
        int *nl = realloc(w->len, sizeof *nl * (size_t)cap);
        if (nl) w->len = nl;
        long long *nc = realloc(w->count, sizeof *nc * (size_t)cap);
        if (nc) w->count = nc;
        size_t *nh = realloc(w->hash, sizeof *nh * (size_t)cap);
        if (nh) w->hash = nh;
        if (!ns || !nl || !nc || !nh) goto oom;
        w->cap_words = cap;
    }
    while (w->n_sym + n > w->cap_sym) {
        size_t cap = w->cap_sym ? w->cap_sym * 2 : 1 << 16;
        int *s = realloc(w->sym, sizeof *s * cap);
        if (!s) goto oom;
        w->sym = s, w->cap_sym = cap;
    }
    int i = w->n_words++;
    w->start[i] = w->n_sym, w->len[i] = (int)n, w->count[i] = 1, w->hash[i] = hash;
    for (size_t k = 0; k < n; k++) w->sym[w->n_sym++] = (unsigned char)p[k];
    w->wslot[h] = i + 1;
    return 0;
oom:
    dflash_set_error("out of memory");
    return -1;
}

/* text between special tokens: NFC, the split, its pieces counted */
static int count_plain(Words *w, const char *s, size_t n) {
    size_t m;
    char *norm = tok_nfc(s, n, &m);
    if (!norm) return -1;
    int rc = tok_split(norm, m, 1, count_piece, w);
    free(norm);
    return rc ? -1 : 0;
}

typedef struct { Words *w; const char *s; size_t from; const TokMatcher *special; } SpecialCtx;

/* special token k at byte at: the text before it counted */
static int count_special(void *ctx, size_t at, int k) {
    SpecialCtx *c = ctx;
    if (count_plain(c->w, c->s + c->from, at - c->from)) return -1;
    c->from = at + (size_t)c->special->len[k];
    return 0;
}

/* one text's words: the special tokens cut out (leftmost first, the longest
 * there: tok_matcher_scan), NFC, the split */
static int count_text(Words *w, const char *s, size_t n, const TokMatcher *special) {
    SpecialCtx c = {w, s, 0, special};
    if (tok_matcher_scan(special, s, n, count_special, &c)) return -1;
    return count_plain(w, s + c.from, n - c.from);
}

/* a JSON string of n bytes (UTF-8) */
static void put_json_string(FILE *f, const char *s, size_t n) {
    putc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else putc(c, f);
    }
    putc('"', f);
}

/* a token's bytes as its byte-level string */
static void put_token(FILE *f, const unsigned char *b, int n) {
    char s[1024], ch[3];
    size_t m = 0;
    putc('"', f);
    for (int i = 0; i < n; i++) {
        tok_byte_char(b[i], ch);
        if (ch[0] == '"' || ch[0] == '\\') s[m++] = '\\';
        for (int k = 0; ch[k]; k++) s[m++] = ch[k];
        if (m > sizeof s - 8) { fwrite(s, 1, m, f); m = 0; }
    }
    fwrite(s, 1, m, f);
    putc('"', f);
}

static void write_tokenizer(FILE *f, unsigned char **tok, const int *tlen, int n_tok, const int *ml, const int *mr, int n_merges,
                            char **special, int n_special) {
    static const char *const bytelevel =
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}";
    fprintf(f, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [");
    for (int i = 0; i < n_special; i++) {
        fprintf(f, "%s\n    {\"id\": %d, \"content\": ", i ? "," : "", n_tok + i);
        put_json_string(f, special[i], strlen(special[i]));
        fprintf(f, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}");
    }
    fprintf(f, "\n  ],\n  \"normalizer\": {\"type\": \"NFC\"},\n");
    fprintf(f, "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": ");
    put_json_string(f, TOK_QWEN2_PATTERN, strlen(TOK_QWEN2_PATTERN));
    fprintf(f, "}, \"behavior\": \"Isolated\", \"invert\": false}, %s]},\n", bytelevel);
    fprintf(f, "  \"post_processor\": %s,\n  \"decoder\": %s,\n", bytelevel, bytelevel);
    fprintf(f, "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": \"\", "
               "\"end_of_word_suffix\": \"\", \"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false,\n");
    fprintf(f, "    \"vocab\": {");
    for (int i = 0; i < n_tok; i++) {
        fprintf(f, "%s\n      ", i ? "," : "");
        put_token(f, tok[i], tlen[i]);
        fprintf(f, ": %d", i);
    }
    fprintf(f, "\n    },\n    \"merges\": [");
    for (int i = 0; i < n_merges; i++) {
        fprintf(f, "%s\n      [", i ? "," : "");
        put_token(f, tok[ml[i]], tlen[ml[i]]);
        fprintf(f, ", ");
        put_token(f, tok[mr[i]], tlen[mr[i]]);
        putc(']', f);
    }
    fprintf(f, "\n    ]\n  }\n}\n");
}

static int find_token(unsigned char **tok, const int *tlen, int n_tok, const int *slot, size_t n_slots, const unsigned char *b, int n) {
    (void)n_tok;
    for (size_t h = piece_hash((const char *)b, (size_t)n) & (n_slots - 1); slot[h]; h = (h + 1) & (n_slots - 1)) {
        int id = slot[h] - 1;
        if (tlen[id] == n && memcmp(tok[id], b, (size_t)n) == 0) return id;
    }
    return -1;
}

typedef struct {
    const char *out;
    long vocab;
    const char *special[64];
    int n_special;
} TrainTokArgs;

/* THE flags of dflash train-tokenizer (cli/flags.h; tests/test_flags.c
 * checks them against USAGE_TRAIN_TOK) */
#define TK(m) offsetof(TrainTokArgs, m)
const Flag TRAIN_TOKENIZER_FLAGS[] = {
    {.name = "--vocab-size", .kind = FLAG_INT, .field = TK(vocab), .lo = 258, .hi = 1 << 20},
    {.name = "--out", .kind = FLAG_STRING, .field = TK(out)},
    {.name = "--special", .kind = FLAG_STRINGS, .field = TK(special), .count = TK(n_special), .max = 64},
    FLAG_TABLE_END};
#undef TK

/* The BPE trainer's vocabulary: the tokens so far (the 256 bytes first),
 * a hash of their bytes, and the merges in order. */
typedef struct {
    unsigned char **tok;  /* (target) each token's bytes */
    int *tlen;            /* (target) their lengths */
    int *tslot;           /* (n_tslots) 1 + a token id by its bytes' hash, 0 empty */
    size_t n_tslots;
    int n_tok, target;    /* tokens so far; how many (without the special ones) */
    int *ml, *mr;         /* (cap_merges) merge i: tokens ml[i] + mr[i] */
    int n_merges, cap_merges;
} Bpe;

/* token id = bpe->n_tok: the bytes s (malloc'd, taken) */
static void bpe_add(Bpe *bpe, unsigned char *s, int len) {
    int id = bpe->n_tok++;
    bpe->tok[id] = s, bpe->tlen[id] = len;
    size_t h = piece_hash((const char *)s, (size_t)len) & (bpe->n_tslots - 1);
    while (bpe->tslot[h]) h = (h + 1) & (bpe->n_tslots - 1);
    bpe->tslot[h] = id + 1;
}

/* the 256 bytes, room for target tokens and vocab merges; -1 out of memory */
static int bpe_init(Bpe *bpe, int target, int vocab) {
    memset(bpe, 0, sizeof *bpe);
    bpe->target = target, bpe->cap_merges = vocab;
    bpe->tok = calloc((size_t)target, sizeof *bpe->tok);
    bpe->tlen = calloc((size_t)target, sizeof *bpe->tlen);
    bpe->ml = malloc(sizeof(int) * (size_t)vocab), bpe->mr = malloc(sizeof(int) * (size_t)vocab);
    bpe->n_tslots = 16;
    while (bpe->n_tslots < 2 * (size_t)target) bpe->n_tslots *= 2;
    bpe->tslot = calloc(bpe->n_tslots, sizeof *bpe->tslot);
    if (!bpe->tok || !bpe->tlen || !bpe->ml || !bpe->mr || !bpe->tslot) return -1;
    for (int b = 0; b < 256; b++) {
        unsigned char *s = malloc(1);
        if (!s) return -1;
        s[0] = (unsigned char)b;
        bpe_add(bpe, s, 1);
    }
    return 0;
}

static void bpe_free(Bpe *bpe) {
    if (bpe->tok) for (int i = 0; i < bpe->n_tok; i++) free(bpe->tok[i]);
    free(bpe->tok); free(bpe->tlen); free(bpe->ml); free(bpe->mr); free(bpe->tslot);
}

/* the count of the word holding position x */
static long long word_count(const Words *w, int x) {
    int lo = 0, hi = w->n_words - 1;
    while (lo < hi) {  /* the last word starting at or before x */
        int mid = (lo + hi + 1) / 2;
        if (w->start[mid] <= (size_t)x) lo = mid;
        else hi = mid - 1;
    }
    return w->count[lo];
}

static int cmp_int(const void *a, const void *b) { int x = *(const int *)a, y = *(const int *)b; return (x > y) - (x < y); }

/* count(a, b) += d at position x, the pair marked changed by merge m (to be
 * pushed on the heap), and, d > 0, seen there. -1 out of memory */
static int pair_change(Pairs *p, int *changed, int *n_changed, int m, int a, int b, long long d, int x) {
    int i = pairs_add(p, a, b, d);
    if (i < 0 || (d > 0 && pairs_seen(p, i, x))) return -1;
    if (p->stamp[i] != m) p->stamp[i] = m, changed[(*n_changed)++] = i;
    return 0;
}

/* one merge: the most frequent pair (the smaller key on a tie) becomes a
 * token (or the one its bytes spell already) and replaces the pair at each
 * place, left to right within a word; 1 when no pair is left, -1 out of
 * memory */
static int bpe_merge(Bpe *bpe, Words *w, Pairs *p, PairHeap *heap) {
    int best = -1;
    while (heap->n > 0 && best < 0) {
        PairTop e = top_pop(heap);
        TOK_WORK(1);
        if (e.cnt > 0 && p->cnt[e.pair] == e.cnt) best = e.pair;  /* else an old count */
    }
    if (best < 0) return 1;
    int a = (int)(p->key[best] >> 32), b = (int)(p->key[best] & 0xFFFFFFFFu);
    int *tlen = bpe->tlen;
    unsigned char *ab = malloc((size_t)tlen[a] + (size_t)tlen[b]);
    if (!ab) return -1;
    memcpy(ab, bpe->tok[a], (size_t)tlen[a]);
    memcpy(ab + tlen[a], bpe->tok[b], (size_t)tlen[b]);
    int id = find_token(bpe->tok, tlen, bpe->n_tok, bpe->tslot, bpe->n_tslots, ab, tlen[a] + tlen[b]);
    if (id < 0) {
        id = bpe->n_tok;
        bpe_add(bpe, ab, tlen[a] + tlen[b]);
    } else free(ab);
    if (bpe->n_merges == bpe->cap_merges) {  /* a merge may spell a token there is: more merges than tokens */
        bpe->cap_merges *= 2;
        int *nl = realloc(bpe->ml, sizeof(int) * (size_t)bpe->cap_merges);
        if (nl) bpe->ml = nl;
        int *nr = realloc(bpe->mr, sizeof(int) * (size_t)bpe->cap_merges);
        if (nr) bpe->mr = nr;
        if (!nl || !nr) return -1;
    }
    int m = bpe->n_merges;
    bpe->ml[m] = a, bpe->mr[m] = b, bpe->n_merges++;
    /* the places, in text order (a position is its word's and its place's
     * order), each once; those where (a, b) is no longer are skipped */
    int *at = p->at[best], n_at = p->n_at[best];
    p->at[best] = NULL, p->n_at[best] = p->cap_at[best] = 0;
    qsort(at, (size_t)n_at, sizeof *at, cmp_int);
    int *changed = malloc(sizeof(int) * (5 * (size_t)n_at + 1)), n_changed = 0, rc = -1;
    if (!changed) goto done;
    for (int k = 0; k < n_at; k++) {
        int x = at[k], y = w->next[x];
        TOK_WORK(1);
        if ((k > 0 && x == at[k - 1]) || w->sym[x] != a || y < 0 || w->sym[y] != b) continue;
        long long c = word_count(w, x);
        int before = w->prev[x], after = w->next[y];
        if (before >= 0 && (pair_change(p, changed, &n_changed, m, w->sym[before], a, -c, before) ||
                            pair_change(p, changed, &n_changed, m, w->sym[before], id, c, before)))
            goto done;
        if (pair_change(p, changed, &n_changed, m, a, b, -c, x)) goto done;
        if (after >= 0 && (pair_change(p, changed, &n_changed, m, b, w->sym[after], -c, y) ||
                           pair_change(p, changed, &n_changed, m, id, w->sym[after], c, x)))
            goto done;
        w->sym[x] = id, w->sym[y] = -1;
        w->next[x] = after;
        if (after >= 0) w->prev[after] = x;
    }
    for (int k = 0; k < n_changed; k++) if (p->cnt[changed[k]] > 0 && top_push(heap, p, changed[k])) goto done;
    rc = 0;
done:
    free(at);
    free(changed);
    return rc;
}

/* the corpus files' pieces into w (at most 1 GiB in all); *total their bytes */
static int bpe_count_corpus(Words *w, const char **corpus, int n_corpus, char **special, int n_special, size_t *total) {
    *total = 0;
    TokMatcher sm;
    int lens[64];
    for (int k = 0; k < n_special; k++) lens[k] = (int)strlen(special[k]);
    if (tok_matcher_build(&sm, (const char *const *)special, lens, n_special)) { dflash_set_error("out of memory"); return -1; }
    int rc = 0;
    for (int c = 0; c < n_corpus && rc == 0; c++) {
        char *text;
        size_t len;
        if (file_read_max(corpus[c], ((size_t)1 << 30) - *total, &text, &len) != 0) { rc = -1; break; }
        *total += len;
        size_t bad = tok_utf8_check(text, len);
        if (bad != len) {
            dflash_set_error("%s: invalid UTF-8 at byte %zu (0x%02X): a corpus must be UTF-8", corpus[c], bad, (unsigned char)text[bad]);
            rc = -1;
        } else rc = count_text(w, text, len, &sm);
        free(text);
    }
    tok_matcher_free(&sm);
    return rc;
}

/* the flags beyond their table's checks: --special (each once, UTF-8; the
 * default two), --vocab-size against them, --out not a corpus file; 0, or
 * -1 with the error set */
static int train_tok_check(const TrainTokArgs *ta, const char **corpus, int n_corpus, char **special, int *n_special) {
    *n_special = ta->n_special;
    for (int i = 0; i < ta->n_special; i++) {
        const char *v = ta->special[i];
        size_t l = strlen(v);
        if (l == 0 || l > 256 || tok_utf8_check(v, l) != l) {
            dflash_set_error("--special: expected 1..256 bytes of UTF-8, got \"%.60s\"", v);
            return -1;
        }
        for (int k = 0; k < i; k++)
            if (!strcmp(special[k], v)) {
                dflash_set_error("--special %s given twice", v);
                return -1;
            }
        special[i] = (char *)v;
    }
    if (ta->vocab < 0 || !ta->out || n_corpus == 0) {
        dflash_set_error("expected --vocab-size N --out FILE and at least one CORPUS file (dflash train-tokenizer --help)");
        return -1;
    }
    if (*n_special == 0) special[(*n_special)++] = "<|endoftext|>", special[(*n_special)++] = "<mask>";
    if (ta->vocab < 256 + *n_special + 1) {
        dflash_set_error("--vocab-size %ld: expected at least %d (256 bytes, %d special tokens, 1 merge)", ta->vocab,
                         257 + *n_special, *n_special);
        return -1;
    }
    OutPath op = {ta->out, "the tokenizer", 0};
    return out_check_paths("--out", &op, 1, corpus, n_corpus);
}

int train_tokenizer_main(int argc, char **argv) {
    TrainTokArgs ta;
    memset(&ta, 0, sizeof ta);
    ta.vocab = -1;
    int n_corpus = 0, n_special = 0, rc = 2;
    char *special[64];
    Words w = {0};
    Pairs p = {0};
    PairHeap heap = {0};
    Bpe bpe = {0};
    OutFile *of = NULL;
    size_t total = 0;
    const char **corpus = calloc((size_t)argc, sizeof *corpus);
    if (!corpus) { fprintf(stderr, "dflash train-tokenizer: out of memory\n"); return 2; }
    int pa = flags_parse(TRAIN_TOKENIZER_FLAGS, argc, argv, &ta, "dflash train-tokenizer", corpus, argc, &n_corpus);
    if (pa == 1) { fputs(USAGE_TRAIN_TOK, stdout); rc = 0; goto done; }
    if (pa != 0 || train_tok_check(&ta, corpus, n_corpus, special, &n_special) != 0) goto fail;
    int vocab = (int)ta.vocab, target = vocab - n_special;
    if (bpe_init(&bpe, target, vocab) != 0) { dflash_set_error("out of memory"); goto fail; }
    if (bpe_count_corpus(&w, corpus, n_corpus, special, n_special, &total) != 0) goto fail;
    fprintf(stderr, "dflash train-tokenizer: %zu bytes, %d distinct pieces; %d merges to find\n", total, w.n_words, target - 256);
    free(w.wslot), w.wslot = NULL;
    free(w.hash), w.hash = NULL;
    if (pairs_init(&p, &heap, &w) != 0) { dflash_set_error("out of memory"); goto fail; }
    int next_report = (target - 256) / 10;
    while (bpe.n_tok < target) {
        int r = bpe_merge(&bpe, &w, &p, &heap);
        if (r < 0) { dflash_set_error("out of memory"); goto fail; }
        if (r == 1) break;
        if (next_report > 0 && bpe.n_tok - 256 >= next_report && bpe.n_tok < target) {
            fprintf(stderr, "dflash train-tokenizer: %d of %d tokens\n", bpe.n_tok, target);
            next_report += (target - 256) / 10;
        }
    }
    if (bpe.n_tok < target)
        fprintf(stderr, "dflash train-tokenizer: the corpus has no pair left to merge after %d merges: %d tokens, not %d\n",
                bpe.n_merges, bpe.n_tok + n_special, vocab);
    if (!(of = out_open(ta.out, "--out"))) goto fail;
    write_tokenizer(out_stream(of), bpe.tok, bpe.tlen, bpe.n_tok, bpe.ml, bpe.mr, bpe.n_merges, special, n_special);
    int crc = out_commit(of);
    of = NULL;
    if (crc != 0) goto fail;
    fprintf(stderr, "dflash train-tokenizer: wrote %s: %d tokens (256 bytes, %d merges, %d special: ids %d..%d)\n", ta.out,
            bpe.n_tok + n_special, bpe.n_merges, n_special, bpe.n_tok, bpe.n_tok + n_special - 1);
    rc = 0;
    goto done;
fail:
    dflash_print_error("dflash train-tokenizer", "");
done:
    if (of) out_abort(of);
    bpe_free(&bpe);
    free(w.sym); free(w.next); free(w.prev); free(w.start); free(w.len); free(w.count); free(w.hash); free(w.wslot);
    pairs_free(&p);
    free(heap.e);
    free(corpus);
    return rc;
}
