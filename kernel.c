/* kernel.c - the fast matmul: the same bits as dflash.c's, faster.
 *
 * dflash.c's matmul is the naive loop that defines the summation order: each
 * dot product keeps KSUMS = 16 partial sums, partial j adding the products of
 * i = j, j+16, j+32, ... in increasing i, then the 16 partials added pairwise.
 * This file computes exactly those sums in exactly that order, four rows of
 * W at a time, so every result is the same bits (tests/test_kernel.c compares
 * the two with memcmp for T = 1..16 and odd shapes).
 *
 * How the two are wired: dflash.c declares its matmul weak, and this file's
 * matmul is an ordinary (strong) definition of the same function, so a
 * program that links kernel.c runs this one and a program that does not runs
 * dflash.c's loop, with no switch in either file. The speed builds link it:
 * ./dflash with the trainers in it, its float and double twins, its pitfall,
 * replay and variant programs, the tests, the sanitized builds (Makefile:
 * DFLASH_SRC, TEST_LIB). The -debug builds do not (DEBUG_SRC), so in gdb
 * `break matmul` stops in one place, dflash.c's loop; nor do the small
 * tools that link dflash.c for its helpers, nor examples/hook_harness (a
 * port's harness links dflash.c alone, TRACE.md). Only this file uses
 * GCC's vector-friendly loops and target_clones; no intrinsics, no fast-math
 * (-ffp-contract=off, as everywhere). Why 16 sums and why this shape of
 * kernel: NOTES.md, "matmul and losslessness".
 */
#include "dflash.h"

#include <stddef.h>

#define KERNEL_SUMS 16   /* dflash.c's KSUMS: the partial sums of one dot product */

#if defined(__GNUC__) && !defined(__clang__)
#define KERNEL_UNROLL _Pragma("GCC unroll 16")
#else
#define KERNEL_UNROLL
#endif

#if defined(__GNUC__)
#define KERNEL_INLINE inline __attribute__((always_inline))
#else
#define KERNEL_INLINE inline
#endif

/* p[0] + ... + p[15] as dflash.c's sum_partials adds them: a pairwise tree,
 * (p0+p8)+(p4+p12)... in 4 rounds */
static KERNEL_INLINE real kernel_sum_partials(real *p) {
    KERNEL_UNROLL for (int half = KERNEL_SUMS / 2; half >= 1; half /= 2)
        KERNEL_UNROLL for (int j = 0; j < half; j++) p[j] += p[j + half];
    return p[0];
}

/* The kernel computes the same sums four rows of W at a time: kernel_tile
 * holds the 4 x 16 partial sums of one token's x . W[o0..o0+3] and reads each
 * weight once; matmul takes every token in turn against those 4 rows (from
 * memory for the first token, from the L1 cache for the rest). */
#define TILE_R 4

/* out[t][o0 + r] = x[t] . W[o0 + r] for r < nr (nr <= TILE_R, a constant
 * once inlined, so the compiler unrolls the r and j loops and keeps acc in
 * registers) */
static KERNEL_INLINE void kernel_tile(real *out, const real *x, const real *w, int n_in, int n_out,
                                      int t, int o0, int nr) {
    real acc[TILE_R][KERNEL_SUMS];
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < KERNEL_SUMS; j++) acc[r][j] = 0;
    int n_full = n_in - n_in % KERNEL_SUMS;   /* whole groups of 16 */
    for (int i = 0; i < n_full; i += KERNEL_SUMS)
        KERNEL_UNROLL for (int r = 0; r < nr; r++) {
            const real *x_ti = x + (size_t)t * n_in + i, *w_ri = w + (size_t)(o0 + r) * n_in + i;
            KERNEL_UNROLL for (int j = 0; j < KERNEL_SUMS; j++) acc[r][j] += w_ri[j] * x_ti[j];
        }
    for (int i = n_full; i < n_in; i++)   /* the last, shorter group: only the first partials */
        for (int r = 0; r < nr; r++) acc[r][i - n_full] += w[(size_t)(o0 + r) * n_in + i] * x[(size_t)t * n_in + i];
    for (int r = 0; r < nr; r++) out[(size_t)t * n_out + o0 + r] = kernel_sum_partials(acc[r]);
}

