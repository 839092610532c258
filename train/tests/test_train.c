/* test_train.c - the training step (train/train.c) against independent
 * computations: central finite differences of the loss for every parameter
 * kind (the double build, tests/bin/test_train_double), the block mask from
 * the attention weights and from what the context can change, a tiny case
 * of labels, weights and loss worked by hand, AdamW against its textbook
 * formula, determinism, float against double, and a batch that overfits.
 *
 * The models are tiny (D 16, 2 heads over 1 KV head, a 4-layer target and
 * a 3-layer draft) and built here from a seed, so a check runs in
 * milliseconds; one test takes a step on the toy weights (their mapped,
 * read-only F32 tensors must become private copies). */
#include "dflash.c"
#include "formats/load.c"
#include "train/train.c"
#include "formats/tracenames.h"
#include "formats/files.h"
#include "formats/json.h"

#include "tests/testutil.h"

#include <math.h>

/* ---- the one PRNG (train/train.h): train_rng_seed, train_rng_next against
 * splitmix64 and xorshift64* written here from their definitions (Vigna),
 * and rng_uniform's value = the output's top 53 bits / 2^53 */
static void test_rng(void **state) {
    (void)state;
    uint64_t z = 12345 + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    uint64_t x = (z ^ (z >> 31)) | 1, s = train_rng_seed(12345);
    assert_true(s == x);
    Rng g = {s};
    for (int i = 0; i < 1000; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        uint64_t want = x * 2685821657736338717ull, got = train_rng_next(&s);
        assert_true(got == want && s == x);
        assert_true(rng_uniform(&g) == (double)(want >> 11) / 9007199254740992.0);
    }
}

/* ---- tiny models */
static double urand(uint64_t *z) {   /* [0, 1), an LCG: independent of train/train.c's PRNG */
    *z = *z * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*z >> 11) / 9007199254740992.0;
}

/* > 0: tiny drafts get sliding_attention layers 0 and 1 with this window
 * (layer 2 stays full_attention); the sliding tests set it and reset it */
static int g_tiny_window = 0;

static Config tiny_config(int draft) {
    Config c;
    memset(&c, 0, sizeof c);
    c.hidden_size = 16;
    c.intermediate_size = 24;
    c.num_hidden_layers = draft ? 3 : 4;
    c.num_attention_heads = 2;
    c.num_key_value_heads = 1;
    c.head_dim = 8;
    c.vocab_size = 20;
    c.max_position_embeddings = 256;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 10000.0;
    if (draft) {
        c.is_draft = 1;
        c.num_target_layers = 4;
        c.block_size = 4;
        c.mask_token_id = 1;
        c.n_target_layer_ids = 2;
        c.target_layer_ids[0] = 1;
        c.target_layer_ids[1] = 3;
        c.layer_window[0] = c.layer_window[1] = g_tiny_window;
        c.layer_causal[0] = c.layer_causal[1] = g_tiny_window > 0;
    }
    return c;
}

/* the next n weights of a buffer: uniform in +-0.4, or 1 +- 0.3 for a norm */
static real *take(real **p, size_t n, int norm, uint64_t *z) {
    real *dst = *p;
    for (size_t i = 0; i < n; i++) dst[i] = (real)(norm ? 1 + 0.6 * (urand(z) - 0.5) : 0.8 * (urand(z) - 0.5));
    *p += n;
    return dst;
}

/* a target with every weight uniform in +-scale (norms 1 +- 0.3) */
static void tiny_target(Model *m, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = tiny_config(0);
    const Config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim, V = c->vocab_size;
    int qd = c->num_attention_heads * d, kvd = c->num_key_value_heads * d;
    size_t per_layer = (size_t)2 * D + (size_t)qd * D + 2 * (size_t)kvd * D + (size_t)D * qd + 2 * (size_t)d +
                       3 * (size_t)I * D;
    size_t total = (size_t)2 * V * D + D + per_layer * c->num_hidden_layers;
    m->data = calloc(total, sizeof(real));
    m->layers = calloc(c->num_hidden_layers, sizeof(LayerWeights));
    m->inv_freq = calloc(d / 2, sizeof(real));
    assert_non_null(m->data);
    assert_non_null(m->layers);
    assert_non_null(m->inv_freq);
    real *p = m->data;
    uint64_t z = seed;
#define TAKE(dst, n, norm) (dst = take(&p, (n), (norm), &z))
    TAKE(m->embed_tokens, (size_t)V * D, 0);
    TAKE(m->lm_head, (size_t)V * D, 0);
    TAKE(m->norm, D, 1);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        LayerWeights *w = &m->layers[l];
        TAKE(w->input_layernorm, D, 1);
        TAKE(w->q_proj, (size_t)qd * D, 0);
        TAKE(w->k_proj, (size_t)kvd * D, 0);
        TAKE(w->v_proj, (size_t)kvd * D, 0);
        TAKE(w->o_proj, (size_t)D * qd, 0);
        TAKE(w->q_norm, d, 1);
        TAKE(w->k_norm, d, 1);
        TAKE(w->post_attention_layernorm, D, 1);
        TAKE(w->gate_proj, (size_t)I * D, 0);
        TAKE(w->up_proj, (size_t)I * D, 0);
        TAKE(w->down_proj, (size_t)D * I, 0);
    }
#undef TAKE
    rope_inv_freq(m->inv_freq, d, c->rope_theta);
}

/* a draft from train_init_draft, then every weight redrawn larger (the
 * N(0, 0.02) init gives gradients too small to check well) */
static void tiny_draft(Model *m, const Model *target, uint64_t seed, int big) {
    Config dc = tiny_config(1);
    assert_int_equal(train_init_draft(m, &dc, target, seed), 0);
    if (!big) return;
    TrainParam ps[64];
    int n = train_params(m, ps, 64);
    uint64_t z = seed ^ 0x5555;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < param_size(&ps[i]); j++)
            ps[i].data[j] = (real)(ps[i].ndim == 1 ? 1 + 0.6 * (urand(&z) - 0.5) : 0.8 * (urand(&z) - 0.5));
}

/* The checks' batch: 2 sequences of 12, 3 blocks of 4; sequence 1's last
 * block is not kept; a loss mask with holes; an anchor (10) whose block runs
 * past the end of the sequence; an anchor at 0 (no context at all). */
enum { GB = 2, GS = 12, GN = 3, GBLK = 4 };
static int g_ids[GB * GS], g_lm[GB * GS];
static const int g_anchors[GB * GN] = {0, 3, 10, 2, 5, 7};
static const int g_keep[GB * GN] = {1, 1, 1, 1, 1, 0};

static TrainBatch check_batch_(void) {
    uint64_t z = 99;
    for (int i = 0; i < GB * GS; i++) {
        g_ids[i] = 2 + (int)(urand(&z) * 18);
        g_lm[i] = (i % 5) != 3;
    }
    TrainBatch bt = {GB, GS, GN, GBLK, g_ids, g_lm, g_anchors, g_keep, NULL};
    return bt;
}

static TrainHyper hyper(double gamma) {
    TrainHyper hp = {1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0, gamma, 0, 0, 1};
    return hp;
}

/* ---- the gradient check */
#ifdef DFLASH_DOUBLE
static double loss_of(const Model *dm, const Model *tm, TrainState *st, const TrainBatch *bt, const TrainHyper *hp) {
    TrainStats s;
    assert_int_equal(train_loss_grad(dm, tm, st, bt, hp, 1, NULL, &s), 0);
    return s.loss;
}
#endif

/* the float binary's reason to skip a finite-difference check */
#define FD_IN_DOUBLE "finite differences need double precision: tests/bin/test_train_double runs this check"

