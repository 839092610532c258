/* tests/test_pitfalls.c - `dflash diff` points at the porting mistake.
 *
 * Every pitfall is a patch of the clean dflash.c (walkthrough/pitfalls/
 * NAME.diff, listed in walkthrough/pitfalls/series) and its program,
 * build/pitfalls/dflash-NAME (make pitfall-programs), is ./dflash with that
 * one mistake. For each, the port's trace is diffed against the correct one
 * (./dflash --trace): diff must exit 1 and name, as its first departure,
 * the tensor where the mistake enters. That expected name is derived here
 * from the algorithm and the data-flow order of the trace, not read from
 * diff's output:
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
 * Also: the mechanism (each program's source is dflash.c with exactly its
 * patch; a patch that no longer applies fails the build and leaves no
 * program; dflash.c has no trace of any pitfall, and --pitfall is gone); a
 * truncated port trace fails (strict); a clean port (the double build)
 * passes, its margins shown by --verbose. */
#include "dflash.c"
#include "formats/load.c"
#include "trace.h"
#include "tests/testutil.h"
#include "tests/patchutil.h"

#include <sys/wait.h>
#include <unistd.h>

#define assert_not_contains(hay, needle)                                                 \
    do {                                                                                 \
        const char *h_ = (hay), *n_ = (needle);                                          \
        if (h_ && strstr(h_, n_)) fail_msg("did not expect \"%s\" in:\n%s", n_, h_);     \
    } while (0)

#define RAND "toy_weights/random"
/* the run: 0 new tokens is the prefill alone, 1 adds round 1, 2 reach round 2 */
#define RUN_ARGS(n) "--weights " RAND " --prompt \"A dog saw\" --max-new-tokens " #n " --ignore-eos"

#define SERIES "walkthrough/pitfalls/series"

/* The other precision's build: a clean port (test_clean_port_passes_with_margins),
 * and the run diff judges rounding by. diff would run it on A's flags for each
 * pitfall (~2 s a diff, most of it loading the weights as doubles); setup runs
 * it once for each reference run, unfiltered, and hands its trace over with
 * --double (--float), which diff reads instead (test_diff_hints checks that
 * diff runs it itself). The test loses no power: a tensor judged rounding is
 * no departure, so were the judgement to hide the mistake's tensor, the first
 * departure would move and the test fail. The prefill-only run (ref0) has
 * no other-precision run of its own: the 2-token run's (ref-other) holds
 * every tensor of it under the same names, the same bytes (the prefill
 * does not depend on --max-new-tokens; checked when this was written), but
 * output_ids, an id tensor, which diff does not judge by it. The 1-token
 * run (ref1) and its other-precision trace are tools/test-fixtures.sh's
 * random1-float and random1-double (the same command; test_diff_hints reads
 * them too). */
#ifdef DFLASH_DOUBLE   /* make REAL=double: ./dflash is double, the other build float */
#define OTHER_PRECISION "./dflash-float"
#define OTHER_FLAG "--float"
#else
#define OTHER_PRECISION "./dflash-double"
#define OTHER_FLAG "--double"
#endif

static char *g_dir;           /* the suite's scratch directory */
static Config g_target, g_draft;
static char g_names[64][64];  /* the pitfalls of SERIES, in order */
static int g_n_names;

/* g_dir/leaf (tu_path's ring of 8 buffers: copy what must live longer) */
static const char *dir_path(const char *leaf) { return tu_path(g_dir, leaf); }

/* A reference run's trace by ./dflash, and the other precision's of it:
 * ref1's are the fixtures (RUN_ARGS(1)), ref0's other is ref's (above) */
