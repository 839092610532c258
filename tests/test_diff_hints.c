/* tests/test_diff_hints.c - `dflash diff`: rounds first, rounding told
 * from mistakes, hints that name the mistake, the manifest fields that bind.
 *
 * The wrong traces are made independently of the diff:
 *   - three mistakes of a port, each a patch of the clean dflash.c
 *     (tests/signatures/NAME.diff, built as build/signatures/dflash-NAME like
 *     the pitfalls): the attention scale (D/H)^-0.5 for head_dim^-0.5, the
 *     draft's k_norm on the block's keys only, the draft's final norm with the
 *     target's weight. What the hint must say is derived here from the weight
 *     set's config.json and safetensors (the factor sqrt(head_dim / (D/H)),
 *     the Lc = n context rows, the factor w_target[0] / w_draft[0]), not read
 *     from the diff's output;
 *   - hand-made traces (.npy written byte by byte here, manifests by hand)
 *     for the rounds, the manifest fields, the rounding classification and
 *     the factor and axis hints, with values chosen so the expected text
 *     follows from them;
 *   - the float and double builds of this program (a clean port: a
 *     different computation of the same algorithm) must show no departure,
 *     both ways round, at 200 tokens on every set (make test-long,
 *     DFLASH_TEST_LONG=1: two traces of up to 49,214 files per set).
 */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"
#include "tests/traceutil.h"

#include <dirent.h>
#include <sys/wait.h>

#define g_dir TU_SCRATCH  /* the suite's scratch directory */

static const char *dir_path(const char *leaf) { return tu_path(g_dir, leaf); }

#define assert_not_contains(hay, needle)                                                 \
    do {                                                                                 \
        const char *h_ = (hay), *n_ = (needle);                                          \
        if (h_ && strstr(h_, n_)) fail_msg("did not expect \"%s\" in:\n%s", n_, h_);     \
    } while (0)

/* `./dflash diff [opts] A B`: exit status, output in *out */
static int diff(const char *opts, const char *a, const char *b, char **out) {
    char cmd[3000], o[600];
    snprintf(o, sizeof o, "%s", dir_path("diff.txt"));
    snprintf(cmd, sizeof cmd, "./dflash diff %s %s %s", opts, a, b);
    int rc = tu_run(cmd, o);
    *out = tu_read(o, NULL);
    assert_non_null(*out);
    return rc;
}

static void load_config(Config *c, const char *path, int draft) {
    size_t len = 0;
    char *text = tu_read(path, &len);
    assert_non_null(text);
    if (config_parse(c, path, text, len, draft) != 0) fail_msg("%s: %s", path, dflash_errmsg);
    free(text);
}

/* element 0 of an F32 tensor of a safetensors file, read from its header */
static double safetensors_first(const char *path, const char *key) {
    size_t len;
    unsigned char *b = (unsigned char *)tu_read(path, &len);
    assert_non_null(b);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
    Json h;
    assert_int_equal(json_parse((const char *)b + 8, (size_t)hl, path, &h), 0);
    const Json *t = json_get(&h, key), *dt = t ? json_get(t, "dtype") : NULL, *off = t ? json_get(t, "data_offsets") : NULL;
    if (!t || !dt || strcmp(dt->string, "F32") != 0 || !off) fail_msg("%s: no F32 tensor %s", path, key);
    float v;
    memcpy(&v, b + 8 + hl + (size_t)off->items[0].integer, 4);
    json_free(&h);
    free(b);
    return v;
}

/* ---- hand-made traces ----------------------------------------------------- */

/* the hand-made traces of this suite: g_dir/leaf; a leaf ending in 'b' is
 * B's (its manifest's "meaning" differs from A's: meaning does not bind) */
static void hand_leaf(Hand *h, const char *leaf) {
    hand_open(h, dir_path(leaf), leaf[strlen(leaf) - 1] == 'b' ? "B's words" : "A's");
}

/* A run of `rounds` rounds, block 4: per round the draft's proposals (3), the
 * verification's sampled ids (4) and acceptance length acc[r-1]; output_ids
 * of m tokens. The ids are 5 everywhere but where `bad_round` puts 7 at
 * verify.sampled[2]. */
static void hand_run(Hand *h, const char *leaf, int rounds, const int *acc, int bad_round, int m) {
    hand_leaf(h, leaf);
    double ids[64];
    for (int i = 0; i < 64; i++) ids[i] = 5;
    hand_ids(h, "input_ids", "prefill", 0, 3, ids);
    for (int r = 1; r <= rounds; r++) {
        char name[64];
        snprintf(name, sizeof name, "draft%d.sampled", r);
        hand_ids(h, name, "draft", r, 3, ids);
        double s[4] = {5, 5, r == bad_round ? 7 : 5, 5}, a = acc[r - 1];
        snprintf(name, sizeof name, "verify%d.sampled", r);
        hand_ids(h, name, "verify", r, 4, s);
        snprintf(name, sizeof name, "verify%d.acceptance_length", r);
        int64_t none[1] = {0};
        hand_add(h, name, "verify", r, 'i', 0, none, &a);
    }
    hand_ids(h, "output_ids", "final", 0, m, ids);
    hand_close(h);
}

