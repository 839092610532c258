/* explore.c - `dflash explore TRACE_DIR OUT.html [--vocab FILE]`: one
 * self-contained, offline HTML page over a trace directory.
 *
 * Reads TRACE_DIR/trace.jsonl (or an oracle's names.json) and every .npy
 * file it lists, with files.c's readers (file_read_all, npy_read_values),
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
 * The page's HTML, CSS and JavaScript are files: web/explorer.html,
 * web/explorer.css, web/explorer.js. tools/embed inlines the last two into
 * the first at build time and writes the bytes as C arrays
 * (build/explorer_page.c, linked into ./dflash); the trace's data goes at
 * the page's @TRACE_DATA@ line as a JSON document in
 * <script type="application/json">. This file is the C side only.
 */
#include "explore.h"
#include "dflash.h"
#include "files.h"
#include "json.h"
#include "manifest.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Raw bytes of float data the page may carry before large tensors are cut
 * to their first rows (base64 makes it 4/3 larger in the file). */
#define EXPLORE_BUDGET_BYTES 1800000
/* A float tensor of at most this many values is never cut. */
#define EXPLORE_ALWAYS_WHOLE 64

typedef struct {
    char *name, *file, *phase, *meaning;
    int round;           /* -1: not given */
    NpyValues a;
    size_t keep;         /* values written to the page */
} Entry;

