/* train/train.c - one DFlash training step in plain C11, forward and hand-written
 * backward side by side.
 *
 * The recipe is SpecForge's OnlineDFlashModel with loss "dflash" (the one
 * NVIDIA NeMo Automodel ports), on the published DFlashDraftModel:
 *
 *   context   the frozen target reads each whole sequence once;
 *             target_hidden = extract_context_feature(its hidden states),
 *             positions 0..S-1
 *   blocks    N anchors per sequence; block n = [input_ids[anchor_n], B-1
 *             mask ids] at positions anchor_n + 0..B-1; all mask ids when
 *             keep[n] is 0
 *   mask      a query of block n sees context key j iff j < anchor_n, every
 *             key of its own block, nothing else; with keep 0 it sees
 *             nothing and its attention output is 0
 *   logits    the target's frozen lm_head on every block row
 *   labels    row k of block n predicts input_ids[anchor_n + k]
 *   weights   keep x (anchor_n + k < S) x (k > 0) x loss_mask[anchor_n + k]
 *             x exp(-(k-1)/gamma)
 *   loss      sum(w CE) / (sum(w) + 1e-6)
 *   update    global-norm clipping, then torch.optim.AdamW
 *
 * The whole batch is one set of row-major buffers: b*S context rows, b*Q
 * block rows (Q = N*B) and b*P key rows (P = S+Q: a sequence's S context rows
 * then its Q block rows), so each Linear is one matmul over the batch and its
 * weight gradient one pass. Attention is per sequence under the block mask.
 *
 * Every forward kernel has its backward right after it. A backward kernel
 * ADDS its input gradients to the buffers it is given (dx += ..., dw += ...):
 * the caller zeroes what it needs zeroed. Trainable: the draft's own tensors
 * (fc, hidden_norm, every layer, norm). Frozen: the target, its embedding and
 * lm_head (no gradient is formed for them).
 *
 * Sections:
 *   1. the draft's parameters, the training state, a new draft
 *   2. anchors (SpecForge's rule)
 *   3. kernels and their backward: Linear, RMSNorm, RoPE, masked attention,
 *      SwiGLU, cross-entropy
 *   4. the step: batch set-up, forward, loss, backward, clipping, AdamW
 *   5. tracing, and the table of the training trace names
 */
#include "train/train.h"
#include "formats/load.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ===========================================================================
 * 1. Parameters, state, a new draft
 * ======================================================================== */

typedef struct TrainRun TrainRun;   /* a step's activations (section 4) */
static void run_free(TrainRun *r);

/* A list of trainable tensors (param_list, the draft's; lm_param_list, a
 * target's): fills at most cap entries of out (may be NULL) and of slot (may
 * be NULL: where each tensor's pointer lives in the Model, to point it
 * elsewhere); returns the count. */
typedef int ParamList(const Model *m, TrainParam *out, real **slot[], int cap);

/* One entry of a ParamList: the tensor at ptr, nd dimensions s0 x s1, its
 * key printed from the rest; reads and advances the list's n, out, slot, cap. */
#define PARAM(ptr, nd, s0, s1, ...)                                                    \
    do {                                                                               \
        if (n < cap) {                                                                 \
            if (out) {                                                                 \
                snprintf(out[n].key, TRAIN_MAX_KEY, __VA_ARGS__);                      \
                out[n].data = (ptr);                                                   \
                out[n].ndim = (nd);                                                    \
                out[n].shape[0] = (s0);                                                \
                out[n].shape[1] = (s1);                                                \
            }                                                                          \
            if (slot) slot[n] = (real **)&(ptr);                                       \
        }                                                                              \
        n++;                                                                           \
    } while (0)

/* The draft's trainable tensors in data-flow order. */
static int param_list(const Model *m, TrainParam *out, real **slot[], int cap) {
    const Config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim;
    int qd = c->num_attention_heads * d, kvd = c->num_key_value_heads * d;
    int kD = c->n_target_layer_ids * D, n = 0;
    PARAM(m->fc, 2, D, kD, "fc.weight");
    PARAM(m->hidden_norm, 1, D, 0, "hidden_norm.weight");
    for (int l = 0; l < c->num_hidden_layers; l++) {
        const LayerWeights *w = &m->layers[l];
        PARAM(w->input_layernorm, 1, D, 0, "layers.%d.input_layernorm.weight", l);
        PARAM(w->q_proj, 2, qd, D, "layers.%d.self_attn.q_proj.weight", l);
        PARAM(w->k_proj, 2, kvd, D, "layers.%d.self_attn.k_proj.weight", l);
        PARAM(w->v_proj, 2, kvd, D, "layers.%d.self_attn.v_proj.weight", l);
        PARAM(w->q_norm, 1, d, 0, "layers.%d.self_attn.q_norm.weight", l);
        PARAM(w->k_norm, 1, d, 0, "layers.%d.self_attn.k_norm.weight", l);
        PARAM(w->o_proj, 2, D, qd, "layers.%d.self_attn.o_proj.weight", l);
        PARAM(w->post_attention_layernorm, 1, D, 0, "layers.%d.post_attention_layernorm.weight", l);
        PARAM(w->gate_proj, 2, I, D, "layers.%d.mlp.gate_proj.weight", l);
        PARAM(w->up_proj, 2, I, D, "layers.%d.mlp.up_proj.weight", l);
        PARAM(w->down_proj, 2, D, I, "layers.%d.mlp.down_proj.weight", l);
    }
    PARAM(m->norm, 1, D, 0, "norm.weight");
    return n;
}
static ParamList lm_param_list;   /* a target's (section 6) */

int train_params(const Model *draft, TrainParam *out, int cap) { return param_list(draft, out, NULL, cap); }

static size_t param_size(const TrainParam *p) { return (size_t)p->shape[0] * (size_t)(p->ndim == 2 ? p->shape[1] : 1); }

struct TrainState {
    Model *draft;
    int n;                 /* trainable tensors */
    TrainParam *params;    /* (n) train_params order; data points into draft->data */
    size_t *offset;        /* (n+1) each tensor's first entry in grad, m, v */
    real *grad;            /* (total) the loss's gradient (before clipping once train_step ran) */
    real *m, *v;           /* (total) AdamW's exp_avg and exp_avg_sq */
    long t;                /* AdamW steps taken */
    ModelGrads grads;      /* grad in the weights' layout (fc, hidden_norm, layers, norm) */
    TrainRun *run;         /* the activations, kept from step to step (run_fit), or NULL */
};

void train_state_free(TrainState *st) {
    if (!st) return;
    free(st->params); free(st->offset); free(st->grad); free(st->m); free(st->v);
    free(st->grads.layers);
    if (st->run) run_free(st->run);
    free(st->run);
    free(st);
}

/* Point the model's tensors (those list names) at one private buffer, in
 * list order, holding copies of their values (copy 1) or zeros; a tied
 * lm_head follows the embedding. what names the buffer in an error. */
static int own_weights(Model *m, ParamList *list, const char *what, int copy, TrainParam **params_out,
                       size_t **offset_out, int *n_out) {
    int n = list(m, NULL, NULL, 0);
    TrainParam *params = xcalloc(n, sizeof *params, "training parameter list");
    real ***slot = xcalloc(n, sizeof *slot, "training parameter slots");
    size_t *offset = xcalloc(n + 1, sizeof *offset, "training parameter offsets");
    real *buf = NULL;
    if (!params || !slot || !offset) goto fail;
    list(m, params, slot, n);
    for (int i = 0; i < n; i++) offset[i + 1] = offset[i] + param_size(&params[i]);
    buf = xcalloc(offset[n], sizeof(real), what);
    if (!buf) goto fail;
    for (int i = 0; i < n; i++) {
        if (copy) memcpy(buf + offset[i], params[i].data, sizeof(real) * param_size(&params[i]));
        *slot[i] = buf + offset[i];
        params[i].data = buf + offset[i];
    }
    if (m->tied) m->lm_head = m->embed_tokens;
    free(m->data);   /* the widened copies (if any) are no longer pointed at */
    m->data = buf;
    m->n_params = offset[n];
    free(slot);
    *params_out = params;
    *offset_out = offset;
    *n_out = n;
    return 0;
fail:
    free(params); free(slot); free(offset);
    return -1;
}

/* The gradients in the weights' layout (g->layers allocated here, freed by
 * the state): the tensors list names of a Model shaped as m, each pointing
 * at its n entries of grad (offset, as own_weights made them); a tied
 * lm_head's gradient is the embedding's. */
static int grads_layout(ModelGrads *g, const Model *m, ParamList *list, real *grad, const size_t *offset, int n) {
    Model gm;
    memset(&gm, 0, sizeof gm);
    gm.cfg = m->cfg;
    gm.tied = m->tied;
    gm.layers = xcalloc(m->cfg.num_hidden_layers, sizeof(LayerWeights), "gradient layers");
    real ***slot = xcalloc(n, sizeof *slot, "gradient slots");
    g->layers = gm.layers;
    if (!gm.layers || !slot) { free(slot); return -1; }
    list(&gm, NULL, slot, n);
    for (int i = 0; i < n; i++) *slot[i] = grad + offset[i];
    free(slot);
    g->embed_tokens = gm.embed_tokens, g->norm = gm.norm;
    g->lm_head = m->tied ? gm.embed_tokens : gm.lm_head;
    g->fc = gm.fc, g->hidden_norm = gm.hidden_norm;
    g->data = grad, g->n = offset[n];
    return 0;
}

/* A new model's weights, in list order: RMSNorm weights (1-D) 1, every
 * matrix N(0, 0.02^2) from one xorshift64* stream seeded with seed. */
static void init_weights(TrainParam *params, int n, uint64_t seed) {
    Rng g;
    rng_seed(&g, seed);
    for (int i = 0; i < n; i++) {
        size_t count = param_size(&params[i]);
        real *x = params[i].data;
        if (params[i].ndim == 1) {   /* RMSNorm weights: 1 */
            for (size_t j = 0; j < count; j++) x[j] = 1;
            continue;
        }
        for (size_t j = 0; j < count; j += 2) {   /* N(0, 0.02^2), Box-Muller pairs */
            double u1 = rng_uniform(&g), u2 = rng_uniform(&g);
            double rad = sqrt(-2.0 * log(1.0 - u1)), ang = 6.283185307179586 * u2;
            x[j] = (real)(0.02 * rad * cos(ang));
            if (j + 1 < count) x[j + 1] = (real)(0.02 * rad * sin(ang));
        }
    }
}

/* The draft's sliding_window: 0 when no layer is a sliding_attention layer
 * (formats/load.c gives every sliding layer the config's one sliding_window;
 * check_fit refuses a draft whose layers differ). */
static int draft_window(const Config *dc) {
    int w = 0;
    for (int l = 0; l < dc->num_hidden_layers; l++)
        if (dc->layer_window[l] > w) w = dc->layer_window[l];
    return w;
}

/* The draft must read the target's hidden states and speak its vocabulary. */
static int check_fit(const Model *draft, const Model *target) {
    const Config *dc = &draft->cfg, *tc = &target->cfg;
    if (!dc->is_draft || dc->n_target_layer_ids < 1) {
        dflash_set_error("training: the draft config has no target_layer_ids");
        return -1;
    }
    if (check_pair(target, draft) != 0) return -1;
    for (int j = 0; j < dc->n_target_layer_ids; j++)
        if (dc->target_layer_ids[j] < 0 || dc->target_layer_ids[j] >= tc->num_hidden_layers) {
            dflash_set_error("training: draft target_layer_ids[%d] = %d is not a target layer (0..%d)", j,
                             dc->target_layer_ids[j], tc->num_hidden_layers - 1);
            return -1;
        }
    for (int l = 0; l < dc->num_hidden_layers; l++)   /* one window: the run holds one sliding mask */
        if (dc->layer_window[l] > 0 && dc->layer_window[l] != draft_window(dc)) {
            dflash_set_error("training: draft layer %d has sliding_window %d, another layer %d: the trainer takes "
                             "one window for every sliding_attention layer", l, dc->layer_window[l], draft_window(dc));
            return -1;
        }
    if (dc->mask_token_id < 0 || dc->mask_token_id >= tc->vocab_size) {
        dflash_set_error("training: draft mask_token_id %d is outside the vocabulary 0..%d", dc->mask_token_id,
                         tc->vocab_size - 1);
        return -1;
    }
    return 0;
}

TrainState *train_state_new(Model *draft, const Model *target) {
    if (check_fit(draft, target) != 0) return NULL;
    TrainState *st = xcalloc(1, sizeof *st, "training state");
    if (!st) return NULL;
    st->draft = draft;
    if (own_weights(draft, param_list, "the draft's trainable weights", 1, &st->params, &st->offset, &st->n) != 0) { free(st); return NULL; }
    size_t total = st->offset[st->n];
    st->grad = xcalloc(total, sizeof(real), "gradients");
    st->m = xcalloc(total, sizeof(real), "AdamW exp_avg");
    st->v = xcalloc(total, sizeof(real), "AdamW exp_avg_sq");
    if (!st->grad || !st->m || !st->v || grads_layout(&st->grads, draft, param_list, st->grad, st->offset, st->n) != 0) {
        train_state_free(st);
        return NULL;
    }
    return st;
}

