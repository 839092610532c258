/* test_figures.c - `dflash figures` on three weight sets and two block
 * sizes: nothing it draws is false. Each figure is read back as text and
 * every number and caption it states is checked against the trace's .npy
 * files, read here independently (formats/files.h's reader, not explorer/figures.c's code):
 *
 *   - heatmaps: every cell's value (its <title>, 6 digits) equals the
 *     attention weight; the stated query and key positions are the trace's
 *     position_ids; the stated largest deviation of a row sum from 1 is the
 *     one recomputed here (and small); "no weight on a key after its query's position" /
 *     "weight on keys after ..." matches the weights; the tensor name, the
 *     shape and the number of heatmaps are the trace's;
 *   - the timeline: one check mark per accepted proposal and one cross per
 *     rejected one (from verify{r}.acceptance_length and the block size),
 *     the stated new tokens, target forwards, tau, block size and rounds;
 *   - bad input: exit 2, one line, nothing left behind; and the walkthrough
 *     prose generator (walkthrough/tools/mkwalk) refuses a run that is not
 *     the walkthrough's with exit 2, pointing to `dflash figures`;
 *   - the text trace's attention tables, which the walkthrough's text
 *     figures follow: keys and queries named with their words when a
 *     vocabulary is known, and `--trace-text -` putting the trace alone on
 *     stdout (the run's output on stderr).
 *
 * Needs ./dflash, the toy weights and walkthrough/tools/mkwalk (make test
 * builds them). */
#include "dflash.c"
#include "formats/load.c"
#include "formats/files.h"
#include "tests/testutil.h"

#include <math.h>

static void run_ok(const char *cmd) {
    char full[2400];
    snprintf(full, sizeof full, "%s > /dev/null", cmd);
    int rc = system(full);
    if (rc != 0) fail_msg("command failed (%d): %s", rc, cmd);
}

/* exit status of cmd (stdout and stderr to files in dir) */
static int run_rc(const char *cmd, const char *dir) {
    char full[2400];
    snprintf(full, sizeof full, "%s > %s/stdout 2> %s/stderr", cmd, dir, dir);
    int rc = system(full);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *path) {
    char *b = tu_read(path, NULL);
    if (!b) fail_msg("cannot read %s", path);
    return b;
}

static void load_npy(const char *dir, const char *name, NpyValues *v) {
    char file[1024];
    snprintf(file, sizeof file, "%s/%s.npy", dir, name);
    if (npy_read_values(file, v) != 0) fail_msg("%s", dflash_errmsg);
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* One heatmap against attn[h] of the tensor; pos: the phase's position_ids
 * (NULL for the prefill: 0..n-1). */
static void check_heatmap(const char *svg_path, const NpyValues *A, int h, const NpyValues *pos, const char *tname) {
    char *s = slurp(svg_path);
    int T = (int)A->shape[1], S = (int)A->shape[2];
    const double *w = A->f + (size_t)h * T * S;
    char want[200];
    snprintf(want, sizeof want, "%s[%d]: %d queries x %d keys", tname, h, T, S);
    if (!strstr(s, want)) fail_msg("%s: no \"%s\"", svg_path, want);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 && *p != '\n') fail_msg("%s: a control byte 0x%02x", svg_path, *p);
    /* every cell: <title>value</title>, row by row */
    const char *p = s;
    int k = 0;
    while ((p = strstr(p, "<title>")) != NULL) {
        p += 7;
        double v = strtod(p, NULL);
        assert_true(k < T * S);
        double x = w[k];
        if (fabs(v - x) > 5e-6 * fabs(x) + 1e-30) fail_msg("%s: cell %d reads %g, the trace has %.9g", svg_path, k, v, x);
        k++;
    }
    assert_int_equal(k, T * S);
    /* positions: queries are the last T of the phase's positions; keys 0..S-1 */
    int q0 = pos ? (int)pos->i[pos->n - (size_t)T] : 0, q1 = pos ? (int)pos->i[pos->n - 1] : T - 1;
    snprintf(want, sizeof want, "queries at positions %d..%d", q0, q1);
    if (!strstr(s, want)) fail_msg("%s: no \"%s\"", svg_path, want);
    if (pos) assert_int_equal(pos->i[0], S - (int)pos->n);  /* cached keys are positions 0.. */
    snprintf(want, sizeof want, "keys at positions 0..%d", S - 1);
    if (!strstr(s, want)) fail_msg("%s: no \"%s\"", svg_path, want);
    /* row sums */
    const char *rs = strstr(s, "each row sums to 1 (largest deviation ");
    assert_non_null(rs);
    double dev = strtod(rs + strlen("each row sums to 1 (largest deviation "), NULL), max_dev = 0, later = 0;
    for (int t = 0; t < T; t++) {
        double sum = 0;
        for (int j = 0; j < S; j++) {
            sum += w[(size_t)t * S + j];
            if (j > q0 + t && w[(size_t)t * S + j] > later) later = w[(size_t)t * S + j];
        }
        if (fabs(sum - 1) > max_dev) max_dev = fabs(sum - 1);
    }
    if (fabs(dev - max_dev) > 0.006 * max_dev || max_dev > 1e-5)
        fail_msg("%s: states a largest row-sum deviation of %g, the rows have %g", svg_path, dev, max_dev);
    int says_causal = strstr(s, "no weight on a key after its query's position") != NULL;
    int says_not = strstr(s, "weight on keys after the query's position too") != NULL;
    assert_true(says_causal + says_not == 1);
    if (says_causal != (later == 0)) fail_msg("%s: says %scausal, the largest weight after the query is %g", svg_path,
                                              says_causal ? "" : "not ", later);
    free(s);
}

