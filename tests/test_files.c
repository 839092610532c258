/* tests/test_files.c - nothing the user owns is lost, and no run lies
 * (issue 21): each failure an attacker found, reproduced as a run of
 * ./dflash (fork/exec, tests/runutil.h), then checked byte for byte.
 *
 *   1. an output that is already open as stdout/stderr (>> log, > log,
 *      /dev/stdout, /dev/fd/N): written through that descriptor, appending
 *      when it appends; nothing the shell wrote is overwritten
 *   5. a norm's sum of squares or a softmax's sum that is not finite stops
 *      the run with one line naming the tensor, phase, round and layer
 *   4. an output named like the program's own lock, temp or partial files
 *      is refused
 *   7. a weight file truncated under a running program: SIGBUS is handled
 *      like the other signals, with one line naming the file
 *   8. control characters in decoded text (tokenizer.json tokens, words)
 *      are printed escaped (\x1b), unless --raw-bytes asks for the bytes
 *   9. a --trace-filter that matches no name the run can emit is refused
 *      before anything is replaced, naming the closest names
 *  10. a run that takes a trace directory's lock removes the partial
 *      outputs a SIGKILLed run left (and says so); a live writer's stay
 *
 * `make sanitize` runs this file from build/san/ (./dflash is the ASan+UBSan
 * build there). */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

#include "tests/runutil.h"

/* the first entry of t named "<base>.partial.*" (malloc'd), or NULL */
static char *find_partial(const char *t, const char *base) {
    DIR *d = opendir(t);
    assert_non_null(d);
    struct dirent *e;
    char *found = NULL;
    size_t lb = strlen(base);
    while (!found && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, base, lb) == 0 && strncmp(e->d_name + lb, ".partial.", 9) == 0)
            found = strdup(tu_path(t, e->d_name));
    closedir(d);
    return found;
}

static off_t size_of(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0) return -1;
    return S_ISDIR(st.st_mode) ? tu_count_entries(path) : st.st_size;
}

/* ===========================================================================
 * 1. Outputs already open as stdout or stderr.
 * ======================================================================== */

static int open_append(const char *path) {
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd > 2);
    return fd;
}

/* count of needle in hay */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

