/* mkwalk.c - regenerate walkthrough/README.md and README.zh.md from their
 * templates and a trace of the default run (`./dflash --trace DIR`).
 *
 *   usage: mkwalk TRACE_DIR VOCAB_TXT OUT_DIR [TEMPLATE_DIR [DFLASH_C]]
 *
 * Reads DIR/trace.jsonl and the .npy files it lists (format 1.0, '<f4',
 * '<f8' or '<i8', C order: what trace.c writes), and the vocabulary, fills
 * TEMPLATE_DIR/README.md.in and README.zh.md.in (default walkthrough/tools;
 * section 6 says how) and writes OUT_DIR/README.md and OUT_DIR/README.zh.md.
 * The C lines the pages quote are read from DFLASH_C (default: dflash.c in
 * the current directory; section 4b). Everything is built in memory first;
 * if any tensor is missing, any cross-check fails or a quoted line is no
 * longer in dflash.c, nothing is written and the exit status is 1. A trace
 * that is not the walkthrough run (another prompt, block size or weight
 * set) is refused with exit status 2: the prose tells that run's story and
 * would be false for another; `dflash figures` draws the figures of any run.
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
#include "dflash.h"
#include "formats/files.h"
#include "formats/tracenames.h"
#include "formats/load.h"
#include "formats/manifest.h"

#include <ctype.h>
#include <sys/stat.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_CHECK_WHAT "cross-check failed"
#define PAGE_VOCAB   /* pagevars.h: words_load, word, mw, pwords, words_joined */
#include "walkthrough/tools/pagevars.h"   /* flag_bad, check, md, def, the template's lines, the pages' files: shared with the other generators */

/* ===========================================================================
 * 1. Errors. Loading functions return -1 after writing dflash_errmsg (as
 *    formats/files.c's readers do); the writers
 *    never fail on their own: a missing tensor or a failed cross-check sets
 *    `bad` (with a message) and main() refuses to write anything.
 * ======================================================================== */



/* ===========================================================================
 * 2. The tensors: read with formats/files.c's .npy reader (npy_read_values).
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

/* One .npy file into t (name set by the caller): formats/files.c's reader, the
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

/* dir's trace.jsonl through formats/manifest.c (the reader the tracer and diff use),
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

/* check: pagevars.h */

/* ===========================================================================
 * 4. Vocabulary and token words.
 * ======================================================================== */

/* VOC, words_load, word, mw, pwords, words_joined: pagevars.h (PAGE_VOCAB) */

/* ===========================================================================
 * 4b. Code quotes. Every line of C the pages show is read out of dflash.c
 *     when they are generated, never typed here. A template line
 *         @CODE fn|first|last@
 *     quotes, from the function fn (its definition starts at column 0 and
 *     its body ends at the first line that is just "}"), the contiguous
 *     lines from the one containing `first` through the end of the
 *     statement containing `last` (parentheses and braces balanced; `last`
 *     may be omitted: the statement of `first`). The lines are copied as
 *     they are (common indentation removed) under a comment
 *     "// dflash.c:FIRST-LAST", so the location is generated too. No such
 *     function, a needle found 0 or 2+ times in it, or `last` before
 *     `first`: nothing is written (flag_bad), so a quote cannot outlive the
 *     code it quotes.
 * ======================================================================== */

static char *SRC;          /* dflash.c (or train/train.c while a @TCODE line is quoted) */
static const char *SRC_PATH;
static const char *SRC_NAME;  /* its name as the pages print it: dflash.c */

static int source_load(const char *path) {
    size_t len;
    if (file_read_all(path, &SRC, &len) != 0) return -1;  /* NUL-terminated */
    SRC_PATH = path;
    const char *slash = strrchr(path, '/');
    SRC_NAME = slash ? slash + 1 : path;
    return 0;
}

/* The second source, train/train.c: a template line @TCODE fn|first|last@ quotes
 * it the same way (the training chapter). swap_source() exchanges the two. */
static char *SRC2;
static const char *SRC2_PATH, *SRC2_NAME;
static void swap_source(void) {
    char *s = SRC;
    const char *p = SRC_PATH, *n = SRC_NAME;
    SRC = SRC2, SRC_PATH = SRC2_PATH, SRC_NAME = SRC2_NAME;
    SRC2 = s, SRC2_PATH = p, SRC2_NAME = n;
}

/* the start of the line after p (or the terminating NUL) */
static const char *next_line(const char *p) {
    const char *nl = strchr(p, '\n');
    return nl ? nl + 1 : p + strlen(p);
}

