/* explorer/explore.c - `dflash explore TRACE_DIR OUT.html [--vocab FILE]`: one
 * self-contained, offline HTML page over a trace directory.
 *
 * Reads TRACE_DIR/trace.jsonl (or an oracle's names.json) and every .npy
 * file it lists, with formats/files.c's readers (file_read_all, npy_read_values),
 * and writes OUT.html: inline CSS, JavaScript and SVG, no network request,
 * no external library. The page shows the run's timeline, the walkthrough's
 * seven steps, attention heatmaps for every phase, round, layer and head
 * (names "*.self_attn.attn_weights", [H, Tq, S]) and a browser over every
 * tensor of the trace, whatever its name.
 *
 * The page derives everything from tensor names (REFERENCE section 4 of the
 * trace contract) and does without any tensor that is missing, so it works on
 * a port's trace with the same names and on traces that gain names later.
 *
 * Size. Integer tensors and attention weights are written whole and exact.
 * Other float tensors are written whole while the page stays within a data
 * budget; beyond it the largest ones keep their first rows (the page says
 * so) and always their statistics over every value. Floats are written as
 * base64 of their little-endian bytes (float32 for '<f4' traces, float64
 * otherwise), so every value on the page is the trace's value bit for bit.
 *
 * Determinism: the page holds no path, time or host name; the statistics are
 * computed in a fixed order and printed with %.9g / %.17g. The same trace
 * gives the same bytes (`make walkthrough-check` relies on it).
 *
 * The page's HTML, CSS and JavaScript are files: explorer/explorer.html,
 * explorer/explorer.css, explorer/explorer.js. explorer/embed inlines the last two into
 * the first at build time and writes the bytes as C arrays
 * (build/explorer_page.c, linked into ./dflash); the trace's data goes at
 * the page's @TRACE_DATA@ line as a JSON document in
 * <script type="application/json">. This file is the C side only.
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include "explorer/explore.h"
#include "cli/flags.h"
#include "dflash.h"
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"
#include "formats/manifest.h"
#include "formats/tracenames.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The page's bounds (docs/explorer.md). Values are counted as
 * the bytes they take in the trace's dtype on the page: 4 per float32, 8 per
 * float64 or integer (base64 makes floats 4/3 larger in the file).
 *   EXPLORE_PAGE_VALUES   all values on one page: 8 MiB (a page of at most
 *                         about 11 MB plus the names; the default run's
 *                         trace fits whole);
 *   EXPLORE_TENSOR_VALUES one tensor's values: 2 MiB (512 Ki float32).
 * A tensor beyond its share keeps its first values in C order (whole rows of
 * axis 0 when a row fits); the page says, per tensor and in total, what it
 * left out; statistics are over the values kept. Integer tensors (ids,
 * positions, match) come first: they carry the run's structure; then the
 * attention weights (plan_sizes). */
#define EXPLORE_PAGE_VALUES ((size_t)8 << 20)
#define EXPLORE_TENSOR_VALUES ((size_t)2 << 20)
/* A float tensor of at most this many values is never cut. */
#define EXPLORE_ALWAYS_WHOLE 64
/* The manifest (trace.jsonl or names.json) is read whole, up to this size. */
#define EXPLORE_MANIFEST_MAX ((size_t)256 << 20)

typedef struct {
    char *name, *file, *phase, *meaning;
    int round;           /* -1: not given */
    NpyArray a;          /* the header (npy_open); a.data stays NULL */
    int is_int;          /* integers or bools (written as numbers), else floats */
    size_t keep;         /* values read and written to the page */
    int planned;         /* keep decided by plan_sizes' first tiers */
    double *f;           /* (keep) when !is_int */
    int64_t *iv;         /* (keep) when is_int */
} Entry;

typedef struct {
    Entry *e;
    int n, cap;
} Entries;

/* every file the explorer reads, by device and inode: the page may be none */
typedef struct {
    dev_t dev;
    ino_t ino;
    char *path;
} Input;

