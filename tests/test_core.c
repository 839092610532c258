/* tests/test_core.c - kernels, the generate loop and the loader.
 * Expectations come from hand computation, from the walkthrough, or from a
 * second computation (target-only decoding), never from a stored run. */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"
#include "tests/sampleutil.h"

#define RANDOM_SET "toy_weights/random"

/* ---- kernels ------------------------------------------------------------ */

static void test_rmsnorm_hand_computed(void **state) {
    (void)state;
    real x[2] = {3, 4}, w[2] = {1, 2}, out[2];
    rmsnorm(out, x, w, 2, 0);
    /* mean(x^2) = 12.5 -> out = w * x / sqrt(12.5) */
    assert_float_equal(out[0], 3 / sqrt(12.5), 1e-6);
    assert_float_equal(out[1], 8 / sqrt(12.5), 1e-6);
    rmsnorm(out, x, w, 2, 1.0);  /* eps inside the sqrt */
    assert_float_equal(out[0], 3 / sqrt(13.5), 1e-6);
}

static void test_softmax_hand_computed(void **state) {
    (void)state;
    real x[3] = {0, (real)log(2.0), (real)log(3.0)};
    softmax(x, 3);
    assert_float_equal(x[0], 1.0 / 6, 1e-6);
    assert_float_equal(x[1], 2.0 / 6, 1e-6);
    assert_float_equal(x[2], 3.0 / 6, 1e-6);
    real big[2] = {1000, 1000};  /* max subtraction keeps it finite */
    softmax(big, 2);
    assert_float_equal(big[0], 0.5, 1e-7);
}

static void test_argmax_first_index_on_ties(void **state) {
    (void)state;
    real x[5] = {1, 3, 2, 3, 3};
    assert_int_equal(argmax(x, 5), 1);
    real z[4] = {0, 0, 0, 0};
    assert_int_equal(argmax(z, 4), 0);
}

static void test_rope_half_split_hand_computed(void **state) {
    (void)state;
    /* head_dim 4, theta 100: inv_freq = [1, 1/10]. Pairs are (0,2) and (1,3):
     * the Hugging Face half split, not (0,1),(2,3). Position 2: angles 2, 0.2. */
    real inv[2], ang[2], c[4], s[4], out[4];
    real x[4] = {1, 2, 3, 4};
    int pos = 2;
    rope_inv_freq(inv, 4, 100.0);
    assert_float_equal(inv[0], 1.0, 1e-7);
    assert_float_equal(inv[1], 0.1, 1e-7);
    rope_cos_sin(ang, c, s, &pos, 1, inv, 4);
    assert_float_equal(ang[0], 2.0, 1e-6);
    assert_float_equal(ang[1], 0.2, 1e-6);
    rope_apply(out, x, c, s, 4);
    assert_float_equal(out[0], 1 * cos(2.0) - 3 * sin(2.0), 1e-5);
    assert_float_equal(out[2], 3 * cos(2.0) + 1 * sin(2.0), 1e-5);
    assert_float_equal(out[1], 2 * cos(0.2) - 4 * sin(0.2), 1e-5);
    assert_float_equal(out[3], 4 * cos(0.2) + 2 * sin(0.2), 1e-5);
}

static real dot64(const real *a, const real *b) {
    real s = 0;
    for (int i = 0; i < 64; i++) s += a[i] * b[i];
    return s;
}

/* The draft's case: cos/sin for 7 positions 0..6; queries take the LAST 4
 * rows (positions 3..6), keys all 7. q5.k2 must equal the same vectors at
 * positions 3 and 0 (distance 3), and differ from distance 0 (the bug of
 * giving queries positions 0..3). */
