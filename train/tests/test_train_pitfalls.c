/* train/tests/test_train_pitfalls.c - `dflash diff` points at the training mistake.
 *
 * Every training pitfall is a patch of the clean train/train.c
 * (walkthrough/train-pitfalls/NAME.diff, listed in its series) and its
 * program, build/pitfalls/dflash-train-NAME (make pitfall-programs), is
 * ./dflash with that one mistake in `dflash train`. For each, the same
 * short training run (one sequence of the test's data file; one step, two
 * for a mistake that can only show in step 2) is
 * traced by the clean program and by the pitfall's, and diff must exit 1
 * and name, as its first departure, the tensor where the mistake enters.
 * That expected name is derived here from the recipe (train/train.c's header)
 * and the order of the training trace (TRACE.md, "Training"), not read
 * from diff's output:
 *   - a mistake in the batch set-up enters at the first traced tensor it
 *     writes: the mask (attn_mask), the positions (position_ids), the block
 *     ids (noise_ids), the labels, the loss weights; all in step 1;
 *   - a mistake in the anchors' rule enters at the anchors: the run draws
 *     min(--anchors, candidates - 1) of them, so with --anchors 512 their
 *     count is the number of candidates (positions with loss mask 1 in
 *     0..S-B, or 0..S-1 with the mistake) less one: the shapes differ;
 *   - a mistake in the context features enters at target_hidden, in the
 *     columns of the slices whose layer id is the target's last layer;
 *   - an update of the frozen lm_head changes nothing in step 1 (the
 *     update comes after its forward) and enters at step 2's first tensor
 *     that reads the lm_head: the logits (target_hidden when the lm_head is
 *     tied to the embedding the target reads first).
 * L, the layer ids, the mask id, the eos id and the tie come from the random
 * set's config.json files.
 * make test runs one pitfall for each of those tensors (8 of the 10),
 * make test-long all of them.
 * Also: the mechanism (each program's train/train.c is train/train.c with exactly its
 * patch; a stale patch fails the build naming itself and leaves nothing;
 * train/train.c has no trace of any pitfall). */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"
#include "tests/patchutil.h"

#include <sys/wait.h>
#include <unistd.h>

#define RAND "toy_weights/random"
#define SERIES "walkthrough/train-pitfalls/series"
/* the data: one sequence, a prompt of P_LEN ids at loss mask 0 then the rest */
#define P_LEN 2
static const int DATA[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
#define S_LEN ((int)(sizeof DATA / sizeof DATA[0]))

static char *g_dir;
static Config g_target, g_draft;
static char g_names[32][64];
static int g_n_names;

static const char *dir_path(const char *leaf) { return tu_path(g_dir, leaf); }

/* What a step-1 diff compares: step 1's batch, forward and loss tensors
 * (train1.input_ids .. train1.accuracy). Its gradients, grad_norm and
 * updated parameters (train1.grad*, train1.param.*: 50 MB of the 55) all
 * come after them in the trace (checked below, in the clean run's
 * trace.jsonl), so leaving them out cannot change the first departure of a
 * mistake that enters before them, nor diff's exit status. */
static const char *const STEP1_FORWARD[] = {"train1.[!gp]*", "train1.position_ids"};
#define N_STEP1 (sizeof STEP1_FORWARD / sizeof STEP1_FORWARD[0])
static int in_step1_forward(const char *name) {
    for (size_t i = 0; i < N_STEP1; i++)
        if (fnmatch(STEP1_FORWARD[i], name, 0) == 0) return 1;
    return 0;
}

/* `PROG train ...` on the test's data, `steps` steps, traced into dir */
static int train_run(const char *prog, int steps, const char *dir, const char *out_leaf) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd,
             "%s train --target " RAND "/target --draft " RAND "/draft --data %s --batch 1 --anchors 512"
             " --steps %d --out %s --trace %s",
             prog, dir_path("data.txt"), steps, dir_path(out_leaf), dir);
    return tu_run(cmd, NULL);
}

