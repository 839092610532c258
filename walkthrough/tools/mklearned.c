/* mklearned.c - regenerate walkthrough/learned/README.md and README.zh.md
 * (the chapter "One round on English text") from their templates, a trace
 * of the learned pair's run, its tokenizer, the held-out prompts and the
 * committed held-out evaluation.
 *
 *   usage: mklearned TRACE_DIR TOKENIZER_JSON HELDOUT_IDS EVAL_TSV RUNS_TXT OUT_DIR [TEMPLATE_DIR]
 *
 * TRACE_DIR: `./dflash --target toy_weights/learned/target --draft
 * toy_weights/learned/draft --ids <a held-out prompt> --max-new-tokens 64
 * --trace DIR` (what `make run-learned` runs, traced); the chapter tells
 * its round 1 (ROUND below). HELDOUT_IDS: toy_weights/learned/heldout.ids
 * (the page names the line the prompt is). EVAL_TSV:
 * toy_weights/learned/eval.tsv (dflash eval's rows). RUNS_TXT: the
 * exercises' runs of the same prompt, each as a line "@@ NAME" followed by
 * that run's `--rounds` output (tools/docs.sh, gen_learned, writes it): the
 * answers the exercises state are read from there.
 *
 * The templates (TEMPLATE_DIR, default walkthrough/tools: learned.md.in,
 * learned.zh.md.in) follow mkwalk's rules (mkwalk.c, section 6): a line that
 * is exactly @NAME@ is replaced by the block writer NAME (the same tables
 * for both editions; T(en, zh) picks a header's words), @name@ anywhere by
 * a value. An unknown name, a missing tensor, or a claim the prose makes
 * that the data no longer support (the checks in story()) writes nothing
 * and exits 1.
 *
 * Determinism: the numbers are printed with fixed formats from values read
 * out of the trace (bit-reproducible), the TSV and the runs' text, or from
 * + - / of them (strtod and printf's correctly rounded conversions); no
 * libm call. The pages are byte-identical wherever the
 * trace is.
 */
#include "dflash.h"
#include "formats/files.h"
#include "formats/tracenames.h"
#include "tokenizer/tokenizer.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_CHECK_WHAT "the chapter's claim no longer holds"
#define PAGE_CHAPTER   /* pagevars.h: the editions; get, has, val, ival; the runs */
#include "walkthrough/tools/pagevars.h"   /* flag_bad, check, def, the template, the pages' files: shared with the other generators */

#define ROUND 1          /* the round the chapter tells */
#define LAYER 0          /* the draft layer whose head is shown */
#define MAXB 64

/* ---- errors: the first failure is kept, nothing is written ---------------- */
/* check: pagevars.h */

/* ---- tensors: TRACE_DIR/<name>.npy (pagevars.h: get, has, val, ival) -- */

/* ---- token pieces: the tokenizer's bytes, escaped for a code span ------- */
static Tokenizer TOK;
#define RBUF 4096
static char *rbuf(void) {
    static char bufs[32][RBUF];
    static int k;
    return bufs[k++ % 32];
}
/* the bytes of ids[0..n), printable: \n \t \xNN, "`" as \x60, and in a table "|" as "\|" */
static int IN_TABLE;
static const char *esc_ids(const long *ids, int n) {
    int iv[MAXB * 8];
    if (n > MAXB * 8) { flag_bad("%d tokens to print, at most %d", n, MAXB * 8); n = MAXB * 8; }
    for (int i = 0; i < n; i++) iv[i] = (int)ids[i];
    char *bytes = NULL;
    size_t len = 0;
    char *o = rbuf();
    o[0] = 0;
    if (tok_decode(&TOK, iv, (size_t)n, &bytes, &len) != 0) { flag_bad("%s", dflash_errmsg); return o; }
    size_t w = 0;
    if (len * 4 + 1 > RBUF) flag_bad("a text of %zu bytes to print", len);
    for (size_t i = 0; i < len && w + 8 < RBUF; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c == '\n') w += (size_t)snprintf(o + w, RBUF - w, "\\n");
        else if (c == '\t') w += (size_t)snprintf(o + w, RBUF - w, "\\t");
        else if (c == '|' && IN_TABLE) w += (size_t)snprintf(o + w, RBUF - w, "\\|");
        else if (c < 0x20 || c >= 0x7f || c == '`') w += (size_t)snprintf(o + w, RBUF - w, "\\x%02x", c);
        else o[w++] = (char)c, o[w] = 0;
    }
    free(bytes);
    return o;
}
/* one token as a code span with its spaces visible: `" man"` */
static const char *piece(long id) {
    char *b = rbuf();
    snprintf(b, RBUF, "`\"%s\"`", esc_ids(&id, 1));
    return b;
}