typedef struct {
    Input *in;
    int n, cap;
} Inputs;

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* remember path (stat follows links) as an input; -1 with dflash_errmsg */
static int input_add(Inputs *ins, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        dflash_set_error("%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (ins->n == ins->cap) {
        int cap = ins->cap ? ins->cap * 2 : 256;
        Input *in = realloc(ins->in, (size_t)cap * sizeof *in);
        if (!in) { dflash_set_error("out of memory"); return -1; }
        ins->in = in;
        ins->cap = cap;
    }
    char *p = xstrdup(path);
    if (!p) { dflash_set_error("out of memory"); return -1; }
    ins->in[ins->n++] = (Input){st.st_dev, st.st_ino, p};
    return 0;
}

static void inputs_free(Inputs *ins) {
    for (int k = 0; k < ins->n; k++) free(ins->in[k].path);
    free(ins->in);
    memset(ins, 0, sizeof *ins);
}

static int entries_add(Entries *es, const char *where, const char *name, const char *file, const char *phase,
                       const char *meaning, int round) {
    if (es->n == es->cap) {
        if (es->cap > INT_MAX / 2) { dflash_set_error("%s: too many entries", where); return -1; }
        int cap = es->cap ? es->cap * 2 : 256;
        Entry *e = realloc(es->e, (size_t)cap * sizeof *e);
        if (!e) { dflash_set_error("out of memory"); return -1; }
        es->e = e;
        es->cap = cap;
    }
    Entry *e = &es->e[es->n];
    memset(e, 0, sizeof *e);
    e->round = round;
    e->name = xstrdup(name);
    e->file = xstrdup(file);
    e->phase = phase ? xstrdup(phase) : NULL;
    e->meaning = meaning ? xstrdup(meaning) : NULL;
    es->n++;
    if (!e->name || !e->file || (phase && !e->phase) || (meaning && !e->meaning)) {
        dflash_set_error("out of memory");
        return -1;
    }
    /* a manifest's file must be a plain name inside the directory */
    if (!manifest_file_ok(file)) {
        dflash_set_error("%s: entry \"%s\": file \"%s\" is not a plain .npy file name", where, name, file);
        return -1;
    }
    return 0;
}

static void entries_free(Entries *es) {
    for (int k = 0; k < es->n; k++) {
        free(es->e[k].name);
        free(es->e[k].file);
        free(es->e[k].phase);
        free(es->e[k].meaning);
        free(es->e[k].f);
        free(es->e[k].iv);
    }
    free(es->e);
    memset(es, 0, sizeof *es);
}


/* one trace.jsonl line (trace_jsonl_each checked "name" and "file"):
 * optionally "phase", "round" and "meaning" too */
/* trace.jsonl through formats/manifest.c, THE manifest reader and validator
 * diff, figures and replay use ("round" an integer >= 0, "phase" a string,
 * "dtype" and "shape" together; each header checked against them in load_trace) */
static int load_jsonl(Entries *es, Manifest *m, const char *path, const char *text, size_t len) {
    memset(m, 0, sizeof *m);
    m->path = strdup(path);
    if (!m->path) { dflash_set_error("out of memory"); return -1; }
    int rc = manifest_parse_jsonl(m, text, len);
    for (int i = 0; rc == 0 && i < m->names.n; i++) {
        long r = m->round.s[i][0] ? strtol(m->round.s[i], NULL, 10) : -1;
        rc = entries_add(es, path, m->names.s[i], m->files.s[i], m->phase.s[i][0] ? m->phase.s[i] : NULL,
                         m->meaning.s[i][0] ? m->meaning.s[i] : NULL, r < 1000000 ? (int)r : -1);
    }
    return rc;
}

/* names.json (the oracle's): ["name", ...], file = name + ".npy", read by
 * formats/manifest.c as diff reads it */
static int load_names_json(Entries *es, const char *path, const char *text, size_t len) {
    Manifest m;
    memset(&m, 0, sizeof m);
    m.path = strdup(path);
    if (!m.path) { dflash_set_error("out of memory"); return -1; }
    int rc = manifest_parse_names_json(&m, text, len);
    for (int i = 0; rc == 0 && i < m.names.n; i++)
        rc = entries_add(es, path, m.names.s[i], m.files.s[i], NULL, NULL, -1);
    manifest_free(&m);
    return rc;
}

