/* tests/runutil.h - running ./dflash from a test and checking what it left:
 * byte-for-byte snapshots of files and trees, fork/exec with chosen
 * descriptors, signals and limits (Spawn), "exactly these names and nothing
 * else" in a scratch directory, and "refused: exit 2, one line". Used by
 * test_safety.c (issue 14) and test_files.c (issue 21). Include after
 * testutil.h. */
#ifndef RUNUTIL_H
#define RUNUTIL_H
#include <errno.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

/* ---- byte-for-byte snapshots of a file or a directory tree -------------- */

typedef struct {
    char *b;
    size_t n, cap;
} Buf;

static inline void buf_add(Buf *x, const void *p, size_t n) {
    if (x->n + n + 1 > x->cap) {
        x->cap = 2 * (x->n + n + 1);
        x->b = realloc(x->b, x->cap);
        assert_non_null(x->b);
    }
    memcpy(x->b + x->n, p, n);
    x->n += n;
}

static inline int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* every name, type, mode and byte under path, in sorted order */
static inline void snap_into(Buf *x, const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        buf_add(x, "<missing>", 9);
        return;
    }
    char head[64];
    snprintf(head, sizeof head, "<%o>", (unsigned)st.st_mode);
    buf_add(x, head, strlen(head));
    if (S_ISREG(st.st_mode)) {
        size_t len = 0;
        char *data = tu_read(path, &len);
        assert_non_null(data);
        snprintf(head, sizeof head, "%zu:", len);
        buf_add(x, head, strlen(head));
        buf_add(x, data, len);
        free(data);
    } else if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        assert_non_null(d);
        char *names[4096];
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n < 4096)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names[n++] = strdup(e->d_name);
        closedir(d);
        qsort(names, (size_t)n, sizeof *names, cmp_names);
        for (int i = 0; i < n; i++) {
            buf_add(x, "\n", 1);
            buf_add(x, names[i], strlen(names[i]));
            buf_add(x, "=", 1);
            snap_into(x, tu_path(path, names[i]));
            free(names[i]);
        }
    }
}

static inline Buf snap(const char *path) {
    Buf x = {0};
    snap_into(&x, path);
    return x;
}

static inline void assert_same_snap(Buf *before, const char *path) {
    Buf now = snap(path);
    if (now.n != before->n || memcmp(now.b, before->b, now.n) != 0) fail_msg("%s changed", path);
    free(now.b);
}

/* t holds exactly the names listed (NULL-terminated), nothing else */
static inline void assert_only(const char *t, const char *const *names) {
    DIR *d = opendir(t);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int ok = 0;
        for (int i = 0; names[i] && !ok; i++) ok = strcmp(e->d_name, names[i]) == 0;
        if (!ok) fail_msg("left behind: %s/%s", t, e->d_name);
    }
    closedir(d);
}

/* ---- running ./dflash ------------------------------------------------------ */

typedef struct {
    const char *out, *err;  /* files for stdout / stderr (NULL: /dev/null) */
    int stdout_fd;          /* > 0: this descriptor becomes stdout */
    int stderr_fd;          /* > 0: this descriptor becomes stderr (err is not read back) */
    int close_mask;         /* bit k: descriptor k is closed before exec */
    int ignore_sigpipe;     /* SIGPIPE ignored (inherited through exec) */
    long fsize_limit;       /* > 0: RLIMIT_FSIZE, SIGXFSZ ignored */
    int barrier_fd;         /* > 0: wait for EOF on it before exec */
    int barrier_write;      /* > 0: the pipe's write end, closed in the child */
} Spawn;

typedef struct {
    char buf[4096];
    char *v[64];
} Argv;

/* "a|b|c" with $W = t/w, $T = t, $R = toy_weights/random */
static inline char **make_argv(Argv *a, const char *t, const char *spec) {
    size_t n = 0;
    for (const char *s = spec; *s && n + 300 < sizeof a->buf; s++) {
        if (s[0] == '$' && (s[1] == 'W' || s[1] == 'T' || s[1] == 'R')) {
            n += (size_t)snprintf(a->buf + n, sizeof a->buf - n, "%s", s[1] == 'R' ? "toy_weights/random" : t);
            if (s[1] == 'W') n += (size_t)snprintf(a->buf + n, sizeof a->buf - n, "/w");
            s++;
        } else {
            a->buf[n++] = *s == '|' ? 0 : *s;
        }
    }
    a->buf[n] = 0;
    int c = 0;
    a->v[c++] = "./dflash";
    for (size_t i = 0; i <= n && c < 63; i++) {
        a->v[c++] = a->buf + i;
        i += strlen(a->buf + i);
    }
    a->v[c] = NULL;
    return a->v;
}

