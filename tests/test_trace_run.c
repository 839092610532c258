/* tests/test_trace_run.c - traces of whole runs of the built programs.
 *
 * - every name of the trace contract (TRACE.md) is written, with the shape
 *   the contract gives, for the walkthrough run and for a random-weights run
 *   with block size 6; the manifest lists exactly them, in data-flow order
 *   (each layer's internals, then its output), and every listed file exists. Expected names and shapes
 *   are derived here from the algorithm (start += acc + 1, Lc = acc + 1,
 *   S = start + B), not copied from a run.
 * - two runs give byte-identical trace directories; the -O0 debug build and
 *   the -O2 build give byte-identical traces;
 * - the float and double builds agree to 1e-4 relative (per tensor, relative
 *   to its largest magnitude) on every tensor, with the same tokens.
 *
 * The programs are run with system(): ./dflash, ./dflash-debug,
 * ./dflash-float and ./dflash-double (the Makefile builds them before the
 * tests; ./dflash is one of the last two, by REAL); the walkthrough run's
 * traces by the last two are tools/test-fixtures.sh's (make test runs it).
 * .npy files are read by a small reader written here, not trace.c's. */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

#define WALK "toy_weights/walkthrough"
#define RAND "toy_weights/random"

/* ---- a minimal independent .npy reader --------------------------------- */

typedef struct {
    char descr[8];
    int ndim;
    int64_t shape[8];
    int64_t numel;
    double *v;   /* values as double */
} Npy;

static int check_npy_load(const char *path, Npy *a) {
    size_t len;
    char *buf = tu_read(path, &len);
    memset(a, 0, sizeof *a);
    if (!buf) return -1;
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0 || buf[6] != 1 || buf[7] != 0) { free(buf); return -1; }
    size_t hl = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8;
    if (10 + hl > len || (10 + hl) % 64 != 0) { free(buf); return -1; }
    char *h = buf + 10;
    char *d = strstr(h, "'descr': '");
    char *s = strstr(h, "'shape': (");
    if (!d || !s || !strstr(h, "'fortran_order': False")) { free(buf); return -1; }
    memcpy(a->descr, d + 10, 3);
    s += 10;
    a->numel = 1;
    while (*s != ')') {
        char *e;
        long long v = strtoll(s, &e, 10);
        if (e == s) { free(buf); return -1; }
        a->shape[a->ndim++] = v;
        a->numel *= v;
        s = e;
        while (*s == ',' || *s == ' ') s++;
    }
    size_t item = a->descr[2] == '8' ? 8 : 4;
    if (10 + hl + (size_t)a->numel * item != len) { free(buf); return -1; }
    a->v = malloc(sizeof(double) * (size_t)(a->numel ? a->numel : 1));
    const unsigned char *p = (const unsigned char *)buf + 10 + hl;
    for (int64_t i = 0; i < a->numel; i++) {
        if (strcmp(a->descr, "<f4") == 0) { float f; memcpy(&f, p + 4 * i, 4); a->v[i] = f; }
        else if (strcmp(a->descr, "<f8") == 0) { memcpy(&a->v[i], p + 8 * i, 8); }
        else if (strcmp(a->descr, "<i8") == 0) { int64_t x; memcpy(&x, p + 8 * i, 8); a->v[i] = (double)x; }
        else { free(buf); free(a->v); return -1; }
    }
    free(buf);
    return 0;
}

static void npy_free_(Npy *a) { free(a->v); a->v = NULL; }

static double npy_scalar(const char *dir, const char *name) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    Npy a;
    if (check_npy_load(path, &a) != 0) fail_msg("cannot read %s", path);
    double v = a.numel ? a.v[0] : 0;
    npy_free_(&a);
    return v;
}

/* ---- the manifest --------------------------------------------------------- */

typedef struct {
    char name[128];
    char file[160];
    int ndim;
    int64_t shape[8];
} Entry;

typedef struct {
    Entry *e;
    int n;
} Manifest_;

