/* tests/test_usage.c - `dflash --help`, the documents and the flags the code
 * accepts agree.
 *
 * Nothing here lists flags by hand, so a flag added later is held to the
 * same rules:
 * - README.md and the pages in docs/ hold no --help dump (a line starting "usage:
 *   dflash"): the help texts are the reference, the prose points there;
 * - every flag the sources compare against (a string literal "--name" or
 *   "--name=" in cli/main.c, trace.c, cli/diff.c, cli/bench.c, train/train_cli.c, tokenizer/tokenize.c,
 *   train/train_target.c)
 *   is listed in one of the help texts;
 * - every flag the documents mention (`--name` in README.md, NOTES.md,
 *   TRACE.md, toy_weights/README.md, walkthrough/README.md, walkthrough/gdb.md,
 *   walkthrough/learned/README.md, walkthrough/glossary.md, the pages in docs/)
 *   is listed in one of the two (a document cannot advertise a flag that is not
 *   there, as toy_weights/README.md once did with `--stop`).
 * ./dflash is built by the Makefile before the tests run. */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

#include <ctype.h>
#include <dirent.h>

typedef struct {
    char names[128][40];
    int n;
} FlagSet;

static int flag_has(const FlagSet *s, const char *f) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], f) == 0) return 1;
    return 0;
}

static void flag_add(FlagSet *s, const char *start, size_t len) {
    char f[40];
    if (len >= sizeof f) return;
    memcpy(f, start, len);
    f[len] = 0;
    if (!flag_has(s, f) && s->n < 128) strcpy(s->names[s->n++], f);
}

/* every "--name" in text that is not part of a longer word (x--y) */
static void flags_in_text(const char *text, FlagSet *s) {
    for (const char *p = text; (p = strstr(p, "--")) != NULL; p += 2) {
        if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '-' || p[-1] == '_')) continue;
        if (!islower((unsigned char)p[2])) continue;
        size_t len = 2;
        while (islower((unsigned char)p[len]) || isdigit((unsigned char)p[len]) ||
               (p[len] == '-' && islower((unsigned char)p[len + 1])))
            len++;
        flag_add(s, p, len);
    }
}

/* every string literal "--name" or "--name=" in a C source */
static void flags_in_source(const char *src, FlagSet *s) {
    for (const char *p = src; (p = strstr(p, "\"--")) != NULL; p++) {
        const char *q = p + 1;
        size_t len = 2;
        if (!islower((unsigned char)q[2])) continue;
        while (islower((unsigned char)q[len]) || isdigit((unsigned char)q[len]) || q[len] == '-') len++;
        if (q[len] == '"' || (q[len] == '=' && q[len + 1] == '"')) flag_add(s, q, len);
    }
}

static char *help_of(const char *cmd, const char *first) {
    int status;
    char *help = tu_sh(cmd, &status);
    assert_non_null(help);
    assert_int_equal(status, 0);
    assert_non_null(strstr(help, first));
    return help;
}

static char *help_text(void) { return help_of("./dflash --help", "usage: dflash"); }
/* `dflash train --help` (train/train_cli.c) */
static char *train_help_text(void) { return help_of("./dflash train --help", "usage: dflash train"); }
/* `dflash eval --help` (eval/eval.c) */
static char *eval_help_text(void) { return help_of("./dflash eval --help", "usage: dflash eval"); }
/* `dflash tokenize --help` and `dflash train-tokenizer --help` (tokenizer/tokenize.c) */
static char *tokenize_help_text(void) { return help_of("./dflash tokenize --help", "usage: dflash tokenize"); }
static char *train_tok_help_text(void) { return help_of("./dflash train-tokenizer --help", "usage: dflash train-tokenizer"); }
/* `dflash train-target --help` (train/train_target.c) */
static char *train_target_help_text(void) {
    return help_of("./dflash train-target --help", "usage: dflash train-target");
}
/* all six: the flags any document may mention */
static char *all_help_text(void) {
    char *a = help_text(), *b = train_help_text(), *c = eval_help_text(), *d = tokenize_help_text(), *e = train_tok_help_text(),
         *f = train_target_help_text();
    char *all = malloc(strlen(a) + strlen(b) + strlen(c) + strlen(d) + strlen(e) + strlen(f) + 1);
    assert_non_null(all);
    strcpy(all, a);
    strcat(all, b);
    strcat(all, c);
    strcat(all, d);
    strcat(all, e);
    strcat(all, f);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(f);
    return all;
}

/* a line that starts with "usage: dflash": the first line of a --help dump */
static int has_help_dump(const char *text) {
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, "usage: dflash", 13) == 0) return 1;
    return 0;
}

/* the documents: README.md, NOTES.md, TRACE.md, the walkthrough pages and
 * every page in docs/; *n gets their number (each name malloc'd) */
static char **doc_names(int *n) {
    static const char *fixed[] = {"README.md", "NOTES.md", "TRACE.md", "toy_weights/README.md", "walkthrough/README.md",
                                  "walkthrough/gdb.md", "walkthrough/learned/README.md", "walkthrough/glossary.md"};
    int nf = (int)(sizeof fixed / sizeof fixed[0]), k = 0;
    char **names = calloc(nf + 64, sizeof *names);
    assert_non_null(names);
    for (int i = 0; i < nf; i++) names[k++] = strdup(fixed[i]);
    DIR *d = opendir("docs");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL && k < nf + 64) {
            size_t len = strlen(e->d_name);
            if (len > 3 && strcmp(e->d_name + len - 3, ".md") == 0) {
                char *p = malloc(len + 6);
                assert_non_null(p);
                snprintf(p, len + 6, "docs/%s", e->d_name);
                names[k++] = p;
            }
        }
        closedir(d);
    }
    *n = k;
    return names;
}

