/* formats/files.c - the file layer (formats/files.h): the one whole-file reader, the one
 * path join, the one .npy reader and writer, OutFile (outputs written into
 * a temporary file and renamed into place), and the registry of partial
 * outputs that a signal handler removes.
 *
 * Decisions:
 * - Only regular files are read: opening is O_NONBLOCK (a FIFO must not
 *   wait for a writer), then fstat; a directory or a device is refused.
 *   The whole-file reader reads to end of file (a file that grows while it
 *   is read is read as far as it goes), at most max bytes.
 * - .npy files written are format 1.0, C order, little-endian (byte by
 *   byte, whatever the host), header padded with spaces and ended by '\n'
 *   so that magic + lengths + header is a multiple of 64 bytes, as NumPy
 *   does. The reader takes what NumPy writes (formats/files.h).
 * - An OutFile is "<path>.partial.XXXXXX" beside path (mkstemp), given the
 *   mode the file has (or 0666 & ~umask for a new one), registered before
 *   it exists, and renamed over path at out_commit with the signals
 *   blocked, so an interruption lands before (path as it was) or after
 *   (path complete). A symbolic link is followed (the link stays a link);
 *   a read-only file is refused rather than replaced behind its back.
 */
/* realpath() is an XSI interface: ask for it next to POSIX 2008 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif
#include "formats/files.h"
#include "dflash.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/mman.h>
#include <unistd.h>

/* ===========================================================================
 * Reading files, joining paths.
 * ======================================================================== */

int file_open_fd(const char *path, size_t *size) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        dflash_set_error("%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        close(fd);
        dflash_set_error("%s: expected a regular file, got %s", path, dir ? "a directory" : "a special file");
        return -1;
    }
    *size = (size_t)st.st_size;
    return fd;
}

FILE *file_open_regular(const char *path, size_t *size) {
    int fd = file_open_fd(path, size);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        dflash_set_error("%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

int file_read_max(const char *path, size_t max, char **bytes, size_t *len) {
    *bytes = NULL;
    *len = 0;
    size_t size;
    FILE *f = file_open_regular(path, &size);
    if (!f) return -1;
    if (size > max) {
        fclose(f);
        dflash_set_error("%s: larger than %zu bytes", path, max);
        return -1;
    }
    size_t cap = size + 1 > 4096 ? size + 1 : 4096, n = 0;  /* +1: room to see the end */
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            dflash_set_error("%s: out of memory reading %zu bytes", path, cap);
            return -1;
        }
        if (n + 1 >= cap) {
            if (n > max) break;
            char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
            continue;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        dflash_set_error("%s: read error", path);
        return -1;
    }
    if (n > max) {
        free(buf);
        dflash_set_error("%s: larger than %zu bytes", path, max);
        return -1;
    }
    buf[n] = '\0';
    *bytes = buf;
    *len = n;
    return 0;
}

int file_read_all(const char *path, char **bytes, size_t *len) {
    return file_read_max(path, SIZE_MAX - 1, bytes, len);
}

/* a + sep + b, malloc'd */
static char *concat(const char *a, const char *sep, const char *b) {
    size_t la = strlen(a), ls = strlen(sep), lb = strlen(b);
    char *p = malloc(la + ls + lb + 1);
    if (!p) {
        dflash_set_error("out of memory");
        return NULL;
    }
    memcpy(p, a, la);
    memcpy(p + la, sep, ls);
    memcpy(p + la + ls, b, lb + 1);
    return p;
}

char *str_cat(const char *a, const char *b) { return concat(a, "", b); }

char *path_join(const char *dir, const char *name) { return concat(dir, "/", name); }

/* ===========================================================================
 * Token ids as text (formats/files.h: ids_parse_text, ids_file_prompts).
 * ======================================================================== */

int ids_parse_text(const char *path, const char *s, const char *end, int line, int V, int **ids, int *n, int *cap) {
    const char *p = s;
    while (p < end) {
        if (*p == ' ' || *p == '\t' || *p == ',' || *p == '|' || *p == '\r' || *p == '\n') { p++; continue; }
        long v = 0;
        const char *q = p;
        while (q < end && *q >= '0' && *q <= '9' && v <= 0x7fffffff) v = v * 10 + (*q++ - '0');
        if (q == p || (q < end && !strchr(" \t,|\r\n", *q)) || v >= V) {
            int len = 0;
            while (p + len < end && len < 20 && !strchr(" \t,|\r\n", p[len])) len++;
            dflash_set_error("%s: line %d: expected token ids 0..%d, got \"%.*s\"", path, line, V - 1, len, p);
            return -1;
        }
        if (*n == *cap) {
            int nc = *cap ? 2 * *cap : 1024;
            int *g = realloc(*ids, sizeof(int) * (size_t)nc);
            if (!g) { dflash_set_error("%s: out of memory", path); return -1; }
            *ids = g, *cap = nc;
        }
        (*ids)[(*n)++] = (int)v;
        p = q;
    }
    return 0;
}

int ids_file_prompts(const char *path, int N, int min_len, int max_len, int V, int *prompts, int *lens) {
    char *bytes = NULL;
    size_t len = 0;
    if (file_read_all(path, &bytes, &len) != 0) return -1;
    int *ids = NULL, n = 0, cap = 0, got = 0, line = 0;
    for (const char *s = bytes; s < bytes + len && got < N;) {
        const char *e = memchr(s, '\n', (size_t)(bytes + len - s));
        if (!e) e = bytes + len;
        n = 0;
        ++line;
        const char *first = s;   /* a line whose first mark is '#' is a comment, as in --data */
        while (first < e && (*first == ' ' || *first == '\t' || *first == '\r')) first++;
        if (first < e && *first == '#') { s = e + 1; continue; }
        if (ids_parse_text(path, s, e, line, V, &ids, &n, &cap) != 0) { got = -1; break; }
        if (n >= min_len) {
            int k = n < max_len ? n : max_len;
            memcpy(prompts + (size_t)got * (size_t)max_len, ids, sizeof(int) * (size_t)k);
            if (lens) lens[got] = k;
            got++;
        }
        s = e + 1;
    }
    free(ids);
    free(bytes);
    return got;
}

/* ===========================================================================
 * .npy reader. Nothing is read before it is checked: npy_open reads the
 * preamble and the header only, validates them and checks the file's size
 * against shape and descr; npy_load then reads the data of that one tensor,
 * in its own dtype (n * itemsize bytes, no widening), and turns it into
 * little-endian C order. Values are decoded one at a time (npy_f, npy_i).
 * Everything else is an error naming the file.
 * ======================================================================== */

/* npy_load maps a tensor of at least this many bytes rather than reading it */
#define NPY_MAP_MIN ((size_t)256 * 1024)

void npy_free(NpyArray *a) {
    if (a->map) munmap(a->map, a->map_len);
    else free(a->data);
    a->data = NULL;
    a->map = NULL;
    a->map_len = 0;
}

static int host_is_big_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 0;
}

