/* eval/tests/test_lookup.c - the baselines (eval/lookup.c: copy the anchor, vLLM's
 * n-gram proposer, llama.cpp's lookup decoding) and `dflash eval`
 * (eval/eval.c). Expectations come from hand-worked examples (vLLM's own
 * docstring example among them), from target-only decoding (greedy output,
 * and what each round must have accepted given it) and from hand-computed
 * statistics, never from a stored run. */
#include "dflash.c"
#include "formats/load.c"
#include "eval/lookup.c"
#include "eval/eval.c"
#include "tests/testutil.h"
#include "tests/sampleutil.h"

#define RANDOM_SET "toy_weights/random"

static int propose(DrafterKind kind, int lo, int hi, const int *ctx, int len, int k, int *out) {
    Drafter d = {kind, lo, hi};
    return drafter_propose(&d, ctx, len, k, out);
}

/* ---- the rules, by hand ----------------------------------------------------- */

static void test_copy_proposes_the_anchor(void **state) {
    (void)state;
    int ctx[3] = {7, 8, 9}, out[5] = {0};
    assert_int_equal(propose(DRAFT_COPY, 0, 0, ctx, 3, 5, out), 5);
    for (int i = 0; i < 5; i++) assert_int_equal(out[i], 9);
    assert_int_equal(propose(DRAFT_COPY, 0, 0, ctx, 3, 0, out), 0);
}

static void test_ngram_vllm_rule(void **state) {
    (void)state;
    int out[8];
    /* vLLM's docstring: [1,2,3,4,2,3], min 2, max 3, k 4: [4,2,3] has no
     * earlier occurrence, [2,3] occurs at 1, and only 3 tokens follow it */
    int a[] = {1, 2, 3, 4, 2, 3};
    assert_int_equal(propose(DRAFT_NGRAM, 2, 3, a, 6, 4, out), 3);
    assert_int_equal(out[0], 4), assert_int_equal(out[1], 2), assert_int_equal(out[2], 3);
    /* the longest n-gram wins over an earlier shorter one: [7,1,2] at 3 -> 8 7 1,
     * not [1,2] at 0 -> 9 */
    int b[] = {1, 2, 9, 7, 1, 2, 8, 7, 1, 2};
    assert_int_equal(propose(DRAFT_NGRAM, 1, 3, b, 10, 3, out), 3);
    assert_int_equal(out[0], 8), assert_int_equal(out[1], 7), assert_int_equal(out[2], 1);
    /* with max 2 the 2-gram [1,2] occurs at 0 and 4: the earliest wins */
    assert_int_equal(propose(DRAFT_NGRAM, 2, 2, b, 10, 2, out), 2);
    assert_int_equal(out[0], 9), assert_int_equal(out[1], 7);
    /* no occurrence: nothing; below min: nothing */
    int c[] = {1, 2, 3, 4};
    assert_int_equal(propose(DRAFT_NGRAM, 1, 4, c, 4, 3, out), 0);
    /* an occurrence overlapping the suffix: [5,5,5], the 2-gram [5,5] at 0, one token after it */
    int e[] = {5, 5, 5};
    assert_int_equal(propose(DRAFT_NGRAM, 2, 2, e, 3, 4, out), 1);
    assert_int_equal(out[0], 5);
    assert_int_equal(propose(DRAFT_NGRAM, 1, 1, e, 1, 4, out), 0);  /* one token: no earlier occurrence */
}

static void test_lookup_llamacpp_rule(void **state) {
    (void)state;
    int out[8];
    /* 1-grams: 4 was followed by 5, 5, 6 (2 of 3 = 66.7% >= 66%, 3 >= 2
     * samples): 5; 5 by 4, 4: 4; then 5 again */
    int a[] = {4, 5, 4, 5, 4, 6, 4};
    assert_int_equal(propose(DRAFT_LOOKUP, 1, 1, a, 7, 3, out), 3);
    assert_int_equal(out[0], 5), assert_int_equal(out[1], 4), assert_int_equal(out[2], 5);
    /* 4 followed by 5, 6: 50% < 66%: no draft */
    int b[] = {4, 5, 4, 6, 4};
    assert_int_equal(propose(DRAFT_LOOKUP, 1, 2, b, 5, 3, out), 0);
    /* a 3-gram seen once is enough (sample size 1): 9, then the key [2,3,9]
     * was followed by 1, then [3,9,1] by 2 */
    int c[] = {1, 2, 3, 9, 1, 2, 3};
    assert_int_equal(propose(DRAFT_LOOKUP, 1, 3, c, 7, 3, out), 3);
    assert_int_equal(out[0], 9), assert_int_equal(out[1], 1), assert_int_equal(out[2], 2);
    /* a tie (2-gram [8,7] followed by 2 then 1, 50% each, 2 samples): the
     * smaller id, 1; then [7,1] was seen once (< 2 samples for n = 2): stop */
    int d[] = {8, 7, 2, 8, 7, 1, 8, 7};
    assert_int_equal(propose(DRAFT_LOOKUP, 2, 2, d, 8, 3, out), 1);
    assert_int_equal(out[0], 1);
    /* the longest n first: [9,4] -> 6 (seen once: 1 < 2 samples, skipped),
     * then [4] -> 5, 5, 6: 5 */
    int e[] = {9, 4, 6, 4, 5, 4, 5, 9, 4};
    assert_int_equal(propose(DRAFT_LOOKUP, 1, 2, e, 9, 1, out), 1);
    assert_int_equal(out[0], 5);
    Drafter bad = {DRAFT_LOOKUP, 1, 5};
    assert_int_equal(drafter_check(&bad), -1);
    assert_non_null(strstr(dflash_errmsg, "at most 4"));
}

