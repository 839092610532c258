/* mkwalk.c - regenerate walkthrough/README.md and its SVG figures from a
 * trace of the default run (`./dflash --trace DIR`).
 *
 *   usage: mkwalk TRACE_DIR VOCAB_TXT OUT_DIR [DFLASH_C]
 *
 * Reads DIR/trace.jsonl and the .npy files it lists (with files.c's reader,
 * the one ./dflash uses), and the vocabulary, then
 * writes OUT_DIR/README.md, its Chinese edition OUT_DIR/README.zh.md,
 * OUT_DIR/timeline.svg and OUT_DIR/attn_round1_layer0_head{h}.svg. The C
 * lines the page quotes are read from DFLASH_C (default: dflash.c in the
 * current directory; section 4b). Everything is built in memory first; if
 * any tensor is missing, any cross-check fails or a quoted line is no
 * longer in dflash.c, nothing is
 * written and the exit status is 1.
 *
 * Determinism: every number is printed with a fixed format from values read
 * out of the trace (which is bit-reproducible) or computed from them with
 * + - * / and sqrt (correctly rounded in IEEE 754) in a fixed order, built
 * with -ffp-contract=off. The only other libm call is exp() in a cross-check
 * whose result is compared against a threshold and never printed. So the
 * output is byte-identical wherever the trace is.
 *
 * The original walkthrough's seven steps, in its order (NOTES.md,
 * "Provenance"): prefill and
 * extract_context_feature, fc + hidden_norm -> C, the block, Q / K / V with
 * KV injection, RoPE, attention, output and logits, verification, update.
 */
#include "../dflash.h"
#include "../files.h"
#include "../manifest.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ===========================================================================
 * 1. Errors. Loading functions return -1 after writing dflash_errmsg (as
 *    files.c's readers do); the writers
 *    never fail on their own: a missing tensor or a failed cross-check sets
 *    `bad` (with a message) and main() refuses to write anything.
 * ======================================================================== */

static int bad;           /* a lookup or a check failed while writing */
static char badmsg[1024]; /* the first such failure */

static void flag_bad(const char *fmt, ...) {
    if (bad++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(badmsg, sizeof badmsg, fmt, ap);
    va_end(ap);
}

/* ===========================================================================
 * 2. The tensors: read with files.c's .npy reader (npy_read_values).
 * ======================================================================== */

#define MAX_NDIM 4

typedef struct {
    char *name;
    int is_int;               /* '<i8' */
    int ndim;
    int64_t shape[MAX_NDIM];
    size_t n;                 /* number of elements */
    double *f;                /* (n) '<f4'/'<f8' values as double, or NULL */
    int64_t *i;               /* (n) '<i8' values, or NULL */
} Tensor;

/* One .npy file into t (name set by the caller): files.c's reader, the
 * values widened to double or int64. */
static int tensor_load(const char *path, Tensor *t) {
    NpyValues v;
    if (npy_read_values(path, &v) != 0) return -1;
    if (v.ndim > MAX_NDIM) {
        dflash_set_error("%s: %d axes, at most %d expected", path, v.ndim, MAX_NDIM);
        npy_values_free(&v);
        return -1;
    }
    t->is_int = v.is_int;
    t->ndim = v.ndim;
    for (int k = 0; k < v.ndim; k++) t->shape[k] = v.shape[k];
    t->n = v.n;
    t->f = v.f;
    t->i = v.i;
    return 0;
}

/* ===========================================================================
 * 3. The trace: trace.jsonl lists {"name": ..., "file": ...} per line; every
 *    tensor is loaded (the default run's trace is a few MB).
 * ======================================================================== */

typedef struct {
    Tensor *t;
    int n;
} Trace;

/* dir's trace.jsonl through manifest.c (the reader the tracer and diff use),
 * then every tensor it lists */
static int trace_load(Trace *tr, const char *dir) {
    Manifest m;
    int r = manifest_load(&m, dir, 0);
    if (r != 0) {
        if (r == 1) dflash_set_error("%s: no trace.jsonl: not a trace directory", dir);
        return -1;
    }
    int rc = -1;
    tr->t = calloc((size_t)m.names.n + 1, sizeof(Tensor));
    if (!tr->t) { dflash_set_error("out of memory"); goto done; }
    for (int k = 0; k < m.names.n; k++) {
        Tensor *t = &tr->t[tr->n++];
        t->name = strdup(m.names.s[k]);
        char *fpath = path_join(dir, m.files.s[k]);
        int bad_load = !t->name || !fpath || tensor_load(fpath, t) != 0;
        free(fpath);
        if (bad_load) goto done;
    }
    rc = 0;
done:
    manifest_free(&m);
    return rc;
}

static void trace_free(Trace *tr) {
    for (int k = 0; k < tr->n; k++) { free(tr->t[k].name); free(tr->t[k].f); free(tr->t[k].i); }
    free(tr->t);
}

static Trace TR;  /* the trace being documented */

/* find(fmt, ...): the tensor of that name, or NULL */
static const Tensor *vfind(const char *fmt, va_list ap) {
    char name[256];
    vsnprintf(name, sizeof name, fmt, ap);
    for (int k = 0; k < TR.n; k++)
        if (strcmp(TR.t[k].name, name) == 0) return &TR.t[k];
    return NULL;
}

static const Tensor *find(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const Tensor *t = vfind(fmt, ap);
    va_end(ap);
    return t;
}

/* get(fmt, ...): the tensor, which must exist; a missing one flags `bad` and
 * yields an empty stand-in whose every element reads as 0. */
static const Tensor *get(const char *fmt, ...) {
    static const Tensor missing = {"(missing)", 0, 0, {0}, 0, NULL, NULL};
    va_list ap;
    va_start(ap, fmt);
    const Tensor *t = vfind(fmt, ap);
    va_end(ap);
    if (!t) {
        char name[256];
        va_start(ap, fmt);
        vsnprintf(name, sizeof name, fmt, ap);
        va_end(ap);
        flag_bad("the trace has no tensor \"%s\"", name);
        return &missing;
    }
    return t;
}

/* element at a flat index, bounds-checked */
static double val(const Tensor *t, size_t k) {
    if (k >= t->n) {
        flag_bad("%s: index %zu out of range (%zu elements)", t->name, k, t->n);
        return 0;
    }
    return t->is_int ? (double)t->i[k] : t->f[k];
}
static long ival(const Tensor *t, size_t k) { return (long)val(t, k); }
static int64_t dim(const Tensor *t, int a) { return a < t->ndim ? t->shape[a] : 0; }
/* t[a][b] of a 2-D tensor, t[a][b][c] of a 3-D tensor */
static double at2(const Tensor *t, long a, long b) { return val(t, (size_t)(a * dim(t, 1) + b)); }
static double at3(const Tensor *t, long a, long b, long c) {
    return val(t, (size_t)((a * dim(t, 1) + b) * dim(t, 2) + c));
}

static void check(int ok, const char *fmt, ...) {
    if (ok) return;
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    flag_bad("cross-check failed: %s", m);
}

/* ===========================================================================
 * 4. Vocabulary and token words.
 * ======================================================================== */

static char **VOC;
static int NVOC;

static int vocab_load(const char *path) {
    size_t len;
    char *text;
    if (file_read_all(path, &text, &len) != 0) return -1;
    int lines = 0;
    for (size_t k = 0; k < len; k++) lines += text[k] == '\n';
    VOC = calloc((size_t)lines + 1, sizeof(char *));
    if (!VOC) { free(text); dflash_set_error("out of memory"); return -1; }
    size_t p = 0;
    while (p < len) {
        size_t e = p;
        while (e < len && text[e] != '\n') e++;
        char *w = malloc(e - p + 1);
        if (!w) { free(text); dflash_set_error("out of memory"); return -1; }
        memcpy(w, text + p, e - p);
        w[e - p] = 0;
        VOC[NVOC++] = w;
        p = e + 1;
    }
    free(text);
    return 0;
}

static const char *word(long id) { return id >= 0 && id < NVOC ? VOC[id] : "?"; }

/* ===========================================================================
 * 4b. Code quotes. Every line of C this page shows is read out of dflash.c
 *     when the page is generated, never typed here: code(fn, needle) finds
 *     the function fn (its definition starts at column 0 and its body ends
 *     at the first line that is just "}"), and in it the one statement whose
 *     first line contains needle; a statement running over several lines
 *     is joined until its parentheses balance. No such function, no such
 *     line, or two matching lines: the page is not written (flag_bad), so
 *     a quote cannot outlive the code it quotes.
 * ======================================================================== */

static char *SRC;          /* dflash.c */
static const char *SRC_PATH;

static int source_load(const char *path) {
    size_t len;
    if (file_read_all(path, &SRC, &len) != 0) return -1;  /* NUL-terminated */
    SRC_PATH = path;
    return 0;
}

/* the start of the line after p (or the terminating NUL) */
static const char *next_line(const char *p) {
    const char *nl = strchr(p, '\n');
    return nl ? nl + 1 : p + strlen(p);
}

/* [body, end) of function fn in SRC: the line that defines it starts at
 * column 0 with a type, names "fn(" and is not a prototype (no ';' at the
 * end of the declaration, which may run over several lines). */
static int find_function(const char *fn, const char **body, const char **end) {
    size_t fl = strlen(fn);
    for (const char *line = SRC; *line; line = next_line(line)) {
        if (*line == ' ' || *line == '\t' || *line == '\n' || *line == '/' || *line == '#' || *line == '{' ||
            *line == '}')
            continue;
        const char *eol = next_line(line), *p = line;
        const char *hit = NULL;
        while ((p = strstr(p, fn)) != NULL && p < eol) {
            if ((p == line || p[-1] == ' ' || p[-1] == '*') && p[fl] == '(') { hit = p; break; }
            p += fl;
        }
        if (!hit) continue;
        const char *q = hit;  /* the declaration ends at '{' (a definition) or ';' (a prototype) */
        while (*q && *q != '{' && *q != ';') q++;
        if (*q != '{') continue;
        *body = next_line(q);
        for (const char *l = *body; *l; l = next_line(l))
            if (l[0] == '}' && (l[1] == '\n' || l[1] == 0)) { *end = l; return 0; }
        return -1;
    }
    return -1;
}

/* one statement of fn containing needle on its first line, trimmed and with
 * runs of spaces and a trailing comment removed (inline comments stay) */
static const char *code(const char *fn, const char *needle) {
    static char bufs[8][512];
    static int k;
    char *out = bufs[k++ % 8];
    snprintf(out, 512, "(missing code: %s in %s)", needle, fn);
    const char *body, *end;
    if (!SRC || find_function(fn, &body, &end) != 0) {
        flag_bad("%s: no function %s (quoted by the walkthrough)", SRC_PATH ? SRC_PATH : "dflash.c", fn);
        return out;
    }
    const char *found = NULL;
    int n_found = 0;
    for (const char *l = body; l < end; l = next_line(l)) {
        const char *eol = next_line(l), *p = strstr(l, needle);
        if (p && p < eol) { if (!found) found = l; n_found++; }
    }
    if (n_found != 1) {
        flag_bad("%s: function %s has %d lines containing \"%s\" (the walkthrough quotes exactly one)",
                 SRC_PATH, fn, n_found, needle);
        return out;
    }
    size_t o = 0;
    int depth = 0, started = 0;
    for (const char *l = found; l < end && o < 500; l = next_line(l)) {
        const char *p = l, *eol = next_line(l);
        while (p < eol && (*p == ' ' || *p == '\t')) p++;
        if (started && o < 500) out[o++] = ' ';
        started = 1;
        for (; p < eol && *p != '\n' && o < 500; p++) {
            if (p[0] == '/' && p[1] == '/') break;
            if (p[0] == '/' && p[1] == '*') {  /* a trailing comment ends the line; an inline one stays */
                const char *c = strstr(p + 2, "*/");
                if (!c || c > eol) break;
                const char *after = c + 2;
                while (after < eol && (*after == ' ' || *after == '\t')) after++;
                if (after >= eol || *after == '\n') break;
            }
            if (*p == ' ' && o > 0 && out[o - 1] == ' ') continue;
            depth += (*p == '(') - (*p == ')');
            out[o++] = *p;
        }
        while (o > 0 && out[o - 1] == ' ') o--;
        if (depth <= 0) break;
    }
    out[o] = 0;
    return out;
}

/* Rotating static buffers, so a few formatted strings can sit in one printf. */
static char *rbuf(void) {
    static char bufs[16][128];
    static int k;
    return bufs[k++ % 16];
}

/* a token for Markdown prose and tables: in a code span, so "<mask>" shows */
static const char *mw(long id) {
    char *b = rbuf();
    snprintf(b, 128, "`%s`", word(id));
    return b;
}

/* a token inside an SVG <text>: XML-escaped */
static const char *xw(const char *s) {
    char *b = rbuf();
    size_t o = 0;
    for (; *s && o < 100; s++) {
        const char *r = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : NULL;
        if (r) { memcpy(b + o, r, strlen(r)); o += strlen(r); }
        else b[o++] = *s;
    }
    b[o] = 0;
    return b;
}

/* fixed-point number without "-0.0000" */
static const char *fx(double x, int decimals) {
    double half = 0.5;
    for (int k = 0; k < decimals; k++) half /= 10;
    if (fabs(x) < half) x = 0;
    char *b = rbuf();
    snprintf(b, 128, "%.*f", decimals, x);
    return b;
}

/* ===========================================================================
 * 5. What the trace says about the run: dimensions and the rounds.
 * ======================================================================== */

typedef struct {
    int start, start_after;      /* start before and after the round */
    int acc;                     /* acceptance_length */
    int Lc;                      /* context rows injected */
    int draft_cache_before;      /* = draft position_ids[0] */
    int S;                       /* keys attended by the draft */
    long block_in[16], block[16], posterior[16], match[16], cumprod[16];
} Round;

static struct {
    int n;                 /* prompt length */
    int L, D, k, kD;       /* target layers, hidden, len(target_layer_ids), k*D */
    int layer_ids[16];
    int N, H, Hkv, d, B, V;
    int R;                 /* rounds */
    Round r[16];
    long out[64];
    int n_out;
    double inv_freq_first, inv_freq_last;
} RUN;

static int same_rows(const Tensor *a, long a_col0, const Tensor *b, long rows, long cols) {
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < cols; j++)
            if (at2(a, i, a_col0 + j) != at2(b, i, j)) return 0;
    return 1;
}

static void read_run(void) {
    RUN.n = (int)dim(get("input_ids"), 0);
    while (find("prefill.hidden_states.%d", RUN.L + 1)) RUN.L++;
    const Tensor *hs0 = get("prefill.hidden_states.0");
    RUN.D = (int)dim(hs0, 1);
    const Tensor *th = get("prefill.target_hidden");
    RUN.kD = (int)dim(th, 1);
    RUN.k = RUN.D ? RUN.kD / RUN.D : 0;
    check(RUN.k > 0 && RUN.k < 16 && RUN.k * RUN.D == RUN.kD, "target_hidden width %d is k * %d", RUN.kD, RUN.D);
    /* which hidden_states[i] each slice of target_hidden is: id = i - 1 */
    for (int j = 0; j < RUN.k && j < 16; j++) {
        RUN.layer_ids[j] = -99;
        for (int i = 0; i <= RUN.L; i++)
            if (same_rows(th, (long)j * RUN.D, get("prefill.hidden_states.%d", i), RUN.n, RUN.D)) {
                RUN.layer_ids[j] = i - 1;
                break;
            }
        check(RUN.layer_ids[j] >= 0, "slice %d of prefill.target_hidden equals no hidden_states[i]", j);
    }
    const Tensor *q = get("draft1.layers.0.self_attn.q");
    RUN.H = (int)dim(q, 0);
    RUN.d = (int)dim(q, 2);
    RUN.Hkv = (int)dim(get("draft1.layers.0.self_attn.k"), 0);
    while (find("draft1.layers.%d", RUN.N)) RUN.N++;
    RUN.B = (int)dim(get("draft1.block_output_ids"), 0);
    RUN.V = (int)dim(get("draft1.logits"), 1);
    check(RUN.B >= 2 && RUN.B <= 16, "block size %d in 2..16", RUN.B);
    const Tensor *ang = get("draft1.rope_angles");
    RUN.inv_freq_first = at2(ang, 1, 0) - at2(ang, 0, 0);
    RUN.inv_freq_last = at2(ang, 1, RUN.d / 2 - 1) - at2(ang, 0, RUN.d / 2 - 1);

    while (RUN.R < 16 && find("draft%d.block_output_ids", RUN.R + 1)) RUN.R++;
    int B = RUN.B;
    for (int ri = 0; ri < RUN.R; ri++) {
        Round *r = &RUN.r[ri];
        int rn = ri + 1;
        const Tensor *pos = get("verify%d.position_ids", rn);
        r->start = (int)ival(pos, 0);
        r->acc = (int)ival(get("verify%d.acceptance_length", rn), 0);
        r->start_after = r->start + r->acc + 1;
        r->Lc = (int)dim(get("draft%d.target_hidden_raw", rn), 0);
        r->draft_cache_before = (int)ival(get("draft%d.position_ids", rn), 0);
        r->S = (int)dim(get("draft%d.layers.0.self_attn.attn_weights", rn), 2);
        for (int i = 0; i < B; i++) {
            r->block_in[i] = ival(get("draft%d.block_output_ids", rn), (size_t)i);
            r->block[i] = ival(get("verify%d.input_ids", rn), (size_t)i);
            r->posterior[i] = ival(get("verify%d.sampled", rn), (size_t)i);
        }
        for (int i = 0; i + 1 < B; i++) {
            r->match[i] = ival(get("verify%d.match", rn), (size_t)i);
            r->cumprod[i] = ival(get("verify%d.cumprod", rn), (size_t)i);
            check(r->block[i + 1] == ival(get("draft%d.sampled", rn), (size_t)i),
                  "round %d: verify input %d is the draft's proposal", rn, i + 1);
        }
        /* the bookkeeping the update step relies on */
        check(r->S == r->draft_cache_before + r->Lc + B, "round %d: S = cache + Lc + B", rn);
        check((int)ival(get("draft%d.position_ids", rn), (size_t)(r->Lc + B - 1)) == r->start + B - 1,
              "round %d: draft position_ids end at start + B - 1", rn);
        if (ri > 0) {
            const Round *p = &RUN.r[ri - 1];
            check(r->start == p->start_after, "round %d starts where round %d ended", rn, rn - 1);
            check(r->draft_cache_before == p->start, "round %d: draft cache = previous start", rn);
            check(r->Lc == p->acc + 1, "round %d: Lc = previous acc + 1", rn);
            check(same_rows(get("verify%d.target_hidden", rn - 1), 0, get("draft%d.target_hidden_raw", rn),
                            r->Lc, RUN.kD),
                  "draft%d.target_hidden_raw = verify%d.target_hidden[:acc+1]", rn, rn - 1);
        } else {
            check(same_rows(get("prefill.target_hidden"), 0, get("draft1.target_hidden_raw"), RUN.n, RUN.kD),
                  "draft1.target_hidden_raw = prefill.target_hidden");
        }
    }
    const Tensor *o = get("output_ids");
    RUN.n_out = (int)dim(o, 0) < 64 ? (int)dim(o, 0) : 64;
    for (int i = 0; i < RUN.n_out; i++) RUN.out[i] = ival(o, (size_t)i);
}

/* ===========================================================================
 * 6. SVG figures. Plain SVG 1.1, fixed coordinates, system fonts; every
 *    label is placed with room to spare for DejaVu Sans / Arial widths.
 * ======================================================================== */

#define FONT "font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\""

/* "Blues" colour scale: white (0) to dark blue (1), piecewise linear */
static void blues(double v, char *out) {
    static const int stop[5][3] = {{247, 251, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
    if (v < 0) v = 0;
    if (v > 1) v = 1;
    double x = v * 4;
    int s = (int)x;
    if (s > 3) s = 3;
    double f = x - s;
    int c[3];
    for (int k = 0; k < 3; k++) c[k] = (int)(stop[s][k] + (stop[s + 1][k] - stop[s][k]) * f + 0.5);
    sprintf(out, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static const char *head_role(int h) {
    static char b[8][64];
    if (h >= 1 && h <= 3) snprintf(b[h], 64, "planted look-ahead %d", h);
    else snprintf(b[h & 7], 64, "pseudo-random weights");
    return b[h & 7];
}

/* One head's (B x S) attention weights of draft round 1, layer 0. */
static void svg_heatmap(FILE *f, int h) {
    const Tensor *A = get("draft1.layers.0.self_attn.attn_weights");
    const Round *r = &RUN.r[0];
    int B = RUN.B, S = r->S, Lc = r->Lc, c0 = r->draft_cache_before;
    int cw = 76, ch = 40;                 /* cell size */
    int x0 = 128, y0 = 110;               /* top-left of the grid */
    int W = x0 + S * cw + 24, Hh = y0 + B * ch + 62;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            W, Hh, W, Hh);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, Hh);
    fprintf(f, "<text x=\"%d\" y=\"24\" %s font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">"
               "draft round 1, layer 0, head %d (%s)</text>\n", 12, FONT, h, head_role(h));
    /* group labels above the key columns */
    int xb = x0 + Lc * cw;  /* the KV-injection boundary */
    fprintf(f, "<text x=\"%d\" y=\"52\" %s font-size=\"13\" text-anchor=\"middle\" fill=\"#8c2d04\">"
               "context (C)</text>\n", x0 + Lc * cw / 2, FONT);
    fprintf(f, "<line x1=\"%d\" y1=\"58\" x2=\"%d\" y2=\"58\" stroke=\"#8c2d04\" stroke-width=\"1.5\"/>\n",
            x0 + 4, xb - 6);
    fprintf(f, "<text x=\"%d\" y=\"52\" %s font-size=\"13\" text-anchor=\"middle\" fill=\"#08519c\">"
               "block</text>\n", xb + (S - Lc) * cw / 2, FONT);
    fprintf(f, "<line x1=\"%d\" y1=\"58\" x2=\"%d\" y2=\"58\" stroke=\"#08519c\" stroke-width=\"1.5\"/>\n",
            xb + 6, x0 + S * cw - 4);
    /* key column labels: k@pos and the word */
    for (int j = 0; j < S; j++) {
        int pos = c0 + j;
        long id = pos < RUN.n_out ? RUN.out[pos] : -1;
        if (j >= Lc) id = r->block_in[j - Lc];
        int cx = x0 + j * cw + cw / 2;
        fprintf(f, "<text x=\"%d\" y=\"80\" %s font-size=\"13\" text-anchor=\"middle\" fill=\"#222222\">k@%d</text>\n",
                cx, FONT, pos);
        fprintf(f, "<text x=\"%d\" y=\"98\" %s font-size=\"12\" text-anchor=\"middle\" fill=\"#555555\">%s</text>\n",
                cx, FONT, xw(word(id)));
    }
    /* rows */
    for (int t = 0; t < B; t++) {
        int cy = y0 + t * ch + ch / 2 + 5;
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"end\" fill=\"#222222\">"
                   "q@%d <tspan fill=\"#555555\">%s</tspan></text>\n",
                x0 - 10, cy, FONT, r->start + t, xw(word(r->block_in[t])));
        for (int j = 0; j < S; j++) {
            double v = at3(A, h, t, j);
            char col[8];
            blues(v, col);
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#ffffff\" "
                       "stroke-width=\"1\"/>\n", x0 + j * cw, y0 + t * ch, cw, ch, col);
            fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                    x0 + j * cw + cw / 2, cy, FONT, v > 0.5 ? "#ffffff" : "#222222", fx(v, 4));
        }
    }
    /* grid frame and the KV-injection boundary */
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444444\" "
               "stroke-width=\"1\"/>\n", x0, y0, S * cw, B * ch);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#111111\" stroke-width=\"4\"/>\n",
            xb, 64, xb, y0 + B * ch + 8);
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" text-anchor=\"middle\" fill=\"#111111\">"
               "KV-injection boundary</text>\n", xb, y0 + B * ch + 24, FONT);
    fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"#555555\">rows: block queries at positions "
               "%d..%d; columns: keys; each row sums to 1</text>\n", y0 + B * ch + 48, FONT, r->start,
            r->start + B - 1);
    fprintf(f, "</svg>\n");
}

