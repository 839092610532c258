/* cli/diff.c - `dflash diff A B [--rtol R] [--atol A] [--only GLOB]... [--verbose] [--no-rounding] [--double DIR | --float DIR]`:
 * two traces compared tensor by tensor (cli/diff.h).
 *
 * dflash diff A B [--rtol R] [--atol A] [--only GLOB]... [--verbose] [--no-rounding] [--double DIR | --float DIR]
 *
 * A is the reference, B the port. Walks A's manifest (trace.jsonl, or the
 * oracle's names.json) in A's order, which is data-flow order: the first
 * departure printed is the first tensor, in the order the computation
 * produces them, where B departs from A. B's tensor of the same name is
 * found through B's manifest (trace.jsonl or names.json; without one, by file name).
 *
 * The rules (TRACE.md "dflash diff: how to read it"; NOTES.md "Tracing"):
 *   - rounds first: when the rounds the two ran or their acceptance lengths
 *     differ, one line before anything else names the first divergent round
 *     and its first differing id (diff_rounds);
 *   - rounding: a float tensor beyond the tolerance where B lies about as
 *     close to the double build's values as this program's float build
 *     (DIFF_ROUND_RATIO, below; the other build's trace from --double /
 *     --float or run here on the inference flags A's manifest records,
 *     rebuilt from an allow-list: rerun_args) is counted, not a departure;
 *     sampled ids at near ties past the accepted tokens too;
 *   - a received trace is data: nothing it records is run as such (a
 *     subcommand, an output, an unknown flag: nothing runs), the run diff
 *     starts ends with diff (run_child), a link out of a trace folder is
 *     refused (links_inside), and a name's round number allocates nothing
 *     (diff_rounds);
 *   - B without a manifest: its .npy files by name, in A's order, with a
 *     warning (phase and round unchecked);
 *   - the manifest's phase and round bind when B gives them (diff_fields);
 *   - strict: every name of A (matching --only, when given) must be in B.
 *     Names B lacks are a failure: "B has nothing after X: N tensors
 *     missing, first Y" when B stops early. Names only B has are listed
 *     and change nothing.
 *   - shapes must be equal, and both floats or both integers/bools (f4
 *     against f8 is fine, i4 against i8 too); integers must be equal;
 *   - a float value departs when |a - b| > atol + rtol * max|A|, max|A|
 *     being the largest finite magnitude of the REFERENCE tensor (defaults
 *     rtol 1e-4, atol 1e-6): the tolerance cannot be stretched by the port's
 *     own values;
 *   - NaN never agrees, not even with NaN (a reference holding NaN cannot
 *     vouch for anything); an infinity agrees only with the same infinity;
 *     a finite value against a non-finite one departs. NaN/Inf counts and
 *     the first position are reported.
 *   - each .npy header is validated and its size checked before any data is
 *     read; the manifest's dtype and shape must match the header; one
 *     tensor pair is in memory at a time (plus one of A for the hints).
 * The first departure comes with hints where they are certain: which heads
 * of an [H, ...] attention tensor depart, which rows (the context rows of a
 * draft key), a constant factor (named: sqrt(2)), one factor per column or
 * row, permuted axes, which other tensor of A (same phase, same shape) B's
 * tensor or one of its column blocks equals, whether B is A before a final
 * RMSNorm, and a near tie behind a differing sampled id. A hybrid target's
 * (Qwen3.5) mistakes are named from the values: the state after a crop
 * matched against A's states after each token of the verify (recomputed
 * from A's traced inputs of the call: not rolled back, off by one, replayed
 * from the state after the whole block), the conv window against A's
 * conv_in rows, a tensor rounded to bf16, a state restarted from zero, a
 * zero-centred norm read as w * x, heads from q_proj's wrong rows, RoPE
 * tables over the whole head (hybrid_hints).
 * Exit: 0 every tensor of A is in B and agrees; 1 some differ or are
 * missing from B; 2 bad input (usage, unreadable directory, manifest or
 * .npy, a manifest contradicting a header) or no name in common.
 */

/* realpath() is an XSI interface: ask for it next to POSIX 2008 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif

#include "cli/diff.h"
#include "dflash.h"
#include "cli/flags.h"
#include "formats/files.h"
#include "formats/manifest.h"
#include "formats/tracenames.h"
#include "trace.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define DIFF_LIST_MAX 20   /* differing / missing names listed in full */
#define DIFF_MAX_ONLY 64

/* A float tensor beyond the tolerance is "rounding", not a departure, when
 * the port lies about as close to the double build's values as this
 * program's float build does (TRACE.md "dflash diff: how to read it"): with
 * D the double build's tensor and F the float build's (one of them is A,
 * the other a trace of the other build on the same flags: --double/--float,
 * or run by diff itself from the flags A's manifest records),
 * RMS(B - D) <= DIFF_ROUND_RATIO * RMS(F - D) and max|B - D| <=
 * DIFF_ROUND_RATIO * max|F - D|; no value NaN or Inf; every id tensor
 * before it agrees, in B and in the other build's run (the same tokens so
 * far). */
#define DIFF_ROUND_RATIO 10.0
/* Without the other build's tensor (no flags recorded, as in a training
 * trace or an oracle's; no ./dflash-double; its run took other tokens), the
 * thresholds of old decide, and the summary says so: NMSE at most -60 dB,
 * at most 1 value in 100 beyond, none beyond 10 tolerances. They misjudge
 * both ways (TRACE.md). */
#define DIFF_FALLBACK_NMSE_DB (-60.0)
#define DIFF_FALLBACK_FRACTION 100
#define DIFF_FALLBACK_EXCESS 10.0
#define DIFF_OTHER_FILTERS 30     /* --trace-filter globs diff gives the other build's run (main.c takes 32) */
#define DIFF_NEIGHBOURS 8         /* tensors on each side an agreeing tensor's NMSE is compared with */
#define DIFF_ODD_DB 30.0          /* an agreeing tensor this far above its neighbours' NMSE is named */
#define DIFF_MAX_TIES 64          /* positions of a sampled tensor remembered as near ties */

typedef struct { int r; int64_t v; } AccLen;   /* a round's acceptance length */

typedef struct {
    double rtol, atol;
    int verbose, no_rounding;
    const char *only[DIFF_MAX_ONLY];
    int n_only;
    const char *dir[3];           /* A, B, the other build's trace */
    const Manifest *ma, *mb;
    int compared, differ, rounding;
    int first_named;              /* "first departure" printed */
    int diverged;                 /* an id tensor departed: the runs' tokens differ from here on */
    double worst_rnd_db;          /* the largest distance ratio (judge_rounding) among the rounding tensors */
    char worst_rnd[256];          /* and its name */
    /* rounds (diff_rounds): how many each ran, their acceptance lengths */
    int rounds[2], rounds_differ;
    /* the acceptance lengths each traced: (round, length) pairs sorted by round, one per
     * verify{r}.acceptance_length name (acc_at): as many as the names, whatever a name's round */
    struct { AccLen *p; int n; } acc[2];
    /* near ties past the accepted tokens in verify{tie_round}.sampled: their
     * positions (verify{r}.match may differ exactly there) */
    int tie_round, n_ties;
    size_t ties[DIFF_MAX_TIES];
    /* the other precision's build (the rounding rule, above) */
    int a_double;                 /* A's floats are float64: A is the double build, the other the float build */
    int have_other;               /* mo and dir[2] hold the other build's trace */
    Manifest mo;
    int o_div;                    /* A's index of the first id tensor the other build's run differs in */
    int judged;                   /* tensors beyond the tolerance the other build judged */
    int unjudged;                 /* tensors beyond the tolerance with no other build's tensor to judge them by */
    int unjudged_rounding;        /* of those, rounding by the fallback thresholds */
    char no_other[800];           /* why the other build's trace is missing ("" when it is not) */
    char tmp[600];                /* the directory diff ran the other build into ("": none) */
    double *db;                   /* (A's names) NMSE of each agreeing float tensor, NAN when none */
    int first_k;                  /* A's index of the first departure, -1 none */
} Diff;

/* side s's acceptance length of round r (verify{r}.acceptance_length), -1 when not traced */
static int64_t acc_at(const Diff *df, int s, int r) {
    int lo = 0, hi = df->acc[s].n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (df->acc[s].p[mid].r < r) lo = mid + 1;
        else hi = mid;
    }
    return lo < df->acc[s].n && df->acc[s].p[lo].r == r ? df->acc[s].p[lo].v : -1;
}

/* A name as text, control characters and backslashes escaped (\xNN), so a
 * manifest cannot fake an output line. */
static void put_name(FILE *f, const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c < 0x20 || *c == 0x7f || *c == '\\') fprintf(f, "\\x%02x", *c);
        else fputc(*c, f);
    }
}

static void print_index(FILE *f, const NpyArray *a, size_t k) {
    int64_t idx[NPY_MAX_NDIM];
    for (int d = a->ndim - 1; d >= 0; d--) {
        idx[d] = a->shape[d] ? (int64_t)(k % (size_t)a->shape[d]) : 0;
        if (a->shape[d]) k /= (size_t)a->shape[d];
    }
    fprintf(f, "[");
    for (int d = 0; d < a->ndim; d++) fprintf(f, d ? ", %lld" : "%lld", (long long)idx[d]);
    fprintf(f, "]");
}

/* "(2, 3)", "(3,)", "()" */
static void shape_str(char *out, size_t size, const NpyArray *a) {
    size_t len = (size_t)snprintf(out, size, "(");
    for (int d = 0; d < a->ndim && len < size; d++)
        len += (size_t)snprintf(out + len, size - len, d ? ", %lld" : "%lld", (long long)a->shape[d]);
    if (len < size) snprintf(out + len, size - len, a->ndim == 1 ? ",)" : ")");
}

static void print_shape(FILE *f, const NpyArray *a) {
    char s[32 + 24 * NPY_MAX_NDIM];
    shape_str(s, sizeof s, a);
    fprintf(f, "%s %s", a->descr, s);
}

static int same_shape(const NpyArray *a, const NpyArray *b) {
    int same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
    return same;
}

/* One float comparison over a 2-D span: rows x cols values, element (r, c)
 * at a[r * a_ld + a_c0 + c] and b[r * b_ld + b_c0 + c] (a whole tensor is
 * one row). */
typedef struct { size_t rows, cols, a_ld, a_c0, b_ld, b_c0; } Span;
typedef struct {
    double max_a, tol, max_abs, worst_excess, sum_d2, sum_a2;
    size_t bad, worst;            /* worst: (r * cols + c) in the span */
    size_t nan[2], inf[2];        /* in A, in B */
    size_t first_nonfinite;       /* span index of the first NaN/Inf on either side */
    int any_nonfinite;
} FloatCmp;

static Span whole(const NpyArray *a) { Span s = {1, a->n, a->n, 0, a->n, 0}; return s; }

static void cmp_floats(const Diff *df, const NpyArray *a, const NpyArray *b, Span s, FloatCmp *r) {
    memset(r, 0, sizeof *r);
    r->worst_excess = -1;
    for (size_t i = 0; i < s.rows; i++)
        for (size_t c = 0; c < s.cols; c++) {
            double x = npy_f(a, i * s.a_ld + s.a_c0 + c);
            if (isfinite(x) && fabs(x) > r->max_a) r->max_a = fabs(x);
        }
    r->tol = df->atol + df->rtol * r->max_a;   /* one tolerance for the whole tensor, from A */
    for (size_t i = 0; i < s.rows; i++)
        for (size_t c = 0; c < s.cols; c++) {
            size_t k = i * s.cols + c;
            double x = npy_f(a, i * s.a_ld + s.a_c0 + c), y = npy_f(b, i * s.b_ld + s.b_c0 + c);
            double diff, excess;
            int departs;
            if (!isfinite(x) || !isfinite(y)) {
                r->nan[0] += isnan(x) != 0;
                r->nan[1] += isnan(y) != 0;
                r->inf[0] += isinf(x) != 0;
                r->inf[1] += isinf(y) != 0;
                if (!r->any_nonfinite) r->first_nonfinite = k;
                r->any_nonfinite = 1;
                departs = isnan(x) || isnan(y) || x != y;   /* NaN never agrees */
                diff = excess = departs ? INFINITY : 0;
            } else {
                diff = fabs(x - y);
                departs = diff > r->tol;
                excess = r->tol > 0 ? diff / r->tol : (diff > 0 ? INFINITY : 0);
                r->sum_d2 += diff * diff;
                r->sum_a2 += x * x;
            }
            if (diff > r->max_abs) r->max_abs = diff;
            if (departs) r->bad++;
            if (excess > r->worst_excess) {
                r->worst_excess = excess;
                r->worst = k;
            }
        }
}

/* "-153.2 dB": 10 log10(sum (a-b)^2 / sum a^2) over the finite values */
static void nmse_str(char *out, size_t size, const FloatCmp *r) {
    if (r->sum_d2 == 0) snprintf(out, size, "exact");
    else if (r->sum_a2 == 0) snprintf(out, size, "inf dB (A is 0)");
    else snprintf(out, size, "%.1f dB", 10 * log10(r->sum_d2 / r->sum_a2));
}

/* The values of both around flat index k, side by side. */
static void print_around(FILE *f, const NpyArray *a, const NpyArray *b, size_t k) {
    size_t k0 = k > 3 ? k - 3 : 0, k1 = k0 + 8 < a->n ? k0 + 8 : a->n;
    const NpyArray *ab[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        fprintf(f, "  %s flat [%zu..%zu]:", s ? "B" : "A", k0, k1 - 1);
        for (size_t j = k0; j < k1; j++) {
            const char *mark = j == k ? "*" : "";
            if (ab[s]->kind != 'f') fprintf(f, " %s%lld", mark, (long long)npy_i(ab[s], j));
            else fprintf(f, " %s%.9g", mark, npy_f(ab[s], j));
        }
        fprintf(f, "\n");
    }
}

/* The phase of a name: the text before its first '.' ("prefill", "draft2") */
static size_t phase_len(const char *name) {
    const char *dot = strchr(name, '.');
    return dot ? (size_t)(dot - name) : strlen(name);
}

/* Open and load A's tensor k of the manifest when its shape is rows x cols
 * (2-D) or, with cols == 0, equal to want's. 1 loaded, 0 not that shape,
 * -1 unreadable (skipped: hints are best effort, A was read before). */
static int load_candidate(const Diff *df, int k, const NpyArray *want, int64_t rows, int64_t cols,
                          NpyArray *c) {
    char *p = path_join(df->dir[0], df->ma->files.s[k]);
    int r = p && npy_open(p, c) == 0 ? 1 : -1;
    if (r == 1 && c->kind != 'f') r = 0;
    if (r == 1 && (cols ? !(c->ndim == 2 && c->shape[0] == rows && c->shape[1] == cols) : !same_shape(c, want)))
        r = 0;
    if (r == 1 && npy_load(p, c) != 0) r = -1;
    free(p);
    return r;
}

/* ---- exact signatures: a factor, the rows that depart, permuted axes ---- */

/* "sqrt(2)", "1/sqrt(8)", "2", "1/4" when c is one of them to 1e-4
 * relative, else "" */
static void name_constant(char *out, size_t size, double c) {
    out[0] = 0;
    double m = fabs(c);
    for (int k = 2; k <= 64 && !out[0]; k++) {
        double s = sqrt((double)k);
        int square = (int)(s + 0.5) * (int)(s + 0.5) == k;
        if (fabs(m - k) <= 1e-4 * m) snprintf(out, size, "%s%d", c < 0 ? "-" : "", k);
        else if (fabs(m - 1.0 / k) <= 1e-4 * m) snprintf(out, size, "%s1/%d", c < 0 ? "-" : "", k);
        else if (!square && fabs(m - s) <= 1e-4 * m) snprintf(out, size, "%ssqrt(%d)", c < 0 ? "-" : "", k);
        else if (!square && fabs(m - 1 / s) <= 1e-4 * m) snprintf(out, size, "%s1/sqrt(%d)", c < 0 ? "-" : "", k);
    }
}

