/* eval/ngram.c - the learned target's baselines: a unigram and a bigram
 * model fitted on the training text, evaluated on the held-out text, through
 * the same tokenizer and the same token stream as `dflash train-target
 * --heldout` (train/corpus.c: documents, <|endoftext|> after each).
 *
 *   usage: eval/ngram TOKENIZER.json TRAIN.txt HELDOUT.txt
 *
 * Counts come from every next-token pair (x[t], x[t+1]) of the training
 * stream; the evaluation scores every pair of the held-out stream once, as
 * the model's evaluation does (the stream's first token is predicted by
 * neither). V is the tokenizer's vocabulary size, N the training pairs.
 *   unigram  p(y) = (c(y) + 1) / (N + V)                       (add-one)
 *   bigram   p(y | x) = max(c(x,y) - d, 0) / c(x) + d n(x) / c(x) p(y)
 *            with d = 0.75 and n(x) the distinct successors of x (interpolated
 *            absolute discounting, Ney, Essen and Kneser 1994); p(y) the
 *            unigram; a context never seen in training gets p(y)
 * Printed: loss per token (nats, mean over the held-out pairs) and bits per
 * byte (the summed loss / ln 2 / the held-out document bytes). Exit 2 with
 * one line on bad input. */
#include "dflash.h"
#include "train/corpus.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: eval/ngram TOKENIZER.json TRAIN.txt HELDOUT.txt\n");
        return 2;
    }
    Tokenizer tok;
    Corpus tr, he;
    memset(&tr, 0, sizeof tr);
    memset(&he, 0, sizeof he);
    if (tok_load(&tok, argv[1]) != 0) { dflash_print_error("ngram", ""); return 2; }
    int eot = tok_added_id(&tok, "<|endoftext|>"), V = tok.n_ids;
    if (eot < 0) { fprintf(stderr, "ngram: %s: no <|endoftext|> token\n", argv[1]); return 2; }
    if (V > 65536) { fprintf(stderr, "ngram: %s: %d tokens; at most 65536 here\n", argv[1], V); return 2; }
    if (corpus_add_file(&tr, argv[2], tok_encode_cb, &tok, eot) != 0 || corpus_add_file(&he, argv[3], tok_encode_cb, &tok, eot) != 0) {
        dflash_print_error("ngram", "");
        return 2;
    }
    if (tr.n < 2 || he.n < 2) { fprintf(stderr, "ngram: fewer than 2 tokens in a file\n"); return 2; }
    double *uni = calloc((size_t)V, sizeof(double));        /* (V) c(y) */
    double *ctx = calloc((size_t)V, sizeof(double));        /* (V) c(x) */
    double *succ = calloc((size_t)V, sizeof(double));       /* (V) n(x) */
    uint32_t *big = calloc((size_t)V * (size_t)V, sizeof(uint32_t)); /* (V, V) c(x, y) */
    if (!uni || !ctx || !succ || !big) { fprintf(stderr, "ngram: out of memory\n"); return 2; }
    for (size_t t = 0; t + 1 < tr.n; t++) {
        int x = tr.ids[t], y = tr.ids[t + 1];
        uni[y] += 1;
        ctx[x] += 1;
        if (big[(size_t)x * V + y]++ == 0) succ[x] += 1;
    }
    double N = (double)(tr.n - 1), d = 0.75, loss_uni = 0, loss_big = 0;
    for (size_t t = 0; t + 1 < he.n; t++) {
        int x = he.ids[t], y = he.ids[t + 1];
        double pu = (uni[y] + 1) / (N + V), pb = pu;
        if (ctx[x] > 0) {
            double c = (double)big[(size_t)x * V + y];
            pb = (c > d ? c - d : 0) / ctx[x] + d * succ[x] / ctx[x] * pu;
        }
        loss_uni -= log(pu);
        loss_big -= log(pb);
    }
    double n = (double)(he.n - 1), bytes = (double)he.bytes;
    printf("ngram: train %ld documents, %zu tokens; heldout %ld documents, %zu bytes, %.0f predicted tokens; vocab %d\n",
           tr.documents, tr.n, he.documents, he.bytes, n, V);
    printf("unigram: loss %.4f per token, %.4f bits per byte\n", loss_uni / n, loss_uni / log(2.0) / bytes);
    printf("bigram:  loss %.4f per token, %.4f bits per byte\n", loss_big / n, loss_big / log(2.0) / bytes);
    free(uni), free(ctx), free(succ), free(big);
    corpus_free(&tr);
    corpus_free(&he);
    tok_free(&tok);
    return 0;
}