/* 1-based line number of the line starting at p */
static int line_no(const char *p) {
    int n = 1;
    for (const char *s = SRC; s < p; s++) n += *s == '\n';
    return n;
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

/* the one line of [body, end) containing needle, or NULL (flag_bad) */
static const char *find_line(const char *fn, const char *body, const char *end, const char *needle) {
    const char *found = NULL;
    int n_found = 0;
    for (const char *l = body; l < end; l = next_line(l)) {
        const char *eol = next_line(l), *p = strstr(l, needle);
        if (p && p < eol) { if (!found) found = l; n_found++; }
    }
    if (n_found != 1) {
        flag_bad("%s: function %s has %d lines containing \"%s\" (a quote needs exactly one)", SRC_PATH, fn,
                 n_found, needle);
        return NULL;
    }
    return found;
}

/* Write one quote (see above) to out; returns 0, or -1 after flag_bad. */
static int quote(FILE *out, const char *fn, const char *first, const char *last) {
    const char *body, *end;
    if (!SRC || find_function(fn, &body, &end) != 0) {
        flag_bad("%s: no function %s (quoted by the walkthrough)", SRC_PATH ? SRC_PATH : "dflash.c", fn);
        return -1;
    }
    const char *a = find_line(fn, body, end, first), *b = last && *last ? find_line(fn, body, end, last) : a;
    if (!a || !b) return -1;
    if (b < a) { flag_bad("%s: in %s, \"%s\" comes before \"%s\"", SRC_PATH, fn, last, first); return -1; }
    /* extend b to the end of its statement: parentheses and braces opened since a are closed */
    int paren = 0, brace = 0;
    const char *stop = NULL;
    for (const char *l = a; l < end; l = next_line(l)) {
        const char *eol = next_line(l);
        int in_comment = 0;
        for (const char *p = l; p < eol; p++) {
            if (in_comment) { if (p[0] == '*' && p[1] == '/') { in_comment = 0; p++; } continue; }
            if (p[0] == '/' && p[1] == '*') { in_comment = 1; p++; continue; }
            if (p[0] == '/' && p[1] == '/') break;
            if (*p == '"' || *p == '\'') {  /* skip a literal */
                char qc = *p;
                for (p++; p < eol && *p != qc; p++) if (*p == '\\') p++;
                continue;
            }
            paren += (*p == '(') - (*p == ')');
            brace += (*p == '{') - (*p == '}');
        }
        if (l >= b && paren <= 0 && brace <= 0) { stop = eol; break; }
    }
    if (!stop) { flag_bad("%s: in %s, the statement of \"%s\" does not end", SRC_PATH, fn, last ? last : first); return -1; }
    /* common indentation */
    int indent = 1 << 30;
    for (const char *l = a; l < stop; l = next_line(l)) {
        int n = 0;
        while (l[n] == ' ') n++;
        if (l[n] != '\n' && n < indent) indent = n;
    }
    int la = line_no(a), lb = line_no(stop) - 1;
    if (la == lb) fprintf(out, "// %s:%d\n", SRC_NAME, la);
    else fprintf(out, "// %s:%d-%d\n", SRC_NAME, la, lb);
    for (const char *l = a; l < stop; l = next_line(l)) {
        const char *eol = next_line(l);
        const char *p = l;
        for (int n = 0; n < indent && *p == ' '; n++) p++;
        fwrite(p, 1, (size_t)(eol - p), out);
    }
    return 0;
}

/* Rotating static buffers, so a few formatted strings can sit in one printf. */
static char *rbuf(void) {
    static char bufs[16][128];
    static int k;
    return bufs[k++ % 16];
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
    const Tensor *th = get("prefill." TN_TARGET_HIDDEN);
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
    const Tensor *q = get("draft1.layers.0." TN_Q);
    RUN.H = (int)dim(q, 0);
    RUN.d = (int)dim(q, 2);
    RUN.Hkv = (int)dim(get("draft1.layers.0." TN_K), 0);
    while (find("draft1.layers.%d", RUN.N)) RUN.N++;
    RUN.B = (int)dim(get("draft1." TN_BLOCK_OUTPUT_IDS), 0);
    RUN.V = (int)dim(get("draft1." TN_LOGITS), 1);
    check(RUN.B >= 2 && RUN.B <= 16, "block size %d in 2..16", RUN.B);
    const Tensor *ang = get("draft1." TN_ROPE_ANGLES);
    RUN.inv_freq_first = at2(ang, 1, 0) - at2(ang, 0, 0);
    RUN.inv_freq_last = at2(ang, 1, RUN.d / 2 - 1) - at2(ang, 0, RUN.d / 2 - 1);

    while (RUN.R < 16 && find("draft%d." TN_BLOCK_OUTPUT_IDS, RUN.R + 1)) RUN.R++;
    int B = RUN.B;
    for (int ri = 0; ri < RUN.R; ri++) {
        Round *r = &RUN.r[ri];
        int rn = ri + 1;
        const Tensor *pos = get("verify%d." TN_POSITION_IDS, rn);
        r->start = (int)ival(pos, 0);
        r->acc = (int)ival(get("verify%d." TN_ACCEPTANCE, rn), 0);
        r->start_after = r->start + r->acc + 1;
        r->Lc = (int)dim(get("draft%d." TN_TARGET_HIDDEN_RAW, rn), 0);
        r->draft_cache_before = (int)ival(get("draft%d." TN_POSITION_IDS, rn), 0);
        r->S = (int)dim(get("draft%d.layers.0." TN_ATTN_WEIGHTS, rn), 2);
        for (int i = 0; i < B; i++) {
            r->block_in[i] = ival(get("draft%d." TN_BLOCK_OUTPUT_IDS, rn), (size_t)i);
            r->block[i] = ival(get("verify%d." TN_INPUT_IDS, rn), (size_t)i);
            r->posterior[i] = ival(get("verify%d." TN_SAMPLED, rn), (size_t)i);
        }
        for (int i = 0; i + 1 < B; i++) {
            r->match[i] = ival(get("verify%d." TN_MATCH, rn), (size_t)i);
            r->cumprod[i] = ival(get("verify%d." TN_CUMPROD, rn), (size_t)i);
            check(r->block[i + 1] == ival(get("draft%d." TN_SAMPLED, rn), (size_t)i),
                  "round %d: verify input %d is the draft's proposal", rn, i + 1);
        }
        /* the bookkeeping the update step relies on */
        check(r->S == r->draft_cache_before + r->Lc + B, "round %d: S = cache + Lc + B", rn);
        check((int)ival(get("draft%d." TN_POSITION_IDS, rn), (size_t)(r->Lc + B - 1)) == r->start + B - 1,
              "round %d: draft position_ids end at start + B - 1", rn);
        if (ri > 0) {
            const Round *p = &RUN.r[ri - 1];
            check(r->start == p->start_after, "round %d starts where round %d ended", rn, rn - 1);
            check(r->draft_cache_before == p->start, "round %d: draft cache = previous start", rn);
            check(r->Lc == p->acc + 1, "round %d: Lc = previous acc + 1", rn);
            check(same_rows(get("verify%d." TN_TARGET_HIDDEN, rn - 1), 0, get("draft%d." TN_TARGET_HIDDEN_RAW, rn),
                            r->Lc, RUN.kD),
                  "draft%d.target_hidden_raw = verify%d.target_hidden[:acc+1]", rn, rn - 1);
        } else {
            check(same_rows(get("prefill." TN_TARGET_HIDDEN), 0, get("draft1." TN_TARGET_HIDDEN_RAW), RUN.n, RUN.kD),
                  "draft1.target_hidden_raw = prefill.target_hidden");
        }
    }
    const Tensor *o = get("output_ids");
    RUN.n_out = (int)dim(o, 0) < 64 ? (int)dim(o, 0) : 64;
    for (int i = 0; i < RUN.n_out; i++) RUN.out[i] = ival(o, (size_t)i);
}

/* ===========================================================================
 * 6. The pages. walkthrough/tools/README.md.in (English) and README.zh.md.in
 *    (Chinese) hold the prose; a template line that is exactly @NAME@
 *    (capitals) is replaced by the block writer NAME below (tables, math,
 *    text blocks: the same writers for both editions, so both show the same
 *    tables, code and formulas), a line @CODE fn|first|last@ by a quote of
 *    dflash.c (section 4b; consecutive @CODE lines share one ```c block),
 *    and @name@ anywhere in a line by a value from values(). A name that
 *    nothing defines fails the page. T(en, zh) picks the edition's words
 *    for the few table headers and cells that have words.
 * ======================================================================== */

/* md, P, ZH, T: pagevars.h */

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

/* ---- values: @name@ ---------------------------------------------------- */





/* a list of token words, each in a code span: `on` `the` `mat` */
static const char *mwords(const long *ids, int n) { return words_joined(ids, n, mw); }

/* q@5 . k@2 of head 0 (the original walkthrough's example), computed three ways */
static struct { int qrow, kj; double rot, rel, none, a; } Q5K2;
/* the planted heads' scores against the anchor (Step 4.3) */
static struct { double self, peak, off1, off2, sink, ctx; } ANG;

static void compute_checks(void) {
    const Round *r = &RUN.r[0];
    const Tensor *cs = get("draft1.cos"), *sn = get("draft1.sin");
    const Tensor *q = get("draft1.layers.0." TN_Q), *k = get("draft1.layers.0." TN_K);
    const Tensor *qr = get("draft1.layers.0." TN_Q_ROPE), *kr = get("draft1.layers.0." TN_K_ROPE);
    const Tensor *A = get("draft1.layers.0." TN_ATTN_WEIGHTS);
    int S = r->S, d = RUN.d, half = d / 2, P0 = r->draft_cache_before, Lc = r->Lc;
    int qrow = 5 - r->start, kj = 2 - P0;
    double s_rot = dot_row(qr, 0, qrow, kr, 0, kj, d);
    int drow = 5 - 2 - P0;  /* row of the cos/sin table for angle 3 */
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
    Q5K2.qrow = qrow;
    Q5K2.kj = kj;
    Q5K2.rot = s_rot;
    Q5K2.rel = s_rel;
    Q5K2.none = s_none;
    Q5K2.a = at3(A, 0, qrow, kj);
    int anchor = Lc;
    ANG.self = dot_row(qr, 1, 0, kr, 1, anchor, d) * 0.125;
    ANG.peak = dot_row(qr, 1, 1, kr, 1, anchor, d) * 0.125;
    ANG.off1 = dot_row(qr, 1, 2, kr, 1, anchor, d) * 0.125;
    ANG.off2 = dot_row(qr, 1, 3, kr, 1, anchor, d) * 0.125;
    ANG.sink = dot_row(qr, 1, RUN.B - 1, kr, 1, S - 1, d) * 0.125;
    ANG.ctx = 0;
    for (int h = 1; h <= 3 && h < RUN.H; h++)
        for (int t = 0; t < RUN.B; t++)
            for (int j = 0; j < Lc; j++) {
                double x = fabs(dot_row(qr, h, t, kr, h, j, d) * 0.125);
                if (x > ANG.ctx) ANG.ctx = x;
            }
}

/* Every @name@ the templates use (the same values for both editions, apart
 * from the few sentences in T()). */
static void train_values(void);
static void values(void) {
    train_values();
    const Round *r = &RUN.r[0], *r2 = &RUN.r[RUN.R > 1 ? 1 : 0];
    int B = RUN.B, Lc = r->Lc, S = r->S, half = RUN.d / 2;
    def("n", "%d", RUN.n);
    def("n_1", "%d", RUN.n - 1);
    def("L", "%d", RUN.L);
    def("L1", "%d", RUN.L + 1);
    def("D", "%d", RUN.D);
    def("D_1", "%d", RUN.D - 1);
    def("kD", "%d", RUN.kD);
    def("H", "%d", RUN.H);
    def("Hkv", "%d", RUN.Hkv);
    def("d", "%d", RUN.d);
    def("d_1", "%d", RUN.d - 1);
    def("half", "%d", half);
    def("half_1", "%d", half - 1);
    def("sqrt_d", "%s", fx(sqrt((double)RUN.d), 0));
    def("scale", "%s", fx(1 / sqrt((double)RUN.d), 3));
    def("B", "%d", B);
    def("B_1", "%d", B - 1);
    def("V", "%d", RUN.V);
    def("rounds", "%d", RUN.R);
    def("target_forwards", "%d", RUN.R + 1);
    def("new_tokens", "%d", RUN.n_out - RUN.n);
    def("n_out", "%d", RUN.n_out);
    def("prompt_words", "%s", pwords(RUN.out, RUN.n));
    def("output_words", "%s", pwords(RUN.out, RUN.n_out));
    def("output_ids", "%s", ints(RUN.out, RUN.n_out, " "));
    int tot = 0;
    for (int ri = 0; ri < RUN.R; ri++) tot += RUN.r[ri].acc + 1;
    def("tau", "%s", fx((double)tot / RUN.R, 2));
    for (int j = 0; j < 3; j++) {
        char nm[8];
        snprintf(nm, sizeof nm, "hs%d", j);
        def(nm, "%d", RUN.layer_ids[j] + 1);
        snprintf(nm, sizeof nm, "id%d", j);
        def(nm, "%d", RUN.layer_ids[j]);
    }
    /* Step 1 */
    {
        long a, b, s = ival(get("prefill." TN_SAMPLED), 0);
        const Tensor *lg = get("prefill." TN_LOGITS);
        top2(lg, 0, &a, &b);
        def("p_top", "%s", mw(a));
        def("p_top_logit", "%s", fx(at2(lg, 0, a), 4));
        def("p_second", "%s", mw(b));
        def("p_second_logit", "%s", fx(at2(lg, 0, b), 4));
        def("p_sampled_id", "%ld", s);
        def("p_sampled", "%s", mw(s));
    }
    /* Steps 2-4 */
    def("Lc", "%d", Lc);
    def("Lc_1", "%d", Lc - 1);
    def("P", "%d", Lc + B);
    def("P_1", "%d", Lc + B - 1);
    def("S", "%d", S);
    def("S_1", "%d", S - 1);
    def("P0", "%d", r->draft_cache_before);
    def("S_last", "%d", r->draft_cache_before + S - 1);
    def("start", "%d", r->start);
    def("start_B", "%d", r->start + B);
    def("block_last", "%d", r->start + B - 1);
    def("block_ids", "%s", ints(r->block_in, B, ", "));
    def("block_words", "%s", mwords(r->block_in, B));
    def("anchor", "%s", mw(r->block_in[0]));
    def("anchor_id", "%ld", r->block_in[0]);
    def("embed_value", "%s", fx(at2(get("draft1.noise_embedding"), 0, r->block_in[0]), 4));
    {
        const Tensor *q = get("draft1.layers.0." TN_Q), *k = get("draft1.layers.0." TN_K);
        double q0 = at3(q, 1, 1, 0), qh = at3(q, 1, 1, half), qs = at3(q, 1, 1, half - 1);
        double len0 = sqrt(q0 * q0 + qh * qh);
        def("mask_len0", "%s", fx(len0, 4));
        def("mask_dir0", "%s", fx(q0 / len0, 4));
        def("mask_dir1", "%s", fx(qh / len0, 4));
        def("mask_sink", "%s", fx(qs, 4));
        def("k0_start", "%s %s %s %s", fx(at3(k, 0, 0, 0), 4), fx(at3(k, 0, 0, 1), 4), fx(at3(k, 0, 0, 2), 4),
            fx(at3(k, 0, 0, 3), 4));
    }
    def("inv_freq_first", "%s", fx(RUN.inv_freq_first, 4));
    def("inv_freq_last", "%.4e", RUN.inv_freq_last);
    def("q5_row", "%d", Q5K2.qrow);
    def("k2_row", "%d", Q5K2.kj);
    def("s_self", "%s", fx(ANG.self, 2));
    def("s_peak", "%s", fx(ANG.peak, 2));
    def("s_off1", "%s", fx(ANG.off1, 2));
    def("s_off2", "%s", fx(ANG.off2, 2));
    def("s_sink", "%s", fx(ANG.sink, 2));
    if (ANG.ctx == 0) def("s_ctx", "%s", T("exactly 0", "恰好为 0"));
    else def("s_ctx", T("at most %.2e in magnitude", "绝对值至多 %.2e"), ANG.ctx);
    {
        /* the planted heads' weight on keys after the query's own position, times the largest |v| there */
        const Tensor *A = get("draft1.layers.0." TN_ATTN_WEIGHTS), *v = get("draft1.layers.0." TN_V);
        double mass = 0;
        for (int h = 1; h <= 3 && h < RUN.H; h++)
            for (int t = 0; t < B; t++)
                for (int j = Lc + t + 1; j < S; j++) {
                    double vmax = 0;
                    for (int c = 0; c < RUN.d; c++) if (fabs(at3(v, h, j, c)) > vmax) vmax = fabs(at3(v, h, j, c));
                    mass += at3(A, h, t, j) * vmax;
                }
        def("future_mass", "%s", fx(mass, 4));
    }
    /* Steps 5-7 */
    def("verify_block", "%s", mwords(r->block, B));
    def("match1", "%s", ints(r->match, B - 1, ", "));
    def("cumprod1", "%s", ints(r->cumprod, B - 1, ", "));
    def("acc1", "%d", r->acc);
    def("tau1", "%d", r->acc + 1);
    def("kept1", "%s", mwords(r->block, r->acc + 1));
    def("bonus1", "%s", mw(r->posterior[r->acc]));
    def("last_post1", "%s", mw(r->posterior[B - 1]));
    def("last_in1", "%s", mw(r->block[B - 1]));
    def("rejected1", "%s", mw(r->block[B - 1]));
    def("draft2_pos0", "%d", r2->draft_cache_before);
    def("draft2_pos0_1", "%d", r2->draft_cache_before - 1);
    /* round 2 */
    def("block2_words", "%s", mwords(r2->block_in, B));
    def("start2", "%d", r2->start);
    def("start2_1", "%d", r2->start - 1);
    def("block2_last", "%d", r2->start + B - 1);
    def("Lc2", "%d", r2->Lc);
    def("ctx2_first", "%d", r2->draft_cache_before);
    def("ctx2_last", "%d", r2->draft_cache_before + r2->Lc - 1);
    def("ctx2_words", "%s", mwords(RUN.out + r2->draft_cache_before, r2->Lc));
    def("S2", "%d", r2->S);
    def("proposals2", "%s", mwords(r2->block + 1, B - 1));
    def("posterior2", "%s", mwords(r2->posterior, B));
    def("match2", "%s", ints(r2->match, B - 1, ", "));
    def("cumprod2", "%s", ints(r2->cumprod, B - 1, ", "));
    def("acc2", "%d", r2->acc);
    def("tau2", "%d", r2->acc + 1);
    def("bonus2", "%s", mw(r2->posterior[r2->acc]));
    def("start2_after", "%d", r2->start_after);
    def("S_verify2", "%ld", (long)dim(get("verify2.layers.0." TN_ATTN_WEIGHTS), 2));
}

/* ---- block writers: @NAME@ --------------------------------------------- */

static void w_settings(void) {
    P("%s", T("| setting | value | where it comes from |\n|---|---|---|\n", "| 设定 | 值 | 出处 |\n|---|---|---|\n"));
    P(T("| target layers L | %d | `prefill.hidden_states.0..%d` (L+1 entries) |\n",
        "| Target 层数 L | %d | `prefill.hidden_states.0..%d`（共 L+1 个） |\n"), RUN.L, RUN.L);
    P(T("| hidden size D | %d | |\n", "| 隐藏维度 D | %d | |\n"), RUN.D);
    P(T("| heads H / Hkv, head size d | %d / %d, %d | `draft1.layers.0.self_attn.q` is [%d, %d, %d], `.k` [%d, %d, %d] |\n",
        "| 注意力头数 H / Hkv，每头维度 d | %d / %d，%d | `draft1.layers.0.self_attn.q` 的形状是 [%d, %d, %d]，`.k` 是 [%d, %d, %d] |\n"),
      RUN.H, RUN.Hkv, RUN.d, RUN.H, RUN.B, RUN.d, RUN.Hkv, RUN.r[0].Lc + RUN.B, RUN.d);
    P(T("| draft layers N | %d | `draft1.layers.0` .. `draft1.layers.%d` |\n",
        "| Draft 层数 N | %d | `draft1.layers.0` .. `draft1.layers.%d` |\n"), RUN.N, RUN.N - 1);
    P(T("| target_layer_ids (k = %d) | ", "| target_layer_ids（k = %d） | "), RUN.k);
    for (int j = 0; j < RUN.k; j++) P("%s%d", j ? ", " : "", RUN.layer_ids[j]);
    P("%s", T(" | each slice of `prefill.target_hidden` is bit-identical to `prefill.hidden_states.{id+1}` |\n",
              " | `prefill.target_hidden` 的每一段都与 `prefill.hidden_states.{id+1}` 逐位相同 |\n"));
    P("| block_size B | %d | `draft1.block_output_ids` |\n", RUN.B);
    P(T("| vocabulary V | %d words | `toy_weights/walkthrough/vocab.txt` |\n",
        "| 词表 V | %d 个词 | `toy_weights/walkthrough/vocab.txt` |\n"), RUN.V);
    P(T("| prompt | \"%s\", ids %s, positions 0..%d | `input_ids` |\n",
        "| Prompt | \"%s\"，id %s，位置 0..%d | `input_ids` |\n"), pwords(RUN.out, RUN.n), ints(RUN.out, RUN.n, " "),
      RUN.n - 1);
}

static void w_fig_timeline(void) {
    P(T("![timeline of the default run](figures/timeline.svg)\n", "![默认运行的时间线](figures/timeline.svg)\n"));
}

static void w_run_table(void) {
    P("%s", T("| | block (positions) | draft proposes | target posterior | match / cumprod | acc (accepted) | tau (tokens added) | start |\n",
              "| | block（位置） | draft 提议 | target 的 posterior | match / cumprod | acc（接受的提议数） | tau（本轮新增 token） | start |\n"));
    P("|---|---|---|---|---|---|---|---|\n");
    P("| prefill | %s (0..%d) | | %s | | | | %d |\n", mwords(RUN.out, RUN.n), RUN.n - 1,
      mw(ival(get("prefill." TN_SAMPLED), 0)), RUN.n);
    for (int ri = 0; ri < RUN.R; ri++) {
        const Round *r = &RUN.r[ri];
        P(T("| round %d | ", "| 第 %d 轮 | "), ri + 1);
        P("%s (%d..%d) | %s | %s | [%s] / [%s] | %d | %d | %d &rarr; %d |\n", mwords(r->block_in, RUN.B), r->start,
          r->start + RUN.B - 1, mwords(r->block + 1, RUN.B - 1), mwords(r->posterior, RUN.B),
          ints(r->match, RUN.B - 1, ","), ints(r->cumprod, RUN.B - 1, ","), r->acc, r->acc + 1, r->start,
          r->start_after);
    }
}

static void w_math_context(void) {
    P("```math\n\\mathrm{target\\_hidden\\_raw}_i = \\left[\\,h^{(%d)}_i \\,;\\, h^{(%d)}_i \\,;\\, h^{(%d)}_i\\,\\right] "
      "= \\left[\\,\\mathrm{hs}[%d]_i \\,;\\, \\mathrm{hs}[%d]_i \\,;\\, \\mathrm{hs}[%d]_i\\,\\right] \\in "
      "\\mathbb{R}^{%d}\n```\n", RUN.layer_ids[0] + 1, RUN.layer_ids[1] + 1, RUN.layer_ids[2] + 1,
      RUN.layer_ids[0] + 1, RUN.layer_ids[1] + 1, RUN.layer_ids[2] + 1, RUN.kD);
}

static void w_step1_table(void) {
    const Tensor *th = get("prefill." TN_TARGET_HIDDEN);
    int D = RUN.D;
    P("%s", T("| row | word | ", "| 行 | 词 | "));
    for (int j = 0; j < RUN.k; j++)
        P(T("cols %d..%d = hs[%d] (layer %d%s): own dim, RMS | ", "第 %d..%d 列 = hs[%d]（第 %d 层%s）：自身维度，RMS | "),
          j * D, (j + 1) * D - 1, RUN.layer_ids[j] + 1, RUN.layer_ids[j],
          RUN.layer_ids[j] + 1 == RUN.L ? T(", post-norm", "，final norm 之后") : "");
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
}

static void w_math_c(void) {
    P("```math\nC = \\mathrm{RMSNorm}\\!\\left(\\mathrm{target\\_hidden\\_raw}\\,W_\\mathrm{fc}^{\\top}\\right) \\in "
      "\\mathbb{R}^{%d \\times %d},\\qquad \\mathrm{RMSNorm}(x) = w \\odot \\frac{x}{\\sqrt{\\mathrm{mean}(x^2) + "
      "\\epsilon}}\n```\n", RUN.r[0].Lc, RUN.D);
}

static void w_step2_table(void) {
    const Tensor *fc = get("draft1.fc"), *C = get("draft1.hidden_norm");
    P(T("| row (position) | C[0..3] | C[36..39] | C[%d] | RMS of fc row | RMS of C row |\n",
        "| 行（位置） | C[0..3] | C[36..39] | C[%d] | fc 行的 RMS | C 行的 RMS |\n"), RUN.D - 1);
    P("|---|---|---|---|---|---|\n");
    for (int i = 0; i < RUN.r[0].Lc; i++) {
        P(T("| %d (%s) | ", "| %d（%s） | "), i, mw(RUN.out[i]));
        for (int j = 0; j < 4; j++) P("%s%s", j ? " " : "", fx(at2(C, i, j), 4));
        P(" | ");
        for (int j = 36; j < 40; j++) P("%s%s", j > 36 ? " " : "", fx(at2(C, i, j), 4));
        P(" | %s | %s | %s |\n", fx(at2(C, i, RUN.D - 1), 4), fx(rms_row(fc, i, 0, RUN.D), 4),
          fx(rms_row(C, i, 0, RUN.D), 4));
    }
}

static void w_math_embed(void) {
    P("```math\nh^{(0)} = \\mathrm{embed}(\\mathrm{block}) \\in \\mathbb{R}^{%d \\times %d}\n```\n", RUN.B, RUN.D);
}

static void w_step3_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *ne = get("draft1.noise_embedding");
    P("%s", T("| row | position | token | dim | value there | RMS of row |\n", "| 行 | 位置 | token | 维度 | 该维的值 | 行 RMS |\n"));
    P("|---|---|---|---|---|---|\n");
    for (int t = 0; t < RUN.B; t++)
        P("| %d | %d | %s | %ld | %s | %s |\n", t, r->start + t, mw(r->block_in[t]), r->block_in[t],
          fx(at2(ne, t, r->block_in[t]), 4), fx(rms_row(ne, t, 0, RUN.D), 4));
}