static void gradcheck(double gamma) {
#ifndef DFLASH_DOUBLE
    (void)gamma;
    tu_skip(FD_IN_DOUBLE);
#else
    Model tm, dm;
    tiny_target(&tm, 7);
    tiny_draft(&dm, &tm, 11, 1);
    TrainState *st = train_state_new(&dm, &tm);
    assert_non_null(st);
    TrainBatch bt = check_batch_();
    TrainHyper hp = hyper(gamma);
    TrainStats s;
    assert_int_equal(train_loss_grad(&dm, &tm, st, &bt, &hp, 1, NULL, &s), 0);
    size_t total = st->offset[st->n];
    real *grad = malloc(sizeof(real) * total);
    assert_non_null(grad);
    memcpy(grad, st->grad, sizeof(real) * total);
    double worst = 0;
    const char *worst_key = "";
    int checked = 0;
    for (int i = 0; i < st->n; i++) {
        TrainParam *p = &st->params[i];
        size_t n = param_size(p);
        double gmax = 0;
        for (size_t j = 0; j < n; j++) gmax = fmax(gmax, fabs(grad[st->offset[i] + j]));
        assert_true(gmax > 0);   /* every tensor gets a gradient */
        /* 6 entries: the first, the last, 4 spread between */
        for (int e = 0; e < 6; e++) {
            size_t j = e == 0 ? 0 : e == 5 ? n - 1 : (size_t)((uint64_t)(e * 2654435761u + i * 97) % n);
            double x0 = p->data[j], h = 1e-5 * fmax(1.0, fabs(x0));
            p->data[j] = x0 + h;
            double fp = loss_of(&dm, &tm, st, &bt, &hp);
            p->data[j] = x0 - h;
            double fm = loss_of(&dm, &tm, st, &bt, &hp);
            p->data[j] = x0;
            double fd = (fp - fm) / (2 * h), an = grad[st->offset[i] + j];
            /* relative to the entry, floored at 1e-4 of the tensor's largest
             * gradient (an entry near 0 has only FD rounding left) */
            double rel = fabs(fd - an) / fmax(fmax(fabs(fd), fabs(an)), 1e-4 * gmax);
            if (rel > worst) { worst = rel; worst_key = p->key; }
            if (rel > 1e-6)
                fail_msg("%s[%zu]: analytic %.12g, finite differences %.12g (rel err %.3g)", p->key, j, an, fd, rel);
            checked++;
        }
    }
    print_message("gradient check (gamma %g): %d entries of %d tensors, worst rel err %.2e (%s)\n", gamma, checked,
                  st->n, worst, worst_key);
    free(grad);
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
#endif
}

static void test_gradcheck_gamma(void **state) { (void)state; gradcheck(7.0); }
static void test_gradcheck_no_gamma(void **state) { (void)state; gradcheck(0); }
/* layers 0 and 1 sliding_attention, window 3 < the block size 4: the
 * context window and the causal block of block_mask's window branch */
static void test_gradcheck_sliding(void **state) {
    (void)state;
    g_tiny_window = 3;
    gradcheck(7.0);
    g_tiny_window = 0;
}

/* ---- a hook that keeps copies of the traced tensors */
typedef struct {
    int n;
    char names[256][96];
    void *data[256];
    int is_int[256];
    int ndim[256];
    int64_t shape[256][TRACE_MAX_DIMS];
} Capture;

static int capture_shaped(void *ctx, const TraceTensor *t) {
    Capture *c = ctx;
    if (c->n >= 256) return 0;
    size_t count = 1, size = t->is_int ? sizeof(int64_t) : sizeof(real);
    for (int i = 0; i < t->ndim; i++) count *= (size_t)t->shape[i];
    assert_non_null(t->spec);
    int i = c->n++;
    snprintf(c->names[i], sizeof c->names[i], "%s", t->name);
    c->data[i] = malloc(count * size + 1);
    memcpy(c->data[i], t->data, count * size);
    c->is_int[i] = t->is_int;
    c->ndim[i] = t->ndim;
    memcpy(c->shape[i], t->shape, sizeof c->shape[i]);
    return 0;
}
static int capture_tensor(void *ctx, const TraceHand *hand) { return trace_shape_hand(hand, capture_shaped, ctx); }

static const void *captured(const Capture *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->names[i], name) == 0) return c->data[i];
    fail_msg("%s was not traced", name);
    return NULL;
}

static void capture_free(Capture *c) {
    for (int i = 0; i < c->n; i++) free(c->data[i]);
    c->n = 0;
}

/* ---- the mask, three ways */
static void test_mask(void **state) {
    (void)state;
    Model tm, dm;
    tiny_target(&tm, 7);
    tiny_draft(&dm, &tm, 11, 1);
    TrainState *st = train_state_new(&dm, &tm);
    assert_non_null(st);
    TrainBatch bt = check_batch_();
    TrainHyper hp = hyper(7);
    int S = GS, Q = GN * GBLK, P = S + Q, H = dm.cfg.num_attention_heads;
    /* 1. the attention weights of every layer and head: > 0 exactly on
     * context keys j < anchor and the block's own keys (all of them: no
     * causal mask), each row summing to 1; a block not kept: all 0 */
    TrainRun r;
    memset(&r, 0, sizeof r);
    Capture cap = {0};
    TraceHook hook = {capture_tensor, &cap};
    assert_int_equal(forward_backward(&dm, &tm, st, &bt, &hp, 1, &hook, NULL, &r), 0);
    const int64_t *traced_mask = captured(&cap, "train1.attn_mask");
    for (int bi = 0; bi < GB; bi++)
        for (int i = 0; i < Q; i++) {
            int n = i / GBLK, anchor = g_anchors[bi * GN + n], kept = g_keep[bi * GN + n];
            for (int l = 0; l < dm.cfg.num_hidden_layers; l++)
                for (int h = 0; h < H; h++) {
                    const real *a = r.layers[l].att + (((size_t)bi * H + h) * Q + i) * P;
                    double sum = 0;
                    for (int j = 0; j < P; j++) {
                        int want = kept && (j < S ? j < anchor : (j - S) >= n * GBLK && (j - S) < (n + 1) * GBLK);
                        if ((a[j] > 0) != want)
                            fail_msg("seq %d query %d (block %d, anchor %d, keep %d) layer %d head %d key %d: weight %g",
                                     bi, i, n, anchor, kept, l, h, j, (double)a[j]);
                        if (l == 0 && h == 0) assert_int_equal(traced_mask[((size_t)bi * Q + i) * P + j], want);
                        sum += a[j];
                    }
                    assert_true(fabs(sum - (kept ? 1.0 : 0.0)) < 1e-5);
                }
        }
    /* a block that is not kept: its attention output is 0 */
    for (int e = 0; e < dm.cfg.num_attention_heads * dm.cfg.head_dim; e++)
        assert_true(r.layers[0].attn[((size_t)1 * Q + 2 * GBLK) * dm.cfg.num_attention_heads * dm.cfg.head_dim + e] == 0);
    real *logits0 = malloc(sizeof(real) * (size_t)GB * Q * tm.cfg.vocab_size);
    memcpy(logits0, r.logits, sizeof(real) * (size_t)GB * Q * tm.cfg.vocab_size);
    run_free(&r);
    capture_free(&cap);
    /* 2. what the context can change: a token at position p changes the
     * target's hidden states at p.. only (it is causal), so it must change
     * the logits of exactly the blocks whose anchor is > p */
    for (int p = 1; p < S; p += 2) {
        int saved = g_ids[p];
        g_ids[p] = saved == 5 ? 6 : 5;
        memset(&r, 0, sizeof r);
        assert_int_equal(forward_backward(&dm, &tm, st, &bt, &hp, 1, NULL, NULL, &r), 0);
        for (int n = 0; n < GN; n++) {
            int anchor = g_anchors[n], V = tm.cfg.vocab_size, changed = 0;
            if (anchor == p) continue;   /* the anchor token itself is in the block */
            for (int k = 0; k < GBLK * V; k++) changed |= r.logits[(size_t)n * GBLK * V + k] != logits0[(size_t)n * GBLK * V + k];
            if (changed != (anchor > p)) fail_msg("token %d changed block %d (anchor %d): %d", p, n, anchor, changed);
        }
        run_free(&r);
        g_ids[p] = saved;
    }
    free(logits0);
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
}

/* ---- the sliding_attention layers' mask (window 3, block 4): every
 * attention weight of layers 0 and 1 is > 0 exactly where SpecForge's
 * create_dflash_sdpa_mask with sliding_window = 3 allows (written here from
 * its lines: a context key j < anchor with j >= anchor + q - (3 - 1), q the
 * query's block offset; a block key of its own block at offset <= q; a block
 * not kept: none), layer 2's where the block mask allows; the traced
 * attn_mask_sliding is that mask. */
