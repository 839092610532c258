/* trace.c - the tracer (trace.h): every intermediate tensor of a dflash run
 * as a .npy file plus a manifest, and a readable text trace in the
 * walkthrough's words. (`dflash diff`, which compares two traces, is
 * cli/diff.c; the manifest reader is formats/manifest.c; the .npy writer, the text
 * trace's OutFile and the partial-output registry are formats/files.c.)
 *
 * dflash.c hands tensors over through the hook declared in dflash.h
 * (trace_hook -> trace_real, trace_i64) and only when a trace was asked
 * for; this file decides what to write and where.
 *
 * Decisions:
 *
 * - Trace directory. A trace directory is one holding trace.jsonl where
 *   every other entry is a regular .npy file that trace.jsonl lists. A
 *   directory holding anything else is refused at trace_open, so a trace
 *   never destroys other data. One run at a time writes a directory: the
 *   run holds an fcntl() lock on "<dir>.lock" from trace_open to the end
 *   (another run is refused with a message naming the lock; the lock dies
 *   with its process, so a killed run does not block the next). The trace is
 *   written into a fresh sibling "<dir>.partial.XXXXXX" and moved into place
 *   by trace_close, with the signals blocked: the earlier trace (if any) is
 *   renamed to "<dir>.old.XXXXXX", the new one renamed to <dir>, then the
 *   old one deleted. A run that fails or is interrupted (SIGINT, SIGTERM,
 *   SIGHUP, SIGPIPE: main's handler calls out_cleanup_on_signal, formats/files.h) leaves the
 *   earlier trace untouched and nothing else: the partial directory, the
 *   lock and the parent directories the run created (mkdir -p style) are
 *   removed. Only SIGKILL or a crash can leave a .partial sibling or the
 *   lock file behind: the next run that takes <dir>'s lock removes the
 *   .partial and .old siblings (holding the lock proves their writer is
 *   gone) and says so on stderr; the lock file is reused. A symbolic link
 *   as <dir> is refused. No output may be named like these files
 *   ("*.lock", "*.partial.XXXXXX", "*.old.XXXXXX").
 * - The readable text trace is written the same way: into
 *   "<file>.partial.XXXXXX" beside it, renamed over <file> at trace_close
 *   (an existing file keeps its mode; a symbolic link is followed, so the
 *   link stays); a failed run leaves the earlier <file> as it was. The
 *   temporary file is fcntl-locked by its writer, so a later run removes
 *   only those whose writer is gone. "-" (stdout) and a file this process
 *   already has open for writing (stdout or stderr by any name, >> log) are
 *   written through that descriptor, so appending stays appending; devices
 *   and FIFOs are written in place. It may not be, or be inside, the trace
 *   directory.
 * - Filters are fnmatch() globs without flags ("*" also matches "."). A
 *   tensor is written (to both outputs) when any filter matches its name.
 *   Filtered-out tensors cost one fnmatch per filter and nothing else (with
 *   a text trace, *.position_ids are still remembered to label the
 *   attention tables); a repeated name is only detected among the written
 *   tensors.
 * - .npy files: formats/files.c's npy_write (format 1.0, C order, little-endian).
 */
/* realpath() is an XSI interface: ask for it next to POSIX 2008 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif
#include "trace.h"
#include "dflash.h"
#include "formats/files.h"
#include "formats/load.h"
#include "formats/manifest.h"
#include "formats/tracenames.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define TRACE_MAX_NDIM NPY_MAX_NDIM /* NumPy 1.x's NPY_MAXDIMS */
#define TRACE_MAX_NAME 200       /* <name>.npy must fit a file name (255) */
#define REAL_DTYPE_NAME (sizeof(real) == 4 ? "float32" : "float64")

/* ===========================================================================
 * Small helpers.
 * ======================================================================== */

static int ends_with(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

/* dflash_errmsg = before + (the current message) + after: adds context to a
 * message set by a helper. */
static void error_wrap(const char *before, const char *after) {
    char old[sizeof dflash_errmsg];
    memcpy(old, dflash_errmsg, sizeof old);
    dflash_set_error("%s%s%s", before, old, after);
}

/* Write one .npy file of the trace (formats/files.c's npy_write: real values as
 * REAL_NPY_DESCR, ids as <i8). -1 with dflash_errmsg naming path and the
 * reason. */
static int trace_npy_file(const char *path, int is_int, const void *data, int ndim,
                          const int64_t *shape, size_t n) {
    /* "x": the directory is fresh, so an existing file is a repeated name.
     * Registered first (by path, under the .partial directory), so that an
     * interrupted run removes it (formats/files.h, the partial-output registry). */
    sigset_t sigs;
    out_block_signals(&sigs);
    FILE *f = out_register(NULL, 'f', path) == 0 ? fopen(path, "wbx") : NULL;
    out_restore_signals(&sigs);
    if (!f) {
        dflash_set_error("trace: cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    int ok = npy_write(f, is_int ? "<i8" : REAL_NPY_DESCR, ndim, shape, data, n) == 0;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        dflash_set_error("trace: cannot write %s: %s", path, strerror(saved));
        return -1;
    }
    return 0;
}

/* ===========================================================================
 * The trace directory: refuse foreign data, write beside, swap in at close.
 * ======================================================================== */

/* Check that dir is absent, empty, or a trace directory (trace.jsonl plus
 * only .npy files it lists). *exists tells which. -1 with a message naming
 * the first entry that is not from a trace. */
static int check_trace_dir(const char *dir, int *exists) {
    *exists = 0;
    struct stat st;
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT) return 0;
        dflash_set_error("trace: cannot use %s: %s", dir, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        dflash_set_error("trace: %s is a symbolic link; give the directory it points to", dir);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        dflash_set_error("trace: %s exists and is not a directory; refusing to replace it", dir);
        return -1;
    }
    *exists = 1;
    Manifest m;
    int r = manifest_load(&m, dir, 0);
    if (r < 0) {
        /* an unreadable or foreign trace.jsonl: not ours to delete */
        error_wrap("trace: refusing to replace a directory whose manifest is not a trace's: ", "");
        return -1;
    }
    NameMap files = {0};  /* the manifest's file names, to look entries up */
    for (int k = 0; r == 0 && k < m.files.n; k++) {
        if (namemap_add(&files, m.files.s[k], k) < 0) {
            dflash_set_error("trace: out of memory");
            namemap_free(&files);
            manifest_free(&m);
            return -1;
        }
    }
    DIR *d = opendir(dir);
    if (!d) {
        dflash_set_error("trace: cannot list %s: %s", dir, strerror(errno));
        namemap_free(&files);
        if (r == 0) manifest_free(&m);
        return -1;
    }
    int ret = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *f = e->d_name;
        if (strcmp(f, ".") == 0 || strcmp(f, "..") == 0) continue;
        if (r == 0 && strcmp(f, "trace.jsonl") == 0) continue;
        int listed = r == 0 && namemap_get(&files, f) >= 0;
        char *p = path_join(dir, f);
        struct stat fs;
        int regular = p && lstat(p, &fs) == 0 && S_ISREG(fs.st_mode);
        free(p);
        if (!listed || !regular) {
            dflash_set_error("trace: %s holds \"%s\", which is not part of a trace; refusing to "
                             "write a trace there (choose another directory or remove it)", dir, f);
            ret = -1;
            break;
        }
    }
    closedir(d);
    namemap_free(&files);
    if (r == 0) manifest_free(&m);
    return ret;
}

