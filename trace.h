/* trace.h - the tracer (trace.c): the one implementation of dflash.h's
 * TraceHook that writes files. Defines Tracer and trace_open /
 * trace_hook / trace_set_vocab / trace_close / trace_discard: every
 * intermediate tensor as DIR/<name>.npy plus DIR/trace.jsonl (the trace
 * contract, TRACE.md) and a readable text trace; and trace_check_outputs,
 * the check that no output is an input. The trace is written beside its
 * final place and moved there at trace_close; a failed or interrupted run
 * leaves the earlier trace as it was (a signal handler calls formats/files.h's
 * out_cleanup_on_signal).
 */
#ifndef DFLASH_TRACE_H
#define DFLASH_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "dflash.h"
#include "formats/load.h"

typedef struct Tracer Tracer;

/* Open a trace. dir: write <name>.npy files and dir/trace.jsonl (NULL: no
 * .npy). text_path: readable trace ("-" = stdout, NULL: none). filters: glob
 * patterns (fnmatch-style *, ?, [..]) limiting both outputs to matching
 * names (n_filters 0: everything). Returns NULL with dflash_errmsg set when
 * the directory cannot be used (it holds files that are not from a trace, it
 * cannot be created, ...). */
Tracer *trace_open(const char *dir, const char *text_path,
                   const char *const *filters, int n_filters);
/* The hook to put in GenParams.trace: every tensor goes to trace_real/_i64. */
const TraceHook *trace_hook(Tracer *t);
/* Token words for the readable trace (may be NULL). */
void trace_set_vocab(Tracer *t, const Vocab *v);
/* The run's flags (argv without the program name), written as "argv" on the
 * first manifest line, so `dflash diff` can rerun them on the other
 * precision's build. -1 (out of memory). */
int trace_set_run(Tracer *t, int argc, const char *const *argv);
/* Finish the manifest and close every file; frees t. Returns -1 (with
 * dflash_errmsg) when anything could not be written. */
int trace_close(Tracer *t);
/* Close the trace of a run that failed: writes nothing, deletes the partial
 * directory and the temporary text trace; the earlier trace and text trace
 * stay as they were. Frees t and leaves dflash_errmsg as it was. */
void trace_discard(Tracer *t);
/* Refuse (-1, dflash_errmsg) output paths that are, or are inside, an input
 * or each other: the trace directory dir and the text trace text_path
 * ("-" and NULL are not checked) against each of inputs (a file, or a
 * directory standing for the regular files directly inside it). Paths are
 * compared resolved (symbolic links, "..") and by device and inode. */
int trace_check_outputs(const char *dir, const char *text_path, const char *const *inputs, int n_inputs);
/* Refuse (-1, dflash_errmsg naming the closest names) a --trace-filter glob
 * that matches no name a run of this shape can emit: a target of
 * target_layers layers, a draft of draft_layers (block_size 1: no draft
 * names), at most max_rounds rounds (round numbers above 1000 are not
 * tried); hybrid: the target is a hybrid (Qwen3.5) one, whose names
 * (dflash_hybrid_trace_names) count too. Called before any output is opened. */
int trace_check_filters(const char *const *filters, int n_filters, int target_layers, int draft_layers,
                        int block_size, int max_rounds, int hybrid);
/* The (up to) three of names[0..n) closest to glob, ", "-separated, into
 * out: an edit distance where '*' and '?' match for free. "none" when n 0. */
void glob_closest(const char *glob, char *const *names, int n, char *out, size_t size);
/* Decoded text (a token's bytes, a vocabulary word) as printable text:
 * control characters (C0, DEL, the C1 range U+0080..U+009F), backslashes
 * and every byte that is not part of a valid UTF-8 character (a lone 0xC3:
 * half of a character split over two tokens) as \xNN, so a token cannot move
 * the cursor, retitle the terminal or forge an output line, and the output
 * is valid UTF-8 (as the explorer and figures show such bytes). */
void text_put(FILE *f, const char *s, size_t n);
/* Record one real tensor of `ndim` axes (ndim 0 = scalar). Returns 0, or -1
 * with dflash_errmsg set (write failure: path and reason). */
int trace_real(Tracer *t, TracePhase ph, const char *name, const char *meaning,
               const real *data, int ndim, const int64_t *shape);
/* Record one int64 tensor (token ids, positions, match, ...). */
int trace_i64(Tracer *t, TracePhase ph, const char *name, const char *meaning,
              const int64_t *data, int ndim, const int64_t *shape);

/* Per-position acceptance. count[i-1] += the number of r's rounds in which
 * proposal i (1..B-1) was accepted (acceptance_length >= i, i.e. cumprod[i-1]
 * = 1); returns r's round count. trace_acceptance records
 * acceptance_per_position (B-1): those counts over the rounds (nothing when
 * B < 2 or no round ran). */
int acceptance_count(const GenResult *r, int B, int *count);
int trace_acceptance(Tracer *t, const GenResult *r, int B);

#endif /* DFLASH_TRACE_H */
