/* tests/test_safety.c - the user's files are safe whatever a run meets
 * (issue 14): its own inputs named as outputs, a failure after the outputs
 * were opened, SIGINT / SIGTERM / SIGHUP while it writes, a closed pipe, a
 * full stdout, closed descriptors 0-2, twin runs on one trace directory, and
 * numbers that overflow.
 *
 * Each program case runs ./dflash with fork/exec (`make sanitize` runs this
 * file from build/san/, where ./dflash is the ASan+UBSan build) and checks
 * the exit status (2, or death by the signal sent), one line on stderr, the
 * earlier files byte for byte (weight set, earlier trace directory, earlier
 * text trace), and that nothing else is left in the scratch directory (no
 * .partial, .old, .lock, no parent directory the run created). */
#include "dflash.c"
#include "formats/load.c"
#include "trace.h"
#include "tests/testutil.h"

#include "tests/runutil.h"

/* ===========================================================================
 * Outputs that are inputs: refused before anything is opened.
 * ======================================================================== */

static void test_outputs_that_are_inputs(void **state) {
    (void)state;
    static const struct {
        const char *args, *want;
    } CASES[] = {
        {"--trace-text|$W/target/model.safetensors", "is the input"},
        {"--trace-text|$W/vocab.txt", "is the input"},
        {"--trace-text|$W/draft/config.json", "is the input"},
        {"--trace-text|$W/./target/../vocab.txt", "is the input"},
        {"--trace-text|$T/alias", "is the input"},       /* a symbolic link to vocab.txt */
        {"--trace-text|$T/hard", "is the input"},        /* a hard link to model.safetensors */
        {"--trace|$W/target/model.safetensors", "is the input"},
        {"--trace|$W/target", "holds the input"},
        {"--trace|$W/target/sub", "is the input directory"},  /* inside an input folder (issue 34, 7) */
        {"--trace|$W", "holds the input"},
        {"--trace|$T/alias_dir", "holds the input"},     /* a symbolic link to w/draft */
        {"--trace|$T/tr|--trace-text|$T/tr", "may not be the trace directory"},
        {"--trace|$T/tr|--trace-text|$T/tr/t.txt", "may not be the trace directory"},
        {"--trace|$T/tr/sub|--trace-text|$T/tr", "may not be the trace directory"},
        {"--trace|$T/tr|--trace-text|$T/x/../tr/t.txt", "may not be the trace directory"},
    };
    char *t = scratch_with_set();
    assert_int_equal(symlink(tu_path(t, "w/vocab.txt"), tu_path(t, "alias")), 0);
    assert_int_equal(symlink(tu_path(t, "w/draft"), tu_path(t, "alias_dir")), 0);
    assert_int_equal(link(tu_path(t, "w/target/model.safetensors"), tu_path(t, "hard")), 0);
    mkdir(tu_path(t, "x"), 0755);
    Buf set = snap(tu_path(t, "w")), hard = snap(tu_path(t, "hard"));
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char spec[600];
        snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|%s", CASES[i].args);
        assert_run_refused(t, spec, (Spawn){0}, CASES[i].args, CASES[i].want, NULL);
        /* the weight set is byte-for-byte as it was, and nothing was made */
        assert_same_snap(&set, tu_path(t, "w"));
        assert_same_snap(&hard, tu_path(t, "hard"));
        static const char *const ONLY[] = {"w", "alias", "alias_dir", "hard", "x", NULL};
        assert_only(t, ONLY);
    }
    free(set.b);
    free(hard.b);
    done_scratch(t);
}

/* ===========================================================================
 * A run that fails after its outputs were opened leaves the earlier ones.
 * ======================================================================== */

/* A file-size limit (RLIMIT_FSIZE, as `ulimit -f`): the text trace cannot
 * grow past 4 KiB, the write fails with EFBIG in the middle of the run. */