static void w_math_q(void) {
    P("```math\nQ = \\mathrm{QNorm}\\!\\left(X W_Q^{\\top}\\right) \\in \\mathbb{R}^{H \\times B \\times d} "
      "= \\mathbb{R}^{%d \\times %d \\times %d}\n```\n", RUN.H, RUN.B, RUN.d);
}

static void w_q_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *q = get("draft1.layers.0." TN_Q);
    int half = RUN.d / 2;
    P(T("| head 1, row | position | token | q[0] | q[%d] | q[%d] | norm of q |\n",
        "| head 1 的行 | 位置 | token | q[0] | q[%d] | q[%d] | q 的模长 |\n"), half, half - 1);
    P("|---|---|---|---|---|---|---|\n");
    for (int t = 0; t < RUN.B; t++)
        P("| %d | %d | %s | %s | %s | %s | %s |\n", t, r->start + t, mw(r->block_in[t]), fx(at3(q, 1, t, 0), 4),
          fx(at3(q, 1, t, half), 4), fx(at3(q, 1, t, half - 1), 4), fx(sqrt(dot_row(q, 1, t, q, 1, t, RUN.d)), 4));
}

static void w_math_kv(void) {
    int P_ = RUN.r[0].Lc + RUN.B;
    P("```math\nK = \\mathrm{KNorm}\\!\\left(\\mathrm{concat}\\!\\left[C W_K^{\\top},\\; X W_K^{\\top}\\right]\\right)"
      " \\in \\mathbb{R}^{%d \\times %d \\times %d},\\qquad V = \\mathrm{concat}\\!\\left[C W_V^{\\top},\\; "
      "X W_V^{\\top}\\right] \\in \\mathbb{R}^{%d \\times %d \\times %d}\n```\n", RUN.Hkv, P_, RUN.d, RUN.Hkv, P_, RUN.d);
}