static void test_mask_sliding(void **state) {
    (void)state;
    g_tiny_window = 3;
    Model tm, dm;
    tiny_target(&tm, 7);
    tiny_draft(&dm, &tm, 11, 1);
    g_tiny_window = 0;
    TrainState *st = train_state_new(&dm, &tm);
    assert_non_null(st);
    TrainBatch bt = check_batch_();
    TrainHyper hp = hyper(7);
    int S = GS, Q = GN * GBLK, P = S + Q, H = dm.cfg.num_attention_heads, w = 3, n_ctx_seen = 0, n_cut = 0;
    TrainRun r;
    memset(&r, 0, sizeof r);
    Capture cap = {0};
    TraceHook hook = {capture_tensor, &cap};
    assert_int_equal(forward_backward(&dm, &tm, st, &bt, &hp, 1, &hook, NULL, &r), 0);
    const int64_t *traced = captured(&cap, "train1.attn_mask_sliding"), *full = captured(&cap, "train1.attn_mask");
    for (int bi = 0; bi < GB; bi++)
        for (int i = 0; i < Q; i++) {
            int n = i / GBLK, q = i % GBLK, anchor = g_anchors[bi * GN + n], kept = g_keep[bi * GN + n];
            for (int j = 0; j < P; j++) {
                int ctx = j < S && j < anchor, own = j >= S && (j - S) / GBLK == n;
                int slide = kept && ((ctx && j >= anchor + q - (w - 1)) || (own && (j - S) % GBLK <= q));
                int block = kept && (ctx || own);
                n_ctx_seen += slide && j < S;
                n_cut += block && !slide;
                assert_int_equal(traced[((size_t)bi * Q + i) * P + j], slide);
                assert_int_equal(full[((size_t)bi * Q + i) * P + j], block);
                for (int l = 0; l < dm.cfg.num_hidden_layers; l++)
                    for (int h = 0; h < H; h++) {
                        const real *a = r.layers[l].att + (((size_t)bi * H + h) * Q + i) * P;
                        int want = l < 2 ? slide : block;
                        if ((a[j] > 0) != want)
                            fail_msg("seq %d query %d (anchor %d, offset %d) layer %d head %d key %d: weight %g",
                                     bi, i, anchor, q, l, h, j, (double)a[j]);
                    }
            }
        }
    assert_true(n_ctx_seen > 0 && n_cut > 0);   /* the window both lets context in and cuts some out */
    run_free(&r);
    capture_free(&cap);
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
}

/* ---- a window wider than every sequence (S + B) cuts no context key, so
 * the sliding layers' mask is the causal block mask: the run must give the
 * bits of the same draft with full_attention layers and --block-attention
 * causal (a second computation, through the other mask). All three layers
 * slide here (tiny drafts keep layer 2 full: set by hand). */
static void test_sliding_wide_window(void **state) {
    (void)state;
    Model tm, dm_s, dm_c;
    tiny_target(&tm, 7);
    g_tiny_window = GS + GBLK;
    tiny_draft(&dm_s, &tm, 11, 1);
    g_tiny_window = 0;
    dm_s.cfg.layer_window[2] = GS + GBLK, dm_s.cfg.layer_causal[2] = 1;
    tiny_draft(&dm_c, &tm, 11, 1);
    TrainState *st_s = train_state_new(&dm_s, &tm), *st_c = train_state_new(&dm_c, &tm);
    assert_non_null(st_s);
    assert_non_null(st_c);
    TrainBatch bt = check_batch_();
    TrainHyper hp_s = hyper(7), hp_c = hyper(7);
    hp_c.causal_block = 1;
    for (int step = 1; step <= 2; step++) {
        TrainStats a, b;
        assert_int_equal(train_step(&dm_s, &tm, st_s, &bt, &hp_s, step, NULL, &a), 0);
        assert_int_equal(train_step(&dm_c, &tm, st_c, &bt, &hp_c, step, NULL, &b), 0);
        assert_true(a.loss == b.loss && a.grad_norm == b.grad_norm);
        assert_memory_equal(st_s->grad, st_c->grad, sizeof(real) * st_s->offset[st_s->n]);
        assert_memory_equal(dm_s.data, dm_c.data, sizeof(real) * dm_s.n_params);
    }
    /* and the bidirectional block (the default) differs: the test can tell */
    TrainStats a, b;
    hp_c.causal_block = 0;
    assert_int_equal(train_loss_grad(&dm_s, &tm, st_s, &bt, &hp_s, 3, NULL, &a), 0);
    assert_int_equal(train_loss_grad(&dm_c, &tm, st_c, &bt, &hp_c, 3, NULL, &b), 0);
    assert_true(a.loss != b.loss);
    train_state_free(st_s);
    train_state_free(st_c);
    model_free(&dm_s);
    model_free(&dm_c);
    model_free(&tm);
}

/* ---- a case worked by hand: S 6, B 3, anchors 1 and 4, loss mask
 * 1 1 0 1 1 1, gamma 2:
 *   block 0 (anchor 1): k 0 the anchor (w 0); k 1 -> position 2, mask 0
 *     (w 0); k 2 -> position 3: w = exp(-(2-1)/2)
 *   block 1 (anchor 4): k 1 -> position 5: w = exp(0) = 1; k 2 -> position
 *     6 >= S: w 0, label clamped to input_ids[5]
 *   loss = (e^-0.5 ce(0,2) + ce(1,1)) / (e^-0.5 + 1 + 1e-6), with each ce
 *   recomputed here from the traced logits */
static double ce_by_hand(const real *row, int V, int label) {
    double mx = row[0], sum = 0;
    for (int j = 1; j < V; j++) mx = fmax(mx, row[j]);
    for (int j = 0; j < V; j++) sum += exp((double)row[j] - mx);
    return mx + log(sum) - row[label];
}

static void test_hand_case(void **state) {
    (void)state;
    Model tm, dm;
    tiny_target(&tm, 3);
    tiny_draft(&dm, &tm, 5, 1);
    TrainState *st = train_state_new(&dm, &tm);
    assert_non_null(st);
    int ids[6] = {4, 9, 13, 7, 11, 17}, lm[6] = {1, 1, 0, 1, 1, 1}, anchors[2] = {1, 4}, keep[2] = {1, 1};
    TrainBatch bt = {1, 6, 2, 3, ids, lm, anchors, keep, NULL};
    TrainHyper hp = hyper(2.0);
    Capture cap = {0};
    TraceHook hook = {capture_tensor, &cap};
    TrainStats s;
    assert_int_equal(train_step(&dm, &tm, st, &bt, &hp, 1, &hook, &s), 0);
    const int64_t *labels = captured(&cap, "train1.labels"), *noise = captured(&cap, "train1.noise_ids");
    const int64_t *pos = captured(&cap, "train1.position_ids");
    const real *w = captured(&cap, "train1.loss_weights"), *ce = captured(&cap, "train1.ce");
    const real *logits = captured(&cap, "train1.logits");
    int want_labels[6] = {9, 13, 7, 11, 17, 17}, want_noise[6] = {9, 1, 1, 11, 1, 1};
    int want_pos[12] = {0, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 6};
    double e = exp(-0.5), want_w[6] = {0, 0, e, 0, 1, 0};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(labels[i], want_labels[i]);
        assert_int_equal(noise[i], want_noise[i]);
        assert_true(fabs((double)w[i] - want_w[i]) < 1e-7);
        assert_true(fabs((double)ce[i] - ce_by_hand(logits + (size_t)i * 20, 20, want_labels[i])) < 1e-5);
    }
    for (int i = 0; i < 12; i++) assert_int_equal(pos[i], want_pos[i]);
    double loss = (e * ce_by_hand(logits + 2 * 20, 20, 7) + ce_by_hand(logits + 4 * 20, 20, 17)) / (e + 1 + 1e-6);
    assert_true(fabs(s.loss - loss) < 1e-5 * loss);
    assert_true(fabs((double)*(const real *)captured(&cap, "train1.loss") - loss) < 1e-5 * loss);
    int correct = (argmax(logits + 2 * 20, 20) == 7) + (argmax(logits + 4 * 20, 20) == 17);
    assert_true(fabs(s.accuracy - correct / (2 + 1e-6)) < 1e-6);
    assert_int_equal(s.n_weighted, 2);
    /* every traced name matches exactly one row of the training table, every
     * row is used, and the 0-d rows are 0-d */
    for (int i = 0; i < cap.n; i++) {
        int rows = 0;
        for (int j = 0; j < dflash_n_train_trace_names; j++)
            rows += trace_name_matches(dflash_train_trace_names[j].pattern, cap.names[i], tm.cfg.num_hidden_layers);
        if (rows != 1) fail_msg("%s matches %d rows of dflash_train_trace_names", cap.names[i], rows);
        assert_int_equal(cap.ndim[i] == 0, dflash_trace_name(cap.names[i], tm.cfg.num_hidden_layers)->shape[0] == 0);
    }
    for (int j = 0; j < dflash_n_train_trace_names; j++) {
        int used = 0;
        for (int i = 0; i < cap.n; i++)
            used += trace_name_matches(dflash_train_trace_names[j].pattern, cap.names[i], tm.cfg.num_hidden_layers);
        if (strcmp(dflash_train_trace_names[j].pattern, "train{s}.attn_mask_sliding") == 0) {
            assert_int_equal(used, 0);   /* a draft without sliding layers (test_sliding_oracle_parity: with) */
            continue;
        }
        if (!used) fail_msg("row %s: no traced name", dflash_train_trace_names[j].pattern);
    }
    assert_int_equal(cap.n, 20 + 36 + 1 + 36);   /* the forward (3 layers), 36 grads, grad_norm, 36 params */
    capture_free(&cap);
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
}

