/* dflash.c - DFlash speculative decoding on a toy Qwen3 model, in plain C11.
 *
 * DFlash ("block diffusion" drafting): a small draft model proposes B-1
 * tokens at once for the positions after a known "anchor" token. It sees the
 * block [anchor, mask, mask, ...] and, through KV injection, the target
 * model's hidden states of every earlier position. The target then verifies
 * the whole block in ONE forward pass and keeps the longest agreeing prefix
 * plus one token of its own. Greedy output equals target-only greedy output.
 *
 * This file is the naive float implementation of the whole algorithm, laid
 * out in the order of the walkthrough (../shared/seed, walkthrough/README.md):
 *
 *   1. errors and small helpers
 *   2. kernels: matmul, rmsnorm, RoPE, softmax, silu, attention
 *   3. the target forward (Qwen3ForCausalLM, output_hidden_states)
 *   4. extract_context_feature (Step 1 of the walkthrough)
 *   5. the draft forward with KV injection (Steps 2-5)
 *   6. sampling
 *   7. dflash_generate (Steps 6-7) and target-only ar_generate
 *   8. loading: JSON, safetensors, config.json, vocab.txt, tokenizer
 *   9. the command line (and `dflash bench`)
 *
 * Names follow the reference code (z-lab/dflash, dflash/model.py, and
 * transformers' modeling_qwen3.py); NOTES.md maps each Python function to the
 * C function that implements it. The dimension legend is in dflash.h:
 *   V vocab, D hidden, L layers, H heads, Hkv KV heads, d head_dim, I MLP,
 *   T tokens in a call, B block, n prompt, Lc context rows, S keys.
 * Every tensor is row-major; a comment "(T, D)" means T rows of D values.
 */
#include "dflash.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fcntl.h>      /* POSIX: open, and mmap for the weight files */
#include <sys/mman.h>
#include <sys/resource.h>  /* getrusage: peak memory in dflash bench */
#include <sys/stat.h>
#include <unistd.h>

/* ===========================================================================
 * 1. Errors and small helpers
 * ======================================================================== */

char dflash_errmsg[1024];

void dflash_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dflash_errmsg, sizeof dflash_errmsg, fmt, ap);
    va_end(ap);
}

/* "<who>: <dflash_errmsg><after>" on stderr, on ONE line whatever the
 * message quotes (a tensor name or a word from a file may hold control
 * characters: they print as '?'). Used by main and by `dflash diff`. */
void dflash_print_error(const char *who, const char *after) {
    char line[sizeof dflash_errmsg];
    size_t n = 0;
    for (const char *c = dflash_errmsg; *c && n + 1 < sizeof line; c++)
        line[n++] = (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c;
    line[n] = 0;
    fprintf(stderr, "%s: %s%s\n", who, line, after);
}

/* calloc that reports what it was for; NULL (with dflash_errmsg) on failure */
static void *xcalloc(size_t n, size_t size, const char *what) {
    if (n == 0) n = 1;
    void *p = calloc(n, size);
    if (!p) dflash_set_error("out of memory allocating %zu x %zu bytes for %s", n, size, what);
    return p;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ===========================================================================
 * 2. Kernels
 * ======================================================================== */

/* matmul: out (T, n_out) = x (T, n_in) @ W^T, W (n_out, n_in) as stored by
 * nn.Linear (y = x W^T). xt is scratch of (n_in, LANES).
 *
 * Why the odd loop order: tokens are taken LANES at a time and held side by
 * side ("token-minor": xt[i][lane] = x[token][i]), so each weight row is read
 * ONCE per group of tokens, with one accumulator per token. A B-token forward
 * then costs about what a 1-token forward costs (the weights dominate), which
 * is what makes verifying a whole block cheap. Every token's sum is still the
 * plain sequential sum over i, so a token's result is bit-identical whether it
 * is computed alone or inside a block (that is what keeps greedy DFlash
 * exactly lossless here). Unused lanes hold zeros and are never written out. */
#define LANES 8
static void matmul(real *out, const real *x, const real *w, int T, int n_in, int n_out,
                   real *xt) {
    for (int t0 = 0; t0 < T; t0 += LANES) {
        int nt = T - t0 < LANES ? T - t0 : LANES;  /* tokens in this group */
        for (int i = 0; i < n_in; i++)
            for (int l = 0; l < LANES; l++)
                xt[(size_t)i * LANES + l] = l < nt ? x[(size_t)(t0 + l) * n_in + i] : 0;
        for (int o = 0; o < n_out; o++) {
            const real *w_o = w + (size_t)o * n_in;  /* row o of W, (n_in) */
            real acc[LANES] = {0};
            for (int i = 0; i < n_in; i++) {
                const real *xt_i = xt + (size_t)i * LANES;
                for (int l = 0; l < LANES; l++) acc[l] += w_o[i] * xt_i[l];
            }
            for (int l = 0; l < nt; l++) out[(size_t)(t0 + l) * n_out + o] = acc[l];
        }
    }
}

/* rmsnorm: out (n) = w * (x / sqrt(mean(x^2) + eps))   (Qwen3RMSNorm)
 * Computed as the reference does: x * rsqrt(var + eps), then weight * that. */
static void rmsnorm(real *out, const real *x, const real *w, int n, real eps) {
    real ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    real var = ss / (real)n;
    real inv = (real)1 / (real)sqrt((double)(var + eps));
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * inv);
}

/* rmsnorm_rows: each of `rows` consecutive vectors of n values, in place safe */
static void rmsnorm_rows(real *out, const real *x, const real *w, int rows, int n, real eps) {
    for (int r = 0; r < rows; r++) rmsnorm(out + (size_t)r * n, x + (size_t)r * n, w, n, eps);
}

/* rope_inv_freq: inv_freq (d/2)[i] = 1 / theta^(2i/d)   (Qwen3RotaryEmbedding) */
static void rope_inv_freq(real *inv_freq, int head_dim, double theta) {
    for (int i = 0; i < head_dim / 2; i++) {
        real expo = (real)(2 * i) / (real)head_dim;
        real p = (real)pow(theta, (double)expo);
        inv_freq[i] = (real)1 / p;
    }
}

/* rope_cos_sin: for P positions, angles (P, d/2) = pos * inv_freq and
 * cos, sin (P, d) = cos/sin of cat(angles, angles)   (emb = cat(freqs, freqs)) */
static void rope_cos_sin(real *angles, real *cos_, real *sin_, const int *pos, int P,
                         const real *inv_freq, int head_dim) {
    int half = head_dim / 2;
    for (int p = 0; p < P; p++) {
        for (int i = 0; i < half; i++) {
            real a = (real)pos[p] * inv_freq[i];
            angles[(size_t)p * half + i] = a;
            real c = (real)cos((double)a), s = (real)sin((double)a);
            cos_[(size_t)p * head_dim + i] = c;
            cos_[(size_t)p * head_dim + i + half] = c;
            sin_[(size_t)p * head_dim + i] = s;
            sin_[(size_t)p * head_dim + i + half] = s;
        }
    }
}

/* apply_rotary_pos_emb for one vector x (d) at one position (cos, sin rows of d):
 *   out = x * cos + rotate_half(x) * sin,  rotate_half(x) = [-x[d/2:], x[:d/2]]
 * Hugging Face half-split pairing: dims i and i + d/2 rotate together. */
static void rope_apply(real *out, const real *x, const real *cos_, const real *sin_, int head_dim) {
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        real x1 = x[i], x2 = x[i + half];
        out[i] = x1 * cos_[i] + (-x2) * sin_[i];
        out[i + half] = x2 * cos_[i + half] + x1 * sin_[i + half];
    }
}

/* exp in the working precision: expf for float (accurate to an ulp, like
 * torch's float exp, and about twice as fast as exp), exp for double */
static real exp_real(real x) {
#ifdef DFLASH_DOUBLE
    return exp(x);
#else
    return expf(x);
#endif
}

/* apply_rotary_pos_emb (dflash/model.py): RoPE for q_len queries and k_len
 * keys from cos, sin (k_len, d), the tables of positions [p0, p0 + k_len).
 *   q (q_len, H*d) -> q_rope, rotated by the LAST q_len rows: cos[-q_len:]
 *   k (k_len, Hkv*d) -> k_rope, rotated by all k_len rows
 * In the target q_len == k_len (the same positions). In the draft the keys
 * are the Lc context rows plus the B block rows and the queries are the
 * block only, so the queries land on the block's positions start..start+B-1
 * (walkthrough Step 4.3). */
static void apply_rotary_pos_emb(real *q_rope, real *k_rope, const real *q, const real *k,
                                 const real *cos_, const real *sin_, int q_len, int k_len,
                                 int n_heads, int n_kv_heads, int head_dim) {
    int q_row0 = k_len - q_len;   /* the first of the last q_len rows */
    for (int t = 0; t < q_len; t++)
        for (int h = 0; h < n_heads; h++)
            rope_apply(q_rope + ((size_t)t * n_heads + h) * head_dim, q + ((size_t)t * n_heads + h) * head_dim,
                       cos_ + (size_t)(q_row0 + t) * head_dim, sin_ + (size_t)(q_row0 + t) * head_dim, head_dim);
    for (int p = 0; p < k_len; p++)
        for (int h = 0; h < n_kv_heads; h++)
            rope_apply(k_rope + ((size_t)p * n_kv_heads + h) * head_dim, k + ((size_t)p * n_kv_heads + h) * head_dim,
                       cos_ + (size_t)p * head_dim, sin_ + (size_t)p * head_dim, head_dim);
}

/* softmax in place over n values: exp(x - max) / sum */
static void softmax(real *x, int n) {
    real mx = x[0];
    for (int i = 1; i < n; i++) if (x[i] > mx) mx = x[i];
    real sum = 0;
    for (int i = 0; i < n; i++) { x[i] = exp_real(x[i] - mx); sum += x[i]; }
    for (int i = 0; i < n; i++) x[i] = x[i] / sum;
}

/* silu(x) = x * sigmoid(x) = x / (1 + exp(-x)) */
static real silu(real x) { return x / ((real)1 + exp_real(-x)); }

/* argmax over n values; the FIRST index wins on ties (torch.argmax) */
static int argmax(const real *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

/* dot(a, b, n): sum of a[i] * b[i], as 8 interleaved partial sums (i mod 8)
 * added pairwise at the end. One running sum would make every add wait for
 * the one before; eight independent ones keep the CPU busy (the compiler puts
 * them in SIMD lanes). The order is fixed, so a query's score is the same
 * bits whatever else is in the batch. */
static real dot(const real *a, const real *b, int n) {
    real part[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) part[l] += a[i + l] * b[i + l];
    real sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    for (; i < n; i++) sum += a[i] * b[i];
    return sum;
}

/* attention (eager_attention_forward) for T queries over S cached keys.
 *   q    (T, H*d)        queries after q_norm and RoPE
 *   key, value           one layer of a KVCache: (Hkv, cap, d)
 *   scores (H, T, S)     out: q . k * d^-0.5, before the softmax (-inf where masked)
 *   att  (H, T, S)       out: softmax(scores) over the allowed keys
 *   out  (T, H*d)        out: att @ v, heads side by side (before o_proj)
 * causal: query t sees keys 0..q_pos0+t (the target); otherwise all S keys
 * (the draft: non-causal). Masked weights are exactly 0, as exp(finfo.min -
 * max) is 0 in the reference. Query head h reads KV head h / (H / Hkv). */
static void attention(real *out, real *scores, real *att, const real *q, const real *key, const real *value,
                      int T, int S, int cap, int n_heads, int n_kv_heads, int head_dim,
                      int causal, int q_pos0) {
    real scale = (real)(1.0 / sqrt((double)head_dim));  /* head_dim ** -0.5 */
    int group = n_heads / n_kv_heads;
    for (int h = 0; h < n_heads; h++) {
        int kvh = h / group;
        const real *k_h = key + (size_t)kvh * cap * head_dim;    /* (S, d) */
        const real *v_h = value + (size_t)kvh * cap * head_dim;  /* (S, d) */
        for (int t = 0; t < T; t++) {
            const real *q_t = q + (size_t)t * n_heads * head_dim + (size_t)h * head_dim;
            real *sc = scores + ((size_t)h * T + t) * S;         /* (S) */
            real *a = att + ((size_t)h * T + t) * S;             /* (S) */
            int n_keys = causal ? q_pos0 + t + 1 : S;
            for (int s = 0; s < n_keys; s++) sc[s] = dot(q_t, k_h + (size_t)s * head_dim, head_dim) * scale;
            for (int s = n_keys; s < S; s++) sc[s] = -INFINITY;
            memcpy(a, sc, sizeof(real) * (size_t)n_keys);
            softmax(a, n_keys);
            for (int s = n_keys; s < S; s++) a[s] = 0;
            real *o_t = out + (size_t)t * n_heads * head_dim + (size_t)h * head_dim;
            for (int i = 0; i < head_dim; i++) o_t[i] = 0;
            for (int s = 0; s < n_keys; s++)
                for (int i = 0; i < head_dim; i++) o_t[i] += a[s] * v_h[(size_t)s * head_dim + i];
        }
    }
}

/* ---------------------------------------------------------------------------
 * KV cache (DynamicCache): per layer, per KV head, positions 0..len-1.
 */
static real *cache_key(const KVCache *c, int layer, int kvh) {
    return c->key + ((size_t)layer * c->n_kv_heads + kvh) * c->capacity * c->head_dim;
}
static real *cache_value(const KVCache *c, int layer, int kvh) {
    return c->value + ((size_t)layer * c->n_kv_heads + kvh) * c->capacity * c->head_dim;
}

static int cache_init(KVCache *c, const Config *cfg, int capacity) {
    memset(c, 0, sizeof *c);
    c->n_layers = cfg->num_hidden_layers;
    c->n_kv_heads = cfg->num_key_value_heads;
    c->head_dim = cfg->head_dim;
    c->capacity = capacity;
    size_t n = (size_t)c->n_layers * c->n_kv_heads * capacity * c->head_dim;
    c->key = xcalloc(n, sizeof(real), "KV cache keys");
    c->value = xcalloc(n, sizeof(real), "KV cache values");
    return c->key && c->value ? 0 : -1;
}

static void cache_free(KVCache *c) {
    free(c->key);
    free(c->value);
    memset(c, 0, sizeof *c);
}

/* crop(n): keep the first n positions (DynamicCache.crop). */
static void cache_crop(KVCache *c, int n) {
    if (n < c->len) c->len = n;
}

/* cache_append: write `rows` new keys/values of one layer at positions
 * len..len+rows-1. k_new, v_new are (rows, Hkv*d), tokens major. The caller
 * advances len once all layers are written. */
static void cache_append(KVCache *c, int layer, const real *k_new, const real *v_new, int rows) {
    int kvdim = c->n_kv_heads * c->head_dim;
    for (int kvh = 0; kvh < c->n_kv_heads; kvh++) {
        real *kc = cache_key(c, layer, kvh), *vc = cache_value(c, layer, kvh);
        for (int r = 0; r < rows; r++) {
            memcpy(kc + (size_t)(c->len + r) * c->head_dim, k_new + (size_t)r * kvdim + kvh * c->head_dim,
                   sizeof(real) * c->head_dim);
            memcpy(vc + (size_t)(c->len + r) * c->head_dim, v_new + (size_t)r * kvdim + kvh * c->head_dim,
                   sizeof(real) * c->head_dim);
        }
    }
}

/* ---------------------------------------------------------------------------
 * Tracing glue. When tc->tracer is NULL (no --trace), every helper returns at
 * once: nothing is formatted, copied or allocated.
 */
typedef struct {
    Tracer *tracer;
    TracePhase ph;
    char prefix[32];   /* "prefill", "draft1", "verify1", "" */
    int failed;        /* a trace write failed: the run stops */
} TraceCtx;

static void trace_begin(TraceCtx *tc, const char *phase, int round) {
    tc->ph.phase = phase;
    tc->ph.round = round;
    if (strcmp(phase, "prefill") == 0) snprintf(tc->prefix, sizeof tc->prefix, "prefill");
    else if (strcmp(phase, "final") == 0) tc->prefix[0] = 0;
    else snprintf(tc->prefix, sizeof tc->prefix, "%s%d", phase, round);
}

static void trace_name(char *buf, size_t size, const TraceCtx *tc, const char *fmt, va_list ap) {
    int off = 0;
    if (tc->prefix[0]) off = snprintf(buf, size, "%s.", tc->prefix);
    vsnprintf(buf + off, size - (size_t)off, fmt, ap);
}

/* tr_real(tc, data, meaning, ndim, shape..., name_fmt, ...) */
static void tr_real(TraceCtx *tc, const real *data, const char *meaning, int ndim,
                    const int64_t *shape, const char *fmt, ...) {
    if (!tc || !tc->tracer || tc->failed) return;
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    trace_name(name, sizeof name, tc, fmt, ap);
    va_end(ap);
    if (trace_real(tc->tracer, tc->ph, name, meaning, data, ndim, shape) != 0) tc->failed = 1;
}

static void tr_ids(TraceCtx *tc, const int *ids, const char *meaning, int ndim,
                   const int64_t *shape, const char *fmt, ...) {
    if (!tc || !tc->tracer || tc->failed) return;
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    trace_name(name, sizeof name, tc, fmt, ap);
    va_end(ap);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    int64_t *tmp = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!tmp) { dflash_set_error("out of memory tracing %s", name); tc->failed = 1; return; }
    for (int64_t i = 0; i < n; i++) tmp[i] = ids[i];
    if (trace_i64(tc->tracer, tc->ph, name, meaning, tmp, ndim, shape) != 0) tc->failed = 1;
    free(tmp);
}