static void manifest_read(const char *dir, Manifest_ *m) {
    char *text = tu_read(tu_path(dir, "trace.jsonl"), NULL);
    assert_non_null(text);
    m->n = 0;
    m->e = calloc(20000, sizeof(Entry));
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (*line) {
            Entry *e = &m->e[m->n++];
            char *p = strstr(line, "\"name\":");
            assert_non_null(p);
            p = strchr(p + 7, '"') + 1;
            size_t k = (size_t)(strchr(p, '"') - p);
            memcpy(e->name, p, k);
            p = strstr(line, "\"file\":");
            assert_non_null(p);
            p = strchr(p + 7, '"') + 1;
            k = (size_t)(strchr(p, '"') - p);
            memcpy(e->file, p, k);
            p = strstr(line, "\"shape\":");
            assert_non_null(p);
            p = strchr(p, '[') + 1;
            while (*p != ']') {
                char *end;
                e->shape[e->ndim++] = strtoll(p, &end, 10);
                p = end;
                while (*p == ',' || *p == ' ') p++;
            }
            assert_non_null(strstr(line, "\"phase\":"));
            assert_non_null(strstr(line, "\"round\":"));
            assert_non_null(strstr(line, "\"meaning\":"));
        }
        if (!nl) break;
        line = nl + 1;
    }
    free(text);
}

static int manifest_find(const Manifest_ *m, const char *name) {
    for (int i = 0; i < m->n; i++) if (strcmp(m->e[i].name, name) == 0) return i;
    return -1;
}

/* ---- the expected contract names --------------------------------------- */

typedef struct {
    char name[128];
    int ndim;
    int64_t shape[3];
} Want;

typedef struct {
    Want w[20000];
    int n;
} WantList;

static void want(WantList *l, int ndim, int64_t s0, int64_t s1, int64_t s2, const char *fmt, ...) {
    Want *w = &l->w[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->name, sizeof w->name, fmt, ap);
    va_end(ap);
    w->ndim = ndim;
    w->shape[0] = s0; w->shape[1] = s1; w->shape[2] = s2;
}

typedef struct {
    int n, B, L, D, H, Hkv, d, V, k, N, max_new;
    int stop;   /* stop id, or -1 (--ignore-eos) */
    int I;      /* intermediate_size (target and draft alike here) */
} Dims;

/* One target forward (prefill or verify{r}) of T tokens over S keys, in the
 * order the computation produces its tensors: each layer's internals, then
 * that layer's output hidden_states.{l+1}; the last one after the final norm. */
static void want_target(WantList *l, const Dims *g, const char *P, int T, int S, int logit_rows) {
    int D = g->D, d = g->d;
    want(l, 1, T, 0, 0, "%s.input_ids", P);
    want(l, 1, T, 0, 0, "%s.position_ids", P);
    want(l, 2, T, d / 2, 0, "%s.rope_angles", P);
    want(l, 2, T, d, 0, "%s.cos", P);
    want(l, 2, T, d, 0, "%s.sin", P);
    want(l, 2, T, D, 0, "%s.hidden_states.0", P);
    for (int ly = 0; ly < g->L; ly++) {
        want(l, 2, T, D, 0, "%s.layers.%d.input_layernorm", P, ly);
        want(l, 3, g->H, T, d, "%s.layers.%d.self_attn.q", P, ly);
        want(l, 3, g->Hkv, T, d, "%s.layers.%d.self_attn.k", P, ly);
        want(l, 3, g->Hkv, T, d, "%s.layers.%d.self_attn.v", P, ly);
        want(l, 3, g->H, T, d, "%s.layers.%d.self_attn.q_rope", P, ly);
        want(l, 3, g->Hkv, T, d, "%s.layers.%d.self_attn.k_rope", P, ly);
        want(l, 3, g->H, T, S, "%s.layers.%d.self_attn.attn_scores", P, ly);
        want(l, 3, g->H, T, S, "%s.layers.%d.self_attn.attn_weights", P, ly);
        want(l, 2, T, D, 0, "%s.layers.%d.self_attn.attn_output", P, ly);
        want(l, 2, T, D, 0, "%s.layers.%d.post_attention_layernorm", P, ly);
        want(l, 2, T, g->I, 0, "%s.layers.%d.mlp.gate_proj", P, ly);
        want(l, 2, T, g->I, 0, "%s.layers.%d.mlp.up_proj", P, ly);
        want(l, 2, T, g->I, 0, "%s.layers.%d.mlp.act", P, ly);
        want(l, 2, T, D, 0, "%s.layers.%d.mlp.down_proj", P, ly);
        want(l, 2, T, D, 0, "%s.hidden_states.%d", P, ly + 1);
    }
    want(l, 2, logit_rows, g->V, 0, "%s.logits", P);
}