/* Rounds first: B ran 1 round where A ran 3, its verify1.sampled differs */
static void test_rounds_first(void **state) {
    (void)state;
    Hand a, b;
    const int acc_a[3] = {3, 3, 1}, acc_b[1] = {0};
    hand_run(&a, "ra", 3, acc_a, 0, 14);
    hand_run(&b, "rb", 1, acc_b, 1, 4);
    char *out;
    assert_int_equal(diff("", a.dir, b.dir, &out), 1);
    /* the line comes before anything else */
    const char *want = "rounds: A ran 3 rounds, B 1; first divergent round 1: B's verify1.sampled [2] is 7, A's 5 "
                       "(acceptance length A 3, B 0)\n";
    if (strncmp(out, want, strlen(want)) != 0) fail_msg("expected the output to start with\n%s\ngot:\n%s", want, out);
    assert_contains(out, "first departure: verify1.sampled: 1 of 4 ints differ; first at [2]: A 5, B 7");
    free(out);
    /* B stops after round 1 with everything it has agreeing (a stop rule
     * that fires early): round 2 is the divergent one, and output_ids (its
     * length follows from the rounds) is not named as the first departure */
    hand_run(&b, "rb", 1, acc_a, 0, 7);
    assert_int_equal(diff("", a.dir, b.dir, &out), 1);
    assert_contains(out, "rounds: A ran 3 rounds, B 1; first divergent round 2: B has no round 2 (it stopped after "
                         "round 1, whose acceptance lengths agree with A's)\n");
    assert_contains(out, "differs: output_ids");
    assert_not_contains(out, "first departure: output_ids");
    assert_contains(out, "no tensor departs in the common rounds");
    free(out);
    /* the same rounds: no rounds line */
    assert_int_equal(diff("", a.dir, a.dir, &out), 0);
    assert_not_contains(out, "rounds:");
    free(out);
}

/* phase and round bind, meaning does not; B without a manifest is an error */
static void test_manifest_fields_bind(void **state) {
    (void)state;
    Hand a, b;
    const int acc[1] = {2};
    hand_run(&a, "ma", 1, acc, 0, 6);
    hand_run(&b, "mb", 1, acc, 0, 6);   /* other meanings than A's */
    char *out;
    assert_int_equal(diff("", a.dir, b.dir, &out), 0);
    free(out);
    char *m = tu_read(tu_path(b.dir, "trace.jsonl"), NULL), *p = strstr(m, "\"phase\":\"draft\"");
    assert_non_null(p);
    memcpy(p, "\"phase\":\"train\"", 15);   /* draft1.sampled labelled train */
    tu_write_text(tu_path(b.dir, "trace.jsonl"), m);
    assert_int_equal(diff("", a.dir, b.dir, &out), 1);
    assert_contains(out, "first departure: draft1.sampled: the manifest's \"phase\" differs: A draft, B train");
    free(out);
    memcpy(p, "\"phase\":\"draft\"", 15);
    p = strstr(m, "\"round\":1");
    memcpy(p, "\"round\":0", 9);
    tu_write_text(tu_path(b.dir, "trace.jsonl"), m);
    assert_int_equal(diff("", a.dir, b.dir, &out), 1);
    assert_contains(out, "first departure: draft1.sampled: the manifest's \"round\" differs: A 1, B 0");
    free(out);
    /* A without the fields (an oracle's names.json): the names imply them */
    tu_write_text(tu_path(b.dir, "trace.jsonl"), m);
    unlink(tu_path(a.dir, "trace.jsonl"));
    tu_write_text(tu_path(a.dir, "names.json"),
                  "[\"input_ids\", \"draft1.sampled\", \"verify1.sampled\", \"verify1.acceptance_length\", \"output_ids\"]");
    assert_int_equal(diff("", a.dir, b.dir, &out), 1);
    assert_contains(out, "the manifest's \"round\" differs: A 1, B 0");
    free(out);
    /* a round that is not an integer: bad input */
    tu_write_text(tu_path(b.dir, "trace.jsonl"), "{\"name\":\"input_ids\",\"file\":\"input_ids.npy\",\"round\":1.5}\n");
    assert_int_equal(diff("", a.dir, b.dir, &out), 2);
    assert_contains(out, "\"round\" must be an integer >= 0");
    free(out);
    free(m);
    /* no manifest in B (a port that stopped before writing it): its .npy files by name, in A's order,
     * with a warning; B's phase mislabel above is then not seen */
    unlink(tu_path(b.dir, "trace.jsonl"));
    assert_int_equal(diff("", a.dir, b.dir, &out), 0);
    assert_contains(out, "warning: B has no manifest (trace.jsonl or names.json): its .npy files are taken as A's names");
    assert_contains(out, "the phase and round bindings are unchecked");
    assert_contains(out, "diff: 5 compared, 0 differ, 0 missing from B");
    free(out);
    /* and with one of them gone: missing, the rest compared */
    unlink(tu_path(b.dir, "output_ids.npy"));
    assert_int_equal(diff("", a.dir, b.dir, &out), 1);
    assert_contains(out, "B has nothing after verify1.acceptance_length: 1 tensor missing, first output_ids");
    free(out);
    /* no manifest and no .npy file: not a trace */
    tu_rmtree(b.dir);
    assert_int_equal(mkdir(b.dir, 0777), 0);
    assert_int_equal(diff("", a.dir, b.dir, &out), 2);
    assert_contains(out, "no trace.jsonl, names.json or .npy file: not a trace directory");
    free(out);
}

