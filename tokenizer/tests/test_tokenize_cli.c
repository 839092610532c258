/* tokenizer/tests/test_tokenize_cli.c - text in, text out, end to end through
 * ./dflash: `dflash train-tokenizer` writes a tokenizer.json, `dflash
 * tokenize` encodes and decodes with it, and `dflash --prompt TEXT` on a
 * weight set holding it starts from the very ids `dflash tokenize` gives
 * (and runs as `--ids` with those ids does); a prompt whose ids do not fit
 * the model's vocab_size is refused naming the id; --chat is the ChatML
 * turn; bad input is one line and exit 2. The target is built byte by byte
 * here (testutil.h) with vocab_size 300, the tokenizer's size. And the
 * trainer in this process (tokenize.c included): merges worked out by hand,
 * and its steps counted on a corpus that is one long word. */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"
static long tok_work;  /* the trainer's steps (TOK_WORK): heap moves, places visited */
#define TOK_WORK(n) (tok_work += (n))
#include "tokenizer/tokenize.c"  /* train_tokenizer_main in this process, its steps counted */

static const char *CORPUS =
    "The cat sat on the mat. The dog sat on the log. The cat saw the dog.\n"
    "A cat and a dog are friends; the cat is small and the dog is big.\n";

/* DIR/target (config.json with vocab_size V, model.safetensors), no draft */
static void target_set(const char *dir, int V) {
    char p[1200], cfg[1024];
    snprintf(p, sizeof p, "%s/target", dir);
    mkdir(dir, 0755);
    mkdir(p, 0755);
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":8,"
             "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
             "\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":%d,\"rms_norm_eps\":1e-6,"
             "\"rope_theta\":10000.0,\"max_position_embeddings\":256,\"tie_word_embeddings\":false}", V);
    snprintf(p, sizeof p, "%s/target/config.json", dir);
    tu_write_text(p, cfg);
    TuModel m;
    tu_model_tensors_lv(&m, 0, 1, V, 1);
    snprintf(p, sizeof p, "%s/target/model.safetensors", dir);
    tu_write_safetensors(p, m.t, m.n);
    tu_model_free(&m);
}

