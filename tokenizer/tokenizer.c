/* tokenizer/tokenizer.c - byte-level BPE from a Hugging Face tokenizer.json:
 * what the `tokenizers` library does on Qwen2/3 and Llama-3/3.1 files, and
 * nothing else (tokenizer/tokenizer.h lists what is read and what is refused).
 *
 * encode: UTF-8 check -> added tokens cut out (leftmost, longest) -> NFC ->
 * the Split regex (a scanner, one branch per alternative) -> each piece's
 * bytes -> BPE (lowest rank first) -> ids, with the post-processor's
 * special tokens around them. decode: the tokens' bytes, concatenated.
 * Unicode tables: tokenizer/unicode_tables.h (tokenizer/mkunicode.sh). */
#include "tokenizer/tokenizer.h"
#include "formats/json.h"
#include "formats/files.h"
#include "dflash.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned lo, hi; } UniRange;
typedef struct { unsigned lo, hi; int ccc; } UniClass;
typedef struct { unsigned cp, a, b; } UniDecomp;
#include "tokenizer/unicode_tables.h"

#define TOK_MAX_IDS (1 << 22)

/* tokenizer/tests/test_tokenizer.c counts the steps of the loops whose length
 * the input sets (reordering accents, matching added tokens): a test of work
 * done, not of time */
#ifndef TOK_WORK
#define TOK_WORK(n) ((void)0)
#endif
/* tok_encode finds added tokens a block of text at a time (the test makes
 * blocks small, so that its texts cross their boundaries) */
#ifndef TOK_ADDED_BLOCK
#define TOK_ADDED_BLOCK (1 << 16)
#endif

const char *const TOK_QWEN2_PATTERN =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char *const TOK_LLAMA3_PATTERN =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int int_list_push(IntList *l, int x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        int *v = realloc(l->v, cap * sizeof *v);
        if (!v) { dflash_set_error("out of memory"); return -1; }
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

void int_list_free(IntList *l) { free(l->v); memset(l, 0, sizeof *l); }

/* ---- UTF-8 and the Unicode properties */

size_t tok_utf8_check(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) { i++; continue; }
        int k = utf8_seq_len((const unsigned char *)s + i, n - i);
        if (k == 0) return i;
        i += (size_t)k;
    }
    return n;
}

/* the code point at s[*i] (valid UTF-8), *i moved past it */
static unsigned utf8_next(const unsigned char *s, size_t *i) {
    unsigned c = s[*i];
    if (c < 0x80) { (*i)++; return c; }
    int k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    unsigned cp = c & (0x7F >> k);
    for (int j = 1; j < k; j++) cp = (cp << 6) | (s[*i + (size_t)j] & 0x3F);
    *i += (size_t)k;
    return cp;
}

static size_t utf8_put(unsigned cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int in_ranges(const UniRange *r, size_t n, unsigned cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
enum { C_LETTER = 1, C_NUMBER = 2, C_SPACE = 4, C_NEWLINE = 8 };

/* the classes the pattern uses: \p{L}, \p{N}, \s, [\r\n] */
static int cp_class(unsigned cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_NUMBER;
        if (cp == '\r' || cp == '\n') return C_SPACE | C_NEWLINE;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return C_SPACE;
        return 0;
    }
    if (in_ranges(uni_letter, COUNT(uni_letter), cp)) return C_LETTER;
    if (in_ranges(uni_number, COUNT(uni_number), cp)) return C_NUMBER;
    if (in_ranges(uni_space, COUNT(uni_space), cp)) return C_SPACE;
    return 0;
}

/* ---- NFC: canonical decomposition, canonical order, canonical composition
 * (Unicode Standard Annex #15). Hangul syllables are arithmetic. */
enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21, TCOUNT = 28,
       NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int ccc_of(unsigned cp) {
    size_t lo = 0, hi = COUNT(uni_ccc);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < uni_ccc[mid].lo) hi = mid;
        else if (cp > uni_ccc[mid].hi) lo = mid + 1;
        else return uni_ccc[mid].ccc;
    }
    return 0;
}

static int cmp_decomp(const void *k, const void *e) {
    unsigned cp = *(const unsigned *)k, c = ((const UniDecomp *)e)->cp;
    return cp < c ? -1 : cp > c;
}

static int decompose(unsigned cp, IntList *out) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        unsigned s = cp - SBASE;
        if (int_list_push(out, (int)(LBASE + s / NCOUNT)) || int_list_push(out, (int)(VBASE + (s % NCOUNT) / TCOUNT)))
            return -1;
        return s % TCOUNT ? int_list_push(out, (int)(TBASE + s % TCOUNT)) : 0;
    }
    const UniDecomp *d = bsearch(&cp, uni_decomp, COUNT(uni_decomp), sizeof *d, cmp_decomp);
    if (!d) return int_list_push(out, (int)cp);
    if (decompose(d->a, out)) return -1;
    return d->b ? decompose(d->b, out) : 0;
}

static unsigned compose(unsigned a, unsigned b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    size_t lo = 0, hi = COUNT(uni_comp);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const UniDecomp *e = &uni_comp[mid];  /* {first, second, composite} */
        if (a < e->cp || (a == e->cp && b < e->a)) hi = mid;
        else if (a > e->cp || b > e->a) lo = mid + 1;
        else return e->b;
    }
    return 0;
}

/* a run of non-starters v (n), in canonical order: stably sorted by their
 * combining class. A run may be as long as the text ("a" and 100,000
 * accents): a merge sort, O(n log n), on ccc << 21 | cp (a code point has
 * 21 bits), tmp (n) its scratch. */
static void sort_by_class(int *v, size_t n, int *tmp) {
    for (size_t k = 0; k < n; k++) v[k] = ccc_of((unsigned)v[k]) << 21 | v[k];
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                TOK_WORK(1);
                tmp[k++] = (v[j] >> 21) < (v[i] >> 21) ? v[j++] : v[i++];  /* equal classes: the left one first */
            }
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, sizeof(int) * n);
    }
    for (size_t k = 0; k < n; k++) v[k] &= (1 << 21) - 1;
}

