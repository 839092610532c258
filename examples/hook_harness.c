/* examples/hook_harness.c - a port's C harness: every tensor in-process.
 *
 * The smallest complete use of the trace hook as a C API (TRACE.md, "The
 * hook: a C API"). It links the algorithm (dflash.c), the table that shapes
 * what the hook receives (formats/tracenames.c) and the loader (formats/load.c, formats/json.c,
 * formats/files.c), and nothing of the file tracer:
 *
 *   cc -std=c11 -D_POSIX_C_SOURCE=200809L -ffp-contract=off -I. \
 *      examples/hook_harness.c dflash.c formats/tracenames.c formats/load.c formats/json.c formats/files.c -lm
 *
 * It runs the walkthrough ("The cat sat", block 4, up to 16 new tokens, stop
 * at <eos>), keeps a copy of four tensors of the prefill's first layer as they
 * arrive, and then checks them against its own computation in double:
 *   attn_scores[h][t][s] = q_rope[h][t] . k_rope[h / (H/Hkv)][s] / sqrt(d)
 *   attn_weights         = softmax over s <= t of attn_scores (0 for s > t)
 * (the prefill has no cache, so its S keys are its own T = n rows).
 *
 * It is a FLOAT harness: it reads real values as float. Each tensor's
 * elem_size says how wide the library's values are; a float harness linked
 * with the double build's objects would read garbage, so it refuses the
 * first real tensor whose elem_size is not sizeof(float), and the run stops
 * with that message (`make test` checks both: tools/examples-check.sh).
 *
 * Exit status: 0 the checks pass, 1 a check fails, 2 the run could not be
 * made (weights missing, the element size refused).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dflash.h"
#include "formats/load.h"
#include "formats/tracenames.h"

/* the tensors the checks need, copied while they are valid */
#define N_KEEP 4
static const char *const keep_names[N_KEEP] = {
    "prefill.layers.0.self_attn.q_rope", "prefill.layers.0.self_attn.k_rope",
    "prefill.layers.0.self_attn.attn_scores", "prefill.layers.0.self_attn.attn_weights",
};

typedef struct {
    float *data[N_KEEP];             /* (the tensor's count) copies, NULL until received */
    int64_t shape[N_KEEP][TRACE_MAX_DIMS];
    int received;                    /* tensors handed over */
    int64_t ids, values;             /* how many int and real values arrived */
} Harness;

/* One tensor, in the contract's shape. t->data is valid during this call
 * only (it may be dflash.c's own buffer, reused by the next layer): copy. */
static int take(void *ctx, const TraceTensor *t) {
    Harness *h = ctx;
    int want = t->is_int ? (int)sizeof(int64_t) : (int)sizeof(float);
    if (t->elem_size != want) {
        dflash_set_error("hook_harness: %s has %d-byte values, this harness reads %d-byte %s: it is built for "
                         "the float build (link the objects of `make`, not of `make REAL=double`)",
                         t->name, t->elem_size, want, t->is_int ? "int64" : "float");
        return -1;
    }
    int64_t count = 1;
    for (int i = 0; i < t->ndim; i++) count *= t->shape[i];
    h->received++;
    if (t->is_int) h->ids += count;
    else h->values += count;
    for (int k = 0; k < N_KEEP; k++) {
        if (strcmp(t->name, keep_names[k]) != 0) continue;
        if (t->ndim != 3) {
            dflash_set_error("hook_harness: %s has %d axes, expected 3", t->name, t->ndim);
            return -1;
        }
        h->data[k] = malloc(sizeof(float) * (size_t)count);
        if (!h->data[k]) {
            dflash_set_error("hook_harness: out of memory copying %s", t->name);
            return -1;
        }
        memcpy(h->data[k], t->data, sizeof(float) * (size_t)count);
        memcpy(h->shape[k], t->shape, sizeof t->shape);
    }
    return 0;
}

/* the hook dflash.c calls: its hand, shaped by the name table, to take() */
static int hook(void *ctx, const TraceHand *hand) { return trace_shape_hand(hand, take, ctx); }

/* the largest |a - b| over n values, relative to the largest |a| */
static double worst_rel(const double *a, const float *b, size_t n) {
    double amax = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(a[i]) > amax) amax = fabs(a[i]);
        if (fabs(a[i] - b[i]) > worst) worst = fabs(a[i] - b[i]);
    }
    return amax > 0 ? worst / amax : worst;
}

