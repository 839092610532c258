/* test_kernel_ops.c - kernel.c's attention, rmsnorm_rows and
 * apply_rotary_pos_emb against dflash.c's.
 *
 * dflash.c's three are compiled here under the names *_naive (nothing
 * replaces those); the plain names are kernel.c's, the ones the speed
 * builds run. Every output must be the SAME BITS from both (memcmp), for the
 * model's sizes and odd ones: head_dim not a multiple of the kernel's 8- or
 * 32-wide chunks, row counts not a multiple of its 8-row groups, grouped KV
 * heads, causal and not, sliding windows, non-finite inputs. The inputs span
 * many magnitudes, so any other order of the adds changes low bits (the last
 * test checks that it does). Built in every mode the tests are (float,
 * double, -O2, sanitized), so each compares the two at those flags. */

#define attention attention_naive
#define rmsnorm_rows rmsnorm_rows_naive
#define apply_rotary_pos_emb apply_rotary_pos_emb_naive
#include "dflash.c"
#undef attention
#undef rmsnorm_rows
#undef apply_rotary_pos_emb
#include "formats/load.c"

#include "tests/testutil.h"

/* kernel.c's */
int attention(real *out, real *scores, real *att, const real *q, const real *key, const real *value,
              int T, int S, int cap, int n_heads, int n_kv_heads, int head_dim,
              int causal, int q_pos0, int window);
int rmsnorm_rows(real *out, const real *x, const real *w, int rows, int n, real eps);
void apply_rotary_pos_emb(real *q_rope, real *k_rope, const real *q, const real *k,
                          const real *cos_, const real *sin_, int q_len, int k_len,
                          int n_heads, int n_kv_heads, int head_dim);

/* deterministic values of magnitudes up to 2^lo_exp .. 2^(lo_exp + span - 1)
 * and both signs: a reordered sum rounds differently */
static void fill(real *v, size_t n, uint64_t seed, int lo_exp, int span) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(z >> 11) / 9007199254740992.0;                /* [0, 1) */
        double mag = ldexp(1.0, (int)((z >> 3) % (uint64_t)span) + lo_exp);
        v[i] = (real)((u - 0.5) * mag);
    }
}

static real *buf(size_t n) {
    real *p = malloc(sizeof(real) * (n ? n : 1));
    assert_non_null(p);
    return p;
}

/* ---- attention ------------------------------------------------------------ */

typedef struct {
    int T, S, H, Hkv, d, causal, window;
} AttCase;

/* run both on the same inputs; outputs start from the same garbage so an
 * element one of them leaves unwritten shows too. poison: one key row set
 * to +Inf, so some softmax sums are not finite (both must say so, alike). */
static void check_attention(AttCase c, int poison) {
    int cap = c.S + 3, q_pos0 = c.S - c.T;   /* the queries are the last T positions */
    size_t nq = (size_t)c.T * c.H * c.d, nkv = (size_t)c.Hkv * cap * c.d, nsc = (size_t)c.H * c.T * c.S;
    real *q = buf(nq), *key = buf(nkv), *value = buf(nkv);
    real *out[2] = {buf(nq), buf(nq)}, *sc[2] = {buf(nsc), buf(nsc)}, *att[2] = {buf(nsc), buf(nsc)};
    uint64_t seed = (uint64_t)(c.T * 131 + c.S * 7 + c.H * 1009 + c.Hkv * 17 + c.d * 31 + c.causal + c.window * 3);
    fill(q, nq, seed, -3, 3);
    fill(key, nkv, seed + 1, -3, 3);
    fill(value, nkv, seed + 2, -8, 16);
    if (poison) for (int i = 0; i < c.d; i++) key[(size_t)(c.S / 2) * c.d + i] = (real)INFINITY;
    for (int k = 0; k < 2; k++) {
        memset(out[k], 0x5a, sizeof(real) * nq);
        memset(sc[k], 0x5a, sizeof(real) * nsc);
        memset(att[k], 0x5a, sizeof(real) * nsc);
    }
    int bad_fast = attention(out[0], sc[0], att[0], q, key, value, c.T, c.S, cap, c.H, c.Hkv, c.d, c.causal,
                             q_pos0, c.window);
    int bad_ref = attention_naive(out[1], sc[1], att[1], q, key, value, c.T, c.S, cap, c.H, c.Hkv, c.d, c.causal,
                                  q_pos0, c.window);
    const char *what = NULL;
    if (memcmp(sc[0], sc[1], sizeof(real) * nsc) != 0) what = "scores";
    else if (memcmp(att[0], att[1], sizeof(real) * nsc) != 0) what = "weights";
    else if (memcmp(out[0], out[1], sizeof(real) * nq) != 0) what = "output";
    else if (bad_fast != bad_ref) what = "non-finite flag";
    if (what)
        fail_msg("T=%d S=%d H=%d Hkv=%d d=%d causal=%d window=%d poison=%d: kernel.c's attention %s differs from "
                 "dflash.c's", c.T, c.S, c.H, c.Hkv, c.d, c.causal, c.window, poison, what);
    if (poison) assert_int_equal(bad_ref, -1);   /* the poisoned case does reach a non-finite sum */
    free(q); free(key); free(value);
    for (int k = 0; k < 2; k++) { free(out[k]); free(sc[k]); free(att[k]); }
}

