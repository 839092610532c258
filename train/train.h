/* train/train.h - one DFlash training step (SpecForge OnlineDFlashModel, loss
 * "dflash"), in plain C11 beside dflash.c: the frozen target's context
 * features, the draft's block forward, the weighted cross-entropy, the
 * hand-written backward pass, global-norm clipping and AdamW.
 *
 * Legend (besides dflash.h's): b sequences in the batch, S their length,
 * N anchors (blocks) per sequence, B block size, Q = N*B block rows of one
 * sequence, P = S+Q keys of one sequence (context then blocks).
 */
#ifndef TRAIN_H
#define TRAIN_H

#include "dflash.h"

typedef struct {
    int b, S, N, B;          /* sequences, their length, anchors per sequence, block size */
    const int *input_ids;    /* (b, S) */
    const int *loss_mask;    /* (b, S) 0/1 */
    const int *anchors;      /* (b, N) sorted positions in 0..S-1 (drawn: 0..S-B) */
    const int *keep;         /* (b, N) 0/1 */
    const real *target_hidden; /* (b, S, k*D) the target's context features of these ids, or
                                  NULL: train_step runs the target (a cache's copy of what it
                                  would compute: dflash train keeps one per sequence) */
} TrainBatch;

typedef struct {
    double lr;               /* this step's learning rate (the schedule is the caller's) */
    double beta1, beta2, eps, weight_decay;
    double max_grad_norm;    /* <= 0: no clipping */
    double gamma;            /* <= 0: no decay */
    int causal_block;        /* 0: a block's queries see the whole block (DFlash, the published
                                mask); 1: only its positions 0..k (EAGLE-style causal, an
                                experiment: walkthrough/training/README.md) */
    int decay_on;            /* TRAIN_DECAY_ALL (0): weight decay on every tensor (torch.optim.AdamW
                                over model.parameters(): dflash train's default, SpecForge's way);
                                TRAIN_DECAY_MATRICES: only the 2-D tensors, norm weights get none
                                (nanoGPT's and llm.c's way; lm_oracle.py's "decay_2d_only") */
    int threads;             /* <= 1: one thread; n: the trainers' matmuls split their output rows
                                over n pthreads, bit-identical to one thread */
} TrainHyper;

enum { TRAIN_DECAY_ALL = 0, TRAIN_DECAY_MATRICES = 1 };

typedef struct {
    double loss, accuracy, grad_norm;   /* grad_norm before clipping */
    long n_weighted;                    /* positions with weight > 0 */
} TrainStats;

typedef struct TrainState TrainState;   /* grads, AdamW m and v, step count */

/* Makes the draft's weights private writable copies (they may point into a
 * read-only mapping) and allocates grads and AdamW state. NULL with
 * dflash_errmsg when the pair does not fit or memory runs out. */
TrainState *train_state_new(Model *draft, const Model *target);
void train_state_free(TrainState *st);

/* SpecForge's anchor rule (specforge/core/dflash.py, _sample_anchor_positions):
 * the candidates of a sequence are the positions 0..S-B whose loss_mask is 1;
 * the batch has N = min(num_anchors, max over the batch of the candidate
 * count - 1) anchor slots (train_anchor_count; < 1: no valid anchor, an
 * error); each sequence draws min(N, its candidate count) of its candidates
 * uniformly without replacement, sorted ascending, keep 1; the slots left
 * over get anchor 0, keep 0.
 * train_draw_anchors does one sequence for a given slot count N. rng: the
 * state of dflash.c's sampling PRNG (xorshift64*, train_rng_seed makes one
 * from a seed); draw i picks index i + floor(u * (count - i)) of the
 * remaining candidates (a partial Fisher-Yates shuffle). Returns the number
 * kept, -1 on error. */