static void test_output_open_as_stdout(void **state) {
    (void)state;
    static const char *const APPEND_STDOUT[] = {"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "$T/log.txt"};
    char *t = scratch_with_set();
    const char *log = tu_path(t, "log.txt");
    for (size_t i = 0; i < sizeof APPEND_STDOUT / sizeof APPEND_STDOUT[0]; i++) {
        /* printf 'PRECIOUS\n' > log.txt; ./dflash ... --trace-text X >> log.txt */
        tu_write_text(log, "PRECIOUS\n");
        char spec[400], *err;
        snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace-text|%s", APPEND_STDOUT[i]);
        Spawn o = {0};
        o.stdout_fd = open_append(log);
        int st = run_in(t, spec, o, NULL, &err);
        close(o.stdout_fd);
        if (st != 0) fail_msg("%s >> log: exit %d: %s", APPEND_STDOUT[i], st, err);
        free(err);
        char *now = tu_read(log, NULL);
        print_message("     --trace-text %s >> log.txt: %zu bytes, starts \"%.9s\"\n", APPEND_STDOUT[i], strlen(now), now);
        if (strncmp(now, "PRECIOUS\n", 9) != 0) fail_msg("%s: what the shell wrote is gone: \"%.60s\"", APPEND_STDOUT[i], now);
        assert_int_equal(count_of(now, "DFlash trace (real"), 1);
        assert_int_equal(count_of(now, "new tokens: "), 1);
        free(now);
        static const char *const ONLY[] = {"w", "log.txt", NULL};
        assert_only(t, ONLY);
    }
    /* ./dflash ... --trace-text run.log > run.log: stdout's lines may not
     * overwrite the trace's header (one file, one descriptor, in order) */
    Spawn o = {0};
    o.out = log;
    char *err;
    int st = run_in(t, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace-text|$T/log.txt", o, NULL, &err);
    if (st != 0) fail_msg("> log: exit %d: %s", st, err);
    free(err);
    char *now = tu_read(log, NULL);
    assert_int_equal(strncmp(now, "DFlash trace (real", 18), 0);
    assert_int_equal(count_of(now, "new tokens: "), 1);
    assert_non_null(strstr(now, "output_ids"));
    free(now);
    /* 2>> err.log with /dev/stderr, /dev/fd/2 */
    static const char *const APPEND_STDERR[] = {"/dev/stderr", "/dev/fd/2"};
    for (size_t i = 0; i < 2; i++) {
        tu_write_text(log, "PRECIOUS\n");
        char spec[400];
        snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace-text|%s", APPEND_STDERR[i]);
        Spawn e = {0};
        e.stderr_fd = open_append(log);
        st = run_in(t, spec, e, NULL, NULL);
        close(e.stderr_fd);
        assert_int_equal(st, 0);
        now = tu_read(log, NULL);
        if (strncmp(now, "PRECIOUS\n", 9) != 0) fail_msg("%s: what the shell wrote is gone: \"%.60s\"", APPEND_STDERR[i], now);
        assert_int_equal(count_of(now, "DFlash trace (real"), 1);
        assert_non_null(strstr(now, "output_ids"));
        free(now);
    }
    done_scratch(t);
}

/* ===========================================================================
 * 4. No output may have the name of the program's own lock, temp, partial.
 * ======================================================================== */

static void test_own_names_refused(void **state) {
    (void)state;
    static const struct {
        const char *args, *want;
    } CASES[] = {
        {"--trace|$T/o1|--trace-text|$T/o1.lock", "lock"},   /* was: exit 0, then o1.lock deleted */
        {"--trace-text|$T/o1.lock", "lock"},
        {"--trace-text|$T/alias", "lock"},                    /* a symbolic link to o1.lock */
        {"--trace-text|$T/tt.txt.partial.Ab12Cd", "partial"},
        {"--trace|$T/o1.partial.x0X1y2", "partial"},
        {"--trace|$T/o1.old.x0X1y2", "earlier trace"},
        {"--trace|$T/o1.lock", "lock"},
    };
    char *t = scratch_with_set();
    assert_int_equal(symlink("o1.lock", tu_path(t, "alias")), 0);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char spec[600];
        snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|%s", CASES[i].args);
        assert_run_refused(t, spec, (Spawn){0}, CASES[i].args, CASES[i].want, NULL);
        static const char *const ONLY[] = {"w", "alias", NULL};
        assert_only(t, ONLY);
    }
    done_scratch(t);
}

/* ===========================================================================
 * 5. A non-finite or overflowing intermediate stops the run, named.
 * ======================================================================== */

static void test_check_sums_names_the_tensor(void **state) {
    (void)state;
    SumFault f = {NULL, -1};
    assert_int_equal(check_sums(&f, "verify", 3), 0);
    sum_fault(&f, "layers.%d.self_attn.attn_weights", 2);
    sum_fault(&f, "layers.%d.input_layernorm", 3);  /* the first one stays */
    assert_int_equal(check_sums(&f, "verify", 3), -1);
    assert_contains(dflash_errmsg, "verify3.layers.2.self_attn.attn_weights (phase verify, round 3, layer 2)");
    assert_contains(dflash_errmsg, "softmax");
    /* the kernels say when their sum is not finite */
    real x[4] = {1e30f, 1, 2, 3}, w[4] = {1, 1, 1, 1}, o[4];
    if (sizeof(real) == 4) assert_int_equal(rmsnorm(o, x, w, 4, (real)1e-6), -1);  /* (1e30)^2 > FLT_MAX */
    x[0] = 1;
    assert_int_equal(rmsnorm(o, x, w, 4, (real)1e-6), 0);
    real sc[3] = {1, (real)NAN, 2};
    assert_int_equal(softmax(sc, 3), -1);
    real sc2[3] = {1, (real)INFINITY, 2};
    assert_int_equal(softmax(sc2, 3), -1);
    real sc3[3] = {1, 5, 2};
    assert_int_equal(softmax(sc3, 3), 0);
}

/* Runs of the small set (4-layer target, 1-layer draft) with one tensor
 * scaled until an intermediate overflows float: each stops with exit 2 and
 * one line naming where, and prints no token (it printed "2 3 0" before:
 * all-zero logits from a norm whose sum of squares was +Inf). */
static void test_overflow_stops_the_run(void **state) {
    (void)state;
    if (sizeof(real) != 4) tu_skip("float build only: a double holds these values");
    static const struct {
        const char *tensor;
        float scale;
        const char *want;
    } CASES[] = {
        {"model.embed_tokens.weight", 1e21f, "prefill.layers.0.input_layernorm (phase prefill, round 0, layer 0)"},
        {"model.layers.1.input_layernorm.weight", 1e30f, "prefill.layers.1.self_attn.q (phase prefill, round 0, layer 1)"},
        {"model.layers.2.self_attn.[qk]_norm.weight", 1e20f,
         "prefill.layers.2.self_attn.attn_weights (phase prefill, round 0, layer 2)"},
        {"model.layers.3.mlp.up_proj.weight", 1e25f, "prefill.hidden_states.4 (phase prefill, round 0, not in a layer)"},
        {"model.layers.1.mlp.up_proj.weight", 1e25f, "prefill.layers.2.input_layernorm (phase prefill, round 0, layer 2)"},
        {"fc.weight", 1e30f, "draft1.hidden_norm (phase draft, round 1, not in a layer)"},
    };
    char *t = tu_tmpdir();
    assert_non_null(t);
    assert_int_equal(mkdir(tu_path(t, "w"), 0755), 0);
    /* unscaled, the set runs */
    tu_write_small_set(tu_path(t, "w"), NULL, 1);
    char *out, *err;
    int st = run_in(t, "--weights|$W|--prompt|w2 w3|--max-new-tokens|6", (Spawn){0}, &out, &err);
    if (st != 0) fail_msg("the small set: exit %d: %s", st, err);
    free(out);
    free(err);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        tu_write_small_set(tu_path(t, "w"), CASES[i].tensor, CASES[i].scale);
        for (int mode = 0; mode < 2; mode++) {
            if (mode == 1 && strncmp(CASES[i].tensor, "model.", 6) != 0) continue;  /* ar has no draft */
            st = run_in(t, mode ? "--weights|$W|--prompt|w2 w3|--max-new-tokens|6|--mode|ar"
                                : "--weights|$W|--prompt|w2 w3|--max-new-tokens|6|--trace|$T/tr",
                        (Spawn){0}, &out, &err);
            print_message("     %s x %g: %s", CASES[i].tensor, (double)CASES[i].scale, err);
            assert_refused(st, err, "non-finite intermediate: ");
            assert_contains(err, CASES[i].want);
            assert_string_equal(out, "");
            free(out);
            free(err);
            static const char *const ONLY[] = {"w", NULL};
            assert_only(t, ONLY);
        }
    }
    done_scratch(t);
}