/* tr_heads: trace a (T, nh*d) buffer as (nh, T, d), the reference's
 * q.transpose(1, 2) layout. Only runs (and allocates) when tracing. */
static void tr_heads(TraceCtx *tc, const real *x, int T, int nh, int hd, const char *meaning,
                     const char *fmt, ...) {
    if (!tc || !tc->tracer || tc->failed) return;
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    trace_name(name, sizeof name, tc, fmt, ap);
    va_end(ap);
    real *tmp = malloc(sizeof(real) * (size_t)T * nh * hd + 1);
    if (!tmp) { dflash_set_error("out of memory tracing %s", name); tc->failed = 1; return; }
    for (int h = 0; h < nh; h++)
        for (int t = 0; t < T; t++)
            memcpy(tmp + ((size_t)h * T + t) * hd, x + (size_t)t * nh * hd + (size_t)h * hd, sizeof(real) * hd);
    int64_t shape[3] = {nh, T, hd};
    if (trace_real(tc->tracer, tc->ph, name, meaning, tmp, 3, shape) != 0) tc->failed = 1;
    free(tmp);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* ===========================================================================
 * 3. The target forward (Qwen3ForCausalLM with output_hidden_states=True)
 * ======================================================================== */

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

static int layer_acts_init(LayerActs *a, const Config *c, int T, int Tk, int S) {
    int D = c->hidden_size, I = c->intermediate_size;
    int qd = c->num_attention_heads * c->head_dim, kvd = c->num_key_value_heads * c->head_dim;
    memset(a, 0, sizeof *a);
    a->xb = xcalloc((size_t)T * D, sizeof(real), "xb");
    a->q = xcalloc((size_t)T * qd, sizeof(real), "q");
    a->k = xcalloc((size_t)Tk * kvd, sizeof(real), "k");
    a->v = xcalloc((size_t)Tk * kvd, sizeof(real), "v");
    a->q_rope = xcalloc((size_t)T * qd, sizeof(real), "q_rope");
    a->k_rope = xcalloc((size_t)Tk * kvd, sizeof(real), "k_rope");
    a->scores = xcalloc((size_t)c->num_attention_heads * T * S, sizeof(real), "scores");
    a->att = xcalloc((size_t)c->num_attention_heads * T * S, sizeof(real), "att");
    a->attn = xcalloc((size_t)T * qd, sizeof(real), "attn");
    a->attn_output = xcalloc((size_t)T * D, sizeof(real), "attn_output");
    a->h_mid = xcalloc((size_t)T * D, sizeof(real), "h_mid");
    a->xb2 = xcalloc((size_t)T * D, sizeof(real), "xb2");
    a->gate = xcalloc((size_t)T * I, sizeof(real), "gate");
    a->up = xcalloc((size_t)T * I, sizeof(real), "up");
    a->act = xcalloc((size_t)T * I, sizeof(real), "act");
    a->mlp_out = xcalloc((size_t)T * D, sizeof(real), "mlp_out");
    a->out = xcalloc((size_t)T * D, sizeof(real), "out");
    return a->xb && a->q && a->k && a->v && a->q_rope && a->k_rope && a->scores && a->att && a->attn &&
           a->attn_output && a->h_mid && a->xb2 && a->gate && a->up && a->act && a->mlp_out && a->out
               ? 0 : -1;
}

static void layer_acts_free(LayerActs *a) {
    real *bufs[] = {a->xb, a->q, a->k, a->v, a->q_rope, a->k_rope, a->scores, a->att, a->attn,
                    a->attn_output, a->h_mid, a->xb2, a->gate, a->up, a->act, a->mlp_out, a->out};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(a, 0, sizeof *a);
}

/* The largest input width of any matmul, for the token-minor scratch. */
static int max_matmul_in(const Config *c) {
    int m = c->hidden_size;
    if (c->intermediate_size > m) m = c->intermediate_size;
    if (c->num_attention_heads * c->head_dim > m) m = c->num_attention_heads * c->head_dim;
    if (c->n_target_layer_ids * c->hidden_size > m) m = c->n_target_layer_ids * c->hidden_size;
    return m;
}

/* Everything the target forward writes, sized for at most cap_T tokens. */
typedef struct {
    int cap_T;
    int *pos;             /* (T)          position_ids                        */
    real *angles;         /* (T, d/2)     pos * inv_freq                      */
    real *cos, *sin;      /* (T, d)                                           */
    real *h;              /* (T, D)       the residual stream                 */
    real *hidden_states;  /* (L+1, T, D)  output_hidden_states; [L] post-norm */
    real *logits;         /* (T, V)                                           */
    real *xt;             /* (max_in, LANES) matmul scratch                   */
    LayerActs acts;       /* one layer's activations, reused layer by layer   */
} TargetRun;

static int target_run_init(TargetRun *r, const Config *c, int cap_T, int cap_S) {
    int D = c->hidden_size, d = c->head_dim;
    memset(r, 0, sizeof *r);
    r->cap_T = cap_T;
    r->pos = xcalloc((size_t)cap_T, sizeof(int), "position_ids");
    r->angles = xcalloc((size_t)cap_T * d / 2, sizeof(real), "rope angles");
    r->cos = xcalloc((size_t)cap_T * d, sizeof(real), "cos");
    r->sin = xcalloc((size_t)cap_T * d, sizeof(real), "sin");
    r->h = xcalloc((size_t)cap_T * D, sizeof(real), "h");
    r->hidden_states = xcalloc((size_t)(c->num_hidden_layers + 1) * cap_T * D, sizeof(real), "hidden_states");
    r->logits = xcalloc((size_t)cap_T * c->vocab_size, sizeof(real), "logits");
    r->xt = xcalloc((size_t)max_matmul_in(c) * LANES, sizeof(real), "matmul scratch");
    if (!r->pos || !r->angles || !r->cos || !r->sin || !r->h || !r->hidden_states || !r->logits || !r->xt)
        return -1;
    return layer_acts_init(&r->acts, c, cap_T, cap_T, cap_S);
}

static void target_run_free(TargetRun *r) {
    free(r->pos); free(r->angles); free(r->cos); free(r->sin); free(r->h);
    free(r->hidden_states); free(r->logits); free(r->xt);
    layer_acts_free(&r->acts);
    memset(r, 0, sizeof *r);
}

/* hidden_state(r, i, T): hidden_states[i], a (T, D) slice */
static real *hidden_state(const TargetRun *r, const Config *c, int i, int T) {
    return r->hidden_states + (size_t)i * T * c->hidden_size;
}

/* mlp_block: the second half of every decoder layer, target and draft alike:
 *   out (T, D) = h_mid + down_proj(silu(gate_proj(x)) * up_proj(x)),
 *   x = post_attention_layernorm(h_mid)            (Qwen3MLP + residual)
 * reading a->h_mid and filling a->xb2, gate, up, act, mlp_out on the way. */
static void mlp_block(real *out, LayerActs *a, const LayerWeights *w, const Config *c, int T, real *xt) {
    int D = c->hidden_size, I = c->intermediate_size;
    rmsnorm_rows(a->xb2, a->h_mid, w->post_attention_layernorm, T, D, (real)c->rms_norm_eps);
    matmul(a->gate, a->xb2, w->gate_proj, T, D, I, xt);
    matmul(a->up, a->xb2, w->up_proj, T, D, I, xt);
    for (size_t i = 0; i < (size_t)T * I; i++) a->act[i] = silu(a->gate[i]) * a->up[i];
    matmul(a->mlp_out, a->act, w->down_proj, T, I, D, xt);
    for (size_t i = 0; i < (size_t)T * D; i++) out[i] = a->h_mid[i] + a->mlp_out[i];
}

/* target_forward: T tokens at positions pos0..pos0+T-1 (pos0 must equal the
 * cache length), appended to the target KV cache. Fills r->hidden_states
 * (L+1, T, D) and the logits of rows logits_from..T-1 (the prefill keeps only
 * the last row: logits_to_keep=1). Returns the number of logit rows. */
static int target_forward(const Model *m, KVCache *cache, TargetRun *r, const int *ids, int T,
                          int logits_from, TraceCtx *tc) {
    const Config *c = &m->cfg;
    int D = c->hidden_size, H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int d = c->head_dim, L = c->num_hidden_layers, V = c->vocab_size;
    int past = cache->len;          /* past_key_values.get_seq_length() */
    int S = past + T;               /* keys after appending */
    real eps = (real)c->rms_norm_eps;
    LayerActs *a = &r->acts;

    /* position_ids = [past, past+T); RoPE cos/sin for them */
    for (int t = 0; t < T; t++) r->pos[t] = past + t;
    rope_cos_sin(r->angles, r->cos, r->sin, r->pos, T, m->inv_freq, d);
    tr_ids(tc, ids, "token ids fed to the target", 1, SHAPE(T), "input_ids");
    tr_ids(tc, r->pos, "positions of those tokens (RoPE and the KV cache slots)", 1, SHAPE(T), "position_ids");

    /* hidden_states[0] = embed_tokens(input_ids) */
    for (int t = 0; t < T; t++)
        memcpy(r->h + (size_t)t * D, m->embed_tokens + (size_t)ids[t] * D, sizeof(real) * D);
    memcpy(hidden_state(r, c, 0, T), r->h, sizeof(real) * (size_t)T * D);

    for (int l = 0; l < L; l++) {
        const LayerWeights *w = &m->layers[l];
        /* attention block: h = h + o_proj(attn(input_layernorm(h))) */
        rmsnorm_rows(a->xb, r->h, w->input_layernorm, T, D, eps);
        matmul(a->q, a->xb, w->q_proj, T, D, H * d, r->xt);
        matmul(a->k, a->xb, w->k_proj, T, D, Hkv * d, r->xt);
        matmul(a->v, a->xb, w->v_proj, T, D, Hkv * d, r->xt);
        rmsnorm_rows(a->q, a->q, w->q_norm, T * H, d, eps);    /* q_norm per head */
        rmsnorm_rows(a->k, a->k, w->k_norm, T * Hkv, d, eps);  /* k_norm per head */
        apply_rotary_pos_emb(a->q_rope, a->k_rope, a->q, a->k, r->cos, r->sin, T, T, H, Hkv, d);
        cache_append(cache, l, a->k_rope, a->v, T);
        attention(a->attn, a->scores, a->att, a->q_rope, cache_key(cache, l, 0), cache_value(cache, l, 0),
                  T, S, cache->capacity, H, Hkv, d, /*causal=*/1, past);
        tr_real(tc, a->att, "target causal attention weights softmax(q.k/sqrt(d)) over the cache",
                3, SHAPE(H, T, S), "layers.%d.self_attn.attn_weights", l);
        matmul(a->attn_output, a->attn, w->o_proj, T, H * d, D, r->xt);
        for (size_t i = 0; i < (size_t)T * D; i++) a->h_mid[i] = r->h[i] + a->attn_output[i];

        /* MLP block: h = h + down_proj(silu(gate_proj(x)) * up_proj(x)) */
        mlp_block(r->h, a, w, c, T, r->xt);

        /* hidden_states[l+1] = output of layer l (the last one is replaced below) */
        memcpy(hidden_state(r, c, l + 1, T), r->h, sizeof(real) * (size_t)T * D);
    }
    cache->len = S;

    /* final norm; transformers stores it as hidden_states[L] (post-norm!) */
    real *last = hidden_state(r, c, L, T);
    rmsnorm_rows(last, r->h, m->norm, T, D, eps);
    for (int i = 0; i <= L; i++)
        tr_real(tc, hidden_state(r, c, i, T),
                i == 0 ? "hidden_states[0]: embedding output"
                       : i == L ? "hidden_states[L]: AFTER the final model.norm (transformers semantics)"
                                : "hidden_states[i]: output of decoder layer i-1",
                2, SHAPE(T, D), "hidden_states.%d", i);

    /* logits = lm_head(norm(h)) for rows logits_from..T-1 */
    int rows = T - logits_from;
    matmul(r->logits, last + (size_t)logits_from * D, m->lm_head, rows, D, V, r->xt);
    return rows;
}

/* ===========================================================================
 * 4. extract_context_feature (walkthrough Step 1)
 * ======================================================================== */

/* target_hidden (rows, k*D) = cat_j hidden_states[layer_ids[j] + 1][r0 .. r0+rows)
 * along the feature axis. The +1: hidden_states[0] is the embedding, so the
 * output of decoder layer id is hidden_states[id + 1]. For id = L-1 that entry
 * is the post-norm last_hidden_state (see NOTES.md). */
static void extract_context_feature(real *target_hidden, const TargetRun *r, const Config *tc,
                                    const int *layer_ids, int n_ids, int T, int r0, int rows) {
    int D = tc->hidden_size;
    for (int t = 0; t < rows; t++)
        for (int j = 0; j < n_ids; j++)
            memcpy(target_hidden + ((size_t)t * n_ids + j) * D,
                   hidden_state(r, tc, layer_ids[j] + 1, T) + (size_t)(r0 + t) * D, sizeof(real) * D);
}

/* ===========================================================================
 * 5. The draft forward: DFlashDraftModel with KV injection (Steps 2-5)
 * ======================================================================== */

typedef struct {
    int cap_ctx, B;
    int *pos;               /* (Lc+B)       position_ids = [cache_len, start+B)    */
    real *angles;           /* (Lc+B, d/2)                                         */
    real *cos, *sin;        /* (Lc+B, d)                                           */
    real *fc_out;           /* (Lc, D)      fc(target_hidden)                      */
    real *C;                /* (Lc, D)      hidden_norm(fc(target_hidden)): "C"    */
    real *noise_embedding;  /* (B, D)       embed_tokens(block): "H" of layer 0    */
    real *h;                /* (B, D)       the residual stream                    */
    real *norm;             /* (B, D)       final norm                             */
    real *logits;           /* (B-1, V)     target.lm_head(norm[1:])               */
    real *kv_in;            /* (Lc+B, D)    [C ; H]: the rows K and V are made from   */
    real *xt;               /* matmul scratch                                      */
    LayerActs *acts;        /* (N) one per draft layer                             */
} DraftRun;

static int draft_run_init(DraftRun *r, const Config *dc, int V, int cap_ctx, int B, int cap_S) {
    int D = dc->hidden_size, d = dc->head_dim, P = cap_ctx + B;
    memset(r, 0, sizeof *r);
    r->cap_ctx = cap_ctx;
    r->B = B;
    r->pos = xcalloc((size_t)P, sizeof(int), "draft position_ids");
    r->angles = xcalloc((size_t)P * d / 2, sizeof(real), "draft rope angles");
    r->cos = xcalloc((size_t)P * d, sizeof(real), "draft cos");
    r->sin = xcalloc((size_t)P * d, sizeof(real), "draft sin");
    r->fc_out = xcalloc((size_t)cap_ctx * D, sizeof(real), "fc");
    r->C = xcalloc((size_t)cap_ctx * D, sizeof(real), "hidden_norm");
    r->noise_embedding = xcalloc((size_t)B * D, sizeof(real), "noise_embedding");
    r->h = xcalloc((size_t)B * D, sizeof(real), "draft h");
    r->norm = xcalloc((size_t)B * D, sizeof(real), "draft norm");
    r->logits = xcalloc((size_t)B * V, sizeof(real), "draft logits");
    r->kv_in = xcalloc((size_t)P * D, sizeof(real), "kv_in");
    r->xt = xcalloc((size_t)max_matmul_in(dc) * LANES, sizeof(real), "matmul scratch");
    r->acts = xcalloc((size_t)dc->num_hidden_layers, sizeof(LayerActs), "draft layer activations");
    if (!r->pos || !r->angles || !r->cos || !r->sin || !r->fc_out || !r->C || !r->noise_embedding ||
        !r->h || !r->norm || !r->logits || !r->kv_in || !r->xt || !r->acts)
        return -1;
    for (int l = 0; l < dc->num_hidden_layers; l++)
        if (layer_acts_init(&r->acts[l], dc, B, P, cap_S) != 0) return -1;
    return 0;
}

static void draft_run_free(DraftRun *r, const Config *dc) {
    free(r->pos); free(r->angles); free(r->cos); free(r->sin); free(r->fc_out); free(r->C);
    free(r->noise_embedding); free(r->h); free(r->norm); free(r->logits); free(r->kv_in); free(r->xt);
    if (r->acts)
        for (int l = 0; l < dc->num_hidden_layers; l++) layer_acts_free(&r->acts[l]);
    free(r->acts);
    memset(r, 0, sizeof *r);
}

/* One draft decoder layer (Qwen3DFlashDecoderLayer + Qwen3DFlashAttention).
 *   h (B, D) in/out: the block's residual stream
 *   C (Lc, D): the injected target context, the same for every layer
 * Q comes from the block only; K and V come from [C ; xb] through the SAME
 * k_proj / v_proj / k_norm (Step 4.2). Keys take RoPE at all Lc+B positions,
 * queries at the last B (Step 4.3). The new K/V are appended to the draft
 * cache and the B queries attend over the whole cache, non-causally (4.4). */
static void draft_layer(const Model *dm, int l, KVCache *cache, DraftRun *r, int Lc, TraceCtx *tc) {
    const Config *c = &dm->cfg;
    const LayerWeights *w = &dm->layers[l];
    LayerActs *a = &r->acts[l];
    int B = r->B, D = c->hidden_size, H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int d = c->head_dim, P = Lc + B;
    int kvd = Hkv * d;
    int S = cache->len + P;   /* keys after appending this call's Lc+B */
    real eps = (real)c->rms_norm_eps;

    rmsnorm_rows(a->xb, r->h, w->input_layernorm, B, D, eps);           /* H = input_layernorm(h) */

    /* 4.1 Q: q = q_norm(q_proj(H)) from the block only: (B, H*d) */
    matmul(a->q, a->xb, w->q_proj, B, D, H * d, r->xt);
    rmsnorm_rows(a->q, a->q, w->q_norm, B * H, d, eps);
    tr_heads(tc, a->q, B, H, d, "Q = QNorm(H W_Q): queries from the block only, before RoPE",
             "layers.%d.self_attn.q", l);

    /* 4.2 K/V: k = k_norm(cat[k_proj(C), k_proj(H)]), v = cat[v_proj(C), v_proj(H)]
     * The same k_proj / v_proj serve both: stack the Lc context rows and the B
     * block rows into kv_in (Lc+B, D) and project them in one pass (row by
     * row this is exactly the reference's two projections then cat). */
    memcpy(r->kv_in, r->C, sizeof(real) * (size_t)Lc * D);
    memcpy(r->kv_in + (size_t)Lc * D, a->xb, sizeof(real) * (size_t)B * D);
    matmul(a->k, r->kv_in, w->k_proj, P, D, kvd, r->xt);   /* rows 0..Lc-1: C W_K, then H W_K */
    matmul(a->v, r->kv_in, w->v_proj, P, D, kvd, r->xt);
    rmsnorm_rows(a->k, a->k, w->k_norm, P * Hkv, d, eps);
    tr_heads(tc, a->k, P, Hkv, d, "K = KNorm(concat[C W_K, H W_K]): context keys then block keys, before RoPE",
             "layers.%d.self_attn.k", l);
    tr_heads(tc, a->v, P, Hkv, d, "V = concat[C W_V, H W_V]: context values then block values",
             "layers.%d.self_attn.v", l);

    /* 4.3 RoPE: keys at all P positions, queries at the LAST B (q_len) of them */
    apply_rotary_pos_emb(a->q_rope, a->k_rope, a->q, a->k, r->cos, r->sin, B, P, H, Hkv, d);
    tr_heads(tc, a->q_rope, B, H, d, "Q after RoPE at the block positions (cos[-q_len:])",
             "layers.%d.self_attn.q_rope", l);
    tr_heads(tc, a->k_rope, P, Hkv, d, "K after RoPE at all context + block positions",
             "layers.%d.self_attn.k_rope", l);

    /* 4.4 attention over the whole draft cache, NON-causal (is_causal=False) */
    cache_append(cache, l, a->k_rope, a->v, P);
    attention(a->attn, a->scores, a->att, a->q_rope, cache_key(cache, l, 0), cache_value(cache, l, 0),
              B, S, cache->capacity, H, Hkv, d, /*causal=*/0, 0);
    tr_real(tc, a->scores, "scores = q'.k'/sqrt(d_h) before the softmax: block queries over context + block keys",
            3, SHAPE(H, B, S), "layers.%d.self_attn.attn_scores", l);
    tr_real(tc, a->att, "A = softmax(q'.k'/sqrt(d_h)): block queries over context (KV injection) + block keys",
            3, SHAPE(H, B, S), "layers.%d.self_attn.attn_weights", l);

    /* 4.5 output projection, residual, MLP */
    matmul(a->attn_output, a->attn, w->o_proj, B, H * d, D, r->xt);
    tr_real(tc, a->attn_output, "Attn_out = concat(heads) W_O: only the block's B rows", 2, SHAPE(B, D),
            "layers.%d.self_attn.attn_output", l);
    for (size_t i = 0; i < (size_t)B * D; i++) a->h_mid[i] = r->h[i] + a->attn_output[i];
    mlp_block(a->out, a, w, c, B, r->xt);
    memcpy(r->h, a->out, sizeof(real) * (size_t)B * D);
    tr_real(tc, a->out, "draft decoder layer output (the block's hidden states)", 2, SHAPE(B, D),
            "layers.%d", l);
}

/* draft_forward: DFlashDraftModel.forward followed by target.lm_head(out[1:]).
 *   target_hidden (Lc, k*D): context features of the positions the draft cache
 *                            has not seen yet (the prompt, then acc+1 rows)
 *   block (B): anchor + B-1 mask ids, at positions start..start+B-1
 * position_ids = [cache_len, start + B): keys use all, queries the last B.
 * Fills r->logits (B-1, V). Appends Lc+B positions to the draft cache; the
 * caller crops it back to start (keeping only context K/V). */
static void draft_forward(const Model *dm, const Model *tm, KVCache *cache, DraftRun *r,
                          const real *target_hidden, int Lc, const int *block, TraceCtx *tc) {
    const Config *c = &dm->cfg;
    int B = r->B, D = c->hidden_size, d = c->head_dim, V = tm->cfg.vocab_size;
    int kD = c->n_target_layer_ids * D, P = Lc + B;
    real eps = (real)c->rms_norm_eps;

    tr_real(tc, target_hidden, "target_hidden_raw = [h3; h7; h11] per position: the context handed in",
            2, SHAPE(Lc, kD), "target_hidden_raw");

    /* Step 2: C = hidden_norm(fc(target_hidden)) */
    matmul(r->fc_out, target_hidden, dm->fc, Lc, kD, D, r->xt);
    rmsnorm_rows(r->C, r->fc_out, dm->hidden_norm, Lc, D, eps);
    tr_real(tc, r->fc_out, "W_fc . target_hidden_raw: k*D features projected back to D", 2, SHAPE(Lc, D), "fc");
    tr_real(tc, r->C, "C = RMSNorm(W_fc . target_hidden_raw): target context injected into every draft layer",
            2, SHAPE(Lc, D), "hidden_norm");

    /* Step 3: noise_embedding = target.model.embed_tokens(block) */
    tr_ids(tc, block, "the block entering the draft: anchor + B-1 mask ids", 1, SHAPE(B), "block_output_ids");
    for (int t = 0; t < B; t++)
        memcpy(r->noise_embedding + (size_t)t * D, tm->embed_tokens + (size_t)block[t] * D, sizeof(real) * D);
    tr_real(tc, r->noise_embedding, "H = embed_tokens(block): the block's own input (noise embedding)",
            2, SHAPE(B, D), "noise_embedding");

    /* positions and RoPE tables for [cache_len, cache_len + Lc + B) */
    for (int p = 0; p < P; p++) r->pos[p] = cache->len + p;
    rope_cos_sin(r->angles, r->cos, r->sin, r->pos, P, dm->inv_freq, d);
    tr_ids(tc, r->pos, "position_ids = [cache_len, start+B): keys use all, queries the last B", 1, SHAPE(P),
           "position_ids");
    tr_real(tc, r->angles, "RoPE angles theta = position * inv_freq", 2, SHAPE(P, d / 2), "rope_angles");
    tr_real(tc, r->cos, "cos(cat(angles, angles))", 2, SHAPE(P, d), "cos");
    tr_real(tc, r->sin, "sin(cat(angles, angles))", 2, SHAPE(P, d), "sin");

    /* Step 4: the decoder layers, each injecting the same C */
    memcpy(r->h, r->noise_embedding, sizeof(real) * (size_t)B * D);
    for (int l = 0; l < c->num_hidden_layers; l++) draft_layer(dm, l, cache, r, Lc, tc);
    cache->len += P;

    /* Step 5: final norm, then the target's lm_head on rows 1..B-1 */
    rmsnorm_rows(r->norm, r->h, dm->norm, B, D, eps);
    tr_real(tc, r->norm, "final draft norm of the block's B positions", 2, SHAPE(B, D), "norm");
    matmul(r->logits, r->norm + D, tm->lm_head, B - 1, D, V, r->xt);
    tr_real(tc, r->logits, "draft logits = target.lm_head(out[1:]): one row per masked position",
            2, SHAPE(B - 1, V), "logits");
}

/* ===========================================================================
 * 6. Sampling
 * ======================================================================== */

/* The PRNG for temperature > 0: xorshift64* (Vigna), seeded through one
 * splitmix64 step so seed 0 works. uniform() takes the top 53 bits. The
 * reference draws with torch.multinomial, which no C program can match draw
 * for draw; with T > 0 losslessness is a statistical property (NOTES.md). */
typedef struct { uint64_t s; } Rng;

static void rng_seed(Rng *g, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    g->s = (z ^ (z >> 31)) | 1;  /* never 0 */
}

static double rng_uniform(Rng *g) {
    g->s ^= g->s >> 12;
    g->s ^= g->s << 25;
    g->s ^= g->s >> 27;
    uint64_t r = g->s * 0x2545F4914F6CDD1Dull;
    return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

/* sample(logits, T): argmax (first index on ties) when T < 1e-5, else
 * softmax(logits / T) in double and one inverse-CDF draw. */
static int sample_row(const real *logits, int V, double temperature, Rng *g) {
    if (temperature < 1e-5) return argmax(logits, V);
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) if ((double)logits[i] / temperature > mx) mx = (double)logits[i] / temperature;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] / temperature - mx);
    double u = rng_uniform(g) * sum, cum = 0;
    int last = 0;
    for (int i = 0; i < V; i++) {
        double p = exp((double)logits[i] / temperature - mx);
        if (p > 0) last = i;
        cum += p;
        if (u < cum) return i;
    }
    return last;  /* u landed on the rounding edge: the last token with p > 0 */
}