char *tok_nfc(const char *s, size_t n, size_t *out_n) {
    size_t i = 0;
    int plain = 1;  /* below U+0300 every character is its own NFC and composes with nothing before it */
    for (size_t k = 0; k < n; k++) if ((unsigned char)s[k] >= 0xCC) { plain = 0; break; }
    char *o = malloc(plain ? n + 1 : 4 * n + 1);  /* NFC of valid UTF-8 is at most 3x longer */
    if (!o) { dflash_set_error("out of memory"); return NULL; }
    if (plain) { memcpy(o, s, n); o[n] = 0; *out_n = n; return o; }
    IntList d = {0};
    while (i < n) if (decompose(utf8_next((const unsigned char *)s, &i), &d)) { free(o); int_list_free(&d); return NULL; }
    /* canonical order: a stable sort of each run of non-starters by class */
    int *tmp = NULL;
    for (size_t a = 0, b; a < d.n; a = b + 1) {
        while (a < d.n && ccc_of((unsigned)d.v[a]) == 0) a++;
        for (b = a; b < d.n && ccc_of((unsigned)d.v[b]) != 0; b++) {}
        if (b - a < 2) continue;
        if (!tmp && !(tmp = malloc(sizeof(int) * d.n))) { free(o); int_list_free(&d); dflash_set_error("out of memory"); return NULL; }
        sort_by_class(d.v + a, b - a, tmp);
    }
    free(tmp);
    /* composition: a character joins the last starter unless blocked (a
     * character between them of class 0 or of a class not below its own) */
    size_t w = 0, starter = (size_t)-1;
    int last_cc = 0;
    for (size_t k = 0; k < d.n; k++) {
        unsigned c = (unsigned)d.v[k];
        int cc = ccc_of(c);
        if (starter != (size_t)-1 && (w == starter + 1 || (last_cc != 0 && last_cc < cc))) {
            unsigned m = compose((unsigned)d.v[starter], c);
            if (m) { d.v[starter] = (int)m; continue; }
        }
        if (cc == 0) starter = w;
        last_cc = cc;
        d.v[w++] = (int)c;
    }
    size_t m = 0;
    for (size_t k = 0; k < w; k++) m += utf8_put((unsigned)d.v[k], o + m);
    o[m] = 0;
    *out_n = m;
    int_list_free(&d);
    return o;
}

/* ---- the Split pre-tokenizer: one scanner for
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with D = 1 (Qwen2/3, written \p{N}) or 3 (Llama-3). At each position the
 * first alternative that matches wins, as in a backtracking regex. */
int tok_split(const char *text, size_t n, int digits, int (*piece)(void *ctx, const char *p, size_t len), void *ctx) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        size_t j = i, k;
        unsigned c = utf8_next(s, &j);  /* s[i..j) is c */
        int cl = cp_class(c);
        size_t end = 0;
        /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
        if (c == '\'' && j < n) {
            int a = s[j] | 0x20, b = j + 1 < n ? s[j + 1] | 0x20 : 0;
            if (a == 's' || a == 't' || a == 'm' || a == 'd') end = j + 1;
            else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) end = j + 2;
        }
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (!end) {
            size_t from = 0;
            if (cl & C_LETTER) from = j;
            else if (!(cl & (C_NEWLINE | C_NUMBER)) && j < n) {
                k = j;
                if (cp_class(utf8_next(s, &k)) & C_LETTER) from = k;
            }
            if (from) {
                end = from;
                while (end < n) { k = end; if (!(cp_class(utf8_next(s, &k)) & C_LETTER)) break; end = k; }
            }
        }
        /* \p{N}{1,D} */
        if (!end && (cl & C_NUMBER)) {
            end = j;
            for (int d = 1; d < digits && end < n; d++) {
                k = end;
                if (!(cp_class(utf8_next(s, &k)) & C_NUMBER)) break;
                end = k;
            }
        }
        /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
        if (!end) {
            int ok = cl == 0;
            size_t from = i;
            if (c == ' ' && j < n) { k = j; if (cp_class(utf8_next(s, &k)) == 0) ok = 1, from = j; }
            if (ok) {
                end = from;
                while (end < n) { k = end; if (cp_class(utf8_next(s, &k)) != 0) break; end = k; }
                while (end < n && (s[end] == '\r' || s[end] == '\n')) end++;
            }
        }
        if (!end) {  /* c is white space: its run is s[i..run) */
            size_t run = j, last_nl = (cl & C_NEWLINE) ? i : (size_t)-1;
            while (run < n) {
                k = run;
                unsigned d = utf8_next(s, &k);
                if (!(cp_class(d) & C_SPACE)) break;
                if (d == '\r' || d == '\n') last_nl = run;
                run = k;
            }
            if (last_nl != (size_t)-1) end = last_nl + 1;          /* \s*[\r\n]+ */
            else if (run == n) end = n;                            /* \s+(?!\S) at the end */
            else {
                size_t prev = run - 1;                             /* \s+(?!\S): all but the last */
                while ((s[prev] & 0xC0) == 0x80) prev--;
                end = prev > i ? prev : run;                       /* else \s+ (one character) */
            }
        }
        int rc = piece(ctx, text + i, end - i);
        if (rc) return rc;
        i = end;
    }
    return 0;
}

/* ---- the byte-level alphabet: GPT-2's bytes_to_unicode. The printable
 * bytes ! .. ~, ¡ .. ¬, ® .. ÿ stand for themselves; the other 68 bytes, in
 * order, become U+0100, U+0101, ... */
static unsigned byte_cp(unsigned char b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) n++;
    return 256 + n;
}