static int setup(void **state) {
    (void)state;
    g_dir = tu_tmpdir();
    if (!g_dir) return -1;
    patch_load_config(&g_target, RAND "/target/config.json", 0);
    patch_load_config(&g_draft, RAND "/draft/config.json", 1);
    g_n_names = patch_series(SERIES, g_names, 32);
    if (g_n_names < 0) return -1;
    char data[512] = "";
    for (int i = 0; i < S_LEN; i++)
        snprintf(data + strlen(data), sizeof data - strlen(data), "%s%d", i == P_LEN ? " | " : i ? " " : "", DATA[i]);
    strcat(data, "\n");
    if (tu_write(dir_path("data.txt"), data, strlen(data)) != 0) return -1;
    /* the clean run, two steps: its step 1 is a one-step run's (the same data, draws and weights;
     * the learning rate acts only after step 1's forward, which is all a step-1 diff compares) */
    char ref[512];
    snprintf(ref, sizeof ref, "%s", dir_path("ref2"));
    return train_run("./dflash", 2, ref, "ref2-out");
}

static int teardown(void **state) {
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    return 0;
}

/* positions p in 0..last with loss mask 1 (p >= P_LEN): the anchor candidates */
static int candidates(int last) {
    int n = 0;
    for (int p = 0; p <= last && p < S_LEN; p++) n += p >= P_LEN;
    return n;
}

static void test_each_training_pitfall_departs_where_it_enters(void **state) {
    (void)state;
    int L = g_target.num_hidden_layers, B = g_draft.block_size, D = g_target.hidden_size;
    /* the data and configs exercise every mistake */
    assert_true(g_target.n_eos > 0 && g_target.eos_token_id[0] != g_draft.mask_token_id);
    assert_true(P_LEN > 0);                      /* anchors > 0: positions from 0 differ */
    assert_true(candidates(S_LEN - B) >= 3);     /* >= 2 blocks: blocks can see each other */
    int last_slice = -1;
    for (int j = 0; j < g_draft.n_target_layer_ids; j++)
        if (g_draft.target_layer_ids[j] == L - 1) last_slice = j;
    assert_true(last_slice >= 0);                /* the last layer feeds the draft */
    /* STEP1_FORWARD's tensors come first in step 1's trace, and include every step-1 place below */
    char *m = tu_read(tu_path(dir_path("ref2"), "trace.jsonl"), NULL);
    assert_non_null(m);
    int n_in = 0, n_out = 0;
    for (char *l = m; (l = strstr(l, "{\"name\":\"")) != NULL; l += 9) {
        char name[200];
        assert_int_equal(sscanf(l + 9, "%199[^\"]", name), 1);
        if (in_step1_forward(name)) {
            if (n_out) fail_msg("%s (in STEP1_FORWARD) comes after a tensor left out of it", name);
            n_in++;
        } else n_out++;
    }
    free(m);
    assert_true(n_in > 0 && n_out > 0);
    char shape[160];
    snprintf(shape, sizeof shape, "shape: A is <i8 (1, %d), B is <i8 (1, %d)", candidates(S_LEN - B) - 1,
             candidates(S_LEN - 1) - 1);
    char cols[160];
    snprintf(cols, sizeof cols, "columns %d..%d", last_slice * D, (last_slice + 1) * D - 1);

    /* long_only: make test-long alone (DFLASH_TEST_LONG=1) runs it; its
     * tensor is another one's, which make test runs (each run and diff is
     * ~1 s CPU) */
    static const struct { const char *p; const char *where; int long_only; } WHERE[] = {
        {"context-at-anchor", "train1.attn_mask", 0},
        {"labels-shifted", "train1.labels", 0},
        {"loss-on-anchor", "train1.loss_weights", 0},
        {"decay-from-0", "train1.loss_weights", 1},       /* the default gamma 7 > 0 */
        {"blocks-see-each-other", "train1.attn_mask", 1},
        {"block-positions-from-0", "train1.position_ids", 0},
        {"mask-is-eos", "train1.noise_ids", 0},
        {"anchors-past-end", "train1.anchors", 0},
        {"context-prenorm", "train1.target_hidden", 0},
        {"lm-head-trained", NULL /* train2.logits, or train2.target_hidden when tied */, 0},
    };
    int n = (int)(sizeof WHERE / sizeof WHERE[0]);
    for (int k = 0; k < n; k++) {
        if (UNDER_ASAN && k % 3 != 0) continue;   /* make sanitize: every third, the runs are slow there */
        if (tu_quick() && WHERE[k].long_only) continue;
        const char *name = WHERE[k].p;
        const char *want = WHERE[k].where ? WHERE[k].where
                         : g_target.tie_word_embeddings ? "train2.target_hidden" : "train2.logits";
        char prog[128], port[128], cmd[2000];
        snprintf(prog, sizeof prog, "./build/pitfalls/dflash-train-%s", name);
        snprintf(port, sizeof port, "%s", dir_path("port"));
        tu_rmtree(port);
        tu_rmtree(dir_path("port-out"));
        int steps = want[5] == '2' ? 2 : 1;   /* the shortest run that reaches the step */
        if (steps == 1 && !in_step1_forward(want)) fail_msg("%s: %s is not in STEP1_FORWARD", name, want);
        if (train_run(prog, steps, port, "port-out") != 0) fail_msg("training pitfall %s: %s failed (make pitfall-programs?)", name, prog);
        /* step 1: its forward only (STEP1_FORWARD); step 2: everything, so step 1's gradients and
         * updated parameters are seen to agree too */
        snprintf(cmd, sizeof cmd, "./dflash diff %s %s", dir_path("ref2"), port);
        for (size_t i = 0; steps == 1 && i < N_STEP1; i++)
            snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " --only '%s'", STEP1_FORWARD[i]);
        int rc = tu_run(cmd, dir_path("diff.txt"));
        char *out = tu_read(dir_path("diff.txt"), NULL);
        assert_non_null(out);
        if (rc != 1 || strcmp(first_departure(out), want) != 0)
            fail_msg("training pitfall %s: diff exit %d, first departure \"%s\", expected exit 1 and \"%s\"; output:\n%.3000s",
                     name, rc, first_departure(out), want, out);
        if (!strcmp(name, "anchors-past-end")) assert_contains(out, shape);
        if (!strcmp(name, "context-prenorm")) {
            /* only the last layer's slice departs: its first differing value lies in it */
            const char *at = strstr(out, "first at [0, ");
            if (!at) at = strstr(out, "worst at [0, ");
            assert_non_null(at);
            int t = -1, col = -1;
            assert_int_equal(sscanf(at + 13, "%d, %d]", &t, &col), 2);
            if (col < last_slice * D || col >= (last_slice + 1) * D)
                fail_msg("context-prenorm: departs at column %d, outside %s (the last layer's slice)", col, cols);
        }
        free(out);
    }
    /* the series is exactly these, each once */
    assert_int_equal(g_n_names, n);
    for (int i = 0; i < g_n_names; i++) {
        int found = 0;
        for (int k = 0; k < n; k++) found += !strcmp(g_names[i], WHERE[k].p);
        if (found != 1) fail_msg("%s lists %s, which this test covers %d times", SERIES, g_names[i], found);
    }
}