/* one token cell of the timeline */
static void tl_cell(FILE *f, int x, int y, int w, int hgt, const char *fill, const char *stroke,
                    const char *dash, const char *text, const char *tcol, const char *mark) {
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"%s\" stroke=\"%s\" "
               "stroke-width=\"1.5\"%s/>\n", x + 2, y, w - 4, hgt, fill, stroke, dash);
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
            x + w / 2, y + hgt / 2 + 5, FONT, tcol, xw(text));
    if (mark[0])
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"11\" text-anchor=\"end\" fill=\"%s\">%s</text>\n",
                x + w - 5, y + 12, FONT, tcol, mark);
}

#define C_PROMPT "#d9d9d9"
#define C_ANCHOR "#fff7bc"
#define C_OK "#c7e9c0"
#define C_NO "#fcbba1"
#define C_BONUS "#fdae6b"
#define C_UNUSED "#ffffff"

/* The whole run: prefill, then per round the draft's block and the target's
 * posterior on one position axis, then the output. */
static void svg_timeline(FILE *f) {
    int B = RUN.B, R = RUN.R;
    int maxpos = RUN.r[R - 1].start + B;  /* the last posterior's position */
    int lw = 200, cw = 64, ch = 30, gap = 8, aw = 360;
    int P = maxpos + 1;
    int W = lw + P * cw + aw, x0 = lw;
    int y = 64;
    int n_lines = 2 + 2 * R;
    int Hh = y + n_lines * (ch + gap) + 18 + 2 * 26 + 10 + 24;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            W, Hh, W, Hh);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, Hh);
    fprintf(f, "<text x=\"12\" y=\"24\" %s font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">"
               "The default run: \"", FONT);
    for (int i = 0; i < RUN.n; i++) fprintf(f, "%s%s", i ? " " : "", xw(word(RUN.out[i]))); 
    fprintf(f, "\", block size %d, greedy</text>\n", B);
    /* position axis */
    fprintf(f, "<text x=\"%d\" y=\"52\" %s font-size=\"12\" text-anchor=\"end\" fill=\"#555555\">position</text>\n",
            x0 - 10, FONT);
    for (int p = 0; p < P; p++)
        fprintf(f, "<text x=\"%d\" y=\"52\" %s font-size=\"12\" text-anchor=\"middle\" fill=\"#555555\">%d</text>\n",
                x0 + p * cw + cw / 2, FONT, p);
    int fwd = 1;
    /* prefill */
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"end\" fill=\"#222222\">prefill</text>\n",
            x0 - 10, y + ch / 2 + 5, FONT);
    for (int p = 0; p < RUN.n; p++)
        tl_cell(f, x0 + p * cw, y, cw, ch, C_PROMPT, "#969696", "", word(RUN.out[p]), "#222222", "");
    tl_cell(f, x0 + RUN.n * cw, y, cw, ch, C_BONUS, "#d94801", "", word(ival(get("prefill.sampled"), 0)), "#222222", "");
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">target forward %d: %d prompt tokens"
               "</text>\n", x0 + P * cw + 12, y + ch / 2 + 5, FONT, fwd++, RUN.n);
    y += ch + gap;
    for (int ri = 0; ri < R; ri++) {
        const Round *r = &RUN.r[ri];
        /* draft line */
        fprintf(f, "<line x1=\"8\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#dddddd\" stroke-width=\"1\"/>\n",
                y - gap / 2, W - 8, y - gap / 2);
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"end\" fill=\"#222222\">"
                   "round %d: draft proposes</text>\n", x0 - 10, y + ch / 2 + 5, FONT, ri + 1);
        tl_cell(f, x0 + r->start * cw, y, cw, ch, C_ANCHOR, "#b8a000", "", word(r->block[0]), "#222222", "");
        for (int i = 1; i < B; i++) {
            int ok = i <= r->acc;
            tl_cell(f, x0 + (r->start + i) * cw, y, cw, ch, ok ? C_OK : C_NO, ok ? "#41ab5d" : "#cb181d", "",
                    word(r->block[i]), "#222222", ok ? "\xE2\x9C\x93" : "\xE2\x9C\x97");
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">draft forward %d: "
                   "%d context rows + %d block rows</text>\n", x0 + P * cw + 12, y + ch / 2 + 5, FONT, ri + 1,
                r->Lc, B);
        y += ch + gap;
        /* verify line: posterior[i] is the target's token for position start+i+1 */
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"end\" fill=\"#222222\">"
                   "target verifies</text>\n", x0 - 10, y + ch / 2 + 5, FONT);
        for (int i = 0; i < B; i++) {
            int p = r->start + i + 1;
            if (i < r->acc)
                tl_cell(f, x0 + p * cw, y, cw, ch, C_OK, "#41ab5d", "", word(r->posterior[i]), "#222222", "");
            else if (i == r->acc)
                tl_cell(f, x0 + p * cw, y, cw, ch, C_BONUS, "#d94801", "", word(r->posterior[i]), "#222222", "");
            else
                tl_cell(f, x0 + p * cw, y, cw, ch, C_UNUSED, "#bdbdbd", " stroke-dasharray=\"4 3\"",
                        word(r->posterior[i]), "#969696", "");
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">target forward %d: "
                   "accept %d, start %d \xE2\x86\x92 %d</text>\n", x0 + P * cw + 12, y + ch / 2 + 5, FONT, fwd++,
                r->acc, r->start, r->start_after);
        y += ch + gap;
    }
    /* the output */
    fprintf(f, "<line x1=\"8\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#dddddd\" stroke-width=\"1\"/>\n",
            y - gap / 2, W - 8, y - gap / 2);
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" font-weight=\"bold\" text-anchor=\"end\" "
               "fill=\"#222222\">output</text>\n", x0 - 10, y + ch / 2 + 5, FONT);
    for (int p = 0; p < RUN.n_out; p++) {
        const char *fill = C_PROMPT, *stroke = "#969696";
        if (p == RUN.n) { fill = C_BONUS; stroke = "#d94801"; }
        for (int ri = 0; ri < R; ri++) {
            const Round *r = &RUN.r[ri];
            if (p > r->start && p <= r->start + r->acc) { fill = C_OK; stroke = "#41ab5d"; }
            if (p == r->start_after) { fill = C_BONUS; stroke = "#d94801"; }
        }
        tl_cell(f, x0 + p * cw, y, cw, ch, fill, stroke, "", word(RUN.out[p]), "#222222", "");
    }
    int new_tokens = RUN.n_out - RUN.n;
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">%d new tokens from %d target "
               "forwards</text>\n", x0 + P * cw + 12, y + ch / 2 + 5, FONT, new_tokens, RUN.R + 1);
    y += ch + gap + 18;
    /* legend */
    static const struct { const char *fill, *stroke, *text; } leg[] = {
        {C_PROMPT, "#969696", "prompt"},
        {C_ANCHOR, "#b8a000", "anchor (last known token)"},
        {C_OK, "#41ab5d", "draft token accepted (= target)"},
        {C_NO, "#cb181d", "draft token rejected"},
        {C_BONUS, "#d94801", "target's own token (bonus)"},
        {C_UNUSED, "#bdbdbd", "posterior after a mismatch: unused"},
    };
    for (int k = 0; k < 6; k++) {
        int lx = 12 + (k % 3) * 300, ly = y + (k / 3) * 26;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"28\" height=\"18\" rx=\"3\" fill=\"%s\" stroke=\"%s\" "
                   "stroke-width=\"1.5\"%s/>\n", lx, ly, leg[k].fill, leg[k].stroke,
                k == 5 ? " stroke-dasharray=\"4 3\"" : "");
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">%s</text>\n", lx + 36, ly + 14,
                FONT, leg[k].text);
    }
    y += 2 * 26 + 10;
    fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"#555555\">The target's posterior at position "
               "p is its next token after the block's tokens up to p - 1; \xE2\x9C\x93 / \xE2\x9C\x97: "
               "the draft's token there matches it / does not.</text>\n", y, FONT);
    fprintf(f, "</svg>\n");
}

/* ===========================================================================
 * 7. README.md, step by step.
 * ======================================================================== */

static FILE *md;  /* the README being written (a memory stream) */
#define P(...) fprintf(md, __VA_ARGS__)

static double dot_row(const Tensor *a, long ha, long ra, const Tensor *b, long hb, long rb, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += at3(a, ha, ra, i) * at3(b, hb, rb, i);
    return s;
}

static double rms_row(const Tensor *t, long row, long col0, long n) {
    double s = 0;
    for (long j = 0; j < n; j++) s += at2(t, row, col0 + j) * at2(t, row, col0 + j);
    return sqrt(s / (double)n);
}

/* argmax of row `row` of a 2-D tensor (first index on ties), and the runner-up */
static void top2(const Tensor *t, long row, long *i1, long *i2) {
    long n = dim(t, 1), a = 0, b = -1;
    for (long j = 1; j < n; j++) if (at2(t, row, j) > at2(t, row, a)) a = j;
    for (long j = 0; j < n; j++) if (j != a && (b < 0 || at2(t, row, j) > at2(t, row, b))) b = j;
    *i1 = a;
    *i2 = b;
}