/* The two recomputations; 0 both within 1e-5 relative, 1 not. */
static int check(const Harness *h) {
    for (int k = 0; k < N_KEEP; k++)
        if (!h->data[k]) {
            fprintf(stderr, "hook_harness: FAIL: never received %s\n", keep_names[k]);
            return 1;
        }
    const float *q = h->data[0], *kr = h->data[1], *scores = h->data[2], *weights = h->data[3];
    int H = (int)h->shape[0][0], T = (int)h->shape[0][1], d = (int)h->shape[0][2];
    int Hkv = (int)h->shape[1][0], S = (int)h->shape[2][2];
    if (h->shape[1][1] != S || h->shape[1][2] != d || h->shape[2][0] != H || h->shape[2][1] != T || S != T) {
        fprintf(stderr, "hook_harness: FAIL: shapes q_rope [%d,%d,%d], k_rope [%d,%lld,%lld], scores "
                        "[%lld,%lld,%d] do not fit a prefill\n", H, T, d, Hkv, (long long)h->shape[1][1],
                (long long)h->shape[1][2], (long long)h->shape[2][0], (long long)h->shape[2][1], S);
        return 1;
    }
    size_t n = (size_t)H * T * S;
    double *want_s = malloc(sizeof(double) * n), *want_w = malloc(sizeof(double) * n);
    if (!want_s || !want_w) {
        free(want_s);
        free(want_w);
        fprintf(stderr, "hook_harness: out of memory\n");
        return 1;
    }
    for (int hh = 0; hh < H; hh++) {
        int kv = hh / (H / Hkv);  /* query head hh reads KV head hh / (H / Hkv) */
        for (int t = 0; t < T; t++) {
            double *rs = want_s + ((size_t)hh * T + t) * S, *rw = want_w + ((size_t)hh * T + t) * S;
            double top = -INFINITY, sum = 0;
            for (int s = 0; s < S; s++) {
                double acc = 0;
                for (int i = 0; i < d; i++)
                    acc += (double)q[((size_t)hh * T + t) * d + i] * kr[((size_t)kv * S + s) * d + i];
                rs[s] = acc / sqrt((double)d);
                if (s <= t && rs[s] > top) top = rs[s];
            }
            for (int s = 0; s < S; s++) sum += rw[s] = s <= t ? exp(rs[s] - top) : 0;
            for (int s = 0; s < S; s++) rw[s] /= sum;
        }
    }
    double es = worst_rel(want_s, scores, n), ew = worst_rel(want_w, weights, n);
    free(want_s);
    free(want_w);
    printf("hook_harness: %d tensors received (%lld ids, %lld float values); prefill.layers.0 [H %d, T %d, d %d]:\n"
           "  attn_scores  = q_rope . k_rope / sqrt(d), recomputed in double: worst error %.2e of max|x|\n"
           "  attn_weights = causal softmax of those scores, recomputed:      worst error %.2e of max|x|\n",
           h->received, (long long)h->ids, (long long)h->values, H, T, d, es, ew);
    if (es > 1e-5 || ew > 1e-5) {
        fprintf(stderr, "hook_harness: FAIL: a recomputation differs by more than 1e-5\n");
        return 1;
    }
    printf("hook_harness: OK\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "toy_weights/walkthrough";
    char path[1024];
    Vocab vocab = {0};
    Model target = {0}, draft = {0};
    Harness h = {0};
    int rc = 2, ids[16], n = 0;
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    if (vocab_load(&vocab, path) != 0) goto fail;
    snprintf(path, sizeof path, "%s/target", dir);
    if (model_load(&target, path, 0) != 0) goto fail;
    snprintf(path, sizeof path, "%s/draft", dir);
    if (model_load(&draft, path, 1) != 0 || check_pair(&target, &draft) != 0) goto fail;
    if (tokenize(&vocab, "The cat sat", ids, 16, &n) != 0) goto fail;

    TraceHook th = {hook, &h};
    GenParams p = {0};
    p.max_new_tokens = 16;
    p.block_size = 4;
    p.n_stop = 1;
    p.stop_ids[0] = vocab_find(&vocab, "<eos>");
    p.trace = &th;
    GenResult res;
    if (dflash_generate(&draft, &target, ids, n, &p, &res) != 0) goto fail;
    gen_result_free(&res);
    rc = check(&h);
    goto done;
fail:
    fprintf(stderr, "hook_harness: %s\n", dflash_errmsg);
done:
    for (int k = 0; k < N_KEEP; k++) free(h.data[k]);
    model_free(&draft);
    model_free(&target);
    vocab_free(&vocab);
    return rc;
}