/* head_dim 1..70 (below, at and around the 8- and 32-wide chunks), several
 * T and S, MHA and grouped heads, causal or not */
static void test_attention_equals_reference_odd_shapes(void **state) {
    (void)state;
    static const int Ts[] = {1, 2, 5, 8};
    for (int d = 1; d <= 70; d++)
        for (size_t a = 0; a < sizeof Ts / sizeof Ts[0]; a++)
            for (int causal = 0; causal <= 1; causal++) {
                check_attention((AttCase){Ts[a], Ts[a] + d % 9, 2, 1, d, causal, 0}, 0);
                check_attention((AttCase){Ts[a], Ts[a] + 3, 3, 3, d, causal, 0}, 0);
            }
}

/* the toy model's sizes: H = Hkv = 8, d = 64, a cache of 64 and T = 1..16;
 * the draft's non-causal block over context; sliding windows both ways */
static void test_attention_equals_reference_model_shapes(void **state) {
    (void)state;
    for (int T = 1; T <= 16; T++) check_attention((AttCase){T, 64 + T, 8, 8, 64, 1, 0}, 0);
    for (int T = 1; T <= 16; T++) check_attention((AttCase){T, 64 + T, 8, 2, 64, 1, 0}, 0);
    static const int windows[] = {1, 2, 3, 7, 16, 100};
    for (size_t k = 0; k < sizeof windows / sizeof windows[0]; k++)
        for (int causal = 0; causal <= 1; causal++) {
            check_attention((AttCase){4, 37, 8, 8, 64, causal, windows[k]}, 0);
            check_attention((AttCase){16, 16, 4, 2, 24, causal, windows[k]}, 0);
        }
    check_attention((AttCase){4, 260, 8, 8, 64, 0, 0}, 0);   /* a long draft cache */
}

/* an infinite key: NaN scores and weights, the same NaNs from both */
static void test_attention_non_finite_alike(void **state) {
    (void)state;
    for (int causal = 0; causal <= 1; causal++) {
        check_attention((AttCase){4, 20, 8, 8, 64, causal, 0}, 1);
        check_attention((AttCase){3, 11, 2, 1, 17, causal, 5}, 1);
    }
}

/* ---- rmsnorm_rows ----------------------------------------------------------- */

static void check_rmsnorm(int rows, int n, int in_place, int bad_row) {
    size_t N = (size_t)rows * n;
    real *x = buf(N), *w = buf((size_t)n), *out[2] = {buf(N), buf(N)};
    fill(x, N, (uint64_t)(rows * 977 + n), -8, 16);
    fill(w, (size_t)n, (uint64_t)n, -4, 16);
    if (bad_row >= 0) x[(size_t)bad_row * n + n / 2] = (real)NAN;
    real eps = (real)1e-6;
    int r[2];
    for (int k = 0; k < 2; k++) {
        if (in_place) memcpy(out[k], x, sizeof(real) * N);
        else memset(out[k], 0x5a, sizeof(real) * N);
        const real *src = in_place ? out[k] : x;
        r[k] = k == 0 ? rmsnorm_rows(out[k], src, w, rows, n, eps) : rmsnorm_rows_naive(out[k], src, w, rows, n, eps);
    }
    if (memcmp(out[0], out[1], sizeof(real) * N) != 0 || r[0] != r[1])
        fail_msg("rows=%d n=%d in_place=%d bad_row=%d: kernel.c's rmsnorm_rows differs from dflash.c's", rows, n,
                 in_place, bad_row);
    if (bad_row >= 0) assert_int_equal(r[1], -1);
    free(x); free(w); free(out[0]); free(out[1]);
}

/* 1..20 rows (around the 8-row group), widths around the chunks and the
 * model's (d = 64, D = 512), in place and not, a row whose sum is NaN */
static void test_rmsnorm_rows_equals_reference(void **state) {
    (void)state;
    static const int ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 511, 512, 513};
    for (int rows = 1; rows <= 20; rows++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int in_place = 0; in_place <= 1; in_place++) {
                check_rmsnorm(rows, ns[k], in_place, -1);
                check_rmsnorm(rows, ns[k], in_place, rows / 2);
                check_rmsnorm(rows, ns[k], in_place, rows - 1);
            }
    check_rmsnorm(128, 64, 1, -1);   /* k_norm of the draft: (Lc + B) * Hkv rows of d */
}

/* ---- apply_rotary_pos_emb --------------------------------------------------- */

