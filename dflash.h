/* dflash.h - DFlash speculative decoding ("block diffusion" drafting with KV
 * injection of target hidden states) on a toy Qwen3 model, in plain C11.
 *
 * The public interface of dflash.c (the whole algorithm, one translation
 * unit) and the small hook interface through which it hands every
 * intermediate tensor to trace.c.
 *
 * Dimension legend (used in every shape comment):
 *   V  = vocab_size                D  = hidden_size (512)
 *   L  = num_hidden_layers          I  = intermediate_size
 *   H  = num_attention_heads (8)    Hkv = num_key_value_heads
 *   d  = head_dim (64)              k  = len(target_layer_ids) (3)
 *   T  = tokens in one forward call B  = block_size (4)
 *   n  = prompt length              Lc = context rows handed to the draft
 *   S  = keys attended over (cache length after appending)
 */
#ifndef DFLASH_H
#define DFLASH_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------
 * Precision. `make` builds float; `make REAL=double` builds everything in
 * double (weights are converted from the F32 files on load) and traces <f8.
 */
#ifdef DFLASH_DOUBLE
typedef double real;
#define REAL_NPY_DESCR "<f8"
#define REAL_NAME "double"
#else
typedef float real;
#define REAL_NPY_DESCR "<f4"
#define REAL_NAME "float"
#endif

#define DFLASH_MAX_LAYER_IDS 16  /* at most this many target_layer_ids       */
#define DFLASH_MAX_BLOCK 64      /* block_size is validated to 1..this       */
#define DFLASH_MAX_STOP 8        /* stop ids per run                          */
#define DFLASH_MAX_SHARDS 128    /* files behind model.safetensors.index.json */
#define DFLASH_MAX_LAYERS 256    /* num_hidden_layers is validated to 1..this */

/* ---------------------------------------------------------------------------
 * Errors. Library functions return 0 on success and -1 on failure, after
 * writing a one-line message (file, field, expected, found) here. Only main()
 * prints it and exits.
 */
extern char dflash_errmsg[1024];
void dflash_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* "<who>: <dflash_errmsg><after>" on stderr, on one line (control
 * characters in the message print as '?'). */
void dflash_print_error(const char *who, const char *after);

/* calloc that names what it was for: NULL (with dflash_errmsg) on failure */
void *xcalloc(size_t n, size_t size, const char *what);
/* a monotonic clock in seconds */
double now_seconds(void);

/* ---------------------------------------------------------------------------
 * Model configuration: the fields of config.json (Hugging Face names).
 */
typedef struct {
    int hidden_size;              /* D */
    int intermediate_size;        /* I */
    int num_hidden_layers;        /* L */
    int num_attention_heads;      /* H */
    int num_key_value_heads;      /* Hkv */
    int head_dim;                 /* d */
    int vocab_size;               /* V */
    int max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    /* draft only (is_draft = 1): DFlashDraftModel extras */
    int is_draft;
    int num_target_layers;
    int block_size;
    int mask_token_id;
    /* architectures ["LlamaForCausalLM"] (target only): no q_norm / k_norm */
    int llama;
    /* tie_word_embeddings: lm_head is model.embed_tokens (target only) */
    int tie_word_embeddings;
    /* eos_token_id (an int or a list; n_eos 0: absent or null) */
    int n_eos;
    int eos_token_id[DFLASH_MAX_STOP];
    int n_target_layer_ids;                       /* k */
    int target_layer_ids[DFLASH_MAX_LAYER_IDS];
    /* draft only: layer l's attention (layer_types, sliding_window; NOTES.md,
     * "Sliding-window draft layers"). layer_window[l] = 0: every key
     * (full_attention); w > 0 (sliding_attention): only the keys within w
     * positions of the query's own, itself included; layer_causal[l]: and
     * none after it. formats/load.c sets w and causal = 1, what the drafters are
     * trained and served with; --draft-window changes them. */
    int layer_window[DFLASH_MAX_LAYERS];
    int layer_causal[DFLASH_MAX_LAYERS];
    /* rope_scaling {"rope_type": "llama3", ...} (LlamaForCausalLM); 0: plain RoPE */
    int rope_llama3;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_position_embeddings;
    /* A hybrid target (Qwen3_5ForCausalLM, model_type "qwen3_5_text", or the
     * text_config of a nested "qwen3_5" config): Gated DeltaNet layers
     * (layer_linear[l] = 1, "linear_attention") between gated full-attention
     * layers; zero-centred norms (1 + w), partial RoPE on the first rotary_dim
     * dims of every head, q_proj giving query and gate. hybrid_nested: the
     * tensors are "model.language_model.*" (model.visual.*, mtp.* ignored). */
    int hybrid, hybrid_nested;
    int layer_linear[DFLASH_MAX_LAYERS];
    int rotary_dim;                   /* rd = int(head_dim * partial_rotary_factor) */
    int linear_conv_kernel_dim;       /* K  */
    int linear_num_key_heads;         /* Hk */
    int linear_key_head_dim;          /* dk */
    int linear_num_value_heads;       /* Hv (a multiple of Hk) */
    int linear_value_head_dim;        /* dv */
} Config;

