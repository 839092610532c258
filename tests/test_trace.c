/* test_trace.c - the tracer (trace.c): .npy files checked byte by byte by a
 * reader written here, the manifest, directory safety (refuse foreign data,
 * replace an earlier trace whole, keep it when a run fails), filters, write
 * errors, the readable text trace, and `dflash diff` on files laid out by
 * hand the way NumPy writes them (1.0/2.0/3.0 headers, <f8, <i4) and on
 * malformed ones.
 *
 * Built by the Makefile as: cc ... tests/test_trace.c formats/json.c trace.c
 * so dflash.c and formats/load.c come in by #include. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dflash.c"
#include "formats/load.c"
#include "trace.h"
#include "cli/diff.h"
#include "tests/testutil.h"

#ifdef DFLASH_DOUBLE
#define DTYPE "float64"
#else
#define DTYPE "float32"
#endif

static const TracePhase PREFILL = {"prefill", 0};
static const TracePhase DRAFT1 = {"draft", 1};
static const TracePhase VERIFY1 = {"verify", 1};
static const TracePhase FINAL = {"final", 0};

#define assert_not_contains(hay, needle)                                                 \
    do {                                                                                 \
        const char *h_ = (hay), *n_ = (needle);                                          \
        if (h_ && strstr(h_, n_)) fail_msg("did not expect \"%s\" in:\n%s", n_, h_);     \
    } while (0)

/* Every test gets a fresh scratch directory as its state. */
static int setup_tmp(void **state) {
    char *d = tu_tmpdir();
    *state = d;
    return d ? 0 : -1;
}

static int teardown_tmp(void **state) {
    tu_rmtree(*state);
    free(*state);
    return 0;
}

/* ===========================================================================
 * Bytes the way the .npy format and IEEE 754 say, built here independently.
 * ======================================================================== */

static size_t put_le(unsigned char *o, uint64_t u, size_t size) {
    for (size_t b = 0; b < size; b++) o[b] = (unsigned char)(u >> (8 * b));
    return size;
}

static size_t le_real(unsigned char *o, double v) {
#ifdef DFLASH_DOUBLE
    uint64_t u;
    memcpy(&u, &v, 8);
    return put_le(o, u, 8);
#else
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return put_le(o, u, 4);
#endif
}

static size_t le_f64(unsigned char *o, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return put_le(o, u, 8);
}

/* Write a .npy file laid out as NumPy does: magic, major.0, header length
 * (u16 for 1.x, u32 otherwise), dict padded with spaces and ended by '\n'
 * so the header ends on a multiple of 64, then data (n bytes). */
static void make_npy(const char *path, int major, const char *dict, const void *data, size_t n) {
    size_t lenbytes = major == 1 ? 2 : 4, pre = 8 + lenbytes, dl = strlen(dict);
    size_t hl = dl + 1;
    while ((pre + hl) % 64) hl++;
    unsigned char *b = calloc(1, pre + hl + n);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    put_le(b + 8, hl, lenbytes);
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hl - dl - 1);
    b[pre + hl - 1] = '\n';
    if (n) memcpy(b + pre + hl, data, n);
    assert_int_equal(tu_write(path, b, pre + hl + n), 0);
    free(b);
}

/* Check a .npy written by trace.c against the format, byte by byte. */
static void check_npy(const char *path, const char *dict, const unsigned char *data, size_t n) {
    size_t len;
    unsigned char *b = (unsigned char *)tu_read(path, &len);
    assert_non_null(b);
    assert_true(len >= 10);
    assert_memory_equal(b, "\x93NUMPY\x01\x00", 8);
    size_t hl = (size_t)b[8] | (size_t)b[9] << 8;
    assert_int_equal((10 + hl) % 64, 0);  /* NumPy's 64-byte alignment */
    assert_true(10 + hl <= len);
    assert_int_equal(b[10 + hl - 1], '\n');
    size_t dl = strlen(dict);
    assert_true(dl < hl);
    if (memcmp(b + 10, dict, dl) != 0) fail_msg("%s: header %.*s, expected %s", path, (int)dl, b + 10, dict);
    for (size_t k = 10 + dl; k < 10 + hl - 1; k++) assert_int_equal(b[k], ' ');
    assert_int_equal(len - 10 - hl, n);
    if (n) assert_memory_equal(b + 10 + hl, data, n);
    free(b);
}

/* ===========================================================================
 * A small trace used by several tests. variant 0: the reference values;
 * 1: draft1.fc[1][2] and verify1.sampled[2] changed; 2: draft1.fc[0][0]
 * 1.0 -> 1.0005 (relative 5e-4); 3: draft1.fc[0][1] 0 -> 5e-7. */
static void write_sample(const char *dir, int variant) {
    Tracer *t = trace_open(dir, NULL, NULL, 0);
    assert_non_null(t);
    int64_t s23[2] = {2, 3}, s3[1] = {3};
    real h[6] = {0.25f, -0.5f, 1.5f, 2, -3, 4};
    real fc[6] = {1, 0, 0.125f, -7, 8, 9};
    int64_t ids[3] = {5, 6, 9};
    if (variant == 1) { fc[5] = 10; ids[2] = 8; }
    if (variant == 2) fc[0] = (real)1.002;
    if (variant == 3) fc[1] = (real)5e-7;
    assert_int_equal(trace_real(t, PREFILL, "prefill.hidden_states.0", "embedding output", h, 2, s23), 0);
    assert_int_equal(trace_real(t, DRAFT1, "draft1.fc", "fc output", fc, 2, s23), 0);
    assert_int_equal(trace_i64(t, VERIFY1, "verify1.sampled", "posterior", ids, 1, s3), 0);
    assert_int_equal(trace_close(t), 0);
}

/* diff_main(diff A B [opts]) with its output captured. */
/* dir/trace.jsonl naming each of the NULL-terminated names, file NAME.npy,
 * and nothing else (the minimal manifest a port writes: no dtype, shape,
 * phase or round) */
