/* gen.c - the toy weight generator of dflash.c.
 *
 *   toy_weights/gen random      OUTDIR    dense pseudo-random weights
 *   toy_weights/gen walkthrough OUTDIR    the planted ("compiled") model
 *   toy_weights/gen qwen3-layout OUTDIR [f32]
 *                                         dense pseudo-random weights laid out
 *                                         like a published Qwen3 + DFlash pair
 *                                         (section 10); f32: the same values
 *                                         written as F32 instead of BF16
 *   toy_weights/gen sliding OUTDIR [f32]  the same layout, the draft with
 *                                         sliding-window layers (section 11)
 *   toy_weights/gen llama OUTDIR [f32]    a LlamaForCausalLM target and its
 *                                         DFlash draft (section 12)
 *   toy_weights/gen lm-tiny OUTDIR        a tiny Qwen3ForCausalLM target only,
 *                                         for the committed target-training
 *                                         oracle trace of tests/ (section 13)
 *   toy_weights/gen hybrid OUTDIR         a hybrid Qwen3.5 target (Gated
 *                                         DeltaNet + gated attention) and a
 *                                         planted draft that is often wrong
 *                                         (section 14)
 *
 * Each run writes, in the Hugging Face layout the reference code loads:
 *   OUTDIR/vocab.txt                  one token per line, line number = id
 *   OUTDIR/target/config.json         Qwen3ForCausalLM
 *   OUTDIR/target/model.safetensors   F32
 *   OUTDIR/draft/config.json          DFlashDraftModel
 *   OUTDIR/draft/model.safetensors    F32 (no embed_tokens, no lm_head)
 *
 * Bit-identical files on every machine: the generation path uses only
 * + - * / on doubles and integer operations (no libm: sqrt, cos and sin are
 * computed below with a fixed number of Newton / Taylor steps), every double
 * is rounded to float exactly once, and the bytes are written little-endian
 * by hand. This assumes IEEE-754 arithmetic with FLT_EVAL_METHOD == 0 (every
 * x86-64 and arm64 compiler) and the Makefile's -ffp-contract=off.
 *
 * Read in this order: the numbers (section 1), the random numbers (2), the
 * vocabulary and its successor table (3), the shapes (4), how a tensor is
 * described (5), the random set (6), the walkthrough set and every planted
 * number (7), the file writers (8), main (9). toy_weights/README.md tells the
 * same story in prose.
 *
 * Dimension legend:
 *   V = vocab_size (36)     D = hidden_size (512)    I = intermediate_size (1536)
 *   L = target layers (12)  N = draft layers (2)     k = target_layer_ids (3)
 *   H = query heads (8)     Hkv = key/value heads     d = head_dim (64)
 * Linear weights are stored [out, in] (y = x W^T), as in PyTorch.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ===========================================================================
 * 1. Numbers without libm
 * ===========================================================================
 * A libm's sqrt/cos/sin may differ in the last bit between machines; these
 * loops do not (same operations, same order, IEEE rounding). */

/* sqrt(s) for s > 0: 64 Newton steps x <- (x + s/x)/2 from x = s + 1.
 * Newton roughly halves the error far away and doubles the correct digits
 * near the root; 64 steps are far more than any s used here needs. */
static double sqrt_newton(double s) {
    double x = s + 1.0;
    for (int i = 0; i < 64; i++) x = 0.5 * (x + s / x);
    return x;
}

/* cos(x), sin(x) for |x| <= 4 by their Taylor series, 30 terms each
 * (the last term is below 4^58/58!, about 1e-44). */
static double cos_taylor(double x) {
    double term = 1.0, sum = 1.0;
    for (int k = 1; k <= 30; k++) {
        term *= -x * x / ((2.0 * k - 1.0) * (2.0 * k));
        sum += term;
    }
    return sum;
}
static double sin_taylor(double x) {
    double term = x, sum = x;
    for (int k = 1; k <= 30; k++) {
        term *= -x * x / ((2.0 * k) * (2.0 * k + 1.0));
        sum += term;
    }
    return sum;
}

/* ===========================================================================
 * 2. Pseudo-random numbers: splitmix64, one stream per tensor
 * ===========================================================================
 * Every tensor has its own stream, seeded from its name, so a tensor's values
 * do not depend on which tensors were generated before it:
 *     state0 = GEN_SEED ^ fnv1a64("<set>:<tensor name>")
 * e.g. "random:model.layers.0.self_attn.q_proj.weight". Elements are drawn
 * in storage (row-major) order, one 64-bit draw per element. */
#define GEN_SEED 0x64466c617368ULL /* the ASCII bytes of "dFlash" */

/* splitmix64 (Steele, Lea, Flood 2014; the seeder of xoshiro): add the
 * golden-ratio constant, then mix the bits. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* FNV-1a, 64-bit: the stream's seed from a name. */
static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Uniform in (-1, 1): the top 24 bits u of a draw give (u + 0.5)/2^23 - 1.
 * Every step is exact in double (24-bit integers, a power-of-two divisor), so
 * the value is the same everywhere; it is symmetric around 0. */
static double uniform_pm1(uint64_t *state) {
    uint64_t u = splitmix64(state) >> 40; /* 0 .. 2^24-1 */
    return ((double)u - 8388607.5) / 8388608.0;
}

/* ===========================================================================
 * 3. The vocabulary (the same in both sets) and the successor table
 * ===========================================================================
 * Token id = position in this list = line number (from 0) in vocab.txt.
 * 0 and 1 are the special tokens, then the words of six sentences in
 * reading order, so "The cat sat" is 2 3 4 and "A dog" is 12 13. */
enum {
    TOK_EOS,  /*  0 <eos>  : stop id                                        */
    TOK_MASK, /*  1 <mask> : the draft's mask_token_id (block placeholders) */
    TOK_The, TOK_cat, TOK_sat, TOK_on, TOK_the, TOK_mat,   /*  2 ..  7 */
    TOK_in, TOK_a, TOK_box, TOK_DOT,                       /*  8 .. 11 */
    TOK_A, TOK_dog, TOK_saw, TOK_one, TOK_red, TOK_bird,   /* 12 .. 17 */
    TOK_She, TOK_reads, TOK_every, TOK_day,                /* 18 .. 21 */
    TOK_We, TOK_like, TOK_green, TOK_tea,                  /* 22 .. 25 */
    TOK_It, TOK_is, TOK_very, TOK_cold,                    /* 26 .. 29 */
    TOK_My, TOK_fish, TOK_can, TOK_swim, TOK_fast, TOK_BANG, /* 30 .. 35 */
    VOCAB_SIZE                                             /* 36 */
};

static const char *const VOCAB[VOCAB_SIZE] = {
    "<eos>", "<mask>",
    "The", "cat", "sat", "on", "the", "mat", "in", "a", "box", ".",
    "A", "dog", "saw", "one", "red", "bird",
    "She", "reads", "every", "day",
    "We", "like", "green", "tea",
    "It", "is", "very", "cold",
    "My", "fish", "can", "swim", "fast", "!",
};

/* NEXT[t]: the one word that follows t. The walkthrough target is a bigram
 * machine whose greedy continuation of t is always NEXT[t]. The sentences:
 *   The cat sat on the mat in a box . <eos>
 *   A dog saw one red bird . <eos>
 *   She reads every day . <eos>
 *   We like green tea . <eos>
 *   It is very cold . <eos>
 *   My fish can swim fast ! <eos>
 * and <eos> -> The, so without a stop id the model tells the cat story
 * again. <mask> has no successor (-1): its lm_head column is zero. */
static const int NEXT[VOCAB_SIZE] = {
    [TOK_EOS] = TOK_The, [TOK_MASK] = -1,
    [TOK_The] = TOK_cat, [TOK_cat] = TOK_sat, [TOK_sat] = TOK_on,
    [TOK_on] = TOK_the, [TOK_the] = TOK_mat, [TOK_mat] = TOK_in,
    [TOK_in] = TOK_a, [TOK_a] = TOK_box, [TOK_box] = TOK_DOT,
    [TOK_DOT] = TOK_EOS,
    [TOK_A] = TOK_dog, [TOK_dog] = TOK_saw, [TOK_saw] = TOK_one,
    [TOK_one] = TOK_red, [TOK_red] = TOK_bird, [TOK_bird] = TOK_DOT,
    [TOK_She] = TOK_reads, [TOK_reads] = TOK_every, [TOK_every] = TOK_day,
    [TOK_day] = TOK_DOT,
    [TOK_We] = TOK_like, [TOK_like] = TOK_green, [TOK_green] = TOK_tea,
    [TOK_tea] = TOK_DOT,
    [TOK_It] = TOK_is, [TOK_is] = TOK_very, [TOK_very] = TOK_cold,
    [TOK_cold] = TOK_DOT,
    [TOK_My] = TOK_fish, [TOK_fish] = TOK_can, [TOK_can] = TOK_swim,
    [TOK_swim] = TOK_fast, [TOK_fast] = TOK_BANG, [TOK_BANG] = TOK_EOS,
};

/* ===========================================================================
 * 4. Shapes
 * ===========================================================================
 * Both sets: target 12 layers, draft 2 layers, D = 512, I = 1536, H = 8,
 * d = 64, rope_theta 1e6, eps 1e-6, target_layer_ids [3, 7, 11], block 4.
 * They differ in Hkv: the random set has 4 KV heads (grouped-query attention:
 * query head h reads KV head h/2), the walkthrough set 8 (one per head, so
 * every planted head owns its keys and values). */
typedef struct {
    int hidden_size;             /* D */
    int intermediate_size;       /* I */
    int num_hidden_layers;       /* L (target) or N (draft) */
    int num_attention_heads;     /* H */
    int num_key_value_heads;     /* Hkv */
    int head_dim;                /* d */
    int vocab_size;              /* V */
    int max_position_embeddings;
    const char *rms_norm_eps;    /* written verbatim into config.json */
    const char *rope_theta;
    /* draft only */
    int is_draft;
    int num_target_layers;
    int block_size;
    int mask_token_id;
    int n_layer_ids;             /* k */
    int target_layer_ids[8];
    /* the layout sets (sections 10-12) */
    int n_sliding;               /* draft layers 0..n_sliding-1 are sliding_attention */
    int sliding_window;
    const char *rope_scaling;    /* JSON, written verbatim; NULL: null */
    int hybrid;                  /* section 14: the draft's planted mistakes */
} Config;

