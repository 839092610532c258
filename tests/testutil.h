/* testutil.h - small helpers shared by the cmocka tests: scratch
 * directories, whole-file reads and writes, and capturing what a function
 * prints on stdout/stderr. All static inline so a test that does not use one
 * does not warn about it. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh, empty directory under /tmp (malloc'd path; NULL on failure). */
static inline char *tu_tmpdir(void) {
    char *p = strdup("/tmp/dflash-test.XXXXXX");
    if (p && !mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

/* rm -rf path. Returns 0 when it is gone. */
static inline int tu_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return -1;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            size_t n = strlen(path) + strlen(e->d_name) + 2;
            char *c = malloc(n);
            if (!c) break;
            snprintf(c, n, "%s/%s", path, e->d_name);
            tu_rmtree(c);
            free(c);
        }
        closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

/* a/b in a static ring of buffers, so a few can be alive at once. */
static inline const char *tu_path(const char *a, const char *b) {
    static char ring[8][1024];
    static int next;
    char tmp[sizeof ring[0]];  /* a or b may be an earlier ring entry */
    snprintf(tmp, sizeof tmp, "%s/%s", a, b);
    char *p = ring[next++ % 8];
    memcpy(p, tmp, sizeof tmp);
    return p;
}

static inline int tu_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* All of path, NUL-terminated (malloc'd; NULL when unreadable). */
static inline char *tu_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static inline int tu_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t put = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && put == len) ? 0 : -1;
}

/* Number of entries in a directory (without . and ..); -1 if unreadable. */
static inline int tu_count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Capture stdout and stderr (file descriptors 1 and 2) into a file. */
typedef struct {
    int saved_out, saved_err;
    char path[64];
} TuCapture;

static inline int tu_capture_begin(TuCapture *c) {
    fflush(stdout);
    fflush(stderr);
    snprintf(c->path, sizeof c->path, "/tmp/dflash-capture.XXXXXX");
    int fd = mkstemp(c->path);
    if (fd < 0) return -1;
    c->saved_out = dup(1);
    c->saved_err = dup(2);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    return 0;
}

/* Restore stdout/stderr; returns everything printed meanwhile (malloc'd). */
static inline char *tu_capture_end(TuCapture *c) {
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved_out, 1);
    dup2(c->saved_err, 2);
    close(c->saved_out);
    close(c->saved_err);
    char *text = tu_read(c->path, NULL);
    unlink(c->path);
    return text;
}

#endif /* TESTUTIL_H */