/* Delete the files directly inside dir, then dir. Only called on a
 * directory check_trace_dir accepted or on our own .partial directory. */
static int remove_dir_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        dflash_set_error("trace: cannot list %s: %s", dir, strerror(errno));
        return -1;
    }
    int ret = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *p = path_join(dir, e->d_name);
        if (!p || unlink(p) != 0) {
            if (ret == 0) dflash_set_error("trace: cannot remove %s: %s", p ? p : dir, strerror(errno));
            ret = -1;
        }
        free(p);
    }
    closedir(d);
    if (ret == 0 && rmdir(dir) != 0) {
        dflash_set_error("trace: cannot remove %s: %s", dir, strerror(errno));
        ret = -1;
    }
    return ret;
}

/* mkdir -p for every ancestor of path (not path itself); the directories
 * made are registered for owner, so a failed run removes them again. */
static int make_parents(const char *path, const void *owner) {
    char *p = strdup(path);
    if (!p) {
        dflash_set_error("out of memory");
        return -1;
    }
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        struct stat st;
        sigset_t old;
        out_block_signals(&old);
        int err = 0;
        if (out_register(owner, 'd', p) != 0) {
            err = ENOMEM;
        } else if (mkdir(p, 0777) != 0) {
            err = errno;
            out_unregister_last();  /* not made by this run: forget it */
        }
        out_restore_signals(&old);
        if (err && !(err == EEXIST && stat(p, &st) == 0 && S_ISDIR(st.st_mode))) {
            if (err == ENOMEM) dflash_set_error("trace: out of memory");
            else dflash_set_error("trace: cannot create directory %s: %s", p,
                                  err == EEXIST ? "exists and is not a directory" : strerror(err));
            free(p);
            return -1;
        }
        *s = '/';
    }
    free(p);
    return 0;
}

/* A fresh directory "<dir><tag>XXXXXX" beside dir; malloc'd path or NULL.
 * With owner, it is registered (see above) before anyone can interrupt. */