static const char *ref_dir(const char *leaf) {
    return strcmp(leaf, "ref1") ? dir_path(leaf) : tu_fixture("random1-" TU_SELF);
}
static const char *other_dir(const char *leaf) {
    if (!strcmp(leaf, "ref1")) return tu_fixture("random1-" TU_OTHER);
    char l[64];
    snprintf(l, sizeof l, "%s-other", strcmp(leaf, "ref0") ? leaf : "ref");
    return dir_path(l);
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

static int setup(void **state) {
    (void)state;
    g_dir = tu_tmpdir();
    if (!g_dir) return -1;
    patch_load_config(&g_target, RAND "/target/config.json", 0);
    patch_load_config(&g_draft, RAND "/draft/config.json", 1);
    g_n_names = patch_series(SERIES, g_names, 64);
    if (g_n_names < 0) return -1;
    /* each reference run, by ./dflash (LEAF) and by the other precision (LEAF-other) */
    static const struct { const char *leaf, *args; } REFS[] = {
        {"ref0", RUN_ARGS(0)}, {"ref", RUN_ARGS(2)}, {"ref_t5", RUN_ARGS(1) " --temperature 5"},
    };   /* and ref1, RUN_ARGS(1): the fixtures (ref_dir) */
    for (size_t i = 0; i < sizeof REFS / sizeof REFS[0]; i++) {
        char cmd[2000];
        snprintf(cmd, sizeof cmd, "./dflash %s --trace %s", REFS[i].args, dir_path(REFS[i].leaf));
        if (strcmp(REFS[i].leaf, "ref0"))   /* ref0: ref-other (above) */
            snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " && " OTHER_PRECISION " %s --trace %s-other",
                     REFS[i].args, dir_path(REFS[i].leaf));
        if (tu_run(cmd, NULL) != 0) return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    return 0;
}

/* The run of RUN_ARGS (at `temperature`) of pitfall NAME's program, traced
 * into dir. */
static void traced_run(const char *name, int max_new_tokens, double temperature, const char *dir) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "./build/pitfalls/dflash-%s --weights " RAND " --prompt \"A dog saw\" --max-new-tokens %d"
             " --ignore-eos --temperature %g --trace %s", name, max_new_tokens, temperature, dir);
    if (tu_run(cmd, NULL) != 0) fail_msg("pitfall %s: `%s` failed (make pitfall-programs?)", name, cmd);
}

/* Run pitfall NAME's program, diff against the correct trace; the diff's output. */
static char *plant_and_diff(const char *name, int max_new_tokens, double temperature, const char *ref_leaf, int *rc) {
    char cmd[2000], port[128], ref[512];
    snprintf(ref, sizeof ref, "%s", ref_dir(ref_leaf));
    snprintf(port, sizeof port, "port-%s", name);
    traced_run(name, max_new_tokens, temperature, dir_path(port));
    snprintf(cmd, sizeof cmd, "./dflash diff %s %s " OTHER_FLAG " %s", ref, dir_path(port), other_dir(ref_leaf));
    *rc = tu_run(cmd, dir_path("diff.txt"));
    char *out = tu_read(dir_path("diff.txt"), NULL);
    assert_non_null(out);
    tu_rmtree(dir_path(port));
    return out;
}

