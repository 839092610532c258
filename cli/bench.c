/* cli/bench.c - `dflash bench`: how fast the kernel and the decoding are, all
 * measured in this one run, in one process (numbers from different runs on a
 * busy machine do not compare):
 *
 *   1. the read-bandwidth roofline: a plain C loop that only reads the very
 *      bytes a 1-token target forward reads (every weight matrix, once);
 *   1b. the arithmetic roofline: a loop of the kernel's operations (a
 *      multiply and an add) on registers only, the rate a T-token forward's
 *      extra tokens could at best run at;
 *   2. the 1-token target forward against the read roofline, the probes and the
 *      forwards measured in alternation so load on the machine hits all alike;
 *   3. the T-token target forward for T = 1..8 and 16, split into its
 *      matmul calls (timed alone, same shapes and weights) and the rest;
 *   4. DFlash against target-only decoding on the same prompts, same kernel;
 *   4b. the learned pair: DFlash at blocks 4, 8, 16 beside the n-gram and
 *      lookup drafters, the same prompts in one round robin, every output
 *      checked equal to target-only decoding's; then a DFlash round's cost
 *      (verify, draft layers, lm_head on B-1 rows) against tau, the speedup
 *      it predicts beside the one measured, and a draft of the published
 *      proportions;
 *   5. the default run (./dflash, loading included), as a separate process;
 *
 * then the project's targets (docs/performance.md) with met / NOT met.
 * Times are medians of repetitions; the targets are ratios. Every run uses
 * the same thread count (bench_main: the hook). */
#include "dflash.h"
#include "cli/bench.h"
#include "eval/lookup.h"
#include "formats/files.h"
#include "formats/load.h"
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>         /* open /dev/null for the default run's output */
#include <spawn.h>         /* posix_spawn: the default run as its own process */
#include <sys/resource.h>  /* getrusage: peak memory */
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

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

#define BENCH_REPS 5   /* generation runs per side and case */
#define FWD_REPS 11    /* forwards per T, and probe / 1-token forward pairs */

/* ---- 1. the read-bandwidth probe ------------------------------------------
 * The roofline of a 1-token forward: every weight is used once, so it cannot
 * run faster than the memory can deliver the weights. The probe reads
 * exactly those arrays (the same mapped pages, so no page-cache or
 * page-fault difference) and sums them, with 64 independent partial sums in
 * registers so no add waits for another and only the memory limits it. The
 * same multi-versioning as kernel.c's matmul, so the probe is not
 * handicapped against it. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) && !defined(DFLASH_NO_CLONES)
#if __has_attribute(target_clones)
#define PROBE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef PROBE_CLONES
#define PROBE_CLONES
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define PROBE_UNROLL _Pragma("GCC unroll 16")
#else
#define PROBE_UNROLL
#endif

/* the sum of a[0..n), as 4 x 16 partial sums (the compiler unrolls the k
 * and j loops and keeps them in vector registers, as kernel.c's kernel_tile) */
PROBE_CLONES
static real sum_array(const real *a, size_t n) {
    real part[4][16] = {{0}};
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        PROBE_UNROLL for (int k = 0; k < 4; k++)
            PROBE_UNROLL for (int j = 0; j < 16; j++) part[k][j] += a[i + 16 * k + j];
    for (; i < n; i++) part[0][0] += a[i];
    real s = 0;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 16; j++) s += part[k][j];
    return s;
}

typedef struct { const real *p; size_t n; } Span;

/* The arrays a 1-token target forward reads in full: every layer's weights,
 * the final norm and lm_head (of embed_tokens it reads one row). */
static int forward_spans(const Model *m, Span *sp, int cap) {
    const Config *c = &m->cfg;
    size_t D = (size_t)c->hidden_size, I = (size_t)c->intermediate_size, d = (size_t)c->head_dim;
    size_t qd = (size_t)c->num_attention_heads * d, kvd = (size_t)c->num_key_value_heads * d;
    int n = 0;
    for (int l = 0; l < c->num_hidden_layers && n + 11 <= cap; l++) {
        const LayerWeights *w = &m->layers[l];
        Span s[11] = {{w->input_layernorm, D}, {w->q_proj, qd * D}, {w->k_proj, kvd * D}, {w->v_proj, kvd * D},
                      {w->o_proj, D * qd}, {w->q_norm, d}, {w->k_norm, d}, {w->post_attention_layernorm, D},
                      {w->gate_proj, I * D}, {w->up_proj, I * D}, {w->down_proj, D * I}};
        for (int k = 0; k < 11; k++)
            if (s[k].p) sp[n++] = s[k];   /* a Llama target has no q_norm / k_norm */
    }
    if (n + 2 <= cap) {
        sp[n++] = (Span){m->norm, D};
        sp[n++] = (Span){m->lm_head, (size_t)c->vocab_size * D};
    }
    return n;
}

/* the 1-minute load average (Linux /proc/loadavg), or -1: printed so a
 * reader can tell a run on a busy machine */
static double load_average(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

static volatile real probe_sink;   /* keeps the sums from being optimised away */

/* ---- 1b. the arithmetic probe ----------------------------------------------
 * The other roofline of a T-token forward: its matmuls do a multiply and an
 * add per weight per token (no FMA: -ffp-contract=off), 2 x T x W
 * operations for W weights. This loop does only that, a multiply and an add
 * per element of 8 x 16 independent chains in vector registers (no memory,
 * no add waiting on another), with the kernel's clones: the fastest this
 * core runs the kernel's operations. The chains converge (x -> 0.999 x +
 * 0.001 tends to 1), so no value overflows or goes subnormal. */
#define ARITH_ITERS 1000000L
PROBE_CLONES
static real mul_add_chains(long n, real a, real b) {
    real acc[8][16];
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < 16; j++) acc[k][j] = (real)(k * 16 + j) / 128;
    for (long i = 0; i < n; i++)
        PROBE_UNROLL for (int k = 0; k < 8; k++)
            PROBE_UNROLL for (int j = 0; j < 16; j++) acc[k][j] = acc[k][j] * a + b;
    real s = 0;
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < 16; j++) s += acc[k][j];
    return s;
}