static char *make_sibling(const char *dir, const char *tag, const void *owner) {
    char *tmpl = malloc(strlen(dir) + strlen(tag) + 7);
    if (!tmpl) {
        dflash_set_error("out of memory");
        return NULL;
    }
    sprintf(tmpl, "%s%sXXXXXX", dir, tag);
    sigset_t old;
    out_block_signals(&old);
    int err = mkdtemp(tmpl) ? 0 : errno;
    if (!err && owner && out_register(owner, 'd', tmpl) != 0) {
        rmdir(tmpl);
        err = ENOMEM;
    }
    out_restore_signals(&old);
    if (err) {
        dflash_set_error("trace: cannot create directory %s: %s", tmpl, strerror(err));
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

int trace_check_outputs(const char *dir, const char *text_path, const char *const *inputs, int n_inputs) {
    OutPath outs[2] = {{dir, "the trace directory", 1},
                       {text_path && strcmp(text_path, "-") != 0 ? text_path : NULL, "the text trace", 0}};
    return out_check_paths("trace", outs, 2, inputs, n_inputs);
}

/* ===========================================================================
 * --trace-filter: a glob that can match nothing is an error, not an empty
 * trace put over the earlier one.
 * ======================================================================== */

/* Edit distance between a glob and a name, '*' matching any run and '?'
 * any one character for free: how far the glob is from matching. */
static int glob_distance(const char *g, const char *name) {
    size_t lg = strlen(g), ln = strlen(name);
    if (lg > 200 || ln > 200) return 1 << 20;
    int d[201][201];
    for (size_t j = 0; j <= ln; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= lg; i++) {
        d[i][0] = g[i - 1] == '*' ? d[i - 1][0] : d[i - 1][0] + 1;
        for (size_t j = 1; j <= ln; j++) {
            int best;
            if (g[i - 1] == '*') {
                best = d[i - 1][j] < d[i][j - 1] ? d[i - 1][j] : d[i][j - 1];
            } else {
                int sub = d[i - 1][j - 1] + !(g[i - 1] == name[j - 1] || g[i - 1] == '?');
                int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
                best = sub < del ? sub : del;
                if (ins < best) best = ins;
            }
            d[i][j] = best;
        }
    }
    return d[lg][ln];
}

void glob_closest(const char *glob, char *const *names, int n, char *out, size_t size) {
    int best[3] = {1 << 30, 1 << 30, 1 << 30}, at[3] = {-1, -1, -1};
    for (int i = 0; i < n; i++) {
        int d = glob_distance(glob, names[i]);
        for (int k = 0; k < 3; k++) {
            if (d >= best[k]) continue;
            for (int m = 2; m > k; m--) best[m] = best[m - 1], at[m] = at[m - 1];
            best[k] = d;
            at[k] = i;
            break;
        }
    }
    out[0] = '\0';
    for (int k = 0; k < 3 && at[k] >= 0; k++)
        snprintf(out + strlen(out), size - strlen(out), "%s%.100s", k ? ", " : "", names[at[k]]);
    if (!out[0]) snprintf(out, size, "none");
}

typedef struct {
    const char *glob;
    int matched;
    int best[3];          /* distances of the closest names so far */
    char close[3][160];   /* the names (round 1 only) */
} FilterProbe;

/* One concrete name: does the glob match it; is it among the closest? */
static void probe_name(FilterProbe *f, const char *name, int round) {
    if (f->matched) return;
    if (fnmatch(f->glob, name, 0) == 0) {
        f->matched = 1;
        return;
    }
    if (round > 1) return;  /* suggest round 1 names only */
    int dist = glob_distance(f->glob, name);
    for (int k = 0; k < 3; k++) {
        if (dist >= f->best[k]) continue;
        for (int m = 2; m > k; m--) {
            f->best[m] = f->best[m - 1];
            memcpy(f->close[m], f->close[m - 1], sizeof f->close[m]);
        }
        f->best[k] = dist;
        snprintf(f->close[k], sizeof f->close[k], "%s", name);
        break;
    }
}

/* Every name the table row pattern stands for in this run: P. as
 * prefill. and verify<r>., {r} 1..rounds, {l} 0..layers-1 (the draft's for
 * draft rows), {i} 1..L-1, {L} L. */
static void probe_row(FilterProbe *f, const char *pattern, int L, int Ld, int rounds) {
    int phases = strncmp(pattern, "P.", 2) == 0;
    const char *rest = phases ? pattern + 2 : pattern;
    int v0 = 0, v1 = 1;  /* the range of {l} or {i} */
    if (strstr(rest, "{l}")) v1 = strncmp(rest, "draft", 5) == 0 ? Ld : L;
    if (strstr(rest, "{i}")) v0 = 1, v1 = L;
    int r0 = strstr(rest, "{r}") ? 1 : 0, r1 = phases || r0 ? rounds : 0;
    for (int r = r0; r <= r1 && !f->matched; r++) {
        for (int v = v0; v < v1 && !f->matched; v++) {
            char name[160];
            size_t o = 0;
            if (phases) o += (size_t)snprintf(name, sizeof name, r == 0 ? "prefill." : "verify%d.", r);
            for (const char *c = rest; *c && o < sizeof name - 16; c++) {
                if (c[0] == '{' && c[1] && c[2] == '}') {
                    o += (size_t)snprintf(name + o, sizeof name - o, "%d", c[1] == 'r' ? r : c[1] == 'L' ? L : v);
                    c += 2;
                } else {
                    name[o++] = *c;
                }
            }
            name[o] = '\0';
            probe_name(f, name, r);
        }
    }
}

int trace_check_filters(const char *const *filters, int n_filters, int target_layers, int draft_layers,
                        int block_size, int max_rounds, int hybrid) {
    int rounds = max_rounds < 1000 ? max_rounds : 1000;
    for (int k = 0; k < n_filters; k++) {
        FilterProbe f;
        memset(&f, 0, sizeof f);
        f.glob = filters[k];
        for (int m = 0; m < 3; m++) f.best[m] = 1 << 30;
        for (int i = 0; i < dflash_n_trace_names && !f.matched; i++) {
            const char *pat = dflash_trace_names[i].pattern;
            int draft_only = strncmp(pat, "draft", 5) == 0 || strstr(pat, "target_hidden") != NULL ||
                             strcmp(pat, "acceptance_per_position") == 0;
            if (draft_only && block_size <= 1) continue;  /* block size 1: no draft, nothing for it */
            probe_row(&f, pat, target_layers, draft_layers, rounds);
        }
        for (int i = 0; hybrid && i < dflash_n_hybrid_trace_names && !f.matched; i++)
            probe_row(&f, dflash_hybrid_trace_names[i].pattern, target_layers, draft_layers, rounds);
        if (f.matched) continue;
        char close[400] = "";
        for (int m = 0; m < 3 && f.best[m] < (1 << 30); m++)
            snprintf(close + strlen(close), sizeof close - strlen(close), "%s%s", m ? ", " : "", f.close[m]);
        dflash_set_error("--trace-filter: \"%.100s\" matches no name this run can emit (closest: %s; TRACE.md "
                         "lists the names); nothing was replaced", filters[k], close[0] ? close : "none");
        return -1;
    }
    return 0;
}

/* ===========================================================================
 * The tracer.
 * ======================================================================== */

struct Tracer {
    TraceHook hook;       /* what dflash.c calls (trace_hook) */
    /* .npy output (dir given) */
    char *dir;            /* where the trace ends up (trailing '/' removed) */
    char *tmp_dir;        /* "<dir>.partial.XXXXXX", written during the run */
    char *manifest_path;  /* tmp_dir/trace.jsonl */
    FILE *manifest;
    int lock_fd;
    /* readable output (text_path given) */
    char *text_path;      /* as given, for messages */
    OutFile *text_out;    /* the file (formats/files.h: a temporary beside it, renamed at close;
                           * stdout, a device, a FIFO written in place) */
    FILE *text;           /* out_stream(text_out) while it is open */
    const Vocab *vocab;
    /* which names to write */
    char **filters;       /* (n_filters) */
    int n_filters;
    NameMap written;      /* names already written, to catch repeats */
    char *run_argv;       /* the run's flags as a JSON array (trace_set_run), on the first manifest line */
    int lines;            /* manifest lines written */
    /* where the readable trace is in the walkthrough */
    int step;             /* code of the last step header (see step_of), 0 none */
    int step_layer;       /* its draft layer (-1: not a layer step) */
    int round;            /* last round header printed (-1 none) */
    char phase[16];       /* last phase header printed */
    /* the last "<prefix>.position_ids" seen, to label attention and RoPE */
    char pos_prefix[64];
    int64_t *pos;         /* (n_pos) */
    int64_t n_pos;
    /* with a vocabulary: the last "<prefix>.input_ids" / ".block_output_ids"
     * seen, and the token each position was last fed to the target with
     * (tok_at[p], -1 unknown), to label attention keys and queries with words */
    char ids_prefix[64];
    int64_t *ids;         /* (n_ids) */
    int64_t n_ids;
    int ids_is_block;     /* the draft's block (mask tokens), not fed to the target */
    int64_t *tok_at;      /* (n_tok_at) */
    int64_t n_tok_at;
    /* first error; later calls return -1 with it again */
    int failed;
    char error[1024];
};

static int tracer_fail(Tracer *t) {
    if (!t->failed) {
        t->failed = 1;
        snprintf(t->error, sizeof t->error, "%s", dflash_errmsg);
    }
    return -1;
}

static int name_wanted(const Tracer *t, const char *name) {
    if (t->n_filters == 0) return 1;
    for (int k = 0; k < t->n_filters; k++)
        if (fnmatch(t->filters[k], name, 0) == 0) return 1;
    return 0;
}

/* Frees everything. Whatever is still registered for t (a failed run's
 * partial directory, temporary text file, the parents it made) is removed,
 * and the lock released. */
static void tracer_free(Tracer *t) {
    if (t->manifest) fclose(t->manifest);
    char keep[sizeof dflash_errmsg];
    memcpy(keep, dflash_errmsg, sizeof keep);
    out_abort(t->text_out);  /* a failed run: the earlier text trace stays */
    if (t->tmp_dir) remove_dir_files(t->tmp_dir);  /* best effort: the run failed already */
    sigset_t old;
    out_block_signals(&old);
    out_remove_owned(t);
    if (t->lock_fd >= 0) close(t->lock_fd);  /* after the unlink: see out_lock_take */
    out_forget(t, 0, t->tmp_dir);
    out_restore_signals(&old);
    memcpy(dflash_errmsg, keep, sizeof keep);
    for (int k = 0; k < t->n_filters; k++) free(t->filters[k]);
    free(t->filters);
    namemap_free(&t->written);
    free(t->pos);
    free(t->ids);
    free(t->tok_at);
    free(t->dir);
    free(t->tmp_dir);
    free(t->manifest_path);
    free(t->run_argv);
    free(t->text_path);
    free(t);
}

/* Take "<dir>.lock": an fcntl() write lock on that file, held until
 * trace_close, so one run at a time writes a trace directory
 * (formats/files.c, out_lock_take: the one lock of every folder output; the
 * lock dies with its process, so a lock file left by a killed run does not
 * block the next run). */
static int lock_acquire(Tracer *t) {
    return out_lock_take(t, t->dir, "trace", "the trace directory", &t->lock_fd);
}

/* A trace directory's files only: trace.jsonl and regular *.npy files. */
static int holds_trace_files_only(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int ok = 1;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        const char *f = e->d_name;
        if (strcmp(f, ".") == 0 || strcmp(f, "..") == 0) continue;
        char *p = path_join(dir, f);
        struct stat st;
        ok = p && lstat(p, &st) == 0 && S_ISREG(st.st_mode) &&
             (strcmp(f, "trace.jsonl") == 0 || ends_with(f, ".npy"));
        free(p);
    }
    closedir(d);
    return ok;
}

/* Remove the "<dir>.partial.XXXXXX" and "<dir>.old.XXXXXX" directories
 * that earlier runs left beside dir when they were killed (SIGKILL, a
 * crash, a power cut), and say so on stderr, one line each. Called with
 * <dir>.lock held: only the lock's holder makes them, so their writer is
 * gone. Only directories holding trace files only are removed; anything
 * else with such a name is left alone. Best effort: what cannot be removed
 * stays, and the run goes on. (A text trace's temporary file: formats/files.c,
 * out_remove_stale.) */
static int remove_stale_one(void *ctx, const char *p) {
    (void)ctx;
    return holds_trace_files_only(p) ? remove_dir_files(p) : -1;
}

static void remove_stale_dirs(const char *dir) { out_stale_siblings(dir, 1, remove_stale_one, NULL); }

Tracer *trace_open(const char *dir, const char *text_path,
                   const char *const *filters, int n_filters) {
    Tracer *t = calloc(1, sizeof *t);
    if (!t) {
        dflash_set_error("trace: out of memory");
        return NULL;
    }
    t->round = -1;
    t->step_layer = -1;
    t->lock_fd = -1;
    if (n_filters > 0) {
        t->filters = calloc((size_t)n_filters, sizeof *t->filters);
        if (!t->filters) goto oom;
        for (int k = 0; k < n_filters; k++) {
            t->filters[k] = strdup(filters[k]);
            if (!t->filters[k]) goto oom;
            t->n_filters = k + 1;
        }
    }

    if (dir) {
        size_t len = strlen(dir);
        while (len > 1 && dir[len - 1] == '/') len--;  /* "out/" -> "out" */
        t->dir = strndup(dir, len);
        if (!t->dir) goto oom;
        const char *base = strrchr(t->dir, '/');
        base = base ? base + 1 : t->dir;
        if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
            dflash_set_error("trace: \"%s\" cannot be replaced by a trace; name a directory "
                             "of its own (e.g. %s/trace)", dir, dir);
            goto fail;
        }
    }
    if (trace_check_outputs(t->dir, text_path, NULL, 0) != 0) goto fail;
    if (dir) {
        int exists;
        if (check_trace_dir(t->dir, &exists) != 0) goto fail;
        if (!exists && make_parents(t->dir, t) != 0) goto fail;
        if (lock_acquire(t) != 0) goto fail;
        remove_stale_dirs(t->dir);
        t->tmp_dir = make_sibling(t->dir, ".partial.", t);
        if (!t->tmp_dir) goto fail;
        /* mkdtemp makes it 0700; give the trace a normal directory's mode */
        chmod(t->tmp_dir, 0777 & ~file_umask());
        t->manifest_path = path_join(t->tmp_dir, "trace.jsonl");
        if (!t->manifest_path) goto oom;
        sigset_t old;
        out_block_signals(&old);
        if (out_register(t, 'f', t->manifest_path) == 0) t->manifest = fopen(t->manifest_path, "w");
        int err = errno;
        out_restore_signals(&old);
        if (!t->manifest) {
            dflash_set_error("trace: cannot create %s: %s", t->manifest_path, strerror(err));
            goto fail;
        }
    }

    if (text_path) {
        t->text_path = strdup(text_path);
        if (!t->text_path) goto oom;
        t->text_out = out_open(text_path, "trace");
        if (!t->text_out) goto fail;
        t->text = out_stream(t->text_out);
        fprintf(t->text, "DFlash trace (real = %s); tensors in the order the run made them.\n"
                         "Shapes drop the batch axis. Small tensors in full, large ones as\n"
                         "min / max / mean / rms and their first values.\n", REAL_NAME);
    }
    return t;
oom:
    dflash_set_error("trace: out of memory");
fail:
    tracer_free(t);
    return NULL;
}