static void test_failed_run_keeps_earlier_outputs(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_earlier_outputs(t);
    Buf tr = snap(tu_path(t, "tr")), tt = snap(tu_path(t, "tt.txt"));
    char *out, *err;
    Spawn o = {0};
    o.fsize_limit = 4096;
    int st = run_in(t, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/tr|--trace-text|$T/tt.txt", o, &out,
                    &err);
    print_message("     %s", err);
    assert_refused(st, err, strerror(EFBIG));
    assert_contains(err, "tt.txt");
    assert_same_snap(&tr, tu_path(t, "tr"));
    assert_same_snap(&tt, tu_path(t, "tt.txt"));
    static const char *const ONLY[] = {"w", "tr", "tt.txt", NULL};
    assert_only(t, ONLY);
    free(out);
    free(err);

    /* the parents a failed run created go too */
    st = run_in(t, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/new/deep/tr|--trace-text|$T/tt.txt", o,
                &out, &err);
    assert_refused(st, err, strerror(EFBIG));
    assert_false(tu_exists(tu_path(t, "new")));
    assert_same_snap(&tt, tu_path(t, "tt.txt"));
    assert_only(t, ONLY);
    free(out);
    free(err);
    free(tr.b);
    free(tt.b);
    done_scratch(t);
}

/* ===========================================================================
 * Signals: the run is interrupted while its outputs are partly written.
 * ======================================================================== */

/* the size of the first "<base>.partial.*" entry in t (a directory: its
 * number of entries); -1 when there is none */
