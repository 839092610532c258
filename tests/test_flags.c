/* tests/test_flags.c - THE flag table (cli/flags.h) of every subcommand
 * against the --help that subcommand prints, and the parser itself.
 *
 * For each table: every flag is listed in the help and every flag the help
 * lists is in the table; a switch is listed without a value and every other
 * flag with one; a choice's values are the table's; an integer range or a
 * bound written in the help ("1..4096", ", > 0", "a finite number >= 0") is
 * the table's. The help texts come from ./dflash (built by the Makefile
 * before the tests run); the tables from the sources (cli/main.c is
 * included with its main renamed). */
#define main dflash_cli_main
#include "cli/main.c"
#undef main
#include "tests/testutil.h"

#include <ctype.h>

extern const Flag TRAIN_FLAGS[], FIGURES_FLAGS[], EXPLORE_FLAGS[], GGUF_FLAGS[], DIFF_FLAGS[], EVAL_FLAGS[],
    TOKENIZE_FLAGS[], TRAIN_TOKENIZER_FLAGS[], TRAIN_TARGET_FLAGS[];

/* One flag as the help lists it. */
typedef struct {
    char name[40];
    char value[80];   /* its metavar ("N", "cosine|constant"); "" for a switch */
    char desc[2048];  /* the rest of its entry (option-list style only) */
} HelpFlag;

typedef struct {
    HelpFlag f[64];
    int n;
} HelpFlags;

static const HelpFlag *help_find(const HelpFlags *h, const char *name) {
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->f[i].name, name) == 0) return &h->f[i];
    return NULL;
}

/* read "--name[ VALUE]" at p into f; returns the end */
static const char *read_flag(const char *p, HelpFlag *f, int list_style) {
    size_t k = 0;
    while ((isalnum((unsigned char)*p) || *p == '-') && k + 1 < sizeof f->name) f->name[k++] = *p++;
    f->name[k] = 0;
    f->value[0] = 0;
    if (p[0] == ' ' && p[1] && p[1] != ' ' && p[1] != '-' && p[1] != '[' && p[1] != '|') {
        p++;
        k = 0;
        while (*p && *p != ' ' && *p != '\n' && *p != ']' && *p != ',' && k + 1 < sizeof f->value) f->value[k++] = *p++;
        f->value[k] = 0;
    }
    (void)list_style;
    return p;
}

/* The option list of text between the lines starting with from and upto
 * (NULL: the start, the end): lines "  --name VALUE   description", with
 * continuation lines indented further. "-h, --help" is left out. */
static void help_list(const char *text, const char *from, const char *upto, HelpFlags *h) {
    const char *p = from ? strstr(text, from) : text, *end = upto ? strstr(p, upto) : NULL;
    assert_non_null(p);
    if (!end) end = p + strlen(p);
    HelpFlag *cur = NULL;
    while (p < end) {
        const char *nl = strchr(p, '\n');
        if (!nl || nl > end) nl = end;
        if (p[0] == ' ' && p[1] == ' ' && p[2] == '-' && p[3] == '-') {
            assert_true(h->n < 64);
            cur = &h->f[h->n++];
            const char *q = read_flag(p + 2, cur, 1);
            snprintf(cur->desc, sizeof cur->desc, "%.*s", (int)(nl - q), q);
        } else if (p[0] == ' ' && p[1] == ' ' && p[2] == ' ' && cur) {
            size_t l = strlen(cur->desc);
            snprintf(cur->desc + l, sizeof cur->desc - l, " %.*s", (int)(nl - p), p);
        } else {
            cur = NULL;
        }
        p = nl + 1;
    }
}

/* The flags of a usage line: "[--name VALUE]" and "--name VALUE" */
static void help_usage_line(const char *text, HelpFlags *h) {
    for (const char *p = text; (p = strstr(p, "--")) != NULL;) {
        HelpFlag f;
        memset(&f, 0, sizeof f);
        p = read_flag(p, &f, 0);
        if (!help_find(h, f.name) && strcmp(f.name, "--help") != 0) {
            assert_true(h->n < 64);
            h->f[h->n++] = f;
        }
    }
}

