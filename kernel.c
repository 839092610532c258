/* kernel.c - the fast matmul: the same bits as dflash.c's, faster.
 *
 * dflash.c's matmul is the naive loop that defines the summation order: each
 * dot product keeps KSUMS = 16 partial sums, partial j adding the products of
 * i = j, j+16, j+32, ... in increasing i, then the 16 partials added pairwise
 * (sum_partials: p[j] += p[j+8], then +4, +2, +1). This file computes exactly
 * those sums in exactly that order, so every result is the same bits
 * (tests/test_kernel.c compares the two with memcmp for T = 1..16, odd
 * shapes, packed and BF16 weights, 1..3 threads, every instruction set this
 * machine has, at -O2 and -O0).
 *
 * How it does it:
 *   - The 16 partial sums of one dot product are one GCC vector of 16 reals
 *     (lane j = partial j): `acc += w * x` on vectors is partial j += w[i] *
 *     x[i] for the 16 lanes at once, the same IEEE operations.
 *   - A tile of R rows of W by TT tokens keeps its R x TT vectors in
 *     registers and reads each weight once per TT tokens, each x once per R
 *     rows. The tile fits the instruction set's registers: AVX-512 (32 zmm)
 *     4 x 6 in float (24 accumulators, 4 weights, an x), 4 x 2 in double;
 *     AVX2 (16 ymm) 2 x 3 in float, 2 x 1 in double, each vector there as
 *     32-byte parts (tile_parts: under AVX2 GCC kept a 64-byte vector on the
 *     stack); the default (SSE2) 2 x 1 and 1 x 1. T tokens run as one tile
 *     up to 6 (AVX-512, float), more as the fewest tiles of at most 5, of
 *     sizes one apart at most (T = 8 as 4 + 4, not 5 + 3; T = 11 as 4 + 4 +
 *     3, not 5 + 5 + 1: a one-token tile widens each weight for one
 *     multiply). One function per instruction set (target attributes),
 *     chosen once at the first call.
 *   - The R x TT dot products of a tile are finished together: a butterfly of
 *     shuffles adds the halves of pairs of vectors (lanes j and j+8, then
 *     j+4, ...: sum_partials' tree, the lower lane first as there), four
 *     rounds, and dot n ends in lane bitreverse(n) of one vector. A last,
 *     shorter group of columns is added with a lane mask, so the
 *     accumulators never leave the registers (a tile's fixed cost was a
 *     fifth of a 512-wide tile's time when they did).
 *   - Packed weights (opt-in, read-only weights only): kernel_pack_weights(m)
 *     registers a loaded model's matrices; at its first use each becomes one
 *     contiguous stream per 4-row tile (16 columns of row 0, of row 1, of
 *     row 2, of row 3, then the next 16 columns; zero-padded to whole
 *     tiles), so a tile reads one stream; from T = 2 the tile prefetches
 *     that stream PREFETCH_AHEAD bytes ahead into L2 as it goes (the
 *     hardware's prefetch alone left a 4-token forward waiting on memory).
 *     A matrix whose every value is a BF16 number (the low 16 bits of its
 *     floats zero: a BF16 file, widened on load) is packed as those upper 16
 *     bits and widened again in registers (exact): half the bytes read. Its
 *     rows go in pairs, a 32-bit word holding column i of row 2k in its low
 *     half and of row 2k + 1 in its high half, so one load and one integer
 *     operation (u << 16, or u & 0xffff0000) widen 16 weights (a u16 load
 *     widened took six operations, on the pipes the multiplies use).
 *     Memory: a packed copy costs 4 bytes per weight (2 for BF16) on top of
 *     the loaded weights, which dflash.c keeps (kernel_packed_bytes() says
 *     how much). Weights that change (the trainers update theirs in place)
 *     must not be packed: nothing packs unless asked, the trainers do not
 *     ask, and kernel_unpack_weights(m) must be called before the model is
 *     freed or written. (A few sampled values are checked at every use, so
 *     a freed and reloaded model is caught; that is a guard, not a proof.)
 *   - Threads (off by default): kernel_set_threads(n) splits the output rows
 *     of a large enough matmul over n threads in contiguous ranges of whole
 *     4-row tiles; every output is the same operations in the same order, so
 *     the bits do not depend on n. A small pool, started at the first use.
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
 * port's harness links dflash.c alone, TRACE.md). Only this file uses GCC
 * vector extensions and target attributes; no intrinsics, no fast-math
 * (-ffp-contract=off, as everywhere: no FMA). Why 16 sums: NOTES.md,
 * "matmul and losslessness".
 */
#include "dflash.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KERNEL_SUMS 16   /* dflash.c's KSUMS: the partial sums of one dot product */
#define PACK_R 4         /* rows of W per packed tile */

#if defined(__GNUC__) && !defined(__clang__)
#define KERNEL_UNROLL _Pragma("GCC unroll 16")
#else
#define KERNEL_UNROLL
#endif
#define KERNEL_INLINE inline __attribute__((always_inline))

/* ---- the vectors: 16 reals, lane j = partial sum j ----------------------- */
typedef real vreal __attribute__((vector_size(KERNEL_SUMS * sizeof(real))));
typedef uint16_t vu16 __attribute__((vector_size(KERNEL_SUMS * 2)));
typedef uint32_t vu32 __attribute__((vector_size(KERNEL_SUMS * 4)));
typedef float vf32 __attribute__((vector_size(KERNEL_SUMS * 4)));
#ifdef DFLASH_DOUBLE
typedef int64_t vmask __attribute__((vector_size(KERNEL_SUMS * sizeof(real))));   /* a lane of vreal as bits */
#else
typedef int32_t vmask __attribute__((vector_size(KERNEL_SUMS * sizeof(real))));
#endif

