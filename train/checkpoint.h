/* train/checkpoint.h - what both trainers (`dflash train`, train/train_cli.c, and
 * `dflash train-target`, train/train_target.c) need to checkpoint a run and
 * resume it bit for bit (train/checkpoint.c):
 *   - the stop flag SIGINT/SIGTERM set during the steps (the step in progress
 *     finishes, then a checkpoint is written);
 *   - a folder written whole: locked ("<dir>.lock"), refused when it holds a
 *     file the command does not write, its files written into
 *     "<dir>.partial.XXXXXX" and renamed onto dir;
 *   - safetensors files of TrainParam lists (F32, F64, BF16), and the exact
 *     read-back of the build's precision (weights, AdamW's m and v);
 *   - trainer_state.json: a list of typed fields, written and read back, and
 *     the check that a resuming run's settings are the checkpoint's. */
#ifndef CLI_CHECKPOINT_H
#define CLI_CHECKPOINT_H

#include "dflash.h"
#include "formats/files.h"
#include "train/train.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- SIGINT / SIGTERM during the steps ------------------------------------ */

/* the signal that asked the run to stop after the step in progress, or 0 */
extern volatile sig_atomic_t ck_stop_signal;
typedef struct {
    struct sigaction old_int, old_term;
    int on;
} CkSignals;
/* SIGINT and SIGTERM set ck_stop_signal (the earlier handlers kept in s) */
void ck_signals_catch(CkSignals *s);
/* the earlier handlers back (nothing when s is not catching) */
void ck_signals_restore(CkSignals *s);

/* ---- a folder written whole ------------------------------------------------ */

/* The one rule for every folder dflash replaces: it holds the marker file
 * CKDIR_MARKER, whose first line names the command that wrote it
 * ("dflash train-target folder"), and nothing but that command's files. An
 * existing folder without it (a model folder the user made, say) is never
 * replaced; an empty one is filled. The draft folder of dflash train --out
 * (train/draftdir.h) keeps the same file name with its own first line. */
#define CKDIR_MARKER "dflash-train.txt"

typedef struct {
    char *dir, *tmp, *lock;
    int lock_fd, exists;
    const char *cmd;                 /* "dflash train-target": messages, the marker */
    const char *label;               /* "--out", "--checkpoint": its files' messages */
    const char *const *files;        /* the files it may hold, the marker last */
    int n_files;
    const char *names[16];           /* (the list behind files) */
} CkDir;

/* o empty (before ckdir_open, so that ckdir_release is safe) */
void ckdir_init(CkDir *o);
/* dir's lock taken (one run at a time writes it) and, when dir exists, the
 * check that it holds nothing but files[]: -1 with dflash_errmsg */
int ckdir_open(CkDir *o, const char *dir, const char *label, const char *cmd, const char *const *files, int n_files);
/* a fresh "<dir>.partial.XXXXXX" to write the folder's files into */
int ckdir_begin(CkDir *o, const char *label);
/* files[which] in the partial folder as an OutFile; contents through
 * out_stream, then ckdir_file_done (which commits it) */
OutFile *ckdir_file(CkDir *o, int which, char **path_out);
int ckdir_file_done(CkDir *o, OutFile *f, char *path);
/* files[which] holding len bytes of text */
int ckdir_write_text(CkDir *o, int which, const char *text, size_t len);
/* the partial folder renamed onto dir (an earlier one replaced) */
int ckdir_commit(CkDir *o, const char *label);
/* the partial folder removed (a failed write) */
void ckdir_discard(CkDir *o);
/* ckdir_discard, the lock released, o's strings freed */
void ckdir_release(CkDir *o);

/* ---- safetensors --------------------------------------------------------- */

/* the build's real as a safetensors dtype, and its config.json "dtype" */
#define CK_REAL_DTYPE (sizeof(real) == 8 ? "F64" : "F32")
#define CK_REAL_TORCH (sizeof(real) == 8 ? "float64" : "float32")

/* n_sets lists of n tensors each, keys prefix[j] + key, dtype "F32", "F64" or
 * "BF16" (rounded to nearest even), the header space-padded to a multiple of
 * 8 bytes, the data in list order. -1: out of memory (dflash_errmsg); a
 * write error is the stream's (out_commit reports it). */
int ck_write_safetensors(FILE *f, const TrainParam *const *sets, const char *const *prefix, int n_sets, int n,
                         const char *dtype);
/* every tensor of p (prefix + key) read back from a file ck_write_safetensors
 * wrote in the build's real dtype, with p's shapes; copied in exactly */
int ck_read_safetensors(const char *path, TrainParam *p, int n, const char *prefix);
/* AdamW's state: files[which] as exp_avg.<key> (m) and exp_avg_sq.<key> (v),
 * torch's names, in the build's precision; and read back */
int ck_write_optimizer(CkDir *o, int which, const TrainParam *m, const TrainParam *v, int n);
int ck_read_optimizer(const char *path, TrainParam *m, TrainParam *v, int n);
/* a checkpoint folder's model.safetensors into params and its
 * optimizer.safetensors into m and v (both commands' --resume) */
int ck_read_weights(const char *dir, TrainParam *params, TrainParam *m, TrainParam *v, int n);

/* ---- trainer_state.json ----------------------------------------------------- */

/* CK_HASH: a uint64_t fingerprint, written as CK_U64; a checkpoint written
 * before it lacks it: read as 0, and 0 agrees with anything */
typedef enum { CK_LONG, CK_SIZE, CK_INT, CK_REAL, CK_U64, CK_HASH } CkKind;
/* One field of a state struct: its key, its C type, its offset; flag: the
 * command-line flag that sets it (the settings a resume must agree on), or
 * NULL (the position). CK_U64 is written as a decimal string (JSON numbers
 * are doubles), CK_REAL with json_number (read back to the same double). */
typedef struct {
    const char *key;
    CkKind kind;
    size_t off;
    const char *flag;
} CkField;

/* {"format": format, "real": REAL_NAME, then the fields in order}, one a line */
void ck_state_write(FILE *f, const char *format, const CkField *fields, int n, const void *base);
/* the fields back into base (what: the command, for "not a ... checkpoint") */
int ck_state_read(const char *path, const char *format, const char *what, const CkField *fields, int n, void *base);
/* the flag of the first field with one whose values in a and b differ, or NULL */
const char *ck_disagree(const CkField *fields, int n, const void *a, const void *b);

#endif /* CLI_CHECKPOINT_H */