static int by_name(const void *a, const void *b) {
    const Entry *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* a name listed twice: sort pointers by name, compare neighbours (n log n) */
static int check_unique(const Entries *es, const char *dir) {
    const Entry **by = malloc((size_t)es->n * sizeof *by);
    if (!by) { dflash_set_error("out of memory"); return -1; }
    for (int k = 0; k < es->n; k++) by[k] = &es->e[k];
    qsort(by, (size_t)es->n, sizeof *by, by_name);
    int rc = 0;
    for (int k = 1; k < es->n && rc == 0; k++)
        if (strcmp(by[k - 1]->name, by[k]->name) == 0) {
            dflash_set_error("%s: the name \"%s\" is listed twice", dir, by[k]->name);
            rc = -1;
        }
    free(by);
    return rc;
}

static int load_trace_m(Entries *es, Inputs *ins, const char *dir, Manifest *m);
/* The manifest and every listed file's .npy header (npy_open: validated,
 * the file's size checked against its shape; no data read yet). */
static int load_trace(Entries *es, Inputs *ins, const char *dir) {
    Manifest m;
    memset(&m, 0, sizeof m);
    int rc = load_trace_m(es, ins, dir, &m);
    manifest_free(&m);
    return rc;
}

static int load_trace_m(Entries *es, Inputs *ins, const char *dir, Manifest *m) {
    static const char *const manifests[2] = {"trace.jsonl", "names.json"};
    struct stat sd;
    if (stat(dir, &sd) != 0 || !S_ISDIR(sd.st_mode)) {
        dflash_set_error("%s: cannot open directory: %s", dir, stat(dir, &sd) != 0 ? strerror(errno) : "not a directory");
        return -1;
    }
    int found = 0;
    for (int k = 0; k < 2 && !found; k++) {
        char *path = path_join(dir, manifests[k]);
        struct stat st;
        if (!path) return -1;
        if (stat(path, &st) != 0 && errno == ENOENT) { free(path); continue; }
        found = 1;
        char *text;
        size_t len;
        int rc = input_add(ins, path);
        if (rc == 0) rc = file_read_max(path, EXPLORE_MANIFEST_MAX, &text, &len);
        if (rc == 0) {
            rc = k == 0 ? load_jsonl(es, m, path, text, len) : load_names_json(es, path, text, len);
            free(text);
        }
        free(path);
        if (rc != 0) return -1;
    }
    if (!found) {
        dflash_set_error("%s: no trace.jsonl (or names.json): not a trace directory", dir);
        return -1;
    }
    if (es->n == 0) {
        dflash_set_error("%s: the manifest lists no tensors", dir);
        return -1;
    }
    if (check_unique(es, dir) != 0) return -1;
    for (int k = 0; k < es->n; k++) {
        Entry *e = &es->e[k];
        char *path = path_join(dir, e->file);
        if (!path) return -1;
        int rc = npy_open(path, &e->a);
        /* the manifest's dtype and shape are the header's (trace.jsonl's entries are m's, in order) */
        if (rc == 0 && m->names.n == es->n) rc = manifest_check_npy(m, k, path, &e->a);
        if (rc == 0) rc = input_add(ins, path);
        free(path);
        if (rc != 0) return -1;
        e->is_int = e->a.kind != 'f';
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * How much of each tensor the page carries, and reading just that.
 */

/* bytes one value takes on the page: float32 4, float64 and integers 8 */
static size_t elem_bytes(const Entry *e) { return !e->is_int && e->a.item == 4 ? 4 : 8; }

/* whole rows of axis 0 within cap values (the first cap values when one row is longer) */
static size_t kept_values(const Entry *e, size_t cap) {
    size_t n = e->a.n;
    if (n <= cap) return n;
    size_t row = e->a.ndim >= 1 && e->a.shape[0] > 0 ? n / (size_t)e->a.shape[0] : n;
    return row <= cap ? cap / row * row : cap;
}

/* the values of e within the per-tensor bound */
static size_t tensor_cap(const Entry *e) { return EXPLORE_TENSOR_VALUES / elem_bytes(e); }

/* Integer tensors and small floats first, whole within the per-tensor
 * bound, as long as the page bound allows; then the attention weights (the
 * heatmaps) the same way; then the other floats share
 * what is left, each cut to the same number of values (halved until they
 * fit). Every loop runs over the entries, never over a shape. */
static int is_attention(const char *name) {
    const char *suffix = "." TN_ATTN_WEIGHTS;
    size_t n = strlen(name), s = strlen(suffix);
    return n >= s && strcmp(name + n - s, suffix) == 0;
}

static void plan_sizes(Entries *es) {
    size_t used = 0;
    /* tier 0: integers and small floats; tier 1: attention weights (the heatmaps) */
    for (int tier = 0; tier < 2; tier++)
        for (int k = 0; k < es->n; k++) {
            Entry *e = &es->e[k];
            int small = e->is_int || e->a.n <= EXPLORE_ALWAYS_WHOLE;
            if (tier == 0 ? !small : small || !is_attention(e->name)) continue;
            size_t want = kept_values(e, tensor_cap(e)) * elem_bytes(e);
            e->keep = used + want <= EXPLORE_PAGE_VALUES ? want / elem_bytes(e) : 0;
            e->planned = 1;
            used += e->keep * elem_bytes(e);
        }
    size_t left = EXPLORE_PAGE_VALUES - used;
    size_t cap = EXPLORE_TENSOR_VALUES / 4;
    for (;;) {
        size_t total = 0;
        for (int k = 0; k < es->n; k++) {
            Entry *e = &es->e[k];
            if (e->planned) continue;
            size_t c = cap < tensor_cap(e) ? cap : tensor_cap(e);
            total += kept_values(e, c) * elem_bytes(e);
            if (total > left) break;
        }
        if (total <= left || cap <= 1) break;
        cap /= 2;
    }
    for (int k = 0; k < es->n; k++) {
        Entry *e = &es->e[k];
        if (e->planned) continue;
        size_t c = cap < tensor_cap(e) ? cap : tensor_cap(e);
        e->keep = kept_values(e, c);
        size_t b = e->keep * elem_bytes(e);
        if (b > left) { e->keep = 0; b = 0; }   /* cap 1 and still too many tensors */
        left -= b;
    }
}

/* Read e's first e->keep values (C order, formats/files.c's npy_load_first),
 * then widened to double or int64. A Fortran-order file of more than one
 * axis keeps its values only when they are all kept. */
static int read_kept(const char *dir, Entry *e) {
    if (e->keep == 0) return 0;
    NpyArray *a = &e->a;
    if (a->fortran && a->ndim > 1 && e->keep < a->n) {
        e->keep = 0;
        return 0;
    }
    char *path = path_join(dir, e->file);
    if (!path) return -1;
    int rc = npy_load_first(path, a, e->keep);  /* swaps (and reorders, when whole) what needs it */
    if (rc == 0) {
        if (e->is_int) e->iv = malloc(e->keep * sizeof *e->iv);
        else e->f = malloc(e->keep * sizeof *e->f);
        if (!e->iv && !e->f) {
            dflash_set_error("out of memory");
            rc = -1;
        }
        for (size_t k = 0; rc == 0 && k < e->keep; k++) {
            if (e->is_int) e->iv[k] = npy_i(a, k);
            else e->f[k] = npy_f(a, k);
        }
    }
    npy_free(a);
    free(path);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Writing the page.
 */

/* a JSON string; '<', '>' and '&' escaped so nothing can close the <script> */
static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&' || *p == 0x7f) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void put_base64(FILE *f, const unsigned char *b, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)b[i] << 16;
        if (i + 1 < n) v |= (unsigned)b[i + 1] << 8;
        if (i + 2 < n) v |= b[i + 2];
        fputc(A[(v >> 18) & 63], f);
        fputc(A[(v >> 12) & 63], f);
        fputc(i + 1 < n ? A[(v >> 6) & 63] : '=', f);
        fputc(i + 2 < n ? A[v & 63] : '=', f);
    }
}

/* the kept values as little-endian float32 or float64 bytes, in base64 */
static int put_floats(FILE *f, const Entry *e) {
    size_t eb = elem_bytes(e), n = e->keep;
    unsigned char *buf = malloc(n * eb + 1);
    if (!buf) { dflash_set_error("out of memory"); return -1; }
    for (size_t k = 0; k < n; k++) {
        uint64_t bits;
        if (eb == 4) {
            float x = (float)e->f[k];
            uint32_t u;
            memcpy(&u, &x, 4);
            bits = u;
        } else {
            double x = e->f[k];
            memcpy(&bits, &x, 8);
        }
        for (size_t j = 0; j < eb; j++) buf[k * eb + j] = (unsigned char)(bits >> (8 * j));
    }
    put_base64(f, buf, n * eb);
    free(buf);
    return 0;
}

static void put_number(FILE *f, double x, int f8) {
    if (isfinite(x)) fprintf(f, f8 ? "%.17g" : "%.9g", x);
    else fputs("null", f);
}

/* min, max, mean, std over the finite kept values (in index order), how
 * many of those are not finite, and how many values they are */
static void put_stats(FILE *f, const Entry *e) {
    double mn = 0, mx = 0, sum = 0;
    size_t nf = 0, bad = 0;
    for (size_t k = 0; k < e->keep; k++) {
        double x = e->f[k];
        if (!isfinite(x)) { bad++; continue; }
        if (nf == 0 || x < mn) mn = x;
        if (nf == 0 || x > mx) mx = x;
        sum += x;
        nf++;
    }
    double mean = nf ? sum / (double)nf : 0, ss = 0;
    for (size_t k = 0; k < e->keep; k++) {
        double x = e->f[k];
        if (isfinite(x)) ss += (x - mean) * (x - mean);
    }
    int f8 = elem_bytes(e) == 8;
    fputs(",\"st\":[", f);
    if (nf) {
        put_number(f, mn, f8); fputc(',', f);
        put_number(f, mx, f8); fputc(',', f);
        put_number(f, mean, 1); fputc(',', f);
        put_number(f, sqrt(ss / (double)nf), 1);
    } else {
        fputs("null,null,null,null", f);
    }
    fprintf(f, ",%zu]", bad);
}

/* phase and round from the name when the manifest does not give them */
static void phase_of(const Entry *e, char *phase, size_t size, int *round) {
    static const char *const words[3] = {"prefill", "draft", "verify"};
    *round = e->round;
    if (e->phase) {
        snprintf(phase, size, "%s", e->phase);
        if (*round >= 0) return;
    }
    for (int w = 0; w < 3; w++) {
        size_t n = strlen(words[w]);
        if (strncmp(e->name, words[w], n) != 0) continue;
        const char *p = e->name + n;
        long r = 0;
        while (*p >= '0' && *p <= '9' && r < 1000000) r = r * 10 + (*p++ - '0');
        if (*p == '.' || *p == '\0') {
            if (!e->phase) snprintf(phase, size, "%s", words[w]);
            if (*round < 0) *round = (int)r;
            return;
        }
    }
    if (!e->phase) snprintf(phase, size, "%s", strcmp(e->name, "input_ids") == 0 ? "prefill" : "final");
    if (*round < 0) *round = 0;
}

/* length of the valid UTF-8 sequence at p (n bytes left), 0 when none */
static size_t utf8_len(const unsigned char *p, size_t n) {
    size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t k = 1; k < len; k++)
        if ((p[k] & 0xC0) != 0x80) return 0;
    uint32_t c = len == 1 ? p[0] : len == 2 ? p[0] & 0x1Fu : len == 3 ? p[0] & 0x0Fu : p[0] & 0x07u;
    for (size_t k = 1; k < len; k++) c = c << 6 | (p[k] & 0x3Fu);
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    return len;
}

/* A token's bytes (tokenizer.json) as a JSON string of what the page shows:
 * valid UTF-8 as it is; a control character or a byte that is not valid
 * UTF-8 (half a character) as the four characters \xNN. NULL: no token. */
static void put_token_bytes(FILE *f, const char *w, int len) {
    if (!w) { fputs("null", f); return; }
    const unsigned char *p = (const unsigned char *)w;
    size_t n = (size_t)len;
    fputc('"', f);
    for (size_t k = 0; k < n;) {
        size_t l = utf8_len(p + k, n - k);
        if (l == 1 && (p[k] < 0x20 || p[k] == 0x7f)) l = 0;
        if (l == 0) {
            fprintf(f, "\\\\x%02x", p[k]);
            k++;
        } else if (l == 1) {
            if (p[k] == '"' || p[k] == '\\') fprintf(f, "\\%c", p[k]);
            else if (p[k] == '<' || p[k] == '>' || p[k] == '&') fprintf(f, "\\u%04x", p[k]);
            else fputc(p[k], f);
            k++;
        } else {
            fwrite(p + k, 1, l, f);
            k += l;
        }
    }
    fputc('"', f);
}

/* The words: vocab.txt's (v) or tokenizer.json's (bv), as the program
 * decodes them (formats/load.c); "vk" says which, since output joins them
 * differently (words with spaces, tokens' bytes back to back). */
static void put_vocab(FILE *f, const Vocab *v, const ByteVocab *bv) {
    if (bv && bv->n) {
        fputs("\"vk\":\"bytes\",\"vocab\":[", f);
        for (int k = 0; k < bv->n; k++) {
            if (k) fputc(',', f);
            put_token_bytes(f, bv->words[k], bv->lens[k]);
        }
        fputc(']', f);
    } else if (v && v->n) {
        fputs("\"vk\":\"words\",\"vocab\":[", f);
        for (int k = 0; k < v->n; k++) {
            if (k) fputc(',', f);
            put_json_string(f, v->words[k]);
        }
        fputc(']', f);
    } else {
        fputs("\"vk\":null,\"vocab\":null", f);
    }
}

/* The names the page's script finds tensors by, from the name table
 * (formats/tracenames.h): "names":{"attn_weights":"self_attn.attn_weights",...};
 * "heads": the tails of the tensors whose first axis is the head. */
static void put_names(FILE *f) {
    static const char *const names[][2] = {
        {"attn_weights", TN_ATTN_WEIGHTS}, {"input_ids", TN_INPUT_IDS}, {"output_ids", TN_OUTPUT_IDS},
        {"position_ids", TN_POSITION_IDS}, {"block_output_ids", TN_BLOCK_OUTPUT_IDS}, {"sampled", TN_SAMPLED},
        {"match", TN_MATCH}, {"cumprod", TN_CUMPROD}, {"acceptance_length", TN_ACCEPTANCE},
        {"target_hidden", TN_TARGET_HIDDEN}, {"target_hidden_raw", TN_TARGET_HIDDEN_RAW}, {"logits", TN_LOGITS}};
    static const char *const heads[] = {TN_Q, TN_K, TN_V, TN_Q_ROPE, TN_K_ROPE, TN_ATTN_SCORES, TN_ATTN_WEIGHTS};
    fputs("\"names\":{", f);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        fputs(i ? "," : "", f);
        put_json_string(f, names[i][0]);
        fputc(':', f);
        put_json_string(f, names[i][1]);
    }
    fputs(",\"heads\":[", f);
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        fputs(i ? "," : "", f);
        put_json_string(f, heads[i]);
    }
    fputs("]}", f);
}

