/* eval/lookup.c - copy-the-anchor and prompt-lookup (n-gram) drafting,
 * verified by dflash.c's target forward exactly as DFlash's proposals are
 * (eval/lookup.h says what each drafter proposes; NOTES.md, "Baselines: copy
 * the anchor, prompt lookup", where each rule was read). Not in dflash.c:
 * dflash.c is DFlash and nothing else; this file calls its building blocks
 * (target_forward, sample_row, acceptance_length, the KV cache). */
#include "eval/lookup.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int drafter_kind(const char *s) {
    if (strcmp(s, "copy") == 0) return DRAFT_COPY;
    if (strcmp(s, "ngram") == 0) return DRAFT_NGRAM;
    if (strcmp(s, "lookup") == 0) return DRAFT_LOOKUP;
    return -1;
}

const char *drafter_name(DrafterKind k) {
    return k == DRAFT_COPY ? "copy" : k == DRAFT_NGRAM ? "ngram" : "lookup";
}

int drafter_check(const Drafter *d) {
    if (d->kind == DRAFT_COPY) return 0;
    if (d->ngram_min < 1 || d->ngram_max < d->ngram_min) {
        dflash_set_error("%s: n-gram sizes %d..%d: expected 1 <= --ngram-min <= --ngram-max", drafter_name(d->kind),
                         d->ngram_min, d->ngram_max);
        return -1;
    }
    if (d->kind == DRAFT_LOOKUP && d->ngram_max > LOOKUP_NGRAM_MAX) {
        dflash_set_error("lookup: --ngram-max %d: expected at most %d (llama.cpp's LLAMA_NGRAM_MAX)", d->ngram_max,
                         LOOKUP_NGRAM_MAX);
        return -1;
    }
    return 0;
}

/* ---- vLLM's n-gram proposer ------------------------------------------------
 * The longest n in ngram_max..ngram_min such that the last n tokens of ctx
 * occurred earlier (an occurrence ctx[j..j+n) with j + n <= len - 1: it ends
 * before the anchor; it may overlap the suffix); of those occurrences the
 * earliest (smallest j); then ctx[j+n ..], at most k tokens and at most up
 * to the end of ctx. vLLM finds the same with a KMP pass over the reversed
 * tokens (_find_longest_matched_ngram_and_propose_tokens); this is the
 * direct search. */
static int propose_ngram(const Drafter *d, const int *ctx, int len, int k, int *out) {
    for (int n = d->ngram_max; n >= d->ngram_min; n--) {
        if (n > len - 1) continue;  /* no earlier occurrence fits */
        const int *suffix = ctx + len - n;
        for (int j = 0; j + n <= len - 1; j++) {
            if (memcmp(ctx + j, suffix, sizeof(int) * (size_t)n) != 0) continue;
            int m = len - (j + n);  /* tokens after the occurrence */
            if (m > k) m = k;
            memcpy(out, ctx + j + n, sizeof(int) * (size_t)m);
            return m;
        }
    }
    return 0;
}

/* ---- llama.cpp's lookup decoding, the context cache ----------------------
 * The context cache maps every n-gram ctx[i-n..i) (n = ngram_min..ngram_max,
 * n <= i < len) to the counts of the tokens ctx[i] that followed it. A
 * draft grows one token at a time: the key is the last n tokens of ctx
 * followed by the tokens drafted so far, n from ngram_max down; the first n
 * whose followers number at least min_sample[n-1] in all and whose most
 * frequent follower has at least min_percent[n-1] % of them gives that
 * follower; when no n does, the draft ends. The thresholds are llama.cpp's
 * "lax" ones (common/ngram-cache.cpp, for the context cache). Ties between
 * followers: the smallest token id (llama.cpp takes the first in its
 * unordered_map's order, which the standard leaves unspecified). Drafted
 * tokens do not enter the cache. */
static const int lookup_min_sample[LOOKUP_NGRAM_MAX] = {2, 2, 1, 1};
static const int lookup_min_percent[LOOKUP_NGRAM_MAX] = {66, 50, 50, 50};

