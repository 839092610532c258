/* dflash.c - DFlash speculative decoding on a toy Qwen3 model, in plain C11.
 *
 * DFlash ("block diffusion" drafting): a small draft model proposes B-1
 * tokens at once for the positions after a known "anchor" token. It sees the
 * block [anchor, mask, mask, ...] and, through KV injection, the target
 * model's hidden states of every earlier position. The target then verifies
 * the whole block in ONE forward pass and keeps the longest agreeing prefix
 * plus one token of its own. Greedy output equals target-only greedy output.
 *
 * This file is the naive float implementation of the whole algorithm and
 * nothing else (files, the command line, the tracer, the trace-name table
 * and the fast matmul live in formats/load.c, cli/main.c, trace.c,
 * formats/tracenames.c and kernel.c), laid out in the order of the
 * walkthrough (walkthrough/README.md):
 *
 *   1. errors, small helpers, and TRACE (handing a tensor to the trace hook)
 *   2. kernels: matmul, rmsnorm, RoPE, softmax, silu, attention; the KV cache
 *   3. the target forward (Qwen3ForCausalLM, output_hidden_states)
 *   4. extract_context_feature (Step 1 of the walkthrough)
 *   5. the draft forward with KV injection (Steps 2-5)
 *   6. sampling
 *   7. dflash_generate (Steps 6-7) and target-only ar_generate
 *
 * Every intermediate goes out through one line, TRACE(trace, buffer, name):
 * with no trace asked for it returns at once.
 *
 * Names follow the reference code (z-lab/dflash, dflash/model.py, and
 * transformers' modeling_qwen3.py; NOTES.md maps each Python function to its
 * C function). Shapes use dflash.h's legend (V vocab, D hidden, L layers, H
 * heads, Hkv KV heads, d head_dim, I MLP, T tokens in a call, B block, n
 * prompt, Lc context rows, S keys), row-major: "(T, D)" is T rows of D values.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L  /* clock_gettime (the run's timings) */
#endif
#include "dflash.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ===========================================================================
 * 1. Errors, small helpers, and TRACE
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
void *xcalloc(size_t n, size_t size, const char *what) {
    if (n == 0) n = 1;
    void *p = calloc(n, size);
    if (!p) dflash_set_error("out of memory allocating %zu x %zu bytes for %s", n, size, what);
    return p;
}

/* reals(rows, cols, what): a zeroed (rows, cols) buffer of reals, sized in
 * size_t (no int overflow), or NULL with dflash_errmsg */
static real *reals(size_t rows, size_t cols, const char *what) {
    return xcalloc(rows * cols, sizeof(real), what);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------
 * Tracing. TRACE(trace, buffer, "name", ...) hands one tensor to the trace
 * hook (dflash.h): its full name ("draft1." + the name), its buffer as it is
 * laid out here and the sizes of the call. Its shape, dtype and meaning are
 * not written here: they are the trace-name table's (formats/tracenames.c), which
 * the hook reads. With no hook (no --trace) TRACE returns at once: nothing
 * is formatted, copied or allocated.
 */
struct TraceCtx {
    const TraceHook *hook;  /* NULL: no trace                              */
    TracePhase ph;          /* "prefill" | "draft" | "verify" | "final", round */
    char prefix[32];        /* "prefill", "draft1", "verify1", "" (final)  */
    TraceDims dims;         /* the sizes the table's shapes refer to       */
    int sizes[2][4];        /* I, H, Hkv, d of the target [0] and the draft [1]:
                             * dims gets the draft's in a draft phase */
    int failed;             /* the hook failed: the run stops              */
    GenResult *res;         /* trace_end adds each phase's seconds to it   */
    double t_begin;         /* when the phase began (now_seconds)          */
};

static void TRACE(TraceCtx *trace, const void *buffer, const char *name_fmt, ...) {
    if (!trace || !trace->hook || trace->failed) return;
    char name[160];
    int off = trace->prefix[0] ? snprintf(name, sizeof name, "%s.", trace->prefix) : 0;
    va_list ap;
    va_start(ap, name_fmt);
    vsnprintf(name + off, sizeof name - (size_t)off, name_fmt, ap);
    va_end(ap);
    TraceHand hand = {name, trace->ph, buffer, &trace->dims};
    if (trace->hook->tensor(trace->hook->ctx, &hand) != 0) trace->failed = 1;
}

/* trace_start: the TraceCtx of one run; with no hook (NULL) every TRACE line
 * returns at once and only the phases' seconds are kept. The sizes that do
 * not change during the run are set here; trace_sizes sets the per-call ones. */
static TraceCtx *trace_start(TraceCtx *trace, const TraceHook *hook, const Config *tcfg, const Config *dcfg, int n,
                             int B, int n_ids, GenResult *res) {
    memset(trace, 0, sizeof *trace);
    const Config *own[2] = {tcfg, dcfg ? dcfg : tcfg};
    for (int i = 0; i < 2; i++) {
        trace->sizes[i][0] = own[i]->intermediate_size, trace->sizes[i][1] = own[i]->num_attention_heads;
        trace->sizes[i][2] = own[i]->num_key_value_heads, trace->sizes[i][3] = own[i]->head_dim;
    }
    trace->hook = hook;
    trace->res = res;
    trace->ph.phase = "prefill";   /* input_ids is filed under the prefill */
    trace->dims = (TraceDims){.n = n, .B = B, .k = n_ids, .V = tcfg->vocab_size, .D = tcfg->hidden_size,
                              .I = tcfg->intermediate_size, .H = tcfg->num_attention_heads,
                              .Hkv = tcfg->num_key_value_heads, .d = tcfg->head_dim, .L = tcfg->num_hidden_layers};
    if (tcfg->hybrid) {  /* the sizes of the hybrid names (formats/tracenames.c, dflash_hybrid_trace_names) */
        TraceDims *d = &trace->dims;
        d->rd = tcfg->rotary_dim, d->K = tcfg->linear_conv_kernel_dim;
        d->Hk = tcfg->linear_num_key_heads, d->dk = tcfg->linear_key_head_dim;
        d->Hv = tcfg->linear_num_value_heads, d->dv = tcfg->linear_value_head_dim;
        d->C = 2 * d->Hk * d->dk + d->Hv * d->dv;
    }
    return trace;
}

/* the phase and round the next names are filed under; its clock starts */
static void trace_begin(TraceCtx *trace, const char *phase, int round) {
    if (!trace) return;
    trace->t_begin = now_seconds();
    trace->ph.phase = phase;
    trace->ph.round = round;
    if (strcmp(phase, "prefill") == 0) snprintf(trace->prefix, sizeof trace->prefix, "prefill");
    else if (strcmp(phase, "final") == 0) trace->prefix[0] = 0;
    else snprintf(trace->prefix, sizeof trace->prefix, "%s%d", phase, round);
    const int *z = trace->sizes[strcmp(phase, "draft") == 0];  /* the draft's I, H, Hkv, d may differ */
    trace->dims.I = z[0], trace->dims.H = z[1], trace->dims.Hkv = z[2], trace->dims.d = z[3];
}

/* the end of a phase: its seconds go to the result's prefill, draft or verify time */
static void trace_end(TraceCtx *trace) {
    double dt = now_seconds() - trace->t_begin;
    if (strcmp(trace->ph.phase, "prefill") == 0) trace->res->seconds_prefill += dt;
    else if (strcmp(trace->ph.phase, "draft") == 0) trace->res->seconds_draft += dt;
    else trace->res->seconds_verify += dt;
}

/* the sizes of the call being traced (shapes in the table use them) */
static void trace_sizes(TraceCtx *trace, int T, int S, int Lc) {
    if (!trace) return;
    trace->dims.T = T;
    trace->dims.S = S;
    trace->dims.Lc = Lc;
}

static void trace_output_length(TraceCtx *trace, int m) {
    if (trace) trace->dims.m = m;
}

static int trace_failed(const TraceCtx *trace) { return trace && trace->failed; }

/* ===========================================================================
 * 2. Kernels
 * ======================================================================== */

/* check_finite: a forward's logits must be finite (NaN or Inf would be
 * sampled as some token and the run would go on printing garbage). -1 with
 * a message naming the tensor (its trace name), the phase and the round. */
static int check_finite(const real *x, int rows, int cols, const char *phase, int round) {
    for (size_t k = 0; k < (size_t)rows * (size_t)cols; k++) {
        if (isfinite(x[k])) continue;
        dflash_set_error("non-finite logits: %s%.0d.logits (phase %s, round %d) row %zu, token id %zu is %s; the "
                         "weights and config overflow %s here", phase, round, phase, round, k / (size_t)cols,
                         k % (size_t)cols, isnan(x[k]) ? "NaN" : x[k] > 0 ? "+Inf" : "-Inf", REAL_NAME);
        return -1;
    }
    return 0;
}

/* check_sums: the first non-finite sum of a forward (see SumFault) stops
 * the run as non-finite logits do, with one line naming the tensor (its
 * trace name), the phase, the round and the layer. */
static int check_sums(const SumFault *f, const char *phase, int round) {
    if (!f->name) return 0;
    char name[96], where[32] = "not in a layer";
    snprintf(name, sizeof name, f->name, f->layer);
    if (strncmp(f->name, "layers.", 7) == 0) snprintf(where, sizeof where, "layer %d", f->layer);
    dflash_set_error("non-finite intermediate: %s%.0d.%s (phase %s, round %d, %s): the %s is not finite; the "
                     "weights and inputs overflow %s here", phase, round, name, phase, round, where,
                     strstr(name, "attn_weights") ? "softmax's sum of exp(scores)" : "sum of squares of its input",
                     REAL_NAME);
    return -1;
}

/* matmul: out (T, n_out) = x (T, n_in) @ W^T, W (n_out, n_in) as stored by
 * nn.Linear (y = x W^T): out[t][o] = the dot product of row t of x with row
 * o of W.
 *
 * The summation order, fixed here once for every build and every T: each dot
 * product keeps KSUMS = 16 partial sums; partial j adds the products of
 * i = j, j+16, j+32, ... in increasing i (so a last, shorter group when n_in
 * is not a multiple of 16 only reaches the first partials), and the 16
 * partials are then added pairwise (sum_partials). The order depends on n_in
 * only: never on T, on which other tokens share the call, or on the
 * optimisation level (no FMA contraction: -ffp-contract=off). So a token's
 * result is bit-identical whether it is computed alone or inside a block,
 * which is what keeps greedy DFlash exactly lossless here.
 *
 * This loop is the definition, written as plainly as it can be (as llm.c's
 * matmul_forward_naive "serves as an algorithmic reference"). The programs
 * built for speed run kernel.c's matmul instead, the same sums in the same
 * order, a tile of rows and tokens at a time (tests/test_kernel.c: same bits);
 * `weak` lets that one replace this one when kernel.c is linked.
 * Why 16 sums: NOTES.md, "matmul and losslessness".
 */
#define KSUMS 16

/* p[0] + ... + p[15] as a pairwise tree: (p0+p8)+(p4+p12)... in 4 rounds */
static real sum_partials(real *p) {
    for (int half = KSUMS / 2; half >= 1; half /= 2)
        for (int j = 0; j < half; j++) p[j] += p[j + half];
    return p[0];
}

__attribute__((weak))   /* kernel.c's matmul, where it is linked, replaces this one */
void matmul(real *out, const real *x, const real *w, int T, int n_in, int n_out) {
    for (int t = 0; t < T; t++) {
        const real *x_t = x + (size_t)t * n_in;          /* (n_in) row t of x */
        for (int o = 0; o < n_out; o++) {
            const real *w_o = w + (size_t)o * n_in;      /* (n_in) row o of W */
            real part[KSUMS] = {0};
            for (int i = 0; i < n_in; i++) part[i % KSUMS] += w_o[i] * x_t[i];
            out[(size_t)t * n_out + o] = sum_partials(part);
        }
    }
}

/* rmsnorm: out (n) = w * (x / sqrt(mean(x^2) + eps))   (Qwen3RMSNorm)
 * Computed as the reference does: x * rsqrt(var + eps), then weight * that. */
static int rmsnorm(real *out, const real *x, const real *w, int n, real eps) {
    real ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    if (!isfinite(ss)) return -1;  /* NaN/Inf in x, or a square beyond real: the output would be 0 or NaN */
    real var = ss / (real)n;
    real inv = (real)1 / (real)sqrt((double)(var + eps));
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * inv);
    return 0;
}

