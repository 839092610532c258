/* train/train_cli.h - `dflash train` (train/train_cli.c): the command around train/train.c's
 * training step: flags, data, the learning-rate schedule, progress, and the
 * Hugging Face draft folder it writes. */
#ifndef TRAIN_CLI_H
#define TRAIN_CLI_H

#include "dflash.h"

#include <stddef.h>

/* `dflash train [OPTIONS]`: argv[0] is "train". Returns the exit status:
 * 0 trained and wrote --out, 2 bad input (one line on stderr, nothing left
 * behind). */
int train_main(int argc, char **argv);

/* train_lr_at and Schedule: train/train.h */

/* s seconds as "12.3s", "4m05s" or "1h02m03s" (progress lines, both
 * trainers) */
void fmt_duration(char *buf, size_t size, double s);

#endif /* TRAIN_CLI_H */
