/* mkhybrid.c - regenerate walkthrough/hybrid/README.md and README.zh.md (the
 * chapter "A recurrent state in the loop: the hybrid target") from their
 * templates, two traces of the hybrid set and the exercises' runs.
 *
 *   usage: mkhybrid TRACE_DIR PREFIX_TRACE_DIR VOCAB_TXT RUNS_TXT OUT_DIR [TEMPLATE_DIR]
 *
 * TRACE_DIR: `./dflash --weights toy_weights/hybrid --prompt "The cat sat"
 * --trace DIR` (what `make run-hybrid` runs, traced); the chapter tells its
 * round 1 (ROUND) and shows the state of linear layer LAYER, value head 0.
 * PREFIX_TRACE_DIR: a run whose prompt is the text round 1 keeps (`--prompt
 * "The cat sat on the mat" --max-new-tokens 1`, traced): its prefill's state
 * is the fresh computation the rolled-back state is compared with (its
 * prompt is checked to be that text). VOCAB_TXT: toy_weights/hybrid/vocab.txt.
 * RUNS_TXT: the exercises' runs, each a line "@@ NAME" followed by that run's
 * `--rounds` output (tools/docs.sh, gen_hybrid, writes it).
 *
 * The templates (TEMPLATE_DIR, default walkthrough/tools: hybrid.md.in,
 * hybrid.zh.md.in) follow mkwalk's rules (pagevars.h): a line that is
 * exactly @NAME@ is replaced by the block writer NAME, @name@ anywhere by a
 * value. An unknown name, a missing tensor, or a claim the prose makes that
 * the data no longer support (the checks in values()) writes nothing and
 * exits 1. Numbers are printed with fixed formats from values read out of the
 * traces (bit-reproducible); no libm call.
 */
#include "dflash.h"
#include "formats/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_CHECK_WHAT "the chapter's claim no longer holds"
#define PAGE_VOCAB     /* pagevars.h: words_load, word, mw, pwords */
#define PAGE_CHAPTER   /* pagevars.h: the editions; get, get_in, has, val, ival; the runs */
#include "walkthrough/tools/pagevars.h"

#define ROUND 1          /* the round the chapter tells */
#define LAYER 0          /* the linear layer whose state is shown */
#define SHOW 4           /* state entries shown: head 0, row 0, columns 0..SHOW-1 */
#define MAXB 16
#define MAXR 64

/* the traces: TDIR (pagevars.h: get, has) and the prefix run's */
static const char *PDIR;

/* ---- words: vocab.txt, one per line (pagevars.h: words_load, word, pwords) */
/* a token as a code span (mw): `mat`; one outside vocab.txt is flagged */
static const char *w(long id) {
    if (id < 0 || id >= NVOC) flag_bad("token id %ld outside vocab.txt", id);
    return mw(id);
}

/* ---- the run ----------------------------------------------------------- */
static struct {
    int n, n_out, B, R, L, K, Hv, dk, dv, Hkv, d;
    long prompt[64], out[256];
    int start[MAXR], acc[MAXR];
    long block[MAXB], posterior[MAXB], match[MAXB], cumprod[MAXB];
    int linear[64], n_linear;   /* the linear layers */
    int full[64], n_full;
} RUN;