/* ---- lossless: greedy output equals target-only decoding's ------------------- */

/* make test: the small set of testutil.h (4 layers, hidden 8, 16 tokens),
 * written here; DFLASH_TEST_LONG: the random set as well */
typedef struct { Model target, random; char *dir; int have_random; } Target;

static int setup_target(void **state) {
    Target *t = calloc(1, sizeof *t);
    if (!t || !(t->dir = tu_tmpdir())) return -1;
    tu_write_small_set(t->dir, NULL, 1);
    char p[1100];
    snprintf(p, sizeof p, "%s/target", t->dir);
    if (model_load(&t->target, p, 0) != 0) return -1;
    if (tu_long()) {
        if (model_load(&t->random, RANDOM_SET "/target", 0) != 0) {
            fprintf(stderr, "cannot load the random set (run make first): %s\n", dflash_errmsg);
            return -1;
        }
        t->have_random = 1;
    }
    *state = t;
    return 0;
}

static int teardown_target(void **state) {
    Target *t = *state;
    if (!t) return 0;
    model_free(&t->target);
    if (t->have_random) model_free(&t->random);
    tu_rmtree(t->dir);
    free(t->dir);
    free(t);
    return 0;
}

/* every round against the target-only output ar: the kept tokens are ar's,
 * and the accepted length is the number of leading proposals equal to ar's
 * tokens at their positions (a second computation of the acceptance rule) */
static void check_rounds(const Drafter *d, const GenResult *r, const GenResult *ar, int B) {
    int tokens = 0;
    for (int k = 0; k < r->n_rounds; k++) {
        const RoundInfo *ri = &r->rounds[k];
        int s = ri->start_before, want = 0;
        /* the proposals are the rule's on the output so far (ar's, lossless) */
        int prop[DFLASH_MAX_BLOCK], n_prop = s + 1 <= ar->n_output ? drafter_propose(d, ar->output_ids, s + 1, B - 1, prop) : -1;
        for (int j = 1; n_prop >= 0 && j < B; j++) assert_int_equal(ri->block[j], j <= n_prop ? prop[j - 1] : -1);
        while (want + 1 < B && ri->block[want + 1] >= 0 && s + want + 1 < ar->n_output &&
               ri->block[want + 1] == ar->output_ids[s + want + 1])
            want++;
        /* the last round may run past the output's end; acceptance there is not ar's to say */
        if (s + B < ar->n_output) assert_int_equal(ri->acceptance_length, want);
        assert_int_equal(ri->start_after, s + ri->acceptance_length + 1);
        tokens += ri->acceptance_length + 1;
    }
    assert_true(tokens >= r->n_output - r->n_prompt - 1);
}