/* ===========================================================================
 * 7. dflash_generate (Steps 6-7) and target-only autoregressive decoding
 * ======================================================================== */

static int is_stop(const GenParams *p, int id) {
    for (int i = 0; i < p->n_stop; i++) if (p->stop_ids[i] == id) return 1;
    return 0;
}

static int check_gen_args(const Model *target, int n_prompt, const GenParams *p, int B,
                          const int *input_ids) {
    const Config *c = &target->cfg;
    if (n_prompt < 1) { dflash_set_error("prompt: empty (at least one token is needed)"); return -1; }
    if (B < 1 || B > DFLASH_MAX_BLOCK) {
        dflash_set_error("--block-size: expected 1..%d, got %d", DFLASH_MAX_BLOCK, B);
        return -1;
    }
    if (p->max_new_tokens < 0) { dflash_set_error("--max-new-tokens: expected >= 0, got %d", p->max_new_tokens); return -1; }
    if (!(p->temperature >= 0)) { dflash_set_error("--temperature: expected a number >= 0, got %g", p->temperature); return -1; }
    for (int i = 0; i < n_prompt; i++)
        if (input_ids[i] < 0 || input_ids[i] >= c->vocab_size) {
            dflash_set_error("prompt: token id %d at position %d is outside the vocabulary 0..%d",
                             input_ids[i], i, c->vocab_size - 1);
            return -1;
        }
    /* the highest position ever used is max_length + B - 1 (a block may run
     * past max_length before the output is cut) */
    if ((long)n_prompt + p->max_new_tokens + B > c->max_position_embeddings) {
        dflash_set_error("prompt (%d tokens) + --max-new-tokens (%d) + block size (%d) = %ld exceeds "
                         "max_position_embeddings %d", n_prompt, p->max_new_tokens, B,
                         (long)n_prompt + p->max_new_tokens + B, c->max_position_embeddings);
        return -1;
    }
    return 0;
}

void gen_result_free(GenResult *res) {
    free(res->output_ids);
    free(res->rounds);
    memset(res, 0, sizeof *res);
}

/* acceptance_length = (block[1:] == posterior[:-1]).cumprod().sum()
 * match and cumprod get B-1 entries each. Step 6 of the walkthrough:
 * match [1,1,0] -> cumprod [1,1,0] -> 2 draft tokens accepted. */
static int acceptance_length(const int *block, const int *posterior, int B, int *match, int *cumprod) {
    int acc = 0;
    for (int i = 0; i + 1 < B; i++) {
        match[i] = block[i + 1] == posterior[i];
        cumprod[i] = (i == 0 ? 1 : cumprod[i - 1]) * match[i];
        acc += cumprod[i];
    }
    return acc;
}

