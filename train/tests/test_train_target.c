/* train/tests/test_train_target.c - `dflash train-target` (train/train_target.c) and
 * the token stream it trains on (train/corpus.c):
 *   - the corpus: documents split on "%" lines, <|endoftext|> after each,
 *     the windows counted, against streams written out by hand;
 *   - a resumed run is bit-identical to an uninterrupted one: split with
 *     --stop-after, and cut by SIGINT mid-run (when step 100 reports; the
 *     checkpoint, then --resume), model.safetensors compared byte for byte;
 *     --threads 2 gives the same bytes as 1;
 *   - bad input: every flag's range, data that trains nothing, a
 *     non-finite loss: exit 2, one line, no --out;
 *   - the written folder loads back (./dflash --mode ar runs on it).
 * The model is a 2-layer, hidden-32 Qwen3 (a step takes milliseconds); the
 * tokenizer is `dflash train-tokenizer --vocab-size 259`'s (the 256 bytes,
 * one merge, <|endoftext|> and <mask>). */
#include "dflash.c"
#include "formats/load.c"
#include "train/corpus.c"
#include "tests/testutil.h"
#include "tests/runutil.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>


/* ---- the corpus ------------------------------------------------------------ */

/* a byte per token, as the test's tokenizer.json does */
static int bytes_enc(void *ctx, const char *text, size_t len, int **ids, size_t *n, size_t *cap) {
    (void)ctx;
    for (size_t i = 0; i < len; i++) {
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 64;
            *ids = realloc(*ids, *cap * sizeof(int));
            assert_non_null(*ids);
        }
        (*ids)[(*n)++] = (unsigned char)text[i];
    }
    return 0;
}

static void test_corpus_documents(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/a.txt", dir);
    snprintf(b, sizeof b, "%s/b.txt", dir);
    /* "a\n" | "bc\n" | (empty, skipped) | "\nd" (no final newline); "%x" is text */
    tu_write_text(a, "a\n%\nbc\n%\n%\n\nd");
    tu_write_text(b, "%x\n");   /* no separator line: one document */
    Corpus c;
    memset(&c, 0, sizeof c);
    assert_int_equal(corpus_add_file(&c, a, bytes_enc, NULL, 300), 0);
    assert_int_equal(corpus_add_file(&c, b, bytes_enc, NULL, 300), 0);
    const int want[] = {'a', '\n', 300, 'b', 'c', '\n', 300, '\n', 'd', 300, '%', 'x', '\n', 300};
    assert_int_equal(c.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < c.n; i++) assert_int_equal(c.ids[i], want[i]);
    assert_int_equal(c.documents, 4);
    assert_int_equal(c.bytes, 2 + 3 + 2 + 3);
    /* 14 tokens, windows of 4 sharing one: starts 0, 3, 6, 9 (9..12); 13 in none */
    assert_int_equal(corpus_windows(&c, 4), 4);
    assert_int_equal(corpus_windows(&c, 14), 1);
    assert_int_equal(corpus_windows(&c, 15), 0);
    assert_int_equal(corpus_windows(&c, 2), 13);
    corpus_free(&c);
    /* not UTF-8: refused, naming the file and the byte */
    tu_write_text(a, "ok\n\xff\n");
    assert_int_equal(corpus_add_file(&c, a, bytes_enc, NULL, 300), -1);
    assert_non_null(strstr(dflash_errmsg, "byte 3"));
    corpus_free(&c);
    tu_rmtree(dir);
    free(dir);
}

/* ---- runs ------------------------------------------------------------------ */

static const char *TINY_CONFIG =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 32,\n"
    " \"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,\n"
    " \"num_key_value_heads\": 2, \"head_dim\": 8, \"vocab_size\": 260, \"max_position_embeddings\": 128,\n"
    " \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000, \"tie_word_embeddings\": true}\n";

typedef struct {
    char dir[200], cfg[300], tok[300], data[300];
} Setup;