static long partial_size(const char *t, const char *base) {
    DIR *d = opendir(t);
    assert_non_null(d);
    struct dirent *e;
    long size = -1;
    size_t lb = strlen(base);
    while ((e = readdir(d)) != NULL && size < 0) {
        if (strncmp(e->d_name, base, lb) || strncmp(e->d_name + lb, ".partial.", 9)) continue;
        const char *p = tu_path(t, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0) continue;
        size = S_ISDIR(st.st_mode) ? tu_count_entries(p) : (long)st.st_size;
    }
    closedir(d);
    return size;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A long run (400 new tokens on the random set: tens of seconds) writing a
 * trace into dir (relative to t) and the text trace t/tt.txt; once both
 * partial outputs hold data, it is sent sig. It must die of sig, leaving the
 * earlier outputs as they were and nothing else. */
static void interrupt_run(const char *t, const char *dir, const char *parent, int sig) {
    char spec[600];
    snprintf(spec, sizeof spec, "--weights|$R|--prompt|A dog saw|--max-new-tokens|400|--ignore-eos|"
             "--trace|$T/%s|--trace-text|$T/tt.txt|--trace-filter|*sampled", dir);
    Argv a;
    Spawn o = {0};
    pid_t pid = spawn(make_argv(&a, t, spec), &o);
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    double t0 = now_s();
    for (;;) {
        /* at least 3 tensors in the partial directory, text on its way */
        if (tu_exists(parent) && partial_size(parent, base) >= 4 && partial_size(t, "tt.txt") > 300) break;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) fail_msg("the run ended (status %d) before it could be interrupted", st);
        if (now_s() - t0 > 300) {
            kill(pid, SIGKILL);
            wait_raw(pid);
            fail_msg("no partial output after 300 s");
        }
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    assert_int_equal(kill(pid, sig), 0);
    int st = wait_raw(pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig)
        fail_msg("expected death by signal %d (exit status %d), got status 0x%x", sig, 128 + sig, st);
}

static void test_signals_remove_partial_output(void **state) {
    (void)state;
    const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    char *t = scratch_with_set();
    make_earlier_outputs(t);
    Buf tr = snap(tu_path(t, "tr")), tt = snap(tu_path(t, "tt.txt"));
    static const char *const ONLY[] = {"w", "tr", "tt.txt", NULL};
    for (int k = 0; k < 3; k++) {
        interrupt_run(t, "tr", t, sigs[k]);
        assert_same_snap(&tr, tu_path(t, "tr"));
        assert_same_snap(&tt, tu_path(t, "tt.txt"));
        assert_only(t, ONLY);
        print_message("     signal %d: earlier trace and text trace intact, nothing left\n", sigs[k]);
    }
    /* a trace in parent directories the run created: they go too */
    char parent[1100];
    snprintf(parent, sizeof parent, "%s/new/deep", t);
    interrupt_run(t, "new/deep/tr", parent, SIGTERM);
    assert_false(tu_exists(tu_path(t, "new")));
    assert_same_snap(&tt, tu_path(t, "tt.txt"));
    assert_only(t, ONLY);
    free(tr.b);
    free(tt.b);
    done_scratch(t);
}

/* `--trace-text -` into a pipe nobody reads: the first write raises
 * SIGPIPE; the run dies of it (exit status 141) with nothing left behind.
 * With SIGPIPE ignored, the write fails (EPIPE): exit 2 and one line. */
static void test_closed_pipe(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_earlier_outputs(t);
    Buf tr = snap(tu_path(t, "tr"));
    static const char *const ONLY[] = {"w", "tr", "tt.txt", NULL};
    for (int ignore = 0; ignore < 2; ignore++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        close(p[0]);  /* no reader, ever */
        Spawn o = {0};
        o.stdout_fd = p[1];
        o.ignore_sigpipe = ignore;
        char *err;
        int st = run_in(t, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/tr|--trace-text|-", o, NULL, &err);
        close(p[1]);
        if (!ignore) {
            if (st != -SIGPIPE) fail_msg("expected death by SIGPIPE, got %d; stderr: %s", st, err);
        } else {
            assert_refused(st, err, strerror(EPIPE));
        }
        assert_same_snap(&tr, tu_path(t, "tr"));
        assert_only(t, ONLY);
        free(err);
    }
    free(tr.b);
    done_scratch(t);
}

/* ===========================================================================
 * stdout: write errors are exit 2; closed descriptors get /dev/null.
 * ======================================================================== */

static void test_stdout_write_errors(void **state) {
    (void)state;
    if (!tu_exists("/dev/full")) tu_skip("no /dev/full on this machine (the write-error cases write to it)");
    char *t = scratch_with_set();
    make_earlier_outputs(t);
    Buf tr = snap(tu_path(t, "tr"));
    static const char *const SPECS[] = {
        "--weights|$W|--prompt|a b|--max-new-tokens|3|--print-ids",
        "--weights|$W|--prompt|a b|--max-new-tokens|3|--rounds|--trace|$T/tr",  /* the trace is not installed */
        "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/tr2",          /* nor created */
        "diff|$T/tr|$T/tr",
        "--help",
    };
    for (size_t i = 0; i < sizeof SPECS / sizeof SPECS[0]; i++) {
        Spawn o = {0};
        o.out = "/dev/full";
        char *err;
        int st = run_in(t, SPECS[i], o, NULL, &err);
        assert_refused(st, err, "cannot write to standard output");
        /* short output fails at the last flush, which knows the reason */
        if (i == 0) assert_contains(err, strerror(ENOSPC));
        assert_same_snap(&tr, tu_path(t, "tr"));
        static const char *const ONLY[] = {"w", "tr", "tt.txt", NULL};
        assert_only(t, ONLY);
        free(err);
    }
    free(tr.b);
    done_scratch(t);
}

/* Every line of path starts with prefix (a manifest holds manifest lines). */
static void assert_lines_start(const char *path, const char *prefix) {
    char *m = tu_read(path, NULL);
    assert_non_null(m);
    assert_true(m[0] != '\0');
    for (char *line = m; *line;) {
        if (strncmp(line, prefix, strlen(prefix)) != 0) fail_msg("%s: a line starts \"%.40s\"", path, line);
        char *nl = strchr(line, '\n');
        if (!nl) break;
        line = nl + 1;
    }
    free(m);
}

/* With descriptors 0-2 closed, the first files the run opens would get
 * them: the text trace printed into trace.jsonl. /dev/null goes there. */
static void test_closed_descriptors(void **state) {
    (void)state;
    char *t = scratch_with_set();
    static const struct { int mask; const char *text; } CASES[] = {{2, "-"}, {3, "-"}, {7, "$T/tt.txt"}, {2, "$T/tt.txt"}};
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char spec[300];
        snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/tr|--trace-text|%s",
                 CASES[i].text);
        Spawn o = {0};
        o.close_mask = CASES[i].mask;
        char *err;
        int st = run_in(t, spec, o, NULL, &err);
        if (st != 0) fail_msg("descriptors 0x%x closed: expected exit status 0, got %d: %s", CASES[i].mask, st, err);
        free(err);
        assert_lines_start(tu_path(t, "tr/trace.jsonl"), "{\"name\":");
        if (CASES[i].text[0] != '-') assert_lines_start(tu_path(t, "tt.txt"), "");
        /* the trace is whole: diff of it with itself finds every file */
        st = run_in(t, "diff|$T/tr|$T/tr", (Spawn){0}, NULL, &err);
        if (st != 0) fail_msg("diff of the trace with itself: %d: %s", st, err);
        free(err);
    }
    done_scratch(t);
}