real *train_grad(TrainState *st, int i) { return st->grad + st->offset[i]; }

int train_optimizer_tensors(TrainState *st, TrainParam *m_out, TrainParam *v_out, int cap) {
    for (int i = 0; i < st->n && i < cap; i++) {
        if (m_out) m_out[i] = st->params[i], m_out[i].data = st->m + st->offset[i];
        if (v_out) v_out[i] = st->params[i], v_out[i].data = st->v + st->offset[i];
    }
    return st->n;
}
long train_optimizer_step(const TrainState *st) { return st->t; }
void train_set_optimizer_step(TrainState *st, long t) { st->t = t; }

uint64_t train_rng_seed(uint64_t seed) {
    Rng g;
    rng_seed(&g, seed);
    return g.s;
}

uint64_t train_rng_next(uint64_t *s) {
    Rng g = {*s};
    rng_uniform(&g);                       /* dflash.c's xorshift64* step: g.s advanced */
    *s = g.s;
    return g.s * 0x2545F4914F6CDD1Dull;    /* the output rng_uniform takes its top 53 bits of */
}

int train_init_draft(Model *draft, const Config *dcfg, const Model *target, uint64_t seed) {
    memset(draft, 0, sizeof *draft);
    draft->cfg = *dcfg;
    draft->layers = xcalloc(dcfg->num_hidden_layers, sizeof(LayerWeights), "draft layers");
    draft->inv_freq = xcalloc(dcfg->head_dim / 2, sizeof(real), "draft inv_freq");
    TrainParam *params = NULL;
    size_t *offset = NULL;
    int n = 0;
    if (!draft->layers || !draft->inv_freq || check_fit(draft, target) != 0 ||
        own_weights(draft, param_list, "the draft's trainable weights", 0, &params, &offset, &n) != 0) {
        model_free(draft);
        return -1;
    }
    rope_inv_freq(draft->inv_freq, dcfg->head_dim, dcfg->rope_theta);
    init_weights(params, n, seed);
    free(params);
    free(offset);
    return 0;
}

/* ===========================================================================
 * 2. Anchors (SpecForge, specforge/core/dflash.py, _sample_anchor_positions)
 * ======================================================================== */

/* candidates of one sequence: positions 0..max(S-B, 0) with loss_mask 1 */
static int anchor_candidates(const int *loss_mask, int S, int B, int *cand) {
    int last = S - B > 0 ? S - B : 0, n = 0;
    for (int p = 0; p <= last && p < S; p++)
        if (loss_mask[p]) {
            if (cand) cand[n] = p;
            n++;
        }
    return n;
}

int train_anchor_count(const int *loss_mask, int b, int S, int B, int num_anchors) {
    int most = 0;
    for (int i = 0; i < b; i++) {
        int c = anchor_candidates(loss_mask + (size_t)i * S, S, B, NULL);
        if (c > most) most = c;
    }
    int n = num_anchors < most - 1 ? num_anchors : most - 1;   /* min(num_anchors, max count - 1) */
    if (n < 1) {
        dflash_set_error("training: no valid anchor: the best sequence has %d position%s in 0..S-B = 0..%d with "
                         "loss mask 1 (SpecForge draws min(--anchors, that count - 1) anchors, which must be >= 1)",
                         most, most == 1 ? "" : "s", S - B > 0 ? S - B : 0);
        return -1;
    }
    return n;
}

int train_draw_anchors(uint64_t *rng, const int *loss_mask, int S, int B, int N, int *anchors, int *keep) {
    if (S < 1 || B < 1 || N < 1) {
        dflash_set_error("training: anchors: S %d, B %d, N %d must be >= 1", S, B, N);
        return -1;
    }
    int *cand = xcalloc(S, sizeof(int), "anchor candidates");
    if (!cand) return -1;
    int count = anchor_candidates(loss_mask, S, B, cand);
    int kept = N < count ? N : count;
    Rng g = {*rng};
    for (int i = 0; i < kept; i++) {   /* a partial Fisher-Yates shuffle: a uniform subset */
        int j = i + (int)(rng_uniform(&g) * (double)(count - i));
        int tmp = cand[i];
        cand[i] = cand[j];
        cand[j] = tmp;
    }
    *rng = g.s;
    for (int i = 1; i < kept; i++)   /* sorted ascending (insertion sort) */
        for (int j = i; j > 0 && cand[j - 1] > cand[j]; j--) {
            int tmp = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = tmp;
        }
    for (int i = 0; i < N; i++) {
        anchors[i] = i < kept ? cand[i] : 0;
        keep[i] = i < kept;
    }
    free(cand);
    return kept;
}

/* ===========================================================================
 * 3. Kernels and their backward
 * ======================================================================== */

/* Linear, forward: dflash.c's matmul, out (T, n_out) = x (T, n_in) W^T.
 * linear_backward: dx (T, n_in) += dout (T, n_out) W, and (dw not NULL)
 * dw (n_out, n_in) += dout^T x, as two passes of axpy loops:
 *   dx: four tokens at a time, every row o of W in turn (o ascending), so
 *       each row of W is read once per four tokens;
 *   dw: four rows of dw at a time, every token t in turn (t ascending), so
 *       those rows stay in L1 while the tokens stream by.
 * Each entry's sum runs in the same order whatever the blocking (dx_t over
 * o = 0..n_out-1, dw_o over t = 0..T-1): rows [t0, t1) of dx and rows
 * [o0, o1) of dw can be computed apart, by different threads, to the same
 * bits (rows_parallel below). */
/* The fast form of those loops, for the compiler to vectorise (no
 * intrinsics): a tile of TB_R rows by TB_I columns of dx (or of dw) is held
 * in acc (registers), loaded from memory first, then every term added in
 * the order above (o ascending for dx, t ascending for dw), then stored:
 * each entry's additions are the same IEEE operations in the same order as
 * the plain loops', so the same bits; only the memory traffic changes.
 * Columns past the last whole tile go the plain way. */
#define TB_R 4
#ifdef DFLASH_DOUBLE
#define TB_I 32   /* 4 x 32 doubles: 16 AVX-512 registers */
#else
#define TB_I 64   /* 4 x 64 floats: 16 AVX-512 registers */
#endif
#if defined(__GNUC__) && !defined(__clang__)
#define TB_UNROLL _Pragma("GCC unroll 64")
#else
#define TB_UNROLL
#endif
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) && !defined(__clang__) && !defined(DFLASH_NO_CLONES)
#if __has_attribute(target_clones)
#define TRAIN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef TRAIN_CLONES
#define TRAIN_CLONES
#endif

/* dw rows o0..o1-1 += dout^T x: dw_o[i] over t = 0..T-1. The column block
 * i0 outer, so its slice of x (T x TB_I) stays cached across the rows.
 * dx is the same sum with the roles swapped: dx rows t0..t1-1 += (dout^T)^T W
 * is linear_backward_dw(dx, dout^T, W, n_out, t0, t1, n_in, T): row t of dx
 * over o = 0..n_out-1, the order above (linear_backward_threads transposes
 * dout once into a scratch buffer). */
TRAIN_CLONES
static void linear_backward_dw(real *dw, const real *dout, const real *x, int T, int o0, int o1, int n_in,
                               int n_out) {
    int i_full = n_in - n_in % TB_I, o_full = o0 + (o1 - o0) / TB_R * TB_R;
    for (int i0 = 0; i0 < i_full; i0 += TB_I)
        for (int o = o0; o < o_full; o += TB_R) {
            real a0[TB_I], a1[TB_I], a2[TB_I], a3[TB_I];   /* TB_R = 4 rows of dw */
            real *d0 = dw + (size_t)o * n_in + i0, *d1 = d0 + n_in, *d2 = d1 + n_in, *d3 = d2 + n_in;
            TB_UNROLL for (int j = 0; j < TB_I; j++) a0[j] = d0[j], a1[j] = d1[j], a2[j] = d2[j], a3[j] = d3[j];
            for (int t = 0; t < T; t++) {
                const real *x_t = x + (size_t)t * n_in + i0, *g = dout + (size_t)t * n_out + o;
                real g0 = g[0], g1 = g[1], g2 = g[2], g3 = g[3];
                TB_UNROLL for (int j = 0; j < TB_I; j++) {
                    a0[j] += g0 * x_t[j];
                    a1[j] += g1 * x_t[j];
                    a2[j] += g2 * x_t[j];
                    a3[j] += g3 * x_t[j];
                }
            }
            TB_UNROLL for (int j = 0; j < TB_I; j++) d0[j] = a0[j], d1[j] = a1[j], d2[j] = a2[j], d3[j] = a3[j];
        }
    for (int o = o0; o < o1; o++) {   /* the plain loops for what is left */
        int i_from = o < o_full ? i_full : 0;
        real *dw_o = dw + (size_t)o * n_in;
        for (int t = 0; t < T; t++) {
            const real *x_t = x + (size_t)t * n_in;
            real g = dout[(size_t)t * n_out + o];
            for (int i = i_from; i < n_in; i++) dw_o[i] += g * x_t[i];
        }
    }
}

/* ---- threads: the trainers' matmuls split their output rows (the tokens
 * of a forward's out and of dx, the rows of dw) into contiguous ranges, one
 * per thread; every entry is computed by the same operations in the same
 * order as with one thread, so the bits do not depend on the thread count
 * (train/tests/test_train.c checks it). */
typedef struct {
    int kind;                     /* 0: forward, 1: dx, 2: dw */
    real *out;
    const real *x, *w, *dout;
    int T, n_in, n_out, lo, hi;
} RowsJob;

static void rows_job_run(RowsJob *j) {
    if (j->lo >= j->hi) return;
    if (j->kind == 0)
        matmul(j->out + (size_t)j->lo * j->n_out, j->x + (size_t)j->lo * j->n_in, j->w, j->hi - j->lo, j->n_in,
               j->n_out);
    else if (j->kind == 1)   /* j->dout: dout^T (n_out, T) */
        linear_backward_dw(j->out, j->dout, j->w, j->n_out, j->lo, j->hi, j->n_in, j->T);
    else
        linear_backward_dw(j->out, j->dout, j->x, j->T, j->lo, j->hi, j->n_in, j->n_out);
}

static void *rows_job_thread(void *p) {
    rows_job_run(p);
    return NULL;
}

/* Rows 0..n-1 of job split into `threads` contiguous ranges (multiples of 4
 * but the last); the calling thread does the first. A thread that cannot be
 * started leaves its range to the caller (same bits). */
static void rows_parallel(const RowsJob *job, int n, int threads) {
    enum { MAX_THREADS = 64 };
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1 || n < 8) {
        RowsJob j = *job;
        j.lo = 0, j.hi = n;
        rows_job_run(&j);
        return;
    }
    RowsJob jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    int chunk = ((n + threads - 1) / threads + 3) / 4 * 4;
    for (int k = 0; k < threads; k++) {
        jobs[k] = *job;
        jobs[k].lo = k * chunk < n ? k * chunk : n;
        jobs[k].hi = (k + 1) * chunk < n ? (k + 1) * chunk : n;
        if (k > 0) started[k] = pthread_create(&tid[k], NULL, rows_job_thread, &jobs[k]) == 0;
    }
    rows_job_run(&jobs[0]);
    for (int k = 1; k < threads; k++) {
        if (started[k]) pthread_join(tid[k], NULL);
        else rows_job_run(&jobs[k]);
    }
}

static void matmul_threads(int threads, real *out, const real *x, const real *w, int T, int n_in, int n_out) {
    RowsJob j = {0, out, x, w, NULL, T, n_in, n_out, 0, 0};
    rows_parallel(&j, T, threads);
}

/* scratch: NULL, or room for T x n_out reals (the run's, allocated once) */
static void linear_backward_threads(int threads, real *scratch, real *dx, real *dw, const real *dout, const real *x,
                                    const real *w, int T, int n_in, int n_out) {
    if (dx) {
        real *dout_t = scratch ? scratch : malloc(sizeof(real) * (size_t)T * n_out);   /* (n_out, T) dout^T */
        if (!dout_t) {   /* no scratch: the plain loops, the same sums in the same order */
            for (int o = 0; o < n_out; o++)
                for (int t = 0; t < T; t++) {
                    real g = dout[(size_t)t * n_out + o];
                    for (int i = 0; i < n_in; i++) dx[(size_t)t * n_in + i] += g * w[(size_t)o * n_in + i];
                }
        } else {
            for (int t = 0; t < T; t++)
                for (int o = 0; o < n_out; o++) dout_t[(size_t)o * T + t] = dout[(size_t)t * n_out + o];
            RowsJob j = {1, dx, x, w, dout_t, T, n_in, n_out, 0, 0};
            rows_parallel(&j, T, threads);
            if (dout_t != scratch) free(dout_t);
        }
    }
    if (dw) {
        RowsJob j = {2, dw, x, w, dout, T, n_in, n_out, 0, 0};
        rows_parallel(&j, n_out, threads);
    }
}

