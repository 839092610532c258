/* eval/eval.h - `dflash eval` (eval/eval.c): held-out decoded evaluation of
 * DFlash and the baselines (eval/lookup.h) on prompts cut from a file, at
 * several block sizes and temperatures, in one table (README.md,
 * "Held-out evaluation: dflash eval"). */
#ifndef DFLASH_EVAL_H
#define DFLASH_EVAL_H

/* `dflash eval [OPTIONS]`: argv[0] is "eval". Returns the exit status: 0,
 * or 2 with one line on stderr (bad input, or a greedy run that was not
 * lossless: the table is printed first). */
int eval_main(int argc, char **argv);

#endif /* DFLASH_EVAL_H */