/* A trace of weight set `set` with block size B; then dflash figures on it,
 * every figure checked. Returns the number of heatmaps checked. */
static int check_run(const char *set, const char *prompt_args, int B, const char *vocab, int *n_cut) {
    char *dir = tu_tmpdir();
    char cmd[2000], tdir[400], fdir[400];
    snprintf(tdir, sizeof tdir, "%s/t", dir);
    snprintf(fdir, sizeof fdir, "%s/fig", dir);
    /* only what the figures read, so the test stays quick (a filtered trace is a trace too) */
    snprintf(cmd, sizeof cmd, "./dflash --weights %s --block-size %d --max-new-tokens 10 %s --trace %s "
             "--trace-filter '*_ids' --trace-filter '*.sampled' --trace-filter '*.acceptance_length' "
             "--trace-filter '*.attn_weights'", set, B, prompt_args, tdir);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "./dflash figures %s %s%s%s", tdir, fdir, vocab ? " --vocab " : "", vocab ? vocab : "");
    run_ok(cmd);

    /* the timeline */
    NpyValues in, out, acc;
    load_npy(tdir, "input_ids", &in);
    load_npy(tdir, "output_ids", &out);
    int R = 0, sum_acc = 0, sum_rej = 0;
    char nm[600];
    for (;;) {
        snprintf(nm, sizeof nm, "%s/verify%d.acceptance_length.npy", tdir, R + 1);
        if (access(nm, F_OK) != 0) break;
        snprintf(nm, sizeof nm, "verify%d.acceptance_length", R + 1);
        load_npy(tdir, nm, &acc);
        sum_acc += (int)acc.i[0];
        sum_rej += B - 1 - (int)acc.i[0];
        npy_values_free(&acc);
        R++;
    }
    assert_true(R >= 1);
    char *tl = slurp(tu_path(fdir, "timeline.svg"));
    assert_int_equal(count(tl, "<polyline"), sum_acc);  /* check marks */
    assert_int_equal(count(tl, "<path d=\"M"), sum_rej); /* crosses */
    /* kept tokens past the output (a stop id or --max-new-tokens cut them):
     * proposal i of round r at start+i (i <= acc) and the bonus at
     * start+acc+1, start = verify{r}.position_ids[0]; a cut proposal is
     * dashed twice (the draft's row and the target's), a cut bonus once */
    int cut_props = 0, cut_bonus = 0;
    for (int r = 1; r <= R; r++) {
        NpyValues vp;
        snprintf(nm, sizeof nm, "verify%d.acceptance_length", r);
        load_npy(tdir, nm, &acc);
        snprintf(nm, sizeof nm, "verify%d.position_ids", r);
        load_npy(tdir, nm, &vp);
        int a = (int)acc.i[0], start = (int)vp.i[0];
        for (int i = 1; i <= a; i++) cut_props += start + i >= (int)out.n;
        cut_bonus += start + a + 1 >= (int)out.n;
        npy_values_free(&acc);
        npy_values_free(&vp);
    }
    int dashed = count(tl, "fill=\"#c7e9c0\" stroke=\"#41ab5d\" stroke-width=\"1.5\" stroke-dasharray") +
                 count(tl, "fill=\"#fdae6b\" stroke=\"#d94801\" stroke-width=\"1.5\" stroke-dasharray");
    assert_int_equal(dashed, 2 * cut_props + cut_bonus);
    if (cut_props + cut_bonus) {
        char cap[200];
        snprintf(cap, sizeof cap, "Dashed green or orange: %d kept token%s past the output's %d", cut_props + cut_bonus,
                 cut_props + cut_bonus == 1 ? "" : "s", (int)out.n);
        if (!strstr(tl, cap)) fail_msg("timeline of %s B=%d: no \"%s\"", set, B, cap);
        (*n_cut)++;
    } else {
        assert_null(strstr(tl, "Dashed green"));
    }
    char want[200];
    snprintf(want, sizeof want, "block size %d, %d round%s", B, R, R == 1 ? "" : "s");
    if (!strstr(tl, want)) fail_msg("timeline of %s B=%d: no \"%s\"", set, B, want);
    int new_tokens = (int)out.n - (int)in.n;
    snprintf(want, sizeof want, "%d new token%s, %d target forwards; tau %.2f", new_tokens,
             new_tokens == 1 ? "" : "s", R + 1, (double)(sum_acc + R) / R);
    if (!strstr(tl, want)) fail_msg("timeline of %s B=%d: no \"%s\"", set, B, want);
    snprintf(want, sizeof want, "(%d tokens)", (int)in.n);
    assert_non_null(strstr(tl, want));
    free(tl);
    npy_values_free(&in);
    npy_values_free(&out);

    /* every heatmap: one per head of every attention tensor in the trace */
    int n_checked = 0;
    for (int ph = 0; ph < 3; ph++)
        for (int r = ph == 0 ? 0 : 1; r <= (ph == 0 ? 0 : R); r++)
            for (int l = 0;; l++) {
                char tname[96], file[600];
                if (ph == 0) snprintf(tname, sizeof tname, "prefill.layers.%d.self_attn.attn_weights", l);
                else snprintf(tname, sizeof tname, "%s%d.layers.%d.self_attn.attn_weights", ph == 1 ? "draft" : "verify",
                              r, l);
                snprintf(file, sizeof file, "%s/%s.npy", tdir, tname);
                if (access(file, F_OK) != 0) break;
                NpyValues A, pos;
                load_npy(tdir, tname, &A);
                char pname[64];
                if (ph == 0) snprintf(pname, sizeof pname, "prefill.position_ids");
                else snprintf(pname, sizeof pname, "%s%d.position_ids", ph == 1 ? "draft" : "verify", r);
                load_npy(tdir, pname, &pos);
                for (int h = 0; h < (int)A.shape[0]; h++) {
                    char svg[200];
                    if (ph == 0) snprintf(svg, sizeof svg, "attn_prefill_layer%d_head%d.svg", l, h);
                    else snprintf(svg, sizeof svg, "attn_%s_round%d_layer%d_head%d.svg", ph == 1 ? "draft" : "verify", r,
                                  l, h);
                    check_heatmap(tu_path(fdir, svg), &A, h, &pos, tname);
                    /* verify: the rejected proposals (block[i], i > acc) marked
                     * by a red bar at their row and at their key column */
                    int rejected = 0;
                    if (ph == 2) {
                        snprintf(nm, sizeof nm, "verify%d.acceptance_length", r);
                        load_npy(tdir, nm, &acc);
                        rejected = B - 1 - (int)acc.i[0];
                        npy_values_free(&acc);
                    }
                    char *hs = slurp(tu_path(fdir, svg));
                    assert_int_equal(count(hs, "fill=\"#cb181d\"/>"), 2 * rejected);
                    if (rejected) {
                        char cap[100];
                        snprintf(cap, sizeof cap, "red, struck through: the %d proposal%s the target rejected", rejected,
                                 rejected == 1 ? "" : "s");
                        assert_non_null(strstr(hs, cap));
                    }
                    free(hs);
                    n_checked++;
                }
                npy_values_free(&A);
                npy_values_free(&pos);
            }
    /* and nothing else was written */
    DIR *d = opendir(fdir);
    assert_non_null(d);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) files += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(files, n_checked + 1);
    tu_rmtree(dir);
    free(dir);
    return n_checked;
}

