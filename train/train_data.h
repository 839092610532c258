/* train/train_data.h - the data of `dflash train` (train/train_data.c): the
 * sequences (--data, --generate, --save-data), the --batches case reader,
 * the batch drawer (data order, cut/pad, anchors) and the run's PRNG. */
#ifndef TRAIN_DATA_H
#define TRAIN_DATA_H

#include "dflash.h"
#include "train/train.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Sequences of different lengths, back to back. */
typedef struct {
    int n;              /* sequences */
    int *len;           /* (n) */
    size_t *off;        /* (n) where each starts in ids / mask */
    int *line;          /* (n) its line in the data file; 0: generated */
    int *ids, *mask;    /* (total) token ids, loss mask 0/1 */
    size_t total, cap_tokens;
    int cap;
} Seqs;

typedef struct {
    int b, S, N;
    int *ids, *mask, *anchors, *keep;  /* (b, S), (b, S), (b, N), (b, N) */
} CaseBatch;

typedef struct {
    int n;
    CaseBatch *batch;  /* (n) */
} Case;

/* The buffers of one drawn batch: b sequences of S tokens, N anchor slots. */
typedef struct {
    int b, S, N, B;
    int *ids, *mask;        /* (b, S) */
    int *anchors, *keep;    /* (b, Nb): Nb = train_anchor_count <= N = --anchors */
    int *order;             /* (n_seqs) this epoch's order */
    int *rows;              /* (b) the sequence in each row */
    int cursor;
    uint64_t epoch_rng;     /* the data PRNG before this epoch's shuffle (a checkpoint's) */
    /* the target's context features of each sequence (cut/padded to S, as
     * train_step would compute them), kept after its first batch: from the
     * second epoch on, a step runs the draft only. NULL: not kept (more
     * than DRAWER_CACHE_MAX bytes) */
    real *feat;             /* (n_seqs, S, kD) */
    char *have;             /* (n_seqs) */
    real *batch_feat;       /* (b, S, kD) */
    size_t kD;
} Drawer;

#define DRAWER_CACHE_MAX ((size_t)1 << 30)

int cli_rng_below(uint64_t *s, int n);
void seqs_free(Seqs *s);
int seqs_push(Seqs *s, const int *ids, const int *mask, int len, int line);
int data_parse(Seqs *s, const char *path, const char *text, size_t len, int V);
int data_check(const Seqs *s, const char *what, int S, int B, int N);
int data_generate(Seqs *s, const Model *target, const char *target_dir, int N, int P, int S, int B,
                         int n_anchors, double temperature, int mask_id, uint64_t seed, uint64_t stream,
                         const Seqs *exclude, const char *what);
#define CASE_MAX_ANCHORS 65536  /* --anchors' limit, for a case file's rows too */
void case_free(Case *c);
int case_load(Case *c, const char *path, int V);
/* The same on text held in memory (len bytes; path names it in messages):
 * what case_load does after reading the file. tests/fuzz/fuzz_batches.c. */
int case_parse(Case *c, const char *path, const char *text, size_t len, int V);
void drawer_free(Drawer *d);
int drawer_init(Drawer *d, int b, int S, int N, int B, int n_seqs);
int drawer_next(Drawer *d, const Seqs *s, uint64_t *data_rng, uint64_t *anchor_rng, int pad_id, TrainBatch *tb);
int drawer_resume(Drawer *d, int n_seqs, int cursor, uint64_t epoch_rng, uint64_t data_rng);
void drawer_cache_init(Drawer *d, const Model *draft, int n_seqs);
int drawer_features(Drawer *d, const Model *draft, const Model *target, TrainBatch *tb);
void seq_write(FILE *f, const Seqs *s, int q);
long batch_trained_positions(int b, int S, int N, int B, const int *mask, const int *anchors, const int *keep);

#endif /* TRAIN_DATA_H */
