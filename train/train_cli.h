/* train/train_cli.h - `dflash train` (train/train_cli.c): the command around train/train.c's
 * training step: flags, data, the learning-rate schedule, progress, and the
 * Hugging Face draft folder it writes. */
#ifndef TRAIN_CLI_H
#define TRAIN_CLI_H

#include "dflash.h"
#include "formats/files.h"

#include <stddef.h>

/* `dflash train [OPTIONS]`: argv[0] is "train". Returns the exit status:
 * 0 trained and wrote --out, 2 bad input (one line on stderr, nothing left
 * behind). */
int train_main(int argc, char **argv);

/* train_lr_at and Schedule: train/train.h */

/* s seconds as "12.3s", "4m05s" or "1h02m03s" (progress lines, both
 * trainers) */
void fmt_duration(char *buf, size_t size, double s);

/* Both trainers' step flags: --warmup below --steps, --stop-after before
 * the last step (a negative value: not given). 0, or -1 (dflash_errmsg). */
int train_check_steps(long steps, long warmup, long stop_after);

/* After step s of steps: *stop_now is 1 when the run stops here (SIGINT,
 * SIGTERM, or s is --stop-after); returns 1 when a checkpoint is due (then,
 * or every --checkpoint-every steps before the last). */
int train_checkpoint_due(int s, int steps, long stop_after, long checkpoint_every, int *stop_now);

/* The stop after step s (a signal or --stop-after) told on stderr; returns
 * the exit status: 128 + the signal, or 0. */
int train_stopped(int s);
/* FNV-1a 64 over len bytes, a word at a time (start: h = 0xcbf29ce484222325):
 * the trainers' fingerprints of their target, data and tokenizer, which
 * a checkpoint records and --resume checks */
uint64_t fnv_words(uint64_t h, const void *data, size_t len);
/* out_check_paths for command cmd ("dflash train"), its message without the
 * "cmd: " that dflash_print_error adds once: 0, or -1 with dflash_errmsg */
int train_outputs_apart(const char *cmd, const OutPath *outs, int n_out, const char *const *inputs, int n_inputs);

#endif /* TRAIN_CLI_H */
