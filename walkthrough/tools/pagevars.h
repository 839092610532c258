/* walkthrough/tools/pagevars.h - what the page generators mkwalk.c and
 * mklearned.c share: the first failure (kept, nothing written), the check
 * of a claim a page makes, the @name@ values a template's lines are filled
 * from, and the template's lines (@NAME@ alone: a block; @name@ in a line:
 * a value). Static functions, included by each generator once (each is one
 * translation unit). */
#ifndef PAGEVARS_H
#define PAGEVARS_H
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One page into memory (*data, *len): *page (the generator's page stream)
 * opened on it, the values set afresh by values(), the template tdir/tpl
 * filled by expand. 0, or -1 when the stream cannot be opened. */
static int fill_page(FILE **page, char **data, size_t *len, const char *tdir, const char *tpl, void (*values)(void),
                     void (*expand)(const char *path)) {
    *page = open_memstream(data, len);
    if (!*page) return -1;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", tdir, tpl);
    vars_free();
    values();
    expand(path);
    fclose(*page);
    return 0;
}
#endif
