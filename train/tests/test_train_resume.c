/* train/tests/test_train_resume.c - `dflash train`'s checkpoints and --resume
 * (train/train_cli.c, train/checkpoint.c):
 *   - a run split by --stop-after (stopped mid-epoch, resumed, stopped again
 *     at an epoch's end with --checkpoint-every 1, resumed with --threads 2)
 *     ends with the bytes of an uninterrupted run, a second computation of
 *     the same steps: model.safetensors, config.json, and the --log, whose
 *     lines are the same but for those that name the command; the same for
 *     --batches;
 *   - SIGINT mid-run (when its first progress line is read): a checkpoint,
 *     exit 130, and the resumed run ends with the uninterrupted run's bytes;
 *   - a resume that disagrees (--lr, --batch, --data, --log) is refused with
 *     exit 2 and one line naming the flag; a --checkpoint folder holding
 *     another file is not replaced;
 *   - --help lists the new flags.
 * The pair is the qwen3-layout target and a 1-layer draft of its draft's
 * shape (--draft-config: seeded), block 4, on five short --data lines: a step
 * takes about a millisecond. */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define Q3T "toy_weights/qwen3-layout/target"


/* the qwen3-layout draft's config with one layer */
static const char *ONE_LAYER =
    "{\"architectures\": [\"DFlashDraftModel\"], \"block_size\": 16, \"bos_token_id\": 4,\n"
    " \"dflash_config\": {\"mask_token_id\": 63, \"target_layer_ids\": [1, 2, 4, 6, 7]}, \"eos_token_id\": 3,\n"
    " \"head_dim\": 32, \"hidden_act\": \"silu\", \"hidden_size\": 64, \"intermediate_size\": 192,\n"
    " \"layer_types\": [\"full_attention\"], \"max_position_embeddings\": 512, \"max_window_layers\": 1,\n"
    " \"model_type\": \"qwen3\", \"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"num_key_value_heads\": 1,\n"
    " \"num_target_layers\": 10, \"rms_norm_eps\": 1e-06, \"rope_scaling\": null, \"rope_theta\": 1000000,\n"
    " \"sliding_window\": null, \"tie_word_embeddings\": false, \"use_sliding_window\": false, \"vocab_size\": 64}\n";

/* five sequences: batch 2 ends an epoch mid-batch (step 3: the second
 * epoch's first; step 5: an epoch's end) */
static const char *DATA =
    "5 6 7 | 8 9 10 11 12 13 14 15 16 17 18 19 20\n21 22 23 24 25 26 27 28 29 30 31\n"
    "1 2 | 3 4 5 6 7 8 9 10 11 12 13 14\n40 41 42 43 44 45 46 47 48 49 50 51\n9 8 7 6 5 4 3 2 1 0 10 11 12\n";

typedef struct {
    char dir[200], cfg[300], data[300], base[2000];
} Setup;

static void setup(Setup *s) {
    char *d = tu_tmpdir();
    assert_non_null(d);
    snprintf(s->dir, sizeof s->dir, "%s", d);
    free(d);
    snprintf(s->cfg, sizeof s->cfg, "%s/one.json", s->dir);
    snprintf(s->data, sizeof s->data, "%s/data.txt", s->dir);
    tu_write_text(s->cfg, ONE_LAYER);
    tu_write_text(s->data, DATA);
    snprintf(s->base, sizeof s->base, "./dflash train --target " Q3T " --draft-config %s --data %s --seq-len 16 "
             "--block-size 4 --batch 2 --anchors 4 --lr 3e-3 --log-every 1000", s->cfg, s->data);
}