/* Each program's copy, build/pitfalls/train-NAME/train.c, is train/train.c with
 * exactly its patch: it differs, and reversing the patch gives train/train.c back. */
static void test_each_program_is_train_c_plus_its_patch(void **state) {
    (void)state;
    assert_true(g_n_names >= 8);
    for (int i = 0; i < g_n_names; i++) {
        char diff[128], prog[128], copy_dir[128];
        snprintf(diff, sizeof diff, "walkthrough/train-pitfalls/%.60s.diff", g_names[i]);
        snprintf(prog, sizeof prog, "build/pitfalls/dflash-train-%.60s", g_names[i]);
        snprintf(copy_dir, sizeof copy_dir, "build/pitfalls/train-%.60s", g_names[i]);
        char *text = tu_read(diff, NULL);
        assert_non_null(text);
        assert_non_null(strstr(text, "\n+++ b/train/train.c"));
        free(text);
        patch_check_program(g_names[i], diff, prog, copy_dir, dir_path("copy.c"));
    }
}

/* A training patch whose context no longer matches train/train.c fails the build,
 * naming itself, and leaves no program; train/train.c names no pitfall. */
static void test_stale_training_patch_fails_and_train_c_is_clean(void **state) {
    (void)state;
    patch_check_stale("walkthrough/train-pitfalls/labels-shifted.diff", "\n                 r->pos[", 18, "train/train.c",
                      "build/pitfalls/obj/train/train.o", g_dir, "train-stale");   /* "r->pos" -> "X->pos" */
    assert_int_equal(tu_run("grep -i -c pitfall train/train.c train/train.h", NULL), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_training_patch_fails_and_train_c_is_clean),
        cmocka_unit_test(test_each_program_is_train_c_plus_its_patch),
        cmocka_unit_test(test_each_training_pitfall_departs_where_it_enters),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