/* RMSNorm, forward: dflash.c's rmsnorm_rows, y = w * (x * r) per row of n,
 * r = 1/sqrt(mean(x^2) + eps).
 * rmsnorm_backward: with g = dy * w,
 *   dx += r * (g - x * r^2 * mean(g * x)),   dw += dy * x * r  */
static void rmsnorm_backward(real *dx, real *dw, const real *dy, const real *x, const real *w,
                             int rows, int n, real eps) {
    for (int row = 0; row < rows; row++) {
        const real *x_r = x + (size_t)row * n, *dy_r = dy + (size_t)row * n;
        real *dx_r = dx + (size_t)row * n;
        real ss = 0, gx = 0;
        for (int i = 0; i < n; i++) ss += x_r[i] * x_r[i];
        real r = (real)1 / (real)sqrt((double)(ss / (real)n + eps));
        for (int i = 0; i < n; i++) gx += dy_r[i] * w[i] * x_r[i];
        real c = r * r * (gx / (real)n);
        for (int i = 0; i < n; i++) {
            dx_r[i] += r * (dy_r[i] * w[i] - x_r[i] * c);
            dw[i] += dy_r[i] * x_r[i] * r;
        }
    }
}

/* RoPE, forward: dflash.c's apply_rotary_pos_emb (queries at the last q_len
 * of the k_len table rows). For one pair (x1, x2) = (x[i], x[i + d/2]):
 *   y1 = x1 cos - x2 sin,  y2 = x2 cos + x1 sin  (a rotation), so
 *   dx1 = dy1 cos + dy2 sin,  dx2 = dy2 cos - dy1 sin  (the inverse rotation)
 * rope_backward: dx (rows, heads*d) += that, row t at table row row0 + t. */
static void rope_backward(real *dx, const real *dy, const real *cos_, const real *sin_, int rows, int row0,
                          int heads, int head_dim) {
    int half = head_dim / 2;
    for (int t = 0; t < rows; t++) {
        const real *c = cos_ + (size_t)(row0 + t) * head_dim, *s = sin_ + (size_t)(row0 + t) * head_dim;
        for (int h = 0; h < heads; h++) {
            const real *dy_h = dy + ((size_t)t * heads + h) * head_dim;
            real *dx_h = dx + ((size_t)t * heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                real dy1 = dy_h[i], dy2 = dy_h[i + half];
                dx_h[i] += dy1 * c[i] + dy2 * s[i + half];
                dx_h[i + half] += dy2 * c[i + half] + (-dy1) * s[i];
            }
        }
    }
}

/* The block mask (SpecForge create_dflash_sdpa_mask), one sequence:
 * mask (Q, P)[i][j] = 1 iff query i of block n = i / B, at block offset
 * q = i % B, may see key j: a context key j < S with j < anchor_n, or a key
 * of block n itself (causal: only its offsets <= q); none at all when
 * keep[n] is 0.
 * window w > 0: the mask of a sliding_attention layer (create_dflash_sdpa_mask
 * with sliding_window = w): a context key also needs
 *   j >= anchor_n + q - (w - 1)     ("the current draft token occupies one
 *                                    slot in the window": w positions, the
 *                                    query's own included)
 * and a block key is causal (offset <= q) whatever `causal` says. Block keys
 * are not windowed: for B > w a query sees its block from the anchor on
 * (inference windows them too: NOTES.md, "Sliding-window draft layers"). */
static void block_mask(int *mask, const int *anchors, const int *keep, int S, int N, int B, int causal, int window) {
    int Q = N * B, P = S + Q;
    for (int i = 0; i < Q; i++) {
        int n = i / B, q = i % B;
        for (int j = 0; j < P; j++) {
            int ctx = j < S && j < anchors[n] && (window <= 0 || j >= anchors[n] + q - (window - 1));
            int own = j >= S && (j - S) / B == n && (!(causal || window > 0) || (j - S) % B <= q);
            mask[(size_t)i * P + j] = keep[n] && (ctx || own);
        }
    }
}

/* Attention under the block mask, forward (eager_attention_forward with an
 * additive finfo.min mask, rows that see nothing giving 0 as flex attention
 * does), one sequence:
 *   q (Q, H*d) after RoPE; k, v (P, Hkv*d), k after RoPE; mask (Q, P), or
 *   NULL: the causal mask of a target (P == Q, query i sees keys 0..i)
 *   att (H, Q, P) = softmax over the visible keys of q.k * d^-0.5 (0 elsewhere)
 *   out (Q, H*d) = att @ v
 * Query head h reads KV head h / (H / Hkv). */
#define SEES(vis, j) (!(vis) || (vis)[j])
static void attention_masked(real *out, real *att, const real *q, const real *k, const real *v, const int *mask,
                             int Q, int P, int n_heads, int n_kv_heads, int head_dim) {
    real scale = (real)(1.0 / sqrt((double)head_dim));
    int group = n_heads / n_kv_heads, kvd = n_kv_heads * head_dim;
    for (int h = 0; h < n_heads; h++) {
        int kvh = h / group;
        for (int i = 0; i < Q; i++) {
            const real *q_i = q + ((size_t)i * n_heads + h) * head_dim;
            const int *vis = mask ? mask + (size_t)i * P : NULL;
            int jn = mask ? P : i + 1;   /* causal: keys after i are never visible */
            real *a = att + ((size_t)h * Q + i) * P;
            real *o = out + ((size_t)i * n_heads + h) * head_dim;
            real mx = 0, sum = 0;
            int any = 0;
            for (int j = jn; j < P; j++) a[j] = 0;
            for (int j = 0; j < jn; j++) {
                a[j] = 0;
                if (!SEES(vis, j)) continue;
                a[j] = dot(q_i, k + (size_t)j * kvd + kvh * head_dim, head_dim) * scale;
                if (!any || a[j] > mx) mx = a[j];
                any = 1;
            }
            for (int j = 0; j < jn; j++)
                if (SEES(vis, j)) { a[j] = exp_real(a[j] - mx); sum += a[j]; }
            for (int j = 0; j < jn; j++)
                if (SEES(vis, j)) a[j] = a[j] / sum;
            for (int e = 0; e < head_dim; e++) o[e] = 0;
            for (int j = 0; j < jn; j++) {
                if (!SEES(vis, j)) continue;
                const real *v_j = v + (size_t)j * kvd + kvh * head_dim;
                for (int e = 0; e < head_dim; e++) o[e] += a[j] * v_j[e];
            }
        }
    }
}

/* attention_masked_backward: from dout (Q, H*d), adds dq (Q, H*d), dk, dv (P, Hkv*d).
 *   da_j = dout . v_j          dv_j += a_j dout
 *   ds_j = a_j (da_j - sum_m a_m da_m)     (the softmax's Jacobian)
 *   dq += d^-0.5 sum_j ds_j k_j            dk_j += d^-0.5 ds_j q
 * over the visible keys only (the others have a_j = 0); mask NULL: causal. */
static void attention_masked_backward(real *dq, real *dk, real *dv, const real *dout, const real *att, const real *q,
                                      const real *k, const real *v, const int *mask, int Q, int P, int n_heads,
                                      int n_kv_heads, int head_dim, real *da /* (P) scratch */) {
    real scale = (real)(1.0 / sqrt((double)head_dim));
    int group = n_heads / n_kv_heads, kvd = n_kv_heads * head_dim;
    for (int h = 0; h < n_heads; h++) {
        int kvh = h / group;
        for (int i = 0; i < Q; i++) {
            const real *q_i = q + ((size_t)i * n_heads + h) * head_dim;
            const real *do_i = dout + ((size_t)i * n_heads + h) * head_dim;
            real *dq_i = dq + ((size_t)i * n_heads + h) * head_dim;
            const int *vis = mask ? mask + (size_t)i * P : NULL;
            int jn = mask ? P : i + 1;
            const real *a = att + ((size_t)h * Q + i) * P;
            real sum_ad = 0;
            for (int j = 0; j < jn; j++) {
                if (!SEES(vis, j)) continue;
                da[j] = dot(do_i, v + (size_t)j * kvd + kvh * head_dim, head_dim);
                sum_ad += a[j] * da[j];
                real *dv_j = dv + (size_t)j * kvd + kvh * head_dim;
                for (int e = 0; e < head_dim; e++) dv_j[e] += a[j] * do_i[e];
            }
            for (int j = 0; j < jn; j++) {
                if (!SEES(vis, j)) continue;
                real ds = a[j] * (da[j] - sum_ad) * scale;
                const real *k_j = k + (size_t)j * kvd + kvh * head_dim;
                real *dk_j = dk + (size_t)j * kvd + kvh * head_dim;
                for (int e = 0; e < head_dim; e++) {
                    dq_i[e] += ds * k_j[e];
                    dk_j[e] += ds * q_i[e];
                }
            }
        }
    }
}

/* SwiGLU, forward: act = silu(gate) * up (dflash.c's mlp_block).
 * swiglu_backward: with s = sigmoid(gate), silu' = s (1 + gate (1 - s)):
 *   dgate = dact * up * silu'(gate),  dup = dact * silu(gate)  (written, not added) */
static void swiglu_backward(real *dgate, real *dup, const real *dact, const real *gate, const real *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        real s = (real)1 / ((real)1 + exp_real(-gate[i]));
        dgate[i] = dact[i] * up[i] * (s * ((real)1 + gate[i] * ((real)1 - s)));
        dup[i] = dact[i] * (gate[i] * s);
    }
}

/* Cross-entropy of one row of V logits against label, forward:
 * ce = logsumexp(x) - x[label] (F.cross_entropy, reduction "none").
 * cross_entropy_backward: dx = coef * (softmax(x) - onehot(label)), written;
 * coef = this row's d loss / d ce = w / (sum(w) + 1e-6). */
static real logsumexp(const real *x, int V) {
    real mx = x[0], sum = 0;
    for (int j = 1; j < V; j++) if (x[j] > mx) mx = x[j];
    for (int j = 0; j < V; j++) sum += exp_real(x[j] - mx);
    return mx + (real)log((double)sum);
}

static real cross_entropy(const real *x, int V, int label) { return logsumexp(x, V) - x[label]; }

static void cross_entropy_backward(real *dx, const real *x, int V, int label, real coef) {
    real lse = logsumexp(x, V);
    for (int j = 0; j < V; j++) dx[j] = coef * (exp_real(x[j] - lse) - (real)(j == label));
}

/* ===========================================================================
 * 4. The step
 * ======================================================================== */

/* One draft layer's activations over the whole batch (rows: b*Q block rows,
 * b*P key rows). */
typedef struct {
    const real *h_in;   /* (b*Q, D)     the layer's input (not owned)        */
    real *xb;           /* (b*Q, D)     X = input_layernorm(h)               */
    real *kv_in;        /* (b*P, D)     per sequence [C ; X]: K/V's input     */
    real *q;            /* (b*Q, H*d)   q_proj(X)                            */
    real *qn;           /* (b*Q, H*d)   q_norm per head                      */
    real *q_rope;       /* (b*Q, H*d)   after RoPE at the block positions    */
    real *k;            /* (b*P, Hkv*d) k_proj([C ; X])                      */
    real *kn;           /* (b*P, Hkv*d) k_norm per head                      */
    real *k_rope;       /* (b*P, Hkv*d) after RoPE                           */
    real *v;            /* (b*P, Hkv*d) v_proj([C ; X])                      */
    real *att;          /* (b, H, Q, P) attention weights, 0 where masked    */
    real *attn;         /* (b*Q, H*d)   att @ v, heads side by side          */
    real *attn_output;  /* (b*Q, D)     o_proj(attn)                         */
    real *h_mid;        /* (b*Q, D)     h + attn_output                      */
    real *xb2;          /* (b*Q, D)     post_attention_layernorm(h_mid)      */
    real *gate, *up;    /* (b*Q, I)                                          */
    real *act;          /* (b*Q, I)     silu(gate) * up                      */
    real *mlp_out;      /* (b*Q, D)     down_proj(act)                       */
    real *out;          /* (b*Q, D)     h_mid + mlp_out: the layer's output  */
} TrainLayer;