/* ---- AdamW against its formula (Loshchilov & Hutter; torch.optim.AdamW):
 * g <- g min(1, c / (|g| + 1e-6)); p <- p (1 - lr wd); m <- b1 m + (1-b1) g;
 * v <- b2 v + (1-b2) g^2; p <- p - lr mhat / (sqrt(vhat) + eps), with
 * mhat = m / (1 - b1^t), vhat = v / (1 - b2^t); in double, here. */
static void adamw_case(double wd, double clip) {
    Model tm, dm;
    tiny_target(&tm, 3);
    tiny_draft(&dm, &tm, 5, 1);
    TrainState *st = train_state_new(&dm, &tm);
    assert_non_null(st);
    size_t total = st->offset[st->n];
    double *p = calloc(total, sizeof(double)), *m = calloc(total, sizeof(double)), *v = calloc(total, sizeof(double));
    for (size_t i = 0; i < total; i++) p[i] = dm.data[i];
    TrainHyper hp = {3e-3, 0.8, 0.95, 1e-8, wd, clip, 0, 0, 0, 1};
    uint64_t z = 42;
    for (int t = 1; t <= 5; t++) {
        double norm = 0;
        for (size_t i = 0; i < total; i++) {
            st->grad[i] = (real)((urand(&z) - 0.5) * (t == 3 ? 10 : 0.1));   /* step 3 is clipped */
            norm += (double)st->grad[i] * st->grad[i];
        }
        norm = sqrt(norm);
        hp.lr = 3e-3 / t;
        double c = clip > 0 ? fmin(1.0, clip / (norm + 1e-6)) : 1.0;
        for (size_t i = 0; i < total; i++) {
            double g = st->grad[i] * c;
            p[i] *= 1 - hp.lr * wd;
            m[i] = hp.beta1 * m[i] + (1 - hp.beta1) * g;
            v[i] = hp.beta2 * v[i] + (1 - hp.beta2) * g * g;
            double mhat = m[i] / (1 - pow(hp.beta1, t)), vhat = v[i] / (1 - pow(hp.beta2, t));
            p[i] -= hp.lr * mhat / (sqrt(vhat) + hp.eps);
        }
        train_update(st, &hp, norm);
        double worst = 0;
        for (size_t i = 0; i < total; i++) worst = fmax(worst, fabs(dm.data[i] - p[i]) / fmax(fabs(p[i]), 1e-3));
        if (worst > (sizeof(real) == 8 ? 1e-12 : 1e-5))
            fail_msg("wd %g clip %g step %d: worst rel err %g", wd, clip, t, worst);
    }
    free(p); free(m); free(v);
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
}

static void test_adamw(void **state) {
    (void)state;
    adamw_case(0, 0);
    adamw_case(0.1, 0);
    adamw_case(0, 1.0);
    adamw_case(0.1, 1.0);
}

/* ---- the anchor rule */
static void test_anchors(void **state) {
    (void)state;
    int lm[3 * 16];
    for (int i = 0; i < 48; i++) lm[i] = i < 16 ? 1 : i < 32 ? (i % 3 == 0) : (i == 40 || i == 41);
    /* candidates 0..S-B = 0..12: sequence 0 has 13, sequence 1 has 5 (33, 36,
     * 39, 42, 45 -> positions 1, 4, 7, 10, 13: 13 is past 12, so 4), sequence 2 has 2 */
    assert_int_equal(train_anchor_count(lm, 3, 16, 4, 100), 12);   /* min(100, 13 - 1) */
    assert_int_equal(train_anchor_count(lm, 3, 16, 4, 6), 6);
    int none[16] = {0};
    assert_int_equal(train_anchor_count(none, 1, 16, 4, 6), -1);
    uint64_t rng = train_rng_seed(1), rng2 = train_rng_seed(1);
    int a[6], k[6], a2[6], k2[6];
    int counts[13] = {0};
    for (int rep = 0; rep < 2000; rep++)
        for (int sq = 0; sq < 3; sq++) {
            int kept = train_draw_anchors(&rng, lm + sq * 16, 16, 4, 6, a, k);
            assert_int_equal(kept, sq == 0 ? 6 : sq == 1 ? 4 : 2);
            assert_int_equal(train_draw_anchors(&rng2, lm + sq * 16, 16, 4, 6, a2, k2), kept);
            assert_memory_equal(a, a2, sizeof a);   /* the same seed, the same draws */
            for (int i = 0; i < 6; i++) {
                assert_int_equal(k[i], i < kept);
                if (i >= kept) { assert_int_equal(a[i], 0); continue; }
                assert_true(a[i] <= 12 && lm[sq * 16 + a[i]] == 1);
                if (i) assert_true(a[i] > a[i - 1]);   /* sorted, no repeats */
                if (sq == 0) counts[a[i]]++;
            }
        }
    /* uniform: each of the 13 candidates is drawn 6/13 of the time */
    for (int p = 0; p < 13; p++) assert_true(fabs(counts[p] / 2000.0 - 6.0 / 13) < 0.05);
}

/* ---- determinism, and a fixed batch that overfits */
static double run_steps(int n_steps, double lr, real **params_out, size_t *n_out) {
    Model tm, dm;
    tiny_target(&tm, 7);
    tiny_draft(&dm, &tm, 11, 0);
    TrainState *st = train_state_new(&dm, &tm);
    assert_non_null(st);
    TrainBatch bt = check_batch_();
    TrainHyper hp = {lr, 0.9, 0.999, 1e-8, 0.0, 1.0, 7.0, 0, 0, 1};
    TrainStats s = {0}, first = {0};
    for (int t = 1; t <= n_steps; t++) {
        assert_int_equal(train_step(&dm, &tm, st, &bt, &hp, t, NULL, &s), 0);
        if (t == 1) first = s;
    }
    if (params_out) {
        *n_out = st->offset[st->n];
        *params_out = malloc(sizeof(real) * *n_out);
        memcpy(*params_out, dm.data, sizeof(real) * *n_out);
    }
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
    return s.loss / first.loss;
}

static void test_determinism(void **state) {
    (void)state;
    real *a, *b;
    size_t na, nb;
    double ra = run_steps(3, 1e-2, &a, &na), rb = run_steps(3, 1e-2, &b, &nb);
    assert_true(ra == rb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, sizeof(real) * na);
    free(a);
    free(b);
}

static void test_overfit(void **state) {
    (void)state;
    double ratio = run_steps(150, 1e-2, NULL, NULL);
    print_message("overfit: loss after 150 steps / loss at step 1 = %.4f\n", ratio);
    assert_true(ratio <= 0.1);
}

/* ---- float against double: the loss of the checks' batch; the float
 * binary runs the double one (`test_train_double --loss`) */
static double fixed_loss(void) {
    Model tm, dm;
    tiny_target(&tm, 7);
    tiny_draft(&dm, &tm, 11, 1);
    TrainState *st = train_state_new(&dm, &tm);
    TrainBatch bt = check_batch_();
    TrainHyper hp = hyper(7);
    TrainStats s;
    assert_int_equal(train_loss_grad(&dm, &tm, st, &bt, &hp, 1, NULL, &s), 0);
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
    return s.loss;
}