/* ===========================================================================
 * Twin runs on one trace directory: one wins, the others are refused.
 * ======================================================================== */

static void test_concurrent_runs(void **state) {
    (void)state;
    enum { N = 3, ROUNDS = 2 };
    char *t = scratch_with_set();
    for (int round = 0; round < ROUNDS; round++) {
        int bar[2];
        assert_int_equal(pipe(bar), 0);
        pid_t pid[N];
        char errs[N][1100];
        for (int k = 0; k < N; k++) {
            Argv a;
            Spawn o = {0};
            snprintf(errs[k], sizeof errs[k], "%s/err%d", t, k);
            o.err = errs[k];
            o.barrier_fd = bar[0];
            o.barrier_write = bar[1];
            /* a few seconds of work, so the runs overlap */
            pid[k] = spawn(make_argv(&a, t, "--weights|$R|--prompt|A dog saw|--max-new-tokens|60|--ignore-eos|"
                                            "--trace|$T/tr|--trace-filter|*sampled"), &o);
        }
        close(bar[0]);
        close(bar[1]);  /* all start now */
        int won = 0, refused = 0;
        for (int k = 0; k < N; k++) {
            int st = wait_raw(pid[k]);
            char *err = tu_read(errs[k], NULL);
            unlink(errs[k]);
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0) won++;
            else if (WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(err, "another dflash run") &&
                     strstr(err, "tr.lock"))
                refused++;
            else fail_msg("run %d: status 0x%x, stderr: %s", k, st, err);
            free(err);
        }
        print_message("     round %d: %d won, %d refused\n", round + 1, won, refused);
        assert_int_equal(won, 1);
        assert_int_equal(refused, N - 1);
        static const char *const ONLY[] = {"w", "tr", NULL};
        assert_only(t, ONLY);
        assert_lines_start(tu_path(t, "tr/trace.jsonl"), "{\"name\":");
    }
    done_scratch(t);
}

/* In one process the fcntl lock does not exclude: a second tracer on the
 * same directory is refused by the list of held locks. */