static int put_data(FILE *f, const Entries *es, const Vocab *v, const ByteVocab *bv) {
    size_t total = 0, left = 0;
    int cut = 0;
    for (int k = 0; k < es->n; k++) {
        total += es->e[k].a.n;
        left += es->e[k].a.n - es->e[k].keep;
        cut += es->e[k].keep < es->e[k].a.n;
    }
    fputs("{\"format\":2,", f);
    put_names(f);
    fputc(',', f);
    put_vocab(f, v, bv);
    /* the bounds and what they left out, in total */
    fprintf(f, ",\"lim\":{\"page\":%zu,\"tensor\":%zu,\"values\":%zu,\"left\":%zu,\"cut\":%d}", EXPLORE_PAGE_VALUES,
            EXPLORE_TENSOR_VALUES, total, left, cut);
    fputs(",\"tensors\":[\n", f);
    for (int k = 0; k < es->n; k++) {
        const Entry *e = &es->e[k];
        char phase[64];
        int round;
        phase_of(e, phase, sizeof phase, &round);
        fputs("{\"n\":", f);
        put_json_string(f, e->name);
        fputs(",\"ph\":", f);
        put_json_string(f, phase);
        fprintf(f, ",\"r\":%d,\"m\":", round);
        put_json_string(f, e->meaning ? e->meaning : "");
        fputs(",\"dt\":", f);
        put_json_string(f, e->a.descr);
        fputs(",\"s\":[", f);
        for (int j = 0; j < e->a.ndim; j++) fprintf(f, "%s%lld", j ? "," : "", (long long)e->a.shape[j]);
        fprintf(f, "],\"k\":%zu", e->keep);
        if (e->is_int) {
            fputs(",\"v\":[", f);
            for (size_t j = 0; j < e->keep; j++) {
                long long x = (long long)e->iv[j];
                /* beyond 2^53 a JavaScript number is not exact: a string */
                if (x > 9007199254740992LL || x < -9007199254740992LL) fprintf(f, "%s\"%lld\"", j ? "," : "", x);
                else fprintf(f, "%s%lld", j ? "," : "", x);
            }
            fputc(']', f);
        } else {
            put_stats(f, e);
            fprintf(f, ",\"w\":%zu,\"b\":\"", elem_bytes(e));
            if (put_floats(f, e) != 0) return -1;
            fputc('"', f);
        }
        fprintf(f, "}%s\n", k + 1 < es->n ? "," : "");
    }
    fputs("]}", f);
    return 0;
}