static void lossless_on(const Model *target, int V, int n_prompts, int n_blocks, int new_tokens, int eos) {
    static const int prompts[][6] = {{2, 3, 4, 5, 6, 7}, {9, 10, 11, 12, 13, 8}, {2, 3, 4, 2, 3, 4},
                                     {1, 0, 5, 7, 1, 0}, {11, 12, 13, 3, 2, 1}};
    static const int blocks[] = {2, 3, 4, 8, 5, 16};
    static const DrafterKind kinds[] = {DRAFT_COPY, DRAFT_NGRAM, DRAFT_LOOKUP};
    for (int pi = 0; pi < n_prompts; pi++)
        for (int stop = 0; stop < 2; stop++) {
            int prompt[6];
            for (int i = 0; i < 6; i++) prompt[i] = prompts[pi][i] % V;
            GenParams p = {0};
            p.max_new_tokens = new_tokens;
            p.block_size = 1;
            if (stop) p.stop_ids[p.n_stop++] = eos;
            GenResult ar;
            assert_int_equal(ar_generate(target, prompt, 6, &p, &ar), 0);
            for (int bi = 0; bi < n_blocks; bi++)
                for (int ki = 0; ki < 3; ki++) {
                    Drafter d = {kinds[ki], ki == 1 ? 2 : 1, ki == 1 ? 3 : 4};
                    p.block_size = blocks[bi];
                    GenResult r;
                    assert_int_equal(lookup_generate(&d, target, prompt, 6, &p, &r), 0);
                    if (r.n_output != ar.n_output || memcmp(r.output_ids, ar.output_ids, sizeof(int) * (size_t)ar.n_output))
                        fail_msg("%s, block %d, prompt %d, stop %d: output differs from target-only decoding",
                                 drafter_name(kinds[ki]), blocks[bi], pi, stop);
                    check_rounds(&d, &r, &ar, blocks[bi]);
                    gen_result_free(&r);
                }
            gen_result_free(&ar);
        }
}

static void test_greedy_lossless(void **state) {
    Target *t = *state;
    lossless_on(&t->target, 16, 5, 6, 40, 14);         /* the small set, <eos> 14 */
    if (t->have_random) lossless_on(&t->random, 36, 5, 6, 64, 0);  /* DFLASH_TEST_LONG: the random set, <eos> 0 */
}

/* The rounds accept something: on the small set the target repeats itself
 * (its greedy output settles into a cycle), so copy and prompt lookup must
 * keep more than one token a round on average. (A verification that never
 * accepted would still be lossless.) */
static void test_baselines_accept_on_a_repeating_target(void **state) {
    Target *t = *state;
    int prompt[6] = {2, 3, 4, 5, 6, 7};
    GenParams p = {0};
    p.max_new_tokens = 40;
    p.block_size = 4;
    GenResult ar;
    assert_int_equal(ar_generate(&t->target, prompt, 6, &p, &ar), 0);
    /* the premise, from target-only decoding: its last 20 tokens repeat with a period of at most 4 */
    int period = 0;
    for (int q = 1; q <= 4 && !period; q++) {
        int ok = 1;
        for (int i = ar.n_output - 20; i < ar.n_output; i++) ok &= ar.output_ids[i] == ar.output_ids[i - q];
        if (ok) period = q;
    }
    assert_true(period > 0);
    Drafter d = {DRAFT_NGRAM, 1, 4};
    GenResult r;
    assert_int_equal(lookup_generate(&d, &t->target, prompt, 6, &p, &r), 0);
    int tokens = 0;
    for (int k = 0; k < r.n_rounds; k++) tokens += r.rounds[k].acceptance_length + 1;
    assert_true(tokens > r.n_rounds);
    gen_result_free(&r);
    gen_result_free(&ar);
}

/* T > 0: lossless in distribution. Over many seeds the first two new
 * tokens of each drafter (block 3) follow the exact target distribution
 * P(t1) P(t2 | t1) (tests/sampleutil.h: softmax of the target's logits), as in
 * tests/test_core.c for DFlash; the tiny set's lm_head sharpened the same
 * way, sharper (x 12). 4000 seeds a drafter (DFLASH_TEST_LONG: 20000): the
 * verification sampling at 1.3 T instead of T fails it (chi-square 202 against
 * a limit of 85; checked by hand). */