static void w_kv_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *k = get("draft1.layers.0." TN_K), *v = get("draft1.layers.0." TN_V);
    int Lc = r->Lc, half = RUN.d / 2;
    P(T("| K/V index | position | source | token | head 1: k[0] | k[16] | k[%d] | head 1: v, largest component |\n",
        "| K/V 序号 | 位置 | 来源 | token | head 1：k[0] | k[16] | k[%d] | head 1：v 的最大分量 |\n"), half - 1);
    P("|---|---|---|---|---|---|---|---|\n");
    for (int j = 0; j < Lc + RUN.B; j++) {
        int ctx = j < Lc, pos = r->draft_cache_before + j, best = 0;
        long id = ctx ? RUN.out[pos] : r->block_in[j - Lc];
        for (int c = 1; c < RUN.d; c++) if (fabs(at3(v, 1, j, c)) > fabs(at3(v, 1, j, best))) best = c;
        char vs[96];
        if (fabs(at3(v, 1, j, best)) < 0.00005) snprintf(vs, sizeof vs, "%s", T("all 0", "全为 0"));
        else if (ZH) snprintf(vs, sizeof vs, "第 %d 维 %s（%s）", best, fx(at3(v, 1, j, best), 4), mw(best));
        else snprintf(vs, sizeof vs, "%s at dim %d (%s)", fx(at3(v, 1, j, best), 4), best, mw(best));
        P("| %d | %d | %s | %s | %s | %s | %s | %s |\n", j, pos,
          ctx ? T("C W_K (target context)", "C W_K（target 上下文）") : T("X W_K (block)", "X W_K（block）"), mw(id),
          fx(at3(k, 1, j, 0), 4), fx(at3(k, 1, j, 16), 4), fx(at3(k, 1, j, half - 1), 4), vs);
    }
}

static void w_math_rope(void) {
    P("```math\n\\theta_{p,i} = p \\cdot \\mathrm{inv\\_freq}_i,\\quad \\mathrm{inv\\_freq}_i = "
      "\\mathrm{rope\\_theta}^{-2i/d},\\qquad x' = x \\odot \\cos\\theta_p + \\mathrm{rotate\\_half}(x) \\odot "
      "\\sin\\theta_p\n```\n");
}

static void w_rope_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *ang = get("draft1." TN_ROPE_ANGLES), *cs = get("draft1.cos"), *sn = get("draft1.sin");
    int half = RUN.d / 2;
    P(T("| position | used by | angle pair 0 | cos | sin | angle pair %d | cos |\n",
        "| 位置 | 用于 | 第 0 对角度 | cos | sin | 第 %d 对角度 | cos |\n"), half - 1);
    P("|---|---|---|---|---|---|---|\n");
    for (int p = 0; p < r->S; p++)
        P("| %d | %s | %s | %s | %s | %.4e | %s |\n", r->draft_cache_before + p,
          p < r->Lc ? T("K (context)", "K（上下文）") : T("K and Q (block)", "K 和 Q（block）"), fx(at2(ang, p, 0), 4),
          fx(at2(cs, p, 0), 4), fx(at2(sn, p, 0), 4), at2(ang, p, half - 1), fx(at2(cs, p, half - 1), 6));
}

static void w_q5k2(void) {
    char l1[96], l4[96];
    snprintf(l1, sizeof l1, "q'_5 . k'_2 = q_rope[0][%d] . k_rope[0][%d]", Q5K2.qrow, Q5K2.kj);
    snprintf(l4, sizeof l4, "score = q'_5 . k'_2 * d^-0.5 = %s * 0.125", fx(Q5K2.rot, 4));
    P("```text\n");
    P("%-62s= %10s\n", l1, fx(Q5K2.rot, 4));
    P("%-62s= %10s   %s\n", "q_5 . R_-3 k_2  (q, k unrotated; k turned by -3 * inv_freq)", fx(Q5K2.rel, 4),
      T("the same: only 2 - 5 = -3 matters", "相同：只有相对距离 2 - 5 = -3 起作用"));
    P("%-62s= %10s   %s\n", "q_5 . k_2       (no rotation: Q wrongly at positions 0..3)", fx(Q5K2.none, 4),
      T("distance 0: a different score", "距离 0：得分不同"));
    P("%-62s= %10s\n", l4, fx(Q5K2.rot * 0.125, 4));
    P("%-62s= %10s\n", "A[0][q@5][k@2], the softmax of head 0's row q@5 of scores", fx(Q5K2.a, 4));
    P("  (draft1.layers.0." TN_ATTN_WEIGHTS "[0][%d][%d])\n", Q5K2.qrow, Q5K2.kj);
    P("```\n");
}

static void w_angle_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *qr = get("draft1.layers.0." TN_Q_ROPE), *kr = get("draft1.layers.0." TN_K_ROPE);
    P("| head | ");
    for (int t = 0; t < RUN.B; t++) P(T("q@%d (distance %d) | ", "q@%d（距离 %d） | "), r->start + t, t);
    P(T("q@%d vs a mask key |\n|---|", "q@%d 对一个 mask key |\n|---|"), r->start + RUN.B - 1);
    for (int t = 0; t <= RUN.B; t++) P("---|");
    P("\n");
    for (int h = 1; h <= 3 && h < RUN.H; h++) {
        P("| %d | ", h);
        for (int t = 0; t < RUN.B; t++) P("%s | ", fx(dot_row(qr, h, t, kr, h, r->Lc, RUN.d) * 0.125, 2));
        P("%s |\n", fx(dot_row(qr, h, RUN.B - 1, kr, h, r->S - 1, RUN.d) * 0.125, 2));
    }
}

static void w_math_attn(void) {
    const Round *r = &RUN.r[0];
    P("```math\nA_{ij} = \\frac{\\exp\\!\\left(q'^{\\top}_i k'_j / \\sqrt{d}\\right)}{\\sum_{m} "
      "\\exp\\!\\left(q'^{\\top}_i k'_m / \\sqrt{d}\\right)},\\qquad \\mathrm{out}_i = \\sum_{j} A_{ij}\\, v_j,"
      "\\qquad i \\in \\{%d..%d\\},\\ j \\in \\{%d..%d\\}\n```\n", r->start, r->start + RUN.B - 1,
      r->draft_cache_before, r->draft_cache_before + r->S - 1);
}

static void w_attn_figs(void) {
    P("| | |\n|---|---|\n");
    for (int h = 0; h < RUN.H; h += 2) {
        for (int g = h; g < h + 2 && g < RUN.H; g++)
            P(T("| ![draft round 1, layer 0, head %d](figures/attn_draft_round1_layer0_head%d.svg) ",
                "| ![draft 第 1 轮，第 0 层，head %d](figures/attn_draft_round1_layer0_head%d.svg) "), g, g);
        P("|\n");
    }
}

static const char *head_role_text(int h) {
    return h >= 1 && h <= 3 ? T("planted look-ahead", "植入的前瞻头") : T("pseudo-random weights", "伪随机权重");
}