static double arith_once(void) {   /* seconds for 2 x 128 x ARITH_ITERS operations */
    double t0 = now_seconds();
    probe_sink = mul_add_chains(ARITH_ITERS, (real)0.999, (real)0.001);
    return now_seconds() - t0;
}

static double probe_once(const Span *sp, int n) {
    double t0 = now_seconds();
    real s = 0;
    for (int i = 0; i < n; i++) s += sum_array(sp[i].p, sp[i].n);
    probe_sink = s;
    return now_seconds() - t0;
}

typedef struct {
    double bytes;          /* weight bytes a 1-token forward reads */
    double probe_s;        /* median probe time: bytes / bandwidth */
    double fwd_s[17];      /* median T-token forward time, T = 1..16 (measured: 1..8, 16) */
    double mm_s[17];       /* median time of the same forward's matmul calls alone, same shapes */
    double rest_s[17];     /* median of (forward - its matmuls alone), repetition by repetition */
    double flops;          /* the arithmetic probe: multiplies + adds per second */
} ForwardCosts;

/* The matmul calls a T-token forward of dense target m makes (dflash.c's
 * target_forward: per layer q, k, v, o, gate, up, down; then lm_head on the
 * T rows), with the model's own weights and the linked kernel's matmul, on
 * scratch inputs x (at least T x max(D, H*d, I)) into out (at least T x
 * max(I, V, D)): the forward's matmul time alone, so that forward - this is
 * the work outside the matmuls (attention, norms, RoPE, activations,
 * copies). Nothing here knows how the kernel works. Returns the seconds. */
static double forward_matmuls_once(const Model *m, int T, const real *x, real *out) {
    const Config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, qd = c->num_attention_heads * c->head_dim;
    int kvd = c->num_key_value_heads * c->head_dim;
    double t0 = now_seconds();
    for (int l = 0; l < c->num_hidden_layers; l++) {
        const LayerWeights *w = &m->layers[l];
        if (!w->q_proj || !w->gate_proj) continue;   /* a hybrid layer: not timed here */
        matmul(out, x, w->q_proj, T, D, qd);
        matmul(out, x, w->k_proj, T, D, kvd);
        matmul(out, x, w->v_proj, T, D, kvd);
        matmul(out, x, w->o_proj, T, qd, D);
        matmul(out, x, w->gate_proj, T, D, I);
        matmul(out, x, w->up_proj, T, D, I);
        matmul(out, x, w->down_proj, T, I, D);
    }
    matmul(out, x, m->lm_head, T, D, c->vocab_size);
    return now_seconds() - t0;
}

/* ---- 2. and 3.: T-token target forwards on a cache of `ctx` positions ---- */
static int bench_forward(const Model *target, int ctx, ForwardCosts *fc) {
    const Config *c = &target->cfg;
    static const int Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 16};
    enum { NT = sizeof Ts / sizeof Ts[0] };
    KVCache kv;
    TargetRun tr;
    int ids[16], pre[64];
    Span sp[4096];
    int n_sp = forward_spans(target, sp, 4096);
    memset(fc, 0, sizeof *fc);
    for (int i = 0; i < n_sp; i++) fc->bytes += (double)sp[i].n * sizeof(real);
    if (ctx > 64) ctx = 64;
    if (cache_init(&kv, c, ctx + 16) != 0) return -1;
    if (target_run_init(&tr, c, ctx > 16 ? ctx : 16, ctx + 16) != 0) {
        cache_free(&kv);
        return -1;
    }
    int wide = c->intermediate_size, qd = c->num_attention_heads * c->head_dim;
    if (c->hidden_size > wide) wide = c->hidden_size;
    if (qd > wide) wide = qd;
    if (c->vocab_size > wide) wide = c->vocab_size;
    real *mx = calloc((size_t)16 * wide, sizeof(real)), *mo = calloc((size_t)16 * wide, sizeof(real));
    if (!mx || !mo) {
        free(mx);
        free(mo);
        cache_free(&kv);
        target_run_free(&tr);
        dflash_set_error("bench: out of memory");
        return -1;
    }
    for (size_t i = 0; i < (size_t)16 * wide; i++) mx[i] = (real)((int)(i % 17) - 8) / 64;  /* finite, not zero */
    for (int i = 0; i < ctx; i++) pre[i] = i % c->vocab_size;
    for (int i = 0; i < 16; i++) ids[i] = (i + 1) % c->vocab_size;
    target_forward(target, &kv, &tr, pre, ctx, ctx - 1, NULL);

    /* Round robin: each repetition runs the probe, then every T once, so a
     * change of load on a busy machine hits all of them alike; then the
     * median of each. */
    double tp[FWD_REPS], ta[FWD_REPS], tt[NT][FWD_REPS], tm[NT][FWD_REPS];
    probe_once(sp, n_sp);   /* warm-up: pages touched, clones resolved */
    arith_once();
    for (int r = 0; r < FWD_REPS; r++) {
        tp[r] = probe_once(sp, n_sp);
        ta[r] = arith_once();
        for (int k = 0; k < NT; k++) {   /* the forward, then its matmuls alone */
            double t0 = now_seconds();
            target_forward(target, &kv, &tr, ids, Ts[k], 0, NULL);
            tt[k][r] = now_seconds() - t0;
            cache_crop(&kv, ctx);
            tm[k][r] = forward_matmuls_once(target, Ts[k], mx, mo);
        }
    }
    fc->probe_s = median(tp, FWD_REPS);
    fc->flops = 2.0 * 8 * 16 * ARITH_ITERS / median(ta, FWD_REPS);
    for (int k = 0; k < NT; k++) {
        fc->fwd_s[Ts[k]] = median(tt[k], FWD_REPS);
        fc->mm_s[Ts[k]] = median(tm[k], FWD_REPS);
        double d[FWD_REPS];   /* paired: a forward and its matmuls ran back to back, under the same load */
        for (int r = 0; r < FWD_REPS; r++) d[r] = tt[k][r] - tm[k][r];
        fc->rest_s[Ts[k]] = median(d, FWD_REPS);
    }
    free(mx);
    free(mo);
    cache_free(&kv);
    target_run_free(&tr);

    printf("\n== the target forward against the read-bandwidth roofline (target of the set above; medians of\n"
           "%d round-robin repetitions, each: the probe, then T = 1, 2, ..., 8, 16; cache of %d positions)\n",
           FWD_REPS, ctx);
    printf("weights a 1-token forward reads: %.1f MB; read probe (plain C sum over those bytes): %.2f ms = %.1f GB/s\n",
           fc->bytes / 1e6, 1e3 * fc->probe_s, fc->bytes / fc->probe_s / 1e9);
    printf("1-token target forward: %.2f ms = %.2fx the roofline\n", 1e3 * fc->fwd_s[1], fc->fwd_s[1] / fc->probe_s);
    printf("T-token target forward (cost = time / 1-token time; matmuls: its matmul calls alone, same shapes,\n"
           "right after it; rest: forward - matmuls, paired medians):\n  T       ");
    for (int k = 0; k < NT; k++) printf("%7d", Ts[k]);
    printf("\n  ms      ");
    for (int k = 0; k < NT; k++) printf("%7.2f", 1e3 * fc->fwd_s[Ts[k]]);
    printf("\n  cost    ");
    for (int k = 0; k < NT; k++) printf("%7.2f", fc->fwd_s[Ts[k]] / fc->fwd_s[1]);
    printf("\n  ms/token");
    for (int k = 0; k < NT; k++) printf("%7.2f", 1e3 * fc->fwd_s[Ts[k]] / Ts[k]);
    printf("\n  matmuls ");   /* the same matmul calls alone, same shapes: their medians */
    for (int k = 0; k < NT; k++) printf("%7.2f", 1e3 * fc->mm_s[Ts[k]]);
    printf("\n  rest/tok");   /* forward - matmuls: attention, norms, RoPE, activations, copies */
    for (int k = 0; k < NT; k++) printf("%7.2f", 1e3 * fc->rest_s[Ts[k]] / Ts[k]);
    printf("\n  rest %%  ");
    for (int k = 0; k < NT; k++) printf("%7.0f", 100 * fc->rest_s[Ts[k]] / fc->fwd_s[Ts[k]]);
    /* the arithmetic roofline: 2 operations per weight (4 bytes) per token */
    double ops1 = 2.0 * fc->bytes / sizeof(real), t8 = fc->fwd_s[8], t1 = fc->fwd_s[1];
    double floor8 = fmax(fc->probe_s, 8 * ops1 / fc->flops);
    printf("\narithmetic probe (a multiply and an add per element, 128 independent chains in registers): "
           "%.1f GFLOP/s\n", fc->flops / 1e9);
    printf("a token's matmuls: %.1f M multiplies + adds (%.2f ms at the probe's rate); 8 tokens: at least "
           "max(read %.2f ms, arithmetic %.2f ms) = %.2f ms = %.2fx the 1-token forward measured\n",
           ops1 / 1e6, 1e3 * ops1 / fc->flops, 1e3 * fc->probe_s, 1e3 * 8 * ops1 / fc->flops, 1e3 * floor8, floor8 / t1);
    printf("the kernel's 7 extra tokens at T = 8: %.1f GFLOP/s, %.0f%% of the arithmetic probe\n",
           7 * ops1 / (t8 - t1) / 1e9, 100 * 7 * ops1 / (t8 - t1) / fc->flops);
    return 0;
}