typedef struct {
    Entry *e;
    int n, cap;
} Entries;

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int entries_add(Entries *es, const char *where, const char *name, const char *file, const char *phase,
                       const char *meaning, int round) {
    if (es->n == es->cap) {
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
    size_t fl = strlen(file);
    if (fl < 5 || strcmp(file + fl - 4, ".npy") != 0 || strchr(file, '/') || file[0] == '.') {
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
        npy_values_free(&es->e[k].a);
    }
    free(es->e);
    memset(es, 0, sizeof *es);
}

static const char *json_str(const Json *o, const char *key) {
    const Json *v = json_get(o, key);
    return v && v->type == JSON_STRING ? v->string : NULL;
}

/* one trace.jsonl line (trace_jsonl_each checked "name" and "file"):
 * optionally "phase", "round" and "meaning" too */
typedef struct { Entries *es; const char *path; } JsonlCtx;

static int jsonl_entry(void *ctx, const Json *o, int line) {
    const JsonlCtx *c = ctx;
    (void)line;
    const Json *r = json_get(o, "round");
    int round = r && r->type == JSON_NUMBER && r->is_integer && r->integer >= 0 && r->integer < 1000000
                    ? (int)r->integer : -1;
    return entries_add(c->es, c->path, json_str(o, "name"), json_str(o, "file"), json_str(o, "phase"),
                       json_str(o, "meaning"), round);
}

static int load_jsonl(Entries *es, const char *path, const char *text, size_t len) {
    JsonlCtx c = {es, path};
    return trace_jsonl_each(path, text, len, jsonl_entry, &c);
}

/* names.json (the oracle's): ["name", ...], file = name + ".npy" */
static int load_names_json(Entries *es, const char *path, const char *text, size_t len) {
    Json arr;
    if (json_parse(text, len, path, &arr) != 0) return -1;
    int ok = arr.type == JSON_ARRAY;
    for (int i = 0; ok && i < arr.n; i++) ok = arr.items[i].type == JSON_STRING;
    for (int i = 0; ok && i < arr.n; i++) {
        const char *name = arr.items[i].string;
        char *file = malloc(strlen(name) + 5);
        if (!file) { json_free(&arr); dflash_set_error("out of memory"); return -1; }
        sprintf(file, "%s.npy", name);
        int rc = entries_add(es, path, name, file, NULL, NULL, -1);
        free(file);
        if (rc != 0) { json_free(&arr); return -1; }
    }
    json_free(&arr);
    if (!ok) { dflash_set_error("%s: expected a JSON array of name strings", path); return -1; }
    return 0;
}

static int load_trace(Entries *es, const char *dir) {
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
        if (!path) { dflash_set_error("out of memory"); return -1; }
        if (stat(path, &st) != 0 && errno == ENOENT) { free(path); continue; }
        found = 1;
        char *text;
        size_t len;
        int rc = file_read_all(path, &text, &len);
        if (rc == 0) {
            rc = k == 0 ? load_jsonl(es, path, text, len) : load_names_json(es, path, text, len);
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
    for (int k = 0; k < es->n; k++) {
        for (int j = 0; j < k; j++)
            if (strcmp(es->e[j].name, es->e[k].name) == 0) {
                dflash_set_error("%s: the name \"%s\" is listed twice", dir, es->e[k].name);
                return -1;
            }
        char *path = path_join(dir, es->e[k].file);
        if (!path) { dflash_set_error("out of memory"); return -1; }
        int rc = npy_read_values(path, &es->e[k].a);
        free(path);
        if (rc != 0) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * How much of each tensor the page carries.
 */

static int is_attention(const char *name) {
    const char *suffix = ".self_attn.attn_weights";
    size_t n = strlen(name), s = strlen(suffix);
    return n >= s && strcmp(name + n - s, suffix) == 0;
}

static size_t elem_bytes(const Entry *e) { return strcmp(e->a.descr, "<f4") == 0 ? 4 : 8; }

/* whole rows of axis 0 within cap values (the first cap values when one row is longer) */
static size_t kept_values(const Entry *e, size_t cap) {
    size_t n = e->a.n;
    if (n <= cap) return n;
    size_t row = e->a.ndim >= 1 && e->a.shape[0] > 0 ? n / (size_t)e->a.shape[0] : n;
    return row <= cap ? cap / row * row : cap;
}

static void plan_sizes(Entries *es) {
    size_t fixed = 0;
    for (int k = 0; k < es->n; k++) {
        Entry *e = &es->e[k];
        if (e->a.is_int || is_attention(e->name) || e->a.n <= EXPLORE_ALWAYS_WHOLE) {
            e->keep = e->a.n;
            if (!e->a.is_int) fixed += e->a.n * elem_bytes(e);
        }
    }
    size_t left = fixed < EXPLORE_BUDGET_BYTES ? EXPLORE_BUDGET_BYTES - fixed : 0;
    size_t cap = 4096;
    for (;;) {
        size_t total = 0;
        for (int k = 0; k < es->n; k++) {
            Entry *e = &es->e[k];
            if (e->a.is_int || is_attention(e->name) || e->a.n <= EXPLORE_ALWAYS_WHOLE) continue;
            total += kept_values(e, cap) * elem_bytes(e);
        }
        if (total <= left || cap <= EXPLORE_ALWAYS_WHOLE) break;
        cap /= 2;
    }
    for (int k = 0; k < es->n; k++) {
        Entry *e = &es->e[k];
        if (e->a.is_int || is_attention(e->name) || e->a.n <= EXPLORE_ALWAYS_WHOLE) continue;
        e->keep = kept_values(e, cap);
    }
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
            float x = (float)e->a.f[k];
            uint32_t u;
            memcpy(&u, &x, 4);
            bits = u;
        } else {
            double x = e->a.f[k];
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

/* min, max, mean, std over the finite values (in index order), and how many are not finite */
static void put_stats(FILE *f, const Entry *e) {
    double mn = 0, mx = 0, sum = 0;
    size_t nf = 0, bad = 0;
    for (size_t k = 0; k < e->a.n; k++) {
        double x = e->a.f[k];
        if (!isfinite(x)) { bad++; continue; }
        if (nf == 0 || x < mn) mn = x;
        if (nf == 0 || x > mx) mx = x;
        sum += x;
        nf++;
    }
    double mean = nf ? sum / (double)nf : 0, ss = 0;
    for (size_t k = 0; k < e->a.n; k++) {
        double x = e->a.f[k];
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

static int put_data(FILE *f, const Entries *es, const char *vocab_text) {
    fputs("{\"format\":1,\"vocab\":", f);
    if (vocab_text) {
        fputc('[', f);
        const char *p = vocab_text;
        int first = 1;
        while (*p) {
            const char *q = strchr(p, '\n');
            size_t n = q ? (size_t)(q - p) : strlen(p);
            if (n && p[n - 1] == '\r') n--;
            char *w = malloc(n + 1);
            if (!w) { dflash_set_error("out of memory"); return -1; }
            memcpy(w, p, n);
            w[n] = '\0';
            if (!first) fputc(',', f);
            put_json_string(f, w);
            free(w);
            first = 0;
            if (!q) break;
            p = q + 1;
        }
        fputc(']', f);
    } else {
        fputs("null", f);
    }
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
        if (e->a.is_int) {
            fputs(",\"v\":[", f);
            for (size_t j = 0; j < e->keep; j++) {
                long long v = (long long)e->a.i[j];
                /* beyond 2^53 a JavaScript number is not exact: a string */
                if (v > 9007199254740992LL || v < -9007199254740992LL) fprintf(f, "%s\"%lld\"", j ? "," : "", v);
                else fprintf(f, "%s%lld", j ? "," : "", v);
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

/* the page's text around the data: web/explorer.html with explorer.css and
 * explorer.js inlined, split at its @TRACE_DATA@ line (build/explorer_page.c,
 * written by tools/embed at build time) */
extern const unsigned char explorer_page_head[], explorer_page_tail[];
extern const size_t explorer_page_head_len, explorer_page_tail_len;

/* bad arguments: the message (dflash_errmsg) and the usage, on one line */
static int explore_usage(void) {
    dflash_print_error("dflash explore", " (usage: dflash explore TRACE_DIR OUT.html [--vocab FILE])");
    return 2;
}

int explore_main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *vocab = NULL;
    for (int k = 1; k < argc; k++) {
        const char *arg = argv[k];
        if (strcmp(arg, "--vocab") == 0) {
            if (k + 1 >= argc) {
                dflash_set_error("--vocab needs a file");
                return explore_usage();
            }
            vocab = argv[++k];
        } else if (arg[0] == '-' && arg[1] == '-') {
            dflash_set_error("unknown option %s", arg);
            return explore_usage();
        } else if (!dir) {
            dir = arg;
        } else if (!out) {
            out = arg;
        } else {
            dflash_set_error("too many arguments (%s)", arg);
            return explore_usage();
        }
    }
    if (!dir || !out) {
        dflash_set_error("need a trace directory and an output file");
        return explore_usage();
    }

    /* the page may not go into the trace directory: a trace directory holds
     * only its manifest and .npy files (the next --trace would refuse it) */
    {
        char *outdir = xstrdup(out), *slash = outdir ? strrchr(outdir, '/') : NULL;
        if (slash) *slash = '\0';
        const char *od = !slash ? "." : *outdir ? outdir : "/";
        struct stat sa, sb;
        int inside = outdir && stat(dir, &sa) == 0 && stat(od, &sb) == 0 && sa.st_dev == sb.st_dev &&
                     sa.st_ino == sb.st_ino;
        free(outdir);
        if (inside) {
            dflash_set_error("%s: the page may not be written into the trace directory %s", out, dir);
            dflash_print_error("dflash explore", "");
            return 2;
        }
    }
    Entries es = {0};
    char *vtext = NULL;
    size_t vlen;
    int status = 2;
    FILE *f = NULL;
    if (load_trace(&es, dir) != 0) goto done;
    if (vocab && file_read_all(vocab, &vtext, &vlen) != 0) goto done;
    plan_sizes(&es);
    f = fopen(out, "wb");
    if (!f) {
        dflash_set_error("%s: cannot write: %s", out, strerror(errno));
        goto done;
    }
    fwrite(explorer_page_head, 1, explorer_page_head_len, f);
    if (put_data(f, &es, vtext) != 0) goto done;
    fputc('\n', f);
    fwrite(explorer_page_tail, 1, explorer_page_tail_len, f);
    int werr = ferror(f);
    int cerr = fclose(f);
    f = NULL;
    if (werr || cerr != 0) {
        dflash_set_error("%s: write error", out);
        goto done;
    }
    status = 0;
done:
    if (f) fclose(f);
    if (status != 0) dflash_print_error("dflash explore", "");
    entries_free(&es);
    free(vtext);
    return status;
}