uint64_t train_rng_seed(uint64_t seed);
/* The training side's one PRNG, for every caller (the anchors above, the
 * CLI's data order, --generate's prompts, --bench's ids): dflash.c's
 * sampling generator, xorshift64* seeded through one splitmix64 step
 * (train_rng_seed). train_rng_next advances the state *s one step and
 * returns the step's 64-bit output (the state times 0x2545F4914F6CDD1D);
 * rng_uniform's value from the same state is its top 53 bits / 2^53. */
uint64_t train_rng_next(uint64_t *s);
int train_anchor_count(const int *loss_mask, int b, int S, int B, int num_anchors);
int train_draw_anchors(uint64_t *rng, const int *loss_mask, int S, int B, int N,
                       int *anchors, int *keep);

/* One step: forward of the frozen target over each sequence (context features),
 * the draft's block forward, weighted CE, the hand-written backward, global-norm
 * clipping, AdamW (state in st). trace: NULL or a hook that receives
 * "train{step}.<name>" tensors (names as train_oracle.py writes them;
 * formats/tracenames.c's training rows). Returns 0, or -1 with dflash_errmsg set. */
int train_step(Model *draft, const Model *target, TrainState *st, const TrainBatch *batch,
               const TrainHyper *hp, int step, const TraceHook *trace, TrainStats *stats);

/* The context features of one sequence of S ids the target has just read
 * (tr, target_forward over them): (S, k*D), extract_context_feature at the
 * draft's target_layer_ids. Where training takes them, in train_step and in
 * dflash train's cache of them alike. */
void train_context_features(real *out, const TargetRun *tr, const Model *target, const Model *draft, int S);

/* The forward, the loss and the backward only (no clipping, no update): the
 * gradient of the loss is left in train_grad (train_params order). stats
 * gets loss, accuracy, n_weighted and grad_norm. train_step is this, then
 * the update. For the gradient checks. */
int train_loss_grad(const Model *draft, const Model *target, TrainState *st, const TrainBatch *batch,
                    const TrainHyper *hp, int step, const TraceHook *trace, TrainStats *stats);
/* The gradient buffer of parameter i (train_params order), and the AdamW
 * update alone (clip to hp->max_grad_norm, then one AdamW step of every
 * parameter with the grads in st; advances the step count). */
real *train_grad(TrainState *st, int i);
void train_update(TrainState *st, const TrainHyper *hp, double grad_norm);

/* The draft's trainable tensors with their safetensors keys, in a fixed order
 * ("fc.weight", "hidden_norm.weight", "layers.0.input_layernorm.weight", ...,
 * "norm.weight"): for writing model.safetensors and for gradient names. */
#define TRAIN_MAX_KEY 64
typedef struct { char key[TRAIN_MAX_KEY]; real *data; int ndim; int64_t shape[2]; } TrainParam;
int train_params(const Model *draft, TrainParam *out, int cap);  /* returns count (may exceed cap) */
/* AdamW's state for a checkpoint (dflash train --checkpoint-every, --resume):
 * m (exp_avg) and v (exp_avg_sq) of every trained tensor as views in
 * train_params order (keys and shapes the weights'), and the step count t */
int train_optimizer_tensors(TrainState *st, TrainParam *m_out, TrainParam *v_out, int cap);
long train_optimizer_step(const TrainState *st);
void train_set_optimizer_step(TrainState *st, long t);

/* A new draft for `target` from a draft config: every Linear weight drawn
 * from N(0, 0.02^2) (transformers' initializer_range default, as
 * Qwen3PreTrainedModel._init_weights does), every RMSNorm weight 1; the
 * normal draws are Box-Muller pairs from the sampling PRNG seeded with
 * seed, tensors in train_params order, entries in storage order. */
int train_init_draft(Model *draft, const Config *dcfg, const Model *target, uint64_t seed);