/* (the vectors go out through pointers: no vector is returned, so no
 * calling convention of vectors is involved, only inlined loads) */
static KERNEL_INLINE void load_real(vreal *v, const real *p) {
    memcpy(v, p, sizeof *v);   /* an unaligned vector load */
}

/* 16 BF16 numbers widened (exact: a BF16 number is the upper half of a
 * float). Packed BF16 weights hold two per 32-bit word (the same column of
 * two rows, pack_entry's layout below): half 0, the words' low halves,
 * moved up (u << 16); half 1, their high halves, in place (u & 0xffff0000).
 * One load and one integer operation per 16 weights. */
static KERNEL_INLINE void load_bf16_half(vreal *v, const uint32_t *p, int half) {
    vu32 u;
    memcpy(&u, p, sizeof u);
    u = half ? (u & 0xffff0000u) : (u << 16);
    vf32 f;
    memcpy(&f, &u, sizeof f);
#ifdef DFLASH_DOUBLE
    *v = __builtin_convertvector(f, vreal);
#else
    *v = f;
#endif
}

static KERNEL_INLINE real widen_bf16_half(uint32_t u, int half) {
    u = half ? (u & 0xffff0000u) : (u << 16);
    float f;
    memcpy(&f, &u, sizeof f);
    return (real)f;
}

/* ---- finishing 16 dot products at once: sum_partials' tree ---------------
 * One round with half h: every vector holds dot products in segments of 2h
 * lanes; a pair (a, b) becomes one vector of segments of h lanes, segment k
 * of a then of b, each lane the sum of lane j (first) and lane j + h of its
 * dot product's segment: p[j] += p[j + h]. After the rounds h = 8, 4, 2, 1
 * the dot product n of 16 vectors is in lane bitreverse(n) of one. A vector
 * without a partner is paired with itself (its lanes are then doubled). */
#define SHUF __builtin_shufflevector
#define round8(a, b) ( \
    SHUF(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) + \
    SHUF(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
#define round4(a, b) ( \
    SHUF(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) + \
    SHUF(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31))
#define round2(a, b) ( \
    SHUF(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) + \
    SHUF(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31))
#define round1(a, b) ( \
    SHUF(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) + \
    SHUF(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31))

/* the n <= 16 vectors of acc finished: dot k in lane bitreverse(k) of acc[0] */
static KERNEL_INLINE void finish_dots(vreal *acc, int n) {
    int m = (n + 1) / 2;
    KERNEL_UNROLL for (int k = 0; k < m; k++) acc[k] = round8(acc[2 * k], acc[2 * k + 1 < n ? 2 * k + 1 : 2 * k]);
    n = m, m = (n + 1) / 2;
    KERNEL_UNROLL for (int k = 0; k < m; k++) acc[k] = round4(acc[2 * k], acc[2 * k + 1 < n ? 2 * k + 1 : 2 * k]);
    n = m, m = (n + 1) / 2;
    KERNEL_UNROLL for (int k = 0; k < m; k++) acc[k] = round2(acc[2 * k], acc[2 * k + 1 < n ? 2 * k + 1 : 2 * k]);
    n = m;
    acc[0] = round1(acc[0], acc[n > 1 ? 1 : 0]);
}

static KERNEL_INLINE int bitreverse4(int k) {
    return ((k & 1) << 3) | ((k & 2) << 1) | ((k & 4) >> 1) | ((k & 8) >> 3);
}

#if defined(__GNUC__)
#define PREFETCH_L2(p) __builtin_prefetch((p), 0, 2)
#else
#define PREFETCH_L2(p) ((void)(p))
#endif
#define PREFETCH_AHEAD 32768   /* bytes: how far ahead in a packed stream a multi-token tile prefetches */

/* ---- one tile: out[t0 + tt][o0 + r] for r < nr <= R, tt < TT -------------
 * Row r of the tile, columns 16g .. 16g + 15, are 16 weights: unpacked, at
 * w0 + r * rs + g * gs (rs = n_in, gs = 16); packed, at w0 + r * rs + g *
 * gs (rs = 16, gs = 64); packed BF16 (bf), with q = h0 + r (h0: the parity
 * of the tile's first row), half q % 2 of the 16 words at w0 + (q / 2) * rs
 * + g * gs (rs = 16, gs = 32). A last, shorter group of columns (n_in not a
 * multiple of 16) reaches the first partials only, as in dflash.c. R, TT
 * and bf are constants once inlined (h0 too when R is even): the loops
 * unroll, acc stays in registers. pf: the bytes of the packed copy from w0
 * on, whose stream the tile prefetches PREFETCH_AHEAD bytes ahead within
 * them (gs elements of esz bytes a group; 0: no prefetch). The weights are
 * read by `passes` tiles in turn (T tokens in several tiles), this one the
 * pass-th: each prefetches 1/passes of the stream, so the memory is kept
 * busy through every pass, not only the first (the others read the
 * weights from cache). */
#define TILE_ACC 24   /* the largest R x TT (AVX-512, float: 4 x 6) */

/* group g's share of the prefetch: the pass-th of `passes` tiles reading
 * the stream (G groups of gb bytes) fetches 1/passes of a group, the part
 * PREFETCH_AHEAD bytes ahead of where the passes together have read, within
 * the pf bytes of the packed copy */
static KERNEL_INLINE void prefetch_group(const void *w0, size_t gb, int G, int g, size_t pf, int pass, int passes) {
    size_t span = gb / (size_t)passes, ahead = ((size_t)pass * G + g) * span + PREFETCH_AHEAD;
    for (size_t b = 0; b < span && ahead + b < pf; b += 64) PREFETCH_L2((const char *)w0 + ahead + b);
}