static void w_attn_text(void) {
    const Round *r = &RUN.r[0];
    const Tensor *A = get("draft1.layers.0." TN_ATTN_WEIGHTS);
    int Lc = r->Lc, S = r->S, P0 = r->draft_cache_before;
    P("```text\n");
    for (int h = 0; h < RUN.H; h++) {
        if (h >= 1 && h <= 3) P(T("head %d (%s %d)\n%-13s", "head %d（%s %d）\n%-13s"), h, head_role_text(h), h, "");
        else P(T("head %d (%s)\n%-13s", "head %d（%s）\n%-13s"), h, head_role_text(h), "");
        for (int j = 0; j < S; j++) {
            int pos = P0 + j;
            long id = j < Lc ? RUN.out[pos] : r->block_in[j - Lc];
            char lab[64];
            snprintf(lab, sizeof lab, "k@%d %s", pos, word(id));
            P("%s%11s", j == Lc ? "  ┃" : "", lab);
        }
        P("\n");
        for (int t = 0; t < RUN.B; t++) {
            char lab[64];
            snprintf(lab, sizeof lab, "q@%d %s", r->start + t, word(r->block_in[t]));
            P("  %-11s", lab);
            for (int j = 0; j < S; j++) P("%s%11s", j == Lc ? "  ┃" : "", fx(at3(A, h, t, j), 4));
            P("\n");
        }
        if (h + 1 < RUN.H) P("\n");
    }
    P("```\n");
}

static void w_ctx_weight_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *A = get("draft1.layers.0." TN_ATTN_WEIGHTS);
    P("| head | ");
    for (int t = 0; t < RUN.B; t++) P("q@%d | ", r->start + t);
    P("\n|---|");
    for (int t = 0; t < RUN.B; t++) P("---|");
    P("\n");
    for (int h = 0; h < RUN.H; h++) {
        P("| %d | ", h);
        for (int t = 0; t < RUN.B; t++) {
            double s = 0;
            for (int j = 0; j < r->Lc; j++) s += at3(A, h, t, j);
            P("%s | ", fx(s, 4));
        }
        P("\n");
    }
}

static void w_out5_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *A = get("draft1.layers.0." TN_ATTN_WEIGHTS), *v = get("draft1.layers.0." TN_V);
    int h = 2, t = 5 - r->start;
    long tok = r->block_in[0];
    P(T("| j | position | source | A[2][q@5][j] | v_j[%ld] | A v_j[%ld] |\n",
        "| j | 位置 | 来源 | A[2][q@5][j] | v_j[%ld] | A v_j[%ld] |\n"), tok, tok);
    P("|---|---|---|---|---|---|\n");
    double o = 0;
    for (int j = 0; j < r->S; j++) {
        double w = at3(A, h, t, j), vv = at3(v, h, j, tok);
        o += w * vv;
        P("| %d | %d | %s | %s | %s | %s |\n", j, r->draft_cache_before + j,
          j < r->Lc ? T("context (C)", "上下文（C）") : "block", fx(w, 4), fx(vv, 4), fx(w * vv, 4));
    }
    P("| | | | | out_5[%ld] = | **%s** |\n", tok, fx(o, 4));
}

static void w_math_oproj(void) {
    P("```math\n\\mathrm{Attn\\_out} = \\mathrm{concat}[\\mathrm{head}_0, \\dots, \\mathrm{head}_{%d}]\\, W_O^{\\top} "
      "\\in \\mathbb{R}^{%d \\times %d}\n```\n", RUN.H - 1, RUN.B, RUN.D);
}

static void w_oproj_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *ao = get("draft1.layers.0.self_attn.attn_output");
    P("%s", T("| row | position | token | largest | second | third |\n", "| 行 | 位置 | token | 最大 | 第二 | 第三 |\n"));
    P("|---|---|---|---|---|---|\n");
    for (int tt = 0; tt < RUN.B; tt++) {
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
        for (int s = 0; s < 3; s++) {
            char wd[160] = "";
            if (top[s] < NVOC) snprintf(wd, sizeof wd, T(" (%s)", "（%s）"), mw(top[s]));
            if (ZH) P(" 第 %d 维 %s%s |", top[s], fx(at2(ao, tt, top[s]), 4), wd);
            else P(" %s at dim %d%s |", fx(at2(ao, tt, top[s]), 4), top[s], wd);
        }
        P("\n");
    }
}

static void w_math_draft_logits(void) {
    P("```math\n\\mathrm{draft\\_logits} = \\mathrm{norm}(h^{(N)})_{[1:]}\\, W_\\mathrm{lm}^{\\top} \\in "
      "\\mathbb{R}^{%d \\times %d}\n```\n", RUN.B - 1, RUN.V);
}

static void w_draft_logits_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *lg = get("draft1." TN_LOGITS);
    P("%s", T("| logits row | position | argmax | logit | runner-up | logit |\n",
              "| logits 行 | 位置 | argmax | logit | 第二名 | logit |\n"));
    P("|---|---|---|---|---|---|\n");
    for (int i = 0; i + 1 < RUN.B; i++) {
        long a, b;
        top2(lg, i, &a, &b);
        check(a == r->block[i + 1], "draft argmax row %d = draft1.sampled", i);
        P("| %d | %d | %s | %s | %s | %s |\n", i, r->start + i + 1, mw(a), fx(at2(lg, i, a), 4), mw(b),
          fx(at2(lg, i, b), 4));
    }
}

static void w_math_acc(void) {
    P("```math\n\\mathrm{acc} = \\sum_{i=0}^{B-2} \\prod_{j \\le i} \\left[\\mathrm{block}_{j+1} = "
      "\\mathrm{posterior}_j\\right],\\qquad \\tau = \\mathrm{acc} + 1\n```\n");
}

static void w_verify_table(void) {
    const Round *r = &RUN.r[0];
    const Tensor *lg = get("verify1." TN_LOGITS);
    int B = RUN.B;
    P("%s", T("| i | position | token in | target's next (posterior[i]) | logit | draft's guess block[i+1] | match | cumprod |\n",
              "| i | 位置 | 输入 token | target 的下一个（posterior[i]） | logit | draft 的猜测 block[i+1] | match | cumprod |\n"));
    P("|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < B; i++) {
        long a, b;
        top2(lg, i, &a, &b);
        check(a == r->posterior[i], "verify argmax row %d = verify1.sampled", i);
        if (i + 1 < B)
            P("| %d | %d | %s | %s | %s | %s | %ld | %ld |\n", i, r->start + i, mw(r->block[i]), mw(r->posterior[i]),
              fx(at2(lg, i, a), 4), mw(r->block[i + 1]), r->match[i], r->cumprod[i]);
        else
            P("| %d | %d | %s | %s | %s | %s | | |\n", i, r->start + i, mw(r->block[i]), mw(r->posterior[i]),
              fx(at2(lg, i, a), 4), T("(none)", "（无）"));
    }
}

static void w_math_update(void) {
    P("```math\n\\mathrm{start} \\leftarrow \\mathrm{start} + \\mathrm{acc} + 1,\\qquad "
      "\\mathrm{crop}(n) \\text{ keeps positions } 0, \\dots, n-1,\\qquad "
      "\\mathrm{target\\_hidden} \\leftarrow \\mathrm{target\\_hidden}_{[0:\\mathrm{acc}+1]}\n```\n");
}

static void w_step7_text(void) {
    const Round *r = &RUN.r[0];
    int B = RUN.B;
    P("```text\n");
    P(T("output_ids[start : start+acc+1] = block[:acc+1]       positions %d..%d = %s\n",
        "output_ids[start : start+acc+1] = block[:acc+1]       位置 %d..%d = %s\n"), r->start, r->start + r->acc,
      pwords(r->block, r->acc + 1));
    P(T("output_ids[start+acc+1]          = posterior[acc]     position %d = %s\n",
        "output_ids[start+acc+1]          = posterior[acc]     位置 %d = %s\n"), r->start_after,
      word(r->posterior[r->acc]));
    P("start += acc + 1                                       start = %d + %d + 1 = %d\n", r->start, r->acc,
      r->start_after);
    P(T("target cache crop(start)                               %d positions (0..%d) -> %d (0..%d)\n",
        "target cache crop(start)                               %d 个位置 (0..%d) -> %d (0..%d)\n"), r->start + B,
      r->start + B - 1, r->start_after, r->start_after - 1);
    P(T("target_hidden = extract_context_feature(...)[:acc+1]   rows 0..%d of verify1.target_hidden = positions %d..%d\n",
        "target_hidden = extract_context_feature(...)[:acc+1]   verify1.target_hidden 的第 0..%d 行 = 位置 %d..%d\n"),
      r->acc, r->start, r->start + r->acc);
    P("```\n");
}

static void w_cache_table(void) {
    int B = RUN.B;
    P("%s", T("| round | start | draft cache entering | draft position_ids | keys attended S | draft cache after crop(start) "
              "| target cache after verify | after crop(new start) | new start |\n",
              "| 轮 | start | 进入时的 draft cache | draft position_ids | 关注的 key 数 S | crop(start) 后的 draft cache "
              "| 验证后的 target cache | crop(新 start) 后 | 新 start |\n"));
    P("|---|---|---|---|---|---|---|---|---|\n");
    for (int ri = 0; ri < RUN.R; ri++) {
        const Round *x = &RUN.r[ri];
        char dc[32];
        if (x->draft_cache_before) snprintf(dc, sizeof dc, "%d (0..%d)", x->draft_cache_before, x->draft_cache_before - 1);
        else snprintf(dc, sizeof dc, "0");
        P("| %d | %d | %s | %d..%d | %d | %d (0..%d) | %d (0..%d) | %d (0..%d) | %d |\n", ri + 1, x->start, dc,
          x->draft_cache_before, x->start + B - 1, x->S, x->start, x->start - 1, x->start + B, x->start + B - 1,
          x->start_after, x->start_after - 1, x->start_after);
    }
}