/* ===========================================================================
 * 7. A weight file that shrinks under a running program.
 * ======================================================================== */

/* The small set's target truncated to 0 bytes while a long traced run uses
 * it (as a re-download does): SIGBUS, one line naming the file, the
 * partial outputs removed, the earlier trace as it was. */
static void test_weights_shrink_during_run(void **state) {
    (void)state;
    if (sizeof(real) != 4) tu_skip("float build only: the double build widens the weights on load, none is used from the mapping");
    char *t = tu_tmpdir();
    assert_non_null(t);
    assert_int_equal(mkdir(tu_path(t, "w"), 0755), 0);
    tu_write_small_set(tu_path(t, "w"), NULL, 1);
    char *out, *err;
    int st = run_in(t, "--weights|$W|--prompt|w2 w3|--max-new-tokens|3|--trace|$T/tr", (Spawn){0}, &out, &err);
    if (st != 0) fail_msg("the earlier run: %d: %s", st, err);
    free(out);
    free(err);
    Buf tr = snap(tu_path(t, "tr"));
    Argv a;
    Spawn o = {0};
    char ep[1100];
    snprintf(ep, sizeof ep, "%s/err", t);
    o.err = ep;
    pid_t pid = spawn(make_argv(&a, t, "--weights|$W|--prompt|w2 w3|--max-new-tokens|3000|--ignore-eos|--trace|$T/tr"),
                      &o);
    for (int waited = 0;; waited++) {
        char *pd = find_partial(t, "tr");
        int ready = size_of(pd) >= 200;
        free(pd);
        if (ready) break;
        if (waitpid(pid, &st, WNOHANG) == pid) fail_msg("the run ended (status %d) before its partial output", st);
        if (waited > 150000) {
            kill(pid, SIGKILL);
            wait_raw(pid);
            fail_msg("no partial output after 300 s");
        }
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    assert_int_equal(truncate(tu_path(t, "w/target/model.safetensors"), 0), 0);
    st = wait_raw(pid);
    err = tu_read(ep, NULL);
    unlink(ep);
    print_message("     %s", err);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGBUS) fail_msg("expected death by SIGBUS, got status 0x%x: %s", st, err);
    assert_contains(err, "w/target/model.safetensors shrank while this run read it");
    assert_int_equal(count_of(err, "\n"), 1);
    free(err);
    assert_same_snap(&tr, tu_path(t, "tr"));
    static const char *const ONLY[] = {"w", "tr", NULL};
    assert_only(t, ONLY);
    free(tr.b);
    done_scratch(t);
}