/* the words of "a|b|c", sorted, joined by '|' */
static void sorted_words(const char *s, char *out, size_t size) {
    char w[16][40];
    int n = 0;
    for (const char *p = s; *p && n < 16;) {
        size_t k = 0;
        while (*p && *p != '|' && k + 1 < sizeof w[n]) w[n][k++] = *p++;
        w[n++][k] = 0;
        if (*p == '|') p++;
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(w[j], w[i]) < 0) {
                char t[40];
                strcpy(t, w[i]), strcpy(w[i], w[j]), strcpy(w[j], t);
            }
    out[0] = 0;
    for (int i = 0; i < n; i++) snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? "|" : "", w[i]);
}

/* "lo..hi" in desc (digits on both sides), or 0 */
static int desc_range(const char *desc, long long *lo, long long *hi) {
    for (const char *p = desc; (p = strstr(p, "..")) != NULL; p += 2) {
        const char *a = p;
        while (a > desc && isdigit((unsigned char)a[-1])) a--;
        if (a == p || !isdigit((unsigned char)p[2])) continue;
        if (a > desc && (isalpha((unsigned char)a[-1]) || a[-1] == '-')) continue;
        *lo = strtoll(a, NULL, 10);
        *hi = strtoll(p + 2, NULL, 10);
        return 1;
    }
    return 0;
}

/* a bound on a real written as ", > 0", ", >= 0", "number > 0", "number >= 0" */
static int desc_bound(const char *desc, double *lo, int *open) {
    static const char *const lead[] = {", ", "number "};
    for (int k = 0; k < 2; k++)
        for (const char *p = desc; (p = strstr(p, lead[k])) != NULL; p++) {
            const char *q = p + strlen(lead[k]);
            if (q[0] != '>') continue;
            *open = q[1] != '=';
            *lo = strtod(q + (*open ? 1 : 2), NULL);
            return 1;
        }
    return 0;
}

static int check_table(const char *cmd, const Flag *table, const HelpFlags *h, int list_style) {
    int bad = 0;
    for (const Flag *f = table; f->kind != FLAG_END; f++) {
        const HelpFlag *hf = help_find(h, f->name);
        if (!hf) {
            print_error("%s: %s is in the flag table but not in --help\n", cmd, f->name);
            bad++;
            continue;
        }
        if ((f->kind == FLAG_SWITCH) != (hf->value[0] == 0)) {
            print_error("%s: %s is %s in the table, listed %s a value\n", cmd, f->name,
                        f->kind == FLAG_SWITCH ? "a switch" : "a flag with a value", hf->value[0] ? "with" : "without");
            bad++;
        }
        if (f->kind == FLAG_CHOICE) {
            char a[256], b[256];
            sorted_words(f->choices, a, sizeof a);
            sorted_words(hf->value, b, sizeof b);
            if (strcmp(a, b) != 0) {
                print_error("%s: %s: the table's choices are %s, --help says %s\n", cmd, f->name, f->choices, hf->value);
                bad++;
            }
        }
        if (!list_style) continue;
        long long lo, hi;
        if ((f->kind == FLAG_INT || f->kind == FLAG_INTS) && desc_range(hf->desc, &lo, &hi) &&
            (lo != (long long)f->lo || hi != (long long)f->hi)) {
            print_error("%s: %s: the table's range is %.0f..%.0f, --help says %lld..%lld\n", cmd, f->name, f->lo, f->hi,
                        lo, hi);
            bad++;
        }
        if (f->kind == FLAG_U64 && desc_range(hf->desc, &lo, &hi) && lo != 0) {
            print_error("%s: %s: an unsigned 64-bit value starts at 0, --help says %lld\n", cmd, f->name, lo);
            bad++;
        }
        double blo;
        int open;
        if (f->kind == FLAG_REAL && desc_bound(hf->desc, &blo, &open) && (blo != f->lo || open != f->open)) {
            print_error("%s: %s: the table says %s %g, --help says %s %g\n", cmd, f->name, f->open ? ">" : ">=", f->lo,
                        open ? ">" : ">=", blo);
            bad++;
        }
    }
    for (int i = 0; i < h->n; i++)
        if (!flags_find(table, h->f[i].name)) {
            print_error("%s: --help lists %s, which the flag table lacks\n", cmd, h->f[i].name);
            bad++;
        }
    return bad;
}