static void test_walkthrough_set(void **state) {
    (void)state;
    int cut = 0;
    assert_true(check_run("toy_weights/walkthrough", "", 3, "toy_weights/walkthrough/vocab.txt", &cut) > 0);
    assert_true(check_run("toy_weights/walkthrough", "--prompt \"A dog\"", 6, NULL, &cut) > 0);
    /* the default run at block 4 cut at 5 new tokens (a later --max-new-tokens
     * wins): round 2 keeps "a box . <eos>" at positions 7..10, the output ends
     * at position 7 */
    assert_true(check_run("toy_weights/walkthrough", "--max-new-tokens 5", 4, "toy_weights/walkthrough/vocab.txt", &cut) > 0);
    assert_true(cut >= 2);
}

static void test_random_set(void **state) {
    (void)state;
    int cut = 0;
    assert_true(check_run("toy_weights/random", "--prompt \"A dog saw\" --ignore-eos", 3, "toy_weights/random/vocab.txt", &cut) > 0);
    assert_true(check_run("toy_weights/random", "--prompt \"A dog saw\" --ignore-eos", 6, NULL, &cut) > 0);
}

static void test_qwen3_layout_set(void **state) {
    (void)state;
    int cut = 0;
    assert_true(check_run("toy_weights/qwen3-layout", "--ids 5,6,7", 3, "toy_weights/qwen3-layout/target/tokenizer.json", &cut) > 0);
    assert_true(check_run("toy_weights/qwen3-layout", "--ids 5,6,7", 6, NULL, &cut) > 0);
}

