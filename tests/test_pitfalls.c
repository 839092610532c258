/* tests/test_pitfalls.c - `dflash diff` points at the planted porting mistake.
 *
 * For every pitfall of ./dflash-pitfall (dflash.h, DFLASH_PITFALLS_LIST) the
 * port's trace is diffed against the correct one (./dflash --trace): diff
 * must exit 1 and name, as its first
 * departure, the tensor where the mistake enters. That expected name is
 * derived here from the algorithm and the data-flow order of the trace,
 * not read from diff's output:
 *   - a mistake inside a layer enters at the first traced tensor that the
 *     wrong line computes (layer 0 of the first forward that runs that line:
 *     the target's in the prefill, the draft's in round 1);
 *   - a mistake in what is carried from one round to the next (a cache
 *     crop, the context rows, the positions) enters at the first tensor of
 *     the next round that reads it; for the target cache that is the round
 *     after the first round whose acceptance length is below B-1 (the crop
 *     removes B-1-acc rows, none when the whole block is accepted), read
 *     from the correct run's trace;
 *   - L, H, Hkv and target_layer_ids come from the weight set's config.json.
 * The random set is used: it has Hkv = 4 < H = 8 (the GQA mistake needs
 * that) and layer norms that are not 1 (on the walkthrough set input_layernorm
 * is exactly 1 in layer 0, so normalising the context rows twice changes
 * nothing there).
 * The port's traces are made in this process (this file is compiled with
 * DFLASH_PITFALLS, like ./dflash-pitfall, and the weights are loaded once:
 * 19 program runs would cost 19 loads); one is also made by the program,
 * `./dflash-pitfall --pitfall gqa-tile --trace`, and must be byte-identical.
 * Also: ./dflash refuses --pitfall; a truncated port trace fails (strict);
 * a clean port (the double build) passes, its margins shown by --verbose. */
#define DFLASH_PITFALLS   /* the PITFALL() branches of dflash.c, as in ./dflash-pitfall */
#include "../dflash.c"
#include "../load.c"
#include "../trace.h"
#include "testutil.h"

#include <sys/wait.h>

#define assert_not_contains(hay, needle)                                                 \
    do {                                                                                 \
        const char *h_ = (hay), *n_ = (needle);                                          \
        if (h_ && strstr(h_, n_)) fail_msg("did not expect \"%s\" in:\n%s", n_, h_);     \
    } while (0)

#define RAND "toy_weights/random"
/* the run: 0 new tokens is the prefill alone, 1 adds round 1, 2 reach round 2 */
#define RUN_ARGS(n) "--weights " RAND " --prompt \"A dog saw\" --max-new-tokens " #n " --ignore-eos"

static char *g_dir;           /* the suite's scratch directory */
static Config g_target, g_draft;
static Model g_tm, g_dm;      /* the random set, loaded once */
static int g_prompt[8], g_n_prompt;

/* g_dir/leaf (tu_path's ring of 8 buffers: copy what must live longer) */
static const char *dir_path(const char *leaf) { return tu_path(g_dir, leaf); }