int dflash_generate(const Model *draft, const Model *target, const int *input_ids, int n_prompt,
                    const GenParams *p, GenResult *res) {
    memset(res, 0, sizeof *res);
    const Config *tc = &target->cfg;
    int B = p->block_size;
    if (B > 1 && !draft) { dflash_set_error("block size %d needs a draft model", B); return -1; }
    if (check_gen_args(target, n_prompt, p, B, input_ids) != 0) return -1;
    const Config *dc = draft ? &draft->cfg : NULL;
    int n = n_prompt, V = tc->vocab_size, D = tc->hidden_size;
    int max_length = n + p->max_new_tokens;
    int mask_id = dc ? dc->mask_token_id : -1;  /* B = 1 runs without a draft */
    int k = dc ? dc->n_target_layer_ids : 0;
    int cap_ctx = n > B ? n : B;                 /* most context rows handed in */
    int cap_S = max_length + B;                  /* most positions ever cached */
    TraceCtx tcx = {p->tracer, {"prefill", 0}, "prefill", 0};
    Rng rng;
    rng_seed(&rng, p->seed);

    int rc = -1;
    int *output_ids = NULL, *block = NULL, *posterior = NULL;
    real *target_hidden = NULL;
    KVCache past_key_values_target = {0}, past_key_values_draft = {0};
    TargetRun tr = {0};
    DraftRun dr = {0};
    RoundInfo *rounds = NULL;

    /* output_ids = [prompt | mask x (max_new + B)] */
    output_ids = xcalloc((size_t)max_length + B, sizeof(int), "output_ids");
    block = xcalloc((size_t)B, sizeof(int), "block_output_ids");
    posterior = xcalloc((size_t)B, sizeof(int), "posterior");
    rounds = xcalloc((size_t)p->max_new_tokens + 1, sizeof(RoundInfo), "round log");
    target_hidden = xcalloc((size_t)cap_ctx * (k ? k : 1) * D, sizeof(real), "target_hidden");
    if (!output_ids || !block || !posterior || !rounds || !target_hidden) goto done;
    if (cache_init(&past_key_values_target, tc, cap_S) != 0) goto done;
    if (target_run_init(&tr, tc, cap_ctx, cap_S) != 0) goto done;
    if (B > 1) {
        if (cache_init(&past_key_values_draft, dc, cap_S) != 0) goto done;
        if (draft_run_init(&dr, dc, V, cap_ctx, B, cap_S) != 0) goto done;
    }
    for (int i = 0; i < max_length + B; i++) output_ids[i] = i < n ? input_ids[i] : mask_id;

    /* ---- Step 1: prefill. The target reads the prompt at positions 0..n-1,
     * keeps the logits of the last position only, and returns its hidden
     * states; the first new token is sampled from those logits. */
    double t0 = now_seconds();
    tcx.prefix[0] = 0;  /* the prompt is traced as plain "input_ids" */
    tr_ids(&tcx, input_ids, "prompt ids", 1, SHAPE(n), "input_ids");
    trace_begin(&tcx, "prefill", 0);
    target_forward(target, &past_key_values_target, &tr, input_ids, n, n - 1, &tcx);
    res->target_forwards++;
    output_ids[n] = sample_row(tr.logits, V, p->temperature, &rng);
    tr_real(&tcx, tr.logits, "target logits of the last prompt position (logits_to_keep=1)", 2,
            SHAPE(1, V), "logits");
    tr_ids(&tcx, &output_ids[n], "the first new token, sampled at prefill", 1, SHAPE(1), "sampled");
    if (B > 1) {
        extract_context_feature(target_hidden, &tr, tc, dc->target_layer_ids, k, n, 0, n);
        tr_real(&tcx, target_hidden, "extract_context_feature: [hidden_states[id+1] for id in target_layer_ids]",
                2, SHAPE(n, (int64_t)k * D), "target_hidden");
    }
    int n_ctx = n;                /* rows of target_hidden the draft has not seen */
    res->seconds_prefill = now_seconds() - t0;
    if (tcx.failed) goto done;

    int start = n;
    while (start < max_length) {
        RoundInfo *ri = &rounds[res->n_rounds];
        int round = ++res->n_rounds;
        ri->start_before = start;
        /* ---- Step 3: block = output_ids[start : start+B]: anchor + B-1 masks */
        for (int i = 0; i < B; i++) block[i] = output_ids[start + i];
        memcpy(ri->block_in, block, sizeof(int) * B);
        if (B > 1) {
            /* ---- Steps 2-5: the draft proposes block[1:] in one forward */
            double td = now_seconds();
            trace_begin(&tcx, "draft", round);
            ri->draft_cache_before = past_key_values_draft.len;
            draft_forward(draft, target, &past_key_values_draft, &dr, target_hidden, n_ctx, block, &tcx);
            res->draft_forwards++;
            cache_crop(&past_key_values_draft, start);   /* keep context K/V only */
            ri->draft_cache_after = past_key_values_draft.len;
            for (int i = 1; i < B; i++) block[i] = argmax(dr.logits + (size_t)(i - 1) * V, V);  /* always greedy */
            tr_ids(&tcx, block + 1, "the draft's proposal: argmax of each row (the draft is always greedy)",
                   1, SHAPE(B - 1), "sampled");
            res->seconds_draft += now_seconds() - td;
            if (tcx.failed) goto done;
        }
        memcpy(ri->block, block, sizeof(int) * B);

        /* ---- Step 6: the target verifies the whole block in ONE forward */
        double tv = now_seconds();
        trace_begin(&tcx, "verify", round);
        target_forward(target, &past_key_values_target, &tr, block, B, 0, &tcx);
        res->target_forwards++;
        for (int i = 0; i < B; i++) posterior[i] = sample_row(tr.logits + (size_t)i * V, V, p->temperature, &rng);
        int acc = acceptance_length(block, posterior, B, ri->match, ri->cumprod);
        memcpy(ri->posterior, posterior, sizeof(int) * B);
        ri->acceptance_length = acc;
        if (B > 1) {
            extract_context_feature(target_hidden, &tr, tc, dc->target_layer_ids, k, B, 0, B);
            tr_real(&tcx, target_hidden, "extract_context_feature of the block (next round keeps acc+1 rows)",
                    2, SHAPE(B, (int64_t)k * D), "target_hidden");
        }
        tr_real(&tcx, tr.logits, "target logits at every block position", 2, SHAPE(B, V), "logits");
        tr_ids(&tcx, posterior, "posterior = sample(target logits): the target's own next token at each position",
               1, SHAPE(B), "sampled");
        tr_ids(&tcx, ri->match, "match = block[1:] == posterior[:-1]", 1, SHAPE(B - 1), "match");
        tr_ids(&tcx, ri->cumprod, "cumprod(match): 1 until the first mismatch", 1, SHAPE(B - 1), "cumprod");
        {
            int al = acc;
            tr_ids(&tcx, &al, "acceptance_length = sum(cumprod): draft tokens accepted", 0, NULL,
                   "acceptance_length");
        }
        if (tcx.failed) goto done;

        /* ---- Step 7: keep block[:acc+1], then the bonus token posterior[acc] */
        for (int i = 0; i <= acc; i++) output_ids[start + i] = block[i];
        output_ids[start + acc + 1] = posterior[acc];
        start += acc + 1;
        cache_crop(&past_key_values_target, start);
        ri->start_after = start;
        ri->target_cache_after = past_key_values_target.len;
        n_ctx = acc + 1;  /* target_hidden[:acc+1]: rows 0..acc are already in place */
        res->seconds_verify += now_seconds() - tv;

        /* stop if any stop id appears anywhere in output_ids[n:] */
        int stop = 0;
        for (int i = n; i < max_length + B && !stop; i++) stop = is_stop(p, output_ids[i]);
        if (stop) break;
    }

    /* output = output_ids[:min(start+1, max_length)], cut after the first stop id */
    int m = start + 1 < max_length ? start + 1 : max_length;
    for (int i = n; i < m; i++)
        if (is_stop(p, output_ids[i])) { m = i + 1; break; }
    trace_begin(&tcx, "final", 0);
    tr_ids(&tcx, output_ids, "final output ids: prompt + new tokens", 1, SHAPE(m), "output_ids");
    if (tcx.failed) goto done;

    res->output_ids = xcalloc((size_t)m, sizeof(int), "result output_ids");
    if (!res->output_ids) goto done;
    memcpy(res->output_ids, output_ids, sizeof(int) * (size_t)m);
    res->n_output = m;
    res->n_prompt = n;
    res->rounds = rounds;
    rounds = NULL;
    rc = 0;
done:
    free(output_ids); free(block); free(posterior); free(rounds); free(target_hidden);
    cache_free(&past_key_values_target);
    cache_free(&past_key_values_draft);
    target_run_free(&tr);
    if (dc) draft_run_free(&dr, dc);
    if (rc != 0) gen_result_free(res);
    return rc;
}

/* Target-only autoregressive decoding: prefill, then one token per target
 * forward. Written as its own plain loop (not dflash_generate with B = 1) so
 * the tests compare DFlash against an independent computation. */
int ar_generate(const Model *target, const int *input_ids, int n_prompt, const GenParams *p,
                GenResult *res) {
    memset(res, 0, sizeof *res);
    if (check_gen_args(target, n_prompt, p, 1, input_ids) != 0) return -1;
    const Config *tc = &target->cfg;
    int n = n_prompt, V = tc->vocab_size;
    int max_length = n + p->max_new_tokens;
    int rc = -1;
    KVCache cache = {0};
    TargetRun tr = {0};
    TraceCtx tcx = {NULL, {"prefill", 0}, "", 0};  /* AR runs are not traced */
    Rng rng;
    rng_seed(&rng, p->seed);
    int *out = xcalloc((size_t)max_length + 1, sizeof(int), "output_ids");
    if (!out) goto done;
    if (cache_init(&cache, tc, max_length + 1) != 0) goto done;
    if (target_run_init(&tr, tc, n, max_length + 1) != 0) goto done;
    memcpy(out, input_ids, sizeof(int) * (size_t)n);
    int len = n;
    double t0 = now_seconds();
    if (len < max_length) {
        target_forward(target, &cache, &tr, input_ids, n, n - 1, &tcx);
        res->target_forwards++;
        out[len++] = sample_row(tr.logits, V, p->temperature, &rng);
    }
    res->seconds_prefill = now_seconds() - t0;
    t0 = now_seconds();
    while (len < max_length && !is_stop(p, out[len - 1])) {
        target_forward(target, &cache, &tr, &out[len - 1], 1, 0, &tcx);
        res->target_forwards++;
        out[len++] = sample_row(tr.logits, V, p->temperature, &rng);
    }
    res->seconds_verify = now_seconds() - t0;
    res->output_ids = out;
    out = NULL;
    res->n_output = len;
    res->n_prompt = n;
    rc = 0;
done:
    free(out);
    cache_free(&cache);
    target_run_free(&tr);
    return rc;
}

/* ===========================================================================
 * 8. Loading: JSON, safetensors, config.json, vocab.txt, the tokenizer
 * ======================================================================== */

/* ---- a small strict JSON reader (RFC 8259), enough for config.json and the
 * safetensors header. Rejects duplicate keys, invalid UTF-8, nesting deeper
 * than JSON_MAX_DEPTH, and anything after the value but white space. Hostile
 * input stays cheap: at most JSON_MAX_VALUES values in all (memory) and
 * JSON_MAX_KEYS keys per object (the duplicate check is quadratic). */
/* Json, JsonType: in dflash.h (trace.c reads its manifests with this reader too) */

#define JSON_MAX_DEPTH 32
#define JSON_MAX_VALUES (1 << 20)
#define JSON_MAX_KEYS (1 << 14)

typedef struct {
    const char *s;
    size_t len, pos;
    const char *what;       /* file name for messages */
    long values;            /* values parsed so far (JSON_MAX_VALUES) */
} JsonParser;