/* bad input: exit 2, one line on stderr, nothing left behind */
static void test_refusals(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    char cmd[1200], t[400];
    snprintf(t, sizeof t, "%s/t", dir);
    snprintf(cmd, sizeof cmd, "./dflash --block-size 3 --trace %s", t);
    run_ok(cmd);
    static const char *bad[] = {"--round 9", "--round 0", "--layer 77", "--phase decode", "--head", "--phase prefill --round 1",
                                "--vocab /nonexistent/vocab.txt"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(cmd, sizeof cmd, "./dflash figures %s %s/out %s", t, dir, bad[k]);
        assert_int_equal(run_rc(cmd, dir), 2);
        char *err = slurp(tu_path(dir, "stderr"));
        if (count(err, "\n") != 1 || strncmp(err, "dflash figures: ", 16) != 0)
            fail_msg("%s: stderr is not one \"dflash figures:\" line: %s", bad[k], err);
        free(err);
        struct stat st;
        if (stat(tu_path(dir, "out"), &st) == 0) fail_msg("%s left %s/out behind", bad[k], dir);
    }
    /* the output directory may not be the trace */
    snprintf(cmd, sizeof cmd, "./dflash figures %s %s", t, t);
    assert_int_equal(run_rc(cmd, dir), 2);
    /* the walkthrough's prose generator refuses this run (block size 3) */
    snprintf(cmd, sizeof cmd, "./walkthrough/tools/mkwalk %s toy_weights/walkthrough/vocab.txt %s", t, dir);
    assert_int_equal(run_rc(cmd, dir), 2);
    char *err = slurp(tu_path(dir, "stderr"));
    assert_int_equal(count(err, "\n"), 1);
    assert_non_null(strstr(err, "not the walkthrough run"));
    assert_non_null(strstr(err, "dflash figures"));
    free(err);
    struct stat st;
    assert_true(stat(tu_path(dir, "README.md"), &st) != 0);
    /* a legal tensor of 5000 heads would be 5000 files: refused, nothing written */
    {
        char p[600];
        snprintf(p, sizeof p, "%s/draft1.layers.0.self_attn.attn_weights.npy", t);
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        static float ones[5000];
        for (int i = 0; i < 5000; i++) ones[i] = 1;
        int64_t shape[3] = {5000, 1, 1};
        assert_int_equal(npy_write(f, "<f4", 3, shape, ones, 5000), 0);
        assert_int_equal(fclose(f), 0);
        /* and the manifest says so (a header disagreeing with it is refused first) */
        char *m = slurp(tu_path(t, "trace.jsonl")), *line = strstr(m, "\"draft1.layers.0.self_attn.attn_weights\"");
        assert_non_null(line);
        char *sh = strstr(line, "\"shape\":["), *end = sh ? strchr(sh, ']') : NULL;
        assert_non_null(end);
        size_t fl = strlen(m) + 32;
        char *fixed = malloc(fl);
        assert_non_null(fixed);
        snprintf(fixed, fl, "%.*s\"shape\":[5000,1,1%s", (int)(sh - m), m, end);
        tu_write_text(tu_path(t, "trace.jsonl"), fixed);
        free(fixed);
        free(m);
        snprintf(cmd, sizeof cmd, "./dflash figures %s %s/out --phase draft --round 1 --layer 0", t, dir);
        assert_int_equal(run_rc(cmd, dir), 2);
        char *e = slurp(tu_path(dir, "stderr"));
        assert_non_null(strstr(e, "5000 heads"));
        free(e);
        struct stat st0;
        assert_true(stat(tu_path(dir, "out"), &st0) != 0);
    }
    tu_rmtree(dir);
    free(dir);
}