/* One Qwen3 (or Llama) decoder layer. Linear weights are [out, in] (y = x W^T). */
typedef struct {
    real *input_layernorm;          /* (D) */
    real *q_proj;                   /* (H*d, D) */
    real *k_proj;                   /* (Hkv*d, D) */
    real *v_proj;                   /* (Hkv*d, D) */
    real *o_proj;                   /* (D, H*d) */
    real *q_norm;                   /* (d), NULL in a Llama target (no q/k norms) */
    real *k_norm;                   /* (d), NULL in a Llama target */
    real *post_attention_layernorm; /* (D) */
    real *gate_proj;                /* (I, D) */
    real *up_proj;                  /* (I, D) */
    real *down_proj;                /* (D, I) */
    /* hybrid target, full-attention layer: q_proj is (2*H*d, D), query and gate
     * per head; hybrid target, Gated DeltaNet layer (C = 2*Hk*dk + Hv*dv): */
    real *in_proj_qkv;              /* (C, D) */
    real *in_proj_z;                /* (Hv*dv, D) */
    real *in_proj_b;                /* (Hv, D) */
    real *in_proj_a;                /* (Hv, D) */
    real *conv1d;                   /* (C, 1, K) depthwise causal conv */
    real *A_log;                    /* (Hv) */
    real *dt_bias;                  /* (Hv) */
    real *linear_norm;              /* (dv) the gated RMSNorm's weight (not zero-centred) */
    real *out_proj;                 /* (D, Hv*dv) */
} LayerWeights;

/* A model: the target (Qwen3ForCausalLM) or the draft (DFlashDraftModel). */
typedef struct {
    Config cfg;
    LayerWeights *layers;  /* (L) */
    /* target only */
    real *embed_tokens;    /* (V, D)  model.embed_tokens.weight */
    real *lm_head;         /* (V, D)  lm_head.weight, or embed_tokens when tied */
    int tied;              /* 1: lm_head == embed_tokens (tie_word_embeddings, no copy) */
    /* draft only */
    real *fc;              /* (D, k*D) fc.weight, no bias */
    real *hidden_norm;     /* (D)     hidden_norm.weight */
    /* both */
    real *norm;            /* (D)     model.norm.weight / norm.weight */
    real *inv_freq;        /* (d/2)   theta^(-2i/d), computed, not loaded */
    real *data;            /* weights widened on load (BF16/F16 tensors, double build), or NULL */
    int n_maps;            /* mapped safetensors files still in use (float build: F32 */
    void *map[DFLASH_MAX_SHARDS];       /*   weights point straight into them) */
    size_t map_size[DFLASH_MAX_SHARDS];
    size_t n_params;
} Model;

/* KV cache of one model: per layer, per KV head, positions 0..len-1. */
typedef struct {
    int n_layers, n_kv_heads, head_dim;
    int capacity;          /* positions it can hold */
    int len;               /* positions it holds now (get_seq_length) */
    real *key;             /* (L, Hkv, capacity, d), after k_norm and RoPE */
    real *value;           /* (L, Hkv, capacity, d) */
    /* a hybrid target's Gated DeltaNet layers (NULL otherwise); see LinearState */
    struct LinearState *linear;  /* (L), used only where cfg.layer_linear[l] */
} KVCache;

/* The carried state of one Gated DeltaNet layer, and what its last forward
 * call needs kept for the rollback (dflash.c, "The rollback"). */