static inline pid_t spawn(char **argv, const Spawn *o) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid > 0) return pid;
    int fo = o->stdout_fd > 0 ? o->stdout_fd : open(o->out ? o->out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = o->stderr_fd > 0 ? o->stderr_fd : open(o->err ? o->err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) _exit(127);
    dup2(fo, 1);
    dup2(fe, 2);
    for (int k = 0; k < 3; k++)
        if (o->close_mask & (1 << k)) close(k);
    /* whatever the test runner inherited (a background job ignores SIGINT) */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, o->ignore_sigpipe ? SIG_IGN : SIG_DFL);
    if (o->fsize_limit > 0) {
        struct rlimit rl = {(rlim_t)o->fsize_limit, (rlim_t)o->fsize_limit};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(127);
    }
    if (o->barrier_fd > 0) {
        char c;
        close(o->barrier_write);
        while (read(o->barrier_fd, &c, 1) > 0) {}
    }
    alarm(600);  /* a hang fails the test (SIGALRM) */
    execv(argv[0], argv);
    _exit(127);
}

static inline int wait_raw(pid_t pid) {
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

/* Run spec in t; stdout and stderr into t/out and t/err, read back into
 * *out / *err (malloc'd), the files removed. Returns the exit status, or
 * -signal when the program died of a signal. */
static inline int run_in(const char *t, const char *spec, Spawn o, char **out, char **err) {
    Argv a;
    char op[1100], ep[1100];
    snprintf(op, sizeof op, "%s/out", t);
    snprintf(ep, sizeof ep, "%s/err", t);
    if (!o.out && o.stdout_fd <= 0) o.out = op;
    o.err = ep;
    int st = wait_raw(spawn(make_argv(&a, t, spec), &o));
    char *so = tu_read(op, NULL), *se = tu_read(ep, NULL);
    unlink(op);
    unlink(ep);
    if (out) *out = so ? so : strdup("");
    else free(so);
    if (err) *err = se ? se : strdup("");
    else free(se);
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
}

/* exit status 2, exactly one line on stderr starting "dflash", containing want */
static inline void assert_refused(int st, const char *err, const char *want) {
    if (st != 2) fail_msg("expected exit status 2, got %d; stderr: %s", st, err);
    size_t el = strlen(err);
    if (el == 0 || err[el - 1] != '\n' || strchr(err, '\n') != err + el - 1)
        fail_msg("expected one line on stderr, got \"%s\"", err);
    if (strncmp(err, "dflash", 6) != 0) fail_msg("expected the message to start with \"dflash\", got \"%s\"", err);
    assert_contains(err, want);
}

/* spec run in t must be refused (assert_refused: exit 2, one line containing
 * want, and `also` when given) with nothing on stdout; its line goes to the
 * log after label */
static inline void assert_run_refused(const char *t, const char *spec, Spawn o, const char *label, const char *want,
                                      const char *also) {
    char *out, *err;
    int st = run_in(t, spec, o, &out, &err);
    print_message("     %s%s%s", label, *label ? " -> " : "", err);
    assert_refused(st, err, want);
    if (also) assert_contains(err, also);
    assert_string_equal(out, "");
    free(out);
    free(err);
}

/* a scratch directory with the tiny weight set in t/w */
static inline char *scratch_with_set(void) {
    char *t = tu_tmpdir();
    assert_non_null(t);
    assert_int_equal(mkdir(tu_path(t, "w"), 0755), 0);
    tu_write_tiny_set(tu_path(t, "w"));
    return t;
}

/* earlier outputs: a real trace t/tr and text trace t/tt.txt of the tiny set */
static inline void make_earlier_outputs(const char *t) {
    char *err;
    int st = run_in(t, "--weights|$W|--prompt|a b|--max-new-tokens|3|--trace|$T/tr|--trace-text|$T/tt.txt",
                    (Spawn){0}, NULL, &err);
    if (st != 0) fail_msg("the earlier run failed (%d): %s", st, err);
    free(err);
    assert_true(tu_exists(tu_path(t, "tr/trace.jsonl")));
    assert_true(tu_exists(tu_path(t, "tt.txt")));
}

static inline void done_scratch(char *t) {
    tu_rmtree(t);
    free(t);
}

#endif /* RUNUTIL_H */