/* The double build's tensor A (a_k = 1 + (k % 10) / 10: max|A| 1.9, the
 * tolerance 1e-6 + 1.9e-4), this program's float build's F = A + e and the
 * port's B = A + c e, with e_k = +-5e-5 (alternating): B is beyond the
 * tolerance at every value (|c| 5e-5 > 1.91e-4 for |c| >= 4) and c times
 * as far from the double build as the float build is, by RMS and worst value
 * alike. f_exact: F = A (the float build is exact there). Behind an id
 * tensor that agrees or not. */
static void rounding_case(double c, int f_exact, int ids_differ) {
    enum { n = 1000 };
    static double va[n], vf[n], vb[n];
    for (int k = 0; k < n; k++) {
        double e = k % 2 ? 5e-5 : -5e-5;
        va[k] = 1 + (k % 10) / 10.0;
        vf[k] = va[k] + (f_exact ? 0 : e);
        vb[k] = va[k] + c * e;
    }
    int64_t s[1] = {n};
    double ids[2] = {1, 2}, ids_b[2] = {1, ids_differ ? 3 : 2};
    const char *leaf[3] = {"fa", "ff", "fb"};
    const double *v[3] = {va, vf, vb};
    for (int side = 0; side < 3; side++) {
        Hand h;
        hand_leaf(&h, leaf[side]);
        hand_ids(&h, "prefill.input_ids", "prefill", 0, 2, side == 2 ? ids_b : ids);
        hand_add(&h, "prefill.hidden_states.0", "prefill", 0, 'f', 1, s, v[side]);
        hand_close(&h);
    }
}

/* The classification: rounding is B lying about as close to the double
 * build's values as this program's float build (at most 10x its distance,
 * RMS and worst value), the same ids so far; here A is the double build
 * (the hand-made .npy are float64) and --float gives the float build's trace. */
static void test_rounding_or_departure(void **state) {
    (void)state;
    char A[600], F[600], B[600], opt[700], *out;
    snprintf(A, sizeof A, "%s", dir_path("fa"));
    snprintf(F, sizeof F, "%s", dir_path("ff"));
    snprintf(B, sizeof B, "%s", dir_path("fb"));
    snprintf(opt, sizeof opt, "--float %s", F);
    /* 5x as far: rounding, exit 0 */
    rounding_case(5, 0, 0);
    if (diff(opt, A, B, &out) != 0) fail_msg("expected exit 0:\n%s", out);
    assert_contains(out, "rounding: 1 tensor is beyond the tolerance but within rounding");
    assert_contains(out, "the largest ratio 5, in prefill.hidden_states.0");
    assert_contains(out, "diff: 2 compared, 0 differ, 0 missing from B, 0 only in B, 1 rounding");
    free(out);
    char vopt[800];
    snprintf(vopt, sizeof vopt, "--verbose %s", opt);
    assert_int_equal(diff(vopt, A, B, &out), 0);
    assert_contains(out, "RND  prefill.hidden_states.0  <f8 (1000,)");
    assert_contains(out, "1000 beyond (worst 1.31x the tolerance); B is 5x as far from the double build as this "
                         "program's float build (RMS), 5x (worst value)");
    free(out);
    snprintf(vopt, sizeof vopt, "--no-rounding %s", opt);
    assert_int_equal(diff(vopt, A, B, &out), 1);
    assert_contains(out, "first departure: prefill.hidden_states.0: 1000 of 1000 values beyond");
    free(out);
    /* 15x as far: a departure, saying by how much */
    rounding_case(15, 0, 0);
    assert_int_equal(diff(opt, A, B, &out), 1);
    assert_contains(out, "first departure: prefill.hidden_states.0: 1000 of 1000 values beyond");
    assert_contains(out, "not rounding: B is 15x as far from the double build as this program's float build (RMS), "
                         "15x (worst value) (rounding: at most 10x both)");
    free(out);
    /* the float build is exact here, B is not: a departure */
    rounding_case(5, 1, 0);
    assert_int_equal(diff(opt, A, B, &out), 1);
    assert_contains(out, "not rounding: this program's float build equals the double build here, B does not");
    free(out);
    /* the ids before it differ: not the same tokens, so a departure */
    rounding_case(5, 0, 1);
    assert_int_equal(diff(opt, A, B, &out), 1);
    assert_contains(out, "first departure: prefill.input_ids");
    assert_contains(out, "differs: prefill.hidden_states.0");
    free(out);
    /* no other build to judge by (a hand-made A records no flags): departures, and the reason */
    rounding_case(5, 0, 0);
    assert_int_equal(diff("", A, B, &out), 1);
    assert_contains(out, "rounding not judged by the double build for 1 tensor beyond the tolerance (0 of them "
                         "rounding by the fallback thresholds");
    assert_contains(out, "A's manifest records no run flags");
    free(out);
    /* A is the double build: --double is refused */
    snprintf(vopt, sizeof vopt, "--double %s", F);
    assert_int_equal(diff(vopt, A, B, &out), 2);
    assert_contains(out, "--double: A is already the double build's trace (its floats are float64); give --float DIR");
    free(out);
}

