/* tests/test_files.c - nothing the user owns is lost, and no run lies
 * (issue 21): each failure an attacker found, reproduced as a run of
 * ./dflash (fork/exec, tests/runutil.h), then checked byte for byte.
 *
 *   1. an output that is already open as stdout/stderr (>> log, > log,
 *      /dev/stdout, /dev/fd/N): written through that descriptor, appending
 *      when it appends; nothing the shell wrote is overwritten
 *   4. an output named like the program's own lock, temp or partial files
 *      is refused
 *  10. a run that takes a trace directory's lock removes the partial
 *      outputs a SIGKILLed run left (and says so); a live writer's stay
 *
 * `make sanitize` runs this file from build/san/ (./dflash is the ASan+UBSan
 * build there). */
#include "../dflash.c"
#include "../load.c"
#include "testutil.h"

#include "runutil.h"

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
        char spec[600], *out, *err;
        snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|%s", CASES[i].args);
        int st = run_in(t, spec, (Spawn){0}, &out, &err);
        print_message("     %s -> %s", CASES[i].args, err);
        assert_refused(st, err, CASES[i].want);
        assert_string_equal(out, "");
        free(out);
        free(err);
        static const char *const ONLY[] = {"w", "alias", NULL};
        assert_only(t, ONLY);
    }
    done_scratch(t);
}

/* ===========================================================================
 * 10. After SIGKILL: the next run on the same outputs removes the leftovers.
 * ======================================================================== */

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
        cmocka_unit_test(test_sigkill_leftovers_removed),
    };
    return cmocka_run_group_tests_name("files: issue 21 (nothing the user owns is lost, no run lies)", tests, NULL,
                                       NULL);
}