/* the number of entries of dir (none starts with '.'), -1 when it is missing */
static int n_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* refused with exit 2 and one "dflash figures: OUT_DIR: " line naming why */
static void refused(const char *cmd, const char *dir, const char *why) {
    assert_int_equal(run_rc(cmd, dir), 2);
    char *err = slurp(tu_path(dir, "stderr"));
    if (count(err, "\n") != 1 || strncmp(err, "dflash figures: OUT_DIR: ", 25) != 0 || !strstr(err, why))
        fail_msg("%s: stderr is not one \"dflash figures: OUT_DIR: ...%s...\" line: %s", cmd, why, err);
    free(err);
}

/* OUT_DIR may not be the trace directory (by any name: a trailing "/." or a
 * symbolic link to it), nor inside it; and no figure already in OUT_DIR
 * may be a link to an input: before the check, a timeline.svg that was a
 * symbolic link to trace.jsonl was followed and the trace's manifest
 * replaced by SVG (exit 0), and figures were written into TRACE_DIR/sub.
 * Each refusal leaves the trace byte for byte as it was and writes nothing. */
static void test_output_not_an_input(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    char cmd[1600], t[400], o[400], tl[400], p[600];
    snprintf(t, sizeof t, "%s/t", dir);
    snprintf(o, sizeof o, "%s/o", dir);
    snprintf(tl, sizeof tl, "%s/tl", dir);
    snprintf(cmd, sizeof cmd, "./dflash --block-size 3 --max-new-tokens 4 --trace %s --trace-filter '*_ids' "
             "--trace-filter '*.sampled' --trace-filter '*.acceptance_length'", t);
    run_ok(cmd);
    int n_trace = n_files(t);
    assert_true(n_trace > 3);
    char *manifest = slurp(tu_path(t, "trace.jsonl")), *vocab = slurp("toy_weights/walkthrough/vocab.txt");
    if (symlink("t", tl) != 0) fail_msg("symlink: %s", strerror(errno));
    /* OUT_DIR: the trace, by three names, and a directory inside it */
    static const char *as_trace[] = {"t", "t/.", "t/", "tl", "t/sub", "tl/sub"};
    for (size_t k = 0; k < sizeof as_trace / sizeof as_trace[0]; k++) {
        snprintf(cmd, sizeof cmd, "./dflash figures %s %s/%s", t, dir, as_trace[k]);
        refused(cmd, dir, "is the input directory");
        assert_int_equal(n_files(t), n_trace);
    }
    /* a figure's name in OUT_DIR that is a link to an input */
    assert_int_equal(mkdir(o, 0755), 0);
    snprintf(p, sizeof p, "%s/timeline.svg", o);
    if (symlink("../t/trace.jsonl", p) != 0) fail_msg("symlink: %s", strerror(errno));
    snprintf(cmd, sizeof cmd, "./dflash figures %s %s", t, o);
    refused(cmd, dir, "trace.jsonl; refusing to write over it");
    unlink(p);
    snprintf(p, sizeof p, "%s/attn_prefill_layer0_head0.svg", o);  /* a hard link to the vocabulary */
    char vpath[600];
    snprintf(vpath, sizeof vpath, "%s/vocab.txt", dir);
    FILE *f = fopen(vpath, "wb");
    assert_non_null(f);
    fputs(vocab, f);
    assert_int_equal(fclose(f), 0);
    if (link(vpath, p) != 0) fail_msg("link: %s", strerror(errno));
    snprintf(cmd, sizeof cmd, "./dflash figures %s %s --vocab %s", t, o, vpath);
    refused(cmd, dir, "vocab.txt; refusing to write over it");
    assert_int_equal(n_files(o), 1);
    unlink(p);
    /* the trace and the vocabulary are as they were */
    char *after = slurp(tu_path(t, "trace.jsonl")), *v_after = slurp(vpath);
    assert_string_equal(after, manifest);
    assert_string_equal(v_after, vocab);
    assert_int_equal(n_files(t), n_trace);
    /* and an OUT_DIR beside the trace holding the vocabulary is fine */
    snprintf(cmd, sizeof cmd, "./dflash figures %s %s --vocab %s", t, dir, vpath);
    assert_int_equal(run_rc(cmd, dir), 0);
    struct stat st;
    assert_int_equal(stat(tu_path(dir, "timeline.svg"), &st), 0);
    free(after);
    free(v_after);
    free(manifest);
    free(vocab);
    tu_rmtree(dir);
    free(dir);
}