static Config make_config(int is_draft, int n_kv_heads) {
    Config c = {
        .hidden_size = 512, .intermediate_size = 1536,
        .num_hidden_layers = is_draft ? 2 : 12,
        .num_attention_heads = 8, .num_key_value_heads = n_kv_heads,
        .head_dim = 64, .vocab_size = VOCAB_SIZE,
        .max_position_embeddings = 4096,
        .rms_norm_eps = "1e-06", .rope_theta = "1000000.0",
        .is_draft = is_draft, .num_target_layers = 12, .block_size = 4,
        .mask_token_id = TOK_MASK,
        .n_layer_ids = 3, .target_layer_ids = {3, 7, 11},
    };
    return c;
}

/* ===========================================================================
 * 5. How a tensor is described
 * ===========================================================================
 * Every element starts as base + noise * uniform(-1, 1) (noise = 0: exactly
 * base, and no random numbers are drawn); then, for the walkthrough and
 * hybrid sets, an optional plant() function overwrites the hand-chosen
 * entries. */
typedef struct Tensor Tensor;
typedef void (*PlantFn)(float *w, const Tensor *t, const Config *c);

struct Tensor {
    char name[96];
    int ndim;       /* 1 or 2 */
    int shape[2];   /* [rows] or [rows, cols] */
    int mid1;       /* written as [rows, 1, cols] (a depthwise conv1d weight) */
    double base;
    double noise;   /* half-width of the uniform noise */
    PlantFn plant;  /* or NULL */
};

#define MAX_TENSORS 192

typedef struct {
    const char *set;  /* the set's name ("random", "walkthrough", "hybrid", ...): part of the PRNG key */
    int n;
    Tensor t[MAX_TENSORS];
} TensorList;

static size_t tensor_numel(const Tensor *t) {
    return t->ndim == 1 ? (size_t)t->shape[0] : (size_t)t->shape[0] * (size_t)t->shape[1];
}