/* The page may not replace anything the explorer reads (the same file by
 * device and inode: through a symbolic link, a hard link or another name)
 * nor go into the trace directory (a trace directory holds only its
 * manifest and .npy files). out is followed through links, as OutFile
 * writes through them. 0, or -1 with dflash_errmsg. */
static int check_output(const char *out, const char *dir, const Inputs *ins) {
    struct stat so, sa, sb;
    /* the program's own names (x.partial.XXXXXX, x.lock, x.old.XXXXXX): THE check every output goes through */
    OutPath op = {out, "the page", 0};
    if (out_check_paths("page", &op, 1, NULL, 0) != 0) return -1;
    if (stat(out, &so) == 0) {
        for (int k = 0; k < ins->n; k++)
            if (ins->in[k].dev == so.st_dev && ins->in[k].ino == so.st_ino) {
                dflash_set_error("%s: is %s, which the explorer reads (the same file); the page would replace it", out,
                                 ins->in[k].path);
                return -1;
            }
    }
    /* the directory the page lands in: of the link's target when out is one */
    char *real = realpath(out, NULL);
    const char *target = real ? real : out;
    char *outdir = xstrdup(target), *slash = outdir ? strrchr(outdir, '/') : NULL;
    if (slash) *slash = '\0';
    const char *od = !slash ? "." : *outdir ? outdir : "/";
    int inside = outdir && stat(dir, &sa) == 0 && stat(od, &sb) == 0 && sa.st_dev == sb.st_dev &&
                 sa.st_ino == sb.st_ino;
    /* nor into another trace directory (one with a manifest) */
    int other = 0;
    for (int k = 0; k < 2 && outdir && !inside && !other; k++) {
        char *m = path_join(od, k ? "names.json" : "trace.jsonl");
        other = m && lstat(m, &sa) == 0;
        free(m);
    }
    int rc = 0;
    if (inside) dflash_set_error("%s: the page may not be written into the trace directory %s", out, dir);
    else if (other) dflash_set_error("%s: the page may not be written into %s, a trace directory (it holds a manifest)",
                                     out, od);
    if (inside || other) rc = -1;
    free(outdir);
    free(real);
    return rc;
}

