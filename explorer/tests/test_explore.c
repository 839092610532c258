/* explorer/tests/test_explore.c - `dflash explore` keeps the user's files and its
 * bounds (issue 21, items 2, 3 and 6; issue 22, --vocab tokenizer.json).
 *
 * Each case builds a small trace directory by hand (.npy files written here,
 * not by the program), runs ./dflash explore with fork/exec and checks the
 * exit status, stderr and the files:
 *   - a failed write (RLIMIT_FSIZE: a full disk) leaves the earlier page
 *     byte for byte and no temporary file;
 *   - the page may not be an input: the vocabulary, a .npy file through a
 *     symbolic link, the manifest through a hard link, a file in another
 *     trace directory through a link; each stays as it was;
 *   - a sparse .npy claiming 1 GiB: the page holds at most the documented
 *     bound (EXPLORE_TENSOR_VALUES) and says what it left out; run under an
 *     address-space limit of 512 MiB (not under ASan, which reserves more);
 *   - many tensors beyond the page bound: the page stays within it and
 *     stderr and the page say what was left out;
 *   - a name listed twice among 60,000 entries is found (sorted, n log n);
 *   - --vocab tokenizer.json: the page's words are the tokens' bytes as
 *     formats/load.c's tokenizer_json_load decodes them; a broken one is refused.
 */
#include "dflash.c"
#include "formats/load.c"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/testutil.h"


/* the bounds docs/explorer.md documents */
#define EXPLORE_PAGE_VALUES_TEST ((size_t)8 << 20)
#define EXPLORE_TENSOR_VALUES_TEST ((size_t)2 << 20)

/* A .npy header (format 1.0, as NumPy writes it) for descr and shape. */
static size_t npy_hdr(char *out, const char *descr, int ndim, const long long *shape) {
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int k = 0; k < ndim; k++) len += snprintf(dict + len, sizeof dict - (size_t)len, k ? ", %lld" : "%lld", shape[k]);
    len += snprintf(dict + len, sizeof dict - (size_t)len, ndim == 1 ? ",), }" : "), }");
    size_t total = 10 + (size_t)len + 1, pad = (64 - total % 64) % 64, hl = (size_t)len + pad + 1;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)(hl & 0xff);
    out[9] = (char)(hl >> 8);
    memcpy(out + 10, dict, (size_t)len);
    memset(out + 10 + len, ' ', pad);
    out[10 + (size_t)len + pad] = '\n';
    return 10 + hl;
}

/* dir/name.npy: float32 of the shape; values k * 0.5 (n_written of them,
 * the rest of the file left sparse: zeros that take no disk) */
static void put_f4(const char *dir, const char *name, int ndim, const long long *shape, size_t n_written) {
    char h[512], path[1024];
    size_t hl = npy_hdr(h, "<f4", ndim, shape), n = 1;
    for (int k = 0; k < ndim; k++) n *= (size_t)shape[k];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(h, 1, hl, f), hl);
    for (size_t k = 0; k < n_written && k < n; k++) {
        float x = (float)k * 0.5f;
        assert_int_equal(fwrite(&x, 4, 1, f), 1);
    }
    assert_int_equal(fclose(f), 0);
    assert_int_equal(truncate(path, (off_t)(hl + 4 * n)), 0);
}

/* a trace directory dir with the named float tensors listed in trace.jsonl */
static void put_manifest(const char *dir, const char *const *names, int n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/trace.jsonl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int k = 0; k < n; k++) fprintf(f, "{\"name\": \"%s\", \"file\": \"%s.npy\"}\n", names[k], names[k]);
    assert_int_equal(fclose(f), 0);
}

static void small_trace(const char *dir) {
    assert_int_equal(mkdir(dir, 0755), 0);
    long long s[2] = {2, 3};
    put_f4(dir, "x", 2, s, 6);
    static const char *const names[1] = {"x"};
    put_manifest(dir, names, 1);
}

/* ./dflash explore ARGS...; stderr into err (malloc'd); fsize: RLIMIT_FSIZE
 * (0: none); as_mib: RLIMIT_AS (0: none). Returns the exit status (-1: a signal). */