void tok_byte_char(unsigned char b, char out[3]) {
    unsigned cp = byte_cp(b);  /* < 0x144: one or two bytes */
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

/* a byte-level string (UTF-8 of alphabet characters) -> its bytes in out
 * (at most n); the count, or -1 when a character is not in the alphabet */
static int bytelevel_decode(const char *s, size_t n, unsigned char *out) {
    static int inv[324];  /* code point -> byte + 1 */
    if (!inv['!']) for (int b = 0; b < 256; b++) inv[byte_cp((unsigned char)b)] = b + 1;
    size_t i = 0;
    int m = 0;
    if (tok_utf8_check(s, n) != n) return -1;
    while (i < n) {
        unsigned cp = utf8_next((const unsigned char *)s, &i);
        if (cp >= 324 || !inv[cp]) return -1;
        out[m++] = (unsigned char)(inv[cp] - 1);
    }
    return m;
}

/* ---- the vocabulary: id -> bytes, bytes -> id */

/* keyed (formats/json.h): a vocabulary's tokens come from the file */
static size_t bytes_hash(const unsigned char *s, int n) { return (size_t)keyed_hash(s, (size_t)n); }

static int tok_find(const Tokenizer *t, const unsigned char *s, int n) {
    if (!t->n_slots) return -1;
    for (size_t h = bytes_hash(s, n) & (t->n_slots - 1);; h = (h + 1) & (t->n_slots - 1)) {
        int id = t->slot[h] - 1;
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(t->bytes[id], s, (size_t)n) == 0) return id;
    }
}

static void tok_index(Tokenizer *t, int id) {
    size_t h = bytes_hash(t->bytes[id], t->len[id]) & (t->n_slots - 1);
    while (t->slot[h]) h = (h + 1) & (t->n_slots - 1);
    t->slot[h] = id + 1;
}

void tok_free(Tokenizer *t) {
    if (t->bytes) for (int i = 0; i < t->cap_ids; i++) free(t->bytes[i]);
    free(t->bytes); free(t->len); free(t->slot); free(t->merges); free(t->by_pair); free(t->is_added);
    tok_matcher_free(&t->added_match);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].text);
    free(t->added);
    memset(t, 0, sizeof *t);
}

/* ---- reading tokenizer.json */

static const char *jstr(const Json *o, const char *key) {
    const Json *v = json_get(o, key);
    return v && v->type == JSON_STRING ? v->string : NULL;
}

/* a field that must be absent, null, false or "" (features not supported) */
static int refuse_set(const char *path, const Json *o, const char *where, const char *key) {
    const Json *v = json_get(o, key);
    if (!v || v->type == JSON_NULL || (v->type == JSON_BOOL && !v->boolean) || (v->type == JSON_STRING && !v->string[0]))
        return 0;
    char buf[96];
    dflash_set_error("%s: %s.%s: %s is not supported (only byte-level BPE as Qwen2/3 and Llama-3 use it)", path, where,
                     key, json_describe(v, buf, sizeof buf));
    return -1;
}

static int refuse_type(const char *path, const char *where, const Json *v, const char *want) {
    char buf[96];
    const char *ty = v ? jstr(v, "type") : NULL;
    if (ty) dflash_set_error("%s: %s.type: \"%.60s\" is not supported (expected %s)", path, where, ty, want);
    else dflash_set_error("%s: %s: %s is not supported (expected %s)", path, where, v ? json_describe(v, buf, sizeof buf) : "nothing", want);
    return -1;
}

static int is_type(const Json *v, const char *ty) { const char *s = v ? jstr(v, "type") : NULL; return s && !strcmp(s, ty); }
static int is_null(const Json *v) { return !v || v->type == JSON_NULL; }

static int read_bytelevel(const char *path, const char *where, const Json *v) {
    const Json *ap = json_get(v, "add_prefix_space");
    if (ap && ap->type == JSON_BOOL && ap->boolean && strcmp(where, "pre_tokenizer.pretokenizers[1]") == 0) {
        dflash_set_error("%s: %s.add_prefix_space: true is not supported (expected false)", path, where);
        return -1;
    }
    const Json *ur = json_get(v, "use_regex");
    if (ur && ur->type == JSON_BOOL && ur->boolean && strcmp(where, "pre_tokenizer.pretokenizers[1]") == 0) {
        dflash_set_error("%s: %s.use_regex: true is not supported (the Split before it splits)", path, where);
        return -1;
    }
    return 0;
}

static int set_token(Tokenizer *t, const char *path, int id, const unsigned char *b, int n, const char *what) {
    if (id < 0 || id >= TOK_MAX_IDS) {
        dflash_set_error("%s: %s: id %d, expected 0..%d", path, what, id, TOK_MAX_IDS - 1);
        return -1;
    }
    if (id >= t->cap_ids) {
        int cap = t->cap_ids ? t->cap_ids : 1024;
        while (cap <= id) cap *= 2;
        unsigned char **nb = realloc(t->bytes, sizeof *nb * (size_t)cap);
        if (nb) t->bytes = nb;
        int *nl = realloc(t->len, sizeof *nl * (size_t)cap);
        if (nl) t->len = nl;
        int *na = realloc(t->is_added, sizeof *na * (size_t)cap);
        if (na) t->is_added = na;
        if (!nb || !nl || !na) { dflash_set_error("%s: out of memory", path); return -1; }
        for (int i = t->cap_ids; i < cap; i++) t->bytes[i] = NULL, t->len[i] = 0, t->is_added[i] = 0;
        t->cap_ids = cap;
    }
    if (id >= t->n_ids) t->n_ids = id + 1;
    if (t->bytes[id]) {
        if (t->len[id] == n && memcmp(t->bytes[id], b, (size_t)n) == 0 && strncmp(what, "added", 5) == 0) return 0;
        dflash_set_error("%s: %s: id %d is already the id of another token", path, what, id);
        return -1;
    }
    if (!(t->bytes[id] = malloc((size_t)n + 1))) { dflash_set_error("%s: out of memory", path); return -1; }
    memcpy(t->bytes[id], b, (size_t)n);
    t->bytes[id][n] = 0;
    t->len[id] = n;
    return 0;
}

static const Tokenizer *sort_t;
static int cmp_pair(const void *a, const void *b) {
    const TokMerge *x = &sort_t->merges[*(const int *)a], *y = &sort_t->merges[*(const int *)b];
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}
static int cmp_added(const void *a, const void *b) {
    const TokAdded *x = a, *y = b;
    return x->len != y->len ? y->len - x->len : x->id - y->id;
}

/* the rank of merge (a, b), or -1 */
static int merge_rank(const Tokenizer *t, int a, int b) {
    size_t lo = 0, hi = (size_t)t->n_merges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const TokMerge *m = &t->merges[t->by_pair[mid]];
        if (a < m->left || (a == m->left && b < m->right)) hi = mid;
        else if (a > m->left || b > m->right) lo = mid + 1;
        else return t->by_pair[mid];
    }
    return -1;
}

