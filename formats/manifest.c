/* formats/manifest.c - reading a trace directory's manifest (formats/manifest.h):
 * trace.jsonl (ours: one JSON object per line), or the oracle's names.json
 * (a JSON array of names). The tracer (trace.c: is a directory a trace?),
 * `dflash diff` (cli/diff.c) and `dflash explore` (explorer/explore.c) read manifests
 * through it.
 */
#include "formats/manifest.h"
#include "dflash.h"
#include "formats/files.h"
#include "formats/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

/* ===========================================================================
 * StrList: a growable list of strings.
 * ======================================================================== */


int strlist_push(StrList *l, const char *s) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **p = realloc(l->s, (size_t)cap * sizeof *p);
        if (!p) return -1;
        l->s = p;
        l->cap = cap;
    }
    l->s[l->n] = strdup(s);
    if (!l->s[l->n]) return -1;
    l->n++;
    return 0;
}

void strlist_free(StrList *l) {
    for (int i = 0; i < l->n; i++) free(l->s[i]);
    free(l->s);
    l->s = NULL;
    l->n = l->cap = 0;
}

/* ===========================================================================
 * NameMap: name -> int, open addressing. Used to catch a tensor name written
 * twice, and by diff to find a name in the other trace's manifest.
 * ======================================================================== */


/* The slot holding key, or the empty slot where it would go. The names come
 * from files (trace.jsonl, names.json): the hash is keyed per process
 * (formats/json.h), so no file can choose names that share one slot. */
static size_t namemap_slot(const NameMap *m, const char *key) {
    size_t i = (size_t)(keyed_hash(key, strlen(key)) & (m->cap - 1));
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
    return i;
}

