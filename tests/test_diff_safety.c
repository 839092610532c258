/* tests/test_diff_safety.c - `dflash diff` never executes what a received
 * trace says. A trace's manifest records the flags of its run ("argv"), and
 * diff reruns the other precision's build to judge rounding; a trace from
 * someone else is data: diff reruns the inference flags alone, each checked,
 * with its one output in its own temporary folder, ended with diff; a
 * trace's names cannot make it allocate per round number; a link out of the
 * trace folder is refused.
 *
 * Each case makes a real trace A of the tiny set (./dflash --trace), B a
 * copy of it with one float value moved beyond the tolerance (so diff
 * reruns the double build on A's flags), then gives A the recorded flags of
 * the case and runs ./dflash diff A B with fork/exec (TMPDIR: the scratch
 * directory's tmp/, which must be empty afterwards). The runs are bounded by
 * counting (a CPU-seconds limit and an address-space limit the child
 * inherits, as guards against a run without end), never timed. */
#include "dflash.c"
#include "formats/load.c"
#include "trace.h"
#include "tests/testutil.h"

#include "tests/runutil.h"

#include <sys/resource.h>

/* ---- fixtures ---------------------------------------------------------------- */

/* a trace of the tiny set into t/<dir>, with extra flags ("|"-separated, "" none) */
static void make_trace(const char *t, const char *dir, const char *extra) {
    char spec[1200], *err;
    snprintf(spec, sizeof spec, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/%s%s%s", dir,
             extra[0] ? "|" : "", extra);
    int st = run_in(t, spec, (Spawn){0}, NULL, &err);
    if (st != 0) fail_msg("the trace run failed (%d): %s", st, err);
    free(err);
    assert_true(tu_exists(tu_path(t, dir)));
}