static void test_rope_relative_positions_with_last_rows_for_q(void **state) {
    (void)state;
    real inv[32], ang[7 * 32], c[7 * 64], s[7 * 64];
    int pos[7] = {0, 1, 2, 3, 4, 5, 6};
    rope_inv_freq(inv, 64, 1e6);
    rope_cos_sin(ang, c, s, pos, 7, inv, 64);
    real q[64], k[64], qr[64], kr[64], qr2[64], kr2[64];
    uint64_t z = 12345;
    for (int i = 0; i < 64; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        q[i] = (real)((double)(z >> 40) / (1 << 24) - 0.5);
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        k[i] = (real)((double)(z >> 40) / (1 << 24) - 0.5);
    }
    int q_len = 4, P = 7;
    int qrow = P - q_len + 2;  /* the third query row: position 5 */
    rope_apply(qr, q, c + qrow * 64, s + qrow * 64, 64);
    rope_apply(kr, k, c + 2 * 64, s + 2 * 64, 64);
    real d52 = dot64(qr, kr);
    rope_apply(qr2, q, c + 3 * 64, s + 3 * 64, 64);   /* q at 3, k at 0 */
    rope_apply(kr2, k, c + 0 * 64, s + 0 * 64, 64);
    assert_float_equal(d52, dot64(qr2, kr2), 1e-5);
    rope_apply(qr2, q, c + 6 * 64, s + 6 * 64, 64);   /* q at 6, k at 3 */
    rope_apply(kr2, k, c + 3 * 64, s + 3 * 64, 64);
    assert_float_equal(d52, dot64(qr2, kr2), 1e-5);
    /* distance 0 gives a different score */
    rope_apply(kr2, k, c + 5 * 64, s + 5 * 64, 64);
    assert_true(fabs((double)(d52 - dot64(qr, kr2))) > 1e-3);
}

/* matmul: against a naive triple loop in double, and a token's row is the
 * same bits alone or inside a block of any size (the lossless property). */
static void test_matmul_matches_naive_and_is_block_invariant(void **state) {
    (void)state;
    enum { T = 11, IN = 37, OUT = 13 };
    real x[T * IN], w[OUT * IN], out[T * OUT], one[OUT];
    for (int i = 0; i < T * IN; i++) x[i] = (real)sin(i * 0.37);
    for (int i = 0; i < OUT * IN; i++) w[i] = (real)cos(i * 0.11);
    matmul(out, x, w, T, IN, OUT);
    for (int t = 0; t < T; t++)
        for (int o = 0; o < OUT; o++) {
            double ref = 0;
            for (int i = 0; i < IN; i++) ref += (double)x[t * IN + i] * w[o * IN + i];
            assert_float_equal(out[t * OUT + o], ref, 1e-4);
        }
    for (int t = 0; t < T; t++) {
        matmul(one, x + t * IN, w, 1, IN, OUT);
        assert_memory_equal(one, out + t * OUT, sizeof one);
    }
}

/* ---- the acceptance rule (walkthrough Step 6) ---------------------------- */

static void test_acceptance_walkthrough_example(void **state) {
    (void)state;
    /* ids stand for words: on=1 the=2 mat=3 .=4 in=5 a=6 */
    int block[4] = {1, 2, 3, 4};       /* ["on", "the", "mat", "."] */
    int posterior[4] = {2, 3, 5, 6};   /* ["the", "mat", "in", ...] */
    int match[3], cum[3];
    assert_int_equal(acceptance_length(block, posterior, 4, match, cum), 2);
    int want_match[3] = {1, 1, 0}, want_cum[3] = {1, 1, 0};
    assert_memory_equal(match, want_match, sizeof match);
    assert_memory_equal(cum, want_cum, sizeof cum);
    /* a later match does not count after a mismatch: [1,0,1] -> [1,0,0] -> 1 */
    int post2[4] = {2, 9, 4, 6};
    assert_int_equal(acceptance_length(block, post2, 4, match, cum), 1);
    assert_int_equal(cum[2], 0);
    /* all accepted */
    int post3[4] = {2, 3, 4, 6};
    assert_int_equal(acceptance_length(block, post3, 4, match, cum), 3);
    /* block size 1: nothing to accept */
    assert_int_equal(acceptance_length(block, post3, 1, match, cum), 0);
}

/* ---- KV cache ------------------------------------------------------------- */