/* rmsnorm_rows: each of `rows` consecutive vectors of n values, in place
 * safe; -1 when a row's sum of squares was not finite */
__attribute__((weak))   /* kernel.c's, where it is linked, replaces this one */
int rmsnorm_rows(real *out, const real *x, const real *w, int rows, int n, real eps) {
    int bad = 0;
    for (int row = 0; row < rows; row++) bad |= rmsnorm(out + (size_t)row * n, x + (size_t)row * n, w, n, eps);
    return bad;
}

/* sum_fault: keep the first non-finite sum of a forward (a kernel returned
 * -1), named as the trace names the tensor */
static void sum_fault(SumFault *f, const char *name, int layer) {
    if (!f->name) {
        f->name = name;
        f->layer = layer;
    }
}

/* rope_inv_freq: inv_freq (d/2)[i] = 1 / theta^(2i/d)   (Qwen3RotaryEmbedding) */
void rope_inv_freq(real *inv_freq, int head_dim, double theta) {
    for (int i = 0; i < head_dim / 2; i++) {
        real expo = (real)(2 * i) / (real)head_dim;
        real p = (real)pow(theta, (double)expo);
        inv_freq[i] = (real)1 / p;
    }
}

/* rope_llama3 (transformers' _compute_llama3_parameters): wavelengths 2 pi /
 * inv_freq longer than original_max_position_embeddings / low_freq_factor
 * are divided by factor, those shorter than .. / high_freq_factor kept, and
 * the band between blended smoothly. As torch computes it: number / tensor
 * is (1 / tensor) * number, in the working precision. */
void rope_llama3(real *inv_freq, int head_dim, const Config *c) {
    double old_len = c->rope_original_max_position_embeddings, low = c->rope_low_freq_factor, high = c->rope_high_freq_factor;
    real factor = (real)c->rope_factor, low_wavelen = (real)(old_len / low), high_wavelen = (real)(old_len / high);
    for (int i = 0; i < head_dim / 2; i++) {
        real wavelen = ((real)1 / inv_freq[i]) * (real)6.283185307179586;  /* 2 * math.pi / inv_freq */
        real f = wavelen > low_wavelen ? inv_freq[i] / factor : inv_freq[i];
        real smooth = (((real)1 / wavelen) * (real)old_len - (real)low) / (real)(high - low);
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) f = ((real)1 - smooth) * f / factor + smooth * f;
        inv_freq[i] = f;
    }
}

/* rope_cos_sin: for P positions, angles (P, d/2) = pos * inv_freq and
 * cos, sin (P, d) = cos/sin of cat(angles, angles)   (emb = cat(freqs, freqs)) */
