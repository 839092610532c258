/* formats/files.h - the file layer every program of dflash.c shares (formats/files.c):
 *
 *   - file_read_all / file_read_max: THE whole-file reader (a regular file
 *     only, NUL-terminated), and file_open_regular, its one open check;
 *   - path_join: THE path join ("dir" + "/" + "name"), and str_cat (a + b);
 *   - NpyArray, npy_open / npy_load / npy_read / npy_parse / npy_free,
 *     npy_f / npy_i / npy_dtype_name: THE .npy reader (any dtype diff
 *     reads), NpyValues / npy_read_values: the same as doubles or int64;
 *     npy_write: THE .npy writer (format 1.0, little-endian, NumPy's padding);
 *   - OutFile, out_open / out_stream / out_finish / out_commit / out_abort:
 *     an output written safely: into a temporary file beside the final path,
 *     renamed into place at commit, removed on failure and by the signal
 *     cleanup;
 *   - the partial-output registry (out_register, ..., out_cleanup_on_signal):
 *     every partial output of the process (OutFiles, the tracer's
 *     directories and lock), removed from a signal handler with unlink() and
 *     rmdir() alone.
 *
 * Errors: functions return 0 (or a pointer) on success and -1 (NULL) with a
 * one-line dflash_errmsg naming the file (dflash.h, dflash_set_error).
 */
#ifndef DFLASH_FILES_H
#define DFLASH_FILES_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------
 * Reading files and joining paths.
 */

/* Open path for reading if it is a regular file (a FIFO must not block the
 * open; a directory or a device is refused: "expected a regular file, got
 * ..."); *size gets its size. NULL with dflash_errmsg. */
FILE *file_open_regular(const char *path, size_t *size);
/* The same check, as a file descriptor (for mmap); -1 with dflash_errmsg. */
int file_open_fd(const char *path, size_t *size);
/* All of path into a malloc'd NUL-terminated buffer (*bytes, *len bytes
 * before the NUL). -1 with dflash_errmsg. */
int file_read_all(const char *path, char **bytes, size_t *len);
/* The same, refusing a file of more than max bytes ("larger than max bytes"). */
int file_read_max(const char *path, size_t max, char **bytes, size_t *len);
/* Token ids as text (an ids file: dflash eval --ids-file, make bench's
 * learned pair, learned/tests/test_learned.c read toy_weights/learned/heldout.ids):
 * s..end (one line, or a whole file) is ids 0..V-1 separated by white space
 * or commas, a "|" skipped (dflash train --data's prompt mark); appended to
 * *ids (realloc'd; *n of *cap). -1 with dflash_errmsg naming path and line:
 * "PATH: line L: expected token ids 0..V-1, got "X"". */
int ids_parse_text(const char *path, const char *s, const char *end, int line, int V, int **ids, int *n, int *cap);
/* One sequence a line: the first at most max_len ids of each of the first
 * N lines of path holding at least min_len (1 <= min_len <= max_len) into
 * prompts[i * max_len ..], their count into lens[i] (NULL: not wanted).
 * Returns how many lines were taken (< N when the file has fewer), -1 with
 * dflash_errmsg (unreadable; an id that is not one, file and line named). */
int ids_file_prompts(const char *path, int N, int min_len, int max_len, int V, int *prompts, int *lens);
/* dir + "/" + name, malloc'd; NULL (with dflash_errmsg) when out of memory. */
char *path_join(const char *dir, const char *name);
/* The process's umask (read without changing it). */
mode_t file_umask(void);
/* a + b ("<dir>.lock", "<name>.npy"), malloc'd; NULL (with dflash_errmsg) when
 * out of memory. */
char *str_cat(const char *a, const char *b);

/* ---------------------------------------------------------------------------
 * .npy files. The reader reads what NumPy writes: format 1.0 (u16 header
 * length), 2.0 and 3.0 (u32); floats f4 f8, integers i1 i2 i4 i8 u1 u2 u4,
 * booleans b1, little- or big-endian ('<', '>', '|', and '=' for this
 * host's order); C or Fortran order; any ndim up to NPY_MAX_NDIM, including
 * (). Nothing is read before it is checked: npy_open reads and validates the
 * header only and checks the file's size against shape and descr; npy_load
 * then reads the data, in its own dtype, as little-endian C order.
 */
#define NPY_MAX_NDIM 32          /* NumPy 1.x's NPY_MAXDIMS */
#define NPY_MAX_HEADER (1 << 20) /* headers longer than 1 MiB are refused */

typedef struct {
    char descr[8];       /* as written: "<f4", ">i2", "|b1", ... */
    char kind;           /* 'f' float, 'i' signed, 'u' unsigned, 'b' bool */
    int item;            /* bytes per value: 1, 2, 4 or 8 */
    int big_endian;      /* the file's byte order (the data is swapped on load) */
    int fortran;         /* the file's order (the data is reordered on load) */
    int ndim;
    int64_t shape[NPY_MAX_NDIM];
    size_t n;            /* product(shape) */
    size_t offset;       /* where the data starts in the file */
    size_t file_size;    /* the size npy_open checked */
    unsigned char *data; /* (n * item) after npy_load: little-endian, C order */
    void *map;           /* npy_load of a large tensor: the mapping data points into (NULL: malloc'd) */
    size_t map_len;
} NpyArray;