/* The value stored for key, or -1. */
int namemap_get(const NameMap *m, const char *key) {
    if (m->cap == 0) return -1;
    size_t i = namemap_slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

/* Returns 0 when added, 1 when key was already there (value unchanged),
 * -1 when out of memory. The table doubles at half load, so probes stay short. */
int namemap_add(NameMap *m, const char *key, int val) {
    if (2 * (m->count + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        NameMap g = {calloc(cap, sizeof(char *)), calloc(cap, sizeof(int)), cap, m->count};
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t j = namemap_slot(&g, m->keys[i]);
            g.keys[j] = m->keys[i];
            g.vals[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    size_t i = namemap_slot(m, key);
    if (m->keys[i]) return 1;
    m->keys[i] = strdup(key);
    if (!m->keys[i]) return -1;
    m->vals[i] = val;
    m->count++;
    return 0;
}

void namemap_free(NameMap *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ===========================================================================
 * Manifests. A trace's manifest is trace.jsonl (ours); for diff, a directory
 * written by a reference script on the published code is also accepted through
 * its names.json (a JSON array of names; file = name + ".npy").
 * ======================================================================== */


void manifest_free(Manifest *m) {
    strlist_free(&m->names);
    strlist_free(&m->files);
    strlist_free(&m->meta);
    strlist_free(&m->phase);
    strlist_free(&m->round);
    strlist_free(&m->meaning);
    strlist_free(&m->argv);
    namemap_free(&m->index);
    free(m->path);
    memset(m, 0, sizeof *m);
}

/* A manifest's file must be a plain "<something>.npy" inside the directory. */
int manifest_file_ok(const char *file) {
    size_t n = strlen(file);
    return n > 4 && strcmp(file + n - 4, ".npy") == 0 && !strchr(file, '/') && file[0] != '.';
}

static int manifest_add(Manifest *m, const char *name, const char *file, const char *meta, const char *phase,
                        const char *round, const char *meaning) {
    if (!manifest_file_ok(file)) {
        dflash_set_error("%s: entry \"%s\": file \"%s\" is not a plain .npy file name",
                         m->path, name, file);
        return -1;
    }
    int r = namemap_add(&m->index, name, m->names.n);
    if (r == 1) {
        dflash_set_error("%s: the name \"%s\" is listed twice", m->path, name);
        return -1;
    }
    if (r < 0 || strlist_push(&m->names, name) != 0 || strlist_push(&m->files, file) != 0 ||
        strlist_push(&m->meta, meta) != 0 || strlist_push(&m->phase, phase) != 0 ||
        strlist_push(&m->round, round) != 0 || strlist_push(&m->meaning, meaning) != 0) {
        dflash_set_error("%s: out of memory", m->path);
        return -1;
    }
    return 0;
}

/* "dtype|d0,d1,..." from an entry's optional "dtype" and "shape" (both or
 * neither), into out; "" when absent. -1 when present but malformed. */
static int manifest_meta(const Json *obj, char *out, size_t size) {
    const Json *dt = json_get(obj, "dtype"), *sh = json_get(obj, "shape");
    out[0] = 0;
    if (!dt && !sh) return 0;
    if (!dt || !sh || dt->type != JSON_STRING || sh->type != JSON_ARRAY || strlen(dt->string) > 16 ||
        sh->n > NPY_MAX_NDIM)
        return -1;
    size_t len = (size_t)snprintf(out, size, "%s|", dt->string);
    for (int d = 0; d < sh->n; d++) {
        const Json *v = &sh->items[d];
        if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0) return -1;
        len += (size_t)snprintf(out + len, size - len, d ? ",%lld" : "%lld", v->integer);
    }
    return 0;
}

/* trace.jsonl, line by line: each non-blank line is parsed with formats/json.c's
 * strict reader (its own message kept, e.g. for a duplicate key) and must be
 * an object with "name" and "file" strings; fn gets it with its line number.
 * Used by diff's manifest and by explorer/explore.c. */
int trace_jsonl_each(const char *path, const char *text, size_t len,
                     int (*fn)(void *ctx, const Json *obj, int line), void *ctx) {
    size_t start = 0;
    int line = 0;
    while (start < len) {
        size_t end = start;
        while (end < len && text[end] != '\n') end++;
        line++;
        size_t k = start;
        while (k < end && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) k++;
        if (k < end) {
            Json obj;
            char what[64 + 4096];
            snprintf(what, sizeof what, "%.4000s line %d", path, line);
            if (json_parse(text + start, end - start, what, &obj) != 0) return -1;
            const Json *name = json_get(&obj, "name"), *file = json_get(&obj, "file");
            int r;
            if (!name || name->type != JSON_STRING || !file || file->type != JSON_STRING) {
                dflash_set_error("%s: line %d is not a JSON object with \"name\" and \"file\" strings", path, line);
                r = -1;
            } else {
                r = fn(ctx, &obj, line);
            }
            json_free(&obj);
            if (r != 0) return -1;
        }
        start = end + 1;
    }
    return 0;
}

/* one trace.jsonl line into diff's manifest: name, file, and "dtype" and
 * "shape", "phase" and "round" when given ("meaning" is prose: not kept) */
static int manifest_line(void *ctx, const Json *obj, int line) {
    Manifest *m = ctx;
    char meta[32 + 24 * NPY_MAX_NDIM], round[32] = "";
    if (manifest_meta(obj, meta, sizeof meta) != 0) {
        dflash_set_error("%s: line %d: \"dtype\" and \"shape\" must come together, a dtype string "
                         "and an array of non-negative integers", m->path, line);
        return -1;
    }
    const Json *ph = json_get(obj, "phase"), *rd = json_get(obj, "round");
    if (ph && (ph->type != JSON_STRING || strlen(ph->string) > 64)) {
        dflash_set_error("%s: line %d: \"phase\" must be a string (prefill, draft, verify, final, train)", m->path,
                         line);
        return -1;
    }
    if (rd && (rd->type != JSON_NUMBER || !rd->is_integer || rd->integer < 0)) {
        dflash_set_error("%s: line %d: \"round\" must be an integer >= 0", m->path, line);
        return -1;
    }
    if (rd) snprintf(round, sizeof round, "%lld", (long long)rd->integer);
    const Json *mn = json_get(obj, "meaning"), *av = json_get(obj, "argv");
    if (mn && mn->type != JSON_STRING) {
        dflash_set_error("%s: line %d: \"meaning\" must be a string", m->path, line);
        return -1;
    }
    /* the run's flags (trace.c writes them on the first line): kept from the first line giving them */
    if (av) {
        int ok = av->type == JSON_ARRAY;
        for (int i = 0; ok && i < av->n; i++) ok = av->items[i].type == JSON_STRING;
        if (!ok) {
            dflash_set_error("%s: line %d: \"argv\" must be an array of strings (the run's flags)", m->path, line);
            return -1;
        }
        for (int i = 0; !m->has_argv && i < av->n; i++)
            if (strlist_push(&m->argv, av->items[i].string) != 0) {
                dflash_set_error("%s: out of memory", m->path);
                return -1;
            }
        m->has_argv = 1;
    }
    return manifest_add(m, json_get(obj, "name")->string, json_get(obj, "file")->string, meta,
                        ph ? ph->string : "", round, mn ? mn->string : "");
}

int manifest_parse_jsonl(Manifest *m, const char *text, size_t len) {
    return trace_jsonl_each(m->path, text, len, manifest_line, m);
}

/* Parse names.json: ["name", "name", ...]. */
int manifest_parse_names_json(Manifest *m, const char *text, size_t len) {
    Json arr;
    if (json_parse(text, len, m->path, &arr) != 0) goto bad;
    int ok = arr.type == JSON_ARRAY;
    for (int i = 0; ok && i < arr.n; i++) ok = arr.items[i].type == JSON_STRING;
    if (!ok) { json_free(&arr); goto bad; }
    for (int i = 0; i < arr.n; i++) {
        char *file = str_cat(arr.items[i].string, ".npy");
        int r = file ? manifest_add(m, arr.items[i].string, file, "", "", "", "") : -1;
        free(file);
        if (r != 0) { json_free(&arr); return -1; }
    }
    json_free(&arr);
    return 0;
bad:
    dflash_set_error("%s: expected a JSON array of name strings", m->path);
    return -1;
}

/* Load dir's manifest: trace.jsonl, or (allow_names_json) names.json.
 * Returns 0 loaded, 1 the directory has no manifest, -1 error (message set). */
int manifest_load(Manifest *m, const char *dir, int allow_names_json) {
    static const char *const files[2] = {"trace.jsonl", "names.json"};
    memset(m, 0, sizeof *m);
    for (int k = 0; k < (allow_names_json ? 2 : 1); k++) {
        m->path = path_join(dir, files[k]);
        if (!m->path) {
            dflash_set_error("out of memory");
            return -1;
        }
        struct stat st;
        if (stat(m->path, &st) != 0 && errno == ENOENT) {
            free(m->path);
            m->path = NULL;
            continue;
        }
        char *text;
        size_t len;
        if (file_read_all(m->path, &text, &len) != 0) {
            manifest_free(m);
            return -1;
        }
        int r = k == 0 ? manifest_parse_jsonl(m, text, len) : manifest_parse_names_json(m, text, len);
        free(text);
        if (r != 0) {
            manifest_free(m);
            return -1;
        }
        return 0;
    }
    return 1;
}

/* The manifest's "dtype|shape" for tensor k must match its .npy header a
 * (read from path): "float32|8,4,7" against the header's. 0, or -1 with
 * dflash_errmsg naming both. Nothing to check when the manifest gives none. */
int manifest_check_npy(const Manifest *m, int k, const char *path, const NpyArray *a) {
    const char *meta = m->meta.s[k];
    if (!meta[0]) return 0;
    char have[64 + 24 * NPY_MAX_NDIM];
    size_t len = (size_t)snprintf(have, sizeof have, "%s|", npy_dtype_name(a));
    for (int d = 0; d < a->ndim; d++)
        len += (size_t)snprintf(have + len, sizeof have - len, d ? ",%lld" : "%lld", (long long)a->shape[d]);
    if (strcmp(have, meta) == 0) return 0;
    dflash_set_error("%s: the manifest says dtype|shape \"%s\" but the file's header says \"%s\"", path, meta, have);
    return -1;
}

/* npy_open of tensor k's file in dir, then manifest_check_npy. */
int manifest_open_npy(const Manifest *m, const char *dir, int k, NpyArray *a) {
    char *p = path_join(dir, m->files.s[k]);
    int r = p && npy_open(p, a) == 0 && manifest_check_npy(m, k, p, a) == 0 ? 0 : -1;
    free(p);
    return r;
}

static int by_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* A directory without a manifest (a port that stopped before writing it):
 * its "<name>.npy" files as a manifest, in order's order (the names order
 * has whose file is here), then the rest by name. No dtype, shape, phase
 * or round. 0, or -1 with dflash_errmsg (no .npy file at all is an error). */
int manifest_from_npy_files(Manifest *m, const char *dir, const Manifest *order) {
    memset(m, 0, sizeof *m);
    m->path = str_cat(dir, " (no manifest: its .npy files)");  /* NULL: str_cat set the message */
    StrList found = {0};
    NameMap have = {0};
    DIR *d = opendir(dir);
    int rc = m->path && d ? 0 : -1;
    if (!d) dflash_set_error("%s: cannot open directory: %s", dir, strerror(errno));
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (!manifest_file_ok(e->d_name) || n > 4096) continue;
        char *name = strdup(e->d_name);
        if (name) name[n - 4] = 0;
        rc = name && strlist_push(&found, name) == 0 && namemap_add(&have, name, 0) >= 0 ? 0 : -1;
        if (rc) dflash_set_error("%s: out of memory", dir);
        free(name);
    }
    if (d) closedir(d);
    if (rc == 0 && found.n == 0) {
        dflash_set_error("%s: no trace.jsonl, names.json or .npy file: not a trace directory", dir);
        rc = -1;
    }
    if (found.n > 1) qsort(found.s, (size_t)found.n, sizeof *found.s, by_str);
    for (int k = 0; rc == 0 && order && k < order->names.n; k++) {
        const char *name = order->names.s[k];
        char *file = str_cat(name, ".npy");
        if (!file) rc = -1;  /* str_cat set the message */
        else if (namemap_get(&have, name) >= 0 && namemap_get(&m->index, name) < 0)
            rc = manifest_add(m, name, file, "", "", "", "");
        free(file);
    }
    for (int k = 0; rc == 0 && k < found.n; k++) {
        if (namemap_get(&m->index, found.s[k]) >= 0) continue;
        char *file = str_cat(found.s[k], ".npy");
        rc = file ? manifest_add(m, found.s[k], file, "", "", "", "") : -1;
        free(file);
    }
    strlist_free(&found);
    namemap_free(&have);
    if (rc != 0) manifest_free(m);
    return rc;
}