static void w_round2_table(void) {
    const Round *r = &RUN.r[1];
    int B = RUN.B;
    const Tensor *A = get("draft2.layers.0." TN_ATTN_WEIGHTS);
    P("| head | ");
    for (int t = 0; t < B; t++) P(T("q@%d attends to | ", "q@%d 关注 | "), r->start + t);
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
            if (n_top == 1) P(T("k@%d (%s) | ", "k@%d（%s） | "), best, fx(top, 4));
            else P(T("k@%d..%d (%s each) | ", "k@%d..%d（各 %s） | "), best, last, fx(top, 4));
        }
        P("\n");
    }
}

/* ===========================================================================
 * 6b. The chapter "How the draft learned this": one training step.
 *     --train TRAIN_DIR TARGET_DIR: TRAIN_DIR is `dflash train --trace` of
 *     one step on walkthrough/tools/train-step.txt (one sequence, --batch 1,
 *     --anchors 2, a new draft from the walkthrough draft's config), its
 *     names train1.* loaded beside the run's; TARGET_DIR the frozen target,
 *     read for its lm_head (the gradient below goes through it). Its values
 *     come from the trace like the rest; the chapter's gradient table also
 *     recomputes d loss / d logits (a softmax: exp(), printed to 4
 *     significant digits; glibc's exp is within 1 ulp, so a printed digit
 *     moves only for a value within ~1e-16 of a rounding boundary) and
 *     checks that its sum is the traced gradient.
 * ======================================================================== */

static int HAVE_TRAIN;
static Model TM;   /* the frozen target: its lm_head */
static struct {
    int S, N, B, Q, P, V, D, L;   /* sequence, blocks, block size, rows, keys, vocab, hidden, draft layers */
    long ids[64], lmask[64], anchors[8];
    double wsum, loss;
    int gi;                        /* the norm.weight entry traced back: the largest |gradient| */
    double grad_row[64];           /* each block row's share of grad.norm.weight[gi] */
    double dnorm[64];              /* d loss / d norm[r][gi] through the lm_head */
} TS;

/* d loss / d logits[r][v] = c_r (softmax_v - [v = label]), c_r = w_r / (sum w + 1e-6) */
static double dlogit(int r, int v) {
    const Tensor *lg = get("train1.logits");
    long label = ival(get("train1.labels"), (size_t)r);
    double c = val(get("train1.loss_weights"), (size_t)r) / (TS.wsum + 1e-6);
    double mx = at3(lg, 0, r, 0), sum = 0;
    for (int j = 1; j < TS.V; j++) if (at3(lg, 0, r, j) > mx) mx = at3(lg, 0, r, j);
    for (int j = 0; j < TS.V; j++) sum += exp(at3(lg, 0, r, j) - mx);
    return c * (exp(at3(lg, 0, r, v) - mx) / sum - (v == label));
}

static void read_train(void) {
    const Tensor *ids = get("train1.input_ids"), *an = get("train1.anchors");
    check(dim(ids, 0) == 1, "the training step has one sequence (--batch 1), not %ld", (long)dim(ids, 0));
    TS.S = (int)dim(ids, 1);
    TS.N = (int)dim(an, 1);
    const Tensor *lab = get("train1.labels");
    TS.B = (int)dim(lab, 2);
    TS.Q = TS.N * TS.B, TS.P = TS.S + TS.Q;
    TS.V = (int)dim(get("train1.logits"), 2);
    TS.D = (int)dim(get("train1.norm"), 2);
    while (find("train1.layers.%d", TS.L)) TS.L++;
    check(TS.S <= 64 && TS.N == 2 && TS.Q <= 64 && TS.L >= 1, "a step of 2 blocks on <= 64 tokens (S %d, N %d)", TS.S,
          TS.N);
    if (bad) return;
    for (int t = 0; t < TS.S; t++) {
        TS.ids[t] = ival(ids, (size_t)t);
        TS.lmask[t] = ival(get("train1.loss_mask"), (size_t)t);
    }
    for (int n = 0; n < TS.N; n++) TS.anchors[n] = ival(an, (size_t)n);
    /* the recipe, checked against the trace: blocks, positions, mask, labels, weights */
    const Tensor *nz = get("train1.noise_ids"), *pos = get("train1.position_ids"), *mask = get("train1.attn_mask");
    const Tensor *w = get("train1.loss_weights"), *ce = get("train1.ce");
    long mask_id = ival(nz, 1);
    double wce = 0;
    TS.wsum = 0;
    for (int n = 0; n < TS.N; n++)
        for (int k = 0; k < TS.B; k++) {
            int r = n * TS.B + k;
            long a = TS.anchors[n], idx = a + k, safe = idx < TS.S ? idx : TS.S - 1;
            check(ival(nz, (size_t)r) == (k == 0 ? TS.ids[a] : mask_id), "noise_ids row %d", r);
            check(ival(pos, (size_t)(TS.S + r)) == idx, "position_ids of block row %d", r);
            check(ival(lab, (size_t)r) == TS.ids[safe], "label of block row %d", r);
            double want = (k > 0 && idx < TS.S && TS.lmask[safe]) ? exp(-(double)(k - 1) / 7.0) : 0;
            check(fabs(val(w, (size_t)r) - want) < 1e-6, "loss weight of block row %d is exp(-(k-1)/7)", r);
            for (int j = 0; j < TS.P; j++) {
                int vis = (j < TS.S && j < a) || (j >= TS.S && (j - TS.S) / TS.B == n);
                check(ival(mask, (size_t)r * TS.P + (size_t)j) == vis, "attn_mask[%d][%d]", r, j);
            }
            TS.wsum += val(w, (size_t)r);
            wce += val(w, (size_t)r) * val(ce, (size_t)r);
        }
    TS.loss = val(get("train1.loss"), 0);
    check(fabs(wce / (TS.wsum + 1e-6) - TS.loss) <= 1e-5 * TS.loss, "loss = sum(w ce) / (sum(w) + 1e-6)");
    /* the gradient of the final norm's weight, entry gi: the draft is new, so
     * that weight is 1 and norm = h / rms(h); through the frozen lm_head:
     *   grad[gi] = sum_r (sum_v dlogits[r][v] lm_head[v][gi]) norm[r][gi] */
    const Tensor *g = get("train1.grad.norm.weight"), *nm = get("train1.norm"), *h = get("train1.layers.%d", TS.L - 1);
    TS.gi = 0;
    for (int i = 1; i < TS.D; i++) if (fabs(val(g, (size_t)i)) > fabs(val(g, (size_t)TS.gi))) TS.gi = i;
    double sum = 0, most = 0;
    for (int r = 0; r < TS.Q && !bad; r++) {
        double ss = 0;
        for (int i = 0; i < TS.D; i++) ss += at3(h, 0, r, i) * at3(h, 0, r, i);
        double rinv = 1 / sqrt(ss / TS.D + 1e-6);
        check(fabs(at3(nm, 0, r, TS.gi) - at3(h, 0, r, TS.gi) * rinv) <= 1e-5 * (1 + fabs(at3(nm, 0, r, TS.gi))),
              "norm row %d is h / rms(h) (a new draft's norm weight is 1)", r);
        double dn = 0;
        for (int v = 0; v < TS.V; v++) dn += dlogit(r, v) * (double)TM.lm_head[(size_t)v * TS.D + TS.gi];
        TS.dnorm[r] = dn;
        TS.grad_row[r] = dn * at3(nm, 0, r, TS.gi);
        sum += TS.grad_row[r];
        if (fabs(TS.grad_row[r]) > most) most = fabs(TS.grad_row[r]);
    }
    check(fabs(sum - val(g, (size_t)TS.gi)) <= 1e-4 * most + 1e-9, "grad.norm.weight[%d]: %g recomputed, %g traced",
          TS.gi, sum, val(g, (size_t)TS.gi));
}

static const char *tw(long id) { return mw(id); }

/* a word as SVG text: <eos> -> &lt;eos&gt; */
static const char *xw(long id) {
    const char *w = word(id);
    char *b = rbuf();
    if (w[0] == '<' && strlen(w) < 100) {
        snprintf(b, 128, "&lt;%.*s&gt;", (int)strlen(w) - 2, w + 1);
        return b;
    }
    snprintf(b, 128, "%s", w);
    return b;
}

static void train_values(void) {
    if (!HAVE_TRAIN) return;
    def("t_S", "%d", TS.S);
    def("t_S_1", "%d", TS.S - 1);
    def("t_SB", "%d", TS.S - TS.B);
    def("t_N", "%d", TS.N);
    def("t_B", "%d", TS.B);
    def("t_B_1", "%d", TS.B - 1);
    def("t_Q", "%d", TS.Q);
    def("t_P", "%d", TS.P);
    def("t_L", "%d", TS.L);
    def("t_L_1", "%d", TS.L - 1);
    def("t_D", "%d", TS.D);
    def("t_V", "%d", TS.V);
    def("t_words", "%s", pwords(TS.ids, TS.S));
    int np = 0;
    while (np < TS.S && !TS.lmask[np]) np++;
    def("t_prompt", "%s", pwords(TS.ids, np));
    def("t_np", "%d", np);
    def("t_np_1", "%d", np - 1);
    int cand = 0;
    for (int p = 0; p <= TS.S - TS.B; p++) cand += TS.lmask[p] != 0;
    def("t_cand", "%d", cand);
    for (int n = 0; n < TS.N; n++) {
        char nm[16];
        long a = TS.anchors[n];
        snprintf(nm, sizeof nm, "t_a%d", n);
        def(nm, "%ld", a);
        snprintf(nm, sizeof nm, "t_a%d_1", n);
        def(nm, "%ld", a - 1);
        snprintf(nm, sizeof nm, "t_a%d_w", n);
        def(nm, "%s", tw(TS.ids[a]));
        snprintf(nm, sizeof nm, "t_a%d_end", n);
        def(nm, "%ld", a + TS.B - 1);
        snprintf(nm, sizeof nm, "t_a%d_row0", n);
        def(nm, "%d", n * TS.B);
    }
    def("t_mask_id", "%ld", ival(get("train1.noise_ids"), 1));
    def("t_mask_w", "%s", tw(ival(get("train1.noise_ids"), 1)));
    def("t_wsum", "%s", fx(TS.wsum, 4));
    def("t_loss", "%s", fx(TS.loss, 4));
    def("t_acc", "%s", fx(val(get("train1.accuracy"), 0), 4));
    def("t_w2", "%s", fx(val(get("train1.loss_weights"), 2), 4));
    def("t_w3", "%s", fx(val(get("train1.loss_weights"), 3), 4));
    def("t_ce0", "%s", fx(val(get("train1.ce"), 0), 4));
    def("t_gi", "%d", TS.gi);
    const Tensor *g = get("train1.grad.norm.weight");
    def("t_grad", "%.4e", val(g, (size_t)TS.gi));
    double gn = val(get("train1.grad_norm"), 0);
    def("t_grad_norm", "%s", fx(gn, 4));
    def("t_clip", "%s", fx(1 / (gn + 1e-6), 4));
    def("t_param", "%s", fx(val(get("train1.param.norm.weight"), (size_t)TS.gi), 6));
    def("t_param_delta", "%s", fx(val(get("train1.param.norm.weight"), (size_t)TS.gi) - 1, 6));
    /* the rows that carry weight: the first of block 0 */
    def("t_r1_label", "%s", tw(ival(get("train1.labels"), 1)));
    def("t_r1_ce", "%s", fx(val(get("train1.ce"), 1), 4));
}