static void words_list(long *ids, int n) {
    for (int i = 0; i < n; i++) P("%s%s", i ? " " : "", word(ids[i]));
}

static void header(void) {
    P("<!-- Generated by walkthrough/mkwalk.c from a trace of the default run (`make walkthrough`).\n"
      "     Do not edit by hand: CI (`make walkthrough-check`) fails when this file differs from a\n"
      "     regeneration. Edit walkthrough/mkwalk.c instead. -->\n\n");
    P("# The DFlash walkthrough, with this implementation's real numbers\n\n");
    P("[中文版](README.zh.md) · the whole run in a browser: [explorer.html](explorer.html) · [exercises](exercises.md)\n\n");
    P("This page retells the original DFlash walkthrough (a walkthrough in Chinese of one DFlash round on the\n"
      "prompt \"The cat sat\", with shapes only; NOTES.md, \"Provenance\", describes it and lists its errata) with\n"
      "the values this implementation actually computes: the same round, in the same seven steps, through\n"
      "`dflash.c` on the planted toy model (`toy_weights/walkthrough`). Every number below is read from a trace\n"
      "of the default run (`./dflash --trace DIR`: one `.npy` file per tensor, named by the trace contract,\n"
      "[TRACE.md](../TRACE.md)), and the trace name is given next to it, so a port can compare its own tensors.\n"
      "Every line of C quoted here is read out of `dflash.c` when the page is generated. The words (anchor,\n"
      "block, mask token, posterior, bonus token, KV injection, ...) are defined in the glossary of\n"
      "[README.md](../README.md#glossary). Letters keep one meaning: H is the number of query heads, Hkv of\n"
      "key/value heads, d the head size, D the hidden size, B the block size, h a layer's residual stream, X a\n"
      "layer's normed input `input_layernorm(h)`, C the injected context, Lc its number of rows, S the number\n"
      "of keys attended over. To stop the program at each step and look at the same buffers, see [gdb.md](gdb.md).\n\n");
    P("| setting | value | where it comes from |\n|---|---|---|\n");
    P("| target layers L | %d | `prefill.hidden_states.0..%d` (L+1 entries) |\n", RUN.L, RUN.L);
    P("| hidden size D | %d | |\n", RUN.D);
    P("| heads H / head_dim d | %d / %d | `draft1.layers.0.self_attn.q` is [%d, %d, %d] |\n", RUN.H, RUN.d, RUN.H,
      RUN.B, RUN.d);
    P("| draft layers N | %d | `draft1.layers.0`, `draft1.layers.1` |\n", RUN.N);
    P("| target_layer_ids (k = %d) | ", RUN.k);
    for (int j = 0; j < RUN.k; j++) P("%s%d", j ? ", " : "", RUN.layer_ids[j]);
    P(" | each slice of `prefill.target_hidden` is bit-identical to `prefill.hidden_states.{id+1}` |\n");
    P("| block_size B | %d | `draft1.block_output_ids` |\n", RUN.B);
    P("| vocabulary V | %d words | `toy_weights/walkthrough/vocab.txt` |\n", RUN.V);
    P("| prompt | \"");
    words_list(RUN.out, RUN.n);
    P("\", ids ");
    for (int i = 0; i < RUN.n; i++) P("%s%ld", i ? " " : "", RUN.out[i]);
    P(", positions 0..%d | `input_ids` |\n\n", RUN.n - 1);
    P("The toy model is planted so that the story is readable ([toy_weights/README.md](../toy_weights/README.md)):\n"
      "the target is a bigram machine (its greedy next token after t is always NEXT[t]), and draft layer 0 has\n"
      "three look-ahead heads: head m (m = 1, 2, 3) makes the mask at distance m from the anchor attend to the\n"
      "anchor and copy it forward. One mistake is planted (three places after \"on\" the draft believes \"box\"),\n"
      "so round 1 accepts 2 of 3 proposals. The other heads, the MLPs and draft layer 1 are pseudo-random.\n"
      "All computation is float32 (`-ffp-contract=off`, so the trace is bit-reproducible).\n\n");
    P("## The whole run\n\n![timeline of the default run](timeline.svg)\n\n");
    P("| | block (positions) | draft proposes | target posterior | match / cumprod | acceptance | start |\n"
      "|---|---|---|---|---|---|---|\n");
    P("| prefill | ");
    for (int i = 0; i < RUN.n; i++) P("%s%s", i ? " " : "", mw(RUN.out[i]));
    P(" (0..%d) | | %s | | | %d |\n", RUN.n - 1, mw(ival(get("prefill.sampled"), 0)), RUN.n);
    for (int ri = 0; ri < RUN.R; ri++) {
        const Round *r = &RUN.r[ri];
        P("| round %d | ", ri + 1);
        for (int i = 0; i < RUN.B; i++) P("%s%s", i ? " " : "", mw(r->block_in[i]));
        P(" (%d..%d) | ", r->start, r->start + RUN.B - 1);
        for (int i = 1; i < RUN.B; i++) P("%s%s", i > 1 ? " " : "", mw(r->block[i]));
        P(" | ");
        for (int i = 0; i < RUN.B; i++) P("%s%s", i ? " " : "", mw(r->posterior[i]));
        P(" | [");
        for (int i = 0; i + 1 < RUN.B; i++) P("%s%ld", i ? "," : "", r->match[i]);
        P("] / [");
        for (int i = 0; i + 1 < RUN.B; i++) P("%s%ld", i ? "," : "", r->cumprod[i]);
        P("] | %d | %d &rarr; %d |\n", r->acc, r->start, r->start_after);
    }
    P("\nOutput: \"");
    words_list(RUN.out, RUN.n_out);
    P("\" (ids");
    for (int i = 0; i < RUN.n_out; i++) P(" %ld", RUN.out[i]);
    int tot = 0;
    for (int ri = 0; ri < RUN.R; ri++) tot += RUN.r[ri].acc + 1;
    P("): %d new tokens from %d target forwards (prefill + %d verifications) and %d draft forwards;\n"
      "%.2f tokens per verification. Target-only decoding needs one target forward per new token, %d (that it\n"
      "gives the same ids is the lossless property, which `make test` checks).\n\n",
      RUN.n_out - RUN.n, RUN.R + 1, RUN.R, RUN.R, (double)tot / RUN.R, RUN.n_out - RUN.n);
}

static void step1(void) {
    const Tensor *th = get("prefill.target_hidden"), *lg = get("prefill.logits");
    int D = RUN.D;
    P("## Step 1: prefill, and the target's hidden states\n\n");
    P("**Code:** `target_forward` (dflash.c, section 3) runs the %d-token prompt at positions 0..%d, fills\n"
      "`TargetRun.hidden_states` (L+1 = %d arrays of [%d, %d]) and the logits of the last position only\n"
      "(`logits_to_keep=1`); `dflash_generate` samples the first new token; `extract_context_feature`\n"
      "(dflash.c, section 4) concatenates `hidden_states[id + 1]` for id in target_layer_ids:\n\n"
      "```c\n%s\n```\n\n",
      RUN.n, RUN.n - 1, RUN.L + 1, RUN.n, D, code("extract_context_feature", "memcpy(target_hidden"));
    P("```math\n\\mathrm{target\\_hidden\\_raw}_i = \\left[\\,h^{(%d)}_i \\,;\\, h^{(%d)}_i \\,;\\, h^{(%d)}_i\\,\\right] "
      "= \\left[\\,\\mathrm{hs}[%d]_i \\,;\\, \\mathrm{hs}[%d]_i \\,;\\, \\mathrm{hs}[%d]_i\\,\\right] \\in "
      "\\mathbb{R}^{%d}\n```\n\n", RUN.layer_ids[0], RUN.layer_ids[1], RUN.layer_ids[2], RUN.layer_ids[0] + 1,
      RUN.layer_ids[1] + 1, RUN.layer_ids[2] + 1, RUN.kD);
    long a, b;
    top2(lg, 0, &a, &b);
    P("- `prefill.logits` [1, %d]: the largest is %s (%s), the runner-up %s (%s), so `prefill.sampled` = %ld\n"
      "  (%s), written at position %d.\n", RUN.V, mw(a), fx(at2(lg, 0, a), 4), mw(b), fx(at2(lg, 0, b), 4),
      ival(get("prefill.sampled"), 0), mw(ival(get("prefill.sampled"), 0)), RUN.n);
    P("- `prefill.target_hidden` [%d, %d] (`target_hidden_raw`). Each %d-wide slice is one hidden state; in this\n"
      "  model a token keeps a large value in its own dimension (dim = token id), the rest is small:\n\n",
      RUN.n, RUN.kD, D);
    P("| row | word | ");
    for (int j = 0; j < RUN.k; j++)
        P("cols %d..%d = hs[%d] (layer %d%s): own dim, RMS | ", j * D, (j + 1) * D - 1, RUN.layer_ids[j] + 1,
          RUN.layer_ids[j], RUN.layer_ids[j] + 1 == RUN.L ? ", post-norm" : "");
    P("\n|---|---|");
    for (int j = 0; j < RUN.k; j++) P("---|");
    P("\n");
    for (int i = 0; i < RUN.n; i++) {
        long id = RUN.out[i];
        P("| %d | %s | ", i, mw(id));
        for (int j = 0; j < RUN.k; j++)
            P("%s, %s | ", fx(at2(th, i, (long)j * D + id), 4), fx(rms_row(th, i, (long)j * D, D), 4));
        P("\n");
    }
    P("\nThe last slice is `hidden_states[%d]`, the output *after* the final `model.norm` (RMS 1): transformers\n"
      "replaces the last hidden state with `last_hidden_state` (see Errata).\n\n", RUN.L);
}

static void step2(void) {
    const Tensor *fc = get("draft1.fc"), *C = get("draft1.hidden_norm");
    int Lc = RUN.r[0].Lc;
    P("## Step 2: projection and normalisation to C\n\n");
    P("**Code:** `draft_forward` (dflash.c, section 5):\n\n```c\n%s\n%s\n```\n\n`fc.weight` is stored [%d, %d] "
      "(out, in).\n\n", code("draft_forward", "dm->fc,"), code("draft_forward", "dm->hidden_norm"), RUN.D, RUN.kD);
    P("```math\nC = \\mathrm{RMSNorm}\\!\\left(\\mathrm{target\\_hidden\\_raw}\\,W_\\mathrm{fc}^{\\top}\\right) \\in \\mathbb{R}^{%d \\times %d},"
      "\\qquad \\mathrm{RMSNorm}(x) = w \\odot \\frac{x}{\\sqrt{\\mathrm{mean}(x^2) + \\epsilon}}\n```\n\n",
      Lc, RUN.D);
    P("`draft1.target_hidden_raw` [%d, %d] is `prefill.target_hidden` (checked bit for bit), `draft1.fc` is\n"
      "[%d, %d] and C = `draft1.hidden_norm` [%d, %d]. In this model fc rows 0..35 are zero, so C is exactly 0 on\n"
      "the token dimensions; dim %d is the planted \"context flag\" that gives the context keys their own\n"
      "direction (Step 4.2):\n\n", Lc, RUN.kD, Lc, RUN.D, Lc, RUN.D, RUN.D - 1);
    P("| row (position) | C[0..3] | C[36..39] | C[%d] | RMS of fc row | RMS of C row |\n|---|---|---|---|---|---|\n",
      RUN.D - 1);
    for (int i = 0; i < Lc; i++) {
        P("| %d (%s) | ", i, mw(RUN.out[i]));
        for (int j = 0; j < 4; j++) P("%s%s", j ? " " : "", fx(at2(C, i, j), 4));
        P(" | ");
        for (int j = 36; j < 40; j++) P("%s%s", j > 36 ? " " : "", fx(at2(C, i, j), 4));
        P(" | %s | %s | %s |\n", fx(at2(C, i, RUN.D - 1), 4), fx(rms_row(fc, i, 0, RUN.D), 4),
          fx(rms_row(C, i, 0, RUN.D), 4));
    }
    P("\nThe same C is injected into every draft layer (Step 4.2); it is not re-normalised per layer.\n\n");
}

static void step3(void) {
    const Round *r = &RUN.r[0];
    const Tensor *ne = get("draft1.noise_embedding");
    P("## Step 3: the block\n\n");
    P("**Code:** `dflash_generate` (dflash.c, section 7) copies `block = output_ids[start : start+B]`;\n"
      "`draft_forward` looks up `noise_embedding = embed_tokens(block)` in the target's embedding, which is\n"
      "layer 0's residual stream h:\n\n```c\n%s\n```\n\n", code("draft_forward", "tm->embed_tokens"));
    P("```math\nh^{(0)} = \\mathrm{embed}(\\mathrm{block}) \\in \\mathbb{R}^{%d \\times %d}\n```\n\n", RUN.B, RUN.D);
    P("`draft1.block_output_ids` = [");
    for (int i = 0; i < RUN.B; i++) P("%s%ld", i ? ", " : "", r->block_in[i]);
    P("] = ");
    for (int i = 0; i < RUN.B; i++) P("%s%s", i ? " " : "", mw(r->block_in[i]));
    P(" at positions %d..%d (start = %d: the anchor is the token the prefill sampled).\n"
      "`draft1.noise_embedding` [%d, %d]: row t is `embed_tokens[block[t]]`; here that is %s in dimension\n"
      "block[t] and 0 elsewhere:\n\n", r->start, r->start + RUN.B - 1, r->start, RUN.B, RUN.D,
      fx(at2(ne, 0, r->block_in[0]), 4));
    P("| row | position | token | dim | value there | RMS of row |\n|---|---|---|---|---|---|\n");
    for (int t = 0; t < RUN.B; t++)
        P("| %d | %d | %s | %ld | %s | %s |\n", t, r->start + t, mw(r->block_in[t]), r->block_in[t],
          fx(at2(ne, t, r->block_in[t]), 4), fx(rms_row(ne, t, 0, RUN.D), 4));
    P("\n");
}