/* Run a shell command with stdout to `out` (when given); its exit status. */
static int run(const char *cmd, const char *out) {
    char full[4000];
    snprintf(full, sizeof full, "%s > %s 2>&1", cmd, out ? out : "/dev/null");
    int rc = system(full);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

static void load_config(Config *c, const char *path, int draft) {
    size_t len = 0;
    char *text = tu_read(path, &len);
    assert_non_null(text);
    if (config_parse(c, path, text, len, draft) != 0) fail_msg("%s: %s", path, dflash_errmsg);
    free(text);
}

/* The acceptance length of round r in a trace (its .npy: int64 scalar,
 * the last 8 bytes of the file). */
static int acceptance(const char *trace, int r) {
    char leaf[64];
    snprintf(leaf, sizeof leaf, "verify%d.acceptance_length.npy", r);
    size_t len;
    unsigned char *b = (unsigned char *)tu_read(tu_path(trace, leaf), &len);
    if (!b) return -1;
    int64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (int64_t)b[len - 8 + i] << (8 * i);
    free(b);
    return (int)v;
}

/* "first departure: NAME: ..." -> NAME (static buffer; "" when absent) */
static const char *first_departure(const char *out) {
    static char name[256];
    name[0] = 0;
    const char *p = strstr(out, "first departure: ");
    if (!p) return name;
    p += strlen("first departure: ");
    size_t n = 0;
    while (p[n] && p[n] != '\n' && !(p[n] == ':' && p[n + 1] == ' ') && n + 1 < sizeof name) n++;
    memcpy(name, p, n);
    name[n] = 0;
    return name;
}

static int setup(void **state) {
    (void)state;
    g_dir = tu_tmpdir();
    if (!g_dir) return -1;
    load_config(&g_target, RAND "/target/config.json", 0);
    load_config(&g_draft, RAND "/draft/config.json", 1);
    Vocab v;
    if (vocab_load(&v, RAND "/vocab.txt") != 0 || tokenize(&v, "A dog saw", g_prompt, 8, &g_n_prompt) != 0) return -1;
    vocab_free(&v);
    if (model_load(&g_tm, RAND "/target", 0) != 0 || model_load(&g_dm, RAND "/draft", 1) != 0) return -1;
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "./dflash " RUN_ARGS(0) " --trace %s", dir_path("ref0"));
    if (run(cmd, NULL) != 0) return -1;
    snprintf(cmd, sizeof cmd, "./dflash " RUN_ARGS(1) " --trace %s", dir_path("ref1"));
    if (run(cmd, NULL) != 0) return -1;
    snprintf(cmd, sizeof cmd, "./dflash " RUN_ARGS(2) " --trace %s", dir_path("ref"));
    if (run(cmd, NULL) != 0) return -1;
    snprintf(cmd, sizeof cmd, "./dflash " RUN_ARGS(1) " --temperature 5 --trace %s", dir_path("ref_t5"));
    return run(cmd, NULL);
}

static int teardown(void **state) {
    (void)state;
    model_free(&g_tm);
    model_free(&g_dm);
    tu_rmtree(g_dir);
    free(g_dir);
    return 0;
}

/* The run of RUN_ARGS (at `temperature`) with pitfall p, traced into dir:
 * what ./dflash-pitfall --pitfall NAME RUN_ARGS --trace dir does. */
static void traced_run(Pitfall p, int max_new_tokens, double temperature, const char *dir) {
    GenParams gp = {0};
    gp.max_new_tokens = max_new_tokens;
    gp.block_size = g_draft.block_size;
    gp.temperature = temperature;
    Tracer *t = trace_open(dir, NULL, NULL, 0);
    assert_non_null(t);
    gp.trace = trace_hook(t);
    GenResult res;
    dflash_pitfall = p;
    int rc = dflash_generate(&g_dm, &g_tm, g_prompt, g_n_prompt, &gp, &res);
    dflash_pitfall = PITFALL_NONE;
    if (rc != 0) fail_msg("pitfall %s: %s", dflash_pitfall_names[p], dflash_errmsg);
    assert_int_equal(trace_close(t), 0);
    gen_result_free(&res);
}

/* Plant pitfall p, diff against the correct trace; the diff's output. */
static char *plant_and_diff(Pitfall p, int max_new_tokens, double temperature, const char *ref_leaf, int *rc) {
    char cmd[2000], port[64], ref[512];
    const char *name = dflash_pitfall_names[p];
    snprintf(ref, sizeof ref, "%s", dir_path(ref_leaf));
    snprintf(port, sizeof port, "port-%s", name);
    traced_run(p, max_new_tokens, temperature, dir_path(port));
    snprintf(cmd, sizeof cmd, "./dflash diff %s %s", ref, dir_path(port));
    *rc = run(cmd, dir_path("diff.txt"));
    char *out = tu_read(dir_path("diff.txt"), NULL);
    assert_non_null(out);
    tu_rmtree(dir_path(port));
    return out;
}