static void test_kv_crop_keeps_first_positions(void **state) {
    (void)state;
    Config c = {0};
    c.num_hidden_layers = 2; c.num_key_value_heads = 2; c.head_dim = 2;
    KVCache kv;
    assert_int_equal(cache_init(&kv, &c, 16), 0);
    real k[10 * 4], v[10 * 4];   /* 10 rows of Hkv*d = 4 */
    for (int i = 0; i < 40; i++) { k[i] = (real)i; v[i] = (real)(100 + i); }
    cache_append(&kv, 0, k, v, 10);
    cache_append(&kv, 1, k, v, 10);
    kv.len = 10;
    cache_crop(&kv, 6);
    assert_int_equal(kv.len, 6);
    cache_crop(&kv, 12);            /* crop never grows */
    assert_int_equal(kv.len, 6);
    /* position 5 of KV head 1 in layer 1 is row 5, dims 2..3 */
    assert_float_equal(cache_key(&kv, 1, 1)[5 * 2 + 0], 5 * 4 + 2, 0);
    assert_float_equal(cache_value(&kv, 1, 1)[5 * 2 + 1], 100 + 5 * 4 + 3, 0);
    /* the next append lands at position 6 */
    real k2[4] = {-1, -2, -3, -4};
    cache_append(&kv, 0, k2, k2, 1);
    assert_float_equal(cache_key(&kv, 0, 0)[6 * 2], -1, 0);
    assert_float_equal(cache_key(&kv, 0, 1)[6 * 2 + 1], -4, 0);
    assert_float_equal(cache_key(&kv, 0, 0)[5 * 2], 5 * 4, 0);
    cache_free(&kv);
}

/* ---- models: the random set ---------------------------------------------- */

typedef struct {
    Model target, draft;
} Pair;

static int setup_pair(void **state) {
    Pair *p = calloc(1, sizeof *p);
    if (!p) return -1;
    if (model_load(&p->target, RANDOM_SET "/target", 0) != 0 || model_load(&p->draft, RANDOM_SET "/draft", 1) != 0) {
        fprintf(stderr, "cannot load the random set (run make first): %s\n", dflash_errmsg);
        free(p);
        return -1;
    }
    *state = p;
    return 0;
}

static int teardown_pair(void **state) {
    Pair *p = *state;
    if (!p) return 0;
    model_free(&p->target);
    model_free(&p->draft);
    free(p);
    return 0;
}

/* prompts drawn from the vocabulary by a fixed LCG (not from a run) */
static int make_prompt(int k, int V, int mask, int *ids) {
    uint64_t z = 0x1234567ull + (uint64_t)k * 7919;
    int n = 1 + k % 6;
    for (int i = 0; i < n; i++) {
        do {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int)((z >> 33) % (uint64_t)V);
        } while (ids[i] == mask);
    }
    return n;
}

/* Lossless: greedy DFlash == target-only greedy, for every block size 1..8,
 * token for token, on 20 prompts with DFLASH_TEST_LONG (make test-long); in
 * make test every block size once, over the shortest and the longest of
 * them (k = 0: 1 token, blocks 1, 2, 3, 8; k = 5: 6 tokens, blocks 4..7). */
static void test_lossless_random_set(void **state) {
    Pair *p = *state;
    int V = p->target.cfg.vocab_size, mask = p->draft.cfg.mask_token_id;
    static const int subset[] = {0, 5};
    int n_prompts = tu_long() ? 20 : 2;
    for (int q = 0; q < n_prompts; q++) {
        int k = tu_long() ? q : subset[q];
        int ids[8];
        int n = make_prompt(k, V, mask, ids);
        GenParams gp = {0};
        gp.max_new_tokens = 8;
        gp.block_size = 1;
        GenResult ar;
        assert_int_equal(ar_generate(&p->target, ids, n, &gp, &ar), 0);
        assert_int_equal(ar.n_output, n + 8);
        for (int B = 1; B <= 8; B++) {
            if (!tu_long() && (k == 0) != (B <= 3 || B == 8)) continue;   /* make test: each B once */
            gp.block_size = B;
            GenResult r;
            assert_int_equal(dflash_generate(B > 1 ? &p->draft : NULL, &p->target, ids, n, &gp, &r), 0);
            if (r.n_output != ar.n_output || memcmp(r.output_ids, ar.output_ids, sizeof(int) * (size_t)r.n_output))
                fail_msg("prompt %d block %d: DFlash output differs from target-only decoding", k, B);
            /* every verification accepts at least one token (the bonus) */
            assert_true(r.target_forwards <= 1 + 8);
            gen_result_free(&r);
        }
        gen_result_free(&ar);
    }
}