/* diff runs the double build itself, on the flags A's manifest records, in
 * a temporary directory it removes: a port 1e-3 off on one tensor departs,
 * "not rounding", and nothing is left in TMPDIR. */
static void test_diff_runs_the_double_build(void **state) {
    (void)state;
    char cmd[3000], a[600], b[600], tmp[600];
    /* A: `./dflash --weights toy_weights/random --prompt "A dog saw" --max-new-tokens 1 --ignore-eos
     * --trace`, tools/test-fixtures.sh's (read only); B a copy of it, changed */
    snprintf(a, sizeof a, "%s", tu_fixture("random1-" TU_SELF));
    snprintf(b, sizeof b, "%s", dir_path("rb"));
    snprintf(tmp, sizeof tmp, "%s", dir_path("tmp"));
    tu_rmtree(b);
    tu_rmtree(tmp);
    assert_int_equal(mkdir(tmp, 0777), 0);
    snprintf(cmd, sizeof cmd, "cp -r %s %s", a, b);
    assert_int_equal(tu_run(cmd, NULL), 0);
    /* B: the prefill's layer-0 down_proj, every float tensor of round 1 and
     * acceptance_per_position changed (by 1e-3 relative): more names than diff gives
     * the double build one by one, so it asks by phase ("draft1.*"), and a
     * name without a phase must stay itself (not "acceptance_per_position.*",
     * which the double build refuses: then nothing would be judged by it) */
    char p[1000];
    DIR *dd = opendir(b);
    assert_non_null(dd);
    struct dirent *de;
    int scaled = 0;
    while ((de = readdir(dd)) != NULL) {
        const char *fn = de->d_name;
        if (strcmp(fn, "prefill.layers.0.mlp.down_proj.npy") && strcmp(fn, "acceptance_per_position.npy") &&
            strncmp(fn, "draft1.", 7) && strncmp(fn, "verify1.", 8))
            continue;
        snprintf(p, sizeof p, "%s/%s", b, fn);
        NpyValues v;
        if (npy_read_values(p, &v) != 0) fail_msg("%s: %s", p, dflash_errmsg);
        if (v.is_int) { npy_values_free(&v); continue; }
        float *x = malloc((v.n ? v.n : 1) * sizeof *x);
        assert_non_null(x);
        /* (+ 0.01 too: one round's acceptance fractions may all be 0) */
        for (size_t i = 0; i < v.n; i++) x[i] = (float)(v.f[i] * (1 + 1e-3) + (fn[0] == 'a' ? 0.01 : 0));
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(npy_write(f, "<f4", v.ndim, v.shape, x, v.n), 0);
        assert_int_equal(fclose(f), 0);
        free(x);
        npy_values_free(&v);
        scaled++;
    }
    closedir(dd);
    assert_true(scaled > 40);
    snprintf(cmd, sizeof cmd, "TMPDIR=%s ./dflash diff %s %s", tmp, a, b);
    char o[700];
    snprintf(o, sizeof o, "%s", dir_path("auto.txt"));
    assert_int_equal(tu_run(cmd, o), 1);
    char *out = tu_read(o, NULL);
    assert_contains(out, "running the double build on A's flags to judge rounding");
    assert_contains(out, "--trace-filter draft1.* ");                      /* by phase */
    assert_contains(out, "--trace-filter acceptance_per_position ");       /* itself */
    assert_not_contains(out, "run on A's flags failed");
    assert_not_contains(out, "rounding not judged");
    assert_contains(out, "first departure: prefill.layers.0.mlp.down_proj");
    assert_contains(out, "  not rounding: B is ");
    free(out);
    assert_int_equal(tu_count_entries(tmp), 0);
    tu_rmtree(b);
}