static void setup_run(Setup *s) {
    char *d = tu_tmpdir();
    assert_non_null(d);
    snprintf(s->dir, sizeof s->dir, "%s", d);
    free(d);
    snprintf(s->cfg, sizeof s->cfg, "%s/config.json", s->dir);
    snprintf(s->tok, sizeof s->tok, "%s/tokenizer.json", s->dir);
    snprintf(s->data, sizeof s->data, "%s/train.txt", s->dir);
    tu_write_text(s->cfg, TINY_CONFIG);
    Buf x = {0};
    for (int i = 0; i < 60; i++) {
        char doc[128];
        snprintf(doc, sizeof doc, "The %d%s cat sat on mat %d.\n%%\n", i, i % 3 ? "th" : "rd", i * 7 % 11);
        buf_add(&x, doc, strlen(doc));
    }
    assert_int_equal(tu_write(s->data, x.b, x.n), 0);
    free(x.b);
    /* 259 tokens: the 256 bytes, one merge and the two specials */
    assert_int_equal(tu_runf("./dflash train-tokenizer --vocab-size 259 --out %s %s 2>/dev/null", s->tok, s->data), 0);
}

#define COMMON "--seq-len 16 --batch 3 --lr 3e-3 --warmup 2 --log-every 1000"

static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = tu_read(a, &na), *y = tu_read(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static void test_resume_bit_identical(void **state) {
    (void)state;
    Setup s;
    setup_run(&s);
    /* uninterrupted */
    assert_int_equal(tu_runf("./dflash train-target --config %s --tokenizer %s --data %s --steps 12 " COMMON
                         " --out %s/full --log %s/full.log 2>/dev/null", s.cfg, s.tok, s.data, s.dir, s.dir), 0);
    /* split at step 5, then resumed; the checkpoint is a loadable folder */
    assert_int_equal(tu_runf("./dflash train-target --config %s --tokenizer %s --data %s --steps 12 " COMMON
                         " --out %s/split --stop-after 5 --log %s/split.log 2>/dev/null", s.cfg, s.tok, s.data, s.dir,
                         s.dir), 0);
    assert_false(tu_exists(tu_path(s.dir, "split")));
    assert_true(tu_exists(tu_path(s.dir, "split.checkpoint/optimizer.safetensors")));
    /* the resume is refused with other data or another tokenizer (both were
     * accepted and trained on), naming the flag; the checkpoint stays */
    char other[300];
    snprintf(other, sizeof other, "%s/other.txt", s.dir);
    Buf ox = {0};   /* as long as the data, other words */
    for (int i = 0; i < 60; i++) {
        char doc[128];
        snprintf(doc, sizeof doc, "A %d%s dog saw the box %d.\n%%\n", i, i % 3 ? "th" : "rd", i * 5 % 13);
        buf_add(&ox, doc, strlen(doc));
    }
    assert_int_equal(tu_write(other, ox.b, ox.n), 0);
    free(ox.b);
    const char *flag[2] = {"--data", "--tokenizer"};
    for (int k = 0; k < 2; k++) {
        char tok2[300] = "";
        if (k == 1) {   /* another tokenizer: trained on the other text */
            snprintf(tok2, sizeof tok2, "%s/tok2.json", s.dir);
            assert_int_equal(tu_runf("./dflash train-tokenizer --vocab-size 259 --out %s %s 2>/dev/null", tok2, other),
                             0);
        }
        assert_int_equal(tu_runf("./dflash train-target --resume %s/split.checkpoint --data %s%s%s --steps 12 " COMMON
                             " --out %s/x 2>%s/err", s.dir, k == 0 ? other : s.data, k ? " --tokenizer " : "", tok2,
                             s.dir, s.dir), 2);
        char *msg = tu_read(tu_path(s.dir, "err"), NULL);
        assert_non_null(msg);
        if (!strstr(msg, "had another") || !strstr(msg, flag[k])) fail_msg("%s: %s", flag[k], msg);
        free(msg);
    }
    assert_int_equal(tu_runf("./dflash train-target --resume %s/split.checkpoint --data %s --steps 12 " COMMON
                         " --out %s/split --log %s/split.log 2>/dev/null", s.dir, s.data, s.dir, s.dir), 0);
    /* the resumed run's --log holds the whole run's steps, as the
     * uninterrupted run's does (it held the resumed steps only) */
    char *logs[2] = {tu_read(tu_path(s.dir, "full.log"), NULL), tu_read(tu_path(s.dir, "split.log"), NULL)};
    assert_non_null(logs[0]);
    assert_non_null(logs[1]);
    for (int k = 0; k < 2; k++)
        for (int st = 1; st <= 12; st++) {
            char want[32];
            snprintf(want, sizeof want, "\nstep %d loss ", st);
            if (!strstr(logs[k], want)) fail_msg("%s.log has no step %d:\n%s", k ? "split" : "full", st, logs[k]);
        }
    assert_non_null(strstr(logs[1], "\nresumed after step 5: dflash train-target --resume "));
    free(logs[0]);
    free(logs[1]);
    char a[300], b[300];
    /* every file of the folder, not only the weights (the resumed run's
     * config comes from the checkpoint's config.json, not from --config) */
    const char *files[] = {"config.json", "generation_config.json", "tokenizer.json", "model.safetensors"};
    for (int f = 0; f < 4; f++) {
        snprintf(a, sizeof a, "%s/full/%s", s.dir, files[f]);
        snprintf(b, sizeof b, "%s/split/%s", s.dir, files[f]);
        if (!same_file(a, b)) fail_msg("%s differs after the resume", files[f]);
    }
    /* --resume with another schedule is refused, naming the flag */
    assert_int_equal(tu_runf("./dflash train-target --resume %s/split.checkpoint --data %s --steps 12 " COMMON
                         " --schedule constant --out %s/x 2>%s/err", s.dir, s.data, s.dir, s.dir), 2);
    char *err = tu_read(tu_path(s.dir, "err"), NULL);
    assert_non_null(err);
    assert_non_null(strstr(err, "--schedule"));
    free(err);
    /* two threads: the same bytes */
    assert_int_equal(tu_runf("./dflash train-target --config %s --tokenizer %s --data %s --steps 12 " COMMON
                         " --threads 2 --out %s/threads 2>/dev/null", s.cfg, s.tok, s.data, s.dir), 0);
    snprintf(b, sizeof b, "%s/threads/model.safetensors", s.dir);
    assert_true(same_file(a, b));
    tu_rmtree(s.dir);
}

/* SIGINT in the middle of the run (when its progress line of step 100 of
 * 600 is read, not after a sleep: at any machine speed the run is mid-way):
 * a checkpoint, exit 130; the resumed run ends with the uninterrupted run's
 * bytes */
static void test_sigint_checkpoint_resume(void **state) {
    (void)state;
    Setup s;
    setup_run(&s);
    const char *steps = "600";
    char out[300], ck[300];
    snprintf(out, sizeof out, "%s/cut", s.dir);
    snprintf(ck, sizeof ck, "%s/cut.checkpoint", s.dir);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        execl("./dflash", "./dflash", "train-target", "--config", s.cfg, "--tokenizer", s.tok, "--data", s.data,
              "--steps", steps, "--seq-len", "16", "--batch", "3", "--lr", "3e-3", "--warmup", "2", "--log-every",
              "100", "--out", out, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    FILE *err = fdopen(pfd[0], "r");
    assert_non_null(err);
    char line[1000];
    int seen = 0;
    while (!seen && fgets(line, sizeof line, err)) seen = strncmp(line, "step 100/", 9) == 0;
    if (seen) kill(pid, SIGINT);
    while (fgets(line, sizeof line, err)) {}   /* the rest, so it never blocks on a full pipe */
    fclose(err);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!seen) fail_msg("no progress line \"step 100/%s\" on stderr (exit %d)", steps, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 130);
    assert_false(tu_exists(out));
    assert_true(tu_exists(tu_path(ck, "trainer_state.json")));
    assert_int_equal(tu_runf("./dflash train-target --resume %s --data %s --steps %s " COMMON " --out %s 2>/dev/null", ck,
                         s.data, steps, out), 0);
    assert_int_equal(tu_runf("./dflash train-target --config %s --tokenizer %s --data %s --steps %s " COMMON
                         " --out %s/full 2>/dev/null", s.cfg, s.tok, s.data, steps, s.dir), 0);
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/full/model.safetensors", s.dir);
    snprintf(b, sizeof b, "%s/model.safetensors", out);
    assert_true(same_file(a, b));
    tu_rmtree(s.dir);
}

/* one line, exit 2, nothing written */
static void refused(const Setup *s, const char *args, const char *needle) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "./dflash train-target %s", args);
    tu_expect_refusal(s->dir, cmd, needle);
}