void trace_set_vocab(Tracer *t, const Vocab *v) {
    if (t) t->vocab = v;
}

/* argv[0..argc) as a JSON array of strings, kept for the first manifest line.
 * Control characters, quotes and backslashes are escaped; other bytes as given. */
int trace_set_run(Tracer *t, int argc, const char *const *argv) {
    if (!t) return 0;
    size_t cap = 3;
    for (int i = 0; i < argc; i++) cap += 6 * strlen(argv[i]) + 3;
    char *j = malloc(cap), *o = j;
    if (!j) {
        dflash_set_error("trace: out of memory");
        return -1;
    }
    *o++ = '[';
    for (int i = 0; i < argc; i++) {
        if (i) *o++ = ',';
        *o++ = '"';
        for (const unsigned char *c = (const unsigned char *)argv[i]; *c; c++) {
            if (*c == '"' || *c == '\\') { *o++ = '\\'; *o++ = (char)*c; }
            else if (*c < 0x20 || *c == 0x7f) o += sprintf(o, "\\u%04x", *c);
            else *o++ = (char)*c;
        }
        *o++ = '"';
    }
    *o++ = ']';
    *o = 0;
    free(t->run_argv);
    t->run_argv = j;
    return 0;
}

/* Move the finished outputs into place, with the signals blocked so that
 * an interruption lands before (nothing changed) or after (all done): the
 * earlier trace -> <dir>.old.XXXXXX, the new one -> <dir>, the earlier one
 * deleted; then the text trace renamed over its file. */
static int trace_commit(Tracer *t) {
    int rc = 0;
    sigset_t sigs;
    out_block_signals(&sigs);
    if (t->tmp_dir) {
        int exists;
        char *old = NULL;
        if (check_trace_dir(t->dir, &exists) != 0) {
            /* someone put other data there meanwhile: leave it alone */
            error_wrap("", "; the new trace was discarded");
            rc = -1;
        } else if (exists && !(old = make_sibling(t->dir, ".old.", NULL))) {
            rc = -1;
        } else if (exists && rename(t->dir, old) != 0) {
            dflash_set_error("trace: cannot move %s aside to %s: %s", t->dir, old, strerror(errno));
            rmdir(old);
            rc = -1;
        } else if (rename(t->tmp_dir, t->dir) != 0) {
            dflash_set_error("trace: cannot rename %s to %s: %s", t->tmp_dir, t->dir, strerror(errno));
            if (exists && rename(old, t->dir) != 0) {  /* put the earlier trace back */
                char after[600];
                snprintf(after, sizeof after, "; the earlier trace is in %.500s", old);
                error_wrap("", after);
            }
            rc = -1;
        } else {
            /* the new trace is <dir> now, and the parents made hold it */
            out_forget(t, 'd', t->tmp_dir);
            free(t->tmp_dir);
            t->tmp_dir = NULL;
            if (exists && remove_dir_files(old) != 0) {
                char before[600];
                snprintf(before, sizeof before, "trace: the new trace is in %.250s but the "
                         "earlier one was not fully deleted: ", t->dir);
                error_wrap(before, "");
                rc = -1;
            }
        }
        free(old);
    }
    if (rc == 0 && t->text_out) {
        OutFile *o = t->text_out;
        t->text_out = NULL;
        rc = out_commit(o);
    }
    out_restore_signals(&sigs);
    return rc;
}