struct TrainRun {
    int b, S, N, B, Q, P;  /* this step's batch: strides of every buffer below  */
    int cap_b, cap_S, cap_N, cap_B;  /* the largest batch the buffers hold (run_fit) */
    int *noise_ids;       /* (b, Q)       block n: [input_ids[anchor_n], mask...] */
    int *pos;             /* (b, P)       position_ids: 0..S-1, anchor_n + k     */
    int *mask;            /* (b, Q, P)    1: visible                            */
    int *mask_sliding;    /* (b, Q, P)    the sliding_attention layers' mask, or NULL */
    int window;           /*              their sliding_window (0: no such layer)   */
    int *labels;          /* (b, Q)       input_ids[min(anchor_n + k, S-1)]     */
    int *keep;            /* (b, N)       the batch's keep flags (default 1)    */
    int *lmask;           /* (b, S)       the batch's loss mask (default 1)     */
    real *binary;         /* (b, Q)       loss weights before the decay          */
    real *weights;        /* (b, Q)       loss weights                          */
    real *ce;             /* (b, Q)                                             */
    real *angles;         /* (b, P, d/2)                                        */
    real *cos, *sin;      /* (b, P, d)                                          */
    real *target_hidden;  /* (b*S, k*D)                                         */
    real *fc_out;         /* (b*S, D)     fc(target_hidden)                     */
    real *C;              /* (b*S, D)     hidden_norm(fc_out)                   */
    real *emb;            /* (b*Q, D)     embed_tokens(noise_ids)               */
    TrainLayer *layers;   /* (L)                                                */
    real *norm;           /* (b*Q, D)     final norm                            */
    real *logits;         /* (b*Q, V)                                           */
    /* gradients (d loss / d .), reused layer after layer */
    real *dlogits;        /* (b*Q, V)  */
    real *dh;             /* (b*Q, D)  the residual stream's gradient           */
    real *dh_mid, *dxb2, *dxb, *dattn_output;  /* (b*Q, D) */
    real *dact, *dgate, *dup;                  /* (b*Q, I) */
    real *dattn, *dq_rope, *dqn, *dq;          /* (b*Q, H*d) */
    real *dk_rope, *dkn, *dk, *dv;             /* (b*P, Hkv*d) */
    real *dkv_in;         /* (b*P, D)  */
    real *dC, *dfc_out;   /* (b*S, D)  */
    real *da;             /* (P)       attention scratch */
    void **owned;         /* (cap_owned) every buffer above, for run_free */
    int n_owned, cap_owned;
    int failed;
    int threads;          /* the matmuls' threads (TrainHyper.threads) */
    real *scratch;        /* (rows x widest Linear output) dout^T for linear_backward_threads */
};

#define train_matmul(r, out, x, w, T, n_in, n_out) matmul_threads((r)->threads, out, x, w, T, n_in, n_out)
#define train_linear_backward(r, dx, dw, dout, x, w, T, n_in, n_out) \
    linear_backward_threads((r)->threads, (r)->scratch, dx, dw, dout, x, w, T, n_in, n_out)

static void *run_alloc(TrainRun *r, size_t n, size_t size, const char *what) {
    void *p = NULL;
    if (!r->failed && r->n_owned == r->cap_owned) {  /* 43 + 19 per draft layer */
        int cap = r->cap_owned ? 2 * r->cap_owned : 128;
        void **o = realloc(r->owned, sizeof(void *) * (size_t)cap);
        if (o) r->owned = o, r->cap_owned = cap;
        else r->failed = 1, dflash_set_error("out of memory (training buffers)");
    }
    if (!r->failed) p = xcalloc(n, size, what);
    if (p) r->owned[r->n_owned++] = p;
    else r->failed = 1;
    return p;
}
#define RUN_REALS(r, rows, cols, what) ((real *)run_alloc((r), (size_t)(rows) * (size_t)(cols), sizeof(real), (what)))

static void run_free(TrainRun *r) {
    for (int i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->owned);
    free(r->layers);
    memset(r, 0, sizeof *r);
}

/* The mask layer l of the draft attends under (b, Q, P): a sliding_attention
 * layer's, or the block mask (SpecForge picks attention_mask[layer_type]). */
static const int *layer_mask(const Config *dc, const TrainRun *r, int l) {
    return dc->layer_window[l] > 0 ? r->mask_sliding : r->mask;
}

/* Every layer's TrainLayer buffers, for both trainers: rows query rows
 * (the draft: b*Q block rows; the target: b*T tokens), krows key rows (b*P:
 * per sequence the S context rows then the Q block rows; the target: b*T),
 * attention weights att_rows x P (b*H*Q rows of P keys; the target: b*H*T x T). */
static void layers_alloc(TrainRun *r, const Config *c, size_t rows, size_t krows, size_t att_rows, int P) {
    int D = c->hidden_size, I = c->intermediate_size, Hd = c->num_attention_heads * c->head_dim;
    int kvd = c->num_key_value_heads * c->head_dim;
    r->layers = xcalloc(c->num_hidden_layers, sizeof(TrainLayer), "training layer activations");
    if (!r->layers) r->failed = 1;
    for (int l = 0; !r->failed && l < c->num_hidden_layers; l++) {
        TrainLayer *a = &r->layers[l];
        a->xb = RUN_REALS(r, rows, D, "xb");
        a->kv_in = RUN_REALS(r, krows, D, "kv_in");
        a->q = RUN_REALS(r, rows, Hd, "q");
        a->qn = RUN_REALS(r, rows, Hd, "qn");
        a->q_rope = RUN_REALS(r, rows, Hd, "q_rope");
        a->k = RUN_REALS(r, krows, kvd, "k");
        a->kn = RUN_REALS(r, krows, kvd, "kn");
        a->k_rope = RUN_REALS(r, krows, kvd, "k_rope");
        a->v = RUN_REALS(r, krows, kvd, "v");
        a->att = RUN_REALS(r, att_rows, P, "attention weights");
        a->attn = RUN_REALS(r, rows, Hd, "attn");
        a->attn_output = RUN_REALS(r, rows, D, "attn_output");
        a->h_mid = RUN_REALS(r, rows, D, "h_mid");
        a->xb2 = RUN_REALS(r, rows, D, "xb2");
        a->gate = RUN_REALS(r, rows, I, "gate");
        a->up = RUN_REALS(r, rows, I, "up");
        a->act = RUN_REALS(r, rows, I, "act");
        a->mlp_out = RUN_REALS(r, rows, D, "mlp_out");
        a->out = RUN_REALS(r, rows, D, "layer output");
    }
}

static int run_init(TrainRun *r, const Config *dc, const Config *tc, int b, int S, int N, int B) {
    memset(r, 0, sizeof *r);
    int D = dc->hidden_size, I = dc->intermediate_size, d = dc->head_dim, V = tc->vocab_size;
    int Hd = dc->num_attention_heads * d, kvd = dc->num_key_value_heads * d, H = dc->num_attention_heads;
    int kD = dc->n_target_layer_ids * D, Q = N * B, P = S + Q;
    size_t bQ = (size_t)b * Q, bP = (size_t)b * P, bS = (size_t)b * S;
    r->b = b, r->S = S, r->N = N, r->B = B, r->Q = Q, r->P = P;
    r->noise_ids = run_alloc(r, bQ, sizeof(int), "noise_ids");
    r->pos = run_alloc(r, bP, sizeof(int), "position_ids");
    r->mask = run_alloc(r, bQ * P, sizeof(int), "attention mask");
    r->window = draft_window(dc);
    if (r->window > 0) r->mask_sliding = run_alloc(r, bQ * P, sizeof(int), "sliding-window attention mask");
    r->labels = run_alloc(r, bQ, sizeof(int), "labels");
    r->keep = run_alloc(r, (size_t)b * N, sizeof(int), "keep");
    r->lmask = run_alloc(r, bS, sizeof(int), "loss mask");
    r->binary = RUN_REALS(r, bQ, 1, "binary weights");
    r->weights = RUN_REALS(r, bQ, 1, "loss weights");
    r->ce = RUN_REALS(r, bQ, 1, "ce");
    r->angles = RUN_REALS(r, bP, d / 2, "rope angles");
    r->cos = RUN_REALS(r, bP, d, "cos");
    r->sin = RUN_REALS(r, bP, d, "sin");
    r->target_hidden = RUN_REALS(r, bS, kD, "target_hidden");
    r->fc_out = RUN_REALS(r, bS, D, "fc");
    r->C = RUN_REALS(r, bS, D, "hidden_norm");
    r->emb = RUN_REALS(r, bQ, D, "noise embedding");
    r->norm = RUN_REALS(r, bQ, D, "norm");
    r->logits = RUN_REALS(r, bQ, V, "logits");
    r->dlogits = RUN_REALS(r, bQ, V, "d logits");
    r->dh = RUN_REALS(r, bQ, D, "d h");
    r->dh_mid = RUN_REALS(r, bQ, D, "d h_mid");
    r->dxb2 = RUN_REALS(r, bQ, D, "d xb2");
    r->dxb = RUN_REALS(r, bQ, D, "d xb");
    r->dattn_output = RUN_REALS(r, bQ, D, "d attn_output");
    r->dact = RUN_REALS(r, bQ, I, "d act");
    r->dgate = RUN_REALS(r, bQ, I, "d gate");
    r->dup = RUN_REALS(r, bQ, I, "d up");
    r->dattn = RUN_REALS(r, bQ, Hd, "d attn");
    r->dq_rope = RUN_REALS(r, bQ, Hd, "d q_rope");
    r->dqn = RUN_REALS(r, bQ, Hd, "d qn");
    r->dq = RUN_REALS(r, bQ, Hd, "d q");
    r->dk_rope = RUN_REALS(r, bP, kvd, "d k_rope");
    r->dkn = RUN_REALS(r, bP, kvd, "d kn");
    r->dk = RUN_REALS(r, bP, kvd, "d k");
    r->dv = RUN_REALS(r, bP, kvd, "d v");
    r->dkv_in = RUN_REALS(r, bP, D, "d kv_in");
    r->dC = RUN_REALS(r, bS, D, "d C");
    r->dfc_out = RUN_REALS(r, bS, D, "d fc");
    r->da = RUN_REALS(r, P, 1, "attention scratch");
    {   /* dout^T of the widest Linear backward: lm_head, the MLP, k/v, fc */
        size_t widest = bQ * (size_t)(V > I ? V : I);
        if (bP * (size_t)kvd > widest) widest = bP * (size_t)kvd;
        if (bQ * (size_t)(D > Hd ? D : Hd) > widest) widest = bQ * (size_t)(D > Hd ? D : Hd);
        if (bS * (size_t)D > widest) widest = bS * (size_t)D;
        r->scratch = RUN_REALS(r, widest, 1, "transpose scratch");
    }
    layers_alloc(r, dc, bQ, bP, (size_t)b * H * Q, P);
    return r->failed ? -1 : 0;
}

/* Make r hold a batch of b sequences of S tokens, N blocks of B: the
 * buffers, allocated (run_init) for the largest batch seen so far in each
 * of b, S, N, B, are kept from step to step and only reallocated when a
 * batch is larger in one of them (then at the larger of each). Every buffer
 * is indexed with this batch's strides (r->Q, r->P), and every entry a step
 * reads it has written first, so a kept buffer gives the bits a fresh one
 * would. */
static int run_fit(TrainRun *r, const Config *dc, const Config *tc, int b, int S, int N, int B) {
    if (!r->layers || b > r->cap_b || S > r->cap_S || N > r->cap_N || B > r->cap_B) {
        int cb = b > r->cap_b ? b : r->cap_b, cS = S > r->cap_S ? S : r->cap_S;
        int cN = N > r->cap_N ? N : r->cap_N, cB = B > r->cap_B ? B : r->cap_B;
        run_free(r);
        if (run_init(r, dc, tc, cb, cS, cN, cB) != 0) {
            run_free(r);
            return -1;
        }
        r->cap_b = cb, r->cap_S = cS, r->cap_N = cN, r->cap_B = cB;
    }
    r->b = b, r->S = S, r->N = N, r->B = B, r->Q = N * B, r->P = S + N * B;
    return 0;
}

static void zero(real *x, size_t n) { memset(x, 0, sizeof(real) * n); }

/* The batch against the two configs, before anything runs. */
static int check_batch(const Model *dm, const Model *tm, const TrainBatch *bt) {
    const Config *dc = &dm->cfg, *tc = &tm->cfg;
    if (bt->b < 1 || bt->S < 1 || bt->N < 1 || bt->B < 1 || bt->B > DFLASH_MAX_BLOCK) {
        dflash_set_error("training batch: b %d, S %d, N %d must be >= 1 and the block size %d in 1..%d", bt->b, bt->S,
                         bt->N, bt->B, DFLASH_MAX_BLOCK);
        return -1;
    }
    for (int i = 0; i < bt->b * bt->S; i++) {
        if (bt->input_ids[i] < 0 || bt->input_ids[i] >= tc->vocab_size) {
            dflash_set_error("training batch: sequence %d position %d: token id %d is outside the vocabulary 0..%d",
                             i / bt->S, i % bt->S, bt->input_ids[i], tc->vocab_size - 1);
            return -1;
        }
        if (bt->loss_mask && bt->loss_mask[i] != 0 && bt->loss_mask[i] != 1) {
            dflash_set_error("training batch: sequence %d position %d: loss mask %d is not 0 or 1", i / bt->S,
                             i % bt->S, bt->loss_mask[i]);
            return -1;
        }
    }
    for (int i = 0; i < bt->b * bt->N; i++) {
        int a = bt->anchors[i];
        if (a < 0 || a >= bt->S) {
            dflash_set_error("training batch: sequence %d anchor %d: %d is not a position 0..%d", i / bt->N,
                             i % bt->N, a, bt->S - 1);
            return -1;
        }
        if ((long)a + bt->B > dc->max_position_embeddings) {
            dflash_set_error("training batch: anchor %d + block size %d exceeds max_position_embeddings %d", a,
                             bt->B, dc->max_position_embeddings);
            return -1;
        }
    }
    if (bt->S > tc->max_position_embeddings) {
        dflash_set_error("training batch: sequence length %d exceeds max_position_embeddings %d", bt->S,
                         tc->max_position_embeddings);
        return -1;
    }
    return 0;
}