/* ---- 5. the default run: ./dflash with no arguments, its own process ----- */
static double bench_default_run(void) {
    char *argv[] = {"dflash", NULL};
    double t[BENCH_REPS];
    for (int r = 0; r < BENCH_REPS; r++) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        pid_t pid;
        double t0 = now_seconds();
        int e = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        int status = 0;
        if (e != 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            dflash_set_error("the default run (./dflash) failed%s%s", e ? ": " : "", e ? strerror(e) : "");
            return -1;
        }
        t[r] = now_seconds() - t0;
    }
    return median(t, BENCH_REPS);
}

typedef struct {
    const char *prompt;  /* words of the set's vocab.txt; with ids: the row's label */
    int max_new;
    int ignore_eos;   /* 1: a long run past <eos> (the "long runs" total) */
    const int *ids;   /* or the prompt's token ids (a set without vocab.txt) */
    int n_ids;
} BenchCase;

typedef struct {
    double speedup_all, speedup_long;  /* total AR time / total DFlash time */
    size_t bytes;                      /* weights + the largest KV caches */
} BenchSummary;

/* ---- 4. DFlash against target-only decoding on one weight set at block
 * size block (0: the draft's); with fc, first the forward costs (1.-3.) of
 * its target ---------------------------------------------------------------- */