static void read_ids(const char *dir, const char *name, int *out, int n) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    Npy a;
    if (check_npy_load(path, &a) != 0) fail_msg("cannot read %s", path);
    assert_int_equal(a.numel, n);
    for (int i = 0; i < n; i++) out[i] = (int)a.v[i];
    npy_free_(&a);
}

/* Build the contract's list for a run, reading only the acceptance lengths
 * (the data-dependent part) from the trace itself. */
static int expected_names(const char *dir, const Dims *g, WantList *l) {
    int n = g->n, B = g->B, D = g->D, kD = g->k * g->D;
    l->n = 0;
    want(l, 1, n, 0, 0, "input_ids");
    want_target(l, g, "prefill", n, n, 1);
    want(l, 1, 1, 0, 0, "prefill.sampled");
    want(l, 2, n, kD, 0, "prefill.target_hidden");
    int start = n, Lc = n, r = 0, max_length = n + g->max_new, stopped = 0;
    int out[512];   /* output_ids as dflash_generate writes them */
    double accepted[64] = {0};  /* sum over rounds of verify{r}.cumprod: per-position acceptance */
    for (int i = 0; i < 512; i++) out[i] = -2;
    read_ids(dir, "prefill.sampled", &out[n], 1);
    while (start < max_length && !stopped) {
        r++;
        int P = Lc + B, S = start + B;
        want(l, 2, Lc, kD, 0, "draft%d.target_hidden_raw", r);
        want(l, 2, Lc, D, 0, "draft%d.fc", r);
        want(l, 2, Lc, D, 0, "draft%d.hidden_norm", r);
        want(l, 1, B, 0, 0, "draft%d.block_output_ids", r);
        want(l, 2, B, D, 0, "draft%d.noise_embedding", r);
        want(l, 1, P, 0, 0, "draft%d.position_ids", r);
        want(l, 2, P, g->d / 2, 0, "draft%d.rope_angles", r);
        want(l, 2, P, g->d, 0, "draft%d.cos", r);
        want(l, 2, P, g->d, 0, "draft%d.sin", r);
        for (int ly = 0; ly < g->N; ly++) {
            want(l, 2, B, D, 0, "draft%d.layers.%d.input_layernorm", r, ly);
            want(l, 3, g->H, B, g->d, "draft%d.layers.%d.self_attn.q", r, ly);
            want(l, 3, g->Hkv, P, g->d, "draft%d.layers.%d.self_attn.k", r, ly);
            want(l, 3, g->Hkv, P, g->d, "draft%d.layers.%d.self_attn.v", r, ly);
            want(l, 3, g->H, B, g->d, "draft%d.layers.%d.self_attn.q_rope", r, ly);
            want(l, 3, g->Hkv, P, g->d, "draft%d.layers.%d.self_attn.k_rope", r, ly);
            want(l, 3, g->H, B, S, "draft%d.layers.%d.self_attn.attn_scores", r, ly);
            want(l, 3, g->H, B, S, "draft%d.layers.%d.self_attn.attn_weights", r, ly);
            want(l, 2, B, D, 0, "draft%d.layers.%d.self_attn.attn_output", r, ly);
            want(l, 2, B, D, 0, "draft%d.layers.%d.post_attention_layernorm", r, ly);
            want(l, 2, B, g->I, 0, "draft%d.layers.%d.mlp.gate_proj", r, ly);
            want(l, 2, B, g->I, 0, "draft%d.layers.%d.mlp.up_proj", r, ly);
            want(l, 2, B, g->I, 0, "draft%d.layers.%d.mlp.act", r, ly);
            want(l, 2, B, D, 0, "draft%d.layers.%d.mlp.down_proj", r, ly);
            want(l, 2, B, D, 0, "draft%d.layers.%d", r, ly);
        }
        want(l, 2, B, D, 0, "draft%d.norm", r);
        want(l, 2, B - 1, g->V, 0, "draft%d.logits", r);
        want(l, 1, B - 1, 0, 0, "draft%d.sampled", r);
        char name[64];
        snprintf(name, sizeof name, "verify%d", r);
        want_target(l, g, name, B, S, B);
        want(l, 1, B, 0, 0, "verify%d.sampled", r);
        want(l, 1, B - 1, 0, 0, "verify%d.match", r);
        want(l, 1, B - 1, 0, 0, "verify%d.cumprod", r);
        want(l, 0, 0, 0, 0, "verify%d.acceptance_length", r);
        want(l, 2, B, kD, 0, "verify%d.target_hidden", r);
        snprintf(name, sizeof name, "verify%d.acceptance_length", r);
        int acc = (int)npy_scalar(dir, name);
        int cum[64];
        snprintf(name, sizeof name, "verify%d.cumprod", r);
        read_ids(dir, name, cum, B - 1);
        for (int i = 0; i + 1 < B; i++) accepted[i] += cum[i];
        snprintf(name, sizeof name, "verify%d.acceptance_length", r);
        /* the draft's positions: [start - Lc, start + B) */
        snprintf(name, sizeof name, "draft%d.position_ids", r);
        char path[600];
        snprintf(path, sizeof path, "%s/%s.npy", dir, name);
        Npy pos;
        assert_int_equal(check_npy_load(path, &pos), 0);
        assert_int_equal(pos.numel, P);
        for (int i = 0; i < P; i++) assert_int_equal((int)pos.v[i], start - Lc + i);
        npy_free_(&pos);
        assert_in_range(acc, 0, B - 1);
        /* output_ids[start:start+acc+1] = block[:acc+1]; [start+acc+1] = posterior[acc] */
        int blk[64], post[64];
        snprintf(name, sizeof name, "verify%d.input_ids", r);
        read_ids(dir, name, blk, B);
        snprintf(name, sizeof name, "verify%d.sampled", r);
        read_ids(dir, name, post, B);
        assert_int_equal(blk[0], out[start]);   /* the anchor is the token at start */
        for (int i = 0; i <= acc; i++) out[start + i] = blk[i];
        out[start + acc + 1] = post[acc];
        start += acc + 1;
        Lc = acc + 1;
        for (int i = n; i <= start; i++) stopped |= out[i] == g->stop;
    }
    int m = start + 1 < max_length ? start + 1 : max_length;
    for (int i = n; i < m; i++)
        if (out[i] == g->stop) { m = i + 1; break; }
    want(l, 1, m, 0, 0, "output_ids");
    if (r > 0 && B > 1) {
        /* the fraction of rounds accepting proposal i: the mean of the rounds' cumprod[i-1] */
        want(l, 1, B - 1, 0, 0, "acceptance_per_position");
        char path[600];
        snprintf(path, sizeof path, "%s/acceptance_per_position.npy", dir);
        Npy a;
        if (check_npy_load(path, &a) != 0) fail_msg("cannot read %s", path);
        assert_int_equal(a.numel, B - 1);
        for (int i = 0; i + 1 < B; i++)
            if (fabs(a.v[i] - accepted[i] / r) > 1e-6)
                fail_msg("%s: acceptance_per_position[%d] = %g, the rounds' cumprod give %g", dir, i, a.v[i],
                         accepted[i] / r);
        npy_free_(&a);
    }
    return r;
}

