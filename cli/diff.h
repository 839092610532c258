/* cli/diff.h - `dflash diff` (cli/diff.c): two traces compared tensor by tensor,
 * the rounds first, then the first departure, with hints (TRACE.md,
 * "dflash diff: how to read it"). Defines diff_main, the subcommand.
 */
#ifndef DFLASH_DIFF_H
#define DFLASH_DIFF_H

/* `dflash diff A B [--rtol R] [--atol A] [--only GLOB]... [--verbose] [--no-rounding]`:
 * argv[0] is "diff"; A is the reference, B the port. Returns the exit
 * status: 0 every tensor of A is in B and agrees (or is rounding), 1 some
 * depart or are missing from B, 2 bad input (B without a manifest too). */
int diff_main(int argc, char **argv);

/* The "diff options" part of --help (`dflash --help` and `dflash diff --help`). */
extern const char DIFF_HELP[];

#endif /* DFLASH_DIFF_H */