static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = tu_read(a, &na), *y = tu_read(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* the log without the lines that name a command ("command ...", "resumed
 * after step N: ...") */
static char *log_body(const char *path) {
    char *t = tu_read(path, NULL);
    assert_non_null(t);
    char *out = malloc(strlen(t) + 1), *w = out;
    assert_non_null(out);
    for (char *p = t; *p;) {
        char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p + 1) : strlen(p);
        if (strncmp(p, "command ", 8) != 0 && strncmp(p, "resumed after step ", 19) != 0) memcpy(w, p, n), w += n;
        p += n;
    }
    *w = 0;
    free(t);
    return out;
}

static void assert_same_run(const Setup *s, const char *a, const char *b) {
    const char *files[] = {"model.safetensors", "config.json"};
    for (int f = 0; f < 2; f++)
        if (!same_file(tu_path(tu_path(s->dir, a), files[f]), tu_path(tu_path(s->dir, b), files[f])))
            fail_msg("%s/%s and %s/%s differ", a, files[f], b, files[f]);
}

static void test_split_run_is_the_whole_run(void **state) {
    (void)state;
    Setup s;
    setup(&s);
    const char *d = s.dir;
    assert_int_equal(tu_runf("%s --steps 9 --out %s/full --log %s/full.log 2>/dev/null", s.base, d, d), 0);
    /* stopped after step 3 (mid-epoch): exit 0, a checkpoint, no --out; the
     * log so far is written */
    assert_int_equal(tu_runf("%s --steps 9 --out %s/split --log %s/split.log --stop-after 3 2>/dev/null", s.base, d, d), 0);
    assert_false(tu_exists(tu_path(d, "split")));
    char ck[300];   /* not tu_path's ring: it lives through the test */
    snprintf(ck, sizeof ck, "%s/split.checkpoint", d);
    const char *want[] = {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json", "train.log"};
    for (int f = 0; f < 5; f++)
        if (!tu_exists(tu_path(ck, want[f]))) fail_msg("the checkpoint has no %s", want[f]);
    char *st = tu_read(tu_path(ck, "trainer_state.json"), NULL);
    assert_non_null(st);
    assert_non_null(strstr(st, "\"format\": \"dflash train checkpoint 1\""));
    assert_non_null(strstr(st, "\"step\": 3,"));
    assert_non_null(strstr(st, "\"cursor\": 1,"));   /* 6 drawn of 5: the second epoch's first */
    free(st);
    char *part = tu_read(tu_path(d, "split.log"), NULL);
    assert_non_null(part);
    assert_non_null(strstr(part, "\nstep 3 "));
    assert_null(strstr(part, "\nstep 4 "));
    free(part);
    /* resumed, stopped again at an epoch's end (step 5: 10 drawn), with a
     * checkpoint at every step on the way; then resumed with two threads */
    assert_int_equal(tu_runf("%s --steps 9 --out %s/split --log %s/split.log --resume %s --stop-after 5 "
                         "--checkpoint-every 1 2>/dev/null", s.base, d, d, ck), 0);
    st = tu_read(tu_path(ck, "trainer_state.json"), NULL);
    assert_non_null(st);
    assert_non_null(strstr(st, "\"step\": 5,"));
    assert_non_null(strstr(st, "\"cursor\": 5,"));
    free(st);
    assert_int_equal(tu_runf("%s --steps 9 --out %s/split --log %s/split.log --resume %s --threads 2 2>/dev/null", s.base,
                         d, d, ck), 0);
    assert_same_run(&s, "full", "split");
    char *a = log_body(tu_path(d, "full.log")), *b = log_body(tu_path(d, "split.log"));
    assert_non_null(strstr(a, "\nstep 9 "));
    assert_string_equal(a, b);
    free(a);
    free(b);
    /* the resumed log names both commands */
    char *lg = tu_read(tu_path(d, "split.log"), NULL);
    assert_non_null(lg);
    assert_non_null(strstr(lg, "\nresumed after step 3: dflash "));
    assert_non_null(strstr(lg, "\nresumed after step 5: dflash "));
    free(lg);
    tu_rmtree(d);
}

/* --batches: step s takes batches[s-1], so the position is the step alone */
static void test_batches_split(void **state) {
    (void)state;
    Setup s;
    setup(&s);
    const char *d = s.dir;
    char cs[300];
    snprintf(cs, sizeof cs, "%s/case.json", d);
    tu_write_text(cs, "{\"batches\": [\n"
                      " {\"input_ids\": [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]], \"anchors\": [[0, 4]]},\n"
                      " {\"input_ids\": [[21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32]], \"anchors\": [[2, 6]]},\n"
                      " {\"input_ids\": [[40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51]], \"anchors\": [[1, 5]]}]}\n");
    char base[2000];
    snprintf(base, sizeof base, "./dflash train --target " Q3T " --draft-config %s --batches %s --block-size 4 --lr 3e-3 "
             "--warmup 0", s.cfg, cs);
    assert_int_equal(tu_runf("%s --out %s/full --log %s/full.log 2>/dev/null", base, d, d), 0);
    assert_int_equal(tu_runf("%s --out %s/split --log %s/split.log --stop-after 1 2>/dev/null", base, d, d), 0);
    assert_int_equal(tu_runf("%s --out %s/split --log %s/split.log --resume %s/split.checkpoint 2>/dev/null", base, d, d, d),
                     0);
    assert_same_run(&s, "full", "split");
    char *a = log_body(tu_path(d, "full.log")), *b = log_body(tu_path(d, "split.log"));
    assert_non_null(strstr(a, "\nstep 3 "));
    assert_string_equal(a, b);
    free(a);
    free(b);
    tu_rmtree(d);
}

/* SIGINT when the first progress line is read (the run has 200 steps of
 * about a millisecond each: mid-way at any machine speed) */
static void test_sigint_then_resume(void **state) {
    (void)state;
    Setup s;
    setup(&s);
    const char *d = s.dir;
    char out[300], ck[300];
    snprintf(out, sizeof out, "%s/cut", d);
    snprintf(ck, sizeof ck, "%s/cut.checkpoint", d);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        execl("./dflash", "./dflash", "train", "--target", Q3T, "--draft-config", s.cfg, "--data", s.data,
              "--seq-len", "16", "--block-size", "4", "--batch", "2", "--anchors", "4", "--lr", "3e-3",
              "--log-every", "1000", "--steps", "200", "--out", out, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    FILE *err = fdopen(pfd[0], "r");
    assert_non_null(err);
    char line[1000];
    int seen = 0, stopped = 0;
    while (fgets(line, sizeof line, err)) {
        if (!seen && strncmp(line, "step 1/200", 10) == 0) seen = 1, kill(pid, SIGINT);
        stopped |= strncmp(line, "stopped by signal 2 after step ", 31) == 0;
    }
    fclose(err);
    int wst;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    if (!seen) fail_msg("no progress line \"step 1/200\" (exit %d)", WIFEXITED(wst) ? WEXITSTATUS(wst) : -1);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 130);
    assert_true(stopped);
    assert_false(tu_exists(out));
    assert_true(tu_exists(tu_path(ck, "trainer_state.json")));
    assert_int_equal(tu_runf("%s --steps 200 --out %s --resume %s 2>/dev/null", s.base, out, ck), 0);
    assert_int_equal(tu_runf("%s --steps 200 --out %s/full 2>/dev/null", s.base, d), 0);
    assert_same_run(&s, "full", "cut");
    tu_rmtree(d);
}

/* exit 2, one line holding needle, nothing written to --out */
static void refused(const Setup *s, const char *args, const char *needle) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s", s->base, args);
    tu_expect_refusal(s->dir, cmd, needle);
}

static void test_refusals(void **state) {
    (void)state;
    Setup s;
    setup(&s);
    const char *d = s.dir;
    assert_int_equal(tu_runf("%s --steps 6 --out %s/o --log %s/o.log --stop-after 2 2>/dev/null", s.base, d, d), 0);
    char args[4096], other[300];
    snprintf(other, sizeof other, "%s/other.txt", d);
    tu_write_text(other, "5 6 7 | 8 9 10 11 12 13 14 15 16 17 18 19 20\n");
    const char *cases[][2] = {
        {"--lr 1e-3", "another --lr"}, {"--batch 3", "another --batch"}, {"--steps 7", "another --steps"},
        {"--seed 5", "another --seed"}, {"--gamma 2", "another --gamma"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "--steps 6 --out %s/o --log %s/o.log --resume %s/o.checkpoint %s", d, d, d,
                 cases[i][0]);
        refused(&s, args, cases[i][1]);
    }
    /* --data: later flags win, so this one replaces the base's */
    snprintf(args, sizeof args, "--steps 6 --out %s/o --log %s/o.log --resume %s/o.checkpoint --data %s", d, d, d, other);
    refused(&s, args, "other data than --data");
    snprintf(args, sizeof args, "--steps 6 --out %s/o --resume %s/o.checkpoint", d, d);
    refused(&s, args, "kept a log");
    snprintf(args, sizeof args, "--steps 6 --out %s/o --log %s/o.log --stop-after 6", d, d);
    refused(&s, args, "--stop-after");
    snprintf(args, sizeof args, "--steps 6 --out %s/o --resume %s/nothing-here", d, d);
    refused(&s, args, "nothing-here");
    /* a checkpoint folder holding another file is not replaced */
    char busy[300];
    snprintf(busy, sizeof busy, "%s/busy", d);
    mkdir(busy, 0777);
    tu_write_text(tu_path(busy, "notes.txt"), "mine\n");
    snprintf(args, sizeof args, "--steps 2 --out %s/o --checkpoint %s", d, busy);
    refused(&s, args, "notes.txt");
    assert_true(tu_exists(tu_path(busy, "notes.txt")));
    assert_int_equal(tu_count_entries(busy), 1);
    /* nor is a user's draft folder holding only the names a checkpoint has
     * (config.json, model.safetensors) but no marker dflash wrote */
    char user[300];
    snprintf(user, sizeof user, "%s/user-draft", d);
    mkdir(user, 0777);
    tu_write_text(tu_path(user, "config.json"), "{\"mine\": 1}\n");
    tu_write_text(tu_path(user, "model.safetensors"), "mine\n");
    snprintf(args, sizeof args, "--steps 2 --out %s/o --checkpoint %s", d, user);
    refused(&s, args, "a folder dflash train did not write");
    assert_int_equal(tu_count_entries(user), 2);
    char *kept = tu_read(tu_path(user, "config.json"), NULL);
    assert_string_equal(kept, "{\"mine\": 1}\n");
    free(kept);
    /* the refused resumes left the checkpoint as it was: it still resumes */
    assert_int_equal(tu_runf("%s --steps 6 --out %s/o --log %s/o.log --resume %s/o.checkpoint 2>/dev/null", s.base, d, d,
                         d), 0);
    tu_rmtree(d);
}

static void test_help_lists_the_flags(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    assert_int_equal(tu_runf("./dflash train --help > %s/help", dir), 0);
    char *h = tu_read(tu_path(dir, "help"), NULL);
    assert_non_null(h);
    const char *flags[] = {"\n  --checkpoint-every N ", "\n  --checkpoint DIR ", "\n  --stop-after N ",
                           "\n  --resume DIR ", "130/143 stopped by SIGINT/SIGTERM"};
    for (int i = 0; i < 5; i++)
        if (!strstr(h, flags[i])) fail_msg("dflash train --help: no \"%s\"", flags[i] + 1);
    free(h);
    tu_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_run_is_the_whole_run),
        cmocka_unit_test(test_batches_split),
        cmocka_unit_test(test_sigint_then_resume),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_help_lists_the_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