#ifndef SHARPEN
#define SHARPEN 12.0
#endif
static void test_sampling_lossless_in_distribution(void **state) {
    (void)state;
    Model t, d;
    char *dir = tu_load_tiny_pair(&t, &d);
    for (int v = 0; v < TU_V; v++)
        for (int i = 0; i < TU_D; i++) t.lm_head[v * TU_D + i] = (real)(SHARPEN * sin(1.7 * v + 0.9 * i));
    int prompt[2] = {0, 1}, N = tu_long() ? 20000 : 4000;
    double temp = 1.0;
    TuExact P;
    tu_exact_build(&P, &t, prompt, 2, temp, 2, N);
    int *obs = malloc(sizeof(int) * 2 * (size_t)N);
    assert_non_null(obs);
    static const DrafterKind kinds[] = {DRAFT_COPY, DRAFT_NGRAM, DRAFT_LOOKUP};
    for (int ki = 0; ki < 3; ki++) {
        Drafter dr = {kinds[ki], 1, 4};
        int accepted = 0, proposed = 0;
        for (int s = 0; s < N; s++) {
            GenParams gp = {0};
            gp.max_new_tokens = 2;
            gp.block_size = 3;
            gp.temperature = temp;
            gp.seed = (uint64_t)s;
            GenResult r;
            assert_int_equal(lookup_generate(&dr, &t, prompt, 2, &gp, &r), 0);
            assert_int_equal(r.n_output, 4);
            obs[2 * s] = r.output_ids[2], obs[2 * s + 1] = r.output_ids[3];
            for (int i = 0; i < r.n_rounds; i++) {
                accepted += r.rounds[i].acceptance_length;
                for (int j = 1; j < 3; j++) proposed += r.rounds[i].block[j] >= 0;
            }
            gen_result_free(&r);
        }
        tu_assert_fits(&P, 2, obs, 2, drafter_name(kinds[ki]));
        /* copy and ngram exercise the verification: some, not all, proposals accepted */
        if (kinds[ki] != DRAFT_LOOKUP) assert_true(accepted > 0 && accepted < proposed);
    }
    free(obs);
    tu_exact_free(&P);
    model_free(&t);
    model_free(&d);
    tu_rmtree(dir);
    free(dir);
}

/* ---- dflash eval: the prompt rule and the statistics --------------------------- */

static void test_ratio_se_hand_computed(void **state) {
    (void)state;
    /* per prompt: 3 tokens in 2 rounds, 5 in 2: tau = 8 / 4 = 2; the
     * per-prompt ratios 1.5 and 2.5 have mean 2 and standard error
     * sd / sqrt(2) = 0.7071 / 1.4142 = 0.5 (equal weights here) */
    double y[2] = {3, 5}, se;
    int x[2] = {2, 2};
    assert_float_equal(ratio_se(y, x, 2, 1, &se), 2.0, 1e-12);
    assert_float_equal(se, 0.5, 1e-12);
    double y1[1] = {3};
    ratio_se(y1, x, 1, 1, &se);
    assert_true(isnan(se));  /* one prompt: no standard error */
}

static void test_cut_prompts_rule(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    const char *stream = tu_path(dir, "stream.txt"), *lines = tu_path(dir, "lines.txt");
    tu_write_text(stream, "0 1 2 3 4 5,6 7\n8 9\n");
    tu_write_text(lines, "5 6 7 | 8 9\n1 2\n\n3 4 5 6\n");
    EvalArgs a;
    memset(&a, 0, sizeof a);
    a.ids_stream = stream, a.prompts = 3, a.prompt_len = 4;
    int *pr = NULL;
    /* 10 ids, windows of 4 at floor(i * 6 / 2) = 0, 3, 6 */
    assert_int_equal(cut_prompts(&a, NULL, "", 36, &pr), 0);
    int want[12] = {0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9};
    for (int i = 0; i < 12; i++) assert_int_equal(pr[i], want[i]);
    free(pr);
    a.prompts = 8;  /* 10 - 4 + 1 = 7 distinct windows */
    assert_int_equal(cut_prompts(&a, NULL, "", 36, &pr), -1);
    assert_non_null(strstr(dflash_errmsg, "7 distinct prompts"));
    a.ids_stream = NULL, a.ids_file = lines, a.prompts = 2, a.prompt_len = 3;
    /* lines of at least 3 ids: "5 6 7 | 8 9" and "3 4 5 6" ("|" skipped) */
    assert_int_equal(cut_prompts(&a, NULL, "", 36, &pr), 0);
    int want2[6] = {5, 6, 7, 3, 4, 5};
    for (int i = 0; i < 6; i++) assert_int_equal(pr[i], want2[i]);
    free(pr);
    a.prompts = 3;
    assert_int_equal(cut_prompts(&a, NULL, "", 36, &pr), -1);
    tu_write_text(lines, "1 2 40\n");
    assert_int_equal(cut_prompts(&a, NULL, "", 36, &pr), -1);
    assert_non_null(strstr(dflash_errmsg, "line 1: expected token ids 0..35, got \"40\""));
    tu_rmtree(dir);
    free(dir);
}

/* dflash eval end to end on the small set: the log's tau for copy and
 * ngram equals the rounds of lookup_generate run here on the same prompts,
 * and so does every --per-prompt row (prompt by prompt) */