/* B = c_g * A for every value of group g, where a value's group is
 * (k / inner) % groups (groups = 1: one constant). c_g by least squares
 * over the group; fits when every value is within the tolerance scaled by
 * |c_g| (and groups where A is 0 have B 0). Fills c (groups). */
static int factor_fits(const NpyArray *a, const NpyArray *b, double tol, size_t inner, size_t groups, double *c) {
    double *ab = calloc(groups, sizeof *ab), *aa = calloc(groups, sizeof *aa);
    int fits = ab && aa;
    for (size_t k = 0; fits && k < a->n; k++) {
        size_t g = (k / inner) % groups;
        double x = npy_f(a, k), y = npy_f(b, k);
        if (!isfinite(x) || !isfinite(y)) fits = 0;
        ab[g] += x * y;
        aa[g] += x * x;
    }
    for (size_t g = 0; fits && g < groups; g++) c[g] = aa[g] > 0 ? ab[g] / aa[g] : 0;
    for (size_t k = 0; fits && k < a->n; k++) {
        size_t g = (k / inner) % groups;
        double x = npy_f(a, k), y = npy_f(b, k);
        fits = fabs(y - c[g] * x) <= tol * (fabs(c[g]) > 1 ? fabs(c[g]) : 1);
    }
    free(ab);
    free(aa);
    return fits;
}

/* The constant factor, then one factor per column (the last axis), then
 * one per row (a 2-D tensor's first axis, an attention tensor's second). */
static void factor_hints(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b, const FloatCmp *r) {
    FILE *f = stdout;
    if (a->n < 2 || a->ndim < 1) return;
    double c1;
    char what[48];
    if (factor_fits(a, b, r->tol, 1, 1, &c1) && fabs(c1 - 1) > 1e-4) {
        name_constant(what, sizeof what, c1);
        fprintf(f, "  hint: B = %.6g x A on every value (a constant factor%s%s)\n", c1, what[0] ? ": " : "", what);
        /* an attention scale: A's is head_dim^-0.5, B's c times that */
        const char *s = strstr(name, TN_ATTN_SCORES);
        if (s && c1 > 0) {
            char qname[512];
            snprintf(qname, sizeof qname, "%.*s" TN_Q, (int)(s - name), name);
            int k = namemap_get(&df->ma->index, qname);
            NpyArray q;
            char *p = k >= 0 ? path_join(df->dir[0], df->ma->files.s[k]) : NULL;
            if (p && npy_open(p, &q) == 0 && q.ndim == 3) {
                double dh = (double)q.shape[2], used = dh / (c1 * c1);
                fprintf(f, "  hint: the attention scale: A's is head_dim^-0.5 = 1/sqrt(%g), B's is %.6g times "
                           "that = 1/sqrt(%.4g)%s\n", dh, c1, used,
                        fabs(used - floor(used + 0.5)) < 1e-3 ? " (a scale from another size: hidden_size / "
                                                                "num_attention_heads instead of head_dim?)" : "");
            }
            free(p);
        }
        return;
    }
    size_t cols = (size_t)a->shape[a->ndim - 1], rows_axis = a->ndim == 3 && strstr(name, TN_SELF_ATTN) ? 1 : 0;
    size_t rows = (size_t)a->shape[rows_axis], inner_r = 1;
    for (int d = (int)rows_axis + 1; d < a->ndim; d++) inner_r *= (size_t)a->shape[d];
    double *c = malloc(((cols > rows ? cols : rows) + 1) * sizeof *c);
    if (!c) return;
    if (a->ndim >= 2 && cols >= 2 && a->n / cols >= 2 && factor_fits(a, b, r->tol, 1, cols, c)) {
        double lo = c[0], hi = c[0];
        for (size_t j = 1; j < cols; j++) { lo = c[j] < lo ? c[j] : lo; hi = c[j] > hi ? c[j] : hi; }
        const char *dot = strrchr(name, '.');
        if (dot && !strcmp(dot, "." TN_ROPE_ANGLES))   /* angles = position x inv_freq: one factor per frequency */
            fprintf(f, "  hint: B = A times one factor per column (the last axis: %zu factors from %.6g to %.6g; "
                       "column 0: %.6g): one factor per frequency of inv_freq: the frequency scaling (rope_scaling) "
                       "differs\n", cols, lo, hi, c[0]);
        else
            fprintf(f, "  hint: B = A times one factor per column (the last axis: %zu factors from %.6g to %.6g; "
                       "column 0: %.6g): a wrong weight vector along the last axis, e.g. a norm with another norm's "
                       "weight\n", cols, lo, hi, c[0]);
    } else if (a->ndim >= 2 && rows >= 2 && inner_r >= 2 && factor_fits(a, b, r->tol, inner_r, rows, c)) {
        double lo = c[0], hi = c[0];
        for (size_t j = 1; j < rows; j++) { lo = c[j] < lo ? c[j] : lo; hi = c[j] > hi ? c[j] : hi; }
        fprintf(f, "  hint: B = A times one factor per row (axis %zu: %zu factors from %.6g to %.6g; row 0: %.6g): "
                   "a per-row scale, e.g. a norm or softmax denominator over the wrong values\n", rows_axis, rows, lo,
                hi, c[0]);
    }
    free(c);
}

/* "0..2 5 7..9" from a 0/1 array */
static void ranges_str(char *out, size_t size, const unsigned char *on, size_t n, int want) {
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && len + 48 < size; i++) {
        if (on[i] != want || (i > 0 && on[i - 1] == want)) continue;
        size_t j = i;
        while (j + 1 < n && on[j + 1] == want) j++;
        len += (size_t)snprintf(out + len, size - len, j > i ? "%s%zu..%zu" : "%s%zu", len ? " " : "", i, j);
    }
}

/* The leading dimension of A's tensor `name` (its header), or -1. */
static int64_t dim0_of(const Diff *df, const char *name) {
    int k = namemap_get(&df->ma->index, name);
    if (k < 0) return -1;
    char *p = path_join(df->dir[0], df->ma->files.s[k]);
    NpyArray h;
    int64_t d = p && npy_open(p, &h) == 0 && h.ndim >= 1 ? h.shape[0] : -1;
    free(p);
    return d;
}

/* does a trace name end with tail (a name table tail, formats/tracenames.h)? */
static int name_ends(const char *name, const char *tail) {
    size_t n = strlen(name), t = strlen(tail);
    return n >= t && strcmp(name + n - t, tail) == 0;
}

/* Which rows depart, when some do and some do not: a 2-D tensor's rows, an
 * attention tensor's [H, rows, ...] second axis. A draft layer's k, v and
 * k_rope hold Lc context rows then B block rows: named as such. */
static void rows_hint(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b, const FloatCmp *r) {
    int attn = a->ndim == 3 && strstr(name, TN_SELF_ATTN) != NULL;
    if (!(a->ndim == 2 || attn) || a->n == 0) return;
    size_t ax = attn ? 1 : 0, R = (size_t)a->shape[ax], inner = (size_t)a->shape[a->ndim - 1];
    if (R < 2) return;
    unsigned char *dep = calloc(R, 1);
    if (!dep) return;
    size_t n_dep = 0;
    for (size_t k = 0; k < a->n; k++) {
        size_t row = (k / inner) % R;
        double x = npy_f(a, k), y = npy_f(b, k);
        int bad = isnan(x) || isnan(y) || (isfinite(x) && isfinite(y) ? fabs(x - y) > r->tol : x != y);
        if (bad && !dep[row]) { dep[row] = 1; n_dep++; }
    }
    if (n_dep > 0 && n_dep < R) {
        char on[400], off[400], label[200] = "";
        ranges_str(on, sizeof on, dep, R, 1);
        ranges_str(off, sizeof off, dep, R, 0);
        /* draft{r}.layers.{l}.self_attn.{k,v,k_rope}: [Hkv, Lc+B, d] */
        unsigned rd;
        int n = 0;
        const char *tail = strrchr(name, '.');
        if (attn && sscanf(name, "draft%u.%n", &rd, &n) == 1 && n > 0 && tail &&
            (name_ends(name, "." TN_K) || name_ends(name, "." TN_V) || name_ends(name, "." TN_K_ROPE))) {
            char th[64];
            snprintf(th, sizeof th, "draft%u." TN_TARGET_HIDDEN_RAW, rd);
            int64_t Lc = dim0_of(df, th);
            int ctx_only = Lc > 0 && (size_t)Lc < R, blk_only = ctx_only;
            for (size_t i = 0; Lc > 0 && i < R; i++) {
                ctx_only &= dep[i] == (i < (size_t)Lc);
                blk_only &= dep[i] == (i >= (size_t)Lc);
            }
            if (ctx_only)
                snprintf(label, sizeof label, ": the context rows (Lc = %lld); the block rows %lld..%zu agree",
                         (long long)Lc, (long long)Lc, R - 1);
            else if (blk_only)
                snprintf(label, sizeof label, ": the block rows; the context rows 0..%lld (Lc = %lld) agree",
                         (long long)Lc - 1, (long long)Lc);
        }
        fprintf(stdout, "  rows departing (axis %zu): %s (%zu of %zu)%s%s%s\n", ax, on, n_dep, R, label,
                label[0] ? "" : "; agreeing: ", label[0] ? "" : off);
    }
    free(dep);
}

/* B holds A's values with the axes permuted: B's axis k is A's axis p[k].
 * Checked with B read in its own shape (when it is A's permuted) or, for B
 * of A's shape, read as A's shape permuted (a reshape where a transpose was
 * needed). Prints the first permutation that fits. */
static int perm_hint(const NpyArray *a, const NpyArray *b, double tol, const char *name) {
    int nd = a->ndim;
    if (nd < 2 || nd > 4 || a->n != b->n || a->n < 2) return 0;
    int p[4] = {0, 1, 2, 3};
    /* every permutation of nd axes, in lexicographic order (the identity first: skipped) */
    for (;;) {
        int i = nd - 2;
        while (i >= 0 && p[i] > p[i + 1]) i--;
        if (i < 0) return 0;
        int j = nd - 1;
        while (p[j] < p[i]) j--;
        int t = p[i]; p[i] = p[j]; p[j] = t;
        for (int x = i + 1, y = nd - 1; x < y; x++, y--) { t = p[x]; p[x] = p[y]; p[y] = t; }
        int64_t sb[4];
        for (int k = 0; k < nd; k++) sb[k] = a->shape[p[k]];
        int b_is_perm = b->ndim == nd, same = b->ndim == nd;
        for (int k = 0; k < nd && b->ndim == nd; k++) {
            b_is_perm &= b->shape[k] == sb[k];
            same &= b->shape[k] == a->shape[k];
        }
        if (!b_is_perm && !same) continue;
        size_t stride[4], s = 1;   /* strides of B's data read as shape sb */
        for (int k = nd - 1; k >= 0; k--) { stride[k] = s; s *= (size_t)sb[k]; }
        int fits = 1;
        for (size_t f = 0; f < a->n && fits; f++) {
            size_t rem = f, idx[4], off = 0;
            for (int d = nd - 1; d >= 0; d--) { idx[d] = rem % (size_t)a->shape[d]; rem /= (size_t)a->shape[d]; }
            for (int k = 0; k < nd; k++) off += idx[p[k]] * stride[k];
            double x = npy_f(a, f), y = npy_f(b, off);
            fits = isfinite(x) && isfinite(y) && fabs(x - y) <= tol;
        }
        if (!fits) continue;
        printf("  hint: B holds A's values with the axes permuted: B's axes are A's (");
        for (int k = 0; k < nd; k++) printf(k ? ", %d" : "%d", p[k]);
        printf(")%s", b_is_perm && !same ? "" : ", read into A's shape (a reshape where a transpose was needed)");
        if (nd == 3 && p[0] == 1 && p[1] == 0 && strstr(name, TN_SELF_ATTN))
            printf(": heads and tokens swapped ([T, H, d] for the contract's [H, T, d])");
        printf("\n");
        return 1;
    }
}

static int load_named(const Diff *df, int side, const char *name, NpyArray *t);
static int name_round(const char *name, const char *kind);

/* B is an RMSNorm of A: each row of the last axis of A normalised
 * (x / sqrt(mean(x^2) + 1e-6)), times one weight per column, gives B
 * (every value within the tolerance scaled by the weight): a norm A's model
 * does not have (q_norm / k_norm on a target without them). */
static void rmsnorm_of_a_hint(const NpyArray *a, const NpyArray *b, const FloatCmp *r) {
    if (a->ndim < 2 || r->any_nonfinite) return;
    size_t nonzero = 0;
    for (size_t i = 0; i < b->n && !nonzero; i++) nonzero = npy_f(b, i) != 0;
    if (!nonzero) return;   /* B all zeros: any norm with weight 0 */
    size_t D = (size_t)a->shape[a->ndim - 1], T = D ? a->n / D : 0;
    if (D < 2 || T < 2) return;
    double *inv = malloc(T * sizeof *inv), *g = malloc(D * sizeof *g);
    int fits = inv && g;
    for (size_t t = 0; fits && t < T; t++) {
        double ss = 0;
        for (size_t c = 0; c < D; c++) ss += npy_f(a, t * D + c) * npy_f(a, t * D + c);
        inv[t] = 1 / sqrt(ss / (double)D + 1e-6);
    }
    double btol = 0;   /* B's own scale: the weight is B's, not A's */
    for (size_t k = 0; k < b->n; k++) btol = fmax(btol, fabs(npy_f(b, k)));
    btol = r->tol / (r->max_a > 0 ? r->max_a : 1) * btol + 1e-6;
    for (size_t c = 0; fits && c < D; c++) {
        double num = 0, den = 0;
        for (size_t t = 0; t < T; t++) {
            double x = npy_f(a, t * D + c) * inv[t];
            num += x * npy_f(b, t * D + c);
            den += x * x;
        }
        g[c] = den > 0 ? num / den : 0;
        for (size_t t = 0; fits && t < T; t++)
            fits = fabs(g[c] * npy_f(a, t * D + c) * inv[t] - npy_f(b, t * D + c)) <= btol;
    }
    int unit = 1;
    for (size_t c = 0; fits && c < D; c++) unit &= fabs(g[c] - 1) < 1e-9;
    if (fits && !unit)
        printf("  hint: B is an RMSNorm of A (each row of A's last axis normalised, times one weight per column): a "
               "norm A's model does not have, e.g. q_norm/k_norm on a target without them\n");
    free(inv);
    free(g);
}

/* The positions of an attention tensor's T queries and S keys: the phase's
 * position_ids (S of them: the keys, the queries their last T; T: the
 * queries, the keys the cache 0..S-1). 1 when found. */
static int attn_positions(const Diff *df, const char *name, size_t T, size_t S, int64_t *qpos, int64_t *kpos) {
    char pname[300];
    snprintf(pname, sizeof pname, "%.*s." TN_POSITION_IDS, (int)phase_len(name), name);
    NpyArray p;
    if (!load_named(df, 0, pname, &p)) return 0;
    int ok = p.kind != 'f' && p.ndim == 1 && (p.n == S || p.n == T) && S >= T;
    for (size_t j = 0; ok && j < S; j++) kpos[j] = p.n == S ? npy_i(&p, j) : (int64_t)j;
    for (size_t t = 0; ok && t < T; t++) qpos[t] = p.n == S ? npy_i(&p, S - T + t) : npy_i(&p, t);
    npy_free(&p);
    return ok;
}

/* attn_weights [H, T, S]: B gives weight where A is exactly 0 (keys A's
 * mask hides), and how far from its query the nearest such key is. */
