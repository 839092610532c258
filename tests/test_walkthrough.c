/* tests/test_walkthrough.c - the walkthrough weight set tells the
 * walkthrough's story, token for token.
 *
 * Every expectation is written down from the walkthrough
 * (NOTES.md, "Provenance", the original walkthrough: "The cat sat" -> "on"; draft "the mat ." against target
 * "the mat in"; match [1,1,0], cumprod [1,1,0], acceptance 2; start 3 -> 6;
 * draft cache 0..2 after round 1, 0..5 after round 2) or from the planted
 * design in toy_weights/README.md (look-ahead head m attends from the mask
 * at distance m to the anchor). Token ids are looked up by word in vocab.txt,
 * so the test does not depend on the generator's id order. */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

#define WALK "toy_weights/walkthrough"

typedef TuSet Set;

static int setup(void **state) { return tu_set_setup(state, WALK); }
static int teardown(void **state) { return tu_set_teardown(state); }

static int id(const Set *s, const char *word) {
    int i = vocab_find(&s->vocab, word);
    if (i < 0) fail_msg("word \"%s\" is not in the walkthrough vocabulary", word);
    return i;
}

static void words(const Set *s, const char *text, int *ids, int *n) {
    assert_int_equal(tokenize(&s->vocab, text, ids, 64, n), 0);
}

static void run(const Set *s, const char *prompt, int B, GenResult *r, int *n_prompt) {
    int ids[64], n;
    words(s, prompt, ids, &n);
    GenParams p = {0};
    p.max_new_tokens = 16;
    p.block_size = B;
    p.n_stop = 1;
    p.stop_ids[0] = id(s, "<eos>");
    assert_int_equal(dflash_generate(B > 1 ? &s->draft : NULL, &s->target, ids, n, &p, r), 0);
    if (n_prompt) *n_prompt = n;
}

static void assert_ids(const Set *s, const int *got, const char *text) {
    int want[64], n;
    words(s, text, want, &n);
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("token %d: got \"%s\", want \"%s\" (in \"%s\")", i, s->vocab.words[got[i]], s->vocab.words[want[i]], text);
}

/* Step 3-7 of the walkthrough, round 1, and the run to <eos>. */
static void test_the_cat_sat_story(void **state) {
    Set *s = *state;
    GenResult r;
    int n;
    run(s, "The cat sat", 4, &r, &n);
    int mask = s->draft.cfg.mask_token_id;
    assert_int_equal(n, 3);                                /* positions 0/1/2 */
    assert_int_equal(r.output_ids[3], id(s, "on"));        /* prefill -> "on" at position 3 */
    assert_true(r.n_rounds >= 2);

    const RoundInfo *r1 = &r.rounds[0];
    assert_int_equal(r1->start_before, 3);                 /* block at positions 3..6 */
    int want_in[4] = {id(s, "on"), mask, mask, mask};
    assert_memory_equal(r1->block_in, want_in, sizeof want_in);
    assert_ids(s, r1->block, "on the mat .");              /* the draft proposes "the mat ." */
    assert_ids(s, r1->posterior, "the mat in");            /* the target says "the mat in" */
    int m110[3] = {1, 1, 0};
    assert_memory_equal(r1->match, m110, sizeof m110);
    assert_memory_equal(r1->cumprod, m110, sizeof m110);
    assert_int_equal(r1->acceptance_length, 2);
    assert_int_equal(r1->start_after, 6);                  /* 3 + 2 + 1 (errata: not 7) */
    assert_int_equal(r1->target_cache_after, 6);           /* crop(6) keeps 0..5 */
    assert_int_equal(r1->draft_cache_before, 0);
    assert_int_equal(r1->draft_cache_after, 3);            /* positions 0..2 after round 1 */
    assert_ids(s, r.output_ids, "The cat sat on the mat in");

    const RoundInfo *r2 = &r.rounds[1];
    int want_in2[4] = {id(s, "in"), mask, mask, mask};     /* ["in", mask, mask, mask] at 6..9 */
    assert_memory_equal(r2->block_in, want_in2, sizeof want_in2);
    assert_int_equal(r2->start_before, 6);
    assert_int_equal(r2->draft_cache_before, 3);
    assert_int_equal(r2->draft_cache_after, 6);            /* positions 0..5 after round 2 */

    /* both paths of the acceptance rule: some round accepts every proposal */
    int all = 0;
    for (int i = 0; i < r.n_rounds; i++) all |= r.rounds[i].acceptance_length == 3;
    assert_true(all);
    /* the run ends a sentence, then <eos> */
    assert_int_equal(r.output_ids[r.n_output - 1], id(s, "<eos>"));
    assert_int_equal(r.output_ids[r.n_output - 2], id(s, "."));
    assert_int_equal(r.target_forwards, 1 + r.n_rounds);
    gen_result_free(&r);
}

/* The whole output equals target-only greedy decoding, for every block
 * size: on the two stories in make test, on six prompts with
 * DFLASH_TEST_LONG (make test-long). */
