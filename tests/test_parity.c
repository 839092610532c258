/* tests/test_parity.c - this program against the published code, in CI.
 *
 * tests/parity/walkthrough/ is a trace of the reference implementation
 * itself (z-lab/dflash's dflash/model.py, its dflash_generate and
 * DFlashDraftModel, run on plain torch on toy_weights/walkthrough; NOTES.md,
 * "Checked against the published code", says how it was made): the default
 * run (prompt ids 2,3,4, block size 4, 16 new tokens, stop id 0), 33 small
 * tensors of it: every id the loop decides (the blocks, the sampled tokens,
 * match, cumprod, acceptance lengths, the output), the positions, every
 * logits row and the draft's attention weights in both rounds. It is the
 * reference's output, not a stored run of this program; `dflash diff` must
 * find this program's trace of the same run equal to it within the
 * contract's tolerance (ids exactly), in both precisions, and must not find
 * a porting pitfall's trace equal to it (the committed tensors can tell a
 * wrong draft from a right one). This program's traces of the default run
 * are tools/test-fixtures.sh's (make test runs it first). */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

#define REF "tests/parity/walkthrough"

#define g_dir TU_SCRATCH  /* the suite's scratch directory */

/* the names the reference trace holds (names.json: one string per line) */
static int reference_names(void) {
    char *m = tu_read(REF "/names.json", NULL);
    assert_non_null(m);
    int n = 0;
    for (char *c = m; *c; c++) n += *c == '"';
    free(m);
    assert_int_equal(n % 2, 0);
    return n / 2;
}

/* A trace of the default run diffed against the reference; the diff's
 * exit status, its output in *text */
static int diff_trace(const char *trace, const char *name, char **text) {
    char cmd[2048], out[700];
    snprintf(out, sizeof out, "%s/%s.out", g_dir, name);
    snprintf(cmd, sizeof cmd, "./dflash diff " REF " '%s'", trace);
    int rc = tu_run(cmd, out);
    *text = tu_read(out, NULL);
    assert_non_null(*text);
    return rc;
}

/* PROGRAM's trace of the default run, diffed against the reference */
static int diff_with_reference(const char *program, const char *name, char **text) {
    char cmd[2048], trace[700];
    snprintf(trace, sizeof trace, "%s/%s", g_dir, name);
    snprintf(cmd, sizeof cmd, "%s --trace '%s'", program, trace);
    assert_int_equal(tu_run(cmd, NULL), 0);
    return diff_trace(trace, name, text);
}

static void test_the_reference_trace_is_complete(void **state) {
    (void)state;
    int n = reference_names();
    assert_int_equal(n, 33);
    /* every listed name has its file, and nothing else is there */
    assert_int_equal(tu_count_entries(REF), n + 1);
    char *m = tu_read(REF "/names.json", NULL);
    for (char *c = strchr(m, '"'); c; c = strchr(strchr(c + 1, '"') + 1, '"')) {
        char name[128], file[200];
        size_t len = (size_t)(strchr(c + 1, '"') - c - 1);
        assert_true(len < sizeof name);
        memcpy(name, c + 1, len);
        name[len] = 0;
        snprintf(file, sizeof file, REF "/%s.npy", name);
        if (!tu_exists(file)) fail_msg("%s is listed in names.json but missing", file);
    }
    free(m);
}

static void test_this_program_agrees_with_the_published_code(void **state) {
    (void)state;
    char want[160], *text;
    snprintf(want, sizeof want, "diff: %d compared, 0 differ, 0 missing from B", reference_names());
    /* the default run's traces tools/test-fixtures.sh made: ./dflash's (./dflash-float's objects, or
     * -double's with make REAL=double), then the double build's (`./dflash-double --trace`) */
    assert_int_equal(diff_trace(tu_fixture("walkthrough-" TU_SELF), "self", &text), 0);
    assert_contains(text, want);
    free(text);
    /* the other precision: the same within the tolerance */
    assert_int_equal(diff_trace(tu_fixture("walkthrough-double"), "double", &text), 0);
    assert_contains(text, want);
    free(text);
}

static void test_a_pitfall_does_not(void **state) {
    (void)state;
    char *text;
    assert_int_equal(diff_with_reference("build/pitfalls/dflash-draft-logits-rows", "pitfall", &text), 1);
    assert_string_equal(first_departure(text), "draft1.logits");
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_reference_trace_is_complete),
        cmocka_unit_test(test_this_program_agrees_with_the_published_code),
        cmocka_unit_test(test_a_pitfall_does_not),
    };
    return cmocka_run_group_tests(tests, tu_scratch_setup, tu_scratch_teardown);
}