/* the words of the hybrid hints: none of them may appear for a dense pitfall */
static const char *const HYBRID_HINTS[] = {
    "rolled back", "bfloat16", "restarted from a zero state", "zero-centred norm", "B's heads are other heads",
    "RoPE tables span the whole head", "replayed from A's state AFTER",
};

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

    static const struct { const char *p; const char *where; } WHERE[] = {
        /* target layer internals: layer 0 of the prefill */
        {"gqa-tile", "prefill.layers.0.self_attn.attn_scores"},        /* q . k of the wrong KV head */
        {"rope-interleaved", "prefill.layers.0.self_attn.q_rope"},     /* q rotated first */
        {"qk-norm-after-rope", "prefill.layers.0.self_attn.q"},        /* q is traced after q_norm */
        {"causal-off-by-one", "prefill.layers.0.self_attn.attn_weights"},  /* scores are pre-mask */
        {"gelu-mlp", "prefill.layers.0.mlp.act"},
        /* target outputs */
        {"last-hidden-prenorm", NULL /* last_hidden */},
        {"hidden-off-by-one", "prefill.target_hidden"},
        /* the draft forward, round 1 */
        {"mask-is-eos", "draft1.block_output_ids"},                    /* the block holds the mask ids */
        {"context-input-layernorm", "draft1.layers.0.self_attn.k"},    /* k = k_norm(k_proj([C; X])) */
        {"kv-from-residual", "draft1.layers.0.self_attn.k"},
        {"query-rope-at-start", "draft1.layers.0.self_attn.q_rope"},
        {"draft-causal", "draft1.layers.0.self_attn.attn_weights"},
        {"draft-logits-rows", "draft1.logits"},
        /* carried into round 2 */
        {"draft-positions-from-0", "draft2.position_ids"},             /* round 1 starts at 0 anyway */
        {"draft-cache-not-cropped", "draft2.position_ids"},            /* positions follow the cache */
        {"target-hidden-short", "draft2.target_hidden_raw"},
        {"target-cache-not-cropped", NULL /* verify_next */},
        {"target-cache-keeps-bonus", NULL /* verify_next */},
    };
    int n = (int)(sizeof WHERE / sizeof WHERE[0]);
    for (int k = 0; k < n; k++) {
        if (tu_quick() && k % 3 != 0) continue;   /* sanitizer builds: every third */
        /* the shortest run that reaches the round where the mistake enters:
         * the prefill alone, round 1, or round r_crop + 1 (= 2 here) */
        const char *w = WHERE[k].where ? WHERE[k].where : "";
        const char *name = WHERE[k].p;
        int tokens = !strncmp(w, "prefill.", 8) || !strcmp(name, "last-hidden-prenorm") ? 0
                   : !strncmp(w, "draft1.", 7) ? 1 : 2;
        const char *ref_leaf = tokens == 0 ? "ref0" : tokens == 1 ? "ref1" : "ref";
        const char *want = WHERE[k].where ? WHERE[k].where
                         : !strcmp(name, "last-hidden-prenorm") ? last_hidden : verify_next;
        int rc;
        char *out = plant_and_diff(name, tokens, 0, ref_leaf, &rc);
        if (rc != 1 || strcmp(first_departure(out), want) != 0)
            fail_msg("pitfall %s: diff exit %d, first departure \"%s\", expected exit 1 and \"%s\"; output:\n%.3000s",
                     name, rc, first_departure(out), want, out);
        for (size_t h = 0; h < sizeof HYBRID_HINTS / sizeof HYBRID_HINTS[0]; h++) assert_not_contains(out, HYBRID_HINTS[h]);
        /* the hints that are certain */
        if (!strcmp(name, "causal-off-by-one")) {
            /* key p + 1 is let in for query p: weight where A's causal mask gives exactly 0, one ahead */
            assert_contains(out, "hint: B gives weight where A is exactly 0 (keys the mask hides)");
            assert_contains(out, "the nearest extra key after its query is 1 position ahead");
        }
        if (!strcmp(name, "draft-causal"))   /* the block's later keys hidden, which A's bidirectional block sees */
            assert_contains(out, "hint: B is exactly 0 where A gives weight (B's mask hides keys A's does not)");
        if (!strcmp(name, "gqa-tile")) {
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
        if (!strcmp(name, "hidden-off-by-one"))
            for (int j = 0; j < g_draft.n_target_layer_ids; j++) {
                char hint[160];
                int D = g_target.hidden_size;
                snprintf(hint, sizeof hint, "B's block %d (columns %d..%d) equals A's prefill.hidden_states.%d", j,
                         j * D, (j + 1) * D - 1, g_draft.target_layer_ids[j]);
                assert_contains(out, hint);
            }
        if (!strcmp(name, "last-hidden-prenorm")) assert_contains(out, "BEFORE a final RMSNorm");
        free(out);
    }
    /* the series is exactly these, draft-at-temperature and sliding-as-full (below), each once, and the
     * hybrid target's (hybrid-*: tests/test_hybrid_pitfalls.c) */
    int n_hybrid = 0;
    for (int i = 0; i < g_n_names; i++) n_hybrid += !strncmp(g_names[i], "hybrid-", 7);
    assert_int_equal(g_n_names - n_hybrid, n + 2);
    for (int i = 0; i < g_n_names; i++) {
        if (!strncmp(g_names[i], "hybrid-", 7)) continue;
        int found = !strcmp(g_names[i], "draft-at-temperature") + !strcmp(g_names[i], "sliding-as-full");
        for (int k = 0; k < n; k++) found += !strcmp(g_names[i], WHERE[k].p);
        if (found != 1) fail_msg("%s lists %s, which this test covers %d times", SERIES, g_names[i], found);
    }
}