void rope_cos_sin(real *angles, real *cos_, real *sin_, const int *pos, int P,
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
real exp_real(real x) {
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
__attribute__((weak))   /* kernel.c's, where it is linked, replaces this one */
void apply_rotary_pos_emb(real *q_rope, real *k_rope, const real *q, const real *k,
                          const real *cos_, const real *sin_, int q_len, int k_len,
                          int n_heads, int n_kv_heads, int head_dim) {
    int q_row0 = k_len - q_len;  /* the first of the last q_len rows */
    for (int t = 0; t < q_len; t++)
        for (int h = 0; h < n_heads; h++)
            rope_apply(q_rope + ((size_t)t * n_heads + h) * head_dim, q + ((size_t)t * n_heads + h) * head_dim,
                       cos_ + (size_t)(q_row0 + t) * head_dim, sin_ + (size_t)(q_row0 + t) * head_dim, head_dim);
    for (int p = 0; p < k_len; p++)
        for (int h = 0; h < n_kv_heads; h++)
            rope_apply(k_rope + ((size_t)p * n_kv_heads + h) * head_dim, k + ((size_t)p * n_kv_heads + h) * head_dim,
                       cos_ + (size_t)p * head_dim, sin_ + (size_t)p * head_dim, head_dim);
}

/* softmax in place over n values: exp(x - max) / sum; -1 when the sum is
 * not finite (a NaN or an infinite score) */
static int softmax(real *x, int n) {
    real mx = x[0];
    for (int i = 1; i < n; i++) if (x[i] > mx) mx = x[i];
    real sum = 0;
    for (int i = 0; i < n; i++) { x[i] = exp_real(x[i] - mx); sum += x[i]; }
    for (int i = 0; i < n; i++) x[i] = x[i] / sum;
    return isfinite(sum) ? 0 : -1;
}

/* silu(x) = x * sigmoid(x) = x / (1 + exp(-x)) */
real silu(real x) { return x / ((real)1 + exp_real(-x)); }

/* argmax over n values; the FIRST index wins on ties (torch.argmax) */
int argmax(const real *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

/* dot(a, b, n): sum of a[i] * b[i], as 8 interleaved partial sums (i mod 8)
 * added pairwise at the end. One running sum would make every add wait for
 * the one before; eight independent ones keep the CPU busy (the compiler puts
 * them in SIMD lanes). The order is fixed, so a query's score is the same
 * bits whatever else is in the batch. */
real dot(const real *a, const real *b, int n) {
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
 *   scores (H, T, S)     out: q . k * d^-0.5 for every key, before the mask and softmax
 *   att  (H, T, S)       out: softmax(scores) over the allowed keys
 *   out  (T, H*d)        out: att @ v, heads side by side (before o_proj)
 * Query t is at position p = q_pos0 + t (key s is at position s). causal: it
 * sees keys 0..p (the target); otherwise all S keys (the draft: non-causal).
 * window > 0 (a sliding draft layer): only the keys within window positions
 * of p, p itself included: flash-attention's window_size (window-1, 0) when
 * causal, (window-1, window-1) when not. Masked weights are exactly 0, as
 * exp(finfo.min - max) is 0 in the reference. Query head h reads KV head
 * h / (H / Hkv). -1 when a softmax sum was not finite. */
__attribute__((weak))   /* kernel.c's attention, where it is linked, replaces this one */
int attention(real *out, real *scores, real *att, const real *q, const real *key, const real *value,
              int T, int S, int cap, int n_heads, int n_kv_heads, int head_dim,
              int causal, int q_pos0, int window) {
    real scale = (real)(1.0 / sqrt((double)head_dim));  /* head_dim ** -0.5 */
    int group = n_heads / n_kv_heads, bad = 0;
    for (int h = 0; h < n_heads; h++) {
        int kvh = h / group;
        const real *k_h = key + (size_t)kvh * cap * head_dim;    /* (S, d) */
        const real *v_h = value + (size_t)kvh * cap * head_dim;  /* (S, d) */
        for (int t = 0; t < T; t++) {
            const real *q_t = q + (size_t)t * n_heads * head_dim + (size_t)h * head_dim;
            real *sc = scores + ((size_t)h * T + t) * S;         /* (S) */
            real *a = att + ((size_t)h * T + t) * S;             /* (S) */
            int p = q_pos0 + t, lo = 0, hi = causal ? p + 1 : S;  /* it sees keys lo..hi-1 */
            if (window > 0 && lo < p - window + 1) lo = p - window + 1;
            if (window > 0 && hi > p + window) hi = p + window;
            for (int s = 0; s < S; s++) sc[s] = dot(q_t, k_h + (size_t)s * head_dim, head_dim) * scale;
            for (int s = 0; s < S; s++) a[s] = s >= lo && s < hi ? sc[s] : 0;
            bad |= softmax(a + lo, hi - lo);
            real *o_t = out + (size_t)t * n_heads * head_dim + (size_t)h * head_dim;
            for (int i = 0; i < head_dim; i++) o_t[i] = 0;
            for (int s = lo; s < hi; s++)
                for (int i = 0; i < head_dim; i++) o_t[i] += a[s] * v_h[(size_t)s * head_dim + i];
        }
    }
    return bad;
}

/* ---------------------------------------------------------------------------
 * KV cache (DynamicCache): per layer, per KV head, positions 0..len-1.
 */
static void cache_rollback_linear(KVCache *c, int n);
static int linear_state_init(LinearState *st, const Config *cfg, int cap_T);
static void linear_state_free(LinearState *st);
static int hybrid_acts_init(HybridActs *y, const Config *c, int T);
static void hybrid_acts_free(HybridActs *y);
static int hybrid_forward(const Model *m, KVCache *cache, TargetRun *r, const int *ids, int T, int logits_from,
                          TraceCtx *trace);

static real *cache_key(const KVCache *c, int layer, int kvh) {
    return c->key + ((size_t)layer * c->n_kv_heads + kvh) * c->capacity * c->head_dim;
}
static real *cache_value(const KVCache *c, int layer, int kvh) {
    return c->value + ((size_t)layer * c->n_kv_heads + kvh) * c->capacity * c->head_dim;
}

int cache_init(KVCache *c, const Config *cfg, int capacity) {
    memset(c, 0, sizeof *c);
    c->n_layers = cfg->num_hidden_layers;
    c->n_kv_heads = cfg->num_key_value_heads;
    c->head_dim = cfg->head_dim;
    c->capacity = capacity;
    size_t n = (size_t)c->n_layers * c->n_kv_heads * capacity * c->head_dim;
    c->key = xcalloc(n, sizeof(real), "KV cache keys");
    c->value = xcalloc(n, sizeof(real), "KV cache values");
    if (!c->key || !c->value) return -1;
    if (cfg->hybrid) {  /* a hybrid target: the Gated DeltaNet layers' states (a call has at most capacity tokens) */
        c->linear = xcalloc((size_t)c->n_layers, sizeof(LinearState), "linear-attention states");
        if (!c->linear) return -1;
        for (int l = 0; l < c->n_layers; l++)
            if (cfg->layer_linear[l] && linear_state_init(&c->linear[l], cfg, capacity) != 0) return -1;
    }
    return 0;
}

void cache_free(KVCache *c) {
    if (c->linear)
        for (int l = 0; l < c->n_layers; l++) linear_state_free(&c->linear[l]);
    free(c->linear);
    free(c->key);
    free(c->value);
    memset(c, 0, sizeof *c);
}

/* crop(n): keep the first n positions (DynamicCache.crop). */
void cache_crop(KVCache *c, int n) {
    if (c->linear && n < c->len) cache_rollback_linear(c, n);  /* a hybrid target's Gated DeltaNet layers */
    if (n < c->len) c->len = n;
}

/* cache_append: write `rows` new keys/values of one layer at positions
 * len..len+rows-1. k_new, v_new are (rows, Hkv*d), tokens major. The caller
 * advances len once all layers are written. */
static void cache_append(KVCache *c, int layer, const real *k_new, const real *v_new, int rows) {
    int kvdim = c->n_kv_heads * c->head_dim;
    for (int kvh = 0; kvh < c->n_kv_heads; kvh++) {
        real *kc = cache_key(c, layer, kvh), *vc = cache_value(c, layer, kvh);
        for (int row = 0; row < rows; row++) {
            memcpy(kc + (size_t)(c->len + row) * c->head_dim, k_new + (size_t)row * kvdim + kvh * c->head_dim,
                   sizeof(real) * c->head_dim);
            memcpy(vc + (size_t)(c->len + row) * c->head_dim, v_new + (size_t)row * kvdim + kvh * c->head_dim,
                   sizeof(real) * c->head_dim);
        }
    }
}

/* ===========================================================================
 * 3. The target forward (Qwen3ForCausalLM with output_hidden_states=True)
 * ======================================================================== */


static int layer_acts_init(LayerActs *a, const Config *c, int T, int Tk, int S) {
    int D = c->hidden_size, I = c->intermediate_size;
    int qd = c->num_attention_heads * c->head_dim, kvd = c->num_key_value_heads * c->head_dim;
    memset(a, 0, sizeof *a);
    a->xb = reals(T, D, "xb");
    a->q = reals(T, qd, "q");
    a->k = reals(Tk, kvd, "k");
    a->v = reals(Tk, kvd, "v");
    a->q_rope = reals(T, qd, "q_rope");
    a->k_rope = reals(Tk, kvd, "k_rope");
    a->scores = reals(c->num_attention_heads, (size_t)T * S, "scores");
    a->att = reals(c->num_attention_heads, (size_t)T * S, "att");
    a->attn = reals(T, qd, "attn");
    a->attn_output = reals(T, D, "attn_output");
    a->h_mid = reals(T, D, "h_mid");
    a->xb2 = reals(T, D, "xb2");
    a->gate = reals(T, I, "gate");
    a->up = reals(T, I, "up");
    a->act = reals(T, I, "act");
    a->mlp_out = reals(T, D, "mlp_out");
    a->out = reals(T, D, "out");
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

int target_run_init(TargetRun *r, const Config *c, int cap_T, int cap_S) {
    int D = c->hidden_size, d = c->head_dim;
    memset(r, 0, sizeof *r);
    r->cap_T = cap_T;
    r->pos = xcalloc(cap_T, sizeof(int), "position_ids");
    r->angles = reals(cap_T, d / 2, "rope angles");
    r->cos = reals(cap_T, d, "cos");
    r->sin = reals(cap_T, d, "sin");
    r->h = reals(cap_T, D, "h");
    r->hidden_states = reals(c->num_hidden_layers + 1, (size_t)cap_T * D, "hidden_states");
    r->logits = reals(cap_T, c->vocab_size, "logits");
    if (!r->pos || !r->angles || !r->cos || !r->sin || !r->h || !r->hidden_states || !r->logits)
        return -1;
    if (c->hybrid && hybrid_acts_init(&r->hy, c, cap_T) != 0) return -1;
    return layer_acts_init(&r->acts, c, cap_T, cap_T, cap_S);
}

void target_run_free(TargetRun *r) {
    free(r->pos); free(r->angles); free(r->cos); free(r->sin); free(r->h);
    free(r->hidden_states); free(r->logits);
    layer_acts_free(&r->acts);
    hybrid_acts_free(&r->hy);
    memset(r, 0, sizeof *r);
}

/* hidden_state(r, i, T): hidden_states[i], a (T, D) slice */
static real *hidden_state(const TargetRun *r, const Config *c, int i, int T) {
    return r->hidden_states + (size_t)i * T * c->hidden_size;
}

/* mlp_block: the second half of every decoder layer, target and draft alike:
 *   out (T, D) = h_mid + down_proj(silu(gate_proj(x)) * up_proj(x)),
 *   x = post_attention_layernorm(h_mid)            (Qwen3MLP + residual)
 * reading a->h_mid and filling a->xb2, gate, up, act, mlp_out on the way.
 * -1 when the norm's sum of squares was not finite. */
static int mlp_block(real *out, LayerActs *a, const LayerWeights *w, const Config *c, int T,
                     int l, TraceCtx *trace) {
    int D = c->hidden_size, I = c->intermediate_size;
    int bad = rmsnorm_rows(a->xb2, a->h_mid, w->post_attention_layernorm, T, D, (real)c->rms_norm_eps);
    TRACE(trace, a->xb2, "layers.%d.post_attention_layernorm", l);
    matmul(a->gate, a->xb2, w->gate_proj, T, D, I);
    TRACE(trace, a->gate, "layers.%d.mlp.gate_proj", l);
    matmul(a->up, a->xb2, w->up_proj, T, D, I);
    TRACE(trace, a->up, "layers.%d.mlp.up_proj", l);
    for (size_t i = 0; i < (size_t)T * I; i++)
        a->act[i] = silu(a->gate[i]) * a->up[i];
    TRACE(trace, a->act, "layers.%d.mlp.act", l);
    matmul(a->mlp_out, a->act, w->down_proj, T, I, D);
    TRACE(trace, a->mlp_out, "layers.%d.mlp.down_proj", l);
    for (size_t i = 0; i < (size_t)T * D; i++) out[i] = a->h_mid[i] + a->mlp_out[i];
    return bad;
}

/* forward_begin: the start of a target forward, dense or hybrid, for T
 * tokens after past cached ones: position_ids = [past, past+T), their RoPE
 * cos/sin over the first rd dims of a head (the head_dim; a hybrid target's
 * rotary_dim), and hidden_states[0] = embed_tokens(input_ids) in r->h */
static void forward_begin(const Model *m, TargetRun *r, const int *ids, int T, int past, int rd, TraceCtx *trace) {
    const Config *c = &m->cfg;
    int D = c->hidden_size;
    trace_sizes(trace, T, past + T, 0);
    r->fault = (SumFault){NULL, -1};

    /* position_ids = [past, past+T); RoPE cos/sin for them */
    for (int t = 0; t < T; t++) r->pos[t] = past + t;
    rope_cos_sin(r->angles, r->cos, r->sin, r->pos, T, m->inv_freq, rd);
    TRACE(trace, ids, "input_ids");
    TRACE(trace, r->pos, "position_ids");
    TRACE(trace, r->angles, "rope_angles");
    TRACE(trace, r->cos, "cos");
    TRACE(trace, r->sin, "sin");

    /* hidden_states[0] = embed_tokens(input_ids) */
    for (int t = 0; t < T; t++)
        memcpy(r->h + (size_t)t * D, m->embed_tokens + (size_t)ids[t] * D, sizeof(real) * D);
    memcpy(hidden_state(r, c, 0, T), r->h, sizeof(real) * T * D);
    TRACE(trace, r->h, "hidden_states.0");
}

/* target_forward: T tokens at positions pos0..pos0+T-1 (pos0 must equal the
 * cache length), appended to the target KV cache. Fills r->hidden_states
 * (L+1, T, D) and the logits of rows logits_from..T-1 (the prefill keeps only
 * the last row: logits_to_keep=1). Returns the number of logit rows. */
int target_forward(const Model *m, KVCache *cache, TargetRun *r, const int *ids, int T,
                   int logits_from, TraceCtx *trace) {
    if (m->cfg.hybrid) return hybrid_forward(m, cache, r, ids, T, logits_from, trace);  /* section 3b */
    const Config *c = &m->cfg;
    int D = c->hidden_size, H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int d = c->head_dim, L = c->num_hidden_layers, V = c->vocab_size;
    int past = cache->len;          /* past_key_values.get_seq_length() */
    int S = past + T;               /* keys after appending */
    real eps = (real)c->rms_norm_eps;
    LayerActs *a = &r->acts;
    forward_begin(m, r, ids, T, past, d, trace);   /* positions, RoPE over all d dims, hidden_states[0] */

    for (int l = 0; l < L; l++) {
        const LayerWeights *w = &m->layers[l];
        /* attention block: h = h + o_proj(attn(input_layernorm(h))) */
        if (rmsnorm_rows(a->xb, r->h, w->input_layernorm, T, D, eps))
            sum_fault(&r->fault, "layers.%d.input_layernorm", l);
        TRACE(trace, a->xb, "layers.%d.input_layernorm", l);
        matmul(a->q, a->xb, w->q_proj, T, D, H * d);
        matmul(a->k, a->xb, w->k_proj, T, D, Hkv * d);
        matmul(a->v, a->xb, w->v_proj, T, D, Hkv * d);
        /* per-head q_norm / k_norm (Qwen3; a Llama target has none: q, k stay the projections) */
        if (w->q_norm && rmsnorm_rows(a->q, a->q, w->q_norm, T * H, d, eps)) sum_fault(&r->fault, "layers.%d.self_attn.q", l);
        if (w->k_norm && rmsnorm_rows(a->k, a->k, w->k_norm, T * Hkv, d, eps)) sum_fault(&r->fault, "layers.%d.self_attn.k", l);
        TRACE(trace, a->q, "layers.%d.self_attn.q", l);
        TRACE(trace, a->k, "layers.%d.self_attn.k", l);
        TRACE(trace, a->v, "layers.%d.self_attn.v", l);
        apply_rotary_pos_emb(a->q_rope, a->k_rope, a->q, a->k, r->cos, r->sin, T, T, H, Hkv, d);
        TRACE(trace, a->q_rope, "layers.%d.self_attn.q_rope", l);
        TRACE(trace, a->k_rope, "layers.%d.self_attn.k_rope", l);
        cache_append(cache, l, a->k_rope, a->v, T);
        int softmax_bad = attention(a->attn, a->scores, a->att, a->q_rope, cache_key(cache, l, 0),
                                    cache_value(cache, l, 0), T, S, cache->capacity, H, Hkv, d, /*causal=*/1, past, 0);
        if (softmax_bad) sum_fault(&r->fault, "layers.%d.self_attn.attn_weights", l);
        TRACE(trace, a->scores, "layers.%d.self_attn.attn_scores", l);
        TRACE(trace, a->att, "layers.%d.self_attn.attn_weights", l);
        matmul(a->attn_output, a->attn, w->o_proj, T, H * d, D);
        TRACE(trace, a->attn_output, "layers.%d.self_attn.attn_output", l);
        for (size_t i = 0; i < (size_t)T * D; i++) a->h_mid[i] = r->h[i] + a->attn_output[i];

        /* MLP block: h = h + down_proj(silu(gate_proj(x)) * up_proj(x)) */
        if (mlp_block(r->h, a, w, c, T, l, trace)) sum_fault(&r->fault, "layers.%d.post_attention_layernorm", l);

        /* hidden_states[l+1] = output of layer l (the last entry is the
         * post-norm state, written below) */
        memcpy(hidden_state(r, c, l + 1, T), r->h, sizeof(real) * T * D);
        if (l + 1 < L) TRACE(trace, r->h, "hidden_states.%d", l + 1);
    }
    cache->len = S;

    /* final norm; transformers stores it as hidden_states[L] (post-norm!) */
    real *normed = hidden_state(r, c, L, T);
    if (rmsnorm_rows(normed, r->h, m->norm, T, D, eps)) sum_fault(&r->fault, "hidden_states.%d", L);
    TRACE(trace, normed, "hidden_states.%d", L);

    /* logits = lm_head(norm(h)) for rows logits_from..T-1 */
    int rows = T - logits_from;
    matmul(r->logits, normed + (size_t)logits_from * D, m->lm_head, rows, D, V);
    TRACE(trace, r->logits, "logits");
    return rows;
}

/* ===========================================================================
 * 3b. The hybrid target (Qwen3_5ForCausalLM: Gated DeltaNet layers between
 *     gated full-attention layers), transformers' modeling_qwen3_5.py
 * ======================================================================== */

/* rmsnorm_zero_centred: out (n) = (x * rsqrt(mean(x^2) + eps)) * (1 + w)
 * (Qwen3_5RMSNorm: the weight is stored centred on zero). -1: the sum of
 * squares was not finite. */
static int rmsnorm_zero_centred(real *out, const real *x, const real *w, int n, real eps) {
    real ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    if (!isfinite(ss)) return -1;
    real inv = (real)1 / (real)sqrt((double)(ss / (real)n + eps));
    for (int i = 0; i < n; i++) out[i] = (x[i] * inv) * ((real)1 + w[i]);
    return 0;
}

static int rmsnorm_zero_centred_rows(real *out, const real *x, const real *w, int rows, int n, real eps) {
    int bad = 0;
    for (int row = 0; row < rows; row++)
        bad |= rmsnorm_zero_centred(out + (size_t)row * n, x + (size_t)row * n, w, n, eps);
    return bad;
}

/* rmsnorm_gated (Qwen3_5RMSNormGated, "norm before gate"; NOT zero-centred):
 *   out (n) = w * (x * rsqrt(mean(x^2) + eps)) * silu(z) */
void rmsnorm_gated(real *out, const real *x, const real *z, const real *w, int n, real eps) {
    real ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    real inv = (real)1 / (real)sqrt((double)(ss / (real)n + eps));
    for (int i = 0; i < n; i++) out[i] = (w[i] * (x[i] * inv)) * silu(z[i]);
}

/* l2norm (transformers' l2norm, eps inside the sum): x (n) *= rsqrt(sum(x^2) + 1e-6) */
static void l2norm(real *x, int n) {
    real ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    real inv = (real)1 / (real)sqrt((double)(ss + (real)1e-6));
    for (int i = 0; i < n; i++) x[i] = x[i] * inv;
}

/* softplus as torch computes it (threshold 20: x itself above it) */
static real softplus(real x) { return x > (real)20 ? x : (real)log1p((double)exp_real(x)); }
static real sigmoid(real x) { return (real)1 / ((real)1 + exp_real(-x)); }

/* partial RoPE (apply_rotary_pos_emb of Qwen3.5): the first rd dims of the
 * head vector x (d) rotate as rope_apply does over rd dims (cos, sin rows of
 * rd), the other d - rd dims pass through */
static void rope_apply_partial(real *out, const real *x, const real *cos_, const real *sin_, int rd, int head_dim) {
    rope_apply(out, x, cos_, sin_, rd);
    for (int i = rd; i < head_dim; i++) out[i] = x[i];
}

/* gated_delta_rule (torch_recurrent_gated_delta_rule), token by token; for
 * value head h the q/k head is h / (Hv / Hk) (repeat_interleave):
 *   S = S * exp(g_t)                       decay the state (dk, dv)
 *   kv_mem = k_t^T S                       what S recalls for k_t     (dv)
 *   delta = (v_t - kv_mem) * beta_t        the correction             (dv)
 *   S = S + k_t delta^T                    write it (outer product)
 *   o_t = (q_t / sqrt(dk))^T S             read with the scaled query (dv)
 * q, k (T, Hk, dk) l2-normalised; v (T, Hv, dv); g, beta (T, Hv). */
void gated_delta_rule(real *core, real *state, const real *q, const real *k, const real *v, const real *g,
                      const real *beta, int T, int Hk, int dk, int Hv, int dv) {
    real scale = (real)sqrt((double)dk);
    real kv_mem[1024], delta[1024], qs[1024];   /* dv, dv, dk: at most 1024 (formats/load.c checks) */
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < Hv; h++) {
            int j = h / (Hv / Hk);
            const real *q_t = q + ((size_t)t * Hk + j) * dk, *k_t = k + ((size_t)t * Hk + j) * dk;
            const real *v_t = v + ((size_t)t * Hv + h) * dv;
            real *S = state + (size_t)h * dk * dv;          /* (dk, dv) */
            real decay = exp_real(g[(size_t)t * Hv + h]), b = beta[(size_t)t * Hv + h];
            for (int i = 0; i < dk * dv; i++) S[i] = S[i] * decay;
            for (int e = 0; e < dv; e++) kv_mem[e] = 0;
            for (int i = 0; i < dk; i++)
                for (int e = 0; e < dv; e++) kv_mem[e] += S[(size_t)i * dv + e] * k_t[i];
            for (int e = 0; e < dv; e++) delta[e] = (v_t[e] - kv_mem[e]) * b;
            for (int i = 0; i < dk; i++)
                for (int e = 0; e < dv; e++) S[(size_t)i * dv + e] = S[(size_t)i * dv + e] + k_t[i] * delta[e];
            if (!core) continue;
            for (int i = 0; i < dk; i++) qs[i] = q_t[i] / scale;
            real *o_t = core + ((size_t)t * Hv + h) * dv;
            for (int e = 0; e < dv; e++) o_t[e] = 0;
            for (int i = 0; i < dk; i++)
                for (int e = 0; e < dv; e++) o_t[e] += S[(size_t)i * dv + e] * qs[i];
        }
    }
}

/* The rollback (the MLX backend's _GDNStateCapture.rollback): after the
 * verify of a block, crop(n) keeps m = n - start tokens of the last call;
 * each Gated DeltaNet layer's recurrent state becomes the state after those
 * m tokens and its conv state the last K-1 conv inputs up to there,
 * conv_in[m : m + K - 1]. We REPLAY the rule over the first m tokens from
 * the state before the call (kept with the call's q, k, v, g, beta), as the
 * oracle's HybridCache does, rather than saving the state after every token
 * of the verify: the same values (the same loop over the same inputs), and
 * it keeps one state per layer instead of B, which for a real Qwen3.5 (32
 * value heads of 128 x 128) is the difference between 2 MB and 2B MB per
 * layer. The attention layers' K/V crop as always (cache->len). */
static void cache_rollback_linear(KVCache *c, int n) {
    for (int l = 0; l < c->n_layers; l++) {
        LinearState *st = &c->linear[l];
        if (!st->C) continue;                              /* a full-attention layer */
        int m = n - st->start;                             /* tokens of the last call kept */
        if (m < 0) m = 0;                                  /* (dflash_generate never crops that far) */
        if (m >= st->last_T) continue;                     /* everything kept */
        memcpy(st->state, st->state_in, sizeof(real) * st->Hv * st->dk * st->dv);
        gated_delta_rule(NULL, st->state, st->q, st->k, st->v, st->g, st->beta, m, st->Hk, st->dk, st->Hv, st->dv);
        memmove(st->conv_state, st->conv_in + (size_t)m * st->C, sizeof(real) * (st->K - 1) * st->C);
        st->last_T = m;
    }
}

static int linear_state_init(LinearState *st, const Config *cfg, int cap_T) {
    memset(st, 0, sizeof *st);
    st->K = cfg->linear_conv_kernel_dim;
    st->Hk = cfg->linear_num_key_heads, st->dk = cfg->linear_key_head_dim;
    st->Hv = cfg->linear_num_value_heads, st->dv = cfg->linear_value_head_dim;
    st->C = 2 * st->Hk * st->dk + st->Hv * st->dv;
    st->cap_T = cap_T;
    size_t S = (size_t)st->Hv * st->dk * st->dv;
    st->conv_state = reals(st->K - 1 > 0 ? st->K - 1 : 1, st->C, "conv_state");
    st->state = reals(S, 1, "recurrent state");
    st->state_in = reals(S, 1, "recurrent state_in");
    st->conv_in = reals((size_t)st->K - 1 + cap_T, st->C, "conv_in");
    st->q = reals(cap_T, (size_t)st->Hk * st->dk, "linear q");
    st->k = reals(cap_T, (size_t)st->Hk * st->dk, "linear k");
    st->v = reals(cap_T, (size_t)st->Hv * st->dv, "linear v");
    st->g = reals(cap_T, st->Hv, "linear g");
    st->beta = reals(cap_T, st->Hv, "linear beta");
    return st->conv_state && st->state && st->state_in && st->conv_in && st->q && st->k && st->v && st->g &&
           st->beta ? 0 : -1;
}

static void linear_state_free(LinearState *st) {
    real *bufs[] = {st->conv_state, st->state, st->state_in, st->conv_in, st->q, st->k, st->v, st->g, st->beta};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(st, 0, sizeof *st);
}

static int hybrid_acts_init(HybridActs *y, const Config *c, int T) {
    int qd = c->num_attention_heads * c->head_dim, Hv = c->linear_num_value_heads;
    int vd = Hv * c->linear_value_head_dim, C = 2 * c->linear_num_key_heads * c->linear_key_head_dim + vd;
    y->qg = reals(T, 2 * (size_t)qd, "q_proj (query and gate)");
    y->gate = reals(T, qd, "gate");
    y->qkv = reals(T, C, "in_proj_qkv");
    y->z = reals(T, vd, "in_proj_z");
    y->b = reals(T, Hv, "in_proj_b");
    y->a = reals(T, Hv, "in_proj_a");
    y->conv_out = reals(T, C, "conv_out");
    y->core = reals(T, vd, "core_out");
    y->norm_out = reals(T, vd, "norm_out");
    return y->qg && y->gate && y->qkv && y->z && y->b && y->a && y->conv_out && y->core && y->norm_out ? 0 : -1;
}

static void hybrid_acts_free(HybridActs *y) {
    real *bufs[] = {y->qg, y->gate, y->qkv, y->z, y->b, y->a, y->conv_out, y->core, y->norm_out};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(y, 0, sizeof *y);
}

/* gated_attention (Qwen3_5Attention) of layer l for T tokens at positions
 * past..past+T-1: xb (T, D) -> a->attn_output (T, D).
 *   q_proj(xb) (T, H, 2d): per head the query (first d) then the gate (last d)
 *   q = q_norm(query), k = k_norm(k_proj(xb)) (zero-centred, per head), v = v_proj(xb)
 *   partial RoPE on the first rd dims, the cache, causal attention
 *   attn_output = o_proj(attn * sigmoid(gate)) */
static int gated_attention(const Model *m, int l, KVCache *cache, TargetRun *r, int T, int past, TraceCtx *trace) {
    const Config *c = &m->cfg;
    const LayerWeights *w = &m->layers[l];
    LayerActs *a = &r->acts;
    HybridActs *y = &r->hy;
    int D = c->hidden_size, H = c->num_attention_heads, Hkv = c->num_key_value_heads, d = c->head_dim;
    int rd = c->rotary_dim, S = past + T, bad = 0;
    real eps = (real)c->rms_norm_eps;
    matmul(y->qg, a->xb, w->q_proj, T, D, 2 * H * d);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < d; i++) {
                a->q[((size_t)t * H + h) * d + i] = y->qg[((size_t)t * H + h) * 2 * d + i];
                y->gate[((size_t)t * H + h) * d + i] = y->qg[((size_t)t * H + h) * 2 * d + d + i];
            }
    matmul(a->k, a->xb, w->k_proj, T, D, Hkv * d);
    matmul(a->v, a->xb, w->v_proj, T, D, Hkv * d);
    if (rmsnorm_zero_centred_rows(a->q, a->q, w->q_norm, T * H, d, eps)) bad = 1;
    if (rmsnorm_zero_centred_rows(a->k, a->k, w->k_norm, T * Hkv, d, eps)) bad = 1;
    TRACE(trace, a->q, "layers.%d.self_attn.q", l);
    TRACE(trace, y->gate, "layers.%d.self_attn.gate", l);
    TRACE(trace, a->k, "layers.%d.self_attn.k", l);
    TRACE(trace, a->v, "layers.%d.self_attn.v", l);
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < H; h++)
            rope_apply_partial(a->q_rope + ((size_t)t * H + h) * d, a->q + ((size_t)t * H + h) * d,
                               r->cos + (size_t)t * rd, r->sin + (size_t)t * rd, rd, d);
        for (int h = 0; h < Hkv; h++)
            rope_apply_partial(a->k_rope + ((size_t)t * Hkv + h) * d, a->k + ((size_t)t * Hkv + h) * d,
                               r->cos + (size_t)t * rd, r->sin + (size_t)t * rd, rd, d);
    }
    TRACE(trace, a->q_rope, "layers.%d.self_attn.q_rope", l);
    TRACE(trace, a->k_rope, "layers.%d.self_attn.k_rope", l);
    cache_append(cache, l, a->k_rope, a->v, T);
    if (attention(a->attn, a->scores, a->att, a->q_rope, cache_key(cache, l, 0), cache_value(cache, l, 0), T, S,
                  cache->capacity, H, Hkv, d, /*causal=*/1, past, 0))
        sum_fault(&r->fault, "layers.%d.self_attn.attn_weights", l);
    TRACE(trace, a->scores, "layers.%d.self_attn.attn_scores", l);
    TRACE(trace, a->att, "layers.%d.self_attn.attn_weights", l);
    for (size_t i = 0; i < (size_t)T * H * d; i++) a->attn[i] = a->attn[i] * sigmoid(y->gate[i]);
    matmul(a->attn_output, a->attn, w->o_proj, T, H * d, D);
    TRACE(trace, a->attn_output, "layers.%d.self_attn.attn_output", l);
    return bad;
}