/* ---- the run ----------------------------------------------------------- */
static struct {
    int n;                    /* prompt length */
    long prompt[MAXB * 4];
    int prompt_line;          /* its line in HELDOUT_IDS (1-based) */
    int B, V, H, S, Lc, start, acc, R, n_out, new_tokens;
    long block[MAXB], posterior[MAXB], match[MAXB], cumprod[MAXB];
    double tau;
    double run_acc[MAXB];     /* acceptance_per_position */
    int head;                 /* the head shown */
    double head_ctx;          /* its mean weight on the context, over the mask rows */
} RUN;

static const NpyValues *attn(void) { return get("draft%d.layers.%d." TN_ATTN_WEIGHTS, ROUND, LAYER); }
static double A(int h, int q, int k) { return val(attn(), ((size_t)h * RUN.B + q) * RUN.S + k); }

/* the context key with the largest weight in head h's row q */
static int ctx_argmax(int h, int q) {
    int top = 0;
    for (int k = 1; k < RUN.Lc; k++)
        if (A(h, q, k) > A(h, q, top)) top = k;
    return top;
}

static int has_round(int r) { return has("verify%d." TN_ACCEPTANCE, r); }

static void read_run(const char *heldout) {
    const NpyValues *in = get("input_ids");
    RUN.n = (int)in->n;
    check(RUN.n > 0 && RUN.n <= MAXB * 4, "a prompt of 1..%d tokens", MAXB * 4);
    for (int i = 0; i < RUN.n && i < MAXB * 4; i++) RUN.prompt[i] = ival(in, i);
    /* which held-out line the prompt is */
    char *text;
    size_t len;
    if (file_read_all(heldout, &text, &len) != 0) { flag_bad("%s", dflash_errmsg); return; }
    int line = 0;
    for (char *p = text; *p && !RUN.prompt_line;) {
        line++;
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        int k = 0, same = 1;
        for (char *s = p; *s;) {
            char *end;
            long x = strtol(s, &end, 10);
            if (end == s) break;
            if (k >= RUN.n || x != RUN.prompt[k]) same = 0;
            k++;
            s = end;
        }
        if (same && k == RUN.n) RUN.prompt_line = line;
        p = e ? e + 1 : p + strlen(p);
    }
    free(text);
    check(RUN.prompt_line > 0, "the traced prompt is a line of %s", heldout);

    RUN.B = (int)get("verify%d." TN_INPUT_IDS, ROUND)->n;
    check(RUN.B >= 4 && RUN.B <= MAXB, "block size %d in 4..%d", RUN.B, MAXB);
    const NpyValues *lg = get("verify%d." TN_LOGITS, ROUND);
    RUN.V = RUN.B ? (int)(lg->n / (size_t)RUN.B) : 0;
    const NpyValues *a = attn();
    RUN.H = a->ndim == 3 ? (int)a->shape[0] : 0;
    RUN.S = a->ndim == 3 ? (int)a->shape[2] : 0;
    RUN.Lc = (int)get("draft%d." TN_TARGET_HIDDEN_RAW, ROUND)->shape[0];
    RUN.start = (int)ival(get("verify%d." TN_POSITION_IDS, ROUND), 0);
    RUN.acc = (int)ival(get("verify%d." TN_ACCEPTANCE, ROUND), 0);
    check(ROUND != 1 || (RUN.start == RUN.n && RUN.Lc == RUN.n && RUN.S == RUN.n + RUN.B),
          "round 1: the context is the prompt (start %d, Lc %d, S %d)", RUN.start, RUN.Lc, RUN.S);
    for (int i = 0; i < RUN.B; i++) {
        RUN.block[i] = ival(get("verify%d." TN_INPUT_IDS, ROUND), i);
        RUN.posterior[i] = ival(get("verify%d." TN_SAMPLED, ROUND), i);
        /* greedy: the posterior is the argmax of the target's logits (first index on ties) */
        int best = 0;
        for (int v = 1; v < RUN.V; v++)
            if (val(lg, (size_t)i * RUN.V + v) > val(lg, (size_t)i * RUN.V + best)) best = v;
        check(best == RUN.posterior[i], "verify%d.sampled[%d] is the argmax of verify%d.logits[%d]", ROUND, i, ROUND, i);
    }
    check(RUN.block[0] == ival(get("draft%d." TN_BLOCK_OUTPUT_IDS, ROUND), 0), "the anchor is the block's first id");
    for (int i = 0; i + 1 < RUN.B; i++) {
        RUN.match[i] = ival(get("verify%d." TN_MATCH, ROUND), i);
        RUN.cumprod[i] = ival(get("verify%d." TN_CUMPROD, ROUND), i);
        check(RUN.block[i + 1] == ival(get("draft%d." TN_SAMPLED, ROUND), i), "verify input %d is the draft's proposal", i + 1);
        check(RUN.match[i] == (RUN.block[i + 1] == RUN.posterior[i]), "match[%d] = (proposal %d == posterior[%d])", i, i + 1, i);
        check(RUN.cumprod[i] == (RUN.match[i] && (i == 0 || RUN.cumprod[i - 1])), "cumprod[%d]", i);
    }
    int acc = 0;
    while (acc + 1 < RUN.B && RUN.cumprod[acc]) acc++;
    check(acc == RUN.acc, "acceptance_length %d = the cumprod's ones %d", RUN.acc, acc);
    while (RUN.R < 100000 && has_round(RUN.R + 1)) RUN.R++;
    long tot = 0;
    for (int r = 1; r <= RUN.R; r++) tot += ival(get("verify%d." TN_ACCEPTANCE, r), 0) + 1;
    RUN.tau = RUN.R ? (double)tot / RUN.R : 0;
    const NpyValues *ap = get("acceptance_per_position");
    for (int i = 0; i + 1 < RUN.B; i++) RUN.run_acc[i] = val(ap, i);
    RUN.n_out = (int)get("output_ids")->n;
    RUN.new_tokens = RUN.n_out - RUN.n;
    /* the head shown: of layer LAYER, the one whose mask rows put the most
     * weight on the context (mean over the rows 1..B-1): the head that reads
     * the target's features most */
    RUN.head_ctx = -1;
    for (int h = 0; h < RUN.H; h++) {
        double s = 0;
        for (int q = 1; q < RUN.B; q++)
            for (int k = 0; k < RUN.Lc; k++) s += A(h, q, k);
        s /= (RUN.B - 1);
        if (s > RUN.head_ctx) RUN.head_ctx = s, RUN.head = h;
    }
}