static void test_each_pitfall_departs_where_it_enters(void **state) {
    (void)state;
    char ref[512];
    snprintf(ref, sizeof ref, "%s", dir_path("ref"));
    int L = g_target.num_hidden_layers, B = g_draft.block_size;
    assert_true(g_target.num_key_value_heads < g_target.num_attention_heads);  /* GQA is exercised */
    /* the first round whose acceptance is below B-1: its crop removes rows
     * (the runs below reach round 2: r_crop must be 1) */
    int r_crop = 1;
    while (acceptance(ref, r_crop) == B - 1) r_crop++;
    assert_int_equal(r_crop, 1);
    assert_true(acceptance(ref, r_crop + 1) >= 0);      /* and a round after it */
    char last_hidden[64], verify_next[64];
    snprintf(last_hidden, sizeof last_hidden, "prefill.hidden_states.%d", L);
    snprintf(verify_next, sizeof verify_next, "verify%d.position_ids", r_crop + 1);

    static const struct { Pitfall p; const char *where; } WHERE[] = {
        /* target layer internals: layer 0 of the prefill */
        {PITFALL_GQA_TILE, "prefill.layers.0.self_attn.attn_scores"},        /* q . k of the wrong KV head */
        {PITFALL_ROPE_INTERLEAVED, "prefill.layers.0.self_attn.q_rope"},     /* q rotated first */
        {PITFALL_QK_NORM_AFTER_ROPE, "prefill.layers.0.self_attn.q"},        /* q is traced after q_norm */
        {PITFALL_CAUSAL_OFF_BY_ONE, "prefill.layers.0.self_attn.attn_weights"},  /* scores are pre-mask */
        {PITFALL_GELU_MLP, "prefill.layers.0.mlp.act"},
        /* target outputs */
        {PITFALL_LAST_HIDDEN_PRENORM, NULL /* last_hidden */},
        {PITFALL_HIDDEN_OFF_BY_ONE, "prefill.target_hidden"},
        /* the draft forward, round 1 */
        {PITFALL_MASK_IS_EOS, "draft1.block_output_ids"},                    /* the block holds the mask ids */
        {PITFALL_CONTEXT_INPUT_LAYERNORM, "draft1.layers.0.self_attn.k"},    /* k = k_norm(k_proj([C; X])) */
        {PITFALL_KV_FROM_RESIDUAL, "draft1.layers.0.self_attn.k"},
        {PITFALL_QUERY_ROPE_AT_START, "draft1.layers.0.self_attn.q_rope"},
        {PITFALL_DRAFT_CAUSAL, "draft1.layers.0.self_attn.attn_weights"},
        {PITFALL_DRAFT_LOGITS_ROWS, "draft1.logits"},
        /* carried into round 2 */
        {PITFALL_DRAFT_POSITIONS_FROM_0, "draft2.position_ids"},             /* round 1 starts at 0 anyway */
        {PITFALL_DRAFT_CACHE_NOT_CROPPED, "draft2.position_ids"},            /* positions follow the cache */
        {PITFALL_TARGET_HIDDEN_SHORT, "draft2.target_hidden_raw"},
        {PITFALL_TARGET_CACHE_NOT_CROPPED, NULL /* verify_next */},
        {PITFALL_TARGET_CACHE_KEEPS_BONUS, NULL /* verify_next */},
    };
    int n = (int)(sizeof WHERE / sizeof WHERE[0]);
    for (int k = 0; k < n; k++) {
        if (tu_quick() && k % 3 != 0) continue;   /* sanitizer builds: every third */
        /* the shortest run that reaches the round where the mistake enters:
         * the prefill alone, round 1, or round r_crop + 1 (= 2 here) */
        const char *w = WHERE[k].where ? WHERE[k].where : "";
        int tokens = !strncmp(w, "prefill.", 8) || WHERE[k].p == PITFALL_LAST_HIDDEN_PRENORM ? 0
                   : !strncmp(w, "draft1.", 7) ? 1 : 2;
        const char *ref_leaf = tokens == 0 ? "ref0" : tokens == 1 ? "ref1" : "ref";
        const char *name = dflash_pitfall_names[WHERE[k].p];
        const char *want = WHERE[k].where ? WHERE[k].where
                         : WHERE[k].p == PITFALL_LAST_HIDDEN_PRENORM ? last_hidden : verify_next;
        int rc;
        char *out = plant_and_diff(WHERE[k].p, tokens, 0, ref_leaf, &rc);
        if (rc != 1 || strcmp(first_departure(out), want) != 0)
            fail_msg("pitfall %s: diff exit %d, first departure \"%s\", expected exit 1 and \"%s\"; output:\n%.3000s",
                     name, rc, first_departure(out), want, out);
        /* the hints that are certain */
        if (WHERE[k].p == PITFALL_GQA_TILE) {
            /* query head h reads KV head h / (H/Hkv); tiled, h % Hkv: the heads where they differ */
            int H = g_target.num_attention_heads, Hkv = g_target.num_key_value_heads, dep = 0;
            char heads[256] = "heads departing:";
            for (int h = 0; h < H; h++)
                if (h / (H / Hkv) != h % Hkv) {
                    snprintf(heads + strlen(heads), sizeof heads - strlen(heads), " %d", h);
                    dep++;
                }
            snprintf(heads + strlen(heads), sizeof heads - strlen(heads), " (%d of %d)", dep, H);
            assert_contains(out, heads);
        }
        if (WHERE[k].p == PITFALL_HIDDEN_OFF_BY_ONE)
            for (int j = 0; j < g_draft.n_target_layer_ids; j++) {
                char hint[160];
                int D = g_target.hidden_size;
                snprintf(hint, sizeof hint, "B's block %d (columns %d..%d) equals A's prefill.hidden_states.%d", j,
                         j * D, (j + 1) * D - 1, g_draft.target_layer_ids[j]);
                assert_contains(out, hint);
            }
        if (WHERE[k].p == PITFALL_LAST_HIDDEN_PRENORM) assert_contains(out, "BEFORE a final RMSNorm");
        free(out);
    }
    /* every pitfall of the list is covered above or below (draft-at-temperature) */
    assert_int_equal(n + 2, PITFALL_COUNT);
}