static void mask_hint(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b, const FloatCmp *r) {
    const char *dot = strrchr(name, '.');
    if (!dot || !name_ends(name, "." TN_ATTN_WEIGHTS) || a->ndim != 3) return;
    size_t H = (size_t)a->shape[0], T = (size_t)a->shape[1], S = (size_t)a->shape[2], n = 0, first = 0;
    size_t hidden = 0, hfirst = 0;   /* the other way round: B exactly 0 where A gives weight */
    for (size_t k = 0; k < a->n; k++) {
        if (npy_f(a, k) == 0 && fabs(npy_f(b, k)) > r->tol && n++ == 0) first = k;
        if (npy_f(b, k) == 0 && fabs(npy_f(a, k)) > r->tol && hidden++ == 0) hfirst = k;
    }
    if (hidden) {
        printf("  hint: B is exactly 0 where A gives weight (B's mask hides keys A's does not): %zu values, first at ",
               hidden);
        print_index(stdout, a, hfirst);
        printf("\n");
    }
    if (!n) return;
    printf("  hint: B gives weight where A is exactly 0 (keys the mask hides): %zu values, first at ", n);
    print_index(stdout, a, first);
    int64_t *qpos = malloc(T * sizeof *qpos), *kpos = malloc(S * sizeof *kpos);
    if (qpos && kpos && attn_positions(df, name, T, S, qpos, kpos)) {
        int64_t back = INT64_MAX, ahead = INT64_MAX;   /* the nearest such key behind / ahead of its query */
        for (size_t k = 0; k < a->n; k++) {
            if (!(npy_f(a, k) == 0 && fabs(npy_f(b, k)) > r->tol)) continue;
            size_t t = (k / S) % T, j = k % S;
            int64_t d = qpos[t] - kpos[j];
            if (d >= 0 && d < back) back = d;
            if (d < 0 && -d < ahead) ahead = -d;
        }
        if (back != INT64_MAX)
            printf("; the first extra key is %lld position%s back (a window or causal mask of another width)",
                   (long long)back, back == 1 ? "" : "s");
        if (ahead != INT64_MAX)
            printf("; the nearest extra key after its query is %lld position%s ahead (B lets queries see later keys)",
                   (long long)ahead, ahead == 1 ? "" : "s");
    }
    (void)H;
    printf("\n");
    free(qpos);
    free(kpos);
}

/* train{s}.param.KEY departs only where A's gradient train{s}.grad.KEY is
 * within its tolerance of 0: AdamW's step lr * g / (|g| + eps) is about
 * lr * sign(g) there, the sign of a gradient at rounding level. */
static void adamw_hint(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b, const FloatCmp *r) {
    const char *p = strstr(name, ".param.");
    if (!p || name_round(name, "train") < 1) return;
    char gname[600];
    snprintf(gname, sizeof gname, "%.*s.grad.%s", (int)(p - name), name, p + 7);
    NpyArray g;
    if (!load_named(df, 0, gname, &g)) return;
    int ok = g.kind == 'f' && same_shape(&g, a);
    double gmax = 0;
    for (size_t k = 0; ok && k < g.n; k++) gmax = fmax(gmax, fabs(npy_f(&g, k)));
    double gtol = df->atol + df->rtol * gmax, worst = 0;
    size_t n = 0;
    for (size_t k = 0; ok && k < a->n; k++) {
        if (!(fabs(npy_f(a, k) - npy_f(b, k)) > r->tol)) continue;
        ok = fabs(npy_f(&g, k)) <= gtol;
        worst = fmax(worst, fabs(npy_f(&g, k)));
        n++;
    }
    if (ok && n) {
        printf("  hint: AdamW sign of a rounding-level gradient: at each of the %zu departing values A's ", n);
        put_name(stdout, gname);
        printf(" is within its tolerance of 0 (|g| <= %.3g, tolerance %.3g); AdamW's first step moves a weight by "
               "lr * g / (|g| + eps), about lr * sign(g), so the sign of a gradient below float rounding decides it "
               "(TRACE.md, \"Training\")\n", worst, gtol);
    }
    npy_free(&g);
}

/* ---- a hybrid target (Qwen3.5): the mistakes of a port's Gated DeltaNet
 * layers and gated attention, named from the values (TRACE.md "Hybrid
 * targets"). The trace holds no state per token of a verify: the states
 * after each of its tokens are recomputed here from A's own traced inputs
 * of the call (state_in, k, v, g, beta), the gated delta rule in double
 * (gdr_step), and B's state after the crop is matched against them. ---- */

/* A's tensor PREFIX TAIL (side 0), 1 loaded as floats of `ndim` axes, else 0 */
static int load_a(const Diff *df, const char *prefix, const char *tail, int ndim, NpyArray *t) {
    char n[600];
    snprintf(n, sizeof n, "%s%s", prefix, tail);
    if (!load_named(df, 0, n, t)) return 0;
    if (t->kind != 'f' || t->ndim != ndim) { npy_free(t); return 0; }
    return 1;
}

/* is A's trace a hybrid target's (a linear_attn name in it)? */
static int hybrid_trace(const Diff *df) {
    for (int k = 0; k < df->ma->names.n; k++)
        if (strstr(df->ma->names.s[k], ".linear_attn.")) return 1;
    return 0;
}

/* every value of b within tol of c[] */
static int equals_vals(const NpyArray *b, const double *c, size_t n, double tol) {
    if (b->n != n) return 0;
    for (size_t i = 0; i < n; i++) {
        double y = npy_f(b, i);
        if (!isfinite(y) || fabs(y - c[i]) > tol) return 0;
    }
    return 1;
}

/* one token t of the gated delta rule (dflash.c gated_delta_rule) on S (Hv, dk, dv), in double */
static void gdr_step(double *S, const NpyArray *k, const NpyArray *v, const NpyArray *g, const NpyArray *beta, size_t t,
                     size_t Hk, size_t dk, size_t Hv, size_t dv, double *kv_mem) {
    for (size_t h = 0; h < Hv; h++) {
        size_t j = h / (Hv / Hk);
        double *Sh = S + h * dk * dv, decay = exp(npy_f(g, t * Hv + h)), bt = npy_f(beta, t * Hv + h);
        for (size_t i = 0; i < dk * dv; i++) Sh[i] *= decay;
        for (size_t e = 0; e < dv; e++) kv_mem[e] = 0;
        for (size_t i = 0; i < dk; i++)
            for (size_t e = 0; e < dv; e++) kv_mem[e] += Sh[i * dv + e] * npy_f(k, (t * Hk + j) * dk + i);
        for (size_t e = 0; e < dv; e++) kv_mem[e] = (npy_f(v, (t * Hv + h) * dv + e) - kv_mem[e]) * bt;
        for (size_t i = 0; i < dk; i++)
            for (size_t e = 0; e < dv; e++) Sh[i * dv + e] += npy_f(k, (t * Hk + j) * dk + i) * kv_mem[e];
    }
}

/* B's verify{r}.rollback.layers.{l}.state or .conv_state (the first
 * departure): which of A's states of round r's verify it is. The state:
 * A's state after k of the verify's T tokens (k = 0: state_in), for every
 * k; the right one is k = m = acceptance_length + 1. Or the m kept tokens
 * replayed from A's state AFTER the call (state_out). The conv window: A's
 * conv_in rows o..o+K-2 for every o; the right one is o = m. */
static void rollback_hint(const Diff *df, const char *name, const NpyArray *b, double tol) {
    unsigned rd, l;
    int n = 0;
    char kind[32];
    if (sscanf(name, "verify%u.rollback.layers.%u.%31s%n", &rd, &l, kind, &n) != 3 || name[n] || rd > 1000000)
        return;
    int conv = !strcmp(kind, "conv_state");
    if (!conv && strcmp(kind, "state")) return;
    int64_t acc = acc_at(df, 0, (int)rd);
    if (acc < 0) return;
    size_t m = (size_t)acc + 1;
    char pre[200], pos_name[64];
    snprintf(pre, sizeof pre, "verify%u.layers.%u.linear_attn.", rd, l);
    snprintf(pos_name, sizeof pos_name, "verify%u.position_ids", rd);
    NpyArray pos;
    long long p0 = -1;
    if (load_named(df, 0, pos_name, &pos) && pos.kind != 'f' && pos.n > 0) p0 = (long long)npy_i(&pos, 0);
    npy_free(&pos);
    if (conv) {
        NpyArray ci;
        if (!load_a(df, pre, "conv_in", 2, &ci)) return;
        size_t C = (size_t)ci.shape[1], K1 = b->ndim == 2 ? (size_t)b->shape[0] : 0;
        size_t T = (size_t)ci.shape[0] >= K1 ? (size_t)ci.shape[0] - K1 : 0;
        double *w = K1 && b->n == K1 * C ? malloc(K1 * C * sizeof *w) : NULL;
        for (size_t o = 0; w && o <= T; o++) {
            if (o == m) continue;
            for (size_t i = 0; i < K1 * C; i++) w[i] = npy_f(&ci, o * C + i);
            if (!equals_vals(b, w, K1 * C, tol)) continue;
            printf("  hint: B's conv window after the crop is A's conv_in rows %zu..%zu (the last K-1 = %zu inputs "
                   "after %zu of the verify's %zu tokens), A's rows %zu..%zu (after the m = acceptance_length + 1 "
                   "= %zu kept tokens): ", o, o + K1 - 1, K1, o, T, m, m + K1 - 1, m);
            if (o == T) printf("the conv window was not rolled back to the accepted position (it holds the whole "
                               "block's last inputs, A's conv_state_out)\n");
            else if (o + 1 == m || o == m + 1)
                printf("the conv window was rolled back to the wrong offset, off by one (one token %s)\n",
                       o < m ? "short" : "too far");
            else printf("the conv window was rolled back to the wrong offset\n");
            break;
        }
        free(w);
        npy_free(&ci);
        return;
    }
    NpyArray s_in, s_out, k, v, g, beta;
    int ok = load_a(df, pre, "state_in", 3, &s_in) & load_a(df, pre, "state_out", 3, &s_out) &
             load_a(df, pre, "k", 3, &k) & load_a(df, pre, "v", 3, &v) & load_a(df, pre, "g", 2, &g) &
             load_a(df, pre, "beta", 2, &beta);
    size_t T = ok ? (size_t)k.shape[0] : 0, Hk = ok ? (size_t)k.shape[1] : 0, dk = ok ? (size_t)k.shape[2] : 0;
    size_t Hv = ok ? (size_t)s_in.shape[0] : 0, dv = ok ? (size_t)s_in.shape[2] : 0, N = Hv * dk * dv;
    ok = ok && T > 0 && Hk > 0 && Hv % Hk == 0 && dv <= 4096 && (size_t)s_in.shape[1] == dk && s_out.n == N &&
         b->n == N && (size_t)v.shape[0] == T && (size_t)v.shape[1] == Hv && (size_t)v.shape[2] == dv &&
         g.n == T * Hv && beta.n == T * Hv && m <= T;
    double *S = ok ? malloc(N * sizeof *S) : NULL, *kv = ok ? malloc(dv * sizeof *kv) : NULL;
    if (S && kv) {
        for (size_t i = 0; i < N; i++) S[i] = npy_f(&s_in, i);
        size_t found = T + 1;
        for (size_t kk = 0; kk <= T && found > T; kk++) {
            if (kk > 0) gdr_step(S, &k, &v, &g, &beta, kk - 1, Hk, dk, Hv, dv, kv);
            if (kk != m && equals_vals(b, S, N, tol)) found = kk;
        }
        char at[64] = "", want[64] = "";
        if (p0 >= 0 && found <= T) {
            snprintf(at, sizeof at, ", position %lld", p0 + (long long)found - 1);
            snprintf(want, sizeof want, ", position %lld", p0 + (long long)m - 1);
        }
        if (found <= T) {
            printf("  hint: B's state after the crop is A's recurrent state after %zu of the verify's %zu tokens%s "
                   "(recomputed from A's state_in, k, v, g, beta), A's after %zu%s (m = acceptance_length + 1): ",
                   found, T, found ? at : " (before the verify: state_in)", m, want);
            if (found == T) printf("the recurrent state was not rolled back to the accepted position (it is the "
                                   "state after the whole block)\n");
            else if (found + 1 == m || found == m + 1)
                printf("the recurrent state was rolled back to the wrong position, off by one (one token %s)\n",
                       found < m ? "short" : "too far: the first rejected draft's");
            else if (found == 0) printf("the kept tokens never entered it (restored, not replayed)\n");
            else printf("the recurrent state was rolled back to the wrong position\n");
        } else {
            for (size_t i = 0; i < N; i++) S[i] = npy_f(&s_out, i);
            for (size_t t = 0; t < m; t++) gdr_step(S, &k, &v, &g, &beta, t, Hk, dk, Hv, dv, kv);
            if (equals_vals(b, S, N, tol))
                printf("  hint: B's state after the crop is the m = %zu kept tokens replayed from A's state AFTER the "
                       "whole block (state_out), not from the state before the verify (state_in): the state the "
                       "rollback restarts from was taken after the whole block\n", m);
        }
    }
    free(S);
    free(kv);
    NpyArray *all[] = {&s_in, &s_out, &k, &v, &g, &beta};
    for (size_t i = 0; i < 6; i++) npy_free(all[i]);
}