static int bench_set(const char *set, const BenchCase *cases, int n_cases, int block, BenchSummary *sum,
                     ForwardCosts *fc) {
    char path[1024];
    Model target, draft;
    Vocab vocab;
    int rc = -1;
    memset(&target, 0, sizeof target);
    memset(&draft, 0, sizeof draft);
    memset(&vocab, 0, sizeof vocab);
    snprintf(path, sizeof path, "%s/vocab.txt", set);
    if (!cases[0].ids && vocab_load(&vocab, path) != 0) goto done;
    snprintf(path, sizeof path, "%s/target", set);
    if (model_load(&target, path, 0) != 0) goto done;
    snprintf(path, sizeof path, "%s/draft", set);
    if (model_load(&draft, path, 1) != 0) goto done;
    if (kernel_pack_weights) kernel_pack_weights(&target), kernel_pack_weights(&draft);   /* as ./dflash runs */
    if (check_pair(&target, &draft) != 0) goto done;
    if (fc && bench_forward(&target, 16, fc) != 0) goto done;
    int B = block ? block : draft.cfg.block_size, eos = cases[0].ids ? -1 : vocab_find(&vocab, "<eos>");
    size_t kv_bytes = 0;
    double sum_ar = 0, sum_df = 0;   /* total time of each side over every case */
    double long_ar = 0, long_df = 0; /* ... over the long runs */
    int acc_count[DFLASH_MAX_BLOCK] = {0}, acc_rounds = 0;  /* per-position acceptance, every run */
    printf("\n== DFlash vs target-only decoding: %s (block size %d)\n", set, B);
    printf("%-22s %5s %6s %6s %5s  %-16s %8s %8s %8s %9s %9s %8s\n", "prompt", "new", "fwd AR", "fwd DF", "tau",
           "tau histogram", "prefill", "draft", "verify", "tok/s AR", "tok/s DF", "speedup");
    for (int ci = 0; ci < n_cases; ci++) {
        int ids[256], n = cases[ci].n_ids;  /* n <= LEARNED_PROMPT_LEN with ids */
        if (cases[ci].ids) memcpy(ids, cases[ci].ids, sizeof(int) * (size_t)n);
        else if (tokenize(&vocab, cases[ci].prompt, ids, 256, &n) != 0) goto done;
        GenParams p = {0};
        p.max_new_tokens = cases[ci].max_new;
        p.block_size = B;
        if (!cases[ci].ignore_eos && eos >= 0) p.stop_ids[p.n_stop++] = eos;
        double t_ar[BENCH_REPS], t_df[BENCH_REPS], pre[BENCH_REPS], dr[BENCH_REPS], ve[BENCH_REPS];
        GenResult ar = {0}, df = {0};
        for (int r = 0; r < BENCH_REPS; r++) {
            gen_result_free(&ar);
            gen_result_free(&df);
            /* alternate the order so drift on a busy machine hits both */
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
        acc_rounds += acceptance_count(&df, B, acc_count);
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
    if (B > 1 && acc_rounds > 0) {
        printf("acceptance per position (all runs: rounds in which proposal i was accepted, of %d):", acc_rounds);
        for (int i = 1; i < B; i++) printf(" %d: %.2f", i, (double)acc_count[i - 1] / acc_rounds);
        printf("\n");
    }
    sum->speedup_all = sum_ar / sum_df;
    sum->speedup_long = long_df > 0 ? long_ar / long_df : 0;
    static int told;   /* the legend once */
    if (!told++)
        printf("(tau: tokens per round, bonus included; histogram: rounds with tau = 1/2/.../B;\n"
               " times are medians of %d repetitions, DFlash side split into prefill / draft / verify;\n"
               " speedup = AR time / DFlash time for the same output, checked equal)\n", BENCH_REPS);
    sum->bytes = sizeof(real) * (target.n_params + draft.n_params) + kv_bytes +
                 (kernel_packed_bytes ? kernel_packed_bytes() : 0);   /* kernel.c's packed copies */
    rc = 0;
done:
    if (kernel_unpack_weights) kernel_unpack_weights(&target), kernel_unpack_weights(&draft);
    model_free(&target);
    model_free(&draft);
    vocab_free(&vocab);
    return rc;
}

/* The learned pair (docs/learned.md): the first LEARNED_PROMPTS
 * held-out prompts of toy_weights/learned/heldout.ids, their first
 * LEARNED_PROMPT_LEN ids (as learned/learned.sh eval cuts them), 128 new
 * tokens past the stop ids (as dflash eval decodes); ids 0..V-1. 0 when the
 * file or a prompt is missing, -1 (dflash_errmsg: the file and line) when
 * an id is not one. */
#define LEARNED_PROMPTS 4
#define LEARNED_PROMPT_LEN 9
static int learned_cases(BenchCase *cases, int ids[][LEARNED_PROMPT_LEN], int V) {
    const char *path = "toy_weights/learned/heldout.ids";
    if (access(path, R_OK) != 0) return 0;
    static const char *label[LEARNED_PROMPTS] = {"held-out prompt 1", "held-out prompt 2", "held-out prompt 3",
                                                 "held-out prompt 4"};
    int n = ids_file_prompts(path, LEARNED_PROMPTS, LEARNED_PROMPT_LEN, LEARNED_PROMPT_LEN, V, &ids[0][0], NULL);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) cases[i] = (BenchCase){label[i], 128, 1, ids[i], LEARNED_PROMPT_LEN};
    return n == LEARNED_PROMPTS ? n : 0;
}

/* ---- the hybrid (Qwen3.5) target next to the dense one -------------------
 * toy_weights/hybrid's target (9 Gated DeltaNet + 3 gated attention layers)
 * and the walkthrough's (12 attention layers), the same D, heads and vocab:
 * the T-token forward (T = 1..8, 16) on a cache of HY_SHORT positions, and
 * the 1-token forward on caches of HY_SHORT and HY_LONG positions. A
 * Gated DeltaNet layer reads a fixed state per token whatever the context;
 * an attention layer reads every cached key and value, so its cost grows
 * with the context. Medians of FWD_REPS round-robin repetitions (every
 * forward of both targets once per repetition). */
#define HY_SHORT 16
#define HY_LONG 256
static int bench_hybrid(void) {
    static const char *dirs[2] = {"toy_weights/walkthrough/target", "toy_weights/hybrid/target"};
    static const char *label[2] = {"dense", "hybrid"};
    static const int Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 16}, ctx[2] = {HY_SHORT, HY_LONG};
    enum { NT = sizeof Ts / sizeof Ts[0] };
    if (access("toy_weights/hybrid/target/model.safetensors", R_OK) != 0) {
        printf("\n(toy_weights/hybrid absent: `make weights` makes it, then this bench times its forward too)\n");
        return 0;
    }
    Model m[2];
    KVCache kv[2][2];
    TargetRun tr[2];
    static double tt[2][NT][FWD_REPS], tl[2][2][FWD_REPS];
    int pre[HY_LONG], ids[16], rc = -1, loaded = 0, ready = 0;
    memset(m, 0, sizeof m);
    for (; loaded < 2; loaded++) {
        if (model_load(&m[loaded], dirs[loaded], 0) != 0) goto done;
        if (kernel_pack_weights) kernel_pack_weights(&m[loaded]);   /* as ./dflash runs */
    }
    for (; ready < 2; ready++) {
        const Config *c = &m[ready].cfg;
        if (cache_init(&kv[ready][0], c, HY_LONG + 16) != 0) goto done;
        if (cache_init(&kv[ready][1], c, HY_LONG + 16) != 0) { cache_free(&kv[ready][0]); goto done; }
        if (target_run_init(&tr[ready], c, HY_LONG, HY_LONG + 16) != 0) {
            cache_free(&kv[ready][0]), cache_free(&kv[ready][1]);
            goto done;
        }
        for (int i = 0; i < HY_LONG; i++) pre[i] = 2 + i % (c->vocab_size - 2);   /* words, no <eos>/<mask> */
        for (int k = 0; k < 2; k++) target_forward(&m[ready], &kv[ready][k], &tr[ready], pre, ctx[k], ctx[k] - 1, NULL);
    }
    for (int i = 0; i < 16; i++) ids[i] = 2 + i;
    for (int r = 0; r < FWD_REPS; r++)
        for (int j = 0; j < 2; j++) {
            for (int k = 0; k < NT; k++) {
                double t0 = now_seconds();
                target_forward(&m[j], &kv[j][0], &tr[j], ids, Ts[k], 0, NULL);
                tt[j][k][r] = now_seconds() - t0;
                cache_crop(&kv[j][0], HY_SHORT);
            }
            for (int k = 0; k < 2; k++) {
                double t0 = now_seconds();
                target_forward(&m[j], &kv[j][k], &tr[j], ids, 1, 0, NULL);
                tl[j][k][r] = now_seconds() - t0;
                cache_crop(&kv[j][k], ctx[k]);
            }
        }
    const Config *hc = &m[1].cfg;
    int n_lin = 0;
    for (int l = 0; l < hc->num_hidden_layers; l++) n_lin += hc->layer_linear[l];
    printf("\n== the hybrid (Qwen3.5) target's forward next to the dense one: toy_weights/hybrid (%d Gated DeltaNet +\n"
           "%d gated attention layers) and toy_weights/walkthrough (%d attention layers); medians of %d round-robin\n"
           "repetitions\n", n_lin, hc->num_hidden_layers - n_lin, m[0].cfg.num_hidden_layers, FWD_REPS);
    printf("T-token forward on a cache of %d positions (ms; cost = time / 1-token time):\n  T          ", HY_SHORT);
    for (int k = 0; k < NT; k++) printf("%7d", Ts[k]);
    for (int j = 0; j < 2; j++) {
        printf("\n  %-6s ms  ", label[j]);
        for (int k = 0; k < NT; k++) printf("%7.2f", 1e3 * median(tt[j][k], FWD_REPS));
        printf("\n  %-6s cost", label[j]);
        for (int k = 0; k < NT; k++) printf("%7.2f", median(tt[j][k], FWD_REPS) / median(tt[j][0], FWD_REPS));
    }
    printf("\n1-token forward on a cache of %d and of %d positions (a linear layer's state is the same size at "
           "both;\nan attention layer reads %d times the keys and values):\n", HY_SHORT, HY_LONG, HY_LONG / HY_SHORT);
    for (int j = 0; j < 2; j++) {
        double a = median(tl[j][0], FWD_REPS), b = median(tl[j][1], FWD_REPS);
        printf("  %-6s %.2f ms at %d, %.2f ms at %d: %+.1f%%\n", label[j], 1e3 * a, HY_SHORT, 1e3 * b, HY_LONG,
               100 * (b - a) / a);
    }
    rc = 0;
done:
    if (rc != 0) printf("dflash bench: %s\n", dflash_errmsg);
    for (int j = 0; j < ready; j++) {
        cache_free(&kv[j][0]), cache_free(&kv[j][1]);
        target_run_free(&tr[j]);
    }
    for (int j = 0; j < loaded; j++) {
        if (kernel_unpack_weights) kernel_unpack_weights(&m[j]);
        model_free(&m[j]);
    }
    return rc;
}

