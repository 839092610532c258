/* cli/replay.h - `dflash --replay DIR` (cli/replay.c): another run's trace (a port's,
 * or the oracle's) read as the token decisions this program's run follows,
 * so that its rounds line up with that run's and `dflash diff` can compare
 * them phase by phase (dflash.h Replay; TRACE.md "Replay").
 *
 * What is read from DIR (trace.jsonl, or an oracle's names.json): the prompt
 * (input_ids, else prefill.input_ids), prefill.sampled, and for r = 1, 2, ...
 * while verify{r}.input_ids exists: verify{r}.input_ids (the block the
 * target verified), verify{r}.acceptance_length and verify{r}.sampled (whose
 * entry [acc] is the bonus). All must be integer arrays of the contract's
 * shapes, every id inside the vocabulary, every acceptance 0..B-1, and each
 * block's anchor the token the run had reached (the first token, then each
 * round's bonus). Anything else: -1 with one line in dflash_errmsg.
 */
#ifndef DFLASH_REPLAY_H
#define DFLASH_REPLAY_H

#include "dflash.h"

typedef struct {
    Replay r;        /* what GenParams.replay points at */
    int *prompt;     /* (n_prompt) */
    int n_prompt;
    int B;           /* the block size the trace's verifications used */
    int *block, *acc, *bonus;   /* owned: r.block, r.acc, r.bonus */
} ReplayTrace;

/* Read DIR's tokens (see above) for a target of vocab_size ids. */
int  replay_load(const char *dir, int vocab_size, ReplayTrace *t);
void replay_free(ReplayTrace *t);
/* `--replay` runs build/dflash-replay, ./dflash with cli/replay.diff (the
 * replay lines, kept out of dflash.c): execs it in place of this program, or
 * returns 0 when this is it; -1 (dflash_errmsg) when it cannot be run. */
int  replay_exec(char **argv);

#endif /* DFLASH_REPLAY_H */
