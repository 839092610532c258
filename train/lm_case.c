/* train/lm_case.c - run an lm_oracle.py case file through train/train.c's lm_step
 * (next-token training of a target) and trace every step: the C side of
 * the target training parity check (NOTES.md, "Training a target: parity").
 * Not part of CI or of ./dflash.
 *
 *   train/lm_case CASE.json TRACE_DIR [--threads N]
 *   train/lm_case CASE.json - [--threads N]      no trace: times each step
 *                                                (tokens/s, model FLOP/s)
 *
 * Reads the case's "weights" (the folder or its target/ subfolder), "adamw"
 * (lr, betas, eps, weight_decay, max_grad_norm, decay_2d_only) and every
 * entry of "batches" (input_ids, loss_mask), relative paths first as given,
 * then beside the case file (as lm_oracle.py does), and writes
 * TRACE_DIR/train{s}.<name>.npy. */
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"
#include "trace.h"
#include "train/train.h"
#include "train/case_paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>


int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 5 && strcmp(argv[3], "--threads") == 0)) {
        fprintf(stderr, "usage: lm_case CASE.json TRACE_DIR [--threads N]\n");
        return 2;
    }
    char *text;
    size_t len;
    Json root;
    if (file_read_all(argv[1], &text, &len) != 0 || json_parse(text, len, argv[1], &root) != 0) {
        dflash_print_error("lm_case", "");
        return 2;
    }
    char wdir[4096], cfgp[4200];
    const Json *w = json_get(&root, "weights"), *bl = json_get(&root, "batches");
    if (!w || w->type != JSON_STRING || !bl || bl->type != JSON_ARRAY || bl->n < 1) {
        fprintf(stderr, "lm_case: %s: expected \"weights\" and a non-empty \"batches\" list\n", argv[1]);
        return 2;
    }
    /* "weights": the target's folder, or a set holding it as target/ */
    if (case_dir("lm_case", argv[1], w->string, "", wdir, sizeof wdir) != 0) return 2;
    struct stat sb;
    snprintf(cfgp, sizeof cfgp, "%s/config.json", wdir);
    if (stat(cfgp, &sb) != 0 && case_dir("lm_case", argv[1], w->string, "/target", wdir, sizeof wdir) != 0) return 2;
    Model target;
    if (model_load(&target, wdir, 0) != 0) { dflash_print_error("lm_case", ""); return 2; }
    const Json *aw = json_get(&root, "adamw");
    const Json *betas = aw ? json_get(aw, "betas") : NULL, *mgn = aw ? json_get(aw, "max_grad_norm") : NULL;
    const Json *d2 = aw ? json_get(aw, "decay_2d_only") : NULL;
    TrainHyper hp = {0};
    hp.lr = json_number_or(aw, "lr", 1e-3);
    int two = betas && betas->type == JSON_ARRAY && betas->n == 2;
    hp.beta1 = two ? betas->items[0].number : 0.9;
    hp.beta2 = two ? betas->items[1].number : 0.999;
    hp.eps = json_number_or(aw, "eps", 1e-8);
    hp.weight_decay = json_number_or(aw, "weight_decay", 0.01);
    hp.max_grad_norm = mgn && mgn->type == JSON_NUMBER ? mgn->number : 0;
    hp.decay_on = d2 && d2->type == JSON_BOOL && d2->boolean ? TRAIN_DECAY_MATRICES : TRAIN_DECAY_ALL;
    hp.threads = argc == 5 ? atoi(argv[4]) : 1;
    if (hp.threads < 1 || hp.threads > 64) {
        fprintf(stderr, "lm_case: --threads: expected an integer in 1..64, got \"%s\"\n", argv[4]);
        return 2;
    }
    int b_max = 1, T_max = 2;
    for (int s = 0; s < bl->n; s++) {
        int b, T;
        int *ids = json_int_rows(json_get(&bl->items[s], "input_ids"), &b, &T);
        if (!ids) { fprintf(stderr, "lm_case: %s: batches[%d]: bad input_ids\n", argv[1], s); return 2; }
        if (b > b_max) b_max = b;
        if (T > T_max) T_max = T;
        free(ids);
    }
    LmState *st = lm_state_new(&target, b_max, T_max);
    int timing = strcmp(argv[2], "-") == 0;
    Tracer *tr = st && !timing ? trace_open(argv[2], NULL, NULL, 0) : NULL;
    if (!st || (!timing && !tr)) { dflash_print_error("lm_case", ""); return 2; }
    /* model FLOPs per token of a training step (llm.c's and PaLM's count):
     * 6 per parameter (forward 2, backward 4) + 12 L D T for attention */
    const Config *c = &target.cfg;
    double n_params = 0;
    TrainParam ps[1024];
    int np_ = lm_params(&target, ps, 1024);
    for (int i = 0; i < np_ && i < 1024; i++) n_params += (double)ps[i].shape[0] * (ps[i].ndim == 2 ? ps[i].shape[1] : 1);
    double t0 = now_seconds();
    long tokens = 0;
    for (int s = 0; s < bl->n; s++) {
        const Json *o = &bl->items[s];
        int b, T, rr, cc;
        int *ids = json_int_rows(json_get(o, "input_ids"), &b, &T), *lm = json_int_rows(json_get(o, "loss_mask"), &rr, &cc);
        if (lm && (rr != b || cc != T)) {
            fprintf(stderr, "lm_case: %s: batches[%d]: loss_mask is not %d x %d\n", argv[1], s, b, T);
            if (tr) trace_discard(tr);
            return 2;
        }
        LmBatch bt = {b, T, ids, lm};
        LmStats stats;
        double ts = now_seconds();
        clock_t cs = clock();
        if (lm_step(&target, st, &bt, &hp, s + 1, tr ? trace_hook(tr) : NULL, &stats) != 0) {
            dflash_print_error("lm_case", "");
            if (tr) trace_discard(tr);
            return 1;
        }
        ts = now_seconds() - ts;
        double cpu = (double)(clock() - cs) / CLOCKS_PER_SEC;
        tokens += (long)b * T;
        double flops = (6 * n_params + 12.0 * c->num_hidden_layers * c->hidden_size * T) * b * T;
        printf("step %d: loss %.6f grad_norm %.6f clip %.6f", s + 1, stats.loss, stats.grad_norm, stats.clip_coef);
        if (timing)
            printf("  wall %.3f s  cpu %.3f s  %.1f tokens/s  %.2f GFLOP/s (cpu)", ts, cpu, b * T / cpu,
                   flops / cpu / 1e9);
        printf("\n");
        fflush(stdout);
        free(ids); free(lm);
    }
    fprintf(stderr, "lm_case: %ld tokens in %.3f s%s\n", tokens, now_seconds() - t0, tr ? " (with tracing)" : "");
    if (tr && trace_close(tr) != 0) { dflash_print_error("lm_case", ""); return 1; }
    lm_state_free(st);
    model_free(&target);
    json_free(&root);
    free(text);
    return 0;
}