static void test_float_double(void **state) {
    (void)state;
#ifdef DFLASH_DOUBLE
    tu_skip("the float binary (tests/bin/test_train) does the comparison");
#else
    if (access("./tests/bin/test_train_double", X_OK) != 0)   /* make sanitize builds no double binary */
        tu_skip("no ./tests/bin/test_train_double to compare with");
    FILE *f = popen("./tests/bin/test_train_double --loss", "r");
    assert_non_null(f);
    double dl = 0;
    assert_int_equal(fscanf(f, "%lf", &dl), 1);
    assert_int_equal(pclose(f), 0);
    double fl = fixed_loss();
    print_message("loss: float %.9g double %.9g\n", fl, dl);
    assert_true(fabs(fl - dl) <= 1e-5 * fabs(dl));
#endif
}

/* ---- a step on the toy weights, loaded from files (F32: the float build's
 * tensors point into a read-only mapping until train_state_new copies them) */
static void test_toy_weights_step(void **state) {
    (void)state;
    Model tm, dm;
    assert_int_equal(model_load(&tm, "toy_weights/random/target", 0), 0);
    assert_int_equal(model_load(&dm, "toy_weights/random/draft", 1), 0);
    TrainState *st = train_state_new(&dm, &tm);
    assert_non_null(st);
    int ids[16], anchors[2] = {2, 9}, keep[2] = {1, 1};
    for (int i = 0; i < 16; i++) ids[i] = 2 + (i * 7) % 30;
    TrainBatch bt = {1, 16, 2, 4, ids, NULL, anchors, keep, NULL};
    TrainHyper hp = hyper(7);
    TrainStats s1, s2;
    real before = dm.layers[0].q_proj[0];
    assert_int_equal(train_step(&dm, &tm, st, &bt, &hp, 1, NULL, &s1), 0);
    assert_true(isfinite(s1.loss) && s1.loss > 0 && s1.n_weighted == 6);
    assert_true(dm.layers[0].q_proj[0] != before);
    assert_int_equal(train_step(&dm, &tm, st, &bt, &hp, 2, NULL, &s2), 0);
    assert_true(isfinite(s2.loss));
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
}

/* ===========================================================================
 * Next-token training of a target (train/train.c section 6, lm_step)
 * ======================================================================== */

/* ---- one finite-difference check per backward kernel (double build): each
 * kernel's forward y = f(x, w) under the scalar L = sum(c * y) with c drawn
 * here; the backward, given dy = c, must give dL/dx and dL/dw. */
#ifdef DFLASH_DOUBLE
typedef double (*KernelLoss)(void *ctx);
/* Perturb x[j] for a handful of j and compare (L(x+h) - L(x-h)) / 2h with g[j]. */
static void fd_check(const char *kernel, const char *what, real *x, const real *g, size_t n, KernelLoss f, void *ctx) {
    double gmax = 0;
    for (size_t j = 0; j < n; j++) gmax = fmax(gmax, fabs(g[j]));
    if (!(gmax > 0)) fail_msg("%s: d%s is zero everywhere", kernel, what);
    for (int e = 0; e < 8; e++) {
        size_t j = e == 0 ? 0 : e == 7 ? n - 1 : (size_t)((uint64_t)(e * 2654435761u) % n);
        double x0 = x[j], h = 1e-6 * fmax(1.0, fabs(x0));
        x[j] = x0 + h;
        double fp = f(ctx);
        x[j] = x0 - h;
        double fm = f(ctx);
        x[j] = x0;
        double fd = (fp - fm) / (2 * h);
        double rel = fabs(fd - g[j]) / fmax(fmax(fabs(fd), fabs(g[j])), 1e-4 * gmax);
        if (rel > 1e-6) fail_msg("%s: d%s[%zu]: analytic %.12g, finite differences %.12g (rel %.3g)", kernel, what, j,
                                 g[j], fd, rel);
    }
}

static void fill(real *x, size_t n, double lo, double hi, uint64_t *z) {
    for (size_t i = 0; i < n; i++) x[i] = (real)(lo + (hi - lo) * urand(z));
}
static double dotc(const real *c, const real *y, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)c[i] * (double)y[i];
    return s;
}

enum { KT = 5, KIN = 19, KOUT = 7, KH = 4, KHKV = 2, KD = 6, KV = 11 };
typedef struct {
    real x[KT * KIN], w[KOUT * KIN], c[KT * KIN * 4], y[KT * KIN * 4];
    real q[KT * KH * KD], k[KT * KHKV * KD], v[KT * KHKV * KD], att[KH * KT * KT];
    real cos_[KT * KD], sin_[KT * KD], ang[KT * KD / 2];
    int mask[KT * KT], use_mask, label;
} KCtx;

static double loss_linear(void *p) {
    KCtx *k = p;
    matmul(k->y, k->x, k->w, KT, KIN, KOUT);
    return dotc(k->c, k->y, KT * KOUT);
}
static void test_kernel_linear(void **state) {
    (void)state;
    static KCtx k;
    uint64_t z = 1;
    fill(k.x, KT * KIN, -1, 1, &z), fill(k.w, KOUT * KIN, -1, 1, &z), fill(k.c, KT * KOUT, -1, 1, &z);
    real dx[KT * KIN] = {0}, dw[KOUT * KIN] = {0};
    for (int threads = 1; threads <= 3; threads++) {   /* and bit-identical over threads */
        real dx2[KT * KIN] = {0}, dw2[KOUT * KIN] = {0};
        linear_backward_threads(threads, NULL, dx2, dw2, k.c, k.x, k.w, KT, KIN, KOUT);
        if (threads == 1) memcpy(dx, dx2, sizeof dx), memcpy(dw, dw2, sizeof dw);
        assert_memory_equal(dx, dx2, sizeof dx);
        assert_memory_equal(dw, dw2, sizeof dw);
    }
    fd_check("linear_backward", "x", k.x, dx, KT * KIN, loss_linear, &k);
    fd_check("linear_backward", "w", k.w, dw, KOUT * KIN, loss_linear, &k);
}

static double loss_rmsnorm(void *p) {
    KCtx *k = p;
    rmsnorm_rows(k->y, k->x, k->w, KT, KIN, (real)1e-6);
    return dotc(k->c, k->y, KT * KIN);
}
static void test_kernel_rmsnorm(void **state) {
    (void)state;
    static KCtx k;
    uint64_t z = 2;
    fill(k.x, KT * KIN, -1, 1, &z), fill(k.w, KIN, 0.5, 1.5, &z), fill(k.c, KT * KIN, -1, 1, &z);
    real dx[KT * KIN] = {0}, dw[KIN] = {0};
    rmsnorm_backward(dx, dw, k.c, k.x, k.w, KT, KIN, (real)1e-6);
    fd_check("rmsnorm_backward", "x", k.x, dx, KT * KIN, loss_rmsnorm, &k);
    fd_check("rmsnorm_backward", "w", k.w, dw, KIN, loss_rmsnorm, &k);
}

static double loss_rope(void *p) {
    KCtx *k = p;
    real kr[KT * KHKV * KD];
    apply_rotary_pos_emb(k->y, kr, k->q, k->k, k->cos_, k->sin_, KT, KT, KH, KHKV, KD);
    return dotc(k->c, k->y, KT * KH * KD);
}
static void test_kernel_rope(void **state) {
    (void)state;
    static KCtx k;
    uint64_t z = 3;
    int pos[KT];
    real inv[KD / 2];
    Config c = {0};
    c.rope_factor = 8, c.rope_low_freq_factor = 1, c.rope_high_freq_factor = 4;
    c.rope_original_max_position_embeddings = 64;
    rope_inv_freq(inv, KD, 500000.0);
    rope_llama3(inv, KD, &c);   /* llama3 scaling: the same rotation, other angles */
    for (int t = 0; t < KT; t++) pos[t] = 3 * t + 1;
    rope_cos_sin(k.ang, k.cos_, k.sin_, pos, KT, inv, KD);
    fill(k.q, KT * KH * KD, -1, 1, &z), fill(k.k, KT * KHKV * KD, -1, 1, &z), fill(k.c, KT * KH * KD, -1, 1, &z);
    real dq[KT * KH * KD] = {0};
    rope_backward(dq, k.c, k.cos_, k.sin_, KT, 0, KH, KD);
    fd_check("rope_backward", "x", k.q, dq, KT * KH * KD, loss_rope, &k);
}