static void copy_tree(const char *from, const char *to) {
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "cp -R '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

/* the "file" of the first trace.jsonl entry of dtype float32 in dir */
static char *first_float_file(const char *dir) {
    char *text = tu_read(tu_path(dir, "trace.jsonl"), NULL);
    assert_non_null(text);
    char *line = strstr(text, "\"dtype\":\"float32\"");
    assert_non_null(line);
    while (line > text && line[-1] != '\n') line--;
    char *f = strstr(line, "\"file\":\"");
    assert_non_null(f);
    f += 8;
    char *e = strchr(f, '"');
    *e = 0;
    char *out = strdup(f);
    free(text);
    return out;
}

/* the first value of dir/file (a float32 .npy, header version 1) moved by 1 */
static void move_first_value(const char *dir, const char *file) {
    size_t len = 0;
    char *p = strdup(tu_path(dir, file));
    unsigned char *b = (unsigned char *)tu_read(p, &len);
    assert_non_null(b);
    size_t off = 10 + (size_t)(b[8] | b[9] << 8);
    assert_true(len >= off + 4);
    float v;
    memcpy(&v, b + off, 4);
    v += 1.0f;
    memcpy(b + off, &v, 4);
    assert_int_equal(tu_write(p, b, len), 0);
    free(b);
    free(p);
}

/* A (t/a, the tiny set's trace, with extra flags) and B (t/b: A with one
 * float value moved beyond the tolerance) */
static void make_pair(const char *t, const char *extra) {
    make_trace(t, "a", extra);
    copy_tree(tu_path(t, "a"), tu_path(t, "b"));
    char *f = first_float_file(tu_path(t, "b"));
    move_first_value(tu_path(t, "b"), f);
    free(f);
}

/* A's recorded flags replaced by json (a JSON array, "$T" the scratch
 * directory, "$W" its weight set) */
static void set_argv(const char *t, const char *json) {
    char arr[4096];
    size_t n = 0;
    for (const char *s = json; *s && n + 1200 < sizeof arr; s++) {
        if (s[0] == '$' && (s[1] == 'T' || s[1] == 'W')) {
            n += (size_t)snprintf(arr + n, sizeof arr - n, "%s%s", t, s[1] == 'W' ? "/w" : "");
            s++;
        } else {
            arr[n++] = *s;
        }
    }
    arr[n] = 0;
    char *path = strdup(tu_path(t, "a/trace.jsonl"));
    size_t len = 0;
    char *text = tu_read(path, &len);
    assert_non_null(text);
    char *a = strstr(text, "\"argv\":[");
    assert_non_null(a);
    a += 7;
    char *e = a + 1;   /* the array's end: the first ']' outside a string */
    for (int in = 0; *e && (in || *e != ']'); e++) {
        if (in && *e == '\\') e++;
        else if (*e == '"') in = !in;
    }
    assert_int_equal(*e, ']');
    Buf out = {0};
    buf_add(&out, text, (size_t)(a - text));
    buf_add(&out, arr, strlen(arr));
    buf_add(&out, e + 1, len - (size_t)(e + 1 - text));
    assert_int_equal(tu_write(path, out.b, out.n), 0);
    free(out.b);
    free(text);
    free(path);
}

typedef struct {
    int status;        /* the exit status, or -signal */
    long maxrss_kb;    /* the run's peak resident size */
    char *out, *err;
} DiffRun;

/* `./dflash diff A B [extra]` (A = t/a, B = t/b) with TMPDIR=t/tmp, stdout
 * and stderr read back; guards against a run without end: 60 CPU seconds
 * and, outside ASan, 1 GiB of address space (inherited by what it runs) */
static pid_t start_diff(const char *t, const char *extra, const char *op, const char *ep) {
    char a[1100], b[1100], tmp[1100];
    snprintf(a, sizeof a, "%s/a", t);
    snprintf(b, sizeof b, "%s/b", t);
    snprintf(tmp, sizeof tmp, "%s/tmp", t);
    mkdir(tmp, 0755);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid > 0) return pid;
    int fo = open(op, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) _exit(127);
    dup2(fo, 1);
    dup2(fe, 2);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    setenv("TMPDIR", tmp, 1);
    struct rlimit cpu = {60, 60};
    setrlimit(RLIMIT_CPU, &cpu);
    if (!UNDER_ASAN) {
        struct rlimit as = {1ul << 30, 1ul << 30};
        setrlimit(RLIMIT_AS, &as);
    }
    char *argv[6] = {"./dflash", "diff", a, b, (char *)extra, NULL};
    execv(argv[0], argv);
    _exit(127);
}

static DiffRun run_diff(const char *t, const char *extra) {
    char op[1100], ep[1100];
    snprintf(op, sizeof op, "%s/out", t);
    snprintf(ep, sizeof ep, "%s/err", t);
    pid_t pid = start_diff(t, extra, op, ep);
    int st;
    struct rusage ru;   /* the largest peak of the children waited for so far: this suite's runs are small */
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru), 0);
    DiffRun r = {WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000, ru.ru_maxrss,
                 tu_read(op, NULL), tu_read(ep, NULL)};
    if (!r.out) r.out = strdup("");
    if (!r.err) r.err = strdup("");
    unlink(op);
    unlink(ep);
    const char *why = strstr(r.out, "are not run: ");   /* the summary's reason, when nothing ran */
    print_message("     diff: status %d, stderr: %s%s", r.status, r.err, r.err[0] ? "" : "(nothing)\n");
    if (why) print_message("       %.*s\n", (int)strcspn(why, "\n"), why);
    return r;
}

static void free_run(DiffRun *r) {
    free(r->out);
    free(r->err);
}

/* diff's temporary folder (TMPDIR = t/tmp) is gone */
static void assert_tmp_empty(const char *t) {
    if (tu_count_entries(tu_path(t, "tmp")) != 0) fail_msg("diff left its temporary folder in %s/tmp", t);
}

/* the diff compared (B departs: exit 1), did not run the double build,
 * and says why in its summary, naming `why` */