/* hidden_states[L] is post-norm: it equals model.norm(raw last layer output),
 * and differs from the raw output; hidden_states[0] is the embedding. */
static void test_hidden_states_last_entry_is_post_norm(void **state) {
    Pair *p = *state;
    const Config *c = &p->target.cfg;
    int ids[3] = {2, 3, 4}, D = c->hidden_size, L = c->num_hidden_layers;
    KVCache kv;
    TargetRun tr;
    assert_int_equal(cache_init(&kv, c, 8), 0);
    assert_int_equal(target_run_init(&tr, c, 3, 8), 0);
    TraceCtx tcx = {0};
    target_forward(&p->target, &kv, &tr, ids, 3, 2, &tcx);
    assert_int_equal(kv.len, 3);
    real *normed = malloc(sizeof(real) * 3 * D);
    rmsnorm_rows(normed, tr.h, p->target.norm, 3, D, (real)c->rms_norm_eps);  /* tr.h: raw output of layer L-1 */
    assert_memory_equal(normed, hidden_state(&tr, c, L, 3), sizeof(real) * 3 * D);
    assert_memory_not_equal(tr.h, hidden_state(&tr, c, L, 3), sizeof(real) * 3 * D);
    assert_memory_equal(hidden_state(&tr, c, 0, 3) + D, p->target.embed_tokens + 3 * D, sizeof(real) * D);
    /* layer outputs differ from each other (the layers do work) */
    assert_memory_not_equal(hidden_state(&tr, c, 4, 3), hidden_state(&tr, c, 8, 3), sizeof(real) * D);
    free(normed);
    cache_free(&kv);
    target_run_free(&tr);
}

/* A token's logits are the same bits whether it is verified alone (one
 * token per forward, as autoregressive decoding does) or inside a block of
 * any size: what makes greedy DFlash exactly lossless here. */
static void test_logits_bit_identical_alone_or_in_block(void **state) {
    Pair *p = *state;
    const Config *c = &p->target.cfg;
    int V = c->vocab_size, prompt[3] = {2, 3, 4}, block[8] = {5, 6, 7, 8, 9, 10, 11, 12};
    KVCache kv;
    TargetRun tr;
    assert_int_equal(cache_init(&kv, c, 16), 0);
    assert_int_equal(target_run_init(&tr, c, 8, 16), 0);
    target_forward(&p->target, &kv, &tr, prompt, 3, 2, NULL);
    real alone[8][64];
    assert_true(V <= 64);
    /* one token at a time: block[i] at position 3 + i */
    for (int i = 0; i < 8; i++) {
        target_forward(&p->target, &kv, &tr, &block[i], 1, 0, NULL);
        memcpy(alone[i], tr.logits, sizeof(real) * (size_t)V);
    }
    for (int T = 2; T <= 8; T++) {
        cache_crop(&kv, 3);
        target_forward(&p->target, &kv, &tr, block, T, 0, NULL);   /* the block at positions 3..3+T-1 */
        for (int i = 0; i < T; i++)
            if (memcmp(alone[i], tr.logits + (size_t)i * V, sizeof(real) * (size_t)V) != 0)
                fail_msg("block of %d: row %d differs from the same token computed alone", T, i);
    }
    cache_free(&kv);
    target_run_free(&tr);
}

/* extract_context_feature: row t, block j = hidden_states[ids[j] + 1][r0 + t] */
static void test_extract_context_feature_offset(void **state) {
    (void)state;
    Config c = {0};
    c.hidden_size = 2; c.num_hidden_layers = 4;
    TargetRun tr = {0};
    int T = 3;
    tr.hidden_states = calloc((size_t)(c.num_hidden_layers + 1) * T * 2, sizeof(real));
    for (int i = 0; i <= 4; i++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < 2; j++) hidden_state(&tr, &c, i, T)[t * 2 + j] = (real)(100 * i + 10 * t + j);
    int layer_ids[2] = {0, 3};
    real th[2 * 4];
    extract_context_feature(th, &tr, &c, layer_ids, 2, T, 1, 2);  /* rows 1..2 */
    /* row 0 (= hidden row 1): [hs[1][1], hs[4][1]] = [110 111 410 411] */
    real want[8] = {110, 111, 410, 411, 120, 121, 420, 421};
    assert_memory_equal(th, want, sizeof want);
    free(tr.hidden_states);
}

