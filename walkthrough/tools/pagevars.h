/* walkthrough/tools/pagevars.h - what the page generators mkwalk.c,
 * mklearned.c and mkhybrid.c share: the first failure (kept, nothing
 * written), the check of a claim a page makes, the page being written and
 * its edition, the @name@ values a template's lines are filled from, the
 * template's lines (@NAME@ alone: a block; @name@ in a line: a value), the
 * pages' files; with PAGE_VOCAB defined before the include (mkwalk,
 * mkhybrid) a vocab.txt's words; with PAGE_CHAPTER (mklearned, mkhybrid) the
 * filling and writing of a chapter's two editions, the tensors it reads one
 * by one and its exercises' runs. Static functions,
 * included by each generator once (each is one translation unit). */
#ifndef PAGEVARS_H
#define PAGEVARS_H
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dflash.h"
#include "formats/files.h"

static int bad;           /* a lookup or a check failed while writing */
static char badmsg[1024]; /* the first such failure */

static void flag_bad(const char *fmt, ...) {
    if (bad++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(badmsg, sizeof badmsg, fmt, ap);
    va_end(ap);
}

/* A claim the page makes, checked against the trace: when it does not hold,
 * flag_bad with PAGE_CHECK_WHAT (each generator defines it before including
 * this file: what a failed check is called) and the formatted claim. */
static void check(int ok, const char *fmt, ...) {
    if (ok) return;
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    flag_bad("%s: %s", PAGE_CHECK_WHAT, m);
}

/* The page being written (a memory stream: fill_page opens it) and its
 * edition: T(en, zh) is the words of the one being written. */
static FILE *md;
#define P(...) fprintf(md, __VA_ARGS__)
static int ZH;    /* writing the Chinese edition */
#define T(en, zh) (ZH ? (zh) : (en))

/* ---- values: @name@ ---------------------------------------------------- */

/* integers joined by sep (one of 8 rotating buffers; at most ~2000 characters) */
static const char *ints(const long *v, int n, const char *sep) {
    static char b[8][2048];
    static int k;
    char *o = b[k++ % 8];
    size_t len = 0;
    o[0] = 0;
    for (int i = 0; i < n && len < 2000; i++) len += (size_t)snprintf(o + len, 2048 - len, "%s%ld", i ? sep : "", v[i]);
    return o;
}
typedef struct {
    char name[32];
    char *val;
} Var;
static Var VARS[512];
static int NVARS;

static void vars_free(void) {
    for (int i = 0; i < NVARS; i++) free(VARS[i].val);
    NVARS = 0;
}

/* def("name", fmt, ...): @name@ is the formatted text (a later def wins) */
static void def(const char *name, const char *fmt, ...) {
    if (NVARS == (int)(sizeof VARS / sizeof VARS[0])) { flag_bad("too many values (%s)", name); return; }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *v = malloc((size_t)n + 1);
    if (!v) { flag_bad("out of memory"); return; }
    va_start(ap, fmt);
    vsnprintf(v, (size_t)n + 1, fmt, ap);
    va_end(ap);
    snprintf(VARS[NVARS].name, sizeof VARS[NVARS].name, "%s", name);
    VARS[NVARS++].val = v;
}

static const char *var(const char *name, size_t len) {
    for (int i = NVARS - 1; i >= 0; i--)
        if (strlen(VARS[i].name) == len && strncmp(VARS[i].name, name, len) == 0) return VARS[i].val;
    return NULL;
}

/* ---- the template's lines ---------------------------------------------- */

/* The next line of text[0..len) from *pos (l, n chars, no newline); 0 at the end. */
static int template_line(const char *text, size_t len, size_t *pos, const char **l, size_t *n) {
    if (*pos >= len) return 0;
    size_t e = *pos;
    while (e < len && text[e] != '\n') e++;
    *l = text + *pos, *n = e - *pos;
    *pos = e + 1;
    return 1;
}

/* A line that is @NAME@ alone (capitals, digits, '_'): where a block goes. */
static int is_block_line(const char *l, size_t n) {
    if (n < 3 || l[0] != '@' || l[n - 1] != '@') return 0;
    for (size_t i = 1; i + 1 < n; i++)
        if (!((l[i] >= 'A' && l[i] <= 'Z') || (l[i] >= '0' && l[i] <= '9') || l[i] == '_')) return 0;
    return 1;
}

/* A generator's block writers, by the name of their @NAME@ line. */
typedef struct {
    const char *name;
    void (*write)(void);
} Block;

/* The writer of the block line l (n chars) among blocks[0..nb), or NULL
 * (flagged, as path:lineno). */
static const Block *find_block(const Block *blocks, size_t nb, const char *path, int lineno, const char *l, size_t n) {
    for (size_t k = 0; k < nb; k++)
        if (strlen(blocks[k].name) == n - 2 && strncmp(blocks[k].name, l + 1, n - 2) == 0) return &blocks[k];
    flag_bad("%s:%d: no block writer %.*s", path, lineno, (int)n, l);
    return NULL;
}

/* Line l (n chars) and a newline to out, each @name@ its value (a name
 * without one is flagged, as path:lineno); any other '@' is itself. */
static void put_line(FILE *out, const char *path, int lineno, const char *l, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (l[i] == '@' && i + 1 < n && isalpha((unsigned char)l[i + 1])) {
            size_t j = i + 1;
            while (j < n && (isalnum((unsigned char)l[j]) || l[j] == '_')) j++;
            if (j < n && l[j] == '@') {
                const char *v = var(l + i + 1, j - i - 1);
                if (!v) flag_bad("%s:%d: no value @%.*s@", path, lineno, (int)(j - i - 1), l + i + 1);
                else fputs(v, out);
                i = j;
                continue;
            }
        }
        fputc(l[i], out);
    }
    fputc('\n', out);
}