/* ---- 4b. the learned pair: DFlash at blocks 4, 8, 16 beside the n-gram and
 * lookup drafters (eval/lookup.h), all against target-only decoding on the
 * same prompts in one round robin; then what a DFlash round costs --------- */
#define PAIR_REPS 3
typedef struct { const char *name; int dflash; DrafterKind kind; int B; } PairRow;
static const PairRow PAIR_ROWS[] = {
    {"dflash", 1, DRAFT_COPY, 4}, {"dflash", 1, DRAFT_COPY, 8}, {"dflash", 1, DRAFT_COPY, 16},
    {"ngram", 0, DRAFT_NGRAM, 4}, {"ngram", 0, DRAFT_NGRAM, 8},
    {"lookup", 0, DRAFT_LOOKUP, 4}, {"lookup", 0, DRAFT_LOOKUP, 8},
};
enum { N_PAIR_ROWS = sizeof PAIR_ROWS / sizeof PAIR_ROWS[0] };

typedef struct {
    double speedup[N_PAIR_ROWS];   /* target-only time / the row's, summed over prompts */
    double tau[N_PAIR_ROWS], verify[N_PAIR_ROWS], draft[N_PAIR_ROWS];  /* draft, verify: 1-token forwards a round */
    double t1;                     /* the 1-token decode forward in these runs, seconds */
    int best_df, best_base;        /* the rows with the highest speedup: DFlash's, the baselines' */
} PairSummary;

/* The draft's matmul calls in one round at block B with Lc new context rows
 * (dflash.c's draft_forward: fc on the Lc rows, per layer q, o, gate, up,
 * down on the B block rows and k, v on Lc + B; then the target's lm_head on
 * B-1 rows), timed alone: *layers (fc and the layers) and *head (lm_head). */
static void draft_matmuls_once(const Model *dm, const Model *tm, int B, int Lc, const real *x, real *out,
                               double *layers, double *head) {
    const Config *c = &dm->cfg;
    int D = c->hidden_size, I = c->intermediate_size, qd = c->num_attention_heads * c->head_dim;
    int kvd = c->num_key_value_heads * c->head_dim, kD = c->n_target_layer_ids * D;
    double t0 = now_seconds();
    matmul(out, x, dm->fc, Lc, kD, D);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        const LayerWeights *w = &dm->layers[l];
        matmul(out, x, w->q_proj, B, D, qd);
        matmul(out, x, w->k_proj, Lc + B, D, kvd);
        matmul(out, x, w->v_proj, Lc + B, D, kvd);
        matmul(out, x, w->o_proj, B, qd, D);
        matmul(out, x, w->gate_proj, B, D, I);
        matmul(out, x, w->up_proj, B, D, I);
        matmul(out, x, w->down_proj, B, I, D);
    }
    double t1 = now_seconds();
    matmul(out, x, tm->lm_head, B - 1, D, tm->cfg.vocab_size);
    *layers = t1 - t0;
    *head = now_seconds() - t1;
}

