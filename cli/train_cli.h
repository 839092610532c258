/* cli/train_cli.h - `dflash train` (cli/train_cli.c): the command around train.c's
 * training step: flags, data, the learning-rate schedule, progress, and the
 * Hugging Face draft folder it writes. */
#ifndef TRAIN_CLI_H
#define TRAIN_CLI_H

#include "dflash.h"

/* `dflash train [OPTIONS]`: argv[0] is "train". Returns the exit status:
 * 0 trained and wrote --out, 2 bad input (one line on stderr, nothing left
 * behind). */
int train_main(int argc, char **argv);

/* The learning rate of step s = 1..steps (SpecForge's CosineAnnealingWarmupLR
 * and ConstantWarmupLR, specforge/lr_scheduler.py, as they run one scheduler
 * step per optimizer step):
 *   s <= warmup:   lr * s / warmup                              (linear warmup)
 *   s >  warmup:   cosine:   lr * (1 + cos(pi * (s - 1 - warmup) / (steps - warmup))) / 2
 *                  constant: lr */
typedef enum { SCHEDULE_COSINE, SCHEDULE_CONSTANT } Schedule;
double train_lr_at(Schedule kind, double lr, int warmup, int steps, int s);

#endif /* TRAIN_CLI_H */