int trace_close(Tracer *t) {
    if (!t) return 0;
    int ok = !t->failed;
    if (!ok) dflash_set_error("%s", t->error);

    if (t->text_out) {
        char keep[sizeof dflash_errmsg];
        memcpy(keep, dflash_errmsg, sizeof keep);
        t->text = NULL;
        if (out_finish(t->text_out) != 0 && ok) ok = 0;  /* "trace: cannot write ..." */
        else if (!ok) memcpy(dflash_errmsg, keep, sizeof keep);
    }
    if (t->manifest) {
        int bad = fclose(t->manifest) != 0;
        t->manifest = NULL;
        if (bad && ok) {
            dflash_set_error("trace: cannot write %s: %s", t->manifest_path, strerror(errno));
            ok = 0;
        }
    }
    if (ok && trace_commit(t) != 0) ok = 0;
    tracer_free(t);  /* removes what a failed run left; releases the lock */
    return ok ? 0 : -1;
}

void trace_discard(Tracer *t) {
    if (!t) return;
    char keep[sizeof dflash_errmsg];
    memcpy(keep, dflash_errmsg, sizeof keep);
    if (!t->failed) {
        t->failed = 1;
        snprintf(t->error, sizeof t->error, "trace discarded: the run failed");
    }
    trace_close(t);
    memcpy(dflash_errmsg, keep, sizeof keep);
}

/* ===========================================================================
 * Readable text trace.
 * ======================================================================== */

/* One tensor as the text trace sees it. */
typedef struct {
    const char *name, *meaning;
    int is_int;
    const real *r;        /* (n) when !is_int */
    const int64_t *i;     /* (n) when is_int */
    int ndim;
    const int64_t *shape; /* (ndim) */
    size_t n;
} TensorView;

static double tv_get(const TensorView *x, size_t k) {
    return x->is_int ? (double)x->i[k] : (double)x->r[k];
}

/* One element formatted deterministically: ids exactly, reals %.6g. */
static void tv_fmt(char *buf, size_t size, const TensorView *x, size_t k) {
    if (x->is_int) snprintf(buf, size, "%lld", (long long)x->i[k]);
    else snprintf(buf, size, "%.6g", (double)x->r[k]);
}

/* The walkthrough's steps. Codes: 10 = Step 1, ..., 41 = Step 4.1, ... */
static const struct { int code; const char *title; } STEPS[] = {
    {10, "Step 1: prefill (target forward, hidden states)"},
    {20, "Step 2: projection fc + hidden_norm -> C"},
    {30, "Step 3: the block (anchor + masks)"},
    {41, "Step 4.1: Q"},
    {42, "Step 4.2: K/V with KV injection"},
    {43, "Step 4.3: RoPE"},
    {44, "Step 4.4: attention"},
    {45, "Step 4.5: output projection"},
    {50, "Step 5: draft output and logits"},
    {60, "Step 6: verification"},
    {70, "Step 7: update"},
};

/* "draft12.fc" with word "draft" -> 1 (the round digits then a '.'). */
static int has_round_prefix(const char *name, const char *word) {
    size_t lw = strlen(word);
    if (strncmp(name, word, lw) != 0) return 0;
    const char *p = name + lw;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return *p == '.';
}

/* Which step a tensor belongs to (0: none, keep the current one) and, for
 * the draft's layer steps, its layer. Derived from the name only. */
static int step_of(const char *name, int *layer) {
    *layer = -1;
    if (strcmp(name, "input_ids") == 0 || strncmp(name, "prefill.", 8) == 0) return 10;
    if (strcmp(name, "output_ids") == 0 || strncmp(name, "final.", 6) == 0) return 70;
    if (has_round_prefix(name, "verify")) return 60;
    if (!has_round_prefix(name, "draft")) return 0;
    const char *r = strchr(name, '.') + 1;  /* past "draftN." */
    if (!strcmp(r, "target_hidden_raw") || !strcmp(r, "fc") || !strcmp(r, "hidden_norm")) return 20;
    if (!strcmp(r, "block_output_ids") || !strcmp(r, "noise_embedding")) return 30;
    if (!strcmp(r, "position_ids") || !strcmp(r, "rope_angles") || !strcmp(r, "cos") ||
        !strcmp(r, "sin"))
        return 43;
    if (!strcmp(r, "norm") || !strcmp(r, "logits") || !strcmp(r, "sampled")) return 50;
    if (strncmp(r, "layers.", 7) != 0) return 0;
    char *end;
    long l = strtol(r + 7, &end, 10);
    if (end == r + 7) return 0;
    *layer = (int)l;
    if (*end == '\0') return 45;  /* draftN.layers.L: the layer output */
    if (!strcmp(end, ".self_attn.q")) return 41;
    if (!strcmp(end, ".self_attn.k") || !strcmp(end, ".self_attn.v")) return 42;
    if (!strcmp(end, ".self_attn.q_rope") || !strcmp(end, ".self_attn.k_rope")) return 43;
    if (!strcmp(end, ".self_attn.attn_weights") || !strcmp(end, ".self_attn.attn_scores")) return 44;
    if (!strcmp(end, ".self_attn.attn_output")) return 45;
    *layer = -1;
    return 0;
}

/* Round and step headers, printed when the tensor starts a new one. */
static void text_headers(Tracer *t, TracePhase ph, const char *name) {
    FILE *f = t->text;
    const char *phase = ph.phase ? ph.phase : "";
    int in_round = strcmp(phase, "draft") == 0 || strcmp(phase, "verify") == 0;
    if (in_round && ph.round != t->round) {
        fprintf(f, "\n---- round %d ----\n", ph.round);
        t->round = ph.round;
        snprintf(t->phase, sizeof t->phase, "%s", phase);
        t->step = 0;  /* every round restates its steps */
    } else if (!in_round && strcmp(phase, t->phase) != 0) {
        fprintf(f, "\n---- %s ----\n", phase);
        snprintf(t->phase, sizeof t->phase, "%s", phase);
        t->step = 0;
    }
    int layer;
    int code = step_of(name, &layer);
    if (code == 0 || (code == t->step && layer == t->step_layer)) return;
    for (size_t k = 0; k < sizeof STEPS / sizeof STEPS[0]; k++) {
        if (STEPS[k].code != code) continue;
        if (layer >= 0) fprintf(f, "\n== %s (draft layer %d)\n", STEPS[k].title, layer);
        else fprintf(f, "\n== %s\n", STEPS[k].title);
    }
    t->step = code;
    t->step_layer = layer;
}

/* Values k0..k0+count-1 on lines of 8, each line indented by `indent`. */
static void text_values(FILE *f, const TensorView *x, size_t k0, size_t count, const char *indent) {
    char buf[40];
    for (size_t k = 0; k < count; k++) {
        if (k % 8 == 0) fprintf(f, "%s%s", k ? "\n" : "", indent);
        tv_fmt(buf, sizeof buf, x, k0 + k);
        fprintf(f, " %s", buf);
    }
    fprintf(f, "\n");
}