/* One page into memory (*data, *len): md opened on it, the values set
 * afresh by values(), the template tdir/tpl filled by expand. 0, or -1 when
 * the stream cannot be opened. */
static int fill_page(char **data, size_t *len, const char *tdir, const char *tpl, void (*values)(void),
                     void (*expand)(const char *path)) {
    md = open_memstream(data, len);
    if (!md) return -1;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", tdir, tpl);
    vars_free();
    values();
    expand(path);
    fclose(md);
    return 0;
}

/* ---- the pages' files ------------------------------------------------ */

/* dir/name: data[0..len), written beside and renamed into place
 * (formats/files.c's OutFile; prog names the writer). 0, or -1 with
 * dflash_errmsg set. */
static int write_page(const char *dir, const char *name, const char *data, size_t len, const char *prog) {
    char *path = path_join(dir, name);
    OutFile *f = path ? out_open(path, prog) : NULL;
    free(path);
    if (!f) return -1;
    fwrite(data, 1, len, out_stream(f));
    return out_commit(f);
}

#ifdef PAGE_VOCAB
/* ==== words: a vocab.txt, one token a line (PAGE_VOCAB: mkwalk, mkhybrid) */

static char **VOC;
static int NVOC;

/* path's lines as the words of ids 0, 1, ... 0, or -1 with dflash_errmsg set. */
static int words_load(const char *path) {
    size_t len;
    char *text;
    if (file_read_all(path, &text, &len) != 0) return -1;
    int lines = 0;
    for (size_t k = 0; k < len; k++) lines += text[k] == '\n';
    VOC = calloc((size_t)lines + 1, sizeof(char *));
    if (!VOC) { free(text); dflash_set_error("out of memory"); return -1; }
    size_t p = 0;
    while (p < len) {
        size_t e = p;
        while (e < len && text[e] != '\n') e++;
        char *w = malloc(e - p + 1);
        if (!w) { free(text); dflash_set_error("out of memory"); return -1; }
        memcpy(w, text + p, e - p);
        w[e - p] = 0;
        VOC[NVOC++] = w;
        p = e + 1;
    }
    free(text);
    return 0;
}