void json_free(Json *j) {
    if (!j) return;
    free(j->string);
    for (int i = 0; i < j->n; i++) {
        json_free(&j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    memset(j, 0, sizeof *j);
}

static int json_fail(JsonParser *p, const char *msg) {
    dflash_set_error("%s: invalid JSON at byte %zu: %s", p->what, p->pos, msg);
    return -1;
}

static void json_skip_ws(JsonParser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* length of a valid UTF-8 sequence at s (max n bytes), or 0 if invalid */
static int utf8_seq_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; }
    else return 0;
    if ((size_t)len > n) return 0;
    unsigned cp = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

static int json_parse_string(JsonParser *p, char **out) {
    p->pos++;  /* opening quote */
    size_t cap = 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return json_fail(p, "out of memory");
    for (;;) {
        if (p->pos >= p->len) { free(buf); return json_fail(p, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[p->pos];
        char tmp[4];
        int tn = 0;
        if (c == '"') { p->pos++; break; }
        if (c < 0x20) { free(buf); return json_fail(p, "control character in string"); }
        if (c == '\\') {
            if (p->pos + 1 >= p->len) { free(buf); return json_fail(p, "unterminated escape"); }
            char e = p->s[p->pos + 1];
            p->pos += 2;
            switch (e) {
            case '"': tmp[tn++] = '"'; break;
            case '\\': tmp[tn++] = '\\'; break;
            case '/': tmp[tn++] = '/'; break;
            case 'b': tmp[tn++] = '\b'; break;
            case 'f': tmp[tn++] = '\f'; break;
            case 'n': tmp[tn++] = '\n'; break;
            case 'r': tmp[tn++] = '\r'; break;
            case 't': tmp[tn++] = '\t'; break;
            case 'u': {
                unsigned cp = 0;
                for (int i = 0; i < 4; i++) {
                    int h = p->pos + i < p->len ? hexval(p->s[p->pos + i]) : -1;
                    if (h < 0) { free(buf); return json_fail(p, "bad \\u escape"); }
                    cp = cp * 16 + (unsigned)h;
                }
                p->pos += 4;
                if (cp >= 0xD800 && cp <= 0xDFFF) {  /* surrogates: only NUL-free BMP accepted */
                    free(buf);
                    return json_fail(p, "surrogate \\u escape not supported");
                }
                if (cp == 0) { free(buf); return json_fail(p, "\\u0000 in string"); }
                if (cp < 0x80) tmp[tn++] = (char)cp;
                else if (cp < 0x800) { tmp[tn++] = (char)(0xC0 | (cp >> 6)); tmp[tn++] = (char)(0x80 | (cp & 0x3F)); }
                else {
                    tmp[tn++] = (char)(0xE0 | (cp >> 12));
                    tmp[tn++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    tmp[tn++] = (char)(0x80 | (cp & 0x3F));
                }
                break;
            }
            default: free(buf); return json_fail(p, "unknown escape");
            }
        } else {
            int sl = utf8_seq_len((const unsigned char *)p->s + p->pos, p->len - p->pos);
            if (sl == 0) { free(buf); return json_fail(p, "invalid UTF-8 in string"); }
            memcpy(tmp, p->s + p->pos, (size_t)sl);
            tn = sl;
            p->pos += (size_t)sl;
        }
        if (n + (size_t)tn + 1 > cap) {
            cap = cap * 2 + (size_t)tn;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); return json_fail(p, "out of memory"); }
            buf = nb;
        }
        memcpy(buf + n, tmp, (size_t)tn);
        n += (size_t)tn;
    }
    buf[n] = 0;
    *out = buf;
    return 0;
}

static int json_parse_value(JsonParser *p, Json *out, int depth);

static int json_parse_number(JsonParser *p, Json *out) {
    size_t b = p->pos;
    int integer = 1;
    if (p->pos < p->len && p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->len) return json_fail(p, "bad number");
    if (p->s[p->pos] == '0') p->pos++;
    else if (p->s[p->pos] >= '1' && p->s[p->pos] <= '9')
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    else return json_fail(p, "bad number");
    if (p->pos < p->len && p->s[p->pos] == '.') {
        integer = 0;
        p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return json_fail(p, "bad fraction");
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integer = 0;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return json_fail(p, "bad exponent");
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    }
    char tok[64];
    size_t n = p->pos - b;
    if (n >= sizeof tok) return json_fail(p, "number too long");
    memcpy(tok, p->s + b, n);
    tok[n] = 0;
    out->type = JSON_NUMBER;
    out->number = strtod(tok, NULL);
    if (integer) {
        errno = 0;
        long long v = strtoll(tok, NULL, 10);
        if (errno == 0) { out->is_integer = 1; out->integer = v; }
    }
    return 0;
}

static int json_parse_container(JsonParser *p, Json *out, int depth, int object) {
    out->type = object ? JSON_OBJECT : JSON_ARRAY;
    p->pos++;
    int cap = 0;
    json_skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) { p->pos++; return 0; }
    for (;;) {
        if (object && out->n == JSON_MAX_KEYS) return json_fail(p, "more than 16384 keys in one object");
        if (out->n == cap) {
            cap = cap ? cap * 2 : 8;
            Json *ni = realloc(out->items, sizeof(Json) * (size_t)cap);
            if (!ni) return json_fail(p, "out of memory");
            out->items = ni;
            if (object) {
                char **nk = realloc(out->keys, sizeof(char *) * (size_t)cap);
                if (!nk) return json_fail(p, "out of memory");
                out->keys = nk;
            }
        }
        Json *item = &out->items[out->n];
        memset(item, 0, sizeof *item);
        json_skip_ws(p);
        if (object) {
            char *key = NULL;
            if (p->pos >= p->len || p->s[p->pos] != '"') return json_fail(p, "expected a string key");
            if (json_parse_string(p, &key) != 0) return -1;
            for (int i = 0; i < out->n; i++)
                if (strcmp(out->keys[i], key) == 0) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "duplicate key \"%.100s\"", key);
                    free(key);
                    return json_fail(p, msg);
                }
            out->keys[out->n] = key;
            json_skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') { out->n++; return json_fail(p, "expected ':'"); }
            p->pos++;
        }
        out->n++;  /* count it now so json_free frees a half-parsed item */
        if (json_parse_value(p, item, depth + 1) != 0) return -1;
        json_skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') { p->pos++; continue; }
        if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) { p->pos++; return 0; }
        return json_fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int json_parse_value(JsonParser *p, Json *out, int depth) {
    if (depth > JSON_MAX_DEPTH) return json_fail(p, "nested too deeply");
    if (++p->values > JSON_MAX_VALUES) return json_fail(p, "more than 1048576 values");
    json_skip_ws(p);
    if (p->pos >= p->len) return json_fail(p, "unexpected end");
    char c = p->s[p->pos];
    if (c == '{' || c == '[') return json_parse_container(p, out, depth, c == '{');
    if (c == '"') { out->type = JSON_STRING; return json_parse_string(p, &out->string); }
    if (c == '-' || (c >= '0' && c <= '9')) return json_parse_number(p, out);
    static const struct { const char *word; JsonType type; int b; } lits[] = {
        {"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
    for (int i = 0; i < 3; i++) {
        size_t wl = strlen(lits[i].word);
        if (p->len - p->pos >= wl && memcmp(p->s + p->pos, lits[i].word, wl) == 0) {
            out->type = lits[i].type;
            out->boolean = lits[i].b;
            p->pos += wl;
            return 0;
        }
    }
    return json_fail(p, "unexpected character");
}

/* json_parse: the whole text must be one JSON value. what names the source. */
int json_parse(const char *text, size_t len, const char *what, Json *out) {
    JsonParser p = {text, len, 0, what, 0};
    memset(out, 0, sizeof *out);
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)  /* Python's json refuses it too */
        return json_fail(&p, "a UTF-8 byte order mark (expected the JSON value; save the file without BOM)");
    if (json_parse_value(&p, out, 0) != 0) { json_free(out); return -1; }
    json_skip_ws(&p);
    if (p.pos != p.len) { json_free(out); return json_fail(&p, "trailing characters after the value"); }
    return 0;
}

const Json *json_get(const Json *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (int i = 0; i < obj->n; i++) if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

/* json_describe: a value as a message shows what it found ("got ..."). */
static const char *json_describe(const Json *v, char *buf, size_t size) {
    switch (v->type) {
    case JSON_NULL: snprintf(buf, size, "null"); break;
    case JSON_BOOL: snprintf(buf, size, v->boolean ? "true" : "false"); break;
    case JSON_NUMBER:
        if (v->is_integer) snprintf(buf, size, "%lld", v->integer);
        else {  /* 512.0 is not an integer: show it as written, with its fraction */
            int k = snprintf(buf, size, "%.15g", v->number);
            if (k > 0 && (size_t)k + 2 < size && strspn(buf, "-0123456789") == (size_t)k) strcat(buf, ".0");
        }
        break;
    case JSON_STRING: snprintf(buf, size, "the string \"%.40s%s\"", v->string, strlen(v->string) > 40 ? "..." : ""); break;
    case JSON_ARRAY: snprintf(buf, size, "an array of %d items", v->n); break;
    case JSON_OBJECT: snprintf(buf, size, "an object"); break;
    }
    return buf;
}

/* ---- files */

/* read_file: the whole file into a NUL-terminated buffer (at most max bytes) */
static char *read_file(const char *path, size_t max, size_t *len_out) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only a
     * regular file is read (a directory or a device is refused) */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) { dflash_set_error("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        close(fd);
        dflash_set_error("%s: expected a regular file, got %s", path, dir ? "a directory" : "a special file");
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); dflash_set_error("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) { fclose(f); dflash_set_error("%s: out of memory", path); return NULL; }
        if (n + 1 >= cap) {
            if (cap > max) { free(buf); fclose(f); dflash_set_error("%s: larger than %zu bytes", path, max); return NULL; }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; continue; }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(buf); dflash_set_error("%s: read error", path); return NULL; }
    if (n > max) { free(buf); dflash_set_error("%s: larger than %zu bytes", path, max); return NULL; }
    buf[n] = 0;
    *len_out = n;
    return buf;
}

/* ---- config.json */

#define MAX_DIM (1 << 16)        /* hidden, intermediate, head_dim, heads */
#define MAX_LAYERS 256
#define MAX_VOCAB (1 << 20)

static int cfg_int(const Json *root, const char *path, const char *key, int lo, int hi, int *out) {
    const Json *v = json_get(root, key);
    char got[96];
    if (!v) {
        dflash_set_error("%s: missing field \"%s\" (expected an integer in %d..%d)", path, key, lo, hi);
        return -1;
    }
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < lo || v->integer > hi) {
        dflash_set_error("%s: field \"%s\": expected an integer in %d..%d, got %s", path, key, lo, hi,
                         json_describe(v, got, sizeof got));
        return -1;
    }
    *out = (int)v->integer;
    return 0;
}

/* a number in (lo, hi]: rms_norm_eps and rope_theta, converted to float later */
static int cfg_double(const Json *root, const char *path, const char *key, double lo, double hi, double *out) {
    const Json *v = json_get(root, key);
    char got[96];
    if (!v) {
        dflash_set_error("%s: missing field \"%s\" (expected a number in (%g, %g])", path, key, lo, hi);
        return -1;
    }
    if (v->type != JSON_NUMBER || !(v->number > lo && v->number <= hi)) {
        dflash_set_error("%s: field \"%s\": expected a number in (%g, %g], got %s", path, key, lo, hi,
                         json_describe(v, got, sizeof got));
        return -1;
    }
    *out = v->number;
    return 0;
}

static int cfg_architecture(const Json *root, const char *path, const char *want) {
    const Json *a = json_get(root, "architectures");
    char got[96];
    if (!a) { dflash_set_error("%s: missing field \"architectures\" (expected [\"%s\"])", path, want); return -1; }
    if (a->type == JSON_ARRAY)
        for (int i = 0; i < a->n; i++)
            if (a->items[i].type == JSON_STRING && strcmp(a->items[i].string, want) == 0) return 0;
    if (a->type == JSON_ARRAY && a->n > 0) json_describe(&a->items[0], got, sizeof got);
    else json_describe(a, got, sizeof got);
    dflash_set_error("%s: field \"architectures\": expected [\"%s\"], got %s", path, want, got);
    return -1;
}

/* build_target_layer_ids: the reference's default when dflash_config has none */
static void build_target_layer_ids(int num_target_layers, int num_draft_layers, int *ids) {
    if (num_draft_layers == 1) { ids[0] = num_target_layers / 2; return; }
    int start = 1, end = num_target_layers - 3, span = end - start;
    for (int i = 0; i < num_draft_layers; i++) {
        double x = start + (double)i * span / (num_draft_layers - 1);
        ids[i] = (int)floor(x + 0.5);  /* Python round(): ties to even, see NOTES.md */
        if (x + 0.5 == floor(x + 0.5) && ids[i] % 2 != 0) ids[i] -= 1;
    }
}

static int config_parse(Config *c, const char *path, const char *text, size_t len, int draft) {
    Json root;
    memset(c, 0, sizeof *c);
    if (json_parse(text, len, path, &root) != 0) return -1;
    int rc = -1;
    if (root.type != JSON_OBJECT) { dflash_set_error("%s: expected a JSON object", path); goto done; }
    if (cfg_architecture(&root, path, draft ? "DFlashDraftModel" : "Qwen3ForCausalLM") != 0) goto done;
    if (cfg_int(&root, path, "hidden_size", 1, MAX_DIM, &c->hidden_size) ||
        cfg_int(&root, path, "intermediate_size", 1, MAX_DIM, &c->intermediate_size) ||
        cfg_int(&root, path, "num_hidden_layers", 1, MAX_LAYERS, &c->num_hidden_layers) ||
        cfg_int(&root, path, "num_attention_heads", 1, MAX_DIM, &c->num_attention_heads) ||
        cfg_int(&root, path, "num_key_value_heads", 1, MAX_DIM, &c->num_key_value_heads) ||
        cfg_int(&root, path, "head_dim", 2, MAX_DIM, &c->head_dim) ||
        cfg_int(&root, path, "vocab_size", 1, MAX_VOCAB, &c->vocab_size) ||
        cfg_int(&root, path, "max_position_embeddings", 1, 1 << 20, &c->max_position_embeddings) ||
        /* eps and theta become floats: (0, 1] and (1, 1e30] keep every
         * derived value (eps, theta^(2i/d), its inverse) finite in float */
        cfg_double(&root, path, "rms_norm_eps", 0, 1, &c->rms_norm_eps) ||
        cfg_double(&root, path, "rope_theta", 1, 1e30, &c->rope_theta))
        goto done;
    if (c->num_attention_heads % c->num_key_value_heads != 0) {
        dflash_set_error("%s: field \"num_attention_heads\": expected a multiple of num_key_value_heads (%d), "
                         "got %d", path, c->num_key_value_heads, c->num_attention_heads);
        goto done;
    }
    if (c->head_dim % 2 != 0) {
        dflash_set_error("%s: field \"head_dim\": expected an even number (RoPE rotates pairs of dims), got %d",
                         path, c->head_dim);
        goto done;
    }
    /* hidden_size need not equal heads x head_dim (Qwen3 allows it: q_proj is
     * [H*d, D], o_proj [D, H*d]); only an absurd H*d is refused. */
    if ((long)c->num_attention_heads * c->head_dim > MAX_DIM) {
        dflash_set_error("%s: fields \"num_attention_heads\" x \"head_dim\": expected at most %d, got %d x %d = %ld",
                         path, MAX_DIM, c->num_attention_heads, c->head_dim,
                         (long)c->num_attention_heads * c->head_dim);
        goto done;
    }
    const Json *tie = json_get(&root, "tie_word_embeddings");
    char got[96];
    if (tie && !(tie->type == JSON_BOOL && tie->boolean == 0)) {
        dflash_set_error("%s: field \"tie_word_embeddings\": expected false (lm_head is its own tensor), got %s",
                         path, json_describe(tie, got, sizeof got));
        goto done;
    }
    const Json *bias = json_get(&root, "attention_bias");
    if (bias && !(bias->type == JSON_BOOL && bias->boolean == 0)) {
        dflash_set_error("%s: field \"attention_bias\": expected false (no bias tensors), got %s", path,
                         json_describe(bias, got, sizeof got));
        goto done;
    }
    if (draft) {
        c->is_draft = 1;
        if (cfg_int(&root, path, "num_target_layers", 1, MAX_LAYERS, &c->num_target_layers) ||
            cfg_int(&root, path, "block_size", 1, DFLASH_MAX_BLOCK, &c->block_size))
            goto done;
        const Json *dfc = json_get(&root, "dflash_config");
        if (!dfc || dfc->type != JSON_OBJECT) {
            if (!dfc) dflash_set_error("%s: missing field \"dflash_config\" (expected an object)", path);
            else dflash_set_error("%s: field \"dflash_config\": expected an object, got %s", path,
                                  json_describe(dfc, got, sizeof got));
            goto done;
        }
        char sub[600];
        snprintf(sub, sizeof sub, "%.500s: dflash_config", path);
        if (cfg_int(dfc, sub, "mask_token_id", 0, c->vocab_size - 1, &c->mask_token_id)) goto done;
        const Json *ids = json_get(dfc, "target_layer_ids");
        if (!ids) {
            /* the reference's default (build_target_layer_ids) */
            c->n_target_layer_ids = c->num_hidden_layers;
            if (c->n_target_layer_ids > DFLASH_MAX_LAYER_IDS) {
                dflash_set_error("%s: no target_layer_ids and too many draft layers for the default", sub);
                goto done;
            }
            build_target_layer_ids(c->num_target_layers, c->num_hidden_layers, c->target_layer_ids);
        } else {
            if (ids->type != JSON_ARRAY || ids->n < 1 || ids->n > DFLASH_MAX_LAYER_IDS) {
                dflash_set_error("%s: field \"target_layer_ids\": expected a list of 1..%d layer indices, got %s",
                                 sub, DFLASH_MAX_LAYER_IDS, json_describe(ids, got, sizeof got));
                goto done;
            }
            c->n_target_layer_ids = ids->n;
            for (int i = 0; i < ids->n; i++) {
                const Json *v = &ids->items[i];
                if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 ||
                    v->integer >= c->num_target_layers) {
                    dflash_set_error("%s: field \"target_layer_ids\"[%d]: expected an integer in 0..%d "
                                     "(num_target_layers - 1), got %s", sub, i, c->num_target_layers - 1,
                                     json_describe(v, got, sizeof got));
                    goto done;
                }
                c->target_layer_ids[i] = (int)v->integer;
            }
        }
        /* every id, given or defaulted (the default goes out of range for
         * fewer than 4 target layers), must name a distinct target layer */
        for (int i = 0; i < c->n_target_layer_ids; i++) {
            if (c->target_layer_ids[i] < 0 || c->target_layer_ids[i] >= c->num_target_layers) {
                dflash_set_error("%s: no \"target_layer_ids\", and the default for %d target layers and %d draft "
                                 "layers gives %d, outside 0..%d; give target_layer_ids", sub,
                                 c->num_target_layers, c->num_hidden_layers, c->target_layer_ids[i],
                                 c->num_target_layers - 1);
                goto done;
            }
            for (int j = 0; j < i; j++)
                if (c->target_layer_ids[j] == c->target_layer_ids[i]) {
                    dflash_set_error("%s: field \"target_layer_ids\": expected distinct layers, got layer %d twice%s",
                                     sub, c->target_layer_ids[i], ids ? "" : " (from the default: give target_layer_ids)");
                    goto done;
                }
        }
        if ((long)c->n_target_layer_ids * c->hidden_size > MAX_DIM * 4L) {
            dflash_set_error("%s: field \"target_layer_ids\": %d layers x hidden_size %d = %ld fc.weight inputs, "
                             "expected at most %ld", sub, c->n_target_layer_ids, c->hidden_size,
                             (long)c->n_target_layer_ids * c->hidden_size, MAX_DIM * 4L);
            goto done;
        }
    }
    rc = 0;
done:
    json_free(&root);
    return rc;
}

/* ---- the tensor table: every tensor a model file must hold, with the shape
 * the config implies and where it goes in Model.data (llm.c-style carving). */
typedef struct {
    char name[96];
    int ndim;
    int64_t shape[2];
    real **dst;          /* the Model field that will point at it */
    int found;
    int64_t begin, end;  /* byte offsets in the data section */
} TensorSpec;

