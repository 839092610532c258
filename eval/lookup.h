/* eval/lookup.h - the drafters a user would pick instead of DFlash, verified
 * by the same target pass (eval/lookup.c; NOTES.md, "Baselines: copy the
 * anchor, prompt lookup"):
 *
 *   copy    every proposal is the anchor (the last known token) again;
 *   ngram   vLLM's n-gram proposer (prompt lookup decoding): the longest
 *           n-gram of ngram_min..ngram_max ending at the anchor that occurred
 *           earlier in the context, its earliest occurrence, and up to B-1
 *           tokens that followed it;
 *   lookup  llama.cpp's lookup decoding with its context n-gram cache: one
 *           token at a time, the most frequent follower of the longest
 *           n-gram (ngram_max..ngram_min) that passes llama.cpp's sample-size
 *           and share thresholds, until none does or B-1 are drafted.
 *
 * lookup_generate is dflash_generate's loop with the draft replaced: the
 * prefill, then rounds of [anchor | proposals] through target_forward in one
 * call, sample_row at each position, acceptance_length, keep the accepted
 * prefix and the bonus token, crop the cache. Greedy output equals
 * ar_generate's (eval/tests/test_lookup.c). */
#ifndef DFLASH_LOOKUP_H
#define DFLASH_LOOKUP_H

#include "dflash.h"

typedef enum { DRAFT_COPY, DRAFT_NGRAM, DRAFT_LOOKUP } DrafterKind;

typedef struct {
    DrafterKind kind;
    int ngram_min, ngram_max;   /* ngram and lookup: n-gram sizes, 1 <= min <= max (lookup: max <= 4) */
} Drafter;

#define LOOKUP_NGRAM_MAX 4      /* llama.cpp's LLAMA_NGRAM_MAX: its thresholds have 4 entries */

/* "copy", "ngram", "lookup" -> kind; -1 when s is none of them */
int drafter_kind(const char *s);
const char *drafter_name(DrafterKind k);
/* d's sizes against its rule: 0, or -1 with dflash_errmsg */
int drafter_check(const Drafter *d);

/* Up to k proposals for the tokens after ctx[0..len) (ctx[len-1] is the
 * anchor) into out; returns how many (0..k: ngram and lookup may propose
 * fewer, or none). */
int drafter_propose(const Drafter *d, const int *ctx, int len, int k, int *out);

/* Speculative decoding with drafter d and block size p->block_size (B: at
 * most B-1 proposals a round, so the verify forward takes 1 + proposals
 * tokens). Fills *res as dflash_generate does (rounds, target_forwards,
 * seconds_draft: proposing, seconds_verify); draft_forwards stays 0.
 * Returns 0, or -1 with dflash_errmsg. */
int lookup_generate(const Drafter *d, const Model *target, const int *input_ids, int n_prompt, const GenParams *p,
                    GenResult *res);

#endif /* DFLASH_LOOKUP_H */