/* round to bfloat16 (nearest, ties to even) */
static double bf16_of(double x) {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* The hybrid hints at a float tensor's first departure */
static void hybrid_hints(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b, const FloatCmp *r) {
    if (r->any_nonfinite || a->n == 0) return;
    if (strstr(name, ".rollback.layers.")) rollback_hint(df, name, b, r->tol);
    /* B is A rounded to bf16: every B value a bfloat16, A's not, and B within half a bf16 step of A */
    size_t not_bf16_a = 0, fits = 1;
    for (size_t i = 0; i < a->n && fits; i++) {
        double x = npy_f(a, i), y = npy_f(b, i);
        not_bf16_a += bf16_of(x) != x;
        fits = bf16_of(y) == y && fabs(y - x) <= fabs(x) / 256 + r->tol / 100;
    }
    if (fits && not_bf16_a > a->n / 2)
        printf("  hint: every value of B is a bfloat16 and B is A rounded to bf16 (within half a bf16 step): B "
               "keeps this tensor in bf16, A in full precision%s\n",
               name_ends(name, ".state_out") || strstr(name, ".rollback.layers.")
                   ? " (the recurrent state stored in the model's dtype; the reference keeps it in float32)" : "");
    /* a linear layer's carried state all zeros where A's is not */
    if (name_ends(name, ".linear_attn.state_in") || name_ends(name, ".linear_attn.conv_state_in")) {
        int zero = 1;
        for (size_t i = 0; i < b->n && zero; i++) zero = npy_f(b, i) == 0;
        if (zero)
            printf("  hint: B's %s is all zeros where A's carries the tokens before this call: the call restarted "
                   "from a zero state instead of the cache's (a multi-token call run as a fresh sequence)\n",
                   name_ends(name, "conv_state_in") ? "conv window" : "recurrent state");
    }
    if (!hybrid_trace(df)) return;
    /* a zero-centred norm (x * (1 + w)) computed as a plain one (x * w): B = A * w / (1 + w) per column */
    if ((name_ends(name, ".input_layernorm") || name_ends(name, ".post_attention_layernorm") ||
         name_ends(name, "." TN_Q) || name_ends(name, "." TN_K)) && a->ndim >= 2) {
        size_t cols = (size_t)a->shape[a->ndim - 1];
        double *c = malloc(cols * sizeof *c);
        if (c && cols >= 2 && a->n / cols >= 2 && factor_fits(a, b, r->tol, 1, cols, c)) {
            double lo = INFINITY, hi = -INFINITY;
            int near0 = 1;
            for (size_t j = 0; j < cols; j++) {
                double w = c[j] != 1 ? c[j] / (1 - c[j]) : INFINITY;
                near0 &= fabs(w) < 1;
                lo = w < lo ? w : lo;
                hi = w > hi ? w : hi;
            }
            if (near0)
                printf("  hint: a zero-centred norm (Qwen3.5: x * (1 + w)) read as a plain RMSNorm (x * w): the factors c "
                       "per column are w / (1 + w) for w = c / (1 - c) from %.4g to %.4g, weights centred on zero as "
                       "Qwen3.5 stores them: B multiplies by w where A multiplies by 1 + w\n", lo, hi);
        }
        free(c);
    }
    /* heads of B equal to other heads of A: q_proj's query and gate rows mixed up */
    if (a->ndim == 3 && name_ends(name, "." TN_Q) && a->shape[0] >= 2 && a->shape[0] <= 256) {
        size_t H = (size_t)a->shape[0], per = a->n / H, moved = 0, halves = 1;
        char list[600] = "";
        for (size_t h = 0; h < H; h++) {
            size_t hit = H;
            for (size_t h2 = 0; h2 < H && hit == H; h2++) {
                int same = 1;
                for (size_t i = 0; i < per && same; i++) same = fabs(npy_f(b, h * per + i) - npy_f(a, h2 * per + i)) <= r->tol;
                if (same) hit = h2;
            }
            halves &= h % 2 == 0 ? hit == h / 2 : hit == H;
            if (hit != H && hit != h) {
                moved++;
                size_t len = strlen(list);
                if (len < sizeof list - 40) snprintf(list + len, sizeof list - len, "%s B %zu = A %zu", len ? ";" : "", h, hit);
            }
        }
        if (moved)
            printf("  hint: B's heads are other heads of A:%s%s\n", list,
                   halves ? " (B's head 2j is A's head j, its odd heads none of A's): q_proj's output read as "
                            "[all queries | all gates], when per head it holds the query (head_dim rows) then the "
                            "gate: the query and the gate come from the wrong rows" : "");
    }
}

/* A hybrid target's RoPE tables (rope_angles (T, rd/2), cos, sin (T, rd))
 * of another width in B: B's span the whole head (head_dim, the last axis
 * of A's self_attn.q) where A's span only its rotary part */
static void rope_shape_hint(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b) {
    int angles = name_ends(name, "." TN_ROPE_ANGLES);
    if (!(angles || name_ends(name, ".cos") || name_ends(name, ".sin")) || a->ndim != 2 || b->ndim != 2 ||
        a->shape[0] != b->shape[0] || b->shape[1] <= a->shape[1] || !hybrid_trace(df))
        return;
    int64_t d = -1;
    size_t pl = phase_len(name);
    for (int k = 0; k < df->ma->names.n && d < 0; k++) {
        const char *o = df->ma->names.s[k];
        if (phase_len(o) != pl || strncmp(o, name, pl) || !name_ends(o, "." TN_Q)) continue;
        char *p = path_join(df->dir[0], df->ma->files.s[k]);
        NpyArray q;
        if (p && npy_open(p, &q) == 0 && q.ndim == 3) d = q.shape[2];
        free(p);
    }
    int64_t rot_a = a->shape[1] * (angles ? 2 : 1), rot_b = b->shape[1] * (angles ? 2 : 1);
    if (d > 0 && rot_b == d && rot_a < d)
        printf("  hint: B's RoPE tables span the whole head (%lld dims, head_dim: the last axis of A's q), A's only "
               "its first %lld dims (the rotary part, partial_rotary_factor %g): B rotates the whole head instead "
               "of its rotary part\n", (long long)d, (long long)rot_a, (double)rot_a / (double)d);
}

/* Hints for the first departure of a float tensor (printed when certain). */
static void diff_hints(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b, const FloatCmp *r) {
    FILE *f = stdout;
    char saved[sizeof dflash_errmsg];
    memcpy(saved, dflash_errmsg, sizeof saved);
    /* heads: an attention tensor [H, ...] */
    if (a->ndim == 3 && strstr(name, TN_SELF_ATTN) && a->shape[0] > 1) {
        size_t H = (size_t)a->shape[0], per = a->n / H, dep = 0;
        char list[2][512] = {"", ""};
        for (size_t h = 0; h < H; h++) {
            int bad = 0;
            for (size_t k = h * per; k < (h + 1) * per && !bad; k++) {
                double x = npy_f(a, k), y = npy_f(b, k);
                bad = isnan(x) || isnan(y) || (isfinite(x) && isfinite(y) ? fabs(x - y) > r->tol : x != y);
            }
            dep += (size_t)bad;
            size_t l = strlen(list[bad]);
            if (l < sizeof list[bad] - 24) snprintf(list[bad] + l, sizeof list[bad] - l, " %zu", h);
        }
        fprintf(f, "  heads departing:%s (%zu of %zu)", list[1], dep, H);
        if (dep < H) fprintf(f, "; agreeing:%s", list[0]);
        fprintf(f, "\n");
    }
    rows_hint(df, name, a, b, r);
    factor_hints(df, name, a, b, r);
    if (!r->any_nonfinite) perm_hint(a, b, r->tol, name);
    /* B equals another tensor of A (same phase, same shape), or B's column
     * blocks do (a concatenation like target_hidden built from the wrong
     * entries) */
    size_t pl = phase_len(name);
    int found = 0;
    for (int k = 0; k < df->ma->names.n && found < 3; k++) {
        const char *other = df->ma->names.s[k];
        if (strcmp(other, name) == 0 || phase_len(other) != pl || strncmp(other, name, pl) != 0) continue;
        NpyArray c;
        if (load_candidate(df, k, a, 0, 0, &c) != 1) { npy_free(&c); continue; }
        FloatCmp m;
        cmp_floats(df, &c, b, whole(&c), &m);
        if (m.bad == 0) {
            fprintf(f, "  hint: B's ");
            put_name(f, name);
            fprintf(f, " equals A's ");
            put_name(f, other);
            fprintf(f, " (within the tolerance)\n");
            found++;
        }
        npy_free(&c);
    }
    if (!found && a->ndim == 2 && a->shape[0] > 0) {
        /* block widths w to try: those of the phase's other [rows, w] tensors
         * with w dividing B's width; a width is reported only when EVERY
         * departing block of B equals some tensor of A */
        size_t rows = (size_t)a->shape[0], W = (size_t)a->shape[1], widths[8];
        int n_w = 0;
        for (int k = 0; k < df->ma->names.n && n_w < 8; k++) {
            const char *other = df->ma->names.s[k];
            if (phase_len(other) != pl || strncmp(other, name, pl) != 0) continue;
            char *p = path_join(df->dir[0], df->ma->files.s[k]);
            NpyArray h;
            int ok = p && npy_open(p, &h) == 0 && h.kind == 'f' && h.ndim == 2 && (size_t)h.shape[0] == rows &&
                     h.shape[1] > 0 && (size_t)h.shape[1] < W && W % (size_t)h.shape[1] == 0;
            free(p);
            for (int q = 0; ok && q < n_w; q++) ok = widths[q] != (size_t)h.shape[1];
            if (ok) widths[n_w++] = (size_t)h.shape[1];
        }
        char *report = malloc(8192);
        for (int wi = 0; report && wi < n_w; wi++) {
            size_t w = widths[wi], len = 0;
            int all = 1, any = 0;
            report[0] = 0;
            for (size_t j = 0; all && j < W / w; j++) {
                Span own = {rows, w, W, j * w, W, j * w};
                FloatCmp m;
                cmp_floats(df, a, b, own, &m);
                if (m.bad == 0) continue;   /* this block agrees */
                int matched = 0;
                for (int q = 0; q < df->ma->names.n && !matched; q++) {
                    const char *cand = df->ma->names.s[q];
                    if (phase_len(cand) != pl || strncmp(cand, name, pl) != 0) continue;
                    NpyArray c;
                    if (load_candidate(df, q, a, (int64_t)rows, (int64_t)w, &c) != 1) { npy_free(&c); continue; }
                    Span sp = {rows, w, w, 0, W, j * w};
                    cmp_floats(df, &c, b, sp, &m);
                    npy_free(&c);
                    if (m.bad == 0 && len < 7000) {
                        matched = any = 1;
                        len += (size_t)snprintf(report + len, 8192 - len,
                                                "  hint: B's block %zu (columns %zu..%zu) equals A's %.200s\n", j,
                                                j * w, (j + 1) * w - 1, cand);
                    }
                }
                all = matched;
            }
            if (all && any) {
                for (const char *c = report; *c; c++)  /* names escaped as put_name does */
                    if ((unsigned char)*c < 0x20 && *c != '\n') fprintf(f, "\\x%02x", (unsigned char)*c);
                    else fputc(*c, f);
                break;
            }
        }
        free(report);
    }
    /* B is A before a final RMSNorm: rmsnorm(B's rows) times one weight per
     * column gives A (checked on every row) */
    if (a->ndim == 2 && a->shape[0] >= 2 && a->shape[1] >= 2 && !r->any_nonfinite) {
        size_t T = (size_t)a->shape[0], D = (size_t)a->shape[1];
        double *inv = malloc(T * sizeof *inv);
        int fits = inv != NULL;
        for (size_t t = 0; fits && t < T; t++) {
            double ss = 0;
            for (size_t c = 0; c < D; c++) ss += npy_f(b, t * D + c) * npy_f(b, t * D + c);
            inv[t] = 1 / sqrt(ss / (double)D + 1e-6);
        }
        for (size_t c = 0; fits && c < D; c++) {
            size_t best = 0;
            for (size_t t = 1; t < T; t++)
                if (fabs(npy_f(b, t * D + c) * inv[t]) > fabs(npy_f(b, best * D + c) * inv[best])) best = t;
            double nb = npy_f(b, best * D + c) * inv[best], g = nb != 0 ? npy_f(a, best * D + c) / nb : 0;
            for (size_t t = 0; fits && t < T; t++)
                fits = fabs(g * npy_f(b, t * D + c) * inv[t] - npy_f(a, t * D + c)) <= r->tol;
        }
        free(inv);
        if (fits) {
            fprintf(f, "  hint: rmsnorm of B's rows, times one weight per column, gives A: B looks like the "
                       "state BEFORE a final RMSNorm, A's is after it\n");
        }
    }
    rmsnorm_of_a_hint(a, b, r);
    mask_hint(df, name, a, b, r);
    adamw_hint(df, name, a, b, r);
    hybrid_hints(df, name, a, b, r);
    memcpy(dflash_errmsg, saved, sizeof saved);
}

/* The round of a name "draft3.x" / "verify3.x" (kind "draft" or
 * "verify"), else 0. */
static int name_round(const char *name, const char *kind) {
    size_t n = strlen(kind);
    if (strncmp(name, kind, n) != 0 || name[n] < '1' || name[n] > '9') return 0;
    long r = 0;
    const char *c = name + n;
    while (*c >= '0' && *c <= '9' && r < 100000000) r = 10 * r + (*c++ - '0');
    return *c == '.' ? (int)r : 0;
}

/* The lead of a departure's line: "first departure: " the first time (in
 * the common rounds: output_ids, whose length follows from the rounds, is
 * never named first when the rounds differ), "differs: " after. */
static const char *lead_for(Diff *df, const char *name) {
    if (df->first_named || (df->rounds_differ && !strcmp(name, "output_ids"))) return "differs: ";
    df->first_named = 1;
    df->first_k = namemap_get(&df->ma->index, name);
    return "first departure: ";
}

/* A's tensor `name` (side 0), B's (side 1) or the other build's (side 2) loaded; 1, or 0 when absent or
 * unreadable (best effort: the main pass reports unreadable files). */
static int load_named(const Diff *df, int side, const char *name, NpyArray *t) {
    memset(t, 0, sizeof *t);
    if (side == 2 && !df->have_other) return 0;
    const Manifest *m = side == 2 ? &df->mo : side ? df->mb : df->ma;
    int k = namemap_get(&m->index, name);
    if (k < 0) return 0;
    char *p = path_join(df->dir[side], m->files.s[k]);
    int ok = p && npy_read(p, t) == 0;
    free(p);
    if (!ok) npy_free(t);
    return ok;
}

/* A differing id of a `.sampled` tensor is a near tie when A's logits (the
 * same phase's .logits, [rows, V]) give A's token and B's token values
 * within the logits' tolerance of the row's maximum: rounding can pick
 * either. Returns 1 when every differing position is one; *first_row,
 * *va, *vb, *gap, *tol describe the first. */
typedef struct { size_t pos, row; int64_t ta, tb; double va, vb, tol; } Tie;
static int near_ties(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b, Tie *first) {
    const char *dot = strrchr(name, '.');
    if (!dot || strcmp(dot, "." TN_SAMPLED) != 0 || a->n == 0) return 0;
    char lname[512];
    snprintf(lname, sizeof lname, "%.*s." TN_LOGITS, (int)(dot - name), name);
    NpyArray L;
    if (!load_named(df, 0, lname, &L)) return 0;
    int all = L.kind == 'f' && L.ndim == 2 && L.shape[0] >= 1, any = 0;
    size_t R = all ? (size_t)L.shape[0] : 0, V = all ? (size_t)L.shape[1] : 0;
    if (all && !(a->n == R || a->n == 1)) all = 0;   /* one id per row, or the last row's */
    double maxabs = 0;
    for (size_t k = 0; all && k < L.n; k++)
        if (isfinite(npy_f(&L, k)) && fabs(npy_f(&L, k)) > maxabs) maxabs = fabs(npy_f(&L, k));
    double tol = df->atol + df->rtol * maxabs;
    for (size_t i = 0; all && i < a->n; i++) {
        int64_t ta = npy_i(a, i), tb = npy_i(b, i);
        if (ta == tb) continue;
        size_t row = a->n == R ? i : R - 1;
        if (ta < 0 || tb < 0 || (size_t)ta >= V || (size_t)tb >= V) { all = 0; break; }
        double mx = -INFINITY;
        for (size_t v = 0; v < V; v++) mx = fmax(mx, npy_f(&L, row * V + v));
        double va = npy_f(&L, row * V + (size_t)ta), vb = npy_f(&L, row * V + (size_t)tb);
        all = mx - va <= tol && mx - vb <= tol;
        if (all && !any) {
            Tie t = {i, row, ta, tb, va, vb, tol};
            *first = t;
        }
        any = 1;
    }
    npy_free(&L);
    return all && any;
}

/* The rounding test against the other precision's build (the rule at the
 * top). 1 rounding; 0 not (or nothing to judge by: *q_rms < 0). *q_rms and
 * *q_max: B's distance to the double build over the float build's (RMS,
 * worst value). */
static int judge_rounding(Diff *df, const char *name, const NpyArray *a, const NpyArray *b, const FloatCmp *r,
                          double *q_rms, double *q_max) {
    *q_rms = *q_max = -1;
    int k = namemap_get(&df->ma->index, name);
    NpyArray o;
    /* no other build's tensor: the thresholds of old, said so in the summary (they can be wrong both ways) */
    double db = r->sum_d2 == 0 ? -INFINITY : r->sum_a2 == 0 ? INFINITY : 10 * log10(r->sum_d2 / r->sum_a2);
    int by_thresholds = db <= DIFF_FALLBACK_NMSE_DB && r->bad * DIFF_FALLBACK_FRACTION <= a->n &&
                        r->worst_excess <= DIFF_FALLBACK_EXCESS;
    if (k < 0 || k >= df->o_div || !load_named(df, 2, name, &o)) {
        df->unjudged++;
        df->unjudged_rounding += by_thresholds;
        return by_thresholds;
    }
    int ok = o.kind == 'f' && same_shape(&o, a);
    double sb = 0, sf = 0, mb = 0, mf = 0;
    const NpyArray *D = df->a_double ? a : &o, *F = df->a_double ? &o : a;
    for (size_t i = 0; ok && i < a->n; i++) {
        double d = npy_f(D, i), eb = fabs(npy_f(b, i) - d), ef = fabs(npy_f(F, i) - d);
        if (!isfinite(d) || !isfinite(eb) || !isfinite(ef)) ok = 0;
        sb += eb * eb;
        sf += ef * ef;
        mb = eb > mb ? eb : mb;
        mf = ef > mf ? ef : mf;
    }
    npy_free(&o);
    if (!ok) {
        df->unjudged++;
        df->unjudged_rounding += by_thresholds;
        return by_thresholds;
    }
    df->judged++;
    *q_rms = sf > 0 ? sqrt(sb / sf) : INFINITY;
    *q_max = mf > 0 ? mb / mf : INFINITY;
    return *q_rms <= DIFF_ROUND_RATIO && *q_max <= DIFF_ROUND_RATIO;
}

/* "B is 3.2x as far from the double build as this program's float build (RMS), 4.1x (worst value)" */
static void print_ratio(FILE *f, double q_rms, double q_max) {
    if (isinf(q_rms)) fprintf(f, "this program's float build equals the double build here, B does not");
    else fprintf(f, "B is %.3gx as far from the double build as this program's float build (RMS), %.3gx (worst value)",
                 q_rms, q_max);
}

/* Compare one pair (headers checked, data loaded). Prints a departure, or
 * with --verbose one line either way. Returns 1 if it departs. */
static int diff_tensor(Diff *df, const char *name, const NpyArray *a, const NpyArray *b) {
    int list = df->differ < DIFF_LIST_MAX;
    FILE *f = stdout;
    char shp[32 + 24 * NPY_MAX_NDIM];
    shape_str(shp, sizeof shp, a);

    if (a->kind != 'f') {
        size_t bad = 0, at = 0;
        for (size_t k = 0; k < a->n; k++)
            if (npy_i(a, k) != npy_i(b, k) && bad++ == 0) at = k;
        /* rounding among the ids: near ties of a verification's sampled ids
         * past the tokens it keeps (position > acceptance length), and the
         * match flags at exactly those positions */
        Tie tie;
        int tie_ok = bad && !df->no_rounding && !df->diverged && near_ties(df, name, a, b, &tie);
        int vr = name_round(name, "verify"), rounding = 0;
        if (tie_ok && vr >= 1 && vr <= df->rounds[0] && acc_at(df, 0, vr) >= 0) {
            rounding = 1;
            for (size_t k = 0; k < a->n; k++)
                if (npy_i(a, k) != npy_i(b, k) && (int64_t)k <= acc_at(df, 0, vr)) rounding = 0;
            if (rounding) {
                df->tie_round = vr;
                df->n_ties = 0;
                for (size_t k = 0; k < a->n && df->n_ties < DIFF_MAX_TIES; k++)
                    if (npy_i(a, k) != npy_i(b, k)) df->ties[df->n_ties++] = k;
            }
        }
        if (bad && !rounding && vr >= 1 && vr == df->tie_round && !df->diverged) {
            const char *dot = strrchr(name, '.');
            rounding = dot && !strcmp(dot, "." TN_MATCH);
            for (size_t k = 0; rounding && k < a->n; k++) {
                if (npy_i(a, k) == npy_i(b, k)) continue;
                int in = 0;
                for (int t = 0; t < df->n_ties && !in; t++) in = df->ties[t] == k;
                rounding = in;
            }
        }
        if (df->verbose) {
            fprintf(f, "%-4s ", !bad ? "ok" : rounding ? "RND" : "DEP");
            put_name(f, name);
            fprintf(f, "  %s %s  %s\n", a->descr, shp,
                    !bad ? "ints equal" : rounding ? "ints differ at near ties past the accepted tokens" : "ints differ");
        }
        if (bad == 0) return 0;
        if (rounding) {
            df->rounding++;
            return 0;
        }
        df->diverged = 1;
        if (list) {
            const char *lead = lead_for(df, name);
            int first = !strcmp(lead, "first departure: ");
            fprintf(f, "%s", lead);
            put_name(f, name);
            fprintf(f, ": %zu of %zu ints differ; first at ", bad, a->n);
            print_index(f, a, at);
            fprintf(f, ": A %lld, B %lld\n", (long long)npy_i(a, at), (long long)npy_i(b, at));
            if (first) print_around(f, a, b, at);
            if (tie_ok) {
                fprintf(f, "  hint: a near tie: in A's logits row %zu, A's token %lld has %.9g and B's %lld has "
                           "%.9g, both within the tolerance %.3g of the row's largest: rounding can pick either; "
                           "the runs' tokens differ from here on (compare the rest phase by phase: TRACE.md)\n",
                        tie.row, (long long)tie.ta, tie.va, (long long)tie.tb, tie.vb, tie.tol);
            }
        }
        return 1;
    }

    FloatCmp r;
    cmp_floats(df, a, b, whole(a), &r);
    char nmse[48];
    nmse_str(nmse, sizeof nmse, &r);
    double db = r.sum_d2 == 0 ? -INFINITY : r.sum_a2 == 0 ? INFINITY : 10 * log10(r.sum_d2 / r.sum_a2);
    double q_rms = -1, q_max = -1;
    int rounding = r.bad && !df->no_rounding && !df->diverged && !r.any_nonfinite &&
                   judge_rounding(df, name, a, b, &r, &q_rms, &q_max);
    int k_a = namemap_get(&df->ma->index, name);
    if (df->db && k_a >= 0 && !r.bad && !r.any_nonfinite) df->db[k_a] = r.sum_d2 == 0 ? -INFINITY : db;
    if (df->verbose) {
        fprintf(f, "%-4s ", !r.bad ? "ok" : rounding ? "RND" : "DEP");
        put_name(f, name);
        fprintf(f, "  %s %s  max|A| %.6g  worst rel err %.3g  NMSE %s", a->descr, shp, r.max_a,
                r.max_a > 0 ? r.max_abs / r.max_a : r.max_abs, nmse);
        if (r.bad) fprintf(f, "  %zu beyond (worst %.3gx the tolerance)", r.bad, r.worst_excess);
        if (r.bad && q_rms >= 0) {
            fprintf(f, "; ");
            print_ratio(f, q_rms, q_max);
        }
        if (r.any_nonfinite)
            fprintf(f, "  NaN A/B %zu/%zu Inf A/B %zu/%zu", r.nan[0], r.nan[1], r.inf[0], r.inf[1]);
        fprintf(f, "\n");
    }
    if (r.bad == 0) return 0;
    if (rounding) {
        double q = q_rms > q_max ? q_rms : q_max;
        df->rounding++;
        if (q >= 0 && (!df->worst_rnd[0] || q > df->worst_rnd_db)) {
            df->worst_rnd_db = q;
            snprintf(df->worst_rnd, sizeof df->worst_rnd, "%s", name);
        }
        return 0;
    }
    if (list) {
        const char *lead = lead_for(df, name);
        int first = !strcmp(lead, "first departure: ");
        fprintf(f, "%s", lead);
        put_name(f, name);
        fprintf(f, ": %zu of %zu values beyond |a-b| <= %g + %g*max|A| = %.3g\n", r.bad, a->n, df->atol, df->rtol,
                r.tol);
        fprintf(f, "  worst at ");
        print_index(f, a, r.worst);
        fprintf(f, ": A %.9g, B %.9g; max abs diff %.3g, max rel diff %.3g (of max|A| %.6g); NMSE %s\n",
                npy_f(a, r.worst), npy_f(b, r.worst), r.max_abs, r.max_a > 0 ? r.max_abs / r.max_a : r.max_abs,
                r.max_a, nmse);
        if (r.any_nonfinite) {
            fprintf(f, "  NaN/Inf: A has %zu NaN, %zu Inf; B has %zu NaN, %zu Inf; first at ", r.nan[0], r.inf[0],
                    r.nan[1], r.inf[1]);
            print_index(f, a, r.first_nonfinite);
            fprintf(f, ": A %.9g, B %.9g%s\n", npy_f(a, r.first_nonfinite), npy_f(b, r.first_nonfinite),
                    r.nan[0] && r.nan[1] ? " (NaN never agrees, not even with NaN)" : "");
        }
        if (q_rms >= 0) {
            fprintf(f, "  not rounding: ");
            print_ratio(f, q_rms, q_max);
            fprintf(f, " (rounding: at most %gx both)\n", DIFF_ROUND_RATIO);
        }
        if (first) {
            print_around(f, a, b, r.worst);
            diff_hints(df, name, a, b, &r);
        }
    }
    return 1;
}

/* "dflash diff: <message><after>" on stderr, on one line */
static void diff_error(const char *after) { dflash_print_error("dflash diff", after); }

static int diff_usage(void) {
    diff_error(" (usage: dflash diff A B [--rtol R] [--atol A] [--only GLOB]... [--verbose] [--no-rounding] [--double DIR | --float DIR])");
    return 2;
}

/* dflash diff's part of `dflash --help` (cli/main.c prints it there, and
 * `dflash diff --help` alone); tests/test_flags.c checks it against DIFF_FLAGS */
const char DIFF_HELP[] =
    "diff options (TRACE.md, \"dflash diff: how to read it\"):\n"
    "  --rtol R, --rtol=R    relative tolerance, times max|A| of each tensor, a finite number >= 0\n"
    "                        (default 1e-4)\n"
    "  --atol A, --atol=A    absolute tolerance, a finite number >= 0 (default 1e-6)\n"
    "  --only GLOB           compare only names matching GLOB; repeatable, at most 64 (default:\n"
    "                        every name)\n"
    "  --verbose, -v         one line per compared tensor (ok, RND rounding, DEP): worst relative\n"
    "                        error, NMSE in dB\n"
    "  --no-rounding         count values beyond the tolerance as departures even where they are\n"
    "                        rounding (default: rounding is reported, not a departure)\n"
    "  --double DIR          the double build's trace of A's run, to judge rounding (default: diff runs\n"
    "                        ./dflash-double on the inference flags A's trace records, each checked\n"
    "                        against an allow-list, into its own temporary folder; any other flag:\n"
    "                        nothing is run, give --double)\n"
    "  --float DIR           the same when A is the double build's trace: the float build's\n";

typedef struct {
    double rtol, atol;
    const char *only[DIFF_MAX_ONLY];
    int n_only, verbose, no_rounding;
    const char *double_dir, *float_dir;  /* --double DIR / --float DIR */
} DiffArgs;

/* THE flags of dflash diff (cli/flags.h) */
#define DA(m) offsetof(DiffArgs, m)
const Flag DIFF_FLAGS[] = {
    {.name = "--rtol", .kind = FLAG_REAL, .field = DA(rtol), .lo = 0},
    {.name = "--atol", .kind = FLAG_REAL, .field = DA(atol), .lo = 0},
    {.name = "--only", .kind = FLAG_STRINGS, .field = DA(only), .count = DA(n_only), .max = DIFF_MAX_ONLY},
    {.name = "--verbose", .alias = "-v", .kind = FLAG_SWITCH, .field = DA(verbose)},
    {.name = "--no-rounding", .kind = FLAG_SWITCH, .field = DA(no_rounding)},
    {.name = "--double", .kind = FLAG_STRING, .field = DA(double_dir)},
    {.name = "--float", .kind = FLAG_STRING, .field = DA(float_dir)},
    FLAG_TABLE_END};
#undef DA

static int diff_wanted(const Diff *df, const char *name) {
    if (df->n_only == 0) return 1;
    for (int k = 0; k < df->n_only; k++)
        if (fnmatch(df->only[k], name, 0) == 0) return 1;
    return 0;
}

/* The phase and round a name implies ("draft3.x": draft, 3; "prefill.x" and
 * "input_ids": prefill, 0; "output_ids": final, 0; "train2.x": train, 2);
 * 0 when the name is none of these. */
static int implied_phase(const char *name, char *phase, size_t size, int *round) {
    static const char *const kinds[3] = {"draft", "verify", "train"};
    for (int k = 0; k < 3; k++)
        if ((*round = name_round(name, kinds[k])) > 0) {
            snprintf(phase, size, "%s", kinds[k]);
            return 1;
        }
    *round = 0;
    if (!strncmp(name, "prefill.", 8) || !strcmp(name, "input_ids")) snprintf(phase, size, "prefill");
    else if (!strcmp(name, "output_ids")) snprintf(phase, size, "final");
    else return 0;
    return 1;
}

/* The manifest fields that bind (TRACE.md): B's "phase" and "round", when
 * B gives them, must be A's (or, when A gives none, those its name implies).
 * Prints a departure and returns 1 when they are not. */
static int diff_fields(Diff *df, const char *name, int k, int jb) {
    const Manifest *ma = df->ma, *mb = df->mb;
    char want_phase[64], want_round[32];
    int implied_round;
    int implied = implied_phase(name, want_phase, sizeof want_phase, &implied_round);
    snprintf(want_round, sizeof want_round, "%d", implied_round);
    const char *ap = ma->phase.s[k][0] ? ma->phase.s[k] : implied ? want_phase : "";
    const char *ar = ma->round.s[k][0] ? ma->round.s[k] : implied ? want_round : "";
    const char *bp = mb->phase.s[jb], *br = mb->round.s[jb];
    const char *field = bp[0] && ap[0] && strcmp(ap, bp) ? "phase" : br[0] && ar[0] && strcmp(ar, br) ? "round" : NULL;
    if (!field) return 0;
    if (df->verbose) {
        printf("DEP  ");
        put_name(stdout, name);
        printf("  manifest %s differs\n", field);
    }
    if (df->differ < DIFF_LIST_MAX) {
        printf("%s", lead_for(df, name));
        put_name(stdout, name);
        printf(": the manifest's \"%s\" differs: A ", field);
        put_name(stdout, field[0] == 'p' ? ap : ar);
        printf(", B ");
        put_name(stdout, field[0] == 'p' ? bp : br);
        printf(" (\"phase\" and \"round\" bind: TRACE.md, \"dflash diff: how to read it\")\n");
    }
    return 1;
}

/* Compare A's tensor k with B's. 0 compared, 1 B lacks it, -1 bad input. */
static int diff_one(Diff *df, const Manifest *ma, const Manifest *mb, int k) {
    const char *name = ma->names.s[k];
    int jb = namemap_get(&mb->index, name);
    if (jb < 0) return 1;
    char *pa = path_join(df->dir[0], ma->files.s[k]), *pb = path_join(df->dir[1], mb->files.s[jb]);
    NpyArray a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int ret = -1;
    if (!pa || npy_open(pa, &a) != 0 || manifest_check_npy(ma, k, pa, &a) != 0) goto out;
    if (!pb || npy_open(pb, &b) != 0 || manifest_check_npy(mb, jb, pb, &b) != 0) goto out;
    df->compared++;
    ret = 0;
    if (diff_fields(df, name, k, jb)) {
        df->differ++;
        goto out;
    }
    if (!same_shape(&a, &b) || (a.kind == 'f') != (b.kind == 'f')) {
        int list = df->differ < DIFF_LIST_MAX;
        if (df->verbose) {
            printf("DEP  ");
            put_name(stdout, name);
            printf("  %s\n", same_shape(&a, &b) ? "dtype kind differs" : "shape differs");
        }
        if (a.kind != 'f' || b.kind != 'f') df->diverged = 1;
        if (list) {
            const char *lead = lead_for(df, name);
            printf("%s", lead);
            put_name(stdout, name);
            printf("\n  %s: A is ", same_shape(&a, &b) ? "dtype kind" : "shape");
            print_shape(stdout, &a);
            printf(", B is ");
            print_shape(stdout, &b);
            printf("\n");
            if (!strcmp(lead, "first departure: ")) rope_shape_hint(df, name, &a, &b);
            /* the same values in another axis order */
            if (!strcmp(lead, "first departure: ") && a.kind == 'f' && b.kind == 'f' && a.n == b.n &&
                a.ndim == b.ndim && npy_load(pa, &a) == 0 && npy_load(pb, &b) == 0)
            {
                double mx = 0;
                for (size_t i = 0; i < a.n; i++)
                    if (isfinite(npy_f(&a, i)) && fabs(npy_f(&a, i)) > mx) mx = fabs(npy_f(&a, i));
                perm_hint(&a, &b, df->atol + df->rtol * mx, name);
            }
        }
        df->differ++;
        goto out;
    }
    if (npy_load(pa, &a) != 0 || npy_load(pb, &b) != 0) {
        ret = -1;
        goto out;
    }
    if (diff_tensor(df, name, &a, &b)) df->differ++;
out:
    npy_free(&a);
    npy_free(&b);
    free(pa);
    free(pb);
    return ret;
}

/* The first id (integer) tensor of round rd, in A's order, where B differs:
 * "B's verify1.sampled [2] is 7, A's 5" into out; 0 when none does. */
static int first_id_difference(const Diff *df, int rd, char *out, size_t size) {
    for (int k = 0; k < df->ma->names.n; k++) {
        const char *name = df->ma->names.s[k];
        if (name_round(name, "draft") != rd && name_round(name, "verify") != rd) continue;
        if (df->ma->meta.s[k][0] && strncmp(df->ma->meta.s[k], "int", 3) != 0 &&
            strncmp(df->ma->meta.s[k], "bool", 4) != 0)
            continue;
        NpyArray a, b;
        if (!load_named(df, 0, name, &a)) continue;
        int found = 0;
        if (a.kind != 'f' && load_named(df, 1, name, &b)) {
            if (b.kind == 'f' || !same_shape(&a, &b)) {
                char sa[64], sb[64];
                shape_str(sa, sizeof sa, &a);
                shape_str(sb, sizeof sb, &b);
                snprintf(out, size, "B's %.200s has shape %s, A's %s", name, sa, sb);
                found = 1;
            }
            for (size_t i = 0; !found && i < a.n; i++)
                if (npy_i(&a, i) != npy_i(&b, i)) {
                    if (a.ndim)
                        snprintf(out, size, "B's %.200s [%zu] is %lld, A's %lld", name, i, (long long)npy_i(&b, i),
                                 (long long)npy_i(&a, i));
                    else
                        snprintf(out, size, "B's %.200s is %lld, A's %lld", name, (long long)npy_i(&b, 0),
                                 (long long)npy_i(&a, 0));
                    found = 1;
                }
            npy_free(&b);
        }
        npy_free(&a);
        if (found) return 1;
    }
    return 0;
}

static int by_round(const void *x, const void *y) {
    int a = ((const AccLen *)x)->r, b = ((const AccLen *)y)->r;
    return a < b ? -1 : a > b;
}

/* Rounds first: how many rounds each trace ran and their acceptance lengths
 * (verify{r}.acceptance_length). When they differ, one line before anything
 * else, naming the first divergent round and what differs there. */
static int diff_rounds(Diff *df) {
    const Manifest *m[2] = {df->ma, df->mb};
    /* what is allocated follows the number of names, never a round number a name claims
     * (a 12 KB trace may name verify99999999.x) */
    for (int s = 0; s < 2; s++) {
        df->rounds[s] = 0;
        int n_acc = 0;
        for (int k = 0; k < m[s]->names.n; k++) {
            const char *name = m[s]->names.s[k];
            int r = name_round(name, "verify");
            if (r && !strcmp(strchr(name, '.'), ".acceptance_length")) n_acc++;
            if (!r) r = name_round(name, "draft");
            if (r > df->rounds[s]) df->rounds[s] = r;
        }
        df->acc[s].p = malloc(((size_t)n_acc + 1) * sizeof *df->acc[s].p);
        if (!df->acc[s].p) {
            dflash_set_error("out of memory");
            return -1;
        }
        for (int k = 0; k < m[s]->names.n; k++) {
            const char *name = m[s]->names.s[k];
            int r = name_round(name, "verify");
            NpyArray t;
            if (!r || strcmp(strchr(name, '.'), ".acceptance_length")) continue;
            int64_t v = load_named(df, s, name, &t) && t.kind != 'f' && t.n == 1 ? npy_i(&t, 0) : -1;
            npy_free(&t);
            AccLen e = {r, v};
            df->acc[s].p[df->acc[s].n++] = e;
        }
        qsort(df->acc[s].p, (size_t)df->acc[s].n, sizeof *df->acc[s].p, by_round);
    }
    /* the first round up to the common count whose acceptance lengths differ: only a round
     * one of them traced can */
    int common = df->rounds[0] < df->rounds[1] ? df->rounds[0] : df->rounds[1], rd = 0;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < df->acc[s].n; i++) {
            int r = df->acc[s].p[i].r;
            if (r <= common && (!rd || r < rd) && acc_at(df, 0, r) != acc_at(df, 1, r)) rd = r;
        }
    if (!rd && df->rounds[0] != df->rounds[1]) rd = common + 1;
    df->rounds_differ = rd != 0;
    if (!rd) {
        if (df->verbose && df->rounds[0])
            printf("rounds: A and B ran %d round%s with the same acceptance lengths\n", df->rounds[0],
                   df->rounds[0] == 1 ? "" : "s");
        return 0;
    }
    char what[600];
    if (rd > df->rounds[1])
        snprintf(what, sizeof what, "B has no round %d (it stopped after round %d%s)", rd, df->rounds[1],
                 rd > 1 ? ", whose acceptance lengths agree with A's" : "");
    else if (rd > df->rounds[0])
        snprintf(what, sizeof what, "A has no round %d (it stopped after round %d)", rd, df->rounds[0]);
    else if (acc_at(df, 1, rd) < 0)
        snprintf(what, sizeof what, "B has no verify%d.acceptance_length", rd);
    else if (acc_at(df, 0, rd) < 0)
        snprintf(what, sizeof what, "A has no verify%d.acceptance_length", rd);
    else if (!first_id_difference(df, rd, what, sizeof what))
        snprintf(what, sizeof what, "the acceptance lengths differ");
    printf("rounds: A ran %d round%s, B %d; first divergent round %d: %s", df->rounds[0],
           df->rounds[0] == 1 ? "" : "s", df->rounds[1], rd, what);
    if (rd <= common && acc_at(df, 0, rd) >= 0 && acc_at(df, 1, rd) >= 0)
        printf(" (acceptance length A %lld, B %lld)", (long long)acc_at(df, 0, rd), (long long)acc_at(df, 1, rd));
    printf("\n");
    return 0;
}