/* Function multi-versioning (GCC, x86-64 glibc; clang 14 exports no `matmul`
 * for train/train.c then): one clone per instruction set, the same IEEE
 * operations in the same order, so the same bits. DFLASH_NO_CLONES (the
 * Makefile's -debug modes, which do not link this file anyway) turns it off. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) && !defined(__clang__) && \
    !defined(DFLASH_NO_CLONES)
#if __has_attribute(target_clones)
#define KERNEL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef KERNEL_CLONES
#define KERNEL_CLONES
#endif

/* A hint to start reading the next tile's 4 rows from memory while this
 * tile computes (a tile's rows are short streams the hardware prefetcher
 * finds late); it changes no value. */
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* matmul: out (T, n_out) = x (T, n_in) @ W^T, dflash.c's matmul's bits */
KERNEL_CLONES
void matmul(real *out, const real *x, const real *w, int T, int n_in, int n_out) {
    int o = 0;
    for (; o + TILE_R <= n_out; o += TILE_R) {
        if (o + 2 * TILE_R <= n_out) {   /* rows o+4 .. o+7, one cache line of 64 bytes at a time */
            const char *next = (const char *)(w + (size_t)(o + TILE_R) * n_in);
            for (size_t b = 0; b < (size_t)TILE_R * n_in * sizeof(real); b += 64) PREFETCH(next + b);
        }
        for (int t = 0; t < T; t++) kernel_tile(out, x, w, n_in, n_out, t, o, TILE_R);
    }
    for (; o < n_out; o++)   /* the last n_out % 4 rows, one at a time */
        for (int t = 0; t < T; t++) kernel_tile(out, x, w, n_in, n_out, t, o, 1);
}

/* ===========================================================================
 * The work outside the matmuls: attention, RMSNorm, RoPE
 *
 * The same bits as dflash.c's loops, wired the same way (dflash.c declares
 * attention, rmsnorm_rows and apply_rotary_pos_emb weak; these strong
 * definitions replace them where this file is linked; tests/test_kernel_ops.c
 * compares each pair with memcmp). Every floating-point operation is the one
 * dflash.c does, on the same operands, in the same order; what changes is
 * which independent operations run side by side:
 *   - attention: query t's output o_t[i] = sum over keys s of a[s] * v_s[i]
 *     adds in increasing s for every i, as dflash.c's loop does, but 32
 *     dimensions i at a time in registers instead of reloading o_t[i] from
 *     memory for each s (that loop was 3/4 of the work outside the matmuls);
 *     the scores are dflash.c's dot, four keys at a time; the mask is three
 *     plain loops.
 *   - rmsnorm_rows: each row's sum of squares is one running sum in
 *     increasing i (a chain of dependent adds); eight rows' chains run
 *     side by side (q_norm and k_norm have T * H rows of d).
 *   - apply_rotary_pos_emb: the same products and sums per dimension, a
 *     chunk of dimensions at a time.
 * The softmax's max and sum stay one running loop each, and its exp is
 * dflash.c's exp_real's (libm's expf): another exp gives other bits.
 * ======================================================================== */
#include <math.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#define OPS_UNROLL _Pragma("GCC unroll 16")
#else
#define OPS_UNROLL
#endif
#if defined(__GNUC__)
#define OPS_INLINE inline __attribute__((always_inline))
#else
#define OPS_INLINE inline
#endif
/* one clone per instruction set, as matmul's (same IEEE operations, same order) */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) && !defined(__clang__) && \
    !defined(DFLASH_NO_CLONES)
#if __has_attribute(target_clones)
#define OPS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef OPS_CLONES
#define OPS_CLONES
#endif

/* dflash.c's attention (static there but for `weak`; its comment says what it computes) */
int attention(real *out, real *scores, real *att, const real *q, const real *key, const real *value,
              int T, int S, int cap, int n_heads, int n_kv_heads, int head_dim,
              int causal, int q_pos0, int window);

#define OPS_KEYS 4   /* keys scored together, sharing the query's loads */

/* sc[j] = dot(q, k_j, n) * scale for the nk keys k_j = k + j * n (nk <= OPS_KEYS,
 * a constant once inlined): dflash.c's dot for each, 8 partial sums (i mod 8)
 * added pairwise, then the rest of the row in order */