static void read_run(void) {
    const NpyValues *in = get("input_ids");
    RUN.n = (int)in->n;
    check(RUN.n > 0 && RUN.n <= 64, "a prompt of 1..64 tokens");
    for (int i = 0; i < RUN.n && i < 64; i++) RUN.prompt[i] = ival(in, i);
    const NpyValues *o = get("output_ids");
    RUN.n_out = (int)o->n < 256 ? (int)o->n : 256;
    for (int i = 0; i < RUN.n_out; i++) RUN.out[i] = ival(o, i);
    RUN.B = (int)get("verify%d.input_ids", ROUND)->n;
    check(RUN.B >= 3 && RUN.B <= MAXB, "block size %d in 3..%d", RUN.B, MAXB);
    while (RUN.R < MAXR && has("verify%d.acceptance_length", RUN.R + 1)) {
        RUN.R++;
        RUN.start[RUN.R - 1] = (int)ival(get("verify%d.position_ids", RUN.R), 0);
        RUN.acc[RUN.R - 1] = (int)ival(get("verify%d.acceptance_length", RUN.R), 0);
    }
    for (int l = 0; l < 64; l++) {
        if (has("verify%d.layers.%d.linear_attn.state_in", ROUND, l)) RUN.linear[RUN.n_linear++] = l;
        else if (has("verify%d.layers.%d.self_attn.q", ROUND, l)) RUN.full[RUN.n_full++] = l;
        else break;
        RUN.L = l + 1;
    }
    check(RUN.n_linear > 0 && RUN.n_full > 0 && RUN.linear[0] == LAYER, "the target has linear and full layers, layer %d linear", LAYER);
    for (int i = 0; i < RUN.B; i++) {
        RUN.block[i] = ival(get("verify%d.input_ids", ROUND), i);
        RUN.posterior[i] = ival(get("verify%d.sampled", ROUND), i);
    }
    for (int i = 0; i + 1 < RUN.B; i++) {
        RUN.match[i] = ival(get("verify%d.match", ROUND), i);
        RUN.cumprod[i] = ival(get("verify%d.cumprod", ROUND), i);
        check(RUN.block[i + 1] == ival(get("draft%d.sampled", ROUND), i), "verify input %d is the draft's proposal", i + 1);
        check(RUN.match[i] == (RUN.block[i + 1] == RUN.posterior[i]), "match[%d] = (proposal %d == posterior[%d])", i, i + 1, i);
        check(RUN.cumprod[i] == (RUN.match[i] && (i == 0 || RUN.cumprod[i - 1])), "cumprod[%d]", i);
    }
    const NpyValues *s = get("verify%d.layers.%d.linear_attn.state_in", ROUND, LAYER);
    check(s->ndim == 3, "a state is [Hv, dk, dv]");
    RUN.Hv = (int)s->shape[0], RUN.dk = (int)s->shape[1], RUN.dv = (int)s->shape[2];
    const NpyValues *ci = get("verify%d.layers.%d.linear_attn.conv_in", ROUND, LAYER);
    RUN.K = (int)ci->shape[0] - RUN.B + 1;
    const NpyValues *k = get("verify%d.layers.%d.self_attn.k", ROUND, RUN.full[0]);
    check(k->ndim == 3, "k is [Hkv, T, d]");
    RUN.Hkv = (int)k->shape[0], RUN.d = (int)k->shape[2];
}

/* ---- the exercises' runs: "@@ NAME" then its --rounds output ------------ */
typedef struct {
    char name[32];
    int rounds, replayed, forwards;
    char tau[16];
    char first_rb[160];       /* round 1's "state after position N (...)" */
} ExRun;
static ExRun EX[8];
static int NEX;
static void read_runs(const char *path) {
    char *text;
    size_t len;
    if (file_read_all(path, &text, &len) != 0) { flag_bad("%s", dflash_errmsg); return; }
    ExRun *r = NULL;
    for (char *p = text, *l; (l = cut_line(&p));) {
        char *q;
        if (!strncmp(l, "@@ ", 3) && NEX < 8) {
            r = &EX[NEX++];
            memset(r, 0, sizeof *r);
            snprintf(r->name, sizeof r->name, "%s", l + 3);
        } else if (r && !strncmp(l, "round ", 6)) {
            r->rounds++;
        } else if (r && (q = strstr(l, "state after position "))) {
            r->replayed += strstr(l, "replayed over") != NULL;
            char *end = strchr(q, ')');
            if (!r->first_rb[0] && end) snprintf(r->first_rb, sizeof r->first_rb, "%.*s", (int)(end + 1 - q), q);
        } else if (r) {
            summary_line(l, &r->forwards, r->tau);
        }
    }
    free(text);
}
static const ExRun *ex(const char *name) {
    for (int k = 0; k < NEX; k++)
        if (!strcmp(EX[k].name, name)) {
            if (!EX[k].tau[0] || !EX[k].first_rb[0]) flag_bad("run %s: no rollback line or no summary line", name);
            return &EX[k];
        }
    flag_bad("RUNS_TXT: no run %s", name);
    static ExRun none;
    return &none;
}

