/* test_kernel.c - the fast matmul against its definition.
 *
 * Two matmuls: dflash.c's, the naive loop that defines the summation order
 * (16 partial sums, partial j taking i = j mod 16 in increasing i, then
 * added pairwise), here under the name matmul_naive, and kernel.c's, the
 * kernel the speed builds run (tiles of rows x tokens, partial sums in
 * vector registers, one function per instruction set), linked as `matmul`.
 * Every token's result must be the SAME BITS from both, for every shape:
 * widths that are and are not multiples of 16, row counts that are and are
 * not multiples of the 4-row tile, and 1..16 tokens; with each instruction
 * set this processor has (kernel_select), with the weights unpacked, packed
 * and packed as BF16, on 1, 2 and 3 threads. The inputs span many
 * magnitudes, so any other order of the adds changes low bits (the last
 * test checks that it does). Built in every mode the tests are (float,
 * double, -O2, sanitized) and as tests/bin/test_kernel_O0 at -O0 (Makefile),
 * so each compares the two at those flags. */

/* dflash.c under its own name for matmul: its weak definition becomes
 * matmul_naive, which nothing replaces, and `matmul` is kernel.c's */
#define matmul matmul_naive
#include "dflash.c"
#undef matmul
#include "formats/load.c"

#include "tests/testutil.h"

void matmul(real *out, const real *x, const real *w, int T, int n_in, int n_out);   /* kernel.c */
int kernel_select(const char *isa);        /* kernel.c: its instruction sets */
int kernel_pack_matrix(const real *w);      /* kernel.c: w packed at its first use */
void kernel_unpack_matrix(const real *w);
size_t kernel_packed_bytes(void);

static const char *const ISAS[] = {"avx512f", "avx2", "default"};
enum { N_ISAS = sizeof ISAS / sizeof ISAS[0] };

/* the weights as BF16 numbers (their floats' low 16 bits cleared): the
 * packed copy is then BF16 */
static void to_bf16(real *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float f = (float)v[i];
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        u &= 0xffff0000u;
        memcpy(&f, &u, sizeof f);
        v[i] = f;
    }
}

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

/* pack: 0 unpacked, 1 packed, 2 packed as BF16 (the weights rounded to
 * BF16 first); kernel.c's matmul against dflash.c's on this shape with the
 * instruction set chosen before, each token alone too */
static void check_shape_as(int T, int n_in, int n_out, int pack) {
    size_t nw = (size_t)n_out * n_in;
    real *x = malloc(sizeof(real) * (size_t)T * n_in), *w = malloc(sizeof(real) * nw);
    real *fast = malloc(sizeof(real) * (size_t)T * n_out), *ref = malloc(sizeof(real) * (size_t)T * n_out);
    real *one = malloc(sizeof(real) * (size_t)n_out);
    assert_non_null(x); assert_non_null(w); assert_non_null(fast); assert_non_null(ref); assert_non_null(one);
    fill(x, T * n_in, (uint64_t)(T * 1000003 + n_in * 101 + n_out));
    fill(w, n_out * n_in, (uint64_t)(n_in * 7919 + n_out));
    if (pack == 2) to_bf16(w, nw);
    if (pack) assert_int_equal(kernel_pack_matrix(w), 0);
    matmul(fast, x, w, T, n_in, n_out);
    matmul_naive(ref, x, w, T, n_in, n_out);
    if (pack) {   /* it was packed: 4-row tiles of 16-column groups, 2 bytes a weight for BF16 */
        size_t tiles = (size_t)(n_out + 3) / 4, groups = (size_t)(n_in + 15) / 16;
        size_t want = (tiles * groups * 64 * (pack == 2 ? 2 : sizeof(real)) + 63) / 64 * 64;
        if (kernel_packed_bytes() != want)
            fail_msg("T=%d n_in=%d n_out=%d: packed %zu bytes, expected %zu", T, n_in, n_out, kernel_packed_bytes(), want);
    }
    if (memcmp(fast, ref, sizeof(real) * (size_t)T * n_out) != 0)
        fail_msg("T=%d n_in=%d n_out=%d pack=%d: kernel.c's matmul differs from dflash.c's", T, n_in, n_out, pack);
    /* each token alone gives the bits it gets inside the block */
    for (int t = 0; t < T; t++) {
        matmul(one, x + (size_t)t * n_in, w, 1, n_in, n_out);
        if (memcmp(one, fast + (size_t)t * n_out, sizeof(real) * (size_t)n_out) != 0)
            fail_msg("T=%d n_in=%d n_out=%d pack=%d: token %d alone differs from the same token in the block", T, n_in,
                     n_out, pack, t);
    }
    if (pack) kernel_unpack_matrix(w);
    assert_int_equal(kernel_packed_bytes(), 0);
    free(x); free(w); free(fast); free(ref); free(one);
}