/* The draft sampled at temperature: greedy is the rule whatever the
 * target's temperature. Needs a run at T > 0; the first tensor the sampling
 * writes is draft1.sampled (T = 5 on a 36-word vocabulary: the draws leave
 * the argmax; were all of them to land on it, verify1.sampled would be
 * next, since the draws use the shared generator). */
static void test_draft_at_temperature(void **state) {
    (void)state;
    int rc;
    char *out = plant_and_diff(PITFALL_DRAFT_AT_TEMPERATURE, 1, 5, "ref_t5", &rc);
    assert_int_equal(rc, 1);
    assert_string_equal(first_departure(out), "draft1.sampled");
    free(out);
}

/* The program with a pitfall writes the same trace as this process does. */
static void test_program_plants_the_same(void **state) {
    (void)state;
    char cmd[2000], a[512];
    snprintf(a, sizeof a, "%s", dir_path("gqa-prog"));
    snprintf(cmd, sizeof cmd, "./dflash-pitfall " RUN_ARGS(0) " --pitfall gqa-tile --trace %s", a);
    assert_int_equal(run(cmd, NULL), 0);
    traced_run(PITFALL_GQA_TILE, 0, 0, dir_path("gqa-here"));
    snprintf(cmd, sizeof cmd, "cmp -s %s/prefill.layers.0.self_attn.attn_scores.npy %s/prefill.layers.0.self_attn.attn_scores.npy"
             " && diff -r %s %s", a, dir_path("gqa-here"), a, dir_path("gqa-here"));
    assert_int_equal(run(cmd, NULL), 0);
}

static void test_default_binary_refuses_pitfall(void **state) {
    (void)state;
    assert_int_equal(run("./dflash --pitfall gelu-mlp", dir_path("refuse.txt")), 2);
    char *err = tu_read(dir_path("refuse.txt"), NULL);
    assert_contains(err, "--pitfall");
    assert_contains(err, "./dflash-pitfall");
    free(err);
    assert_int_equal(run("./dflash-pitfall --pitfall no-such-thing", dir_path("refuse.txt")), 2);
    err = tu_read(dir_path("refuse.txt"), NULL);
    assert_contains(err, "expected one of gqa-tile, ");
    free(err);
}

/* A port that stopped early: B's manifest cut after line `keep`. Strict:
 * exit 1, naming the last name B has and the first it lacks. */