/* the weight of tile row r at column 16 G + j, in the last, shorter group
 * (j < n_in % 16), in tile's layouts */
static KERNEL_INLINE real tail_weight(const void *w0, size_t rs, size_t gs, int bf, int h0, int G, int r, int j) {
    size_t c = (size_t)G * gs + (size_t)j;
    return bf ? widen_bf16_half(((const uint32_t *)w0)[(size_t)((h0 + r) / 2) * rs + c], (h0 + r) % 2)
              : ((const real *)w0)[(size_t)r * rs + c];
}

/* one group of 16 columns: each row's weights widened once, then every token */
static KERNEL_INLINE void tile_group(vreal *acc, const real *xg, const void *wg, size_t rs, int bf, int h0, int n_in,
                                     int R, int TT) {
    vreal wv[PACK_R];
    KERNEL_UNROLL for (int r = 0; r < R; r++) {
        if (bf) load_bf16_half(&wv[r], (const uint32_t *)wg + (size_t)((h0 + r) / 2) * rs, (h0 + r) % 2);
        else load_real(&wv[r], (const real *)wg + r * rs);
    }
    KERNEL_UNROLL for (int tt = 0; tt < TT; tt++) {
        vreal xv;
        load_real(&xv, xg + (size_t)tt * n_in);
        KERNEL_UNROLL for (int r = 0; r < R; r++) acc[r * TT + tt] += wv[r] * xv;
    }
}

static KERNEL_INLINE void tile(real *out, const real *x, const void *w0, size_t rs, size_t gs, int bf, int h0,
                               int n_in, int n_out, int t0, int o0, int R, int TT, int nr, size_t pf, int pass,
                               int passes) {
    vreal acc[TILE_ACC];
    KERNEL_UNROLL for (int k = 0; k < R * TT; k++) acc[k] = (vreal){0};
    const real *xt = x + (size_t)t0 * n_in;
    size_t esz = bf ? sizeof(uint32_t) : sizeof(real);
    int G = n_in / KERNEL_SUMS, rem = n_in % KERNEL_SUMS;
    for (int g = 0; g < G; g++) {
        const char *wg = (const char *)w0 + (size_t)g * gs * esz;
        if (pf) prefetch_group(w0, gs * esz, G, g, pf, pass, passes);
        tile_group(acc, xt + (size_t)g * KERNEL_SUMS, wg, rs, bf, h0, n_in, R, TT);
    }
    if (rem) {   /* the last, shorter group: lanes j < rem take w[j] * x[j], the others stay as they are */
        vmask lane, keep;
        for (int j = 0; j < KERNEL_SUMS; j++) lane[j] = j;
        keep = lane >= rem;
        vreal wv[PACK_R];
        KERNEL_UNROLL for (int r = 0; r < R; r++) {
            real wr[KERNEL_SUMS] = {0};
            for (int j = 0; j < rem; j++) wr[j] = tail_weight(w0, rs, gs, bf, h0, G, r, j);
            memcpy(&wv[r], wr, sizeof wr);
        }
        KERNEL_UNROLL for (int tt = 0; tt < TT; tt++) {
            real xr[KERNEL_SUMS] = {0};
            memcpy(xr, xt + (size_t)tt * n_in + (size_t)G * KERNEL_SUMS, sizeof(real) * (size_t)rem);
            vreal xv;
            memcpy(&xv, xr, sizeof xv);
            KERNEL_UNROLL for (int r = 0; r < R; r++) {
                vreal sum = acc[r * TT + tt] + wv[r] * xv;
                vmask a, b;
                memcpy(&a, &acc[r * TT + tt], sizeof a);
                memcpy(&b, &sum, sizeof b);
                a = (a & keep) | (b & ~keep);
                memcpy(&acc[r * TT + tt], &a, sizeof a);
            }
        }
    }
    KERNEL_UNROLL for (int k0 = 0; k0 < R * TT; k0 += KERNEL_SUMS) {   /* 16 dot products at a time */
        int n = R * TT - k0 < KERNEL_SUMS ? R * TT - k0 : KERNEL_SUMS;
        finish_dots(acc + k0, n);
        real dots[KERNEL_SUMS];
        memcpy(dots, &acc[k0], sizeof dots);
        KERNEL_UNROLL for (int k = 0; k < n; k++) {
            int r = (k0 + k) / TT, tt = (k0 + k) % TT;
            if (r < nr) out[(size_t)(t0 + tt) * n_out + o0 + r] = dots[bitreverse4(k)];
        }
    }
}

/* ---- the same tile with each 16-lane vector as ymm-sized parts ------------
 * Under target("avx2") GCC keeps a 64-byte vector in memory (the machine's
 * vectors are 32 bytes), so every `acc += w * x` went through the stack. Here
 * each vector of 16 partial sums is KERNEL_PARTS vectors of KERNEL_LANES
 * reals (float: 2 x 8, double: 4 x 4), part p holding partials p * LANES ..
 * p * LANES + LANES - 1: the same multiply and add on the same lanes, so the
 * same bits, in registers. The finish is sum_partials' tree again: its
 * rounds with h >= LANES add whole parts (part p += part p + h / LANES, the
 * lower first; for float round 8 is part 0 + part 1), the rest is the
 * butterfly above on vectors of LANES lanes (dot n in lane bitreverse(n) of
 * log2(LANES) bits). */
