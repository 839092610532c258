/* tests/test_replay.c - `dflash --replay DIR` lines this program's rounds up
 * with another run's (cli/replay.c, dflash.h Replay; TRACE.md "Replay").
 *
 *   - A sampled run (temperature 1) is a "port" whose tokens leave the greedy
 *     path at its first token: diffed against the greedy run nearly every
 *     tensor departs. Replayed greedily, this program follows its tokens, so
 *     every real tensor must be bit-identical to the sampled run's (the
 *     temperature changes the draws, never the logits or anything computed
 *     from the tokens), and only the draws themselves (sampled, match,
 *     cumprod, acceptance_length, and acceptance_per_position, their mean)
 *     may differ.
 *   - A port's trace made by hand, holding only the ids replay reads, with a
 *     first token and a bonus token the program would never pick: the replay
 *     verifies exactly its blocks, and its output is the hand-made tokens.
 *   - Inconsistent or unusable traces are refused with one line, exit 2.
 *   - dflash.c itself does not replay: ./dflash --replay runs
 *     build/dflash-replay, dflash.c with cli/replay.diff. */
#include "dflash.c"
#include "formats/load.c"
#include "cli/replay.c"
#include "tests/testutil.h"
#include "tests/traceutil.h"

#include <sys/wait.h>

#define RAND "toy_weights/random"
#define RUN "./dflash --weights " RAND " --max-new-tokens 3 --ignore-eos"

#define g_dir TU_SCRATCH  /* the suite's scratch directory */

/* the int64 values of DIR/NAME.npy (n of them) */
static int64_t *ids_of(const char *dir, const char *name, size_t *n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    NpyValues v = {0};
    if (npy_read_values(path, &v) != 0) fail_msg("%s", dflash_errmsg);
    assert_true(v.is_int);
    *n = v.n;
    return v.i;
}

static void assert_same_ids(const char *a, const char *b, const char *name) {
    size_t na, nb;
    int64_t *x = ids_of(a, name, &na), *y = ids_of(b, name, &nb);
    if (na != nb || memcmp(x, y, sizeof(int64_t) * na) != 0) fail_msg("%s differs between %s and %s", name, a, b);
    free(x);
    free(y);
}

static int is_draw(const char *name) {
    const char *tails[] = {".sampled", ".match", ".cumprod", ".acceptance_length"};
    size_t n = strlen(name);
    if (strcmp(name, "acceptance_per_position") == 0) return 1;  /* the mean of the cumprods */
    for (int i = 0; i < 4; i++) {
        size_t t = strlen(tails[i]);
        if (n > t && strcmp(name + n - t, tails[i]) == 0) return 1;
    }
    return 0;
}

static int rounds_of(const char *dir) {
    int r = 0;
    char path[1024];
    for (;; r++) {
        snprintf(path, sizeof path, "%s/verify%d.input_ids.npy", dir, r + 1);
        if (!tu_exists(path)) return r;
    }
}

static void test_replay_of_a_sampled_run_lines_up_every_round(void **state) {
    (void)state;
    char greedy[600], port[600], replay[600], cmd[2400];
    snprintf(greedy, sizeof greedy, "%s/greedy", g_dir);
    snprintf(port, sizeof port, "%s/port", g_dir);
    snprintf(replay, sizeof replay, "%s/replay", g_dir);
    snprintf(cmd, sizeof cmd, RUN " --ids 2,3,4 --trace %s", greedy);
    assert_int_equal(tu_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, RUN " --ids 2,3,4 --temperature 1 --seed 7 --trace %s", port);
    assert_int_equal(tu_run(cmd, NULL), 0);
    /* the precondition: the "port" left the greedy path (its first token) */
    size_t n1, n2;
    int64_t *g = ids_of(greedy, "output_ids", &n1), *p = ids_of(port, "output_ids", &n2);
    assert_int_equal(n1, n2);
    assert_true(g[3] != p[3]);
    free(g);
    free(p);
    snprintf(cmd, sizeof cmd, "./dflash diff %s %s", greedy, port);
    assert_int_equal(tu_run(cmd, NULL), 1);

    snprintf(cmd, sizeof cmd, RUN " --replay %s --trace %s", port, replay);
    assert_int_equal(tu_run(cmd, NULL), 0);
    assert_int_equal(rounds_of(replay), rounds_of(port));
    assert_same_ids(replay, port, "output_ids");
    char name[64];
    for (int r = 1; r <= rounds_of(port); r++) {
        snprintf(name, sizeof name, "verify%d.input_ids", r);
        assert_same_ids(replay, port, name);
    }
    /* every tensor but the draws: the same bytes */
    Manifest m;
    assert_int_equal(manifest_load(&m, port, 0), 0);
    int same = 0, draws = 0;
    for (int i = 0; i < m.names.n; i++) {
        const char *nm = m.names.s[i];
        if (is_draw(nm)) { draws++; continue; }
        size_t la = 0, lb = 0;
        char *a = tu_read(tu_path(replay, m.files.s[i]), &la);
        char *b = tu_read(tu_path(port, m.files.s[i]), &lb);
        if (!a || !b || la != lb || memcmp(a, b, la) != 0) fail_msg("%s: the replay's tensor is not the port's", nm);
        free(a);
        free(b);
        same++;
    }
    assert_true(same > 500);
    assert_true(draws > 0);
    manifest_free(&m);
}