static void test_bad_input(void **state) {
    (void)state;
    Setup s;
    setup_run(&s);
    char base[2000], args[4096];
    snprintf(base, sizeof base, "--config %s --tokenizer %s --data %s --out %s/o", s.cfg, s.tok, s.data, s.dir);
    const char *bad[][2] = {
        {"--steps -1", "--steps"}, {"--steps 100000001", "--steps"}, {"--batch 0", "--batch"},
        {"--batch 4097", "--batch"}, {"--seq-len 1", "--seq-len"}, {"--seq-len 129", "--seq-len"},
        {"--lr 0", "--lr"}, {"--lr nan", "--lr"}, {"--weight-decay -1", "--weight-decay"},
        {"--max-grad-norm inf", "--max-grad-norm"}, {"--adam-eps 0", "--adam-eps"}, {"--beta2 1", "--beta2"},
        {"--threads 0", "--threads"}, {"--threads 65", "--threads"}, {"--schedule linear", "--schedule"},
        {"--decay-on some", "--decay-on"}, {"--dtype f16", "--dtype"}, {"--seed x", "--seed"},
        {"--steps 10 --warmup 10", "--warmup"}, {"--steps 10 --stop-after 10", "--stop-after"},
        {"--checkpoint-every -1", "--checkpoint-every"}, {"--log-every 0", "--log-every"},
        {"--frobnicate 1", "unknown flag"}, {"--seq-len 1000 --steps 1", "--seq-len"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "%s %s", base, bad[i][0]);
        refused(&s, args, bad[i][1]);
    }
    /* an output inside another: one line, the command named once (it was
     * "dflash train-target: dflash train-target: --log ...") */
    snprintf(args, sizeof args, "%s --log %s/o", base, s.dir);
    refused(&s, args, "may not be --out");
    char *said = tu_read(tu_path(s.dir, "err.txt"), NULL);
    assert_non_null(said);
    if (strncmp(said, "dflash train-target: --log ", 27) != 0) fail_msg("the refusal reads: %s", said);
    free(said);
    /* no model, two models, no data */
    snprintf(args, sizeof args, "--tokenizer %s --data %s --out %s/o", s.tok, s.data, s.dir);
    refused(&s, args, "--config FILE, --target DIR or --resume DIR");
    snprintf(args, sizeof args, "--config %s --tokenizer %s --out %s/o", s.cfg, s.tok, s.dir);
    refused(&s, args, "--data FILE... or --batches FILE");
    /* data shorter than a window: nothing to train on */
    char small[300];
    snprintf(small, sizeof small, "%s/small.txt", s.dir);
    tu_write_text(small, "tiny\n");
    snprintf(args, sizeof args, "--config %s --tokenizer %s --data %s --seq-len 64 --out %s/o", s.cfg, s.tok, small,
             s.dir);
    refused(&s, args, "nothing to train on");
    /* batches whose every label is masked: refused before step 1 */
    char cs[300];
    snprintf(cs, sizeof cs, "%s/case.json", s.dir);
    tu_write_text(cs, "{\"batches\": [{\"input_ids\": [[1, 2, 3]], \"loss_mask\": [[1, 0, 0]]}]}");
    snprintf(args, sizeof args, "--config %s --batches %s --out %s/o", s.cfg, cs, s.dir);
    refused(&s, args, "no label carries a loss");
    /* an output that is an input */
    snprintf(args, sizeof args, "--config %s --tokenizer %s --data %s --out %s", s.cfg, s.tok, s.data, s.dir);
    refused(&s, args, "");
    /* a folder holding something else is not replaced */
    char other[300];
    snprintf(other, sizeof other, "%s/other", s.dir);
    mkdir(other, 0777);
    tu_write_text(tu_path(other, "notes.txt"), "mine\n");
    snprintf(args, sizeof args, "%s --steps 1 --out %s", base, other);
    refused(&s, args, "notes.txt");
    assert_true(tu_exists(tu_path(other, "notes.txt")));
    /* a loss that overflows: stopped at that step, naming the tensor, exit 2,
     * no --out (the progress lines come before the one error line) */
    assert_int_equal(tu_runf("./dflash train-target %s --steps 20 --lr 1e30 --max-grad-norm 0 --warmup 0 2> %s/err.txt",
                         base, s.dir), 2);
    char *err = tu_read(tu_path(s.dir, "err.txt"), NULL);
    assert_non_null(err);
    char *last = strstr(err, "dflash train-target: ");
    assert_non_null(last);
    assert_non_null(strstr(last, "is not finite"));
    assert_non_null(strstr(last, "step 2"));
    assert_null(strchr(last, '\n') ? strchr(strchr(last, '\n') + 1, '\n') : NULL);
    free(err);
    assert_false(tu_exists(tu_path(s.dir, "o")));
    tu_rmtree(s.dir);
}