static void check_rotary(int q_len, int k_len, int H, int Hkv, int d) {
    size_t nq = (size_t)q_len * H * d, nk = (size_t)k_len * Hkv * d, nt = (size_t)k_len * d;
    real *q = buf(nq), *k = buf(nk), *cos_ = buf(nt), *sin_ = buf(nt), *angles = buf(nt);
    real *qr[2] = {buf(nq), buf(nq)}, *kr[2] = {buf(nk), buf(nk)}, *inv_freq = buf((size_t)d);
    int *pos = malloc(sizeof(int) * (size_t)k_len);
    assert_non_null(pos);
    fill(q, nq, (uint64_t)(q_len * 7 + d), -3, 3);
    fill(k, nk, (uint64_t)(k_len * 11 + d), -3, 3);
    rope_inv_freq(inv_freq, d, 1e6);
    for (int p = 0; p < k_len; p++) pos[p] = 37 + p;
    rope_cos_sin(angles, cos_, sin_, pos, k_len, inv_freq, d);
    for (int j = 0; j < 2; j++) {
        memset(qr[j], 0x5a, sizeof(real) * nq);
        memset(kr[j], 0x5a, sizeof(real) * nk);
    }
    apply_rotary_pos_emb(qr[0], kr[0], q, k, cos_, sin_, q_len, k_len, H, Hkv, d);
    apply_rotary_pos_emb_naive(qr[1], kr[1], q, k, cos_, sin_, q_len, k_len, H, Hkv, d);
    if (memcmp(qr[0], qr[1], sizeof(real) * nq) != 0 || memcmp(kr[0], kr[1], sizeof(real) * nk) != 0)
        fail_msg("q_len=%d k_len=%d H=%d Hkv=%d d=%d: kernel.c's apply_rotary_pos_emb differs from dflash.c's", q_len,
                 k_len, H, Hkv, d);
    free(q); free(k); free(cos_); free(sin_); free(angles); free(inv_freq); free(pos);
    for (int j = 0; j < 2; j++) { free(qr[j]); free(kr[j]); }
}

/* every even head_dim 2..80 (half-widths around the 32-wide chunk), the
 * target's q_len == k_len and the draft's q_len < k_len */
static void test_rope_equals_reference(void **state) {
    (void)state;
    for (int d = 2; d <= 80; d += 2) {
        check_rotary(3, 3, 2, 1, d);
        check_rotary(4, 19, 3, 3, d);
    }
    for (int T = 1; T <= 16; T++) check_rotary(T, T, 8, 8, 64);
    check_rotary(4, 68, 8, 8, 64);
}

/* ---- the comparisons can fail ----------------------------------------------- */

/* On these inputs another order of the same adds gives other bits, so the
 * memcmps above would see a kernel that reordered them: the attention output
 * summed over the keys in decreasing s, and a row's sum of squares as 8
 * interleaved partial sums, each differ from dflash.c's somewhere. */
static void test_another_order_gives_other_bits(void **state) {
    (void)state;
    enum { T = 4, S = 68, H = 8, D = 64, CAP = 70 };
    real *q = buf((size_t)T * H * D), *key = buf((size_t)H * CAP * D), *value = buf((size_t)H * CAP * D);
    real *out = buf((size_t)T * H * D), *sc = buf((size_t)H * T * S), *att = buf((size_t)H * T * S);
    fill(q, (size_t)T * H * D, 1, -3, 3);
    fill(key, (size_t)H * CAP * D, 2, -3, 3);
    fill(value, (size_t)H * CAP * D, 3, -8, 16);
    attention_naive(out, sc, att, q, key, value, T, S, CAP, H, H, D, 1, S - T, 0);
    int differ = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D; i++) {
                real o = 0;
                for (int s = S - T + t; s >= 0; s--) o += att[((size_t)h * T + t) * S + s] * value[((size_t)h * CAP + s) * D + i];
                differ += memcmp(&o, &out[(size_t)t * H * D + (size_t)h * D + i], sizeof o) != 0;
            }
    assert_true(differ > 0);

    enum { N = 512, ROWS = 64 };
    real *x = buf((size_t)ROWS * N), *w = buf(N), *ref = buf((size_t)ROWS * N);
    fill(x, (size_t)ROWS * N, 4, -8, 16);
    fill(w, N, 5, -4, 16);
    rmsnorm_rows_naive(ref, x, w, ROWS, N, (real)1e-6);
    int differ_norm = 0;
    for (int r = 0; r < ROWS; r++) {
        const real *x_r = x + (size_t)r * N;
        real p[8] = {0};
        for (int i = 0; i < N; i++) p[i % 8] += x_r[i] * x_r[i];
        real ss = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
        real inv = (real)1 / (real)sqrt((double)(ss / (real)N + (real)1e-6));
        for (int i = 0; i < N; i++) {
            real o = w[i] * (x_r[i] * inv);
            differ_norm += memcmp(&o, &ref[(size_t)r * N + i], sizeof o) != 0;
        }
    }
    assert_true(differ_norm > 0);
    free(x); free(w); free(ref);
    free(q); free(key); free(value); free(out); free(sc); free(att);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_equals_reference_odd_shapes),
        cmocka_unit_test(test_attention_equals_reference_model_shapes),
        cmocka_unit_test(test_attention_non_finite_alike),
        cmocka_unit_test(test_rmsnorm_rows_equals_reference),
        cmocka_unit_test(test_rope_equals_reference),
        cmocka_unit_test(test_another_order_gives_other_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