/* ---- values ------------------------------------------------------------- */
static const char *f6(double x) { static char b[16][32]; static int k; char *o = b[k++ % 16]; snprintf(o, 32, "%.6f", x); return o; }
static double maxdiff(const NpyValues *a, const NpyValues *b) {
    if (a->n != b->n) { flag_bad("two states of %zu and %zu values", a->n, b->n); return 0; }
    double m = 0;
    for (size_t i = 0; i < a->n; i++) {
        double d = a->f[i] - b->f[i];
        if (d < 0) d = -d;
        if (d > m) m = d;
    }
    return m;
}
static const NpyValues *S_IN, *S_OUT, *S_RB, *S_FRESH, *S_NEXT;

static void values(void) {
    int B = RUN.B, acc = RUN.acc[ROUND - 1], s0 = RUN.start[ROUND - 1], p = s0 + acc;
    check(ROUND == 1 && s0 == RUN.n, "round 1 starts after the prompt");
    check(acc >= 1 && acc + 1 < B, "round %d accepts some proposals and rejects one (acc %d of %d)", ROUND, acc, B - 1);
    def("round", "%d", ROUND);
    def("round_next", "%d", ROUND + 1);
    def("layer", "%d", LAYER);
    def("n", "%d", RUN.n);
    def("n_1", "%d", RUN.n - 1);
    def("prompt", "%s", pwords(RUN.prompt, RUN.n));
    {
        int m = RUN.n_out;
        while (m > RUN.n && RUN.out[m - 1] == 0) m--;   /* the text without the stop id */
        def("output", "%s", pwords(RUN.out + RUN.n, m - RUN.n));
    }
    def("B", "%d", B);
    def("B_1", "%d", B - 1);
    def("L", "%d", RUN.L);
    def("rounds", "%d", RUN.R);
    {
        long ls[64], fs[64];
        for (int i = 0; i < RUN.n_linear; i++) ls[i] = RUN.linear[i];
        for (int i = 0; i < RUN.n_full; i++) fs[i] = RUN.full[i];
        def("linear_layers", "%s", ints(ls, RUN.n_linear, ","));
        def("full_layers", "%s", ints(fs, RUN.n_full, ", "));
        def("n_linear", "%d", RUN.n_linear);
        def("n_full", "%d", RUN.n_full);
    }
    def("K", "%d", RUN.K);
    def("K_1", "%d", RUN.K - 1);
    def("Hv", "%d", RUN.Hv);
    def("dk", "%d", RUN.dk);
    def("dv", "%d", RUN.dv);
    def("state_n", "%d", RUN.Hv * RUN.dk * RUN.dv);
    def("kv_row", "%d", 2 * RUN.Hkv * RUN.d);
    def("Hkv", "%d", RUN.Hkv);
    def("d", "%d", RUN.d);
    def("kv_256", "%d", 256 * 2 * RUN.Hkv * RUN.d);
    check(256 * 2 * RUN.Hkv * RUN.d > RUN.Hv * RUN.dk * RUN.dv, "at 256 positions a full layer's K/V outgrows a linear layer's state");
    /* round 1 */
    def("start", "%d", s0);
    def("block_last", "%d", s0 + B - 1);
    def("anchor", "%s", w(RUN.block[0]));
    def("acc", "%d", acc);
    def("acc1", "%d", acc + 1);
    def("p", "%d", p);
    def("p_next", "%d", p + 1);
    def("before", "%d", s0 - 1);
    def("rejected", "%s", w(RUN.block[acc + 1]));
    def("rejected_pos", "%d", s0 + acc + 1);
    def("bonus", "%s", w(RUN.posterior[acc]));
    def("kept", "%s", pwords(RUN.block, acc + 1));
    def("kept_text", "%s", pwords(RUN.out, p + 1));
    def("discarded", "%d", B - acc - 2);
    def("conv_lo", "%d", p - RUN.K + 2);
    def("conv_rows_lo", "%d", acc + 1);
    def("conv_rows_hi", "%d", acc + RUN.K - 1);
    def("whole_last", "%d", s0 + B - 1);
    /* the states: before the verify (after position s0 - 1), after the whole
     * block (after s0 + B - 1), after the rollback (after p), a fresh prefill of 0..p */
    const NpyValues *pin = get_in(PDIR, "input_ids");
    check((int)pin->n == p + 1, "the prefix run's prompt is the %d tokens round %d keeps", p + 1, ROUND);
    for (int i = 0; i <= p && i < (int)pin->n; i++)
        check(ival(pin, i) == RUN.out[i], "the prefix run's token %d is the output's", i);
    double d_rb = maxdiff(S_RB, S_FRESH), d_out = maxdiff(S_OUT, S_FRESH), d_in = maxdiff(S_IN, S_FRESH);
    check(d_rb == 0, "the rolled-back state equals the fresh prefill's, bit for bit (max diff %g)", d_rb);
    check(d_out > 1e-3 && d_in > 1e-3, "the whole block's state and the state before differ from it");
    check(maxdiff(S_NEXT, S_RB) == 0, "round %d's verify starts from round %d's rolled-back state", ROUND + 1, ROUND);
    def("d_out", "%s", f6(d_out));
    def("d_in", "%s", f6(d_in));
    /* the conv window: conv_in rows acc+1 .. acc+K-1 */
    {
        const NpyValues *ci = get("verify%d.layers.%d.linear_attn.conv_in", ROUND, LAYER);
        const NpyValues *cs = get("verify%d.rollback.layers.%d.conv_state", ROUND, LAYER);
        size_t C = (size_t)ci->shape[1], same = 1;
        for (size_t i = 0; i < (size_t)(RUN.K - 1) * C; i++) same &= val(cs, i) == val(ci, (size_t)(acc + 1) * C + i);
        check((int)same, "the rolled-back conv window is conv_in's rows %d..%d", acc + 1, acc + RUN.K - 1);
        def("C", "%zu", C);
    }
    /* each round's rollback position */
    {
        int replayed = 0;
        for (int r = 0; r < RUN.R; r++) replayed += RUN.acc[r] + 1 < B;
        def("replayed", "%d", replayed);
        check(replayed >= RUN.R - 1 && replayed < RUN.R, "every round but one replays");
    }
    /* the exercises */
    const ExRun *b2 = ex("b2");
    def("b2_rounds", "%d", b2->rounds);
    def("b2_replayed", "%d", b2->replayed);
    def("b2_tau", "%s", b2->tau);
    def("b2_first", "%s", b2->first_rb);
    check(b2->replayed == 0, "at block 2 no round replays");
    const ExRun *g = ex("b4");
    check(g->rounds == RUN.R && g->replayed == RUN.R - 1, "the runs' block-4 run is the traced one");
}