/* Value k, little-endian, as an unsigned integer of a->item bytes */
static uint64_t npy_bits(const NpyArray *a, size_t k) {
    const unsigned char *d = a->data + k * (size_t)a->item;
    uint64_t u = 0;
    for (int b = 0; b < a->item; b++) u |= (uint64_t)d[b] << (8 * b);
    return u;
}

/* Value k of a float array, as a double */
double npy_f(const NpyArray *a, size_t k) {
    uint64_t u = npy_bits(a, k);
    if (a->item == 4) {
        uint32_t w = (uint32_t)u;
        float v;
        memcpy(&v, &w, 4);
        return v;
    }
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* Value k of an integer or bool array, as an int64 (every supported integer
 * type fits: u8 is not accepted) */
int64_t npy_i(const NpyArray *a, size_t k) {
    uint64_t u = npy_bits(a, k);
    if (a->kind != 'i' || a->item == 8) return (int64_t)u;
    int bits = 8 * a->item;
    uint64_t sign = (uint64_t)1 << (bits - 1);
    return (int64_t)((u ^ sign) - sign);  /* sign-extend */
}

/* NumPy's name of a's dtype ("float32", "int64", "bool"): what trace.jsonl says */
const char *npy_dtype_name(const NpyArray *a) {
    switch (a->kind) {
    case 'f': return a->item == 4 ? "float32" : "float64";
    case 'b': return "bool";
    case 'u': return a->item == 1 ? "uint8" : a->item == 2 ? "uint16" : "uint32";
    default: return a->item == 1 ? "int8" : a->item == 2 ? "int16" : a->item == 4 ? "int32" : "int64";
    }
}

/* A Python string literal '...' or "..." (no escapes: descr has none). */
static int py_string(const char **p, const char *end, char *out, size_t size) {
    if (*p >= end) return -1;  /* before reading **p: the header may end here */
    char q = **p;
    if (q != '\'' && q != '"') return -1;
    const char *s = *p + 1, *e = s;
    while (e < end && *e != q) e++;
    if (e >= end || (size_t)(e - s) >= size) return -1;
    memcpy(out, s, (size_t)(e - s));
    out[e - s] = '\0';
    *p = e + 1;
    return 0;
}

static void py_ws(const char **p, const char *end) {
    while (*p < end && (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')) (*p)++;
}

/* Parse the header dict {'descr': ..., 'fortran_order': ..., 'shape': (...)}. */
static int npy_parse_header(const char *path, const char *h, size_t len, NpyArray *a) {
    const char *p = h, *end = h + len;
    int have_descr = 0, have_order = 0, have_shape = 0;
    py_ws(&p, end);
    if (p >= end || *p != '{') {
        dflash_set_error("%s: header is not a Python dict (no '{')", path);
        return -1;
    }
    p++;
    for (;;) {
        char key[32];
        py_ws(&p, end);
        if (p < end && *p == '}') { p++; break; }
        if (py_string(&p, end, key, sizeof key) != 0) {
            dflash_set_error("%s: header: expected a quoted key at offset %zu", path, (size_t)(p - h));
            return -1;
        }
        py_ws(&p, end);
        if (p >= end || *p != ':') {
            dflash_set_error("%s: header: expected ':' after '%s'", path, key);
            return -1;
        }
        p++;
        py_ws(&p, end);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if (py_string(&p, end, a->descr, sizeof a->descr) != 0) {
                dflash_set_error("%s: header: 'descr' is not a short string", path);
                return -1;
            }
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if ((size_t)(end - p) >= 5 && strncmp(p, "False", 5) == 0) {
                p += 5;
            } else if ((size_t)(end - p) >= 4 && strncmp(p, "True", 4) == 0) {
                p += 4;
                a->fortran = 1;  /* converted to C order after reading */
            } else {
                dflash_set_error("%s: header: 'fortran_order' is not True or False", path);
                return -1;
            }
            have_order = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (p >= end || *p != '(') {
                dflash_set_error("%s: header: 'shape' is not a tuple", path);
                return -1;
            }
            p++;
            int commas = 0;
            for (;;) {
                py_ws(&p, end);
                if (p < end && *p == ')') { p++; break; }
                if (p >= end || *p < '0' || *p > '9') {
                    dflash_set_error("%s: header: 'shape' holds something other than "
                                     "non-negative integers", path);
                    return -1;
                }
                if (a->ndim == NPY_MAX_NDIM) {
                    dflash_set_error("%s: header: more than %d dimensions", path, NPY_MAX_NDIM);
                    return -1;
                }
                int64_t v = 0;
                while (p < end && *p >= '0' && *p <= '9') {
                    if (v > (INT64_MAX - 9) / 10) {
                        dflash_set_error("%s: header: a dimension of 'shape' overflows", path);
                        return -1;
                    }
                    v = v * 10 + (*p++ - '0');
                }
                if (p < end && *p == 'L') p++;  /* Python 2 longs, in old files */
                a->shape[a->ndim++] = v;
                py_ws(&p, end);
                if (p < end && *p == ',') { p++; commas++; continue; }
                if (p < end && *p == ')') { p++; break; }
                dflash_set_error("%s: header: 'shape' tuple is malformed", path);
                return -1;
            }
            /* (3) is the int 3 in Python, not a tuple */
            if (a->ndim == 1 && commas == 0) {
                dflash_set_error("%s: header: 'shape' (n) is not a tuple (expected (n,))", path);
                return -1;
            }
            have_shape = 1;
        } else {
            dflash_set_error("%s: header: unexpected or repeated key '%s'", path, key);
            return -1;
        }
        py_ws(&p, end);
        if (p < end && *p == ',') { p++; continue; }
        if (p < end && *p == '}') { p++; break; }
        dflash_set_error("%s: header: expected ',' or '}' after '%s'", path, key);
        return -1;
    }
    py_ws(&p, end);
    if (p != end) {
        dflash_set_error("%s: header: unexpected text after the dict", path);
        return -1;
    }
    if (!have_descr || !have_order || !have_shape) {
        dflash_set_error("%s: header: missing key '%s'", path,
                         !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
        return -1;
    }
    return 0;
}

/* Check the preamble p (the first min(size, 12) bytes of a file of size
 * bytes); sets where the header starts and its length. */
static int npy_preamble(const char *path, const unsigned char *p, size_t size, size_t *hstart, size_t *hlen) {
    static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    size_t m = size < 6 ? size : 6;
    if (size == 0) {
        dflash_set_error("%s: empty file: not a .npy file (bad magic: no \\x93NUMPY)", path);
        return -1;
    }
    if (memcmp(p, MAGIC, m) != 0) {
        dflash_set_error("%s: bad magic: not a .npy file (expected \\x93NUMPY)", path);
        return -1;
    }
    if (size < 10) {
        dflash_set_error("%s: truncated: %zu bytes, less than a .npy preamble (10 bytes)", path, size);
        return -1;
    }
    int major = p[6], minor = p[7];
    if (major == 1 && minor == 0) {
        *hlen = (size_t)p[8] | (size_t)p[9] << 8;
        *hstart = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (size < 12) {
            dflash_set_error("%s: truncated: expected a 12-byte preamble for format %d.0, got a file of %zu bytes",
                             path, major, size);
            return -1;
        }
        *hlen = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
        *hstart = 12;
    } else {
        dflash_set_error("%s: unsupported .npy format version %d.%d (expected 1.0, 2.0 or 3.0)", path, major,
                         minor);
        return -1;
    }
    if (*hlen > NPY_MAX_HEADER) {
        dflash_set_error("%s: header length %zu is over the 1 MiB limit", path, *hlen);
        return -1;
    }
    if (*hlen > size - *hstart) {
        dflash_set_error("%s: header length %zu runs past the end of the file (%zu bytes): truncated", path, *hlen,
                         size);
        return -1;
    }
    return 0;
}

/* Parse the header text h (hlen bytes, starting at hstart) of a file of
 * size bytes into a: dict, descr, element count, and the data's size
 * checked against the file's. Reads no data. */
static int npy_header_done(const char *path, const char *h, size_t hstart, size_t hlen, size_t size,
                           NpyArray *a) {
    if (npy_parse_header(path, h, hlen, a) != 0) return -1;
    const char *d = a->descr;
    char order = d[0], kind = d[0] ? d[1] : 0;
    char *end = NULL;
    long item = kind ? strtol(d + 2, &end, 10) : 0;   /* a descr with a NUL inside ends at it */
    int ok = (order == '<' || order == '>' || order == '|' || order == '=') && kind && d[2] >= '1' &&
             d[2] <= '9' && end && *end == '\0' &&
             ((kind == 'f' && (item == 4 || item == 8)) ||
              (kind == 'i' && (item == 1 || item == 2 || item == 4 || item == 8)) ||
              (kind == 'u' && (item == 1 || item == 2 || item == 4)) || (kind == 'b' && item == 1));
    if (!ok) {
        dflash_set_error("%s: unsupported descr '%s' (expected a float f4 f8, an integer i1 i2 i4 i8 u1 u2 u4 "
                         "or a bool b1, with < > | or =)", path, d);
        return -1;
    }
    a->kind = kind;
    a->item = (int)item;
    a->big_endian = item > 1 && (order == '>' || (order == '=' && host_is_big_endian()));
    size_t n = 1, data_size = size - hstart - hlen;
    for (int k = 0; k < a->ndim; k++) {
        /* the product may not overflow, and can never exceed the file */
        if (a->shape[k] > 0 && n > SIZE_MAX / (size_t)item / (size_t)a->shape[k]) {
            dflash_set_error("%s: shape is too large (element count overflows)", path);
            return -1;
        }
        n *= (size_t)a->shape[k];
    }
    if (n * (size_t)item != data_size) {
        dflash_set_error("%s: data is %zu bytes but shape and descr '%s' need %zu (%s)", path, data_size, d,
                         n * (size_t)item, data_size < n * (size_t)item ? "truncated" : "trailing bytes");
        return -1;
    }
    a->n = n;
    a->offset = hstart + hlen;
    a->file_size = size;
    return 0;
}

/* After the first n values are in a->data: swap to little-endian, reorder
 * to C order (all of them only: a prefix is never Fortran order of ndim > 1). */
static int npy_fix_data(const char *path, NpyArray *a, size_t n) {
    size_t item = (size_t)a->item;
    if (a->big_endian)
        for (size_t k = 0; k < n; k++)
            for (size_t b = 0; b < item / 2; b++) {
                unsigned char *x = a->data + k * item, t = x[b];
                x[b] = x[item - 1 - b];
                x[item - 1 - b] = t;
            }
    a->big_endian = 0;
    if (a->fortran && a->ndim > 1 && a->n > 0) {
        unsigned char *c = malloc(a->n * item);
        if (!c) {
            dflash_set_error("%s: out of memory reordering %zu values to C order", path, a->n);
            return -1;
        }
        int64_t idx[NPY_MAX_NDIM] = {0};
        for (size_t k = 0; k < a->n; k++) {  /* k: C-order index; idx: its subscripts */
            size_t f = 0, stride = 1;        /* Fortran offset: the first axis varies fastest */
            for (int d = 0; d < a->ndim; d++) {
                f += (size_t)idx[d] * stride;
                stride *= (size_t)a->shape[d];
            }
            memcpy(c + k * item, a->data + f * item, item);
            for (int d = a->ndim - 1; d >= 0 && ++idx[d] == a->shape[d]; d--) idx[d] = 0;
        }
        npy_free(a);
        a->data = c;
    }
    a->fortran = 0;
    return 0;
}

/* Open path and read its header only (validated; the file's size checked
 * against shape and descr). a->data stays NULL. -1 with dflash_errmsg. */
int npy_open(const char *path, NpyArray *a) {
    memset(a, 0, sizeof *a);
    size_t size;
    FILE *f = file_open_regular(path, &size);
    if (!f) return -1;
    int ret = -1;
    char *h = NULL;
    unsigned char pre[12];
    size_t hstart = 0, hlen = 0, want = size < 12 ? size : 12;
    if (fread(pre, 1, want, f) != want) {
        dflash_set_error("%s: read error", path);
        goto out;
    }
    if (npy_preamble(path, pre, size, &hstart, &hlen) != 0) goto out;
    h = malloc(hlen + 1);
    if (!h || fseek(f, (long)hstart, SEEK_SET) != 0 || fread(h, 1, hlen, f) != hlen) {
        dflash_set_error("%s: cannot read the %zu-byte header", path, hlen);
        goto out;
    }
    ret = npy_header_done(path, h, hstart, hlen, size, a);
out:
    free(h);
    fclose(f);
    return ret;
}

/* Read the data of a tensor npy_open checked: n * itemsize bytes. */
int npy_load(const char *path, NpyArray *a) { return npy_load_first(path, a, a->n); }

int npy_load_first(const char *path, NpyArray *a, size_t n) {
    if (n > a->n || (n < a->n && a->fortran && a->ndim > 1)) {
        dflash_set_error("%s: cannot read the first %zu of its %zu values in C order (%s)", path, n, a->n,
                         n > a->n ? "it has fewer" : "the file is in Fortran order");
        return -1;
    }
    size_t bytes = n * (size_t)a->item;
    FILE *f = fopen(path, "rb");
    struct stat st;
    int ok = f && fstat(fileno(f), &st) == 0 && (size_t)st.st_size == a->file_size && a->offset <= LONG_MAX;
    if (ok && bytes >= NPY_MAP_MIN) {
        /* mapped, not read: reading copies the data into fresh pages, a
         * page fault for every 4 KB of them (dflash diff reads two whole
         * traces, `dflash train --trace`'s are 50 MB a step); the mapping
         * shares the file's cached pages. Private and writable: the swap
         * and the reorder below write to the copy only. */
        long page = sysconf(_SC_PAGESIZE);
        size_t start = page > 0 ? a->offset / (size_t)page * (size_t)page : 0;
        void *m = mmap(NULL, a->offset - start + bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(f), (off_t)start);
        if (m != MAP_FAILED) {
            a->map = m;
            a->map_len = a->offset - start + bytes;
            a->data = (unsigned char *)m + (a->offset - start);
        }
    }
    if (ok && !a->map) {
        a->data = malloc(bytes ? bytes : 1);
        if (!a->data) {
            fclose(f);
            dflash_set_error("%s: out of memory for %zu bytes of data", path, bytes);
            return -1;
        }
        ok = fseek(f, (long)a->offset, SEEK_SET) == 0 && fread(a->data, 1, bytes, f) == bytes;
    }
    if (f) fclose(f);
    if (!ok) {
        if (n == a->n)
            dflash_set_error("%s: cannot read its %zu bytes of data (the file changed or is unreadable)", path, bytes);
        else
            dflash_set_error("%s: cannot read the first %zu bytes of its data (the file changed or is unreadable)",
                             path, bytes);
        npy_free(a);
        return -1;
    }
    if (npy_fix_data(path, a, n) != 0) {
        npy_free(a);
        return -1;
    }
    return 0;
}

/* A whole .npy file held in memory (tests/fuzz/fuzz_npy.c): the same
 * checks, the data copied. Reads nothing outside buf[0..size). */
int npy_parse(const char *path, const unsigned char *buf, size_t size, NpyArray *a) {
    memset(a, 0, sizeof *a);
    size_t hstart, hlen;
    if (npy_preamble(path, buf, size, &hstart, &hlen) != 0 ||
        npy_header_done(path, (const char *)buf + hstart, hstart, hlen, size, a) != 0)
        return -1;
    size_t bytes = a->n * (size_t)a->item;
    a->data = malloc(bytes ? bytes : 1);
    if (!a->data) {
        dflash_set_error("%s: out of memory", path);
        return -1;
    }
    memcpy(a->data, buf + a->offset, bytes);
    if (npy_fix_data(path, a, a->n) != 0) {
        npy_free(a);
        return -1;
    }
    return 0;
}


int npy_read(const char *path, NpyArray *a) {
    if (npy_open(path, a) != 0) return -1;
    return npy_load(path, a);
}

int npy_read_values(const char *path, NpyValues *v) {
    NpyArray a;
    memset(v, 0, sizeof *v);
    if (npy_read(path, &a) != 0) return -1;
    memcpy(v->descr, a.descr, sizeof v->descr);
    v->is_int = a.kind != 'f';
    v->ndim = a.ndim;
    for (int k = 0; k < a.ndim; k++) v->shape[k] = a.shape[k];
    v->n = a.n;
    if (v->is_int) v->i = malloc(sizeof(int64_t) * (a.n ? a.n : 1));
    else v->f = malloc(sizeof(double) * (a.n ? a.n : 1));
    if (!v->i && !v->f) {
        dflash_set_error("%s: out of memory", path);
        npy_free(&a);
        return -1;
    }
    for (size_t k = 0; k < a.n; k++) {
        if (v->is_int) v->i[k] = npy_i(&a, k);
        else v->f[k] = npy_f(&a, k);
    }
    npy_free(&a);
    return 0;
}

void npy_values_free(NpyValues *v) {
    free(v->f);
    free(v->i);
    v->f = NULL;
    v->i = NULL;
}

/* ===========================================================================
 * .npy writer (format 1.0).
 *   magic "\x93NUMPY", major 1, minor 0, u16 little-endian header length,
 *   header "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
 *   padded with spaces and ended by '\n' so 10 + header length % 64 == 0,
 *   then the values in C order, little-endian.
 * ======================================================================== */

/* Fill out with the header (magic included); returns its length. out must
 * hold 16 + 21 * NPY_MAX_NDIM + 128 bytes. */
static size_t npy_header(char *out, const char *descr, int ndim, const int64_t *shape) {
    char dict[64 + 24 * NPY_MAX_NDIM];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int k = 0; k < ndim; k++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, k ? ", %lld" : "%lld", (long long)shape[k]);
    /* Python's 1-tuple needs the trailing comma: (3,) */
    len += snprintf(dict + len, sizeof dict - (size_t)len, ndim == 1 ? ",), }" : "), }");
    size_t total = 10 + (size_t)len + 1;          /* magic+version+u16, dict, '\n' */
    size_t pad = (64 - total % 64) % 64;
    size_t header_len = (size_t)len + pad + 1;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)(header_len & 0xFF);
    out[9] = (char)(header_len >> 8);
    memcpy(out + 10, dict, (size_t)len);
    memset(out + 10 + len, ' ', pad);
    out[10 + (size_t)len + pad] = '\n';
    return 10 + header_len;
}

/* Element k as little-endian bytes, whatever the host's byte order:
 * type 'i' int64_t, 'f' float, 'd' double. */
static size_t le_bytes(unsigned char *o, char type, const void *data, size_t k) {
    uint64_t u;
    size_t size;
    if (type == 'i') {
        int64_t v = ((const int64_t *)data)[k];
        memcpy(&u, &v, 8);
        size = 8;
    } else if (type == 'f') {
        float v = ((const float *)data)[k];
        uint32_t w;
        memcpy(&w, &v, 4);
        u = w;
        size = 4;
    } else {
        double v = ((const double *)data)[k];
        memcpy(&u, &v, 8);
        size = 8;
    }
    for (size_t b = 0; b < size; b++) o[b] = (unsigned char)(u >> (8 * b));
    return size;
}

int npy_write(FILE *f, const char *descr, int ndim, const int64_t *shape, const void *data, size_t n) {
    char type = strcmp(descr, "<i8") == 0 ? 'i' : strcmp(descr, "<f4") == 0 ? 'f' : strcmp(descr, "<f8") == 0 ? 'd' : 0;
    if (!type || ndim < 0 || ndim > NPY_MAX_NDIM) {
        errno = EINVAL;
        return -1;
    }
    char header[16 + 21 * NPY_MAX_NDIM + 128];
    size_t hlen = npy_header(header, descr, ndim, shape);
    int ok = fwrite(header, 1, hlen, f) == hlen;
    unsigned char buf[4096];
    size_t k = 0;
    while (ok && k < n) {
        size_t used = 0;
        while (k < n && used + 8 <= sizeof buf) used += le_bytes(buf + used, type, data, k++);
        ok = fwrite(buf, 1, used, f) == used;
    }
    return ok ? 0 : -1;
}

/* ===========================================================================
 * The partial-output registry (formats/files.h). Entries are removed newest first:
 * a directory's files before the directory, the directory before the
 * parents made for it.
 * ======================================================================== */

typedef struct {
    const void *owner;  /* an OutFile, a Tracer, ...; NULL: removed by path (out_forget's under) */
    char kind;          /* 'f' file, 'l' lock: unlink; 'd': rmdir */
    char *path;
} Created;

static Created *created;
static volatile sig_atomic_t n_created;
static int cap_created;

void out_block_signals(sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    sigaddset(&s, SIGPIPE);
    sigprocmask(SIG_BLOCK, &s, old);
}

void out_restore_signals(const sigset_t *old) { sigprocmask(SIG_SETMASK, old, NULL); }

int out_register(const void *owner, char kind, const char *path) {
    char *p = strdup(path);
    if (!p) {
        dflash_set_error("out of memory");
        return -1;
    }
    if (n_created == cap_created) {
        int cap = cap_created ? 2 * cap_created : 64;
        Created *c = malloc((size_t)cap * sizeof *c);
        if (!c) {
            free(p);
            dflash_set_error("out of memory");
            return -1;
        }
        if (n_created) memcpy(c, created, (size_t)n_created * sizeof *c);
        Created *old = created;
        created = c;  /* signals are blocked: no handler sees the swap */
        cap_created = cap;
        free(old);
    }
    created[n_created] = (Created){owner, kind, p};
    n_created = n_created + 1;
    return 0;
}

void out_unregister_last(void) {
    if (n_created == 0) return;
    n_created = n_created - 1;
    free(created[n_created].path);
}

void out_forget(const void *owner, char kind, const char *under) {
    sigset_t old;
    out_block_signals(&old);
    size_t lu = under ? strlen(under) : 0;
    int k = 0;
    for (int i = 0; i < n_created; i++) {
        Created e = created[i];
        int mine = (owner && e.owner == owner && (!kind || e.kind == kind)) ||
                   (under && strncmp(e.path, under, lu) == 0 && e.path[lu] == '/');
        if (mine) free(e.path);
        else created[k++] = e;
    }
    n_created = k;
    if (k == 0) {
        free(created);
        created = NULL;
        cap_created = 0;
    }
    out_restore_signals(&old);
}

void out_remove_owned(const void *owner) {
    sigset_t old;
    out_block_signals(&old);
    for (int i = n_created - 1; i >= 0; i--) {
        if (created[i].owner != owner) continue;
        if (created[i].kind == 'd') rmdir(created[i].path);  /* fails harmlessly when not empty */
        else unlink(created[i].path);
    }
    out_restore_signals(&old);
}

int out_registered_same(const void *except, char kind, const struct stat *st) {
    for (int i = 0; i < n_created; i++) {
        struct stat c;
        if (created[i].kind == kind && created[i].owner != except && stat(created[i].path, &c) == 0 &&
            c.st_dev == st->st_dev && c.st_ino == st->st_ino)
            return 1;
    }
    return 0;
}

void out_cleanup_on_signal(void) {
    for (int i = n_created - 1; i >= 0; i--) {
        if (created[i].kind == 'd') rmdir(created[i].path);
        else unlink(created[i].path);
    }
    n_created = 0;
}

/* ===========================================================================
 * OutFile.
 * ======================================================================== */

struct OutFile {
    char *path;   /* as given, for messages */
    char *what;   /* the messages' prefix */
    char *final;  /* the file it replaces at commit (symbolic links followed) */
    char *tmp;    /* "<final>.partial.XXXXXX"; NULL: written in place (stdout,
                   * a device, a FIFO) */
    FILE *f;      /* stdout for "-"; NULL once finished */
    int failed;   /* out_finish found a write error */
};

mode_t file_umask(void) {
    mode_t m = umask(0);
    umask(m);
    return m;
}

const char *out_own_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    const char *base = path + b;
    size_t lb = n - b;
    if (lb > 5 && strncmp(base + lb - 5, ".lock", 5) == 0) return "a trace directory's lock (<dir>.lock)";
    static const char *const TAGS[2] = {".partial.", ".old."};
    for (int k = 0; k < 2; k++) {
        size_t lt = strlen(TAGS[k]);
        if (lb < lt + 7 || strncmp(base + lb - 6 - lt, TAGS[k], lt) != 0) continue;
        int tmp = 1;
        for (size_t i = lb - 6; i < lb; i++)
            if (!isalnum((unsigned char)base[i])) tmp = 0;
        if (tmp) return k == 0 ? "an output being written (<file>.partial.XXXXXX)"
                               : "an earlier trace being replaced (<dir>.old.XXXXXX)";
    }
    return NULL;
}