/* ---- the committed held-out evaluation: eval.tsv's rows ----------------- */
typedef struct {
    char T[16];
    int B, prompts, rounds;
    double tau, tau_se, speedup;
    double acc[MAXB], acc_se[MAXB];
    int n_acc;
} EvalRow;
static EvalRow EV[64];
static int NEV;

/* the fields of a TSV line (modified in place) */
static int split(char *line, char sep, char **f, int max) {
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p && n < max; p++)
        if (*p == sep) *p = 0, f[n++] = p + 1;
    return n;
}
static void read_eval(const char *path) {
    char *text;
    size_t len;
    if (file_read_all(path, &text, &len) != 0) { flag_bad("%s", dflash_errmsg); return; }
    char *col[32];
    int ncol = 0, first = 1;
    int iT = -1, iB = -1, ip = -1, ir = -1, it = -1, ise = -1, isp = -1, ia = -1, iase = -1;
    for (char *p = text; *p;) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        char *f[32];
        int n = split(p, '\t', f, 32);
        if (first) {
            ncol = n;
            for (int k = 0; k < n; k++) {
                col[k] = f[k];
                if (!strcmp(f[k], "T")) iT = k;
                if (!strcmp(f[k], "B")) iB = k;
                if (!strcmp(f[k], "prompts")) ip = k;
                if (!strcmp(f[k], "rounds")) ir = k;
                if (!strcmp(f[k], "tau")) it = k;
                if (!strcmp(f[k], "tau_se")) ise = k;
                if (!strcmp(f[k], "speedup")) isp = k;
                if (!strcmp(f[k], "acceptance")) ia = k;
                if (!strcmp(f[k], "acceptance_se")) iase = k;
            }
            (void)col;
            if (iT < 0 || iB < 0 || ip < 0 || ir < 0 || it < 0 || ise < 0 || isp < 0 || ia < 0 || iase < 0) {
                flag_bad("%s: a column is missing (T B prompts rounds tau tau_se speedup acceptance acceptance_se)", path);
                break;
            }
            first = 0;
        } else if (n == ncol && NEV < 64) {
            EvalRow *r = &EV[NEV++];
            snprintf(r->T, sizeof r->T, "%s", f[iT]);
            r->B = atoi(f[iB]), r->prompts = atoi(f[ip]), r->rounds = atoi(f[ir]);
            r->tau = strtod(f[it], NULL), r->tau_se = strtod(f[ise], NULL), r->speedup = strtod(f[isp], NULL);
            char *a[MAXB], *s[MAXB];
            int na = split(f[ia], ',', a, MAXB), ns = split(f[iase], ',', s, MAXB);
            r->n_acc = na == ns ? na : 0;
            for (int k = 0; k < r->n_acc; k++) {
                r->acc[k] = strtod(a[k], NULL);
                r->acc_se[k] = strtod(s[k], NULL);
            }
        }
        p = e ? e + 1 : p + strlen(p);
    }
    free(text);
}
static const EvalRow *eval_row(const char *T, int B) {
    for (int k = 0; k < NEV; k++)
        if (!strcmp(EV[k].T, T) && EV[k].B == B) return &EV[k];
    flag_bad("eval.tsv has no row T %s B %d", T, B);
    return NULL;
}