static int explore(char **err, long fsize, long as_mib, const char *a1, const char *a2, const char *a3, const char *a4) {
    char errpath[] = "/tmp/dflash-test-explore-err.XXXXXX";
    int fe = mkstemp(errpath);
    assert_true(fe >= 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fe, 2);
        int fo = open("/dev/null", O_WRONLY);
        if (fo >= 0) dup2(fo, 1);
        if (fsize > 0) {
            struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(127);
        }
        if (as_mib > 0) {
            struct rlimit rl = {(rlim_t)as_mib << 20, (rlim_t)as_mib << 20};
            if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(127);
        }
        alarm(300);
        char *argv[] = {"./dflash", "explore", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(fe);
    size_t len;
    *err = tu_read(errpath, &len);
    unlink(errpath);
    assert_non_null(*err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* the only entries of dir are want (names, space separated) */
static void only_entries(const char *dir, int want) {
    int n = tu_count_entries(dir);
    if (n != want) fprintf(stderr, "%s: %d entries, expected %d\n", dir, n, want);
    assert_int_equal(n, want);
}

static void test_a_failed_write_keeps_the_old_page(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    small_trace(tu_path(t, "tr"));
    assert_int_equal(mkdir(tu_path(t, "out"), 0755), 0);
    const char *page = tu_path(t, "out/page.html");
    tu_write_text(page, "PRECIOUS\n");
    char *err;
    /* the page is ~60 KB; a 20 KB file size limit is a full disk */
    int rc = explore(&err, 20000, 0, tu_path(t, "tr"), page, NULL, NULL);
    assert_int_equal(rc, 2);
    assert_contains(err, "dflash explore:");
    assert_contains(err, "page.html");
    size_t len;
    char *got = tu_read(page, &len);
    assert_string_equal(got, "PRECIOUS\n");
    only_entries(tu_path(t, "out"), 1);   /* no .partial left */
    free(got);
    free(err);
    /* the same without the limit replaces it */
    assert_int_equal(explore(&err, 0, 0, tu_path(t, "tr"), page, NULL, NULL), 0);
    got = tu_read(page, &len);
    assert_non_null(strstr(got, "<!DOCTYPE html>"));
    only_entries(tu_path(t, "out"), 1);
    free(got);
    free(err);
    tu_rmtree(t);
    free(t);
}

/* out (made by make_out) must be refused, and the file it names unchanged */
static void refused(const char *t, const char *out, const char *victim, const char *vocab, const char *say) {
    size_t l0, l1;
    char *before = tu_read(victim, &l0), *err;
    assert_non_null(before);
    int rc = vocab ? explore(&err, 0, 0, tu_path(t, "tr"), out, "--vocab", vocab)
                   : explore(&err, 0, 0, tu_path(t, "tr"), out, NULL, NULL);
    if (rc != 2 || !strstr(err, say)) fprintf(stderr, "out %s: exit %d, stderr: %s", out, rc, err);
    assert_int_equal(rc, 2);
    assert_contains(err, say);
    char *after = tu_read(victim, &l1);
    assert_int_equal(l0, l1);
    assert_memory_equal(before, after, l0);
    free(before);
    free(after);
    free(err);
}

static void test_the_page_is_never_an_input(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    small_trace(tu_path(t, "tr"));
    small_trace(tu_path(t, "tr2"));
    char *vocab = strdup(tu_path(t, "v.txt"));   /* tu_path's buffers are reused */
    tu_write_text(vocab, "a\nb\nc\n");
    /* the vocabulary itself */
    refused(t, vocab, vocab, vocab, "which the explorer reads");
    /* a symbolic link to a .npy file of the trace */
    assert_int_equal(symlink(tu_path(t, "tr/x.npy"), tu_path(t, "link.html")), 0);
    refused(t, tu_path(t, "link.html"), tu_path(t, "tr/x.npy"), NULL, "which the explorer reads");
    /* a hard link to the manifest */
    assert_int_equal(link(tu_path(t, "tr/trace.jsonl"), tu_path(t, "hard.html")), 0);
    refused(t, tu_path(t, "hard.html"), tu_path(t, "tr/trace.jsonl"), NULL, "which the explorer reads");
    /* a symbolic link into another trace directory */
    assert_int_equal(symlink(tu_path(t, "tr2/trace.jsonl"), tu_path(t, "other.html")), 0);
    refused(t, tu_path(t, "other.html"), tu_path(t, "tr2/trace.jsonl"), NULL, "trace directory");
    /* a link to the vocabulary, through another name */
    assert_int_equal(symlink(vocab, tu_path(t, "v.html")), 0);
    refused(t, tu_path(t, "v.html"), vocab, vocab, "which the explorer reads");
    only_entries(tu_path(t, "tr"), 2);
    only_entries(tu_path(t, "tr2"), 2);
    free(vocab);
    tu_rmtree(t);
    free(t);
}

/* the page's "lim" object: {"page":P,"tensor":T,"values":V,"left":L,"cut":C} */
static void page_lim(const char *page, size_t *values, size_t *left, int *cut, size_t *size) {
    char *text = tu_read(page, size);
    assert_non_null(text);
    char *p = strstr(text, "\"lim\":{");
    assert_non_null(p);
    unsigned long long pg, tn, v, l;
    assert_int_equal(sscanf(p, "\"lim\":{\"page\":%llu,\"tensor\":%llu,\"values\":%llu,\"left\":%llu,\"cut\":%d", &pg, &tn, &v, &l, cut), 5);
    assert_int_equal(pg, EXPLORE_PAGE_VALUES_TEST);
    assert_int_equal(tn, EXPLORE_TENSOR_VALUES_TEST);
    *values = (size_t)v;
    *left = (size_t)l;
    free(text);
}

static void test_a_header_claiming_a_gigabyte(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    const char *dir = tu_path(t, "tr");
    assert_int_equal(mkdir(dir, 0755), 0);
    long long big[2] = {1 << 16, 1 << 12};   /* 2^28 float32 = 1 GiB, sparse */
    put_f4(dir, "big", 2, big, 1000);
    long long s[1] = {3};
    put_f4(dir, "small", 1, s, 3);
    static const char *const names[2] = {"big", "small"};
    put_manifest(dir, names, 2);
    char *err;
    const char *page = tu_path(t, "page.html");
    int rc = explore(&err, 0, UNDER_ASAN ? 0 : 512, dir, page, NULL, NULL);
    if (rc != 0) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 0);
    assert_contains(err, "leaves out");
    size_t values, left, size;
    int cut;
    page_lim(page, &values, &left, &cut, &size);
    assert_int_equal(values, ((size_t)1 << 28) + 3);
    assert_int_equal(cut, 1);
    /* the big tensor keeps whole rows within the per-tensor bound */
    size_t kept = EXPLORE_TENSOR_VALUES_TEST / 4 / 4096 * 4096;
    assert_int_equal(left, ((size_t)1 << 28) - kept);
    assert_true(size < EXPLORE_TENSOR_VALUES_TEST * 4 / 3 + 200000);
    free(err);
    tu_rmtree(t);
    free(t);
}

static void test_many_tensors_beyond_the_page_bound(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    const char *dir = tu_path(t, "tr");
    assert_int_equal(mkdir(dir, 0755), 0);
    /* 12 tensors of 1 MiB: 12 MiB of values against the 8 MiB bound */
    const char *names[12];
    char nb[12][16];
    for (int k = 0; k < 12; k++) {
        snprintf(nb[k], sizeof nb[k], "t%02d", k);
        names[k] = nb[k];
        long long s[2] = {256, 1024};
        put_f4(dir, nb[k], 2, s, 16);
    }
    put_manifest(dir, names, 12);
    char *err;
    const char *page = tu_path(t, "page.html");
    assert_int_equal(explore(&err, 0, 0, dir, page, NULL, NULL), 0);
    assert_contains(err, "leaves out");
    size_t values, left, size;
    int cut;
    page_lim(page, &values, &left, &cut, &size);
    assert_int_equal(values, 12 * 256 * 1024);
    assert_int_equal(cut, 12);
    assert_true(left >= 12 * 256 * 1024 - EXPLORE_PAGE_VALUES_TEST / 4);
    assert_true(size < EXPLORE_PAGE_VALUES_TEST * 4 / 3 + 200000);
    free(err);
    tu_rmtree(t);
    free(t);
}

static void test_a_name_twice_among_sixty_thousand(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    const char *dir = tu_path(t, "tr");
    assert_int_equal(mkdir(dir, 0755), 0);
    FILE *f = fopen(tu_path(dir, "trace.jsonl"), "w");
    assert_non_null(f);
    for (int k = 0; k < 60000; k++) fprintf(f, "{\"name\": \"n%05d\", \"file\": \"n%05d.npy\"}\n", k, k);
    fprintf(f, "{\"name\": \"n31415\", \"file\": \"again.npy\"}\n");
    assert_int_equal(fclose(f), 0);
    char *err;
    assert_int_equal(explore(&err, 0, 0, dir, tu_path(t, "page.html"), NULL, NULL), 2);
    assert_contains(err, "\"n31415\" is listed twice");
    assert_false(tu_exists(tu_path(t, "page.html")));
    free(err);
    tu_rmtree(t);
    free(t);
}

static void test_vocab_tokenizer_json(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    small_trace(tu_path(t, "tr"));
    const char *tok = "toy_weights/qwen3-layout/target/tokenizer.json";
    ByteVocab bv;
    assert_int_equal(tokenizer_json_load(&bv, tok), 0);
    char *err;
    const char *page = tu_path(t, "page.html");
    int rc = explore(&err, 0, 0, tu_path(t, "tr"), page, "--vocab", tok);
    if (rc) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 0);
    size_t len;
    char *text = tu_read(page, &len);
    char *p = strstr(text, "\"vk\":\"bytes\",\"vocab\":[");
    assert_non_null(p);
    p += strlen("\"vk\":\"bytes\",\"vocab\":[");
    /* every token: printable ASCII tokens appear as they are, in id order */
    int checked = 0;
    for (int id = 0; id < bv.n; id++) {
        const char *w = bv.words[id];
        int plain = w != NULL;
        for (int b = 0; plain && b < bv.lens[id]; b++)
            plain = w[b] >= 0x20 && w[b] < 0x7f && !strchr("\"\\<>&", w[b]);
        if (!w) {
            assert_int_equal(strncmp(p, "null", 4), 0);
            p += 4;
        } else {
            assert_int_equal(*p, '"');
            char *q = p + 1;
            while (*q && !(*q == '"' && q[-1] != '\\')) q++;
            if (plain) {
                assert_int_equal((int)(q - p - 1), bv.lens[id]);
                assert_memory_equal(p + 1, w, (size_t)bv.lens[id]);
                checked++;
            }
            p = q + 1;
        }
        assert_int_equal(*p, id + 1 < bv.n ? ',' : ']');
        p++;
    }
    assert_true(checked > 0);
    free(text);
    free(err);
    byte_vocab_free(&bv);
    /* a broken tokenizer.json is refused with formats/load.c's message */
    tu_write_text(tu_path(t, "bad.json"), "{\"model\": {\"type\": \"BPE\", \"vocab\": [1, 2]}}");
    assert_int_equal(explore(&err, 0, 0, tu_path(t, "tr"), tu_path(t, "p2.html"), "--vocab", tu_path(t, "bad.json")), 2);
    assert_contains(err, "bad.json");
    assert_false(tu_exists(tu_path(t, "p2.html")));
    free(err);
    tu_rmtree(t);
    free(t);
}

/* issue 34, items 4 and 12: the program's reserved names are never a page
 * (the next run would delete it as a leftover), and the manifest is
 * validated as diff, figures and replay validate it: a round below 0, and a
 * .npy header whose shape is not the manifest's, are refused */
static void test_reserved_names_and_a_bad_manifest(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    small_trace(tu_path(t, "tr"));
    const char *names[3] = {"page.html.partial.Ab12Cd", "x.lock", "page.html.old.Ab12Cd"};
    char *err, out[1024];
    for (int k = 0; k < 3; k++) {
        snprintf(out, sizeof out, "%s", tu_path(t, names[k]));
        int rc = explore(&err, 0, 0, tu_path(t, "tr"), out, NULL, NULL);
        if (rc != 2) fprintf(stderr, "%s: exit %d: %s", names[k], rc, err);
        assert_int_equal(rc, 2);
        assert_contains(err, "which dflash removes");
        assert_int_equal(access(out, F_OK), -1);
        free(err);
    }
    snprintf(out, sizeof out, "%s", tu_path(t, "page.html"));
    /* round -5 */
    tu_write_text(tu_path(t, "tr/trace.jsonl"), "{\"name\": \"x\", \"file\": \"x.npy\", \"round\": -5}\n");
    assert_int_equal(explore(&err, 0, 0, tu_path(t, "tr"), out, NULL, NULL), 2);
    assert_contains(err, "\"round\" must be an integer >= 0");
    free(err);
    /* x.npy is float32 (2, 3); the manifest says [3, 2] */
    tu_write_text(tu_path(t, "tr/trace.jsonl"),
                  "{\"name\": \"x\", \"file\": \"x.npy\", \"dtype\": \"float32\", \"shape\": [3, 2]}\n");
    assert_int_equal(explore(&err, 0, 0, tu_path(t, "tr"), out, NULL, NULL), 2);
    assert_contains(err, "the manifest says dtype|shape \"float32|3,2\" but the file's header says \"float32|2,3\"");
    free(err);
    /* and the manifest that agrees with the header is taken */
    tu_write_text(tu_path(t, "tr/trace.jsonl"),
                  "{\"name\": \"x\", \"file\": \"x.npy\", \"dtype\": \"float32\", \"shape\": [2, 3], \"round\": 0}\n");
    assert_int_equal(explore(&err, 0, 0, tu_path(t, "tr"), out, NULL, NULL), 0);
    free(err);
    assert_int_equal(access(out, F_OK), 0);
    tu_rmtree(t);
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_failed_write_keeps_the_old_page),
        cmocka_unit_test(test_the_page_is_never_an_input),
        cmocka_unit_test(test_a_header_claiming_a_gigabyte),
        cmocka_unit_test(test_many_tensors_beyond_the_page_bound),
        cmocka_unit_test(test_a_name_twice_among_sixty_thousand),
        cmocka_unit_test(test_vocab_tokenizer_json),
        cmocka_unit_test(test_reserved_names_and_a_bad_manifest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