/* ===========================================================================
 * 8. Control characters in decoded text are printed escaped.
 * ======================================================================== */

static void test_decoded_text_escaped(void **state) {
    (void)state;
    char *t = scratch_with_set();
    assert_int_equal(unlink(tu_path(t, "w/vocab.txt")), 0);
    /* every token hostile: a title change and colours, a forged summary
     * line, a C1 CSI (U+009B), a backslash, DEL */
    tu_write_text(tu_path(t, "w/tokenizer.json"),
                  "{\"added_tokens\":[{\"id\":0,\"content\":\"\\u001b]0;pwned-title\\u0007\\u001b[31m\"},"
                  "{\"id\":1,\"content\":\"\\r\\nFAKE: new tokens: 999\\n\"},{\"id\":2,\"content\":\"\\u009b2J\"},"
                  "{\"id\":3,\"content\":\"a\\\\x1b\"},{\"id\":4,\"content\":\"\\u007f\"}],"
                  "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"ok\":5},\"merges\":[]}}");
    char *out, *err;
    int st = run_in(t, "--weights|$W|--ids|0,1,2,3,4,5|--max-new-tokens|3", (Spawn){0}, &out, &err);
    if (st != 0) fail_msg("exit %d: %s", st, err);
    print_message("     stdout: %s", out);
    for (const unsigned char *c = (const unsigned char *)out; *c; c++) {
        if ((*c < 0x20 && *c != '\n') || *c == 0x7f) fail_msg("a control character 0x%02x reached stdout", *c);
        if (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f) fail_msg("a C1 control reached stdout");
    }
    assert_contains(out, "\\x1b]0;pwned-title\\x07\\x1b[31m\\x0d\\x0aFAKE: new tokens: 999\\x0a\\xc2\\x9b2Ja\\x5cx1b\\x7fok");
    assert_int_equal(count_of(out, "\nnew tokens: "), 1);  /* the one real summary line */
    free(out);
    free(err);
    /* --raw-bytes: the bytes as they are */
    st = run_in(t, "--weights|$W|--ids|0,1,2,3,4,5|--max-new-tokens|3|--raw-bytes", (Spawn){0}, &out, &err);
    assert_int_equal(st, 0);
    assert_contains(out, "\x1b]0;pwned-title\x07\x1b[31m\r\nFAKE: new tokens: 999\n\xc2\x9b" "2Ja\\x1b\x7fok");
    free(out);
    free(err);
    done_scratch(t);
}

/* ===========================================================================
 * 9. A --trace-filter that matches no name the run can emit is an error
 *    before anything is replaced.
 * ======================================================================== */

static void test_filter_matching_nothing(void **state) {
    (void)state;
    static const struct {
        const char *args, *want;
    } CASES[] = {
        {"--trace-filter|prefil.*", "closest: prefill."},        /* was: exit 0, an empty trace */
        {"--trace-filter|*sampled|--trace-filter|verify4.*", "\"verify4.*\""},  /* 3 tokens: 3 rounds at most */
        {"--block-size|1|--trace-filter|draft*", "\"draft*\""},  /* no draft at block size 1 */
        {"--trace-filter|prefill.layers.1.*", "closest: prefill.layers.0."},  /* one layer */
    };
    char *t = scratch_with_set();
    make_earlier_outputs(t);
    Buf tr = snap(tu_path(t, "tr")), tt = snap(tu_path(t, "tt.txt"));
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char spec[600];
        snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/tr|--trace-text|$T/tt.txt|%s",
                 CASES[i].args);
        assert_run_refused(t, spec, (Spawn){0}, CASES[i].args, "matches no name this run can emit", CASES[i].want);
        assert_same_snap(&tr, tu_path(t, "tr"));
        assert_same_snap(&tt, tu_path(t, "tt.txt"));
        static const char *const ONLY[] = {"w", "tr", "tt.txt", NULL};
        assert_only(t, ONLY);
    }
    /* dflash diff --only: each glob must match a name of A, before anything
     * is compared (one matching glob used to hide a mistyped other) */
    {
        char *out, *err;
        int st = run_in(t, "diff|$T/tr|$T/tr|--only|*sampled|--only|prefil.*", (Spawn){0}, &out, &err);
        print_message("     diff --only prefil.* -> %s", err);
        assert_refused(st, err, "--only: \"prefil.*\" matches no name in");
        assert_contains(err, "closest: prefill.");
        assert_string_equal(out, "");
        free(out);
        free(err);
    }
    /* names that exist are accepted: the last round, layer 0, the post-norm state */
    static const char *const FINE[] = {"verify3.*", "prefill.layers.0.mlp.act", "*.hidden_states.1", "output_ids"};
    for (size_t i = 0; i < 4; i++) {
        char spec[600], *err;
        snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|--ignore-eos|--trace|$T/t2|"
                 "--trace-filter|%s", FINE[i]);
        int st = run_in(t, spec, (Spawn){0}, NULL, &err);
        if (st != 0) fail_msg("%s: exit %d: %s", FINE[i], st, err);
        free(err);
    }
    free(tr.b);
    free(tt.b);
    done_scratch(t);
}

