/* cli/flags.c - THE flag parser (cli/flags.h): one table per subcommand,
 * one reading of "--flag VALUE", one message for each kind of mistake. */
#include "cli/flags.h"
#include "dflash.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int flags_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    /* strtol would also take " 5" and "+5": only digits, with an optional '-' */
    if (!(*s == '-' || (*s >= '0' && *s <= '9')) || *end || errno) {
        dflash_set_error("%s: expected an integer in %ld..%ld, got \"%.100s\"", flag, lo, hi, s);
        return -1;
    }
    if (v < lo || v > hi) {
        dflash_set_error("%s: expected an integer in %ld..%ld, got %ld", flag, lo, hi, v);
        return -1;
    }
    *out = v;
    return 0;
}

int flags_real(const char *flag, const char *s, double lo, int open, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v) || v < lo || (open && v == lo)) {
        dflash_set_error("%s: expected a finite number %s %g, got \"%.100s\"", flag, open ? ">" : ">=", lo, s);
        return -1;
    }
    *out = v;
    return 0;
}

int flags_real_in(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v) || !(v > lo && v < hi)) {
        dflash_set_error("%s: expected a number in (%g, %g), got \"%.100s\"", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int flags_u64(const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* strtoull would take " -1" (as 2^64 - 1): digits only */
    if (!(*s >= '0' && *s <= '9') || *end || errno) {
        dflash_set_error("%s: expected an integer in 0..%llu, got \"%.100s\"", flag, ~0ull, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

const Flag *flags_find(const Flag *table, const char *name) {
    for (const Flag *f = table; f->kind != FLAG_END; f++)
        if (strcmp(f->name, name) == 0 || (f->alias && strcmp(f->alias, name) == 0)) return f;
    return NULL;
}

/* the index of v in "a|b|c", or -1 */
static int choice_index(const char *choices, const char *v) {
    size_t lv = strlen(v);
    int i = 0;
    for (const char *p = choices;; i++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == lv && strncmp(p, v, n) == 0) return i;
        if (!bar) return -1;
        p = bar + 1;
    }
}

/* "a|b|c" as "a, b or c" */
static void choice_words(const char *choices, char *out, size_t size) {
    size_t w = 0, n = strlen(choices);
    const char *last = strrchr(choices, '|');
    for (size_t i = 0; i < n && w + 5 < size; i++) {
        if (choices[i] != '|') { out[w++] = choices[i]; continue; }
        const char *sep = choices + i == last ? " or " : ", ";
        for (const char *s = sep; *s && w + 1 < size; s++) out[w++] = *s;
    }
    out[w] = '\0';
}

static int set_value(const Flag *f, const char *v, void *args) {
    char *base = args;
    long n;
    switch (f->kind) {
    case FLAG_STRING:
        *(const char **)(base + f->field) = v;
        return 0;
    case FLAG_STRINGS:
    case FLAG_LIST: {
        int *count = (int *)(base + f->count);
        if (*count >= f->max) {
            dflash_set_error("%s: expected at most %d, got more", f->name, f->max);
            return -1;
        }
        ((const char **)(base + f->field))[(*count)++] = v;
        return 0;
    }
    case FLAG_INT:
        if (flags_int(f->name, v, (long)f->lo, (long)f->hi, &n) != 0) return -1;
        *(long *)(base + f->field) = n;
        return 0;
    case FLAG_INTS: {
        int *count = (int *)(base + f->count);
        if (*count >= f->max) {
            dflash_set_error("%s: expected at most %d, got more", f->name, f->max);
            return -1;
        }
        if (flags_int(f->name, v, (long)f->lo, (long)f->hi, &n) != 0) return -1;
        ((int *)(base + f->field))[(*count)++] = (int)n;
        return 0;
    }
    case FLAG_REAL:
        if (f->open == FLAG_OPEN_BOTH) return flags_real_in(f->name, v, f->lo, f->hi, (double *)(base + f->field));
        return flags_real(f->name, v, f->lo, f->open, (double *)(base + f->field));
    case FLAG_U64:
        return flags_u64(f->name, v, (uint64_t *)(base + f->field));
    case FLAG_CHOICE: {
        int k = choice_index(f->choices, v);
        if (k < 0) {
            char words[256];
            choice_words(f->choices, words, sizeof words);
            dflash_set_error("%s: expected %s, got \"%.100s\"", f->name, words, v);
            return -1;
        }
        *(int *)(base + f->field) = k;
        return 0;
    }
    case FLAG_SWITCH:
    case FLAG_END:
        break;
    }
    return -1;
}

int flags_parse(const Flag *table, int argc, char **argv, void *args, const char *cmd, const char **positional,
                int max_positional, int *n_positional) {
    char see[128];
    snprintf(see, sizeof see, "(see %s%s--help)", cmd ? cmd : "", cmd ? " " : "");
    if (n_positional) *n_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return 1;
        if (arg[0] != '-' || arg[1] == '\0') {
            if (!positional || !n_positional || *n_positional >= max_positional) {
                dflash_set_error("unexpected argument \"%.100s\": expected a flag %s", arg, see);
                return -1;
            }
            positional[(*n_positional)++] = arg;
            continue;
        }
        /* "--flag=VALUE" */
        char name[64];
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL, *v = NULL;
        size_t ln = eq ? (size_t)(eq - arg) : strlen(arg);
        if (ln >= sizeof name) ln = sizeof name - 1;
        memcpy(name, arg, ln);
        name[ln] = '\0';
        const Flag *f = flags_find(table, name);
        if (!f) {
            dflash_set_error("unknown flag \"%.100s\" %s", arg, see);
            return -1;
        }
        if (f->kind == FLAG_SWITCH) {
            if (eq) {
                dflash_set_error("%s: takes no value, got \"%.100s\"", f->name, eq + 1);
                return -1;
            }
            *(int *)((char *)args + f->field) = 1;
            continue;
        }
        if (eq) {
            v = eq + 1;
        } else {
            const char *next = i + 1 < argc ? argv[i + 1] : NULL;
            if (!next) {
                dflash_set_error("%s: missing value", f->name);
                return -1;
            }
            if (strncmp(next, "--", 2) == 0 && next[2]) {
                dflash_set_error("%s: missing value (the next argument, \"%.100s\", is a flag)", f->name, next);
                return -1;
            }
            v = argv[++i];
        }
        if (set_value(f, v, args) != 0) return -1;
        /* FLAG_LIST: the arguments after the first, up to the next flag */
        while (f->kind == FLAG_LIST && !eq && i + 1 < argc && !(strncmp(argv[i + 1], "--", 2) == 0 && argv[i + 1][2]))
            if (set_value(f, argv[++i], args) != 0) return -1;
    }
    return 0;
}
