/* tests/sampleutil.h - sampling with T > 0 is lossless in distribution: the
 * exact distribution of the first K new tokens, the runs of one decoding mode
 * and the chi-square of observed runs against it (tests/test_core.c: DFlash on
 * the tiny set; test_hybrid.c: on the hybrid set; test_lookup.c: the lookup
 * drafters; test_learned.c: DFlash on the learned pair). Include
 * after testutil.h (and after dflash.c: it runs target_forward).
 *
 * The exact distribution is a second computation, independent of the generate
 * loops: P(t1) is softmax(logits / T) of the target's forward of the prompt,
 * P(tk | t1..tk-1) that of the prompt + t1..tk-1 (in double, as sample_row).
 * The cells of depth k are the sequences t1..tk whose expected count N P is
 * >= 5; a prefix is extended only while N P(prefix) >= 5 (a sequence's P is at
 * most its prefix's), so the cells are fixed by P and N alone, never by the
 * draws, and only those prefixes cost a forward (at most N / 5 a depth).
 * Everything else is one pooled cell of mass 1 - sum P. */
#ifndef SAMPLEUTIL_H
#define SAMPLEUTIL_H

#include <math.h>

#define TU_MAX_K 4

typedef struct {
    uint64_t key;  /* t1 + V t2 + V^2 t3 ...: the sequence */
    double p;      /* its exact probability */
} TuCell;

typedef struct {
    int K, N, V;
    int n[TU_MAX_K + 1];          /* cells of depth k = 1..K */
    TuCell *cell[TU_MAX_K + 1];   /* (n[k]) sorted by key */
    int forwards;                 /* target forwards it took */
} TuExact;

typedef struct {
    double chi2, limit;
    int df, pass;
} TuFit;

static inline uint64_t tu_seq_key(const int *seq, int k, int V) {
    uint64_t key = 0;
    for (int i = k - 1; i >= 0; i--) key = key * (uint64_t)V + (uint64_t)seq[i];
    return key;
}

static inline int tu_cell_cmp(const void *a, const void *b) {
    uint64_t x = ((const TuCell *)a)->key, y = ((const TuCell *)b)->key;
    return x < y ? -1 : x > y;
}

/* softmax(logits / temp) in double */
static inline void tu_softmax_temp(const real *logits, int V, double temp, double *p) {
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) if (logits[v] / temp > mx) mx = logits[v] / temp;
    for (int v = 0; v < V; v++) sum += p[v] = exp(logits[v] / temp - mx);
    for (int v = 0; v < V; v++) p[v] /= sum;
}

typedef struct {
    const Model *t;
    KVCache kv;
    TargetRun tr;
    const int *prompt;
    int n_prompt, prefix[TU_MAX_K], *ids;  /* ids (n_prompt + K): the prompt, then the prefix */
    double temp, *dist;  /* (K, V): the conditional after each depth's prefix */
    TuExact *e;
} TuWalk;

static inline void tu_add_cell(TuExact *e, int k, uint64_t key, double p) {
    e->cell[k] = realloc(e->cell[k], sizeof(TuCell) * (size_t)(e->n[k] + 1));
    assert_non_null(e->cell[k]);
    e->cell[k][e->n[k]].key = key;
    e->cell[k][e->n[k]++].p = p;
}

/* the prefix of `depth` tokens has probability pp: record it, then extend it */
static inline void tu_walk(TuWalk *w, int depth, double pp) {
    TuExact *e = w->e;
    int V = e->V;
    if (depth > 0) tu_add_cell(e, depth, tu_seq_key(w->prefix, depth, V), pp);
    if (depth == e->K) return;
    double *d = w->dist + (size_t)depth * V;
    if (depth > 0) {  /* a fresh cache, the prompt and the prefix in one forward: no crop, no rollback */
        cache_free(&w->kv);
        assert_int_equal(cache_init(&w->kv, &w->t->cfg, w->n_prompt + e->K), 0);
        memcpy(w->ids, w->prompt, sizeof(int) * (size_t)w->n_prompt);
        memcpy(w->ids + w->n_prompt, w->prefix, sizeof(int) * (size_t)depth);
        int n = w->n_prompt + depth;
        target_forward(w->t, &w->kv, &w->tr, w->ids, n, n - 1, NULL);
        tu_softmax_temp(w->tr.logits, V, w->temp, d);
        e->forwards++;
    }
    for (int v = 0; v < V; v++)
        if ((double)e->N * pp * d[v] >= 5) {
            w->prefix[depth] = v;
            tu_walk(w, depth + 1, pp * d[v]);
        }
}

/* the exact distribution of the first K new tokens after prompt (n ids) at
 * temperature temp, cut into the cells of N draws (free with tu_exact_free) */