static double loss_attention(void *p) {
    KCtx *k = p;
    attention_masked(k->y, k->att, k->q, k->k, k->v, k->use_mask ? k->mask : NULL, KT, KT, KH, KHKV, KD);
    return dotc(k->c, k->y, KT * KH * KD);
}
static void attention_case(int use_mask) {
    static KCtx k;
    uint64_t z = 4 + use_mask;
    k.use_mask = use_mask;
    for (int i = 0; i < KT; i++)
        for (int j = 0; j < KT; j++) k.mask[i * KT + j] = (i + j) % 3 != 1 || i == j;
    fill(k.q, KT * KH * KD, -1, 1, &z), fill(k.k, KT * KHKV * KD, -1, 1, &z), fill(k.v, KT * KHKV * KD, -1, 1, &z);
    fill(k.c, KT * KH * KD, -1, 1, &z);
    loss_attention(&k);
    if (!use_mask)   /* causal: nothing after the query */
        for (int h = 0; h < KH; h++)
            for (int i = 0; i < KT; i++)
                for (int j = i + 1; j < KT; j++) assert_true(k.att[(h * KT + i) * KT + j] == 0);
    real dq[KT * KH * KD] = {0}, dk[KT * KHKV * KD] = {0}, dv[KT * KHKV * KD] = {0}, da[KT];
    attention_masked_backward(dq, dk, dv, k.c, k.att, k.q, k.k, k.v, use_mask ? k.mask : NULL, KT, KT, KH, KHKV, KD, da);
    const char *name = use_mask ? "attention_masked_backward (mask)" : "attention_masked_backward (causal)";
    fd_check(name, "q", k.q, dq, KT * KH * KD, loss_attention, &k);
    fd_check(name, "k", k.k, dk, KT * KHKV * KD, loss_attention, &k);
    fd_check(name, "v", k.v, dv, KT * KHKV * KD, loss_attention, &k);
}
static void test_kernel_attention(void **state) {
    (void)state;
    attention_case(0);
    attention_case(1);
}

static double loss_swiglu(void *p) {
    KCtx *k = p;
    for (int i = 0; i < KT * KIN; i++) k->y[i] = silu(k->x[i]) * k->w[i];
    return dotc(k->c, k->y, KT * KIN);
}
static void test_kernel_swiglu(void **state) {
    (void)state;
    static KCtx k;
    uint64_t z = 6;
    fill(k.x, KT * KIN, -3, 3, &z), fill(k.w, KT * KIN, -1, 1, &z), fill(k.c, KT * KIN, -1, 1, &z);
    real dg[KT * KIN], du[KT * KIN];
    swiglu_backward(dg, du, k.c, k.x, k.w, KT * KIN);
    fd_check("swiglu_backward", "gate", k.x, dg, KT * KIN, loss_swiglu, &k);
    fd_check("swiglu_backward", "up", k.w, du, KT * KIN, loss_swiglu, &k);
}

static double loss_ce(void *p) {
    KCtx *k = p;
    return 0.37 * cross_entropy(k->x, KV, k->label);
}
static void test_kernel_cross_entropy(void **state) {
    (void)state;
    static KCtx k;
    uint64_t z = 7;
    fill(k.x, KV, -4, 4, &z);
    k.label = 5;
    real dx[KV];
    cross_entropy_backward(dx, k.x, KV, k.label, (real)0.37);
    fd_check("cross_entropy_backward", "logits", k.x, dx, KV, loss_ce, &k);
}
#else
static void test_kernel_linear(void **state) { (void)state; tu_skip(FD_IN_DOUBLE); }
static void test_kernel_rmsnorm(void **state) { (void)state; tu_skip(FD_IN_DOUBLE); }
static void test_kernel_rope(void **state) { (void)state; tu_skip(FD_IN_DOUBLE); }
static void test_kernel_attention(void **state) { (void)state; tu_skip(FD_IN_DOUBLE); }
static void test_kernel_swiglu(void **state) { (void)state; tu_skip(FD_IN_DOUBLE); }
static void test_kernel_cross_entropy(void **state) { (void)state; tu_skip(FD_IN_DOUBLE); }
#endif

/* The tiled, vectorised backward loops and the threads give the bits of
 * the plain loops (dx_t over o ascending, dw_o over t ascending), written
 * here; sizes with whole tiles and leftovers on every side. */
static void test_linear_tiles_bits(void **state) {
    (void)state;
    enum { T = 11, NI = 150, NO = 21 };
    static real sx[T * NO], x[T * NI], w[NO * NI], g[T * NO], dx[T * NI], dw[NO * NI], rx[T * NI], rw[NO * NI];
    uint64_t z = 77;
    for (int i = 0; i < T * NI; i++) x[i] = (real)(urand(&z) - 0.5), dx[i] = rx[i] = (real)(urand(&z) - 0.5);
    for (int i = 0; i < NO * NI; i++) w[i] = (real)(urand(&z) - 0.5), dw[i] = rw[i] = (real)(urand(&z) - 0.5);
    for (int i = 0; i < T * NO; i++) g[i] = (real)(urand(&z) - 0.5);
    for (int o = 0; o < NO; o++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < NI; i++) {
                rx[t * NI + i] += g[t * NO + o] * w[o * NI + i];
                rw[o * NI + i] += g[t * NO + o] * x[t * NI + i];
            }
    for (int threads = 1; threads <= 4; threads++) {
        static real dx2[T * NI], dw2[NO * NI];
        memcpy(dx2, dx, sizeof dx), memcpy(dw2, dw, sizeof dw);
        linear_backward_threads(threads, threads == 2 ? sx : NULL, dx2, dw2, g, x, w, T, NI, NO);
        assert_memory_equal(dx2, rx, sizeof rx);
        assert_memory_equal(dw2, rw, sizeof rw);
    }
    /* the forward: matmul split by tokens over threads, the bits of one call */
    static real y1[T * NO], y2[T * NO];
    matmul(y1, x, w, T, NI, NO);
    for (int threads = 2; threads <= 4; threads++) {
        matmul_threads(threads, y2, x, w, T, NI, NO);
        assert_memory_equal(y1, y2, sizeof y1);
    }
}

/* ---- tiny targets: Qwen3 untied, Qwen3 tied, Llama (no q/k norms, llama3 RoPE) */
static void tiny_lm(Model *m, int kind /* 0 untied, 1 tied, 2 llama */, uint64_t seed) {
    tiny_target(m, seed);
    if (kind == 1) {
        m->lm_head = m->embed_tokens;
        m->tied = m->cfg.tie_word_embeddings = 1;
    }
    if (kind == 2) {
        m->cfg.llama = 1;
        for (int l = 0; l < m->cfg.num_hidden_layers; l++) m->layers[l].q_norm = m->layers[l].k_norm = NULL;
        m->cfg.rope_llama3 = 1, m->cfg.rope_factor = 8, m->cfg.rope_low_freq_factor = 1;
        m->cfg.rope_high_freq_factor = 4, m->cfg.rope_original_max_position_embeddings = 64;
        m->cfg.rope_theta = 500000.0;
        rope_inv_freq(m->inv_freq, m->cfg.head_dim, m->cfg.rope_theta);
        rope_llama3(m->inv_freq, m->cfg.head_dim, &m->cfg);
    }
}

enum { LB = 2, LT = 7 };
static int l_ids[LB * LT], l_lm[LB * LT];
static LmBatch lm_batch(void) {
    uint64_t z = 17;
    for (int i = 0; i < LB * LT; i++) {
        l_ids[i] = (int)(urand(&z) * 20);
        l_lm[i] = i % LT != 4;
    }
    LmBatch bt = {LB, LT, l_ids, l_lm};
    return bt;
}

/* The whole step's gradient against finite differences of lm_loss_grad's
 * loss, on every parameter tensor (lm_params), for each kind of target. */