/* ---- tracing helpers (section 5) */
static int emit(const TraceHook *hook, int step, const TraceDims *dims, const char *name, const void *data);
static TraceDims train_dims(const Model *dm, const Model *tm, const TrainBatch *bt);
/* one traced tensor: its name and train/train.c's buffer (formats/tracenames.c's training
 * rows give its shape from the step's sizes, dims) */
#define EMIT(hook, step, dims, name, data)                                                             \
    do {                                                                                               \
        if ((hook) && emit((hook), (step), (dims), (name), (data)) != 0) goto done;                    \
    } while (0)

/* Set-up from the batch: noise ids, positions, the mask, labels, weights
 * (SpecForge OnlineDFlashModel.forward, _create_noise_embed,
 * _create_position_ids, create_dflash_sdpa_mask). */
static void batch_setup(TrainRun *r, const TrainBatch *bt, int mask_id, double gamma, int causal) {
    int S = r->S, N = r->N, B = r->B, Q = r->Q, P = r->P;
    for (int i = 0; i < r->b * S; i++) r->lmask[i] = bt->loss_mask ? bt->loss_mask[i] : 1;
    for (int i = 0; i < r->b * N; i++) r->keep[i] = bt->keep ? bt->keep[i] != 0 : 1;
    for (int bi = 0; bi < r->b; bi++) {
        const int *ids = bt->input_ids + (size_t)bi * S, *anc = bt->anchors + (size_t)bi * N;
        const int *keep = r->keep + (size_t)bi * N, *lm = r->lmask + (size_t)bi * S;
        for (int j = 0; j < S; j++) r->pos[(size_t)bi * P + j] = j;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < B; k++) {
                size_t row = (size_t)bi * Q + (size_t)n * B + k;
                int idx = anc[n] + k, safe = idx < S ? idx : S - 1;
                r->noise_ids[row] = k == 0 && keep[n] ? ids[anc[n]] : mask_id;
                r->pos[(size_t)bi * P + S + n * B + k] = idx;
                r->labels[row] = ids[safe];
                real w = (real)(keep[n] && idx < S && k > 0 && lm[safe]);
                r->binary[row] = w;
                if (gamma > 0) w = w * (real)exp(-(double)(k - 1 > 0 ? k - 1 : 0) / gamma);
                r->weights[row] = w;
            }
        block_mask(r->mask + (size_t)bi * Q * P, anc, keep, S, N, B, causal, 0);
        if (r->window > 0) block_mask(r->mask_sliding + (size_t)bi * Q * P, anc, keep, S, N, B, causal, r->window);
    }
}

/* One decoder layer, forward, for both trainers, over the whole batch:
 * decoder_layer_forward(w, acts, h_in, mask, r) with r's geometry (b
 * sequences of Q query rows and P = S + Q key rows), r->C the context and
 * mask (b, Q, P) the layer's:
 *   the draft  (Qwen3DFlashDecoderLayer with Qwen3DFlashAttention): S context
 *              rows C (b*S, D) injected as keys/values, the block mask (a
 *              sliding_attention layer: its window's, layer_mask)
 *   the target (Qwen3DecoderLayer / LlamaDecoderLayer): S = 0, no context,
 *              mask NULL: causal
 * Q from the query rows, K and V from [C ; X] through the same k_proj / v_proj
 * / k_norm (no q/k norms in a Llama target: w->q_norm NULL), RoPE (queries at
 * the last Q of the P table rows), attention, o_proj, residual, MLP, residual:
 * the chain of dflash.c's target_forward, in the same order of operations. */
static void decoder_layer_forward(const Config *c, const LayerWeights *w, TrainLayer *a, const real *h_in,
                                  const int *mask, TrainRun *r) {
    int D = c->hidden_size, I = c->intermediate_size, H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int d = c->head_dim, Hd = H * d, kvd = Hkv * d, S = r->S, Q = r->Q, P = r->P;
    int rows = r->b * Q, krows = r->b * P;
    real eps = (real)c->rms_norm_eps;
    a->h_in = h_in;
    rmsnorm_rows(a->xb, h_in, w->input_layernorm, rows, D, eps);
    train_matmul(r, a->q, a->xb, w->q_proj, rows, D, Hd);
    if (w->q_norm) rmsnorm_rows(a->qn, a->q, w->q_norm, rows * H, d, eps);
    else memcpy(a->qn, a->q, sizeof(real) * (size_t)rows * Hd);
    for (int bi = 0; bi < r->b; bi++) {
        if (S) memcpy(a->kv_in + (size_t)bi * P * D, r->C + (size_t)bi * S * D, sizeof(real) * S * D);
        memcpy(a->kv_in + ((size_t)bi * P + S) * D, a->xb + (size_t)bi * Q * D, sizeof(real) * Q * D);
    }
    train_matmul(r, a->k, a->kv_in, w->k_proj, krows, D, kvd);
    train_matmul(r, a->v, a->kv_in, w->v_proj, krows, D, kvd);
    if (w->k_norm) rmsnorm_rows(a->kn, a->k, w->k_norm, krows * Hkv, d, eps);
    else memcpy(a->kn, a->k, sizeof(real) * (size_t)krows * kvd);
    for (int bi = 0; bi < r->b; bi++) {
        apply_rotary_pos_emb(a->q_rope + (size_t)bi * Q * Hd, a->k_rope + (size_t)bi * P * kvd,
                             a->qn + (size_t)bi * Q * Hd, a->kn + (size_t)bi * P * kvd, r->cos + (size_t)bi * P * d,
                             r->sin + (size_t)bi * P * d, Q, P, H, Hkv, d);
        attention_masked(a->attn + (size_t)bi * Q * Hd, a->att + (size_t)bi * H * Q * P, a->q_rope + (size_t)bi * Q * Hd,
                         a->k_rope + (size_t)bi * P * kvd, a->v + (size_t)bi * P * kvd,
                         mask ? mask + (size_t)bi * Q * P : NULL, Q, P, H, Hkv, d);
    }
    train_matmul(r, a->attn_output, a->attn, w->o_proj, rows, Hd, D);
    for (size_t i = 0; i < (size_t)rows * D; i++) a->h_mid[i] = h_in[i] + a->attn_output[i];
    rmsnorm_rows(a->xb2, a->h_mid, w->post_attention_layernorm, rows, D, eps);
    train_matmul(r, a->gate, a->xb2, w->gate_proj, rows, D, I);
    train_matmul(r, a->up, a->xb2, w->up_proj, rows, D, I);
    for (size_t i = 0; i < (size_t)rows * I; i++) a->act[i] = silu(a->gate[i]) * a->up[i];
    train_matmul(r, a->mlp_out, a->act, w->down_proj, rows, I, D);
    for (size_t i = 0; i < (size_t)rows * D; i++) a->out[i] = a->h_mid[i] + a->mlp_out[i];
}

/* decoder_layer_backward(w, g, acts, mask, r), mask the forward's: r->dh
 * holds d loss / d (the layer's output); on return it holds d loss / d (its input), and r->dC (when S > 0)
 * has the context's share added. g: the layer's gradients, in the weights'
 * layout (&grads.layers[l]), added to. */
static void decoder_layer_backward(const Config *c, const LayerWeights *w, const LayerWeights *g,
                                   const TrainLayer *a, const int *mask, TrainRun *r) {
    int D = c->hidden_size, I = c->intermediate_size, H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int d = c->head_dim, Hd = H * d, kvd = Hkv * d, S = r->S, Q = r->Q, P = r->P;
    int rows = r->b * Q, krows = r->b * P;
    size_t nD = (size_t)rows * D, nI = (size_t)rows * I;
    real eps = (real)c->rms_norm_eps;

    /* out = h_mid + down_proj(act): both get dh */
    memcpy(r->dh_mid, r->dh, sizeof(real) * nD);
    zero(r->dact, nI);
    train_linear_backward(r, r->dact, g->down_proj, r->dh, a->act, w->down_proj, rows, I, D);
    /* act = silu(gate) * up; gate, up = xb2 W^T */
    swiglu_backward(r->dgate, r->dup, r->dact, a->gate, a->up, nI);
    zero(r->dxb2, nD);
    train_linear_backward(r, r->dxb2, g->gate_proj, r->dgate, a->xb2, w->gate_proj, rows, D, I);
    train_linear_backward(r, r->dxb2, g->up_proj, r->dup, a->xb2, w->up_proj, rows, D, I);
    /* xb2 = post_attention_layernorm(h_mid) */
    rmsnorm_backward(r->dh_mid, g->post_attention_layernorm, r->dxb2, a->h_mid, w->post_attention_layernorm, rows,
                     D, eps);
    /* h_mid = h_in + o_proj(attn): dh (now for h_in) = dh_mid */
    memcpy(r->dh, r->dh_mid, sizeof(real) * nD);
    zero(r->dattn, (size_t)rows * Hd);
    train_linear_backward(r, r->dattn, g->o_proj, r->dh_mid, a->attn, w->o_proj, rows, Hd, D);
    /* attention, then RoPE, per sequence */
    zero(r->dq_rope, (size_t)rows * Hd);
    zero(r->dk_rope, (size_t)krows * kvd);
    zero(r->dv, (size_t)krows * kvd);
    zero(r->dqn, (size_t)rows * Hd);
    zero(r->dkn, (size_t)krows * kvd);
    for (int bi = 0; bi < r->b; bi++) {
        size_t qo = (size_t)bi * Q * Hd, ko = (size_t)bi * P * kvd;
        attention_masked_backward(r->dq_rope + qo, r->dk_rope + ko, r->dv + ko, r->dattn + qo,
                                  a->att + (size_t)bi * H * Q * P, a->q_rope + qo, a->k_rope + ko, a->v + ko,
                                  mask ? mask + (size_t)bi * Q * P : NULL, Q, P, H, Hkv, d, r->da);
        rope_backward(r->dqn + qo, r->dq_rope + qo, r->cos + (size_t)bi * P * d, r->sin + (size_t)bi * P * d, Q, S, H, d);
        rope_backward(r->dkn + ko, r->dk_rope + ko, r->cos + (size_t)bi * P * d, r->sin + (size_t)bi * P * d, P, 0, Hkv, d);
    }
    /* q_norm, k_norm per head (a Llama target has none: dq = dqn) */
    zero(r->dq, (size_t)rows * Hd);
    zero(r->dk, (size_t)krows * kvd);
    if (w->q_norm) rmsnorm_backward(r->dq, g->q_norm, r->dqn, a->q, w->q_norm, rows * H, d, eps);
    else memcpy(r->dq, r->dqn, sizeof(real) * (size_t)rows * Hd);
    if (w->k_norm) rmsnorm_backward(r->dk, g->k_norm, r->dkn, a->k, w->k_norm, krows * Hkv, d, eps);
    else memcpy(r->dk, r->dkn, sizeof(real) * (size_t)krows * kvd);
    /* q = X Wq^T; k, v = [C ; X] Wk^T, Wv^T */
    zero(r->dxb, nD);
    train_linear_backward(r, r->dxb, g->q_proj, r->dq, a->xb, w->q_proj, rows, D, Hd);
    zero(r->dkv_in, (size_t)krows * D);
    train_linear_backward(r, r->dkv_in, g->k_proj, r->dk, a->kv_in, w->k_proj, krows, D, kvd);
    train_linear_backward(r, r->dkv_in, g->v_proj, r->dv, a->kv_in, w->v_proj, krows, D, kvd);
    for (int bi = 0; bi < r->b; bi++) {   /* the context rows go to C, the query rows to X */
        const real *dctx = r->dkv_in + (size_t)bi * P * D, *dblk = r->dkv_in + ((size_t)bi * P + S) * D;
        real *dX = r->dxb + (size_t)bi * Q * D;
        if (S) {
            real *dC = r->dC + (size_t)bi * S * D;
            for (size_t i = 0; i < (size_t)S * D; i++) dC[i] += dctx[i];
        }
        for (size_t i = 0; i < (size_t)Q * D; i++) dX[i] += dblk[i];
    }
    /* X = input_layernorm(h_in) */
    rmsnorm_backward(r->dh, g->input_layernorm, r->dxb, a->h_in, w->input_layernorm, rows, D, eps);
}

void train_context_features(real *out, const TargetRun *tr, const Model *tm, const Model *dm, int S) {
    extract_context_feature(out, tr, &tm->cfg, dm->cfg.target_layer_ids, dm->cfg.n_target_layer_ids, S, 0, S);
}