typedef struct LinearState {
    int K, C, Hk, dk, Hv, dv, cap_T;
    real *conv_state;  /* (K-1, C)     the last K-1 in_proj_qkv rows seen (zeros at first)  */
    real *state;       /* (Hv, dk, dv) the recurrent state after the last token              */
    /* the last call (T tokens): the rollback replays its first m tokens */
    int start, last_T;  /* its first position (the cache length before it), its tokens */
    real *state_in;    /* (Hv, dk, dv) the state before it                                   */
    real *conv_in;     /* (K-1+T, C)   conv_state then its in_proj_qkv rows                  */
    real *q, *k;       /* (T, Hk, dk)  l2-normalised (q not yet scaled)                      */
    real *v;           /* (T, Hv, dv)                                                         */
    real *g, *beta;    /* (T, Hv)                                                             */
} LinearState;

/* ---------------------------------------------------------------------------
 * The trace hook: how dflash.c hands out every intermediate tensor.
 * dflash.c knows nothing of files or of shapes: it calls
 * hook->tensor(hook->ctx, &hand) once per tensor, in the order it computes
 * them, and only when GenParams.trace is set. A hand is the tensor's full
 * name, dflash.c's own buffer and the sizes of the call; the trace-name
 * table (formats/tracenames.h) says what the name means, its shape and how the
 * buffer is laid out, and trace_shape_hand there turns a hand into the
 * tensor of the trace contract (C order, the table's shape). trace.c is one
 * hook (trace_hook below: .npy files, a manifest, a readable text); a port's
 * own C harness can install another and take the tensors in-process
 * (examples/hook_harness.c is one, TRACE.md "The hook: a C API" its link
 * line; it links dflash.c and formats/tracenames.c, and formats/load.c, formats/json.c, formats/files.c to
 * load the weights). The buffer is valid during the call only.
 */
typedef struct {
    const char *phase;    /* "prefill" | "draft" | "verify" | "final" */
    int round;            /* 1.. for draft/verify, 0 otherwise */
} TracePhase;

/* The sizes the table's symbolic shapes refer to (the legend above) */
typedef struct {
    int n, m;          /* prompt length; output length (final)            */
    int T, S;          /* tokens in this call; keys after appending        */
    int B, Lc;         /* block size; context rows handed to the draft    */
    int V, D, I, H, Hkv, d, k, L;  /* the target's sizes                   */
    int b, N;          /* training (train/train.c): sequences per batch, blocks per
                          sequence; S is then the sequence length and D..k the draft's */
    /* a hybrid target (rd 0 otherwise): rotary dims; Gated DeltaNet key heads
     * of dk, value heads of dv, conv channels C = 2*Hk*dk + Hv*dv, kernel K */
    int rd, Hk, dk, Hv, dv, C, K;
} TraceDims;

/* One tensor as dflash.c hands it over. */
typedef struct {
    const char *name;       /* "draft1.layers.0.self_attn.q" */
    TracePhase ph;
    const void *buffer;     /* dflash.c's buffer (int or real), laid out as dflash.c keeps it */
    const TraceDims *dims;  /* the sizes of the call that computed it */
} TraceHand;

typedef struct {
    /* returns 0, or -1 with dflash_errmsg set: the run then stops and fails */
    int (*tensor)(void *ctx, const TraceHand *hand);
    void *ctx;
} TraceHook;

/* ---------------------------------------------------------------------------
 * Generation.
 */

/* Replay (cli/replay.c; TRACE.md "Replay"): another run's token decisions, which
 * the dflash_generate of build/dflash-replay (dflash.c with cli/replay.diff)
 * goes on with instead of its own, so that its rounds line up with that
 * run's; dflash.c itself never reads them, and `./dflash --replay` runs that
 * program or stops (cli/replay.c, replay_exec). Every tensor is still computed and traced as usual
 * (prefill.sampled, draft{r}.sampled, verify{r}.sampled and acceptance_length
 * are this program's own); only the tokens the loop continues from are the
 * other run's: its first token, each round's verified block and what it kept. */