/* The lowest descriptor of this process open for writing on st's file
 * (same device and inode), or -1. Descriptors 0..1023 are looked at. */
static int writable_descriptor_of(const struct stat *st) {
    for (int fd = 0; fd < 1024; fd++) {
        struct stat s;
        if (fstat(fd, &s) != 0 || s.st_dev != st->st_dev || s.st_ino != st->st_ino) continue;
        int fl = fcntl(fd, F_GETFL);
        if (fl != -1 && (fl & O_ACCMODE) != O_RDONLY) return fd;
    }
    return -1;
}

/* A write lock on the whole of fd's file; 0 when taken. */
static int lock_whole(int fd) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    return fcntl(fd, F_SETLK, &fl);
}

void out_stale_siblings(const char *final, int dirs, OutSiblingFn fn, void *ctx) {
    const char *slash = strrchr(final, '/');
    char *parent = slash ? strndup(final, slash == final ? 1 : (size_t)(slash - final)) : strdup(".");
    const char *base = slash ? slash + 1 : final;
    DIR *d = parent ? opendir(parent) : NULL;
    size_t lb = strlen(base);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *f = e->d_name;
        if (strncmp(f, base, lb) != 0 || !out_own_name(f)) continue;
        int is_partial = strncmp(f + lb, ".partial.", 9) == 0 && strlen(f + lb) == 15;
        int is_old = dirs && strncmp(f + lb, ".old.", 5) == 0 && strlen(f + lb) == 11;
        if (!is_partial && !is_old) continue;
        char *p = slash ? path_join(parent, f) : strdup(f);
        struct stat st;
        /* not ours: a registered one is this run's own */
        if (p && lstat(p, &st) == 0 && (dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) &&
            !out_registered_same(NULL, dirs ? 'd' : 'f', &st) && fn(ctx, p) == 0)
            fprintf(stderr, "dflash: removed %s, left by an earlier run that was killed before it finished\n", p);
        free(p);
    }
    if (d) closedir(d);
    free(parent);
}