/* the ids of a post-processor's special token, by name */
static int special_ids(const char *path, const Json *pp, const char *name, int *ids, int *n) {
    const Json *st = json_get(pp, "special_tokens"), *e = st ? json_get(st, name) : NULL, *v = e ? json_get(e, "ids") : NULL;
    if (!v || v->type != JSON_ARRAY) {
        dflash_set_error("%s: post_processor.special_tokens: no \"ids\" for \"%.60s\"", path, name);
        return -1;
    }
    for (int i = 0; i < v->n; i++) {
        if (*n == 8 || !v->items[i].is_integer || v->items[i].integer < 0 || v->items[i].integer >= TOK_MAX_IDS) {
            dflash_set_error("%s: post_processor.special_tokens[\"%.60s\"].ids: expected at most 8 ids", path, name);
            return -1;
        }
        ids[(*n)++] = (int)v->items[i].integer;
    }
    return 0;
}

static int read_post(Tokenizer *t, const char *path, const Json *pp, const char *where) {
    if (is_null(pp) || is_type(pp, "ByteLevel")) return 0;
    if (is_type(pp, "Sequence")) {
        const Json *ps = json_get(pp, "processors");
        if (!ps || ps->type != JSON_ARRAY) return refuse_type(path, where, pp, "a \"processors\" list");
        for (int i = 0; i < ps->n; i++) {
            char w[96];
            snprintf(w, sizeof w, "%s.processors[%d]", where, i);
            if (read_post(t, path, &ps->items[i], w)) return -1;
        }
        return 0;
    }
    if (!is_type(pp, "TemplateProcessing"))
        return refuse_type(path, where, pp, "ByteLevel, TemplateProcessing or a Sequence of them");
    const Json *single = json_get(pp, "single");
    if (!single || single->type != JSON_ARRAY) return refuse_type(path, where, pp, "a \"single\" template");
    int seen_a = 0;
    for (int i = 0; i < single->n; i++) {
        const Json *it = &single->items[i], *sp = json_get(it, "SpecialToken"), *sq = json_get(it, "Sequence");
        if (sp && jstr(sp, "id")) {
            if (special_ids(path, pp, jstr(sp, "id"), seen_a ? t->suffix : t->prefix, seen_a ? &t->n_suffix : &t->n_prefix))
                return -1;
        } else if (sq && jstr(sq, "id") && !strcmp(jstr(sq, "id"), "A") && !seen_a) {
            seen_a = 1;
        } else {
            dflash_set_error("%s: %s.single[%d]: expected a SpecialToken or the one Sequence A", path, where, i);
            return -1;
        }
    }
    if (!seen_a) { dflash_set_error("%s: %s.single: no Sequence A", path, where); return -1; }
    return 0;
}

/* ---- TokMatcher: Aho-Corasick on the texts read backwards. Built from the
 * reversed texts in sorted order, so that each node's children come in
 * increasing byte order and sit together (found by binary search); fail
 * links breadth first. Run backwards from a text's end, the state after
 * the byte at i is the longest suffix of text[i..] reversed that is a node,
 * and hit there is the longest text starting at i: every start costs
 * amortized O(1) steps, whatever the number or the length of the texts. */
static const char *const *sort_texts;
static const int *sort_lens;
static int cmp_reversed(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b, li = sort_lens[i], lj = sort_lens[j];
    for (int k = 0; k < li && k < lj; k++) {
        unsigned char p = (unsigned char)sort_texts[i][li - 1 - k], q = (unsigned char)sort_texts[j][lj - 1 - k];
        if (p != q) return p < q ? -1 : 1;
    }
    if (li != lj) return li < lj ? -1 : 1;
    return (i > j) - (i < j);  /* the same text twice: the lower index answers */
}