static void test_second_tracer_same_process(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    assert_non_null(t);
    const char *dir = tu_path(t, "tr");
    Tracer *a = trace_open(dir, NULL, NULL, 0);
    assert_non_null(a);
    assert_true(tu_exists(tu_path(t, "tr.lock")));
    assert_null(trace_open(dir, NULL, NULL, 0));
    assert_contains(dflash_errmsg, "another dflash run");
    assert_true(tu_exists(tu_path(t, "tr.lock")));  /* still a's */
    int64_t v = 7, shape[1] = {1};
    assert_int_equal(trace_i64(a, (TracePhase){"final", 0}, "output_ids", "", &v, 1, shape), 0);
    assert_int_equal(trace_close(a), 0);
    static const char *const ONLY[] = {"tr", NULL};
    assert_only(t, ONLY);
    Tracer *b = trace_open(dir, NULL, NULL, 0);  /* free again */
    assert_non_null(b);
    trace_discard(b);
    assert_only(t, ONLY);
    assert_true(tu_exists(tu_path(t, "tr/output_ids.npy")));
    /* a file of the user's where the lock goes is neither used nor removed */
    const char *dir2 = tu_path(t, "tr2");
    tu_write_text(tu_path(t, "tr2.lock"), "mine\n");
    assert_null(trace_open(dir2, NULL, NULL, 0));
    assert_contains(dflash_errmsg, "not a dflash lock");
    char *kept = tu_read(tu_path(t, "tr2.lock"), NULL);
    assert_string_equal(kept, "mine\n");
    free(kept);
    static const char *const ONLY2[] = {"tr", "tr2.lock", NULL};
    assert_only(t, ONLY2);
    done_scratch(t);
}

/* ===========================================================================
 * The text trace replaces its file whole, as the file was.
 * ======================================================================== */

static void test_text_trace_replaced_whole(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    assert_non_null(t);
    const char *txt = tu_path(t, "tt.txt"), *link_path = tu_path(t, "link");
    tu_write_text(txt, "earlier\n");
    assert_int_equal(chmod(txt, 0600), 0);
    assert_int_equal(symlink("tt.txt", link_path), 0);
    Tracer *tr = trace_open(NULL, link_path, NULL, 0);
    assert_non_null(tr);
    int64_t v = 7, shape[1] = {1};
    assert_int_equal(trace_i64(tr, (TracePhase){"final", 0}, "output_ids", "", &v, 1, shape), 0);
    char *mid = tu_read(txt, NULL);
    assert_string_equal(mid, "earlier\n");  /* untouched until the run is over */
    free(mid);
    assert_int_equal(trace_close(tr), 0);
    struct stat st;
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));            /* the link stays a link */
    assert_int_equal(stat(txt, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);   /* the file keeps its mode */
    char *now = tu_read(txt, NULL);
    assert_contains(now, "output_ids");
    free(now);
    static const char *const ONLY[] = {"tt.txt", "link", NULL};
    assert_only(t, ONLY);
    done_scratch(t);
}

/* ===========================================================================
 * Numbers.
 * ======================================================================== */

static int parse_cfg_with(const char *field, const char *value) {
    char text[2048], from[64];
    snprintf(from, sizeof from, "\"%s\":", field);
    const char *cfg = tu_config(0), *at = strstr(cfg, from);
    assert_non_null(at);
    const char *end = at + strlen(from);
    while (*end != ',' && *end != '}') end++;
    snprintf(text, sizeof text, "%.*s%s%s%s", (int)(at - cfg), cfg, from, value, end);
    Config c;
    return config_parse(&c, "config.json", text, strlen(text), 0);
}

/* rms_norm_eps must be at least the smallest normal number of `real`: the
 * boundary itself is accepted, the next double below it is refused. */
static void test_rms_norm_eps_smallest_normal(void **state) {
    (void)state;
    char v[64];
    snprintf(v, sizeof v, "%.17g", (double)REAL_MIN_NORMAL);
    assert_int_equal(parse_cfg_with("rms_norm_eps", v), 0);
    snprintf(v, sizeof v, "%.17g", nextafter((double)REAL_MIN_NORMAL, 0));
    assert_int_equal(parse_cfg_with("rms_norm_eps", v), -1);
    assert_contains(dflash_errmsg, "\"rms_norm_eps\"");
    assert_contains(dflash_errmsg, "smallest normal " REAL_NAME);
    /* 1e-300: 0 as a float (refused there), a normal double */
    assert_int_equal(parse_cfg_with("rms_norm_eps", "1e-300"), sizeof(real) == 4 ? -1 : 0);
    /* 1e-310 is subnormal even as a double */
    assert_int_equal(parse_cfg_with("rms_norm_eps", "1e-310"), -1);
    assert_int_equal(parse_cfg_with("rms_norm_eps", "1e-6"), 0);
}