/* ---- the other precision's build (the rounding rule) ---------------------- */

/* A's floats are float64 (this program's double build): the first float
 * tensor's manifest dtype, else its header. */
static int a_is_double(const Diff *df) {
    for (int k = 0; k < df->ma->names.n; k++) {
        const char *meta = df->ma->meta.s[k];
        if (!strncmp(meta, "float64|", 8)) return 1;
        if (!strncmp(meta, "float32|", 8)) return 0;
        if (meta[0]) continue;
        NpyArray h;
        if (manifest_open_npy(df->ma, df->dir[0], k, &h) == 0 && h.kind == 'f') return h.item == 8;
    }
    return 0;
}

/* The names of A whose float tensor B holds, of A's shape, with values
 * beyond the tolerance (all finite): what the other build must judge. */
static int beyond_names(Diff *df, StrList *out) {
    for (int k = 0; k < df->ma->names.n; k++) {
        const char *name = df->ma->names.s[k], *meta = df->ma->meta.s[k];
        if (!diff_wanted(df, name) || (meta[0] && strncmp(meta, "float", 5))) continue;
        NpyArray a, b;
        if (!load_named(df, 0, name, &a)) continue;
        if (a.kind == 'f' && load_named(df, 1, name, &b)) {
            if (b.kind == 'f' && same_shape(&a, &b)) {
                FloatCmp r;
                cmp_floats(df, &a, &b, whole(&a), &r);
                if (r.bad && !r.any_nonfinite && strlist_push(out, name) != 0) {
                    npy_free(&a);
                    npy_free(&b);
                    dflash_set_error("out of memory");
                    return -1;
                }
            }
            npy_free(&b);
        }
        npy_free(&a);
    }
    return 0;
}