static void names_manifest(const char *dir_, const char *const *names) {
    char text[2048], dir[512];
    snprintf(dir, sizeof dir, "%s", dir_);   /* tu_path's ring of 8 buffers: keep the caller's */
    size_t len = 0;
    for (int k = 0; names[k]; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "{\"name\": \"%s\", \"file\": \"%s.npy\"}\n",
                                names[k], names[k]);
    tu_write_text(tu_path(dir, "trace.jsonl"), text);
}

static int run_diff(char **out, const char *a, const char *b, const char *o1, const char *o2,
                    const char *o3, const char *o4) {
    char *argv[8] = {"diff", (char *)a, (char *)b, (char *)o1, (char *)o2, (char *)o3, (char *)o4, NULL};
    int argc = 3;
    while (argv[argc]) argc++;
    TuCapture c;
    assert_int_equal(tu_capture_begin(&c), 0);
    int rc = diff_main(argc, argv);
    *out = tu_capture_end(&c);
    assert_non_null(*out);
    return rc;
}

/* ===========================================================================
 * .npy files and the manifest.
 * ======================================================================== */

static void test_npy_files_and_manifest(void **state) {
    const char *dir = tu_path(*state, "trace");
    Tracer *t = trace_open(dir, NULL, NULL, 0);
    assert_non_null(t);
    real x[6] = {0.5f, -1.25f, 3, 0.001f, -0.0f, 7};
    int64_t s23[2] = {2, 3};
    real scalar = 2.5f;
    int64_t ids[5] = {0, -1, INT64_MAX, INT64_MIN, 42}, s5[1] = {5};
    real four[6] = {1, 2, 3, 4, 5, 6};
    int64_t s4d[4] = {1, 2, 1, 3}, s0[1] = {0};
    assert_int_equal(trace_real(t, DRAFT1, "a.x", "say \"hi\"\n\\", x, 2, s23), 0);
    assert_int_equal(trace_real(t, PREFILL, "s", "", &scalar, 0, NULL), 0);
    assert_int_equal(trace_i64(t, VERIFY1, "ids", "ids", ids, 1, s5), 0);
    assert_int_equal(trace_real(t, DRAFT1, "four", "4-d", four, 4, s4d), 0);
    assert_int_equal(trace_real(t, DRAFT1, "empty", "no values", NULL, 1, s0), 0);
    assert_int_equal(trace_close(t), 0);

    unsigned char want[64];
    size_t n = 0;
    for (int k = 0; k < 6; k++) n += le_real(want + n, x[k]);
    check_npy(tu_path(dir, "a.x.npy"),
              "{'descr': '" REAL_NPY_DESCR "', 'fortran_order': False, 'shape': (2, 3), }", want, n);
    /* one value spelled out: 0.5 is 0x3F000000 (f4) / 0x3FE0000000000000 (f8) */
#ifdef DFLASH_DOUBLE
    assert_memory_equal(want, "\x00\x00\x00\x00\x00\x00\xe0\x3f", 8);
#else
    assert_memory_equal(want, "\x00\x00\x00\x3f", 4);
#endif
    n = le_real(want, 2.5);
    check_npy(tu_path(dir, "s.npy"),
              "{'descr': '" REAL_NPY_DESCR "', 'fortran_order': False, 'shape': (), }", want, n);
    n = 0;
    for (int k = 0; k < 5; k++) n += put_le(want + n, (uint64_t)ids[k], 8);
    assert_memory_equal(want + 8, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    check_npy(tu_path(dir, "ids.npy"), "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }",
              want, n);
    n = 0;
    for (int k = 0; k < 6; k++) n += le_real(want + n, four[k]);
    check_npy(tu_path(dir, "four.npy"),
              "{'descr': '" REAL_NPY_DESCR "', 'fortran_order': False, 'shape': (1, 2, 1, 3), }", want, n);
    check_npy(tu_path(dir, "empty.npy"),
              "{'descr': '" REAL_NPY_DESCR "', 'fortran_order': False, 'shape': (0,), }", want, 0);

    /* the manifest: one JSON object per tensor, in call order, escaped */
    char *m = tu_read(tu_path(dir, "trace.jsonl"), NULL);
    assert_non_null(m);
    const char *expect =
        "{\"name\":\"a.x\",\"file\":\"a.x.npy\",\"dtype\":\"" DTYPE "\",\"shape\":[2,3],"
        "\"phase\":\"draft\",\"round\":1,\"meaning\":\"say \\\"hi\\\"\\n\\\\\"}\n"
        "{\"name\":\"s\",\"file\":\"s.npy\",\"dtype\":\"" DTYPE "\",\"shape\":[],"
        "\"phase\":\"prefill\",\"round\":0,\"meaning\":\"\"}\n"
        "{\"name\":\"ids\",\"file\":\"ids.npy\",\"dtype\":\"int64\",\"shape\":[5],"
        "\"phase\":\"verify\",\"round\":1,\"meaning\":\"ids\"}\n"
        "{\"name\":\"four\",\"file\":\"four.npy\",\"dtype\":\"" DTYPE "\",\"shape\":[1,2,1,3],"
        "\"phase\":\"draft\",\"round\":1,\"meaning\":\"4-d\"}\n"
        "{\"name\":\"empty\",\"file\":\"empty.npy\",\"dtype\":\"" DTYPE "\",\"shape\":[0],"
        "\"phase\":\"draft\",\"round\":1,\"meaning\":\"no values\"}\n";
    assert_string_equal(m, expect);
    free(m);
    /* nothing else in the trace, and no temporary sibling left behind */
    assert_int_equal(tu_count_entries(dir), 6);
    assert_int_equal(tu_count_entries(*state), 1);
}

static void test_duplicate_name_is_an_error(void **state) {
    const char *dir = tu_path(*state, "trace");
    Tracer *t = trace_open(dir, NULL, NULL, 0);
    assert_non_null(t);
    real v = 1;
    assert_int_equal(trace_real(t, DRAFT1, "draft1.fc", "", &v, 0, NULL), 0);
    assert_int_equal(trace_real(t, DRAFT1, "draft1.fc", "", &v, 0, NULL), -1);
    assert_contains(dflash_errmsg, "draft1.fc");
    assert_contains(dflash_errmsg, "twice");
    assert_int_equal(trace_close(t), -1);
    assert_contains(dflash_errmsg, "twice");
    /* a failed trace is not installed */
    assert_false(tu_exists(dir));
    assert_int_equal(tu_count_entries(*state), 0);
}

/* ===========================================================================
 * The trace directory: never destroy other data, replace a trace whole.
 * ======================================================================== */

static void test_refuses_foreign_files(void **state) {
    const char *dir = tu_path(*state, "mine");
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_int_equal(tu_write(tu_path(dir, "notes.txt"), "keep me", 7), 0);
    assert_null(trace_open(dir, NULL, NULL, 0));
    assert_contains(dflash_errmsg, "notes.txt");
    assert_contains(dflash_errmsg, "refusing");
    char *kept = tu_read(tu_path(dir, "notes.txt"), NULL);
    assert_string_equal(kept, "keep me");
    free(kept);
    assert_int_equal(tu_count_entries(*state), 1);  /* no .partial sibling either */

    /* a trace directory with a .npy its manifest does not list */
    const char *tr = tu_path(*state, "tr");
    write_sample(tr, 0);
    assert_int_equal(tu_write(tu_path(tr, "stray.npy"), "x", 1), 0);
    assert_null(trace_open(tr, NULL, NULL, 0));
    assert_contains(dflash_errmsg, "stray.npy");
    assert_true(tu_exists(tu_path(tr, "stray.npy")));
    assert_true(tu_exists(tu_path(tr, "draft1.fc.npy")));

    /* a regular file where the directory should be */
    const char *file = tu_path(*state, "plain");
    assert_int_equal(tu_write(file, "data", 4), 0);
    assert_null(trace_open(file, NULL, NULL, 0));
    assert_contains(dflash_errmsg, "not a directory");
    char *data = tu_read(file, NULL);
    assert_string_equal(data, "data");
    free(data);
}

static void test_replaces_earlier_trace(void **state) {
    const char *dir = tu_path(*state, "deep/er/trace");  /* parents are created */
    write_sample(dir, 0);
    assert_true(tu_exists(tu_path(dir, "draft1.fc.npy")));
    Tracer *t = trace_open(dir, NULL, NULL, 0);
    assert_non_null(t);
    real v = 3;
    assert_int_equal(trace_real(t, FINAL, "only", "", &v, 0, NULL), 0);
    assert_int_equal(trace_close(t), 0);
    assert_int_equal(tu_count_entries(dir), 2);
    assert_true(tu_exists(tu_path(dir, "only.npy")));
    assert_false(tu_exists(tu_path(dir, "draft1.fc.npy")));
    assert_false(tu_exists(tu_path(dir, "prefill.hidden_states.0.npy")));
    char *m = tu_read(tu_path(dir, "trace.jsonl"), NULL);
    assert_non_null(m);
    assert_not_contains(m, "draft1.fc");
    assert_contains(m, "\"name\":\"only\"");
    free(m);
    /* no .partial / .old siblings left */
    assert_int_equal(tu_count_entries(tu_path(*state, "deep/er")), 1);
}

/* Find the "<base>.partial.XXXXXX" sibling a running trace writes into. */
static const char *find_partial(const char *parent, const char *base) {
    static char found[1024];
    DIR *d = opendir(parent);
    assert_non_null(d);
    struct dirent *e;
    found[0] = '\0';
    size_t lb = strlen(base);
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, base, lb) && !strncmp(e->d_name + lb, ".partial.", 9))
            snprintf(found, sizeof found, "%s/%s", parent, e->d_name);
    closedir(d);
    assert_true(found[0] != '\0');
    return found;
}