/* The draft sampled at temperature: greedy is the rule whatever the
 * target's temperature. Needs a run at T > 0; the first tensor the sampling
 * writes is draft1.sampled (T = 5 on a 36-word vocabulary: the draws leave
 * the argmax; were all of them to land on it, verify1.sampled would be
 * next, since the draws use the shared generator). */
static void test_draft_at_temperature(void **state) {
    (void)state;
    int rc;
    char *out = plant_and_diff("draft-at-temperature", 1, 5, "ref_t5", &rc);
    assert_int_equal(rc, 1);
    assert_string_equal(first_departure(out), "draft1.sampled");
    free(out);
}

/* Sliding layers run as full attention, on the sliding set (draft layers
 * 0..3 sliding_attention, window 6, block 6): the first layer that has a
 * window is the first whose weights change (its scores are traced before
 * the mask), in round 1, whose first block query already lacks context
 * keys: the prompt is longer than the window. */
static void test_sliding_as_full(void **state) {
    (void)state;
    Config dc;
    patch_load_config(&dc, "toy_weights/sliding/draft/config.json", 1);
    int first = -1;
    for (int l = dc.num_hidden_layers - 1; l >= 0; l--)
        if (dc.layer_window[l] > 0) first = l;
    assert_true(first >= 0);
    char want[96], cmd[3000];
    snprintf(want, sizeof want, "draft1.layers.%d.self_attn.attn_weights", first);
    const char *args = "--target toy_weights/sliding/target --draft toy_weights/sliding/draft --ids 5,6,7,8,9,10,11,12"
                       " --max-new-tokens 1 --ignore-eos";
    assert_true(8 > dc.layer_window[first]);  /* the prompt: longer than the window */
    snprintf(cmd, sizeof cmd, "./dflash %s --trace %s && ./build/pitfalls/dflash-sliding-as-full %s --trace %s", args,
             dir_path("sl-ref"), args, dir_path("sl-port"));
    assert_int_equal(tu_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "./dflash diff %s %s", dir_path("sl-ref"), dir_path("sl-port"));
    int rc = tu_run(cmd, dir_path("diff.txt"));
    char *out = tu_read(dir_path("diff.txt"), NULL);
    assert_non_null(out);
    if (rc != 1 || strcmp(first_departure(out), want) != 0)
        fail_msg("sliding-as-full: diff exit %d, first departure \"%s\", expected exit 1 and \"%s\"; output:\n%.3000s",
                 rc, first_departure(out), want, out);
    /* the trained window lets query p see keys p - (w - 1) .. p (NOTES.md): full attention's first
     * extra key is w back, and the block keys after p are extra too */
    snprintf(want, sizeof want, "the first extra key is %d positions back", dc.layer_window[first]);
    assert_contains(out, "hint: B gives weight where A is exactly 0 (keys the mask hides)");
    assert_contains(out, want);
    assert_contains(out, "the nearest extra key after its query is 1 position ahead");
    free(out);
}

/* TRACE.md ("The last-layer abort") says in which round the pre-norm last
 * hidden state (last-hidden-prenorm) first changes a proposal on the random
 * set, per prompt ("round N with `P`"), and that C differs from round 1 on:
 * every such claim is checked here with the pitfall's program against the
 * clean one (the first round whose draft{r}.sampled differ, --ignore-eos),
 * as a round log compared line by line. A claim of round R runs R * B new
 * tokens: a round commits at most B, so both runs reach round R, and a first
 * change in another round is seen (before R) or not (after R) either way. */