static void assert_not_run(const DiffRun *r, const char *why) {
    if (r->status != 1) fail_msg("expected exit status 1 (B departs), got %d: %s", r->status, r->err);
    if (strstr(r->err, "running the double build")) fail_msg("diff ran the double build: %s", r->err);
    assert_contains(r->out, "are not run");
    assert_contains(r->out, why);
    assert_contains(r->out, "give --double DIR");
}

/* ---- 1, 2: the recorded outputs are dropped --------------------------------- */

/* 1. a legitimate trace made with --trace-text=FILE (the '=' form): diff
 * reruns it, and FILE is left as it was */
static void test_trace_text_equals_is_not_rewritten(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_pair(t, "--trace-text=$T/run.txt");
    Buf text = snap(tu_path(t, "run.txt"));
    DiffRun r = run_diff(t, NULL);
    assert_same_snap(&text, tu_path(t, "run.txt"));
    assert_contains(r.err, "running the double build");   /* it did rerun A's flags */
    if (strstr(r.err, "trace-text")) fail_msg("the rerun names --trace-text: %s", r.err);
    assert_tmp_empty(t);
    static const char *const ONLY[] = {"w", "a", "b", "run.txt", "tmp", NULL};
    assert_only(t, ONLY);
    free_run(&r);
    free(text.b);
    done_scratch(t);
}

/* 2. crafted outputs in any spelling: the victim file and folder are untouched */
static void test_crafted_outputs_are_dropped(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_pair(t, "");
    tu_write_text(tu_path(t, "victim"), "the user's file\n");
    Buf v = snap(tu_path(t, "victim"));
    set_argv(t, "[\"--weights\",\"$W\",\"--prompt\",\"a b\",\"--max-new-tokens\",\"3\","
                "\"--trace-text=$T/victim\",\"--trace=$T/vdir\",\"--trace-filter=*\"]");
    DiffRun r = run_diff(t, NULL);
    assert_contains(r.err, "running the double build");
    assert_same_snap(&v, tu_path(t, "victim"));
    assert_false(tu_exists(tu_path(t, "vdir")));
    assert_tmp_empty(t);
    static const char *const ONLY[] = {"w", "a", "b", "victim", "tmp", NULL};
    assert_only(t, ONLY);
    free_run(&r);
    free(v.b);
    done_scratch(t);
}

/* ---- 3, 4, 5: what is not an inference run is not run ---------------------- */

/* 3. a subcommand (train-target): not run, no model folder */
static void test_subcommand_is_not_run(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_pair(t, "");
    set_argv(t, "[\"train-target\",\"--out\",\"$T/model\",\"--steps\",\"0\"]");
    DiffRun r = run_diff(t, NULL);
    assert_false(tu_exists(tu_path(t, "model")));
    assert_not_run(&r, "train-target");
    assert_tmp_empty(t);
    static const char *const ONLY[] = {"w", "a", "b", "tmp", NULL};
    assert_only(t, ONLY);
    free_run(&r);
    done_scratch(t);
}

/* 4. train --log FILE --out DIR: the log is not overwritten, no draft folder */
static void test_train_outputs_are_not_written(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_pair(t, "");
    tu_write_text(tu_path(t, "log.txt"), "the user's log\n");
    Buf log = snap(tu_path(t, "log.txt"));
    set_argv(t, "[\"train\",\"--weights\",\"$W\",\"--log\",\"$T/log.txt\",\"--out\",\"$T/draft\",\"--steps\",\"1\"]");
    DiffRun r = run_diff(t, NULL);
    assert_same_snap(&log, tu_path(t, "log.txt"));
    assert_false(tu_exists(tu_path(t, "draft")));
    assert_not_run(&r, "train");
    /* the same flags without the subcommand: --log and --out are no inference flags */
    set_argv(t, "[\"--weights\",\"$W\",\"--log\",\"$T/log.txt\",\"--out\",\"$T/draft\"]");
    free_run(&r);
    r = run_diff(t, NULL);
    assert_same_snap(&log, tu_path(t, "log.txt"));
    assert_false(tu_exists(tu_path(t, "draft")));
    assert_not_run(&r, "--log");
    assert_tmp_empty(t);
    static const char *const ONLY[] = {"w", "a", "b", "log.txt", "tmp", NULL};
    assert_only(t, ONLY);
    free_run(&r);
    free(log.b);
    done_scratch(t);
}

