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

/* ---- the toy sets' tokenizer.json (toy_weights/gen.c) encode their words */

/* model.vocab's byte-level string -> its bytes (GPT-2's table, from
 * tok_byte_char); -1 when a character is not in it */
static int unbyte(const char *s, char *out) {
    int n = 0;
    while (*s) {
        int b = 0;
        for (; b < 256; b++) {
            char ch[3];
            tok_byte_char((unsigned char)b, ch);
            if (strncmp(s, ch, strlen(ch)) == 0) { s += strlen(ch); break; }
        }
        if (b == 256) return -1;
        out[n++] = (char)b;
    }
    out[n] = 0;
    return n;
}

/* the id model.vocab gives the byte-level string w (-1 none) */
static int vocab_id(const Json *vocab, const char *w) {
    const Json *v = json_get(vocab, w);
    return v && v->is_integer ? (int)v->integer : -1;
}

/* every token of a toy set's vocabulary whose bytes are UTF-8, as a text,
 * encodes to its own id; sentences of them to the ids model.vocab lists;
 * `dflash tokenize` and `--prompt` give those ids; a text with a byte the
 * vocabulary lacks is refused naming it. The ids come from the file's
 * model.vocab, read here as JSON, not from the encoder. */
static void toy_set_encodes(const char *set) {
    char path[600], cmd[2000], bytes[256];
    snprintf(path, sizeof path, "toy_weights/%s/target/tokenizer.json", set);
    if (!tu_exists(path)) tu_skip("no %s (make weights)", path);
    size_t len = 0;
    char *text = tu_read(path, &len);
    assert_non_null(text);
    Json root;
    assert_int_equal(json_parse(text, len, path, &root), 0);
    const Json *model = json_get(&root, "model"), *vocab = json_get(model, "vocab");
    assert_non_null(vocab);
    assert_int_equal(vocab->type, JSON_OBJECT);
    Tokenizer t;
    if (tok_load(&t, path) != 0) fail_msg("%s", dflash_errmsg);
    int tried = 0;
    for (int i = 0; i < vocab->n; i++) {
        int n = unbyte(vocab->keys[i], bytes);
        assert_true(n > 0);
        if (tok_utf8_check(bytes, (size_t)n) != (size_t)n) continue;  /* half of "é" */
        IntList ids = {0};
        if (tok_encode(&t, bytes, (size_t)n, 1, &ids) != 0) fail_msg("%s: \"%s\": %s", set, bytes, dflash_errmsg);
        if (ids.n != 1 || ids.v[0] != (int)vocab->items[i].integer)
            fail_msg("%s: \"%s\" (%s) gave %zu ids, the first %d; model.vocab says %d", set, bytes, vocab->keys[i], ids.n,
                     ids.n ? ids.v[0] : -1, (int)vocab->items[i].integer);
        int_list_free(&ids);
        tried++;
    }
    assert_true(tried >= 58);
    /* sentences: each word's id from model.vocab */
    static const char *const SENT[][12] = {
        {"The", "\xc4\xa0" "cat", "\xc4\xa0" "sat", "\xc4\xa0" "on", "\xc4\xa0" "the", "\xc4\xa0" "mat", ".", NULL},
        {"The", "\xc4\xa0" "dog", "\xc4\xa0" "saw", "\xc4\xa0" "a", "\xc4\xa0" "red", "\xc4\xa0" "bird", "!", "\xc4\x8a", NULL},
        {"The", "\xc4\xa0" "caf\xc3\x83\xc2\xa9", "\xc4\xa0\xc3\xa2\xc4\xa2\xc4\xb6", "\xc4\xa0" "yes", "?", "\xc4\xa0", "\xc4\xa0" "no", NULL},
    };
    for (size_t k = 0; k < sizeof SENT / sizeof SENT[0]; k++) {
        char sentence[256] = "", want[256] = "", got[256] = "";
        for (int j = 0; SENT[k][j]; j++) {
            int id = vocab_id(vocab, SENT[k][j]);
            assert_true(id >= 0);
            assert_true(unbyte(SENT[k][j], bytes) > 0);
            strcat(sentence, bytes);
            snprintf(want + strlen(want), sizeof want - strlen(want), j ? ",%d" : "%d", id);
        }
        IntList ids = {0};
        if (tok_encode(&t, sentence, strlen(sentence), 1, &ids) != 0) fail_msg("%s: \"%s\": %s", set, sentence, dflash_errmsg);
        for (size_t j = 0; j < ids.n; j++) snprintf(got + strlen(got), sizeof got - strlen(got), j ? ",%d" : "%d", ids.v[j]);
        if (strcmp(got, want)) fail_msg("%s: \"%s\": got %s, model.vocab says %s", set, sentence, got, want);
        int_list_free(&ids);
        if (k == 0) {  /* the same through the command line: dflash tokenize, --prompt */
            int st;
            snprintf(cmd, sizeof cmd, "./dflash tokenize --weights toy_weights/%s '%s' 2>&1", set, sentence);
            char *out = tu_sh(cmd, &st);
            if (st != 0 || strncmp(out, want, strlen(want)) || strcmp(out + strlen(want), "\n"))
                fail_msg("dflash tokenize --weights toy_weights/%s: exit %d: %s (want %s)", set, st, out, want);
            free(out);
            snprintf(cmd, sizeof cmd, "./dflash --weights toy_weights/%s --prompt 'The cat sat' --max-new-tokens 2 "
                                      "--print-ids 2>&1", set);
            out = tu_sh(cmd, &st);
            char *line2 = strchr(out, '\n');
            if (st != 0 || !line2 || strncmp(line2 + 1, "0 1 2 ", 6))
                fail_msg("--prompt 'The cat sat' on %s: exit %d: %s (want the ids 0 1 2 first)", set, st, out);
            free(out);
        }
    }
    /* a byte the vocabulary has no token for, in a piece that is none: refused */
    IntList ids = {0};
    assert_int_equal(tok_encode(&t, "The cow", 7, 1, &ids), -1);
    assert_non_null(strstr(dflash_errmsg, "the byte 0x63 (\"c\") of the piece \" cow\" has no token"));
    int_list_free(&ids);
    tok_free(&t);
    json_free(&root);
    free(text);
}
static void test_toy_qwen3_layout_encodes(void **state) { (void)state; toy_set_encodes("qwen3-layout"); }
static void test_toy_sliding_encodes(void **state) { (void)state; toy_set_encodes("sliding"); }