/* Every value; one row of the last axis at a time, labelled by its index. */
static void text_full(FILE *f, const TensorView *x) {
    if (x->ndim <= 1) {
        text_values(f, x, 0, x->n, x->ndim ? "    values:" : "    value:");
        return;
    }
    size_t row = (size_t)x->shape[x->ndim - 1];
    if (row == 0 || x->n == 0) {
        fprintf(f, "    (empty)\n");
        return;
    }
    for (size_t r = 0; r < x->n / row; r++) {
        char label[24 * TRACE_MAX_NDIM] = "    [";
        size_t rest = r, len = 5;
        /* the index of row r along the leading axes, last axis as ':' */
        int64_t idx[TRACE_MAX_NDIM];
        for (int a = x->ndim - 2; a >= 0; a--) {
            idx[a] = (int64_t)(rest % (size_t)x->shape[a]);
            rest /= (size_t)x->shape[a];
        }
        for (int a = 0; a < x->ndim - 1; a++)
            len += (size_t)snprintf(label + len, sizeof label - len, "%lld,", (long long)idx[a]);
        snprintf(label + len, sizeof label - len, ":]");
        text_values(f, x, r * row, row, label);
    }
}

/* min / max / mean / rms over all values, plus the first 8. */
static void text_summary(FILE *f, const TensorView *x) {
    double mn = INFINITY, mx = -INFINITY, sum = 0, sumsq = 0;
    size_t nonfinite = 0;
    for (size_t k = 0; k < x->n; k++) {
        double v = tv_get(x, k);
        if (!isfinite(v)) { nonfinite++; continue; }
        if (v < mn) mn = v;
        if (v > mx) mx = v;
        sum += v;
        sumsq += v * v;
    }
    size_t m = x->n - nonfinite;
    if (m > 0)
        fprintf(f, "    min %.6g  max %.6g  mean %.6g  rms %.6g\n", mn, mx, sum / (double)m,
                sqrt(sumsq / (double)m));
    if (nonfinite) fprintf(f, "    NON-FINITE values: %zu of %zu\n", nonfinite, x->n);
    text_values(f, x, 0, x->n < 8 ? x->n : 8, "    first 8:");
}

static const char *word_of(const Vocab *v, int64_t id, char *buf, size_t size) {
    if (v && id >= 0 && id < v->n) return v->words[id];
    snprintf(buf, size, "#%lld", (long long)id);  /* no vocabulary, or out of range */
    return buf;
}

/* length of the valid UTF-8 sequence at c (n bytes left): 1..4, or 0 when
 * c[0] does not start one (a lone continuation byte, a lead byte without its
 * continuation, an overlong form, a surrogate, above U+10FFFF) */
static size_t utf8_seq(const unsigned char *c, size_t n) {
    size_t len = c[0] < 0x80 ? 1 : c[0] >= 0xc2 && c[0] <= 0xdf ? 2 : c[0] >= 0xe0 && c[0] <= 0xef ? 3
               : c[0] >= 0xf0 && c[0] <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t k = 1; k < len; k++)
        if ((c[k] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((c[0] == 0xe0 && c[1] < 0xa0) || (c[0] == 0xed && c[1] >= 0xa0))) return 0;
    if (len == 4 && ((c[0] == 0xf0 && c[1] < 0x90) || (c[0] == 0xf4 && c[1] >= 0x90))) return 0;
    return len;
}

void text_put(FILE *f, const char *s, size_t n) {
    const unsigned char *c = (const unsigned char *)s;
    for (size_t k = 0; k < n;) {
        size_t len = utf8_seq(c + k, n - k);
        int c1 = len == 2 && c[k] == 0xc2 && c[k + 1] <= 0x9f;  /* U+0080..U+009F */
        if (len == 0 || (len == 1 && (c[k] < 0x20 || c[k] == 0x7f || c[k] == '\\'))) {
            fprintf(f, "\\x%02x", c[k]);  /* a control character, a backslash, a byte of no character */
            k++;
        } else if (c1) {
            fprintf(f, "\\x%02x\\x%02x", c[k], c[k + 1]);
            k += 2;
        } else {
            fwrite(c + k, 1, len, f);
            k += len;
        }
    }
}

/* Token ids: all of them, then as words. */
static void text_tokens(FILE *f, const Tracer *t, const TensorView *x) {
    if (x->ndim == 0) {
        text_values(f, x, 0, 1, "    id:");
    } else {
        text_values(f, x, 0, x->n, "    ids:  ");
    }
    if (!t->vocab) return;
    char buf[32];
    fprintf(f, "    words:");
    for (size_t k = 0; k < x->n; k++) {
        const char *w = word_of(t->vocab, x->i[k], buf, sizeof buf);
        fputc(' ', f);
        text_put(f, w, strlen(w));
    }
    fprintf(f, "\n");
}

/* The remembered position_ids, when they belong to the same call as name
 * (same first component, e.g. "draft1"). NULL otherwise. */
static const int64_t *positions_for(const Tracer *t, const char *name) {
    size_t lp = strlen(t->pos_prefix);
    if (!t->pos || lp == 0 || strncmp(name, t->pos_prefix, lp) != 0 || name[lp] != '.') return NULL;
    return t->pos;
}

/* " word" appended to label: the token at position pos (the draft's block
 * for positions >= q0 of a draft call, else what the target was fed there) */
static void label_word(const Tracer *t, char *label, size_t size, int64_t pos, int64_t q0) {
    int64_t id = -1;
    if (t->ids_is_block && pos >= q0 && pos - q0 < t->n_ids) id = t->ids[pos - q0];
    else if (pos >= 0 && pos < t->n_tok_at) id = t->tok_at[pos];
    if (id < 0 || id >= t->vocab->n) return;
    size_t n = strlen(label);
    snprintf(label + n, size - n, " %.20s", t->vocab->words[id]);
}

/* attn_weights or attn_scores (H, B, S): one B x S matrix per head. Queries are the last B
 * positions of position_ids; keys are the S positions ending at the last one
 * (the cache holds 0..S-1 in both models), when the positions are
 * contiguous. A '|' marks where the block's own keys start (the walkthrough's
 * KV-injection border). */
static void text_attention(FILE *f, const Tracer *t, const TensorView *x) {
    int64_t H = x->shape[0], B = x->shape[1], S = x->shape[2];
    const int64_t *p = positions_for(t, x->name);
    int64_t P = t->n_pos;
    int known = p && P >= B && p[P - 1] - (S - 1) >= 0;
    for (int64_t k = 1; known && k < P; k++) known = p[k] == p[k - 1] + 1;
    int64_t q0 = known ? p[P - B] : 0;                 /* first query position */
    int64_t k0 = known ? p[P - 1] - (S - 1) : 0;       /* first key position */
    int64_t border = known && q0 > k0 ? q0 - k0 : -1;  /* column of the first block key */
    char label[64];
    /* with a vocabulary, each label also names its token: the draft's block
     * tokens for the last B positions of a draft call, else the token the
     * target was fed at that position */
    size_t lp = strlen(t->ids_prefix);
    int words = known && t->vocab && lp && strncmp(x->name, t->ids_prefix, lp) == 0 && x->name[lp] == '.';
    int w = words ? 14 : 8;
    for (int64_t h = 0; h < H; h++) {
        fprintf(f, "    head %lld (%lld queries x %lld keys%s)\n", (long long)h, (long long)B, (long long)S,
                ends_with(x->name, ".attn_scores") ? ", before the softmax" : ", each row sums to 1");
        fprintf(f, "    %8s", "");
        for (int64_t j = 0; j < S; j++) {
            if (j == border) fprintf(f, " |");
            snprintf(label, sizeof label, known ? "k@%lld" : "k#%lld", (long long)(k0 + j));
            if (words) label_word(t, label, sizeof label, k0 + j, q0);
            fprintf(f, " %*s", w, label);
        }
        fprintf(f, "\n");
        for (int64_t i = 0; i < B; i++) {
            snprintf(label, sizeof label, known ? "q@%lld" : "q#%lld", (long long)(q0 + i));
            if (words) label_word(t, label, sizeof label, q0 + i, q0);
            fprintf(f, "    %*s", w, label);
            for (int64_t j = 0; j < S; j++) {
                if (j == border) fprintf(f, " |");
                fprintf(f, " %*.4f", w, tv_get(x, (size_t)((h * B + i) * S + j)));
            }
            fprintf(f, "\n");
        }
    }
}