static void test_main_flags(void **state) {
    (void)state;
    char *help = tu_capture("./dflash --help");
    HelpFlags h = {0};
    help_list(help, "options (each flag", "diff options", &h);
    assert_true(h.n >= 15);
    assert_int_equal(check_table("dflash", MAIN_FLAGS, &h, 1), 0);
    free(help);
}

static void test_train_flags(void **state) {
    (void)state;
    char *help = tu_capture("./dflash train --help");
    HelpFlags h = {0};
    help_list(help, "models:", NULL, &h);
    assert_true(h.n >= 25);
    assert_int_equal(check_table("dflash train", TRAIN_FLAGS, &h, 1), 0);
    free(help);
}

/* the subcommands whose --help is an option list: from the line starting
 * with from (NULL: the start) to the one starting with upto (NULL: the end) */
static void test_list_flags(void **state) {
    (void)state;
    static const struct { const char *cmd, *from, *upto; const Flag *table; int at_least; } C[] = {
        {"./dflash --help", "diff options", "explore options", DIFF_FLAGS, 7},
        {"./dflash diff --help", "diff options", NULL, DIFF_FLAGS, 7},
        {"./dflash eval --help", NULL, NULL, EVAL_FLAGS, 18},
        {"./dflash tokenize --help", NULL, NULL, TOKENIZE_FLAGS, 6},
        {"./dflash train-tokenizer --help", NULL, NULL, TRAIN_TOKENIZER_FLAGS, 3},
        {"./dflash train-target --help", "models:", NULL, TRAIN_TARGET_FLAGS, 28},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char *help = tu_capture(C[i].cmd);
        HelpFlags h = {0};
        help_list(help, C[i].from, C[i].upto, &h);
        if (h.n < C[i].at_least) print_error("%s: %d flags listed, expected at least %d\n", C[i].cmd, h.n, C[i].at_least);
        assert_true(h.n >= C[i].at_least);
        assert_int_equal(check_table(C[i].cmd, C[i].table, &h, 1), 0);
        free(help);
    }
}

static void test_usage_line_flags(void **state) {
    (void)state;
    static const struct { const char *cmd; const Flag *table; } C[] = {
        {"./dflash figures --help", FIGURES_FLAGS},
        {"./dflash explore --help", EXPLORE_FLAGS},
        {"./dflash gguf --help", GGUF_FLAGS},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char *help = tu_capture(C[i].cmd);
        HelpFlags h = {0};
        help_usage_line(help, &h);
        assert_true(h.n >= 1);
        assert_int_equal(check_table(C[i].cmd, C[i].table, &h, 0), 0);
        free(help);
    }
}