/* ---- the exercises' runs: "@@ NAME" then its --rounds output ------------ */
typedef struct {
    char name[32];
    char tau[16];             /* "tokens per round (tau): X" */
    int forwards, acc1;       /* target forward passes; round 1's accepted */
    char keep1[256];          /* round 1's "accepted K + bonus: keep [...] + "ID"" */
} ExRun;
static ExRun EX[8];
static int NEX;
static void read_runs(const char *path) {
    char *text;
    size_t len;
    if (file_read_all(path, &text, &len) != 0) { flag_bad("%s", dflash_errmsg); return; }
    ExRun *r = NULL;
    for (char *rest = text, *p; (p = cut_line(&rest));) {
        char *q;
        if (!strncmp(p, "@@ ", 3) && NEX < 8) {
            r = &EX[NEX++];
            memset(r, 0, sizeof *r);
            r->acc1 = -1;
            snprintf(r->name, sizeof r->name, "%s", p + 3);
        } else if (r && (q = strstr(p, "accepted ")) && r->acc1 < 0) {
            r->acc1 = atoi(q + 9);
            char *end = strchr(q, '"');
            end = end ? strchr(end + 1, '"') : NULL;
            if (end) snprintf(r->keep1, sizeof r->keep1, "%.*s", (int)(end + 1 - q), q);
        } else if (r) {
            summary_line(p, &r->forwards, r->tau);
        }
    }
    free(text);
}
static const ExRun *ex(const char *name) {
    for (int k = 0; k < NEX; k++)
        if (!strcmp(EX[k].name, name)) {
            if (!EX[k].tau[0] || EX[k].acc1 < 0) flag_bad("run %s: no round or no summary line", name);
            return &EX[k];
        }
    flag_bad("%s: no run %s", "RUNS_TXT", name);
    static ExRun none;
    return &none;
}

/* ---- values: @name@ ------------------------------------------------------ */
static const char *f2(double x) { char *b = rbuf(); snprintf(b, RBUF, "%.2f", x < 0.005 && x > -0.005 ? 0.0 : x); return b; }
static const char *f3(double x) { char *b = rbuf(); snprintf(b, RBUF, "%.3f", x); return b; }

static double logit(int row, long v) { return val(get("verify%d." TN_LOGITS, ROUND), (size_t)row * RUN.V + (size_t)v); }