/* A verification's sampled ids that differ at a near tie of A's logits:
 * rounding past the accepted tokens (and match there); a departure, with
 * the hint, among the tokens kept. */
static void test_near_tie(void **state) {
    (void)state;
    for (int kept = 0; kept < 2; kept++) {
        Hand a, b;
        /* logits [4, 3]: row 2 ties tokens 0 and 1 to within 1e-5 (tolerance 1e-6 + 1e-4 * 9) */
        double L[12] = {9, 1, 0, 9, 1, 0, 4, 4 - 1e-5, 0, 9, 1, 0};
        int64_t sl[2] = {4, 3};
        double sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 1, 0}, acc = kept ? 2 : 1, ma[4] = {1, 1, 1, 0}, mb[4] = {1, 1, 0, 0};
        for (int side = 0; side < 2; side++) {
            Hand *h = side ? &b : &a;
            hand_leaf(h, side ? "tb" : "ta");
            hand_add(h, "verify1.logits", "verify", 1, 'f', 2, sl, L);
            hand_ids(h, "verify1.sampled", "verify", 1, 4, side ? sb : sa);
            hand_ids(h, "verify1.match", "verify", 1, 4, side ? mb : ma);
            int64_t none[1] = {0};
            hand_add(h, "verify1.acceptance_length", "verify", 1, 'i', 0, none, &acc);
            hand_close(h);
        }
        char *out;
        if (!kept) {
            /* acceptance 1: tokens 0..1 kept, position 2 is past them */
            assert_int_equal(diff("--verbose", a.dir, b.dir, &out), 0);
            assert_contains(out, "RND  verify1.sampled  <i8 (4,)  ints differ at near ties past the accepted tokens");
            assert_contains(out, "RND  verify1.match");
            assert_contains(out, "2 rounding");
        } else {
            assert_int_equal(diff("", a.dir, b.dir, &out), 1);
            assert_contains(out, "first departure: verify1.sampled");
            assert_contains(out, "hint: a near tie: in A's logits row 2, A's token 0 has 4 and B's 1 has 3.99999");
        }
        free(out);
    }
}

/* A two-tensor pair A / B under one name, for the hints */
static void hint_pair(const char *name, int ndim, const int64_t *sa, const double *va, const int64_t *sb,
                      const double *vb) {
    Hand a, b;
    hand_leaf(&a, "ha");
    hand_add(&a, name, NULL, 0, 'f', ndim, sa, va);
    hand_close(&a);
    hand_leaf(&b, "hb");
    hand_add(&b, name, NULL, 0, 'f', ndim, sb, vb);
    hand_close(&b);
}

static void test_factor_and_axes_hints(void **state) {
    (void)state;
    char A[600], B[600], *out;
    snprintf(A, sizeof A, "%s", dir_path("ha"));
    snprintf(B, sizeof B, "%s", dir_path("hb"));
    /* [2, 3, 4]: a_k = k + 1 */
    double va[24], vb[24];
    int64_t s[3] = {2, 3, 4}, st[3] = {3, 2, 4};
    for (int k = 0; k < 24; k++) va[k] = k + 1;
    /* a constant: 1/sqrt(8) */
    for (int k = 0; k < 24; k++) vb[k] = va[k] / sqrt(8.0);
    hint_pair("x", 3, s, va, s, vb);
    assert_int_equal(diff("", A, B, &out), 1);
    assert_contains(out, "hint: B = 0.353553 x A on every value (a constant factor: 1/sqrt(8))");
    free(out);
    /* one factor per column (the last axis): 1, 2, 3, 4 */
    for (int k = 0; k < 24; k++) vb[k] = va[k] * (1 + k % 4);
    hint_pair("x", 3, s, va, s, vb);
    assert_int_equal(diff("", A, B, &out), 1);
    assert_contains(out, "hint: B = A times one factor per column (the last axis: 4 factors from 1 to 4; column 0: 1)");
    free(out);
    /* an attention tensor [H, T, S]: one factor per row (axis 1), rows 1..2 depart */
    for (int k = 0; k < 24; k++) vb[k] = va[k] * ((k / 4) % 3 == 0 ? 1 : 0.5);
    hint_pair("verify1.layers.0.self_attn.attn_weights", 3, s, va, s, vb);
    assert_int_equal(diff("", A, B, &out), 1);
    assert_contains(out, "rows departing (axis 1): 1..2 (2 of 3); agreeing: 0");
    assert_contains(out, "hint: B = A times one factor per row (axis 1: 3 factors from 0.5 to 1; row 0: 1)");
    free(out);
    /* B an RMSNorm of A over the last axis, times the weights 0.5, 1, 1.5, 2 */
    for (int k = 0; k < 24; k++) {
        int row = k / 4;
        double ss = 0;
        for (int c = 0; c < 4; c++) ss += va[row * 4 + c] * va[row * 4 + c];
        vb[k] = va[k] / sqrt(ss / 4 + 1e-6) * (0.5 * (1 + k % 4));
    }
    hint_pair("prefill.layers.0.self_attn.q", 3, s, va, s, vb);
    assert_int_equal(diff("", A, B, &out), 1);
    assert_contains(out, "hint: B is an RMSNorm of A (each row of A's last axis normalised, times one weight per column)");
    free(out);
    /* heads and tokens swapped: B is [T, H, d] */
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < 3; t++)
            for (int i = 0; i < 4; i++) vb[(t * 2 + h) * 4 + i] = va[(h * 3 + t) * 4 + i];
    hint_pair("draft1.layers.0.self_attn.q", 3, s, va, st, vb);
    assert_int_equal(diff("", A, B, &out), 1);
    assert_contains(out, "shape: A is <f8 (2, 3, 4), B is <f8 (3, 2, 4)");
    assert_contains(out, "hint: B holds A's values with the axes permuted: B's axes are A's (1, 0, 2): heads and "
                         "tokens swapped ([T, H, d] for the contract's [H, T, d])");
    free(out);
    /* the same values in A's shape: a reshape where a transpose was needed */
    hint_pair("draft1.layers.0.self_attn.q", 3, s, va, s, vb);
    assert_int_equal(diff("", A, B, &out), 1);
    assert_contains(out, "B's axes are A's (1, 0, 2), read into A's shape (a reshape where a transpose was needed)");
    free(out);
}