static void step4_qkv(void) {
    const Round *r = &RUN.r[0];
    const Tensor *q = get("draft1.layers.0.self_attn.q"), *k = get("draft1.layers.0.self_attn.k");
    const Tensor *v = get("draft1.layers.0.self_attn.v");
    int Lc = r->Lc, S = r->S, half = RUN.d / 2;
    P("## Step 4: KV injection, draft layer 0\n\n");
    P("**Code:** `draft_layer` (dflash.c, section 5), once per draft layer; the steps 4.1 to 4.5 below are\n"
      "marked with the same numbers in its comments. X is the layer's normed input for the block (in layer 0,\n"
      "`input_layernorm` is 1, so X is the embedding itself):\n\n```c\n%s\n```\n\n",
      code("draft_layer", "rmsnorm_rows(a->xb, r->h, w->input_layernorm"));
    P("### 4.1 Q: from the block only\n\n");
    P("```c\n%s\n%s\n```\n\n", code("draft_layer", "w->q_proj"), code("draft_layer", "w->q_norm"));
    P("```math\nQ = \\mathrm{QNorm}\\!\\left(X W_Q^{\\top}\\right) \\in \\mathbb{R}^{H \\times B \\times d} "
      "= \\mathbb{R}^{%d \\times %d \\times %d}\n```\n\n", RUN.H, RUN.B, RUN.d);
    P("`draft1.layers.0.self_attn.q` is [%d, %d, %d] (after q_norm, before RoPE; in memory `LayerActs.q` is\n"
      "[B, H*d], the trace transposes it to the reference's [H, B, d]). The planted head 1 shows the recipe: a word\n"
      "query points along pair 0 at angle 0, a mask query at angle -m plus a \"sink\" component on dim %d:\n\n",
      RUN.H, RUN.B, RUN.d, half - 1);
    P("| head 1, row | position | token | q[0] | q[%d] | q[%d] | norm of q |\n|---|---|---|---|---|---|---|\n",
      half, half - 1);
    for (int t = 0; t < RUN.B; t++) {
        double nn = sqrt(dot_row(q, 1, t, q, 1, t, RUN.d));
        P("| %d | %d | %s | %s | %s | %s | %s |\n", t, r->start + t, mw(r->block_in[t]), fx(at3(q, 1, t, 0), 4),
          fx(at3(q, 1, t, half), 4), fx(at3(q, 1, t, half - 1), 4), fx(nn, 4));
    }
    {
        double q0 = at3(q, 1, 1, 0), q32 = at3(q, 1, 1, half), q31 = at3(q, 1, 1, half - 1);
        double len0 = sqrt(q0 * q0 + q32 * q32);
        P("\nq_norm rescales every head's query to length sqrt(d) = 8. The mask's is %s along pair 0, in the\n"
          "direction (%s, %s) = (cos 1, -sin 1), i.e. at angle -1, and %s on the sink (dim %d).\n\n",
          fx(len0, 4), fx(q0 / len0, 4), fx(q32 / len0, 4), fx(q31, 4), half - 1);
    }
    P("### 4.2 K and V: the context and the block through the same projections\n\n");
    P("```math\nK = \\mathrm{KNorm}\\!\\left(\\mathrm{concat}\\!\\left[C W_K^{\\top},\\; X W_K^{\\top}\\right]\\right)"
      " \\in \\mathbb{R}^{%d \\times %d \\times %d},\\qquad V = \\mathrm{concat}\\!\\left[C W_V^{\\top},\\; "
      "X W_V^{\\top}\\right] \\in \\mathbb{R}^{%d \\times %d \\times %d}\n```\n\n",
      RUN.Hkv, Lc + RUN.B, RUN.d, RUN.Hkv, Lc + RUN.B, RUN.d);
    P("`draft_layer` stacks the %d context rows (C) and the %d block rows (X) into one buffer `kv_in` and\n"
      "projects it once with each weight matrix, so rows 0..%d of K and V come from C and rows %d..%d from X:\n\n"
      "```c\n%s\n%s\n%s\n%s\n%s\n```\n\n", Lc, RUN.B, Lc - 1, Lc, Lc + RUN.B - 1,
      code("draft_layer", "memcpy(r->kv_in, r->C"), code("draft_layer", "memcpy(r->kv_in + (size_t)Lc * D, a->xb"),
      code("draft_layer", "w->k_proj"), code("draft_layer", "w->v_proj"), code("draft_layer", "w->k_norm"));
    P("`draft1.layers.0.self_attn.k` and `.v` are [%d, %d, %d]. The %d keys and values and their sources, with\n"
      "head 1's components (k_norm has gain 10 on dims 0, %d, %d, %d in the planted heads; each planted key has\n"
      "exactly one non-zero component):\n\n", RUN.Hkv, Lc + RUN.B, RUN.d, S, half - 1, half, RUN.d - 1);
    P("| K/V index | position | source | token | head 1: k[0] | k[16] | k[%d] | head 1: v, largest component |\n"
      "|---|---|---|---|---|---|---|---|\n", half - 1);
    for (int j = 0; j < Lc + RUN.B; j++) {
        int ctx = j < Lc;
        int pos = r->draft_cache_before + j;
        long id = ctx ? RUN.out[pos] : r->block_in[j - Lc];
        int best = 0;
        for (int c = 1; c < RUN.d; c++) if (fabs(at3(v, 1, j, c)) > fabs(at3(v, 1, j, best))) best = c;
        char vs[96];
        if (fabs(at3(v, 1, j, best)) < 0.00005) snprintf(vs, sizeof vs, "all 0");
        else snprintf(vs, sizeof vs, "%s at dim %d (%s)", fx(at3(v, 1, j, best), 4), best, mw(best));
        P("| %d | %d | %s | %s | %s | %s | %s | %s |\n", j, pos,
          ctx ? "C W_K (target context)" : "X W_K (block)", mw(id), fx(at3(k, 1, j, 0), 4),
          fx(at3(k, 1, j, 16), 4), fx(at3(k, 1, j, half - 1), 4), vs);
    }
    P("\nThe context rows carry what the target computed for \"The cat sat\" (through C), the block rows what the\n"
      "draft knows of its own block. In the pseudo-random heads all 64 components are dense, e.g. head 0's key 0\n"
      "starts %s %s %s %s.\n\n", fx(at3(k, 0, 0, 0), 4), fx(at3(k, 0, 0, 1), 4), fx(at3(k, 0, 0, 2), 4),
      fx(at3(k, 0, 0, 3), 4));
}

static void step4_rope(void) {
    const Round *r = &RUN.r[0];
    const Tensor *ang = get("draft1.rope_angles"), *cs = get("draft1.cos"), *sn = get("draft1.sin");
    const Tensor *q = get("draft1.layers.0.self_attn.q"), *k = get("draft1.layers.0.self_attn.k");
    const Tensor *qr = get("draft1.layers.0.self_attn.q_rope"), *kr = get("draft1.layers.0.self_attn.k_rope");
    const Tensor *A = get("draft1.layers.0.self_attn.attn_weights");
    int Lc = r->Lc, S = r->S, d = RUN.d, half = d / 2, P0 = r->draft_cache_before;
    P("### 4.3 RoPE: keys at all positions, queries at the last B\n\n");
    P("**Code:** `draft_forward` sets `position_ids = [cache_len, start+B)` = %d..%d and calls\n"
      "`rope_cos_sin` (dflash.c, section 2); `draft_layer` calls `apply_rotary_pos_emb`, which rotates the keys\n"
      "by rows 0..%d of cos/sin and the queries by rows %d..%d (`cos[-q_len:]`), each vector via `rope_apply`:\n\n"
      "```c\n%s\n%s\n```\n\n", P0, P0 + S - 1, S - 1, Lc, S - 1, code("draft_forward", "rope_cos_sin("),
      code("draft_layer", "apply_rotary_pos_emb("));
    P("```math\n\\theta_{p,i} = p \\cdot \\mathrm{inv\\_freq}_i,\\quad \\mathrm{inv\\_freq}_i = "
      "\\mathrm{rope\\_theta}^{-2i/d},\\qquad x' = x \\odot \\cos\\theta_p + \\mathrm{rotate\\_half}(x) \\odot "
      "\\sin\\theta_p\n```\n\n");
    P("Dims i and i + %d form pair i (the Hugging Face half split). `draft1.rope_angles` [%d, %d], `draft1.cos`\n"
      "and `.sin` [%d, %d]; the first pair turns %s rad per position, the last %.4e:\n\n", half, S, half, S, d,
      fx(RUN.inv_freq_first, 4), RUN.inv_freq_last);
    P("| position | used by | angle pair 0 | cos | sin | angle pair %d | cos |\n|---|---|---|---|---|---|---|\n",
      half - 1);
    for (int p = 0; p < S; p++) {
        int pos = P0 + p;
        P("| %d | %s | %s | %s | %s | %.4e | %s |\n", pos, p < Lc ? "K (context)" : "K and Q (block)",
          fx(at2(ang, p, 0), 4), fx(at2(cs, p, 0), 4), fx(at2(sn, p, 0), 4), at2(ang, p, half - 1),
          fx(at2(cs, p, half - 1), 6));
    }
    /* q5 . k2 in head 0 (dense weights): rotated vs relative rotation */
    int qrow = 5 - r->start, kj = 2 - P0;
    double s_rot = dot_row(qr, 0, qrow, kr, 0, kj, d);
    int delta = 5 - 2, drow = delta - P0;  /* row of the cos/sin table for angle delta */
    double s_rel = 0, s_none = dot_row(q, 0, qrow, k, 0, kj, d);
    for (int i = 0; i < half; i++) {
        /* R_{-delta} k: rotate pair i by -delta * inv_freq_i */
        double c = at2(cs, drow, i), s = at2(sn, drow, i);
        double k1 = at3(k, 0, kj, i), k2 = at3(k, 0, kj, i + half);
        s_rel += at3(q, 0, qrow, i) * (k1 * c + k2 * s) + at3(q, 0, qrow, i + half) * (k2 * c - k1 * s);
    }
    check(fabs(s_rot - s_rel) < 1e-4 * (1 + fabs(s_rot)), "q5.k2 rotated (%f) = relative (%f)", s_rot, s_rel);
    /* the softmax of head 0's row of scores reproduces the traced weights */
    double sc[64], mx = -1e300, sum = 0, maxdiff = 0;
    for (int j = 0; j < S && j < 64; j++) {
        sc[j] = dot_row(qr, 0, qrow, kr, 0, j, d) * 0.125;
        if (sc[j] > mx) mx = sc[j];
    }
    for (int j = 0; j < S && j < 64; j++) sum += exp(sc[j] - mx);
    for (int j = 0; j < S && j < 64; j++) {
        double e = fabs(exp(sc[j] - mx) / sum - at3(A, 0, qrow, j));
        if (e > maxdiff) maxdiff = e;
    }
    check(maxdiff < 1e-5, "softmax of recomputed scores matches attn_weights (%g)", maxdiff);
    P("\n**The walkthrough's example q5 . k2 (distance 3), with head 0's actual vectors** (`q`, `k` before RoPE,\n"
      "`q_rope`, `k_rope` after; the query at position 5 is row %d of Q, the key at position 2 is row %d of K):\n\n",
      qrow, kj);
    P("```text\n");
    {
        char l1[96], l4[96];
        snprintf(l1, sizeof l1, "q'_5 . k'_2 = q_rope[0][%d] . k_rope[0][%d]", qrow, kj);
        snprintf(l4, sizeof l4, "score = q'_5 . k'_2 * d^-0.5 = %s * 0.125", fx(s_rot, 4));
        P("%-62s= %10s\n", l1, fx(s_rot, 4));
        P("%-62s= %10s   the same: only 2 - 5 = -3 matters\n",
          "q_5 . R_-3 k_2  (q, k unrotated; k turned by -3 * inv_freq)", fx(s_rel, 4));
        P("%-62s= %10s   distance 0: a different score\n",
          "q_5 . k_2       (no rotation: Q wrongly at positions 0..3)", fx(s_none, 4));
        P("%-62s= %10s\n", l4, fx(s_rot * 0.125, 4));
        P("%-62s= %10s\n", "A[0][q@5][k@2], the softmax of head 0's row q@5 of scores", fx(at3(A, 0, qrow, kj), 4));
    }
    P("  (draft1.layers.0.self_attn.attn_weights[0][%d][%d])\n", qrow, kj);
    P("```\n\n(The two ways of computing the score agree to float rounding, and the softmax of the recomputed row\n"
      "matches the traced weights to 1e-5: both are checked when this page is generated.)\n\n");
    /* planted heads: scores against the anchor by distance */
    int anchor = Lc;  /* key index of the anchor */
    P("**The angle argument in the planted heads.** A mask query of head m sits at angle -m on pair 0, every word\n"
      "key at angle 0, so after RoPE their score is proportional to cos((q_pos - k_pos) - m): largest exactly at\n"
      "distance m. Scores q'.k'/8 against the anchor key k@%d (%s), from `q_rope` and `k_rope`:\n\n",
      r->start, mw(r->block_in[0]));
    P("| head | ");
    for (int t = 0; t < RUN.B; t++) P("q@%d (distance %d) | ", r->start + t, t);
    P("q@%d vs a mask key |\n|---|", r->start + RUN.B - 1);
    for (int t = 0; t <= RUN.B; t++) P("---|");
    P("\n");
    for (int h = 1; h <= 3 && h < RUN.H; h++) {
        P("| %d | ", h);
        for (int t = 0; t < RUN.B; t++) P("%s | ", fx(dot_row(qr, h, t, kr, h, anchor, d) * 0.125, 2));
        P("%s |\n", fx(dot_row(qr, h, RUN.B - 1, kr, h, S - 1, d) * 0.125, 2));
    }
    {
        double self = dot_row(qr, 1, 0, kr, 1, anchor, d) * 0.125, peak = dot_row(qr, 1, 1, kr, 1, anchor, d) * 0.125;
        double off1 = dot_row(qr, 1, 2, kr, 1, anchor, d) * 0.125, off2 = dot_row(qr, 1, 3, kr, 1, anchor, d) * 0.125;
        double sink = dot_row(qr, 1, RUN.B - 1, kr, 1, S - 1, d) * 0.125, ctx = 0;
        for (int h = 1; h <= 3 && h < RUN.H; h++)
            for (int t = 0; t < RUN.B; t++)
                for (int j = 0; j < Lc; j++) {
                    double x = fabs(dot_row(qr, h, t, kr, h, j, d) * 0.125);
                    if (x > ctx) ctx = x;
                }
        P("\nThe anchor scores itself %s (its own query, angle 0); a mask scores the anchor %s at its distance, %s one\n"
          "off and %s two off, and every mask key %s (the sink, half-way between %s and %s), so only the mask at\n"
          "distance m attends to the anchor. Context keys live on dim 16, which no planted query has: ",
          fx(self, 2), fx(peak, 2), fx(off1, 2), fx(off2, 2), fx(sink, 2), fx(peak, 2), fx(off1, 2));
        if (ctx == 0) P("in heads 1 to 3\nthey score exactly 0.\n\n");
        else P("in heads 1 to 3\nthey score at most %.2e in magnitude.\n\n", ctx);
    }
}

static void step4_attn(void) {
    const Round *r = &RUN.r[0];
    const Tensor *A = get("draft1.layers.0.self_attn.attn_weights"), *v = get("draft1.layers.0.self_attn.v");
    const Tensor *ao = get("draft1.layers.0.self_attn.attn_output");
    int Lc = r->Lc, S = r->S, B = RUN.B, P0 = r->draft_cache_before;
    P("### 4.4 Attention: %d x %d per head, non-causal\n\n", B, S);
    P("**Code:** `attention` (dflash.c, section 2) with `causal = 0`, called from `draft_layer` after\n"
      "`cache_append` has put the %d new keys and values into the draft cache:\n\n```c\n%s\n%s\n```\n\n", Lc + B,
      code("draft_layer", "cache_append("), code("draft_layer", "attention("));
    P("```math\nA_{ij} = \\frac{\\exp\\!\\left(q'^{\\top}_i k'_j / \\sqrt{d}\\right)}{\\sum_{m} "
      "\\exp\\!\\left(q'^{\\top}_i k'_m / \\sqrt{d}\\right)},\\qquad \\mathrm{out}_i = \\sum_{j} A_{ij}\\, v_j,"
      "\\qquad i \\in \\{%d..%d\\},\\ j \\in \\{%d..%d\\}\n```\n\n", r->start, r->start + B - 1, P0, P0 + S - 1);
    P("`draft1.layers.0.self_attn.attn_weights` [%d, %d, %d], scale d^-0.5 = 0.125, no mask. Heads 1 to 3 are\n"
      "the planted look-ahead heads (head m: row q@%d+m peaks at the anchor k@%d); heads 0 and 4 to 7 have\n"
      "pseudo-random weights and spread their weight over context and block. The thick line is the KV-injection\n"
      "boundary: left of it the keys and values come from the target's features (C), right of it from the\n"
      "block.\n\n", RUN.H, B, S, r->start, r->start);
    P("| | |\n|---|---|\n");
    for (int h = 0; h < RUN.H; h += 2) {
        P("| ![draft round 1, layer 0, head %d](attn_round1_layer0_head%d.svg) |", h, h);
        if (h + 1 < RUN.H) P(" ![draft round 1, layer 0, head %d](attn_round1_layer0_head%d.svg) |", h + 1, h + 1);
        P("\n");
    }
    P("\nThe same numbers as text (rows: queries q@position, columns: keys k@position; `┃` = the KV-injection\n"
      "boundary):\n\n```text\n");
    for (int h = 0; h < RUN.H; h++) {
        P("head %d (%s)\n%-13s", h, head_role(h), "");
        for (int j = 0; j < S; j++) {
            int pos = P0 + j;
            long id = j < Lc ? RUN.out[pos] : r->block_in[j - Lc];
            char lab[64];
            snprintf(lab, sizeof lab, "k@%d %s", pos, word(id));
            P("%s%11s", j == Lc ? "  ┃" : "", lab);
        }
        P("\n");
        for (int t = 0; t < B; t++) {
            char lab[64];
            snprintf(lab, sizeof lab, "q@%d %s", r->start + t, word(r->block_in[t]));
            P("  %-11s", lab);
            for (int j = 0; j < S; j++) P("%s%11s", j == Lc ? "  ┃" : "", fx(at3(A, h, t, j), 4));
            P("\n");
        }
        P("\n");
    }
    P("```\n\n");
    P("Weight on the %d context keys, i.e. how much each query takes from the target's features through KV\n"
      "injection:\n\n| head | ", Lc);
    for (int t = 0; t < B; t++) P("q@%d | ", r->start + t);
    P("\n|---|");
    for (int t = 0; t < B; t++) P("---|");
    P("\n");
    for (int h = 0; h < RUN.H; h++) {
        P("| %d | ", h);
        for (int t = 0; t < B; t++) {
            double s = 0;
            for (int j = 0; j < Lc; j++) s += at3(A, h, t, j);
            P("%s | ", fx(s, 4));
        }
        P("\n");
    }
    /* out_5 of head 2, expanded */
    int h = 2, t = 5 - r->start;
    long tok = r->block_in[0];
    P("\n**out_5 expanded, head 2** (look-ahead 2: the mask at position 5 is 2 after the anchor). Its value\n"
      "vectors are non-zero only for words, in the word's own dimension, so dimension %ld (%s) shows the copy:\n\n",
      tok, mw(tok));
    P("| j | position | source | A[2][q@5][j] | v_j[%ld] | A v_j[%ld] |\n|---|---|---|---|---|---|\n", tok, tok);
    double o = 0;
    for (int j = 0; j < S; j++) {
        double w = at3(A, h, t, j), vv = at3(v, h, j, tok);
        o += w * vv;
        P("| %d | %d | %s | %s | %s | %s |\n", j, P0 + j, j < Lc ? "context (C)" : "block", fx(w, 4), fx(vv, 4),
          fx(w * vv, 4));
    }
    P("| | | | | out_5[%ld] = | **%s** |\n\n", tok, fx(o, 4));
    P("### 4.5 Output projection\n\n");
    P("**Code:** `draft_layer`: `%s`, then the residual and the MLP.\n\n", code("draft_layer", "w->o_proj"));
    P("```math\n\\mathrm{Attn\\_out} = \\mathrm{concat}[\\mathrm{head}_0, \\dots, \\mathrm{head}_{%d}]\\, W_O^{\\top} "
      "\\in \\mathbb{R}^{%d \\times %d}\n```\n\n", RUN.H - 1, B, RUN.D);
    P("`draft1.layers.0.self_attn.attn_output` is [%d, %d]: only the block's rows; the %d context positions gave\n"
      "keys and values but produce no output. Head m's o_proj writes the copied token t to dimension look_m(t),\n"
      "so each mask row gains the word it should predict from (the largest components of each row):\n\n", B,
      RUN.D, Lc);
    P("| row | position | token | largest | second | third |\n|---|---|---|---|---|---|\n");
    for (int tt = 0; tt < B; tt++) {
        int top[3] = {-1, -1, -1};
        for (int c = 0; c < RUN.D; c++) {
            double x = at2(ao, tt, c);
            for (int s = 0; s < 3; s++)
                if (top[s] < 0 || x > at2(ao, tt, top[s])) {
                    for (int u = 2; u > s; u--) top[u] = top[u - 1];
                    top[s] = c;
                    break;
                }
        }
        P("| %d | %d | %s |", tt, r->start + tt, mw(r->block_in[tt]));
        for (int s = 0; s < 3; s++)
            P(" %s at dim %d%s%s%s |", fx(at2(ao, tt, top[s]), 4), top[s], top[s] < NVOC ? " (" : "",
              top[s] < NVOC ? mw(top[s]) : "", top[s] < NVOC ? ")" : "");
        P("\n");
    }
    P("\nThe anchor row attends to itself in all three planted heads, so it collects all three words; that row is\n"
      "dropped in Step 5 anyway. Layer 1 (`draft1.layers.1.*`, same shapes) is pseudo-random and only adds small\n"
      "updates.\n\n");
}