static void test_failed_run_keeps_earlier_trace(void **state) {
    const char *dir = tu_path(*state, "trace");
    write_sample(dir, 0);
    Tracer *t = trace_open(dir, NULL, NULL, 0);
    assert_non_null(t);
    real v = 1;
    assert_int_equal(trace_real(t, DRAFT1, "b", "", &v, 0, NULL), 0);
    /* pull the partial directory away: the next write must fail and say where */
    const char *partial = find_partial(*state, "trace");
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", partial);
    assert_int_equal(tu_rmtree(saved), 0);
    assert_int_equal(trace_real(t, DRAFT1, "c", "", &v, 0, NULL), -1);
    assert_contains(dflash_errmsg, saved);
    assert_contains(dflash_errmsg, "c.npy");
    assert_contains(dflash_errmsg, strerror(ENOENT));
    assert_int_equal(trace_real(t, DRAFT1, "d", "", &v, 0, NULL), -1);  /* stays failed */
    assert_int_equal(trace_close(t), -1);
    assert_contains(dflash_errmsg, "c.npy");
    /* the earlier trace is untouched */
    assert_true(tu_exists(tu_path(dir, "draft1.fc.npy")));
    assert_false(tu_exists(tu_path(dir, "b.npy")));
    assert_int_equal(tu_count_entries(*state), 1);
}

/* ===========================================================================
 * Write errors name the path and the reason.
 * ======================================================================== */

static void test_write_errors(void **state) {
    const char *file = tu_path(*state, "file");
    assert_int_equal(tu_write(file, "x", 1), 0);
    /* a directory under a regular file: ENOTDIR */
    const char *bad = tu_path(file, "trace");
    assert_null(trace_open(bad, NULL, NULL, 0));
    assert_contains(dflash_errmsg, bad);
    assert_contains(dflash_errmsg, strerror(ENOTDIR));
    const char *badtext = tu_path(file, "trace.txt");
    assert_null(trace_open(NULL, badtext, NULL, 0));
    assert_contains(dflash_errmsg, badtext);
    assert_contains(dflash_errmsg, strerror(ENOTDIR));
    /* a full disk: /dev/full fails every write with ENOSPC */
    if (tu_exists("/dev/full")) {
        Tracer *t = trace_open(NULL, "/dev/full", NULL, 0);
        assert_non_null(t);
        real v = 1;
        assert_int_equal(trace_real(t, DRAFT1, "draft1.fc", "", &v, 0, NULL), -1);
        assert_contains(dflash_errmsg, "/dev/full");
        assert_contains(dflash_errmsg, strerror(ENOSPC));
        assert_int_equal(trace_close(t), -1);
        assert_contains(dflash_errmsg, "/dev/full");
    }
    /* the text trace may not sit inside the trace directory it replaces */
    const char *dir = tu_path(*state, "tr");
    write_sample(dir, 0);
    assert_null(trace_open(dir, tu_path(dir, "t.txt"), NULL, 0));
    assert_contains(dflash_errmsg, "inside");
    assert_false(tu_exists(tu_path(dir, "t.txt")));
}