static void check_contract(const char *dir, const Dims *g, int expect_rounds) {
    Manifest_ m;
    manifest_read(dir, &m);
    WantList *l = calloc(1, sizeof *l);
    int rounds = expected_names(dir, g, l);
    if (expect_rounds >= 0) assert_int_equal(rounds, expect_rounds);
    int last = -1;
    for (int i = 0; i < l->n; i++) {
        const Want *w = &l->w[i];
        int at = manifest_find(&m, w->name);
        if (at < 0) fail_msg("%s: contract name %s is not in the manifest", dir, w->name);
        const Entry *e = &m.e[at];
        if (e->ndim != w->ndim) fail_msg("%s: %s has %d axes, want %d", dir, w->name, e->ndim, w->ndim);
        for (int k = 0; k < w->ndim; k++)
            if (e->shape[k] != w->shape[k])
                fail_msg("%s: %s axis %d is %lld, want %lld", dir, w->name, k, (long long)e->shape[k],
                         (long long)w->shape[k]);
        /* production order: the contract names appear in the order built above
         * (prefill, then each round's draft then verify, then the output) */
        if (at < last) fail_msg("%s: %s is listed before %s", dir, w->name, m.e[last].name);
        last = at;
        /* the file exists and holds that shape */
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->file);
        Npy a;
        if (check_npy_load(path, &a) != 0) fail_msg("%s: unreadable", path);
        assert_int_equal(a.ndim, w->ndim);
        npy_free_(&a);
    }
    /* the manifest lists exactly these names: nothing more */
    if (m.n != l->n) fail_msg("%s: the manifest lists %d tensors, the contract %d", dir, m.n, l->n);
    /* every listed file exists */
    for (int i = 0; i < m.n; i++) assert_true(tu_exists(tu_path(dir, m.e[i].file)));
    free(l);
    free(m.e);
}