/* The walkthrough run's text trace on stdout: the attention tables name
 * their tokens (the prompt "The cat sat" at 0..2, the draft's block
 * "on <mask> <mask> <mask>" at 3..6 in round 1, and in round 2's
 * verification the tokens kept so far: "in" at 6), and nothing of the run's
 * own output is mixed in: that is on stderr. */
static void test_trace_text_words_and_stdout_alone(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "./dflash --trace-text - --trace-filter '*.attn_weights'");
    assert_int_equal(run_rc(cmd, dir), 0);
    char *out = slurp(tu_path(dir, "stdout")), *err = slurp(tu_path(dir, "stderr"));
    assert_null(strstr(out, "new tokens:"));
    assert_null(strstr(out, "The cat sat on the mat in a box."));
    assert_non_null(strstr(err, "new tokens: 8, target forward passes: 3, tokens per round (tau): 3.50"));
    assert_non_null(strstr(err, "The cat sat on the mat in a box."));
    const char *d1 = strstr(out, "draft1.layers.0.self_attn.attn_weights"), *v2 = strstr(out, "verify2.layers.0.self_attn.attn_weights");
    assert_non_null(d1);
    assert_non_null(v2);
    static const char *draft_labels[] = {"k@0 The", "k@1 cat", "k@2 sat", "k@3 on", "k@4 <mask>", "k@6 <mask>", "q@3 on",
                                         "q@5 <mask>"};
    for (size_t k = 0; k < sizeof draft_labels / sizeof draft_labels[0]; k++) {
        const char *hit = strstr(d1, draft_labels[k]);
        if (!hit || (v2 > d1 && hit > v2)) fail_msg("draft1's attention table has no label \"%s\"", draft_labels[k]);
    }
    static const char *verify_labels[] = {"k@3 on", "k@4 the", "k@5 mat", "k@6 in", "k@9 .", "q@6 in", "q@9 ."};
    for (size_t k = 0; k < sizeof verify_labels / sizeof verify_labels[0]; k++)
        if (!strstr(v2, verify_labels[k])) fail_msg("verify2's attention table has no label \"%s\"", verify_labels[k]);
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
}