/* ===========================================================================
 * Filters.
 * ======================================================================== */

static void test_filters(void **state) {
    const char *dir = tu_path(*state, "trace");
    const char *txt = tu_path(*state, "t.txt");
    const char *filters[2] = {"draft1.*", "*.sampled"};
    Tracer *t = trace_open(dir, txt, filters, 2);
    assert_non_null(t);
    real v[2] = {1, 2};
    int64_t s2[1] = {2}, ids[2] = {3, 4};
    assert_int_equal(trace_real(t, PREFILL, "prefill.hidden_states.0", "", v, 1, s2), 0);
    assert_int_equal(trace_real(t, DRAFT1, "draft1.fc", "", v, 1, s2), 0);
    assert_int_equal(trace_real(t, VERIFY1, "verify1.logits", "", v, 1, s2), 0);
    assert_int_equal(trace_i64(t, VERIFY1, "verify1.sampled", "", ids, 1, s2), 0);
    assert_int_equal(trace_close(t), 0);
    assert_int_equal(tu_count_entries(dir), 3);
    assert_true(tu_exists(tu_path(dir, "draft1.fc.npy")));
    assert_true(tu_exists(tu_path(dir, "verify1.sampled.npy")));
    char *m = tu_read(tu_path(dir, "trace.jsonl"), NULL);
    assert_contains(m, "\"draft1.fc\"");
    assert_not_contains(m, "verify1.logits");
    free(m);
    char *text = tu_read(txt, NULL);
    assert_contains(text, "draft1.fc  [2]");
    assert_contains(text, "verify1.sampled  [2]");
    assert_not_contains(text, "prefill.hidden_states.0");
    assert_not_contains(text, "verify1.logits");
    free(text);
}

/* ===========================================================================
 * The readable text trace.
 * ======================================================================== */

/* The numbers on the row labelled `label` after `from` in text. */
static int row_values(const char *text, const char *from, const char *label, double *out, int cap) {
    const char *p = strstr(text, from);
    assert_non_null(p);
    p = strstr(p, label);
    assert_non_null(p);
    p += strlen(label);
    int n = 0;
    while (*p && *p != '\n' && n < cap) {
        if (*p == ' ' || *p == '|') { p++; continue; }
        char *end;
        out[n++] = strtod(p, &end);
        assert_true(end != p);
        p = end;
    }
    return n;
}

static void test_text_trace(void **state) {
    const char *txt = tu_path(*state, "trace.txt");
    Tracer *t = trace_open(NULL, txt, NULL, 0);
    assert_non_null(t);
    char *words[6] = {"<mask>", "<eos>", "The", "cat", "sat", "on"};
    Vocab vocab = {6, words, NULL};
    trace_set_vocab(t, &vocab);

    int64_t prompt[3] = {2, 3, 4}, s3[1] = {3};
    assert_int_equal(trace_i64(t, PREFILL, "input_ids", "prompt ids", prompt, 1, s3), 0);
    real big[80];
    for (int k = 0; k < 80; k++) big[k] = (real)(k - 40);
    int64_t sbig[2] = {2, 40};
    assert_int_equal(trace_real(t, PREFILL, "prefill.hidden_states.0", "embedding", big, 2, sbig), 0);
    int64_t block[4] = {5, 0, 0, 0}, s4[1] = {4};
    assert_int_equal(trace_i64(t, DRAFT1, "draft1.block_output_ids", "anchor + masks", block, 1, s4), 0);
    int64_t pos[7] = {0, 1, 2, 3, 4, 5, 6}, s7[1] = {7};
    assert_int_equal(trace_i64(t, DRAFT1, "draft1.position_ids", "", pos, 1, s7), 0);
    /* (H=2, B=4, S=7); head 1, query row 2 (position 5) holds distinct values */
    real w[2 * 4 * 7];
    for (int k = 0; k < 56; k++) w[k] = (real)(1.0 / 7);
    const double row[7] = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.03125, 0};
    for (int j = 0; j < 7; j++) w[(1 * 4 + 2) * 7 + j] = (real)row[j];
    int64_t sw[3] = {2, 4, 7};
    assert_int_equal(trace_real(t, DRAFT1, "draft1.layers.0.self_attn.attn_weights",
                                "softmax over all S keys", w, 3, sw), 0);
    /* a second call whose positions are unknown: index labels */
    assert_int_equal(trace_real(t, DRAFT1, "other.layers.0.self_attn.attn_weights", "", w, 3, sw), 0);
    int64_t match[3] = {1, 1, 0}, s3b[1] = {3};
    assert_int_equal(trace_i64(t, VERIFY1, "verify1.match", "", match, 1, s3b), 0);
    int64_t out[4] = {2, 3, 4, 5};
    assert_int_equal(trace_i64(t, FINAL, "output_ids", "", out, 1, s4), 0);
    assert_int_equal(trace_close(t), 0);

    char *text = tu_read(txt, NULL);
    assert_non_null(text);
    /* headers in the walkthrough's order */
    const char *order[] = {"== Step 1: prefill", "---- round 1 ----", "== Step 3: the block",
                           "== Step 4.3: RoPE", "== Step 4.4: attention (draft layer 0)",
                           "== Step 6: verification", "== Step 7: update"};
    const char *prev = text;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        const char *p = strstr(prev, order[k]);
        if (!p) fail_msg("\"%s\" missing or out of order in:\n%s", order[k], text);
        prev = p;
    }
    /* tokens as words */
    assert_contains(text, "words: The cat sat");
    assert_contains(text, "words: on <mask> <mask> <mask>");
    /* the attention matrix: name, shape, meaning, per-head tables labelled by position */
    assert_contains(text, "draft1.layers.0.self_attn.attn_weights  [2, 4, 7]  " DTYPE);
    assert_contains(text, "softmax over all S keys");
    const char *head1 = strstr(strstr(text, "draft1.layers.0.self_attn.attn_weights"), "head 1");
    assert_non_null(head1);
    assert_contains(head1, "k@0");
    assert_contains(head1, "k@6");
    double got[16];
    /* with a vocabulary the block's keys and queries carry their words (the
     * draft's block: on <mask> <mask> <mask> at 3..6); keys 0..2 were never
     * fed to a target in this trace, so they have none */
    assert_contains(head1, "k@3 on");
    assert_contains(head1, "k@4 <mask>");
    assert_null(strstr(head1, "k@0 The"));
    int n = row_values(head1, "head 1", "q@5 <mask>", got, 16);
    assert_int_equal(n, 7);
    for (int j = 0; j < 7; j++) assert_true(fabs(got[j] - row[j]) < 1e-4);
    n = row_values(head1, "head 1", "q@3 on", got, 16);
    assert_int_equal(n, 7);
    assert_true(fabs(got[0] - 1.0 / 7) < 1e-4);
    /* the KV-injection border sits before the block's first key (position 3) */
    const char *hdr = strstr(head1, "k@0");
    const char *bar = strchr(hdr, '|'), *k3 = strstr(hdr, "k@3");
    assert_true(bar && k3 && bar < k3 && bar > strstr(hdr, "k@2"));
    const char *other = strstr(text, "other.layers.0.self_attn.attn_weights");
    assert_non_null(other);
    assert_contains(other, "q#0");
    assert_contains(other, "k#6");
    /* a large tensor as summary statistics and its first values */
    const char *hs = strstr(text, "prefill.hidden_states.0  [2, 40]");
    assert_non_null(hs);
    assert_contains(hs, "min -40  max 39  mean -0.5  rms ");
    assert_contains(hs, "first 8: -40 -39 -38 -37 -36 -35 -34 -33\n");
    /* match in full */
    assert_contains(strstr(text, "verify1.match"), "values: 1 1 0\n");
    free(text);
}