static int vocab_lines(const char *set) {
    char p[300];
    snprintf(p, sizeof p, "%s/vocab.txt", set);
    char *t = tu_read(p, NULL);
    assert_non_null(t);
    int n = 0;
    for (char *c = t; *c; c++) n += *c == '\n';
    free(t);
    return n;
}

static void run_ok(const char *cmd) {
    char full[2000];
    snprintf(full, sizeof full, "%s > /dev/null", cmd);
    int rc = system(full);
    if (rc != 0) fail_msg("command failed (%d): %s", rc, cmd);
}

/* The walkthrough run ("The cat sat", block 4): two rounds, acceptance 2 then 3. */
static void test_contract_walkthrough(void **state) {
    (void)state;
    /* `./dflash --weights WALK --trace`: tools/test-fixtures.sh's */
    Dims g = {3, 4, 12, 512, 8, 8, 64, vocab_lines(WALK), 3, 2, 16, 0 /* <eos> */, 1536};
    char t[600];
    snprintf(t, sizeof t, "%s", tu_fixture("walkthrough-" TU_SELF));
    check_contract(t, &g, 2);   /* the walkthrough story has two rounds */
    /* the walkthrough's numbers: acceptance 2 in round 1, cumprod [1,1,0] */
    assert_int_equal((int)npy_scalar(t, "verify1.acceptance_length"), 2);
    /* round 2 accepts all 3 ("a box ."): proposals 1 and 2 accepted in both rounds, 3 in one */
    assert_int_equal((int)npy_scalar(t, "verify2.acceptance_length"), 3);
}

static void test_contract_random_block6(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    char cmd[800];
    snprintf(cmd, sizeof cmd, "./dflash --weights " RAND " --prompt 'The cat sat on' --block-size 6 "
                              "--max-new-tokens 10 --ignore-eos --trace %s/t", dir);
    run_ok(cmd);
    Dims g = {4, 6, 12, 512, 8, 4, 64, vocab_lines(RAND), 3, 2, 10, -1, 1536};
    char t[600];
    snprintf(t, sizeof t, "%s/t", dir);
    check_contract(t, &g, -1);
    tu_rmtree(dir);
    free(dir);
}