/* gated_deltanet (Qwen3_5GatedDeltaNet) of layer l for T tokens: xb (T, D)
 * -> a->attn_output (T, D), continuing from the layer's conv and recurrent
 * states in cache->linear[l] and leaving there the states after the T tokens
 * (and the call's conv_in, q, k, v, g, beta, state_in: the rollback's).
 *   qkv = in_proj_qkv(xb) (T, C), z, b, a
 *   conv_in = [conv_state ; qkv] (K-1+T, C); conv_out[t, c] = silu(sum_j w[c, j] conv_in[t+j, c])
 *   q | k | v = conv_out split (C = Hk*dk | Hk*dk | Hv*dv); q, k l2-normalised
 *   g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)
 *   core = the gated delta rule; out_proj(gated RMSNorm(core, z)) */
static void gated_deltanet(const Model *m, int l, KVCache *cache, TargetRun *r, int T, TraceCtx *trace) {
    const Config *c = &m->cfg;
    const LayerWeights *w = &m->layers[l];
    LayerActs *a = &r->acts;
    HybridActs *y = &r->hy;
    LinearState *st = &cache->linear[l];
    int D = c->hidden_size, K = st->K, C = st->C, Hk = st->Hk, dk = st->dk, Hv = st->Hv, dv = st->dv;
    int kd = Hk * dk;
    matmul(y->qkv, a->xb, w->in_proj_qkv, T, D, C);
    matmul(y->z, a->xb, w->in_proj_z, T, D, Hv * dv);
    matmul(y->b, a->xb, w->in_proj_b, T, D, Hv);
    matmul(y->a, a->xb, w->in_proj_a, T, D, Hv);
    TRACE(trace, y->qkv, "layers.%d.linear_attn.in_proj_qkv", l);
    TRACE(trace, y->z, "layers.%d.linear_attn.in_proj_z", l);
    TRACE(trace, y->b, "layers.%d.linear_attn.in_proj_b", l);
    TRACE(trace, y->a, "layers.%d.linear_attn.in_proj_a", l);
    TRACE(trace, st->conv_state, "layers.%d.linear_attn.conv_state_in", l);
    TRACE(trace, st->state, "layers.%d.linear_attn.state_in", l);

    /* the short convolution over the carried K-1 rows and the T new ones */
    st->start = cache->len;
    st->last_T = T;
    memcpy(st->state_in, st->state, sizeof(real) * Hv * dk * dv);
    memcpy(st->conv_in, st->conv_state, sizeof(real) * (K - 1) * C);
    memcpy(st->conv_in + (size_t)(K - 1) * C, y->qkv, sizeof(real) * T * C);
    TRACE(trace, st->conv_in, "layers.%d.linear_attn.conv_in", l);
    for (int t = 0; t < T; t++)
        for (int ch = 0; ch < C; ch++) {
            real acc = 0;
            for (int j = 0; j < K; j++) acc += st->conv_in[(size_t)(t + j) * C + ch] * w->conv1d[(size_t)ch * K + j];
            y->conv_out[(size_t)t * C + ch] = silu(acc);
        }
    TRACE(trace, y->conv_out, "layers.%d.linear_attn.conv_out", l);

    /* q, k (l2-normalised per head), v; g and beta per value head */
    for (int t = 0; t < T; t++) {
        const real *row = y->conv_out + (size_t)t * C;
        memcpy(st->q + (size_t)t * kd, row, sizeof(real) * kd);
        memcpy(st->k + (size_t)t * kd, row + kd, sizeof(real) * kd);
        memcpy(st->v + (size_t)t * Hv * dv, row + 2 * kd, sizeof(real) * Hv * dv);
        for (int j = 0; j < Hk; j++) {
            l2norm(st->q + (size_t)t * kd + (size_t)j * dk, dk);
            l2norm(st->k + (size_t)t * kd + (size_t)j * dk, dk);
        }
        for (int h = 0; h < Hv; h++) {
            real A = exp_real(w->A_log[h]);
            st->g[(size_t)t * Hv + h] = -A * softplus(y->a[(size_t)t * Hv + h] + w->dt_bias[h]);
            st->beta[(size_t)t * Hv + h] = sigmoid(y->b[(size_t)t * Hv + h]);
        }
    }
    TRACE(trace, st->q, "layers.%d.linear_attn.q", l);
    TRACE(trace, st->k, "layers.%d.linear_attn.k", l);
    TRACE(trace, st->v, "layers.%d.linear_attn.v", l);
    TRACE(trace, st->g, "layers.%d.linear_attn.g", l);
    TRACE(trace, st->beta, "layers.%d.linear_attn.beta", l);

    /* the gated delta rule from the carried state; the conv state moves on */
    gated_delta_rule(y->core, st->state, st->q, st->k, st->v, st->g, st->beta, T, Hk, dk, Hv, dv);
    memcpy(st->conv_state, st->conv_in + (size_t)T * C, sizeof(real) * (K - 1) * C);
    TRACE(trace, y->core, "layers.%d.linear_attn.core_out", l);
    TRACE(trace, st->state, "layers.%d.linear_attn.state_out", l);
    TRACE(trace, st->conv_state, "layers.%d.linear_attn.conv_state_out", l);

    /* gated RMSNorm per value head, then out_proj */
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hv; h++) {
            size_t o = ((size_t)t * Hv + h) * dv;
            rmsnorm_gated(y->norm_out + o, y->core + o, y->z + o, w->linear_norm, dv, (real)c->rms_norm_eps);
        }
    TRACE(trace, y->norm_out, "layers.%d.linear_attn.norm_out", l);
    matmul(a->attn_output, y->norm_out, w->out_proj, T, Hv * dv, D);
    TRACE(trace, a->attn_output, "layers.%d.linear_attn.out_proj", l);
}