static inline void tu_exact_build(TuExact *e, const Model *t, const int *prompt, int n, double temp, int K, int N) {
    memset(e, 0, sizeof *e);
    e->K = K, e->N = N, e->V = t->cfg.vocab_size;
    assert_true(K >= 1 && K <= TU_MAX_K && pow((double)e->V, K) < 1.8e19);
    TuWalk w = {0};
    w.t = t, w.prompt = prompt, w.n_prompt = n, w.temp = temp, w.e = e;
    w.ids = malloc(sizeof(int) * (size_t)(n + K));
    assert_non_null(w.ids);
    w.dist = malloc(sizeof(double) * (size_t)K * (size_t)e->V);
    assert_non_null(w.dist);
    int cap_T = n + K;
    assert_int_equal(cache_init(&w.kv, &t->cfg, n + K), 0);
    assert_int_equal(target_run_init(&w.tr, &t->cfg, cap_T, n + K), 0);
    target_forward(t, &w.kv, &w.tr, prompt, n, n - 1, NULL);  /* P(t1) */
    tu_softmax_temp(w.tr.logits, e->V, temp, w.dist);
    e->forwards = 1;
    tu_walk(&w, 0, 1.0);
    for (int k = 1; k <= K; k++) qsort(e->cell[k], (size_t)e->n[k], sizeof(TuCell), tu_cell_cmp);
    target_run_free(&w.tr);
    cache_free(&w.kv);
    free(w.dist);
    free(w.ids);
}

static inline void tu_exact_free(TuExact *e) {
    for (int k = 1; k <= TU_MAX_K; k++) free(e->cell[k]);
    memset(e, 0, sizeof *e);
}

/* Pearson's chi-square of N observed sequences (obs: row s at obs + s * stride,
 * its first k tokens) against the cells of depth k and the pooled rest. With
 * nested, also each prefix's residual is a cell of its own when its expected
 * count is >= 5: the sequences that begin with the cell t1 (or t1 t2) but are
 * no cell of depth k (a residual under 5 joins its parent's, the outermost
 * the rest), so a 3-token check also sees what a 2-token one does. The
 * degrees of freedom are the cells (the rest included) less one, the limit
 * df + 6 sqrt(2 df): about 6 standard deviations of the chi-square above its
 * mean. */
static inline TuFit tu_fit_cells(const TuExact *e, int k, const int *obs, int stride, int nested) {
    assert_true(k >= 1 && k <= e->K);
    int N = e->N, n_bins = 1;  /* bin 0: the rest */
    int *bin[TU_MAX_K + 1] = {0};  /* depth j < k: the bin of the node's residual; depth k: the cell's bin */
    double *child[TU_MAX_K + 1] = {0};  /* depth j: its children's mass */
    uint64_t Vj[TU_MAX_K + 1];
    Vj[0] = 1;
    for (int j = 1; j <= k; j++) Vj[j] = Vj[j - 1] * (uint64_t)e->V;
    for (int j = 1; j <= k; j++) {
        bin[j] = calloc((size_t)e->n[j] + 1, sizeof(int));
        child[j] = calloc((size_t)e->n[j] + 1, sizeof(double));
        assert_true(bin[j] && child[j]);
    }
    for (int j = 2; j <= k; j++)  /* each cell's mass to its parent (the key of its first j-1 tokens) */
        for (int c = 0; c < e->n[j]; c++) {
            TuCell want = {e->cell[j][c].key % Vj[j - 1], 0};
            const TuCell *par = bsearch(&want, e->cell[j - 1], (size_t)e->n[j - 1], sizeof(TuCell), tu_cell_cmp);
            assert_non_null(par);
            child[j - 1][par - e->cell[j - 1]] += e->cell[j][c].p;
        }
    double *ex = calloc((size_t)N + 2, sizeof(double));  /* a bin per cell at most: n[j] <= N / 5, k <= 4 */
    int *count = calloc((size_t)N + 2, sizeof(int));
    assert_true(ex && count);
    double top = 0;
    for (int c = 0; c < e->n[1]; c++) top += e->cell[1][c].p;
    ex[0] = N * (1 - top > 0 ? 1 - top : 0);
    for (int j = 1; j <= k; j++)
        for (int c = 0; c < e->n[j]; c++) {
            int parent_bin = 0;
            if (j > 1) {
                TuCell want = {e->cell[j][c].key % Vj[j - 1], 0};
                parent_bin = bin[j - 1][(const TuCell *)bsearch(&want, e->cell[j - 1], (size_t)e->n[j - 1], sizeof(TuCell),
                                                                 tu_cell_cmp) - e->cell[j - 1]];
            }
            double m = j == k ? e->cell[j][c].p : e->cell[j][c].p - child[j][c];  /* the cell, or its residual */
            if (m < 0) m = 0;
            if (j == k || (nested && N * m >= 5)) bin[j][c] = n_bins++;
            else bin[j][c] = parent_bin;
            ex[bin[j][c]] += N * m;
        }
    for (int s = 0; s < N; s++) {  /* the deepest prefix that is a cell */
        int b = 0;
        for (int j = k; j >= 1; j--) {
            TuCell want = {tu_seq_key(obs + (size_t)s * stride, j, e->V), 0};
            const TuCell *c = bsearch(&want, e->cell[j], (size_t)e->n[j], sizeof(TuCell), tu_cell_cmp);
            if (c) { b = bin[j][c - e->cell[j]]; break; }
        }
        count[b]++;
    }
    TuFit f = {0, 0, -1, 0};
    for (int b = 1; b < n_bins; b++) {
        f.chi2 += (count[b] - ex[b]) * (count[b] - ex[b]) / ex[b];
        f.df++;
    }
    if (ex[0] > 1e-9 * N || count[0] > 0) {  /* (a rest under 1 expected draw divides by 1) */
        f.chi2 += (count[0] - ex[0]) * (count[0] - ex[0]) / (ex[0] > 1 ? ex[0] : 1);
        f.df++;
    }
    f.limit = f.df + 6 * sqrt(2.0 * f.df);
    f.pass = f.chi2 <= f.limit;
    for (int j = 1; j <= k; j++) free(bin[j]), free(child[j]);
    free(ex);
    free(count);
    return f;
}

