/* diff.c - `dflash diff A B [--rtol R] [--atol A] [--only GLOB]... [--verbose]`:
 * two traces compared tensor by tensor (diff.h).
 *
 * dflash diff A B [--rtol R] [--atol A] [--only GLOB]... [--verbose]
 *
 * A is the reference, B the port. Walks A's manifest (trace.jsonl, or the
 * oracle's names.json) in A's order, which is data-flow order: the first
 * departure printed is the first tensor, in the order the computation
 * produces them, where B departs from A. B's tensor of the same name is
 * found through B's manifest when it has one, else as B/<name>.npy.
 *
 * The rules (NOTES.md "dflash diff"):
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
 * of an [H, ...] attention tensor depart, which other tensor of A (same
 * phase, same shape) B's tensor or one of its column blocks equals, and
 * whether B is A before a final RMSNorm.
 * Exit: 0 every tensor of A is in B and agrees; 1 some differ or are
 * missing from B; 2 bad input (usage, unreadable directory, manifest or
 * .npy, a manifest contradicting a header) or no name in common.
 */

#include "diff.h"
#include "dflash.h"
#include "files.h"
#include "manifest.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DIFF_LIST_MAX 20   /* differing / missing names listed in full */
#define DIFF_MAX_ONLY 64

typedef struct {
    double rtol, atol;
    int verbose;
    const char *only[DIFF_MAX_ONLY];
    int n_only;
    const char *dir[2];
    const Manifest *ma;
    int compared, differ;
} Diff;

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