static int tensor_table(Model *m, TensorSpec **out_specs, int *out_n) {
    const Config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim;
    int qd = c->num_attention_heads * d, kvd = c->num_key_value_heads * d;
    int L = c->num_hidden_layers;
    int n = 0, cap = 11 * L + 8;
    TensorSpec *s = xcalloc((size_t)cap, sizeof(TensorSpec), "tensor table");
    if (!s) return -1;
    const char *pre = c->is_draft ? "" : "model.";
#define ADD(ptr, nd, s0, s1, ...) do { \
        snprintf(s[n].name, sizeof s[n].name, __VA_ARGS__); \
        s[n].ndim = nd; s[n].shape[0] = s0; s[n].shape[1] = s1; s[n].dst = ptr; n++; } while (0)
    if (!c->is_draft) ADD(&m->embed_tokens, 2, c->vocab_size, D, "model.embed_tokens.weight");
    for (int l = 0; l < L; l++) {
        LayerWeights *w = &m->layers[l];
        ADD(&w->input_layernorm, 1, D, 0, "%slayers.%d.input_layernorm.weight", pre, l);
        ADD(&w->q_proj, 2, qd, D, "%slayers.%d.self_attn.q_proj.weight", pre, l);
        ADD(&w->k_proj, 2, kvd, D, "%slayers.%d.self_attn.k_proj.weight", pre, l);
        ADD(&w->v_proj, 2, kvd, D, "%slayers.%d.self_attn.v_proj.weight", pre, l);
        ADD(&w->o_proj, 2, D, qd, "%slayers.%d.self_attn.o_proj.weight", pre, l);
        ADD(&w->q_norm, 1, d, 0, "%slayers.%d.self_attn.q_norm.weight", pre, l);
        ADD(&w->k_norm, 1, d, 0, "%slayers.%d.self_attn.k_norm.weight", pre, l);
        ADD(&w->post_attention_layernorm, 1, D, 0, "%slayers.%d.post_attention_layernorm.weight", pre, l);
        ADD(&w->gate_proj, 2, I, D, "%slayers.%d.mlp.gate_proj.weight", pre, l);
        ADD(&w->up_proj, 2, I, D, "%slayers.%d.mlp.up_proj.weight", pre, l);
        ADD(&w->down_proj, 2, D, I, "%slayers.%d.mlp.down_proj.weight", pre, l);
    }
    if (c->is_draft) {
        ADD(&m->fc, 2, D, (int64_t)c->n_target_layer_ids * D, "fc.weight");
        ADD(&m->hidden_norm, 1, D, 0, "hidden_norm.weight");
        ADD(&m->norm, 1, D, 0, "norm.weight");
    } else {
        ADD(&m->norm, 1, D, 0, "model.norm.weight");
        ADD(&m->lm_head, 2, c->vocab_size, D, "lm_head.weight");
    }
#undef ADD
    *out_specs = s;
    *out_n = n;
    return 0;
}

static int64_t spec_numel(const TensorSpec *s) { return s->ndim == 1 ? s->shape[0] : s->shape[0] * s->shape[1]; }

static int cmp_begin(const void *a, const void *b) {
    const TensorSpec *x = *(const TensorSpec *const *)a, *y = *(const TensorSpec *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static void shape_str(char *buf, size_t size, const int64_t *shape, int ndim) {
    int off = snprintf(buf, size, "[");
    for (int i = 0; i < ndim && off < (int)size; i++)
        off += snprintf(buf + off, size - (size_t)off, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (off < (int)size) snprintf(buf + off, size - (size_t)off, "]");
}

#define MAX_HEADER (100u << 20)   /* a safetensors header above 100 MiB is refused */

/* the safetensors dtypes: only F32 is read; the others are named as such */
static const char *const SAFETENSORS_DTYPES[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64",
                                                 "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};

/* safetensors_check_header: buf is a whole model.safetensors file (len
 * bytes). Checks the 8-byte header length, the JSON header and every entry
 * against the table (names, dtype F32, shapes from config.json, offsets),
 * and that the tensors tile the data section exactly; fills specs[].begin,
 * .end, .found. *data_start (may be NULL) gets 8 + header length. Reads
 * nothing of the data section, so it is the whole parser a fuzzer needs. */
static int safetensors_check_header(const unsigned char *buf, size_t len, TensorSpec *specs, int n_specs,
                                    const char *path, size_t *data_start) {
    int rc = -1;
    TensorSpec **order = NULL;
    Json root = {0};
    char got[96];
    for (int j = 0; j < n_specs; j++) specs[j].found = 0;
    if (len < 8) {
        dflash_set_error("%s: expected at least the 8-byte header length, got a file of %zu bytes", path, len);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > MAX_HEADER) {  /* first: garbage lengths are named as such */
        dflash_set_error("%s: header length %llu is above the limit of %u bytes", path,
                         (unsigned long long)hlen, MAX_HEADER);
        return -1;
    }
    if (hlen > (uint64_t)(len - 8)) {
        dflash_set_error("%s: header length %llu is larger than the rest of the file (%zu bytes)", path,
                         (unsigned long long)hlen, len - 8);
        return -1;
    }
    const char *header = (const char *)buf + 8;
    char what[600];
    snprintf(what, sizeof what, "%.500s (header)", path);
    if (json_parse(header, (size_t)hlen, what, &root) != 0) return -1;
    if (root.type != JSON_OBJECT) {
        dflash_set_error("%s: header: expected a JSON object, got %s", path, json_describe(&root, got, sizeof got));
        goto done;
    }
    int64_t data_size = (int64_t)(len - 8 - hlen);

    for (int i = 0; i < root.n; i++) {
        const char *name = root.keys[i];
        const Json *e = &root.items[i];
        if (strcmp(name, "__metadata__") == 0) {
            if (e->type != JSON_OBJECT) {
                dflash_set_error("%s: \"__metadata__\": expected an object of strings, got %s", path,
                                 json_describe(e, got, sizeof got));
                goto done;
            }
            continue;
        }
        TensorSpec *s = NULL;
        for (int j = 0; j < n_specs; j++) if (strcmp(specs[j].name, name) == 0) s = &specs[j];
        if (!s) { dflash_set_error("%s: unexpected tensor \"%.200s\" (not part of this model)", path, name); goto done; }
        const Json *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"), *off = json_get(e, "data_offsets");
        if (e->type != JSON_OBJECT || !dt || !sh || !off) {
            dflash_set_error("%s: tensor \"%s\": expected an object with \"dtype\", \"shape\" and \"data_offsets\", "
                             "got %s%s", path, name, json_describe(e, got, sizeof got),
                             e->type != JSON_OBJECT ? "" : !dt ? " without \"dtype\"" : !sh ? " without \"shape\""
                                                                                     : " without \"data_offsets\"");
            goto done;
        }
        if (dt->type != JSON_STRING || strcmp(dt->string, "F32") != 0) {
            int known = 0;
            for (size_t k = 0; dt->type == JSON_STRING && k < sizeof SAFETENSORS_DTYPES / sizeof *SAFETENSORS_DTYPES; k++)
                known |= strcmp(dt->string, SAFETENSORS_DTYPES[k]) == 0;
            dflash_set_error("%s: tensor \"%s\": field \"dtype\": expected \"F32\", got %s%s", path, name,
                             json_describe(dt, got, sizeof got),
                             known ? " (a safetensors dtype this program does not read)"
                                   : dt->type == JSON_STRING ? " (not a safetensors dtype)" : "");
            goto done;
        }
        int ok = sh->type == JSON_ARRAY && sh->n == s->ndim;
        for (int k = 0; ok && k < sh->n; k++) {
            const Json *v = &sh->items[k];
            ok = v->type == JSON_NUMBER && v->is_integer && v->integer == s->shape[k];
        }
        if (!ok) {
            char want[64], have[160];
            shape_str(want, sizeof want, s->shape, s->ndim);
            if (sh->type != JSON_ARRAY) {
                json_describe(sh, have, sizeof have);
            } else {  /* the list as written, each item described */
                int o = snprintf(have, sizeof have, "[");
                for (int k = 0; k < sh->n && k < 8 && o < (int)sizeof have; k++)
                    o += snprintf(have + o, sizeof have - (size_t)o, "%s%s", k ? ", " : "",
                                  json_describe(&sh->items[k], got, sizeof got));
                if (o < (int)sizeof have) snprintf(have + o, sizeof have - (size_t)o, "%s]", sh->n > 8 ? ", ..." : "");
            }
            dflash_set_error("%s: tensor \"%s\": field \"shape\": expected %s (from config.json), got %s", path, name,
                             want, have);
            goto done;
        }
        const Json *b = off->type == JSON_ARRAY && off->n == 2 ? &off->items[0] : NULL;
        const Json *en = b ? &off->items[1] : NULL;
        if (!b || b->type != JSON_NUMBER || !b->is_integer || en->type != JSON_NUMBER || !en->is_integer ||
            b->integer < 0 || en->integer < b->integer) {
            char g1[44], g2[44];
            if (b) snprintf(got, sizeof got, "[%s, %s]", json_describe(b, g1, sizeof g1), json_describe(en, g2, sizeof g2));
            else json_describe(off, got, sizeof got);
            dflash_set_error("%s: tensor \"%s\": field \"data_offsets\": expected [begin, end] with "
                             "0 <= begin <= end, got %s", path, name, got);
            goto done;
        }
        if (en->integer > data_size) {
            dflash_set_error("%s: tensor \"%s\": field \"data_offsets\": expected end <= %lld (the data section), "
                             "got %lld (past the end of the file)", path, name, (long long)data_size, en->integer);
            goto done;
        }
        if (en->integer - b->integer != spec_numel(s) * 4) {
            char sh_s[64];
            shape_str(sh_s, sizeof sh_s, s->shape, s->ndim);
            dflash_set_error("%s: tensor \"%s\": field \"data_offsets\": expected a span of %lld bytes "
                             "(shape %s x 4-byte F32), got %lld", path, name, (long long)spec_numel(s) * 4,
                             sh_s, en->integer - b->integer);
            goto done;
        }
        s->found = 1;
        s->begin = b->integer;
        s->end = en->integer;
    }
    for (int j = 0; j < n_specs; j++)
        if (!specs[j].found) { dflash_set_error("%s: missing tensor \"%s\"", path, specs[j].name); goto done; }

    /* the tensors must tile the data section exactly: no overlap, no hole, nothing after */
    order = xcalloc((size_t)n_specs, sizeof *order, "tensor order");
    if (!order) goto done;
    for (int j = 0; j < n_specs; j++) order[j] = &specs[j];
    qsort(order, (size_t)n_specs, sizeof *order, cmp_begin);
    int64_t at = 0;
    for (int j = 0; j < n_specs; j++) {
        if (order[j]->begin < at) {
            dflash_set_error("%s: tensor \"%s\" overlaps the previous tensor \"%s\" (begins at byte %lld, "
                             "expected %lld)", path, order[j]->name, order[j - 1]->name,
                             (long long)order[j]->begin, (long long)at);
            goto done;
        }
        if (order[j]->begin > at) {
            dflash_set_error("%s: hole of %lld bytes before tensor \"%s\" (begins at byte %lld, expected %lld)", path,
                             (long long)(order[j]->begin - at), order[j]->name, (long long)order[j]->begin,
                             (long long)at);
            goto done;
        }
        at = order[j]->end;
    }
    if (at != data_size) {
        dflash_set_error("%s: %lld trailing bytes after the last tensor (expected the data section to end at "
                         "byte %lld, got %lld)", path, (long long)(data_size - at), (long long)at,
                         (long long)data_size);
        goto done;
    }
    if (data_start) *data_start = (size_t)(8 + hlen);
    rc = 0;
done:
    free(order);
    json_free(&root);
    return rc;
}

/* safetensors_load: check the header against the table, then read every
 * tensor (little-endian F32) into its place, converting to `real`. */
static int safetensors_load(const char *path, TensorSpec *specs, int n_specs, Model *m) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);  /* a FIFO must not block the open */
    if (fd < 0) { dflash_set_error("%s: cannot open: %s", path, strerror(errno)); return -1; }
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        close(fd);
        dflash_set_error("%s: expected a regular file, got %s", path, dir ? "a directory" : "a special file");
        return -1;
    }
    int64_t fsize = (int64_t)st.st_size;
    if (fsize < 8) {  /* also keeps mmap away from an empty file */
        close(fd);
        dflash_set_error("%s: expected at least the 8-byte header length, got a file of %lld bytes", path,
                         (long long)fsize);
        return -1;
    }
    /* Map the file instead of reading it: the weights are used in place
     * (float build), with no copy and no zeroed pages to fill. MAP_PRIVATE
     * makes a write (a test poking a weight) copy-on-write, never to disk. */
    unsigned char *map = mmap(NULL, (size_t)fsize, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) { dflash_set_error("%s: cannot map: %s", path, strerror(errno)); return -1; }
    int rc = -1;
    size_t data_start;
    if (safetensors_check_header(map, (size_t)fsize, specs, n_specs, path, &data_start) != 0) goto done;

    /* the data: F32 little-endian, refusing NaN and Inf. In the float build
     * the weights stay in the mapping (every tensor begins at a multiple of 4
     * bytes from the data section, so only the section must be aligned);
     * otherwise they are converted into Model.data. */
    const unsigned char *data = map + data_start;
    int in_place = sizeof(real) == sizeof(float) && data_start % sizeof(float) == 0;
    if (!in_place) {
        size_t total = 0;
        for (int j = 0; j < n_specs; j++) total += (size_t)spec_numel(&specs[j]);
        m->data = xcalloc(total, sizeof(real), "weights");
        if (!m->data) goto done;
    }
    real *conv = m->data;
    for (int j = 0; j < n_specs; j++) {
        TensorSpec *s = &specs[j];
        int64_t numel = spec_numel(s);
        const unsigned char *src = data + s->begin;
        /* x - x is 0 for every finite x and NaN for NaN and Inf; this form
         * lets the compiler check many values per instruction */
        int nonfinite = 0;
        for (int64_t i = 0; i < numel; i++) {
            float x;
            memcpy(&x, src + 4 * i, 4);
            nonfinite |= !(x - x == 0);
        }
        if (nonfinite)
            for (int64_t i = 0; i < numel; i++) {
                float x;
                memcpy(&x, src + 4 * i, 4);
                if (!isfinite(x)) {
                    dflash_set_error("%s: tensor \"%s\": element %lld: expected a finite F32, got %s", path, s->name,
                                     (long long)i, isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf");
                    goto done;
                }
            }
        if (in_place) {
            *s->dst = (real *)(void *)(map + data_start + s->begin);
        } else {
            for (int64_t i = 0; i < numel; i++) {
                float x;
                memcpy(&x, src + 4 * i, 4);
                conv[i] = (real)x;
            }
            *s->dst = conv;
            conv += numel;
        }
    }
    m->map = map;
    m->map_size = (size_t)fsize;
    map = NULL;
    rc = 0;
done:
    if (map) munmap(map, (size_t)fsize);
    return rc;
}

static int host_is_little_endian(void) {
    uint32_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* model_load: dir/config.json and dir/model.safetensors. */
int model_load(Model *m, const char *dir, int expect_draft) {
    memset(m, 0, sizeof *m);
    if (!host_is_little_endian()) { dflash_set_error("this program reads little-endian files on little-endian hosts only"); return -1; }
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = read_file(path, 1 << 20, &len);
    if (!text) return -1;
    int rc = config_parse(&m->cfg, path, text, len, expect_draft);
    free(text);
    if (rc != 0) return -1;

    TensorSpec *specs = NULL;
    int n_specs = 0;
    m->layers = xcalloc((size_t)m->cfg.num_hidden_layers, sizeof(LayerWeights), "layers");
    m->inv_freq = xcalloc((size_t)m->cfg.head_dim / 2, sizeof(real), "inv_freq");
    if (!m->layers || !m->inv_freq || tensor_table(m, &specs, &n_specs) != 0) goto fail;
    size_t total = 0;
    for (int j = 0; j < n_specs; j++) total += (size_t)spec_numel(&specs[j]);
    if (total > ((size_t)1 << 31)) { dflash_set_error("%s: model too large (%zu parameters)", dir, total); goto fail; }
    m->n_params = total;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (safetensors_load(path, specs, n_specs, m) != 0) goto fail;
    rope_inv_freq(m->inv_freq, m->cfg.head_dim, m->cfg.rope_theta);
    free(specs);
    return 0;
fail:
    free(specs);
    model_free(m);
    return -1;
}

void model_free(Model *m) {
    free(m->data);
    if (m->map) munmap(m->map, m->map_size);
    free(m->layers);
    free(m->inv_freq);
    memset(m, 0, sizeof *m);
}

/* check_pair: the draft and the target must agree where they share tensors. */
int check_pair(const Model *target, const Model *draft) {
    const Config *t = &target->cfg, *d = &draft->cfg;
    const char *field = NULL, *their = NULL;
    int want = 0, got = 0;
    if (d->hidden_size != t->hidden_size) {
        field = "hidden_size", their = "hidden_size", want = t->hidden_size, got = d->hidden_size;
    } else if (d->vocab_size != t->vocab_size) {
        field = "vocab_size", their = "vocab_size", want = t->vocab_size, got = d->vocab_size;
    } else if (d->num_target_layers != t->num_hidden_layers) {
        field = "num_target_layers", their = "num_hidden_layers", want = t->num_hidden_layers, got = d->num_target_layers;
    }
    if (field) {
        dflash_set_error("draft config.json: field \"%s\": expected %d (the target config.json's %s), got %d",
                         field, want, their, got);
        return -1;
    }
    return 0;
}

/* ---- vocab.txt: one token per line, line number = token id */

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* vocab_parse: text (len bytes + a NUL, malloc'd) becomes v's storage,
 * also on failure (then it is freed). */
static int vocab_parse(Vocab *v, const char *path, char *text, size_t len) {
    memset(v, 0, sizeof *v);
    if (len == 0) { free(text); dflash_set_error("%s: empty (expected one token per line)", path); return -1; }
    if (memchr(text, 0, len)) { free(text); dflash_set_error("%s: contains a NUL byte", path); return -1; }
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {  /* it would silently become part of token 0 */
        free(text);
        dflash_set_error("%s: line 1 (token id 0): starts with a UTF-8 byte order mark; save the file without BOM", path);
        return -1;
    }
    int lines = 0;
    for (size_t i = 0; i < len; i++) if (text[i] == '\n') lines++;
    if (text[len - 1] != '\n') lines++;
    v->text = text;
    v->words = xcalloc((size_t)lines, sizeof(char *), "vocab");
    if (!v->words) { vocab_free(v); return -1; }
    char *s = text;
    for (int i = 0; i < lines; i++) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = 0;
        size_t wl = strlen(s);
        if (wl && s[wl - 1] == '\r') s[--wl] = 0;
        if (wl == 0) { dflash_set_error("%s: line %d (token id %d) is empty", path, i + 1, i); vocab_free(v); return -1; }
        for (size_t k = 0; k < wl; k++)
            if (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\v' || s[k] == '\f') {
                dflash_set_error("%s: line %d (token id %d) contains white space", path, i + 1, i);
                vocab_free(v);
                return -1;
            }
        for (size_t k = 0; k < wl;) {
            int sl = utf8_seq_len((const unsigned char *)s + k, wl - k);
            if (sl == 0 || (unsigned char)s[k] < 0x20 || s[k] == 0x7f) {
                dflash_set_error("%s: line %d (token id %d): expected printable UTF-8, got byte 0x%02x at "
                                 "column %zu", path, i + 1, i, (unsigned char)s[k], k + 1);
                vocab_free(v);
                return -1;
            }
            k += (size_t)sl;
        }
        v->words[i] = s;
        v->n = i + 1;
        s = nl ? nl + 1 : s + wl;
    }
    /* duplicates: sort a copy of the word pointers, then name both ids */
    const char **sorted = malloc(sizeof(char *) * (size_t)v->n);
    if (!sorted) { dflash_set_error("%s: out of memory", path); vocab_free(v); return -1; }
    memcpy(sorted, v->words, sizeof(char *) * (size_t)v->n);
    qsort(sorted, (size_t)v->n, sizeof(char *), cmp_str);
    for (int i = 1; i < v->n; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            int first = vocab_find(v, sorted[i]), second = first + 1;
            while (strcmp(v->words[second], sorted[i]) != 0) second++;
            dflash_set_error("%s: token \"%.100s\" appears more than once (ids %d and %d)", path, sorted[i],
                             first, second);
            free(sorted);
            vocab_free(v);
            return -1;
        }
    free(sorted);
    return 0;
}

int vocab_load(Vocab *v, const char *path) {
    memset(v, 0, sizeof *v);
    size_t len;
    char *text = read_file(path, 64u << 20, &len);
    if (!text) return -1;
    return vocab_parse(v, path, text, len);
}

/* check_vocab: vocab.txt against the configs. It must have the target's
 * vocab_size tokens, and, when a draft is loaded, the draft's mask_token_id
 * must be the id of the token "<mask>" (a vocab without "<mask>", or with a
 * different word at that id, is refused: the draft would read a real word as
 * its mask). draft may be NULL (block size 1, --mode ar): no mask check. */
int check_vocab(const Vocab *v, const char *path, const Model *target, const Model *draft) {
    if (v->n != target->cfg.vocab_size) {
        dflash_set_error("%s: expected %d tokens (vocab_size in the target config.json), got %d", path,
                         target->cfg.vocab_size, v->n);
        return -1;
    }
    if (draft) {
        int mask = draft->cfg.mask_token_id, at = vocab_find(v, "<mask>");
        if (mask < 0 || mask >= v->n || strcmp(v->words[mask], "<mask>") != 0) {
            if (at < 0)
                dflash_set_error("%s: no token \"<mask>\", but the draft config.json names mask_token_id %d "
                                 "(expected \"<mask>\" on line %d)", path, mask, mask + 1);
            else
                dflash_set_error("%s: token id %d (the draft's mask_token_id): expected \"<mask>\", got \"%.100s\" "
                                 "(\"<mask>\" is id %d)", path, mask, mask >= 0 && mask < v->n ? v->words[mask] : "",
                                 at);
            return -1;
        }
    }
    return 0;
}

void vocab_free(Vocab *v) {
    free(v->words);
    free(v->text);
    memset(v, 0, sizeof *v);
}

int vocab_find(const Vocab *v, const char *word) {
    for (int i = 0; i < v->n; i++) if (strcmp(v->words[i], word) == 0) return i;
    return -1;
}

/* tokenize: split on white space; every "." is a token of its own. */
int tokenize(const Vocab *v, const char *text, int *ids, int cap, int *n_ids) {
    int n = 0, word_no = 0;
    const char *s = text;
    char word[256];
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f') s++;
        if (!*s) break;
        size_t wl = 0;
        if (*s == '.') wl = 1;
        else
            while (s[wl] && s[wl] != '.' && s[wl] != ' ' && s[wl] != '\t' && s[wl] != '\n' &&
                   s[wl] != '\r' && s[wl] != '\v' && s[wl] != '\f')
                wl++;
        if (wl >= sizeof word) {
            dflash_set_error("--prompt: word %d (\"%.40s...\"): expected a word from vocab.txt, got %zu bytes, "
                             "longer than any (%zu); give token ids with --ids", word_no + 1, s, wl, sizeof word - 1);
            return -1;
        }
        memcpy(word, s, wl);
        word[wl] = 0;
        int id = vocab_find(v, word);
        if (id < 0) {
            dflash_set_error("--prompt: word %d, \"%s\", is not in the vocabulary; "
                             "use words from vocab.txt, or give token ids with --ids", word_no + 1, word);
            return -1;
        }
        if (n >= cap) { dflash_set_error("--prompt: expected at most %d tokens, got more", cap); return -1; }
        ids[n++] = id;
        word_no++;
        s += wl;
    }
    if (n == 0) { dflash_set_error("--prompt: expected at least one word, got an empty prompt"); return -1; }
    *n_ids = n;
    return 0;
}

/* ===========================================================================
 * 9. The command line
 * ======================================================================== */
#ifndef DFLASH_NO_MAIN

static const char *USAGE =
    "usage: dflash [--weights DIR] [--prompt TEXT | --ids 2,3,4] [--max-new-tokens N]\n"
    "              [--block-size B] [--temperature T] [--seed S] [--mode dflash|ar]\n"
    "              [--print-ids] [--rounds] [--ignore-eos]\n"
    "              [--trace DIR] [--trace-text FILE|-] [--trace-filter GLOB]...\n"
    "       dflash diff DIR_A DIR_B [--rtol R] [--atol A]\n"
    "       dflash bench\n"
    "With no arguments: the walkthrough run (\"The cat sat\", block 4) with a per-round summary.\n";

typedef struct {
    const char *weights, *prompt, *ids, *mode, *trace_dir, *trace_text;
    const char *filters[32];
    int n_filters;
    int max_new_tokens, block_size, print_ids, rounds, ignore_eos;
    double temperature;
    uint64_t seed;
} Args;

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    /* strtol would also take " 5" and "+5": only digits, with an optional '-' */
    if (!(*s == '-' || (*s >= '0' && *s <= '9')) || *end || errno) {
        dflash_set_error("%s: expected an integer in %ld..%ld, got \"%.100s\"", flag, lo, hi, s);
        return -1;
    }
    if (v < lo || v > hi) { dflash_set_error("%s: expected an integer in %ld..%ld, got %ld", flag, lo, hi, v); return -1; }
    *out = v;
    return 0;
}

/* 0: run; 1: --help was asked for; -1: bad arguments (dflash_errmsg) */
static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->max_new_tokens = 16;
    a->block_size = -1;  /* from the draft's config.json */
    a->mode = "dflash";
    a->rounds = argc == 1;  /* the bare walkthrough run shows its rounds */
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        long v;
        int has_value = i + 1 < argc;
        const char *val = has_value ? argv[i + 1] : NULL;
        /* a flag's value may not look like a flag: "--weights --prompt x" */
        if (has_value && strncmp(val, "--", 2) == 0 && val[2]) has_value = 0;
#define NEED_VALUE() do { if (!has_value) { \
            dflash_set_error("%s: missing value%s%.100s%s", f, val ? " (the next argument, \"" : "", \
                             val ? val : "", val ? "\", is a flag)" : ""); return -1; } i++; } while (0)
        if (strcmp(f, "--weights") == 0) { NEED_VALUE(); a->weights = val; }
        else if (strcmp(f, "--prompt") == 0) { NEED_VALUE(); a->prompt = val; }
        else if (strcmp(f, "--ids") == 0) { NEED_VALUE(); a->ids = val; }
        else if (strcmp(f, "--mode") == 0) {
            NEED_VALUE();
            if (strcmp(val, "dflash") != 0 && strcmp(val, "ar") != 0) {
                dflash_set_error("--mode: expected dflash or ar, got \"%.100s\"", val);
                return -1;
            }
            a->mode = val;
        } else if (strcmp(f, "--max-new-tokens") == 0) {
            NEED_VALUE();
            if (parse_int(f, val, 0, 1 << 20, &v)) return -1;
            a->max_new_tokens = (int)v;
        } else if (strcmp(f, "--block-size") == 0) {
            NEED_VALUE();
            if (parse_int(f, val, 1, DFLASH_MAX_BLOCK, &v)) return -1;
            a->block_size = (int)v;
        } else if (strcmp(f, "--seed") == 0) {
            NEED_VALUE();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            /* strtoull would take " -1" (as 2^64 - 1): digits only */
            if (!(*val >= '0' && *val <= '9') || *end || errno) {
                dflash_set_error("--seed: expected an integer in 0..%llu, got \"%.100s\"", ~0ull, val);
                return -1;
            }
            a->seed = s;
        } else if (strcmp(f, "--temperature") == 0) {
            NEED_VALUE();
            char *end;
            double t = strtod(val, &end);
            if (!*val || *end || !isfinite(t) || t < 0) {
                dflash_set_error("--temperature: expected a finite number >= 0, got \"%.100s\"", val);
                return -1;
            }
            a->temperature = t;
        } else if (strcmp(f, "--trace") == 0) { NEED_VALUE(); a->trace_dir = val; }
        else if (strcmp(f, "--trace-text") == 0) { NEED_VALUE(); a->trace_text = val; }
        else if (strcmp(f, "--trace-filter") == 0) {
            NEED_VALUE();
            if (a->n_filters == 32) { dflash_set_error("--trace-filter: expected at most 32, got more"); return -1; }
            a->filters[a->n_filters++] = val;
        } else if (strcmp(f, "--print-ids") == 0) a->print_ids = 1;
        else if (strcmp(f, "--rounds") == 0) a->rounds = 1;
        else if (strcmp(f, "--ignore-eos") == 0) a->ignore_eos = 1;
        else if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) return 1;
        else if (f[0] == '-') { dflash_set_error("unknown flag \"%.100s\" (see --help)", f); return -1; }
        else { dflash_set_error("unexpected argument \"%.100s\": expected a flag (see --help)", f); return -1; }