#define KERNEL_LANES (32 / (int)sizeof(real))
#define KERNEL_PARTS (KERNEL_SUMS / KERNEL_LANES)
typedef real vpart __attribute__((vector_size(32)));
typedef uint32_t vpu32 __attribute__((vector_size(KERNEL_LANES * 4)));
typedef float vpf32 __attribute__((vector_size(KERNEL_LANES * 4)));
#ifdef DFLASH_DOUBLE
typedef int64_t vpmask __attribute__((vector_size(32)));
#define pround2(a, b) (SHUF(a, b, 0, 1, 4, 5) + SHUF(a, b, 2, 3, 6, 7))
#define pround1(a, b) (SHUF(a, b, 0, 4, 2, 6) + SHUF(a, b, 1, 5, 3, 7))
#else
typedef int32_t vpmask __attribute__((vector_size(32)));
#define pround4(a, b) (SHUF(a, b, 0, 1, 2, 3, 8, 9, 10, 11) + SHUF(a, b, 4, 5, 6, 7, 12, 13, 14, 15))
#define pround2(a, b) (SHUF(a, b, 0, 1, 8, 9, 4, 5, 12, 13) + SHUF(a, b, 2, 3, 10, 11, 6, 7, 14, 15))
#define pround1(a, b) (SHUF(a, b, 0, 8, 2, 10, 4, 12, 6, 14) + SHUF(a, b, 1, 9, 3, 11, 5, 13, 7, 15))
#endif

/* KERNEL_LANES BF16 weights widened, as load_bf16_half widens 16 (p: the part's first word) */
static KERNEL_INLINE void load_bf16_part(vpart *v, const uint32_t *p, int half) {
    vpu32 u;
    memcpy(&u, p, sizeof u);
    u = half ? (u & 0xffff0000u) : (u << 16);
    vpf32 f;
    memcpy(&f, &u, sizeof f);
#ifdef DFLASH_DOUBLE   /* 4 lanes; lane by lane, as __builtin_convertvector went through the stack here */
    *v = (vpart){f[0], f[1], f[2], f[3]};
#else
    *v = f;
#endif
}

/* the n <= KERNEL_LANES dot products of acc, one vector each, finished: dot
 * k in lane bitreverse(k) of acc[0] (finish_dots' rounds below h = LANES) */
static KERNEL_INLINE void finish_parts(vpart *acc, int n) {
    int m;
#ifndef DFLASH_DOUBLE
    m = (n + 1) / 2;
    KERNEL_UNROLL for (int k = 0; k < m; k++) acc[k] = pround4(acc[2 * k], acc[2 * k + 1 < n ? 2 * k + 1 : 2 * k]);
    n = m;
#endif
    m = (n + 1) / 2;
    KERNEL_UNROLL for (int k = 0; k < m; k++) acc[k] = pround2(acc[2 * k], acc[2 * k + 1 < n ? 2 * k + 1 : 2 * k]);
    n = m;
    acc[0] = pround1(acc[0], acc[n > 1 ? 1 : 0]);
}

static KERNEL_INLINE int bitreverse_lanes(int k) {
#ifdef DFLASH_DOUBLE
    return ((k & 1) << 1) | ((k & 2) >> 1);
#else
    return ((k & 1) << 2) | (k & 2) | ((k & 4) >> 2);
#endif
}

/* tile's arguments and meaning; one part of the 16 columns at a time, so a
 * group holds R x TT x PARTS accumulators, R weights and an x. R x TT <=
 * PARTS_ACC (a larger array, even unused, left GCC's double build keeping
 * it on the stack) */