/* The whole forward and backward; grads into st->grad (zeroed first). */
static int forward_backward(const Model *dm, const Model *tm, TrainState *st, const TrainBatch *bt,
                            const TrainHyper *hp, int step, const TraceHook *trace, TrainStats *stats,
                            TrainRun *r) {
    const Config *dc = &dm->cfg, *tc = &tm->cfg;
    int b = bt->b, S = bt->S, N = bt->N, B = bt->B, Q = N * B, P = S + Q;
    int D = dc->hidden_size, d = dc->head_dim, V = tc->vocab_size, L = dc->num_hidden_layers;
    int kD = dc->n_target_layer_ids * D;
    real eps = (real)dc->rms_norm_eps;
    int rc = -1;
    KVCache cache = {0};
    TargetRun tr = {0};
    if (check_batch(dm, tm, bt) != 0) return -1;
    if (run_fit(r, dc, tc, b, S, N, B) != 0) return -1;
    r->threads = hp->threads;
    TraceDims dims = train_dims(dm, tm, bt);
    batch_setup(r, bt, dc->mask_token_id, hp->gamma, hp->causal_block);

    EMIT(trace, step, &dims, "input_ids", bt->input_ids);
    EMIT(trace, step, &dims, "loss_mask", r->lmask);
    EMIT(trace, step, &dims, "anchors", bt->anchors);
    EMIT(trace, step, &dims, "keep", r->keep);

    /* the frozen target over each whole sequence: its context features */
    if (cache_init(&cache, tc, S) != 0 || target_run_init(&tr, tc, S, S) != 0) goto done;
    for (int bi = 0; bi < b; bi++) {
        if (bt->target_hidden) {  /* given: the same features, computed before */
            memcpy(r->target_hidden + (size_t)bi * S * kD, bt->target_hidden + (size_t)bi * S * kD,
                   sizeof(real) * (size_t)S * kD);
            continue;
        }
        cache_crop(&cache, 0);  /* a hybrid target's Gated DeltaNet states back to zero too */
        target_forward(tm, &cache, &tr, bt->input_ids + (size_t)bi * S, S, S - 1, NULL);
        train_context_features(r->target_hidden + (size_t)bi * S * kD, &tr, tm, dm, S);
    }
    EMIT(trace, step, &dims, "target_hidden", r->target_hidden);
    EMIT(trace, step, &dims, "noise_ids", r->noise_ids);
    EMIT(trace, step, &dims, "position_ids", r->pos);
    EMIT(trace, step, &dims, "attn_mask", r->mask);
    if (r->window > 0) EMIT(trace, step, &dims, "attn_mask_sliding", r->mask_sliding);

    /* the draft: C = hidden_norm(fc(target_hidden)); h = embed_tokens(noise_ids) */
    train_matmul(r, r->fc_out, r->target_hidden, dm->fc, b * S, kD, D);
    rmsnorm_rows(r->C, r->fc_out, dm->hidden_norm, b * S, D, eps);
    EMIT(trace, step, &dims, "fc", r->fc_out);
    EMIT(trace, step, &dims, "hidden_norm", r->C);
    for (int i = 0; i < b * Q; i++)
        memcpy(r->emb + (size_t)i * D, tm->embed_tokens + (size_t)r->noise_ids[i] * D, sizeof(real) * D);
    for (int bi = 0; bi < b; bi++)
        rope_cos_sin(r->angles + (size_t)bi * P * (d / 2), r->cos + (size_t)bi * P * d, r->sin + (size_t)bi * P * d,
                     r->pos + (size_t)bi * P, P, dm->inv_freq, d);
    const real *h = r->emb;
    for (int l = 0; l < L; l++) {
        decoder_layer_forward(dc, &dm->layers[l], &r->layers[l], h, layer_mask(dc, r, l), r);
        h = r->layers[l].out;
        char name[32];
        snprintf(name, sizeof name, "layers.%d", l);
        EMIT(trace, step, &dims, name, h);
    }
    rmsnorm_rows(r->norm, h, dm->norm, b * Q, D, eps);
    EMIT(trace, step, &dims, "norm", r->norm);
    train_matmul(r, r->logits, r->norm, tm->lm_head, b * Q, D, V);
    EMIT(trace, step, &dims, "logits", r->logits);

    /* the loss: sum(w ce) / (sum(w) + 1e-6); accuracy over binary weights > 0.5 */
    double wsum = 0, wce = 0, bsum = 0, correct = 0;
    long n_weighted = 0;
    for (int i = 0; i < b * Q; i++) {
        r->ce[i] = cross_entropy(r->logits + (size_t)i * V, V, r->labels[i]);
        wsum += (double)r->weights[i];
        wce += (double)r->weights[i] * (double)r->ce[i];
        bsum += (double)r->binary[i];
        n_weighted += r->weights[i] > 0;
        if (r->binary[i] > (real)0.5 && argmax(r->logits + (size_t)i * V, V) == r->labels[i]) correct += 1;
    }
    real loss = (real)(wce / (wsum + 1e-6)), accuracy = (real)(correct / (bsum + 1e-6));
    EMIT(trace, step, &dims, "labels", r->labels);
    EMIT(trace, step, &dims, "loss_weights", r->weights);
    EMIT(trace, step, &dims, "ce", r->ce);
    EMIT(trace, step, &dims, "loss", &loss);
    EMIT(trace, step, &dims, "accuracy", &accuracy);

    /* ---- backward: the weighted CE, the frozen lm_head, the final norm */
    memset(st->grad, 0, sizeof(real) * st->offset[st->n]);
    for (int i = 0; i < b * Q; i++)
        cross_entropy_backward(r->dlogits + (size_t)i * V, r->logits + (size_t)i * V, V, r->labels[i],
                               (real)((double)r->weights[i] / (wsum + 1e-6)));
    zero(r->dxb, (size_t)b * Q * D);   /* d norm */
    train_linear_backward(r, r->dxb, NULL, r->dlogits, r->norm, tm->lm_head, b * Q, D, V);
    zero(r->dh, (size_t)b * Q * D);
    rmsnorm_backward(r->dh, st->grads.norm, r->dxb, h, dm->norm, b * Q, D, eps);
    /* the layers, last to first; their K/V context rows add into dC */
    zero(r->dC, (size_t)b * S * D);
    for (int l = L - 1; l >= 0; l--)
        decoder_layer_backward(dc, &dm->layers[l], &st->grads.layers[l], &r->layers[l], layer_mask(dc, r, l), r);
    /* C = hidden_norm(fc_out); fc_out = target_hidden fc^T (target_hidden is frozen: no dx) */
    zero(r->dfc_out, (size_t)b * S * D);
    rmsnorm_backward(r->dfc_out, st->grads.hidden_norm, r->dC, r->fc_out, dm->hidden_norm, b * S, D, eps);
    train_linear_backward(r, NULL, st->grads.fc, r->dfc_out, r->target_hidden, dm->fc, b * S, kD, D);

    double ss = 0;
    for (size_t i = 0; i < st->offset[st->n]; i++) ss += (double)st->grad[i] * (double)st->grad[i];
    if (stats) {
        stats->loss = loss;
        stats->accuracy = accuracy;
        stats->n_weighted = n_weighted;
        stats->grad_norm = sqrt(ss);
    }
    for (int i = 0; i < st->n; i++) {
        char name[TRAIN_MAX_KEY + 8];
        snprintf(name, sizeof name, "grad.%s", st->params[i].key);
        EMIT(trace, step, &dims, name, train_grad(st, i));
    }
    real grad_norm = (real)sqrt(ss);
    EMIT(trace, step, &dims, "grad_norm", &grad_norm);
    rc = 0;
done:
    cache_free(&cache);
    target_run_free(&tr);
    return rc;
}

int train_loss_grad(const Model *draft, const Model *target, TrainState *st, const TrainBatch *batch,
                    const TrainHyper *hp, int step, const TraceHook *trace, TrainStats *stats) {
    if (!st->run) st->run = xcalloc(1, sizeof *st->run, "training activations");
    if (!st->run) return -1;
    return forward_backward(draft, target, st, batch, hp, step, trace, stats, st->run);
}

/* clip_grad_norm_ then torch.optim.AdamW (torch 1.13 _single_tensor_adamw),
 * entry by entry in the working precision:
 *   g *= min(1, max_norm / (norm + 1e-6))          (when max_norm > 0)
 *   p *= 1 - lr * wd                              (decoupled weight decay; with
 *                                                  TRAIN_DECAY_MATRICES only 2-D tensors)
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps) */
typedef struct {
    real decay, b1, b2, one_b1, one_b2, step_size, bc2_sqrt, eps;
    int matrices_only;     /* TRAIN_DECAY_MATRICES: 1-D tensors are not decayed */
} AdamW;

/* The clipping coefficient min(1, max_norm / (norm + 1e-6)); 1 when
 * max_norm is 0 (no clipping). */
static double clip_coef(const TrainHyper *hp, double grad_norm) {
    double coef = 1;
    if (hp->max_grad_norm > 0) {
        coef = hp->max_grad_norm / (grad_norm + 1e-6);
        if (coef > 1) coef = 1;
    }
    return coef;
}

/* AdamW's constants at step t (the first step is t = 1). */
static AdamW adamw_at(const TrainHyper *hp, long t) {
    double bc1 = 1 - pow(hp->beta1, (double)t), bc2 = 1 - pow(hp->beta2, (double)t);
    AdamW a;
    a.decay = (real)(1 - hp->lr * hp->weight_decay), a.b1 = (real)hp->beta1, a.b2 = (real)hp->beta2;
    a.one_b1 = (real)(1 - hp->beta1), a.one_b2 = (real)(1 - hp->beta2);
    a.step_size = (real)(hp->lr / bc1), a.bc2_sqrt = (real)sqrt(bc2), a.eps = (real)hp->eps;
    a.matrices_only = hp->decay_on == TRAIN_DECAY_MATRICES;
    return a;
}

/* One tensor's AdamW step, its gradient g already clipped; m and v are its
 * state. Returns 1 when an entry of the tensor is not finite after it. */
static int adamw_tensor(const AdamW *a, const TrainParam *prm, const real *g, real *m, real *v) {
    real *p = prm->data;
    size_t n = param_size(prm);
    real decay = a->matrices_only && prm->ndim < 2 ? (real)1 : a->decay;
    int bad = 0;
    for (size_t j = 0; j < n; j++) {
        p[j] = p[j] * decay;
        m[j] = m[j] * a->b1 + a->one_b1 * g[j];
        v[j] = v[j] * a->b2 + a->one_b2 * (g[j] * g[j]);
        real denom = (real)sqrt((double)v[j]) / a->bc2_sqrt + a->eps;
        p[j] = p[j] + (-a->step_size) * (m[j] / denom);
        bad |= !isfinite(p[j]);
    }
    return bad;
}

void train_update(TrainState *st, const TrainHyper *hp, double grad_norm) {
    size_t total = st->offset[st->n];
    double coef = clip_coef(hp, grad_norm);
    if (coef < 1)
        for (size_t i = 0; i < total; i++) st->grad[i] = st->grad[i] * (real)coef;
    st->t++;
    AdamW a = adamw_at(hp, st->t);
    for (int i = 0; i < st->n; i++) {
        size_t o = st->offset[i];
        adamw_tensor(&a, &st->params[i], st->grad + o, st->m + o, st->v + o);
    }
}

int train_step(Model *draft, const Model *target, TrainState *st, const TrainBatch *batch,
               const TrainHyper *hp, int step, const TraceHook *trace, TrainStats *stats) {
    TrainStats s;
    if (st->draft != draft) {
        dflash_set_error("training: the state belongs to another draft");
        return -1;
    }
    if (train_loss_grad(draft, target, st, batch, hp, step, trace, &s) != 0) return -1;
    train_update(st, hp, s.grad_norm);
    TraceDims dims = train_dims(draft, target, batch);
    for (int i = 0; trace && i < st->n; i++) {
        char name[TRAIN_MAX_KEY + 8];
        snprintf(name, sizeof name, "param.%s", st->params[i].key);
        if (emit(trace, step, &dims, name, st->params[i].data) != 0) return -1;
    }
    if (stats) *stats = s;
    return 0;
}

/* ===========================================================================
 * 5. Tracing (the training rows of the name table are in formats/tracenames.c)
 * ======================================================================== */

/* The sizes the training rows' shapes refer to (formats/tracenames.c, "Training"):
 * b sequences of S tokens, N blocks of B per sequence, the draft's sizes. */
static TraceDims train_dims(const Model *dm, const Model *tm, const TrainBatch *bt) {
    const Config *dc = &dm->cfg;
    TraceDims dims = {0};
    dims.b = bt->b, dims.S = bt->S, dims.N = bt->N, dims.B = bt->B;
    dims.V = tm->cfg.vocab_size, dims.D = dc->hidden_size, dims.I = dc->intermediate_size;
    dims.H = dc->num_attention_heads, dims.Hkv = dc->num_key_value_heads, dims.d = dc->head_dim;
    dims.k = dc->n_target_layer_ids, dims.L = tm->cfg.num_hidden_layers;
    return dims;
}

