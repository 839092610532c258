/* train/train_target.h - `dflash train-target` (train/train_target.c): next-token
 * training of a target around train/train.c's lm_step: flags, data through the
 * tokenizer, the schedule, progress, checkpoints and --resume, the Hugging
 * Face target folder it writes. */
#ifndef TRAIN_TARGET_H
#define TRAIN_TARGET_H

/* `dflash train-target [OPTIONS]`: argv[0] is "train-target". Returns the
 * exit status: 0 trained and wrote --out, 2 bad input (one line on stderr),
 * 128 + signal after SIGINT/SIGTERM wrote a checkpoint. */
int train_target_main(int argc, char **argv);

#endif /* TRAIN_TARGET_H */