/* the cells of depth k and one rest (tests/test_core.c, test_lookup.c) */
static inline TuFit tu_fit(const TuExact *e, int k, const int *obs, int stride) {
    return tu_fit_cells(e, k, obs, stride, 0);
}

/* the cells of depth k and each prefix's residual (learned/tests/test_learned.c) */
static inline TuFit tu_fit_nested(const TuExact *e, int k, const int *obs, int stride) {
    return tu_fit_cells(e, k, obs, stride, 1);
}

/* tu_fit, failing the test when the chi-square is over the limit */
static inline TuFit tu_assert_fits(const TuExact *e, int k, const int *obs, int stride, const char *what) {
    TuFit f = tu_fit(e, k, obs, stride);
    if (!f.pass) fail_msg("%s: chi-square %.1f over %d degrees of freedom (limit %.1f)", what, f.chi2, f.df, f.limit);
    return f;
}

/* One mode of a lossless check: the first K new tokens of seeds 0..N-1 from
 * prompt[0..n) at temperature temp, by target-only decoding (B 1:
 * ar_generate) or DFlash at block B (draft d), into obs[K s + k]. Each run
 * must give n + K tokens (exact), or at least that many (not exact); its
 * rounds' accepted proposals add to *accepted, those that rejected one
 * (accepted < B - 1) to *rejected. */
static inline void tu_sample_mode(const Model *d, const Model *t, const int *prompt, int n, int B, double temp, int K,
                                  int N, int exact, int *obs, int *accepted, int *rejected) {
    for (int s = 0; s < N; s++) {
        GenParams gp = {.max_new_tokens = K, .block_size = B, .temperature = temp, .seed = (uint64_t)s};
        GenResult r;
        if (B == 1) assert_int_equal(ar_generate(t, prompt, n, &gp, &r), 0);
        else assert_int_equal(dflash_generate(d, t, prompt, n, &gp, &r), 0);
        if (exact) assert_int_equal(r.n_output, n + K);
        else assert_true(r.n_output >= n + K);
        for (int k = 0; k < K; k++) obs[K * s + k] = r.output_ids[n + k];
        for (int i = 0; i < r.n_rounds; i++) {
            *accepted += r.rounds[i].acceptance_length;
            *rejected += r.rounds[i].acceptance_length < B - 1;
        }
        gen_result_free(&r);
    }
}

/* The lossless check of three modes at temperature temp, from prompt[0..n):
 * target-only decoding (mode 0) and DFlash at blocks 2 and 3 (modes 1, 2),
 * N seeds each (tu_sample_mode: exact as there), whose first K new tokens must
 * fit the exact distribution (tu_assert_fits); accepted[mode] and
 * rejected[mode] as tu_sample_mode counts them. (tests/test_core.c,
 * test_hybrid.c) */
static inline void tu_assert_modes_fit(const Model *d, const Model *t, const int *prompt, int n, double temp, int K,
                                       int N, int exact, int accepted[3], int rejected[3]) {
    static const char *const what[3] = {"autoregressive", "DFlash block 2", "DFlash block 3"};
    TuExact P;
    tu_exact_build(&P, t, prompt, n, temp, K, N);
    int *obs = malloc(sizeof(int) * (size_t)K * (size_t)N);
    assert_non_null(obs);
    for (int mode = 0; mode < 3; mode++) {
        accepted[mode] = rejected[mode] = 0;
        tu_sample_mode(d, t, prompt, n, mode + 1, temp, K, N, exact, obs, &accepted[mode], &rejected[mode]);
        tu_assert_fits(&P, K, obs, K, what[mode]);
    }
    free(obs);
    tu_exact_free(&P);
}

#endif /* SAMPLEUTIL_H */