static void test_text_to_stdout(void **state) {
    (void)state;
    TuCapture c;
    assert_int_equal(tu_capture_begin(&c), 0);
    Tracer *t = trace_open(NULL, "-", NULL, 0);
    int64_t acc = 2;
    int r1 = t ? trace_i64(t, VERIFY1, "verify1.acceptance_length", "accepted", &acc, 0, NULL) : -1;
    int r2 = t ? trace_close(t) : -1;
    char *text = tu_capture_end(&c);
    assert_int_equal(r1, 0);
    assert_int_equal(r2, 0);
    assert_contains(text, "verify1.acceptance_length  []  int64");
    assert_contains(text, "value: 2\n");
    free(text);
}

/* ===========================================================================
 * diff.
 * ======================================================================== */

static void test_diff_identical(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b");
    write_sample(a, 0);
    write_sample(b, 0);
    char *out;
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 0);
    assert_contains(out, "diff: 3 compared, 0 differ, 0 missing from B, 0 only in B");
    assert_not_contains(out, "departure");
    free(out);
}

static void test_diff_first_departure(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b");
    write_sample(a, 0);
    write_sample(b, 1);
    char *out;
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "first departure: draft1.fc");
    assert_contains(out, "worst at [1, 2]: A 9, B 10");
    assert_contains(out, "differs: verify1.sampled");
    assert_not_contains(out, "prefill.hidden_states.0");
    assert_contains(out, "diff: 3 compared, 2 differ, 0 missing from B, 0 only in B");
    /* the first departure is printed before the other one */
    assert_true(strstr(out, "first departure") < strstr(out, "differs: verify1.sampled"));
    free(out);
}