/* the sequence: position, token, loss mask, candidate anchor, drawn */
static void w_train_seq_table(void) {
    if (!HAVE_TRAIN) { flag_bad("the training chapter needs its trace: mkwalk ... --train TRAIN_DIR TARGET_DIR"); return; }
    P("| %s |", T("position", "位置"));
    for (int t = 0; t < TS.S; t++) P(" %d |", t);
    P("\n|---|");
    for (int t = 0; t < TS.S; t++) P("---|");
    P("\n| %s |", T("token", "词元"));
    for (int t = 0; t < TS.S; t++) P(" %s |", tw(TS.ids[t]));
    P("\n| `loss_mask` |");
    for (int t = 0; t < TS.S; t++) P(" %ld |", TS.lmask[t]);
    P("\n| %s |", T("anchor candidate (0..S-B, mask 1)", "候选锚点（0..S-B，掩码 1）"));
    for (int t = 0; t < TS.S; t++) {
        int drawn = 0;
        for (int n = 0; n < TS.N; n++) drawn |= TS.anchors[n] == t;
        P(" %s |", drawn ? T("**drawn**", "**抽中**") : t <= TS.S - TS.B && TS.lmask[t] ? T("yes", "是") : "");
    }
    P("\n");
}

/* the blocks: row, block, k, input, position, label, weight, ce, w x ce */
static void w_train_block_table(void) {
    if (!HAVE_TRAIN) { flag_bad("the training chapter needs its trace: mkwalk ... --train TRAIN_DIR TARGET_DIR"); return; }
    const Tensor *nz = get("train1.noise_ids"), *pos = get("train1.position_ids"), *lab = get("train1.labels");
    const Tensor *w = get("train1.loss_weights"), *ce = get("train1.ce");
    P("| %s | %s | k | `noise_ids` | `position_ids` | `labels` | `loss_weights` | `ce` | w &times; ce |\n",
      T("row", "行"), T("block", "块"));
    P("|---|---|---|---|---|---|---|---|---|\n");
    for (int r = 0; r < TS.Q; r++) {
        double wr = val(w, (size_t)r), cr = val(ce, (size_t)r);
        P("| %d | %d | %d | %s | %ld | %s | %s | %s | %s |\n", r, r / TS.B, r % TS.B, tw(ival(nz, (size_t)r)),
          ival(pos, (size_t)(TS.S + r)), tw(ival(lab, (size_t)r)), fx(wr, 4), fx(cr, 4), fx(wr * cr, 4));
    }
    P("| %s | | | | | | %s | | %s |\n", T("sum", "合计"), fx(TS.wsum, 4), fx(TS.loss * (TS.wsum + 1e-6), 4));
}

/* the gradient of norm.weight[gi], row by row */
static void w_train_grad_table(void) {
    if (!HAVE_TRAIN) { flag_bad("the training chapter needs its trace: mkwalk ... --train TRAIN_DIR TARGET_DIR"); return; }
    const Tensor *w = get("train1.loss_weights"), *nm = get("train1.norm");
    P("| %s | `labels` | c = w / (&Sigma;w + 1e-6) | d loss / d norm[r][%d] | norm[r][%d] | %s |\n", T("row", "行"),
      TS.gi, TS.gi, T("product", "乘积"));
    P("|---|---|---|---|---|---|\n");
    double sum = 0;
    for (int r = 0; r < TS.Q; r++) {
        sum += TS.grad_row[r];
        char dn[32] = "0", pr[32] = "0";   /* rows of weight 0: exactly 0 */
        if (val(w, (size_t)r) != 0) {
            snprintf(dn, sizeof dn, "%.4e", TS.dnorm[r]);
            snprintf(pr, sizeof pr, "%.4e", TS.grad_row[r]);
        }
        P("| %d | %s | %s | %s | %s | %s |\n", r, tw(ival(get("train1.labels"), (size_t)r)),
          fx(val(w, (size_t)r) / (TS.wsum + 1e-6), 4), dn, fx(at3(nm, 0, r, TS.gi), 4), pr);
    }
    P("| %s | | | | | %.4e |\n", T("sum", "合计"), sum);
    P("| `train1.grad.norm.weight[%d]` | | | | | %.4e |\n", TS.gi, val(get("train1.grad.norm.weight"), (size_t)TS.gi));
}

static void w_fig_train_mask(void) {
    if (!HAVE_TRAIN) { flag_bad("the training chapter needs its trace: mkwalk ... --train TRAIN_DIR TARGET_DIR"); return; }
    P("![%s](figures/train_attn_mask.svg)\n", T("the training attention mask", "训练时的注意力掩码"));
}

/* figures/train_attn_mask.svg: train1.attn_mask, queries (block rows) x
 * keys (context, then the block rows), visible cells filled */
static char *train_mask_svg(size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    const Tensor *mask = get("train1.attn_mask"), *nz = get("train1.noise_ids");
    int cw = 30, ch = 26, x0 = 150, y0 = 150, W = x0 + TS.P * cw + 30, H = y0 + TS.Q * ch + 60;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", W, H, W, H);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    fprintf(f, "<text x=\"12\" y=\"24\" font-family=\"sans-serif\" font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">"
               "training step 1: the attention mask</text>\n");
    fprintf(f, "<text x=\"12\" y=\"44\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#555555\">train1.attn_mask[0]: "
               "%d block rows (queries) x %d keys (%d context, then %d block rows); filled: visible</text>\n",
            TS.Q, TS.P, TS.S, TS.Q);
    fprintf(f, "<text x=\"%d\" y=\"62\" font-family=\"sans-serif\" font-size=\"13\" text-anchor=\"middle\" "
               "fill=\"#8c2d04\">context (the target's features)</text>\n", x0 + TS.S * cw / 2);
    fprintf(f, "<line x1=\"%d\" y1=\"66\" x2=\"%d\" y2=\"66\" stroke=\"#8c2d04\" stroke-width=\"1.5\"/>\n", x0 + 2,
            x0 + TS.S * cw - 2);
    fprintf(f, "<text x=\"%d\" y=\"62\" font-family=\"sans-serif\" font-size=\"13\" text-anchor=\"middle\" "
               "fill=\"#08519c\">blocks</text>\n", x0 + TS.S * cw + TS.Q * cw / 2);
    fprintf(f, "<line x1=\"%d\" y1=\"66\" x2=\"%d\" y2=\"66\" stroke=\"#08519c\" stroke-width=\"1.5\"/>\n",
            x0 + TS.S * cw + 2, x0 + TS.P * cw - 2);
    for (int j = 0; j < TS.P; j++) {
        int cx = x0 + j * cw + cw / 2;
        long id = j < TS.S ? TS.ids[j] : ival(nz, (size_t)(j - TS.S));
        long p = j < TS.S ? j : ival(get("train1.position_ids"), (size_t)j);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"middle\" "
                   "fill=\"#222222\">%ld</text>\n", cx, y0 - 6, p);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#555555\" "
                   "transform=\"rotate(-45 %d %d)\">%s</text>\n", cx - 3, y0 - 22, cx - 3, y0 - 22, xw(id));
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"end\" fill=\"#555555\">"
               "position</text>\n", x0 - 6, y0 - 6);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"end\" fill=\"#555555\">"
               "key's token</text>\n", x0 - 6, y0 - 30);
    for (int r = 0; r < TS.Q; r++) {
        int y = y0 + r * ch, n = r / TS.B;
        long id = ival(nz, (size_t)r);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"12\" text-anchor=\"end\" "
                   "fill=\"#222222\">block %d, k=%d: %s</text>\n", x0 - 8, y + ch / 2 + 4, n, r % TS.B, xw(id));
        for (int j = 0; j < TS.P; j++) {
            int vis = (int)ival(mask, (size_t)r * TS.P + (size_t)j);
            const char *fill = !vis ? "#f4f4f4" : j < TS.S ? "#e6550d" : "#3182bd";
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#ffffff\" "
                       "stroke-width=\"1\"/>\n", x0 + j * cw, y, cw, ch, fill);
        }
        if (r % TS.B == 0 && r)
            fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#222222\" stroke-width=\"1\"/>\n", x0 - 140, y,
                    x0 + TS.P * cw, y);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#222222\" stroke-width=\"1\"/>\n", x0 + TS.S * cw,
            y0 - 4, x0 + TS.S * cw, y0 + TS.Q * ch + 4);
    int ly = y0 + TS.Q * ch + 30;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"14\" fill=\"#e6550d\"/>\n", x0, ly - 11);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">context key j &lt; "
               "the block's anchor</text>\n", x0 + 24, ly);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"14\" fill=\"#3182bd\"/>\n", x0 + 230, ly - 11);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">its own block "
               "(every row: bidirectional)</text>\n", x0 + 254, ly);
    fprintf(f, "</svg>\n");
    fclose(f);
    return buf;
}

