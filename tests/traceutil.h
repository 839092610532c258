/* tests/traceutil.h - traces written by hand, as a port might write them:
 * each tensor's .npy byte by byte (<f8 or <i8, NumPy format 1.0) and the
 * manifest's lines (trace.jsonl), for the suites that hand `dflash diff` and
 * `--replay` traces no program wrote (test_diff_hints.c, test_replay.c).
 * Include after testutil.h. */
#ifndef TRACEUTIL_H
#define TRACEUTIL_H
#include <stdint.h>
#include <sys/stat.h>

/* dir/NAME.npy: <f8 (kind 'f') or <i8 (kind 'i'), shape (ndim <= 3), n values */
static inline void hand_npy(const char *dir, const char *name, char kind, int ndim, const int64_t *shape,
                            const double *v) {
    char dict[160], path[600];
    size_t n = 1, len = (size_t)snprintf(dict, sizeof dict, "{'descr': '<%c8', 'fortran_order': False, 'shape': (", kind);
    for (int d = 0; d < ndim; d++) {
        len += (size_t)snprintf(dict + len, sizeof dict - len, d ? ", %lld" : "%lld", (long long)shape[d]);
        n *= (size_t)shape[d];
    }
    snprintf(dict + len, sizeof dict - len, "%s), }", ndim == 1 ? "," : "");
    size_t dl = strlen(dict), hl = dl + 1;
    while ((10 + hl) % 64) hl++;
    unsigned char *b = calloc(1, 10 + hl + 8 * n);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(hl & 0xff);
    b[9] = (unsigned char)(hl >> 8);
    memcpy(b + 10, dict, dl);
    memset(b + 10 + dl, ' ', hl - dl - 1);
    b[10 + hl - 1] = '\n';
    for (size_t k = 0; k < n; k++) {
        uint64_t u;
        if (kind == 'f') memcpy(&u, &v[k], 8);
        else u = (uint64_t)(int64_t)v[k];
        for (int i = 0; i < 8; i++) b[10 + hl + 8 * k + i] = (unsigned char)(u >> (8 * i));
    }
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    assert_int_equal(tu_write(path, b, 10 + hl + 8 * n), 0);
    free(b);
}

/* A trace being written by hand: its directory, the manifest's text, and
 * the "meaning" its lines with a phase carry */
typedef struct { char dir[512]; char text[16384]; size_t len; const char *meaning; } Hand;

/* a fresh directory dir (an old one is removed) */
static inline void hand_open(Hand *h, const char *dir, const char *meaning) {
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    tu_rmtree(h->dir);
    assert_int_equal(mkdir(h->dir, 0777), 0);
    h->len = 0;
    h->text[0] = 0;
    h->meaning = meaning;
}

/* one tensor and its manifest line; phase NULL: no phase, round or meaning field */
static inline void hand_add(Hand *h, const char *name, const char *phase, int round, char kind, int ndim,
                            const int64_t *shape, const double *v) {
    hand_npy(h->dir, name, kind, ndim, shape, v);
    if (phase)
        h->len += (size_t)snprintf(h->text + h->len, sizeof h->text - h->len,
                                   "{\"name\":\"%s\",\"file\":\"%s.npy\",\"phase\":\"%s\",\"round\":%d,\"meaning\":\"%s\"}\n",
                                   name, name, phase, round, h->meaning ? h->meaning : "");
    else
        h->len += (size_t)snprintf(h->text + h->len, sizeof h->text - h->len, "{\"name\":\"%s\",\"file\":\"%s.npy\"}\n",
                                   name, name);
}

/* n ids as a 1-axis <i8 tensor (n < 0: one 0-d scalar) */
static inline void hand_ids(Hand *h, const char *name, const char *phase, int round, int n, const double *v) {
    int64_t s[1] = {n};
    hand_add(h, name, phase, round, 'i', n < 0 ? 0 : 1, s, v);
}

static inline void hand_close(Hand *h) { tu_write_text(tu_path(h->dir, "trace.jsonl"), h->text); }

#endif /* TRACEUTIL_H */