/* ---- the three mistakes of issue 25, as patched builds ------------------- */

/* train1.param.w departs at the two values where A's gradient is at
 * rounding level (1e-12 against a largest 0.5: within 1e-6 + 1e-4 * 0.5) and
 * the weight moved by 2 lr (the other sign): named as AdamW's sign; the
 * same departure where the gradient is large is not. */
static void test_adamw_sign_of_a_rounding_level_gradient(void **state) {
    (void)state;
    for (int large = 0; large < 2; large++) {
        double g[4] = {0.5, 1e-12, -0.25, -1e-12}, pa[4] = {1, 2, 3, 4}, pb[4] = {1, 2 + 2e-3, 3, 4 - 2e-3};
        if (large) pb[0] = 1 + 2e-3;
        int64_t sh[1] = {4};
        for (int side = 0; side < 2; side++) {
            Hand h;
            hand_leaf(&h, side ? "wb" : "wa");
            hand_add(&h, "train1.grad.w", "train", 1, 'f', 1, sh, g);
            hand_add(&h, "train1.param.w", "train", 1, 'f', 1, sh, side ? pb : pa);
            hand_close(&h);
        }
        char A[600], B[600], *out;
        snprintf(A, sizeof A, "%s", dir_path("wa"));
        snprintf(B, sizeof B, "%s", dir_path("wb"));
        assert_int_equal(diff("", A, B, &out), 1);
        assert_contains(out, "first departure: train1.param.w");
        if (!large)
            assert_contains(out, "hint: AdamW sign of a rounding-level gradient: at each of the 2 departing values A's "
                                 "train1.grad.w is within its tolerance of 0");
        else
            assert_not_contains(out, "AdamW sign");
        free(out);
    }
}

/* Eleven float tensors, each B = A (1 + e) with e = 1e-7 (NMSE -140 dB),
 * but t5 with e = 3e-5 (NMSE -90.5 dB: still within 1e-4 relative), then t11
 * 1e-2 off: the warning names t5, 50 dB above its neighbours; with t5 like the
 * others, no warning. */
static void test_an_agreeing_tensor_far_worse_than_its_neighbours(void **state) {
    (void)state;
    for (int odd = 0; odd < 2; odd++) {
        Hand a, b;
        hand_leaf(&a, "na");
        hand_leaf(&b, "nb");
        double va[8], vb[8];
        int64_t sh[1] = {8};
        for (int t = 0; t < 12; t++) {
            double e = t == 11 ? 1e-2 : t == 5 && odd ? 3e-5 : 1e-7;
            for (int k = 0; k < 8; k++) {
                va[k] = 1 + k;
                vb[k] = va[k] * (1 + e);
            }
            char name[32];
            snprintf(name, sizeof name, "prefill.t%d", t);
            hand_add(&a, name, "prefill", 0, 'f', 1, sh, va);
            hand_add(&b, name, "prefill", 0, 'f', 1, sh, vb);
        }
        hand_close(&a);
        hand_close(&b);
        char *out;
        assert_int_equal(diff("", a.dir, b.dir, &out), 1);
        assert_contains(out, "first departure: prefill.t11");
        if (odd)
            assert_contains(out, "warning: prefill.t5 agrees within the tolerance, but its NMSE -90.5 dB is 49.5 dB "
                                 "above its neighbours'");
        else
            assert_not_contains(out, "warning:");
        free(out);
    }
}