/* rope_angles (P, d/2): a table of positions x the first 4 and last 2
 * frequency pairs (angle = position * inv_freq[i], radians). */
static void text_rope_angles(FILE *f, const Tracer *t, const TensorView *x) {
    int64_t P = x->shape[0], F = x->shape[1];
    const int64_t *p = positions_for(t, x->name);
    if (p && t->n_pos != P) p = NULL;
    fprintf(f, "    %6s |", p ? "pos" : "row");
    for (int64_t i = 0; i < F; i++) {
        if (F > 6 && i == 4) { fprintf(f, " %10s", "..."); i = F - 2; }
        char label[24];
        snprintf(label, sizeof label, "i=%lld", (long long)i);
        fprintf(f, " %10s", label);
    }
    fprintf(f, "\n");
    for (int64_t r = 0; r < P; r++) {
        fprintf(f, "    %6lld |", (long long)(p ? p[r] : r));
        for (int64_t i = 0; i < F; i++) {
            if (F > 6 && i == 4) { fprintf(f, " %10s", "..."); i = F - 2; }
            fprintf(f, " %10.4g", tv_get(x, (size_t)(r * F + i)));
        }
        fprintf(f, "\n");
    }
}

static int is_token_tensor(const char *name) {
    return ends_with(name, "input_ids") || ends_with(name, "output_ids") || ends_with(name, "sampled");
}

/* One tensor: name, shape, dtype, meaning, then its values or a summary. */
static void text_tensor(Tracer *t, TracePhase ph, const TensorView *x) {
    FILE *f = t->text;
    text_headers(t, ph, x->name);
    fprintf(f, "%s  [", x->name);
    for (int a = 0; a < x->ndim; a++) fprintf(f, a ? ", %lld" : "%lld", (long long)x->shape[a]);
    fprintf(f, "]  %s\n", x->is_int ? "int64" : REAL_DTYPE_NAME);
    if (x->meaning[0]) {
        fprintf(f, "    -- ");
        for (const char *c = x->meaning; *c; c++) fputc((unsigned char)*c < 0x20 ? ' ' : *c, f);
        fprintf(f, "\n");
    }
    if (x->n == 0) fprintf(f, "    (empty)\n");
    else if ((ends_with(x->name, ".attn_weights") || ends_with(x->name, ".attn_scores")) && x->ndim == 3)
        text_attention(f, t, x);
    else if (ends_with(x->name, ".rope_angles") && x->ndim == 2) text_rope_angles(f, t, x);
    else if (x->is_int && is_token_tensor(x->name)) text_tokens(f, t, x);
    else if (ends_with(x->name, ".match") || ends_with(x->name, ".cumprod") || x->n <= 64) text_full(f, x);
    else text_summary(f, x);
}

/* ===========================================================================
 * The hooks: trace_real and trace_i64.
 * ======================================================================== */

/* Remember "<prefix>.position_ids" for labelling attention and RoPE. */
static int remember_positions(Tracer *t, const TensorView *x) {
    const char *dot = strrchr(x->name, '.');
    size_t lp = dot ? (size_t)(dot - x->name) : 0;
    if (!x->is_int || x->ndim != 1 || lp == 0 || lp >= sizeof t->pos_prefix) return 0;
    int64_t *p = realloc(t->pos, (x->n ? x->n : 1) * sizeof *p);
    if (!p) {
        dflash_set_error("trace: out of memory");
        return -1;
    }
    memcpy(p, x->i, x->n * sizeof *p);
    t->pos = p;
    t->n_pos = (int64_t)x->n;
    memcpy(t->pos_prefix, x->name, lp);
    t->pos_prefix[lp] = '\0';
    return 0;
}

/* With a vocabulary: remember "<prefix>.input_ids" (the target's) or
 * "<prefix>.block_output_ids" (the draft's block), and when the same call's
 * position_ids follow the target's ids, which token each position was fed. */
static int remember_ids(Tracer *t, const TensorView *x) {
    const char *dot = strrchr(x->name, '.');
    size_t lp = dot ? (size_t)(dot - x->name) : 0;
    if (!x->is_int || x->ndim != 1 || lp == 0 || lp >= sizeof t->ids_prefix) return 0;
    if (ends_with(x->name, ".position_ids")) {
        if (t->ids_is_block || strlen(t->ids_prefix) != lp || strncmp(t->ids_prefix, x->name, lp) != 0 ||
            (int64_t)x->n != t->n_ids)
            return 0;
        for (size_t k = 0; k < x->n; k++) {
            int64_t p = x->i[k];
            if (p < 0 || p > (int64_t)1 << 30) continue;
            if (p >= t->n_tok_at) {
                int64_t n = p + 1 > 2 * t->n_tok_at ? p + 1 : 2 * t->n_tok_at;
                int64_t *nt = realloc(t->tok_at, (size_t)n * sizeof *nt);
                if (!nt) { dflash_set_error("trace: out of memory"); return -1; }
                for (int64_t q = t->n_tok_at; q < n; q++) nt[q] = -1;
                t->tok_at = nt;
                t->n_tok_at = n;
            }
            t->tok_at[p] = t->ids[k];
        }
        return 0;
    }
    int64_t *ids = realloc(t->ids, (x->n ? x->n : 1) * sizeof *ids);
    if (!ids) { dflash_set_error("trace: out of memory"); return -1; }
    memcpy(ids, x->i, x->n * sizeof *ids);
    t->ids = ids;
    t->n_ids = (int64_t)x->n;
    t->ids_is_block = ends_with(x->name, ".block_output_ids");
    memcpy(t->ids_prefix, x->name, lp);
    t->ids_prefix[lp] = '\0';
    return 0;
}

/* Write one tensor wherever it goes: <name>.npy + a manifest line, and the
 * text trace. The filter is checked first so filtered names cost nothing. */