static void step5(void) {
    const Round *r = &RUN.r[0];
    const Tensor *lg = get("draft1.logits");
    P("## Step 5: output and logits\n\n");
    P("**Code:** `draft_forward` takes the final norm, then the target's lm_head on rows 1..%d;\n"
      "`dflash_generate` takes the argmax of each row (the draft is always greedy):\n\n```c\n%s\n%s\n%s\n```\n\n",
      RUN.B - 1, code("draft_forward", "dm->norm,"), code("draft_forward", "tm->lm_head"),
      code("dflash_generate", "block[i] = argmax("));
    P("```math\n\\mathrm{draft\\_logits} = \\mathrm{norm}(h^{(N)})_{[1:]}\\, W_\\mathrm{lm}^{\\top} \\in "
      "\\mathbb{R}^{%d \\times %d}\n```\n\n", RUN.B - 1, RUN.V);
    P("`draft1.norm` [%d, %d], `draft1.logits` [%d, %d], `draft1.sampled` [%d]:\n\n", RUN.B, RUN.D, RUN.B - 1,
      RUN.V, RUN.B - 1);
    P("| logits row | position | argmax | logit | runner-up | logit |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i + 1 < RUN.B; i++) {
        long a, b;
        top2(lg, i, &a, &b);
        check(a == r->block[i + 1], "draft argmax row %d = draft1.sampled", i);
        P("| %d | %d | %s | %s | %s | %s |\n", i, r->start + i + 1, mw(a), fx(at2(lg, i, a), 4), mw(b),
          fx(at2(lg, i, b), 4));
    }
    P("\nThe block becomes ");
    for (int i = 0; i < RUN.B; i++) P("%s%s", i ? " " : "", mw(r->block[i]));
    P(". The last proposal is the planted mistake: three places after \"on\" the draft's head 3 believes\n"
      "\"box\" (instead of \"mat\") and lm_head turns that into NEXT[box] = \".\".\n\n");
}

static void step6(void) {
    const Round *r = &RUN.r[0];
    const Tensor *lg = get("verify1.logits");
    int B = RUN.B;
    P("## Step 6: verification and acceptance\n\n");
    P("**Code:** `target_forward` on the %d block tokens at positions %d..%d (cache %d &rarr; %d positions);\n"
      "`sample_row` (argmax at temperature 0) gives the posterior; `acceptance_length` (dflash.c, section 7)\n"
      "compares:\n\n```c\n%s\n%s\n%s\n%s\n```\n\n", B, r->start, r->start + B - 1, r->start, r->start + B,
      code("dflash_generate", "target_forward(target, &past_key_values_target, &tr, block"),
      code("dflash_generate", "posterior[i] = sample_row("), code("acceptance_length", "match[i] ="),
      code("acceptance_length", "cumprod[i] ="));
    P("```math\n\\mathrm{acc} = \\sum_{i=0}^{B-2} \\prod_{j \\le i} \\left[\\mathrm{block}_{j+1} = "
      "\\mathrm{posterior}_j\\right]\n```\n\n");
    P("`verify1.input_ids` = ");
    for (int i = 0; i < B; i++) P("%s%s", i ? " " : "", mw(r->block[i]));
    P(", `verify1.logits` [%d, %d], `verify1.sampled` (the posterior) [%d]:\n\n", B, RUN.V, B);
    P("| i | position | token in | target's next (posterior[i]) | logit | draft's guess block[i+1] | match | cumprod |\n"
      "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < B; i++) {
        long a, b;
        top2(lg, i, &a, &b);
        check(a == r->posterior[i], "verify argmax row %d = verify1.sampled", i);
        if (i + 1 < B)
            P("| %d | %d | %s | %s | %s | %s | %ld | %ld |\n", i, r->start + i, mw(r->block[i]), mw(r->posterior[i]),
              fx(at2(lg, i, a), 4), mw(r->block[i + 1]), r->match[i], r->cumprod[i]);
        else
            P("| %d | %d | %s | %s | %s | (none) | | |\n", i, r->start + i, mw(r->block[i]), mw(r->posterior[i]),
              fx(at2(lg, i, a), 4));
    }
    P("\n`verify1.match` = [");
    for (int i = 0; i + 1 < B; i++) P("%s%ld", i ? ", " : "", r->match[i]);
    P("], `verify1.cumprod` = [");
    for (int i = 0; i + 1 < B; i++) P("%s%ld", i ? ", " : "", r->cumprod[i]);
    P("], `verify1.acceptance_length` = **%d**: keep ", r->acc);
    for (int i = 0; i <= r->acc; i++) P("%s%s", i ? " " : "", mw(r->block[i]));
    P(" and take the target's %s as the bonus token. The last posterior (%s after %s) is computed in the same\n"
      "forward but only used when every proposal is accepted.\n\n", mw(r->posterior[r->acc]),
      mw(r->posterior[B - 1]), mw(r->block[B - 1]));
}