static void test_diff_tolerances(void **state) {
    const char *a = tu_path(*state, "a"), *rel = tu_path(*state, "rel"), *abs_ = tu_path(*state, "abs");
    write_sample(a, 0);
    write_sample(rel, 2);  /* 1 vs 1.002: 2e-3 > 1e-6 + 1e-4 * max|A| (9) */
    write_sample(abs_, 3); /* 0 vs 5e-7: far inside the default tolerance */
    char *out;
    assert_int_equal(run_diff(&out, a, rel, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "first departure: draft1.fc");
    free(out);
    assert_int_equal(run_diff(&out, a, rel, "--rtol", "1e-3", NULL, NULL), 0);
    free(out);
    assert_int_equal(run_diff(&out, a, abs_, NULL, NULL, NULL, NULL), 0);
    free(out);
    assert_int_equal(run_diff(&out, a, abs_, "--atol", "1e-7", "--rtol", "0"), 1);
    assert_contains(out, "worst at [0, 1]");
    free(out);
    assert_int_equal(run_diff(&out, a, abs_, "--atol", "-1", NULL, NULL), 2);
    free(out);
    assert_int_equal(run_diff(&out, a, abs_, "--bogus", NULL, NULL, NULL), 2);
    free(out);
}

/* B written byte by byte as NumPy would, with a minimal manifest (names and
 * files): a v2.0 header with <f8, a v1.0 <i4, a v3.0 0-d <f4; plus a name
 * B does not have. */
static void test_diff_reads_numpy_layouts(void **state) {
    char a[512], b[512];   /* copies: tu_path's ring of 8 buffers turns over below */
    snprintf(a, sizeof a, "%s", tu_path(*state, "a"));
    snprintf(b, sizeof b, "%s", tu_path(*state, "b"));
    Tracer *t = trace_open(a, NULL, NULL, 0);
    assert_non_null(t);
    real x[4] = {0.5f, -1.5f, 2.25f, 1024}, s = 0.75f;
    int64_t s22[2] = {2, 2}, n[3] = {1, -2, 300000}, s3[1] = {3};
    assert_int_equal(trace_real(t, DRAFT1, "x", "", x, 2, s22), 0);
    assert_int_equal(trace_i64(t, DRAFT1, "n", "", n, 1, s3), 0);
    assert_int_equal(trace_real(t, DRAFT1, "s", "", &s, 0, NULL), 0);
    assert_int_equal(trace_real(t, DRAFT1, "only_in_a", "", &s, 0, NULL), 0);
    assert_int_equal(trace_close(t), 0);

    assert_int_equal(mkdir(b, 0777), 0);
    unsigned char buf[64];
    size_t k = 0;
    for (int i = 0; i < 4; i++) k += le_f64(buf + k, x[i]);
    make_npy(tu_path(b, "x.npy"), 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", buf, k);
    k = 0;
    for (int i = 0; i < 3; i++) k += put_le(buf + k, (uint32_t)(int32_t)n[i], 4);
    make_npy(tu_path(b, "n.npy"), 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", buf, k);
    float f = 0.75f;
    uint32_t u;
    memcpy(&u, &f, 4);
    put_le(buf, u, 4);
    make_npy(tu_path(b, "s.npy"), 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", buf, 4);
    static const char *const bnames[] = {"x", "n", "s", NULL};
    names_manifest(b, bnames);

    char *out;
    /* strict: B lacks only_in_a, the last name of A */
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "missing from B: only_in_a");
    assert_contains(out, "B has nothing after s: 1 tensor missing, first only_in_a");
    assert_contains(out, "diff: 3 compared, 0 differ, 1 missing from B, 0 only in B");
    free(out);
    /* --only limits the comparison (both spellings) */
    assert_int_equal(run_diff(&out, a, b, "--only", "[xn]", "--only=s", NULL), 0);
    assert_contains(out, "diff: 3 compared, 0 differ, 0 missing from B");
    free(out);
    assert_int_equal(run_diff(&out, a, b, "--only", "nothing*", NULL, NULL), 2);
    free(out);
    assert_contains(dflash_errmsg, "no name in");

    /* change one <f8 value (1024 -> 1025, element [1, 1]) */
    k = 0;
    for (int i = 0; i < 4; i++) k += le_f64(buf + k, i == 3 ? 1025.0 : (double)x[i]);
    make_npy(tu_path(b, "x.npy"), 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", buf, k);
    assert_int_equal(run_diff(&out, a, b, "--only", "[xns]", NULL, NULL), 1);
    assert_contains(out, "first departure: x");
    assert_contains(out, "worst at [1, 1]: A 1024, B 1025");
    free(out);

    /* ints vs floats is a departure even when the values agree */
    k = 0;
    for (int i = 0; i < 3; i++) k += le_f64(buf + k, (double)n[i]);
    make_npy(tu_path(b, "x.npy"), 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", buf, 32);
    make_npy(tu_path(b, "n.npy"), 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", buf, k);
    assert_int_equal(run_diff(&out, a, b, "--only", "[xns]", NULL, NULL), 1);
    assert_contains(out, "differs: n");
    assert_contains(out, "dtype kind");
    free(out);
}

/* Malformed .npy files in B: exit 2 and a message naming file and fault. */
static void test_diff_malformed(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b");
    Tracer *t = trace_open(a, NULL, NULL, 0);
    assert_non_null(t);
    real x[4] = {1, 2, 3, 4};
    int64_t s22[2] = {2, 2};
    assert_int_equal(trace_real(t, DRAFT1, "x", "", x, 2, s22), 0);
    assert_int_equal(trace_close(t), 0);
    assert_int_equal(mkdir(b, 0777), 0);
    static const char *const bnames[] = {"x", NULL};
    names_manifest(b, bnames);
    const char *bx = tu_path(b, "x.npy");
    unsigned char d[32] = {0};
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
    char *out;

    make_npy(bx, 1, good, d, 16);  /* the well-formed file agrees in shape */
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 1);
    free(out);

    struct {
        int major;
        const char *dict;
        size_t n;
        const char *fault;
    } cases[] = {
        {9, good, 16, "version 9.0"},
        {1, good, 12, "truncated"},
        {1, good, 20, "trailing bytes"},
        {1, "{'descr': '<f4', 'fortran_order': maybe, 'shape': (2, 2), }", 16, "not True or False"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 2], }", 16, "not a tuple"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2) 'x'}", 16, "expected ',' or '}'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4) }", 16, "not a tuple"},
        {1, "{'descr': '<f4', 'fortran_order': False }", 16, "missing key 'shape'"},
        {1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }", 8, "unsupported descr"},
        {1, "{'descr': '<u8', 'fortran_order': False, 'shape': (2, 2), }", 32, "unsupported descr"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
         16, "overflows"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        make_npy(bx, cases[c].major, cases[c].dict, d, cases[c].n);
        int rc = run_diff(&out, a, b, NULL, NULL, NULL, NULL);
        if (rc != 2 || !strstr(out, cases[c].fault) || !strstr(out, bx))
            fail_msg("case %zu: exit %d, expected 2 and \"%s\" naming %s; output:\n%s", c, rc,
                     cases[c].fault, bx, out);
        assert_contains(dflash_errmsg, cases[c].fault);
        free(out);
    }

    /* bad magic */
    make_npy(bx, 1, good, d, 16);
    size_t len;
    char *bytes = tu_read(bx, &len);
    bytes[5] = 'Z';
    assert_int_equal(tu_write(bx, bytes, len), 0);
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "bad magic");
    assert_contains(out, bx);
    free(out);
    /* a header length that runs past the end of the file */
    bytes[5] = 'Y';
    memcpy(bytes, "\x93NUMPY\x01\x00\xff\x7f", 10);
    assert_int_equal(tu_write(bx, bytes, 40), 0);
    free(bytes);
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "past the end");
    free(out);
    /* and over the 1 MiB limit (a v2.0 u32 length) */
    assert_int_equal(tu_write(bx, "\x93NUMPY\x02\x00\x00\x00\x20\x00", 12), 0);
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "1 MiB");
    free(out);
}


/* ---- the diff rules on hand-made traces --------------------------------- */

#define F4_2_DICT "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"

/* dir/trace.jsonl listing one tensor `name` in dir/x.npy (dict, data) */
static void one_tensor_dir(const char *dir, const char *name_json, const char *dict, const void *data, size_t n) {
    mkdir(dir, 0777);
    char line[512];
    snprintf(line, sizeof line, "{\"name\": \"%s\", \"file\": \"x.npy\"}\n", name_json);
    tu_write_text(tu_path(dir, "trace.jsonl"), line);
    make_npy(tu_path(dir, "x.npy"), 1, dict, data, n);
}

/* The tolerance comes from the reference A: 2047 values off by 5 are not
 * hidden by one 1e30 in B (with max|B| they would be: 1e-4 * 1e30). */
static void test_diff_tolerance_from_reference(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b");
    enum { N = 2048 };
    unsigned char *ba = malloc(8 * N), *bb = malloc(8 * N);
    assert_non_null(ba);
    assert_non_null(bb);
    for (int k = 0; k < N; k++) {
        double v = (k % 7) * 0.1;   /* max|A| = 0.6 */
        le_f64(ba + 8 * k, v);
        le_f64(bb + 8 * k, k == N - 1 ? 1e30 : v + 5);
    }
    one_tensor_dir(a, "t", "{'descr': '<f8', 'fortran_order': False, 'shape': (2048,), }", ba, 8 * N);
    one_tensor_dir(b, "t", "{'descr': '<f8', 'fortran_order': False, 'shape': (2048,), }", bb, 8 * N);
    char *out;
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "first departure: t: 2048 of 2048 values beyond |a-b| <= 1e-06 + 0.0001*max|A| = 6.1e-05");
    free(out);
    free(ba);
    free(bb);
}