static void test_end_to_end(void **state) {
    (void)state;
    char *t = tu_tmpdir(), cmd[4096];
    int st;
    assert_non_null(t);
    tu_write_text(tu_path(t, "corpus.txt"), CORPUS);
    target_set(tu_path(t, "w"), 300);
    snprintf(cmd, sizeof cmd, "./dflash train-tokenizer --vocab-size 300 --out %s/w/target/tokenizer.json %s/corpus.txt 2>&1", t, t);
    char *out = tu_sh(cmd, &st);
    if (st != 0) fail_msg("train-tokenizer: exit %d: %s", st, out);
    assert_non_null(strstr(out, "300 tokens"));
    free(out);

    /* dflash tokenize: ids, and --decode gives the text back */
    snprintf(cmd, sizeof cmd, "./dflash tokenize --target %s/w/target 'The cat sat'", t);
    char *ids = tu_sh(cmd, &st);
    assert_int_equal(st, 0);
    assert_true(strlen(ids) > 1 && ids[strlen(ids) - 1] == '\n');
    ids[strlen(ids) - 1] = 0;
    assert_null(strchr(ids, ' '));
    snprintf(cmd, sizeof cmd, "./dflash tokenize --weights %s/w --decode %s", t, ids);
    out = tu_sh(cmd, &st);
    assert_int_equal(st, 0);
    assert_string_equal(out, "The cat sat");  /* exactly: no newline added */
    free(out);

    /* --prompt through the tokenizer.json: the same ids as dflash tokenize,
     * and the same run as --ids with them */
    char spaced[1024];
    snprintf(spaced, sizeof spaced, "%s", ids);
    for (char *c = spaced; *c; c++) if (*c == ',') *c = ' ';
    snprintf(cmd, sizeof cmd, "./dflash --target %s/w/target --mode ar --prompt 'The cat sat' --max-new-tokens 4 --ignore-eos --print-ids", t);
    char *a = tu_sh(cmd, &st);
    if (st != 0) fail_msg("--prompt: exit %d: %s", st, a);
    assert_non_null(strstr(a, "\n"));
    char *line2 = strchr(a, '\n') + 1;
    assert_int_equal(strncmp(line2, spaced, strlen(spaced)), 0);
    assert_int_equal(strncmp(a, "The cat sat", 11), 0);  /* the decoded text starts with the prompt */
    snprintf(cmd, sizeof cmd, "./dflash --target %s/w/target --mode ar --ids %s --max-new-tokens 4 --ignore-eos --print-ids", t, ids);
    char *b = tu_sh(cmd, &st);
    assert_int_equal(st, 0);
    assert_string_equal(a, b);
    free(a);
    free(b);

    /* --chat: the ids of the ChatML turn written out */
    snprintf(cmd, sizeof cmd, "./dflash tokenize --target %s/w/target \"$(printf '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n')\"", t);
    char *chat_ids = tu_sh(cmd, &st);
    assert_int_equal(st, 0);
    chat_ids[strlen(chat_ids) - 1] = 0;
    for (char *c = chat_ids; *c; c++) if (*c == ',') *c = ' ';
    snprintf(cmd, sizeof cmd, "./dflash --target %s/w/target --mode ar --prompt hi --chat --max-new-tokens 1 --print-ids", t);
    a = tu_sh(cmd, &st);
    assert_int_equal(st, 0);
    assert_int_equal(strncmp(strchr(a, '\n') + 1, chat_ids, strlen(chat_ids)), 0);
    free(a);
    free(chat_ids);

    /* a vocab_size the tokenizer's ids do not fit: refused naming the id
     * (the whole tokenizer.json is checked, so no prompt id can be past it) */
    target_set(tu_path(t, "small"), 64);
    snprintf(cmd, sizeof cmd, "cp %s/w/target/tokenizer.json %s/small/target/ && ./dflash --target %s/small/target --mode ar "
                              "--prompt 'The cat' 2>&1", t, t, t);
    out = tu_sh(cmd, &st);
    assert_int_equal(st, 2);
    const char *want = "small/target/tokenizer.json: token id 299: expected ids below 64 (vocab_size in";
    if (!strstr(out, want)) fail_msg("got: %s\nwant ...%s...", out, want);
    free(out);

    /* bad input: one line, exit 2 */
    tu_write(tu_path(t, "bad.txt"), "ok\n\xff", 4);
    snprintf(cmd, sizeof cmd, "./dflash tokenize --target %s/w/target --file %s/bad.txt 2>&1", t, t);
    out = tu_sh(cmd, &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "bad.txt: invalid UTF-8 at byte 3 (0xFF)"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
    free(out);
    snprintf(cmd, sizeof cmd, "./dflash tokenize --target %s/w/target --decode 1,300 2>&1", t);
    out = tu_sh(cmd, &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "id 300 (position 2) is no token"));
    free(out);
    snprintf(cmd, sizeof cmd, "./dflash train-tokenizer --vocab-size 300 --out %s/corpus.txt %s/corpus.txt 2>&1", t, t);
    out = tu_sh(cmd, &st);
    assert_int_equal(st, 2);  /* the output is an input */
    free(out);
    free(ids);
    tu_rmtree(t);
    free(t);
}

/* the trainer is deterministic: two runs, one file */
static void test_train_deterministic(void **state) {
    (void)state;
    char *t = tu_tmpdir(), cmd[2048];
    int st;
    tu_write_text(tu_path(t, "c.txt"), CORPUS);
    snprintf(cmd, sizeof cmd, "./dflash train-tokenizer --vocab-size 280 --special '<s>' --out %s/a.json %s/c.txt 2>/dev/null && "
                              "./dflash train-tokenizer --vocab-size 280 --special '<s>' --out %s/b.json %s/c.txt 2>/dev/null && "
                              "cmp %s/a.json %s/b.json && grep -c '\"content\": \"<s>\"' %s/a.json", t, t, t, t, t, t, t);
    char *out = tu_sh(cmd, &st);
    assert_int_equal(st, 0);
    assert_string_equal(out, "1\n");
    free(out);
    tu_rmtree(t);
    free(t);
}