/* a temporary file, if no one holds its lock (closing a descriptor of our
 * own locked file would drop its lock: out_stale_siblings skips ours) */
static int remove_unlocked(void *ctx, const char *p) {
    (void)ctx;
    int fd = open(p, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    int rc = fd >= 0 && lock_whole(fd) == 0 ? unlink(p) : -1;
    if (fd >= 0) close(fd);
    return rc;
}

void out_remove_stale(const char *final) { out_stale_siblings(final, 0, remove_unlocked, NULL); }

int dir_replace(const char *label, const char *dir, const char *tmp, int exists, const char *what,
                const char *const *names, int n_names) {
    char old[4200] = "";
    if (exists) {
        snprintf(old, sizeof old, "%s.old.XXXXXX", dir);
        if (!mkdtemp(old)) {
            dflash_set_error("%s %s: cannot create %s: %s", label, dir, old, strerror(errno));
            return -1;
        }
        if (rename(dir, old) != 0) {
            dflash_set_error("%s %s: cannot move %s aside: %s", label, dir, what, strerror(errno));
            rmdir(old);
            return -1;
        }
    }
    if (rename(tmp, dir) != 0) {
        dflash_set_error("%s %s: cannot rename %s into place: %s", label, dir, tmp, strerror(errno));
        if (old[0]) rename(old, dir);
        return -1;
    }
    if (old[0]) {
        for (int i = 0; i < n_names; i++) {
            char *p = path_join(old, names[i]);
            if (p) unlink(p);
            free(p);
        }
        rmdir(old);
    }
    return 0;
}

/* ===========================================================================
 * Output paths against each other and against the run's inputs.
 * ======================================================================== */

/* path made absolute, the symbolic links of its longest existing prefix
 * resolved, "//", "." and ".." taken out of the rest (malloc'd; NULL with
 * dflash_errmsg). Two paths that name one file give one string. */
static char *canon_path(const char *path) {
    size_t n = strlen(path);
    char *work = strdup(path), *real = NULL;
    if (!work) goto oom;
    size_t cut = n;
    for (;;) {
        char c = work[cut];
        work[cut] = '\0';
        real = realpath(cut ? work : path[0] == '/' ? "/" : ".", NULL);
        work[cut] = c;
        if (real || cut == 0) break;
        while (cut > 0 && work[cut - 1] != '/') cut--;  /* drop the last component */
        while (cut > 0 && work[cut - 1] == '/') cut--;
    }
    free(work);
    if (!real) {
        dflash_set_error("cannot resolve %s: %s", path, strerror(errno));
        return NULL;
    }
    const char *rest = path + cut;
    size_t lr = strlen(real);
    char *joined = malloc(lr + strlen(rest) + 3), *out = malloc(lr + strlen(rest) + 3);
    if (!joined || !out) {
        free(real);
        free(joined);
        free(out);
        goto oom;
    }
    sprintf(joined, "%s/%s", real, rest);
    free(real);
    size_t w = 0;
    for (const char *s = joined; *s;) {
        while (*s == '/') s++;
        const char *e = s;
        while (*e && *e != '/') e++;
        size_t l = (size_t)(e - s);
        if (l == 2 && s[0] == '.' && s[1] == '.') {
            while (w > 0 && out[w - 1] != '/') w--;
            if (w > 0) w--;
        } else if (l > 0 && !(l == 1 && s[0] == '.')) {
            out[w++] = '/';
            memcpy(out + w, s, l);
            w += l;
        }
        s = e;
    }
    if (w == 0) out[w++] = '/';
    out[w] = '\0';
    free(joined);
    return out;
oom:
    dflash_set_error("out of memory");
    return NULL;
}

/* a is b or inside b (both from canon_path) */
static int path_within(const char *a, const char *b) {
    size_t lb = strlen(b);
    if (strcmp(b, "/") == 0) return 1;
    return strncmp(a, b, lb) == 0 && (a[lb] == '\0' || a[lb] == '/');
}

/* One input file against the canonical outputs co[] (NULL: not asked for). */
static int check_against_input(const char *what, const OutPath *outs, char *const *co, const struct stat *ost,
                               int n_out, const char *input, const struct stat *in_st) {
    char *ci = canon_path(input);
    if (!ci) return -1;
    int rc = 0;
    for (int k = 0; k < n_out && rc == 0; k++) {
        if (!co[k]) continue;
        int same = strcmp(co[k], ci) == 0 ||
                   (ost[k].st_nlink && ost[k].st_dev == in_st->st_dev && ost[k].st_ino == in_st->st_ino);
        if (same) {
            dflash_set_error("%s: %s %s is the input %s; refusing to write over it (choose another path)", what,
                             outs[k].label, outs[k].path, input);
            rc = -1;
        } else if (outs[k].is_dir == 1 && path_within(ci, co[k])) {
            dflash_set_error("%s: %s %s holds the input %s; refusing to replace it (choose another path)", what,
                             outs[k].label, outs[k].path, input);
            rc = -1;
        }
    }
    free(ci);
    return rc;
}

/* The kind of the program's own name that path has, directly or through
 * the symbolic links it names (NULL: none). canon: path resolved. */
static const char *own_name_through_links(const char *path, const char *canon) {
    const char *kind = out_own_name(path);
    if (!kind && canon) kind = out_own_name(canon);
    char link[4096], *at = strdup(path);
    for (int hops = 0; at && !kind && hops < 40; hops++) {
        ssize_t n = readlink(at, link, sizeof link - 1);
        free(at);
        at = NULL;
        if (n <= 0) break;
        link[n] = '\0';
        kind = out_own_name(link);
        at = strdup(link);
    }
    free(at);
    return kind;
}

int out_check_paths(const char *what, const OutPath *outs, int n_out, const char *const *inputs, int n_inputs) {
    char **co = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *co);
    /* each output's file, stat'ed once (st_nlink 0: it does not exist) */
    struct stat *ost = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *ost);
    int rc = co && ost ? 0 : -1, any = 0;
    if (rc) dflash_set_error("%s: out of memory", what);
    for (int k = 0; k < n_out && rc == 0; k++) {
        if (!outs[k].path) continue;
        any = 1;
        if (stat(outs[k].path, &ost[k]) != 0) memset(&ost[k], 0, sizeof ost[k]);
        if (!(co[k] = canon_path(outs[k].path))) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("%s: %s", what, msg);
            rc = -1;
            break;
        }
        const char *kind = own_name_through_links(outs[k].path, co[k]);
        if (kind) {
            dflash_set_error("%s: %s %s has the name of %s, which dflash removes; choose another name", what,
                             outs[k].label, outs[k].path, kind);
            rc = -1;
        }
    }
    /* no output may be another, or inside one that is replaced whole */
    for (int i = 0; i < n_out && rc == 0; i++)
        for (int j = 0; j < n_out && rc == 0; j++) {
            if (i == j || !co[i] || !co[j]) continue;
            if (outs[j].is_dir == 1 && (path_within(co[i], co[j]) || path_within(co[j], co[i]))) {
                dflash_set_error("%s: %s %s may not be %s %s or inside it (the directory is replaced whole)", what,
                                 outs[i].label, outs[i].path, outs[j].label, outs[j].path);
                rc = -1;
            }
        }
    for (int i = 0; i < n_out && rc == 0; i++)
        for (int j = i + 1; j < n_out && rc == 0; j++) {
            if (!co[i] || !co[j]) continue;
            if (strcmp(co[i], co[j]) == 0) {
                dflash_set_error("%s: %s %s and %s %s are the same file; give two paths", what, outs[i].label,
                                 outs[i].path, outs[j].label, outs[j].path);
                rc = -1;
            }
        }
    for (int i = 0; i < n_inputs && rc == 0 && any; i++) {
        struct stat st;
        if (stat(inputs[i], &st) != 0) continue;  /* a missing input is the reader's to report */
        if (!S_ISDIR(st.st_mode)) {
            rc = check_against_input(what, outs, co, ost, n_out, inputs[i], &st);
            continue;
        }
        /* a directory stands for the regular files directly inside it */
        DIR *d = opendir(inputs[i]);
        struct dirent *e;
        while (d && rc == 0 && (e = readdir(d)) != NULL) {
            char *p = path_join(inputs[i], e->d_name);
            struct stat fs;
            if (!p) {
                rc = -1;
            } else if (stat(p, &fs) == 0 && S_ISREG(fs.st_mode)) {
                rc = check_against_input(what, outs, co, ost, n_out, p, &fs);
            }
            free(p);
        }
        if (d) closedir(d);
    }
    /* then (the more specific refusals above first): a directory output
     * (replaced whole or written into) may not be an input directory or
     * inside one */
    for (int i = 0; i < n_inputs && rc == 0 && any; i++) {
        struct stat st;
        if (stat(inputs[i], &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        char *cd = NULL;
        for (int k = 0; k < n_out && rc == 0; k++) {
            if (!co[k] || outs[k].is_dir == 0) continue;
            if (!cd && !(cd = canon_path(inputs[i]))) {
                rc = -1;
                break;
            }
            if (path_within(co[k], cd) || (ost[k].st_nlink && ost[k].st_dev == st.st_dev && ost[k].st_ino == st.st_ino)) {
                dflash_set_error("%s: %s %s is the input directory %s or inside it; choose a directory outside it",
                                 what, outs[k].label, outs[k].path, inputs[i]);
                rc = -1;
            }
        }
        free(cd);
    }
    for (int k = 0; co && k < n_out; k++) free(co[k]);
    free(co);
    free(ost);
    return rc;
}

static void out_free(OutFile *o) {
    free(o->path);
    free(o->what);
    free(o->final);
    free(o->tmp);
    free(o);
}

OutFile *out_open(const char *path, const char *what) {
    OutFile *o = calloc(1, sizeof *o);
    if (o) {
        o->path = strdup(path);
        o->what = strdup(what);
    }
    if (!o || !o->path || !o->what) {
        dflash_set_error("%s: out of memory", what);
        if (o) out_free(o);
        return NULL;
    }
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        return o;
    }
    struct stat st;
    mode_t mode = 0666 & ~file_umask();
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            dflash_set_error("%s: %s is a directory; give a file name", what, path);
            goto fail;
        }
        int fd = writable_descriptor_of(&st);
        if (fd >= 0) {
            /* already open here (stdout, stderr, /dev/fd/N, the same file
             * by another name): written through that descriptor, so its
             * mode holds (>> appends) and nothing it wrote is overwritten */
            int copy = fd == 1 ? -1 : dup(fd);
            o->f = fd == 1 ? stdout : copy >= 0 ? fdopen(copy, "w") : NULL;
            if (!o->f) {
                if (copy >= 0) close(copy);
                dflash_set_error("%s: cannot write %s (descriptor %d): %s", what, path, fd, strerror(errno));
                goto fail;
            }
            return o;
        }
        if (!S_ISREG(st.st_mode)) {
            o->f = fopen(path, "w");
            if (!o->f) {
                dflash_set_error("%s: cannot create %s: %s", what, path, strerror(errno));
                goto fail;
            }
            return o;
        }
        if (access(path, W_OK) != 0) {  /* a read-only file is not replaced behind its back */
            dflash_set_error("%s: cannot write %s: %s", what, path, strerror(errno));
            goto fail;
        }
        mode = st.st_mode & 07777;
        o->final = realpath(path, NULL);
        if (!o->final) {
            dflash_set_error("%s: cannot use %s: %s", what, path, strerror(errno));
            goto fail;
        }
    } else if (errno == ENOENT) {
        o->final = strdup(path);
    } else {
        dflash_set_error("%s: cannot create %s: %s", what, path, strerror(errno));
        goto fail;
    }
    o->tmp = o->final ? malloc(strlen(o->final) + sizeof ".partial.XXXXXX") : NULL;
    if (!o->tmp) {
        dflash_set_error("%s: out of memory", what);
        goto fail;
    }
    sprintf(o->tmp, "%s.partial.XXXXXX", o->final);
    out_remove_stale(o->final);
    sigset_t old;
    out_block_signals(&old);
    int fd = mkstemp(o->tmp), err = fd < 0 ? errno : 0;
    if (fd >= 0 && out_register(o, 'f', o->tmp) != 0) {
        unlink(o->tmp);
        close(fd);
        fd = -1;
        err = ENOMEM;
    }
    out_restore_signals(&old);
    if (fd < 0) {
        dflash_set_error("%s: cannot create %s: %s", what, path, strerror(err));
        free(o->tmp);
        o->tmp = NULL;
        goto fail;
    }
    lock_whole(fd);  /* held until renamed or removed: see out_remove_stale */
    fchmod(fd, mode);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        dflash_set_error("%s: cannot write %s: %s", what, path, strerror(errno));
        close(fd);
        goto fail;
    }
    return o;