/* README.md and the docs/ pages hold no --help dump: `./dflash --help` (and
 * each subcommand's) is the reference, and the prose points there */
static void test_readme_and_docs_hold_no_help_dump(void **state) {
    (void)state;
    assert_true(has_help_dump("text\n```\nusage: dflash [OPTIONS]\n```\n"));
    assert_false(has_help_dump("run `usage: dflash` nowhere at a line's start\n"));
    int n;
    char **names = doc_names(&n);
    int dumps = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], "README.md") != 0 && strncmp(names[i], "docs/", 5) != 0) continue;
        char *text = tu_read(names[i], NULL);
        assert_non_null(text);
        if (has_help_dump(text)) {
            print_error("%s holds a --help dump (a line starting \"usage: dflash\"): point to --help instead\n", names[i]);
            dumps++;
        }
        free(text);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    assert_int_equal(dumps, 0);
}

static void test_every_flag_the_code_accepts_is_in_help(void **state) {
    (void)state;
    char *help = all_help_text();
    FlagSet in_help = {0}, in_code = {0};
    flags_in_text(help, &in_help);
    const char *sources[] = {"cli/main.c", "trace.c", "cli/diff.c", "cli/bench.c", "train/train_cli.c", "eval/eval.c",
                             "tokenizer/tokenize.c", "train/train_target.c"};
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        size_t len;
        char *src = tu_read(sources[i], &len);
        assert_non_null(src);
        flags_in_source(src, &in_code);
        free(src);
    }
    /* the extraction itself must find the flags every version has */
    assert_true(flag_has(&in_code, "--weights"));
    assert_true(flag_has(&in_code, "--rtol"));
    assert_true(in_help.n >= in_code.n);
    int missing = 0;
    for (int i = 0; i < in_code.n; i++)
        if (!flag_has(&in_help, in_code.names[i])) {
            print_error("%s is accepted by the code but not listed in --help\n", in_code.names[i]);
            missing++;
        }
    assert_int_equal(missing, 0);
    free(help);
}

static void test_every_flag_the_docs_mention_is_in_help(void **state) {
    (void)state;
    char *help = all_help_text();
    FlagSet in_help = {0};
    flags_in_text(help, &in_help);
    int ndocs;
    char **docs = doc_names(&ndocs);
    int missing = 0, seen = 0;
    for (int i = 0; i < ndocs; i++) {
        size_t len;
        char *text = tu_read(docs[i], &len);
        assert_non_null(text);
        /* lines that run another program (huggingface-cli, python, ...) name
         * that program's flags, not ours: blank them out (llama.cpp's: its
         * tools' lines, its --spec-* flags, the converter's --outtype) */
        static const char *others[] = {"huggingface-cli", "python", "pip ", "chromium", "valgrind ", "gdb -",
                                       "llama-speculative", "llama-cli", "--spec-", "--outtype", "node --check", "llama_check.mjs --"};
        for (char *line = text; *line;) {
            char *nl = strchr(line, '\n');
            size_t n = nl ? (size_t)(nl - line) : strlen(line);
            for (size_t o = 0; o < sizeof others / sizeof others[0]; o++) {
                char *hit = strstr(line, others[o]);
                if (hit && hit < line + n) { memset(line, ' ', n); break; }
            }
            if (!nl) break;
            line = nl + 1;
        }
        FlagSet in_doc = {0};
        flags_in_text(text, &in_doc);
        seen += in_doc.n;
        for (int j = 0; j < in_doc.n; j++)
            if (!flag_has(&in_help, in_doc.names[j])) {
                print_error("%s mentions %s, which --help does not list\n", docs[i], in_doc.names[j]);
                missing++;
            }
        free(text);
    }
    for (int i = 0; i < ndocs; i++) free(docs[i]);
    free(docs);
    assert_true(seen > 0);
    assert_int_equal(missing, 0);
    free(help);
}

/* the extractors themselves: a planted ghost flag is found */
static void test_flag_extraction_finds_a_planted_flag(void **state) {
    (void)state;
    FlagSet s = {0};
    flags_in_text("run `dflash --stop 0`, not x--y or ---z; --max-new-tokens=3", &s);
    assert_int_equal(s.n, 2);
    assert_true(flag_has(&s, "--stop"));
    assert_true(flag_has(&s, "--max-new-tokens"));
    FlagSet c = {0};
    flags_in_source("if (!strcmp(f, \"--seed\") || !strncmp(f, \"--rtol=\", 7)) puts(\"--x y\");", &c);
    assert_int_equal(c.n, 2);
    assert_true(flag_has(&c, "--seed"));
    assert_true(flag_has(&c, "--rtol"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_extraction_finds_a_planted_flag),
        cmocka_unit_test(test_readme_and_docs_hold_no_help_dump),
        cmocka_unit_test(test_every_flag_the_code_accepts_is_in_help),
        cmocka_unit_test(test_every_flag_the_docs_mention_is_in_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