static Tensor *add_tensor(TensorList *tl, const char *name, int rows, int cols,
                          double base, double noise) {
    if (tl->n >= MAX_TENSORS) { /* a programming error, not a user error */
        fprintf(stderr, "gen: more than %d tensors\n", MAX_TENSORS);
        exit(1);
    }
    Tensor *t = &tl->t[tl->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->base = base;
    t->noise = noise;
    return t;
}

/* Half-width a of a uniform(-a, a) linear weight with fan_in inputs whose
 * outputs have RMS `scale` when the inputs have RMS 1:
 *   Var(w) = a^2/3 = scale^2/fan_in  ->  a = scale * sqrt(3/fan_in). */
static double uniform_bound(double scale, int fan_in) {
    return scale * sqrt_newton(3.0 / fan_in);
}

/* Fill a tensor: base + noise, then the planted entries. */
static void fill_tensor(float *w, const Tensor *t, const TensorList *tl, const Config *c) {
    size_t n = tensor_numel(t);
    if (t->noise != 0.0) {
        char key[160];
        snprintf(key, sizeof key, "%s:%s", tl->set, t->name);
        uint64_t state = GEN_SEED ^ fnv1a64(key);
        for (size_t i = 0; i < n; i++) w[i] = (float)(t->base + t->noise * uniform_pm1(&state));
    } else {
        for (size_t i = 0; i < n; i++) w[i] = (float)t->base;
    }
    if (t->plant) t->plant(w, t, c);
}

/* One Qwen3 decoder layer's tensors, named PREFIX"layers.N.", in the order
 * of the forward pass. */
typedef struct {
    double in_scale;   /* q/k/v/gate/up: output RMS scale (uniform_bound)   */
    double out_scale;  /* o_proj/down_proj, the residual writers: likewise  */
    double norm_noise; /* RMSNorm weights are base +- this                  */
    double qk_gain;    /* base of q_norm/k_norm (the others have base 1)    */
    int no_qk_norm;    /* a Llama layer: no q_norm / k_norm                 */
} LayerScales;

static void add_layer(TensorList *tl, const Config *c, const char *prefix, int l, LayerScales s) {
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim;
    int Hq = c->num_attention_heads * d, Hk = c->num_key_value_heads * d;
    char p[64], name[96];
    snprintf(p, sizeof p, "%slayers.%d.", prefix, l);
#define LAYER_T(suffix, rows, cols, base, noise)                       \
    do {                                                               \
        snprintf(name, sizeof name, "%s%s", p, suffix);                \
        add_tensor(tl, name, rows, cols, base, noise);                 \
    } while (0)
    LAYER_T("input_layernorm.weight", D, 0, 1.0, s.norm_noise);              /* (D) */
    LAYER_T("self_attn.q_proj.weight", Hq, D, 0.0, uniform_bound(s.in_scale, D));   /* (H*d, D) */
    LAYER_T("self_attn.k_proj.weight", Hk, D, 0.0, uniform_bound(s.in_scale, D));   /* (Hkv*d, D) */
    LAYER_T("self_attn.v_proj.weight", Hk, D, 0.0, uniform_bound(s.in_scale, D));   /* (Hkv*d, D) */
    LAYER_T("self_attn.o_proj.weight", D, Hq, 0.0, uniform_bound(s.out_scale, Hq)); /* (D, H*d) */
    if (!s.no_qk_norm) LAYER_T("self_attn.q_norm.weight", d, 0, s.qk_gain, s.norm_noise);  /* (d) */
    if (!s.no_qk_norm) LAYER_T("self_attn.k_norm.weight", d, 0, s.qk_gain, s.norm_noise);  /* (d) */
    LAYER_T("post_attention_layernorm.weight", D, 0, 1.0, s.norm_noise);     /* (D) */
    LAYER_T("mlp.gate_proj.weight", I, D, 0.0, uniform_bound(s.in_scale, D));  /* (I, D) */
    LAYER_T("mlp.up_proj.weight", I, D, 0.0, uniform_bound(s.in_scale, D));    /* (I, D) */
    LAYER_T("mlp.down_proj.weight", D, I, 0.0, uniform_bound(s.out_scale, I)); /* (D, I) */
#undef LAYER_T
}

static Tensor *find_tensor(TensorList *tl, const char *name) {
    for (int i = 0; i < tl->n; i++)
        if (strcmp(tl->t[i].name, name) == 0) return &tl->t[i];
    fprintf(stderr, "gen: internal error: no tensor %s\n", name);
    exit(1);
}

/* ===========================================================================
 * 6. The random set
 * ===========================================================================
 * Dense pseudo-random weights for parity tests: nothing planted, every
 * multiply does real work. The scaling argument (README has the numbers):
 * - embeddings uniform with RMS 1, so the residual stream starts at RMS 1;
 * - q/k/v/gate/up: RMS 1/sqrt(fan_in) (scale 1), their inputs are RMSNorm
 *   outputs of RMS ~1, so their outputs have RMS ~1;
 * - o_proj/down_proj: scale RND_OUT, so each layer adds a modest update and
 *   the residual RMS grows slowly instead of doubling through 12 layers;
 * - q_norm/k_norm weights around RND_QK = 2: every query and key has
 *   length 8 after its RMSNorm, so with weights 1 the scores q.k/8 stay
 *   within +-8 and the heads blur the whole context together; greedy output
 *   then fell into one-token loops ("very very very ...") for half of 20
 *   test prompts. Weights ~2 make scores 4x larger, heads pick out
 *   positions, and the output stays varied;
 * - lm_head: scale RND_LM, logits with a spread of a few units (only the
 *   scale of the logits changes, not which one is largest);
 * - RMSNorm weights 1 +- 0.1, so a forgotten weight multiply is caught. */
#define RND_EMBED 1.0      /* RMS of an embedding row                       */
#define RND_IN 1.0         /* output RMS scale of q/k/v/gate/up             */
#define RND_OUT 0.5        /* output RMS scale of o_proj/down_proj          */
#define RND_LM 4.0         /* output RMS scale of lm_head (logit spread)    */
#define RND_NORM_NOISE 0.1 /* RMSNorm weights are 1 +- this                 */
#define RND_QK 2.0         /* q_norm/k_norm weights around this             */

static void build_random_target(TensorList *tl, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size;
    LayerScales s = {RND_IN, RND_OUT, RND_NORM_NOISE, RND_QK, 0};
    add_tensor(tl, "model.embed_tokens.weight", V, D, 0.0, RND_EMBED * sqrt_newton(3.0)); /* (V, D) */
    for (int l = 0; l < c->num_hidden_layers; l++) add_layer(tl, c, "model.", l, s);
    add_tensor(tl, "model.norm.weight", D, 0, 1.0, RND_NORM_NOISE);                   /* (D) */
    add_tensor(tl, "lm_head.weight", V, D, 0.0, uniform_bound(RND_LM, D));            /* (V, D) */
}

static void build_random_draft(TensorList *tl, const Config *c) {
    int D = c->hidden_size, kD = c->n_layer_ids * D;
    LayerScales s = {RND_IN, RND_OUT, RND_NORM_NOISE, RND_QK, 0};
    add_tensor(tl, "fc.weight", D, kD, 0.0, uniform_bound(1.0, kD));                  /* (D, k*D) */
    add_tensor(tl, "hidden_norm.weight", D, 0, 1.0, RND_NORM_NOISE);                  /* (D) */
    for (int l = 0; l < c->num_hidden_layers; l++) add_layer(tl, c, "", l, s);
    add_tensor(tl, "norm.weight", D, 0, 1.0, RND_NORM_NOISE);                         /* (D) */
}

/* ===========================================================================
 * 7. The walkthrough set: planted weights
 * ===========================================================================
 * Target: a bigram machine. Token t is embedded as sqrt(D) * e_t (a one-hot
 * vector of RMS 1 in residual dims 0..V-1), the decoder layers add small
 * dense pseudo-random updates (so layers 3/7/11 differ and every kernel is
 * exercised), and lm_head reads the token dims back: logit[NEXT[t]] is the
 * normed residual's component t. Greedy decoding follows NEXT[].
 *
 * Draft: layer 0 has three planted look-ahead heads m = 1, 2, 3. Head m makes
 * the mask m positions after the anchor (the block's first, known token)
 * attend to the anchor and copy look_m(anchor) into its residual:
 *   look_1(t) = t, look_2(t) = NEXT[t], look_3(t) = NEXT[NEXT[t]],
 * so lm_head (which maps t to NEXT[t]) proposes NEXT^m(anchor), the target's
 * own continuation -- except one planted mistake, look_3(on) = box, so after
 * "on" the draft proposes "the mat ." where the target says "the mat in".
 * Heads 0, 4..7, the MLPs and layer 1 carry small pseudo-random weights. */

/* --- target (and the unplanted parts of the draft) ---------------------- */
#define WT_IN 1.0          /* q/k/v/gate/up: ordinary scale                  */
#define WT_OUT 0.3         /* o_proj/down_proj: 0.3 x ordinary, so the token */
                           /* stays dominant in the residual: after 11       */
                           /* layers the token dim still holds ~21-23 while  */
                           /* the other dims have RMS ~1 (README)            */
#define WT_NORM_NOISE 0.1  /* decoder-layer RMSNorm weights 1 +- 0.1         */

/* embed[t] = sqrt(D) * e_t: RMS exactly 1, so input_layernorm leaves it
 * (almost) unchanged and the token owns residual dim t. */
static void plant_embed(float *w, const Tensor *t, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size;
    (void)t;
    float sqrt_d = (float)sqrt_newton((double)D); /* 22.627417 */
    for (int tok = 0; tok < V; tok++) w[(size_t)tok * D + tok] = sqrt_d;
}

/* lm_head[NEXT[t], t] = 1: the logit of NEXT[t] is the final-normed residual
 * at dim t. Tokens no word leads to (<mask>, A, She, We, It, My) have an
 * all-zero row (logit exactly 0); <mask> has an all-zero column (it predicts
 * nothing). */
static void plant_lm_head(float *w, const Tensor *t, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size;
    (void)t;
    for (int tok = 0; tok < V; tok++)
        if (NEXT[tok] >= 0) w[(size_t)NEXT[tok] * D + tok] = 1.0f;
}

/* --- draft: the look-ahead heads ----------------------------------------- */
#define LOOK_FIRST 1       /* heads 1, 2, 3 are the look-ahead heads; head m */
#define LOOK_LAST 3        /* looks m positions back to the anchor           */
#define POS_DIM 0          /* RoPE pair 0 (dims 0 and d/2): inv_freq[0] =    */
                           /* theta^0 = 1, it turns 1 radian per position    */
#define CTX_DIM 16         /* context keys point here; no query reads it     */
#define KEY_GAIN 10.0      /* k_norm weight on pair 0 and the sink pair      */
#define FLAG_DIM(c) ((c)->hidden_size - 1) /* C's "I am context" dim (511)   */
#define PLANTED_ANCHOR TOK_on   /* the one planted mistake:                  */
#define PLANTED_LOOK3 TOK_box   /*   look_3(on) = box, not NEXT^2(on) = mat  */

/* The sink pair is the last, slowest pair (dims d/2-1 and d-1):
 * inv_freq[d/2-1] = theta^(-(d-2)/d) = 1e6^(-62/64) ~ 1.5e-6 rad/position,
 * so a mask query and a mask key score the same at every distance. */
static int sink_dim(const Config *c) { return c->head_dim / 2 - 1; }

/* SINK = (1 + cos 1)/2 = 0.7702: the sink score relative to the peak, half
 * way between the peak (cos 0 = 1, the anchor at the right distance) and the
 * best wrong distance (cos 1 = 0.5403), so both margins are equal. */
static double sink_weight(void) { return 0.5 * (1.0 + cos_taylor(1.0)); }

static int hybrid_look(int m, int tok); /* section 14 */

/* look_m(t): what head m writes for anchor t (lm_head then adds one NEXT). */
static int look(int m, int tok, const Config *c) {
    if (c->hybrid) return hybrid_look(m, tok);  /* the hybrid set's mistakes */
    if (m == 1) return tok;
    if (m == 2) return NEXT[tok];
    if (tok == PLANTED_ANCHOR) return PLANTED_LOOK3; /* the planted mistake */
    return NEXT[NEXT[tok]];
}

/* q_proj rows of head m (input: H = input_layernorm(embed) = sqrt(D) e_t):
 *   any word t : q = (1 at POS_DIM)                  pair 0 at angle 0
 *   <mask>     : q = (cos m at dim 0, -sin m at dim d/2)   pair 0 at angle -m
 *                  + (SINK at the sink dim 31)
 * (magnitudes do not matter: q_norm rescales every query to length 8). After
 * RoPE the score with a word key at distance delta = q_pos - k_pos is
 * proportional to cos(delta - m): largest at delta = m. */
static void plant_look_q(float *w, const Tensor *t, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size, d = c->head_dim;
    (void)t;
    for (int m = LOOK_FIRST; m <= LOOK_LAST; m++) {
        float *head = w + (size_t)m * d * D;  /* rows m*d .. m*d+d-1 */
        memset(head, 0, sizeof(float) * (size_t)d * D);
        for (int tok = 0; tok < V; tok++) {
            if (tok == TOK_MASK) {
                head[(size_t)POS_DIM * D + tok] = (float)cos_taylor((double)m);
                head[(size_t)(POS_DIM + d / 2) * D + tok] = (float)-sin_taylor((double)m);
                head[(size_t)sink_dim(c) * D + tok] = (float)sink_weight();
            } else {
                head[(size_t)POS_DIM * D + tok] = 1.0f;
            }
        }
    }
}

/* k_proj rows of head m: every key gets exactly one deliberate direction
 * (k_norm would blow tiny noise up to unit length, so none is left to chance):
 *   any word t : POS_DIM (pair 0 at angle 0)
 *   <mask>     : the sink dim
 *   context C  : CTX_DIM, read from C's flag dim (C is zero on dims 0..V-1,
 *                see plant_fc, so the other two rows give exactly 0 there). */
static void plant_look_k(float *w, const Tensor *t, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size, d = c->head_dim;
    (void)t;
    for (int m = LOOK_FIRST; m <= LOOK_LAST; m++) {
        float *head = w + (size_t)m * d * D;
        memset(head, 0, sizeof(float) * (size_t)d * D);
        for (int tok = 0; tok < V; tok++) {
            if (tok == TOK_MASK) head[(size_t)sink_dim(c) * D + tok] = 1.0f;
            else head[(size_t)POS_DIM * D + tok] = 1.0f;
        }
        head[(size_t)CTX_DIM * D + FLAG_DIM(c)] = 1.0f;
    }
}

/* v_proj rows of head m: copy the token's identity, v = sqrt(D) e_t in the
 * head's dims 0..V-1 (V <= d). <mask> and the context give v = 0. */
static void plant_look_v(float *w, const Tensor *t, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size, d = c->head_dim;
    (void)t;
    for (int m = LOOK_FIRST; m <= LOOK_LAST; m++) {
        float *head = w + (size_t)m * d * D;
        memset(head, 0, sizeof(float) * (size_t)d * D);
        for (int tok = 0; tok < V; tok++)
            if (tok != TOK_MASK) head[(size_t)tok * D + tok] = 1.0f;
    }
}

/* o_proj columns of head m: value dim t -> residual dim look_m(t), weight 1.
 * The mask m positions after the anchor thus gains sqrt(D) e_look, as strong
 * as a token embedding, and lm_head reads NEXT[look_m(anchor)] from it. */
static void plant_look_o(float *w, const Tensor *t, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size, d = c->head_dim;
    int HD = c->num_attention_heads * d; /* o_proj is (D, H*d) */
    (void)t;
    for (int m = LOOK_FIRST; m <= LOOK_LAST; m++) {
        for (int row = 0; row < D; row++)
            memset(w + (size_t)row * HD + (size_t)m * d, 0, sizeof(float) * (size_t)d);
        for (int tok = 0; tok < V; tok++)
            if (tok != TOK_MASK) w[(size_t)look(m, tok, c) * HD + (size_t)m * d + tok] = 1.0f;
    }
}

/* k_norm weight (one for all heads of the layer): KEY_GAIN on both dims of
 * pair 0 and of the sink pair (equal within a pair, so the gain commutes with
 * the rotation), 1 elsewhere. After q_norm every query has length 8 and
 * after k_norm every planted key length 8 * KEY_GAIN, so with the 1/8 score
 * scale the peak score is 8 * KEY_GAIN / sqrt(1 + SINK^2) = 63.4 (README). */
static void plant_look_knorm(float *w, const Tensor *t, const Config *c) {
    int d = c->head_dim, s = sink_dim(c);
    (void)t;
    for (int i = 0; i < d; i++) w[i] = 1.0f;
    w[POS_DIM] = w[POS_DIM + d / 2] = (float)KEY_GAIN;
    w[s] = w[s + d / 2] = (float)KEY_GAIN;
}

/* fc (D, k*D): rows 0..V-1 are zero, so C = hidden_norm(fc(...)) is exactly
 * zero on the token dims and the look-ahead heads see context rows only
 * through CTX_DIM (score 0, value 0). Row FLAG_DIM reads the token dims of
 * the layer-3 features (hidden_states[4], columns 0..V-1) with weight
 * 1/sqrt(D): about 1 for any token, since the token's own dim holds ~sqrt(D).
 * The other rows stay pseudo-random: the rest of C carries target features
 * into the random heads. */
static void plant_fc(float *w, const Tensor *t, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size, kD = t->shape[1];
    memset(w, 0, sizeof(float) * (size_t)V * kD);
    float *flag = w + (size_t)FLAG_DIM(c) * kD;
    memset(flag, 0, sizeof(float) * (size_t)kD);
    for (int j = 0; j < V; j++) flag[j] = (float)(1.0 / sqrt_newton((double)D));
}

static void build_walkthrough_target(TensorList *tl, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size;
    LayerScales s = {WT_IN, WT_OUT, WT_NORM_NOISE, 1.0, 0};
    add_tensor(tl, "model.embed_tokens.weight", V, D, 0.0, 0.0)->plant = plant_embed;
    for (int l = 0; l < c->num_hidden_layers; l++) add_layer(tl, c, "model.", l, s);
    add_tensor(tl, "model.norm.weight", D, 0, 1.0, 0.0);     /* exactly 1 */
    add_tensor(tl, "lm_head.weight", V, D, 0.0, 0.0)->plant = plant_lm_head;
}

/* The planted heads keep a token's identity in one head's d dims, and head m
 * reads KV head m (no grouping). */
_Static_assert(VOCAB_SIZE <= 64, "the vocabulary must fit in head_dim (64)");

static void build_walkthrough_draft(TensorList *tl, const Config *c) {
    int D = c->hidden_size, kD = c->n_layer_ids * D;
    if (c->num_key_value_heads != c->num_attention_heads || c->head_dim < VOCAB_SIZE) {
        fprintf(stderr, "gen: internal error: the planted draft needs Hkv = H and d >= V\n");
        exit(1);
    }
    LayerScales s = {WT_IN, WT_OUT, WT_NORM_NOISE, 1.0, 0};
    add_tensor(tl, "fc.weight", D, kD, 0.0, uniform_bound(1.0, kD))->plant = plant_fc;
    add_tensor(tl, "hidden_norm.weight", D, 0, 1.0, 0.0);   /* exactly 1 */
    for (int l = 0; l < c->num_hidden_layers; l++) add_layer(tl, c, "", l, s);
    /* layer 0: input_layernorm exactly 1 (H = embed, unchanged), the
     * planted heads, q_norm exactly 1, k_norm with the gains. */
    find_tensor(tl, "layers.0.input_layernorm.weight")->noise = 0.0;
    find_tensor(tl, "layers.0.self_attn.q_proj.weight")->plant = plant_look_q;
    find_tensor(tl, "layers.0.self_attn.k_proj.weight")->plant = plant_look_k;
    find_tensor(tl, "layers.0.self_attn.v_proj.weight")->plant = plant_look_v;
    find_tensor(tl, "layers.0.self_attn.o_proj.weight")->plant = plant_look_o;
    find_tensor(tl, "layers.0.self_attn.q_norm.weight")->noise = 0.0;
    Tensor *kn = find_tensor(tl, "layers.0.self_attn.k_norm.weight");
    kn->noise = 0.0;
    kn->plant = plant_look_knorm;
    add_tensor(tl, "norm.weight", D, 0, 1.0, 0.0);          /* exactly 1 */
}

/* ===========================================================================
 * 8. File writers
 * =========================================================================== */

/* Report "gen: PATH: reason" (errno's text) and return -1. */
static int fail(const char *path) {
    fprintf(stderr, "gen: %s: %s\n", path, strerror(errno));
    return -1;
}

/* mkdir -p: create each missing component of path. */
static int mkdir_p(const char *path) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) {
        errno = ENAMETOOLONG;
        return fail(path);
    }
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return fail(buf);
            struct stat st;
            if (stat(buf, &st) != 0) return fail(buf);
            if (!S_ISDIR(st.st_mode)) {
                errno = ENOTDIR;
                return fail(buf);
            }
            *p = saved;
            if (saved == '\0') break;
        }
    }
    return 0;
}