/* the checks the prose relies on, and the values it prints */
static void values(void) {
    int B = RUN.B, acc = RUN.acc;
    long bonus = RUN.posterior[acc];
    def("round", "%d", ROUND);
    def("layer", "%d", LAYER);
    def("prompt_line", "%d", RUN.prompt_line);
    def("n", "%d", RUN.n);
    def("n_1", "%d", RUN.n - 1);
    def("prompt_ids", "%s", ints(RUN.prompt, RUN.n, " "));
    def("prompt_text", "%s", esc_ids(RUN.prompt, RUN.n));
    {
        const NpyValues *o = get("output_ids");
        long ids[MAXB * 4];
        int n = RUN.n_out < MAXB * 4 ? RUN.n_out : MAXB * 4;
        for (int i = 0; i < n; i++) ids[i] = ival(o, i);
        def("output_text", "%s", esc_ids(ids + RUN.n, n - RUN.n));
    }
    def("B", "%d", B);
    def("B_1", "%d", B - 1);
    def("V", "%d", RUN.V);
    def("H", "%d", RUN.H);
    def("S", "%d", RUN.S);
    def("rounds", "%d", RUN.R);
    def("forwards", "%d", RUN.R + 1);
    def("tau", "%s", f2(RUN.tau));
    def("new_tokens", "%d", RUN.new_tokens);
    def("start", "%d", RUN.start);
    def("block_last", "%d", RUN.start + B - 1);
    def("anchor", "%s", piece(RUN.block[0]));
    def("anchor_id", "%ld", RUN.block[0]);
    def("acc", "%d", acc);
    def("acc1", "%d", acc + 1);
    def("acc2", "%d", acc + 2);
    def("bonus", "%s", piece(bonus));
    def("bonus_id", "%ld", bonus);
    def("bonus_pos", "%d", RUN.start + acc + 1);
    def("next_start", "%d", RUN.start + acc + 1);
    def("kept_ids", "%s", ints(RUN.block, acc + 1, " "));
    {
        long k[MAXB + 1];
        for (int i = 0; i <= acc; i++) k[i] = RUN.block[i];
        k[acc + 1] = bonus;
        def("kept_text", "%s", esc_ids(k, acc + 2));
        def("accepted_text", "%s", esc_ids(RUN.block + 1, acc));
    }
    /* the round is instructive: some accepted, then a mismatch, whose target token is the bonus */
    check(acc >= 1 && acc < B - 1, "round %d accepts some proposals and rejects one (acc %d of %d)", ROUND, acc, B - 1);
    long wrong = acc + 1 < B ? RUN.block[acc + 1] : -1;
    def("wrong", "%s", piece(wrong));
    def("wrong_id", "%ld", wrong);
    def("wrong_logit", "%.4f", logit(acc, wrong));
    def("bonus_logit", "%.4f", logit(acc, bonus));
    {
        int rank = 1;   /* the draft's token among the target's: 1 + the number with a larger logit */
        for (int v = 0; v < RUN.V; v++) rank += logit(acc, v) > logit(acc, wrong);
        def("wrong_rank", "%d", rank);
        check(rank >= 2, "the rejected proposal is not the target's first choice");
    }
    /* proposals after the mismatch that match the target's token, and are thrown away */
    long later[MAXB];
    int nl = 0;
    for (int i = acc + 2; i < B; i++)
        if (RUN.match[i - 1]) later[nl++] = RUN.start + i;
    check(nl >= 1, "round %d has a matching proposal after its first mismatch", ROUND);
    def("later_pos", "%s", ints(later, nl, T(", ", "、")));
    def("later_n", nl == 1 ? T("%d proposal", "%d 个提议") : T("%d proposals", "%d 个提议"), nl);
    def("later_verb", "%s", nl == 1 ? "equals" : "equal");
    def("later_be", "%s", nl == 1 ? "is" : "are");
    def("later_where", nl == 1 ? T("position %s", "位置 %s") : T("positions %s", "位置 %s"), ints(later, nl, T(", ", "、")));
    def("n_later", "%d", nl);
    long nm = 0;
    for (int i = 0; i + 1 < B; i++) nm += RUN.match[i];
    def("n_match", "%ld", nm);
    /* the head */
    def("head", "%d", RUN.head);
    def("head_ctx", "%s", f2(RUN.head_ctx));
    {
        double anc = 0, blk = 0;
        for (int q = 1; q < B; q++) {
            anc += A(RUN.head, q, RUN.Lc);
            for (int k = RUN.Lc + 1; k < RUN.S; k++) blk += A(RUN.head, q, k);
        }
        def("head_anchor", "%s", f2(anc / (B - 1)));
        def("head_block", "%s", f2(blk / (B - 1)));
        check(blk / (B - 1) < anc / (B - 1) + RUN.head_ctx, "the head shown reads context and anchor more than masks");
    }
    def("Lc", "%d", RUN.Lc);
    def("start1", "%d", RUN.start + 1);
    def("start3", "%d", RUN.start + 3);
    def("B_4", "%d", B - 4);
    {
        long k[MAXB + 1];
        for (int i = 0; i <= acc; i++) k[i] = RUN.block[i];
        k[acc + 1] = bonus;
        long all[MAXB * 6];
        int n = 0;
        for (int i = 1; i < RUN.n; i++) all[n++] = RUN.prompt[i];   /* the text after <|endoftext|> */
        for (int i = 0; i <= acc + 1; i++) all[n++] = k[i];
        def("with_bonus", "%s", esc_ids(all, n));
        all[n - 1] = wrong;
        def("with_wrong", "%s", esc_ids(all, n));
    }
    /* the head's rows: q@start+1 looks most at the anchor; from q@start+3 on more than half of each row
     * is on the context; of the context keys, position 0 has the largest mean weight over the masks */
    {
        int h = RUN.head, top = 0;
        for (int k = 1; k < RUN.S; k++) if (A(h, 1, k) > A(h, 1, top)) top = k;
        check(top == RUN.Lc, "head %d: q@%d's largest weight is on the anchor", h, RUN.start + 1);
        for (int q = 3; q < B; q++) {
            double c = 0;
            for (int k = 0; k < RUN.Lc; k++) c += A(h, q, k);
            check(c > 0.5, "head %d: q@%d puts more than half on the context", h, RUN.start + q);
        }
        int best = 0;
        double bw = -1;
        for (int k = 0; k < RUN.Lc; k++) {
            double w = 0;
            for (int q = 1; q < B; q++) w += A(h, q, k);
            if (w > bw) bw = w, best = k;
        }
        /* row by row: the nearer masks' largest context weight is on position 0, the farther ones'
         * on the context key with the largest weight over all the masks */
        int sw = 3;
        while (sw < B && ctx_argmax(h, sw) == 0) sw++;
        for (int q = sw; q < B; q++) check(ctx_argmax(h, q) == best, "head %d: q@%d looks most at key %d", h, RUN.start + q, best);
        check(best > 0 && sw > 3 && sw < B, "head %d: the masks move from key 0 to key %d", h, best);
        def("ctx_top", "%d", best);
        def("ctx_top_piece", "%s", piece(RUN.prompt[best]));
        def("sink_last", "%d", RUN.start + sw - 1);
        def("top_first", "%d", RUN.start + sw);
    }
    /* of the rounds after this one, exactly one accepts more: the last, which crosses the end of a
     * fortune (its accepted proposals hold <|endoftext|>, the id every prompt starts with) */
    {
        int more = 0, last = RUN.R, lacc = (int)ival(get("verify%d." TN_ACCEPTANCE, last), 0);
        for (int r = ROUND + 1; r <= RUN.R; r++) more += ival(get("verify%d." TN_ACCEPTANCE, r), 0) >= acc;
        check(last > ROUND && more == 1 && lacc > acc, "of the later rounds only the last (%d) accepts as many as round %d, and more", last,
              ROUND);
        const NpyValues *in = get("verify%d." TN_INPUT_IDS, last);
        int eot = 0;
        for (int i = 1; i <= lacc && i < (int)in->n; i++) eot |= ival(in, i) == RUN.prompt[0];
        check(eot, "round %d accepts the <|endoftext|> that ends the fortune", last);
        def("last_round", "%d", last);
        def("last_acc", "%d", lacc);
        long k[MAXB];
        int nk = 0;
        for (int i = 0; i <= lacc && i < (int)in->n && nk < MAXB; i++) k[nk++] = ival(in, i);
        def("last_text", "%s", esc_ids(k, nk));
    }
    /* the eval */
    const EvalRow *e2 = eval_row("0", 2), *e4 = eval_row("0", 4), *e8 = eval_row("0", 8), *e16 = eval_row("0", 16);
    const EvalRow *t16 = eval_row("0.7", 16), *t4 = eval_row("0.7", 4);
    if (e2 && e4 && e8 && e16 && t16 && t4) {
        def("eval_prompts", "%d", e16->prompts);
        def("eval_tau2", "%s", f2(e2->tau));
        def("eval_tau4", "%s", f2(e4->tau));
        def("eval_tau8", "%s", f2(e8->tau));
        def("eval_tau16", "%s", f2(e16->tau));
        def("eval_speed4", "%s", f2(e4->speedup));
        def("eval_speed16", "%s", f2(e16->speedup));
        def("eval_acc1", "%s", f2(e16->acc[0]));
        def("eval_acc2", "%s", f2(e16->acc[1]));
        def("eval_acc3", "%s", f2(e16->acc[2]));
        def("eval_t07_tau16", "%s", f2(t16->tau));
        def("eval_t07_tau4", "%s", f2(t4->tau));
        def("eval_t07_acc1", "%s", f2(t16->acc[0]));
        check(e2->tau < e4->tau && e4->tau < e8->tau && e8->tau < e16->tau, "eval: greedy tau grows with the block");
        const EvalRow *all[4] = {e2, e4, e8, e16}, *best = e2;
        for (int k = 1; k < 4; k++)
            if (all[k]->speedup > best->speedup) best = all[k];
        def("eval_best_B", "%d", best->B);
        def("eval_best_speed", "%s", f2(best->speedup));
        check(e4->speedup > e16->speedup, "eval: block 4 is faster than block 16 by the cost model");
        check(t16->tau < e16->tau && t16->acc[0] < e16->acc[0], "eval: T 0.7 accepts less than greedy");
        check(e16->n_acc == B - 1, "eval's block-16 row has %d positions", B - 1);
        check(e16->acc[0] > 0.5 && e16->acc[0] < 0.75, "eval: the first proposal is accepted in more than half of the rounds");
        check(fabs(acc + 1 - e16->tau) < 1, "round %d is within a token of the mean round", ROUND);
        check(RUN.tau < e16->tau, "the run's tau is below the held-out mean");
        check(t16->acc[1] < 0.05, "eval: at T 0.7 almost nothing past position 1 is accepted");
    }
    /* the exercises' runs */
    const ExRun *g = ex("greedy"), *b4 = ex("b4"), *t7 = ex("t07");
    char tau[16];
    snprintf(tau, sizeof tau, "%s", f2(RUN.tau));
    check(!strcmp(g->tau, tau) && g->forwards == RUN.R + 1, "the runs' greedy run is the traced one (tau %s, %s)", g->tau, tau);
    def("b4_tau", "%s", b4->tau);
    def("b4_forwards", "%d", b4->forwards);
    def("b4_keep1", "%s", b4->keep1);
    def("t07_tau", "%s", t7->tau);
    def("t07_forwards", "%d", t7->forwards);
    def("t07_keep1", "%s", t7->keep1);
    /* the target's rows are causal: the same first 3 proposals would be accepted as far as at block
     * B; fewer accepted means the draft proposed differently with 3 masks */
    def("b4_miss", "%d", b4->acc1 + 1);
    check(b4->acc1 >= 0 && b4->acc1 < (acc < 3 ? acc : 3), "block 4's round 1 accepts fewer than block %d's (%d / %d)", B,
          b4->acc1, acc);
    check(strtod(b4->tau, NULL) < RUN.tau, "block 4 gives a lower tau than block %d on this prompt", B);
    check(b4->forwards == RUN.R + 1, "block 4 takes as many target forwards as block %d (%d / %d)", B, b4->forwards, RUN.R + 1);
    check(strtod(t7->tau, NULL) < RUN.tau, "temperature 0.7 gives a lower tau than greedy on this prompt");
    check(t7->acc1 == 0, "at temperature 0.7 round 1 accepts nothing");
}