/* Stop handling: with stop id s, the output is the target-only output cut
 * right after the first s among the new tokens. */
static void test_stop_id_cuts_after_first_occurrence(void **state) {
    Pair *p = *state;
    int ids[2] = {5, 9};
    GenParams gp = {0};
    gp.max_new_tokens = 12;
    gp.block_size = 1;
    GenResult ar;
    assert_int_equal(ar_generate(&p->target, ids, 2, &gp, &ar), 0);
    int pick = ar.output_ids[2 + 4];          /* the 5th new token as stop id */
    int first = 2 + 4;
    for (int i = 2; i < ar.n_output; i++) if (ar.output_ids[i] == pick) { first = i; break; }
    gp.n_stop = 1;
    gp.stop_ids[0] = pick;
    for (int B = 1; B <= 6; B++) {
        gp.block_size = B;
        GenResult r;
        assert_int_equal(dflash_generate(B > 1 ? &p->draft : NULL, &p->target, ids, 2, &gp, &r), 0);
        assert_int_equal(r.n_output, first + 1);
        assert_memory_equal(r.output_ids, ar.output_ids, sizeof(int) * (size_t)(first + 1));
        gen_result_free(&r);
    }
    gen_result_free(&ar);
}

/* Without a stop id the output has exactly min(start+1, max_length) =
 * n + max_new tokens, even when the last block runs past max_length: every
 * max_new 0..7 and block 1..5 with DFLASH_TEST_LONG (make test-long); in
 * make test max_new 0, 1, 3, 4, 7 (none, one, below, at and past the block,
 * several rounds) with blocks 1, 3, 4, 5. */
static void test_output_length_is_max_length(void **state) {
    Pair *p = *state;
    int ids[3] = {1, 2, 3};
    for (int max_new = 0; max_new <= 7; max_new++)
        for (int B = 1; B <= 5; B++) {
            if (!tu_long() && (max_new == 2 || max_new == 5 || max_new == 6 || B == 2)) continue;
            GenParams gp = {0};
            gp.max_new_tokens = max_new;
            gp.block_size = B;
            GenResult r;
            assert_int_equal(dflash_generate(B > 1 ? &p->draft : NULL, &p->target, ids, 3, &gp, &r), 0);
            assert_int_equal(r.n_output, 3 + max_new);
            assert_memory_equal(r.output_ids, ids, sizeof ids);
            gen_result_free(&r);
        }
}

/* A new token equal to the mask id is output like any other. With the final
 * norm weight zeroed every logit is 0, argmax takes the first index, 0; with
 * mask_token_id set to 0 every new token is the mask id, and all are kept. */
static void test_mask_id_output_is_kept(void **state) {
    Pair *p = *state;
    int D = p->target.cfg.hidden_size;
    real *saved = malloc(sizeof(real) * D);
    memcpy(saved, p->target.norm, sizeof(real) * D);
    memset(p->target.norm, 0, sizeof(real) * D);
    int saved_mask = p->draft.cfg.mask_token_id;
    p->draft.cfg.mask_token_id = 0;
    int ids[2] = {3, 4};
    GenParams gp = {0};
    gp.max_new_tokens = 6;
    gp.block_size = 4;
    GenResult r;
    int rc = dflash_generate(&p->draft, &p->target, ids, 2, &gp, &r);
    memcpy(p->target.norm, saved, sizeof(real) * D);
    p->draft.cfg.mask_token_id = saved_mask;
    free(saved);
    assert_int_equal(rc, 0);
    assert_int_equal(r.n_output, 8);
    for (int i = 2; i < 8; i++) assert_int_equal(r.output_ids[i], 0);
    gen_result_free(&r);
}

/* Round bookkeeping: start advances by acc+1, caches are cropped to start,
 * the draft cache holds the prompt after round 1 and grows by acc+1. */