/* The header only (validated, the file's size checked); a->data stays NULL. */
int  npy_open(const char *path, NpyArray *a);
/* The data of a tensor npy_open checked (the file must not have changed). */
int  npy_load(const char *path, NpyArray *a);
/* The first n values (C order) of a tensor npy_open checked: one seek to
 * the data and one bounded read, swapped to little-endian; a->data holds n
 * values (a->n is unchanged). A Fortran-order file of more than one axis
 * has no C-order prefix on disk: n < a->n is refused there (and n > a->n). */
int  npy_load_first(const char *path, NpyArray *a, size_t n);
/* npy_open + npy_load. */
int  npy_read(const char *path, NpyArray *a);
/* A whole .npy file held in memory: the same checks, the data copied; reads
 * nothing outside buf[0..size). path names it in messages. */
int  npy_parse(const char *path, const unsigned char *buf, size_t size, NpyArray *a);
void npy_free(NpyArray *a);
/* Value k of a loaded float array, as a double. */
double  npy_f(const NpyArray *a, size_t k);
/* Value k of a loaded integer or bool array, as an int64. */
int64_t npy_i(const NpyArray *a, size_t k);
/* NumPy's name of a's dtype ("float32", "int64", "bool"): what trace.jsonl says */
const char *npy_dtype_name(const NpyArray *a);

/* A .npy file's values widened: doubles (f) or int64 (i). */
typedef struct {
    char descr[8];
    int is_int;          /* integers or bools: i; floats: f */
    int ndim;
    int64_t shape[NPY_MAX_NDIM];
    size_t n;            /* product(shape) */
    double *f;           /* (n) when !is_int */
    int64_t *i;          /* (n) when is_int */
} NpyValues;
/* npy_read, then every value widened. -1 with dflash_errmsg. */
int  npy_read_values(const char *path, NpyValues *v);
void npy_values_free(NpyValues *v);

/* Write one .npy file (format 1.0, C order, little-endian whatever the
 * host, the header padded with spaces and ended by '\n' so that magic +
 * lengths + header is a multiple of 64 bytes, as NumPy does) to f. descr is
 * "<f4" (data: float), "<f8" (double) or "<i8" (int64_t); n = product(shape)
 * values; 0 <= ndim <= NPY_MAX_NDIM. Returns 0, or -1 when a write failed
 * (errno set; the caller names the file). */
int  npy_write(FILE *f, const char *descr, int ndim, const int64_t *shape, const void *data, size_t n);

/* ---------------------------------------------------------------------------
 * OutFile: one output file written safely. out_open creates
 * "<path>.partial.XXXXXX" beside path (an existing file keeps its mode; a
 * symbolic link is followed, so the link stays), registered so that a
 * signal removes it; out_commit renames it over path. "-" (stdout) and a
 * file this process already has open for writing (stdout or stderr by any
 * name, /dev/fd/N, >> log) are written through that descriptor, so
 * appending stays appending; devices and FIFOs are written in place. The
 * temporary file is fcntl-locked while it is written, so a later run tells
 * it from one whose writer was killed (out_remove_stale).
 * Messages start with `what` ("trace", "dflash explore", ...).
 *
 *   OutFile *o = out_open(path, "figures");
 *   if (!o) return -1;
 *   fprintf(out_stream(o), ...);
 *   return out_commit(o);      (or out_abort(o) when the output is not wanted)
 */
typedef struct OutFile OutFile;

/* NULL with dflash_errmsg ("<what>: cannot create <path>: ...", "<what>:
 * <path> is a directory; give a file name"). */
OutFile *out_open(const char *path, const char *what);
FILE *out_stream(OutFile *o);
/* Flush and close (the data is in the temporary file; nothing renamed yet).
 * 0, or -1 with dflash_errmsg ("<what>: cannot write <path>: ..."); then
 * out_abort. Idempotent. */
int  out_finish(OutFile *o);
/* out_finish, then rename into place (signals blocked). Frees o. -1 with
 * dflash_errmsg: the temporary file is removed and path is as it was. */
int  out_commit(OutFile *o);
/* Close and remove the temporary file; path stays as it was. Frees o (NULL:
 * nothing) and leaves dflash_errmsg as it was. */
void out_abort(OutFile *o);

/* The kind of name this program gives its own files, or NULL: "<x>.lock"
 * (a trace directory's lock), "<x>.partial.XXXXXX" (an output being
 * written) and "<x>.old.XXXXXX" (an earlier trace being replaced); six
 * characters from mkstemp/mkdtemp. The next run removes such files when
 * their writer is gone, so no output may be named like them. */