static int first_changed_round(const char *prog, const char *ids, int max_new, char *first_c, size_t size) {
    char cmd[1200], a[300], b[300];
    snprintf(a, sizeof a, "%s", dir_path("pn-clean.txt"));
    snprintf(b, sizeof b, "%s", dir_path("pn-port.txt"));
    snprintf(cmd, sizeof cmd, "./dflash --weights " RAND " --ids %s --max-new-tokens %d --ignore-eos --rounds | grep '  draft  '", ids, max_new);
    assert_int_equal(tu_run(cmd, a), 0);
    snprintf(cmd, sizeof cmd, "%s --weights " RAND " --ids %s --max-new-tokens %d --ignore-eos --rounds | grep '  draft  '", prog, ids, max_new);
    assert_int_equal(tu_run(cmd, b), 0);
    char *x = tu_read(a, NULL), *y = tu_read(b, NULL);
    assert_non_null(x);
    assert_non_null(y);
    int r = 1, found = -1;
    for (char *p = x, *q = y; *p && *q; r++) {
        char *pe = strchr(p, '\n'), *qe = strchr(q, '\n');
        if (!pe || !qe) break;
        if (pe - p != qe - q || memcmp(p, q, (size_t)(pe - p)) != 0) { found = r; break; }
        p = pe + 1, q = qe + 1;
    }
    free(x);
    free(y);
    /* C: draft1.hidden_norm of the two, compared byte for byte */
    snprintf(cmd, sizeof cmd, "{ ./dflash --weights " RAND " --ids %s --max-new-tokens 1 --ignore-eos --trace %s "
             "--trace-filter draft1.hidden_norm && %s --weights " RAND " --ids %s --max-new-tokens 1 --ignore-eos --trace %s "
             "--trace-filter draft1.hidden_norm && cmp -s %s/draft1.hidden_norm.npy %s/draft1.hidden_norm.npy; }",
             ids, dir_path("pn-c"), prog, ids, dir_path("pn-p"), dir_path("pn-c"), dir_path("pn-p"));
    snprintf(first_c, size, "%s", tu_run(cmd, NULL) == 1 ? "differs" : "same");
    return found;
}

static void test_last_hidden_prenorm_rounds_as_trace_md_says(void **state) {
    (void)state;
    char *t = tu_read("TRACE.md", NULL);
    assert_non_null(t);
    const char *sec = strstr(t, "The pre-norm residual is the pitfall `last-hidden-prenorm`");
    assert_non_null(sec);
    const char *end = strstr(sec, "`draft{r}.sampled`.");
    assert_non_null(end);
    assert_null(strstr(sec, "first in `draft2.sampled`"));  /* the old one-round claim */
    int claims = 0;
    for (const char *p = sec; (p = strstr(p, "round ")) != NULL && p < end; p += 6) {
        int round, used = 0;
        char ids[64];
        if (sscanf(p, "round %d with `%n", &round, &used) != 1 || used == 0) continue;
        const char *q = p + used;
        if (strncmp(q, "--ids ", 6) == 0) q += 6;
        size_t n = strspn(q, "0123456789,");
        if (n == 0 || n >= sizeof ids || q[n] != '`') continue;
        memcpy(ids, q, n);
        ids[n] = 0;
        char c[16];
        int got = first_changed_round("./build/pitfalls/dflash-last-hidden-prenorm", ids, round * g_draft.block_size, c,
                                      sizeof c);
        if (got != round) fail_msg("TRACE.md: last-hidden-prenorm first changes a proposal in round %d with --ids %s; the runs say %d",
                                   round, ids, got);
        if (strcmp(c, "differs") != 0) fail_msg("TRACE.md: C differs from round 1 on; with --ids %s draft1.hidden_norm is the same", ids);
        claims++;
    }
    assert_true(claims >= 2);
    free(t);
}

/* The mechanism. Each program's source, build/pitfalls/NAME/FILE (FILE the
 * one file its patch names, dflash.c for all of these), is FILE with
 * exactly its patch: it differs from FILE, and reversing the patch gives
 * FILE back, byte for byte. */
static void test_each_program_is_the_source_plus_its_patch(void **state) {
    (void)state;
    assert_true(g_n_names >= 19);
    for (int i = 0; i < g_n_names; i++) {
        char diff[128], prog[128], copy_dir[128];
        snprintf(diff, sizeof diff, "walkthrough/pitfalls/%.60s.diff", g_names[i]);
        snprintf(prog, sizeof prog, "build/pitfalls/dflash-%.60s", g_names[i]);
        snprintf(copy_dir, sizeof copy_dir, "build/pitfalls/%.60s", g_names[i]);
        patch_check_program(g_names[i], diff, prog, copy_dir, dir_path("copy.c"));
    }
}

/* A patch that no longer applies (a context line of dflash.c changed under
 * it) fails the build with a message naming it, and leaves no program. */