/* NaN in B where A is finite departs; NaN against NaN departs too (NaN
 * never agrees); the same infinity agrees. Counts and position reported. */
static void test_diff_nan_inf(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b");
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }";
    double va[4] = {1, 2, NAN, INFINITY}, vb[4] = {1, NAN, NAN, INFINITY};
    unsigned char ba[32], bb[32];
    for (int k = 0; k < 4; k++) {
        le_f64(ba + 8 * k, va[k]);
        le_f64(bb + 8 * k, vb[k]);
    }
    one_tensor_dir(a, "t", dict, ba, 32);
    one_tensor_dir(b, "t", dict, bb, 32);
    char *out;
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "2 of 4 values beyond");
    assert_contains(out, "NaN/Inf: A has 1 NaN, 1 Inf; B has 2 NaN, 1 Inf; first at [1]: A 2, B nan");
    assert_contains(out, "NaN never agrees");
    free(out);
    /* A against itself: its own NaN still departs */
    assert_int_equal(run_diff(&out, a, a, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "1 of 4 values beyond");
    free(out);
    /* only the infinity: agrees with itself */
    le_f64(ba + 16, 3);
    one_tensor_dir(a, "t", dict, ba, 32);
    assert_int_equal(run_diff(&out, a, a, "--verbose", NULL, NULL, NULL), 0);
    assert_contains(out, "NaN A/B 0/0 Inf A/B 1/1");
    free(out);
}

/* B written by NumPy from a transposed array (Fortran order) and on a
 * big-endian machine: read as the same (2, 3) values. */
static void test_diff_fortran_big_endian(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b");
    Tracer *t = trace_open(a, NULL, NULL, 0);
    assert_non_null(t);
    real x[6] = {1, 2, 3, 4, 5, 6};      /* x[i][j] = 3i + j + 1 */
    int64_t ids[3] = {7, -2, 300}, s23[2] = {2, 3}, s3[1] = {3};
    assert_int_equal(trace_real(t, PREFILL, "x", "", x, 2, s23), 0);
    assert_int_equal(trace_i64(t, PREFILL, "ids", "", ids, 1, s3), 0);
    assert_int_equal(trace_close(t), 0);
    assert_int_equal(mkdir(b, 0777), 0);
    unsigned char buf[64];
    /* column-major: x[0][0], x[1][0], x[0][1], x[1][1], x[0][2], x[1][2]; big-endian f4 */
    const float colmajor[6] = {1, 4, 2, 5, 3, 6};
    for (int k = 0; k < 6; k++) {
        uint32_t u;
        memcpy(&u, &colmajor[k], 4);
        for (int i = 0; i < 4; i++) buf[4 * k + i] = (unsigned char)(u >> (24 - 8 * i));
    }
    make_npy(tu_path(b, "x.npy"), 1, "{'descr': '>f4', 'fortran_order': True, 'shape': (2, 3), }", buf, 24);
    unsigned char ib[6];
    for (int k = 0; k < 3; k++) put_le(ib + 2 * k, (uint16_t)(int16_t)ids[k], 2);
    make_npy(tu_path(b, "ids.npy"), 1, "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", ib, 6);
    static const char *const bnames[] = {"x", "ids", NULL};
    names_manifest(b, bnames);
    char *out;
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 0);
    assert_contains(out, "diff: 2 compared, 0 differ, 0 missing from B, 0 only in B");
    free(out);
    /* the last value in Fortran order is x[1][2]: 6 -> 7 */
    float seven = 7;
    uint32_t u;
    memcpy(&u, &seven, 4);
    for (int i = 0; i < 4; i++) buf[20 + i] = (unsigned char)(u >> (24 - 8 * i));
    make_npy(tu_path(b, "x.npy"), 1, "{'descr': '>f4', 'fortran_order': True, 'shape': (2, 3), }", buf, 24);
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "worst at [1, 2]: A 6, B 7");
    free(out);
}