static void words_free(void) {
    for (int i = 0; i < NVOC; i++) free(VOC[i]);
    free(VOC);
    VOC = NULL, NVOC = 0;
}

static const char *word(long id) { return id >= 0 && id < NVOC ? VOC[id] : "?"; }

/* a token for Markdown prose and tables: in a code span, so "<mask>" shows
 * (one of 16 rotating buffers) */
static const char *mw(long id) {
    static char b[16][128];
    static int k;
    char *o = b[k++ % 16];
    snprintf(o, 128, "`%s`", word(id));
    return o;
}

/* the tokens ids[0..n), each as one(id), joined by spaces (one of 8
 * rotating buffers; at most ~900 characters) */
static const char *words_joined(const long *ids, int n, const char *(*one)(long)) {
    static char b[8][1024];
    static int k;
    char *o = b[k++ % 8];
    size_t len = 0;
    o[0] = 0;
    for (int i = 0; i < n && len < 900; i++) len += (size_t)snprintf(o + len, 1024 - len, "%s%s", i ? " " : "", one(ids[i]));
    return o;
}
/* plain words: on the mat */
static const char *pwords(const long *ids, int n) { return words_joined(ids, n, word); }
#endif

#ifdef PAGE_CHAPTER
/* ==== a chapter (mklearned, mkhybrid): two editions of README.md from
 * templates with block writers, and a trace read tensor by tensor ====== */

/* The template at path into md: a line @NAME@ by its writer among
 * blocks[0..nb) (*in_block, unless NULL, is 1 while a block writes), any
 * other line by put_line. A template that cannot be read is flagged. */
static void fill_template(const char *path, const Block *blocks, size_t nb, int *in_block) {
    size_t len;
    char *text;
    if (file_read_all(path, &text, &len) != 0) { flag_bad("%s", dflash_errmsg); return; }
    int lineno = 0;
    const char *l;
    size_t n, pos = 0;
    while (template_line(text, len, &pos, &l, &n)) {
        lineno++;
        if (is_block_line(l, n)) {
            const Block *b = find_block(blocks, nb, path, lineno, l, n);
            if (!b) continue;
            if (in_block) *in_block = 1;
            b->write();
            if (in_block) *in_block = 0;
            continue;
        }
        put_line(md, path, lineno, l, n);
    }
    free(text);
}

/* The usage of a chapter generator: nreq arguments (usage names them),
 * then an optional TEMPLATE_DIR. That directory (default
 * walkthrough/tools), or NULL when the count is wrong (the usage printed). */
static const char *template_dir_arg(int argc, char **argv, int nreq, const char *usage) {
    if (argc < nreq + 1 || argc > nreq + 2) {
        fprintf(stderr, "usage: %s [TEMPLATE_DIR (default walkthrough/tools)]\n", usage);
        return NULL;
    }
    return argc == nreq + 2 ? argv[nreq + 1] : "walkthrough/tools";
}

/* A chapter's two editions: tdir/tpl[0] (English, ZH 0) and tdir/tpl[1]
 * (Chinese, ZH 1) filled in memory by fill_page, then, unless a lookup or a
 * check failed (the first failure reported, nothing written), written to
 * out_dir as README.md and README.zh.md. prog names the generator in its
 * messages. The exit status: 0, or 1. */