/* ===========================================================================
 * 10. After SIGKILL: the next run on the same outputs removes the leftovers.
 * ======================================================================== */

/* A long run (400 new tokens on the random set) writing spec's outputs;
 * returns once its partial text trace (and trace directory, when dir)
 * hold data. */
static pid_t start_long_run(const char *t, const char *outputs, int dir) {
    char spec[600];
    snprintf(spec, sizeof spec, "--weights|$R|--prompt|A dog saw|--max-new-tokens|400|--ignore-eos|%s|"
             "--trace-filter|*sampled", outputs);
    Argv a;
    Spawn o = {0};
    pid_t pid = spawn(make_argv(&a, t, spec), &o);
    for (int waited = 0;; waited++) {
        char *pt = find_partial(t, "tt.txt"), *pd = dir ? find_partial(t, "tr") : NULL;
        int ready = size_of(pt) > 300 && (!dir || size_of(pd) >= 4);
        free(pt);
        free(pd);
        if (ready) return pid;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) fail_msg("the run ended (status %d) before its partial output", st);
        if (waited > 150000) {
            kill(pid, SIGKILL);
            wait_raw(pid);
            fail_msg("no partial output after 300 s");
        }
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
}

static void test_sigkill_leftovers_removed(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_earlier_outputs(t);
    pid_t pid = start_long_run(t, "--trace|$T/tr|--trace-text|$T/tt.txt", 1);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st = wait_raw(pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* what SIGKILL leaves: the partial directory, the partial text, the lock */
    char *pd = find_partial(t, "tr"), *pt = find_partial(t, "tt.txt");
    assert_non_null(pd);
    assert_non_null(pt);
    assert_true(tu_exists(tu_path(t, "tr.lock")));
    print_message("     after SIGKILL: %s (%ld entries), %s (%ld bytes), tr.lock\n", strrchr(pd, '/') + 1,
                  (long)size_of(pd), strrchr(pt, '/') + 1, (long)size_of(pt));
    /* the next run on the same outputs removes them and says so */
    char *out, *err;
    st = run_in(t, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/tr|--trace-text|$T/tt.txt", (Spawn){0},
                &out, &err);
    print_message("     the next run said:\n%s", err);
    if (st != 0) fail_msg("the next run: exit %d: %s", st, err);
    assert_int_equal(count_of(err, "dflash: removed "), 2);
    assert_contains(err, strrchr(pd, '/') + 1);
    assert_contains(err, strrchr(pt, '/') + 1);
    static const char *const ONLY[] = {"w", "tr", "tt.txt", NULL};
    assert_only(t, ONLY);
    free(out);
    free(err);
    free(pd);
    free(pt);

    /* a live writer's partial text trace stays: run A is still writing
     * tt.txt when run B replaces it; then A is stopped (SIGTERM cleans) */
    pid = start_long_run(t, "--trace-text|$T/tt.txt", 0);
    pt = find_partial(t, "tt.txt");
    st = run_in(t, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace-text|$T/tt.txt", (Spawn){0}, &out, &err);
    if (st != 0) fail_msg("run B: exit %d: %s", st, err);
    assert_null(strstr(err, "removed"));
    assert_true(tu_exists(pt));
    assert_int_equal(kill(pid, SIGTERM), 0);
    wait_raw(pid);
    assert_false(tu_exists(pt));
    assert_only(t, ONLY);
    free(out);
    free(err);
    free(pt);
    done_scratch(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_open_as_stdout),
        cmocka_unit_test(test_own_names_refused),
        cmocka_unit_test(test_check_sums_names_the_tensor),
        cmocka_unit_test(test_overflow_stops_the_run),
        cmocka_unit_test(test_weights_shrink_during_run),
        cmocka_unit_test(test_decoded_text_escaped),
        cmocka_unit_test(test_filter_matching_nothing),
        cmocka_unit_test(test_sigkill_leftovers_removed),
    };
    return cmocka_run_group_tests_name("files: issue 21 (nothing the user owns is lost, no run lies)", tests, NULL,
                                       NULL);
}