/* ---- the tables ------------------------------------------------------------ */

static void w_prompt_table(void) {
    P("| %s | id | %s |\n|---:|---:|---|\n", T("position", "位置"), T("piece (its bytes)", "片段（它的字节）"));
    for (int i = 0; i < RUN.n; i++) P("| %d | %ld | %s |\n", i, RUN.prompt[i], piece(RUN.prompt[i]));
}

static void w_verify_table(void) {
    P("| i | %s | %s | %s | %s | match | cumprod | %s |\n|---:|---:|---|---|---|:-:|:-:|---|\n", T("position", "位置"),
      T("block in", "输入 block"), T("draft proposes", "draft 提议"),
      T("target: argmax of row i − 1", "target：第 i − 1 行的 argmax"), T("what happens", "结果"));
    P("| 0 | %d | %s | | | | | %s |\n", RUN.start, piece(RUN.block[0]), T("the anchor (already the target's)", "锚点（本来就是 target 的 token）"));
    for (int i = 1; i < RUN.B; i++) {
        const char *what = i <= RUN.acc ? T("**accepted**", "**接受**")
                         : i == RUN.acc + 1 ? T("**rejected**: the target's token is the bonus", "**拒绝**：target 的 token 成为 bonus")
                         : RUN.match[i - 1] ? T("discarded, though it matches", "丢弃（虽然相同）")
                         : T("discarded", "丢弃");
        P("| %d | %d | `<mask>` | %ld %s | %ld %s | %ld | %ld | %s |\n", i, RUN.start + i, RUN.block[i], piece(RUN.block[i]),
          RUN.posterior[i - 1], piece(RUN.posterior[i - 1]), RUN.match[i - 1], RUN.cumprod[i - 1], what);
    }
    P("| %d | %d | | | %ld %s | | | %s |\n", RUN.B, RUN.start + RUN.B, RUN.posterior[RUN.B - 1], piece(RUN.posterior[RUN.B - 1]),
      T("the bonus had every proposal been accepted: unused", "若全部接受，这才是 bonus：本轮未用"));
}