static int write_editions(const char *prog, const char *out_dir, const char *tdir, const char *const tpl[2],
                          void (*values)(void), void (*expand)(const char *path)) {
    static const char *const name[2] = {"README.md", "README.zh.md"};
    char *data[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    int rc = 0;
    for (ZH = 0; ZH < 2 && !bad && rc == 0; ZH++)
        if (fill_page(&data[ZH], &len[ZH], tdir, tpl[ZH], values, expand) != 0) {
            fprintf(stderr, "%s: out of memory\n", prog);
            rc = 1;
        }
    vars_free();
    if (rc == 0 && bad) {
        fprintf(stderr, "%s: %s%s; nothing written\n", prog, badmsg, bad > 1 ? " (and more)" : "");
        rc = 1;
    } else if (rc == 0) {
        for (int i = 0; i < 2 && rc == 0; i++)
            if (write_page(out_dir, name[i], data[i], len[i], prog) != 0) { fprintf(stderr, "%s: %s\n", prog, dflash_errmsg); rc = 1; }
        if (rc == 0) printf("%s: wrote README.md and README.zh.md to %s\n", prog, out_dir);
    }
    free(data[0]);
    free(data[1]);
    return rc;
}

/* ---- tensors: DIR/<name>.npy, read when first asked for --------------- */

static const char *TDIR;  /* the trace get() and has() read */
typedef struct {
    const char *dir;      /* the directory as given (an argument: lives as long as the program) */
    char name[96];
    NpyValues v;
} Tensor;
static Tensor TS[256];
static int NTS;

/* The tensor dir/<fmt ...>.npy (read once, then kept); a missing one is
 * flagged and reads as no values. */
static const NpyValues *get_in(const char *dir, const char *fmt, ...) {
    static NpyValues empty;
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof name) { flag_bad("a tensor name of %d characters", n); return &empty; }
    for (int k = 0; k < NTS; k++)
        if (strcmp(TS[k].dir, dir) == 0 && strcmp(TS[k].name, name) == 0) return &TS[k].v;
    if (NTS == (int)(sizeof TS / sizeof TS[0])) { flag_bad("too many tensors"); return &empty; }
    char file[128];
    snprintf(file, sizeof file, "%s.npy", name);
    char *path = path_join(dir, file);
    Tensor *t = &TS[NTS];
    if (!path || npy_read_values(path, &t->v) != 0) {
        free(path);
        flag_bad("%s has no tensor %s (%s)", dir, name, dflash_errmsg);
        return &empty;
    }
    free(path);
    t->dir = dir;
    snprintf(t->name, sizeof t->name, "%s", name);
    NTS++;
    return &t->v;
}
#define get(...) get_in(TDIR, __VA_ARGS__)

static void tensors_free(void) {
    for (int k = 0; k < NTS; k++) npy_values_free(&TS[k].v);
    NTS = 0;
}

/* whether TDIR has the tensor <fmt ...> (not read) */
static int has(const char *fmt, ...) {
    char name[96], file[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    snprintf(file, sizeof file, "%s.npy", name);
    char *path = path_join(TDIR, file);
    struct stat st;
    int ok = path && stat(path, &st) == 0;
    free(path);
    return ok;
}

/* value k of t as a double (an integer tensor's too); out of range is flagged */
static double val(const NpyValues *t, size_t k) {
    if (k >= t->n) { flag_bad("index %zu out of range (%zu values)", k, t->n); return 0; }
    return t->is_int ? (double)t->i[k] : t->f[k];
}
static long ival(const NpyValues *t, size_t k) { return (long)val(t, k); }

/* ---- the exercises' runs: RUNS_TXT, "@@ NAME" then its --rounds output */

/* The next line of text (read whole) at *p, cut in place (its newline
 * becomes 0), and *p past it; NULL at the end. */
static char *cut_line(char **p) {
    if (!**p) return NULL;
    char *l = *p, *e = strchr(l, '\n');
    if (e) *e = 0, *p = e + 1;
    else *p = l + strlen(l);
    return l;
}

/* A run's summary line "... target forward passes: N ... (tau): X": N into
 * *forwards and X as printed (at most 15 characters) into tau. 0 when line
 * is not one. */
static int summary_line(const char *line, int *forwards, char tau[16]) {
    const char *q = strstr(line, "target forward passes: ");
    if (!q) return 0;
    *forwards = atoi(q + 23);
    const char *t = strstr(line, "(tau): ");
    if (t) {
        int k = 0;
        for (t += 7; (isdigit((unsigned char)*t) || *t == '.') && k < 15; t++) tau[k++] = *t;
        tau[k] = 0;
    }
    return 1;
}
#endif
#endif