static OPS_INLINE void ops_scores(real *sc, const real *q, const real *k, int n, real scale, int nk) {
    real part[OPS_KEYS][8];
    OPS_UNROLL for (int j = 0; j < nk; j++)
        OPS_UNROLL for (int l = 0; l < 8; l++) part[j][l] = 0;
    int n8 = n - n % 8;
    for (int i = 0; i < n8; i += 8)
        OPS_UNROLL for (int j = 0; j < nk; j++)
            OPS_UNROLL for (int l = 0; l < 8; l++) part[j][l] += q[i + l] * k[(size_t)j * n + i + l];
    for (int j = 0; j < nk; j++) {
        real *p = part[j];
        real sum = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
        for (int i = n8; i < n; i++) sum += q[i] * k[(size_t)j * n + i];
        sc[j] = sum * scale;
    }
}

/* dflash.c's exp_real, here where it can be inlined: libm's expf for float, exp for double */
static OPS_INLINE real ops_exp(real x) {
#ifdef DFLASH_DOUBLE
    return exp(x);
#else
    return expf(x);
#endif
}

/* dflash.c's softmax over n values in place, the same three loops */
static OPS_INLINE int ops_softmax(real *x, int n) {
    real mx = x[0];
    for (int i = 1; i < n; i++) if (x[i] > mx) mx = x[i];
    real sum = 0;
    for (int i = 0; i < n; i++) { x[i] = ops_exp(x[i] - mx); sum += x[i]; }
    for (int i = 0; i < n; i++) x[i] = x[i] / sum;
    return isfinite(sum) ? 0 : -1;
}

#define OPS_DIMS 32   /* output dimensions of one query kept in registers */

/* o[i0 .. i0+nd) = sum over s in [lo, hi) of a[s] * v[s][i], each i from 0
 * in increasing s (dflash.c: o_t[i] = 0, then o_t[i] += a[s] * v[s][i]) */
static OPS_INLINE void ops_weighted_values(real *o, const real *a, const real *v, int head_dim, int lo, int hi,
                                           int i0, int nd) {
    real acc[OPS_DIMS];
    OPS_UNROLL for (int l = 0; l < OPS_DIMS; l++) acc[l] = 0;
    for (int s = lo; s < hi; s++) {
        const real *v_s = v + (size_t)s * head_dim + i0;
        real w = a[s];
        OPS_UNROLL for (int l = 0; l < nd; l++) acc[l] += w * v_s[l];
    }
    for (int l = 0; l < nd; l++) o[i0 + l] = acc[l];
}

OPS_CLONES
int attention(real *out, real *scores, real *att, const real *q, const real *key, const real *value,
              int T, int S, int cap, int n_heads, int n_kv_heads, int head_dim,
              int causal, int q_pos0, int window) {
    real scale = (real)(1.0 / sqrt((double)head_dim));  /* head_dim ** -0.5 */
    int group = n_heads / n_kv_heads, bad = 0;
    for (int h = 0; h < n_heads; h++) {
        int kvh = h / group;
        const real *k_h = key + (size_t)kvh * cap * head_dim;    /* (S, d) */
        const real *v_h = value + (size_t)kvh * cap * head_dim;  /* (S, d) */
        for (int t = 0; t < T; t++) {
            const real *q_t = q + (size_t)t * n_heads * head_dim + (size_t)h * head_dim;
            real *sc = scores + ((size_t)h * T + t) * S;         /* (S) */
            real *a = att + ((size_t)h * T + t) * S;             /* (S) */
            int p = q_pos0 + t, lo = 0, hi = causal ? p + 1 : S;
            if (window > 0 && lo < p - window + 1) lo = p - window + 1;
            if (window > 0 && hi > p + window) hi = p + window;
            int s = 0;
            for (; s + OPS_KEYS <= S; s += OPS_KEYS) ops_scores(sc + s, q_t, k_h + (size_t)s * head_dim, head_dim, scale, OPS_KEYS);
            for (; s < S; s++) ops_scores(sc + s, q_t, k_h + (size_t)s * head_dim, head_dim, scale, 1);
            for (int s = 0; s < lo; s++) a[s] = 0;   /* 0 <= lo <= p < hi <= S */
            for (int s = lo; s < hi; s++) a[s] = sc[s];
            for (int s = hi; s < S; s++) a[s] = 0;
            bad |= ops_softmax(a + lo, hi - lo);
            real *o_t = out + (size_t)t * n_heads * head_dim + (size_t)h * head_dim;
            int i0 = 0;
            for (; i0 + OPS_DIMS <= head_dim; i0 += OPS_DIMS) ops_weighted_values(o_t, a, v_h, head_dim, lo, hi, i0, OPS_DIMS);
            for (; i0 < head_dim; i0++) ops_weighted_values(o_t, a, v_h, head_dim, lo, hi, i0, 1);
        }
    }
    return bad;
}

