/* cli/bench.h - `dflash bench` (cli/bench.c): the kernel against the read
 * roofline, T-token target forwards, DFlash against target-only decoding
 * (docs/performance.md). Defines bench_main, the subcommand.
 */
#ifndef DFLASH_BENCH_H
#define DFLASH_BENCH_H

/* `dflash bench` (cli/bench.c): returns 0, or -1 with dflash_errmsg */
int  bench_main(void);

#endif /* DFLASH_BENCH_H */
