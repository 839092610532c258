/* tests/test_first_steps.c - what a student meets first (issue 36, part 1):
 *   - README.md opens with a "Start here" path (make run, the walkthrough,
 *     gdb.md, the exercises, the training chapter) before the provenance and
 *     the glossary, and says how much `make run` writes: the number it gives
 *     is checked against the sizes of the generated toy weight files;
 *   - `make run` keeps the build's output in a log and leaves
 *     walkthrough/explorer.html in place (the Makefile's rule), and README's
 *     sample of what it prints is what it prints (the rule's echo, then
 *     ./dflash's output now);
 *   - the round log marks the kept tokens that fall after the output's end
 *     (after the stop id, or past --max-new-tokens), which tau counts: the
 *     expected marks are worked out here from the log's own positions and
 *     the --print-ids output, for block sizes 2..8 and a cut run.
 * Needs ./dflash and the weights (make test builds them). */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

#include <dirent.h>
#include <sys/stat.h>

/* bytes of the regular files under dir, recursively */
static unsigned long long tree_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) fail_msg("%s: cannot open (make weights)", dir);
    unsigned long long sum = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) sum += tree_bytes(p);
        else if (S_ISREG(st.st_mode)) sum += (unsigned long long)st.st_size;
    }
    closedir(d);
    return sum;
}

static void test_readme_start_here(void **state) {
    (void)state;
    char *r = tu_read("README.md", NULL);
    assert_non_null(r);
    char *start = strstr(r, "\n## Start here\n"), *prov = strstr(r, "\n## Where it comes from\n");
    char *gloss = strstr(r, "\n## Glossary\n");
    assert_non_null(start);
    assert_non_null(prov);
    assert_non_null(gloss);
    assert_true(start < prov && start < gloss);
    char *end = strstr(start + 1, "\n## ");
    assert_non_null(end);
    *end = 0;
    /* the path, in order */
    const char *steps[] = {"`make run`", "walkthrough/README.md", "walkthrough/gdb.md", "walkthrough/exercises.md",
                           "walkthrough/README.md#how-the-draft-learned-this-one-training-step"};
    const char *at = start;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        const char *f = strstr(at, steps[i]);
        if (!f) fail_msg("README's Start here: \"%s\" missing (or out of order)", steps[i]);
        at = f;
    }
    assert_non_null(strstr(start, "walkthrough/explorer.html"));
    assert_non_null(strstr(start, "build/run.log"));
    /* "about N MB": the seven generated sets' files (the Makefile's WEIGHTS), within 1% */
    const char *mb = strstr(start, " MB");
    assert_non_null(mb);
    const char *num = mb;
    while (num > start && num[-1] >= '0' && num[-1] <= '9') num--;
    double said = atof(num) * 1e6;
    const char *sets[] = {"random", "walkthrough", "qwen3-layout", "sliding", "llama", "lm-tiny", "hybrid"};
    double have = 0;
    for (int i = 0; i < 7; i++) {
        char p[64];
        snprintf(p, sizeof p, "toy_weights/%s", sets[i]);
        have += (double)tree_bytes(p);
    }
    if (fabs(said - have) > 0.01 * have) fail_msg("README says %.0f MB, the toy weights are %.1f MB", said / 1e6, have / 1e6);
    free(r);
}

/* the Makefile's run rule: its recipe sends the build's output to
 * build/run.log and makes walkthrough/explorer.html */
static void test_make_run_rule(void **state) {
    (void)state;
    char *m = tu_read("Makefile", NULL);
    assert_non_null(m);
    char *rule = strstr(m, "\nrun:");
    assert_non_null(rule);
    char *end = strstr(rule + 1, "\n\n");
    assert_non_null(end);
    *end = 0;
    assert_non_null(strstr(rule, "walkthrough/explorer.html"));
    assert_non_null(strstr(rule, "> build/run.log 2>&1"));
    assert_non_null(strstr(rule, "./dflash"));
    free(m);
}

/* README's sample of `make run` is what it prints: its first line is the
 * run rule's echo (the Makefile), its second the rule's command `./dflash`,
 * and the rest what ./dflash prints now, byte for byte */