/* hybrid_forward: target_forward for a hybrid target (Qwen3_5ForCausalLM with
 * output_hidden_states=True): the same embedding, residual stream, MLP,
 * hidden states and head, with zero-centred norms, partial RoPE, and each
 * layer's mixer a gated full attention or a Gated DeltaNet. */
static int hybrid_forward(const Model *m, KVCache *cache, TargetRun *r, const int *ids, int T, int logits_from,
                          TraceCtx *trace) {
    const Config *c = &m->cfg;
    int D = c->hidden_size, L = c->num_hidden_layers, V = c->vocab_size;
    int past = cache->len, S = past + T;
    real eps = (real)c->rms_norm_eps;
    LayerActs *a = &r->acts;
    forward_begin(m, r, ids, T, past, c->rotary_dim, trace);   /* RoPE over the first rotary_dim dims only */

    for (int l = 0; l < L; l++) {
        const LayerWeights *w = &m->layers[l];
        /* h = h + mixer(input_layernorm(h)) */
        if (rmsnorm_zero_centred_rows(a->xb, r->h, w->input_layernorm, T, D, eps))
            sum_fault(&r->fault, "layers.%d.input_layernorm", l);
        TRACE(trace, a->xb, "layers.%d.input_layernorm", l);
        if (c->layer_linear[l]) gated_deltanet(m, l, cache, r, T, trace);
        else if (gated_attention(m, l, cache, r, T, past, trace)) sum_fault(&r->fault, "layers.%d.self_attn.q", l);
        for (size_t i = 0; i < (size_t)T * D; i++) a->h_mid[i] = r->h[i] + a->attn_output[i];

        /* h = h + mlp(post_attention_layernorm(h)), the norm zero-centred */
        int I = c->intermediate_size;
        if (rmsnorm_zero_centred_rows(a->xb2, a->h_mid, w->post_attention_layernorm, T, D, eps))
            sum_fault(&r->fault, "layers.%d.post_attention_layernorm", l);
        TRACE(trace, a->xb2, "layers.%d.post_attention_layernorm", l);
        matmul(a->gate, a->xb2, w->gate_proj, T, D, I);
        TRACE(trace, a->gate, "layers.%d.mlp.gate_proj", l);
        matmul(a->up, a->xb2, w->up_proj, T, D, I);
        TRACE(trace, a->up, "layers.%d.mlp.up_proj", l);
        for (size_t i = 0; i < (size_t)T * I; i++) a->act[i] = silu(a->gate[i]) * a->up[i];
        TRACE(trace, a->act, "layers.%d.mlp.act", l);
        matmul(a->mlp_out, a->act, w->down_proj, T, I, D);
        TRACE(trace, a->mlp_out, "layers.%d.mlp.down_proj", l);
        for (size_t i = 0; i < (size_t)T * D; i++) r->h[i] = a->h_mid[i] + a->mlp_out[i];

        memcpy(hidden_state(r, c, l + 1, T), r->h, sizeof(real) * T * D);
        if (l + 1 < L) TRACE(trace, r->h, "hidden_states.%d", l + 1);
    }
    cache->len = S;

    real *normed = hidden_state(r, c, L, T);
    if (rmsnorm_zero_centred_rows(normed, r->h, m->norm, T, D, eps)) sum_fault(&r->fault, "hidden_states.%d", L);
    TRACE(trace, normed, "hidden_states.%d", L);
    int rows = T - logits_from;
    matmul(r->logits, normed + (size_t)logits_from * D, m->lm_head, rows, D, V);
    TRACE(trace, r->logits, "logits");
    return rows;
}

