/* explorer/figures.h - `dflash figures` (explorer/figures.c): the timeline and attention
 * heatmaps of any trace as standalone SVG files. */
#ifndef DFLASH_FIGURES_H
#define DFLASH_FIGURES_H

/* `dflash figures TRACE_DIR OUT_DIR [--round R] [--layer L] [--head H]
 * [--phase draft|prefill|verify] [--vocab FILE]`: argv[0] is "figures".
 * Returns the exit status: 0 written, 2 bad input (one line on stderr,
 * nothing written). */
int figures_main(int argc, char **argv);

#endif
