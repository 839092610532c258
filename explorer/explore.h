/* explorer/explore.h - `dflash explore` (explorer/explore.c): one self-contained offline HTML
 * page over a trace directory. Defines explore_main, the subcommand.
 */
#ifndef DFLASH_EXPLORE_H
#define DFLASH_EXPLORE_H

/* `dflash explore TRACE_DIR OUT.html [--vocab FILE]`: argv[0] is "explore".
 * Returns the exit status (0, or 2 with one line on stderr). */
int explore_main(int argc, char **argv);

#endif /* DFLASH_EXPLORE_H */