/* 5. a run without bound is refused before anything runs: a training run of
 * 100000000 steps, and a generation longer than diff reruns (a deliberately
 * huge request: the 60 CPU-second guard would end either) */
static void test_unbounded_runs_are_refused_up_front(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_pair(t, "");
    set_argv(t, "[\"train\",\"--weights\",\"$W\",\"--generate\",\"1000\",\"--steps\",\"100000000\"]");
    DiffRun r = run_diff(t, NULL);
    assert_not_run(&r, "train");
    free_run(&r);
    set_argv(t, "[\"--weights\",\"$W\",\"--prompt\",\"a b\",\"--max-new-tokens\",\"1048576\",\"--ignore-eos\"]");
    r = run_diff(t, NULL);
    assert_not_run(&r, "--max-new-tokens");
    assert_tmp_empty(t);
    free_run(&r);
    done_scratch(t);
}

/* every value of an inference flag is checked before anything runs: a
 * folder that is not one (--replay's too: it only reads), ids that are not
 * ids, a value out of range, another mode */
static void test_recorded_values_are_checked(void **state) {
    (void)state;
    static const struct {
        const char *argv, *why;
    } CASES[] = {
        {"[\"--weights\",\"$T/none\",\"--prompt\",\"a b\"]", "is not a directory"},
        {"[\"--weights\",\"--out\"]", "--weights"},
        {"[\"--weights\",\"$W\",\"--ids\",\"1;2\"]", "--ids"},
        {"[\"--weights\",\"$W\",\"--block-size\",\"65\"]", "--block-size"},
        {"[\"--weights\",\"$W\",\"--mode\",\"ar\"]", "--mode"},
        {"[\"--weights\",\"$W\",\"--replay\",\"$T/none\"]", "--replay"},
    };
    char *t = scratch_with_set();
    make_pair(t, "");
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        set_argv(t, CASES[i].argv);
        DiffRun r = run_diff(t, NULL);
        assert_not_run(&r, CASES[i].why);
        free_run(&r);
    }
    assert_tmp_empty(t);
    static const char *const ONLY[] = {"w", "a", "b", "tmp", NULL};
    assert_only(t, ONLY);
    done_scratch(t);
}

/* ---- 6: the recorded flags are shown escaped -------------------------------- */

/* no ESC, BEL or CR anywhere, and no line forged to look like diff's summary */
static void assert_no_control(const char *what, const char *s) {
    for (const char *c = s; *c; c++)
        if (*c == 0x1b || *c == 0x07 || *c == '\r') fail_msg("%s holds a raw control character 0x%02x", what, *c);
    for (const char *l = s; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, "diff: 0 compared, 0 differ", 26)) fail_msg("%s holds a forged summary line", what);
}

static void test_recorded_flags_are_escaped(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_pair(t, "");
    /* an inference flag's value: shown (escaped) before the run */
    set_argv(t, "[\"--weights\",\"$W\",\"--prompt\",\"a\\u001b]0;owned\\u0007b\\r\\ndiff: 0 compared, 0 differ\","
                "\"--max-new-tokens\",\"3\"]");
    DiffRun r = run_diff(t, NULL);
    assert_no_control("stderr", r.err);
    assert_no_control("stdout", r.out);
    assert_contains(r.err, "running the double build");
    assert_contains(r.err, "\\x1b");
    free_run(&r);
    /* a refused flag: named (escaped) in the summary */
    set_argv(t, "[\"--weights\",\"$W\",\"--x\\u001b]0;owned\\u0007\\r\\ndiff: 0 compared, 0 differ\"]");
    r = run_diff(t, NULL);
    assert_no_control("stderr", r.err);
    assert_no_control("stdout", r.out);
    assert_not_run(&r, "\\x1b");
    assert_tmp_empty(t);
    free_run(&r);
    done_scratch(t);
}