/* --verbose, --flag=value, --only, and a hint naming departing heads. */
static void test_diff_verbose_flags_heads(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b"), *rel = tu_path(*state, "rel");
    write_sample(a, 0);
    write_sample(b, 0);
    write_sample(rel, 2);
    char *out;
    assert_int_equal(run_diff(&out, a, b, "--verbose", NULL, NULL, NULL), 0);
    assert_contains(out, sizeof(real) == 4 ? "ok   draft1.fc  <f4 (2, 3)  max|A| 9  worst rel err 0  NMSE exact\n"
                                           : "ok   draft1.fc  <f8 (2, 3)  max|A| 9  worst rel err 0  NMSE exact\n");
    assert_contains(out, "ok   verify1.sampled  <i8 (3,)  ints equal\n");
    free(out);
    assert_int_equal(run_diff(&out, a, rel, "--rtol=1e-3", NULL, NULL, NULL), 0);
    free(out);
    /* 1 vs 1.002 in draft1.fc: rel err 0.002 / 9; NMSE 10 log10(0.002^2 / 229.015625) */
    assert_int_equal(run_diff(&out, a, rel, "--rtol=1e-3", "-v", NULL, NULL), 0);
    char want[200];
    double e = (double)(real)1.002 - 1, nmse = 10 * log10(e * e / (1 + 0.015625 + 49 + 64 + 81));
    snprintf(want, sizeof want, "worst rel err %.3g  NMSE %.1f dB", e / 9, nmse);
    assert_contains(out, want);
    free(out);
    assert_int_equal(run_diff(&out, a, rel, "--rtol=x", NULL, NULL, NULL), 2);
    free(out);
    assert_int_equal(run_diff(&out, a, rel, "--only=verify1.*", NULL, NULL, NULL), 0);
    assert_contains(out, "diff: 1 compared, 0 differ, 0 missing from B, 0 only in B");
    free(out);

    /* an attention tensor [H=4, T=2, S=3]: heads 1 and 3 changed */
    const char *ha = tu_path(*state, "ha"), *hb = tu_path(*state, "hb");
    unsigned char da[4 * 6 * 8], db[4 * 6 * 8];
    for (int k = 0; k < 24; k++) {
        le_f64(da + 8 * k, 0.01 * k);
        le_f64(db + 8 * k, 0.01 * k + ((k / 6) % 2 ? 0.5 : 0));
    }
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 2, 3), }";
    one_tensor_dir(ha, "verify2.layers.0.self_attn.attn_weights", dict, da, sizeof da);
    one_tensor_dir(hb, "verify2.layers.0.self_attn.attn_weights", dict, db, sizeof db);
    assert_int_equal(run_diff(&out, ha, hb, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "heads departing: 1 3 (2 of 4); agreeing: 0 2\n");
    free(out);
}

/* The manifest's dtype and shape must match the header; names print with
 * control characters escaped, so a name cannot fake an output line. */
static void test_diff_manifest_checks_and_escapes(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b");
    unsigned char z[16] = {0}, one[16] = {0};
    one[3] = 0x3f;  /* 1.0f little-endian: 00 00 80 3f */
    one[2] = 0x80;
    one_tensor_dir(a, "x\\nfirst departure: fake", F4_2_DICT, z, 8);
    one_tensor_dir(b, "x\\nfirst departure: fake", F4_2_DICT, one, 8);
    char *out;
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 1);
    assert_contains(out, "first departure: x\\x0afirst departure: fake: 1 of 2 values");
    assert_not_contains(out, "\nfirst departure: fake");
    free(out);
    tu_write_text(tu_path(a, "trace.jsonl"),
                  "{\"name\": \"x\", \"file\": \"x.npy\", \"dtype\": \"float32\", \"shape\": [3]}\n");
    tu_write_text(tu_path(b, "trace.jsonl"), "{\"name\": \"x\", \"file\": \"x.npy\"}\n");
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 2);
    free(out);
    assert_contains(dflash_errmsg, "a/x.npy: the manifest says dtype|shape \"float32|3\" but the file's header says \"float32|2\"");
}

/* Bad directories and manifests: exit 2; nothing compared: exit 2. */
static void test_diff_bad_input(void **state) {
    const char *a = tu_path(*state, "a"), *b = tu_path(*state, "b"), *e = tu_path(*state, "empty");
    write_sample(a, 0);
    write_sample(b, 0);
    assert_int_equal(mkdir(e, 0777), 0);
    char *out;
    /* A without a manifest */
    assert_int_equal(run_diff(&out, e, b, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "trace.jsonl");
    free(out);
    /* a directory that is not there */
    assert_int_equal(run_diff(&out, tu_path(*state, "nope"), b, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "nope");
    free(out);
    /* B with neither a manifest nor a .npy file (without a manifest, B's .npy files are read by name:
     * tests/test_diff_hints.c) */
    assert_int_equal(run_diff(&out, a, e, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "empty: no trace.jsonl, names.json or .npy file: not a trace directory");
    free(out);
    /* nothing in common */
    tu_write_text(tu_path(e, "trace.jsonl"), "");
    assert_int_equal(run_diff(&out, a, e, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "B has none of A's 3 tensors, first prefill.hidden_states.0");
    assert_contains(out, "diff: 0 compared, 0 differ, 3 missing from B, 0 only in B");
    free(out);
    /* a file listed by A's manifest but missing */
    assert_int_equal(unlink(tu_path(a, "draft1.fc.npy")), 0);
    assert_int_equal(run_diff(&out, a, b, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "draft1.fc.npy");
    free(out);
    /* a manifest line that is not JSON */
    const char *m = tu_path(b, "trace.jsonl");
    char *text = tu_read(m, NULL);
    size_t l = strlen(text);
    char *broken = malloc(l + 16);
    snprintf(broken, l + 16, "%snot json\n", text);
    assert_int_equal(tu_write(m, broken, strlen(broken)), 0);
    assert_int_equal(run_diff(&out, b, a, NULL, NULL, NULL, NULL), 2);
    assert_contains(out, "line 4");
    free(out);
    free(text);
    free(broken);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_npy_files_and_manifest, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_duplicate_name_is_an_error, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_refuses_foreign_files, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_replaces_earlier_trace, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_failed_run_keeps_earlier_trace, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_errors, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_filters, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_text_trace, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_text_to_stdout, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_identical, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_first_departure, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_tolerances, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_reads_numpy_layouts, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_malformed, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_bad_input, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_tolerance_from_reference, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_nan_inf, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_fortran_big_endian, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_verbose_flags_heads, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_diff_manifest_checks_and_escapes, setup_tmp, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