/* ===========================================================================
 * Next-token training of a target (Qwen3ForCausalLM or LlamaForCausalLM):
 * `dflash train-target`'s step, checked against lm_oracle.py (autograd).
 *
 * Checked against lm_oracle.py on an untied GQA, a tied BF16 and a Llama
 * target (NOTES.md, "Training a target: parity"); gradients against finite
 * differences (train/tests/test_train.c).
 *
 * The recipe (transformers' ForCausalLMLoss, then clip_grad_norm_ and
 * torch.optim.AdamW, one step per batch):
 *   forward   the target's causal forward over each sequence, positions 0..T-1
 *   labels    position t (0..T-2) predicts input_ids[t+1]; it counts iff
 *             loss_mask[t+1] is 1
 *   loss      mean of CE(logits[t], input_ids[t+1]) over the counted positions
 *   update    grad_norm = L2 norm of every gradient; clip coefficient
 *             min(1, max_grad_norm / (grad_norm + 1e-6)); AdamW (train_update's
 *             formulas), weight decay per hp->decay_on
 * Trainable: every tensor of the target. A tied target (tie_word_embeddings)
 * has one tensor model.embed_tokens.weight, whose gradient is the embedding's
 * scatter-add plus the lm_head's part.
 * ======================================================================== */

typedef struct {
    int b, T;                /* sequences, their length (T >= 2) */
    const int *input_ids;    /* (b, T) ids in 0..V-1 */
    const int *loss_mask;    /* (b, T) 0/1, or NULL: all 1. Label input_ids[t+1] (of position t)
                                counts iff loss_mask[t+1] is 1; loss_mask[0] is never read */
} LmBatch;

typedef struct {
    double loss;             /* mean CE over the counted labels */
    double grad_norm;        /* before clipping */
    double clip_coef;        /* what the gradients were multiplied by: min(1, max/(norm + 1e-6)); 1 unclipped */
    double lr;               /* the step's learning rate (hp->lr) */
    long n_counted;          /* labels that carried loss */
} LmStats;

/* The gradients (and AdamW's m and v) in the weights' layout: the same
 * fields as Model's, each the shape of its weight. layers[l].q_norm and
 * .k_norm are NULL for a Llama target; lm_head == embed_tokens when tied. */
typedef struct {
    LayerWeights *layers;    /* (L) */
    real *embed_tokens;      /* (V, D) */
    real *lm_head;           /* (V, D), or embed_tokens when tied */
    real *norm;              /* (D) */
    real *fc, *hidden_norm;  /* a draft's (dflash train's state); NULL for a target */
    real *data;              /* the one buffer behind every tensor above (lm_params / train_params order) */
    size_t n;                /* its length in reals */
} ModelGrads;

typedef struct LmState LmState;

/* Makes the target's weights private writable copies in one buffer (they may
 * point into a read-only mapping), allocates the gradients, AdamW's m and v
 * (zero, t = 0) and every activation a step of up to b_max sequences of
 * T_max tokens needs, once, from a size table. NULL with dflash_errmsg when
 * memory runs out or T_max exceeds max_position_embeddings. */
LmState *lm_state_new(Model *target, int b_max, int T_max);
void lm_state_free(LmState *st);

/* One step: forward, loss, backward, clipping, AdamW (state in st; its
 * step count advances). step names the trace ("train{step}.<name>": the
 * names lm_oracle.py writes, then lr, clip_coef, grad_clipped.<key>,
 * adam_m.<key>, adam_v.<key> after the step; formats/tracenames.c's target
 * training rows; trace NULL: none). Returns 0, or -1 with dflash_errmsg set:
 * a bad batch (ids out of range, T < 2 or > the state's T_max, b > b_max),
 * no counted label, or a loss, gradient or updated weight that is not
 * finite ("step 3: gradient model.layers.1.mlp.up_proj.weight is not
 * finite"); on a non-finite error the weights may already be changed. */
int lm_step(Model *target, LmState *st, const LmBatch *batch, const TrainHyper *hp, int step,
            const TraceHook *trace, LmStats *stats);

/* The forward, the loss and the backward only (no clipping, no update, no
 * step count): the loss's gradient is left in lm_grads(st). For the
 * gradient checks and an evaluation (stats->loss; the gradient is then
 * the price of it). */