static int record(Tracer *t, TracePhase ph, const char *name, const char *meaning,
                  int is_int, const void *data, int ndim, const int64_t *shape) {
    if (!t) return 0;
    /* positions label the attention and RoPE tables even when filtered out */
    if (t->text && is_int && ndim == 1 && shape && data && ends_with(name, ".position_ids")) {
        TensorView p = {name, "", 1, NULL, data, 1, shape, shape[0] > 0 ? (size_t)shape[0] : 0};
        if (remember_positions(t, &p) != 0) return tracer_fail(t);
    }
    /* and, with a vocabulary, the tokens at those positions (words for the keys) */
    if (t->text && t->vocab && is_int && ndim == 1 && shape && data &&
        (ends_with(name, ".input_ids") || ends_with(name, ".block_output_ids") || ends_with(name, ".position_ids"))) {
        TensorView p = {name, "", 1, NULL, data, 1, shape, shape[0] > 0 ? (size_t)shape[0] : 0};
        if (remember_ids(t, &p) != 0) return tracer_fail(t);
    }
    if (!name_wanted(t, name)) return 0;
    if (t->failed) {
        dflash_set_error("%s", t->error);
        return -1;
    }
    /* the caller's contract: a file-name-safe name, a sane shape */
    size_t ln = strlen(name);
    if (ln == 0 || ln > TRACE_MAX_NAME || name[0] == '.' || strchr(name, '/')) {
        dflash_set_error("trace: bad tensor name \"%s\" (1..%d characters, no '/', not starting "
                         "with '.')", name, TRACE_MAX_NAME);
        return tracer_fail(t);
    }
    if (ndim < 0 || ndim > TRACE_MAX_NDIM || (ndim > 0 && !shape)) {
        dflash_set_error("trace: %s: bad ndim %d (expected 0..%d with a shape)", name, ndim,
                         TRACE_MAX_NDIM);
        return tracer_fail(t);
    }
    size_t n = 1;
    for (int a = 0; a < ndim; a++) {
        /* the element count must fit a size_t of bytes (8 per element) */
        if (shape[a] < 0 || (shape[a] > 0 && n > (SIZE_MAX / 8) / (size_t)shape[a])) {
            dflash_set_error("trace: %s: bad shape: axis %d is %lld", name, a, (long long)shape[a]);
            return tracer_fail(t);
        }
        n *= (size_t)shape[a];
    }
    if (n > 0 && !data) {
        dflash_set_error("trace: %s: no data for %zu values", name, n);
        return tracer_fail(t);
    }
    int r = namemap_add(&t->written, name, 0);
    if (r != 0) {
        if (r == 1) dflash_set_error("trace: the tensor \"%s\" was recorded twice in one trace "
                                     "(a bug in the caller: names must be unique)", name);
        else dflash_set_error("trace: out of memory");
        return tracer_fail(t);
    }

    TensorView x = {name, meaning ? meaning : "", is_int, is_int ? NULL : data,
                    is_int ? data : NULL, ndim, shape, n};
    if (t->tmp_dir) {
        char file[TRACE_MAX_NAME + 8];
        snprintf(file, sizeof file, "%s.npy", name);
        char *path = path_join(t->tmp_dir, file);
        if (!path) {
            dflash_set_error("trace: out of memory");
            return tracer_fail(t);
        }
        int w = trace_npy_file(path, is_int, data, ndim, shape, n);
        free(path);
        if (w != 0) return tracer_fail(t);
        /* the manifest line: JSON, strings escaped */
        FILE *m = t->manifest;
        const char *field[4] = {name, file, ph.phase ? ph.phase : "", x.meaning};
        fprintf(m, "{\"name\":\"");
        for (int s = 0; s < 4; s++) {
            for (const unsigned char *c = (const unsigned char *)field[s]; *c; c++) {
                if (*c == '"' || *c == '\\') fprintf(m, "\\%c", *c);
                else if (*c == '\n') fprintf(m, "\\n");
                else if (*c == '\t') fprintf(m, "\\t");
                else if (*c < 0x20) fprintf(m, "\\u%04x", *c);
                else fputc(*c, m);
            }
            if (s == 0) fprintf(m, "\",\"file\":\"");
            if (s == 1) {
                fprintf(m, "\",\"dtype\":\"%s\",\"shape\":[", is_int ? "int64" : REAL_DTYPE_NAME);
                for (int a = 0; a < ndim; a++) fprintf(m, a ? ",%lld" : "%lld", (long long)shape[a]);
                fprintf(m, "],\"phase\":\"");
            }
            if (s == 2) fprintf(m, "\",\"round\":%d,\"meaning\":\"", ph.round);
        }
        fprintf(m, "\"");
        /* the run's flags, once: `dflash diff` reruns them on the other precision's build */
        if (t->lines++ == 0 && t->run_argv) fprintf(m, ",\"argv\":%s", t->run_argv);
        fprintf(m, "}\n");
        /* flushed per line so a full disk is reported at the tensor it hit */
        if (fflush(m) != 0 || ferror(m)) {
            dflash_set_error("trace: cannot write %s: %s", t->manifest_path, strerror(errno));
            return tracer_fail(t);
        }
    }
    if (t->text) {
        text_tensor(t, ph, &x);
        if (fflush(t->text) != 0 || ferror(t->text)) {
            dflash_set_error("trace: cannot write %s: %s", t->text_path, strerror(errno));
            return tracer_fail(t);
        }
    }
    return 0;
}

int trace_real(Tracer *t, TracePhase ph, const char *name, const char *meaning,
               const real *data, int ndim, const int64_t *shape) {
    return record(t, ph, name, meaning, 0, data, ndim, shape);
}

/* The hook dflash.c calls: each hand, shaped by the trace-name table
 * (formats/tracenames.c), goes to trace_real / trace_i64 with the table's meaning. */
static int hook_shaped(void *ctx, const TraceTensor *x) {
    const char *meaning = x->spec ? x->spec->meaning : "";
    return x->is_int ? trace_i64(ctx, x->ph, x->name, meaning, x->data, x->ndim, x->shape)
                     : trace_real(ctx, x->ph, x->name, meaning, x->data, x->ndim, x->shape);
}
static int hook_tensor(void *ctx, const TraceHand *hand) { return trace_shape_hand(hand, hook_shaped, ctx); }

const TraceHook *trace_hook(Tracer *t) {
    t->hook.tensor = hook_tensor;
    t->hook.ctx = t;
    return &t->hook;
}

int trace_i64(Tracer *t, TracePhase ph, const char *name, const char *meaning,
              const int64_t *data, int ndim, const int64_t *shape) {
    return record(t, ph, name, meaning, 1, data, ndim, shape);
}

/* ---- per-position acceptance: a summary of the run's rounds ------------ */

int acceptance_count(const GenResult *r, int B, int *count) {
    for (int k = 0; k < r->n_rounds; k++)
        for (int i = 1; i < B && i <= r->rounds[k].acceptance_length; i++) count[i - 1]++;
    return r->n_rounds;
}

int trace_acceptance(Tracer *t, const GenResult *r, int B) {
    if (!t || B < 2 || r->n_rounds == 0) return 0;
    int count[DFLASH_MAX_BLOCK] = {0};
    real frac[DFLASH_MAX_BLOCK];  /* (B-1) */
    int rounds = acceptance_count(r, B, count);
    for (int i = 0; i + 1 < B; i++) frac[i] = (real)count[i] / (real)rounds;
    const TraceName *row = dflash_trace_name("acceptance_per_position", 0);
    int64_t shape[1] = {B - 1};
    return trace_real(t, (TracePhase){"final", 0}, "acceptance_per_position", row ? row->meaning : "", frac, 1,
                      shape);
}