static void test_round_bookkeeping(void **state) {
    Pair *p = *state;
    int ids[4] = {7, 8, 9, 10};
    GenParams gp = {0};
    gp.max_new_tokens = 12;
    gp.block_size = 4;
    GenResult r;
    assert_int_equal(dflash_generate(&p->draft, &p->target, ids, 4, &gp, &r), 0);
    assert_true(r.n_rounds >= 3);
    int start = 4, draft_len = 0;
    for (int i = 0; i < r.n_rounds; i++) {
        const RoundInfo *ri = &r.rounds[i];
        assert_int_equal(ri->start_before, start);
        assert_int_equal(ri->draft_cache_before, draft_len);
        assert_int_equal(ri->draft_cache_after, start);   /* crop(start) */
        start += ri->acceptance_length + 1;
        assert_int_equal(ri->start_after, start);
        assert_int_equal(ri->target_cache_after, start);
        draft_len = ri->draft_cache_after;
        assert_int_equal(ri->block_in[0], r.n_output > ri->start_before ? r.output_ids[ri->start_before] : ri->block_in[0]);
        for (int j = 1; j < 4; j++) assert_int_equal(ri->block_in[j], p->draft.cfg.mask_token_id);
    }
    assert_int_equal(r.target_forwards, 1 + r.n_rounds);
    gen_result_free(&r);
}

/* ---- sampling with temperature: lossless in distribution ----------------
 * With T > 0 no C program can match torch.multinomial draw for draw, so the
 * property is checked statistically: over many seeds, the first two new
 * tokens of DFlash (block 2 and 3) and of target-only decoding follow the
 * exact target distribution P(t1) P(t2 | t1), computed here from softmax of
 * the target's logits. Tiny model (testutil.h), lm_head sharpened so the
 * distribution is far from uniform and the draft disagrees often. */
/* the exact distribution and the chi-square: tests/sampleutil.h (test_lookup.c
 * and test_learned.c use them too) */

/* 3000 seeds per mode with DFLASH_TEST_LONG (make test-long), 600 in make
 * test. Both fail when sample_row's uniform draw is scaled by 0.9 (a
 * biased sampler); only the 3000-seed run catches a 0.95 scaling. */
static void test_temperature_sampling_is_lossless_in_distribution(void **state) {
    (void)state;
    Model t, d;
    char *dir = tu_load_tiny_pair(&t, &d);
    /* sharpen: logits = 40 * lm_head . h, with a different row pattern per token */
    for (int v = 0; v < TU_V; v++)
        for (int i = 0; i < TU_D; i++) t.lm_head[v * TU_D + i] = (real)(4.0 * sin(1.7 * v + 0.9 * i));
    int prompt[2] = {0, 1}, N = tu_long() ? 3000 : 600;   /* seeds per mode */
    int accepted[3], rejected[3];   /* AR, DFlash B=2, DFlash B=3 */
    tu_assert_modes_fit(&d, &t, prompt, 2, 1.0, 2, N, 1, accepted, rejected);
    /* the draft path was exercised: some, not all, proposals accepted */
    for (int mode = 1; mode < 3; mode++) assert_true(accepted[mode] > 0 && accepted[mode] < N * mode);
    model_free(&t);
    model_free(&d);
    tu_rmtree(dir);
    free(dir);
}

/* ---- the loader ----------------------------------------------------------- */

static void test_loader_round_trip(void **state) {
    (void)state;
    Model t, d;
    char *dir = tu_load_tiny_pair(&t, &d);
    assert_int_equal(check_pair(&t, &d), 0);
    /* tensor k of the writer holds tu_value(k, i): embed is 0, layer 0 q_proj is 2 */
    assert_float_equal(t.embed_tokens[13], tu_value(0, 13), 0);
    assert_float_equal(t.layers[0].q_proj[5], tu_value(2, 5), 0);
    assert_float_equal(t.lm_head[TU_V * TU_D - 1], tu_value(13, TU_V * TU_D - 1), 0);
    assert_float_equal(d.fc[3], tu_value(11, 3), 0);
    assert_int_equal(d.cfg.mask_token_id, 5);
    assert_int_equal(d.cfg.target_layer_ids[0], 0);
    model_free(&t);
    model_free(&d);
    tu_rmtree(dir);
    free(dir);
}