/* The published proportion the decomposition scales the draft's layers to:
 * z-lab's drafts put 5 draft layers over their target (Qwen3-8B-DFlash-b16:
 * 5 layers over Qwen3-8B's 36, the same hidden size, the target's embedding
 * and lm_head shared; z-lab/dflash's test fixture assistant-config.json also
 * has 5). */
#define PUB_DRAFT_LAYERS 5
#define PUB_TARGET_LAYERS 36

static int bench_pair(const BenchCase *cases, int n_cases, const ForwardCosts *fl, PairSummary *ps) {
    Model target, draft;
    int rc = -1;
    real *mx = NULL, *mo = NULL;
    memset(&target, 0, sizeof target);
    memset(&draft, 0, sizeof draft);
    memset(ps, 0, sizeof *ps);
    if (model_load(&target, "toy_weights/learned/target", 0) != 0) goto done;
    if (model_load(&draft, "toy_weights/learned/draft", 1) != 0) goto done;
    if (check_pair(&target, &draft) != 0) goto done;
    if (kernel_pack_weights) kernel_pack_weights(&target), kernel_pack_weights(&draft);   /* as ./dflash runs */
    enum { NM = N_PAIR_ROWS + 1 };   /* 0: target-only; 1 + i: PAIR_ROWS[i] */
    double sum[NM] = {0}, draft_s[NM] = {0}, verify_s[NM] = {0}, ar_fwd_s = 0;
    long rounds[NM] = {0}, tokens[NM] = {0}, ar_fwd = 0;
    for (int ci = 0; ci < n_cases; ci++) {
        GenParams p = {0};
        p.max_new_tokens = cases[ci].max_new;   /* no stop ids: every run decodes max_new tokens */
        double t[NM][PAIR_REPS];
        for (int r = 0; r < PAIR_REPS; r++) {
            /* round robin, the starting method moving each repetition, so
             * that a change of load on the machine hits every method alike;
             * then every output against target-only decoding's */
            GenResult g[NM];
            memset(g, 0, sizeof g);
            int bad = 0;
            for (int k = 0; k < NM && !bad; k++) {
                int m = (k + r * 3) % NM;
                const PairRow *row = m ? &PAIR_ROWS[m - 1] : NULL;
                Drafter d = {row ? row->kind : DRAFT_COPY, 1, 4};   /* dflash eval's defaults: n-grams of 1..4 */
                p.block_size = row ? row->B : 1;
                double t0 = now_seconds();
                int grc = !row ? ar_generate(&target, cases[ci].ids, cases[ci].n_ids, &p, &g[m])
                          : row->dflash ? dflash_generate(&draft, &target, cases[ci].ids, cases[ci].n_ids, &p, &g[m])
                                        : lookup_generate(&d, &target, cases[ci].ids, cases[ci].n_ids, &p, &g[m]);
                t[m][r] = now_seconds() - t0;
                bad = grc != 0;
            }
            for (int m = 1; m < NM && !bad; m++) {
                if (g[m].n_output != g[0].n_output ||
                    memcmp(g[m].output_ids, g[0].output_ids, sizeof(int) * (size_t)g[0].n_output)) {
                    dflash_set_error("learned pair, %s: %s at block %d: output differs from target-only decoding",
                                     cases[ci].prompt, PAIR_ROWS[m - 1].name, PAIR_ROWS[m - 1].B);
                    bad = 1;
                }
                rounds[m] += g[m].n_rounds;
                for (int i = 0; i < g[m].n_rounds; i++) tokens[m] += g[m].rounds[i].acceptance_length + 1;
                draft_s[m] += g[m].seconds_draft;
                verify_s[m] += g[m].seconds_verify;
            }
            ar_fwd_s += g[0].seconds_verify;
            ar_fwd += g[0].target_forwards - 1;
            for (int m = 0; m < NM; m++) gen_result_free(&g[m]);
            if (bad) goto done;
        }
        for (int m = 0; m < NM; m++) sum[m] += median(t[m], PAIR_REPS);
    }
    double t1 = ar_fwd_s / (double)ar_fwd;
    ps->t1 = t1;
    ps->best_df = ps->best_base = -1;
    printf("\n== the learned pair: DFlash, n-gram and lookup drafters vs target-only decoding (toy_weights/learned)\n");
    printf("%d held-out prompts of %d tokens, %d new tokens each; medians of %d repetitions, every method in each,\n"
           "round robin; 1-token decode forward of the target in these runs: %.2f ms\n",
           n_cases, cases[0].n_ids, cases[0].max_new, PAIR_REPS, 1e3 * t1);
    printf("%-7s %3s %7s %6s %7s %7s %7s %8s %8s %9s\n", "method", "B", "rounds", "tau", "verify", "draft", "cost",
           "tau/cost", "speedup", "lossless");
    for (int i = 0; i < N_PAIR_ROWS; i++) {
        int m = i + 1;
        double R = (double)rounds[m];
        ps->tau[i] = tokens[m] / R;
        ps->verify[i] = verify_s[m] / R / t1;
        ps->draft[i] = draft_s[m] / R / t1;
        ps->speedup[i] = sum[0] / sum[m];
        int *best = PAIR_ROWS[i].dflash ? &ps->best_df : &ps->best_base;
        if (*best < 0 || ps->speedup[i] > ps->speedup[*best]) *best = i;
        printf("%-7s %3d %7ld %6.2f %7.2f %7.2f %7.2f %8.2f %7.2fx %5s %d/%d\n", PAIR_ROWS[i].name, PAIR_ROWS[i].B,
               rounds[m] / PAIR_REPS, ps->tau[i], ps->verify[i], ps->draft[i], ps->verify[i] + ps->draft[i],
               ps->tau[i] / (ps->verify[i] + ps->draft[i]), ps->speedup[i], "yes", n_cases * PAIR_REPS,
               n_cases * PAIR_REPS);
    }
    printf("(verify, draft: a round's, in 1-token decode forwards of these runs; speedup: target-only time /\n"
           " the method's, prefill included; lossless: runs whose output equals target-only decoding's)\n");

    /* what a DFlash round costs, and what the speedup should be from it */
    const Config *dc = &draft.cfg, *tc = &target.cfg;
    int wide = dc->n_target_layer_ids * dc->hidden_size;
    if (dc->intermediate_size > wide) wide = dc->intermediate_size;
    if (tc->vocab_size > wide) wide = tc->vocab_size;
    if (dc->num_attention_heads * dc->head_dim > wide) wide = dc->num_attention_heads * dc->head_dim;
    mx = calloc((size_t)2 * DFLASH_MAX_BLOCK * wide, sizeof(real));
    mo = calloc((size_t)2 * DFLASH_MAX_BLOCK * wide, sizeof(real));
    if (!mx || !mo) { dflash_set_error("bench: out of memory"); goto done; }
    for (size_t i = 0; i < (size_t)2 * DFLASH_MAX_BLOCK * wide; i++) mx[i] = (real)((int)(i % 13) - 6) / 64;
    /* the unit of the draft's parts: 1-token target forwards (cache of 64) timed in the same loop */
    KVCache kv;
    TargetRun tr;
    int pre[64], one = 1;
    if (cache_init(&kv, tc, 65) != 0) goto done;
    if (target_run_init(&tr, tc, 64, 65) != 0) { cache_free(&kv); goto done; }
    for (int i = 0; i < 64; i++) pre[i] = i % tc->vocab_size;
    target_forward(&target, &kv, &tr, pre, 64, 63, NULL);
    double f1 = fl->fwd_s[1], scale = (double)PUB_DRAFT_LAYERS / PUB_TARGET_LAYERS /
                                      ((double)dc->num_hidden_layers / tc->num_hidden_layers);
    printf("\n== what a DFlash round costs on the learned pair, in 1-token target forwards (verify fwd T=B: the\n"
           "forward table's; lm_head on B-1 rows and the draft's matmuls: timed alone at the round's shapes, Lc =\n"
           "tau, each against a 1-token forward in the same loop, medians of %d; the rest: the runs above)\n", FWD_REPS);
    printf("%3s %6s %8s %8s %7s %7s %8s %8s %9s %9s %9s %8s %9s\n", "B", "tau", "verify", "verify", "draft", "draft",
           "lm_head", "draft mm", "predicted", "predicted", "measured", "for 2.0x", "published");
    printf("%3s %6s %8s %8s %7s %7s %8s %8s %9s %9s %9s %8s %9s\n", "", "", "fwd T=B", "in runs", "round", "layers",
           "B-1 rows", "alone", "fwd T=B", "in runs", "speedup", "cost <=", "draft");
    for (int i = 0; i < N_PAIR_ROWS; i++) {
        if (!PAIR_ROWS[i].dflash) continue;
        int B = PAIR_ROWS[i].B, Lc = (int)lround(ps->tau[i]);
        if (Lc < 1) Lc = 1;
        if (Lc > B) Lc = B;
        double tl[FWD_REPS], th[FWD_REPS], tf[FWD_REPS];
        draft_matmuls_once(&draft, &target, B, Lc, mx, mo, &tl[0], &th[0]);   /* warm-up */
        for (int r = 0; r < FWD_REPS; r++) {
            double t0 = now_seconds();
            target_forward(&target, &kv, &tr, &one, 1, 0, NULL);
            tf[r] = now_seconds() - t0;
            cache_crop(&kv, 64);
            draft_matmuls_once(&draft, &target, B, Lc, mx, mo, &tl[r], &th[r]);
            tl[r] /= tf[r], th[r] /= tf[r];   /* paired: the forward just before */
        }
        double ml = median(tl, FWD_REPS), mh = median(th, FWD_REPS);
        double dr = ps->draft[i], vB = fl->fwd_s[B] / f1, vR = ps->verify[i], layers = dr - mh;
        double pub = layers * scale + mh;   /* the draft's layers at the published proportion, lm_head as is */
        printf("%3d %6.2f %8.2f %8.2f %7.2f %7.2f %8.2f %8.2f %8.2fx %8.2fx %8.2fx %8.2f %8.2fx\n", B, ps->tau[i], vB,
               vR, dr, layers, mh, ml + mh, ps->tau[i] / (vB + dr), ps->tau[i] / (vR + dr), ps->speedup[i],
               ps->tau[i] / 2, ps->tau[i] / (vR + pub));
    }
    cache_free(&kv);
    target_run_free(&tr);
    printf("(draft layers = draft round - lm_head (fc, %d layers, sampling); draft mm: its matmuls alone;\n"
           " predicted = tau / (verify + draft); for 2.0x: the round cost 2.0x needs; published draft: predicted\n"
           " from the runs with the draft's layers scaled to %d draft layers over a %d-layer target (z-lab's\n"
           " DFlash-b16 drafts: %d/%d = %.2f of the target's layers; here %d/%d = %.2f))\n",
           dc->num_hidden_layers, PUB_DRAFT_LAYERS, PUB_TARGET_LAYERS, PUB_DRAFT_LAYERS, PUB_TARGET_LAYERS,
           (double)PUB_DRAFT_LAYERS / PUB_TARGET_LAYERS, dc->num_hidden_layers, tc->num_hidden_layers,
           (double)dc->num_hidden_layers / tc->num_hidden_layers);
    rc = 0;
done:
    free(mx);
    free(mo);
    if (kernel_unpack_weights) kernel_unpack_weights(&target), kernel_unpack_weights(&draft);
    model_free(&target);
    model_free(&draft);
    return rc;
}