/* train-tokenizer in this process on CORPUS; the tokenizer.json's text (malloc'd) */
static char *train_here(const char *dir, const char *corpus, const char *vocab) {
    char cpath[700], opath[700];
    snprintf(cpath, sizeof cpath, "%s/c.txt", dir);
    snprintf(opath, sizeof opath, "%s/t.json", dir);
    tu_write_text(cpath, corpus);
    char *argv[] = {"train-tokenizer", "--vocab-size", (char *)vocab, "--out", opath, cpath, NULL};
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);  /* not its progress lines */
    assert_true(saved >= 0 && null >= 0 && dup2(null, 2) == 2);
    int rc = train_tokenizer_main(6, argv);
    fflush(stderr);
    dup2(saved, 2), close(saved), close(null);
    assert_int_equal(rc, 0);
    char *json;
    size_t n;
    assert_int_equal(file_read_all(opath, &json, &n), 0);
    return json;
}

/* Worked by hand: "aaaaa" is one word. (a, a) x 4 -> [aa, aa, a]; then
 * (aa, aa) and (aa, a) once each, the smaller pair first: (aa = 256, a = 97)
 * -> [aa, aaa]; then (aa, aaa); then no pair is left. */
static void test_train_runs(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    char *json = train_here(t, "aaaaa", "300");
    const char *want = "\"merges\": [\n      [\"a\", \"a\"],\n      [\"aa\", \"a\"],\n      [\"aa\", \"aaa\"]\n    ]";
    if (!strstr(json, want)) fail_msg("want %s in:\n%s", want, strstr(json, "\"merges\"") ? strstr(json, "\"merges\"") : json);
    free(json);
    tu_rmtree(t);
    free(t);
}

/* A corpus without spaces is one word: 20,000 letters of "abcd" at random,
 * 2,742 merges. Each merge visits only the places of its pair and their
 * neighbours, about 9 steps a byte in all (rescanning every pair and the
 * word at each merge: 29 million steps), and the tokenizer it writes gives
 * the corpus back. */
static void test_train_one_long_word(void **state) {
    (void)state;
    enum { N = 20000 };
    char *t = tu_tmpdir(), *corpus = malloc(N + 1);
    assert_true(t && corpus);
    uint64_t r = 99;
    for (int i = 0; i < N; i++) r = r * 6364136223846793005u + 1442695040888963407u, corpus[i] = "abcd"[r >> 62];
    corpus[N] = 0;
    tok_work = 0;
    char *json = train_here(t, corpus, "3000");
    long work = tok_work;
    Tokenizer tk;
    if (tok_parse(&tk, "t.json", json, strlen(json)) != 0) fail_msg("%s", dflash_errmsg);
    assert_int_equal(tk.n_ids, 3000);
    assert_int_equal(tk.n_merges, 3000 - 258);
    IntList ids = {0};
    assert_int_equal(tok_encode(&tk, corpus, N, 0, &ids), 0);
    char *back;
    size_t n;
    assert_int_equal(tok_decode(&tk, ids.v, ids.n, &back, &n), 0);
    assert_true(n == N && memcmp(back, corpus, N) == 0);
    free(back);
    int_list_free(&ids);
    tok_free(&tk);
    free(json);
    free(corpus);
    tu_rmtree(t);
    free(t);
    if (work > 40L * N) fail_msg("%ld steps to train on %d bytes (at most %d expected)", work, N, 40 * N);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_end_to_end),
        cmocka_unit_test(test_train_deterministic),
        cmocka_unit_test(test_train_runs),
        cmocka_unit_test(test_train_one_long_word),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