/* dflash.c's rmsnorm for nr rows (nr <= OPS_ROWS, a constant once inlined):
 * each row's sum of squares in increasing i, the rows' chains side by side;
 * then each row as dflash.c's rmsnorm: -1 and the row left unwritten when
 * its sum is not finite, else out = w * (x * inv). Rows are written after
 * all nr rows are read: out is x itself (in place) or apart from it, as
 * dflash.c's callers use it. */
#define OPS_ROWS 8

static OPS_INLINE int ops_rmsnorm_group(real *out, const real *x, const real *w, int n, real eps, int nr) {
    real ss[OPS_ROWS];
    OPS_UNROLL for (int r = 0; r < nr; r++) ss[r] = 0;
    for (int i = 0; i < n; i++)
        OPS_UNROLL for (int r = 0; r < nr; r++) ss[r] += x[(size_t)r * n + i] * x[(size_t)r * n + i];
    int bad = 0;
    for (int r = 0; r < nr; r++) {
        if (!isfinite(ss[r])) { bad = -1; continue; }
        real var = ss[r] / (real)n;
        real inv = (real)1 / (real)sqrt((double)(var + eps));
        const real *x_r = x + (size_t)r * n;
        real *out_r = out + (size_t)r * n;
        for (int i = 0; i < n; i++) out_r[i] = w[i] * (x_r[i] * inv);
    }
    return bad;
}

OPS_CLONES
int rmsnorm_rows(real *out, const real *x, const real *w, int rows, int n, real eps) {
    int bad = 0, row = 0;
    for (; row + OPS_ROWS <= rows; row += OPS_ROWS)
        bad |= ops_rmsnorm_group(out + (size_t)row * n, x + (size_t)row * n, w, n, eps, OPS_ROWS);
    for (; row < rows; row++) bad |= ops_rmsnorm_group(out + (size_t)row * n, x + (size_t)row * n, w, n, eps, 1);
    return bad;
}

/* dflash.c's rope_apply: out = x * cos + rotate_half(x) * sin, dimensions
 * i and i + d/2 together, OPS_DIMS of them at a time */
static OPS_INLINE void ops_rope(real *out, const real *x, const real *cos_, const real *sin_, int head_dim) {
    int half = head_dim / 2, i = 0;
    for (; i + OPS_DIMS <= half; i += OPS_DIMS) {
        real lo[OPS_DIMS], hi[OPS_DIMS];
        OPS_UNROLL for (int l = 0; l < OPS_DIMS; l++) {
            real x1 = x[i + l], x2 = x[i + l + half];
            lo[l] = x1 * cos_[i + l] + (-x2) * sin_[i + l];
            hi[l] = x2 * cos_[i + l + half] + x1 * sin_[i + l + half];
        }
        OPS_UNROLL for (int l = 0; l < OPS_DIMS; l++) { out[i + l] = lo[l]; out[i + l + half] = hi[l]; }
    }
    for (; i < half; i++) {
        real x1 = x[i], x2 = x[i + half];
        out[i] = x1 * cos_[i] + (-x2) * sin_[i];
        out[i + half] = x2 * cos_[i + half] + x1 * sin_[i + half];
    }
}

/* dflash.c's apply_rotary_pos_emb (its comment says which rows rotate by which) */
OPS_CLONES
void apply_rotary_pos_emb(real *q_rope, real *k_rope, const real *q, const real *k,
                          const real *cos_, const real *sin_, int q_len, int k_len,
                          int n_heads, int n_kv_heads, int head_dim) {
    int q_row0 = k_len - q_len;
    for (int t = 0; t < q_len; t++)
        for (int h = 0; h < n_heads; h++)
            ops_rope(q_rope + ((size_t)t * n_heads + h) * head_dim, q + ((size_t)t * n_heads + h) * head_dim,
                     cos_ + (size_t)(q_row0 + t) * head_dim, sin_ + (size_t)(q_row0 + t) * head_dim, head_dim);
    for (int p = 0; p < k_len; p++)
        for (int h = 0; h < n_kv_heads; h++)
            ops_rope(k_rope + ((size_t)p * n_kv_heads + h) * head_dim, k + ((size_t)p * n_kv_heads + h) * head_dim,
                     cos_ + (size_t)p * head_dim, sin_ + (size_t)p * head_dim, head_dim);
}