static void test_stale_patch_fails_the_build(void **state) {
    (void)state;
    patch_check_stale("walkthrough/pitfalls/hidden-off-by-one.diff", "\n     for (int t = 0; t < rows; t++)", 6,
                      "dflash.c", "build/pitfalls/obj/dflash.o", g_dir, "stale");   /* "for" -> "Xor" */
}

/* dflash.c and dflash.h carry no pitfall; the program has no --pitfall. */
static void test_clean_source_and_no_pitfall_flag(void **state) {
    (void)state;
    assert_int_equal(tu_run("grep -i -c pitfall dflash.c dflash.h", NULL), 1);
    assert_int_equal(tu_run("./dflash --pitfall gelu-mlp", dir_path("refuse.txt")), 2);
    char *err = tu_read(dir_path("refuse.txt"), NULL);
    assert_contains(err, "unknown flag \"--pitfall\"");
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
    assert_int_equal(tu_run(cmd, NULL), 0);
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
    assert_int_equal(tu_run(cmd, dir_path("cut.txt")), 1);
    char *out = tu_read(dir_path("cut.txt"), NULL), want[600];
    snprintf(want, sizeof want, "B has nothing after %s: %d tensors missing, first %s", last, lines - keep, next);
    assert_contains(out, want);
    assert_not_contains(out, "first departure");
    free(out);
    /* --only over what B has passes: the whole prefill lies before the cut
     * (its names come first in data-flow order) */
    assert_true(strncmp(next, "prefill.", 8) != 0);
    snprintf(cmd, sizeof cmd, "./dflash diff --only 'prefill.*' %s %s", ref, cut);
    assert_int_equal(tu_run(cmd, NULL), 0);
}

/* A clean port: the other precision's build, a different computation of the
 * same algorithm. It passes, and --verbose shows one line per tensor with
 * its margin (some not exact: float and double differ). */
static void test_clean_port_passes_with_margins(void **state) {
    (void)state;
    char cmd[3000], ref[512];
    snprintf(ref, sizeof ref, "%s", ref_dir("ref1"));
    snprintf(cmd, sizeof cmd, "./dflash diff --verbose --rtol=1e-4 %s %s", ref, other_dir("ref1"));   /* the fixtures */
    assert_int_equal(tu_run(cmd, dir_path("v.txt")), 0);
    char *out = tu_read(dir_path("v.txt"), NULL), *m = tu_read(tu_path(ref, "trace.jsonl"), NULL);
    int lines = 0, ok = 0, margins = 0;
    for (char *c = m; *c; c++) lines += *c == '\n';
    assert_not_contains(out, "DEP ");
    for (char *l = out, *nl; l && *l; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        if (nl) *nl = '\0';  /* the checks below look at this line only */
        if (strncmp(l, "ok   ", 5) == 0) ok++;
        if (strncmp(l, "ok   ", 5) == 0 && strstr(l, "worst rel err") && !strstr(l, "NMSE exact") &&
            strstr(l, " dB"))
            margins++;
    }
    assert_int_equal(ok, lines);   /* one "ok" line per tensor of A */
    assert_true(margins > 0);
    free(out);
    free(m);
}

/* ---- the hybrid target's pitfalls (hybrid-*), on a hybrid set: toy_weights/hybrid,
 * or the set DFLASH_HYBRID_SET names (a set of the oracle's make_hybrid.py has
 * the same layout); skipped, saying why, when there is none. For each, the
 * port's trace diffed against the correct one names the tensor where the
 * mistake enters, derived here from the algorithm and the set's config:
 *   - the rollback's mistakes enter at the crop of the first round whose
 *     acceptance is below B-1 (the crop keeps m = acceptance + 1 < B of the
 *     block's tokens; none is cut when the whole block is accepted), read
 *     from the correct run, in the first linear-attention layer: its
 *     verify{r}.rollback.layers.{l}.state, or .conv_state when only the conv
 *     window is wrong;
 *   - the bf16 state: the prefill's first state_out of a linear layer (the
 *     state rounded when the call stores it);
 *   - the restart: verify1's first conv_state_in of a linear layer (the
 *     first multi-token call after the prefill, whose states are not zero);
 *   - the norms: prefill.layers.0.input_layernorm (the first zero-centred norm);
 *   - the gate rows: the first full-attention layer's self_attn.q in the prefill;
 *   - RoPE on the whole head: prefill.rope_angles (its tables are another width).
 * And the words diff names each by, from the values. The hybrid hints never
 * fire on the dense pitfalls (test_each_pitfall_departs_where_it_enters
 * checks their outputs) nor on a clean port of the hybrid run. */