static void test_rope_stays_finite(void **state) {
    (void)state;
    real f[32];
    rope_inv_freq(f, 64, 1e6);
    assert_int_equal(check_rope(f, 64, 1e6, 4096, "c.json"), 0);
    f[5] = 0;  /* theta^(10/64) overflowed: 1/inf */
    assert_int_equal(check_rope(f, 64, 1e6, 4096, "c.json"), -1);
    assert_contains(dflash_errmsg, "\"rope_theta\"");
    assert_contains(dflash_errmsg, "inv_freq[5]");
    f[5] = (real)INFINITY;
    assert_int_equal(check_rope(f, 64, 1e6, 4096, "c.json"), -1);
    if (sizeof(real) == 4) {
        /* 1e300^(62/64) is beyond FLT_MAX: inv_freq[31] = 1/inf = 0 */
        rope_inv_freq(f, 64, 1e300);
        assert_int_equal(check_rope(f, 64, 1e300, 4096, "c.json"), -1);
        assert_contains(dflash_errmsg, "head_dim 64");
    }
}

/* check_finite names the tensor as the trace does, the phase, the round,
 * the row and the token id. */
static void test_check_finite_names_the_tensor(void **state) {
    (void)state;
    real x[6] = {0, 1, 2, 3, (real)NAN, 5};
    assert_int_equal(check_finite(x, 2, 3, "verify", 3), -1);
    assert_contains(dflash_errmsg, "verify3.logits");
    assert_contains(dflash_errmsg, "phase verify, round 3");
    assert_contains(dflash_errmsg, "row 1, token id 1 is NaN");
    x[4] = (real)-INFINITY;
    assert_int_equal(check_finite(x, 2, 3, "prefill", 0), -1);
    assert_contains(dflash_errmsg, "prefill.logits");
    assert_contains(dflash_errmsg, "-Inf");
    x[4] = 4;
    assert_int_equal(check_finite(x, 2, 3, "draft", 1), 0);
}

/* model.norm and lm_head scaled to 1e30: every logit is about 1e60, beyond
 * float. The run must stop at the prefill with exit 2, not print a token;
 * the earlier trace stays. (A double holds 1e60: float build only.) */
static void test_nonfinite_logits_stop_the_run(void **state) {
    (void)state;
    if (sizeof(real) != 4) tu_skip("float build only: a double holds logits of 1e60");
    char *t = scratch_with_set();
    make_earlier_outputs(t);
    TuModel m;
    tu_model_tensors(&m, 0);
    for (int k = 0; k < m.n; k++)
        if (!strcmp(m.names[k], "model.norm.weight") || !strcmp(m.names[k], "lm_head.weight"))
            for (int64_t i = 0; i < tu_numel(&m.t[k]); i++) m.bufs[k][i] = 1e30f;
    tu_write_safetensors(tu_path(t, "w/target/model.safetensors"), m.t, m.n);
    tu_model_free(&m);
    Buf tr = snap(tu_path(t, "tr")), tt = snap(tu_path(t, "tt.txt"));
    static const char *const SPECS[] = {
        "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/tr|--trace-text|$T/tt.txt",
        "--weights|$W|--prompt|a b|--max-new-tokens|3|--mode|ar",
    };
    for (int i = 0; i < 2; i++) {
        assert_run_refused(t, SPECS[i], (Spawn){0}, "", "non-finite logits", "prefill.logits (phase prefill, round 0)");
        assert_same_snap(&tr, tu_path(t, "tr"));
        assert_same_snap(&tt, tu_path(t, "tt.txt"));
        static const char *const ONLY[] = {"w", "tr", "tt.txt", NULL};
        assert_only(t, ONLY);
    }
    free(tr.b);
    free(tt.b);
    done_scratch(t);
}