/* the states a hybrid target's cache holds after the crop of a verify */
static void trace_rollback(TraceCtx *trace, const KVCache *c) {
    if (!c->linear) return;
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->linear[l].C) continue;
        TRACE(trace, c->linear[l].state, "rollback.layers.%d.state", l);
        TRACE(trace, c->linear[l].conv_state, "rollback.layers.%d.conv_state", l);
    }
}

/* ===========================================================================
 * 4. extract_context_feature (walkthrough Step 1)
 * ======================================================================== */

/* target_hidden (rows, k*D) = cat_j hidden_states[layer_ids[j] + 1][r0 .. r0+rows)
 * along the feature axis. The +1: hidden_states[0] is the embedding, so the
 * output of decoder layer id is hidden_states[id + 1]. For id = L-1 that entry
 * is the post-norm last_hidden_state (see NOTES.md). */
void extract_context_feature(real *target_hidden, const TargetRun *r, const Config *tcfg,
                             const int *layer_ids, int n_ids, int T, int r0, int rows) {
    int D = tcfg->hidden_size;
    for (int t = 0; t < rows; t++)
        for (int j = 0; j < n_ids; j++)
            memcpy(target_hidden + ((size_t)t * n_ids + j) * D,
                   hidden_state(r, tcfg, layer_ids[j] + 1, T) + (size_t)(r0 + t) * D,
                   sizeof(real) * D);
}

/* ===========================================================================
 * 5. The draft forward: DFlashDraftModel with KV injection (Steps 2-5)
 * ======================================================================== */

static int draft_run_init(DraftRun *r, const Config *dc, int V, int cap_ctx, int B, int cap_S) {
    int D = dc->hidden_size, d = dc->head_dim, P = cap_ctx + B;
    memset(r, 0, sizeof *r);
    r->cap_ctx = cap_ctx;
    r->B = B;
    r->pos = xcalloc(P, sizeof(int), "draft position_ids");
    r->angles = reals(P, d / 2, "draft rope angles");
    r->cos = reals(P, d, "draft cos");
    r->sin = reals(P, d, "draft sin");
    r->fc_out = reals(cap_ctx, D, "fc");
    r->C = reals(cap_ctx, D, "hidden_norm");
    r->noise_embedding = reals(B, D, "noise_embedding");
    r->h = reals(B, D, "draft h");
    r->norm = reals(B, D, "draft norm");
    r->logits = reals(B, V, "draft logits");
    r->kv_in = reals(P, D, "kv_in");
    r->acts = xcalloc(dc->num_hidden_layers, sizeof(LayerActs), "draft layer activations");
    if (!r->pos || !r->angles || !r->cos || !r->sin || !r->fc_out || !r->C || !r->noise_embedding ||
        !r->h || !r->norm || !r->logits || !r->kv_in || !r->acts)
        return -1;
    for (int l = 0; l < dc->num_hidden_layers; l++)
        if (layer_acts_init(&r->acts[l], dc, B, P, cap_S) != 0) return -1;
    return 0;
}

static void draft_run_free(DraftRun *r, const Config *dc) {
    free(r->pos); free(r->angles); free(r->cos); free(r->sin); free(r->fc_out); free(r->C);
    free(r->noise_embedding); free(r->h); free(r->norm); free(r->logits); free(r->kv_in);
    if (r->acts)
        for (int l = 0; l < dc->num_hidden_layers; l++) layer_acts_free(&r->acts[l]);
    free(r->acts);
    memset(r, 0, sizeof *r);
}

/* One draft decoder layer (Qwen3DFlashDecoderLayer + Qwen3DFlashAttention).
 *   h (B, D) in/out: the block's residual stream
 *   C (Lc, D): the injected target context, the same for every layer
 *   X (B, D) = input_layernorm(h): the block's normed input (a->xb)
 * Q comes from the block only; K and V come from [C ; X] through the SAME
 * k_proj / v_proj / k_norm (Step 4.2). Keys take RoPE at all Lc+B positions,
 * queries at the last B (Step 4.3). The new K/V are appended to the draft
 * cache and the B queries attend over the whole cache, non-causally (4.4). */