typedef struct {
    int first;             /* prefill.sampled: the first new token             */
    int n_rounds;          /* rounds 1..n_rounds follow it; later ones run free */
    const int *block;      /* (n_rounds, B) verify{r}.input_ids                 */
    const int *acc;        /* (n_rounds) verify{r}.acceptance_length, 0..B-1    */
    const int *bonus;      /* (n_rounds) verify{r}.sampled[acc]: the bonus      */
} Replay;

typedef struct {
    int max_new_tokens;
    int block_size;          /* B; 1 = plain autoregressive, no draft */
    double temperature;      /* < 1e-5: greedy (argmax, first index on ties) */
    uint64_t seed;           /* seeds the sampling PRNG when temperature > 0 */
    int n_stop;
    int stop_ids[DFLASH_MAX_STOP];
    const TraceHook *trace;  /* NULL: no trace */
    const Replay *replay;    /* NULL: the run's own tokens. dflash.c ignores it (its loop follows
                                its own tokens); build/dflash-replay's, cli/replay.diff, follows it */
} GenParams;

/* What one speculative round did (for the per-round summary and tests). */
typedef struct {
    int start_before, start_after;
    int block[DFLASH_MAX_BLOCK];      /* block entering the target (anchor + proposal) */
    int block_in[DFLASH_MAX_BLOCK];   /* block entering the draft (anchor + masks) */
    int posterior[DFLASH_MAX_BLOCK];  /* target's sample at each block position */
    int match[DFLASH_MAX_BLOCK];      /* (B-1) block[1:] == posterior[:-1] */
    int cumprod[DFLASH_MAX_BLOCK];    /* (B-1) */
    int acceptance_length;            /* sum(cumprod): accepted draft tokens */
    int draft_cache_before;           /* draft cache length entering the draft */
    int draft_cache_after;            /* after crop(start) */
    int target_cache_after;           /* after crop(start) */
} RoundInfo;

typedef struct {
    int *output_ids;       /* (n_output) prompt + new tokens, cut after stop */
    int n_output;
    int n_prompt;
    int target_forwards;   /* prefill + one per round */
    int draft_forwards;
    int n_rounds;
    RoundInfo *rounds;     /* (n_rounds) */
    double seconds_prefill, seconds_draft, seconds_verify;
} GenResult;

/* dflash_generate: the published dflash_generate (NOTES.md, "The generate
 * loop"), batch 1. draft may be NULL when
 * block_size == 1. Fills *res (free with gen_result_free). */
int  dflash_generate(const Model *draft, const Model *target, const int *input_ids,
                     int n_prompt, const GenParams *p, GenResult *res);
/* Target-only autoregressive decoding, for comparison (same sampling). */
int  ar_generate(const Model *target, const int *input_ids, int n_prompt,
                 const GenParams *p, GenResult *res);
void gen_result_free(GenResult *res);
/* The run's arguments against the target config (prompt ids in range,
 * positions within max_position_embeddings, ...), before anything runs. */
int  check_gen_args(const Model *target, int n_prompt, const GenParams *p, int B, const int *input_ids);
/* inv_freq (d/2)[i] = 1 / theta^(2i/d): computed on load, not stored */
void rope_inv_freq(real *inv_freq, int head_dim, double theta);
/* rope_type "llama3": inv_freq rescaled by wavelength (c's rope_* fields) */
void rope_llama3(real *inv_freq, int head_dim, const Config *c);

/* ---------------------------------------------------------------------------
 * Building blocks of dflash.c that cli/bench.c (and a port's own C harness) call:
 * the KV cache, one target forward and the buffers it writes.
 */
typedef struct TraceCtx TraceCtx;  /* dflash.c's tracing state; NULL: no trace */

/* Activations of one decoder layer for one call of T tokens, every step in a
 * named buffer so a debugger (and the tracer) can see it. The draft keeps one
 * per layer; the target reuses one across its layers (its per-layer outputs
 * live on in hidden_states). */