static void lm_gradcheck(int kind) {
#ifndef DFLASH_DOUBLE
    (void)kind;
    tu_skip(FD_IN_DOUBLE);
#else
    Model m;
    tiny_lm(&m, kind, 7 + kind);
    LmState *st = lm_state_new(&m, LB, LT);
    assert_non_null(st);
    LmBatch bt = lm_batch();
    TrainHyper hp = hyper(0);
    LmStats s;
    assert_int_equal(lm_loss_grad(&m, st, &bt, &hp, 1, NULL, &s), 0);
    assert_int_equal(s.n_counted, LB * (LT - 1) - LB);   /* loss_mask[4] is 0 in each sequence */
    ModelGrads *g = lm_grads(st);
    real *grad = malloc(sizeof(real) * g->n);
    assert_non_null(grad);
    memcpy(grad, g->data, sizeof(real) * g->n);
    TrainParam ps[128];
    int n = lm_params(&m, ps, 128);
    assert_int_equal(n, 1 + m.cfg.num_hidden_layers * (kind == 2 ? 9 : 11) + 1 + (kind != 1));
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t cnt = param_size(&ps[i]);
        double gmax = 0;
        for (size_t j = 0; j < cnt; j++) gmax = fmax(gmax, fabs(grad[off + j]));
        if (!(gmax > 0)) fail_msg("kind %d: %s has no gradient", kind, ps[i].key);
        for (int e = 0; e < 6; e++) {
            size_t j = e == 0 ? 0 : e == 5 ? cnt - 1 : (size_t)((uint64_t)(e * 2654435761u + i * 97) % cnt);
            double x0 = ps[i].data[j], h = 1e-5 * fmax(1.0, fabs(x0));
            LmStats sp, sm;
            ps[i].data[j] = x0 + h;
            assert_int_equal(lm_loss_grad(&m, st, &bt, &hp, 1, NULL, &sp), 0);
            ps[i].data[j] = x0 - h;
            assert_int_equal(lm_loss_grad(&m, st, &bt, &hp, 1, NULL, &sm), 0);
            ps[i].data[j] = x0;
            double fd = (sp.loss - sm.loss) / (2 * h), an = grad[off + j];
            double rel = fabs(fd - an) / fmax(fmax(fabs(fd), fabs(an)), 1e-4 * gmax);
            if (rel > 1e-6)
                fail_msg("kind %d: %s[%zu]: analytic %.12g, finite differences %.12g (rel %.3g)", kind, ps[i].key, j,
                         an, fd, rel);
        }
        off += cnt;
    }
    free(grad);
    lm_state_free(st);
    model_free(&m);
#endif
}
static void test_lm_gradcheck_untied(void **state) { (void)state; lm_gradcheck(0); }
static void test_lm_gradcheck_tied(void **state) { (void)state; lm_gradcheck(1); }
static void test_lm_gradcheck_llama(void **state) { (void)state; lm_gradcheck(2); }

/* --threads: 1 and 3 threads give the same bits (weights, m, v after 2
 * steps), for the target's step and for the draft's. */
static void test_threads_bits(void **state) {
    (void)state;
    real *after[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
        Model m;
        tiny_lm(&m, 0, 9);
        LmState *st = lm_state_new(&m, LB, LT);
        assert_non_null(st);
        LmBatch bt = lm_batch();
        TrainHyper hp = hyper(0);
        hp.threads = k ? 3 : 1;
        for (int s = 1; s <= 2; s++) assert_int_equal(lm_step(&m, st, &bt, &hp, s, NULL, NULL), 0);
        n = st->offset[st->n];
        after[k] = malloc(sizeof(real) * 3 * n);
        memcpy(after[k], m.data, sizeof(real) * n);
        memcpy(after[k] + n, st->m, sizeof(real) * n);
        memcpy(after[k] + 2 * n, st->v, sizeof(real) * n);
        lm_state_free(st);
        model_free(&m);
    }
    assert_memory_equal(after[0], after[1], sizeof(real) * 3 * n);
    free(after[0]); free(after[1]);
    real *dafter[2];
    for (int k = 0; k < 2; k++) {
        Model tm, dm;
        tiny_target(&tm, 7);
        tiny_draft(&dm, &tm, 11, 1);
        TrainState *st = train_state_new(&dm, &tm);
        assert_non_null(st);
        TrainBatch bt = check_batch_();
        TrainHyper hp = hyper(7);
        hp.threads = k ? 2 : 1;
        for (int s = 1; s <= 2; s++) assert_int_equal(train_step(&dm, &tm, st, &bt, &hp, s, NULL, NULL), 0);
        n = st->offset[st->n];
        dafter[k] = malloc(sizeof(real) * n);
        memcpy(dafter[k], dm.data, sizeof(real) * n);
        train_state_free(st);
        model_free(&dm);
        model_free(&tm);
    }
    assert_memory_equal(dafter[0], dafter[1], sizeof(real) * n);
    free(dafter[0]); free(dafter[1]);
}

/* --decay-on matrices: a norm weight moves by AdamW's step only, a matrix
 * by the decay too (zero gradients: the step is 0, only the decay acts). */
static void test_decay_on(void **state) {
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        Model m;
        tiny_lm(&m, 0, 5);
        LmState *st = lm_state_new(&m, LB, LT);
        assert_non_null(st);
        real norm0 = m.norm[0], q0 = m.layers[0].q_proj[0];
        TrainHyper hp = hyper(0);
        hp.weight_decay = 0.5, hp.lr = 0.1, hp.decay_on = mode ? TRAIN_DECAY_MATRICES : TRAIN_DECAY_ALL;
        memset(st->grad, 0, sizeof(real) * st->offset[st->n]);
        TraceDims dims = {0};
        double coef;
        assert_int_equal(lm_update(st, &hp, 0, 1, NULL, &dims, &coef), 0);
        assert_true(m.layers[0].q_proj[0] == q0 * (real)(1 - 0.1 * 0.5));
        assert_true(m.norm[0] == (mode ? norm0 : norm0 * (real)(1 - 0.1 * 0.5)));
        lm_state_free(st);
        model_free(&m);
    }
}

/* Bad steps stop with one message: no counted label, a non-finite loss. */
static void test_lm_errors(void **state) {
    (void)state;
    Model m;
    tiny_lm(&m, 0, 5);
    LmState *st = lm_state_new(&m, LB, LT);
    assert_non_null(st);
    LmBatch bt = lm_batch();
    int none[LB * LT] = {0};
    LmBatch empty = {LB, LT, l_ids, none};
    TrainHyper hp = hyper(0);
    assert_int_equal(lm_step(&m, st, &empty, &hp, 1, NULL, NULL), -1);
    assert_non_null(strstr(dflash_errmsg, "no position carries a loss"));
    LmBatch big = {LB + 1, LT, l_ids, NULL};
    assert_int_equal(lm_step(&m, st, &big, &hp, 1, NULL, NULL), -1);
    m.lm_head[3] = (real)INFINITY;
    assert_int_equal(lm_step(&m, st, &bt, &hp, 1, NULL, NULL), -1);
    assert_non_null(strstr(dflash_errmsg, "not finite"));
    lm_state_free(st);
    model_free(&m);
}

/* ---- parity with lm_oracle.py: its trace of two steps on toy_weights/lm-tiny
 * (train/tests/lm_oracle/: the case and the oracle's float64 output, NOTES.md
 * "Training a target: parity"), every committed name within 1e-4 (float) or
 * 1e-9 (double) of the tensor's largest magnitude, as compare.py measures. */
typedef struct {
    int n_checked;
    double worst;
    char worst_name[128];
    const char *dir;   /* the committed trace: train/tests/lm_oracle/trace, train/tests/train_oracle_sliding/trace */
} OracleCmp;

static int oracle_compare(void *ctx, const TraceTensor *t) {
    OracleCmp *c = ctx;
    char path[256];
    snprintf(path, sizeof path, "%s/%s.npy", c->dir, t->name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;   /* not committed */
    fclose(f);
    NpyValues ref;
    if (npy_read_values(path, &ref) != 0) fail_msg("%s", dflash_errmsg);
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    if (ref.n != n) fail_msg("%s: %zu values, the oracle has %zu", t->name, n, ref.n);
    double scale = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        double r = ref.is_int ? (double)ref.i[i] : ref.f[i];
        double x = t->is_int ? (double)((const int64_t *)t->data)[i] : (double)((const real *)t->data)[i];
        scale = fmax(scale, fabs(r));
        err = fmax(err, fabs(x - r));
    }
    double rel = err / fmax(scale, 1e-30);
    if (rel > c->worst) { c->worst = rel; snprintf(c->worst_name, sizeof c->worst_name, "%s", t->name); }
    if (rel > (sizeof(real) == 8 ? 1e-9 : 1e-4)) fail_msg("%s: off the oracle by %.3g of its largest value", t->name, rel);
    c->n_checked++;
    npy_values_free(&ref);
    return 0;
}
static int oracle_hook(void *ctx, const TraceHand *hand) { return trace_shape_hand(hand, oracle_compare, ctx); }

/* a committed oracle case: its text (freed by the caller after json_free) parsed into *root */
static char *read_case(const char *path, Json *root) {
    char *text;
    size_t len;
    assert_int_equal(file_read_all(path, &text, &len), 0);
    assert_int_equal(json_parse(text, len, "case.json", root), 0);
    return text;
}