/* --vocab FILE: tokenizer.json when its first non-blank byte is '{' (as
 * Hugging Face writes it), else vocab.txt; each read by formats/load.c's reader,
 * the one the program decodes with. */
static int load_vocab(const char *path, Vocab *v, ByteVocab *bv) {
    size_t size;
    FILE *f = file_open_regular(path, &size);
    if (!f) return -1;
    int c;
    do c = fgetc(f); while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
    fclose(f);
    return c == '{' ? tokenizer_json_load(bv, path) : vocab_load(v, path);
}

/* the page's text around the data: explorer/explorer.html with explorer.css and
 * explorer.js inlined, split at its @TRACE_DATA@ line (build/explorer_page.c,
 * written by explorer/embed at build time) */
extern const unsigned char explorer_page_head[], explorer_page_tail[];
extern const size_t explorer_page_head_len, explorer_page_tail_len;

/* bad arguments: the message (dflash_errmsg) and the usage, on one line */
static int explore_usage(void) {
    dflash_print_error("dflash explore", " (usage: dflash explore TRACE_DIR OUT.html [--vocab FILE])");
    return 2;
}

/* THE flags of dflash explore (cli/flags.h; tests/test_flags.c) */
typedef struct { const char *vocab; } ExploreArgs;
const Flag EXPLORE_FLAGS[] = {
    {.name = "--vocab", .kind = FLAG_STRING, .field = offsetof(ExploreArgs, vocab)},
    FLAG_TABLE_END};

