/* gguf/ggml_bf16.c - ggml's BF16 matrix product, emulated: a measuring
 * tool for the BF16 sets, never the spec (make llama-spec-check; docs/gguf.md,
 * "BF16 weights in llama.cpp").
 *
 * ggml's CPU mul_mat with a BF16 weight converts the F32 activations to the
 * weight's vec_dot type first (ggml_cpu_fp32_to_bf16: round to nearest even)
 * and then takes BF16 x BF16 dot products; this program widens the weights to
 * F32 and keeps the activations F32. This file is a strong definition of
 * dflash.c's weak matmul (as kernel.c is) that rounds every row of x to BF16
 * first and then sums as dflash.c does (16 partial sums, pairwise). Linked
 * instead of kernel.c it makes build/gguf/dflash-ggml-bf16 (Makefile): ./dflash
 * whose every weight product sees the activations as llama.cpp's does. Every
 * matmul call of dflash.c has a weight as W, so on a set whose 2-D weights are
 * all BF16 (qwen3-layout, sliding) this is exactly where ggml rounds; on an F32
 * set it rounds where ggml does not, so it is used on the BF16 sets only.
 */
#include "dflash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BF16_KSUMS 16

/* x rounded to BF16 and widened back, as ggml_compute_fp32_to_bf16 rounds */
static float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) u = (u >> 16 | 64) << 16;  /* NaN: quiet */
    else u = (u + (0x7fffu + (u >> 16 & 1))) >> 16 << 16;
    memcpy(&x, &u, 4);
    return x;
}

void matmul(real *out, const real *x, const real *w, int T, int n_in, int n_out) {
    real *xr = malloc(sizeof *xr * (size_t)n_in);
    if (!xr) abort();
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < n_in; i++) xr[i] = (real)bf16_round((float)x[(size_t)t * n_in + i]);
        for (int o = 0; o < n_out; o++) {
            const real *w_o = w + (size_t)o * n_in;
            real part[BF16_KSUMS] = {0};
            for (int i = 0; i < n_in; i++) part[i % BF16_KSUMS] += xr[i] * w_o[i];
            for (int half = BF16_KSUMS / 2; half >= 1; half /= 2)
                for (int j = 0; j < half; j++) part[j] += part[j + half];
            out[(size_t)t * n_out + o] = part[0];
        }
    }
    free(xr);
}