int bench_main(void) {
    /* The walkthrough set: the two stories (short: the prefill, paid by both
     * sides, weighs on the ratio) and long runs past <eos> (the successor
     * table loops), where the ratio approaches tau x (1-token cost) /
     * (B-token verify + draft cost). */
    static const BenchCase walk[] = {
        {"The cat sat", 16, 0, NULL, 0}, {"A dog", 16, 0, NULL, 0}, {"The cat sat", 64, 1, NULL, 0}, {"She reads", 64, 1, NULL, 0},
    };
    static const BenchCase rnd[] = {
        {"The cat sat", 32, 1, NULL, 0}, {"A dog saw one red bird", 32, 1, NULL, 0},
    };
    /* The trained set (make train: the random target, a draft trained on
     * its greedy continuations of 4-id prompts up to 32 tokens): prompts of
     * 3 and 5 words (no training prompt has that length), up to the trained
     * length, stopping at <eos> as the training data did. */
    static const BenchCase trn[] = {
        {"The cat sat", 29, 0, NULL, 0}, {"A dog saw one red", 27, 0, NULL, 0}, {"She reads every", 29, 0, NULL, 0}, {"We like green tea It", 27, 0, NULL, 0},
    };
    BenchSummary w = {0}, r = {0}, t = {0};
    ForwardCosts fc;
    double t0 = now_seconds();
    char nthreads[32] = "one thread";   /* dflash bench --threads N: kernel.c's */
    if (kernel_threads && kernel_threads() > 1) snprintf(nthreads, sizeof nthreads, "%d threads", kernel_threads());
    printf("dflash bench: the kernel against the memory roofline, and DFlash vs target-only decoding,\n"
           "greedy, %s build, %s, all in this one run (load average at the start: %.2f)\n", REAL_NAME, nthreads,
           load_average());
    if (bench_set("toy_weights/walkthrough", walk, 4, 0, &w, &fc) != 0) return -1;
    if (bench_set("toy_weights/random", rnd, 2, 0, &r, NULL) != 0) return -1;
    int trained = access("toy_weights/trained/draft/model.safetensors", R_OK) == 0;
    if (trained && bench_set("toy_weights/trained", trn, 4, 0, &t, NULL) != 0) return -1;
    if (!trained) printf("\n(toy_weights/trained absent: `make train` makes it, then this bench decodes it too)\n");
    /* the learned target (docs/learned.md): > 100 MB of F32
     * weights, far beyond the L2, the regime speculative decoding is for */
    ForwardCosts fl;
    int learned = access("toy_weights/learned/target/model.safetensors", R_OK) == 0, learned_V = 0;
    if (learned) {
        Model lt;
        memset(&lt, 0, sizeof lt);
        printf("\n== toy_weights/learned (the learned target: %s)\n", "8 layers, hidden 512, BF16 widened to " REAL_NAME);
        if (model_load(&lt, "toy_weights/learned/target", 0) != 0) return -1;
        if (kernel_pack_weights) kernel_pack_weights(&lt);
        int brc = bench_forward(&lt, 64, &fl);
        learned_V = lt.cfg.vocab_size;
        if (kernel_unpack_weights) kernel_unpack_weights(&lt);
        model_free(&lt);
        if (brc != 0) return -1;
    }
    /* the learned pair: the target above with its trained draft */
    PairSummary ps;
    BenchCase lcases[LEARNED_PROMPTS];
    int lids[LEARNED_PROMPTS][LEARNED_PROMPT_LEN];
    int pair = learned && access("toy_weights/learned/draft/model.safetensors", R_OK) == 0 ?
               learned_cases(lcases, lids, learned_V) : 0;
    if (pair < 0) return -1;
    if (pair && bench_pair(lcases, LEARNED_PROMPTS, &fl, &ps) != 0) return -1;
    long rss = peak_rss_kb();
    double want = (double)(w.bytes > r.bytes ? w.bytes : r.bytes) / 1024;
    double excess = (rss - want) / want;
    printf("\npeak resident memory: %.1f MiB; weights + KV caches of the larger set: %.1f MiB (%+.1f%%)\n",
           rss / 1024.0, want / 1024, 100.0 * excess);
    double def = bench_default_run();
    if (def < 0) return -1;
    printf("\nthe default run (./dflash: load the walkthrough set, decode \"The cat sat\"), its own process: %.3f s "
           "(median of %d)\n", def, BENCH_REPS);
    if (bench_hybrid() != 0) return -1;

    double roof = fc.fwd_s[1] / fc.probe_s, c4 = fc.fwd_s[4] / fc.fwd_s[1];
    printf("\ntargets (ratios measured in this run):\n");
    printf("  1-token target forward / read roofline: %.2f (%.2f ms / %.2f ms; target <= 1.3): %s\n", roof,
           1e3 * fc.fwd_s[1], 1e3 * fc.probe_s, roof <= 1.3 ? "met" : "NOT met");
    printf("  4-token target forward / 1-token forward: %.2f (%.2f ms / %.2f ms; target <= 1.5): %s\n", c4,
           1e3 * fc.fwd_s[4], 1e3 * fc.fwd_s[1], c4 <= 1.5 ? "met" : "NOT met");
    printf("  walkthrough set, long runs: DFlash %.2fx faster than target-only decoding (target >= 2.2x): %s\n",
           w.speedup_long, w.speedup_long >= 2.2 ? "met" : "NOT met");
    printf("  walkthrough set, all runs incl. the short stories: %.2fx (the prefill, paid by both, weighs on "
           "8-token runs)\n", w.speedup_all);
    printf("  the default run, loading included: %.3f s (target < 0.15 s): %s\n", def, def < 0.15 ? "met" : "NOT met");
    printf("  peak memory within 10%% of weights + KV caches: %s\n", excess <= 0.10 ? "met" : "NOT met");
    if (trained)
        printf("  trained set (a draft that learned, make train): DFlash %.2fx target-only decoding (no target: "
               "the first speed figure from a trained draft here)\n", t.speedup_all);
    if (learned)
        printf("  learned target (%.0f MB of weights): 4-token forward %.2fx, 8-token %.2fx the 1-token forward "
               "(%.2f ms)\n", fl.bytes / 1e6, fl.fwd_s[4] / fl.fwd_s[1], fl.fwd_s[8] / fl.fwd_s[1], 1e3 * fl.fwd_s[1]);
    if (pair) {
        int d = ps.best_df, b = ps.best_base;
        printf("  learned pair, best block each side (%d held-out prompts, %d new tokens): DFlash %.2fx target-only "
               "decoding at block %d (target >= 2.0x): %s\n", LEARNED_PROMPTS, lcases[0].max_new, ps.speedup[d],
               PAIR_ROWS[d].B, ps.speedup[d] >= 2.0 ? "met" : "NOT met");
        printf("  learned pair, the best other drafter: %s %.2fx at block %d; DFlash %s it\n", PAIR_ROWS[b].name,
               ps.speedup[b], PAIR_ROWS[b].B, ps.speedup[d] > ps.speedup[b] ? "ahead of" : "behind");
    }
    printf("(bench took %.1f s; load average at the end: %.2f)\n", now_seconds() - t0, load_average());
    return 0;
}