/* the child of node s by byte c, or -1 */
static int ac_child(const TokMatcher *m, int s, unsigned char c) {
    int lo = m->edge[s], hi = m->edge[s + 1];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (m->byte[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->edge[s + 1] && m->byte[lo] == c ? m->to[lo] : -1;
}

/* the state after s reads c */
static int ac_step(const TokMatcher *m, int s, unsigned char c) {
    for (;;) {
        TOK_WORK(1);
        int v = ac_child(m, s, c);
        if (v >= 0) return v;
        if (s == 0) return 0;
        s = m->fail[s];
    }
}

void tok_matcher_free(TokMatcher *m) {
    free(m->edge); free(m->byte); free(m->to); free(m->fail); free(m->hit); free(m->len);
    memset(m, 0, sizeof *m);
}

int tok_matcher_build(TokMatcher *m, const char *const *texts, const int *lens, int n_texts) {
    memset(m, 0, sizeof *m);
    size_t total = 1;
    for (int i = 0; i < n_texts; i++) total += (size_t)lens[i];
    if (total > (size_t)1 << 30) return -1;
    int n = 1, *order = malloc(sizeof(int) * ((size_t)n_texts + 1)), *path = NULL;
    int *parent = malloc(sizeof(int) * total), *queue = malloc(sizeof(int) * total);
    unsigned char *byte = malloc(total);
    m->edge = calloc(total + 1, sizeof(int)), m->byte = malloc(total), m->to = malloc(sizeof(int) * total);
    m->fail = malloc(sizeof(int) * total), m->hit = malloc(sizeof(int) * total);
    m->len = malloc(sizeof(int) * ((size_t)n_texts + 1));
    int rc = -1;
    if (!order || !parent || !queue || !byte || !m->edge || !m->byte || !m->to || !m->fail || !m->hit || !m->len) goto done;
    for (int i = 0; i < n_texts; i++) {
        order[i] = i, m->len[i] = lens[i];
        if (lens[i] > m->max_len) m->max_len = lens[i];
    }
    if (!(path = malloc(sizeof(int) * ((size_t)m->max_len + 1)))) goto done;
    sort_texts = texts, sort_lens = lens;
    if (n_texts) qsort(order, (size_t)n_texts, sizeof(int), cmp_reversed);
    /* the trie, node by node in the sorted order: a text shares with the one
     * before it the nodes of their common prefix (path), the rest is new */
    parent[0] = -1, m->hit[0] = -1, path[0] = 0;
    for (int r = 0, prev = -1; r < n_texts; prev = order[r++]) {
        const char *a = texts[order[r]];
        int la = lens[order[r]], l = 0;
        if (prev >= 0)
            while (l < la && l < lens[prev] && a[la - 1 - l] == texts[prev][lens[prev] - 1 - l]) l++;
        for (int k = l; k < la; k++) {
            parent[n] = path[k], byte[n] = (unsigned char)a[la - 1 - k], m->hit[n] = -1;
            path[k + 1] = n++;
        }
        if (m->hit[path[la]] < 0) m->hit[path[la]] = order[r];
    }
    m->n = n;
    /* the edges, grouped by parent (a counting sort keeps each group's bytes increasing) */
    for (int v = 1; v < n; v++) m->edge[parent[v] + 1]++;
    for (int v = 0; v < n; v++) m->edge[v + 1] += m->edge[v];
    for (int v = 0; v < n; v++) queue[v] = m->edge[v];  /* the next free edge of each node */
    for (int v = 1; v < n; v++) {
        int e = queue[parent[v]]++;
        m->byte[e] = byte[v], m->to[e] = v;
    }
    /* fail links, breadth first: a node's fail is shallower, so done before it */
    int qh = 0, qt = 0;
    m->fail[0] = 0;
    queue[qt++] = 0;
    while (qh < qt) {
        int u = queue[qh++];
        for (int e = m->edge[u]; e < m->edge[u + 1]; e++) {
            int v = m->to[e];
            m->fail[v] = u == 0 ? 0 : ac_step(m, m->fail[u], m->byte[e]);
            if (m->hit[v] < 0) m->hit[v] = m->hit[m->fail[v]];
            queue[qt++] = v;
        }
    }
    rc = 0;
done:
    free(order), free(path), free(parent), free(queue), free(byte);
    if (rc) tok_matcher_free(m);
    return rc;
}

/* which text starts at each byte comes from the matcher run backwards, a
 * block at a time (the state at a byte depends on the max_len bytes after
 * it only, so a block's run starts max_len bytes past its end) */
int tok_matcher_scan(const TokMatcher *m, const char *text, size_t len, int (*found)(void *ctx, size_t at, int k), void *ctx) {
    if (m->n <= 1 || len == 0) return 0;
    size_t block = m->max_len > TOK_ADDED_BLOCK ? (size_t)m->max_len : TOK_ADDED_BLOCK, lo = 0, hi = 0;
    int *starts = malloc(sizeof(int) * (len < block ? len : block)), rc = 0;
    if (!starts) { dflash_set_error("out of memory"); return -1; }
    for (size_t i = 0; i < len && rc == 0;) {
        if (i >= hi) {  /* starts[] for text[i .. i + block) */
            lo = i, hi = len - i < block ? len : i + block;
            size_t end = len - hi < (size_t)m->max_len ? len : hi + (size_t)m->max_len;
            for (size_t p = end, s = 0; p-- > lo;) {
                s = (size_t)ac_step(m, (int)s, (unsigned char)text[p]);
                if (p < hi) starts[p - lo] = m->hit[s];
            }
        }
        int k = starts[i - lo];
        if (k < 0) { i++; continue; }
        rc = found(ctx, i, k);
        i += (size_t)m->len[k];
    }
    free(starts);
    return rc;
}

/* what encoding needs beyond decoding: normalizer, pre-tokenizer, the 256
 * byte tokens, merges, post-processor */
static int read_encoder(Tokenizer *t, const char *path, const Json *root);

static int read_tokenizer(Tokenizer *t, const char *path, const char *text, size_t len, int decode_only) {
    Json root;
    char buf[96];
    memset(t, 0, sizeof *t);
    if (json_parse(text, len, path, &root) != 0) return -1;
    int rc = -1;
    unsigned char *tmp = NULL;
    const Json *model = json_get(&root, "model");
    if (root.type != JSON_OBJECT) { dflash_set_error("%s: expected a JSON object (a tokenizer.json)", path); goto done; }
    if (!is_type(model, "BPE")) { refuse_type(path, "model", model, "BPE"); goto done; }

    const Json *dec = json_get(&root, "decoder");
    if (!is_null(dec) && !is_type(dec, "ByteLevel")) { refuse_type(path, "decoder", dec, "null or ByteLevel"); goto done; }

    /* model.vocab: byte-level strings */
    const Json *voc = json_get(model, "vocab");
    if (!voc || voc->type != JSON_OBJECT) { dflash_set_error("%s: model.vocab: expected an object of token: id", path); goto done; }
    size_t maxlen = 0;
    for (int i = 0; i < voc->n; i++) if (strlen(voc->keys[i]) > maxlen) maxlen = strlen(voc->keys[i]);
    if (!(tmp = malloc(maxlen * 2 + 8))) { dflash_set_error("%s: out of memory", path); goto done; }
    for (int i = 0; i < voc->n; i++) {
        const Json *v = &voc->items[i];
        int n = bytelevel_decode(voc->keys[i], strlen(voc->keys[i]), tmp);
        if (!v->is_integer || v->integer < 0 || v->integer >= TOK_MAX_IDS) {
            dflash_set_error("%s: model.vocab[\"%.60s\"]: %s, expected an id 0..%d", path, voc->keys[i],
                             json_describe(v, buf, sizeof buf), TOK_MAX_IDS - 1);
            goto done;
        }
        if (n <= 0) {
            dflash_set_error("%s: model.vocab[\"%.60s\"]: not a byte-level token (a character outside GPT-2's byte "
                             "alphabet; byte_fallback and other vocabularies are not supported)", path, voc->keys[i]);
            goto done;
        }
        char what[96];
        snprintf(what, sizeof what, "model.vocab[\"%.60s\"]", voc->keys[i]);
        if (set_token(t, path, (int)v->integer, tmp, n, what)) goto done;
    }
    const Json *added = json_get(&root, "added_tokens");
    if (added && added->type != JSON_ARRAY) { dflash_set_error("%s: added_tokens: expected a list", path); goto done; }
    int n_added = added ? added->n : 0;
    if (n_added && !(t->added = calloc((size_t)n_added, sizeof *t->added))) { dflash_set_error("%s: out of memory", path); goto done; }
    for (int i = 0; i < n_added; i++) {
        const Json *a = &added->items[i], *id = json_get(a, "id"), *spc = json_get(a, "special"), *nm = json_get(a, "normalized");
        const char *content = jstr(a, "content");
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        if (!content || !content[0] || !id || !id->is_integer || id->integer < 0 || id->integer >= TOK_MAX_IDS) {
            dflash_set_error("%s: %s: expected a non-empty \"content\" and an \"id\" 0..%d", path, where, TOK_MAX_IDS - 1);
            goto done;
        }
        if (refuse_set(path, a, where, "lstrip") || refuse_set(path, a, where, "rstrip") || refuse_set(path, a, where, "single_word"))
            goto done;
        if (is_type(json_get(&root, "normalizer"), "NFC") && nm && nm->type == JSON_BOOL && nm->boolean) {
            dflash_set_error("%s: %s.normalized: true is not supported with the NFC normalizer (expected false)", path, where);
            goto done;
        }
        TokAdded *e = &t->added[t->n_added++];
        e->len = (int)strlen(content), e->id = (int)id->integer, e->special = spc && spc->type == JSON_BOOL && spc->boolean;
        if (!(e->text = malloc((size_t)e->len + 1))) { dflash_set_error("%s: out of memory", path); goto done; }
        memcpy(e->text, content, (size_t)e->len + 1);
        if (set_token(t, path, e->id, (const unsigned char *)content, e->len, where)) goto done;
        t->is_added[e->id] = 1;
        t->added_first[(unsigned char)content[0]] = 1;
    }
    if (t->n_added) qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
    if (t->n_added) {  /* the added tokens' matcher, added[k] its text k */
        const char **texts = malloc(sizeof *texts * (size_t)t->n_added);
        int *lens = malloc(sizeof *lens * (size_t)t->n_added), r = -1;
        if (texts && lens) {
            for (int i = 0; i < t->n_added; i++) texts[i] = t->added[i].text, lens[i] = t->added[i].len;
            r = tok_matcher_build(&t->added_match, texts, lens, t->n_added);
        }
        free(texts), free(lens);
        if (r) { dflash_set_error("%s: out of memory", path); goto done; }
    }

    if (read_encoder(t, path, &root) != 0) {
        if (!decode_only) goto done;
        memcpy(t->no_encode, dflash_errmsg, sizeof t->no_encode);  /* decoding still works */
        t->no_encode[sizeof t->no_encode - 1] = 0;
    }
    rc = 0;
done:
    free(tmp);
    json_free(&root);
    if (rc) tok_free(t);
    return rc;
}

static int read_encoder(Tokenizer *t, const char *path, const Json *root) {
    char buf[96];
    const Json *model = json_get(root, "model");
    if (refuse_set(path, model, "model", "dropout") || refuse_set(path, model, "model", "unk_token") ||
        refuse_set(path, model, "model", "continuing_subword_prefix") ||
        refuse_set(path, model, "model", "end_of_word_suffix") || refuse_set(path, model, "model", "byte_fallback") ||
        refuse_set(path, root, "tokenizer", "truncation") || refuse_set(path, root, "tokenizer", "padding"))
        return -1;
    const Json *im = json_get(model, "ignore_merges");
    t->ignore_merges = im && im->type == JSON_BOOL && im->boolean;
    /* normalizer: null or NFC */
    const Json *norm = json_get(root, "normalizer");
    if (is_type(norm, "NFC")) t->nfc = 1;
    else if (!is_null(norm)) { refuse_type(path, "normalizer", norm, "null or NFC"); return -1; }

    /* pre_tokenizer: Sequence [Split(pattern), ByteLevel] */
    const Json *pre = json_get(root, "pre_tokenizer"), *ps = json_get(pre, "pretokenizers");
    if (!is_type(pre, "Sequence") || !ps || ps->type != JSON_ARRAY || ps->n != 2) {
        refuse_type(path, "pre_tokenizer", pre, "a Sequence of Split (the Qwen2/3 or Llama-3 pattern) and ByteLevel");
        return -1;
    }
    const Json *sp = &ps->items[0], *pat = json_get(sp, "pattern"), *rx = pat ? json_get(pat, "Regex") : NULL;
    if (!is_type(sp, "Split")) { refuse_type(path, "pre_tokenizer.pretokenizers[0]", sp, "Split"); return -1; }
    if (!rx || rx->type != JSON_STRING) {
        dflash_set_error("%s: pre_tokenizer.pretokenizers[0].pattern: %s is not supported (expected the Regex of Qwen2/3 or "
                         "Llama-3)", path, pat ? "a String pattern" : "nothing");
        return -1;
    }
    if (!strcmp(rx->string, TOK_QWEN2_PATTERN)) t->digits = 1;
    else if (!strcmp(rx->string, TOK_LLAMA3_PATTERN)) t->digits = 3;
    else {
        dflash_set_error("%s: pre_tokenizer.pretokenizers[0].pattern.Regex: \"%.80s%s\" is not supported (expected the "
                         "pattern of Qwen2/3 or Llama-3)", path, rx->string, strlen(rx->string) > 80 ? "..." : "");
        return -1;
    }
    const char *beh = jstr(sp, "behavior");
    if (!beh || strcmp(beh, "Isolated")) {
        dflash_set_error("%s: pre_tokenizer.pretokenizers[0].behavior: \"%.40s\" is not supported (expected \"Isolated\")",
                         path, beh ? beh : "(none)");
        return -1;
    }
    if (refuse_set(path, sp, "pre_tokenizer.pretokenizers[0]", "invert")) return -1;
    if (!is_type(&ps->items[1], "ByteLevel")) { refuse_type(path, "pre_tokenizer.pretokenizers[1]", &ps->items[1], "ByteLevel"); return -1; }
    if (read_bytelevel(path, "pre_tokenizer.pretokenizers[1]", &ps->items[1])) return -1;

    /* bytes -> id (the vocab's tokens; added tokens are matched separately) */
    t->n_slots = 16;
    while (t->n_slots < 2 * (size_t)t->n_ids) t->n_slots *= 2;
    if (!(t->slot = calloc(t->n_slots, sizeof *t->slot))) { dflash_set_error("%s: out of memory", path); return -1; }
    for (int i = 0; i < t->n_ids; i++) if (t->bytes[i] && !t->is_added[i]) tok_index(t, i);
    /* the one-byte tokens; a vocabulary without some (the toy sets' 64 words)
     * encodes the texts whose pieces never need them (bpe_piece) */
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        t->byte_id[b] = tok_find(t, &c, 1);
    }

    /* model.merges: "a b" or [a, b], in rank order */
    const Json *mer = json_get(model, "merges");
    if (!mer || mer->type != JSON_ARRAY) { dflash_set_error("%s: model.merges: expected a list", path); return -1; }
    if (mer->n && (!(t->merges = malloc(sizeof *t->merges * (size_t)mer->n)) || !(t->by_pair = malloc(sizeof(int) * (size_t)mer->n)))) {
        dflash_set_error("%s: out of memory", path);
        return -1;
    }
    for (int i = 0; i < mer->n; i++) {
        const Json *m = &mer->items[i];
        const char *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        if (m->type == JSON_STRING) {
            const char *sp2 = strchr(m->string, ' ');
            if (sp2 && !strchr(sp2 + 1, ' ')) a = m->string, al = (size_t)(sp2 - m->string), b = sp2 + 1, bl = strlen(b);
        } else if (m->type == JSON_ARRAY && m->n == 2 && m->items[0].type == JSON_STRING && m->items[1].type == JSON_STRING) {
            a = m->items[0].string, al = strlen(a), b = m->items[1].string, bl = strlen(b);
        }
        if (!a || !al || !bl) {
            dflash_set_error("%s: model.merges[%d]: %s, expected \"a b\" or [\"a\", \"b\"]", path, i, json_describe(m, buf, sizeof buf));
            return -1;
        }
        unsigned char *ab = malloc(al + bl + 1);
        if (!ab) { dflash_set_error("%s: out of memory", path); return -1; }
        int na = bytelevel_decode(a, al, ab), nb = na > 0 ? bytelevel_decode(b, bl, ab + na) : -1;
        int ia = na > 0 ? tok_find(t, ab, na) : -1, ib = nb > 0 ? tok_find(t, ab + na, nb) : -1;
        int iab = ia >= 0 && ib >= 0 ? tok_find(t, ab, na + nb) : -1;
        free(ab);
        if (iab < 0) {
            dflash_set_error("%s: model.merges[%d]: \"%.*s\" + \"%.*s\": %s is not in model.vocab", path, i, (int)(al > 40 ? 40 : al), a,
                             (int)(bl > 40 ? 40 : bl), b, ia < 0 ? "the first token" : ib < 0 ? "the second token" : "the merged token");
            return -1;
        }
        t->merges[i] = (TokMerge){ia, ib, iab};
        t->by_pair[i] = i;
    }
    t->n_merges = mer->n;
    sort_t = t;
    if (t->n_merges) qsort(t->by_pair, (size_t)t->n_merges, sizeof(int), cmp_pair);
    for (int i = 1; i < t->n_merges; i++) {
        const TokMerge *x = &t->merges[t->by_pair[i - 1]], *y = &t->merges[t->by_pair[i]];
        if (x->left == y->left && x->right == y->right) {
            int r = t->by_pair[i - 1] < t->by_pair[i] ? t->by_pair[i] : t->by_pair[i - 1];
            dflash_set_error("%s: model.merges[%d]: the same pair as an earlier merge", path, r);
            return -1;
        }
    }
    if (read_post(t, path, json_get(root, "post_processor"), "post_processor")) return -1;
    for (int i = 0; i < t->n_prefix + t->n_suffix; i++) {
        int id = i < t->n_prefix ? t->prefix[i] : t->suffix[i - t->n_prefix];
        if (id >= t->n_ids || !t->bytes[id]) {
            dflash_set_error("%s: post_processor: id %d is no token", path, id);
            return -1;
        }
    }
    return 0;
}

int tok_parse(Tokenizer *t, const char *path, const char *text, size_t len) { return read_tokenizer(t, path, text, len, 0); }
int tok_parse_decoder(Tokenizer *t, const char *path, const char *text, size_t len) {
    return read_tokenizer(t, path, text, len, 1);
}

static int load(Tokenizer *t, const char *path, int decode_only) {
    char *text;
    size_t len;
    memset(t, 0, sizeof *t);
    if (file_read_max(path, 512u << 20, &text, &len) != 0) return -1;
    int rc = read_tokenizer(t, path, text, len, decode_only);
    free(text);
    return rc;
}

int tok_load(Tokenizer *t, const char *path) { return load(t, path, 0); }
int tok_load_decoder(Tokenizer *t, const char *path) { return load(t, path, 1); }

/* ---- BPE on one piece: start from its bytes, then always merge the
 * adjacent pair of lowest rank (the leftmost of equal ones), as HF's
 * Word::merge_all does; a heap of candidate pairs keeps a long word
 * O(n log n). */
typedef struct { int rank, pos; } Cand;

static int cand_less(Cand a, Cand b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(Cand *h, int *n, Cand c) {
    int i = (*n)++;
    while (i > 0 && cand_less(c, h[(i - 1) / 2])) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = c;
}

static Cand heap_pop(Cand *h, int *n) {
    Cand top = h[0], last = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(h[c + 1], h[c])) c++;
        if (!cand_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static int bpe_piece(const Tokenizer *t, const unsigned char *s, int n, IntList *out) {
    if (t->ignore_merges || n == 1) {
        int id = tok_find(t, s, n);
        if (id >= 0) return int_list_push(out, id);
    }
    /* heap: n - 1 pairs at the start, at most 2 more per merge (n - 1 merges) */
    int stack_ids[64 * 3];
    int *buf = n <= 64 ? stack_ids : malloc(sizeof(int) * 3 * (size_t)n);
    Cand stack_heap[64 * 3], *heap = n <= 64 ? stack_heap : malloc(sizeof(Cand) * 3 * (size_t)n);
    if (!buf || !heap) {
        if (buf != stack_ids) free(buf);
        if (heap != stack_heap) free(heap);
        dflash_set_error("out of memory");
        return -1;
    }
    int *id = buf, *next = buf + n, *prev = buf + 2 * n, nh = 0;
    for (int i = 0; i < n; i++) id[i] = t->byte_id[s[i]], next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;
    for (int i = 0; i < n; i++) {
        if (id[i] >= 0) continue;
        /* Hugging Face's library drops a byte the vocabulary has no token for
         * (no unk_token, no byte_fallback) and merges across the gap: text
         * would be lost without a word, so it is refused, naming the byte */
        char ch[3], shown[256];
        size_t m = 0;
        tok_byte_char(s[i], ch);
        for (int k = 0; k < n && m + 8 < sizeof shown; k++) {  /* the piece on one line, cut at a character */
            if (m + 12 >= sizeof shown && (s[k] & 0xC0) != 0x80) break;
            if (s[k] < 0x20 || s[k] == 0x7F || s[k] == '"' || s[k] == '\\') m += (size_t)snprintf(shown + m, 8, "\\x%02X", s[k]);
            else shown[m++] = (char)s[k];
        }
        shown[m] = 0;
        dflash_set_error("the byte 0x%02X (\"%s\") of the piece \"%s\" has no token in this vocabulary, and the piece "
                         "is none (Hugging Face's library would drop the byte)", s[i], ch, shown);
        if (buf != stack_ids) free(buf);
        if (heap != stack_heap) free(heap);
        return -1;
    }
    for (int i = 0; i + 1 < n; i++) {
        int r = merge_rank(t, id[i], id[i + 1]);
        if (r >= 0) heap_push(heap, &nh, (Cand){r, i});
    }
    while (nh > 0) {
        Cand c = heap_pop(heap, &nh);
        int i = c.pos, j = id[i] < 0 ? -1 : next[i];
        if (j < 0 || merge_rank(t, id[i], id[j]) != c.rank) continue;  /* stale */
        id[i] = t->merges[c.rank].id;
        id[j] = -1;
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        if (prev[i] >= 0) {
            int r = merge_rank(t, id[prev[i]], id[i]);
            if (r >= 0) heap_push(heap, &nh, (Cand){r, prev[i]});
        }
        if (next[i] >= 0) {
            int r = merge_rank(t, id[i], id[next[i]]);
            if (r >= 0) heap_push(heap, &nh, (Cand){r, i});
        }
    }
    int rc = 0;
    for (int i = 0; i >= 0 && rc == 0; i = next[i]) rc = int_list_push(out, id[i]);
    if (buf != stack_ids) free(buf);
    if (heap != stack_heap) free(heap);
    return rc;
}

typedef struct { const Tokenizer *t; IntList *out; } PieceCtx;

static int encode_piece(void *ctx, const char *p, size_t len) {
    PieceCtx *c = ctx;
    return bpe_piece(c->t, (const unsigned char *)p, (int)len, c->out);
}

/* text between added tokens: NFC, Split, BPE */
static int encode_plain(const Tokenizer *t, const char *s, size_t n, IntList *out) {
    if (n == 0) return 0;
    if (n > (size_t)1 << 30) { dflash_set_error("the text is over 1 GiB"); return -1; }
    char *norm = NULL;
    if (t->nfc) {
        if (!(norm = tok_nfc(s, n, &n))) return -1;
        s = norm;
    }
    PieceCtx c = {t, out};
    int rc = tok_split(s, n, t->digits, encode_piece, &c);
    free(norm);
    return rc;
}

typedef struct { const Tokenizer *t; const char *text; size_t from; IntList *out; } AddedCtx;

/* added token k at byte at: the text before it, then its id */
static int encode_added(void *ctx, size_t at, int k) {
    AddedCtx *c = ctx;
    if (encode_plain(c->t, c->text + c->from, at - c->from, c->out) || int_list_push(c->out, c->t->added[k].id)) return -1;
    c->from = at + (size_t)c->t->added[k].len;
    return 0;
}

int tok_encode(const Tokenizer *t, const char *text, size_t len, int add_special, IntList *out) {
    if (t->no_encode[0]) { dflash_set_error("this tokenizer.json decodes only: %s", t->no_encode); return -1; }
    size_t bad = tok_utf8_check(text, len);
    if (bad != len) {
        dflash_set_error("invalid UTF-8 at byte %zu (0x%02X): text must be UTF-8", bad, (unsigned char)text[bad]);
        return -1;
    }
    if (add_special) for (int i = 0; i < t->n_prefix; i++) if (int_list_push(out, t->prefix[i])) return -1;
    /* the added tokens, leftmost first, the longest there (t->added_match),
     * and the text between them */
    AddedCtx c = {t, text, 0, out};
    if (tok_matcher_scan(&t->added_match, text, len, encode_added, &c)) return -1;
    size_t from = c.from;
    if (encode_plain(t, text + from, len - from, out)) return -1;
    if (add_special) for (int i = 0; i < t->n_suffix; i++) if (int_list_push(out, t->suffix[i])) return -1;
    return 0;
}

int tok_added_id(const Tokenizer *t, const char *text) {
    size_t n = strlen(text);
    for (int i = 0; i < t->n_added; i++)
        if ((size_t)t->added[i].len == n && memcmp(t->added[i].text, text, n) == 0) return t->added[i].id;
    return -1;
}

int tok_encode_cb(void *ctx, const char *text, size_t len, int **ids, size_t *n, size_t *cap) {
    IntList l = {*ids, *n, *cap};
    int rc = tok_encode((const Tokenizer *)ctx, text, len, 0, &l);
    *ids = l.v, *n = l.n, *cap = l.cap;
    return rc;
}

int tok_decode(const Tokenizer *t, const int *ids, size_t n_ids, char **out, size_t *n) {
    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids || !t->bytes[ids[i]]) {
            dflash_set_error("id %d (position %zu) is no token of this tokenizer", ids[i], i + 1);
            return -1;
        }
        total += (size_t)t->len[ids[i]];
    }
    char *o = malloc(total + 1);
    if (!o) { dflash_set_error("out of memory"); return -1; }
    size_t m = 0;
    for (size_t i = 0; i < n_ids; i++) memcpy(o + m, t->bytes[ids[i]], (size_t)t->len[ids[i]]), m += (size_t)t->len[ids[i]];
    o[m] = 0;
    *out = o, *n = m;
    return 0;
}