static void w_attn_table(void) {
    int h = RUN.head, Lc = RUN.Lc;
    P("| %s |", T("query (position: block in)", "query（位置：输入）"));
    for (int k = 0; k < Lc; k++) P(" k@%d |", k);
    P(" k@%d%s | %s | %s |\n|---|", RUN.start, T(" (anchor)", "（锚点）"), T("the masks' keys", "各 mask 的 key 之和"),
      T("context, sum", "上下文之和"));
    for (int k = 0; k < Lc + 3; k++) P("---:|");
    P("\n| %s |", T("*key's token*", "*key 的 token*"));
    for (int k = 0; k < Lc; k++) P(" %s |", piece(RUN.prompt[k]));
    P(" %s | `<mask>` ×%d | |\n", piece(RUN.block[0]), RUN.B - 1);
    for (int q = 0; q < RUN.B; q++) {
        P("| q@%d: %s |", RUN.start + q, q ? "`<mask>`" : piece(RUN.block[0]));
        double ctx = 0, blk = 0;
        for (int k = 0; k < Lc; k++) { P(" %s |", f2(A(h, q, k))); ctx += A(h, q, k); }
        for (int k = Lc + 1; k < RUN.S; k++) blk += A(h, q, k);
        P(" %s | %s | %s |\n", f2(A(h, q, Lc)), f2(blk), f2(ctx));
    }
}