/* A's index of the first id tensor where the other build's run differs
 * from A's (a verification's sampled ids and match flags past its accepted
 * tokens excepted: thrown away); A's names.n when none does. */
static int other_divergence(const Diff *df) {
    for (int k = 0; k < df->ma->names.n; k++) {
        const char *name = df->ma->names.s[k], *meta = df->ma->meta.s[k];
        if (meta[0] && strncmp(meta, "int", 3) && strncmp(meta, "bool", 4)) continue;
        NpyArray a, o;
        if (!load_named(df, 2, name, &o)) continue;
        int differs = 0;
        if (load_named(df, 0, name, &a)) {
            const char *dot = strrchr(name, '.');
            int vr = name_round(name, "verify");
            int64_t acc = vr >= 1 && vr <= df->rounds[0] && dot &&
                          (!strcmp(dot, ".sampled") || !strcmp(dot, ".match")) ? acc_at(df, 0, vr) : -1;
            /* floats are not ids (a manifest without dtypes does not say which are) */
            differs = a.kind == 'f' && o.kind == 'f' ? 0 : a.kind == 'f' || o.kind == 'f' || !same_shape(&a, &o);
            if (a.kind == 'f' && o.kind == 'f') a.n = 0;
            for (size_t i = 0; !differs && i < a.n; i++)
                differs = npy_i(&a, i) != npy_i(&o, i) && (acc < 0 || (int64_t)i <= acc);
            npy_free(&a);
        }
        npy_free(&o);
        if (differs) return k;
    }
    return df->ma->names.n;
}

/* Register (for the signal cleanup and out_remove_owned) a path diff made. */
static int diff_register(Diff *df, char kind, const char *path) {
    sigset_t old;
    out_block_signals(&old);
    int r = out_register(df, kind, path);
    out_restore_signals(&old);
    if (r != 0) dflash_set_error("out of memory");
    return r;
}

/* A glob for name at a level of run_other's list (0 the name itself). A
 * name without a phase (no '.': acceptance_per_position, output_ids) is
 * itself at every level: "acceptance_per_position.*" would match nothing,
 * and main.c refuses such a filter (the other build's run then failed and
 * no tensor was judged by it). */
static void other_glob(const char *name, int level, char *g, size_t size) {
    size_t pl = phase_len(name);
    const char *d = name;   /* the phase's round digits: name[d0, d1) */
    while (d < name + pl && (*d < '0' || *d > '9')) d++;
    int has_round = d > name && d < name + pl;
    const char *rest = name + pl, *lay = strstr(name, ".layers.");
    if (level == 0 || !name[pl] || (level >= 2 && !has_round)) snprintf(g, size, "%.250s", name);
    else if (level == 1) snprintf(g, size, "%.*s.*", (int)pl, name);
    else if (level == 2) snprintf(g, size, "%.*s*%.250s", (int)(d - name), name, rest);
    else if (level == 3 && lay) {
        const char *e = lay + 8;
        while (*e >= '0' && *e <= '9') e++;
        snprintf(g, size, "%.*s*%.*s.*", (int)(d - name), name, (int)(e - rest), rest);
    } else snprintf(g, size, "%.*s*.*", (int)(d - name), name);
}

/* ---- the other build's run: rebuilt from an allow-list ---------------------
 * A's manifest records the flags of its run ("argv"), but a trace may come
 * from anyone: what it records is data, never a command. diff parses it
 * against RERUN_FLAGS, the inference flags alone, checks every value, and
 * builds the other build's command line from the parsed values; the run's
 * own outputs and filters are dropped (diff gives its own, in its temporary
 * folder), and anything else (a subcommand, --log, --out, an unknown flag)
 * means no run at all: rounding is then judged by the
 * fallback thresholds, and the summary says why and to give --double DIR. */

#define DIFF_OTHER_MAX_NEW 4096    /* --max-new-tokens diff reruns at most */
#define DIFF_OTHER_MAX_TEXT 65536  /* --prompt, --ids, a folder's name: bytes at most */
#define DIFF_OTHER_SECONDS 600     /* the other build's run is ended after this long */
#define DIFF_END_TICKS 50          /* 0.1 s ticks between SIGTERM and SIGKILL to an ended run */

typedef struct {
    const char *weights, *target, *draft, *replay, *prompt, *ids;
    long max_new_tokens, block_size;   /* -1: not given */
    double temperature;                /* -1: not given */
    uint64_t seed;
    int mode, draft_window;            /* -1: not given */
    int chat, ignore_eos, n_stop, stop_ids[DFLASH_MAX_STOP];
    /* dropped: the run's own outputs and filters, and what only changes its printing */
    const char *trace_dir, *trace_text, *filters[32];
    int n_filters, print_ids, raw_bytes, rounds;
} RerunArgs;

#define RA(m) offsetof(RerunArgs, m)
static const Flag RERUN_FLAGS[] = {
    {.name = "--weights", .kind = FLAG_STRING, .field = RA(weights)},
    {.name = "--target", .kind = FLAG_STRING, .field = RA(target)},
    {.name = "--draft", .kind = FLAG_STRING, .field = RA(draft)},
    {.name = "--replay", .kind = FLAG_STRING, .field = RA(replay)},   /* the port's trace it follows: read */
    {.name = "--prompt", .kind = FLAG_STRING, .field = RA(prompt)},
    {.name = "--ids", .kind = FLAG_STRING, .field = RA(ids)},
    {.name = "--max-new-tokens", .kind = FLAG_INT, .field = RA(max_new_tokens), .lo = 0, .hi = DIFF_OTHER_MAX_NEW},
    {.name = "--block-size", .kind = FLAG_INT, .field = RA(block_size), .lo = 1, .hi = DFLASH_MAX_BLOCK},
    {.name = "--temperature", .kind = FLAG_REAL, .field = RA(temperature), .lo = 0},
    {.name = "--seed", .kind = FLAG_U64, .field = RA(seed)},
    {.name = "--mode", .kind = FLAG_CHOICE, .field = RA(mode), .choices = "dflash"},  /* traces are dflash runs */
    {.name = "--draft-window", .kind = FLAG_CHOICE, .field = RA(draft_window), .choices = "trained|flash|full"},
    {.name = "--chat", .kind = FLAG_SWITCH, .field = RA(chat)},
    {.name = "--stop-id", .kind = FLAG_INTS, .field = RA(stop_ids), .lo = 0, .hi = 0x7fffffff, .count = RA(n_stop),
     .max = DFLASH_MAX_STOP},
    {.name = "--ignore-eos", .kind = FLAG_SWITCH, .field = RA(ignore_eos)},
    {.name = "--trace", .kind = FLAG_STRING, .field = RA(trace_dir)},
    {.name = "--trace-text", .kind = FLAG_STRING, .field = RA(trace_text)},
    {.name = "--trace-filter", .kind = FLAG_STRINGS, .field = RA(filters), .count = RA(n_filters), .max = 32},
    {.name = "--print-ids", .kind = FLAG_SWITCH, .field = RA(print_ids)},
    {.name = "--raw-bytes", .kind = FLAG_SWITCH, .field = RA(raw_bytes)},
    {.name = "--rounds", .kind = FLAG_SWITCH, .field = RA(rounds)},
    FLAG_TABLE_END};
#undef RA

/* s into out (size bytes), control characters and backslashes escaped as
 * put_name prints them, cut at size */
static void escape_into(char *out, size_t size, const char *s) {
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c && n + 5 < size; c++) {
        if (*c < 0x20 || *c == 0x7f || *c == '\\') n += (size_t)snprintf(out + n, size - n, "\\x%02x", *c);
        else out[n++] = (char)*c;
    }
    if (size) out[n < size ? n : size - 1] = 0;
}

/* a folder a recorded flag names: at most DIFF_OTHER_MAX_TEXT bytes, no
 * control character, not a flag, an existing directory (read by the run,
 * never written). 0, or -1 with dflash_errmsg. */
static int rerun_dir_ok(const char *flag, const char *dir) {
    struct stat st;
    int printable = 1;
    for (const unsigned char *c = (const unsigned char *)dir; *c && printable; c++) printable = *c >= 0x20 && *c != 0x7f;
    if (!dir[0] || dir[0] == '-' || strlen(dir) > DIFF_OTHER_MAX_TEXT || !printable)
        dflash_set_error("%s: expected a folder name, got \"%.100s\"", flag, dir);
    else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        dflash_set_error("%s: \"%.100s\" is not a directory here", flag, dir);
    else return 0;
    return -1;
}