static void test_readme_make_run_output(void **state) {
    (void)state;
    char *r = tu_read("README.md", NULL), *m = tu_read("Makefile", NULL);
    assert_non_null(r);
    assert_non_null(m);
    char *block = strstr(r, "```\nmake run: ");
    if (!block) fail_msg("README.md has no fenced block starting with \"make run: \" (what make run prints)");
    block += 4;
    char *end = strstr(block, "```");
    assert_non_null(end);
    *end = 0;
    char *line2 = strchr(block, '\n');
    assert_non_null(line2);
    *line2++ = 0;
    /* the echo of the run rule, as make prints it */
    char *rule = strstr(m, "\nrun:");
    assert_non_null(rule);
    char echo[512];
    snprintf(echo, sizeof echo, "@echo \"%s\"", block);
    if (!strstr(rule, echo)) fail_msg("README's make run sample begins \"%s\", which the run rule does not echo", block);
    const char *cmd = "./dflash\n";
    if (strncmp(line2, cmd, strlen(cmd)) != 0) fail_msg("README's make run sample: its second line is not ./dflash");
    char *out = tu_capture("./dflash");
    const char *said = line2 + strlen(cmd);
    if (strcmp(said, out) != 0) {
        const char *a = said, *b = out;
        while (*a && *a == *b) { a++; b++; }
        fail_msg("README's make run sample differs from what ./dflash prints:\n  README: %.80s\n  ./dflash: %.80s", a, b);
    }
    free(out);
    free(m);
    free(r);
}

/* words[0..n) of "[a b c]" starting at s; returns the char after ']' */
static const char *list_words(const char *s, char words[][32], int *n) {
    assert_true(*s == '[');
    s++;
    *n = 0;
    while (*s && *s != ']') {
        int k = 0;
        while (*s && *s != ' ' && *s != ']') {
            if (k < 31) words[*n][k++] = *s;
            s++;
        }
        words[*n][k] = 0;
        (*n)++;
        if (*s == ' ') s++;
    }
    assert_true(*s == ']');
    return s + 1;
}

/* one run's round log against the marks expected from its own positions */
static void check_marks(const char *flags, int *n_marked) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "./dflash %s --rounds --print-ids", flags);
    char *out = tu_capture(cmd);
    /* the --print-ids line: the last line of digits and spaces before the summary */
    int n_output = 0, last_id = -1;
    char *line = out, *ids_line = NULL;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (line[0] >= '0' && line[0] <= '9') ids_line = line;
        line = nl ? nl + 1 : NULL;
    }
    assert_non_null(ids_line);
    for (char *p = ids_line; *p && *p != '\n';) {
        last_id = (int)strtol(p, &p, 10);
        n_output++;
        while (*p == ' ') p++;
    }
    int stopped = last_id == 0;  /* <eos>, the walkthrough set's stop id */
    int start = -1;
    for (line = out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        const char *b = strstr(line, "block in   [");
        if (strncmp(line, "round ", 6) == 0 && b) {
            const char *at = strstr(line, "at positions ");
            assert_non_null(at);
            start = atoi(at + 13);
        }
        const char *k = strstr(line, "keep [");
        if (k) {
            char w[64][32];
            int n;
            const char *rest = list_words(k + 5, w, &n);
            int acc = n - 1;
            const char *q = strstr(rest, "+ \"");
            assert_non_null(q);
            const char *qe = strchr(q + 3, '"');
            assert_non_null(qe);
            snprintf(w[n], sizeof w[n], "%.*s", (int)(qe - q - 3), q + 3);
            /* kept: w[1..acc] at start+1..start+acc, the bonus w[acc+1] at start+acc+1 */
            char want[512] = "";
            int cut = 0;
            for (int j = 1; j <= acc + 1; j++)
                if (start + j >= n_output) {
                    snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", cut ? " " : "", w[j]);
                    cut++;
                }
            char mark[700];
            if (cut) {
                snprintf(mark, sizeof mark, "  (%s, not in the output: %s; tau counts %s)",
                         stopped ? "after the stop id" : "past --max-new-tokens", want, cut == 1 ? "it" : "them");
                if (strcmp(qe + 1, mark) != 0) fail_msg("%s: \"%s\", expected the mark \"%s\"", flags, line, mark);
                (*n_marked)++;
            } else if (qe[1] != 0) {
                fail_msg("%s: \"%s\": a mark though every kept token is in the output", flags, line);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(out);
}

static void test_round_log_marks_tokens_past_the_output(void **state) {
    (void)state;
    int marked = 0;
    char flags[128];
    for (int B = 2; B <= 8; B++) {
        snprintf(flags, sizeof flags, "--block-size %d", B);
        check_marks(flags, &marked);
    }
    assert_true(marked >= 2);  /* B = 2 and 3: the stop falls among a round's kept tokens */
    int before = marked;
    check_marks("--block-size 4 --max-new-tokens 5", &marked);
    assert_int_equal(marked, before + 1);
    /* the example the glossary quotes */
    char *out = tu_capture("./dflash --block-size 3 --rounds");
    assert_non_null(strstr(out, "keep [. <eos> The] + \"cat\"  (after the stop id, not in the output: The cat; tau counts them)"));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readme_start_here),
        cmocka_unit_test(test_make_run_rule),
        cmocka_unit_test(test_readme_make_run_output),
        cmocka_unit_test(test_round_log_marks_tokens_past_the_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