int lm_loss_grad(Model *target, LmState *st, const LmBatch *batch, const TrainHyper *hp, int step,
                 const TraceHook *trace, LmStats *stats);
ModelGrads *lm_grads(LmState *st);

/* The loss alone over a batch (forward only, no gradient): held-out loss.
 * Returns 0 with *loss, *n_counted, or -1 with dflash_errmsg. */
int lm_eval_loss(const Model *target, LmState *st, const LmBatch *batch, double *loss, long *n_counted);
/* The matmuls' threads of lm_eval_loss (lm_step and lm_loss_grad take
 * theirs from hp->threads); the bits do not depend on it. */
void lm_set_threads(LmState *st, int threads);

/* The target's trainable tensors with their safetensors keys in
 * torch's named_parameters order: model.embed_tokens.weight, per layer
 * self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm (Qwen3 only), mlp.
 * {gate,up,down}_proj, input_layernorm, post_attention_layernorm; then
 * model.norm.weight, lm_head.weight (untied only). Returns the count. */
int lm_params(const Model *target, TrainParam *out, int cap);

/* AdamW's state for a checkpoint: m (exp_avg) and v (exp_avg_sq) of every
 * tensor, lm_params order and keys, pointing into st (write the reals as
 * they are and read them back into the same pointers: bit-exact), and the
 * step count t (bias corrections use it). */
int lm_optimizer_tensors(LmState *st, TrainParam *m_out, TrainParam *v_out, int cap);
long lm_optimizer_step(const LmState *st);
void lm_set_optimizer_step(LmState *st, long t);

/* A new target from a config (Qwen3 or Llama: cfg->llama, tie_word_embeddings,
 * rope_scaling as loaded from config.json): the rule of transformers'
 * _init_weights with initializer_range 0.02, as train_init_draft: every
 * Linear weight and the embedding from N(0, 0.02^2), every RMSNorm weight 1;
 * the normal draws are Box-Muller pairs from dflash.c's PRNG seeded with
 * seed (rng_seed), tensors in lm_params order, entries in storage order
 * (pair j, j+1: 0.02 sqrt(-2 ln(1-u1)) cos(2 pi u2), ... sin(...)). A tied
 * model draws its one embedding. inv_freq computed (llama3 scaling too).
 * Returns 0, or -1 with dflash_errmsg (the Model is then empty). */
int lm_init_target(Model *target, const Config *cfg, uint64_t seed);

/* ---------------------------------------------------------------------------
 * For dflash train (train/train_cli.c): the schedule and the held-out evaluation.
 */

/* The learning rate of step s = 1..steps (SpecForge's CosineAnnealingWarmupLR
 * and ConstantWarmupLR, specforge/lr_scheduler.py, as they run one scheduler
 * step per optimizer step):
 *   s <= warmup:   lr * s / warmup                              (linear warmup)
 *   s >  warmup:   cosine:   lr * (1 + cos(pi * (s - 1 - warmup) / (steps - warmup))) / 2
 *                  constant: lr */
typedef enum { SCHEDULE_COSINE, SCHEDULE_CONSTANT } Schedule;
double train_lr_at(Schedule kind, double lr, int warmup, int steps, int s);

/* --heldout: n_seqs sequences (sequence q: len[q] ids at ids_all + off[q],
 * its loss mask at mask_all + off[q]), each cut to S, teacher-forced: the
 * draft proposes a block at every position 0..n-B of loss mask 1 under the
 * training mask (train_loss_grad, no update). accepted[i] (i = 1..B-1):
 * blocks whose first i proposals equal the sequence's ids; *n_blocks;
 * *sum_len: the sum of the accepted lengths (tau = 1 + sum_len / n_blocks). */
int train_eval_heldout(const Model *draft, const Model *target, TrainState *st, int n_seqs, const int *ids_all,
                       const int *mask_all, const size_t *off, const int *len, int S, int B, const TrainHyper *hp,
                       long *accepted /* (B) */, long *n_blocks, long *sum_len);

#endif /* TRAIN_H */