/* the token at position i of ctx followed by draft */
static int seq_at(const int *ctx, int len, const int *draft, int i) { return i < len ? ctx[i] : draft[i - len]; }

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

static int propose_lookup(const Drafter *d, const int *ctx, int len, int k, int *out) {
    int n_out = 0;
    if (len < 2) return 0;  /* llama.cpp: no draft before LLAMA_NGRAM_STATIC (2) tokens */
    int *followers = malloc(sizeof(int) * (size_t)len);
    if (!followers) return 0;  /* no memory: no proposal (the round verifies the anchor alone) */
    while (n_out < k) {
        int total = len + n_out, drafted = -1;
        for (int n = d->ngram_max; n >= d->ngram_min && drafted < 0; n--) {
            if (n > total) continue;
            /* the cache entry of the key: the followers ctx[i] of every i with ctx[i-n..i) == key */
            int sum = 0;
            for (int i = n; i < len; i++) {
                int same = 1;
                for (int t = 0; t < n && same; t++) same = ctx[i - n + t] == seq_at(ctx, len, out, total - n + t);
                if (same) followers[sum++] = ctx[i];
            }
            if (sum < lookup_min_sample[n - 1]) continue;
            /* the most frequent follower, the smallest id on a tie (sorted: runs of equal ids) */
            qsort(followers, (size_t)sum, sizeof(int), cmp_int);
            int best = -1, best_count = 0;
            for (int i = 0; i < sum;) {
                int j = i;
                while (j < sum && followers[j] == followers[i]) j++;
                if (j - i > best_count) best = followers[i], best_count = j - i;
                i = j;
            }
            if (100 * best_count < lookup_min_percent[n - 1] * sum) continue;
            drafted = best;
        }
        if (drafted < 0) break;
        out[n_out++] = drafted;
    }
    free(followers);
    return n_out;
}

int drafter_propose(const Drafter *d, const int *ctx, int len, int k, int *out) {
    if (k <= 0) return 0;
    switch (d->kind) {
    case DRAFT_COPY:
        for (int i = 0; i < k; i++) out[i] = ctx[len - 1];
        return k;
    case DRAFT_NGRAM: return propose_ngram(d, ctx, len, k, out);
    case DRAFT_LOOKUP: return propose_lookup(d, ctx, len, k, out);
    }
    return 0;
}

/* -1 with dflash_errmsg when the forward met a non-finite sum or logit */
static int forward_finite(const TargetRun *tr, int rows, int V, const char *phase, int round) {
    if (tr->fault.name) {
        dflash_set_error("%s (round %d): a non-finite sum in %s (layer %d)", phase, round, tr->fault.name,
                         tr->fault.layer);
        return -1;
    }
    for (size_t i = 0; i < (size_t)rows * (size_t)V; i++)
        if (!isfinite((double)tr->logits[i])) {
            dflash_set_error("%s (round %d): logits: a non-finite value at row %zu", phase, round, i / (size_t)V);
            return -1;
        }
    return 0;
}

static int stop_id(const GenParams *p, int id) {
    for (int i = 0; i < p->n_stop; i++) if (p->stop_ids[i] == id) return 1;
    return 0;
}