/* A's recorded flags parsed by RERUN_FLAGS, each value checked, into out: the
 * other build's command line, rebuilt from the parsed values (no recorded
 * string is passed on but the folders' names, the prompt and the ids, each
 * checked). 0, or -1 with dflash_errmsg (why A's flags are not rerun); -2
 * out of memory. */
static int rerun_args(const Manifest *m, StrList *out) {
    RerunArgs ra;
    memset(&ra, 0, sizeof ra);
    ra.max_new_tokens = ra.block_size = -1;
    ra.temperature = -1;
    ra.mode = ra.draft_window = -1;
    char **argv = malloc(((size_t)m->argv.n + 2) * sizeof *argv);
    if (!argv) return -2;
    argv[0] = "dflash";   /* flags_parse reads argv[1..] */
    for (int i = 0; i < m->argv.n; i++) argv[i + 1] = m->argv.s[i];
    argv[m->argv.n + 1] = NULL;
    int pr = flags_parse(RERUN_FLAGS, m->argv.n + 1, argv, &ra, NULL, NULL, 0, NULL);
    free(argv);
    char *see = strstr(dflash_errmsg, " (see --help)");   /* not the program's --help: what diff reruns */
    if (pr < 0 && see) *see = 0;
    if (pr == 1) dflash_set_error("--help: not a run");
    if (pr != 0) return -1;
    static const char *const DIR_FLAGS[4] = {"--weights", "--target", "--draft", "--replay"};
    const char *dirs[4] = {ra.weights, ra.target, ra.draft, ra.replay};
    for (int k = 0; k < 4; k++)
        if (dirs[k] && rerun_dir_ok(DIR_FLAGS[k], dirs[k]) != 0) return -1;
    if (ra.prompt && strlen(ra.prompt) > DIFF_OTHER_MAX_TEXT) {
        dflash_set_error("--prompt: longer than %d bytes", DIFF_OTHER_MAX_TEXT);
        return -1;
    }
    if (ra.ids) {
        size_t n = strspn(ra.ids, "0123456789,");
        if (!ra.ids[0] || ra.ids[n] || n > 11 * (size_t)DIFF_OTHER_MAX_TEXT) {
            dflash_set_error("--ids: expected token ids, comma-separated, got \"%.100s\"", ra.ids);
            return -1;
        }
    }
    char num[64];
    int rc = 0;
#define PUSH(s) (rc = rc ? rc : strlist_push(out, (s)))
    for (int k = 0; k < 4; k++)
        if (dirs[k]) { PUSH(DIR_FLAGS[k]); PUSH(dirs[k]); }
    if (ra.prompt) { PUSH("--prompt"); PUSH(ra.prompt); }
    if (ra.ids) { PUSH("--ids"); PUSH(ra.ids); }
    if (ra.max_new_tokens >= 0) {
        snprintf(num, sizeof num, "%ld", ra.max_new_tokens);
        PUSH("--max-new-tokens"); PUSH(num);
    }
    if (ra.block_size >= 0) {
        snprintf(num, sizeof num, "%ld", ra.block_size);
        PUSH("--block-size"); PUSH(num);
    }
    if (ra.temperature >= 0) {
        snprintf(num, sizeof num, "%.17g", ra.temperature);
        PUSH("--temperature"); PUSH(num);
    }
    if (ra.seed) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)ra.seed);
        PUSH("--seed"); PUSH(num);
    }
    if (ra.draft_window >= 0) {
        static const char *const WINDOWS[3] = {"trained", "flash", "full"};
        PUSH("--draft-window"); PUSH(WINDOWS[ra.draft_window]);
    }
    if (ra.chat) PUSH("--chat");
    for (int i = 0; i < ra.n_stop; i++) {
        snprintf(num, sizeof num, "%d", ra.stop_ids[i]);
        PUSH("--stop-id"); PUSH(num);
    }
    if (ra.ignore_eos) PUSH("--ignore-eos");
#undef PUSH
    return rc ? -2 : 0;
}

/* One argument as the command line shown: escaped (escape_into), quoted when
 * it holds a space or is empty. */
static void put_arg(FILE *f, const char *s) {
    int quote = !s[0] || strpbrk(s, " '\"") != NULL;
    fputc(' ', f);
    if (quote) fputc('\'', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c < 0x20 || *c == 0x7f || *c == '\\') fprintf(f, "\\x%02x", *c);
        else if (*c == '\'' && quote) fputs("\\x27", f);
        else fputc(*c, f);
    }
    if (quote) fputc('\'', f);
}

/* End a child run: SIGTERM, then SIGKILL when it has not died within
 * DIFF_END_TICKS tenths of a second; reaped. The stop signals are blocked. */
static void end_child(pid_t pid, const sigset_t *wake, int *status) {
    kill(pid, SIGTERM);
    for (int t = 0; t < DIFF_END_TICKS; t++) {
        if (waitpid(pid, status, WNOHANG) == pid) return;
        struct timespec tick = {0, 100000000};
        sigtimedwait(wake, NULL, &tick);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
}

/* Start bin with args, its stdout and stderr into log (created 0600), its
 * signal mask *mask (diff's before it blocked the stop signals). On Linux
 * the child is killed (SIGKILL) when diff dies, even of SIGKILL, which no
 * handler sees: PR_SET_PDEATHSIG, set in the child before exec, then
 * getppid() checked, as diff may have died before the prctl. The child
 * reports a failure before or at exec through a close-on-exec pipe. The
 * pid, or -1 with errno. */
static pid_t spawn_child(const char *bin, char **args, const char *log, const sigset_t *mask) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    if (fcntl(fds[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(fds[1], F_SETFD, FD_CLOEXEC) != 0) {
        int e = errno;
        close(fds[0]), close(fds[1]);
        errno = e;
        return -1;
    }
#ifdef __linux__
    pid_t parent = getpid();
#endif
    pid_t pid = fork();
    if (pid == 0) {  /* the child: async-signal-safe calls only */
        int e = 0;
#ifdef __linux__
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) e = errno;
        else if (getppid() != parent) _exit(127);   /* diff is gone already */
#endif
        int fd = e ? -1 : open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (!e && fd < 0) e = errno;
        if (!e && ((fd != 1 && dup2(fd, 1) < 0) || dup2(1, 2) < 0)) e = errno;
        if (!e) {
            if (fd != 1) close(fd);
            sigprocmask(SIG_SETMASK, mask, NULL);
            execve(bin, args, environ);
            e = errno;
        }
        ssize_t w = write(fds[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    int e = pid < 0 ? errno : 0;
    close(fds[1]);
    if (pid > 0) {  /* exec'd: the pipe closes with nothing in it */
        ssize_t r;
        while ((r = read(fds[0], &e, sizeof e)) < 0 && errno == EINTR) {}
        if (r == (ssize_t)sizeof e) {
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
            pid = -1;
        } else e = 0;
    }
    close(fds[0]);
    errno = e;
    return pid;
}

/* Run bin with args, its stdout and stderr into log, and wait for it. The
 * run ends with diff: SIGINT, SIGTERM and SIGHUP are blocked while it runs,
 * and one of them ends the child (end_child) before diff dies of it, through
 * the program's handler (which removes diff's temporary folder); a run
 * longer than DIFF_OTHER_SECONDS is ended. 0 with *status the child's wait
 * status; 1 it was ended (why in df->no_other); -1 not started (the errno). */
static int run_child(Diff *df, const char *kind, const char *bin, char **args, const char *log, int *status) {
    sigset_t wake, old;
    sigemptyset(&wake);
    sigaddset(&wake, SIGINT);
    sigaddset(&wake, SIGTERM);
    sigaddset(&wake, SIGHUP);
    sigaddset(&wake, SIGCHLD);
    sigprocmask(SIG_BLOCK, &wake, &old);
    pid_t pid = spawn_child(bin, args, log, &old);
    int sig = 0, over = 0;
    if (pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        errno = e;
        return -1;
    }
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) break;
        struct timespec tick = {1, 0};
        int s = sigtimedwait(&wake, NULL, &tick);
        if (s == SIGINT || s == SIGTERM || s == SIGHUP) { sig = s; break; }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= DIFF_OTHER_SECONDS) { over = 1; break; }
    }
    if (sig || over) end_child(pid, &wake, status);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (sig) raise(sig);   /* diff dies of it as it would have: the program's handler cleans up */
    if (sig)
        snprintf(df->no_other, sizeof df->no_other, "the %s build's run on A's flags was ended by a signal", kind);
    else if (over)
        snprintf(df->no_other, sizeof df->no_other, "the %s build's run on A's flags was ended after %d s (the "
                 "limit); give --%s DIR", kind, DIFF_OTHER_SECONDS, kind);
    return sig || over ? 1 : 0;
    return 0;
}

/* Run the other precision's build (dflash-double beside this program, or
 * dflash-float when A is the double build) on the flags A's manifest
 * records (rerun_args: the inference flags alone, checked and rebuilt), tracing the names `want` (by name, by phase, or everything when
 * there are too many), into a temporary directory. 0 with df->have_other,
 * or 0 with df->no_other saying why not; -1 out of memory. */
static int run_other(Diff *df, const StrList *want) {
    const char *kind = df->a_double ? "float" : "double";
    if (!df->ma->has_argv) {
        snprintf(df->no_other, sizeof df->no_other, "A's manifest records no run flags (\"argv\", which this "
                 "program's traces carry); give --%s DIR, a trace of ./dflash-%s on A's flags", kind, kind);
        return 0;
    }
    StrList run = {0};   /* the other build's flags, rebuilt from A's */
    int ra = rerun_args(df->ma, &run);
    if (ra != 0) {
        strlist_free(&run);
        if (ra == -2) {
            dflash_set_error("out of memory");
            return -1;
        }
        char why[400];
        escape_into(why, sizeof why, dflash_errmsg);
        snprintf(df->no_other, sizeof df->no_other, "A's recorded run flags (\"argv\") are not run: %s (diff runs "
                 "the inference flags alone: TRACE.md); give --%s DIR, a trace of ./dflash-%s on A's flags", why,
                 kind, kind);
        return 0;
    }
    char exe[4096], bin[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) snprintf(exe, sizeof exe, "./dflash");
    else exe[n] = 0;
    char *slash = strrchr(exe, '/');
    snprintf(bin, sizeof bin, "%.*s/dflash-%s", slash ? (int)(slash - exe) : 1, slash ? exe : ".", kind);
    if (access(bin, X_OK) != 0) {
        snprintf(df->no_other, sizeof df->no_other, "no %.600s to run (make dflash-%s), or give --%s DIR", bin, kind,
                 kind);
        strlist_free(&run);
        return 0;
    }
    const char *tmpdir = getenv("TMPDIR");
    snprintf(df->tmp, sizeof df->tmp, "%.400s/dflash-diff.XXXXXX", tmpdir && tmpdir[0] ? tmpdir : "/tmp");
    if (!mkdtemp(df->tmp)) {
        snprintf(df->no_other, sizeof df->no_other, "cannot create %.400s: %s", df->tmp, strerror(errno));
        df->tmp[0] = 0;
        strlist_free(&run);
        return 0;
    }
    char *log = path_join(df->tmp, "run.log"), *out = path_join(df->tmp, "trace");
    const Manifest *m = df->ma;
    /* globs, the finest of these that is at most DIFF_OTHER_FILTERS - 2 of
     * them (else none: everything): every name, every phase ("draft51.*"),
     * every name in every round ("draft*.layers.4.mlp.act"), every layer in
     * every round ("draft*.layers.4.*"), every kind of phase ("draft*.*") */
    StrList globs = {0};
    int rc = log && out && diff_register(df, 'd', df->tmp) == 0 && diff_register(df, 'f', log) == 0 &&
             diff_register(df, 'd', out) == 0 ? 0 : -1;
    for (int level = 0; rc == 0 && level < 5 && (level == 0 || globs.n > DIFF_OTHER_FILTERS - 2); level++) {
        strlist_free(&globs);
        for (int i = 0; rc == 0 && i < want->n && globs.n <= DIFF_OTHER_FILTERS - 2; i++) {
            char g[300];
            other_glob(want->s[i], level, g, sizeof g);
            int dup = 0;
            for (int j = 0; j < globs.n && !dup; j++) dup = !strcmp(globs.s[j], g);
            if (!dup) rc = strlist_push(&globs, g);
        }
    }
    if (globs.n > DIFF_OTHER_FILTERS - 2) strlist_free(&globs);
    /* with globs, the ids that tell whether its tokens are A's */
    /* (only those A has: main.c refuses a filter that matches nothing the run can emit) */
    int has_sampled = 0, has_acc = 0;
    for (int i = 0; i < m->names.n; i++) {
        const char *dot = strrchr(m->names.s[i], '.');
        has_sampled |= dot && !strcmp(dot, "." TN_SAMPLED);
        has_acc |= dot && !strcmp(dot, "." TN_ACCEPTANCE);
    }
    if (rc == 0 && globs.n && has_sampled) rc = strlist_push(&globs, "*.sampled");
    if (rc == 0 && globs.n && has_acc) rc = strlist_push(&globs, "*acceptance_length");
    size_t na = (size_t)run.n + 4 + 2 * (size_t)globs.n;
    char **args = rc == 0 ? calloc(na, sizeof *args) : NULL;
    if (!args) {
        strlist_free(&run);
        strlist_free(&globs);
        free(log);
        free(out);
        dflash_set_error("out of memory");
        return -1;
    }
    int c = 0;
    args[c++] = bin;
    for (int i = 0; i < run.n; i++) args[c++] = run.s[i];
    args[c++] = "--trace";   /* its one output, in diff's temporary folder */
    args[c++] = out;
    for (int i = 0; i < globs.n; i++) {
        args[c++] = "--trace-filter";
        args[c++] = globs.s[i];
    }
    args[c] = NULL;
    fprintf(stderr, "dflash diff: %d tensor%s beyond the tolerance: running the %s build on A's flags to judge "
            "rounding (", want->n, want->n == 1 ? " is" : "s are", kind);
    put_name(stderr, bin);
    for (int i = 1; i < c; i++) put_arg(stderr, args[i]);
    fprintf(stderr, ")\n");
    int status = 0, e = run_child(df, kind, bin, args, log, &status);
    if (e < 0) {
        snprintf(df->no_other, sizeof df->no_other, "cannot run %.600s: %s", bin, strerror(errno));
    } else if (e > 0) {
        /* ended: df->no_other says why */
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* its last line names the problem */
        char *text = NULL, last[400] = "";
        size_t len = 0;
        if (file_read_max(log, 1 << 20, &text, &len) == 0) {
            while (len && text[len - 1] == '\n') text[--len] = 0;
            const char *nl = strrchr(text, '\n');
            escape_into(last, sizeof last, nl ? nl + 1 : text);
        }
        free(text);
        snprintf(df->no_other, sizeof df->no_other, "the %s build's run on A's flags failed (%s%s)", kind,
                 last[0] ? "" : "no message", last);
    } else if (manifest_load(&df->mo, out, 0) != 0) {
        snprintf(df->no_other, sizeof df->no_other, "the %s build's trace: %.600s", kind, dflash_errmsg);
    } else {
        df->have_other = 1;
        df->dir[2] = out;
        out = NULL;   /* kept in dir[2], freed at the end */
        char *p = path_join(df->dir[2], "trace.jsonl");
        rc = p ? diff_register(df, 'f', p) : -1;
        free(p);
        for (int i = 0; rc == 0 && i < df->mo.names.n; i++) {
            p = path_join(df->dir[2], df->mo.files.s[i]);
            rc = p ? diff_register(df, 'f', p) : -1;
            free(p);
        }
    }
    free(args);
    strlist_free(&run);
    strlist_free(&globs);
    free(log);
    free(out);
    return rc;
}

/* ---- an agreeing tensor far worse than those around it ------------------- */

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Upstream of the first departure, the agreeing float tensor whose NMSE is
 * the most above the median of its neighbours' (DIFF_NEIGHBOURS compared
 * float tensors on each side; exact ones count as -200 dB), when that is
 * DIFF_ODD_DB or more: a mistake within the tolerance there moves the
 * first departure downstream. */