static void test_eval_command_counts(void **state) {
    Target *t = *state;
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    const char *stream = tu_path(dir, "ids.txt"), *logp = tu_path(dir, "eval.tsv"), *ppp = tu_path(dir, "prompts.tsv");
    tu_write_text(stream, "2 3 4 5 6 7 8 9 10 11 12 13 2 3 4 5\n");  /* ids of the small set (0..15) */
    char s_ids[1024], s_log[1024], s_pp[1024];
    snprintf(s_ids, sizeof s_ids, "%s", stream);
    snprintf(s_log, sizeof s_log, "%s", logp);
    snprintf(s_pp, sizeof s_pp, "%s", ppp);
    char *argv[] = {"eval", "--weights", t->dir, "--ids-stream", s_ids, "--prompts", "2", "--prompt-len", "5",
                    "--new", "10", "--blocks", "2,3", "--temperatures", "0", "--methods", "copy,ngram", "--log", s_log, "--per-prompt", s_pp};
    TuCapture cap;
    assert_int_equal(tu_capture_begin(&cap), 0);
    int rc = eval_main((int)(sizeof argv / sizeof argv[0]), argv);
    char *out = tu_capture_end(&cap);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "yes 2/2"));
    free(out);
    size_t len;
    char *log = tu_read(logp, &len), *pp = tu_read(ppp, &len);
    assert_non_null(log);
    assert_non_null(pp);
    assert_non_null(strstr(pp, "T\tmethod\tB\tprompt\trounds\ttokens\n"));
    char *pline = strchr(pp, '\n') + 1;
    /* prompts: windows of 5 of 16 ids at 0 and 11 */
    int prompts[2][5] = {{2, 3, 4, 5, 6}, {13, 2, 3, 4, 5}};
    static const DrafterKind kinds[2] = {DRAFT_COPY, DRAFT_NGRAM};
    int rows = 0;
    for (char *line = strchr(log, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        char method[16];
        int B, N;
        long R;
        double T, tau;
        assert_int_equal(sscanf(line, "%lf\t%15s\t%d\t%d\t%ld\t%lf", &T, method, &B, &N, &R, &tau), 6);
        Drafter d = {kinds[strcmp(method, "ngram") == 0], 1, 4};
        long rounds = 0, tokens = 0;
        for (int i = 0; i < 2; i++) {
            GenParams p = {0};
            p.max_new_tokens = 10;
            p.block_size = B;
            GenResult r;
            assert_int_equal(lookup_generate(&d, &t->target, prompts[i], 5, &p, &r), 0);
            rounds += r.n_rounds;
            long tok_i = 0;
            for (int k = 0; k < r.n_rounds; k++) tok_i += r.rounds[k].acceptance_length + 1;
            tokens += tok_i;
            /* its --per-prompt row: the rows come in the log's order, prompt by prompt */
            char pm[16];
            double pT;
            int pB, pi;
            long pr, pt;
            assert_int_equal(sscanf(pline, "%lf\t%15s\t%d\t%d\t%ld\t%ld", &pT, pm, &pB, &pi, &pr, &pt), 6);
            assert_string_equal(pm, method);
            assert_int_equal(pB, B);
            assert_int_equal(pi, i);
            assert_int_equal(pr, r.n_rounds);
            assert_int_equal(pt, tok_i);
            pline = strchr(pline, '\n') + 1;
            gen_result_free(&r);
        }
        assert_int_equal(R, rounds);
        assert_float_equal(tau, (double)tokens / rounds, 1e-6);
        rows++;
    }
    assert_int_equal(rows, 4);  /* 2 methods x 2 blocks x 1 temperature */
    assert_int_equal(*pline, 0);  /* 4 rows x 2 prompts, nothing more */
    free(log);
    free(pp);
    /* refused: one line, no log written */
    char *bad[] = {"eval", "--weights", t->dir, "--ids-stream", s_ids, "--blocks", "1"};
    assert_int_equal(tu_capture_begin(&cap), 0);
    rc = eval_main(7, bad);
    out = tu_capture_end(&cap);
    assert_int_equal(rc, 2);
    free(out);
    assert_non_null(strstr(dflash_errmsg, "--blocks: expected an integer in 2..64"));
    tu_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_proposes_the_anchor),
        cmocka_unit_test(test_ngram_vllm_rule),
        cmocka_unit_test(test_lookup_llamacpp_rule),
        cmocka_unit_test(test_sampling_lossless_in_distribution),
        cmocka_unit_test(test_ratio_se_hand_computed),
        cmocka_unit_test(test_cut_prompts_rule),
        cmocka_unit_test_setup_teardown(test_greedy_lossless, setup_target, teardown_target),
        cmocka_unit_test_setup_teardown(test_baselines_accept_on_a_repeating_target, setup_target, teardown_target),
        cmocka_unit_test_setup_teardown(test_eval_command_counts, setup_target, teardown_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
