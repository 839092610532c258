/* bench.c - `dflash bench`: DFlash against target-only decoding, same
 * binary, same run. Every number is a ratio or a count measured in this one
 * process, so a noisy, busy machine moves both sides alike. */
#include "dflash.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>  /* getrusage: peak memory */

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
    int ids[8] = {1, 2, 3, 4, 5, 6, 7, 8}, *pre = calloc((size_t)ctx, sizeof(int));
    if (!pre || cache_init(&kv, c, ctx + 8) != 0 || target_run_init(&tr, c, ctx > 8 ? ctx : 8, ctx + 8) != 0) {
        fprintf(stderr, "dflash bench: %s\n", dflash_errmsg);
        free(pre);
        return -1;
    }
    for (int i = 0; i < ctx; i++) pre[i] = i % c->vocab_size;
    target_forward(target, &kv, &tr, pre, ctx, ctx - 1, NULL);
    double base = 0, cost4 = 0;
    printf("\ncost of a T-token target forward relative to a 1-token forward (cache of %d positions):\n  T    ", ctx);
    for (int T = 1; T <= 8; T++) printf("%6d", T);
    printf("\n  cost ");
    for (int T = 1; T <= 8; T++) {
        double t[9];
        for (int r = 0; r < 9; r++) {
            double t0 = now_seconds();
            target_forward(target, &kv, &tr, ids, T, 0, NULL);
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

int bench_main(void) {
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

