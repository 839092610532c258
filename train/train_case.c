/* train/train_case.c - run train_oracle.py's case file through train/train.c and
 * trace every step: the C side of the training parity check (NOTES.md,
 * "Training parity"). Not part of CI or of ./dflash.
 *
 *   train/train_case CASE.json TRACE_DIR
 *
 * Reads the case's "weights" (or "target" and "draft") folders, "gamma",
 * "adamw" and every entry of "batches" (input_ids, loss_mask, anchors,
 * keep), relative paths first as given, then beside the case file (as
 * train_oracle.py does), and writes TRACE_DIR/train{s}.<name>.npy. */
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"
#include "trace.h"
#include "train/train.h"
#include "train/case_paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: train_case CASE.json TRACE_DIR\n"); return 2; }
    char *text;
    size_t len;
    Json root;
    if (file_read_all(argv[1], &text, &len) != 0 || json_parse(text, len, argv[1], &root) != 0) {
        dflash_print_error("train_case", "");
        return 2;
    }
    char tdir[4096], ddir[4096];
    const Json *w = json_get(&root, "weights"), *t = json_get(&root, "target"), *d = json_get(&root, "draft");
    const Json *bl = json_get(&root, "batches");
    if (!(t && d && t->type == JSON_STRING && d->type == JSON_STRING) && !(w && w->type == JSON_STRING)) {
        fprintf(stderr, "train_case: %s: expected \"weights\" or \"target\" and \"draft\" folders\n", argv[1]);
        return 2;
    }
    if (!bl || bl->type != JSON_ARRAY || bl->n < 1) {
        fprintf(stderr, "train_case: %s: expected a non-empty \"batches\" list\n", argv[1]);
        return 2;
    }
    const char *tp = t && d ? t->string : w->string, *dp = t && d ? d->string : w->string;
    if (case_dir("train_case", argv[1], tp, t && d ? "" : "/target", tdir, sizeof tdir) != 0 ||
        case_dir("train_case", argv[1], dp, t && d ? "" : "/draft", ddir, sizeof ddir) != 0)
        return 2;
    Model target, draft;
    if (model_load(&target, tdir, 0) != 0 || model_load(&draft, ddir, 1) != 0) {
        dflash_print_error("train_case", "");
        return 2;
    }
    const Json *g = json_get(&root, "gamma"), *aw = json_get(&root, "adamw");
    const Json *betas = aw ? json_get(aw, "betas") : NULL, *mgn = aw ? json_get(aw, "max_grad_norm") : NULL;
    TrainHyper hp = {json_number_or(aw, "lr", 1e-3), betas ? betas->items[0].number : 0.9, betas ? betas->items[1].number : 0.999,
                     json_number_or(aw, "eps", 1e-8), json_number_or(aw, "weight_decay", 0.01),
                     mgn && mgn->type == JSON_NUMBER ? mgn->number : 0, g && g->type == JSON_NUMBER ? g->number : 0, 0, 0, 1};
    TrainState *st = train_state_new(&draft, &target);
    Tracer *tr = st ? trace_open(argv[2], NULL, NULL, 0) : NULL;
    if (!tr) { dflash_print_error("train_case", ""); return 2; }
    for (int s = 0; s < bl->n; s++) {
        const Json *o = &bl->items[s];
        int b, S, b2, N, rr, cc;
        int *ids = json_int_rows(json_get(o, "input_ids"), &b, &S), *anchors = json_int_rows(json_get(o, "anchors"), &b2, &N);
        int *lm = json_int_rows(json_get(o, "loss_mask"), &rr, &cc), *keep = json_int_rows(json_get(o, "keep"), &rr, &cc);
        if (!ids || !anchors || b2 != b) {
            fprintf(stderr, "train_case: %s: batches[%d]: bad input_ids or anchors\n", argv[1], s);
            trace_discard(tr);
            return 2;
        }
        TrainBatch bt = {b, S, N, draft.cfg.block_size, ids, lm, anchors, keep, NULL};
        TrainStats stats;
        if (train_step(&draft, &target, st, &bt, &hp, s + 1, trace_hook(tr), &stats) != 0) {
            dflash_print_error("train_case", "");
            trace_discard(tr);
            return 1;
        }
        printf("step %d: loss %.6f accuracy %.4f grad_norm %.6f\n", s + 1, stats.loss, stats.accuracy,
               stats.grad_norm);
        free(ids); free(anchors); free(lm); free(keep);
    }
    if (trace_close(tr) != 0) { dflash_print_error("train_case", ""); return 1; }
    train_state_free(st);
    model_free(&draft);
    model_free(&target);
    json_free(&root);
    free(text);
    return 0;
}