/* the folder loads back: ./dflash decodes from it target-only */
static void test_output_folder_loads(void **state) {
    (void)state;
    Setup s;
    setup_run(&s);
    char w[300];
    snprintf(w, sizeof w, "%s/w", s.dir);
    assert_int_equal(tu_runf("./dflash train-target --config %s --tokenizer %s --data %s --steps 3 " COMMON
                         " --out %s/target 2>/dev/null", s.cfg, s.tok, s.data, w), 2);   /* w/ is not there */
    mkdir(w, 0777);
    assert_int_equal(tu_runf("./dflash train-target --config %s --tokenizer %s --data %s --steps 3 " COMMON
                         " --heldout %s --dtype bf16 --out %s/w/target 2>%s/err", s.cfg, s.tok, s.data, s.data, s.dir,
                         s.dir), 0);
    char *err = tu_read(tu_path(s.dir, "err"), NULL);
    assert_non_null(err);
    assert_non_null(strstr(err, "bits per byte"));
    free(err);
    const char *names[] = {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json",
                           "dflash-train.txt", NULL};
    char t[300];
    snprintf(t, sizeof t, "%s/w/target", s.dir);
    assert_only(t, names);
    /* a model folder the user made (the names --out writes, no marker) is
     * replaced neither as --out nor as --checkpoint */
    char user[300];
    snprintf(user, sizeof user, "%s/user", s.dir);
    mkdir(user, 0777);
    tu_write_text(tu_path(user, "config.json"), "{\"mine\": 1}\n");
    tu_write_text(tu_path(user, "model.safetensors"), "mine\n");
    const char *as[2] = {"--out %s/user", "--out %s/w/o2 --checkpoint %s/user"};
    for (int k = 0; k < 2; k++) {
        char flag[700];
        snprintf(flag, sizeof flag, as[k], s.dir, s.dir);
        assert_int_equal(tu_runf("./dflash train-target --config %s --tokenizer %s --data %s --steps 3 " COMMON
                             " --checkpoint-every 1 %s 2>%s/err", s.cfg, s.tok, s.data, flag, s.dir), 2);
        char *msg = tu_read(tu_path(s.dir, "err"), NULL);
        assert_non_null(msg);
        if (!strstr(msg, "a folder dflash train-target did not write")) fail_msg("%s: %s", flag, msg);
        free(msg);
        assert_int_equal(tu_count_entries(user), 2);
        char *kept = tu_read(tu_path(user, "config.json"), NULL);
        assert_string_equal(kept, "{\"mine\": 1}\n");
        free(kept);
    }
    assert_int_equal(tu_runf("./dflash --target %s/w/target --ids 84,104,101 --mode ar --max-new-tokens 4 > /dev/null "
                         "2>&1", s.dir), 0);
    tu_rmtree(s.dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_documents),
        cmocka_unit_test(test_resume_bit_identical),
        cmocka_unit_test(test_sigint_checkpoint_resume),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_output_folder_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