static const char *hybrid_set(void) {
    const char *s = getenv("DFLASH_HYBRID_SET");
    return s && *s ? s : "toy_weights/hybrid";
}
#define HYBRID_RUN "--ids 5,6,7,8,9,10,11,12 --max-new-tokens 8 --ignore-eos"


static void test_hybrid_pitfalls(void **state) {
    (void)state;
    char tdir[600], ddir[600], cfgp[700], cmd[4000];
    snprintf(tdir, sizeof tdir, "%s/target", hybrid_set());
    snprintf(ddir, sizeof ddir, "%s/draft", hybrid_set());
    snprintf(cfgp, sizeof cfgp, "%s/config.json", tdir);
    if (!tu_exists(cfgp))
        tu_skip("no hybrid weight set at %s (make weights writes toy_weights/hybrid; DFLASH_HYBRID_SET names another)",
                hybrid_set());
    Config tc, dc;
    patch_load_config(&tc, cfgp, 0);
    snprintf(cfgp, sizeof cfgp, "%s/config.json", ddir);
    patch_load_config(&dc, cfgp, 1);
    assert_true(tc.hybrid);
    int lin = -1, full = -1, B = dc.block_size;
    for (int l = tc.num_hidden_layers - 1; l >= 0; l--) {
        if (tc.layer_linear[l]) lin = l;
        else full = l;
    }
    assert_true(lin >= 0 && full >= 0);
    /* the correct run and its other-precision run */
    char ref[512], other[512];
    snprintf(ref, sizeof ref, "%s", dir_path("href"));
    snprintf(other, sizeof other, "%s", dir_path("href-other"));
    snprintf(cmd, sizeof cmd, "./dflash --target %s --draft %s " HYBRID_RUN " --trace %s && " OTHER_PRECISION
             " --target %s --draft %s " HYBRID_RUN " --trace %s", tdir, ddir, ref, tdir, ddir, other);
    assert_int_equal(tu_run(cmd, NULL), 0);
    int r_crop = 1;
    while (acceptance(ref, r_crop) == B - 1) r_crop++;
    if (acceptance(ref, r_crop) < 0) fail_msg("the hybrid run has no round with a rejection (a crop that cuts)");
    /* a clean port (the other precision) passes, no hint */
    snprintf(cmd, sizeof cmd, "./dflash diff %s %s", ref, other);
    assert_int_equal(tu_run(cmd, dir_path("hclean.txt")), 0);
    char *clean = tu_read(dir_path("hclean.txt"), NULL);
    assert_not_contains(clean, "hint:");
    free(clean);

    char rb_state[96], rb_conv[96], bf16[96], restart[96], norm[96], gate[96];
    snprintf(rb_state, sizeof rb_state, "verify%d.rollback.layers.%d.state", r_crop, lin);
    snprintf(rb_conv, sizeof rb_conv, "verify%d.rollback.layers.%d.conv_state", r_crop, lin);
    snprintf(bf16, sizeof bf16, "prefill.layers.%d.linear_attn.state_out", lin);
    snprintf(restart, sizeof restart, "verify1.layers.%d.linear_attn.conv_state_in", lin);
    snprintf(norm, sizeof norm, "prefill.layers.0.input_layernorm");
    snprintf(gate, sizeof gate, "prefill.layers.%d.self_attn.q", full);
    int m = acceptance(ref, r_crop) + 1;   /* the tokens the crop keeps */
    char not_rb[160], off[160], conv_off[160];
    snprintf(not_rb, sizeof not_rb, "after %d of the verify's %d tokens", B, B);
    snprintf(off, sizeof off, "after %d of the verify's %d tokens", m + 1, B);
    snprintf(conv_off, sizeof conv_off, "after %d of the verify's %d tokens", m - 1, B);
    static const struct { const char *p; int where; const char *hint, *hint2; } H[] = {
        {"hybrid-state-not-rolled-back", 0, "the recurrent state was not rolled back to the accepted position", NULL},
        {"hybrid-state-whole-block", 0, "the state the rollback restarts from was taken after the whole block", NULL},
        {"hybrid-state-off-by-one", 0, "the recurrent state was rolled back to the wrong position, off by one (one token too far", NULL},
        {"hybrid-conv-not-rolled-back", 1, "the conv window was not rolled back to the accepted position", NULL},
        {"hybrid-conv-off-by-one", 1, "the conv window was rolled back to the wrong offset, off by one (one token short)", NULL},
        {"hybrid-state-bf16", 2, "B is A rounded to bf16", "the recurrent state stored in the model's dtype"},
        {"hybrid-restart-multi-token", 3, "the call restarted from a zero state instead of the cache's", NULL},
        {"hybrid-norm-plain-w", 4, "a zero-centred norm (Qwen3.5: x * (1 + w)) read as a plain RMSNorm (x * w)", NULL},
        {"hybrid-gate-rows", 5, "the query and the gate come from the wrong rows", "B's head 2j is A's head j"},
        {"hybrid-rope-whole-head", 6, "B rotates the whole head instead of its rotary part", NULL},
    };
    const char *where[] = {rb_state, rb_conv, bf16, restart, norm, gate, "prefill.rope_angles"};
    int n = (int)(sizeof H / sizeof H[0]);
    for (int k = 0; k < n; k++) {
        char port[512];
        snprintf(port, sizeof port, "%s", dir_path("hport"));
        snprintf(cmd, sizeof cmd, "./build/pitfalls/dflash-%s --target %s --draft %s " HYBRID_RUN " --trace %s", H[k].p, tdir,
                 ddir, port);
        if (tu_run(cmd, NULL) != 0) fail_msg("pitfall %s: `%s` failed (make pitfall-programs?)", H[k].p, cmd);
        snprintf(cmd, sizeof cmd, "./dflash diff %s %s " OTHER_FLAG " %s", ref, port, other);
        int rc = tu_run(cmd, dir_path("hdiff.txt"));
        char *out = tu_read(dir_path("hdiff.txt"), NULL);
        assert_non_null(out);
        tu_rmtree(port);
        if (rc != 1 || strcmp(first_departure(out), where[H[k].where]) != 0 || !strstr(out, H[k].hint) ||
            (H[k].hint2 && !strstr(out, H[k].hint2)))
            fail_msg("pitfall %s: diff exit %d, first departure \"%s\", expected exit 1, \"%s\" and the hint \"%s\"; "
                     "output:\n%.3000s", H[k].p, rc, first_departure(out), where[H[k].where], H[k].hint, out);
        /* the position named: the whole block, one past the kept tokens, one short */
        if (!strcmp(H[k].p, "hybrid-state-not-rolled-back")) assert_contains(out, not_rb);
        if (!strcmp(H[k].p, "hybrid-state-off-by-one")) assert_contains(out, off);
        if (!strcmp(H[k].p, "hybrid-conv-off-by-one")) assert_contains(out, conv_off);
        free(out);
    }
    /* every hybrid-* of the series is one of these, once */
    for (int i = 0; i < g_n_names; i++) {
        if (strncmp(g_names[i], "hybrid-", 7)) continue;
        int found = 0;
        for (int k = 0; k < n; k++) found += !strcmp(g_names[i], H[k].p);
        if (found != 1) fail_msg("%s lists %s, which this test covers %d times", SERIES, g_names[i], found);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_source_and_no_pitfall_flag),
        cmocka_unit_test(test_each_program_is_the_source_plus_its_patch),
        cmocka_unit_test(test_stale_patch_fails_the_build),
        cmocka_unit_test(test_each_pitfall_departs_where_it_enters),
        cmocka_unit_test(test_draft_at_temperature),
        cmocka_unit_test(test_sliding_as_full),
        cmocka_unit_test(test_hybrid_pitfalls),
        cmocka_unit_test(test_last_hidden_prenorm_rounds_as_trace_md_says),
        cmocka_unit_test(test_truncated_port_fails),
        cmocka_unit_test(test_clean_port_passes_with_margins),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