/* Files are written to "<path>.tmp" and renamed over <path> once complete,
 * so an interrupted run never leaves a truncated file under the real name. */
typedef struct {
    FILE *f;
    char path[4096], tmp[4112];
} OutFile;

static int out_open(OutFile *o, const char *path) {
    if (strlen(path) >= sizeof o->path) {
        errno = ENAMETOOLONG;
        return fail(path);
    }
    strcpy(o->path, path);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path);
    o->f = fopen(o->tmp, "wb");
    return o->f ? 0 : fail(o->tmp);
}

static int out_write(OutFile *o, const void *p, size_t n) {
    if (fwrite(p, 1, n, o->f) != n) return fail(o->tmp);
    return 0;
}

/* Close and rename; on any earlier error the caller passes ok = 0. */
static int out_close(OutFile *o, int ok) {
    int err = ferror(o->f);
    if (fclose(o->f) != 0 || err) {
        if (ok) fail(o->tmp);
        ok = 0;
    }
    if (!ok) {
        remove(o->tmp);
        return -1;
    }
    if (rename(o->tmp, o->path) != 0) {
        int e = errno;
        remove(o->tmp);
        errno = e;
        return fail(o->path);
    }
    return 0;
}

/* A growing text buffer for JSON. */
typedef struct {
    char *s;
    size_t len, cap;
} Text;

static void text_add(Text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void text_add(Text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fprintf(stderr, "gen: formatting error\n");
        exit(1);
    }
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1024;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            fprintf(stderr, "gen: out of memory\n");
            exit(1);
        }
        t->s = s;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* Write a text buffer as a whole file. */
static int write_text_file(const char *path, const Text *t) {
    OutFile o;
    if (out_open(&o, path) != 0) return -1;
    int ok = out_write(&o, t->s, t->len) == 0;
    if (out_close(&o, ok) != 0) return -1;
    printf("wrote %s (%zu bytes)\n", path, t->len);
    return 0;
}

static int write_vocab(const char *path) {
    Text t = {0};
    for (int i = 0; i < VOCAB_SIZE; i++) text_add(&t, "%s\n", VOCAB[i]);
    int rc = write_text_file(path, &t);
    free(t.s);
    return rc;
}

/* config.json: the Hugging Face fields the published code reads (NOTES.md, "Weight files"). */
static int write_config(const char *path, const Config *c) {
    Text t = {0};
    text_add(&t, "{\n");
    text_add(&t, "  \"architectures\": [\"%s\"],\n", c->is_draft ? "DFlashDraftModel" : "Qwen3ForCausalLM");
    text_add(&t, "  \"model_type\": \"qwen3\",\n");
    text_add(&t, "  \"hidden_size\": %d,\n", c->hidden_size);
    text_add(&t, "  \"intermediate_size\": %d,\n", c->intermediate_size);
    text_add(&t, "  \"num_hidden_layers\": %d,\n", c->num_hidden_layers);
    text_add(&t, "  \"num_attention_heads\": %d,\n", c->num_attention_heads);
    text_add(&t, "  \"num_key_value_heads\": %d,\n", c->num_key_value_heads);
    text_add(&t, "  \"head_dim\": %d,\n", c->head_dim);
    text_add(&t, "  \"vocab_size\": %d,\n", c->vocab_size);
    text_add(&t, "  \"rms_norm_eps\": %s,\n", c->rms_norm_eps);
    text_add(&t, "  \"rope_theta\": %s,\n", c->rope_theta);
    text_add(&t, "  \"max_position_embeddings\": %d,\n", c->max_position_embeddings);
    text_add(&t, "  \"hidden_act\": \"silu\",\n");
    text_add(&t, "  \"attention_bias\": false,\n");
    text_add(&t, "  \"tie_word_embeddings\": false,\n");
    text_add(&t, "  \"eos_token_id\": %d,\n", TOK_EOS);
    if (c->is_draft) {
        text_add(&t, "  \"num_target_layers\": %d,\n", c->num_target_layers);
        text_add(&t, "  \"block_size\": %d,\n", c->block_size);
        text_add(&t, "  \"dflash_config\": {\"mask_token_id\": %d, \"target_layer_ids\": [", c->mask_token_id);
        for (int i = 0; i < c->n_layer_ids; i++) text_add(&t, "%s%d", i ? ", " : "", c->target_layer_ids[i]);
        text_add(&t, "]},\n");
    }
    text_add(&t, "  \"torch_dtype\": \"float32\"\n}\n");
    int rc = write_text_file(path, &t);
    free(t.s);
    return rc;
}

/* model.safetensors:
 *   u64 little-endian N | N bytes of JSON header, space-padded so that
 *   8 + N is a multiple of 64 | the tensors' raw little-endian float32 data,
 *   back to back in header order.
 * The header maps each name to {"dtype":"F32","shape":[...],
 * "data_offsets":[begin,end]} (byte offsets from the start of the data). */
/* float -> BF16 bits, round to nearest even (as torch's .to(bfloat16));
 * the values here are finite and far from the float range's ends */