/* every instruction set this processor has, unpacked, packed and BF16 */
static void check_shape(int T, int n_in, int n_out) {
    int ran = 0;
    for (int k = 0; k < N_ISAS; k++) {
        if (kernel_select(ISAS[k]) != 0) continue;
        ran++;
        for (int pack = 0; pack < 3; pack++) check_shape_as(T, n_in, n_out, pack);
    }
    assert_true(ran >= 1);   /* "default" at least */
    assert_int_equal(kernel_select(NULL), 0);
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

/* Threads split the output rows: the same bits on 1, 2 and 3 threads, on
 * shapes large enough to be split (kernel.c: 2^16 multiply-adds), row
 * counts not a multiple of the 4-row tile, unpacked, packed and BF16. */
static void test_threads_same_bits(void **state) {
    (void)state;
    static const int outs[] = {130, 37, 257}, ins[] = {512, 1543};
    for (size_t a = 0; a < sizeof ins / sizeof ins[0]; a++)
        for (size_t b = 0; b < sizeof outs / sizeof outs[0]; b++)
            for (int T = 1; T <= 16; T += (T < 4 ? 1 : 5)) {
                int n_in = ins[a], n_out = outs[b];
                real *x = malloc(sizeof(real) * (size_t)T * n_in), *w = malloc(sizeof(real) * (size_t)n_out * n_in);
                real *ref = malloc(sizeof(real) * (size_t)T * n_out), *got = malloc(sizeof(real) * (size_t)T * n_out);
                assert_non_null(x); assert_non_null(w); assert_non_null(ref); assert_non_null(got);
                fill(x, T * n_in, (uint64_t)(T + 5));
                fill(w, n_out * n_in, (uint64_t)(n_out + 6));
                for (int pack = 0; pack < 3; pack++) {
                    if (pack == 2) to_bf16(w, (size_t)n_out * n_in);
                    matmul_naive(ref, x, w, T, n_in, n_out);
                    if (pack) assert_int_equal(kernel_pack_matrix(w), 0);
                    for (int th = 1; th <= 3; th++) {
                        kernel_set_threads(th);
                        memset(got, 0xff, sizeof(real) * (size_t)T * n_out);
                        matmul(got, x, w, T, n_in, n_out);
                        if (memcmp(got, ref, sizeof(real) * (size_t)T * n_out) != 0)
                            fail_msg("T=%d n_in=%d n_out=%d pack=%d threads=%d: differs from dflash.c's matmul", T,
                                     n_in, n_out, pack, th);
                    }
                    kernel_set_threads(1);
                    if (pack) kernel_unpack_matrix(w);
                }
                free(x); free(w); free(ref); free(got);
            }
}

/* The pool hands a job over by spinning for a while, then by sleeping on a
 * condition variable (kernel.c). Both ways give every row: 500 matmuls back
 * to back (the workers spin, as in a forward), then matmuls 10 ms apart
 * (longer than the spin: the workers sleep and are woken), each checked. */
static void test_threads_spin_and_sleep(void **state) {
    (void)state;
    enum { T = 2, N = 512, OUT = 130 };
    real *x = malloc(sizeof(real) * T * N), *w = malloc(sizeof(real) * OUT * N);
    real *ref = malloc(sizeof(real) * T * OUT), *got = malloc(sizeof(real) * T * OUT);
    assert_non_null(x); assert_non_null(w); assert_non_null(ref); assert_non_null(got);
    fill(x, T * N, 7);
    fill(w, OUT * N, 8);
    matmul_naive(ref, x, w, T, N, OUT);
    kernel_set_threads(2);
    for (int i = 0; i < 506; i++) {
        if (i >= 500) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        memset(got, 0xff, sizeof(real) * T * OUT);
        matmul(got, x, w, T, N, OUT);
        if (memcmp(got, ref, sizeof(real) * T * OUT) != 0) fail_msg("matmul %d on 2 threads differs", i);
    }
    kernel_set_threads(1);
    free(x); free(w); free(ref); free(got);
}

/* A packed matrix whose weights are then changed (as a trainer's are) is
 * not served from the stale copy: the sampled values differ, it is packed
 * again. And a model's matrices are registered and dropped together. */
static void test_packed_copy_follows_changed_weights(void **state) {
    (void)state;
    enum { T = 3, N = 100, OUT = 21 };
    real x[T * N], w[OUT * N], ref[T * OUT], got[T * OUT];
    fill(x, T * N, 1);
    fill(w, OUT * N, 2);
    assert_int_equal(kernel_pack_matrix(w), 0);
    matmul(got, x, w, T, N, OUT);
    assert_true(kernel_packed_bytes() > 0);
    for (int i = 0; i < OUT * N; i++) w[i] = w[i] * (real)0.5 + (real)0.125;   /* every weight changed */
    matmul(got, x, w, T, N, OUT);
    matmul_naive(ref, x, w, T, N, OUT);
    assert_memory_equal(got, ref, sizeof ref);
    kernel_unpack_matrix(w);
    assert_int_equal(kernel_packed_bytes(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_equals_reference_small_shapes),
        cmocka_unit_test(test_matmul_equals_reference_model_shapes),
        cmocka_unit_test(test_reference_order_is_as_documented),
        cmocka_unit_test(test_another_order_gives_other_bits),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_threads_spin_and_sleep),
        cmocka_unit_test(test_packed_copy_follows_changed_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