/* byte-identical: two runs, and the -O0 debug build against -O2 */
static void test_traces_are_reproducible_across_runs_and_builds(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    char cmd[1200];
    const char *args = "--weights " WALK " --max-new-tokens 6";
    snprintf(cmd, sizeof cmd, "./dflash %s --trace %s/a", args, dir);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "./dflash %s --trace %s/b", args, dir);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "./dflash-debug %s --trace %s/c", args, dir);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "diff -r -q %s/a %s/b", dir, dir);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "diff -r -q %s/a %s/c", dir, dir);
    run_ok(cmd);
    tu_rmtree(dir);
    free(dir);
}

/* float vs double: every tensor to 1e-4 relative to its largest magnitude;
 * the runs of args, or with fixture (args NULL) tools/test-fixtures.sh's
 * fixture-float and fixture-double */
static void compare_float_double(const char *args, const char *fixture) {
    char *dir = tu_tmpdir();
    char cmd[1200];
    char fd[600], dd[600];
    if (fixture) {
        snprintf(fd, sizeof fd, "%s-float", fixture);
        snprintf(dd, sizeof dd, "%s-double", fixture);
        snprintf(fd, sizeof fd, "%s", tu_fixture(fd));
        snprintf(dd, sizeof dd, "%s", tu_fixture(dd));
        args = fixture;
    } else {
        snprintf(cmd, sizeof cmd, "./dflash-float %s --trace %s/f", args, dir);
        run_ok(cmd);
        snprintf(cmd, sizeof cmd, "./dflash-double %s --trace %s/d", args, dir);
        run_ok(cmd);
        snprintf(fd, sizeof fd, "%s/f", dir);
        snprintf(dd, sizeof dd, "%s/d", dir);
    }
    Manifest_ mf, md;
    manifest_read(fd, &mf);
    manifest_read(dd, &md);
    assert_int_equal(mf.n, md.n);
    double worst = 0;
    for (int i = 0; i < mf.n; i++) {
        assert_string_equal(mf.e[i].name, md.e[i].name);
        Npy a, b;
        assert_int_equal(check_npy_load(tu_path(fd, mf.e[i].file), &a), 0);
        assert_int_equal(check_npy_load(tu_path(dd, md.e[i].file), &b), 0);
        assert_int_equal(a.numel, b.numel);
        if (a.descr[1] == 'i') {
            assert_string_equal(b.descr, "<i8");
            for (int64_t k = 0; k < a.numel; k++)
                if (a.v[k] != b.v[k]) fail_msg("%s: ids differ between float and double", mf.e[i].name);
        } else {
            assert_string_equal(a.descr, "<f4");
            assert_string_equal(b.descr, "<f8");
            double mx = 0, err = 0;
            for (int64_t k = 0; k < b.numel; k++) if (fabs(b.v[k]) > mx) mx = fabs(b.v[k]);
            for (int64_t k = 0; k < b.numel; k++) if (fabs(a.v[k] - b.v[k]) > err) err = fabs(a.v[k] - b.v[k]);
            double rel = mx > 0 ? err / mx : err;
            if (rel > worst) worst = rel;
            if (rel > 1e-4) fail_msg("%s: float and double differ by %g relative", mf.e[i].name, rel);
        }
        npy_free_(&a);
        npy_free_(&b);
    }
    printf("# float vs double (%s): worst relative difference %.2e over %d tensors\n", args, worst, mf.n);
    free(mf.e);
    free(md.e);
    tu_rmtree(dir);
    free(dir);
}

static void test_float_and_double_builds_agree(void **state) {
    (void)state;
    compare_float_double(NULL, "walkthrough");   /* --weights WALK, the default run */
    compare_float_double("--weights " RAND " --prompt 'A dog saw' --block-size 5 --max-new-tokens 8 --ignore-eos", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contract_walkthrough),
        cmocka_unit_test(test_contract_random_block6),
        cmocka_unit_test(test_traces_are_reproducible_across_runs_and_builds),
        cmocka_unit_test(test_float_and_double_builds_agree),
    };
    return cmocka_run_group_tests_name("trace runs: contract names, reproducibility, float vs double", tests, NULL, NULL);
}
