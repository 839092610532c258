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