static uint16_t float_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* the BF16 value as a float again (exact) */
static float bf16_round(float x) {
    uint32_t u = (uint32_t)float_to_bf16(x) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* write_safetensors_part: tensors first..first+count-1 of tl; dtype "F32"
 * or "BF16" (rounded to nearest even); round_bf16 with "F32": the values
 * rounded to BF16 first, then written as F32 (the same numbers, twice the
 * bytes). *data_bytes (may be NULL) gets the size of the data section. */
static int write_safetensors_part(const char *path, const TensorList *tl, const Config *c, int first, int count,
                                  int bf16, int round_bf16, size_t *data_bytes) {
    Text h = {0};
    size_t offset = 0, max_numel = 0, esize = bf16 ? 2 : 4;
    text_add(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = first; i < first + count; i++) {
        const Tensor *t = &tl->t[i];
        size_t bytes = esize * tensor_numel(t);
        text_add(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%d", t->name, bf16 ? "BF16" : "F32", t->shape[0]);
        if (t->ndim == 2) text_add(&h, t->mid1 ? ",1,%d" : ",%d", t->shape[1]);
        text_add(&h, "],\"data_offsets\":[%zu,%zu]}", offset, offset + bytes);
        offset += bytes;
        if (tensor_numel(t) > max_numel) max_numel = tensor_numel(t);
    }
    text_add(&h, "}");
    /* 8 + N a multiple of 64 (the format asks for 8): every tensor then
     * starts on a cache line once mapped, and matmul's vector loads of a
     * weight row do not straddle two lines (about 25% faster on the
     * arithmetic of a multi-token forward). */
    while ((8 + h.len) % 64 != 0) text_add(&h, " ");

    float *w = malloc(sizeof(float) * max_numel);
    unsigned char *bytes = malloc(4 * max_numel);
    if (!w || !bytes) {
        fprintf(stderr, "gen: out of memory\n");
        exit(1);
    }
    OutFile o;
    int ok = 0;
    if (out_open(&o, path) == 0) {
        unsigned char len8[8];
        for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)h.len >> (8 * b));
        ok = out_write(&o, len8, 8) == 0 && out_write(&o, h.s, h.len) == 0;
        for (int i = first; ok && i < first + count; i++) {
            const Tensor *t = &tl->t[i];
            size_t n = tensor_numel(t);
            fill_tensor(w, t, tl, c);
            for (size_t j = 0; j < n; j++) {
                if (bf16) { /* BF16 -> little-endian bytes */
                    uint16_t b = float_to_bf16(w[j]);
                    bytes[2 * j + 0] = (unsigned char)(b);
                    bytes[2 * j + 1] = (unsigned char)(b >> 8);
                    continue;
                }
                float x = round_bf16 ? bf16_round(w[j]) : w[j];
                uint32_t u; /* float32 -> little-endian bytes */
                memcpy(&u, &x, 4);
                bytes[4 * j + 0] = (unsigned char)(u);
                bytes[4 * j + 1] = (unsigned char)(u >> 8);
                bytes[4 * j + 2] = (unsigned char)(u >> 16);
                bytes[4 * j + 3] = (unsigned char)(u >> 24);
            }
            ok = out_write(&o, bytes, esize * n) == 0;
        }
        if (out_close(&o, ok) != 0) ok = 0;
    }
    if (ok) printf("wrote %s (%zu bytes, %d tensors)\n", path, 8 + h.len + offset, count);
    if (data_bytes) *data_bytes = offset;
    free(w);
    free(bytes);
    free(h.s);
    return ok ? 0 : -1;
}

static int write_safetensors(const char *path, const TensorList *tl, const Config *c) {
    return write_safetensors_part(path, tl, c, 0, tl->n, 0, 0, NULL);
}

/* ===========================================================================
 * 9. main
 * =========================================================================== */
static TensorList target_tensors, draft_tensors; /* static: ~36 KB each */

static int join(char *out, size_t cap, const char *dir, const char *name) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap) {
        errno = ENAMETOOLONG;
        return fail(dir);
    }
    return 0;
}

/* A pair of the flat layout under outdir: vocab.txt, target/config.json
 * (write_target_config: the target's own config) and model.safetensors of
 * target_tensors, draft/config.json and model.safetensors of draft_tensors.
 * 0, or 1 (the failure reported). */
static int write_pair(const char *outdir, const Config *tc, const Config *dc,
                      int (*write_target_config)(const char *path, const Config *c)) {
    char tdir[4096], ddir[4096], path[4200];
    if (join(tdir, sizeof tdir, outdir, "target") || join(ddir, sizeof ddir, outdir, "draft")) return 1;
    if (mkdir_p(tdir) || mkdir_p(ddir)) return 1;
    if (join(path, sizeof path, outdir, "vocab.txt") || write_vocab(path)) return 1;
    if (join(path, sizeof path, tdir, "config.json") || write_target_config(path, tc)) return 1;
    if (join(path, sizeof path, tdir, "model.safetensors") || write_safetensors(path, &target_tensors, tc)) return 1;
    if (join(path, sizeof path, ddir, "config.json") || write_config(path, dc)) return 1;
    if (join(path, sizeof path, ddir, "model.safetensors") || write_safetensors(path, &draft_tensors, dc)) return 1;
    return 0;
}

/* ===========================================================================
 * 10. The qwen3-layout set: a published checkpoint's layout, small
 * ===========================================================================
 * Laid out like z-lab/Qwen3-4B-DFlash-b16 and its Qwen3 target, at a size CI
 * can run: BF16 tensors; the target split into two shards behind
 * model.safetensors.index.json; tie_word_embeddings true (no lm_head.weight:
 * the logits are h . embed_tokens rows); head_dim (32) != hidden_size /
 * num_attention_heads (64 / 4); grouped-query attention 4:1 (4 query heads,
 * 1 KV head); block size 16; a 5-layer draft fed by 5 of the 10 target
 * layers, [1, 2, 4, 6, 7] (what the reference's build_target_layer_ids(10, 5)
 * gives, Python round() ties to even); mask_token_id = vocab_size - 1;
 * eos_token_id Q3_EOS (not 0) in config.json and [Q3_EOS, Q3_EOS2] in
 * generation_config.json; the configs carry the keys published configs carry
 * (dtype / torch_dtype, layer_types, rope_scaling null, use_sliding_window
 * false, max_window_layers, auto_map, transformers_version, ...). No
 * vocab.txt: output is printed as token ids. Weights as the random set's
 * (section 6), from their own streams ("qwen3-layout:<name>"), rounded to
 * BF16 (nearest even). */
#define Q3_VOCAB 64
#define Q3_EOS 3
#define Q3_EOS2 4
#define Q3_TARGET_LAYERS 10
#define Q3_SHARD1_LAYERS 5 /* shard 1: embed_tokens + layers 0..4; shard 2: layers 5..9 + norm */

static Config q3_config(int is_draft) {
    Config c = {
        .hidden_size = 64, .intermediate_size = 192,
        .num_hidden_layers = is_draft ? 5 : Q3_TARGET_LAYERS,
        .num_attention_heads = 4, .num_key_value_heads = 1,
        .head_dim = 32, .vocab_size = Q3_VOCAB,
        .max_position_embeddings = 512,
        .rms_norm_eps = "1e-06", .rope_theta = "1000000",
        .is_draft = is_draft, .num_target_layers = Q3_TARGET_LAYERS, .block_size = 16,
        .mask_token_id = Q3_VOCAB - 1,
        .n_layer_ids = 5, .target_layer_ids = {1, 2, 4, 6, 7},
    };
    return c;
}

/* Tied embeddings: the logits are norm(h) . embed_tokens rows, so the
 * token just read, still in the residual stream, would win every time with
 * the random set's scales (the output repeats its last token). Here the
 * embeddings are small (RMS Q3_EMBED) and the layers write more (Q3_OUT), so
 * the ten layers' updates, not the input row, decide the next token. */
#define Q3_EMBED 0.25
#define Q3_OUT 1.5

static void q3_build_target(TensorList *tl, const Config *c) {
    int V = c->vocab_size, D = c->hidden_size;
    LayerScales s = {RND_IN, Q3_OUT, RND_NORM_NOISE, RND_QK, 0};
    add_tensor(tl, "model.embed_tokens.weight", V, D, 0.0, Q3_EMBED * sqrt_newton(3.0)); /* (V, D), also lm_head */
    for (int l = 0; l < c->num_hidden_layers; l++) add_layer(tl, c, "model.", l, s);
    add_tensor(tl, "model.norm.weight", D, 0, 1.0, RND_NORM_NOISE);                   /* (D) */
}

/* config.json as published Qwen3 / DFlash configs write it (sorted keys) */
static int q3_write_config(const char *path, const Config *c) {
    Text t = {0};
    text_add(&t, "{\n  \"architectures\": [\"%s\"],\n", c->is_draft ? "DFlashDraftModel" : "Qwen3ForCausalLM");
    text_add(&t, "  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n");
    if (c->is_draft) text_add(&t, "  \"auto_map\": {\"AutoModel\": \"dflash.DFlashDraftModel\"},\n");
    if (c->is_draft) text_add(&t, "  \"block_size\": %d,\n", c->block_size);
    text_add(&t, "  \"bos_token_id\": %d,\n", Q3_EOS2);
    if (c->is_draft) {
        text_add(&t, "  \"dflash_config\": {\"mask_token_id\": %d, \"target_layer_ids\": [", c->mask_token_id);
        for (int i = 0; i < c->n_layer_ids; i++) text_add(&t, "%s%d", i ? ", " : "", c->target_layer_ids[i]);
        text_add(&t, "]},\n  \"dtype\": \"bfloat16\",\n");
    }
    text_add(&t, "  \"eos_token_id\": %d,\n", Q3_EOS);
    text_add(&t, "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n", c->head_dim, c->hidden_size);
    text_add(&t, "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n", c->intermediate_size);
    text_add(&t, "  \"layer_types\": [");
    for (int i = 0; i < c->num_hidden_layers; i++)
        text_add(&t, "%s\"%s_attention\"", i ? ", " : "", i < c->n_sliding ? "sliding" : "full");
    text_add(&t, "],\n  \"max_position_embeddings\": %d,\n", c->max_position_embeddings);
    text_add(&t, "  \"max_window_layers\": %d,\n  \"model_type\": \"qwen3\",\n", c->num_hidden_layers);
    text_add(&t, "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n", c->num_attention_heads,
             c->num_hidden_layers);
    text_add(&t, "  \"num_key_value_heads\": %d,\n", c->num_key_value_heads);
    if (c->is_draft) text_add(&t, "  \"num_target_layers\": %d,\n", c->num_target_layers);
    text_add(&t, "  \"rms_norm_eps\": %s,\n  \"rope_scaling\": %s,\n  \"rope_theta\": %s,\n", c->rms_norm_eps,
             c->rope_scaling ? c->rope_scaling : "null", c->rope_theta);
    if (c->n_sliding) text_add(&t, "  \"sliding_window\": %d,\n", c->sliding_window);
    else text_add(&t, "  \"sliding_window\": null,\n");
    text_add(&t, "  \"tie_word_embeddings\": %s,\n", c->is_draft ? "false" : "true");
    if (!c->is_draft) text_add(&t, "  \"torch_dtype\": \"bfloat16\",\n");
    text_add(&t, "  \"transformers_version\": \"4.57.1\",\n  \"use_cache\": true,\n  \"use_sliding_window\": %s,\n",
             c->n_sliding ? "true" : "false");
    text_add(&t, "  \"vocab_size\": %d\n}\n", c->vocab_size);
    int rc = write_text_file(path, &t);
    free(t.s);
    return rc;
}