static void test_loader_rejects_wrong_shape_and_missing_tensor(void **state) {
    (void)state;
    char p[400], *dir = tu_tmpdir();
    assert_non_null(dir);
    tu_write_tiny_set(dir);
    TuModel m;
    tu_model_tensors(&m, 0);
    m.t[2].shape[0] = 4;  /* q_proj [8,8] claimed as [4,16]: same bytes, wrong shape */
    m.t[2].shape[1] = 16;
    snprintf(p, sizeof p, "%s/target/model.safetensors", dir);
    tu_write_safetensors(p, m.t, m.n);
    Model t;
    snprintf(p, sizeof p, "%s/target", dir);
    assert_int_equal(model_load(&t, p, 0), -1);
    assert_contains(dflash_errmsg, "model.layers.0.self_attn.q_proj.weight");
    assert_contains(dflash_errmsg, "[4, 16]");
    assert_contains(dflash_errmsg, "[8, 8]");
    m.t[2].shape[0] = 8;
    m.t[2].shape[1] = 8;
    snprintf(p, sizeof p, "%s/target/model.safetensors", dir);
    tu_write_safetensors(p, m.t, m.n - 1);  /* lm_head left out */
    snprintf(p, sizeof p, "%s/target", dir);
    assert_int_equal(model_load(&t, p, 0), -1);
    assert_contains(dflash_errmsg, "missing tensor \"lm_head.weight\"");
    tu_model_free(&m);
    tu_rmtree(dir);
    free(dir);
}

static void test_tokenizer(void **state) {
    (void)state;
    char p[400], *dir = tu_tmpdir();
    assert_non_null(dir);
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    tu_write_text(p, "The\ncat\nsat\n.\n<eos>\n");
    Vocab v;
    assert_int_equal(vocab_load(&v, p), 0);
    int ids[8], n;
    assert_int_equal(tokenize(&v, "  The cat\tsat.", ids, 8, &n), 0);
    int want[4] = {0, 1, 2, 3};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want, sizeof want);
    assert_int_equal(tokenize(&v, "The dog", ids, 8, &n), -1);
    assert_contains(dflash_errmsg, "\"dog\"");
    assert_contains(dflash_errmsg, "--ids");
    vocab_free(&v);
    tu_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest unit[] = {
        cmocka_unit_test(test_rmsnorm_hand_computed),
        cmocka_unit_test(test_softmax_hand_computed),
        cmocka_unit_test(test_argmax_first_index_on_ties),
        cmocka_unit_test(test_rope_half_split_hand_computed),
        cmocka_unit_test(test_rope_relative_positions_with_last_rows_for_q),
        cmocka_unit_test(test_matmul_matches_naive_and_is_block_invariant),
        cmocka_unit_test(test_acceptance_walkthrough_example),
        cmocka_unit_test(test_kv_crop_keeps_first_positions),
        cmocka_unit_test(test_temperature_sampling_is_lossless_in_distribution),
        cmocka_unit_test(test_extract_context_feature_offset),
        cmocka_unit_test(test_loader_round_trip),
        cmocka_unit_test(test_loader_rejects_wrong_shape_and_missing_tensor),
        cmocka_unit_test(test_tokenizer),
    };
    const struct CMUnitTest models[] = {
        cmocka_unit_test(test_hidden_states_last_entry_is_post_norm),
        cmocka_unit_test(test_logits_bit_identical_alone_or_in_block),
        cmocka_unit_test(test_output_length_is_max_length),
        cmocka_unit_test(test_stop_id_cuts_after_first_occurrence),
        cmocka_unit_test(test_mask_id_output_is_kept),
        cmocka_unit_test(test_round_bookkeeping),
        cmocka_unit_test(test_lossless_random_set),
    };
    int failed = cmocka_run_group_tests_name("core: kernels, acceptance, cache, loader", unit, NULL, NULL);
    failed += cmocka_run_group_tests_name("core: random set", models, setup_pair, teardown_pair);
    return failed ? 1 : 0;
}