static const Block BLOCKS[] = {
    {"SETTINGS", w_settings},
    {"FIG_TIMELINE", w_fig_timeline},
    {"RUN_TABLE", w_run_table},
    {"MATH_CONTEXT", w_math_context},
    {"STEP1_TABLE", w_step1_table},
    {"MATH_C", w_math_c},
    {"STEP2_TABLE", w_step2_table},
    {"MATH_EMBED", w_math_embed},
    {"STEP3_TABLE", w_step3_table},
    {"MATH_Q", w_math_q},
    {"Q_TABLE", w_q_table},
    {"MATH_KV", w_math_kv},
    {"KV_TABLE", w_kv_table},
    {"MATH_ROPE", w_math_rope},
    {"ROPE_TABLE", w_rope_table},
    {"Q5K2", w_q5k2},
    {"ANGLE_TABLE", w_angle_table},
    {"MATH_ATTN", w_math_attn},
    {"ATTN_FIGS", w_attn_figs},
    {"ATTN_TEXT", w_attn_text},
    {"CTX_WEIGHT_TABLE", w_ctx_weight_table},
    {"OUT5_TABLE", w_out5_table},
    {"MATH_OPROJ", w_math_oproj},
    {"OPROJ_TABLE", w_oproj_table},
    {"MATH_DRAFT_LOGITS", w_math_draft_logits},
    {"DRAFT_LOGITS_TABLE", w_draft_logits_table},
    {"MATH_ACC", w_math_acc},
    {"VERIFY_TABLE", w_verify_table},
    {"MATH_UPDATE", w_math_update},
    {"STEP7_TEXT", w_step7_text},
    {"CACHE_TABLE", w_cache_table},
    {"ROUND2_TABLE", w_round2_table},
    {"TRAIN_SEQ_TABLE", w_train_seq_table},
    {"TRAIN_BLOCK_TABLE", w_train_block_table},
    {"TRAIN_GRAD_TABLE", w_train_grad_table},
    {"FIG_TRAIN_MASK", w_fig_train_mask},
};

/* ---- the template ------------------------------------------------------ */


/* one @CODE fn|first|last@ line (without the @ and the newline); @TCODE
 * quotes train/train.c */
static void code_line(const char *tpl, int lineno, const char *l, size_t n) {
    char buf[512];
    if (n >= sizeof buf) { flag_bad("%s:%d: @CODE line too long", tpl, lineno); return; }
    memcpy(buf, l, n);
    buf[n] = 0;
    int train = buf[0] == 'T';
    if (train && !SRC2) { flag_bad("%s:%d: @TCODE needs train/train.c (--train)", tpl, lineno); return; }
    char *fn = buf + 5 + train, *first = strchr(fn, '|'), *last = NULL;
    if (!first) { flag_bad("%s:%d: expected @CODE function|first needle[|last needle]@", tpl, lineno); return; }
    *first++ = 0;
    last = strchr(first, '|');
    if (last) *last++ = 0;
    if (train) swap_source();
    quote(md, fn, first, last);
    if (train) swap_source();
}

/* Fill the template at path into md. */
static void expand(const char *path) {
    size_t len;
    char *text;
    if (file_read_all(path, &text, &len) != 0) { flag_bad("%s", dflash_errmsg); return; }
    int lineno = 0, in_code = 0;
    const char *l;
    size_t n, pos = 0;
    while (template_line(text, len, &pos, &l, &n)) {
        lineno++;
        int is_code = n > 7 && (strncmp(l, "@CODE ", 6) == 0 || strncmp(l, "@TCODE ", 7) == 0) && l[n - 1] == '@';
        if (in_code && !is_code) { P("```\n"); in_code = 0; }
        if (is_code) {
            if (!in_code) { P("```c\n"); in_code = 1; }
            code_line(path, lineno, l + 1, n - 2);
            continue;
        }
        if (is_block_line(l, n)) {
            const Block *b = find_block(BLOCKS, sizeof BLOCKS / sizeof BLOCKS[0], path, lineno, l, n);
            if (b) b->write();
            continue;
        }
        put_line(md, path, lineno, l, n);
    }
    if (in_code) P("```\n");
    free(text);
}

/* ===========================================================================
 * 7. main
 * ======================================================================== */

/* The prose tells the walkthrough run's story (the planted mistake in round
 * 1, all accepted in round 2, the stop): any other trace is refused. NULL if
 * this is that run, else why not. */
static const char *not_the_walkthrough_run(void) {
    static char why[256];
    static const char *prompt[] = {"The", "cat", "sat"};
    if (RUN.n != 3) { snprintf(why, sizeof why, "the prompt has %d tokens, not 3 (\"The cat sat\")", RUN.n); return why; }
    for (int i = 0; i < 3; i++)
        if (strcmp(word(RUN.out[i]), prompt[i]) != 0) {
            snprintf(why, sizeof why, "the prompt is not \"The cat sat\" (token %d is \"%s\")", i, word(RUN.out[i]));
            return why;
        }
    if (RUN.B != 4) { snprintf(why, sizeof why, "block size %d, not 4", RUN.B); return why; }
    if (RUN.k != 3 || RUN.H != 8 || RUN.N < 1) {
        snprintf(why, sizeof why, "not the walkthrough weights (k %d, heads %d)", RUN.k, RUN.H);
        return why;
    }
    if (RUN.R != 2 || RUN.r[0].acc != 2 || RUN.r[1].acc != 3 || strcmp(word(RUN.out[RUN.n_out - 1]), "<eos>") != 0) {
        snprintf(why, sizeof why, "a run of %d rounds that is not the walkthrough's (acc 2, then 3, then <eos>)", RUN.R);
        return why;
    }
    return NULL;
}

typedef struct {
    char name[64];
    char *data;
    size_t len;
} Page;

/* dir/name, written beside and renamed into place (pagevars.h) */
static int write_file(const char *dir, const Page *o) { return write_page(dir, o->name, o->data, o->len, "mkwalk"); }

int main(int argc, char **argv) {
    /* --train TRAIN_DIR TARGET_DIR, anywhere after the first three */
    const char *train_dir = NULL, *target_dir = NULL;
    for (int i = 4; i < argc; i++)
        if (strcmp(argv[i], "--train") == 0 && i + 2 < argc) {
            train_dir = argv[i + 1], target_dir = argv[i + 2];
            for (int j = i; j + 3 <= argc; j++) argv[j] = argv[j + 3];
            argc -= 3;
            break;
        }
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: mkwalk TRACE_DIR VOCAB_TXT OUT_DIR [TEMPLATE_DIR (default walkthrough/tools) "
                        "[DFLASH_C (default dflash.c)]] [--train TRAIN_TRACE_DIR TARGET_DIR]\n");
        return 2;
    }
    const char *tdir = argc >= 5 ? argv[4] : "walkthrough/tools";
    if (trace_load(&TR, argv[1]) != 0 || words_load(argv[2]) != 0 ||
        source_load(argc == 6 ? argv[5] : "dflash.c") != 0) {
        fprintf(stderr, "mkwalk: %s\n", dflash_errmsg);
        return 1;
    }
    if (train_dir) {   /* the training chapter's trace, its names beside the run's; train/train.c; the target */
        Trace tt = {0};
        if (trace_load(&tt, train_dir) != 0 || model_load(&TM, target_dir, 0) != 0) {
            fprintf(stderr, "mkwalk: %s\n", dflash_errmsg);
            return 1;
        }
        Tensor *all = realloc(TR.t, sizeof(Tensor) * (size_t)(TR.n + tt.n + 1));
        if (!all) { fprintf(stderr, "mkwalk: out of memory\n"); return 1; }
        memcpy(all + TR.n, tt.t, sizeof(Tensor) * (size_t)tt.n);
        TR.t = all, TR.n += tt.n;
        free(tt.t);
        size_t len;
        if (file_read_all("train/train.c", &SRC2, &len) != 0) { fprintf(stderr, "mkwalk: %s\n", dflash_errmsg); return 1; }
        SRC2_PATH = SRC2_NAME = "train/train.c";
        HAVE_TRAIN = 1;
    }
    int rc = 0;
    read_run();
    if (HAVE_TRAIN && !bad) read_train();
    const char *why = bad ? NULL : not_the_walkthrough_run();
    if (why) {
        fprintf(stderr, "mkwalk: %s is not the walkthrough run (%s), and these pages tell that run's story; "
                        "for the figures of any run: dflash figures %s OUT_DIR\n", argv[1], why, argv[1]);
        rc = 2;
    }
    Page out[16];
    int n_out = 0;
    if (!bad && !why) {
        compute_checks();
        static const char *tpl[2] = {"README.md.in", "README.zh.md.in"}, *name[2] = {"README.md", "README.zh.md"};
        for (ZH = 0; ZH < 2; ZH++) {
            Page *o = &out[n_out++];
            snprintf(o->name, sizeof o->name, "%s", name[ZH]);
            if (fill_page(&o->data, &o->len, tdir, tpl[ZH], values, expand) != 0) {
                fprintf(stderr, "mkwalk: out of memory\n");
                return 1;
            }
        }
        vars_free();
        if (HAVE_TRAIN && !bad) {   /* the training chapter's figure */
            Page *o = &out[n_out++];
            snprintf(o->name, sizeof o->name, "figures/train_attn_mask.svg");
            o->data = train_mask_svg(&o->len);
            if (!o->data) flag_bad("out of memory");
        }
    }
    if (bad) {
        fprintf(stderr, "mkwalk: %s%s; nothing written\n", badmsg, bad > 1 ? " (and more)" : "");
        rc = 1;
    } else if (!why) {
        char *figs = path_join(argv[3], "figures");
        if (figs) mkdir(figs, 0777);   /* may exist */
        free(figs);
        for (int i = 0; i < n_out && rc == 0; i++)
            if (write_file(argv[3], &out[i]) != 0) { fprintf(stderr, "mkwalk: %s\n", dflash_errmsg); rc = 1; }
        if (rc == 0) printf("mkwalk: wrote %d files to %s\n", n_out, argv[3]);
    }
    for (int i = 0; i < n_out; i++) free(out[i].data);
    trace_free(&TR);
    free(SRC);
    free(SRC2);
    if (HAVE_TRAIN) model_free(&TM);
    words_free();
    return rc;
}