/* a minimal trace: only what replay reads, as a port might write it
 * (tests/traceutil.h). Prompt "The cat sat" (2,3,4); a first token and a
 * round-1 bonus that are not the program's (it says "on" = 5, then "the");
 * round 1 keeps 1 of its proposals, round 2 none. */
static void hand_made(const char *dir, double first, double anchor2) {
    Hand h;
    hand_open(&h, dir, NULL);
    double prompt[3] = {2, 3, 4}, b1[4] = {first, 9, 10, 11}, s1[4] = {9, 12, 13, 14}, acc1 = 1;
    double b2[4] = {anchor2, 15, 16, 17}, s2[4] = {18, 19, 20, 21}, acc2 = 0;
    hand_ids(&h, "input_ids", NULL, 0, 3, prompt);
    hand_ids(&h, "prefill.sampled", NULL, 0, 1, &first);
    hand_ids(&h, "verify1.input_ids", NULL, 0, 4, b1);
    hand_ids(&h, "verify1.sampled", NULL, 0, 4, s1);
    hand_ids(&h, "verify1.acceptance_length", NULL, 0, -1, &acc1);
    hand_ids(&h, "verify2.input_ids", NULL, 0, 4, b2);
    hand_ids(&h, "verify2.sampled", NULL, 0, 4, s2);
    hand_ids(&h, "verify2.acceptance_length", NULL, 0, -1, &acc2);
    hand_close(&h);
}

static void test_replay_follows_a_hand_made_port(void **state) {
    (void)state;
    char port[600], replay[600], cmd[2400], out[700];
    snprintf(port, sizeof port, "%s/hand", g_dir);
    snprintf(replay, sizeof replay, "%s/hand-replay", g_dir);
    snprintf(out, sizeof out, "%s/hand.out", g_dir);
    hand_made(port, 7, 12);  /* round 1: keep [7 9], bonus s1[1] = 12 */
    snprintf(cmd, sizeof cmd, "./dflash --max-new-tokens 5 --ignore-eos --print-ids --replay %s --trace %s "
             "--trace-filter '*input_ids' --trace-filter '*sampled' --trace-filter '*position_ids' --trace-filter output_ids", port, replay);
    assert_int_equal(tu_run(cmd, out), 0);
    size_t n;
    int64_t *b = ids_of(replay, "verify1.input_ids", &n);
    int64_t want1[4] = {7, 9, 10, 11};
    assert_int_equal(n, 4);
    assert_memory_equal(b, want1, sizeof want1);
    free(b);
    b = ids_of(replay, "verify2.input_ids", &n);
    int64_t want2[4] = {12, 15, 16, 17};
    assert_memory_equal(b, want2, sizeof want2);
    free(b);
    /* the program's own first token is still what it traces as its own */
    b = ids_of(replay, "prefill.sampled", &n);
    assert_int_equal(b[0], 5);
    free(b);
    /* 5 new tokens: 7 9 | 12 (kept 0) + bonus 18 | then a free round */
    b = ids_of(replay, "output_ids", &n);
    assert_int_equal(n, 8);
    int64_t wantout[7] = {2, 3, 4, 7, 9, 12, 18};
    assert_memory_equal(b, wantout, sizeof wantout);
    free(b);
    /* the draft of round 2 read the context of the positions kept: 3 (the
     * prompt) + 2 in round 1, 2 new rows (positions 3, 4) in round 2 */
    b = ids_of(replay, "draft2.position_ids", &n);
    assert_int_equal(n, 2 + 4);
    assert_int_equal(b[0], 3);
    assert_int_equal(b[n - 1], 8);
    free(b);
}