#define QWEN "--weights toy_weights/qwen3-layout --ids 5,6,7"
#define RAND "--weights toy_weights/random --prompt \"A dog saw\" --ignore-eos"

/* diff of the clean program's trace and a patched one's: args, new tokens.
 * The clean run of RAND with 1 token is tools/test-fixtures.sh's random1,
 * and diff reads its other-precision trace (random1-TU_OTHER) instead of
 * running that build itself (test_diff_runs_the_double_build checks that). */
static char *patched_diff(const char *patch, const char *args, int n, int *rc) {
    char cmd[3000], ref[600], port[600], opts[700] = "";
    snprintf(ref, sizeof ref, "%s", dir_path("pref"));
    snprintf(port, sizeof port, "%s", dir_path("pport"));
    if (!strcmp(args, RAND) && n == 1) {
        snprintf(ref, sizeof ref, "%s", tu_fixture("random1-" TU_SELF));
        snprintf(opts, sizeof opts, "--" TU_OTHER " %s", tu_fixture("random1-" TU_OTHER));
    } else {
        snprintf(cmd, sizeof cmd, "./dflash %s --max-new-tokens %d --trace %s", args, n, ref);
        assert_int_equal(tu_run(cmd, NULL), 0);
    }
    snprintf(cmd, sizeof cmd, "./build/signatures/dflash-%s %s --max-new-tokens %d --trace %s", patch, args, n, port);
    if (tu_run(cmd, NULL) != 0) fail_msg("`%s` failed (make build/signatures/dflash-%s?)", cmd, patch);
    char *out;
    *rc = diff(opts, ref, port, &out);
    return out;
}

/* (D/H)^-0.5 for head_dim^-0.5: on qwen3-layout every score of the
 * prefill's layer 0 is sqrt(head_dim / (D/H)) too large; on the random set
 * (D/H = head_dim) the same program agrees. */
static void test_attention_scale_is_a_constant_factor(void **state) {
    (void)state;
    Config c;
    load_config(&c, "toy_weights/qwen3-layout/target/config.json", 0);
    int dh = c.hidden_size / c.num_attention_heads;
    assert_true(dh != c.head_dim && c.head_dim % dh == 0);   /* the set tells them apart */
    int ratio2 = c.head_dim / dh;                            /* the factor's square: 2 */
    int rc;
    char *out = patched_diff("attn-scale-hidden-over-heads", QWEN, 0, &rc), want[300];
    assert_int_equal(rc, 1);
    assert_string_equal(first_departure(out), "prefill.layers.0.self_attn.attn_scores");
    snprintf(want, sizeof want, "hint: B = %.6g x A on every value (a constant factor: sqrt(%d))", sqrt((double)ratio2),
             ratio2);
    assert_contains(out, want);
    snprintf(want, sizeof want, "A's is head_dim^-0.5 = 1/sqrt(%d), B's is %.6g times that = 1/sqrt(%d)", c.head_dim,
             sqrt((double)ratio2), dh);
    assert_contains(out, want);
    free(out);
    Config r;
    load_config(&r, "toy_weights/random/target/config.json", 0);
    assert_int_equal(r.hidden_size / r.num_attention_heads, r.head_dim);
    out = patched_diff("attn-scale-hidden-over-heads", RAND, 2, &rc);
    assert_int_equal(rc, 0);
    free(out);
}

/* k_norm on the block's keys only: exactly the Lc = n context rows of round
 * 1's first draft layer depart. */
static void test_k_norm_block_only_names_the_context_rows(void **state) {
    (void)state;
    Config d;
    load_config(&d, "toy_weights/random/draft/config.json", 1);
    int n = 3, B = d.block_size, rc;   /* "A dog saw": 3 tokens; round 1's context is the prompt */
    char *out = patched_diff("k-norm-block-only", RAND, 1, &rc), want[300];
    assert_int_equal(rc, 1);
    assert_string_equal(first_departure(out), "draft1.layers.0.self_attn.k");
    snprintf(want, sizeof want, "rows departing (axis 1): 0..%d (%d of %d): the context rows (Lc = %d); the block rows "
             "%d..%d agree", n - 1, n, n + B, n, n, n + B - 1);
    assert_contains(out, want);
    free(out);
}

/* The draft's final norm with the target's weight: draft1.norm is A times
 * w_target / w_draft, one factor per column (column 0's from the files). */
