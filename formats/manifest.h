/* formats/manifest.h - a trace directory's manifest (formats/manifest.c): which tensors a
 * trace holds, in production order, and in which files. Defines:
 *
 *   - StrList (a growable list of owned strings) and NameMap (name -> int,
 *     open addressing), the two containers the trace readers share;
 *   - Manifest and manifest_load: trace.jsonl, or (for `dflash diff` and
 *     `dflash explore`) an oracle's names.json (file = name + ".npy");
 *   - trace_jsonl_each: trace.jsonl, line by line, each line checked to be
 *     a JSON object with "name" and "file" strings.
 *
 * Functions return 0 or -1 with dflash_errmsg naming the file and line.
 */
#ifndef DFLASH_MANIFEST_H
#define DFLASH_MANIFEST_H

#include <stddef.h>

#include "formats/files.h"
#include "formats/json.h"

typedef struct {
    char **s;  /* (n) owned strings */
    int n, cap;
} StrList;
int  strlist_push(StrList *l, const char *s);  /* a copy of s; -1 out of memory */
void strlist_free(StrList *l);

typedef struct {
    char **keys;   /* (cap) owned, NULL = empty slot */
    int *vals;     /* (cap) */
    size_t cap, count;
} NameMap;
/* The value stored for key, or -1. */
int  namemap_get(const NameMap *m, const char *key);
/* 0 added, 1 key was already there (value unchanged), -1 out of memory. */
int  namemap_add(NameMap *m, const char *key, int val);
void namemap_free(NameMap *m);

typedef struct {
    StrList names;   /* tensor names in production order */
    StrList files;   /* (names.n) file names inside the directory */
    StrList meta;    /* (names.n) "dtype|d0,d1" from trace.jsonl, "" when not given */
    StrList phase;   /* (names.n) the "phase" field, "" when not given */
    StrList round;   /* (names.n) the "round" field as decimal text, "" when not given */
    StrList meaning; /* (names.n) the "meaning" field, "" when not given */
    StrList argv;    /* the run's flags ("argv" of the first line giving it: trace.c writes it) */
    int has_argv;
    NameMap index;   /* name -> position */
    char *path;      /* the manifest file read */
} Manifest;
/* Load dir's manifest: trace.jsonl, or (allow_names_json) names.json.
 * Returns 0 loaded, 1 the directory has no manifest, -1 error (message set). */
int  manifest_load(Manifest *m, const char *dir, int allow_names_json);
void manifest_free(Manifest *m);
/* A manifest's file must be a plain "<something>.npy" inside the directory. */
int  manifest_file_ok(const char *file);
/* THE manifest validator's header check, shared by diff, explore, figures and
 * replay: the manifest's dtype and shape for tensor k (when it gives them)
 * must be those of its .npy header a, read from path. 0, or -1 with dflash_errmsg. */
int  manifest_check_npy(const Manifest *m, int k, const char *path, const NpyArray *a);
/* npy_open(dir/file of tensor k) and manifest_check_npy: 0, or -1 with dflash_errmsg. */
int  manifest_open_npy(const Manifest *m, const char *dir, int k, NpyArray *a);
/* A directory without a manifest: its "<name>.npy" files, in order's name
 * order (NULL: none), then the others by name; no dtype, shape, phase,
 * round. 0, or -1 with dflash_errmsg. */
int  manifest_from_npy_files(Manifest *m, const char *dir, const Manifest *order);
/* The two parsers manifest_load uses (m->path set by the caller; for the fuzzer). */
int  manifest_parse_jsonl(Manifest *m, const char *text, size_t len);
int  manifest_parse_names_json(Manifest *m, const char *text, size_t len);

/* trace.jsonl text: fn(ctx, object, line number) for each non-blank line, an
 * object with "name" and "file" strings (checked); 0, or -1 with dflash_errmsg */
int  trace_jsonl_each(const char *path, const char *text, size_t len,
                      int (*fn)(void *ctx, const Json *obj, int line), void *ctx);

#endif /* DFLASH_MANIFEST_H */