static void draft_layer(const Model *dm, int l, KVCache *cache, DraftRun *r, int Lc, TraceCtx *trace) {
    const Config *c = &dm->cfg;
    const LayerWeights *w = &dm->layers[l];
    LayerActs *a = &r->acts[l];
    int B = r->B, D = c->hidden_size, H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int d = c->head_dim, P = Lc + B;
    int kvd = Hkv * d, window = c->layer_window[l], causal = c->layer_causal[l];  /* layer_types (NOTES.md) */
    int S = cache->len + P;   /* keys after appending this call's Lc+B */
    real eps = (real)c->rms_norm_eps;

    /* X = input_layernorm(h) */
    if (rmsnorm_rows(a->xb, r->h, w->input_layernorm, B, D, eps)) sum_fault(&r->fault, "layers.%d.input_layernorm", l);
    TRACE(trace, a->xb, "layers.%d.input_layernorm", l);

    /* 4.1 Q: q = q_norm(q_proj(X)) from the block only: (B, H*d) */
    matmul(a->q, a->xb, w->q_proj, B, D, H * d);
    if (rmsnorm_rows(a->q, a->q, w->q_norm, B * H, d, eps)) sum_fault(&r->fault, "layers.%d.self_attn.q", l);
    TRACE(trace, a->q, "layers.%d.self_attn.q", l);

    /* 4.2 K/V: k = k_norm(cat[k_proj(C), k_proj(X)]), v = cat[v_proj(C), v_proj(X)]
     * The same k_proj / v_proj serve both: stack the Lc context rows and the B
     * block rows into kv_in (Lc+B, D) and project them in one pass (row by
     * row this is exactly the reference's two projections then cat). */
    memcpy(r->kv_in, r->C, sizeof(real) * Lc * D);
    memcpy(r->kv_in + (size_t)Lc * D, a->xb, sizeof(real) * B * D);
    matmul(a->k, r->kv_in, w->k_proj, P, D, kvd);   /* rows 0..Lc-1: C W_K, then X W_K */
    matmul(a->v, r->kv_in, w->v_proj, P, D, kvd);
    if (rmsnorm_rows(a->k, a->k, w->k_norm, P * Hkv, d, eps)) sum_fault(&r->fault, "layers.%d.self_attn.k", l);
    TRACE(trace, a->k, "layers.%d.self_attn.k", l);
    TRACE(trace, a->v, "layers.%d.self_attn.v", l);

    /* 4.3 RoPE: keys at all P positions, queries at the LAST B (q_len) of them */
    apply_rotary_pos_emb(a->q_rope, a->k_rope, a->q, a->k, r->cos, r->sin, B, P, H, Hkv, d);
    TRACE(trace, a->q_rope, "layers.%d.self_attn.q_rope", l);
    TRACE(trace, a->k_rope, "layers.%d.self_attn.k_rope", l);

    /* 4.4 attention over the whole draft cache, NON-causal (is_causal=False), the queries at
     * q_pos0 = start; a sliding layer: causal over the last sliding_window positions */
    cache_append(cache, l, a->k_rope, a->v, P);
    int softmax_bad = attention(a->attn, a->scores, a->att, a->q_rope, cache_key(cache, l, 0), cache_value(cache, l, 0),
                                B, S, cache->capacity, H, Hkv, d, causal, /*q_pos0=*/cache->len + Lc, window);
    if (softmax_bad) sum_fault(&r->fault, "layers.%d.self_attn.attn_weights", l);
    TRACE(trace, a->scores, "layers.%d.self_attn.attn_scores", l);
    TRACE(trace, a->att, "layers.%d.self_attn.attn_weights", l);

    /* 4.5 output projection, residual, MLP */
    matmul(a->attn_output, a->attn, w->o_proj, B, H * d, D);
    TRACE(trace, a->attn_output, "layers.%d.self_attn.attn_output", l);
    for (size_t i = 0; i < (size_t)B * D; i++) a->h_mid[i] = r->h[i] + a->attn_output[i];
    if (mlp_block(a->out, a, w, c, B, l, trace)) sum_fault(&r->fault, "layers.%d.post_attention_layernorm", l);
    memcpy(r->h, a->out, sizeof(real) * B * D);
    TRACE(trace, a->out, "layers.%d", l);
}

/* draft_forward: DFlashDraftModel.forward followed by target.lm_head(out[1:]).
 *   target_hidden (Lc, k*D): context features of the positions the draft cache
 *                            has not seen yet (the prompt, then acc+1 rows)
 *   block (B): anchor + B-1 mask ids, at positions start..start+B-1
 * position_ids = [cache_len, start + B): keys use all, queries the last B.
 * Fills r->logits (B-1, V). Appends Lc+B positions to the draft cache; the
 * caller crops it back to start (keeping only context K/V). */
static void draft_forward(const Model *dm, const Model *tm, KVCache *cache, DraftRun *r,
                          const real *target_hidden, int Lc, const int *block, TraceCtx *trace) {
    const Config *c = &dm->cfg;
    int B = r->B, D = c->hidden_size, d = c->head_dim, V = tm->cfg.vocab_size;
    int kD = c->n_target_layer_ids * D, P = Lc + B;
    real eps = (real)c->rms_norm_eps;
    trace_sizes(trace, B, cache->len + P, Lc);
    r->fault = (SumFault){NULL, -1};

    TRACE(trace, target_hidden, "target_hidden_raw");

    /* Step 2: C = hidden_norm(fc(target_hidden)) */
    matmul(r->fc_out, target_hidden, dm->fc, Lc, kD, D);
    if (rmsnorm_rows(r->C, r->fc_out, dm->hidden_norm, Lc, D, eps)) sum_fault(&r->fault, "hidden_norm", -1);
    TRACE(trace, r->fc_out, "fc");
    TRACE(trace, r->C, "hidden_norm");

    /* Step 3: noise_embedding = target.model.embed_tokens(block) */
    TRACE(trace, block, "block_output_ids");
    for (int t = 0; t < B; t++)
        memcpy(r->noise_embedding + (size_t)t * D, tm->embed_tokens + (size_t)block[t] * D, sizeof(real) * D);
    TRACE(trace, r->noise_embedding, "noise_embedding");

    /* positions and RoPE tables for [cache_len, cache_len + Lc + B) */
    for (int p = 0; p < P; p++) r->pos[p] = cache->len + p;
    rope_cos_sin(r->angles, r->cos, r->sin, r->pos, P, dm->inv_freq, d);
    TRACE(trace, r->pos, "position_ids");
    TRACE(trace, r->angles, "rope_angles");
    TRACE(trace, r->cos, "cos");
    TRACE(trace, r->sin, "sin");

    /* Step 4: the decoder layers, each injecting the same C */
    memcpy(r->h, r->noise_embedding, sizeof(real) * B * D);
    for (int l = 0; l < c->num_hidden_layers; l++) draft_layer(dm, l, cache, r, Lc, trace);
    cache->len += P;

    /* Step 5: final norm, then the target's lm_head on rows 1..B-1 */
    if (rmsnorm_rows(r->norm, r->h, dm->norm, B, D, eps)) sum_fault(&r->fault, "norm", -1);
    TRACE(trace, r->norm, "norm");
    matmul(r->logits, r->norm + D, tm->lm_head, B - 1, D, V);
    TRACE(trace, r->logits, "logits");
}

/* ===========================================================================
 * 6. Sampling
 * ======================================================================== */

/* The PRNG for temperature > 0: xorshift64* (Vigna), seeded through one
 * splitmix64 step so seed 0 works. uniform() takes the top 53 bits. The
 * reference draws with torch.multinomial, which no C program can match draw
 * for draw; with T > 0 losslessness is a statistical property (NOTES.md). */
void rng_seed(Rng *g, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    g->s = (z ^ (z >> 31)) | 1;  /* never 0 */
}

