/* tests/test_learned.c - the committed learned pair (toy_weights/learned/:
 * the target trained on English text, its DFlash draft) stays what README
 * reports: a regression check on committed weights (issue 33).
 *
 *   - lossless: on the first PROMPTS held-out prompts (heldout.ids), greedy
 *     DFlash at block 8 (make test; 4, 8 and 16 in make test-long) writes
 *     target-only decoding's ids, token for token (a second computation:
 *     ar_generate);
 *   - its measured tau: the rounds and tokens of those runs equal the figures
 *     recorded with the draft (toy_weights/learned/draft-regression.txt,
 *     written by `tools/learned.sh regress` when the pair was committed and
 *     quoted in README's "The learned pair"). The weights are committed and
 *     every kernel is deterministic (-ffp-contract=off), so any change of
 *     the inference code that changes an accept decision shows here;
 *   - a trained draft: tau at block 8 above what copying the anchor keeps
 *     (cli/lookup.c's copy drafter on the same prompts): the draft learned
 *     something the trivial drafter does not.
 *
 * The pair is 52 MB + the draft's weights, read once (setup). */
#include "../dflash.c"
#include "../formats/load.c"
#include "../cli/lookup.c"
#include "testutil.h"

#define LEARNED "toy_weights/learned"
#define PROMPTS 4
#define NEW 48
#define MAX_IDS 64

typedef struct {
    Model target, draft;
    int n_prompts;
    int prompt[PROMPTS][MAX_IDS];
    int n_ids[PROMPTS];
    GenResult ar[PROMPTS];  /* target-only decoding of each prompt (setup) */
    long rounds[17], tokens[17];  /* greedy DFlash at block B over the prompts (setup) */
} Pair;

/* the first PROMPTS lines of heldout.ids, each whole (at most MAX_IDS ids;
 * ids below the target's vocabulary): formats/files.c's ids-file reader, as
 * dflash eval --ids-file and make bench read the file */
static int read_prompts(Pair *p) {
    int flat[PROMPTS * MAX_IDS];
    int n = ids_file_prompts(LEARNED "/heldout.ids", PROMPTS, 1, MAX_IDS, p->target.cfg.vocab_size, flat, p->n_ids);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) memcpy(p->prompt[i], flat + i * MAX_IDS, sizeof(int) * (size_t)p->n_ids[i]);
    p->n_prompts = n;
    return n == PROMPTS ? 0 : -1;
}

static int setup(void **state) {
    Pair *p = calloc(1, sizeof *p);
    if (!p) return -1;
    if (model_load(&p->target, LEARNED "/target", 0) != 0 || model_load(&p->draft, LEARNED "/draft", 1) != 0 ||
        read_prompts(p) != 0) {
        fprintf(stderr, "test_learned: %s (the committed pair: toy_weights/learned/{target,draft}, heldout.ids)\n",
                dflash_errmsg[0] ? dflash_errmsg : "cannot read the committed pair");
        return -1;
    }
    for (int i = 0; i < p->n_prompts; i++) {
        GenParams g = {0};
        g.max_new_tokens = NEW;
        g.block_size = 1;
        if (ar_generate(&p->target, p->prompt[i], p->n_ids[i], &g, &p->ar[i]) != 0) return -1;
    }
    *state = p;
    return 0;
}

static int teardown(void **state) {
    Pair *p = *state;
    for (int i = 0; i < p->n_prompts; i++) gen_result_free(&p->ar[i]);
    model_free(&p->draft);
    model_free(&p->target);
    free(p);
    return 0;
}

/* rounds and tokens (accepted + bonus, summed) of greedy DFlash at block B
 * over the prompts, each checked against target-only decoding */
static void dflash_over_prompts(const Pair *p, int B, long *rounds, long *tokens) {
    *rounds = *tokens = 0;
    for (int i = 0; i < p->n_prompts; i++) {
        GenParams g = {0};
        g.max_new_tokens = NEW;
        g.block_size = B;
        GenResult r;
        const GenResult *ar = &p->ar[i];
        assert_int_equal(dflash_generate(&p->draft, &p->target, p->prompt[i], p->n_ids[i], &g, &r), 0);
        if (r.n_output != ar->n_output || memcmp(r.output_ids, ar->output_ids, sizeof(int) * (size_t)ar->n_output))
            fail_msg("block %d, held-out prompt %d: DFlash's output differs from target-only decoding", B, i);
        *rounds += r.n_rounds;
        for (int k = 0; k < r.n_rounds; k++) *tokens += r.rounds[k].acceptance_length + 1;
        gen_result_free(&r);
    }
}

/* draft-regression.txt: lines "block B rounds R tokens N" */
static int recorded(int B, long *rounds, long *tokens) {
    FILE *f = fopen(LEARNED "/draft-regression.txt", "r");
    if (!f) return -1;
    char line[256];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        int b;
        long r, n;
        if (sscanf(line, "block %d rounds %ld tokens %ld", &b, &r, &n) == 3 && b == B) *rounds = r, *tokens = n, found = 0;
    }
    fclose(f);
    return found;
}

static void test_lossless_and_recorded_tau(void **state) {
    Pair *p = *state;
    static const int all[] = {4, 8, 16}, quick[] = {8};
    const int *blocks = tu_long() ? all : quick;
    int n_blocks = tu_long() ? 3 : 1;
    for (int bi = 0; bi < n_blocks; bi++) {
        long want_rounds = -1, want_tokens = -1;
        dflash_over_prompts(p, blocks[bi], &p->rounds[blocks[bi]], &p->tokens[blocks[bi]]);
        long rounds = p->rounds[blocks[bi]], tokens = p->tokens[blocks[bi]];
        if (recorded(blocks[bi], &want_rounds, &want_tokens) != 0)
            fail_msg(LEARNED "/draft-regression.txt: no line \"block %d rounds R tokens N\"", blocks[bi]);
        if (rounds != want_rounds || tokens != want_tokens)
            fail_msg("block %d: %ld rounds, %ld tokens (tau %.4f); recorded %ld rounds, %ld tokens (tau %.4f)", blocks[bi],
                     rounds, tokens, (double)tokens / (double)rounds, want_rounds, want_tokens,
                     (double)want_tokens / (double)want_rounds);
    }
}

/* (after the test above, which measured block 8) */
static void test_draft_beats_copying_the_anchor(void **state) {
    const Pair *p = *state;
    long rounds = p->rounds[8], tokens = p->tokens[8], copy_rounds = 0, copy_tokens = 0;
    assert_true(rounds > 0);
    for (int i = 0; i < p->n_prompts; i++) {
        GenParams g = {0};
        g.max_new_tokens = NEW;
        g.block_size = 8;
        Drafter d = {DRAFT_COPY, 0, 0};
        GenResult r;
        assert_int_equal(lookup_generate(&d, &p->target, p->prompt[i], p->n_ids[i], &g, &r), 0);
        copy_rounds += r.n_rounds;
        for (int k = 0; k < r.n_rounds; k++) copy_tokens += r.rounds[k].acceptance_length + 1;
        gen_result_free(&r);
    }
    double tau = (double)tokens / (double)rounds, copy_tau = (double)copy_tokens / (double)copy_rounds;
    if (!(tau > copy_tau)) fail_msg("block 8: DFlash tau %.4f is not above copying the anchor's %.4f", tau, copy_tau);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lossless_and_recorded_tau),
        cmocka_unit_test(test_draft_beats_copying_the_anchor),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