static int q3_write_generation_config(const char *path) {
    Text t = {0};
    text_add(&t, "{\n  \"bos_token_id\": %d,\n  \"do_sample\": false,\n  \"eos_token_id\": [%d, %d],\n"
                 "  \"pad_token_id\": %d,\n  \"transformers_version\": \"4.57.1\"\n}\n",
             Q3_EOS2, Q3_EOS, Q3_EOS2, Q3_EOS2);
    int rc = write_text_file(path, &t);
    free(t.s);
    return rc;
}

/* tokenizer.json: a Hugging Face byte-level BPE tokenizer over the 64 ids
 * that encodes the words to their ids, as both Hugging Face's library and
 * tokenizer/tokenizer.c read it: model.vocab maps each token's byte-level
 * string (every byte b shown as GPT-2's bytes_to_unicode(b): "\xc4\xa0" is
 * U+0120 "Ġ", standing for the byte 0x20, a space) to its id; the special
 * tokens are added_tokens, and in model.vocab too (Hugging Face's library
 * numbers an added token model.vocab lacks from model.vocab's size up,
 * whatever id the file gives: 61, 62, 63 here). Ids 61 and 62 are the two
 * bytes of "é" (0xC3, 0xA9) on their own, so decoding must join bytes, not
 * characters. 64 ids leave no room for the 256 bytes and the tokens merges
 * would build a word from, so the words are whole tokens: Llama-3's
 * pre-tokenizer (its Split regex, then ByteLevel) cuts " cat" out of "The cat
 * sat", and ignore_merges (as Llama-3's files set it) makes a piece that is a
 * token that token; merges stay empty. llama.cpp ties ignore_merges to that
 * pre-tokenizer ("llama-bpe"), so dflash gguf converts the file as it is. A
 * piece that is no token falls back to its bytes, and most bytes have no
 * token here: Hugging Face's library then drops them, tokenizer/tokenizer.c
 * refuses the text naming the byte. */
static const char *const Q3_TOKENS[Q3_VOCAB] = {
    "The", "\xc4\xa0" "cat", "\xc4\xa0" "sat", NULL /* 3 <|im_end|> */, NULL /* 4 <|endoftext|> */,
    "\xc4\xa0" "on", "\xc4\xa0" "the", "\xc4\xa0" "mat", ".", "\xc4\xa0" "A", "\xc4\xa0" "dog", "\xc4\xa0" "saw",
    "\xc4\xa0" "one", "\xc4\xa0" "red", "\xc4\xa0" "bird", "\xc4\x8a", "\xc4\xa0" "She", "\xc4\xa0" "reads",
    "\xc4\xa0" "every", "\xc4\xa0" "day", ",", "\xc4\xa0" "We", "\xc4\xa0" "like", "\xc4\xa0" "green",
    "\xc4\xa0" "tea", "!", "\xc4\xa0" "It", "\xc4\xa0" "is", "\xc4\xa0" "very", "\xc4\xa0" "cold", "\xc4\xa0" "My",
    "\xc4\xa0" "fish", "\xc4\xa0" "can", "\xc4\xa0" "swim", "\xc4\xa0" "fast", "\xc4\xa0" "caf\xc3\x83\xc2\xa9",
    "\xc4\xa0" "na\xc3\x83\xc2\xafve", "\xc4\xa0\xc3\xa2\xc4\xa2\xc4\xb6", "\xc4\xa0\xc3\xb0\xc5\x81\xc4\xbb\xc4\xa4",
    "\xc4\x89", "\xc4\xa0", "ing", "ed", "\xc4\xa0" "and", "\xc4\xa0" "or", "\xc4\xa0" "not", "\xc4\xa0" "in",
    "\xc4\xa0" "a", "\xc4\xa0" "box", "\xc4\xa0" "to", "\xc4\xa0" "of", "\xc4\xa0" "he", "\xc4\xa0" "she",
    "\xc4\xa0" "it", "\xc4\xa0" "we", "\xc4\xa0" "they", "\xc4\xa0" "you", "\xc4\xa0" "I", "?", "\xc4\xa0" "yes",
    "\xc4\xa0" "no", "\xc3\x83", "\xc2\xa9", NULL /* 63 <|mask|> */,
};

