/* walkthrough/tools/pagevars.h - what the page generators mkwalk.c and
 * mklearned.c share: the first failure (kept, nothing written) and the
 * @name@ values a template's lines are filled from. Static functions,
 * included by each generator once (each is one translation unit). */
#ifndef PAGEVARS_H
#define PAGEVARS_H
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

/* ---- values: @name@ ---------------------------------------------------- */
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
#endif