#define PARTS_ACC 6   /* the largest R x TT (AVX2, float: 2 x 3) */
static KERNEL_INLINE void tile_parts(real *out, const real *x, const void *w0, size_t rs, size_t gs, int bf, int h0,
                                     int n_in, int n_out, int t0, int o0, int R, int TT, int nr, size_t pf, int pass,
                                     int passes) {
    vpart acc[PARTS_ACC][KERNEL_PARTS];
    KERNEL_UNROLL for (int k = 0; k < R * TT; k++)
        KERNEL_UNROLL for (int p = 0; p < KERNEL_PARTS; p++) acc[k][p] = (vpart){0};
    const real *xt = x + (size_t)t0 * n_in;
    size_t esz = bf ? sizeof(uint32_t) : sizeof(real);
    int G = n_in / KERNEL_SUMS, rem = n_in % KERNEL_SUMS;
    for (int g = 0; g < G; g++) {
        const char *wg = (const char *)w0 + (size_t)g * gs * esz;
        if (pf) prefetch_group(w0, gs * esz, G, g, pf, pass, passes);
        const real *xg = xt + (size_t)g * KERNEL_SUMS;
        KERNEL_UNROLL for (int p = 0; p < KERNEL_PARTS; p++) {
            vpart wv[PACK_R];
            KERNEL_UNROLL for (int r = 0; r < R; r++) {
                if (bf) load_bf16_part(&wv[r], (const uint32_t *)wg + (size_t)((h0 + r) / 2) * rs + p * KERNEL_LANES,
                                       (h0 + r) % 2);
                else memcpy(&wv[r], (const real *)wg + r * rs + p * KERNEL_LANES, sizeof wv[r]);
            }
            KERNEL_UNROLL for (int tt = 0; tt < TT; tt++) {
                vpart xv;
                memcpy(&xv, xg + (size_t)tt * n_in + p * KERNEL_LANES, sizeof xv);
                KERNEL_UNROLL for (int r = 0; r < R; r++) acc[r * TT + tt][p] += wv[r] * xv;
            }
        }
    }
    if (rem) {   /* the last, shorter group: lanes j < rem take w[j] * x[j], the others stay as they are */
        KERNEL_UNROLL for (int p = 0; p < KERNEL_PARTS; p++) {
            vpmask lane, keep;
            for (int j = 0; j < KERNEL_LANES; j++) lane[j] = p * KERNEL_LANES + j;
            keep = lane >= rem;
            vpart wv[PACK_R];
            KERNEL_UNROLL for (int r = 0; r < R; r++) {
                real wr[KERNEL_LANES] = {0};
                for (int j = 0; j < KERNEL_LANES && p * KERNEL_LANES + j < rem; j++)
                    wr[j] = tail_weight(w0, rs, gs, bf, h0, G, r, p * KERNEL_LANES + j);
                memcpy(&wv[r], wr, sizeof wr);
            }
            KERNEL_UNROLL for (int tt = 0; tt < TT; tt++) {
                real xr[KERNEL_LANES] = {0};
                const real *xs = xt + (size_t)tt * n_in + (size_t)G * KERNEL_SUMS + p * KERNEL_LANES;
                for (int j = 0; j < KERNEL_LANES && p * KERNEL_LANES + j < rem; j++) xr[j] = xs[j];
                vpart xv;
                memcpy(&xv, xr, sizeof xv);
                KERNEL_UNROLL for (int r = 0; r < R; r++) {
                    vpart sum = acc[r * TT + tt][p] + wv[r] * xv;
                    vpmask a, b;
                    memcpy(&a, &acc[r * TT + tt][p], sizeof a);
                    memcpy(&b, &sum, sizeof b);
                    a = (a & keep) | (b & ~keep);
                    memcpy(&acc[r * TT + tt][p], &a, sizeof a);
                }
            }
        }
    }
    /* sum_partials' first rounds: whole parts, p += p + np / 2, until one part */
    vpart dot[PARTS_ACC];
    KERNEL_UNROLL for (int k = 0; k < R * TT; k++) {
        KERNEL_UNROLL for (int np = KERNEL_PARTS; np > 1; np /= 2)
            KERNEL_UNROLL for (int p = 0; p < np / 2; p++) acc[k][p] = acc[k][p] + acc[k][p + np / 2];
        dot[k] = acc[k][0];
    }
    KERNEL_UNROLL for (int k0 = 0; k0 < R * TT; k0 += KERNEL_LANES) {   /* LANES dot products at a time */
        int n = R * TT - k0 < KERNEL_LANES ? R * TT - k0 : KERNEL_LANES;
        finish_parts(dot + k0, n);
        real dots[KERNEL_LANES];
        memcpy(dots, &dot[k0], sizeof dots);
        KERNEL_UNROLL for (int k = 0; k < n; k++) {
            int r = (k0 + k) / TT, tt = (k0 + k) % TT;
            if (r < nr) out[(size_t)(t0 + tt) * n_out + o0 + r] = dots[bitreverse_lanes(k)];
        }
    }
}

/* ---- a range of output rows, every token ---------------------------------- */
typedef struct {
    real *out;
    const real *x, *w;        /* w: the matrix as dflash.c passes it */
    const void *pk;           /* or its packed tiles (NULL: none) */
    size_t pk_bytes;          /* their size */
    int bf, T, n_in, n_out;
} MatJob;

/* the elements of one packed 4-row tile: reals, or for BF16 32-bit words (two rows' weights each) */
static size_t tile_elems(int n_in, int bf) {
    size_t groups = (size_t)(n_in + KERNEL_SUMS - 1) / KERNEL_SUMS;
    return groups * (bf ? PACK_R / 2 : PACK_R) * KERNEL_SUMS;
}

/* all the tokens against rows o .. o + nr - 1 (nr <= R): one tile when T
 * <= TT, else the fewest tiles of at most TTM <= TT tokens, of sizes one
 * apart at most (T = 8 with TTM = 5: 4 + 4), so no tile is left with a
 * token or two. PF: tile's pf. */
#define TILE_TT(TF, N, TT, W0, RS, GS, BF, H0, R, NR, PF)                                                    \
    if (TT >= N && nt == N) TF(j->out, j->x, W0, RS, GS, BF, H0, j->n_in, j->n_out, t0, o, R, (TT >= N ? N : 1), NR, \
                                 PF, passes - tiles, passes);
#define TOKENS(TF, R, TT, TTM, W0, RS, GS, BF, H0, NR, PF)                                                      \
    for (int t0 = 0, passes = j->T <= TT ? 1 : (j->T + TTM - 1) / TTM, tiles = passes; t0 < j->T; tiles--) {  \
        int nt = (j->T - t0 + tiles - 1) / tiles;                                                             \
        TILE_TT(TF, 6, TT, W0, RS, GS, BF, H0, R, NR, PF)                                                         \
        else TILE_TT(TF, 5, TT, W0, RS, GS, BF, H0, R, NR, PF)                                                    \
        else TILE_TT(TF, 4, TT, W0, RS, GS, BF, H0, R, NR, PF)                                                    \
        else TILE_TT(TF, 3, TT, W0, RS, GS, BF, H0, R, NR, PF)                                                    \
        else TILE_TT(TF, 2, TT, W0, RS, GS, BF, H0, R, NR, PF)                                                    \
        else TF(j->out, j->x, W0, RS, GS, BF, H0, j->n_in, j->n_out, t0, o, R, 1, NR, PF, passes - tiles, passes); \
        t0 += nt;                                                                                             \
    }

/* rows [o_lo, o_hi) of out (o_lo a multiple of PACK_R), an R x TT tile at a
 * time (R divides PACK_R), the tokens split as TOKENS says. */