static void test_truncated_port_fails(void **state) {
    (void)state;
    char ref[512], cut[512], cmd[3000];
    snprintf(ref, sizeof ref, "%s", dir_path("ref"));
    snprintf(cut, sizeof cut, "%s", dir_path("cut"));
    snprintf(cmd, sizeof cmd, "cp -r -l %s %s", ref, cut);
    assert_int_equal(run(cmd, NULL), 0);
    char *m = tu_read(tu_path(ref, "trace.jsonl"), NULL);
    assert_non_null(m);
    int lines = 0, keep = 0;
    for (char *c = m; *c; c++) lines += *c == '\n';
    keep = lines / 2;
    char *p = m;
    for (int i = 0; i < keep; i++) p = strchr(p, '\n') + 1;
    unlink(tu_path(cut, "trace.jsonl"));   /* a hard link to ref's: replace, never truncate */
    assert_int_equal(tu_write(tu_path(cut, "trace.jsonl"), m, (size_t)(p - m)), 0);
    /* the names at lines keep and keep+1 (1-based): "name":"..." */
    char last[200], next[200];
    const char *q = p - 2;
    while (q > m && q[-1] != '\n') q--;
    assert_int_equal(sscanf(q, "{\"name\":\"%199[^\"]", last), 1);
    assert_int_equal(sscanf(p, "{\"name\":\"%199[^\"]", next), 1);
    free(m);

    snprintf(cmd, sizeof cmd, "./dflash diff %s %s", ref, cut);
    assert_int_equal(run(cmd, dir_path("cut.txt")), 1);
    char *out = tu_read(dir_path("cut.txt"), NULL), want[600];
    snprintf(want, sizeof want, "B has nothing after %s: %d tensors missing, first %s", last, lines - keep, next);
    assert_contains(out, want);
    assert_not_contains(out, "first departure");
    free(out);
    /* --only over what B has passes: the whole prefill lies before the cut
     * (its names come first in data-flow order) */
    assert_true(strncmp(next, "prefill.", 8) != 0);
    snprintf(cmd, sizeof cmd, "./dflash diff --only 'prefill.*' %s %s", ref, cut);
    assert_int_equal(run(cmd, NULL), 0);
}

/* A clean port: the other precision's build, a different computation of the
 * same algorithm. It passes, and --verbose shows one line per tensor with
 * its margin (some not exact: float and double differ). */
#ifdef DFLASH_DOUBLE   /* make REAL=double: ./dflash is double, the other build float */
#define OTHER_PRECISION "./dflash-float"
#else
#define OTHER_PRECISION "./dflash-double"
#endif
static void test_clean_port_passes_with_margins(void **state) {
    (void)state;
    char cmd[3000], ref[512];
    snprintf(ref, sizeof ref, "%s", dir_path("ref1"));
    snprintf(cmd, sizeof cmd, OTHER_PRECISION " " RUN_ARGS(1) " --trace %s", dir_path("dbl"));
    assert_int_equal(run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "./dflash diff --verbose --rtol=1e-4 %s %s", ref, dir_path("dbl"));
    assert_int_equal(run(cmd, dir_path("v.txt")), 0);
    char *out = tu_read(dir_path("v.txt"), NULL), *m = tu_read(tu_path(ref, "trace.jsonl"), NULL);
    int lines = 0, ok = 0, margins = 0;
    for (char *c = m; *c; c++) lines += *c == '\n';
    for (char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "ok   ", 5) == 0) ok++;
        if (strncmp(l, "ok   ", 5) == 0 && strstr(l, "worst rel err") && !strstr(l, "NMSE exact") &&
            strstr(l, " dB"))
            margins++;
    }
    assert_int_equal(ok, lines);   /* one "ok" line per tensor of A */
    assert_true(margins > 0);
    assert_not_contains(out, "DEP ");
    free(out);
    free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_binary_refuses_pitfall),
        cmocka_unit_test(test_program_plants_the_same),
        cmocka_unit_test(test_each_pitfall_departs_where_it_enters),
        cmocka_unit_test(test_draft_at_temperature),
        cmocka_unit_test(test_truncated_port_fails),
        cmocka_unit_test(test_clean_port_passes_with_margins),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