static void test_replay_refuses_what_it_cannot_follow(void **state) {
    (void)state;
    char dir[600], cmd[2400], out[700];
    ReplayTrace t;
    /* no manifest */
    assert_int_equal(replay_load(g_dir, 36, &t), -1);
    assert_contains(dflash_errmsg, "not a trace directory");
    /* round 2's block does not start where round 1 ended (the bonus 12) */
    snprintf(dir, sizeof dir, "%s/broken", g_dir);
    hand_made(dir, 7, 13);
    assert_int_equal(replay_load(dir, 36, &t), -1);
    assert_contains(dflash_errmsg, "verify2.input_ids: the block starts with 13, but the run had reached 12");
    /* an id outside the vocabulary */
    assert_int_equal(replay_load(tu_path(g_dir, "hand"), 12, &t), -1);
    assert_contains(dflash_errmsg, "expected 0..11");
    /* the manifest validated as diff, explore and figures validate it (issue 34 item 12): a header
     * that is not the shape the manifest gives, a round below 0 */
    snprintf(dir, sizeof dir, "%s/badshape", g_dir);
    hand_made(dir, 7, 12);
    char *m = tu_read(tu_path(dir, "trace.jsonl"), NULL), *nl = strchr(m, '\n');
    assert_non_null(nl);
    char fixed[4096];
    snprintf(fixed, sizeof fixed, "{\"name\":\"input_ids\",\"file\":\"input_ids.npy\",\"dtype\":\"int64\",\"shape\":[4]}%s", nl);
    tu_write_text(tu_path(dir, "trace.jsonl"), fixed);
    assert_int_equal(replay_load(dir, 36, &t), -1);
    assert_contains(dflash_errmsg, "the manifest says dtype|shape \"int64|4\" but the file's header says \"int64|3\"");
    snprintf(fixed, sizeof fixed, "{\"name\":\"input_ids\",\"file\":\"input_ids.npy\",\"round\":-5}%s", nl);
    tu_write_text(tu_path(dir, "trace.jsonl"), fixed);
    assert_int_equal(replay_load(dir, 36, &t), -1);
    assert_contains(dflash_errmsg, "\"round\" must be an integer >= 0");
    free(m);
    /* the CLI: one line, exit 2 */
    snprintf(out, sizeof out, "%s/refused.out", g_dir);
    snprintf(cmd, sizeof cmd, "./dflash --replay %s/hand --block-size 5", g_dir);
    assert_int_equal(tu_run(cmd, out), 2);
    char *text = tu_read(out, NULL);
    assert_contains(text, "verified blocks of 4 tokens, this run's block size is 5 (give --block-size 4)");
    free(text);
    snprintf(cmd, sizeof cmd, "./dflash --replay %s/hand --prompt \"The cat\"", g_dir);
    assert_int_equal(tu_run(cmd, out), 2);
    text = tu_read(out, NULL);
    assert_contains(text, "--replay and --prompt");
    free(text);
}

/* the replay lines are cli/replay.diff's, not dflash.c's: the clean dflash.c
 * names no replay at all (no line of its loop, no refusal: dflash.h says a
 * library caller's GenParams.replay is ignored there), and the refusal is
 * cli/replay.c's: a dflash with no <name>-replay program beside it stops,
 * exit 2, naming the program it could not run, and runs nothing */
static void test_clean_dflash_c_does_not_replay(void **state) {
    (void)state;
    char *src = tu_read("dflash.c", NULL);
    assert_non_null(src);
    assert_null(strstr(src, "replay"));
    assert_null(strstr(src, "Replay"));
    free(src);
    char cmd[2048], out[1024];
    snprintf(out, sizeof out, "%s/alone.out", g_dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/alone && cp ./dflash %s/alone/dflash", g_dir, g_dir);
    assert_int_equal(tu_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "%s/alone/dflash --weights " RAND " --replay %s/hand --trace %s/alone/t", g_dir, g_dir, g_dir);
    assert_int_equal(tu_run(cmd, out), 2);
    char *text = tu_read(out, NULL);
    assert_contains(text, "--replay: cannot run");
    assert_contains(text, "alone/build/dflash-replay");
    free(text);
    snprintf(cmd, sizeof cmd, "test -e %s/alone/t", g_dir);
    assert_int_not_equal(tu_run(cmd, NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_dflash_c_does_not_replay),
        cmocka_unit_test(test_replay_of_a_sampled_run_lines_up_every_round),
        cmocka_unit_test(test_replay_follows_a_hand_made_port),
        cmocka_unit_test(test_replay_refuses_what_it_cannot_follow),
    };
    return cmocka_run_group_tests(tests, tu_scratch_setup, tu_scratch_teardown);
}
