/* train/draftdir.h - the Hugging Face draft folder dflash train writes
 * (train/draftdir.c): config.json with the published DFlash fields and the
 * input config's semantics, model.safetensors in F32, and the marker file
 * that says the folder is one dflash train wrote; written whole into a
 * temporary folder beside the output and renamed into place, through
 * formats/files.c's partial-output registry. */
#ifndef DFLASH_DRAFTDIR_H
#define DFLASH_DRAFTDIR_H

#include "dflash.h"
#include "train/train.h"

#include <stdio.h>

/* the marker file, and its first line */
#define DRAFTDIR_MARKER "dflash-train.txt"
#define DRAFTDIR_MARKER_LINE "dflash train draft folder"
#define DRAFTDIR_FILES 3  /* config.json, model.safetensors, the marker */

typedef struct {
    char *dir;       /* --out, trailing '/' removed */
    char *tmp;       /* "<dir>.partial.XXXXXX"; NULL: not made */
    char *file[DRAFTDIR_FILES];  /* tmp/config.json, tmp/model.safetensors, tmp/<marker> */
    int exists;      /* dir is there now (a marked draft folder, not empty) */
    int lock_fd;     /* "<dir>.lock" (formats/files.h, out_lock_take); its registry owner is &lock_fd */
    int locked;
} OutDir;

/* Take dir's lock, remove what killed runs left beside it, check dir
 * (absent, empty, or a marked draft folder) and make the partial folder
 * beside it. -1 with dflash_errmsg (then outdir_discard). */
int outdir_prepare(OutDir *o, const char *dir);
/* which 0: config.json, 1: model.safetensors, 2: the marker, into the partial folder. */
/* safetensors: n_sets lists of n tensors each, keys prefix[j] + key, dtype
 * "F32", "F64" or "BF16" (rounded to nearest even), the u64 LE header length
 * N and the JSON header {"__metadata__":{"format":"pt"},"key":{"dtype":..,
 * "shape":[..],"data_offsets":[a,b]},...} space-padded so 8 + N is a
 * multiple of align (64: toy_weights/gen.c's layout, the draft folder; 8:
 * the checkpoints), then the data little-endian in list order. -1: out of
 * memory (dflash_errmsg); a write error is the stream's. */
int st_write_params(FILE *f, const TrainParam *const *sets, const char *const *prefix, int n_sets, int n,
                    const char *dtype, int align);
int outdir_write_file(OutDir *o, int which, const Config *c, int bos_id, int B, const TrainParam *p, int n,
                      int bf16);
/* The partial folder renamed onto dir (an earlier draft there replaced). */
int outdir_commit(OutDir *o);
/* config.json's text (which 0 above): c's values, bos_id (-1: none), block size B
 * (dflash train's checkpoints write it too) */
void draftdir_write_config(FILE *f, const Config *c, int bos_id, int B, int bf16);
/* Remove what is left of the partial folder; free o's strings. */
void outdir_discard(OutDir *o);
/* bos_token_id of a config.json (-1: absent, not an integer, unreadable) */
int config_bos(const char *path);

#endif /* DFLASH_DRAFTDIR_H */