#undef NEED_VALUE
    }
    if (a->prompt && a->ids) { dflash_set_error("--prompt and --ids: expected one of them, got both"); return -1; }
    if (!a->prompt && !a->ids) a->prompt = "The cat sat";
    return 0;
}

static int parse_ids(const char *s, int *ids, int cap, int *n_out) {
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (!(*p >= '0' && *p <= '9') || errno || v > 0x7fffffff || (*end && *end != ',')) {
            dflash_set_error("--ids: expected comma-separated non-negative integers, got \"%.100s\" "
                             "(id %d)", s, n + 1);
            return -1;
        }
        if (n >= cap) { dflash_set_error("--ids: expected at most %d ids, got more", cap); return -1; }
        ids[n++] = (int)v;
        if (!*end) break;
        p = end + 1;
    }
    *n_out = n;
    return 0;
}

/* words of ids[0..n) joined by spaces ("." sticks to the word before it) */
static void print_words(FILE *out, const Vocab *v, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        const char *w = ids[i] >= 0 && ids[i] < v->n ? v->words[ids[i]] : "<?>";
        fprintf(out, "%s%s", i == 0 || strcmp(w, ".") == 0 ? "" : " ", w);
    }
}

static void print_list(FILE *out, const Vocab *v, const int *ids, int n) {
    fputc('[', out);
    for (int i = 0; i < n; i++) fprintf(out, i ? " %s" : "%s", ids[i] >= 0 && ids[i] < v->n ? v->words[ids[i]] : "<?>");
    fputc(']', out);
}

static void print_rounds(const GenResult *r, const Vocab *v, int B, int n_prompt, int first_new) {
    printf("prefill: ");
    print_words(stdout, v, r->output_ids, n_prompt);
    printf(" at positions 0..%d -> \"%s\" (position %d)\n", n_prompt - 1, v->words[first_new], n_prompt);
    for (int i = 0; i < r->n_rounds; i++) {
        const RoundInfo *ri = &r->rounds[i];
        int acc = ri->acceptance_length;
        printf("round %d: block in   ", i + 1);
        print_list(stdout, v, ri->block_in, B);
        printf(" at positions %d..%d\n", ri->start_before, ri->start_before + B - 1);
        if (B > 1) {
            printf("         draft       ");
            print_list(stdout, v, ri->block + 1, B - 1);
            printf("\n");
        }
        printf("         posterior   ");
        print_list(stdout, v, ri->posterior, B);
        printf("\n         match [");
        for (int j = 0; j + 1 < B; j++) printf(j ? " %d" : "%d", ri->match[j]);
        printf("]  cumprod [");
        for (int j = 0; j + 1 < B; j++) printf(j ? " %d" : "%d", ri->cumprod[j]);
        printf("]  acceptance length %d: keep ", acc);
        print_list(stdout, v, ri->block, acc + 1);
        printf(" + bonus \"%s\"\n", v->words[ri->posterior[acc]]);
        printf("         start %d -> %d; target cache %d positions (0..%d)", ri->start_before,
               ri->start_after, ri->target_cache_after, ri->target_cache_after - 1);
        if (B > 1)
            printf("; draft cache %d -> %d positions (0..%d)", ri->draft_cache_before, ri->draft_cache_after,
                   ri->draft_cache_after - 1);
        printf("\n");
    }
}

/* ---------------------------------------------------------------------------
 * dflash bench: DFlash against target-only decoding, same binary, same run.
 * Every number is a ratio or a count measured in this one process, so a noisy
 * shared machine moves both sides alike.
 */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static long peak_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;  /* kilobytes on Linux */
}

#define BENCH_REPS 5

/* The cost of a T-token target forward relative to a 1-token forward, on a
 * cache already holding `ctx` positions (median of reps). */