/* ===========================================================================
 * Small ones: --max-new-tokens 0 --rounds; white space in vocab.txt.
 * ======================================================================== */

static void test_rounds_without_new_tokens(void **state) {
    (void)state;
    char *t = scratch_with_set();
    char *out, *err;
    int st = run_in(t, "--weights|$W|--prompt|a b|--max-new-tokens|0|--rounds", (Spawn){0}, &out, &err);
    assert_int_equal(st, 0);
    /* no token was kept, so none may be named: the prefill line says so */
    assert_contains(out, "prefill: a b at positions 0..1 -> no new token");
    assert_null(strstr(out, "-> \""));
    assert_contains(out, "new tokens: 0");
    free(out);
    free(err);
    done_scratch(t);
}

static int parse_vocab(const char *text) {
    Vocab v;
    char *copy = strdup(text);
    assert_non_null(copy);
    int rc = vocab_parse(&v, "vocab.txt", copy, strlen(copy));
    if (rc == 0) vocab_free(&v);
    return rc;
}

static void test_vocab_unicode_white_space(void **state) {
    (void)state;
    static const struct { const char *bytes, *name; } SPACES[] = {
        {"\xc2\xa0", "U+00A0 (NO-BREAK SPACE)"}, {"\xc2\x85", "U+0085"}, {"\xe1\x9a\x80", "U+1680"},
        {"\xe2\x80\x80", "U+2000"}, {"\xe2\x80\x89", "U+2009 (THIN SPACE)"}, {"\xe2\x80\x8a", "U+200A"},
        {"\xe2\x80\xa8", "U+2028"}, {"\xe2\x80\xa9", "U+2029"}, {"\xe2\x80\xaf", "U+202F"},
        {"\xe2\x81\x9f", "U+205F"}, {"\xe3\x80\x80", "U+3000 (IDEOGRAPHIC SPACE)"},
    };
    for (size_t i = 0; i < sizeof SPACES / sizeof SPACES[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "a\nb%sc\n.\n", SPACES[i].bytes);
        assert_int_equal(parse_vocab(text), -1);
        assert_contains(dflash_errmsg, "line 2 (token id 1)");
        assert_contains(dflash_errmsg, SPACES[i].name);
        assert_contains(dflash_errmsg, "column 2");
    }
    /* printable non-ASCII that is not white space stays accepted: é, the
     * zero width space U+200B (not White_Space in Unicode), 日本 */
    assert_int_equal(parse_vocab("a\ncaf\xc3\xa9\nx\xe2\x80\x8by\n\xe6\x97\xa5\xe6\x9c\xac\n"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outputs_that_are_inputs),
        cmocka_unit_test(test_failed_run_keeps_earlier_outputs),
        cmocka_unit_test(test_signals_remove_partial_output),
        cmocka_unit_test(test_closed_pipe),
        cmocka_unit_test(test_stdout_write_errors),
        cmocka_unit_test(test_closed_descriptors),
        cmocka_unit_test(test_concurrent_runs),
        cmocka_unit_test(test_second_tracer_same_process),
        cmocka_unit_test(test_text_trace_replaced_whole),
        cmocka_unit_test(test_rms_norm_eps_smallest_normal),
        cmocka_unit_test(test_rope_stays_finite),
        cmocka_unit_test(test_check_finite_names_the_tensor),
        cmocka_unit_test(test_nonfinite_logits_stop_the_run),
        cmocka_unit_test(test_rounds_without_new_tokens),
        cmocka_unit_test(test_vocab_unicode_white_space),
    };
    return cmocka_run_group_tests_name("safety: the user's files, signals, races, numbers", tests, NULL, NULL);
}