static void test_final_norm_weight_is_a_per_column_factor(void **state) {
    (void)state;
    double wt = safetensors_first("toy_weights/random/target/model.safetensors", "model.norm.weight");
    double wd = safetensors_first("toy_weights/random/draft/model.safetensors", "norm.weight");
    assert_true(fabs(wt / wd - 1) > 1e-3);
    int rc;
    char *out = patched_diff("draft-norm-target-weight", RAND, 1, &rc), want[300];
    assert_int_equal(rc, 1);
    assert_string_equal(first_departure(out), "draft1.norm");
    snprintf(want, sizeof want, "hint: B = A times one factor per column (the last axis: %d factors", 512);
    assert_contains(out, want);
    /* column 0's factor, fitted from the traced values, is w_target[0] / w_draft[0] to float rounding */
    const char *c0 = strstr(out, "column 0: ");
    assert_non_null(c0);
    double got = strtod(c0 + strlen("column 0: "), NULL);
    if (fabs(got - wt / wd) > 1e-5 * (wt / wd)) fail_msg("column 0's factor %.9g, expected %.9g", got, wt / wd);
    free(out);
}

/* plain RoPE on the Llama target (rope_scaling llama3 not applied: the
 * patch tests/signatures/rope-plain-on-llama3.diff) departs at
 * prefill.rope_angles, NMSE about -61 dB with few values beyond: the double
 * build tells it from rounding; the column factors run from 1 to the config's
 * rope_scaling factor (inv_freq of the long wavelengths divided by it). */
static void test_plain_rope_on_llama3_departs(void **state) {
    (void)state;
    Config c;
    load_config(&c, "toy_weights/llama/target/config.json", 0);
    assert_true(c.rope_llama3 && c.rope_factor > 1);
    int rc;
    char *out = patched_diff("rope-plain-on-llama3", "--weights toy_weights/llama --ids 5,6,7", 0, &rc), want[300];
    assert_int_equal(rc, 1);
    assert_string_equal(first_departure(out), "prefill.rope_angles");
    assert_contains(out, "  not rounding: B is ");
    snprintf(want, sizeof want, "factors from 1 to %.6g; column 0: 1): one factor per frequency of inv_freq: the "
             "frequency scaling (rope_scaling) differs", c.rope_factor);
    assert_contains(out, want);
    free(out);
}

/* ---- a clean port: the float build against the double build ------------- */

static void float_vs_double(const char *args, int n) {
    char cmd[3000], d[600], f[600];
    snprintf(d, sizeof d, "%s", dir_path("dbl"));
    snprintf(f, sizeof f, "%s", dir_path("flt"));
    snprintf(cmd, sizeof cmd, "./dflash-double %s --max-new-tokens %d --ignore-eos --trace %s", args, n, d);
    assert_int_equal(tu_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "./dflash-float %s --max-new-tokens %d --ignore-eos --trace %s", args, n, f);
    assert_int_equal(tu_run(cmd, NULL), 0);
    for (int dir = 0; dir < 2; dir++) {
        char *out;
        int rc = diff("", dir ? f : d, dir ? d : f, &out);
        if (rc != 0 || !strstr(out, " 0 differ, 0 missing from B"))
            fail_msg("%s, %d tokens, A = the %s build: exit %d:\n%.3000s", args, n, dir ? "float" : "double", rc, out);
        free(out);
    }
    tu_rmtree(d);
    tu_rmtree(f);
}

static void test_float_vs_double_no_departure(void **state) {
    (void)state;
    /* two traces of 200 tokens on every set: thousands of files each, minutes on a busy disk */
    if (!tu_long()) tu_skip("only with DFLASH_TEST_LONG=1 (make test-long runs it: 200 tokens on every set)");
    const char *sets[3] = {"--weights toy_weights/walkthrough", "--weights toy_weights/random", QWEN};
    for (int s = 0; s < 3; s++) float_vs_double(sets[s], 200);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounds_first),
        cmocka_unit_test(test_manifest_fields_bind),
        cmocka_unit_test(test_rounding_or_departure),
        cmocka_unit_test(test_diff_runs_the_double_build),
        cmocka_unit_test(test_near_tie),
        cmocka_unit_test(test_adamw_sign_of_a_rounding_level_gradient),
        cmocka_unit_test(test_an_agreeing_tensor_far_worse_than_its_neighbours),
        cmocka_unit_test(test_factor_and_axes_hints),
        cmocka_unit_test(test_attention_scale_is_a_constant_factor),
        cmocka_unit_test(test_k_norm_block_only_names_the_context_rows),
        cmocka_unit_test(test_final_norm_weight_is_a_per_column_factor),
        cmocka_unit_test(test_plain_rope_on_llama3_departs),
        cmocka_unit_test(test_float_vs_double_no_departure),
    };
    return cmocka_run_group_tests(tests, tu_scratch_setup, tu_scratch_teardown);
}