/* ---- the tables (P: pagevars.h) ---------------------------------------------- */

static void w_verify_table(void) {
    int acc = RUN.acc[ROUND - 1], s0 = RUN.start[ROUND - 1];
    P("| i | %s | %s | %s | match | %s |\n|---:|---:|---|---|:-:|---|\n", T("position", "位置"),
      T("verified (block in, then the draft's)", "验证的 token（输入 block，再是 draft 的提议）"),
      T("target: argmax of row i − 1", "target：第 i − 1 行的 argmax"), T("what happens", "结果"));
    P("| 0 | %d | %s | | | %s |\n", s0, w(RUN.block[0]), T("the anchor", "锚点"));
    for (int i = 1; i < RUN.B; i++) {
        const char *what = i <= acc ? T("**accepted**", "**接受**")
                         : i == acc + 1 ? T("**rejected**: the target's token is the bonus", "**拒绝**：target 的 token 成为 bonus")
                         : T("discarded", "丢弃");
        P("| %d | %d | %s | %s | %ld | %s |\n", i, s0 + i, w(RUN.block[i]), w(RUN.posterior[i - 1]), RUN.match[i - 1], what);
    }
}

static void w_state_table(void) {
    int acc = RUN.acc[ROUND - 1], s0 = RUN.start[ROUND - 1], p = s0 + acc;
    P("| %s | %s |", T("state of layer", "层"), T("after position", "位置之后"));
    for (int e = 0; e < SHOW; e++) P(" S[0, 0, %d] |", e);
    P("\n|---|---:|");
    for (int e = 0; e < SHOW; e++) P("---:|");
    P("\n");
    struct { const NpyValues *s; const char *en, *zh; int pos; } rows[4] = {
        {S_IN, "before the verify (`state_in`)", "验证之前（`state_in`）", s0 - 1},
        {S_OUT, "after the whole block (`state_out`)", "整个 block 之后（`state_out`）", s0 + RUN.B - 1},
        {S_RB, "after the rollback (`rollback…state`)", "回滚之后（`rollback…state`）", p},
        {S_FRESH, "a fresh prefill of the kept text", "对保留文本重新 prefill", p},
    };
    for (int k = 0; k < 4; k++) {
        P("| %s | %d |", T(rows[k].en, rows[k].zh), rows[k].pos);
        for (int e = 0; e < SHOW; e++) P(" %s |", f6(val(rows[k].s, (size_t)e)));
        P("\n");
    }
    (void)acc;
}