static void test_lm_oracle_parity(void **state) {
    (void)state;
    Json root;
    char *text = read_case("train/tests/lm_oracle/case.json", &root);
    Model m;
    if (model_load(&m, "toy_weights/lm-tiny/target", 0) != 0) fail_msg("%s (make weights)", dflash_errmsg);
    const Json *aw = json_get(&root, "adamw"), *bl = json_get(&root, "batches");
    TrainHyper hp = {0};
    hp.lr = json_get(aw, "lr")->number, hp.eps = json_get(aw, "eps")->number;
    hp.beta1 = json_get(aw, "betas")->items[0].number, hp.beta2 = json_get(aw, "betas")->items[1].number;
    hp.weight_decay = json_get(aw, "weight_decay")->number, hp.max_grad_norm = json_get(aw, "max_grad_norm")->number;
    hp.decay_on = json_get(aw, "decay_2d_only")->boolean ? TRAIN_DECAY_MATRICES : TRAIN_DECAY_ALL;
    LmState *st = lm_state_new(&m, 2, 6);
    assert_non_null(st);
    OracleCmp cmp = {0};
    cmp.dir = "train/tests/lm_oracle/trace";
    TraceHook hook = {oracle_hook, &cmp};
    for (int s = 0; s < bl->n; s++) {
        int ids[12], lmask[12];
        const Json *ii = json_get(&bl->items[s], "input_ids"), *mm = json_get(&bl->items[s], "loss_mask");
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < 6; t++) {
                ids[b * 6 + t] = (int)ii->items[b].items[t].number;
                lmask[b * 6 + t] = (int)mm->items[b].items[t].number;
            }
        LmBatch bt = {2, 6, ids, lmask};
        if (lm_step(&m, st, &bt, &hp, s + 1, &hook, NULL) != 0) fail_msg("%s", dflash_errmsg);
    }
    assert_int_equal(cmp.n_checked, 46);   /* every committed name */
    print_message("lm_oracle parity: %d names, worst %.2e (%s)\n", cmp.n_checked, cmp.worst, cmp.worst_name);
    lm_state_free(st);
    model_free(&m);
    json_free(&root);
    free(text);
}

/* ---- parity with train_oracle.py on a sliding-window draft: two steps on
 * toy_weights/sliding (draft layers 0..3 sliding_attention, window 6, block
 * 6), the oracle run with SpecForge's per-layer masks (the sliding layers
 * under create_dflash_sdpa_mask with sliding_window, the full layer under the
 * block mask; NOTES.md "Training sliding-window layers"), in float64:
 * train/tests/train_oracle_sliding/ holds the case and a choice of the names. */
static void test_sliding_oracle_parity(void **state) {
    (void)state;
    Json root;
    char *text = read_case("train/tests/train_oracle_sliding/case.json", &root);
    Model tm, dm;
    if (model_load(&tm, "toy_weights/sliding/target", 0) != 0) fail_msg("%s (make weights)", dflash_errmsg);
    assert_int_equal(model_load(&dm, "toy_weights/sliding/draft", 1), 0);
    assert_int_equal(draft_window(&dm.cfg), 6);
    const Json *aw = json_get(&root, "adamw"), *bl = json_get(&root, "batches");
    TrainHyper hp = {0};
    hp.lr = json_get(aw, "lr")->number, hp.eps = json_get(aw, "eps")->number;
    hp.beta1 = json_get(aw, "betas")->items[0].number, hp.beta2 = json_get(aw, "betas")->items[1].number;
    hp.weight_decay = json_get(aw, "weight_decay")->number, hp.max_grad_norm = json_get(aw, "max_grad_norm")->number;
    hp.gamma = json_get(&root, "gamma")->number, hp.threads = 1;
    TrainState *st = train_state_new(&dm, &tm);
    assert_non_null(st);
    OracleCmp cmp = {0};
    cmp.dir = "train/tests/train_oracle_sliding/trace";
    TraceHook hook = {oracle_hook, &cmp};
    for (int s = 0; s < bl->n; s++) {
        enum { B_ = 2, S_ = 14, N_ = 2 };
        int ids[B_ * S_], lmask[B_ * S_], anchors[B_ * N_], keep[B_ * N_];
        const Json *bj = &bl->items[s], *ii = json_get(bj, "input_ids"), *mm = json_get(bj, "loss_mask");
        const Json *aa = json_get(bj, "anchors"), *kk = json_get(bj, "keep");
        assert_int_equal(ii->n, B_);
        for (int b = 0; b < B_; b++) {
            assert_int_equal(ii->items[b].n, S_);
            for (int t = 0; t < S_; t++) {
                ids[b * S_ + t] = (int)ii->items[b].items[t].number;
                lmask[b * S_ + t] = mm ? (int)mm->items[b].items[t].number : 1;
            }
            for (int n = 0; n < N_; n++) {
                anchors[b * N_ + n] = (int)aa->items[b].items[n].number;
                keep[b * N_ + n] = kk ? kk->items[b].items[n].boolean : 1;
            }
        }
        TrainBatch bt = {B_, S_, N_, dm.cfg.block_size, ids, lmask, anchors, keep, NULL};
        if (train_step(&dm, &tm, st, &bt, &hp, s + 1, &hook, NULL) != 0) fail_msg("%s", dflash_errmsg);
    }
    assert_int_equal(cmp.n_checked, 142);   /* every committed name */
    print_message("sliding train_oracle parity: %d names, worst %.2e (%s)\n", cmp.n_checked, cmp.worst,
                  cmp.worst_name);
    train_state_free(st);
    model_free(&dm);
    model_free(&tm);
    json_free(&root);
    free(text);
}

/* lm_init_target: the documented rule (norms 1, the rest N(0, 0.02^2) from
 * Box-Muller pairs of the seeded PRNG, lm_params order), redrawn here. */
static void test_lm_init(void **state) {
    (void)state;
    Config c = tiny_config(0);
    Model m;
    assert_int_equal(lm_init_target(&m, &c, 1234), 0);
    TrainParam ps[128];
    int n = lm_params(&m, ps, 128);
    Rng g;
    rng_seed(&g, 1234);
    for (int i = 0; i < n; i++) {
        size_t cnt = param_size(&ps[i]);
        if (ps[i].ndim == 1) {
            for (size_t j = 0; j < cnt; j++) assert_true(ps[i].data[j] == 1);
            continue;
        }
        for (size_t j = 0; j < cnt; j += 2) {
            double u1 = rng_uniform(&g), u2 = rng_uniform(&g);
            double rad = sqrt(-2.0 * log(1.0 - u1)), ang = 6.283185307179586 * u2;
            assert_true(ps[i].data[j] == (real)(0.02 * rad * cos(ang)));
            if (j + 1 < cnt) assert_true(ps[i].data[j + 1] == (real)(0.02 * rad * sin(ang)));
        }
    }
    model_free(&m);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--loss") == 0) {   /* for test_float_double */
        printf("%.17g\n", fixed_loss());
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_gradcheck_gamma),
        cmocka_unit_test(test_gradcheck_no_gamma),
        cmocka_unit_test(test_gradcheck_sliding),
        cmocka_unit_test(test_mask_sliding),
        cmocka_unit_test(test_sliding_wide_window),
        cmocka_unit_test(test_mask),
        cmocka_unit_test(test_hand_case),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_overfit),
        cmocka_unit_test(test_float_double),
        cmocka_unit_test(test_toy_weights_step),
        cmocka_unit_test(test_kernel_linear),
        cmocka_unit_test(test_linear_tiles_bits),
        cmocka_unit_test(test_kernel_rmsnorm),
        cmocka_unit_test(test_kernel_rope),
        cmocka_unit_test(test_kernel_attention),
        cmocka_unit_test(test_kernel_swiglu),
        cmocka_unit_test(test_kernel_cross_entropy),
        cmocka_unit_test(test_lm_gradcheck_untied),
        cmocka_unit_test(test_lm_gradcheck_tied),
        cmocka_unit_test(test_lm_gradcheck_llama),
        cmocka_unit_test(test_threads_bits),
        cmocka_unit_test(test_decay_on),
        cmocka_unit_test(test_lm_errors),
        cmocka_unit_test(test_lm_oracle_parity),
        cmocka_unit_test(test_sliding_oracle_parity),
        cmocka_unit_test(test_lm_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