#define ROWS_FUNCTION(NAME, ATTR, TF, R, TT, TTM)                                                               \
    ATTR static void NAME(const MatJob *j, int o_lo, int o_hi) {                                              \
        if (j->pk) {                                                                                          \
            size_t te = tile_elems(j->n_in, j->bf);                                                           \
            for (int o = o_lo; o < o_hi; o += R) {                                                            \
                int nr = o_hi - o < R ? o_hi - o : R;                                                         \
                size_t at = (size_t)(o / PACK_R) * te + (size_t)(o % PACK_R / (j->bf ? 2 : 1)) * KERNEL_SUMS;  \
                size_t esz = j->bf ? sizeof(uint32_t) : sizeof(real);                                         \
                /* the first R-row tile of each 4-row tile prefetches, from T = 2 */                          \
                size_t pf = j->T >= 2 && o % PACK_R == 0 ? j->pk_bytes - at * esz : 0;                        \
                if (j->bf) {   /* rows 2k and 2k + 1 share words */                                           \
                    const uint32_t *w0 = (const uint32_t *)j->pk + at;                                        \
                    TOKENS(TF, R, TT, TTM, w0, KERNEL_SUMS, PACK_R / 2 * KERNEL_SUMS, 1, (R % 2 ? o % 2 : 0), nr, pf)  \
                } else {                                                                                      \
                    const real *w0 = (const real *)j->pk + at;                                                \
                    TOKENS(TF, R, TT, TTM, w0, KERNEL_SUMS, PACK_R * KERNEL_SUMS, 0, 0, nr, pf)                        \
                }                                                                                             \
            }                                                                                                 \
            return;                                                                                           \
        }                                                                                                     \
        int o = o_lo;                                                                                         \
        for (; o + R <= o_hi; o += R) {                                                                       \
            const real *w0 = j->w + (size_t)o * j->n_in;                                                      \
            if (o + 2 * R <= o_hi) {   /* the next R rows, into L2 */                                         \
                const char *next = (const char *)(w0 + (size_t)R * j->n_in);                                  \
                for (size_t b = 0; b < (size_t)R * j->n_in * sizeof(real); b += 64) PREFETCH_L2(next + b);    \
            }                                                                                                 \
            TOKENS(TF, R, TT, TTM, w0, (size_t)j->n_in, KERNEL_SUMS, 0, 0, R, 0)                                       \
        }                                                                                                     \
        for (; o < o_hi; o++) {   /* the last rows, one at a time */                                          \
            const real *w0 = j->w + (size_t)o * j->n_in;                                                      \
            TOKENS(TF, 1, TT, TTM, w0, (size_t)j->n_in, KERNEL_SUMS, 0, 0, 1, 0)                                       \
        }                                                                                                     \
    }

/* One function per instruction set (x86-64 with GCC or clang), chosen once:
 * the same IEEE operations in the same order in each, so the same bits. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KERNEL_X86 1
#ifdef DFLASH_DOUBLE
ROWS_FUNCTION(rows_avx512, __attribute__((target("avx512f"))), tile, 4, 2, 2)
ROWS_FUNCTION(rows_avx2, __attribute__((target("avx2"))), tile_parts, 2, 1, 1)
ROWS_FUNCTION(rows_default, , tile, 1, 1, 1)
#else
/* (two 4 x 6 tiles ran 10-15% slower than three 4 x 4 at T = 12, measured;
 * one 4 x 6 tile 20% faster than 3 + 3 at T = 6: so TTM = 5. AVX2: 2 x 3,
 * 12 ymm accumulators, ran 1.2-1.4x faster than 2 x 2 at T = 8 and 16) */
ROWS_FUNCTION(rows_avx512, __attribute__((target("avx512f"))), tile, 4, 6, 5)
ROWS_FUNCTION(rows_avx2, __attribute__((target("avx2"))), tile_parts, 2, 3, 3)
ROWS_FUNCTION(rows_default, , tile, 2, 1, 1)
#endif
#else
ROWS_FUNCTION(rows_default, , tile, 2, 1, 1)
#endif

typedef void (*RowsFn)(const MatJob *j, int o_lo, int o_hi);
static RowsFn rows_fn;   /* NULL until the first call */

/* The instruction set's function: "avx512f", "avx2" or "default" if this
 * processor has it (0), else -1 (and none chosen); NULL: the best one.
 * tests/test_kernel.c runs each in turn. */
int kernel_select(const char *isa) {
    RowsFn f = NULL;
#ifdef KERNEL_X86
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f"), has2 = __builtin_cpu_supports("avx2");
    if (!isa) f = has512 ? rows_avx512 : has2 ? rows_avx2 : rows_default;
    else if (strcmp(isa, "avx512f") == 0) f = has512 ? rows_avx512 : NULL;
    else if (strcmp(isa, "avx2") == 0) f = has2 ? rows_avx2 : NULL;
#else
    if (!isa) f = rows_default;
#endif
    if (isa && strcmp(isa, "default") == 0) f = rows_default;
    if (!f) return -1;
    rows_fn = f;
    return 0;
}

/* ---- packed copies of read-only matrices ----------------------------------
 * A table of the matrices kernel_pack_weights registered, by address; each
 * packed at its first matmul (the shape is known there). */
#define PACK_SAMPLES 8
typedef struct {
    const real *w;              /* the matrix dflash.c passes; NULL: a free slot */
    int n_in, n_out, bf;        /* n_in 0: registered, not packed yet */
    void *pk;
    size_t bytes;
    real sample[PACK_SAMPLES];  /* w's values at pack time, checked at every use */
} Packed;

static Packed *packed;
static int n_packed, cap_packed;
static pthread_mutex_t packed_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t sample_at(int k, size_t n) { return (size_t)k * (n - 1) / (PACK_SAMPLES - 1); }