double rng_uniform(Rng *g) {
    g->s ^= g->s >> 12;
    g->s ^= g->s << 25;
    g->s ^= g->s >> 27;
    uint64_t r = g->s * 0x2545F4914F6CDD1Dull;
    return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

/* sample(logits, T): argmax (first index on ties) when T < 1e-5, else
 * softmax(logits / T) in double and one inverse-CDF draw. */
int sample_row(const real *logits, int V, double temperature, Rng *g) {
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

int check_gen_args(const Model *target, int n_prompt, const GenParams *p, int B,
                          const int *input_ids) {
    const Config *c = &target->cfg;
    if (n_prompt < 1) { dflash_set_error("prompt: empty (at least one token is needed)"); return -1; }
    if (B < 1 || B > DFLASH_MAX_BLOCK) {
        dflash_set_error("block_size: expected 1..%d, got %d", DFLASH_MAX_BLOCK, B);
        return -1;
    }
    if (p->max_new_tokens < 0) { dflash_set_error("max_new_tokens: expected >= 0, got %d", p->max_new_tokens); return -1; }
    if (!(p->temperature >= 0)) { dflash_set_error("temperature: expected a number >= 0, got %g", p->temperature); return -1; }
    for (int i = 0; i < n_prompt; i++)
        if (input_ids[i] < 0 || input_ids[i] >= c->vocab_size) {
            dflash_set_error("prompt: token id %d at position %d is outside the vocabulary 0..%d",
                             input_ids[i], i, c->vocab_size - 1);
            return -1;
        }
    /* the highest position ever used is max_length + B - 1 (a block may run
     * past max_length before the output is cut) */
    if ((long)n_prompt + p->max_new_tokens + B > c->max_position_embeddings) {
        dflash_set_error("prompt (%d tokens) + max_new_tokens (%d) + block size (%d) = %ld exceeds "
                         "max_position_embeddings %d", n_prompt, p->max_new_tokens, B,
                         (long)n_prompt + p->max_new_tokens + B, c->max_position_embeddings);
        return -1;
    }
    return 0;
}

/* any stop id among ids[0..n) */
static int any_stop(const GenParams *p, const int *ids, int n) {
    for (int i = 0; i < n; i++) if (is_stop(p, ids[i])) return 1;
    return 0;
}

/* the end of a round in the round log: what entered the target, what it
 * said, how much was kept and the cache lengths after the crops */
static void round_log(RoundInfo *ri, const int *block, const int *posterior, int B, int acc, int start,
                      int draft_cache_len, int target_cache_len) {
    memcpy(ri->block, block, sizeof(int) * B);
    memcpy(ri->posterior, posterior, sizeof(int) * B);
    ri->acceptance_length = acc;
    ri->start_after = start;
    ri->draft_cache_after = draft_cache_len;
    ri->target_cache_after = target_cache_len;
}

void gen_result_free(GenResult *res) {
    free(res->output_ids);
    free(res->rounds);
    memset(res, 0, sizeof *res);
}

/* acceptance_length = (block[1:] == posterior[:-1]).cumprod().sum()
 * match and cumprod get B-1 entries each. Step 6 of the walkthrough:
 * match [1,1,0] -> cumprod [1,1,0] -> 2 draft tokens accepted. */
int acceptance_length(const int *block, const int *posterior, int B, int *match, int *cumprod) {
    int acc = 0;
    for (int i = 0; i + 1 < B; i++) {
        match[i] = block[i + 1] == posterior[i];
        cumprod[i] = (i == 0 ? 1 : cumprod[i - 1]) * match[i];
        acc += cumprod[i];
    }
    return acc;
}

static void gen_run_free(GenRun *g, const Config *dcfg) {
    free(g->output_ids); free(g->block); free(g->posterior); free(g->rounds); free(g->target_hidden);
    cache_free(&g->past_key_values_target); cache_free(&g->past_key_values_draft);
    target_run_free(&g->tr);
    if (dcfg) draft_run_free(&g->dr, dcfg);
}

/* GenRun for a prompt of n, max_new tokens and blocks of B (1: no draft);
 * output_ids = [prompt | mask_id x (max_new + B)] */
static int gen_run_init(GenRun *g, const Config *tcfg, const Config *dcfg, const int *input_ids, int n,
                        int max_new, int B, int mask_id) {
    memset(g, 0, sizeof *g);
    int max_length = n + max_new, n_ids = dcfg ? dcfg->n_target_layer_ids : 0;
    int cap_ctx = n > B ? n : B;                 /* most context rows handed in */
    int cap_S = max_length + B;                  /* most positions ever cached */
    g->output_ids = xcalloc(max_length + B, sizeof(int), "output_ids");
    g->block = xcalloc(B, sizeof(int), "block_output_ids");
    g->posterior = xcalloc(B, sizeof(int), "posterior");
    g->rounds = xcalloc(max_new + 1, sizeof(RoundInfo), "round log");
    g->target_hidden = reals(cap_ctx, (size_t)(n_ids ? n_ids : 1) * tcfg->hidden_size, "target_hidden");
    if (!g->output_ids || !g->block || !g->posterior || !g->rounds || !g->target_hidden ||
        cache_init(&g->past_key_values_target, tcfg, cap_S) != 0 || target_run_init(&g->tr, tcfg, cap_ctx, cap_S) != 0 ||
        (B > 1 && (cache_init(&g->past_key_values_draft, dcfg, cap_S) != 0 ||
                   draft_run_init(&g->dr, dcfg, tcfg->vocab_size, cap_ctx, B, cap_S) != 0))) {
        gen_run_free(g, dcfg);
        return -1;
    }
    for (int i = 0; i < max_length + B; i++) g->output_ids[i] = i < n ? input_ids[i] : mask_id;
    return 0;
}

int dflash_generate(const Model *draft, const Model *target, const int *input_ids, int n_prompt,
                    const GenParams *p, GenResult *res) {
    memset(res, 0, sizeof *res);
    int B = p->block_size;
    if (B > 1 && !draft) { dflash_set_error("block size %d needs a draft model", B); return -1; }
    if (check_gen_args(target, n_prompt, p, B, input_ids) != 0) return -1;
    const Config *tcfg = &target->cfg, *dcfg = draft ? &draft->cfg : NULL;
    int n = n_prompt, V = tcfg->vocab_size;
    int max_length = n + p->max_new_tokens;
    int mask_id = dcfg ? dcfg->mask_token_id : -1;  /* B = 1 runs without a draft */
    int n_ids = dcfg ? dcfg->n_target_layer_ids : 0;  /* k: target layers fed to the draft */
    GenRun run;
    if (gen_run_init(&run, tcfg, dcfg, input_ids, n, p->max_new_tokens, B, mask_id) != 0) return -1;
    int *output_ids = run.output_ids, *block = run.block, *posterior = run.posterior;
    real *target_hidden = run.target_hidden;
    KVCache *past_key_values_target = &run.past_key_values_target, *past_key_values_draft = &run.past_key_values_draft;
    TargetRun *tr = &run.tr;  DraftRun *dr = &run.dr;
    TraceCtx trace_ctx, *trace = trace_start(&trace_ctx, p->trace, tcfg, dcfg, n, B, n_ids, res);
    Rng rng;
    rng_seed(&rng, p->seed);
    int rc = -1;

    /* ---- Step 1: prefill. The target reads the prompt at positions 0..n-1,
     * keeps the logits of the last position only, and returns its hidden
     * states; the first new token is sampled from those logits. */
    TRACE(trace, input_ids, "input_ids");
    trace_begin(trace, "prefill", 0);
    target_forward(target, past_key_values_target, tr, input_ids, n, n - 1, trace);
    if (check_sums(&tr->fault, "prefill", 0) != 0 || check_finite(tr->logits, 1, V, "prefill", 0) != 0) goto done;
    output_ids[n] = sample_row(tr->logits, V, p->temperature, &rng);
    TRACE(trace, &output_ids[n], "sampled");
    if (B > 1) {
        extract_context_feature(target_hidden, tr, tcfg, dcfg->target_layer_ids, n_ids, n, 0, n);
        TRACE(trace, target_hidden, "target_hidden");
    }
    int n_ctx = n;                /* rows of target_hidden the draft has not seen */
    res->target_forwards = 1;
    trace_end(trace);

    int start = n;
    while (start < max_length && !trace_failed(trace)) {
        int round = ++res->n_rounds;
        RoundInfo *ri = &run.rounds[round - 1];      /* the round log (--rounds, tests) */
        ri->start_before = start;
        ri->draft_cache_before = past_key_values_draft->len;

        /* ---- Step 3: block = output_ids[start : start+B]: anchor + B-1 masks */
        for (int i = 0; i < B; i++) block[i] = output_ids[start + i];
        memcpy(ri->block_in, block, sizeof(int) * B);

        /* ---- Steps 2-5: the draft proposes block[1:] in one forward */
        if (B > 1) {
            trace_begin(trace, "draft", round);
            draft_forward(draft, target, past_key_values_draft, dr, target_hidden, n_ctx, block, trace);
            if (check_sums(&dr->fault, "draft", round) != 0 || check_finite(dr->logits, B - 1, V, "draft", round) != 0)
                goto done;
            cache_crop(past_key_values_draft, start);  /* keep context K/V only */
            for (int i = 1; i < B; i++) block[i] = argmax(dr->logits + (size_t)(i - 1) * V, V);  /* always greedy */
            TRACE(trace, block + 1, "sampled");
            res->draft_forwards++;
            trace_end(trace);
        }

        /* ---- Step 6: the target verifies the whole block in ONE forward */
        trace_begin(trace, "verify", round);
        target_forward(target, past_key_values_target, tr, block, B, 0, trace);
        if (check_sums(&tr->fault, "verify", round) != 0 || check_finite(tr->logits, B, V, "verify", round) != 0)
            goto done;
        for (int i = 0; i < B; i++) posterior[i] = sample_row(tr->logits + (size_t)i * V, V, p->temperature, &rng);
        int acc = acceptance_length(block, posterior, B, ri->match, ri->cumprod);
        TRACE(trace, posterior, "sampled");
        TRACE(trace, ri->match, "match");
        TRACE(trace, ri->cumprod, "cumprod");
        TRACE(trace, &acc, "acceptance_length");

        /* ---- Step 7: keep block[:acc+1], then the bonus token posterior[acc] */
        for (int i = 0; i <= acc; i++) output_ids[start + i] = block[i];
        output_ids[start + acc + 1] = posterior[acc];
        start += acc + 1;
        cache_crop(past_key_values_target, start);
        if (B > 1) {  /* target_hidden = extract_context_feature(...)[:acc+1] */
            extract_context_feature(target_hidden, tr, tcfg, dcfg->target_layer_ids, n_ids, B, 0, B);
            TRACE(trace, target_hidden, "target_hidden");
            n_ctx = acc + 1;  /* the draft reads rows 0..acc next round */
        }
        res->target_forwards++;
        trace_end(trace);
        round_log(ri, block, posterior, B, acc, start, past_key_values_draft->len, past_key_values_target->len);
        trace_rollback(trace, past_key_values_target);  /* a hybrid target's states after the crop */

        /* stop if any stop id appears anywhere in output_ids[n:] */
        if (any_stop(p, output_ids + n, max_length + B - n)) break;
    }
    if (trace_failed(trace)) goto done;

    /* output = output_ids[:min(start+1, max_length)], cut after the first stop id */
    int m = start + 1 < max_length ? start + 1 : max_length;
    for (int i = n; i < m; i++)
        if (is_stop(p, output_ids[i])) { m = i + 1; break; }
    trace_begin(trace, "final", 0);
    trace_output_length(trace, m);
    TRACE(trace, output_ids, "output_ids");
    if (trace_failed(trace)) goto done;

    res->output_ids = xcalloc(m, sizeof(int), "result output_ids");
    if (!res->output_ids) goto done;
    memcpy(res->output_ids, output_ids, sizeof(int) * m);
    res->n_output = m;
    res->n_prompt = n;
    res->rounds = run.rounds;
    run.rounds = NULL;
    rc = 0;
done:
    gen_run_free(&run, dcfg);
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
    const Config *tcfg = &target->cfg;
    int n = n_prompt, V = tcfg->vocab_size;
    int max_length = n + p->max_new_tokens;
    int rc = -1;
    GenRun run;  /* B = 1: output_ids (max_length + 1), the target's cache and TargetRun */
    if (gen_run_init(&run, tcfg, NULL, input_ids, n, p->max_new_tokens, 1, -1) != 0) return -1;
    int *out = run.output_ids;
    KVCache *cache = &run.past_key_values_target;
    TargetRun *tr = &run.tr;
    TraceCtx clock, *trace = trace_start(&clock, NULL, tcfg, NULL, n, 1, 0, res);  /* AR runs are not traced */
    Rng rng;
    rng_seed(&rng, p->seed);
    int len = n;
    trace_begin(trace, "prefill", 0);
    if (len < max_length) {
        target_forward(target, cache, tr, input_ids, n, n - 1, trace);
        res->target_forwards++;
        if (check_sums(&tr->fault, "prefill", 0) != 0 || check_finite(tr->logits, 1, V, "prefill", 0) != 0) goto done;
        out[len++] = sample_row(tr->logits, V, p->temperature, &rng);
    }
    trace_end(trace);
    trace_begin(trace, "verify", 0);  /* every target forward after the prefill */
    while (len < max_length && !is_stop(p, out[len - 1])) {
        target_forward(target, cache, tr, &out[len - 1], 1, 0, trace);
        res->target_forwards++;
        if (check_sums(&tr->fault, "ar", len - n) != 0 || check_finite(tr->logits, 1, V, "ar", len - n) != 0) goto done;
        out[len++] = sample_row(tr->logits, V, p->temperature, &rng);
    }
    trace_end(trace);
    res->output_ids = out;
    run.output_ids = NULL;
    res->n_output = len;
    res->n_prompt = n;
    rc = 0;
done:
    gen_run_free(&run, NULL);
    return rc;
}