/* The checker itself must catch a table and a help that disagree. */
static void test_checker_catches_mistakes(void **state) {
    (void)state;
    HelpFlags h = {0};
    help_list("x:\n  --n N       count, 1..10\n  --r R       rate, > 0\n  --k a|b     kind\n  --s         on\n", "x:",
              NULL, &h);
    assert_int_equal(h.n, 4);
    typedef struct { long n; double r; int k, s; } A;
    const Flag good[] = {{.name = "--n", .kind = FLAG_INT, .field = offsetof(A, n), .lo = 1, .hi = 10},
                         {.name = "--r", .kind = FLAG_REAL, .field = offsetof(A, r), .lo = 0, .open = FLAG_OPEN},
                         {.name = "--k", .kind = FLAG_CHOICE, .field = offsetof(A, k), .choices = "b|a"},
                         {.name = "--s", .kind = FLAG_SWITCH, .field = offsetof(A, s)},
                         FLAG_TABLE_END};
    assert_int_equal(check_table("good", good, &h, 1), 0);
    Flag bad[5];
    memcpy(bad, good, sizeof bad);
    bad[0].hi = 11;
    assert_int_equal(check_table("range", bad, &h, 1), 1);
    memcpy(bad, good, sizeof bad);
    bad[1].open = 0;
    assert_int_equal(check_table("bound", bad, &h, 1), 1);
    memcpy(bad, good, sizeof bad);
    bad[2].choices = "a|c";
    assert_int_equal(check_table("choices", bad, &h, 1), 1);
    memcpy(bad, good, sizeof bad);
    bad[3].kind = FLAG_STRING;
    assert_int_equal(check_table("switch", bad, &h, 1), 1);
    memcpy(bad, good, sizeof bad);
    bad[3] = bad[4];  /* --s dropped from the table */
    assert_int_equal(check_table("missing", bad, &h, 1), 1);
}