const char *out_own_name(const char *path);
/* THE check that no output is an input, for every subcommand. outs: the
 * files and directories a run will write (path NULL: skipped; is_dir 1: a
 * directory replaced whole, 2: a directory new files are written into, as
 * dflash figures' OUT_DIR); inputs: every file the run reads (a directory
 * stands for the regular files directly inside it, and for itself against
 * is_dir 2). Refused (-1, one line starting "<what>: "): an output that is
 * an input (compared resolved: symbolic links, "..", and by device and
 * inode: hard links), a directory output replaced whole holding an input,
 * an output equal to or inside a directory output replaced whole, a
 * directory output (replaced whole or written into) that is an input
 * directory or inside one, two
 * outputs that are one file, an output named like the program's own files
 * (out_own_name, also through symbolic links). */
typedef struct {
    const char *path;
    const char *label;  /* "the trace directory", "the page", ... */
    int is_dir;         /* 0 a file, 1 a directory replaced whole, 2 a directory written into */
} OutPath;
int out_check_paths(const char *what, const OutPath *outs, int n_out, const char *const *inputs, int n_inputs);
/* Remove the "<final>.partial.XXXXXX" files that earlier runs left when
 * they were killed: those nobody holds an fcntl lock on (out_open locks its
 * temporary file until it is renamed or removed), saying so on stderr, one
 * line each. out_open calls it; best effort. */
void out_remove_stale(const char *final);

/* The entries beside final (in its folder) named final's last part +
 * ".partial.XXXXXX" (and, dirs, + ".old.XXXXXX") that this program makes
 * (out_own_name) and this run has not registered: regular files (dirs 0) or
 * folders (dirs 1); fn(ctx, path) removes one (0: removed, said on stderr,
 * one line each). Best effort: what cannot be removed stays. */
typedef int (*OutSiblingFn)(void *ctx, const char *path);
void out_stale_siblings(const char *final, int dirs, OutSiblingFn fn, void *ctx);

/* A finished folder tmp onto dir, with the caller's signals blocked: an
 * existing dir (exists) is first moved into an empty "<dir>.old.XXXXXX"
 * (what: "the earlier draft" in the message if it cannot be), tmp renamed
 * onto dir (on failure the old one moved back), then the old folder's files
 * names[0..n_names-1] and the folder removed. label starts the messages
 * ("--out"). 0, or -1 with dflash_errmsg. */
int dir_replace(const char *label, const char *dir, const char *tmp, int exists, const char *what,
                const char *const *names, int n_names);

/* ---------------------------------------------------------------------------
 * The partial-output registry. Every partial output is registered here
 * BEFORE it is created, so that out_cleanup_on_signal can remove all of it
 * from a signal handler with unlink() and rmdir() alone (async-signal-safe).
 * The list changes only while SIGINT, SIGTERM, SIGHUP and SIGPIPE are
 * blocked (out_block_signals), so a handler never sees it half updated.
 * Entries are removed newest first. kind: 'f' a file (unlink), 'd' a
 * directory (rmdir: only when empty), 'l' a lock file (unlink).
 */
void out_block_signals(sigset_t *old);
void out_restore_signals(const sigset_t *old);
/* Register path for owner (NULL: no owner; see out_forget's under). Call
 * with the signals blocked, before creating it. -1 (out of memory). */
int  out_register(const void *owner, char kind, const char *path);
/* Drop the newest entry (it was not created after all). Signals blocked. */
void out_unregister_last(void);
/* Forget (without removing) the entries of owner (of that kind; 0: any)
 * and those under under/ (NULL: none). */
void out_forget(const void *owner, char kind, const char *under);
/* Remove (unlink or rmdir, newest first) the entries of owner, and keep
 * them registered (out_forget them after). */
void out_remove_owned(const void *owner);
/* 1 when an entry of this kind whose owner is not `except` names the file
 * st (same device and inode). */
int  out_registered_same(const void *except, char kind, const struct stat *st);
/* For a signal handler: removes every registered partial output with
 * unlink() and rmdir() only. Async-signal-safe; the outputs must not be
 * used afterwards. */
void out_cleanup_on_signal(void);

/* ---------------------------------------------------------------------------
 * A directory output's lock: an fcntl() write lock on the empty file
 * "<dir>.lock", held from the start of the run to its end, so one run at a
 * time writes dir (another is refused: "<what>: another dflash run is
 * writing <label> <dir> (it holds the lock ...)"). The lock dies with its
 * process, so a killed run does not block the next; the run that holds it
 * may remove the "<dir>.partial.XXXXXX" / "<dir>.old.XXXXXX" a killed run
 * left. The lock file is registered under owner (give it its own owner: the
 * signal cleanup removes it, out_lock_release removes it and closes fd).
 * trace.c takes its trace directories' locks with it.
 */
int  out_lock_take(const void *owner, const char *dir, const char *what, const char *label, int *fd);
void out_lock_release(const void *owner, int fd);

#endif /* DFLASH_FILES_H */