/* register w (packed at its first use); 0, or -1 when out of memory (then
 * it is simply not packed) */
int kernel_pack_matrix(const real *w) {
    if (!w) return 0;
    pthread_mutex_lock(&packed_mu);
    int rc = 0;
    for (int i = 0; i < n_packed; i++)
        if (packed[i].w == w) goto done;
    if (n_packed == cap_packed) {
        int cap = cap_packed ? 2 * cap_packed : 64;
        Packed *p = realloc(packed, sizeof *p * (size_t)cap);
        if (!p) { rc = -1; goto done; }
        packed = p, cap_packed = cap;
    }
    memset(&packed[n_packed], 0, sizeof packed[n_packed]);
    packed[n_packed++].w = w;
done:
    pthread_mutex_unlock(&packed_mu);
    return rc;
}

void kernel_unpack_matrix(const real *w) {
    pthread_mutex_lock(&packed_mu);
    for (int i = 0; i < n_packed; i++)
        if (packed[i].w == w) {
            free(packed[i].pk);
            packed[i] = packed[--n_packed];
            break;
        }
    pthread_mutex_unlock(&packed_mu);
}

/* calls f on every matrix of m that dflash.c passes to matmul */
static void each_matrix(const Model *m, void (*f)(const real *w)) {
    for (int l = 0; m->layers && l < m->cfg.num_hidden_layers; l++) {
        const LayerWeights *L = &m->layers[l];
        const real *mats[] = {L->q_proj, L->k_proj, L->v_proj, L->o_proj, L->gate_proj, L->up_proj, L->down_proj,
                              L->in_proj_qkv, L->in_proj_z, L->in_proj_b, L->in_proj_a, L->out_proj};
        for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) f(mats[k]);
    }
    f(m->lm_head);
    f(m->fc);
}

static void pack_one(const real *w) { (void)kernel_pack_matrix(w); }

/* opt-in, for a model whose weights stay as loaded until
 * kernel_unpack_weights: its matrices packed at their first use */
void kernel_pack_weights(const Model *m) { each_matrix(m, pack_one); }

void kernel_unpack_weights(const Model *m) { each_matrix(m, kernel_unpack_matrix); }

size_t kernel_packed_bytes(void) {
    size_t b = 0;
    pthread_mutex_lock(&packed_mu);
    for (int i = 0; i < n_packed; i++) b += packed[i].bytes;
    pthread_mutex_unlock(&packed_mu);
    return b;
}

/* every value a BF16 number: its float's low 16 bits zero (in double: a
 * float, and that float's low 16 bits zero) */
static int all_bf16(const real *w, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float f = (float)w[i];
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        if ((u & 0xffff) != 0 || (real)f != w[i]) return 0;
    }
    return 1;
}

/* p's packed copy for this shape, made now if needed; 0 on success */
static int pack_entry(Packed *p, int n_in, int n_out) {
    size_t n = (size_t)n_in * n_out;
    if (p->pk && p->n_in == n_in && p->n_out == n_out) {
        int same = 1;
        for (int k = 0; k < PACK_SAMPLES; k++) same &= memcmp(&p->w[sample_at(k, n)], &p->sample[k], sizeof(real)) == 0;
        if (same) return 0;
    }
    free(p->pk);
    p->pk = NULL, p->bytes = 0;
    int bf = all_bf16(p->w, n);
    size_t te = tile_elems(n_in, bf), tiles = (size_t)(n_out + PACK_R - 1) / PACK_R, esz = bf ? 4 : sizeof(real);
    size_t bytes = (tiles * te * esz + 63) / 64 * 64;
    void *pk = aligned_alloc(64, bytes);
    if (!pk) return -1;
    memset(pk, 0, bytes);
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++) {
            size_t g = (size_t)i / KERNEL_SUMS, q = (size_t)(o % PACK_R), c = (size_t)(i % KERNEL_SUMS);
            real v = p->w[(size_t)o * n_in + i];
            if (bf) {   /* rows 2k and 2k + 1 in the low and high halves of the same words */
                float f = (float)v;
                uint32_t u;
                memcpy(&u, &f, sizeof u);
                ((uint32_t *)pk)[(size_t)(o / PACK_R) * te + (g * PACK_R / 2 + q / 2) * KERNEL_SUMS + c] |=
                    q % 2 ? (u & 0xffff0000u) : u >> 16;
            } else {
                ((real *)pk)[(size_t)(o / PACK_R) * te + (g * PACK_R + q) * KERNEL_SUMS + c] = v;
            }
        }
    for (int k = 0; k < PACK_SAMPLES; k++) p->sample[k] = p->w[sample_at(k, n)];
    p->pk = pk, p->bytes = bytes, p->bf = bf, p->n_in = n_in, p->n_out = n_out;
    return 0;
}

/* w's packed copy into j (or none) */
static void find_packed(MatJob *j) {
    j->pk = NULL, j->pk_bytes = 0, j->bf = 0;
    pthread_mutex_lock(&packed_mu);
    for (int i = 0; i < n_packed; i++)
        if (packed[i].w == j->w) {
            if (pack_entry(&packed[i], j->n_in, j->n_out) == 0)
                j->pk = packed[i].pk, j->pk_bytes = packed[i].bytes, j->bf = packed[i].bf;
            break;
        }
    pthread_mutex_unlock(&packed_mu);
}

/* ---- threads: a small pool, each worker a contiguous range of rows -------- */
/* A job is handed over through two atomics: the caller publishes it by
 * bumping `generation`, and each worker counts itself out of `pending`.
 * Both sides first spin on the atomic for up to KERNEL_SPIN_NS (a forward
 * calls matmul every few microseconds, and a sleeping thread takes tens of
 * microseconds to wake: with a condition variable alone, two threads were
 * slower than one on a 1-token forward), then sleep on a condition variable,
 * so an idle pool costs no CPU. Which rows a thread computes does not depend
 * on who waits how: the bits are the same. */