fail:
    out_abort(o);
    return NULL;
}

FILE *out_stream(OutFile *o) { return o->f; }

int out_finish(OutFile *o) {
    if (o->f) {
        int bad = fflush(o->f) != 0 || ferror(o->f);
        int saved = errno;
        /* a temporary file stays open, and so fcntl-locked, until it is
         * renamed or removed (out_commit, out_abort close it) */
        if (o->f != stdout && !o->tmp && fclose(o->f) != 0 && !bad) {
            bad = 1;
            saved = errno;
        }
        if (!o->tmp) o->f = NULL;
        if (bad) {
            dflash_set_error("%s: cannot write %s: %s", o->what, o->path, strerror(saved));
            o->failed = 1;
        }
    }
    return o->failed ? -1 : 0;
}

int out_commit(OutFile *o) {
    if (out_finish(o) != 0) {
        out_abort(o);
        return -1;
    }
    int rc = 0;
    if (o->tmp) {
        sigset_t old;
        out_block_signals(&old);
        if (rename(o->tmp, o->final) != 0) {
            dflash_set_error("%s: cannot rename %s to %s: %s", o->what, o->tmp, o->path, strerror(errno));
            rc = -1;
        } else {
            out_forget(o, 0, NULL);
            free(o->tmp);
            o->tmp = NULL;
            if (o->f) fclose(o->f);  /* the data was flushed by out_finish */
            o->f = NULL;
        }
        out_restore_signals(&old);
    }
    if (rc != 0) out_abort(o);
    else out_free(o);
    return rc;
}