static double bench_forward_cost(const Model *target, int ctx) {
    const Config *c = &target->cfg;
    KVCache kv;
    TargetRun tr;
    TraceCtx off = {0};
    int ids[8] = {1, 2, 3, 4, 5, 6, 7, 8}, *pre = calloc((size_t)ctx, sizeof(int));
    if (!pre || cache_init(&kv, c, ctx + 8) != 0 || target_run_init(&tr, c, ctx > 8 ? ctx : 8, ctx + 8) != 0) {
        fprintf(stderr, "dflash bench: %s\n", dflash_errmsg);
        free(pre);
        return -1;
    }
    for (int i = 0; i < ctx; i++) pre[i] = i % c->vocab_size;
    target_forward(target, &kv, &tr, pre, ctx, ctx - 1, &off);
    double base = 0, cost4 = 0;
    printf("\ncost of a T-token target forward relative to a 1-token forward (cache of %d positions):\n  T    ", ctx);
    for (int T = 1; T <= 8; T++) printf("%6d", T);
    printf("\n  cost ");
    for (int T = 1; T <= 8; T++) {
        double t[9];
        for (int r = 0; r < 9; r++) {
            double t0 = now_seconds();
            target_forward(target, &kv, &tr, ids, T, 0, &off);
            t[r] = now_seconds() - t0;
            cache_crop(&kv, ctx);
        }
        double m = median(t, 9);
        if (T == 1) base = m;
        if (T == 4) cost4 = m / base;
        printf("%6.2f", m / base);
    }
    printf("   (1-token forward: %.1f ms)\n", 1e3 * base);
    free(pre);
    cache_free(&kv);
    target_run_free(&tr);
    return cost4;
}

typedef struct {
    const char *prompt;
    int max_new;
    int ignore_eos;   /* 1: a long run past <eos> (the "long runs" total) */
} BenchCase;

typedef struct {
    double speedup_all, speedup_long;  /* total AR time / total DFlash time */
    double cost4;                      /* 4-token forward / 1-token forward */
    size_t bytes;                      /* weights + the largest KV caches */
} BenchSummary;

static int bench_set(const char *set, const BenchCase *cases, int n_cases, BenchSummary *sum) {
    char path[1024];
    Model target, draft;
    Vocab vocab;
    int rc = -1;
    memset(&target, 0, sizeof target);
    memset(&draft, 0, sizeof draft);
    memset(&vocab, 0, sizeof vocab);
    snprintf(path, sizeof path, "%s/vocab.txt", set);
    if (vocab_load(&vocab, path) != 0) goto done;
    snprintf(path, sizeof path, "%s/target", set);
    if (model_load(&target, path, 0) != 0) goto done;
    snprintf(path, sizeof path, "%s/draft", set);
    if (model_load(&draft, path, 1) != 0) goto done;
    if (check_pair(&target, &draft) != 0) goto done;
    int B = draft.cfg.block_size, eos = vocab_find(&vocab, "<eos>");
    size_t kv_bytes = 0;
    double sum_ar = 0, sum_df = 0;   /* total time of each side over every case */
    double long_ar = 0, long_df = 0; /* ... over the long runs */
    printf("\n== %s (block size %d)\n", set, B);
    printf("%-22s %5s %6s %6s %5s  %-16s %8s %8s %8s %9s %9s %8s\n", "prompt", "new", "fwd AR", "fwd DF", "tau",
           "tau histogram", "prefill", "draft", "verify", "tok/s AR", "tok/s DF", "speedup");
    for (int ci = 0; ci < n_cases; ci++) {
        int ids[256], n;
        if (tokenize(&vocab, cases[ci].prompt, ids, 256, &n) != 0) goto done;
        GenParams p = {0};
        p.max_new_tokens = cases[ci].max_new;
        p.block_size = B;
        if (!cases[ci].ignore_eos && eos >= 0) p.stop_ids[p.n_stop++] = eos;
        double t_ar[BENCH_REPS], t_df[BENCH_REPS], pre[BENCH_REPS], dr[BENCH_REPS], ve[BENCH_REPS];
        GenResult ar = {0}, df = {0};
        for (int r = 0; r < BENCH_REPS; r++) {
            gen_result_free(&ar);
            gen_result_free(&df);
            /* alternate the order so drift on a shared machine hits both */
            for (int side = 0; side < 2; side++) {
                int do_ar = (side + r) % 2 == 0;
                double t0 = now_seconds();
                int grc = do_ar ? ar_generate(&target, ids, n, &p, &ar)
                                : dflash_generate(&draft, &target, ids, n, &p, &df);
                double el = now_seconds() - t0;
                if (grc != 0) goto done;
                if (do_ar) t_ar[r] = el;
                else { t_df[r] = el; pre[r] = df.seconds_prefill; dr[r] = df.seconds_draft; ve[r] = df.seconds_verify; }
            }
        }
        if (ar.n_output != df.n_output || memcmp(ar.output_ids, df.output_ids, sizeof(int) * (size_t)ar.n_output)) {
            dflash_set_error("%s: \"%s\": DFlash output differs from autoregressive output", set, cases[ci].prompt);
            gen_result_free(&ar);
            gen_result_free(&df);
            goto done;
        }
        int hist[DFLASH_MAX_BLOCK + 1] = {0}, tot = 0;
        for (int i = 0; i < df.n_rounds; i++) { hist[df.rounds[i].acceptance_length + 1]++; tot += df.rounds[i].acceptance_length + 1; }
        char h[64] = "", *hp = h;
        for (int t = 1; t <= B && hp < h + sizeof h - 8; t++) hp += snprintf(hp, (size_t)(h + sizeof h - hp), "%s%d", t > 1 ? "/" : "", hist[t]);
        int new_tokens = df.n_output - df.n_prompt;
        double mar = median(t_ar, BENCH_REPS), mdf = median(t_df, BENCH_REPS);
        sum_ar += mar;
        sum_df += mdf;
        if (cases[ci].ignore_eos) { long_ar += mar; long_df += mdf; }
        printf("%-22s %5d %6d %6d %5.2f  %-16s %7.1fms %7.1fms %7.1fms %9.1f %9.1f %7.2fx\n", cases[ci].prompt,
               new_tokens, ar.target_forwards, df.target_forwards, df.n_rounds ? (double)tot / df.n_rounds : 0.0, h,
               1e3 * median(pre, BENCH_REPS), 1e3 * median(dr, BENCH_REPS), 1e3 * median(ve, BENCH_REPS),
               new_tokens / mar, new_tokens / mdf, mar / mdf);
        size_t kv = 2 * sizeof(real) * (size_t)(n + p.max_new_tokens + B) *
                    ((size_t)target.cfg.num_hidden_layers * target.cfg.num_key_value_heads * target.cfg.head_dim +
                     (size_t)draft.cfg.num_hidden_layers * draft.cfg.num_key_value_heads * draft.cfg.head_dim);
        if (kv > kv_bytes) kv_bytes = kv;
        gen_result_free(&ar);
        gen_result_free(&df);
    }
    printf("%-22s %5s %6s %6s %5s  %-16s %8s %8s %8s %9s %9s %7.2fx\n", "total, all runs", "", "", "", "", "", "",
           "", "", "", "", sum_ar / sum_df);
    if (long_df > 0)
        printf("%-22s %5s %6s %6s %5s  %-16s %8s %8s %8s %9s %9s %7.2fx\n", "total, long runs", "", "", "", "", "", "",
               "", "", "", "", long_ar / long_df);
    sum->speedup_all = sum_ar / sum_df;
    sum->speedup_long = long_df > 0 ? long_ar / long_df : 0;
    printf("(tau: tokens per verification, bonus included; histogram: rounds with tau = 1/2/.../B;\n"
           " times are medians of %d repetitions, DFlash side split into prefill / draft / verify;\n"
           " speedup = AR time / DFlash time for the same output, checked equal)\n", BENCH_REPS);
    sum->cost4 = bench_forward_cost(&target, 16);
    sum->bytes = sizeof(real) * (target.n_params + draft.n_params) + kv_bytes;
    rc = 0;
done:
    model_free(&target);
    model_free(&draft);
    vocab_free(&vocab);
    return rc;
}

static int bench_main(void) {
    /* The walkthrough set: the two stories (short: the prefill, paid by both
     * sides, weighs on the ratio) and long runs past <eos> (the successor
     * table loops), where the ratio approaches tau x (1-token cost) /
     * (B-token verify + draft cost). */
    static const BenchCase walk[] = {
        {"The cat sat", 16, 0}, {"A dog", 16, 0}, {"The cat sat", 64, 1}, {"She reads", 64, 1},
    };
    static const BenchCase rnd[] = {
        {"The cat sat", 32, 1}, {"A dog saw one red bird", 32, 1},
    };
    BenchSummary w = {0}, r = {0};
    double t0 = now_seconds();
    printf("dflash bench: DFlash vs target-only decoding, greedy, %s build\n", REAL_NAME);
    if (bench_set("toy_weights/walkthrough", walk, 4, &w) != 0) return -1;
    if (bench_set("toy_weights/random", rnd, 2, &r) != 0) return -1;
    long rss = peak_rss_kb();
    double want = (double)(w.bytes > r.bytes ? w.bytes : r.bytes) / 1024;
    double excess = (rss - want) / want;
    printf("\npeak resident memory: %.1f MiB; weights + KV caches of the larger set: %.1f MiB (%+.1f%%)\n",
           rss / 1024.0, want / 1024, 100.0 * excess);
    printf("\ntargets (ratios measured in this run):\n");
    printf("  walkthrough set, long runs: DFlash %.2fx faster than AR (target >= 2.5x): %s\n", w.speedup_long,
           w.speedup_long >= 2.5 ? "met" : "NOT met");
    printf("  walkthrough set, all runs incl. the short stories: %.2fx (the prefill, paid by both, weighs on "
           "8-token runs)\n", w.speedup_all);
    printf("  4-token target forward / 1-token forward: %.2f (target <= 1.6): %s\n", w.cost4,
           w.cost4 <= 1.6 ? "met" : "NOT met");
    printf("  peak memory within 10%% of weights + KV caches: %s\n", excess <= 0.10 ? "met" : "NOT met");
    printf("(bench took %.1f s)\n", now_seconds() - t0);
    return 0;
}


static int file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "diff") == 0) return trace_diff_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        if (argc > 2) { fprintf(stderr, "dflash: bench takes no arguments\n"); return 2; }
        if (bench_main() != 0) { dflash_print_error("dflash bench", ""); return 2; }
        return 0;
    }
    Args a;
    int pa = parse_args(argc, argv, &a);
    if (pa < 0) { dflash_print_error("dflash", ""); return 2; }
    if (pa == 1) { fputs(USAGE, stdout); return 0; }
    if (!a.weights)
        a.weights = file_exists("toy_weights/walkthrough/target/model.safetensors") ? "toy_weights/walkthrough"
                                                                                     : "toy_weights/random";
    char path[4096], vocab_path[4096];
    Model target, draft;
    Vocab vocab;
    int have_draft = 0, rc = 2;
    Tracer *tracer = NULL;
    GenResult res = {0};
    memset(&target, 0, sizeof target);
    memset(&draft, 0, sizeof draft);
    memset(&vocab, 0, sizeof vocab);

    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", a.weights);
    if (vocab_load(&vocab, vocab_path) != 0) goto fail;
    snprintf(path, sizeof path, "%s/target", a.weights);
    if (model_load(&target, path, 0) != 0) goto fail;
    int dflash_mode = strcmp(a.mode, "dflash") == 0;
    if (dflash_mode && a.block_size != 1) {
        snprintf(path, sizeof path, "%s/draft", a.weights);
        if (model_load(&draft, path, 1) != 0) goto fail;
        have_draft = 1;
        if (check_pair(&target, &draft) != 0) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("%.500s: %s", a.weights, msg);  /* name the weight set */
            goto fail;
        }
        if (a.block_size < 0) a.block_size = draft.cfg.block_size;
    }
    if (check_vocab(&vocab, vocab_path, &target, have_draft ? &draft : NULL) != 0) goto fail;
    if (a.block_size < 0) a.block_size = 1;

    GenParams p = {0};
    p.max_new_tokens = a.max_new_tokens;
    p.block_size = dflash_mode ? a.block_size : 1;
    p.temperature = a.temperature;
    p.seed = a.seed;
    int eos = vocab_find(&vocab, "<eos>");
    if (!a.ignore_eos && eos >= 0) p.stop_ids[p.n_stop++] = eos;

    int cap = 1 << 16, n_prompt = 0;
    int *prompt = malloc(sizeof(int) * (size_t)cap);
    if (!prompt) { dflash_set_error("out of memory"); goto fail; }
    int tok_rc = a.ids ? parse_ids(a.ids, prompt, cap, &n_prompt) : tokenize(&vocab, a.prompt, prompt, cap, &n_prompt);
    for (int i = 0; tok_rc == 0 && a.ids && i < n_prompt; i++)
        if (prompt[i] >= vocab.n) {
            dflash_set_error("--ids: id %d (position %d): expected a token id in 0..%d (%s), got %d", i + 1, i,
                             vocab.n - 1, vocab_path, prompt[i]);
            tok_rc = -1;
        }
    /* every check of the run's arguments before any output file is opened */
    if (tok_rc == 0 && check_gen_args(&target, n_prompt, &p, p.block_size, prompt) != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("%s (%.500s/target/config.json)", msg, a.weights);
        tok_rc = -1;
    }
    if (tok_rc != 0) { free(prompt); goto fail; }

    if (a.trace_dir || a.trace_text) {
        if (!dflash_mode) { free(prompt); dflash_set_error("--trace: traces are written in --mode dflash only"); goto fail; }
        tracer = trace_open(a.trace_dir, a.trace_text, a.filters, a.n_filters);
        if (!tracer) { free(prompt); goto fail; }
        trace_set_vocab(tracer, &vocab);
        p.tracer = tracer;
    }
    int gen_rc = dflash_mode ? dflash_generate(have_draft ? &draft : NULL, &target, prompt, n_prompt, &p, &res)
                             : ar_generate(&target, prompt, n_prompt, &p, &res);
    free(prompt);
    if (tracer) {
        /* a failed run leaves no trace behind (an earlier one stays) */
        int close_rc = gen_rc == 0 ? trace_close(tracer) : (trace_discard(tracer), -1);
        tracer = NULL;
        if (gen_rc == 0 && close_rc != 0) gen_rc = -1;
    }
    if (gen_rc != 0) goto fail;

    if (a.rounds && dflash_mode) print_rounds(&res, &vocab, p.block_size, res.n_prompt, res.output_ids[res.n_prompt < res.n_output ? res.n_prompt : 0]);
    /* the decoded text, without the stop token */
    int shown = res.n_output;
    if (shown > res.n_prompt && p.n_stop && res.output_ids[shown - 1] == p.stop_ids[0]) shown--;
    print_words(stdout, &vocab, res.output_ids, shown);
    printf("\n");
    if (a.print_ids) {  /* the output ids, space-separated (as the oracle prints them) */
        for (int i = 0; i < res.n_output; i++) printf(i ? " %d" : "%d", res.output_ids[i]);
        printf("\n");
    }
    int new_tokens = res.n_output - res.n_prompt;
    if (dflash_mode && res.n_rounds > 0) {
        int total = 0;
        for (int i = 0; i < res.n_rounds; i++) total += res.rounds[i].acceptance_length + 1;
        printf("new tokens: %d, target forward passes: %d, mean acceptance length: %.2f "
               "(tokens per verification, bonus included; block size %d)\n",
               new_tokens, res.target_forwards, (double)total / res.n_rounds, p.block_size);
    } else {
        printf("new tokens: %d, target forward passes: %d, mean acceptance length: - (%s)\n", new_tokens,
               res.target_forwards, dflash_mode ? "no verification rounds" : "autoregressive");
    }
    rc = 0;
fail:
    if (rc != 0) dflash_print_error("dflash", "");
    if (tracer) trace_discard(tracer);
    gen_result_free(&res);
    if (have_draft) model_free(&draft);
    model_free(&target);
    vocab_free(&vocab);
    return rc;
}
#endif /* DFLASH_NO_MAIN */