/* The parser: values, "=", ranges, choices, repeats, missing values. */
static void test_parser(void **state) {
    (void)state;
    typedef struct { const char *s; long n; double r; uint64_t u; int k, sw, cnt; int xs[2]; } A;
    const Flag t[] = {{.name = "--s", .kind = FLAG_STRING, .field = offsetof(A, s)},
                      {.name = "--n", .kind = FLAG_INT, .field = offsetof(A, n), .lo = -2, .hi = 10},
                      {.name = "--r", .kind = FLAG_REAL, .field = offsetof(A, r), .lo = 0, .open = FLAG_OPEN},
                      {.name = "--u", .kind = FLAG_U64, .field = offsetof(A, u)},
                      {.name = "--k", .kind = FLAG_CHOICE, .field = offsetof(A, k), .choices = "x|y|z"},
                      {.name = "--sw", .kind = FLAG_SWITCH, .field = offsetof(A, sw)},
                      {.name = "--x", .kind = FLAG_INTS, .field = offsetof(A, xs), .lo = 0, .hi = 9,
                       .count = offsetof(A, cnt), .max = 2},
                      FLAG_TABLE_END};
    A a;
    memset(&a, 0, sizeof a);
    char *ok[] = {"p", "--s", "v", "--n=-2", "--r", "0.5", "--u", "18446744073709551615", "--k", "z", "--sw",
                  "--x", "3", "--x=4"};
    assert_int_equal(flags_parse(t, 14, ok, &a, "p", NULL, 0, NULL), 0);
    assert_string_equal(a.s, "v");
    assert_int_equal(a.n, -2);
    assert_true(a.r == 0.5);
    assert_true(a.u == ~(uint64_t)0);
    assert_int_equal(a.k, 2);
    assert_int_equal(a.sw, 1);
    assert_int_equal(a.cnt, 2);
    assert_int_equal(a.xs[1], 4);
    static const struct { const char *argv[3]; const char *msg; } B[] = {
        {{"--n", "11"}, "--n: expected an integer in -2..10, got 11"},
        {{"--n", "1x"}, "--n: expected an integer in -2..10, got \"1x\""},
        {{"--r", "0"}, "--r: expected a finite number > 0, got \"0\""},
        {{"--r", "inf"}, "--r: expected a finite number > 0, got \"inf\""},
        {{"--u", "-1"}, "--u: expected an integer in 0..18446744073709551615, got \"-1\""},
        {{"--k", "w"}, "--k: expected x, y or z, got \"w\""},
        {{"--s"}, "--s: missing value"},
        {{"--s", "--n"}, "--s: missing value (the next argument, \"--n\", is a flag)"},
        {{"--bogus"}, "unknown flag \"--bogus\" (see p --help)"},
        {{"stray"}, "unexpected argument \"stray\": expected a flag (see p --help)"},
        {{"--sw=1"}, "--sw: takes no value"},
        {{"--x", "1", "--x"}, "--x: missing value"},
    };
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++) {
        char *argv[4] = {"p", (char *)B[i].argv[0], (char *)B[i].argv[1], (char *)B[i].argv[2]};
        int argc = 1;
        while (argc < 4 && argv[argc]) argc++;
        memset(&a, 0, sizeof a);
        dflash_errmsg[0] = 0;
        assert_int_equal(flags_parse(t, argc, argv, &a, "p", NULL, 0, NULL), -1);
        if (!strstr(dflash_errmsg, B[i].msg)) print_error("got: %s\nwant: %s\n", dflash_errmsg, B[i].msg);
        assert_non_null(strstr(dflash_errmsg, B[i].msg));
    }
    char *many[] = {"p", "--x", "1", "--x", "2", "--x", "3"};
    memset(&a, 0, sizeof a);
    assert_int_equal(flags_parse(t, 7, many, &a, "p", NULL, 0, NULL), -1);
    assert_non_null(strstr(dflash_errmsg, "--x: expected at most 2, got more"));
    /* a list (every argument up to the next flag), a real in (0, 1), an alias */
    typedef struct { const char *l[3]; int nl; double b; int v; } L;
    const Flag tl[] = {{.name = "--l", .kind = FLAG_LIST, .field = offsetof(L, l), .count = offsetof(L, nl), .max = 3},
                       {.name = "--b", .kind = FLAG_REAL, .field = offsetof(L, b), .lo = 0, .hi = 1,
                        .open = FLAG_OPEN_BOTH},
                       {.name = "--verbose", .alias = "-v", .kind = FLAG_SWITCH, .field = offsetof(L, v)},
                       FLAG_TABLE_END};
    L l;
    memset(&l, 0, sizeof l);
    char *lok[] = {"p", "--l", "x", "-", "--b", "0.5", "-v", "--l=y"};
    assert_int_equal(flags_parse(tl, 8, lok, &l, "p", NULL, 0, NULL), 0);
    assert_int_equal(l.nl, 3);
    assert_string_equal(l.l[1], "-");
    assert_string_equal(l.l[2], "y");
    assert_true(l.b == 0.5);
    assert_int_equal(l.v, 1);
    char *lmany[] = {"p", "--l", "a", "b", "c", "d"};
    memset(&l, 0, sizeof l);
    assert_int_equal(flags_parse(tl, 6, lmany, &l, "p", NULL, 0, NULL), -1);
    assert_non_null(strstr(dflash_errmsg, "--l: expected at most 3, got more"));
    static const char *const bb[] = {"0", "1", "-0.1", "nan"};
    for (int i = 0; i < 4; i++) {
        char *bv[] = {"p", "--b", (char *)bb[i]};
        assert_int_equal(flags_parse(tl, 3, bv, &l, "p", NULL, 0, NULL), -1);
        assert_non_null(strstr(dflash_errmsg, "--b: expected a number in (0, 1), got"));
    }
    char *lnone[] = {"p", "--l", "--b", "0.5"};
    assert_int_equal(flags_parse(tl, 4, lnone, &l, "p", NULL, 0, NULL), -1);
    assert_non_null(strstr(dflash_errmsg, "--l: missing value (the next argument, \"--b\", is a flag)"));
    char *help[] = {"p", "--n", "3", "-h", "--bogus"};
    assert_int_equal(flags_parse(t, 5, help, &a, "p", NULL, 0, NULL), 1);
    const char *pos[2];
    int n_pos;
    char *two[] = {"p", "a", "--sw", "b"};
    assert_int_equal(flags_parse(t, 4, two, &a, "p", pos, 2, &n_pos), 0);
    assert_int_equal(n_pos, 2);
    assert_string_equal(pos[1], "b");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser),
        cmocka_unit_test(test_checker_catches_mistakes),
        cmocka_unit_test(test_main_flags),
        cmocka_unit_test(test_train_flags),
        cmocka_unit_test(test_usage_line_flags),
        cmocka_unit_test(test_list_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