#define KERNEL_MAX_THREADS 64
#define KERNEL_MIN_WORK (1L << 16)   /* multiply-adds below which one thread runs the matmul */
#define KERNEL_SPIN_NS 2000000L      /* how long a waiting thread spins before it sleeps: 2 ms */
static struct {
    pthread_mutex_t mu, busy;      /* mu: the sleeping side; busy: one matmul at a time uses the pool */
    pthread_cond_t go, done;
    int threads, started;          /* wanted; workers running (threads - 1 at most) */
    atomic_ulong generation;       /* bumped for each job (release: job and chunk are set) */
    atomic_int pending;            /* workers not finished with this job */
    const MatJob *job;
    int chunk;                     /* rows per worker, a multiple of PACK_R */
    pthread_t tid[KERNEL_MAX_THREADS];
    unsigned long first_seen[KERNEL_MAX_THREADS];   /* generation when worker k was started */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          1, 0, 0, 0, NULL, 0, {0}, {0}};

static void run_chunk(const MatJob *j, int k, int chunk) {
    int lo = k * chunk, hi = (k + 1) * chunk;
    if (hi > j->n_out) hi = j->n_out;
    if (lo < hi) rows_fn(j, lo, hi);
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* spin until generation != seen (want_new) or pending == 0 (!want_new), for
 * at most KERNEL_SPIN_NS; 1 when that happened */
static int spin_for(int want_new, unsigned long seen) {
    long t0 = 0;
    for (unsigned i = 0;; i++) {
        if (want_new ? atomic_load_explicit(&pool.generation, memory_order_acquire) != seen
                     : atomic_load_explicit(&pool.pending, memory_order_acquire) == 0)
            return 1;
        if ((i & 255) == 255) {   /* the clock now and then */
            long t = now_ns();
            if (t0 == 0) t0 = t;
            else if (t - t0 > KERNEL_SPIN_NS) return 0;
        }
    }
}

static void *worker(void *arg) {
    int k = (int)(intptr_t)arg;   /* 1 .. threads - 1; the caller does 0 */
    unsigned long seen = pool.first_seen[k];   /* the jobs before this thread are not its own */
    for (;;) {
        if (!spin_for(1, seen)) {
            pthread_mutex_lock(&pool.mu);
            while (atomic_load_explicit(&pool.generation, memory_order_acquire) == seen)
                pthread_cond_wait(&pool.go, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
        }
        seen = atomic_load_explicit(&pool.generation, memory_order_acquire);
        run_chunk(pool.job, k, pool.chunk);
        if (atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool.mu);   /* the caller may be asleep */
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

/* the threads matmul splits its output rows over (1: none, the default) */
void kernel_set_threads(int threads) {
    if (threads < 1) threads = 1;
    if (threads > KERNEL_MAX_THREADS) threads = KERNEL_MAX_THREADS;
    pthread_mutex_lock(&pool.busy);
    pool.threads = threads;
    pthread_mutex_unlock(&pool.busy);
}

int kernel_threads(void) { return pool.threads; }

/* the job on the pool's threads; 0, or -1 (then nothing was run) when the
 * pool is in use by another caller or has no threads */
static int run_threaded(const MatJob *j) {
    if (pthread_mutex_trylock(&pool.busy) != 0) return -1;
    int n = pool.threads;
    while (pool.started < n - 1) {
        pool.first_seen[pool.started + 1] = atomic_load_explicit(&pool.generation, memory_order_relaxed);
        if (pthread_create(&pool.tid[pool.started], NULL, worker, (void *)(intptr_t)(pool.started + 1)) != 0) break;
        pool.started++;
    }
    if (n > pool.started + 1) n = pool.started + 1;
    int chunk = ((j->n_out + n - 1) / n + PACK_R - 1) / PACK_R * PACK_R;
    if (n <= 1 || chunk >= j->n_out) {
        pthread_mutex_unlock(&pool.busy);
        return -1;
    }
    /* every started worker takes part (those past n_out get no rows) */
    pool.job = j, pool.chunk = chunk;
    atomic_store_explicit(&pool.pending, pool.started, memory_order_relaxed);
    pthread_mutex_lock(&pool.mu);   /* wakes the workers that sleep */
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    run_chunk(j, 0, chunk);
    if (!spin_for(0, 0)) {
        pthread_mutex_lock(&pool.mu);
        while (atomic_load_explicit(&pool.pending, memory_order_acquire) > 0) pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_mutex_unlock(&pool.busy);
    return 0;
}

/* matmul: out (T, n_out) = x (T, n_in) @ W^T, dflash.c's matmul's bits */
void matmul(real *out, const real *x, const real *w, int T, int n_in, int n_out) {
    if (T <= 0 || n_out <= 0) return;
    if (!rows_fn) kernel_select(NULL);
    MatJob j = {.out = out, .x = x, .w = w, .T = T, .n_in = n_in, .n_out = n_out};   /* no packed copy yet */
    if (n_in <= 0) {   /* empty sums: +0, as dflash.c's */
        for (size_t k = 0; k < (size_t)T * n_out; k++) out[k] = 0;
        return;
    }
    if (n_packed > 0) find_packed(&j);
    if (pool.threads > 1 && (long)T * n_in * n_out >= KERNEL_MIN_WORK && run_threaded(&j) == 0) return;
    rows_fn(&j, 0, n_out);
}

/* ==== end of the matmul ==== */

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