typedef struct {
    real *xb;          /* (T, D)     input_layernorm(h)                         */
    real *q;           /* (T, H*d)   q_norm(q_proj(xb)), before RoPE            */
    real *k;           /* (Tk, Hkv*d) k_norm(k_proj(.)), before RoPE (Tk = new keys) */
    real *v;           /* (Tk, Hkv*d) v_proj(.)                                 */
    real *q_rope;      /* (T, H*d)   q after RoPE                               */
    real *k_rope;      /* (Tk, Hkv*d) k after RoPE                              */
    real *scores;      /* (H, T, S)  q'.k'/sqrt(d) before the softmax            */
    real *att;         /* (H, T, S)  attention weights                          */
    real *attn;        /* (T, H*d)   att @ v, heads side by side                */
    real *attn_output; /* (T, D)     o_proj(attn)                               */
    real *h_mid;       /* (T, D)     h + attn_output (residual)                 */
    real *xb2;         /* (T, D)     post_attention_layernorm(h_mid)            */
    real *gate;        /* (T, I)     gate_proj(xb2)                             */
    real *up;          /* (T, I)     up_proj(xb2)                               */
    real *act;         /* (T, I)     silu(gate) * up                            */
    real *mlp_out;     /* (T, D)     down_proj(act)                             */
    real *out;         /* (T, D)     h_mid + mlp_out: the layer output          */
} LayerActs;

/* The first intermediate of a forward whose sum was not finite (a norm's
 * sum of squares, a softmax's sum): its trace name as a format of the layer
 * ("layers.%d.input_layernorm") and the layer (-1: not in a layer); name
 * NULL when every sum was finite. dflash_generate stops the run on it. */
typedef struct {
    const char *name;
    int layer;
} SumFault;

/* A hybrid target's extra activations for one call of T tokens (dflash.c,
 * "The hybrid target"); a Gated DeltaNet layer's conv_in, q, k, v, g, beta
 * live in its LinearState (the rollback reads them). Zero in a dense run. */
typedef struct {
    real *qg;          /* (T, 2*H*d)   q_proj(xb): per head query then gate     */
    real *gate;        /* (T, H*d)     the gate halves, heads side by side      */
    real *qkv;         /* (T, C)       in_proj_qkv(xb)                          */
    real *z;           /* (T, Hv*dv)   in_proj_z(xb)                            */
    real *b, *a;       /* (T, Hv)      in_proj_b(xb), in_proj_a(xb)             */
    real *conv_out;    /* (T, C)       silu(depthwise causal conv of conv_in)  */
    real *core;        /* (T, Hv, dv)  the gated delta rule's output            */
    real *norm_out;    /* (T, Hv*dv)   gated RMSNorm(core, z)                   */
} HybridActs;

/* Everything the target forward writes, sized for at most cap_T tokens. */
typedef struct {
    int cap_T;
    int *pos;             /* (T)          position_ids                        */
    real *angles;         /* (T, d/2)     pos * inv_freq                      */
    real *cos, *sin;      /* (T, d)                                           */
    real *h;              /* (T, D)       the residual stream                 */
    real *hidden_states;  /* (L+1, T, D)  output_hidden_states; [L] post-norm */
    real *logits;         /* (T, V)                                           */
    LayerActs acts;       /* one layer's activations, reused layer by layer   */
    SumFault fault;       /* the first non-finite sum of the last forward     */
    HybridActs hy;        /* a hybrid target's extra activations (else zero)  */
} TargetRun;

/* Everything the draft forward writes, sized for cap_ctx context rows and a
 * block of B (dflash.c, section 5). */
typedef struct {
    int cap_ctx, B;
    int *pos;               /* (Lc+B)       position_ids = [cache_len, start+B)    */
    real *angles;           /* (Lc+B, d/2)                                         */
    real *cos, *sin;        /* (Lc+B, d)                                           */
    real *fc_out;           /* (Lc, D)      fc(target_hidden)                      */
    real *C;                /* (Lc, D)      hidden_norm(fc(target_hidden)): "C"    */
    real *noise_embedding;  /* (B, D)       embed_tokens(block): layer 0's input h  */
    real *h;                /* (B, D)       the residual stream                    */
    real *norm;             /* (B, D)       final norm                             */
    real *logits;           /* (B-1, V)     target.lm_head(norm[1:])               */
    real *kv_in;            /* (Lc+B, D)    [C ; X]: the rows K and V are made from   */
    LayerActs *acts;        /* (N) one per draft layer                             */
    SumFault fault;         /* the first non-finite sum of the last forward        */
} DraftRun;