/* The manifest's "dtype|shape" for a tensor must match its header. */
static int check_meta(const char *path, const char *meta, const NpyArray *a) {
    if (!meta[0]) return 0;
    char have[64 + 24 * NPY_MAX_NDIM];
    size_t len = (size_t)snprintf(have, sizeof have, "%s|", npy_dtype_name(a));
    for (int d = 0; d < a->ndim; d++)
        len += (size_t)snprintf(have + len, sizeof have - len, d ? ",%lld" : "%lld", (long long)a->shape[d]);
    if (strcmp(have, meta) == 0) return 0;
    dflash_set_error("%s: the manifest says dtype|shape \"%s\" but the file's header says \"%s\"", path, meta,
                     have);
    return -1;
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

/* Hints for the first departure of a float tensor (printed when certain). */
static void diff_hints(const Diff *df, const char *name, const NpyArray *a, const NpyArray *b, const FloatCmp *r) {
    FILE *f = stdout;
    char saved[sizeof dflash_errmsg];
    memcpy(saved, dflash_errmsg, sizeof saved);
    /* heads: an attention tensor [H, ...] */
    if (a->ndim == 3 && strstr(name, "self_attn.") && a->shape[0] > 1) {
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
    memcpy(dflash_errmsg, saved, sizeof saved);
}

/* Compare one pair (headers checked, data loaded). Prints a departure, or
 * with --verbose one line either way. Returns 1 if it departs. */
static int diff_tensor(Diff *df, const char *name, const NpyArray *a, const NpyArray *b) {
    int first = df->differ == 0;
    int list = df->differ < DIFF_LIST_MAX;
    FILE *f = stdout;
    const char *lead = first ? "first departure: " : "differs: ";
    char shp[32 + 24 * NPY_MAX_NDIM];
    shape_str(shp, sizeof shp, a);

    if (a->kind != 'f') {
        size_t bad = 0, at = 0;
        for (size_t k = 0; k < a->n; k++)
            if (npy_i(a, k) != npy_i(b, k) && bad++ == 0) at = k;
        if (df->verbose) {
            fprintf(f, "%-4s ", bad ? "DEP" : "ok");
            put_name(f, name);
            fprintf(f, "  %s %s  %s\n", a->descr, shp, bad ? "ints differ" : "ints equal");
        }
        if (bad == 0) return 0;
        if (list) {
            fprintf(f, "%s", lead);
            put_name(f, name);
            fprintf(f, ": %zu of %zu ints differ; first at ", bad, a->n);
            print_index(f, a, at);
            fprintf(f, ": A %lld, B %lld\n", (long long)npy_i(a, at), (long long)npy_i(b, at));
            if (first) print_around(f, a, b, at);
        }
        return 1;
    }

    FloatCmp r;
    cmp_floats(df, a, b, whole(a), &r);
    char nmse[48];
    nmse_str(nmse, sizeof nmse, &r);
    if (df->verbose) {
        fprintf(f, "%-4s ", r.bad ? "DEP" : "ok");
        put_name(f, name);
        fprintf(f, "  %s %s  max|A| %.6g  worst rel err %.3g  NMSE %s", a->descr, shp, r.max_a,
                r.max_a > 0 ? r.max_abs / r.max_a : r.max_abs, nmse);
        if (r.any_nonfinite)
            fprintf(f, "  NaN A/B %zu/%zu Inf A/B %zu/%zu", r.nan[0], r.nan[1], r.inf[0], r.inf[1]);
        fprintf(f, "\n");
    }
    if (r.bad == 0) return 0;
    if (list) {
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
        if (first) {
            print_around(f, a, b, r.worst);
            diff_hints(df, name, a, b, &r);
        }
    }
    return 1;
}

/* Parse a tolerance: a finite number >= 0. */
static int parse_tol(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < 0) return -1;
    *out = v;
    return 0;
}

/* "dflash diff: <message><after>" on stderr, on one line */
static void diff_error(const char *after) { dflash_print_error("dflash diff", after); }

static int diff_usage(void) {
    diff_error(" (usage: dflash diff A B [--rtol R] [--atol A] [--only GLOB]... [--verbose])");
    return 2;
}

static int diff_wanted(const Diff *df, const char *name) {
    if (df->n_only == 0) return 1;
    for (int k = 0; k < df->n_only; k++)
        if (fnmatch(df->only[k], name, 0) == 0) return 1;
    return 0;
}

/* B's file for A's name: through B's manifest, else B/<name>.npy when it
 * exists. NULL when B has no such tensor (or out of memory: then *oom). */
static char *diff_path_b(const Diff *df, const Manifest *mb, int have_mb, const char *name, int *meta_j) {
    *meta_j = -1;
    if (have_mb) {
        int j = namemap_get(&mb->index, name);
        if (j < 0) return NULL;
        *meta_j = j;
        return path_join(df->dir[1], mb->files.s[j]);
    }
    if (strchr(name, '/') || name[0] == '.') return NULL;
    char *file = str_cat(name, ".npy");
    char *pb = file ? path_join(df->dir[1], file) : NULL;
    free(file);
    struct stat fs;
    if (pb && stat(pb, &fs) != 0 && errno == ENOENT) {
        free(pb);
        pb = NULL;
    }
    return pb;
}

/* Compare A's tensor k with B's. 0 compared, 1 B lacks it, -1 bad input. */
static int diff_one(Diff *df, const Manifest *ma, const Manifest *mb, int have_mb, int k) {
    const char *name = ma->names.s[k];
    int jb;
    char *pa = path_join(df->dir[0], ma->files.s[k]), *pb = diff_path_b(df, mb, have_mb, name, &jb);
    if (!pb) {
        free(pa);
        return 1;
    }
    NpyArray a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int ret = -1;
    if (!pa || npy_open(pa, &a) != 0 || check_meta(pa, ma->meta.s[k], &a) != 0) goto out;
    if (npy_open(pb, &b) != 0 || (jb >= 0 && check_meta(pb, mb->meta.s[jb], &b) != 0)) goto out;
    df->compared++;
    ret = 0;
    if (!same_shape(&a, &b) || (a.kind == 'f') != (b.kind == 'f')) {
        int list = df->differ < DIFF_LIST_MAX;
        if (df->verbose) {
            printf("DEP  ");
            put_name(stdout, name);
            printf("  %s\n", same_shape(&a, &b) ? "dtype kind differs" : "shape differs");
        }
        if (list) {
            printf("%s", df->differ == 0 ? "first departure: " : "differs: ");
            put_name(stdout, name);
            printf("\n  %s: A is ", same_shape(&a, &b) ? "dtype kind" : "shape");
            print_shape(stdout, &a);
            printf(", B is ");
            print_shape(stdout, &b);
            printf("\n");
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

int diff_main(int argc, char **argv) {
    Diff df;
    memset(&df, 0, sizeof df);
    df.rtol = 1e-4;
    df.atol = 1e-6;
    int n_dirs = 0;
    for (int k = 1; k < argc; k++) {
        const char *arg = argv[k], *val = NULL;
        char flag[32];
        /* --flag=value and --flag value alike */
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        size_t fl = eq ? (size_t)(eq - arg) : strlen(arg);
        snprintf(flag, sizeof flag, "%.*s", (int)(fl < sizeof flag ? fl : sizeof flag - 1), arg);
        int takes_value = !strcmp(flag, "--rtol") || !strcmp(flag, "--atol") || !strcmp(flag, "--only");
        if (takes_value) {
            if (eq) val = eq + 1;
            else if (k + 1 < argc) val = argv[++k];
            else {
                dflash_set_error("%s needs a value", flag);
                return diff_usage();
            }
        }
        if (!strcmp(flag, "--rtol") || !strcmp(flag, "--atol")) {
            if (parse_tol(val, !strcmp(flag, "--rtol") ? &df.rtol : &df.atol) != 0) {
                dflash_set_error("%s needs a number >= 0, got \"%.100s\"", flag, val);
                return diff_usage();
            }
        } else if (!strcmp(flag, "--only")) {
            if (df.n_only == DIFF_MAX_ONLY) {
                dflash_set_error("--only: at most %d patterns", DIFF_MAX_ONLY);
                return diff_usage();
            }
            df.only[df.n_only++] = val;
        } else if ((!strcmp(arg, "--verbose") || !strcmp(arg, "-v"))) {
            df.verbose = 1;
        } else if (arg[0] == '-' && arg[1]) {
            dflash_set_error("unknown option %.100s", arg);
            return diff_usage();
        } else if (n_dirs < 2) {
            df.dir[n_dirs++] = arg;
        } else {
            dflash_set_error("too many arguments (%.100s)", arg);
            return diff_usage();
        }
    }
    if (n_dirs != 2) {
        dflash_set_error("need two trace directories, A (the reference) and B (the port)");
        return diff_usage();
    }

    for (int k = 0; k < 2; k++) {
        struct stat sd;
        if (stat(df.dir[k], &sd) != 0 || !S_ISDIR(sd.st_mode)) {
            dflash_set_error("%s: cannot open directory: %s", df.dir[k],
                             stat(df.dir[k], &sd) != 0 ? strerror(errno) : "not a directory");
            diff_error("");
            return 2;
        }
    }
    Manifest ma, mb;
    int ra = manifest_load(&ma, df.dir[0], 1);
    if (ra != 0) {
        if (ra == 1) dflash_set_error("%s: no trace.jsonl (or names.json): not a trace directory", df.dir[0]);
        diff_error("");
        return 2;
    }
    int rb = manifest_load(&mb, df.dir[1], 1);
    if (rb < 0) {
        diff_error("");
        manifest_free(&ma);
        return 2;
    }
    df.ma = &ma;

    int status = 0, wanted = 0, n_missing = 0, first_missing = -1, last_present = -1, missing_after = 0;
    int *missing = calloc((size_t)ma.names.n + 1, sizeof(int));
    if (!missing) {
        dflash_set_error("out of memory");
        status = 2;
    }
    for (int k = 0; k < ma.names.n && status == 0; k++) {
        if (!diff_wanted(&df, ma.names.s[k])) continue;
        wanted++;
        int r = diff_one(&df, &ma, &mb, rb == 0, k);
        if (r < 0) status = 2;
        else if (r == 1) {
            missing[n_missing++] = k;
            if (first_missing < 0) first_missing = k;
        } else {
            last_present = k;
            if (first_missing >= 0) missing_after = 1;   /* B has a name after a gap */
        }
    }
    if (status == 0 && wanted == 0) {
        dflash_set_error("no name in %s matches --only", ma.path);
        status = 2;
    }
    if (status == 2) {
        diff_error("");
    } else {
        if (df.differ > DIFF_LIST_MAX)
            printf("(%d more differing tensors not listed)\n", df.differ - DIFF_LIST_MAX);
        if (n_missing) {
            for (int i = 0; i < n_missing && i < DIFF_LIST_MAX; i++) {
                printf("missing from B: ");
                put_name(stdout, ma.names.s[missing[i]]);
                printf("\n");
            }
            if (n_missing > DIFF_LIST_MAX) printf("missing from B: ... and %d more\n", n_missing - DIFF_LIST_MAX);
            if (last_present < 0) {
                printf("B has none of A's %d tensors", n_missing);
            } else if (!missing_after) {
                printf("B has nothing after ");
                put_name(stdout, ma.names.s[last_present]);
                printf(": %d tensor%s missing", n_missing, n_missing == 1 ? "" : "s");
            } else {
                printf("B lacks %d of A's tensors", n_missing);
            }
            printf(", first ");
            put_name(stdout, ma.names.s[first_missing]);
            printf("\n");
        }
        int only_b = 0;
        if (rb == 0)
            for (int k = 0; k < mb.names.n; k++)
                if (diff_wanted(&df, mb.names.s[k]) && namemap_get(&ma.index, mb.names.s[k]) < 0) {
                    if (only_b++ < DIFF_LIST_MAX) {
                        printf("not compared (only in B): ");
                        put_name(stdout, mb.names.s[k]);
                        printf("\n");
                    }
                }
        if (only_b > DIFF_LIST_MAX) printf("not compared (only in B): ... and %d more\n", only_b - DIFF_LIST_MAX);
        printf("diff: %d compared, %d differ, %d missing from B, %d only in B\n", df.compared, df.differ,
               n_missing, only_b);
        if (df.compared == 0) {
            dflash_set_error("nothing was compared: %s has none of the names of %s", df.dir[1], df.dir[0]);
            diff_error("");
            status = 2;
        } else {
            status = df.differ || n_missing ? 1 : 0;
        }
    }
    free(missing);
    manifest_free(&ma);
    if (rb == 0) manifest_free(&mb);
    return status;   /* main's finish() checks that stdout took the report */
}