static void w_acc_table(void) {
    const EvalRow *e = eval_row("0", RUN.B), *t = eval_row("0.7", RUN.B);
    if (!e || !t) return;
    P("| i | %s | %s | %s | %s |\n|---:|:-:|---:|---:|---:|\n", T("this round (cumprod)", "本轮（cumprod）"),
      T("this run, all rounds", "本次运行的所有轮"),
      T("held-out eval, greedy (± s.e.)", "held-out 评测，贪心（± 标准误）"),
      T("held-out eval, T = 0.7", "held-out 评测，T = 0.7"));
    for (int i = 0; i + 1 < RUN.B; i++)
        P("| %d | %ld | %s | %s ± %s | %s |\n", i + 1, RUN.cumprod[i], f2(RUN.run_acc[i]), f3(e->acc[i]), f3(e->acc_se[i]),
          f3(t->acc[i]));
}

static void w_eval_table(void) {
    P("| T | B | %s | tau ± s.e. | %s |\n|---:|---:|---:|---:|---:|\n", T("rounds", "轮数"),
      T("tau / cost (speed-up, cost model)", "tau / cost（加速比，代价模型）"));
    for (int k = 0; k < NEV; k++)
        if (!strcmp(EV[k].T, "0") || !strcmp(EV[k].T, "0.7"))
            P("| %s | %d | %d | %s ± %s | %s |\n", EV[k].T, EV[k].B, EV[k].rounds, f3(EV[k].tau), f3(EV[k].tau_se), f2(EV[k].speedup));
}

static const Block BLOCKS[] = {  /* tables: IN_TABLE set */
    {"PROMPT_TABLE", w_prompt_table}, {"VERIFY_TABLE", w_verify_table}, {"ATTN_TABLE", w_attn_table},
    {"ACC_TABLE", w_acc_table},       {"EVAL_TABLE", w_eval_table},
};

/* ---- the template: mkwalk's rules (a line @NAME@ a block, @name@ a value) */
static void expand(const char *path) { fill_template(path, BLOCKS, sizeof BLOCKS / sizeof BLOCKS[0], &IN_TABLE); }

int main(int argc, char **argv) {
    const char *tdir = template_dir_arg(argc, argv, 6, "mklearned TRACE_DIR TOKENIZER_JSON HELDOUT_IDS EVAL_TSV RUNS_TXT OUT_DIR");
    if (!tdir) return 2;
    TDIR = argv[1];
    if (tok_load_decoder(&TOK, argv[2]) != 0) { fprintf(stderr, "mklearned: %s\n", dflash_errmsg); return 1; }
    read_run(argv[3]);
    read_eval(argv[4]);
    read_runs(argv[5]);
    static const char *const tpl[2] = {"learned.md.in", "learned.zh.md.in"};
    int rc = write_editions("mklearned", argv[6], tdir, tpl, values, expand);
    tensors_free();
    tok_free(&TOK);
    return rc;
}