/* GenRun: the buffers of one run of dflash_generate or ar_generate, named as
 * in the reference loop (as TargetRun is target_forward's). max_length = n +
 * max_new; the draft's cache and DraftRun only when B > 1. */
typedef struct {
    int *output_ids, *block, *posterior;  /* (max_length + B) (B) (B) */
    RoundInfo *rounds;                    /* (max_new + 1) the round log: --rounds, tests */
    real *target_hidden;                  /* (max(n, B), k*D) the draft's context features */
    KVCache past_key_values_target, past_key_values_draft;  /* (max_length + B) positions each */
    TargetRun tr;
    DraftRun dr;
} GenRun;

int  cache_init(KVCache *c, const Config *cfg, int capacity);
void cache_free(KVCache *c);
void cache_crop(KVCache *c, int n);   /* keep the first n positions (a hybrid's linear layers roll back) */
/* The gated delta rule, recurrent form, over T tokens: state (Hv, dk, dv) is
 * updated in place; core (T, Hv, dv) gets the outputs (NULL: not kept). */
void gated_delta_rule(real *core, real *state, const real *q, const real *k, const real *v, const real *g,
                      const real *beta, int T, int Hk, int dk, int Hv, int dv);
/* The gated RMSNorm of one value head: out (dv) = w * norm(x) * silu(z) */
void rmsnorm_gated(real *out, const real *x, const real *z, const real *w, int n, real eps);
int  target_run_init(TargetRun *r, const Config *c, int cap_T, int cap_S);
void target_run_free(TargetRun *r);
/* T tokens at positions cache->len.., appended to the cache; fills
 * r->hidden_states and the logits of rows logits_from..T-1 (returned: rows). */
int  target_forward(const Model *m, KVCache *cache, TargetRun *r, const int *ids, int T,
                    int logits_from, TraceCtx *trace);

/* ---------------------------------------------------------------------------
 * Kernels shared with train/train.c (the training step reuses dflash.c's forward
 * building blocks; their comments in dflash.c say what each computes).
 */
/* out = x W^T: dflash.c's naive loop, or kernel.c's same-bits kernel in the programs that link it */
void matmul(real *out, const real *x, const real *w, int T, int n_in, int n_out);
/* kernel.c's switches (its header comment says what they do): output rows
 * over n threads (same bits), and a loaded model's read-only matrices packed.
 * Weak: NULL in the -debug builds, which do not link kernel.c (test first). */
__attribute__((weak)) void kernel_set_threads(int threads);
__attribute__((weak)) void kernel_pack_weights(const Model *m);
__attribute__((weak)) void kernel_unpack_weights(const Model *m);
__attribute__((weak)) int kernel_threads(void);            /* the count kernel_set_threads set */
__attribute__((weak)) size_t kernel_packed_bytes(void);    /* the packed copies' bytes now */
int  rmsnorm_rows(real *out, const real *x, const real *w, int rows, int n, real eps);  /* -1: a sum of squares not finite */
void rope_cos_sin(real *angles, real *cos_, real *sin_, const int *pos, int P,
                  const real *inv_freq, int head_dim);
void apply_rotary_pos_emb(real *q_rope, real *k_rope, const real *q, const real *k,
                          const real *cos_, const real *sin_, int q_len, int k_len,
                          int n_heads, int n_kv_heads, int head_dim);
real exp_real(real x);
real silu(real x);
int  argmax(const real *x, int n);
real dot(const real *a, const real *b, int n);
void extract_context_feature(real *target_hidden, const TargetRun *r, const Config *tcfg,
                             const int *layer_ids, int n_ids, int T, int r0, int rows);
/* the sampling PRNG: xorshift64* seeded through one splitmix64 step */
typedef struct { uint64_t s; } Rng;
void   rng_seed(Rng *g, uint64_t seed);
double rng_uniform(Rng *g);   /* [0, 1), the top 53 bits */
/* sample(logits, T): argmax when T < 1e-5, else one draw from softmax(logits / T) */
int    sample_row(const real *logits, int V, double temperature, Rng *g);
/* (block[1:] == posterior[:-1]).cumprod().sum(); match, cumprod get B-1 entries
 * (the verification rule: eval/lookup.c's drafters are verified by it too) */
int    acceptance_length(const int *block, const int *posterior, int B, int *match, int *cumprod);

#endif /* DFLASH_H */