/* issue 34 item 12: NaN and infinite attention weights are drawn as marked
 * cells (never a colour of the white-to-blue scale, where NaN came out
 * white like 0) and counted in the caption; a header whose shape is not
 * the manifest's is refused (formats/manifest.c's check, shared with diff,
 * explore and replay). */
static void test_nonfinite_weights_and_a_bad_header(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    char cmd[1200], t[400], p[600];
    snprintf(t, sizeof t, "%s/t", dir);
    snprintf(cmd, sizeof cmd, "./dflash --block-size 3 --trace %s", t);
    run_ok(cmd);
    snprintf(p, sizeof p, "%s/draft1.layers.0.self_attn.attn_weights.npy", t);
    NpyValues w;
    if (npy_read_values(p, &w) != 0) fail_msg("%s: %s", p, dflash_errmsg);
    assert_int_equal(w.ndim, 3);
    float *v = malloc(w.n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < w.n; i++) v[i] = (float)w.f[i];
    v[0] = NAN;                        /* head 0: two NaN and one inf */
    v[1] = NAN;
    v[(size_t)w.shape[2]] = INFINITY;
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(npy_write(f, "<f4", 3, w.shape, v, w.n), 0);
    assert_int_equal(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "./dflash figures %s %s/out --phase draft --round 1 --layer 0", t, dir);
    assert_int_equal(run_rc(cmd, dir), 0);
    char *said = slurp(tu_path(dir, "stderr"));   /* said on the terminal too, for head 0 only */
    assert_non_null(strstr(said, "out/attn_draft_round1_layer0_head0.svg: 3 attention weights are not finite"));
    assert_int_equal(count(said, "not finite"), 1);
    free(said);
    char *svg = slurp(tu_path(dir, "out/attn_draft_round1_layer0_head0.svg"));
    assert_int_equal(count(svg, "<title>NaN</title>"), 2);
    assert_int_equal(count(svg, "<title>inf</title>"), 1);
    assert_non_null(strstr(svg, "not finite: 2 NaN and 1 infinite weights"));
    free(svg);
    svg = slurp(tu_path(dir, "out/attn_draft_round1_layer0_head1.svg"));   /* head 1 is finite */
    assert_null(strstr(svg, "not finite"));
    free(svg);
    /* the same values under another shape than the manifest's */
    int64_t other[3] = {w.shape[0], w.shape[2], w.shape[1]};
    f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(npy_write(f, "<f4", 3, other, v, w.n), 0);
    assert_int_equal(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "./dflash figures %s %s/out2 --phase draft --round 1 --layer 0", t, dir);
    assert_int_equal(run_rc(cmd, dir), 2);
    char *err = slurp(tu_path(dir, "stderr"));
    assert_non_null(strstr(err, "the manifest says dtype|shape"));
    free(err);
    free(v);
    npy_values_free(&w);
    tu_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walkthrough_set),
        cmocka_unit_test(test_random_set),
        cmocka_unit_test(test_qwen3_layout_set),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_output_not_an_input),
        cmocka_unit_test(test_trace_text_words_and_stdout_alone),
        cmocka_unit_test(test_nonfinite_weights_and_a_bad_header),
    };
    return cmocka_run_group_tests_name("figures: every stated number and caption checked against the trace", tests,
                                       NULL, NULL);
}