static void odd_warning(const Diff *df) {
    int n = df->ma->names.n, end = df->first_k >= 0 ? df->first_k : n, worst = -1, count = 0, worst_nb = 0;
    double worst_ex = 0, worst_med = 0;
    if (!df->db) return;
    for (int k = 0; k < end; k++) {
        double v = df->db[k];
        if (isnan(v) || isinf(v)) continue;   /* not compared, departing, exact, or A is 0 */
        double nb[2 * DIFF_NEIGHBOURS];
        int m = 0;
        for (int side = -1; side <= 1; side += 2) {
            int got = 0;
            for (int j = k + side; j >= 0 && j < n && got < DIFF_NEIGHBOURS; j += side) {
                double w = df->db[j];
                if (isnan(w) || w == INFINITY) continue;
                nb[m++] = w == -INFINITY || w < -200 ? -200 : w;
                got++;
            }
        }
        if (m < 4) continue;
        qsort(nb, (size_t)m, sizeof *nb, cmp_double);
        double med = m % 2 ? nb[m / 2] : (nb[m / 2 - 1] + nb[m / 2]) / 2, ex = v - med;
        if (ex >= DIFF_ODD_DB) {
            count++;
            if (ex > worst_ex) { worst_ex = ex; worst = k; worst_med = med; worst_nb = m; }
        }
    }
    if (worst < 0) return;
    printf("warning: ");
    put_name(stdout, df->ma->names.s[worst]);
    printf(" agrees within the tolerance, but its NMSE %.1f dB is %.1f dB above its neighbours' (the median of the "
           "%d float tensors around it: %.1f dB): a mistake that stays within the tolerance there can move the first "
           "departure downstream; look there first", df->db[worst], worst_ex, worst_nb, worst_med);
    if (count > 1) printf(" (%d tensors %g dB or more above their neighbours)", count, DIFF_ODD_DB);
    printf("\n");
}

/* the names of A that B lacks (diff_compare), in A's order */
typedef struct {
    int *k;             /* their indices in A */
    int n, first;       /* how many; the first (-1: none) */
    int last_present;   /* the last name B has (-1: none) */
    int after_gap;      /* B has a name after a missing one */
} Missing;

/* The file `file` of the trace folder dir (real path rdir) stays inside it:
 * a symbolic link is followed only when its target lies inside the folder
 * (a received trace could otherwise have diff read, and print the values
 * of, any file the user can read). 0 (also when the file is absent: that is
 * reported where it is read), or -1 with dflash_errmsg. */
static int link_inside(const char *dir, const char *rdir, const char *file) {
    char *p = path_join(dir, file);
    struct stat st;
    if (!p) return -1;
    int rc = 0;
    if (lstat(p, &st) == 0 && S_ISLNK(st.st_mode)) {
        char *to = realpath(p, NULL);
        size_t n = strlen(rdir);
        if (to && !(strncmp(to, rdir, n) == 0 && (to[n] == '/' || (n == 1 && rdir[0] == '/')))) {
            char esc[300];
            escape_into(esc, sizeof esc, to);
            dflash_set_error("%s: a symbolic link to %s, outside the trace folder %s: refused (a trace's files stay "
                             "inside its folder)", p, esc, dir);
            rc = -1;
        }
        free(to);
    }
    free(p);
    return rc;
}

/* Every file of the trace folder dir its manifest m names, and the manifest
 * itself, inside the folder (link_inside). 0, or -1 with dflash_errmsg. */
static int links_inside(const char *dir, const Manifest *m) {
    char *rdir = realpath(dir, NULL);
    if (!rdir) {
        dflash_set_error("%s: %s", dir, strerror(errno));
        return -1;
    }
    int rc = link_inside(dir, rdir, "trace.jsonl") || link_inside(dir, rdir, "names.json") ? -1 : 0;
    for (int k = 0; rc == 0 && m && k < m->files.n; k++) rc = link_inside(dir, rdir, m->files.s[k]);
    free(rdir);
    return rc;
}

/* both traces (A's manifest, B's or its .npy files), and --double/--float's
 * trace, their files inside their folders (links_inside); 0, or 2 with the
 * error printed and nothing left to free */
static int diff_open(Diff *df, const DiffArgs *da, Manifest *ma, Manifest *mb) {
    int other_double = da->double_dir != NULL;
    const char *other = other_double ? da->double_dir : da->float_dir;
    for (int k = 0; k < 2; k++) {
        struct stat sd;
        if (stat(df->dir[k], &sd) != 0 || !S_ISDIR(sd.st_mode)) {
            dflash_set_error("%s: cannot open directory: %s", df->dir[k],
                             stat(df->dir[k], &sd) != 0 ? strerror(errno) : "not a directory");
            diff_error("");
            return 2;
        }
    }
    /* the manifests first (no link out of the folder is read), then every file they name */
    for (int k = 0; k < 2; k++)
        if (links_inside(df->dir[k], NULL) != 0) {
            diff_error("");
            return 2;
        }
    int ra = manifest_load(ma, df->dir[0], 1);
    if (ra != 0) {
        if (ra == 1) dflash_set_error("%s: no trace.jsonl (or names.json): not a trace directory", df->dir[0]);
        diff_error("");
        return 2;
    }
    int rb = manifest_load(mb, df->dir[1], 1);
    /* a port that stopped before writing its manifest: its .npy files by name */
    if (rb == 1) rb = manifest_from_npy_files(mb, df->dir[1], ma) == 0 ? 2 : -1;
    if (rb < 0) {
        diff_error("");
        manifest_free(ma);
        return 2;
    }
    if (links_inside(df->dir[0], ma) != 0 || links_inside(df->dir[1], mb) != 0) {
        diff_error("");
        manifest_free(ma);
        manifest_free(mb);
        return 2;
    }
    if (rb == 2) {
        printf("warning: B has no manifest (trace.jsonl or names.json): its .npy files are taken as A's names "
               "(<name>.npy), in A's data-flow order; the phase and round bindings are unchecked\n");
    }
    df->ma = ma;
    df->mb = mb;
    df->o_div = ma->names.n;
    df->first_k = -1;
    df->db = malloc(((size_t)ma->names.n + 1) * sizeof *df->db);
    for (int k = 0; df->db && k < ma->names.n; k++) df->db[k] = NAN;
    df->a_double = a_is_double(df);
    int ro = 0;
    if (other && other_double == df->a_double) {
        dflash_set_error("--%s: A is already the %s build's trace (its floats are %s); give --%s DIR instead",
                         other_double ? "double" : "float", other_double ? "double" : "float",
                         other_double ? "float64" : "float32", other_double ? "float" : "double");
        ro = -1;
    } else if (other) {
        struct stat so;
        ro = stat(other, &so) == 0 && S_ISDIR(so.st_mode) ? links_inside(other, NULL) : 1;
        if (ro == 0) ro = manifest_load(&df->mo, other, 0);
        if (ro == 0 && links_inside(other, &df->mo) != 0) {
            manifest_free(&df->mo);
            ro = -1;
        }
        if (ro == 1) dflash_set_error("--%s: %s: not a trace directory (no trace.jsonl)", other_double ? "double" : "float", other);
    }
    if (ro != 0) {
        diff_error("");
        manifest_free(ma);
        manifest_free(mb);
        free(df->db);
        return 2;
    }
    if (other) {
        df->have_other = 1;
        df->dir[2] = other;
    }
    return 0;
}

/* every wanted name of A against B (the rounds first, the other build's
 * trace for what lies beyond the tolerance); the names B lacks into *mi;
 * 0, or 2 with the error set */
static int diff_compare(Diff *df, Missing *mi) {
    const Manifest *ma = df->ma;
    int wanted = 0;
    mi->first = mi->last_present = -1;
    mi->k = calloc((size_t)ma->names.n + 1, sizeof(int));
    if (!mi->k) {
        dflash_set_error("out of memory");
        return 2;
    }
    /* every --only must match a name of A, before anything is compared */
    for (int j = 0; j < df->n_only; j++) {
        int hit = 0;
        for (int k = 0; k < ma->names.n && !hit; k++) hit = fnmatch(df->only[j], ma->names.s[k], 0) == 0;
        if (!hit) {
            char close[400];
            glob_closest(df->only[j], ma->names.s, ma->names.n, close, sizeof close);
            dflash_set_error("--only: \"%.100s\" matches no name in %s (closest: %s)", df->only[j], ma->path, close);
            return 2;
        }
    }
    /* rounds first (not with --only: a port that traces part of a run on
     * purpose ran no fewer rounds) */
    if (df->n_only == 0 && diff_rounds(df) != 0) return 2;
    /* the other precision's build, to judge what lies beyond the tolerance */
    if (!df->no_rounding && !df->have_other) {
        StrList want = {0};
        int rc = beyond_names(df, &want) != 0 || (want.n && run_other(df, &want) != 0);
        strlist_free(&want);
        if (rc) return 2;
    }
    if (df->have_other) df->o_div = other_divergence(df);
    for (int k = 0; k < ma->names.n; k++) {
        if (!diff_wanted(df, ma->names.s[k])) continue;
        wanted++;
        int r = diff_one(df, df->ma, df->mb, k);
        if (r < 0) return 2;
        if (r == 1) {
            mi->k[mi->n++] = k;
            if (mi->first < 0) mi->first = k;
        } else {
            mi->last_present = k;
            if (mi->first >= 0) mi->after_gap = 1;   /* B has a name after a gap */
        }
    }
    if (wanted == 0) {
        dflash_set_error("no name in %s matches --only", ma->path);
        return 2;
    }
    return 0;
}

/* the report's "missing from B" lines */
static void diff_report_missing(const Manifest *ma, const Missing *mi) {
    if (!mi->n) return;
    for (int i = 0; i < mi->n && i < DIFF_LIST_MAX; i++) {
        printf("missing from B: ");
        put_name(stdout, ma->names.s[mi->k[i]]);
        printf("\n");
    }
    if (mi->n > DIFF_LIST_MAX) printf("missing from B: ... and %d more\n", mi->n - DIFF_LIST_MAX);
    if (mi->last_present < 0) {
        printf("B has none of A's %d tensors", mi->n);
    } else if (!mi->after_gap) {
        printf("B has nothing after ");
        put_name(stdout, ma->names.s[mi->last_present]);
        printf(": %d tensor%s missing", mi->n, mi->n == 1 ? "" : "s");
    } else {
        printf("B lacks %d of A's tensors", mi->n);
    }
    printf(", first ");
    put_name(stdout, ma->names.s[mi->first]);
    printf("\n");
}

/* the report's "not compared (only in B)" lines; how many names */
static int diff_report_only_b(const Diff *df) {
    int only_b = 0;
    for (int k = 0; k < df->mb->names.n; k++)
        if (diff_wanted(df, df->mb->names.s[k]) && namemap_get(&df->ma->index, df->mb->names.s[k]) < 0) {
            if (only_b++ < DIFF_LIST_MAX) {
                printf("not compared (only in B): ");
                put_name(stdout, df->mb->names.s[k]);
                printf("\n");
            }
        }
    if (only_b > DIFF_LIST_MAX) printf("not compared (only in B): ... and %d more\n", only_b - DIFF_LIST_MAX);
    return only_b;
}

/* the report's closing notes: rounds, odd tensors, rounding */
static void diff_report_notes(Diff *df) {
    if (df->rounds_differ && !df->first_named)
        printf("no tensor departs in the common rounds: every tensor both traces hold agrees; the runs differ "
               "in their rounds (above)\n");
    odd_warning(df);
    if (df->unjudged && !df->no_rounding) {
        printf("rounding not judged by the double build for %d tensor%s beyond the tolerance (%d of them rounding "
               "by the fallback thresholds: NMSE <= %g dB, <= 1 value in %d beyond, none beyond %gx the tolerance; "
               "they can be wrong both ways): %s\n", df->unjudged, df->unjudged == 1 ? "" : "s", df->unjudged_rounding,
               DIFF_FALLBACK_NMSE_DB, DIFF_FALLBACK_FRACTION, DIFF_FALLBACK_EXCESS,
               df->no_other[0] ? df->no_other
                               : df->o_div < df->ma->names.n ? "the other build's run took other tokens from there on"
                                                             : "the other build's trace lacks them");
    }
    if (df->rounding) {
        printf("rounding: %d tensor%s beyond the tolerance but within rounding (B as close to the %s build's "
               "values as this program's float build: at most %gx its distance, RMS and worst value, the same "
               "tokens so far; ids: near ties past the accepted tokens); the largest ratio %.3g, in ",
               df->rounding, df->rounding == 1 ? " is" : "s are", "double", DIFF_ROUND_RATIO,
               df->worst_rnd[0] ? df->worst_rnd_db : 0.0);
        put_name(stdout, df->worst_rnd[0] ? df->worst_rnd : "(none judged by the double build)");
        printf("; --verbose marks them RND, --no-rounding counts them as departures\n");
    }
}

/* the report after the tensors' lines; the exit status: 0 the same, 1 a
 * departure or a missing tensor, 2 nothing compared */
static int diff_report(Diff *df, const Missing *mi) {
    if (df->differ > DIFF_LIST_MAX) printf("(%d more differing tensors not listed)\n", df->differ - DIFF_LIST_MAX);
    diff_report_missing(df->ma, mi);
    int only_b = diff_report_only_b(df);
    diff_report_notes(df);
    printf("diff: %d compared, %d differ, %d missing from B, %d only in B, %d rounding\n", df->compared,
           df->differ, mi->n, only_b, df->rounding);
    if (df->compared == 0) {
        dflash_set_error("nothing was compared: %s has none of the names of %s", df->dir[1], df->dir[0]);
        diff_error("");
        return 2;
    }
    return df->differ || mi->n ? 1 : 0;
}

static void diff_close(Diff *df, Manifest *ma, Manifest *mb) {
    if (df->tmp[0]) {   /* the other build's trace diff ran: removed */
        out_remove_owned(df);
        out_forget(df, 0, NULL);
        free((char *)df->dir[2]);
    }
    if (df->have_other || df->mo.path) manifest_free(&df->mo);
    free(df->db);
    manifest_free(ma);
    manifest_free(mb);
    free(df->acc[0].p);
    free(df->acc[1].p);
}

int diff_main(int argc, char **argv) {
    Diff df;
    memset(&df, 0, sizeof df);
    DiffArgs da;
    memset(&da, 0, sizeof da);
    da.rtol = 1e-4;
    da.atol = 1e-6;
    int n_dirs = 0;
    int pa = flags_parse(DIFF_FLAGS, argc, argv, &da, "dflash diff", df.dir, 2, &n_dirs);
    if (pa == 1) {
        printf("usage: dflash diff DIR_A DIR_B [DIFF OPTIONS]   compare traces: A the reference, B the port\n%s",
               DIFF_HELP);
        return 0;
    }
    if (pa < 0) return diff_usage();
    if (da.double_dir && da.float_dir) {
        dflash_set_error("--double and --float: give one of them");
        return diff_usage();
    }
    df.rtol = da.rtol, df.atol = da.atol, df.verbose = da.verbose, df.no_rounding = da.no_rounding;
    df.n_only = da.n_only;
    memcpy(df.only, da.only, sizeof df.only);
    if (n_dirs != 2) {
        dflash_set_error("need two trace directories, A (the reference) and B (the port)");
        return diff_usage();
    }
    Manifest ma, mb;
    if (diff_open(&df, &da, &ma, &mb) != 0) return 2;
    Missing mi = {0};
    int status = diff_compare(&df, &mi);
    if (status == 2) diff_error("");
    else status = diff_report(&df, &mi);
    free(mi.k);
    diff_close(&df, &ma, &mb);
    return status;   /* main's finish() checks that stdout took the report */
}