/* Hand one tensor "train{step}.<name>" to the hook as dflash.c hands its
 * own: the name, the buffer, the sizes (a target's step: dims->N = B = 0,
 * the target rows). */
static int emit(const TraceHook *hook, int step, const TraceDims *dims, const char *name, const void *data) {
    char full[160];
    snprintf(full, sizeof full, "train%d.%s", step, name);
    TraceHand hand = {full, {"train", step}, data, dims};
    return hook->tensor(hook->ctx, &hand);
}

/* ===========================================================================
 * 6. Next-token training of a target (train/train.h, "Next-token training")
 * ======================================================================== */

/* The target's trainable tensors in torch's named_parameters order. slot
 * (may be NULL): where each tensor's pointer lives in the Model. */
static int lm_param_list(const Model *m, TrainParam *out, real **slot[], int cap) {
    const Config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim, V = c->vocab_size;
    int qd = c->num_attention_heads * d, kvd = c->num_key_value_heads * d, n = 0;
    PARAM(m->embed_tokens, 2, V, D, "model.embed_tokens.weight");
    for (int l = 0; l < c->num_hidden_layers; l++) {
        const LayerWeights *w = &m->layers[l];
        PARAM(w->q_proj, 2, qd, D, "model.layers.%d.self_attn.q_proj.weight", l);
        PARAM(w->k_proj, 2, kvd, D, "model.layers.%d.self_attn.k_proj.weight", l);
        PARAM(w->v_proj, 2, kvd, D, "model.layers.%d.self_attn.v_proj.weight", l);
        PARAM(w->o_proj, 2, D, qd, "model.layers.%d.self_attn.o_proj.weight", l);
        if (!c->llama) {
            PARAM(w->q_norm, 1, d, 0, "model.layers.%d.self_attn.q_norm.weight", l);
            PARAM(w->k_norm, 1, d, 0, "model.layers.%d.self_attn.k_norm.weight", l);
        }
        PARAM(w->gate_proj, 2, I, D, "model.layers.%d.mlp.gate_proj.weight", l);
        PARAM(w->up_proj, 2, I, D, "model.layers.%d.mlp.up_proj.weight", l);
        PARAM(w->down_proj, 2, D, I, "model.layers.%d.mlp.down_proj.weight", l);
        PARAM(w->input_layernorm, 1, D, 0, "model.layers.%d.input_layernorm.weight", l);
        PARAM(w->post_attention_layernorm, 1, D, 0, "model.layers.%d.post_attention_layernorm.weight", l);
    }
    PARAM(m->norm, 1, D, 0, "model.norm.weight");
    if (!m->tied) PARAM(m->lm_head, 2, V, D, "lm_head.weight");
    return n;
}

int lm_params(const Model *target, TrainParam *out, int cap) { return lm_param_list(target, out, NULL, cap); }

struct LmState {
    Model *target;
    int n;                 /* trainable tensors */
    TrainParam *params;    /* (n) lm_params order; data points into target->data */
    size_t *offset;        /* (n+1) each tensor's first entry in grad, m, v */
    real *grad, *m, *v;    /* (total) gradients; AdamW's exp_avg, exp_avg_sq */
    ModelGrads grads;      /* grad in the weights' layout */
    long t;                /* AdamW steps taken */
    int b_max, T_max;
    TrainRun r;            /* every activation, allocated once for b_max x T_max */
    real *clip_trace;      /* (largest tensor) the clipped gradient, for the trace */
};

void lm_state_free(LmState *st) {
    if (!st) return;
    free(st->params); free(st->offset); free(st->grad); free(st->m); free(st->v);
    free(st->grads.layers); free(st->clip_trace);
    run_free(&st->r);
    free(st);
}

/* The activations of a target step: the layer's TrainLayer buffers and the
 * backward's, with S = 0 context rows and Q = P = T (train/train.c's TrainRun,
 * shared with the draft's step), for up to b x T rows. */
static int lm_run_init(TrainRun *r, const Config *c, int b, int T) {
    memset(r, 0, sizeof *r);
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim, V = c->vocab_size;
    int H = c->num_attention_heads, Hd = H * d, kvd = c->num_key_value_heads * d;
    size_t bT = (size_t)b * T;
    r->b = b, r->S = 0, r->N = 0, r->B = 0, r->Q = T, r->P = T;
    r->pos = run_alloc(r, T, sizeof(int), "position_ids");
    r->labels = run_alloc(r, bT, sizeof(int), "labels");
    r->lmask = run_alloc(r, bT, sizeof(int), "loss mask");
    r->ce = RUN_REALS(r, bT, 1, "ce");
    r->angles = RUN_REALS(r, T, d / 2, "rope angles");
    r->cos = RUN_REALS(r, bT, d, "cos");
    r->sin = RUN_REALS(r, bT, d, "sin");
    r->emb = RUN_REALS(r, bT, D, "embedding");
    r->norm = RUN_REALS(r, bT, D, "norm");
    r->logits = RUN_REALS(r, bT, V, "logits");
    r->dlogits = RUN_REALS(r, bT, V, "d logits");
    r->dh = RUN_REALS(r, bT, D, "d h");
    r->dh_mid = RUN_REALS(r, bT, D, "d h_mid");
    r->dxb2 = RUN_REALS(r, bT, D, "d xb2");
    r->dxb = RUN_REALS(r, bT, D, "d xb");
    r->dact = RUN_REALS(r, bT, I, "d act");
    r->dgate = RUN_REALS(r, bT, I, "d gate");
    r->dup = RUN_REALS(r, bT, I, "d up");
    r->dattn = RUN_REALS(r, bT, Hd, "d attn");
    r->dq_rope = RUN_REALS(r, bT, Hd, "d q_rope");
    r->dqn = RUN_REALS(r, bT, Hd, "d qn");
    r->dq = RUN_REALS(r, bT, Hd, "d q");
    r->dk_rope = RUN_REALS(r, bT, kvd, "d k_rope");
    r->dkn = RUN_REALS(r, bT, kvd, "d kn");
    r->dk = RUN_REALS(r, bT, kvd, "d k");
    r->dv = RUN_REALS(r, bT, kvd, "d v");
    r->dkv_in = RUN_REALS(r, bT, D, "d kv_in");
    r->da = RUN_REALS(r, T, 1, "attention scratch");
    {   /* dout^T of the widest Linear backward: lm_head, the MLP, o_proj */
        int widest = V > I ? V : I;
        if (D > widest) widest = D;
        if (Hd > widest) widest = Hd;
        r->scratch = RUN_REALS(r, bT, widest, "transpose scratch");
    }
    layers_alloc(r, c, bT, bT, (size_t)b * H * T, T);
    return r->failed ? -1 : 0;
}

LmState *lm_state_new(Model *target, int b_max, int T_max) {
    const Config *c = &target->cfg;
    if (c->is_draft) {
        dflash_set_error("train-target: the model is a draft, not a target");
        return NULL;
    }
    if (b_max < 1 || T_max < 2 || T_max > c->max_position_embeddings) {
        dflash_set_error("train-target: batch %d x %d: need b >= 1 and 2 <= T <= max_position_embeddings %d", b_max,
                         T_max, c->max_position_embeddings);
        return NULL;
    }
    LmState *st = xcalloc(1, sizeof *st, "target training state");
    if (!st) return NULL;
    st->target = target;
    st->b_max = b_max, st->T_max = T_max;
    if (own_weights(target, lm_param_list, "the target's trainable weights", 1, &st->params, &st->offset, &st->n) != 0) { free(st); return NULL; }
    size_t total = st->offset[st->n], largest = 1;
    for (int i = 0; i < st->n; i++) if (param_size(&st->params[i]) > largest) largest = param_size(&st->params[i]);
    st->grad = xcalloc(total, sizeof(real), "gradients");
    st->m = xcalloc(total, sizeof(real), "AdamW exp_avg");
    st->v = xcalloc(total, sizeof(real), "AdamW exp_avg_sq");
    st->clip_trace = xcalloc(largest, sizeof(real), "clipped gradient");
    if (!st->grad || !st->m || !st->v || !st->clip_trace || lm_run_init(&st->r, c, b_max, T_max) != 0) {
        lm_state_free(st);
        return NULL;
    }
    if (grads_layout(&st->grads, target, lm_param_list, st->grad, st->offset, st->n) != 0) {
        lm_state_free(st);
        return NULL;
    }
    return st;
}

ModelGrads *lm_grads(LmState *st) { return &st->grads; }

static int lm_check_batch(const LmState *st, const LmBatch *bt) {
    int V = st->target->cfg.vocab_size;
    if (bt->b < 1 || bt->b > st->b_max || bt->T < 2 || bt->T > st->T_max) {
        dflash_set_error("train-target batch: %d sequences of %d tokens: need 1..%d sequences of 2..%d tokens "
                         "(the training state's size)", bt->b, bt->T, st->b_max, st->T_max);
        return -1;
    }
    for (int i = 0; i < bt->b * bt->T; i++) {
        if (bt->input_ids[i] < 0 || bt->input_ids[i] >= V) {
            dflash_set_error("train-target batch: sequence %d position %d: token id %d is outside the vocabulary 0..%d",
                             i / bt->T, i % bt->T, bt->input_ids[i], V - 1);
            return -1;
        }
        if (bt->loss_mask && bt->loss_mask[i] != 0 && bt->loss_mask[i] != 1) {
            dflash_set_error("train-target batch: sequence %d position %d: loss mask %d is not 0 or 1", i / bt->T,
                             i % bt->T, bt->loss_mask[i]);
            return -1;
        }
    }
    return 0;
}

static TraceDims lm_dims(const Model *m, const LmBatch *bt) {
    const Config *c = &m->cfg;
    TraceDims dims = {0};
    dims.b = bt->b, dims.S = bt->T;
    dims.V = c->vocab_size, dims.D = c->hidden_size, dims.I = c->intermediate_size;
    dims.H = c->num_attention_heads, dims.Hkv = c->num_key_value_heads, dims.d = c->head_dim;
    dims.L = c->num_hidden_layers;
    return dims;
}

#define LM_EMIT(hook, step, dims, name, data)                                                          \
    do {                                                                                               \
        if ((hook) && emit((hook), (step), (dims), (name), (data)) != 0) return -1;                 \
    } while (0)

/* The forward and the loss; with grad 1 the backward too (into st->grad,
 * zeroed first). */