int explore_main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *vocab = NULL, *pos[2];
    ExploreArgs ea = {NULL};
    int n_pos = 0;
    int prc = flags_parse(EXPLORE_FLAGS, argc, argv, &ea, "dflash explore", pos, 2, &n_pos);
    if (prc == 1) {
        printf("usage: dflash explore TRACE_DIR OUT.html [--vocab FILE]\n");
        return 0;
    }
    if (prc != 0) return explore_usage();
    vocab = ea.vocab;
    if (n_pos > 0) dir = pos[0];
    if (n_pos > 1) out = pos[1];
    if (!dir || !out) {
        dflash_set_error("need a trace directory and an output file");
        return explore_usage();
    }

    Entries es = {0};
    Inputs ins = {0};
    Vocab v = {0};
    ByteVocab bv = {0};
    OutFile *o = NULL;
    int status = 2;
    if (load_trace(&es, &ins, dir) != 0) goto done;
    if (vocab && (input_add(&ins, vocab) != 0 || load_vocab(vocab, &v, &bv) != 0)) goto done;
    if (check_output(out, dir, &ins) != 0) goto done;
    plan_sizes(&es);
    for (int k = 0; k < es.n; k++)
        if (read_kept(dir, &es.e[k]) != 0) goto done;
    /* written beside out and renamed over it at the end (formats/files.h): a
     * failure or a signal leaves the earlier page as it was */
    o = out_open(out, "page");
    if (!o) goto done;
    FILE *f = out_stream(o);
    fwrite(explorer_page_head, 1, explorer_page_head_len, f);
    if (put_data(f, &es, &v, &bv) != 0) goto done;
    fputc('\n', f);
    fwrite(explorer_page_tail, 1, explorer_page_tail_len, f);
    int rc = out_commit(o);
    o = NULL;
    if (rc != 0) goto done;
    size_t total = 0, left = 0;
    int cut = 0;
    for (int k = 0; k < es.n; k++) {
        total += es.e[k].a.n;
        left += es.e[k].a.n - es.e[k].keep;
        cut += es.e[k].keep < es.e[k].a.n;
    }
    if (cut)
        fprintf(stderr, "dflash explore: %s leaves out %zu of %zu values (%d tensors keep their first values: "
                        "%zu MiB per page, %zu MiB per tensor); the .npy files have them all\n",
                out, left, total, cut, EXPLORE_PAGE_VALUES >> 20, EXPLORE_TENSOR_VALUES >> 20);
    status = 0;
done:
    out_abort(o);
    if (status != 0) dflash_print_error("dflash explore", "");
    entries_free(&es);
    inputs_free(&ins);
    vocab_free(&v);
    byte_vocab_free(&bv);
    return status;
}