int lookup_generate(const Drafter *d, const Model *target, const int *input_ids, int n_prompt, const GenParams *p,
                    GenResult *res) {
    memset(res, 0, sizeof *res);
    int B = p->block_size;
    if (drafter_check(d) != 0) return -1;
    if (check_gen_args(target, n_prompt, p, B, input_ids) != 0) return -1;
    const Config *tcfg = &target->cfg;
    int n = n_prompt, V = tcfg->vocab_size;
    int max_length = n + p->max_new_tokens;
    int cap_T = n > B ? n : B, cap_S = max_length + B;
    Rng rng;
    rng_seed(&rng, p->seed);
    int rc = -1;
    KVCache cache = {0};
    TargetRun tr = {0};
    int *output_ids = xcalloc((size_t)max_length + B + 1, sizeof(int), "output_ids");
    int *block = xcalloc((size_t)B, sizeof(int), "block"), *posterior = xcalloc((size_t)B, sizeof(int), "posterior");
    RoundInfo *rounds = xcalloc((size_t)p->max_new_tokens + 1, sizeof(RoundInfo), "round log");
    if (!output_ids || !block || !posterior || !rounds) goto done;
    if (cache_init(&cache, tcfg, cap_S) != 0 || target_run_init(&tr, tcfg, cap_T, cap_S) != 0) goto done;
    memcpy(output_ids, input_ids, sizeof(int) * (size_t)n);

    /* prefill: the prompt, the first new token from its last position */
    double t0 = now_seconds();
    target_forward(target, &cache, &tr, input_ids, n, n - 1, NULL);
    if (forward_finite(&tr, 1, V, "prefill", 0) != 0) goto done;
    output_ids[n] = sample_row(tr.logits, V, p->temperature, &rng);
    res->target_forwards = 1;
    res->seconds_prefill = now_seconds() - t0;

    int start = n;  /* output_ids[0..start] are known; output_ids[start] is the anchor */
    while (start < max_length) {
        RoundInfo *ri = &rounds[res->n_rounds++];
        ri->start_before = start;
        /* the proposal: at most B-1 tokens after the anchor */
        double t_draft = now_seconds();
        block[0] = output_ids[start];
        int T = 1 + drafter_propose(d, output_ids, start + 1, B - 1, block + 1);
        res->seconds_draft += now_seconds() - t_draft;
        memcpy(ri->block_in, block, sizeof(int) * (size_t)T);

        /* verification: the T tokens in one target forward, dflash_generate's rule */
        double t_verify = now_seconds();
        target_forward(target, &cache, &tr, block, T, 0, NULL);
        if (forward_finite(&tr, T, V, "verify", res->n_rounds) != 0) goto done;
        for (int i = 0; i < T; i++) posterior[i] = sample_row(tr.logits + (size_t)i * V, V, p->temperature, &rng);
        int acc = acceptance_length(block, posterior, T, ri->match, ri->cumprod);
        for (int i = 0; i <= acc; i++) output_ids[start + i] = block[i];
        output_ids[start + acc + 1] = posterior[acc];  /* the bonus token */
        start += acc + 1;
        cache_crop(&cache, start);
        res->target_forwards++;
        res->seconds_verify += now_seconds() - t_verify;

        /* the round log: positions T..B-1 were not proposed (block -1, posterior -1) */
        for (int i = 0; i < B; i++) {
            ri->block[i] = i < T ? block[i] : -1;
            ri->posterior[i] = i < T ? posterior[i] : -1;
            if (i >= T) ri->block_in[i] = -1;
            if (i >= 1 && i >= T) ri->match[i - 1] = ri->cumprod[i - 1] = 0;
        }
        ri->acceptance_length = acc;
        ri->start_after = start;
        ri->target_cache_after = cache.len;

        /* stop if any stop id appears anywhere in output_ids[n..start] (dflash_generate's rule) */
        int stopped = 0;
        for (int i = n; i <= start && !stopped; i++) stopped = stop_id(p, output_ids[i]);
        if (stopped) break;
    }

    /* output = output_ids[:min(start+1, max_length)], cut after the first stop id (dflash_generate's) */
    int m = start + 1 < max_length ? start + 1 : max_length;
    for (int i = n; i < m; i++)
        if (stop_id(p, output_ids[i])) { m = i + 1; break; }
    res->output_ids = xcalloc((size_t)m, sizeof(int), "result output_ids");
    if (!res->output_ids) goto done;
    memcpy(res->output_ids, output_ids, sizeof(int) * (size_t)m);
    res->n_output = m;
    res->n_prompt = n;
    res->rounds = rounds;
    rounds = NULL;
    rc = 0;
done:
    free(output_ids);
    free(block);
    free(posterior);
    free(rounds);
    cache_free(&cache);
    target_run_free(&tr);
    if (rc != 0) gen_result_free(res);
    return rc;
}