static int q3_write_tokenizer(const char *path) {
    static const struct { int id; const char *content; } ADDED[3] = {
        {Q3_EOS, "<|im_end|>"}, {Q3_EOS2, "<|endoftext|>"}, {Q3_VOCAB - 1, "<|mask|>"}};
    Text t = {0};
    text_add(&t, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [");
    for (int i = 0; i < 3; i++)
        text_add(&t, "%s\n    {\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, "
                     "\"rstrip\": false, \"normalized\": false, \"special\": true}", i ? "," : "", ADDED[i].id,
                 ADDED[i].content);
    /* Llama-3's Split regex, written as its tokenizer.json writes it (JSON escapes) */
    text_add(&t, "\n  ],\n  \"normalizer\": {\"type\": \"NFC\"},\n  \"pre_tokenizer\": {\"type\": \"Sequence\", "
                 "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|"
                 "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|"
                 "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
                 "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]},\n"
                 "  \"post_processor\": null,\n  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                 "\"trim_offsets\": false, \"use_regex\": true},\n  \"model\": {\n    \"type\": \"BPE\",\n"
                 "    \"dropout\": null,\n    \"unk_token\": null,\n    \"byte_fallback\": false,\n"
                 "    \"ignore_merges\": true,\n    \"vocab\": {");
    for (int i = 0, k = 0; i < Q3_VOCAB; i++)  /* a special token's text is its byte-level string (ASCII) */
        text_add(&t, "%s\n      \"%s\": %d", i ? "," : "", Q3_TOKENS[i] ? Q3_TOKENS[i] : ADDED[k++].content, i);
    text_add(&t, "\n    },\n    \"merges\": []\n  }\n}\n");
    int rc = write_text_file(path, &t);
    free(t.s);
    return rc;
}

/* ===========================================================================
 * 11. The sliding set: sliding-window draft layers
 * ===========================================================================
 * The qwen3-layout pair (its own weight streams, "sliding:<name>") with the
 * draft laid out as the published Qwen3.6 drafters are (SpecForge's
 * configs/qwen3.6-27b-dflash.json): layer_types [sliding x 4, full],
 * use_sliding_window true, max_window_layers = the layer count, here with a
 * window of SL_WINDOW = 6 positions and block size SL_BLOCK = 6: the window
 * cuts the context from the first round on (and, causal, the block). Not a
 * block longer than the window: there the training code's mask and the
 * engines' differ (NOTES.md, "Sliding-window draft layers"). */
#define SL_WINDOW 6
#define SL_BLOCK 6

static void sliding_config(Config *dc) {
    dc->n_sliding = dc->num_hidden_layers - 1;
    dc->sliding_window = SL_WINDOW;
    dc->block_size = SL_BLOCK;
}

/* ===========================================================================
 * 12. The llama set: a LlamaForCausalLM target (Llama 3.1's layout)
 * ===========================================================================
 * Laid out like meta-llama/Llama-3.1-8B-Instruct, small: architectures
 * LlamaForCausalLM, model_type llama, no head_dim key (LlamaConfig's default
 * hidden_size / num_attention_heads = 16), no q_norm / k_norm tensors,
 * untied lm_head.weight, one BF16 file, rope_theta 500000 and rope_scaling
 * llama3 (factor 8, low_freq_factor 1, high_freq_factor 4,
 * original_max_position_embeddings 8192: with d = 16 the wavelengths
 * 2 pi 500000^(i/8) put i = 0..3 in the kept band, i = 4 (4493) in the
 * blended one and i = 5..7 in the divided one), rms_norm_eps 1e-05,
 * pretraining_tp 1, mlp_bias false, eos_token_id a list. Its draft is a
 * DFlashDraftModel (Qwen3 layers, with q/k norms) carrying the target's RoPE
 * (rope_theta and rope_scaling): an assumption, NOTES.md ("A LLaMA-3.1
 * target"). Block size LL_BLOCK = 10 (vLLM's published command for
 * z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat drafts 9 tokens); 5 draft
 * layers fed by build_target_layer_ids(8, 5) = [1, 2, 3, 4, 5]. */
#define LL_TARGET_LAYERS 8
#define LL_BLOCK 10
#define LL_ROPE_SCALING "{\"factor\": 8.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, " \
                        "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}"

static Config llama_config(int is_draft) {
    Config c = q3_config(is_draft);
    c.num_hidden_layers = is_draft ? 5 : LL_TARGET_LAYERS;
    c.num_target_layers = LL_TARGET_LAYERS;
    c.head_dim = 16;
    c.rms_norm_eps = "1e-05";
    c.rope_theta = "500000.0";
    c.rope_scaling = LL_ROPE_SCALING;
    c.block_size = LL_BLOCK;
    for (int i = 0; i < 5; i++) c.target_layer_ids[i] = i + 1;
    return c;
}

static int llama_write_config(const char *path, const Config *c) {
    Text t = {0};
    text_add(&t, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"attention_bias\": false,\n"
                 "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": %d,\n  \"eos_token_id\": [%d, %d],\n"
                 "  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n  \"initializer_range\": 0.02,\n"
                 "  \"intermediate_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"mlp_bias\": false,\n"
                 "  \"model_type\": \"llama\",\n  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n"
                 "  \"num_key_value_heads\": %d,\n  \"pretraining_tp\": 1,\n  \"rms_norm_eps\": %s,\n"
                 "  \"rope_scaling\": %s,\n  \"rope_theta\": %s,\n  \"tie_word_embeddings\": false,\n"
                 "  \"torch_dtype\": \"bfloat16\",\n  \"transformers_version\": \"4.57.1\",\n  \"use_cache\": true,\n"
                 "  \"vocab_size\": %d\n}\n",
             Q3_EOS2, Q3_EOS, Q3_EOS2, c->hidden_size, c->intermediate_size, c->max_position_embeddings,
             c->num_attention_heads, c->num_hidden_layers, c->num_key_value_heads, c->rms_norm_eps, c->rope_scaling,
             c->rope_theta, c->vocab_size);
    int rc = write_text_file(path, &t);
    free(t.s);
    return rc;
}

static int llama_main(const char *outdir, int f32) {
    Config tc = llama_config(0), dc = llama_config(1);
    target_tensors.set = draft_tensors.set = "llama";
    int V = tc.vocab_size, D = tc.hidden_size;
    LayerScales s = {RND_IN, RND_OUT, RND_NORM_NOISE, RND_QK, 1};
    add_tensor(&target_tensors, "model.embed_tokens.weight", V, D, 0.0, RND_EMBED * sqrt_newton(3.0)); /* (V, D) */
    for (int l = 0; l < tc.num_hidden_layers; l++) add_layer(&target_tensors, &tc, "model.", l, s);
    add_tensor(&target_tensors, "model.norm.weight", D, 0, 1.0, RND_NORM_NOISE);                  /* (D) */
    add_tensor(&target_tensors, "lm_head.weight", V, D, 0.0, uniform_bound(RND_LM, D));           /* (V, D) */
    build_random_draft(&draft_tensors, &dc);
    char tdir[4096], ddir[4096], path[4200];
    if (join(tdir, sizeof tdir, outdir, "target") || join(ddir, sizeof ddir, outdir, "draft")) return 1;
    if (mkdir_p(tdir) || mkdir_p(ddir)) return 1;
    if (join(path, sizeof path, tdir, "config.json") || llama_write_config(path, &tc)) return 1;
    if (join(path, sizeof path, tdir, "model.safetensors") ||
        write_safetensors_part(path, &target_tensors, &tc, 0, target_tensors.n, !f32, f32, NULL))
        return 1;
    if (join(path, sizeof path, ddir, "config.json") || q3_write_config(path, &dc)) return 1;
    if (join(path, sizeof path, ddir, "model.safetensors") ||
        write_safetensors_part(path, &draft_tensors, &dc, 0, draft_tensors.n, !f32, f32, NULL))
        return 1;
    return 0;
}

static int q3_main(const char *outdir, int f32, const char *set) {
    Config tc = q3_config(0), dc = q3_config(1);
    if (strcmp(set, "sliding") == 0) sliding_config(&dc);
    target_tensors.set = draft_tensors.set = set;
    q3_build_target(&target_tensors, &tc);
    build_random_draft(&draft_tensors, &dc);
    char tdir[4096], ddir[4096], path[4200];
    if (join(tdir, sizeof tdir, outdir, "target") || join(ddir, sizeof ddir, outdir, "draft")) return 1;
    if (mkdir_p(tdir) || mkdir_p(ddir)) return 1;
    if (join(path, sizeof path, tdir, "config.json") || q3_write_config(path, &tc)) return 1;
    if (join(path, sizeof path, tdir, "generation_config.json") || q3_write_generation_config(path)) return 1;
    if (join(path, sizeof path, tdir, "tokenizer.json") || q3_write_tokenizer(path)) return 1;
    /* two shards: embed_tokens + layers 0..4 (1 + 5 x 11 tensors), the rest */
    static const char *const SHARD[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    int split = 1 + Q3_SHARD1_LAYERS * 11;
    size_t bytes[2];
    if (join(path, sizeof path, tdir, SHARD[0]) ||
        write_safetensors_part(path, &target_tensors, &tc, 0, split, !f32, f32, &bytes[0]))
        return 1;
    if (join(path, sizeof path, tdir, SHARD[1]) ||
        write_safetensors_part(path, &target_tensors, &tc, split, target_tensors.n - split, !f32, f32, &bytes[1]))
        return 1;
    Text ix = {0};
    text_add(&ix, "{\n  \"metadata\": {\n    \"total_size\": %zu\n  },\n  \"weight_map\": {\n", bytes[0] + bytes[1]);
    for (int i = 0; i < target_tensors.n; i++)
        text_add(&ix, "    \"%s\": \"%s\"%s\n", target_tensors.t[i].name, SHARD[i >= split],
                 i + 1 < target_tensors.n ? "," : "");
    text_add(&ix, "  }\n}\n");
    int rc = join(path, sizeof path, tdir, "model.safetensors.index.json") || write_text_file(path, &ix);
    free(ix.s);
    if (rc) return 1;
    if (join(path, sizeof path, ddir, "config.json") || q3_write_config(path, &dc)) return 1;
    if (join(path, sizeof path, ddir, "model.safetensors") ||
        write_safetensors_part(path, &draft_tensors, &dc, 0, draft_tensors.n, !f32, f32, NULL))
        return 1;
    return 0;
}

/* ===========================================================================
 * 13. The lm-tiny set: a tiny Qwen3ForCausalLM target, nothing else
 * ===========================================================================
 * D 16, I 24, 2 layers, 2 query heads over 1 KV head (GQA), d 8, V 16,
 * untied lm_head, F32, rope_theta 10000: small enough that lm_oracle.py's
 * trace of two training steps on it is a few KB, committed under
 * train/tests/lm_oracle/ (NOTES.md, "Training a target: parity"). Weights as the
 * random set's (section 6), from their own streams ("lm-tiny:<name>"). */
static int lm_tiny_main(const char *outdir) {
    Config tc = make_config(0, 1);
    tc.hidden_size = 16, tc.intermediate_size = 24, tc.num_hidden_layers = 2;
    tc.num_attention_heads = 2, tc.head_dim = 8, tc.vocab_size = 16, tc.max_position_embeddings = 64;
    tc.rope_theta = "10000.0";
    target_tensors.set = "lm-tiny";
    int V = tc.vocab_size, D = tc.hidden_size;
    LayerScales s = {RND_IN, RND_OUT, RND_NORM_NOISE, RND_QK, 0};
    add_tensor(&target_tensors, "model.embed_tokens.weight", V, D, 0.0, RND_EMBED * sqrt_newton(3.0)); /* (V, D) */
    for (int l = 0; l < tc.num_hidden_layers; l++) add_layer(&target_tensors, &tc, "model.", l, s);
    add_tensor(&target_tensors, "model.norm.weight", D, 0, 1.0, RND_NORM_NOISE);                  /* (D) */
    add_tensor(&target_tensors, "lm_head.weight", V, D, 0.0, uniform_bound(RND_IN, D));           /* (V, D) */
    char tdir[4096], path[4200];
    if (join(tdir, sizeof tdir, outdir, "target") || mkdir_p(tdir)) return 1;
    Text t = {0};
    text_add(&t, "{\n  \"architectures\": [\"Qwen3ForCausalLM\"],\n  \"model_type\": \"qwen3\",\n"
                 "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                 "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
                 "  \"vocab_size\": %d,\n  \"rms_norm_eps\": %s,\n  \"rope_theta\": %s,\n"
                 "  \"max_position_embeddings\": %d,\n  \"hidden_act\": \"silu\",\n  \"attention_bias\": false,\n"
                 "  \"tie_word_embeddings\": false,\n  \"eos_token_id\": 0,\n  \"torch_dtype\": \"float32\"\n}\n",
             tc.hidden_size, tc.intermediate_size, tc.num_hidden_layers, tc.num_attention_heads,
             tc.num_key_value_heads, tc.head_dim, tc.vocab_size, tc.rms_norm_eps, tc.rope_theta,
             tc.max_position_embeddings);
    int rc = join(path, sizeof path, tdir, "config.json") || write_text_file(path, &t);
    free(t.s);
    if (rc) return 1;
    if (join(path, sizeof path, tdir, "model.safetensors") ||
        write_safetensors_part(path, &target_tensors, &tc, 0, target_tensors.n, 0, 0, NULL))
        return 1;
    return 0;
}

/* ===========================================================================
 * 14. The hybrid set: a Qwen3.5 target in miniature and an often-wrong draft
 * ===========================================================================
 * Target: Qwen3_5ForCausalLM (model_type qwen3_5_text), the walkthrough's
 * size (12 layers, D 512, 8 heads of d 64) with Qwen3.5's layout: layer_types
 * three linear_attention (Gated DeltaNet) to one full_attention (layers 3, 7,
 * 11 full; full_attention_interval 4), the full layers gated (q_proj gives the
 * query and an output gate per head, 2 H d rows) with 2 KV heads,
 * partial_rotary_factor 0.25 (RoPE on the first 16 of 64 dims), every RMSNorm
 * but the gated one zero-centred (weights around 0, applied as 1 + w). The
 * linear layers as a Qwen3.5 in miniature (Qwen3.5 has 16 key heads and 32
 * value heads of 128 dims, kernel 4): HY_HK = 4 key heads and HY_HV = 8
 * value heads (Hv = 2 Hk: value heads 2j and 2j+1 share key head j), dk = dv
 * = 64, conv kernel 4, so C = 2*4*64 + 8*64 = 1024 conv channels and a state
 * of 8 x 64 x 64 per layer. intermediate_size HY_I = 512 (the walkthrough's
 * is 1536) keeps the set modest (~90 MB target). The target is planted as
 * the walkthrough's (section 7): embed = sqrt(D) e_t, lm_head maps t to
 * NEXT[t], the layers' updates small (WT_OUT) and pseudo-random, so its
 * greedy story is the walkthrough's, token for token; the final norm weight
 * is exactly 0 (scale 1, zero-centred). Every Gated DeltaNet layer still
 * does its full work (conv, decay, delta rule, state), so the round log and
 * the rollback have real states to show; the bigram output does not depend
 * on them (a learned hybrid target does not exist here: train-target has no
 * Gated DeltaNet backward).
 *
 * Draft: the walkthrough's planted draft (2 layers, block 4), reading target
 * layers 2, 7 and 10 (two linear, one full), with its look-ahead heads
 * planted wrong for most anchors (hybrid_look below), so most rounds reject
 * and every acceptance 0..3 occurs: on "The cat sat" the four rounds accept
 * 2, 0, 1 and 3 draft tokens. */
#define HY_LAYERS 12
#define HY_INTERVAL 4      /* layer i is full attention iff (i + 1) % 4 == 0 */
#define HY_KV 2            /* KV heads of the full layers (Qwen3.5: 2)      */
#define HY_I 512           /* intermediate_size                             */
#define HY_HK 4            /* linear_num_key_heads                          */
#define HY_HV 8            /* linear_num_value_heads                        */
#define HY_DK 64           /* linear_key_head_dim                           */
#define HY_DV 64           /* linear_value_head_dim                         */
#define HY_K 4             /* linear_conv_kernel_dim                        */
#define HY_C (2 * HY_HK * HY_DK + HY_HV * HY_DV) /* conv channels (1024)    */

/* HY_MISS[anchor]: which look-ahead head (1..3) writes a wrong word for
 * this anchor, 0 none. The cat story's anchors are chosen so that "The cat
 * sat" accepts 2 ("on": the third proposal wrong), 0 ("in"), 1 ("a") and 3
 * (".": all right); every other anchor t misses at head t % 4. */
static int hybrid_miss(int tok) {
    switch (tok) {
    case TOK_on: return 3;
    case TOK_in: return 1;
    case TOK_a: return 2;
    case TOK_DOT: return 0;
    default: return tok % 4;
    }
}

/* look_m for the hybrid draft: the right word (as section 7's look, without
 * its one planted mistake), or for head hybrid_miss(t) a wrong one: "fish",
 * which lm_head turns into the proposal "can" (or "cat" -> "sat" where "can"
 * would be right) */
static int hybrid_look(int m, int tok) {
    int right = m == 1 ? tok : m == 2 ? NEXT[tok] : NEXT[NEXT[tok]];  /* tok is a word: never -1 */
    if (m != hybrid_miss(tok)) return right;
    return NEXT[right] == TOK_can ? TOK_cat : TOK_fish;
}

static int hybrid_is_linear(int l) { return (l + 1) % HY_INTERVAL != 0; }

/* one Qwen3.5 decoder layer, named model.layers.N., in the forward's order */
static void add_hybrid_layer(TensorList *tl, const Config *c, int l) {
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim;
    int Hq = c->num_attention_heads * d, Hk = c->num_key_value_heads * d, Vd = HY_HV * HY_DV;
    char name[96];
#define HY_T(suffix, rows, cols, base, noise)                                  \
    (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), add_tensor(tl, name, rows, cols, base, noise))
    HY_T("input_layernorm.weight", D, 0, 0.0, WT_NORM_NOISE);                          /* (D), zero-centred */
    if (hybrid_is_linear(l)) {
        HY_T("linear_attn.in_proj_qkv.weight", HY_C, D, 0.0, uniform_bound(WT_IN, D));  /* (C, D) */
        HY_T("linear_attn.in_proj_z.weight", Vd, D, 0.0, uniform_bound(WT_IN, D));      /* (Hv*dv, D) */
        HY_T("linear_attn.in_proj_b.weight", HY_HV, D, 0.0, uniform_bound(WT_IN, D));   /* (Hv, D) */
        HY_T("linear_attn.in_proj_a.weight", HY_HV, D, 0.0, uniform_bound(0.5, D));     /* (Hv, D) */
        HY_T("linear_attn.conv1d.weight", HY_C, HY_K, 0.0, sqrt_newton(3.0 / HY_K))->mid1 = 1; /* (C, 1, K) */
        HY_T("linear_attn.A_log", HY_HV, 0, -1.5, 1.0);     /* A = exp(A_log) in (0.08, 0.61) */
        HY_T("linear_attn.dt_bias", HY_HV, 0, -1.0, 1.0);
        HY_T("linear_attn.norm.weight", HY_DV, 0, 1.0, WT_NORM_NOISE);                  /* (dv), NOT zero-centred */
        HY_T("linear_attn.out_proj.weight", D, Vd, 0.0, uniform_bound(WT_OUT, Vd));     /* (D, Hv*dv) */
    } else {
        HY_T("self_attn.q_proj.weight", 2 * Hq, D, 0.0, uniform_bound(WT_IN, D));       /* (2*H*d, D): query | gate */
        HY_T("self_attn.k_proj.weight", Hk, D, 0.0, uniform_bound(WT_IN, D));           /* (Hkv*d, D) */
        HY_T("self_attn.v_proj.weight", Hk, D, 0.0, uniform_bound(WT_IN, D));           /* (Hkv*d, D) */
        HY_T("self_attn.o_proj.weight", D, Hq, 0.0, uniform_bound(WT_OUT, Hq));         /* (D, H*d) */
        HY_T("self_attn.q_norm.weight", d, 0, 0.0, WT_NORM_NOISE);                      /* (d), zero-centred */
        HY_T("self_attn.k_norm.weight", d, 0, 0.0, WT_NORM_NOISE);
    }
    HY_T("post_attention_layernorm.weight", D, 0, 0.0, WT_NORM_NOISE);                 /* (D), zero-centred */
    HY_T("mlp.gate_proj.weight", I, D, 0.0, uniform_bound(WT_IN, D));                  /* (I, D) */
    HY_T("mlp.up_proj.weight", I, D, 0.0, uniform_bound(WT_IN, D));                    /* (I, D) */
    HY_T("mlp.down_proj.weight", D, I, 0.0, uniform_bound(WT_OUT, I));                 /* (D, I) */
#undef HY_T
}

/* config.json of the target: a Qwen3.5 text config as transformers writes
 * it (sorted keys; mrope_section splits the 8 rotary pairs 3/3/2 as Qwen3.5
 * splits its 32 as 11/11/10; for text all three grids are equal) */
static int hybrid_write_config(const char *path, const Config *c) {
    Text t = {0};
    text_add(&t, "{\n  \"architectures\": [\"Qwen3_5ForCausalLM\"],\n  \"attention_bias\": false,\n"
                 "  \"attention_dropout\": 0.0,\n  \"attn_output_gate\": true,\n  \"eos_token_id\": %d,\n"
                 "  \"full_attention_interval\": %d,\n  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n"
                 "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"layer_types\": [",
             TOK_EOS, HY_INTERVAL, c->head_dim, c->hidden_size, c->intermediate_size);
    for (int l = 0; l < c->num_hidden_layers; l++)
        text_add(&t, "%s\"%s\"", l ? ", " : "", hybrid_is_linear(l) ? "linear_attention" : "full_attention");
    text_add(&t, "],\n  \"linear_conv_kernel_dim\": %d,\n  \"linear_key_head_dim\": %d,\n"
                 "  \"linear_num_key_heads\": %d,\n  \"linear_num_value_heads\": %d,\n"
                 "  \"linear_value_head_dim\": %d,\n  \"max_position_embeddings\": %d,\n"
                 "  \"model_type\": \"qwen3_5_text\",\n  \"num_attention_heads\": %d,\n"
                 "  \"num_hidden_layers\": %d,\n  \"num_key_value_heads\": %d,\n  \"rms_norm_eps\": %s,\n"
                 "  \"rope_parameters\": {\"mrope_interleaved\": true, \"mrope_section\": [3, 3, 2], "
                 "\"partial_rotary_factor\": 0.25, \"rope_theta\": 10000000.0, \"rope_type\": \"default\"},\n"
                 "  \"tie_word_embeddings\": false,\n  \"torch_dtype\": \"float32\",\n  \"vocab_size\": %d\n}\n",
             HY_K, HY_DK, HY_HK, HY_HV, HY_DV, c->max_position_embeddings, c->num_attention_heads,
             c->num_hidden_layers, c->num_key_value_heads, c->rms_norm_eps, c->vocab_size);
    int rc = write_text_file(path, &t);
    free(t.s);
    return rc;
}

static int hybrid_main(const char *outdir) {
    Config tc = make_config(0, HY_KV), dc = make_config(1, 8);
    tc.intermediate_size = HY_I;
    dc.hybrid = 1;
    dc.target_layer_ids[0] = 2, dc.target_layer_ids[1] = 7, dc.target_layer_ids[2] = 10;
    target_tensors.set = draft_tensors.set = "hybrid";
    int V = tc.vocab_size, D = tc.hidden_size;
    add_tensor(&target_tensors, "model.embed_tokens.weight", V, D, 0.0, 0.0)->plant = plant_embed; /* (V, D) */
    for (int l = 0; l < tc.num_hidden_layers; l++) add_hybrid_layer(&target_tensors, &tc, l);
    add_tensor(&target_tensors, "model.norm.weight", D, 0, 0.0, 0.0);  /* zero-centred: exactly scale 1 */
    add_tensor(&target_tensors, "lm_head.weight", V, D, 0.0, 0.0)->plant = plant_lm_head;
    build_walkthrough_draft(&draft_tensors, &dc);
    return write_pair(outdir, &tc, &dc, hybrid_write_config);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "lm-tiny") == 0) return lm_tiny_main(argv[2]);
    if (argc == 3 && strcmp(argv[1], "hybrid") == 0) return hybrid_main(argv[2]);
    int layout = argc >= 3 && (strcmp(argv[1], "qwen3-layout") == 0 || strcmp(argv[1], "sliding") == 0 ||
                               strcmp(argv[1], "llama") == 0);
    if (layout && (argc == 3 || (argc == 4 && strcmp(argv[3], "f32") == 0)))
        return strcmp(argv[1], "llama") == 0 ? llama_main(argv[2], argc == 4) : q3_main(argv[2], argc == 4, argv[1]);
    if (argc != 3 || (strcmp(argv[1], "random") != 0 && strcmp(argv[1], "walkthrough") != 0)) {
        fprintf(stderr, "usage: %s random|walkthrough|lm-tiny|hybrid OUTDIR\n       %s qwen3-layout|sliding|llama OUTDIR [f32]\n",
                argv[0], argv[0]);
        return 1;
    }
    const char *set = argv[1], *outdir = argv[2];
    int walkthrough = strcmp(set, "walkthrough") == 0;

    /* random: GQA with 4 KV heads; walkthrough: 8 KV heads, one per head */
    Config tc = make_config(0, walkthrough ? 8 : 4);
    Config dc = make_config(1, walkthrough ? 8 : 4);
    target_tensors.set = draft_tensors.set = set;
    if (walkthrough) {
        build_walkthrough_target(&target_tensors, &tc);
        build_walkthrough_draft(&draft_tensors, &dc);
    } else {
        build_random_target(&target_tensors, &tc);
        build_random_draft(&draft_tensors, &dc);
    }
    return write_pair(outdir, &tc, &dc, write_config);
}