void out_abort(OutFile *o) {
    if (!o) return;
    if (o->f && o->f != stdout) fclose(o->f);
    o->f = NULL;
    if (o->tmp) {
        out_remove_owned(o);
        out_forget(o, 0, NULL);
    }
    out_free(o);
}

/* ===========================================================================
 * A directory output's lock: "<dir>.lock", one writer at a time.
 * ======================================================================== */

int out_lock_take(const void *owner, const char *dir, const char *what, const char *label, int *fd_out) {
    *fd_out = -1;
    char *lock_path = str_cat(dir, ".lock");
    if (!lock_path) {
        dflash_set_error("%s: out of memory", what);
        return -1;
    }
    int rc = -1;
    for (int attempt = 0; attempt < 1000; attempt++) {
        sigset_t old;
        out_block_signals(&old);
        if (out_register(owner, 'l', lock_path) != 0) {
            out_restore_signals(&old);
            dflash_set_error("%s: out of memory", what);
            goto done;
        }
        int err = 0, busy = 0, stale = 0, foreign = 0;
        int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        struct stat a, b;
        if (fd < 0) err = errno;
        else if (fstat(fd, &a) != 0 || !S_ISREG(a.st_mode) || a.st_size != 0) foreign = 1;  /* ours are empty */
        else if (fcntl(fd, F_SETLK, &fl) != 0) {
            if (errno == EACCES || errno == EAGAIN) busy = 1;
            else err = errno;
        } else if (fstat(fd, &a) != 0 || stat(lock_path, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            stale = 1;
        } else {
            busy = out_registered_same(owner, 'l', &a);  /* fcntl locks do not exclude this process */
        }
        if (err || busy || stale || foreign) {
            out_unregister_last();  /* not ours to remove */
            if (fd >= 0) close(fd);
            fd = -1;
        }
        out_restore_signals(&old);
        if (foreign) {
            dflash_set_error("%s: %s exists and is not a dflash lock (an empty file); refusing to use or remove it",
                             what, lock_path);
            goto done;
        }
        if (busy) {
            dflash_set_error("%s: another dflash run is writing %s %s (it holds the lock %s); wait for it to "
                             "finish, or choose another %s", what, label, dir, lock_path, strstr(label, "directory") ? "directory" : "path");
            goto done;
        }
        if (err) {
            dflash_set_error("%s: cannot create the lock %s: %s", what, lock_path, strerror(err));
            goto done;
        }
        if (!stale) {
            *fd_out = fd;
            rc = 0;
            goto done;
        }
    }
    dflash_set_error("%s: cannot take the lock %s: it keeps being replaced", what, lock_path);
done:
    free(lock_path);
    return rc;
}

void out_lock_release(const void *owner, int fd) {
    sigset_t old;
    out_block_signals(&old);
    out_remove_owned(owner);
    if (fd >= 0) close(fd);  /* after the unlink: a run that opened the name before sees it replaced */
    out_forget(owner, 0, NULL);
    out_restore_signals(&old);
}