/* ---- 7: a name's round number allocates nothing ----------------------------- */

/* verify99999999.x in both traces (a few bytes of manifest): diff allocates
 * per name, not per round number; under the 1 GiB guard and well below it */
static void test_huge_round_number_is_bounded(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_trace(t, "a", "");
    char *f = first_float_file(tu_path(t, "a"));
    size_t len = 0;
    char *npy = tu_read(tu_path(tu_path(t, "a"), f), &len);
    assert_non_null(npy);
    assert_int_equal(tu_write(tu_path(t, "a/x.npy"), npy, len), 0);
    free(npy);
    free(f);
    FILE *m = fopen(tu_path(t, "a/trace.jsonl"), "a");
    assert_non_null(m);
    fprintf(m, "{\"name\":\"verify99999999.x\",\"file\":\"x.npy\"}\n");
    fclose(m);
    copy_tree(tu_path(t, "a"), tu_path(t, "b"));
    DiffRun r = run_diff(t, NULL);
    if (r.status != 0) fail_msg("expected exit status 0 (the same traces), got %d: %s", r.status, r.err);
    assert_contains(r.out, "0 differ");
    print_message("     peak resident size %ld KiB\n", r.maxrss_kb);
    if (r.maxrss_kb > 200 * 1024) fail_msg("diff's peak resident size is %ld KiB (a round number allocated)", r.maxrss_kb);
    assert_tmp_empty(t);
    free_run(&r);
    done_scratch(t);
}

/* ---- 8: the double build's run ends with diff -------------------------------- */

/* the first process whose parent is pid, or 0 */
static pid_t child_of(pid_t pid) {
    DIR *d = opendir("/proc");
    assert_non_null(d);
    struct dirent *e;
    pid_t found = 0;
    while (!found && (e = readdir(d)) != NULL) {
        char path[300], buf[600];
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *close = strrchr(buf, ')');   /* "pid (comm) state ppid ..." */
        int ppid = 0;
        char st;
        if (close && sscanf(close + 1, " %c %d", &st, &ppid) == 2 && ppid == pid) found = (pid_t)atoi(e->d_name);
    }
    closedir(d);
    return found;
}

/* 1 while pid runs (a zombie or no process: 0) */
static int running(pid_t pid) {
    char path[64], buf[600];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *close = strrchr(buf, ')');
    return close && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X';
}

/* `sig` to diff while the double build runs A's flags (400 tokens on the
 * random set): diff dies of it, and the run is gone with it. SIGTERM: diff
 * ends its run before it dies; SIGKILL, which diff cannot see: the kernel
 * kills the run when diff dies (PR_SET_PDEATHSIG, Linux), which the test
 * waits for by looking, a bounded number of times, not by sleeping. */