static void w_rounds_table(void) {
    P("| %s | %s | %s | %s | %s |\n|---:|---:|---:|---:|---|\n", T("round", "轮"), T("verified positions", "验证的位置"),
      T("accepted", "接受"), T("state after position", "状态回到位置之后"), T("replayed tokens", "重放的 token"));
    for (int r = 0; r < RUN.R; r++) {
        int s0 = RUN.start[r], acc = RUN.acc[r];
        char rep[64];
        if (acc + 1 < RUN.B) snprintf(rep, sizeof rep, T("%d of %d", "%d / %d"), acc + 1, RUN.B);
        else snprintf(rep, sizeof rep, "%s", T("none: all kept", "无：全部保留"));
        P("| %d | %d..%d | %d | %d | %s |\n", r + 1, s0, s0 + RUN.B - 1, acc, s0 + acc, rep);
    }
}

static const Block BLOCKS[] = {
    {"VERIFY_TABLE", w_verify_table}, {"STATE_TABLE", w_state_table}, {"ROUNDS_TABLE", w_rounds_table},
};

static void expand(const char *path) { fill_template(path, BLOCKS, sizeof BLOCKS / sizeof BLOCKS[0], NULL); }

int main(int argc, char **argv) {
    const char *tdir = template_dir_arg(argc, argv, 5, "mkhybrid TRACE_DIR PREFIX_TRACE_DIR VOCAB_TXT RUNS_TXT OUT_DIR");
    if (!tdir) return 2;
    TDIR = argv[1], PDIR = argv[2];
    if (words_load(argv[3]) != 0) flag_bad("%s", dflash_errmsg);
    read_run();
    S_IN = get("verify%d.layers.%d.linear_attn.state_in", ROUND, LAYER);
    S_OUT = get("verify%d.layers.%d.linear_attn.state_out", ROUND, LAYER);
    S_RB = get("verify%d.rollback.layers.%d.state", ROUND, LAYER);
    S_NEXT = get("verify%d.layers.%d.linear_attn.state_in", ROUND + 1, LAYER);
    S_FRESH = get_in(PDIR, "prefill.layers.%d.linear_attn.state_out", LAYER);
    read_runs(argv[4]);
    static const char *const tpl[2] = {"hybrid.md.in", "hybrid.zh.md.in"};
    int rc = write_editions("mkhybrid", argv[5], tdir, tpl, values, expand);
    tensors_free();
    words_free();
    return rc;
}