static void test_output_equals_target_only(void **state) {
    Set *s = *state;
    const char *prompts[] = {"The cat sat", "A dog", "She", "We like", "It is very", "My fish"};
    for (int k = 0; k < (tu_long() ? 6 : 2); k++) {
        int ids[64], n;
        words(s, prompts[k], ids, &n);
        GenParams p = {0};
        p.max_new_tokens = 16;
        p.block_size = 1;
        p.n_stop = 1;
        p.stop_ids[0] = id(s, "<eos>");
        GenResult ar;
        assert_int_equal(ar_generate(&s->target, ids, n, &p, &ar), 0);
        for (int B = 1; B <= 8; B++) {
            GenResult r;
            run(s, prompts[k], B, &r, NULL);
            if (r.n_output != ar.n_output || memcmp(r.output_ids, ar.output_ids, sizeof(int) * (size_t)r.n_output))
                fail_msg("\"%s\" block %d: differs from target-only decoding", prompts[k], B);
            gen_result_free(&r);
        }
        gen_result_free(&ar);
    }
}

/* The second prompt accepts every proposal in its first round. */
static void test_a_dog_accepts_everything_in_round_1(void **state) {
    Set *s = *state;
    GenResult r;
    run(s, "A dog", 4, &r, NULL);
    assert_true(r.n_rounds >= 1);
    assert_int_equal(r.rounds[0].acceptance_length, 3);
    int ones[3] = {1, 1, 1};
    assert_memory_equal(r.rounds[0].cumprod, ones, sizeof ones);
    gen_result_free(&r);
}

/* Round 1, draft layer 0: the 4x7 attention matrix of each look-ahead head.
 * Queries at positions 3..6 (anchor "on" + 3 masks), keys 0..6: 0..2 are
 * the injected context (C), 3 the anchor, 4..6 the masks. Head m (1..3)
 * sends the mask at distance m to the anchor; other masks spread over the
 * mask keys (the sink); the anchor attends to itself; context gets ~0. */
static void test_planted_attention_round1_layer0(void **state) {
    Set *s = *state;
    const Config *tc = &s->target.cfg, *dc = &s->draft.cfg;
    int ids[3], n, B = 4;
    words(s, "The cat sat", ids, &n);
    KVCache tkv, dkv;
    TargetRun tr;
    DraftRun dr;
    assert_int_equal(cache_init(&tkv, tc, 16), 0);
    assert_int_equal(cache_init(&dkv, dc, 16), 0);
    assert_int_equal(target_run_init(&tr, tc, 3, 16), 0);
    assert_int_equal(draft_run_init(&dr, dc, tc->vocab_size, 3, B, 16), 0);
    target_forward(&s->target, &tkv, &tr, ids, 3, 2, NULL);
    assert_int_equal(argmax(tr.logits, tc->vocab_size), id(s, "on"));
    /* the target's layers 3, 7, 11 (hidden_states[4], [8], [12]) differ */
    for (int a = 4; a <= 12; a += 4)
        for (int b = a + 4; b <= 12; b += 4) {
            double d2 = 0;
            const real *x = hidden_state(&tr, tc, a, 3), *y = hidden_state(&tr, tc, b, 3);
            for (int i = 0; i < 3 * tc->hidden_size; i++) d2 += (double)(x[i] - y[i]) * (x[i] - y[i]);
            assert_true(sqrt(d2 / (3 * tc->hidden_size)) > 0.01);
        }
    real *th = calloc((size_t)3 * dc->n_target_layer_ids * tc->hidden_size, sizeof(real));
    extract_context_feature(th, &tr, tc, dc->target_layer_ids, dc->n_target_layer_ids, 3, 0, 3);
    int block[4] = {id(s, "on"), dc->mask_token_id, dc->mask_token_id, dc->mask_token_id};
    draft_forward(&s->draft, &s->target, &dkv, &dr, th, 3, block, NULL);
    const int S = 7;                                   /* 3 context keys + 4 block keys */
    assert_int_equal(dkv.len, S);
    const real *att = dr.acts[0].att;                  /* (H, B, S) */
    for (int m = 1; m <= 3; m++)
        for (int row = 0; row < B; row++) {
            const real *a = att + ((size_t)m * B + row) * S;
            double sum = 0;
            for (int k = 0; k < S; k++) sum += a[k];
            assert_float_equal(sum, 1.0, 1e-5);
            for (int k = 0; k < 3; k++) assert_float_equal(a[k], 0.0, 1e-3);   /* context: in the matrix, ~0 */
            if (row == 0 || row == m) {
                assert_float_equal(a[3], 1.0, 1e-3);                               /* to the anchor */
                for (int k = 4; k < S; k++) assert_float_equal(a[k], 0.0, 1e-3);
            } else {
                assert_float_equal(a[3], 0.0, 1e-3);
                for (int k = 4; k < S; k++) assert_float_equal(a[k], 1.0 / 3, 1e-3);  /* the sink */
            }
        }
    /* the draft's proposal from this matrix: "the mat ." */
    assert_int_equal(argmax(dr.logits + 0 * tc->vocab_size, tc->vocab_size), id(s, "the"));
    assert_int_equal(argmax(dr.logits + 1 * tc->vocab_size, tc->vocab_size), id(s, "mat"));
    assert_int_equal(argmax(dr.logits + 2 * tc->vocab_size, tc->vocab_size), id(s, "."));
    free(th);
    cache_free(&tkv);
    cache_free(&dkv);
    target_run_free(&tr);
    draft_run_free(&dr, dc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_cat_sat_story),
        cmocka_unit_test(test_a_dog_accepts_everything_in_round_1),
        cmocka_unit_test(test_planted_attention_round1_layer0),
        cmocka_unit_test(test_output_equals_target_only),
    };
    return cmocka_run_group_tests_name("walkthrough set: the story", tests, setup, teardown);
}