static void signal_ends_the_double_run(int sig) {
    if (!tu_exists("toy_weights/random/target/config.json")) {
        print_message("     skipped: no toy_weights/random (make weights)\n");
        skip();
    }
    char *t = scratch_with_set();
    make_pair(t, "");
    set_argv(t, "[\"--weights\",\"toy_weights/random\",\"--prompt\",\"A dog saw\",\"--max-new-tokens\",\"400\","
                "\"--ignore-eos\"]");
    char op[1100], ep[1100];
    snprintf(op, sizeof op, "%s/out", t);
    snprintf(ep, sizeof ep, "%s/err", t);
    pid_t pid = start_diff(t, NULL, op, ep), child = 0;
    /* until diff's child has become ./dflash-double (bounded: 30000 looks, 1 ms apart) */
    for (int k = 0; k < 30000; k++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) fail_msg("diff ended (status 0x%x) before its run could be", st);
        if (!child) child = child_of(pid);
        if (child) {
            char exe[64], to[4096];
            snprintf(exe, sizeof exe, "/proc/%d/exe", (int)child);
            ssize_t n = readlink(exe, to, sizeof to - 1);
            if (n > 0 && (to[n] = 0, strstr(to, "dflash-double"))) break;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    if (!child) fail_msg("diff ran no double build");
    assert_int_equal(kill(pid, sig), 0);
    int st = wait_raw(pid);
    int alive = running(child);
    /* SIGKILL: the kernel's signal to the orphan, and its end, take a moment
     * (bounded: 10000 looks, 1 ms apart) */
    for (int k = 0; alive && sig == SIGKILL && k < 10000; k++) {
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        alive = running(child);
    }
    if (alive) kill(child, SIGKILL);   /* the old behaviour: do not leave it running */
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) fail_msg("expected diff to die of signal %d, got status 0x%x", sig, st);
    if (alive) fail_msg("diff died of signal %d and left its double build's run %d running", sig, (int)child);
    if (sig == SIGTERM) assert_tmp_empty(t);   /* SIGKILL: diff could not clean up */
    unlink(op);
    unlink(ep);
    done_scratch(t);
}

static void test_sigterm_ends_the_double_run(void **state) { (void)state; signal_ends_the_double_run(SIGTERM); }
static void test_sigkill_ends_the_double_run(void **state) { (void)state; signal_ends_the_double_run(SIGKILL); }

/* ---- links out of the trace folder ------------------------------------------- */

static void test_links_out_of_the_trace_are_refused(void **state) {
    (void)state;
    char *t = scratch_with_set();
    make_trace(t, "a", "");
    copy_tree(tu_path(t, "a"), tu_path(t, "b"));
    char *f = first_float_file(tu_path(t, "a"));
    /* a file outside the traces, with other values: diff must not read it */
    copy_tree(tu_path(tu_path(t, "a"), f), tu_path(t, "secret.npy"));
    move_first_value(t, "secret.npy");
    char link[1200];
    snprintf(link, sizeof link, "%s/b/%s", t, f);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink("../secret.npy", link), 0);
    DiffRun r = run_diff(t, NULL);
    assert_refused(r.status, r.err, "outside the trace folder");
    assert_contains(r.err, f);
    assert_string_equal(r.out, "");
    free_run(&r);
    /* a link inside the folder is followed */
    char real[1200];
    snprintf(real, sizeof real, "%s/b/inside.real", t);
    copy_tree(tu_path(tu_path(t, "a"), f), real);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink("inside.real", link), 0);
    r = run_diff(t, NULL);
    if (r.status != 0) fail_msg("a link inside B: expected exit status 0, got %d: %s", r.status, r.err);
    free_run(&r);
    /* the manifest itself */
    assert_int_equal(rename(tu_path(t, "a/trace.jsonl"), tu_path(t, "outside.jsonl")), 0);
    assert_int_equal(symlink("../outside.jsonl", tu_path(t, "a/trace.jsonl")), 0);
    r = run_diff(t, NULL);
    assert_refused(r.status, r.err, "outside the trace folder");
    assert_contains(r.err, "trace.jsonl");
    free_run(&r);
    free(f);
    done_scratch(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_text_equals_is_not_rewritten),
        cmocka_unit_test(test_crafted_outputs_are_dropped),
        cmocka_unit_test(test_subcommand_is_not_run),
        cmocka_unit_test(test_train_outputs_are_not_written),
        cmocka_unit_test(test_unbounded_runs_are_refused_up_front),
        cmocka_unit_test(test_recorded_values_are_checked),
        cmocka_unit_test(test_recorded_flags_are_escaped),
        cmocka_unit_test(test_huge_round_number_is_bounded),
        cmocka_unit_test(test_sigterm_ends_the_double_run),
        cmocka_unit_test(test_sigkill_ends_the_double_run),
        cmocka_unit_test(test_links_out_of_the_trace_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
