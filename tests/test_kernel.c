/* test_kernel.c - the fast matmul against its definition.
 *
 * Two matmuls: dflash.c's, the naive loop that defines the summation order
 * (16 partial sums, partial j taking i = j mod 16 in increasing i, then
 * added pairwise), here under the name matmul_naive, and kernel.c's, the
 * kernel the speed builds run (four weight rows at a time, partial sums in
 * vector registers, one clone per instruction set), linked as `matmul`.
 * Every token's result must be the SAME BITS from both, for every shape:
 * widths that are and are not multiples of 16, row counts that are and are
 * not multiples of the 4-row tile, and 1..16 tokens. The inputs span many
 * magnitudes, so any other order of the adds changes low bits (the last
 * test checks that it does). Built in every mode the tests are (float,
 * double, -O2, sanitized), so each compares the two at those flags; the
 * -O0 build runs dflash.c's loop itself (Makefile: DEBUG_SRC). */

/* dflash.c under its own name for matmul: its weak definition becomes
 * matmul_naive, which nothing replaces, and `matmul` is kernel.c's */
#define matmul matmul_naive
#include "dflash.c"
#undef matmul
#include "formats/load.c"

#include "tests/testutil.h"

void matmul(real *out, const real *x, const real *w, int T, int n_in, int n_out);   /* kernel.c */

/* deterministic values of very different magnitudes and both signs: a
 * reordered sum rounds differently (not exact small integers) */
static void fill(real *v, int n, uint64_t seed) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(z >> 11) / 9007199254740992.0;          /* [0, 1) */
        double mag = ldexp(1.0, (int)((z >> 3) % 17) - 8);          /* 2^-8 .. 2^8 */
        v[i] = (real)((u - 0.5) * mag);
    }
}

static void check_shape(int T, int n_in, int n_out) {
    real *x = malloc(sizeof(real) * (size_t)T * n_in), *w = malloc(sizeof(real) * (size_t)n_out * n_in);
    real *fast = malloc(sizeof(real) * (size_t)T * n_out), *ref = malloc(sizeof(real) * (size_t)T * n_out);
    real *one = malloc(sizeof(real) * (size_t)n_out);
    assert_non_null(x); assert_non_null(w); assert_non_null(fast); assert_non_null(ref); assert_non_null(one);
    fill(x, T * n_in, (uint64_t)(T * 1000003 + n_in * 101 + n_out));
    fill(w, n_out * n_in, (uint64_t)(n_in * 7919 + n_out));
    matmul(fast, x, w, T, n_in, n_out);
    matmul_naive(ref, x, w, T, n_in, n_out);
    if (memcmp(fast, ref, sizeof(real) * (size_t)T * n_out) != 0)
        fail_msg("T=%d n_in=%d n_out=%d: kernel.c's matmul differs from dflash.c's", T, n_in, n_out);
    /* each token alone gives the bits it gets inside the block */
    for (int t = 0; t < T; t++) {
        matmul(one, x + (size_t)t * n_in, w, 1, n_in, n_out);
        if (memcmp(one, fast + (size_t)t * n_out, sizeof(real) * (size_t)n_out) != 0)
            fail_msg("T=%d n_in=%d n_out=%d: token %d alone differs from the same token in the block", T, n_in, n_out, t);
    }
    free(x); free(w); free(fast); free(ref); free(one);
}

/* every T = 1..16 and n_in = 1..70 (below, at and around 16, 32, 48, 64) */
static void test_matmul_equals_reference_small_shapes(void **state) {
    (void)state;
    static const int outs[] = {1, 3, 4, 5, 8, 13};
    for (int T = 1; T <= 16; T++)
        for (int n_in = 1; n_in <= 70; n_in++)
            for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) check_shape(T, n_in, outs[k]);
}

/* the model's own widths (D = 512, I = 1536, 3D = 1536 for fc) and widths a
 * few off them, with n_out not a multiple of 4 */
static void test_matmul_equals_reference_model_shapes(void **state) {
    (void)state;
    static const int ins[] = {512, 1536, 511, 513, 527, 1000, 1543};
    static const int Ts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16};
    for (size_t a = 0; a < sizeof ins / sizeof ins[0]; a++)
        for (size_t b = 0; b < sizeof Ts / sizeof Ts[0]; b++) check_shape(Ts[b], ins[a], 37);
}

/* dflash.c's matmul is what its comment says, written another way:
 * the 16 partials summed by hand-written strides, then the pairwise tree
 * spelled out. Also hand-computed on a case a reader can check. */
static void test_reference_order_is_as_documented(void **state) {
    (void)state;
    enum { N = 45, OUT = 64 };
    real x[N], w[N * OUT], ref[OUT];
    fill(x, N, 11);
    fill(w, N * OUT, 12);
    matmul_naive(ref, x, w, 1, N, OUT);
    for (int o = 0; o < OUT; o++) {
        const real *w_o = w + o * N;
        real p[16];
        for (int j = 0; j < 16; j++) {
            p[j] = 0;
            for (int i = j; i < N; i += 16) p[j] += w_o[i] * x[i];
        }
        real s8[8], s4[4], s2[2];
        for (int j = 0; j < 8; j++) s8[j] = p[j] + p[j + 8];
        for (int j = 0; j < 4; j++) s4[j] = s8[j] + s8[j + 4];
        for (int j = 0; j < 2; j++) s2[j] = s4[j] + s4[j + 2];
        real want = s2[0] + s2[1];
        if (memcmp(&ref[o], &want, sizeof want) != 0) fail_msg("row %d: dflash.c's matmul is not the documented order", o);
    }

    /* by hand: x = 1..20, w = 1: partial j holds (j+1) + (j+17) for j < 4,
     * else j+1; the total is 210 exactly in any order */
    real xs[20], ws[20], out;
    for (int i = 0; i < 20; i++) { xs[i] = (real)(i + 1); ws[i] = 1; }
    matmul(&out, xs, ws, 1, 20, 1);
    assert_true(out == (real)210);
}

/* The tests above can fail: a different order of the same adds gives
 * different bits on these inputs. One running sum and the 16 partials
 * summed left to right both differ from dflash.c's matmul somewhere. */
static void test_another_order_gives_other_bits(void **state) {
    (void)state;
    enum { N = 512, OUT = 32 };
    real *x = malloc(sizeof(real) * N), *w = malloc(sizeof(real) * N * OUT), ref[OUT];
    assert_non_null(x); assert_non_null(w);
    fill(x, N, 3);
    fill(w, N * OUT, 4);
    matmul_naive(ref, x, w, 1, N, OUT);
    int differ_seq = 0, differ_l2r = 0;
    for (int o = 0; o < OUT; o++) {
        real seq = 0, p[16] = {0}, l2r = 0;
        for (int i = 0; i < N; i++) seq += w[(size_t)o * N + i] * x[i];
        for (int i = 0; i < N; i++) p[i % 16] += w[(size_t)o * N + i] * x[i];
        for (int j = 0; j < 16; j++) l2r += p[j];
        differ_seq += memcmp(&seq, &ref[o], sizeof seq) != 0;
        differ_l2r += memcmp(&l2r, &ref[o], sizeof l2r) != 0;
    }
    assert_true(differ_seq > 0);
    assert_true(differ_l2r > 0);
    free(x); free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_equals_reference_small_shapes),
        cmocka_unit_test(test_matmul_equals_reference_model_shapes),
        cmocka_unit_test(test_reference_order_is_as_documented),
        cmocka_unit_test(test_another_order_gives_other_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