/* `dflash tokenize --decode` takes the ids as ./dflash prints them
 * (--print-ids: space-separated; the --rounds log: [I J ...]) and decodes a
 * file as ./dflash reads it for output (one that cannot encode included) */
static void test_decode_what_dflash_prints(void **state) {
    (void)state;
    if (!tu_exists("toy_weights/qwen3-layout/target/tokenizer.json")) tu_skip("no toy_weights/qwen3-layout (make weights)");
    int st;
    char *run = tu_sh("./dflash --weights toy_weights/qwen3-layout --ids 5,6,7 --max-new-tokens 3 --print-ids 2>&1", &st);
    assert_int_equal(st, 0);
    char *nl = strchr(run, '\n');
    assert_non_null(nl);
    *nl = 0;   /* run: the text; nl + 1: the ids, space-separated */
    char *ids = nl + 1;
    ids[strcspn(ids, "\n")] = 0;
    assert_non_null(strchr(ids, ' '));
    assert_null(strchr(run, '\\'));   /* nothing escaped in this text */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "./dflash tokenize --weights toy_weights/qwen3-layout --decode '%s' 2>&1", ids);
    char *out = tu_sh(cmd, &st);
    if (st != 0 || strcmp(out, run)) fail_msg("--decode '%s': exit %d: \"%s\", dflash printed \"%s\"", ids, st, out, run);
    free(out);
    snprintf(cmd, sizeof cmd, "./dflash tokenize --weights toy_weights/qwen3-layout --decode '[%s]' 2>&1", ids);
    out = tu_sh(cmd, &st);
    if (st != 0 || strcmp(out, run)) fail_msg("--decode '[%s]': exit %d: \"%s\"", ids, st, out);
    free(out);
    free(run);
    /* a tokenizer.json ./dflash decodes output with but cannot encode with */
    char *t = tu_tmpdir();
    tu_write_text(tu_path(t, "tok.json"), "{\"added_tokens\":[{\"id\":2,\"content\":\"<|end|>\"}],\"decoder\":{\"type\":"
                                          "\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"\\u0120b\":1}}}");
    snprintf(cmd, sizeof cmd, "./dflash tokenize --tokenizer %s/tok.json --decode 0,1,2 2>&1", t);
    out = tu_sh(cmd, &st);
    if (st != 0 || strcmp(out, "a b<|end|>")) fail_msg("--decode of a decode-only file: exit %d: %s", st, out);
    free(out);
    snprintf(cmd, sizeof cmd, "./dflash tokenize --tokenizer %s/tok.json ab 2>&1", t);  /* encoding it: refused */
    out = tu_sh(cmd, &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "pre_tokenizer"));
    free(out);
    /* malformed lists: one line, exit 2 */
    static const char *const BAD[] = {"5,,6", "5,", "[]", "[5 6", "5 x", "5]"};
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
        snprintf(cmd, sizeof cmd, "./dflash tokenize --tokenizer %s/tok.json --decode '%s' 2>&1", t, BAD[k]);
        out = tu_sh(cmd, &st);
        if (st != 2 || !strstr(out, "--decode: expected ids") || strchr(out, '\n') != out + strlen(out) - 1)
            fail_msg("--decode '%s': exit %d: %s", BAD[k], st, out);
        free(out);
    }
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
        cmocka_unit_test(test_toy_qwen3_layout_encodes),
        cmocka_unit_test(test_toy_sliding_encodes),
        cmocka_unit_test(test_decode_what_dflash_prints),
        cmocka_unit_test(test_train_deterministic),
        cmocka_unit_test(test_train_runs),
        cmocka_unit_test(test_train_one_long_word),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