static void step7(void) {
    const Round *r = &RUN.r[0];
    int B = RUN.B;
    P("## Step 7: the state update\n\n");
    P("**Code:** the end of the round loop in `dflash_generate` (dflash.c, section 7); `cache_crop` (section 2):\n\n"
      "```c\n%s\n%s\n%s\n%s\n%s\n%s\n```\n\n", code("dflash_generate", "output_ids[start + i] = block[i]"),
      code("dflash_generate", "output_ids[start + acc + 1] ="), code("dflash_generate", "start += acc + 1"),
      code("dflash_generate", "cache_crop(&past_key_values_target"),
      code("dflash_generate", "n_ids, B, 0, B)"), code("dflash_generate", "n_ctx = acc + 1"));
    P("```math\n\\mathrm{start} \\leftarrow \\mathrm{start} + \\mathrm{acc} + 1,\\qquad "
      "\\mathrm{crop}(n) \\text{ keeps positions } 0, \\dots, n-1,\\qquad "
      "\\mathrm{target\\_hidden} \\leftarrow \\mathrm{target\\_hidden}_{[0:\\mathrm{acc}+1]}\n```\n\n");
    P("```text\n");
    P("output_ids[start : start+acc+1] = block[:acc+1]       positions %d..%d = ", r->start, r->start + r->acc);
    for (int i = 0; i <= r->acc; i++) P("%s%s", i ? " " : "", word(r->block[i]));
    P("\noutput_ids[start+acc+1]          = posterior[acc]     position %d = %s\n", r->start_after,
      word(r->posterior[r->acc]));
    P("start += acc + 1                                       start = %d + %d + 1 = %d\n", r->start, r->acc,
      r->start_after);
    P("target cache crop(start)                               %d positions (0..%d) -> %d (0..%d)\n", r->start + B,
      r->start + B - 1, r->start_after, r->start_after - 1);
    P("target_hidden = extract_context_feature(...)[:acc+1]   rows 0..%d of verify1.target_hidden = positions %d..%d\n",
      r->acc, r->start, r->start + r->acc);
    P("```\n\n");
    P("The crop drops the K/V of the rejected %s at position %d. It also means the bonus %s is not in the target\n"
      "cache: it is the next block's anchor and is fed again. `draft2.target_hidden_raw` is bit-identical to the\n"
      "first %d rows of `verify1.target_hidden` (checked).\n\n", mw(r->block[B - 1]), r->start + B - 1,
      mw(r->posterior[r->acc]), r->acc + 1);
    P("**The draft cache** is cropped to `start` right after each draft forward, so it keeps only context\n"
      "K/V, and grows by acc + 1 positions per round (the rows of `target_hidden` it is handed):\n\n");
    P("| round | start | draft cache entering | draft position_ids | keys attended S | draft cache after crop(start) "
      "| target cache after verify | after crop(new start) | new start |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
    for (int ri = 0; ri < RUN.R; ri++) {
        const Round *x = &RUN.r[ri];
        char dc[32];
        if (x->draft_cache_before) snprintf(dc, sizeof dc, "%d (0..%d)", x->draft_cache_before, x->draft_cache_before - 1);
        else snprintf(dc, sizeof dc, "0");
        P("| %d | %d | %s | %d..%d | %d | %d (0..%d) | %d (0..%d) | %d (0..%d) | %d |\n", ri + 1, x->start, dc,
          x->draft_cache_before, x->start + B - 1, x->S, x->start, x->start - 1, x->start + B, x->start + B - 1,
          x->start_after, x->start_after - 1, x->start_after);
    }
    P("\nNote the RoPE positions of later rounds: `draft2.position_ids` starts at %d, not 0. The keys of positions\n"
      "0..%d were rotated in round 1 and wait in the cache; only the new context rows and the block get new\n"
      "keys.\n\n", RUN.R > 1 ? RUN.r[1].draft_cache_before : 0, RUN.R > 1 ? RUN.r[1].draft_cache_before - 1 : 0);
}

static void round2(void) {
    if (RUN.R < 2) return;
    const Round *r = &RUN.r[1];
    int B = RUN.B;
    const Tensor *A = get("draft2.layers.0.self_attn.attn_weights");
    P("## Round 2\n\n");
    P("The block ");
    for (int i = 0; i < B; i++) P("%s%s", i ? " " : "", mw(r->block_in[i]));
    P(" at positions %d..%d; the draft is handed %d new context rows (positions %d..%d: ", r->start,
      r->start + B - 1, r->Lc, r->draft_cache_before, r->draft_cache_before + r->Lc - 1);
    for (int i = 0; i < r->Lc; i++) P("%s%s", i ? " " : "", mw(RUN.out[r->draft_cache_before + i]));
    P("), its cache holds %d, so its queries attend over S = %d keys (`draft2.layers.0.self_attn.attn_weights` is\n"
      "[%d, %d, %d]). The planted heads again find the anchor k@%d (the keys with the largest weight per query):\n\n", r->draft_cache_before, r->S, RUN.H, B,
      r->S, r->start);
    P("| head | ");
    for (int t = 0; t < B; t++) P("q@%d attends to | ", r->start + t);
    P("\n|---|");
    for (int t = 0; t < B; t++) P("---|");
    P("\n");
    for (int h = 1; h <= 3 && h < RUN.H; h++) {
        P("| %d | ", h);
        for (int t = 0; t < B; t++) {
            int best = 0;
            for (int j = 1; j < r->S; j++) if (at3(A, h, t, j) > at3(A, h, t, best)) best = j;
            /* key index j is position j: the draft cache always starts at position 0 */
            double top = at3(A, h, t, best);
            int last = best, n_top = 0;
            for (int j = 0; j < r->S; j++)
                if (at3(A, h, t, j) > top - 1e-3) { n_top++; last = j; }
            if (n_top == 1) P("k@%d (%s) | ", best, fx(top, 4));
            else P("k@%d..%d (%s each) | ", best, last, fx(top, 4));
        }
        P("\n");
    }
    P("\nDraft: ");
    for (int i = 1; i < B; i++) P("%s%s", i > 1 ? " " : "", mw(r->block[i]));
    P("; target posterior: ");
    for (int i = 0; i < B; i++) P("%s%s", i ? " " : "", mw(r->posterior[i]));
    P("; match [");
    for (int i = 0; i + 1 < B; i++) P("%s%ld", i ? ", " : "", r->match[i]);
    P("], cumprod [");
    for (int i = 0; i + 1 < B; i++) P("%s%ld", i ? ", " : "", r->cumprod[i]);
    P("], acceptance length **%d**: all proposals kept, plus the bonus %s at position %d; start %d &rarr; %d.\n",
      r->acc, mw(r->posterior[r->acc]), r->start_after, r->start, r->start_after);
    P("%s is the stop id, so the loop ends: `output_ids` is cut after it (%d ids).\n\n", mw(r->posterior[r->acc]),
      RUN.n_out);
}

static void errata(void) {
    const Round *r = &RUN.r[0];
    int B = RUN.B;
    P("## Errata: where the walkthrough's text differs from what the code does\n\n");
    P("The published code (https://github.com/z-lab/dflash, `dflash/model.py`, with transformers) is the specification;\n"
      "`NOTES.md` (\"Walkthrough errata\") lists these too, each with the published line that settles it.\n\n");
    P("1. **Step 7, the next start.** The walkthrough says `start` moves to 7 after round 1. The code does\n"
      "   `start += acc + 1` = %d + %d + 1 = **%d**: the bonus %s is written at position %d and is the anchor of\n"
      "   the next block, at positions %d..%d (`verify2.position_ids` starts at %d).\n", r->start, r->acc,
      r->start_after, mw(r->posterior[r->acc]), r->start_after, r->start_after, r->start_after + B - 1,
      RUN.R > 1 ? RUN.r[1].start : r->start_after);
    P("2. **Step 7, the crop.** The walkthrough says `crop(start)` keeps positions 0..%d. `crop(n)` keeps the\n"
      "   first n positions, so `crop(%d)` keeps **0..%d** (round 2's verification attends over %d + %d = %ld keys:\n"
      "   `verify2.layers.0.self_attn.attn_weights` is [%d, %d, %ld]).\n", r->start_after, r->start_after,
      r->start_after - 1, r->start_after, B, (long)dim(get("verify2.layers.0.self_attn.attn_weights"), 2), RUN.H,
      B, (long)dim(get("verify2.layers.0.self_attn.attn_weights"), 2));
    P("3. **Step 7, the next context.** \"Only pos 3, 4, 5 (the 3 accepted positions)\" is right about the\n"
      "   positions, but they are the anchor plus the %d accepted draft tokens: `[:acc+1]` of the verified block.\n",
      r->acc);
    P("4. **Step 2, the shape of W_fc.** The walkthrough writes W_fc in R^{1536x512}; `nn.Linear` stores\n"
      "   `fc.weight` as [%d, %d] (out, in) and computes x W^T.\n", RUN.D, RUN.kD);
    P("5. **Step 1, \"layers 3/7/11\".** The code reads `hidden_states[id + 1]` = `hidden_states[%d]`, `[%d]`,\n"
      "   `[%d]` (entry 0 is the embedding), and the last one is the output *after* the final `model.norm`\n"
      "   (transformers replaces the last hidden state with `last_hidden_state`): the RMS column of its slice\n"
      "   in Step 1 is 1. Ports that hook the raw output of layer %d differ exactly there.\n\n",
      RUN.layer_ids[0] + 1, RUN.layer_ids[1] + 1, RUN.layer_ids[2] + 1, RUN.layer_ids[2]);
}

static void footer(void) {
    P("## How this page is made\n\n");
    P("`make walkthrough` builds `./dflash` and the toy weights, traces the default run into a temporary\n"
      "directory (`./dflash --weights toy_weights/walkthrough --trace DIR`), and runs `walkthrough/mkwalk` on it,\n"
      "which writes this README, `timeline.svg` and the eight `attn_round1_layer0_head*.svg`, and cross-checks\n"
      "what it states (the target_layer_ids, the q5 . k2 identity, the softmax of the recomputed scores, the\n"
      "context handed from round to round, the round bookkeeping). `make walkthrough-check` regenerates into a\n"
      "temporary directory and fails on any difference from the committed files, so the numbers here cannot go\n"
      "stale. [gdb.md](gdb.md) stops the debug build at each step and prints the same values.\n");
}

/* ===========================================================================
 * 7b. The Chinese edition (README.zh.md): the same run, the same numbers and
 *     figures, written for Chinese readers rather than translated line by
 *     line. Every number comes from the same trace through the same helpers
 *     as the English edition.
 * ======================================================================== */

static void zh_header(void) {
    P("<!-- 由 walkthrough/mkwalk.c 根据默认运行的 trace 生成（`make walkthrough`）。请勿手工编辑：\n"
      "     CI（`make walkthrough-check`）在本文件与重新生成的结果不一致时失败。要修改请改 mkwalk.c。 -->\n\n");
    P("# DFlash 逐步讲解：用本实现的真实数值走一遍\n\n");
    P("[English edition](README.md) · 交互式浏览器：[explorer.html](explorer.html)（离线单文件，可逐轮、逐层、逐头查看）· "
      "练习题：[exercises.md](exercises.md)\n\n");
    P("原始的 DFlash KV Injection 讲解用 \"The cat sat\" 这个 prompt、只用形状走通了一轮 draft。本页沿用同样的七个\n"
      "步骤，但每一个数字都是 `dflash.c` 在植入式玩具模型（`toy_weights/walkthrough`）上真正算出来的：它们读自默认运行的\n"
      "trace（`./dflash --trace DIR`，每个张量一个 `.npy` 文件，按 trace 约定命名），张量名就写在数字旁边，\n"
      "移植者可以拿自己的张量逐个对照。想在 gdb 里停在每一步亲眼看这些 buffer，见 [gdb.md](gdb.md)。\n\n");
    P("| 设定 | 值 | 出处 |\n|---|---|---|\n");
    P("| Target 层数 L | %d | `prefill.hidden_states.0..%d`（共 L+1 个） |\n", RUN.L, RUN.L);
    P("| 隐藏维度 D | %d | |\n", RUN.D);
    P("| 注意力头数 H / 每头维度 d | %d / %d | `draft1.layers.0.self_attn.q` 的形状是 [%d, %d, %d] |\n", RUN.H, RUN.d,
      RUN.H, RUN.B, RUN.d);
    P("| Draft 层数 N | %d | `draft1.layers.0`、`draft1.layers.1` |\n", RUN.N);
    P("| target_layer_ids（k = %d） | ", RUN.k);
    for (int j = 0; j < RUN.k; j++) P("%s%d", j ? ", " : "", RUN.layer_ids[j]);
    P(" | `prefill.target_hidden` 的每一段都与 `prefill.hidden_states.{id+1}` 逐位相同 |\n");
    P("| block_size B | %d | `draft1.block_output_ids` |\n", RUN.B);
    P("| 词表 V | %d 个词 | `toy_weights/walkthrough/vocab.txt` |\n", RUN.V);
    P("| Prompt | \"");
    words_list(RUN.out, RUN.n);
    P("\"，id ");
    for (int i = 0; i < RUN.n; i++) P("%s%ld", i ? " " : "", RUN.out[i]);
    P("，位置 0..%d | `input_ids` |\n\n", RUN.n - 1);
    P("这个玩具模型是\"植入\"出来的，为的是让故事一目了然（[toy_weights/README.md](../toy_weights/README.md)）：target\n"
      "是一台 bigram 机器（在 t 之后贪心地总是输出 NEXT[t]）；draft 第 0 层有三个\"前瞻头\"：head m（m = 1, 2, 3）让距离\n"
      "锚点（anchor）m 的那个 mask 去关注锚点并把它往前复制。模型里故意埋了一个错误（在 \"on\" 之后第三个位置，draft\n"
      "以为是 \"box\"），所以第 1 轮 3 个提议只接受 2 个。其余的头、MLP 和 draft 第 1 层都是伪随机权重。全部计算用\n"
      "float32（`-ffp-contract=off`，trace 逐位可复现）。\n\n");
    P("## 整个运行一览\n\n![默认运行的时间线](timeline.svg)\n\n");
    P("| | block（位置） | draft 提议 | target 的 posterior | match / cumprod | 接受长度 | start |\n"
      "|---|---|---|---|---|---|---|\n");
    P("| prefill | ");
    for (int i = 0; i < RUN.n; i++) P("%s%s", i ? " " : "", mw(RUN.out[i]));
    P("（0..%d） | | %s | | | %d |\n", RUN.n - 1, mw(ival(get("prefill.sampled"), 0)), RUN.n);
    for (int ri = 0; ri < RUN.R; ri++) {
        const Round *r = &RUN.r[ri];
        P("| 第 %d 轮 | ", ri + 1);
        for (int i = 0; i < RUN.B; i++) P("%s%s", i ? " " : "", mw(r->block_in[i]));
        P("（%d..%d） | ", r->start, r->start + RUN.B - 1);
        for (int i = 1; i < RUN.B; i++) P("%s%s", i > 1 ? " " : "", mw(r->block[i]));
        P(" | ");
        for (int i = 0; i < RUN.B; i++) P("%s%s", i ? " " : "", mw(r->posterior[i]));
        P(" | [");
        for (int i = 0; i + 1 < RUN.B; i++) P("%s%ld", i ? "," : "", r->match[i]);
        P("] / [");
        for (int i = 0; i + 1 < RUN.B; i++) P("%s%ld", i ? "," : "", r->cumprod[i]);
        P("] | %d | %d &rarr; %d |\n", r->acc, r->start, r->start_after);
    }
    int tot = 0;
    for (int ri = 0; ri < RUN.R; ri++) tot += RUN.r[ri].acc + 1;
    P("\n输出：\"");
    words_list(RUN.out, RUN.n_out);
    P("\"（id");
    for (int i = 0; i < RUN.n_out; i++) P(" %ld", RUN.out[i]);
    P("）。%d 个新 token 只用了 %d 次 target 前向（prefill + %d 次验证）和 %d 次 draft 前向，平均每次验证得到\n"
      "%.2f 个 token。只用 target 逐个解码需要 %d 次前向（结果完全相同，这就是\"无损\"性质，`make test` 会检查）。\n\n",
      RUN.n_out - RUN.n, RUN.R + 1, RUN.R, RUN.R, (double)tot / RUN.R, RUN.n_out - RUN.n);
}

static void zh_step1(void) {
    const Tensor *th = get("prefill.target_hidden"), *lg = get("prefill.logits");
    int D = RUN.D;
    P("## Step 1：Prefill，从 target 取出 hidden states\n\n");
    P("**代码：** `target_forward`（dflash.c 第 3 节）在位置 0..%d 上处理 %d 个 prompt token，填好\n"
      "`TargetRun.hidden_states`（L+1 = %d 个 [%d, %d] 数组），并且只算最后一个位置的 logits（`logits_to_keep=1`）；\n"
      "`dflash_generate` 采样出第一个新 token；`extract_context_feature`（第 4 节）把 target_layer_ids 中每个 id 对应的\n"
      "`hidden_states[id + 1]` 在特征维拼接起来。\n\n", RUN.n - 1, RUN.n, RUN.L + 1, RUN.n, D);
    P("```math\nX_i = \\left[\\,h^{(%d)}_i \\,;\\, h^{(%d)}_i \\,;\\, h^{(%d)}_i\\,\\right] "
      "= \\left[\\,\\mathrm{hs}[%d]_i \\,;\\, \\mathrm{hs}[%d]_i \\,;\\, \\mathrm{hs}[%d]_i\\,\\right] \\in "
      "\\mathbb{R}^{%d}\n```\n\n", RUN.layer_ids[0], RUN.layer_ids[1], RUN.layer_ids[2], RUN.layer_ids[0] + 1,
      RUN.layer_ids[1] + 1, RUN.layer_ids[2] + 1, RUN.kD);
    P("注意下标要 **+1**：`hidden_states[0]` 是 embedding 的输出，第 l 层的输出是 `hidden_states[l + 1]`。\n\n");
    long a, b;
    top2(lg, 0, &a, &b);
    P("- `prefill.logits` [1, %d]：最大的是 %s（%s），第二是 %s（%s），所以 `prefill.sampled` = %ld（%s），写在位置 %d。\n",
      RUN.V, mw(a), fx(at2(lg, 0, a), 4), mw(b), fx(at2(lg, 0, b), 4), ival(get("prefill.sampled"), 0),
      mw(ival(get("prefill.sampled"), 0)), RUN.n);
    P("- `prefill.target_hidden` [%d, %d]（即 `target_hidden_raw`）。每 %d 列是一个 hidden state；在这个模型里，一个 token\n"
      "  在\"自己的维度\"（维度号 = token id）上保持一个大值，其余都很小：\n\n", RUN.n, RUN.kD, D);
    P("| 行 | 词 | ");
    for (int j = 0; j < RUN.k; j++)
        P("第 %d..%d 列 = hs[%d]（第 %d 层%s）：自身维度，RMS | ", j * D, (j + 1) * D - 1, RUN.layer_ids[j] + 1,
          RUN.layer_ids[j], RUN.layer_ids[j] + 1 == RUN.L ? "，final norm 之后" : "");
    P("\n|---|---|");
    for (int j = 0; j < RUN.k; j++) P("---|");
    P("\n");
    for (int i = 0; i < RUN.n; i++) {
        long id = RUN.out[i];
        P("| %d | %s | ", i, mw(id));
        for (int j = 0; j < RUN.k; j++)
            P("%s, %s | ", fx(at2(th, i, (long)j * D + id), 4), fx(rms_row(th, i, (long)j * D, D), 4));
        P("\n");
    }
    P("\n最后一段是 `hidden_states[%d]`，它是经过最后的 `model.norm` **之后**的输出（RMS 为 1）：transformers 用\n"
      "`last_hidden_state` 替换了最后一个 hidden state（见文末勘误）。\n\n", RUN.L);
}

static void zh_step2(void) {
    const Tensor *fc = get("draft1.fc"), *C = get("draft1.hidden_norm");
    int Lc = RUN.r[0].Lc;
    P("## Step 2：投影与归一化，得到 C\n\n");
    P("**代码：** `draft_forward`（dflash.c 第 5 节）：先 `matmul(r->fc_out, target_hidden, dm->fc, ...)`，再\n"
      "`rmsnorm_rows(r->C, r->fc_out, dm->hidden_norm, ...)`。`fc.weight` 按 [%d, %d]（out, in）存储。\n\n", RUN.D, RUN.kD);
    P("```math\nC = \\mathrm{RMSNorm}\\!\\left(X\\,W_\\mathrm{fc}^{\\top}\\right) \\in \\mathbb{R}^{%d \\times %d},"
      "\\qquad \\mathrm{RMSNorm}(x) = w \\odot \\frac{x}{\\sqrt{\\mathrm{mean}(x^2) + \\epsilon}}\n```\n\n", Lc, RUN.D);
    P("`draft1.target_hidden_raw` [%d, %d] 就是 `prefill.target_hidden`（逐位检查过），`draft1.fc` 是 [%d, %d]，\n"
      "C = `draft1.hidden_norm` [%d, %d]。这个模型里 fc 的第 0..35 行为零，所以 C 在所有 token 维度上恰好为 0；\n"
      "第 %d 维是植入的\"上下文标记\"，让上下文的 key 有自己独立的方向（见 4.2）：\n\n", Lc, RUN.kD, Lc, RUN.D, Lc,
      RUN.D, RUN.D - 1);
    P("| 行（位置） | C[0..3] | C[36..39] | C[%d] | fc 行的 RMS | C 行的 RMS |\n|---|---|---|---|---|---|\n", RUN.D - 1);
    for (int i = 0; i < Lc; i++) {
        P("| %d（%s） | ", i, mw(RUN.out[i]));
        for (int j = 0; j < 4; j++) P("%s%s", j ? " " : "", fx(at2(C, i, j), 4));
        P(" | ");
        for (int j = 36; j < 40; j++) P("%s%s", j > 36 ? " " : "", fx(at2(C, i, j), 4));
        P(" | %s | %s | %s |\n", fx(at2(C, i, RUN.D - 1), 4), fx(rms_row(fc, i, 0, RUN.D), 4),
          fx(rms_row(C, i, 0, RUN.D), 4));
    }
    P("\n同一份 C 注入到 draft 的**每一层**（4.2），各层不会再单独归一化它。\n\n");
}

static void zh_step3(void) {
    const Round *r = &RUN.r[0];
    const Tensor *ne = get("draft1.noise_embedding");
    P("## Step 3：准备 block\n\n");
    P("**代码：** `dflash_generate`（dflash.c 第 7 节）复制 `block = output_ids[start : start+B]`；`draft_forward` 用 target 的\n"
      "embedding 表查出 `noise_embedding = embed_tokens(block)`。\n\n");
    P("```math\nH^{(0)} = \\mathrm{embed}(\\mathrm{block}) \\in \\mathbb{R}^{%d \\times %d}\n```\n\n", RUN.B, RUN.D);
    P("`draft1.block_output_ids` = [");
    for (int i = 0; i < RUN.B; i++) P("%s%ld", i ? ", " : "", r->block_in[i]);
    P("] = ");
    for (int i = 0; i < RUN.B; i++) P("%s%s", i ? " " : "", mw(r->block_in[i]));
    P("，位置 %d..%d（start = %d：锚点就是 prefill 采样出的 token）。`draft1.noise_embedding` [%d, %d] 的第 t 行是\n"
      "`embed_tokens[block[t]]`，这里它在第 block[t] 维为 %s、其余为 0：\n\n", r->start, r->start + RUN.B - 1,
      r->start, RUN.B, RUN.D, fx(at2(ne, 0, r->block_in[0]), 4));
    P("| 行 | 位置 | token | 维度 | 该维的值 | 行 RMS |\n|---|---|---|---|---|---|\n");
    for (int t = 0; t < RUN.B; t++)
        P("| %d | %d | %s | %ld | %s | %s |\n", t, r->start + t, mw(r->block_in[t]), r->block_in[t],
          fx(at2(ne, t, r->block_in[t]), 4), fx(rms_row(ne, t, 0, RUN.D), 4));
    P("\n");
}

static void zh_step4(void) {
    const Round *r = &RUN.r[0];
    const Tensor *qr = get("draft1.layers.0.self_attn.q_rope"), *kr = get("draft1.layers.0.self_attn.k_rope");
    const Tensor *q = get("draft1.layers.0.self_attn.q"), *k = get("draft1.layers.0.self_attn.k");
    const Tensor *ang = get("draft1.rope_angles"), *A = get("draft1.layers.0.self_attn.attn_weights");
    const Tensor *cs = get("draft1.cos"), *sn = get("draft1.sin");
    int Lc = r->Lc, S = r->S, B = RUN.B, d = RUN.d, half = d / 2, P0 = r->draft_cache_before;
    P("## Step 4：KV Injection，draft 第 0 层\n\n");
    P("**代码：** `draft_layer`（dflash.c 第 5 节），每个 draft 层调用一次；下面 4.1 到 4.5 的编号与它注释里的编号一致。\n"
      "X 是该层对 block 的归一化输入 `a->xb = input_layernorm(h)`（第 0 层的 `input_layernorm` 权重为 1，X 就是 embedding）。\n\n");
    P("### 4.1 Q：只来自 block\n\n");
    P("```math\nQ = \\mathrm{QNorm}\\!\\left(X W_Q^{\\top}\\right) \\in \\mathbb{R}^{%d \\times %d \\times %d}\n```\n\n",
      RUN.H, B, d);
    P("`draft1.layers.0.self_attn.q` 是 [%d, %d, %d]（q_norm 之后、RoPE 之前；内存里 `LayerActs.q` 是 [B, H*d]，trace 把它\n"
      "转置成参考实现的 [H, B, d]）。植入的 head 1 展示了配方：词的 query 沿第 0 对、角度为 0；mask 的 query 角度为 -m，\n"
      "并在第 %d 维上带一个 \"sink\" 分量：\n\n", RUN.H, B, d, half - 1);
    P("| head 1 的行 | 位置 | token | q[0] | q[%d] | q[%d] | q 的模长 |\n|---|---|---|---|---|---|---|\n", half, half - 1);
    for (int t = 0; t < B; t++)
        P("| %d | %d | %s | %s | %s | %s | %s |\n", t, r->start + t, mw(r->block_in[t]), fx(at3(q, 1, t, 0), 4),
          fx(at3(q, 1, t, half), 4), fx(at3(q, 1, t, half - 1), 4), fx(sqrt(dot_row(q, 1, t, q, 1, t, d)), 4));
    {
        double q0 = at3(q, 1, 1, 0), q32 = at3(q, 1, 1, half), q31 = at3(q, 1, 1, half - 1);
        double len0 = sqrt(q0 * q0 + q32 * q32);
        P("\nq_norm 把每个头的 query 缩放到长度 sqrt(d) = 8。mask 的 query 在第 0 对上长 %s，方向 (%s, %s) = (cos 1, -sin 1)，\n"
          "即角度 -1；在 sink（第 %d 维）上是 %s。\n\n", fx(len0, 4), fx(q0 / len0, 4), fx(q32 / len0, 4), half - 1,
          fx(q31, 4));
    }
    P("### 4.2 K 和 V：上下文和 block 走同一组投影\n\n");
    P("```math\nK = \\mathrm{KNorm}\\!\\left(\\mathrm{concat}\\!\\left[C W_K^{\\top},\\; X W_K^{\\top}\\right]\\right)"
      " \\in \\mathbb{R}^{%d \\times %d \\times %d},\\qquad V = \\mathrm{concat}\\!\\left[C W_V^{\\top},\\; "
      "X W_V^{\\top}\\right]\n```\n\n", RUN.Hkv, Lc + B, d);
    P("这就是 KV Injection 的全部秘密：`draft_layer` 对第 0..%d 行（上下文 C）和第 %d..%d 行（block 的 H）用**同一个**\n"
      "`k_proj` 权重、写进**同一个** buffer，V 也一样。`draft1.layers.0.self_attn.k` 和 `.v` 都是 [%d, %d, %d]：前 %d 行携带\n"
      "target 对 \"The cat sat\" 算出的信息，后 %d 行是 draft 对自己这个 block 的认识。Q 只有 %d 行，所以上下文只提供\n"
      "key/value，不产生输出。\n\n", Lc - 1, Lc, Lc + B - 1, RUN.Hkv, Lc + B, d, Lc, B, B);
    {
        const Tensor *v = get("draft1.layers.0.self_attn.v");
        P("%d 个 key/value 及其来源，以及 head 1 的分量（植入的头里 k_norm 在第 0、%d、%d、%d 维上增益为 10；每个植入的 key\n"
          "恰好只有一个非零分量）：\n\n", S, half - 1, half, d - 1);
        P("| K/V 序号 | 位置 | 来源 | token | head 1：k[0] | k[16] | k[%d] | head 1：v 的最大分量 |\n"
          "|---|---|---|---|---|---|---|---|\n", half - 1);
        for (int j = 0; j < Lc + B; j++) {
            int ctx = j < Lc, pos = P0 + j, best = 0;
            long id = ctx ? RUN.out[pos] : r->block_in[j - Lc];
            for (int c = 1; c < d; c++) if (fabs(at3(v, 1, j, c)) > fabs(at3(v, 1, j, best))) best = c;
            char vs[96];
            if (fabs(at3(v, 1, j, best)) < 0.00005) snprintf(vs, sizeof vs, "全为 0");
            else snprintf(vs, sizeof vs, "第 %d 维 %s（%s）", best, fx(at3(v, 1, j, best), 4), mw(best));
            P("| %d | %d | %s | %s | %s | %s | %s | %s |\n", j, pos, ctx ? "C W_K（target 上下文）" : "X W_K（block）",
              mw(id), fx(at3(k, 1, j, 0), 4), fx(at3(k, 1, j, 16), 4), fx(at3(k, 1, j, half - 1), 4), vs);
        }
        P("\n伪随机的头里 64 个分量都是稠密的，比如 head 0 的 key 0 开头是 %s %s %s %s。\n\n", fx(at3(k, 0, 0, 0), 4),
          fx(at3(k, 0, 0, 1), 4), fx(at3(k, 0, 0, 2), 4), fx(at3(k, 0, 0, 3), 4));
    }
    P("### 4.3 RoPE：key 用全部位置，query 只用最后 B 个\n\n");
    P("**代码：** `draft_forward` 设 `position_ids = [cache_len, start+B)` = %d..%d，调用 `rope_cos_sin`；`draft_layer` 调用\n"
      "`apply_rotary_pos_emb`：key 用 cos/sin 的第 0..%d 行，query 用第 %d..%d 行（`cos[-q_len:]`）。\n\n",
      P0, P0 + S - 1, S - 1, Lc, S - 1);
    P("```math\n\\theta_{p,i} = p \\cdot \\mathrm{inv\\_freq}_i,\\quad \\mathrm{inv\\_freq}_i = "
      "\\mathrm{rope\\_theta}^{-2i/d},\\qquad x' = x \\odot \\cos\\theta_p + \\mathrm{rotate\\_half}(x) \\odot "
      "\\sin\\theta_p\n```\n\n");
    P("第 i 维与第 i + %d 维组成第 i 对（Hugging Face 的前后两半切分）。`draft1.rope_angles` [%d, %d]；第 0 对每个位置转\n"
      "%s 弧度，最后一对只转 %.4e：\n\n", half, S, half, fx(RUN.inv_freq_first, 4), RUN.inv_freq_last);
    P("| 位置 | 用于 | 第 0 对角度 | cos | sin | 第 %d 对角度 | cos |\n|---|---|---|---|---|---|---|\n", half - 1);
    for (int p = 0; p < S; p++)
        P("| %d | %s | %s | %s | %s | %.4e | %s |\n", P0 + p, p < Lc ? "K（上下文）" : "K 和 Q（block）",
          fx(at2(ang, p, 0), 4), fx(at2(cs, p, 0), 4), fx(at2(sn, p, 0), 4), at2(ang, p, half - 1),
          fx(at2(cs, p, half - 1), 6));
    int qrow = 5 - r->start, kj = 2 - P0, drow = 3 - P0;
    double s_rot = dot_row(qr, 0, qrow, kr, 0, kj, d), s_none = dot_row(q, 0, qrow, k, 0, kj, d), s_rel = 0;
    for (int i = 0; i < half; i++) {
        double c = at2(cs, drow, i), sv = at2(sn, drow, i), k1 = at3(k, 0, kj, i), k2 = at3(k, 0, kj, i + half);
        s_rel += at3(q, 0, qrow, i) * (k1 * c + k2 * sv) + at3(q, 0, qrow, i + half) * (k2 * c - k1 * sv);
    }
    P("\n**原讲解里的例子 q5 · k2（距离 3），用 head 0 的真实向量**（`q`、`k` 是 RoPE 之前，`q_rope`、`k_rope` 是之后；\n"
      "位置 5 的 query 是 Q 的第 %d 行，位置 2 的 key 是 K 的第 %d 行）：\n\n```text\n", qrow, kj);
    P("q_rope[0][%d] · k_rope[0][%d]                    = %10s\n", qrow, kj, fx(s_rot, 4));
    P("q_5 · R_-3 k_2（不旋转 q，k 转 -3·inv_freq）     = %10s   相同：只有相对距离 2 - 5 = -3 起作用\n", fx(s_rel, 4));
    P("q_5 · k_2（都不旋转：相当于 Q 错放在位置 0..3）  = %10s   距离 0：得分不同\n", fx(s_none, 4));
    P("score = %s × 0.125                          = %10s\n", fx(s_rot, 4), fx(s_rot * 0.125, 4));
    P("A[0][q@5][k@2]（head 0 第 q@5 行 softmax 之后）  = %10s   draft1.layers.0.self_attn.attn_weights[0][%d][%d]\n",
      fx(at3(A, 0, qrow, kj), 4), qrow, kj);
    P("```\n\n");
    P("**植入的头里的角度论证。** head m 的 mask query 在第 0 对上角度为 -m，每个词的 key 角度为 0，所以 RoPE 之后二者的得分\n"
      "正比于 cos((q_pos - k_pos) - m)：恰好在距离 m 处最大。下表是对锚点 key k@%d（%s）的得分 q'·k'/8：\n\n", r->start,
      mw(r->block_in[0]));
    P("| head | ");
    for (int t = 0; t < B; t++) P("q@%d（距离 %d） | ", r->start + t, t);
    P("q@%d 对一个 mask key |\n|---|", r->start + B - 1);
    for (int t = 0; t <= B; t++) P("---|");
    P("\n");
    for (int h = 1; h <= 3 && h < RUN.H; h++) {
        P("| %d | ", h);
        for (int t = 0; t < B; t++) P("%s | ", fx(dot_row(qr, h, t, kr, h, Lc, d) * 0.125, 2));
        P("%s |\n", fx(dot_row(qr, h, B - 1, kr, h, S - 1, d) * 0.125, 2));
    }
    P("\n只有距离恰为 m 的 mask 会把注意力集中到锚点上；其余 mask 落在 sink 上。\n\n");
    P("### 4.4 注意力：每个头 %d × %d，没有因果 mask\n\n", B, S);
    P("**代码：** `attention`（dflash.c 第 2 节），`causal = 0`；在此之前 `cache_append` 已把 %d 个新 key/value 放进 draft cache。\n\n",
      Lc + B);
    P("```math\nA_{ij} = \\frac{\\exp\\!\\left(q'^{\\top}_i k'_j / \\sqrt{d_h}\\right)}{\\sum_{m} "
      "\\exp\\!\\left(q'^{\\top}_i k'_m / \\sqrt{d_h}\\right)},\\qquad \\mathrm{out}_i = \\sum_{j} A_{ij}\\, v_j\n```\n\n");
    P("`draft1.layers.0.self_attn.attn_weights` [%d, %d, %d]，缩放 d^-0.5 = 0.125，不加 mask：block 内每一行都能看到整个\n"
      "block（包括后面的 mask）。head 1 到 3 是植入的前瞻头（head m：第 q@%d+m 行的峰值落在锚点 k@%d 上）；head 0 和\n"
      "4 到 7 是伪随机权重，注意力分散在上下文和 block 上。图中的粗线就是 KV Injection 的分界：左边的 key/value 来自\n"
      "target 的特征（C），右边来自 block 本身。\n\n", RUN.H, B, S, r->start, r->start);
    P("| | |\n|---|---|\n");
    for (int h = 0; h < RUN.H; h += 2) {
        P("| ![draft 第 1 轮，第 0 层，head %d](attn_round1_layer0_head%d.svg) |", h, h);
        if (h + 1 < RUN.H) P(" ![draft 第 1 轮，第 0 层，head %d](attn_round1_layer0_head%d.svg) |", h + 1, h + 1);
        P("\n");
    }
    P("\n<details><summary>同样的数字，文本形式（行：query q@位置；列：key k@位置；`┃` 是 KV Injection 的分界）</summary>\n\n```text\n");
    for (int h = 0; h < RUN.H; h++) {
        P("head %d（%s）\n%-13s", h, h >= 1 && h <= 3 ? "植入的前瞻头" : "伪随机权重", "");
        for (int j = 0; j < S; j++) {
            int pos = P0 + j;
            long id = j < Lc ? RUN.out[pos] : r->block_in[j - Lc];
            char lab[64];
            snprintf(lab, sizeof lab, "k@%d %s", pos, word(id));
            P("%s%11s", j == Lc ? "  ┃" : "", lab);
        }
        P("\n");
        for (int t = 0; t < B; t++) {
            char lab[64];
            snprintf(lab, sizeof lab, "q@%d %s", r->start + t, word(r->block_in[t]));
            P("  %-11s", lab);
            for (int j = 0; j < S; j++) P("%s%11s", j == Lc ? "  ┃" : "", fx(at3(A, h, t, j), 4));
            P("\n");
        }
        P("\n");
    }
    P("```\n\n</details>\n");
    P("\n每个 query 在 %d 个上下文 key 上的权重之和，也就是它通过 KV Injection 从 target 特征里拿了多少：\n\n| head | ", Lc);
    for (int t = 0; t < B; t++) P("q@%d | ", r->start + t);
    P("\n|---|");
    for (int t = 0; t < B; t++) P("---|");
    P("\n");
    for (int h = 0; h < RUN.H; h++) {
        P("| %d | ", h);
        for (int t = 0; t < B; t++) {
            double s = 0;
            for (int j = 0; j < Lc; j++) s += at3(A, h, t, j);
            P("%s | ", fx(s, 4));
        }
        P("\n");
    }
    {
        const Tensor *v = get("draft1.layers.0.self_attn.v");
        int h = 2, t = 5 - r->start;
        long tok = r->block_in[0];
        double o = 0;
        P("\n**把 out_5 展开，head 2**（前瞻 2：位置 5 的 mask 在锚点之后第 2 个）。它的 value 向量只在词自己的维度上非零，\n"
          "所以第 %ld 维（%s）能看出复制：\n\n", tok, mw(tok));
        P("| j | 位置 | 来源 | A[2][q@5][j] | v_j[%ld] | A v_j[%ld] |\n|---|---|---|---|---|---|\n", tok, tok);
        for (int j = 0; j < S; j++) {
            double w = at3(A, h, t, j), vv = at3(v, h, j, tok);
            o += w * vv;
            P("| %d | %d | %s | %s | %s | %s |\n", j, P0 + j, j < Lc ? "上下文（C）" : "block", fx(w, 4), fx(vv, 4),
              fx(w * vv, 4));
        }
        P("| | | | | out_5[%ld] = | **%s** |\n", tok, fx(o, 4));
    }
    P("\n### 4.5 输出投影\n\n");
    P("**代码：** `draft_layer`：`matmul(a->attn_output, a->attn, w->o_proj, ...)`，然后是残差和 MLP。\n"
      "`draft1.layers.0.self_attn.attn_output` 是 [%d, %d]：只有 block 的 %d 行；%d 个上下文位置只提供 key/value，不产生输出。\n"
      "head m 的 o_proj 把复制来的 token t 写到维度 look_m(t)，于是每个 mask 行都得到它该据以预测的那个词（每行最大的分量）：\n\n",
      B, RUN.D, B, Lc);
    {
        const Tensor *ao = get("draft1.layers.0.self_attn.attn_output");
        P("| 行 | 位置 | token | 最大 | 第二 | 第三 |\n|---|---|---|---|---|---|\n");
        for (int tt = 0; tt < B; tt++) {
            int top[3] = {-1, -1, -1};
            for (int c = 0; c < RUN.D; c++) {
                double x = at2(ao, tt, c);
                for (int s3 = 0; s3 < 3; s3++)
                    if (top[s3] < 0 || x > at2(ao, tt, top[s3])) {
                        for (int u = 2; u > s3; u--) top[u] = top[u - 1];
                        top[s3] = c;
                        break;
                    }
            }
            P("| %d | %d | %s |", tt, r->start + tt, mw(r->block_in[tt]));
            for (int s3 = 0; s3 < 3; s3++)
                P(" 第 %d 维 %s%s%s%s |", top[s3], fx(at2(ao, tt, top[s3]), 4), top[s3] < NVOC ? "（" : "",
                  top[s3] < NVOC ? mw(top[s3]) : "", top[s3] < NVOC ? "）" : "");
            P("\n");
        }
    }
    P("\n锚点那一行在三个植入头里都关注自己，所以三个词都收集到了；反正它在 Step 5 会被丢掉。第 1 层（`draft1.layers.1.*`，\n"
      "形状相同）是伪随机的，只做小幅修正。\n\n");
}

static void zh_step5(void) {
    const Round *r = &RUN.r[0];
    const Tensor *lg = get("draft1.logits");
    P("## Step 5：输出与 logits\n\n");
    P("**代码：** `draft_forward`：`rmsnorm_rows(r->norm, r->h, dm->norm, ...)`，再用 target 的 lm_head 算第 1..%d 行的 logits；\n"
      "`dflash_generate` 对每一行取 argmax（draft 永远是贪心的）。锚点那一行不产生提议。\n\n", RUN.B - 1);
    P("```math\n\\mathrm{draft\\_logits} = \\mathrm{norm}(h^{(N)})_{[1:]}\\, W_\\mathrm{lm}^{\\top} \\in "
      "\\mathbb{R}^{%d \\times %d}\n```\n\n", RUN.B - 1, RUN.V);
    P("| logits 行 | 位置 | argmax | logit | 第二名 | logit |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i + 1 < RUN.B; i++) {
        long a, b;
        top2(lg, i, &a, &b);
        P("| %d | %d | %s | %s | %s | %s |\n", i, r->start + i + 1, mw(a), fx(at2(lg, i, a), 4), mw(b),
          fx(at2(lg, i, b), 4));
    }
    P("\nblock 变成 ");
    for (int i = 0; i < RUN.B; i++) P("%s%s", i ? " " : "", mw(r->block[i]));
    P("。最后一个提议就是埋下的错误：在 \"on\" 之后第三个位置，draft 的 head 3 以为是 \"box\"（应为 \"mat\"），\n"
      "lm_head 把它变成 NEXT[box] = \".\"。\n\n");
}

static void zh_step6(void) {
    const Round *r = &RUN.r[0];
    const Tensor *lg = get("verify1.logits");
    int B = RUN.B;
    P("## Step 6：验证与接受\n\n");
    P("**代码：** `target_forward` 在位置 %d..%d 上处理 %d 个 block token（cache %d &rarr; %d）；`sample_row`（温度 0 时取\n"
      "argmax）给出 posterior；`acceptance_length`（dflash.c 第 7 节）做比较。\n\n", r->start, r->start + B - 1, B,
      r->start, r->start + B);
    P("```math\n\\mathrm{acc} = \\sum_{i=0}^{B-2} \\prod_{j \\le i} \\left[\\mathrm{block}_{j+1} = "
      "\\mathrm{posterior}_j\\right]\n```\n\n");
    P("| i | 位置 | 输入 token | target 的下一个（posterior[i]） | logit | draft 的猜测 block[i+1] | match | cumprod |\n"
      "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < B; i++) {
        long a, b;
        top2(lg, i, &a, &b);
        if (i + 1 < B)
            P("| %d | %d | %s | %s | %s | %s | %ld | %ld |\n", i, r->start + i, mw(r->block[i]), mw(r->posterior[i]),
              fx(at2(lg, i, a), 4), mw(r->block[i + 1]), r->match[i], r->cumprod[i]);
        else
            P("| %d | %d | %s | %s | %s | （无） | | |\n", i, r->start + i, mw(r->block[i]), mw(r->posterior[i]),
              fx(at2(lg, i, a), 4));
    }
    P("\n`verify1.match` = [");
    for (int i = 0; i + 1 < B; i++) P("%s%ld", i ? ", " : "", r->match[i]);
    P("]，`verify1.cumprod` = [");
    for (int i = 0; i + 1 < B; i++) P("%s%ld", i ? ", " : "", r->cumprod[i]);
    P("]，`verify1.acceptance_length` = **%d**：保留 ", r->acc);
    for (int i = 0; i <= r->acc; i++) P("%s%s", i ? " " : "", mw(r->block[i]));
    P("，再加上 target 自己的 %s 作为 bonus token。最后一个 posterior（%s 之后的 %s）在同一次前向里顺带算出，\n"
      "只有全部提议都被接受时才用得上。\n\n", mw(r->posterior[r->acc]), mw(r->block[B - 1]), mw(r->posterior[B - 1]));
}

static void zh_step7(void) {
    const Round *r = &RUN.r[0];
    int B = RUN.B;
    P("## Step 7：状态更新\n\n");
    P("**代码：** `dflash_generate` 轮循环的末尾（dflash.c 第 7 节）；`cache_crop`（第 2 节）。\n\n");
    P("```text\n");
    P("output_ids[start : start+acc+1] = block[:acc+1]       位置 %d..%d = ", r->start, r->start + r->acc);
    for (int i = 0; i <= r->acc; i++) P("%s%s", i ? " " : "", word(r->block[i]));
    P("\noutput_ids[start+acc+1]          = posterior[acc]     位置 %d = %s\n", r->start_after,
      word(r->posterior[r->acc]));
    P("start += acc + 1                                       start = %d + %d + 1 = %d\n", r->start, r->acc,
      r->start_after);
    P("target cache crop(start)                               %d 个位置 (0..%d) -> %d (0..%d)\n", r->start + B,
      r->start + B - 1, r->start_after, r->start_after - 1);
    P("target_hidden = extract_context_feature(...)[:acc+1]   verify1.target_hidden 的第 0..%d 行 = 位置 %d..%d\n",
      r->acc, r->start, r->start + r->acc);
    P("```\n\n");
    P("crop 丢掉了位置 %d 上被拒绝的 %s 的 K/V。bonus %s 也不在 target cache 里：它是下一个 block 的锚点，会被重新输入。\n"
      "`draft2.target_hidden_raw` 与 `verify1.target_hidden` 的前 %d 行逐位相同（已检查）。\n\n", r->start + B - 1,
      mw(r->block[B - 1]), mw(r->posterior[r->acc]), r->acc + 1);
    P("**Draft cache** 在每次 draft 前向之后立刻 crop 到 `start`，所以它只保留上下文的 K/V（block 的 K/V 从不留下），\n"
      "每轮增长 acc + 1 个位置：\n\n");
    P("| 轮 | start | 进入时的 draft cache | draft position_ids | 关注的 key 数 S | crop(start) 后的 draft cache "
      "| 验证后的 target cache | crop(新 start) 后 | 新 start |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int ri = 0; ri < RUN.R; ri++) {
        const Round *x = &RUN.r[ri];
        char dc[32];
        if (x->draft_cache_before) snprintf(dc, sizeof dc, "%d (0..%d)", x->draft_cache_before, x->draft_cache_before - 1);
        else snprintf(dc, sizeof dc, "0");
        P("| %d | %d | %s | %d..%d | %d | %d (0..%d) | %d (0..%d) | %d (0..%d) | %d |\n", ri + 1, x->start, dc,
          x->draft_cache_before, x->start + B - 1, x->S, x->start, x->start - 1, x->start + B, x->start + B - 1,
          x->start_after, x->start_after - 1, x->start_after);
    }
    P("\n注意后面几轮的 RoPE 位置：`draft2.position_ids` 从 %d 开始而不是 0。位置 0..%d 的 key 在第 1 轮已经旋转过、\n"
      "存在 cache 里；只有新的上下文行和 block 才会得到新的 key。\n\n", RUN.R > 1 ? RUN.r[1].draft_cache_before : 0,
      RUN.R > 1 ? RUN.r[1].draft_cache_before - 1 : 0);
}

static void zh_round2(void) {
    if (RUN.R < 2) return;
    const Round *r = &RUN.r[1];
    int B = RUN.B;
    P("## 第 2 轮\n\n");
    P("block ");
    for (int i = 0; i < B; i++) P("%s%s", i ? " " : "", mw(r->block_in[i]));
    P(" 位于 %d..%d；draft 拿到 %d 个新的上下文行（位置 %d..%d：", r->start, r->start + B - 1, r->Lc,
      r->draft_cache_before, r->draft_cache_before + r->Lc - 1);
    for (int i = 0; i < r->Lc; i++) P("%s%s", i ? " " : "", mw(RUN.out[r->draft_cache_before + i]));
    P("），cache 里已有 %d 个，所以 query 关注 S = %d 个 key（`draft2.layers.0.self_attn.attn_weights` 是 [%d, %d, %d]）。\n\n",
      r->draft_cache_before, r->S, RUN.H, B, r->S);
    {
        const Tensor *A = get("draft2.layers.0.self_attn.attn_weights");
        P("植入的头再次找到锚点 k@%d（每个 query 权重最大的 key）：\n\n| head | ", r->start);
        for (int t = 0; t < B; t++) P("q@%d 关注 | ", r->start + t);
        P("\n|---|");
        for (int t = 0; t < B; t++) P("---|");
        P("\n");
        for (int h = 1; h <= 3 && h < RUN.H; h++) {
            P("| %d | ", h);
            for (int t = 0; t < B; t++) {
                int best = 0, last, n_top = 0;
                for (int j = 1; j < r->S; j++) if (at3(A, h, t, j) > at3(A, h, t, best)) best = j;
                double top = at3(A, h, t, best);
                last = best;
                for (int j = 0; j < r->S; j++)
                    if (at3(A, h, t, j) > top - 1e-3) { n_top++; last = j; }
                if (n_top == 1) P("k@%d（%s） | ", best, fx(top, 4));
                else P("k@%d..%d（各 %s） | ", best, last, fx(top, 4));
            }
            P("\n");
        }
        P("\n");
    }
    P("Draft 提议 ");
    for (int i = 1; i < B; i++) P("%s%s", i > 1 ? " " : "", mw(r->block[i]));
    P("；target 的 posterior ");
    for (int i = 0; i < B; i++) P("%s%s", i ? " " : "", mw(r->posterior[i]));
    P("；match [");
    for (int i = 0; i + 1 < B; i++) P("%s%ld", i ? ", " : "", r->match[i]);
    P("]，cumprod [");
    for (int i = 0; i + 1 < B; i++) P("%s%ld", i ? ", " : "", r->cumprod[i]);
    P("]，接受长度 **%d**：全部接受，再加 bonus %s（位置 %d）；start %d &rarr; %d。\n", r->acc,
      mw(r->posterior[r->acc]), r->start_after, r->start, r->start_after);
    P("%s 是停止符，循环结束：`output_ids` 在它之后截断（共 %d 个 id）。\n\n", mw(r->posterior[r->acc]), RUN.n_out);
}

static void zh_errata(void) {
    const Round *r = &RUN.r[0];
    int B = RUN.B;
    long S2 = (long)dim(get("verify2.layers.0.self_attn.attn_weights"), 2);
    P("## 勘误：原讲解的文字与代码行为不一致的地方\n\n");
    P("以公开的参考代码（z-lab/dflash 配合 transformers）为准；`NOTES.md` 也列出了这些。\n\n");
    P("1. **Step 7，下一个 start。** 原文说第 1 轮之后 `start` 变成 7。代码是 `start += acc + 1` = %d + %d + 1 = **%d**：\n"
      "   bonus %s 写在位置 %d，它是下一个 block 的锚点，block 位于 %d..%d（`verify2.position_ids` 从 %d 开始）。\n",
      r->start, r->acc, r->start_after, mw(r->posterior[r->acc]), r->start_after, r->start_after,
      r->start_after + B - 1, RUN.R > 1 ? RUN.r[1].start : r->start_after);
    P("2. **Step 7，crop。** 原文说 `crop(start)` 保留位置 0..%d。`crop(n)` 保留前 n 个位置，所以 `crop(%d)` 保留\n"
      "   **0..%d**（第 2 轮验证关注 %d + %d = %ld 个 key：`verify2.layers.0.self_attn.attn_weights` 是 [%d, %d, %ld]）。\n",
      r->start_after, r->start_after, r->start_after - 1, r->start_after, B, S2, RUN.H, B, S2);
    P("3. **Step 7，下一轮的上下文。** \"只有 pos 3、4、5（3 个被接受的位置）\" 位置是对的，但它们是锚点加上 %d 个被接受的\n"
      "   draft token：验证过的 block 的 `[:acc+1]`。\n", r->acc);
    P("4. **Step 2，W_fc 的形状。** 原文写 W_fc ∈ R^{1536×512}；`nn.Linear` 把 `fc.weight` 存成 [%d, %d]（out, in），计算 x W^T。\n",
      RUN.D, RUN.kD);
    P("5. **Step 1，\"第 3/7/11 层\"。** 代码读的是 `hidden_states[id + 1]` = `hidden_states[%d]`、`[%d]`、`[%d]`（第 0 项是\n"
      "   embedding），而且最后一项是经过最后 `model.norm` **之后**的输出（transformers 用 `last_hidden_state` 替换了它）：\n"
      "   Step 1 表里它那一段的 RMS 是 1。直接 hook 第 %d 层原始输出的移植版本恰好在这里出现差异。\n\n",
      RUN.layer_ids[0] + 1, RUN.layer_ids[1] + 1, RUN.layer_ids[2] + 1, RUN.layer_ids[2]);
}

static void zh_footer(void) {
    P("## 本页是怎么生成的\n\n");
    P("`make walkthrough` 编译 `./dflash` 和玩具权重，把默认运行 trace 到一个临时目录\n"
      "（`./dflash --weights toy_weights/walkthrough --trace DIR`），再在上面运行 `walkthrough/mkwalk`，它写出英文版\n"
      "README.md、本页 README.zh.md、`timeline.svg` 和八张 `attn_round1_layer0_head*.svg`，并交叉检查文中陈述的事实\n"
      "（target_layer_ids、q5 · k2 恒等式、重算得分的 softmax、每轮传递的上下文、各轮的簿记）。两个版本的每个数字都来自\n"
      "同一个 trace。`make walkthrough-check` 重新生成到临时目录并与提交的文件比较，有任何差异就失败，所以这里的数字\n"
      "不会过时。[gdb.md](gdb.md) 在调试版本中停在每一步，打印同样的值。\n");
}

/* ===========================================================================
 * 8. main
 * ======================================================================== */

typedef struct {
    char name[64];
    char *data;
    size_t len;
} Page;

/* dir/name, written beside and renamed into place (files.c's OutFile) */
static int write_file(const char *dir, const Page *o) {
    char *path = path_join(dir, o->name);
    OutFile *f = path ? out_open(path, "mkwalk") : NULL;
    free(path);
    if (!f) return -1;
    fwrite(o->data, 1, o->len, out_stream(f));
    return out_commit(f);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: mkwalk TRACE_DIR VOCAB_TXT OUT_DIR [DFLASH_C (default dflash.c)]\n");
        return 2;
    }
    if (trace_load(&TR, argv[1]) != 0 || vocab_load(argv[2]) != 0 ||
        source_load(argc == 5 ? argv[4] : "dflash.c") != 0) {
        fprintf(stderr, "mkwalk: %s\n", dflash_errmsg);
        return 1;
    }
    read_run();
    if (!bad && (RUN.R < 1 || RUN.k != 3 || RUN.H < 4 || RUN.n < 3 || RUN.B > 16))
        flag_bad("this is not the walkthrough run (rounds %d, k %d, heads %d, prompt %d, block %d)", RUN.R, RUN.k,
                 RUN.H, RUN.n, RUN.B);
    Page out[12];
    int n_out = 0;
    if (!bad) {
        /* README.md */
        Page *o = &out[n_out++];
        snprintf(o->name, sizeof o->name, "README.md");
        md = open_memstream(&o->data, &o->len);
        if (!md) { fprintf(stderr, "mkwalk: out of memory\n"); return 1; }
        header();
        step1();
        step2();
        step3();
        step4_qkv();
        step4_rope();
        step4_attn();
        step5();
        step6();
        step7();
        round2();
        errata();
        footer();
        fclose(md);
        /* README.zh.md: the Chinese edition, from the same run */
        o = &out[n_out++];
        snprintf(o->name, sizeof o->name, "README.zh.md");
        md = open_memstream(&o->data, &o->len);
        if (!md) { fprintf(stderr, "mkwalk: out of memory\n"); return 1; }
        zh_header();
        zh_step1();
        zh_step2();
        zh_step3();
        zh_step4();
        zh_step5();
        zh_step6();
        zh_step7();
        zh_round2();
        zh_errata();
        zh_footer();
        fclose(md);
        /* figures */
        for (int h = 0; h < RUN.H && h < 8; h++) {
            o = &out[n_out++];
            snprintf(o->name, sizeof o->name, "attn_round1_layer0_head%d.svg", h);
            FILE *f = open_memstream(&o->data, &o->len);
            if (!f) { fprintf(stderr, "mkwalk: out of memory\n"); return 1; }
            svg_heatmap(f, h);
            fclose(f);
        }
        o = &out[n_out++];
        snprintf(o->name, sizeof o->name, "timeline.svg");
        FILE *f = open_memstream(&o->data, &o->len);
        if (!f) { fprintf(stderr, "mkwalk: out of memory\n"); return 1; }
        svg_timeline(f);
        fclose(f);
    }
    int rc = 0;
    if (bad) {
        fprintf(stderr, "mkwalk: %s%s; nothing written\n", badmsg, bad > 1 ? " (and more)" : "");
        rc = 1;
    } else {
        for (int i = 0; i < n_out && rc == 0; i++)
            if (write_file(argv[3], &out[i]) != 0) { fprintf(stderr, "mkwalk: %s\n", dflash_errmsg); rc = 1; }
        if (rc == 0) printf("mkwalk: wrote %d files to %s\n", n_out, argv[3]);
    }
    for (int i = 0; i < n_out; i++) free(out[i].data);
    trace_free(&TR);
    free(SRC);
    for (int i = 0; i < NVOC; i++) free(VOC[i]);
    free(VOC);
    return rc;
}