static int lm_forward_backward(Model *m, LmState *st, const LmBatch *bt, int step, const TraceHook *trace,
                               int grad, LmStats *stats) {
    const Config *c = &m->cfg;
    TrainRun *r = &st->r;
    int b = bt->b, T = bt->T, D = c->hidden_size, d = c->head_dim, V = c->vocab_size, L = c->num_hidden_layers;
    real eps = (real)c->rms_norm_eps;
    if (lm_check_batch(st, bt) != 0) return -1;
    TraceDims dims = lm_dims(m, bt);
    size_t rows = (size_t)b * T;
    r->b = b, r->S = 0, r->Q = T, r->P = T, r->mask = NULL, r->C = NULL;
    for (size_t i = 0; i < rows; i++) r->lmask[i] = bt->loss_mask ? bt->loss_mask[i] : 1;
    LM_EMIT(trace, step, &dims, "input_ids", bt->input_ids);
    LM_EMIT(trace, step, &dims, "loss_mask", r->lmask);

    /* positions 0..T-1 in every sequence; h = embed_tokens(input_ids) */
    for (int t = 0; t < T; t++) r->pos[t] = t;
    rope_cos_sin(r->angles, r->cos, r->sin, r->pos, T, m->inv_freq, d);
    for (int bi = 1; bi < b; bi++) {
        memcpy(r->cos + (size_t)bi * T * d, r->cos, sizeof(real) * (size_t)T * d);
        memcpy(r->sin + (size_t)bi * T * d, r->sin, sizeof(real) * (size_t)T * d);
    }
    for (size_t i = 0; i < rows; i++)
        memcpy(r->emb + i * D, m->embed_tokens + (size_t)bt->input_ids[i] * D, sizeof(real) * D);
    LM_EMIT(trace, step, &dims, "hidden_states.0", r->emb);
    const real *h = r->emb;
    for (int l = 0; l < L; l++) {
        decoder_layer_forward(c, &m->layers[l], &r->layers[l], h, NULL, r);
        h = r->layers[l].out;
        if (l < L - 1) {
            char name[40];
            snprintf(name, sizeof name, "hidden_states.%d", l + 1);
            LM_EMIT(trace, step, &dims, name, h);
        }
    }
    rmsnorm_rows(r->norm, h, m->norm, (int)rows, D, eps);
    {
        char name[40];
        snprintf(name, sizeof name, "hidden_states.%d", L);
        LM_EMIT(trace, step, &dims, name, r->norm);
    }
    train_matmul(r, r->logits, r->norm, m->lm_head, (int)rows, D, V);
    LM_EMIT(trace, step, &dims, "logits", r->logits);

    /* labels (b, T-1): input_ids[t+1] where loss_mask[t+1] is 1, else -100;
     * the loss: the mean CE over the counted labels */
    long count = 0;
    double ce_sum = 0;
    for (int bi = 0; bi < b; bi++)
        for (int t = 0; t < T - 1; t++) {
            size_t i = (size_t)bi * (T - 1) + t, row = (size_t)bi * T + t;
            int on = r->lmask[row + 1];
            r->labels[i] = on ? bt->input_ids[row + 1] : -100;
            r->ce[i] = on ? cross_entropy(r->logits + row * V, V, r->labels[i]) : 0;
            ce_sum += (double)r->ce[i];
            count += on;
        }
    LM_EMIT(trace, step, &dims, "labels", r->labels);
    LM_EMIT(trace, step, &dims, "ce", r->ce);
    if (count == 0) {
        dflash_set_error("train-target step %d: no position carries a loss (every loss_mask[1..T-1] is 0)", step);
        return -1;
    }
    real loss = (real)(ce_sum / (double)count);
    LM_EMIT(trace, step, &dims, "loss", &loss);
    if (!isfinite(loss)) {
        dflash_set_error("train-target step %d: the loss is not finite (%g)", step, (double)loss);
        return -1;
    }
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->loss = loss, stats->n_counted = count, stats->clip_coef = 1;
    }
    if (!grad) return 0;

    /* ---- backward: CE, lm_head, the final norm, the layers, the embedding */
    memset(st->grad, 0, sizeof(real) * st->offset[st->n]);
    real coef = (real)(1.0 / (double)count);
    for (int bi = 0; bi < b; bi++)
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)bi * T + t;
            real *dl = r->dlogits + row * V;
            if (t < T - 1 && r->lmask[row + 1])
                cross_entropy_backward(dl, r->logits + row * V, V, r->labels[(size_t)bi * (T - 1) + t], coef);
            else
                zero(dl, (size_t)V);
        }
    zero(r->dxb, rows * D);   /* d norm */
    train_linear_backward(r, r->dxb, st->grads.lm_head, r->dlogits, r->norm, m->lm_head, (int)rows, D, V);
    zero(r->dh, rows * D);
    rmsnorm_backward(r->dh, st->grads.norm, r->dxb, h, m->norm, (int)rows, D, eps);
    for (int l = L - 1; l >= 0; l--)
        decoder_layer_backward(c, &m->layers[l], &st->grads.layers[l], &r->layers[l], NULL, r);
    /* h0 = embed_tokens[input_ids]: a scatter-add (llm.c's encoder_backward) */
    for (size_t i = 0; i < rows; i++) {
        real *g = st->grads.embed_tokens + (size_t)bt->input_ids[i] * D;
        const real *dh = r->dh + i * D;
        for (int j = 0; j < D; j++) g[j] += dh[j];
    }

    double ss = 0;
    for (int i = 0; i < st->n; i++) {
        const real *g = st->grad + st->offset[i];
        size_t n = param_size(&st->params[i]);
        double s1 = 0;
        for (size_t j = 0; j < n; j++) s1 += (double)g[j] * (double)g[j];
        if (!isfinite(s1)) {
            dflash_set_error("train-target step %d: gradient %s is not finite", step, st->params[i].key);
            return -1;
        }
        ss += s1;
        char name[TRAIN_MAX_KEY + 8];
        snprintf(name, sizeof name, "grad.%s", st->params[i].key);
        LM_EMIT(trace, step, &dims, name, g);
    }
    real grad_norm = (real)sqrt(ss);
    LM_EMIT(trace, step, &dims, "grad_norm", &grad_norm);
    if (stats) stats->grad_norm = sqrt(ss);
    return 0;
}

int lm_loss_grad(Model *target, LmState *st, const LmBatch *batch, const TrainHyper *hp, int step,
                 const TraceHook *trace, LmStats *stats) {
    if (st->target != target) {
        dflash_set_error("train-target: the state belongs to another model");
        return -1;
    }
    st->r.threads = hp ? hp->threads : 1;
    LmStats s;
    if (lm_forward_backward(target, st, batch, step, trace, 1, &s) != 0) return -1;
    s.lr = hp ? hp->lr : 0;
    if (stats) *stats = s;
    return 0;
}

void lm_set_threads(LmState *st, int threads) { st->r.threads = threads > 1 ? threads : 1; }

int lm_eval_loss(const Model *target, LmState *st, const LmBatch *batch, double *loss, long *n_counted) {
    if (st->target != target) {
        dflash_set_error("train-target: the state belongs to another model");
        return -1;
    }
    LmStats s;
    if (lm_forward_backward(st->target, st, batch, 0, NULL, 0, &s) != 0) return -1;
    if (loss) *loss = s.loss;
    if (n_counted) *n_counted = s.n_counted;
    return 0;
}

/* Clipping and AdamW, as train_update (its formulas), tensor by tensor; decay
 * per hp->decay_on. Traces lr, clip_coef, then per tensor the clipped
 * gradient, m, v and the parameter after the step. */
static int lm_update(LmState *st, const TrainHyper *hp, double grad_norm, int step, const TraceHook *trace,
                     const TraceDims *dims, double *clip_out) {
    double coef = clip_coef(hp, grad_norm);
    *clip_out = coef;
    real lr_r = (real)hp->lr, coef_r = (real)coef;
    LM_EMIT(trace, step, dims, "lr", &lr_r);
    LM_EMIT(trace, step, dims, "clip_coef", &coef_r);
    st->t++;
    AdamW a = adamw_at(hp, st->t);
    for (int i = 0; i < st->n; i++) {
        real *p = st->params[i].data, *g = st->grad + st->offset[i];
        real *m = st->m + st->offset[i], *v = st->v + st->offset[i];
        size_t n = param_size(&st->params[i]);
        if (coef < 1)
            for (size_t j = 0; j < n; j++) g[j] = g[j] * coef_r;
        int bad = adamw_tensor(&a, &st->params[i], g, m, v);
        char name[TRAIN_MAX_KEY + 16];
        snprintf(name, sizeof name, "grad_clipped.%s", st->params[i].key);
        LM_EMIT(trace, step, dims, name, g);
        snprintf(name, sizeof name, "adam_m.%s", st->params[i].key);
        LM_EMIT(trace, step, dims, name, m);
        snprintf(name, sizeof name, "adam_v.%s", st->params[i].key);
        LM_EMIT(trace, step, dims, name, v);
        snprintf(name, sizeof name, "param.%s", st->params[i].key);
        LM_EMIT(trace, step, dims, name, p);
        if (bad) {
            dflash_set_error("train-target step %d: %s is not finite after the AdamW update", step, st->params[i].key);
            return -1;
        }
    }
    return 0;
}

int lm_step(Model *target, LmState *st, const LmBatch *batch, const TrainHyper *hp, int step,
            const TraceHook *trace, LmStats *stats) {
    LmStats s;
    if (lm_loss_grad(target, st, batch, hp, step, trace, &s) != 0) return -1;
    TraceDims dims = lm_dims(target, batch);
    if (lm_update(st, hp, s.grad_norm, step, trace, &dims, &s.clip_coef) != 0) return -1;
    if (stats) *stats = s;
    return 0;
}

static int lm_state_views(LmState *st, real *base, TrainParam *out, int cap) {
    for (int i = 0; i < st->n && i < cap; i++) {
        out[i] = st->params[i];
        out[i].data = base + st->offset[i];
    }
    return st->n;
}

int lm_optimizer_tensors(LmState *st, TrainParam *m_out, TrainParam *v_out, int cap) {
    if (m_out) lm_state_views(st, st->m, m_out, cap);
    if (v_out) lm_state_views(st, st->v, v_out, cap);
    return st->n;
}
long lm_optimizer_step(const LmState *st) { return st->t; }
void lm_set_optimizer_step(LmState *st, long t) { st->t = t; }

int lm_init_target(Model *m, const Config *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->tied = cfg->tie_word_embeddings;
    m->layers = xcalloc(cfg->num_hidden_layers, sizeof(LayerWeights), "target layers");
    m->inv_freq = xcalloc(cfg->head_dim / 2, sizeof(real), "target inv_freq");
    TrainParam *params = NULL;
    size_t *offset = NULL;
    int n = 0;
    if (cfg->is_draft) dflash_set_error("train-target: the config is a draft's, not a target's");
    if (cfg->is_draft || !m->layers || !m->inv_freq || own_weights(m, lm_param_list, "the target's trainable weights", 0, &params, &offset, &n) != 0) {
        model_free(m);
        return -1;
    }
    rope_inv_freq(m->inv_freq, cfg->head_dim, cfg->rope_theta);   /* as formats/load.c does */
    if (cfg->rope_llama3) rope_llama3(m->inv_freq, cfg->head_dim, cfg);
    init_weights(params, n, seed);
    free(params);
    free(offset);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Appended for dflash train (train/train_cli.c): the learning-rate schedule
 * and the held-out evaluation
 * ======================================================================== */

/* --heldout: what the draft proposes at every anchor of a held-out
 * sequence, teacher-forced. A sequence goes through train_loss_grad alone
 * (b 1, no update) with every position 0..n-B of loss mask 1 as an anchor
 * (keep 1), under the training mask (--block-attention); the hook copies
 * train0.logits. At anchor a, proposal k = 1..B-1 is argmax(logits of block
 * row k); the block accepts L = the number of leading proposals equal to
 * ids[a+k] (the sequence is the target's greedy continuation, so this is
 * what greedy verification accepts at that anchor, given the target's exact
 * context features). accepted[i] counts blocks with L >= i (i = 1..B-1);
 * tau = 1 + mean L (accepted + the bonus token), every anchor weighted
 * alike (decoding visits only the anchors its rounds reach). */
typedef struct { real *logits; size_t cap; int ok; } EvalCapture;

static int eval_hook(void *ctx, const TraceHand *h) {
    EvalCapture *c = ctx;
    const char *dot = strchr(h->name, '.');
    if (!dot || strcmp(dot + 1, "logits") != 0) return 0;
    size_t n = (size_t)h->dims->b * (size_t)h->dims->N * (size_t)h->dims->B * (size_t)h->dims->V;
    if (n > c->cap) { dflash_set_error("--heldout: logits larger than expected"); return -1; }
    memcpy(c->logits, h->buffer, sizeof(real) * n);
    c->ok = 1;
    return 0;
}

int train_eval_heldout(const Model *draft, const Model *target, TrainState *st, int n_seqs, const int *ids_all,
                       const int *mask_all, const size_t *off, const int *len, int S, int B, const TrainHyper *hp,
                       long *accepted /* (B) */, long *n_blocks, long *sum_len) {
    int V = target->cfg.vocab_size, rc = -1;
    int *ids = malloc(sizeof(int) * (size_t)S), *mask = malloc(sizeof(int) * (size_t)S);
    int *anchors = malloc(sizeof(int) * (size_t)S), *keep = malloc(sizeof(int) * (size_t)S);
    EvalCapture cap = {NULL, (size_t)S * (size_t)B * (size_t)V, 0};
    cap.logits = malloc(sizeof(real) * cap.cap);
    TraceHook hook = {eval_hook, &cap};
    for (int i = 0; i < B; i++) accepted[i] = 0;
    *n_blocks = *sum_len = 0;
    if (!ids || !mask || !anchors || !keep || !cap.logits) { dflash_set_error("out of memory (--heldout)"); goto done; }
    for (int q = 0; q < n_seqs; q++) {
        int n = len[q] < S ? len[q] : S, N = 0;
        memcpy(ids, ids_all + off[q], sizeof(int) * (size_t)n);
        memcpy(mask, mask_all + off[q], sizeof(int) * (size_t)n);
        for (int p = 0; p + B <= n; p++)
            if (mask[p]) anchors[N] = p, keep[N] = 1, N++;
        if (N == 0) continue;
        TrainBatch tb = {1, n, N, B, ids, mask, anchors, keep, NULL};
        TrainStats ts;
        cap.ok = 0;
        if (train_loss_grad(draft, target, st, &tb, hp, 0, &hook, &ts) != 0) goto done;
        if (!cap.ok) { dflash_set_error("--heldout: the step traced no logits"); goto done; }
        for (int k = 0; k < N; k++) {
            int L = 0;
            for (int j = 1; j < B; j++) {
                int idx = anchors[k] + j;
                if (!mask[idx] || argmax(cap.logits + ((size_t)k * B + j) * V, V) != ids[idx]) break;
                L++;
            }
            for (int i = 1; i <= L; i++) accepted[i]++;
            (*n_blocks)++;
            *sum_len += L;
        }
    }
    rc = 0;
done:
    free(ids);
    free(mask);
    free(anchors);
    free(keep);
    free(cap.logits);
    return rc;
}

double train_lr_at(Schedule kind, double lr, int warmup, int steps, int s) {
    if (s <= warmup) return lr * (double)s / (double)warmup;
    if (kind == SCHEDULE_CONSTANT) return lr;
    const double pi = 3.14159265358979323846;
    return lr * (1.0 + cos(pi * (double)(s - 1 - warmup) / (double)(steps - warmup))) / 2.0;
}
