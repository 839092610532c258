/* eval/eval.c - `dflash eval`: decoded held-out evaluation of DFlash and the
 * baselines a user would pick instead (eval/lookup.h: copy, ngram, lookup),
 * all verified by the same target, on prompts cut from a file, at several
 * block sizes and temperatures, in one table, all in this one run:
 *
 *   - tau (tokens per round, the bonus included) and acceptance per position
 *     (the share of rounds whose proposal i was accepted), each with a
 *     standard error over prompts;
 *   - lossless: every greedy run's output against target-only decoding's;
 *   - the round cost in 1-token forwards (the verify forward of up to B
 *     tokens, plus the drafter's share), measured here against the 1-token
 *     decode forwards of the target-only runs, and tau / cost: the decode
 *     speedup it implies.
 *
 * docs/evaluation.md says how prompts are cut
 * and how each figure is computed. */
#include "dflash.h"
#include "eval/eval.h"
#include "cli/flags.h"
#include "eval/lookup.h"
#include "formats/files.h"
#include "formats/load.h"
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const EVAL_USAGE =
    "usage: dflash eval (--weights DIR | --target DIR [--draft DIR])\n"
    "                   (--text FILE | --ids-file FILE | --ids-stream FILE) [OPTIONS]\n"
    "decoded held-out evaluation: DFlash and the baselines on prompts cut from FILE\n"
    "(docs/evaluation.md)\n"
    "  --weights DIR         DIR/target, DIR/draft (if present) and DIR/vocab.txt\n"
    "  --target DIR          the target's folder\n"
    "  --draft DIR           with --target: the DFlash draft's folder (without one the dflash\n"
    "                        method is left out)\n"
    "  --text FILE           words of vocab.txt, one stream: prompt i of N is the P tokens from\n"
    "                        floor(i (L - P) / (N - 1)) (L: the stream's tokens)\n"
    "  --ids-stream FILE     the same from token ids (white space or commas between them)\n"
    "  --ids-file FILE       one sequence of ids a line (a \"|\" is skipped, a line starting with #\n"
    "                        too: dflash train --data lines, or what --save-data wrote): prompt i\n"
    "                        is the first P ids of the i-th line of at least P\n"
    "  --prompts N           prompts, 1..65536 (default 64)\n"
    "  --prompt-len P        tokens a prompt, 1..65536 (default 16)\n"
    "  --new N               new tokens each run decodes, 1..65536 (default 128)\n"
    "  --blocks LIST         block sizes, comma-separated, each 2..64 (default 2,4,8,16)\n"
    "  --temperatures LIST   comma-separated, each a finite number >= 0 (default 0,0.7,1)\n"
    "  --methods LIST        of dflash, copy, ngram, lookup (default: all four; dflash only with\n"
    "                        a draft)\n"
    "  --ngram-min N         ngram and lookup: the smallest n-gram, 1..64 (default 1)\n"
    "  --ngram-max N         the largest, ngram-min..64, lookup at most 4 (default 4)\n"
    "  --seed S              sampling: prompt i's runs use seed S + i (default 0)\n"
    "  --stop-at-eos         stop at the target's stop ids (default: decode N tokens every run)\n"
    "  --log FILE            also write every row, tab-separated, to FILE\n"
    "  --per-prompt FILE     also write each prompt's rounds and tokens in every row's runs,\n"
    "                        tab-separated (T, method, B, prompt, rounds, tokens): paired\n"
    "                        comparisons of two drafts on the same prompts\n"
    "  --threads N           the matmuls' output rows over N threads, 1..64, the same bits (default 1)\n"
    "  -h, --help            this text\n";

#define EVAL_MAX_LIST 16
enum { M_DFLASH, M_COPY, M_NGRAM, M_LOOKUP, M_COUNT };
static const char *const METHOD_NAMES[M_COUNT] = {"dflash", "copy", "ngram", "lookup"};

typedef struct {
    const char *weights, *target, *draft, *text, *ids_file, *ids_stream, *log, *per_prompt;
    const char *blocks_s, *temps_s, *methods_s;  /* the lists as given */
    long prompts, prompt_len, new_tokens, ngram_min, ngram_max, threads;
    int n_blocks, blocks[EVAL_MAX_LIST];
    int n_temps;
    double temps[EVAL_MAX_LIST];
    int methods_given, use[M_COUNT];
    uint64_t seed;
    int stop_at_eos;
} EvalArgs;

/* THE flags of dflash eval (cli/flags.h; tests/test_flags.c checks them
 * against EVAL_USAGE). The lists are strings here, their items checked
 * below with the same messages. */
#define EA(m) offsetof(EvalArgs, m)
const Flag EVAL_FLAGS[] = {
    {.name = "--weights", .kind = FLAG_STRING, .field = EA(weights)},
    {.name = "--target", .kind = FLAG_STRING, .field = EA(target)},
    {.name = "--draft", .kind = FLAG_STRING, .field = EA(draft)},
    {.name = "--text", .kind = FLAG_STRING, .field = EA(text)},
    {.name = "--ids-file", .kind = FLAG_STRING, .field = EA(ids_file)},
    {.name = "--ids-stream", .kind = FLAG_STRING, .field = EA(ids_stream)},
    {.name = "--log", .kind = FLAG_STRING, .field = EA(log)},
    {.name = "--per-prompt", .kind = FLAG_STRING, .field = EA(per_prompt)},
    {.name = "--prompts", .kind = FLAG_INT, .field = EA(prompts), .lo = 1, .hi = 65536},
    {.name = "--prompt-len", .kind = FLAG_INT, .field = EA(prompt_len), .lo = 1, .hi = 65536},
    {.name = "--new", .kind = FLAG_INT, .field = EA(new_tokens), .lo = 1, .hi = 65536},
    {.name = "--blocks", .kind = FLAG_STRING, .field = EA(blocks_s)},
    {.name = "--temperatures", .kind = FLAG_STRING, .field = EA(temps_s)},
    {.name = "--methods", .kind = FLAG_STRING, .field = EA(methods_s)},
    {.name = "--ngram-min", .kind = FLAG_INT, .field = EA(ngram_min), .lo = 1, .hi = 64},
    {.name = "--ngram-max", .kind = FLAG_INT, .field = EA(ngram_max), .lo = 1, .hi = 64},
    {.name = "--seed", .kind = FLAG_U64, .field = EA(seed)},
    {.name = "--stop-at-eos", .kind = FLAG_SWITCH, .field = EA(stop_at_eos)},
    {.name = "--threads", .kind = FLAG_INT, .field = EA(threads), .lo = 1, .hi = 64},
    FLAG_TABLE_END};
#undef EA

/* "a,b,c" -> items (each then parsed by the caller); -1 when empty or too many */
static int split_list(const char *flag, const char *s, char items[EVAL_MAX_LIST][64], int *n) {
    *n = 0;
    const char *p = s;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0 || len >= 64 || *n == EVAL_MAX_LIST) {
            dflash_set_error("%s: expected a comma-separated list of at most %d values, got \"%.100s\"", flag,
                             EVAL_MAX_LIST, s);
            return -1;
        }
        memcpy(items[*n], p, len);
        items[(*n)++][len] = 0;
        if (!c) return 0;
        p = c + 1;
    }
}

/* --blocks, --temperatures, --methods: their items */
static int eval_lists(EvalArgs *a) {
    char items[EVAL_MAX_LIST][64];
    int n;
    if (a->blocks_s) {
        if (split_list("--blocks", a->blocks_s, items, &n) != 0) return -1;
        a->n_blocks = n;
        for (int k = 0; k < n; k++) {
            long b;
            if (flags_int("--blocks", items[k], 2, DFLASH_MAX_BLOCK, &b) != 0) return -1;
            a->blocks[k] = (int)b;
        }
    }
    if (a->temps_s) {
        if (split_list("--temperatures", a->temps_s, items, &n) != 0) return -1;
        a->n_temps = n;
        for (int k = 0; k < n; k++)
            if (flags_real("--temperatures", items[k], 0, 0, &a->temps[k]) != 0) return -1;
    }
    if (a->methods_s) {
        if (split_list("--methods", a->methods_s, items, &n) != 0) return -1;
        a->methods_given = 1;
        memset(a->use, 0, sizeof a->use);
        for (int k = 0; k < n; k++) {
            int m = 0;
            while (m < M_COUNT && strcmp(items[k], METHOD_NAMES[m]) != 0) m++;
            if (m == M_COUNT) {
                dflash_set_error("--methods: expected dflash, copy, ngram or lookup, got \"%.100s\"", items[k]);
                return -1;
            }
            a->use[m] = 1;
        }
    }
    return 0;
}

/* The table's cells, k = (temperature ti x M_COUNT + method m) x blocks +
 * block bi, in the order they run and print: k's ti, m, bi, and whether
 * method m runs. */
static int cell_of(const EvalArgs *a, int k, int *ti, int *m, int *bi) {
    *bi = k % a->n_blocks;
    *m = k / a->n_blocks % M_COUNT;
    *ti = k / a->n_blocks / M_COUNT;
    return a->use[*m];
}

/* 0: run; 1: --help; -1: bad arguments */
static int eval_parse(int argc, char **argv, EvalArgs *a) {
    memset(a, 0, sizeof *a);
    a->prompts = 64, a->prompt_len = 16, a->new_tokens = 128, a->ngram_min = 1, a->ngram_max = 4, a->threads = 1;
    static const int def_blocks[] = {2, 4, 8, 16};
    static const double def_temps[] = {0, 0.7, 1};
    a->n_blocks = 4;
    memcpy(a->blocks, def_blocks, sizeof def_blocks);
    a->n_temps = 3;
    memcpy(a->temps, def_temps, sizeof def_temps);
    int rc = flags_parse(EVAL_FLAGS, argc, argv, a, "dflash eval", NULL, 0, NULL);
    if (rc != 0) return rc;
    if (eval_lists(a) != 0) return -1;
    if (!a->weights == !a->target) {
        dflash_set_error("expected --weights DIR or --target DIR (one of them)%s", a->weights ? ", got both" : "");
        return -1;
    }
    if (a->draft && !a->target) { dflash_set_error("--draft: expected --target DIR as well"); return -1; }
    if (!!a->text + !!a->ids_file + !!a->ids_stream != 1) {
        dflash_set_error("expected one of --text FILE, --ids-file FILE, --ids-stream FILE (the prompts' source)");
        return -1;
    }
    if (a->ngram_max < a->ngram_min) {
        dflash_set_error("--ngram-max %ld: expected at least --ngram-min (%ld)", a->ngram_max, a->ngram_min);
        return -1;
    }
    return 0;
}

/* ---- the prompts ----------------------------------------------------------- */

/* prompts (N, P) row-major into *out */
static int cut_prompts(const EvalArgs *a, const Vocab *vocab, const char *vocab_path, int V, int **out) {
    const char *path = a->text ? a->text : a->ids_file ? a->ids_file : a->ids_stream;
    int N = (int)a->prompts, P = (int)a->prompt_len, rc = -1, n = 0, cap = 0;
    char *bytes = NULL;
    size_t len = 0;
    int *ids = NULL;
    *out = NULL;
    if (file_read_all(path, &bytes, &len) != 0) return -1;
    int *prompts = malloc(sizeof(int) * (size_t)N * (size_t)P);
    if (!prompts) { dflash_set_error("out of memory"); goto done; }
    if (a->ids_file) {  /* one sequence a line: the first P ids of each line of at least P */
        int got = ids_file_prompts(path, N, P, P, V, prompts, NULL);
        if (got < 0) goto done;
        if (got < N) {
            dflash_set_error("%s: %d lines of at least %d ids, expected %d (--prompts)", path, got, P, N);
            goto done;
        }
    } else {  /* one stream: N windows of P tokens, evenly spaced, the first at 0, the last at the end */
        if (a->text) {
            if (!vocab) { dflash_set_error("--text: no vocab.txt to look the words up in (%s)", vocab_path); goto done; }
            cap = (int)(len < 0x7ffffff0 ? len + 1 : 0x7ffffff0);
            ids = malloc(sizeof(int) * (size_t)cap);
            if (!ids) { dflash_set_error("%s: out of memory", path); goto done; }
            if (tokenize(vocab, bytes, ids, cap, &n) != 0) {
                /* the tokenizer speaks of --prompt and --ids: this command's are the file and --ids-stream */
                char msg[sizeof dflash_errmsg], *m = msg, *hint;
                memcpy(msg, dflash_errmsg, sizeof msg);
                if (strncmp(m, "--prompt: ", 10) == 0) m += 10;
                if ((hint = strstr(m, " with --ids")) != NULL) strcpy(hint, " with --ids-stream");
                dflash_set_error("%s: %s", path, m);
                goto done;
            }
        } else if (ids_parse_text(path, bytes, bytes + len, 1, V, &ids, &n, &cap) != 0) {
            goto done;
        }
        if (n < P || (long)(n - P) < (long)N - 1) {
            dflash_set_error("%s: %d tokens give %d distinct prompts of %d tokens, expected %d (--prompts)", path, n,
                             n >= P ? n - P + 1 : 0, P, N);
            goto done;
        }
        for (int i = 0; i < N; i++) {
            long s0 = N > 1 ? (long)i * (n - P) / (N - 1) : 0;
            memcpy(prompts + (size_t)i * P, ids + s0, sizeof(int) * (size_t)P);
        }
    }
    *out = prompts;
    prompts = NULL;
    rc = 0;
done:
    free(bytes);
    free(ids);
    free(prompts);
    return rc;
}

/* ---- the statistics ---------------------------------------------------------
 * One cell: a method, a block size, a temperature; per prompt its sums. */
typedef struct {
    int *rounds, *tokens, *proposed;  /* (N) */
    int *accepted;                    /* (N, B-1): rounds with acceptance_length >= i */
    double *draft_s, *verify_s, *total_s, *cpu_s;  /* (N) */
    int lossless_fail, runs;
} Cell;

/* ratio estimator over prompts: sum(y) / sum(x) and its standard error
 * sqrt(N / (N - 1) * sum((y_i - R x_i)^2)) / sum(x) (prompts as clusters:
 * rounds within a prompt are not independent). se NAN when N < 2. */
static double ratio_se(const double *y, const int *x, int N, int stride, double *se) {
    double sy = 0, sx = 0, ss = 0;
    for (int i = 0; i < N; i++) sy += y[(size_t)i * stride], sx += x[i];
    double R = sx > 0 ? sy / sx : NAN;
    for (int i = 0; i < N; i++) {
        double e = y[(size_t)i * stride] - R * x[i];
        ss += e * e;
    }
    *se = N > 1 && sx > 0 ? sqrt((double)N / (N - 1) * ss) / sx : NAN;
    return R;
}

/* this thread's CPU time in seconds: what a run costs whatever else the
 * machine does (the wall clock counts the other processes' share too) */
static double cpu_seconds(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void put_pm(FILE *f, double v, double se) {
    if (isnan(se)) fprintf(f, "%.3f", v);
    else fprintf(f, "%.3f±%.3f", v, se);
}

/* ---- the run -----------------------------------------------------------------
 * One dflash eval: what it read, the cells it fills, target-only's figures. */
typedef struct {
    EvalArgs a;
    char tdir[4096], ddir[4096], vocab_path[4200];
    Model target, draft;
    Vocab vocab;
    int have_draft, have_vocab;
    int N, P;                          /* prompts, tokens per prompt */
    int *prompts;                      /* (N, P) */
    Drafter drafters[M_COUNT];
    GenParams p;                       /* new tokens, stop ids; block, temperature, seed set per run */
    Cell *cells;                       /* [temperature][method][block] */
    int n_cells;
    double *ar_decode, *ar_total, *ar_cpu;  /* (N) target-only greedy: decode, wall, CPU seconds */
    int *ar_fwd;                       /* (N) its decode forwards */
    OutFile *log, *per_prompt;
} Eval;

/* the weights, the vocabulary, the prompts, the drafters and the
 * generation parameters, each checked; -1 with the error set */
static int eval_open(Eval *e) {
    EvalArgs *a = &e->a;
    e->N = (int)a->prompts, e->P = (int)a->prompt_len;
    if (a->weights) {
        snprintf(e->tdir, sizeof e->tdir, "%s/target", a->weights);
        snprintf(e->ddir, sizeof e->ddir, "%s/draft", a->weights);
        snprintf(e->vocab_path, sizeof e->vocab_path, "%s/vocab.txt", a->weights);
    } else {
        snprintf(e->tdir, sizeof e->tdir, "%s", a->target);
        snprintf(e->ddir, sizeof e->ddir, "%s", a->draft ? a->draft : "");
        snprintf(e->vocab_path, sizeof e->vocab_path, "%s/vocab.txt", a->target);
    }
    /* the logs may not be inputs, nor one file */
    OutPath o[2];
    int n_out = 0;
    if (a->log) o[n_out++] = (OutPath){a->log, "the log", 0};
    if (a->per_prompt) o[n_out++] = (OutPath){a->per_prompt, "the per-prompt log", 0};
    if (n_out) {
        const char *inputs[4] = {e->tdir, e->ddir[0] ? e->ddir : e->tdir,
                                 a->text ? a->text : a->ids_file ? a->ids_file : a->ids_stream, e->vocab_path};
        if (out_check_paths(a->log ? "--log" : "--per-prompt", o, n_out, inputs, 4) != 0) return -1;
    }
    if (model_load(&e->target, e->tdir, 0) != 0) return -1;
    if (kernel_pack_weights) kernel_pack_weights(&e->target);   /* read-only from here on (kernel.c) */
    char cfgp[4200];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", e->ddir);
    if (e->ddir[0] && (a->draft || access(cfgp, R_OK) == 0)) {
        if (model_load(&e->draft, e->ddir, 1) != 0) return -1;
        e->have_draft = 1;
        if (kernel_pack_weights) kernel_pack_weights(&e->draft);
        if (check_pair(&e->target, &e->draft) != 0) return -1;
    }
    if (!a->methods_given) for (int m = 0; m < M_COUNT; m++) a->use[m] = m != M_DFLASH || e->have_draft;
    if (a->use[M_DFLASH] && !e->have_draft) {
        dflash_set_error("--methods dflash: no draft (%s)", a->weights ? "DIR/draft has no config.json" : "give --draft DIR");
        return -1;
    }
    if (access(e->vocab_path, R_OK) == 0) {
        if (vocab_load(&e->vocab, e->vocab_path) != 0) return -1;
        if (check_vocab(&e->vocab, e->vocab_path, &e->target, e->have_draft ? &e->draft : NULL) != 0) return -1;
        e->have_vocab = 1;
    }
    if (cut_prompts(a, e->have_vocab ? &e->vocab : NULL, e->vocab_path, e->target.cfg.vocab_size, &e->prompts) != 0)
        return -1;
    const Drafter drafters[M_COUNT] = {{DRAFT_COPY, 0, 0}, {DRAFT_COPY, 0, 0},
                                       {DRAFT_NGRAM, (int)a->ngram_min, (int)a->ngram_max},
                                       {DRAFT_LOOKUP, (int)a->ngram_min, (int)a->ngram_max}};
    memcpy(e->drafters, drafters, sizeof drafters);
    if (a->use[M_LOOKUP] && drafter_check(&e->drafters[M_LOOKUP]) != 0) return -1;
    e->p.max_new_tokens = (int)a->new_tokens;
    if (a->stop_at_eos) {
        char from[4200];
        if (stop_ids_default(e->tdir, &e->target, e->p.stop_ids, &e->p.n_stop, from, sizeof from) != 0) return -1;
        int eos = e->have_vocab ? vocab_find(&e->vocab, "<eos>") : -1;
        if (e->p.n_stop == 0 && eos >= 0) e->p.stop_ids[e->p.n_stop++] = eos;
    }
    int maxB = 1;
    for (int k = 0; k < a->n_blocks; k++) if (a->blocks[k] > maxB) maxB = a->blocks[k];
    for (int i = 0; i < e->N; i++)
        if (check_gen_args(&e->target, e->P, &e->p, maxB, e->prompts + (size_t)i * e->P) != 0) return -1;
    return 0;
}

/* the cells' per-prompt sums and target-only's, zeroed; -1 out of memory */
static int eval_alloc(Eval *e) {
    size_t N = (size_t)e->N;
    e->n_cells = e->a.n_temps * M_COUNT * e->a.n_blocks;
    e->cells = calloc((size_t)e->n_cells, sizeof *e->cells);
    e->ar_decode = calloc(N, sizeof(double));
    e->ar_total = calloc(N, sizeof(double));
    e->ar_cpu = calloc(N, sizeof(double));
    e->ar_fwd = calloc(N, sizeof(int));
    if (!e->cells || !e->ar_decode || !e->ar_total || !e->ar_cpu || !e->ar_fwd) { dflash_set_error("out of memory"); return -1; }
    for (int c = 0; c < e->n_cells; c++) {
        int B = e->a.blocks[c % e->a.n_blocks];
        Cell *ce = &e->cells[c];
        ce->rounds = calloc(N, sizeof(int));
        ce->tokens = calloc(N, sizeof(int));
        ce->proposed = calloc(N, sizeof(int));
        ce->accepted = calloc(N * (size_t)(B - 1), sizeof(int));
        ce->draft_s = calloc(N, sizeof(double));
        ce->verify_s = calloc(N, sizeof(double));
        ce->total_s = calloc(N, sizeof(double));
        ce->cpu_s = calloc(N, sizeof(double));
        if (!ce->rounds || !ce->tokens || !ce->proposed || !ce->accepted || !ce->draft_s || !ce->verify_s ||
            !ce->total_s || !ce->cpu_s) {
            dflash_set_error("out of memory");
            return -1;
        }
    }
    return 0;
}

/* prompt i: target-only greedy first (the lossless reference and the
 * 1-token forward time), then each temperature, method and block size */
static int eval_prompt(Eval *e, int i) {
    const EvalArgs *a = &e->a;
    const int *prompt = e->prompts + (size_t)i * e->P;
    GenParams *p = &e->p;
    GenResult ar = {0};
    p->block_size = 1, p->temperature = 0, p->seed = a->seed + (unsigned long long)i;
    double t0 = now_seconds(), c0 = cpu_seconds();
    if (ar_generate(&e->target, prompt, e->P, p, &ar) != 0) return -1;
    e->ar_total[i] = now_seconds() - t0;
    e->ar_cpu[i] = cpu_seconds() - c0;
    e->ar_decode[i] = ar.seconds_verify;
    e->ar_fwd[i] = ar.target_forwards - 1;
    for (int c = 0; c < e->n_cells; c++) {
        int ti, m, bi;
        if (!cell_of(a, c, &ti, &m, &bi)) continue;
        Cell *ce = &e->cells[c];
        int B = a->blocks[bi];
        GenResult r = {0};
        p->block_size = B, p->temperature = a->temps[ti];
        t0 = now_seconds(), c0 = cpu_seconds();
        int grc = m == M_DFLASH ? dflash_generate(&e->draft, &e->target, prompt, e->P, p, &r)
                                : lookup_generate(&e->drafters[m], &e->target, prompt, e->P, p, &r);
        if (grc != 0) { gen_result_free(&ar); return -1; }
        ce->total_s[i] = now_seconds() - t0;
        ce->cpu_s[i] = cpu_seconds() - c0;
        ce->runs++;
        ce->rounds[i] = r.n_rounds;
        ce->draft_s[i] = r.seconds_draft;
        ce->verify_s[i] = r.seconds_verify;
        acceptance_count(&r, B, ce->accepted + (size_t)i * (B - 1));
        for (int k = 0; k < r.n_rounds; k++) {
            ce->tokens[i] += r.rounds[k].acceptance_length + 1;
            for (int j = 1; j < B; j++) ce->proposed[i] += m == M_DFLASH || r.rounds[k].block[j] >= 0;
        }
        if (a->temps[ti] < 1e-5 && (r.n_output != ar.n_output ||
                                    memcmp(r.output_ids, ar.output_ids, sizeof(int) * (size_t)ar.n_output)))
            ce->lossless_fail++;
        gen_result_free(&r);
    }
    gen_result_free(&ar);
    return 0;
}

/* every prompt (prompt by prompt, so that a change of load on the machine
 * hits every method alike), with progress on stderr */
static int eval_runs(Eval *e) {
    double t_start = now_seconds(), last = t_start;
    int n_methods = 0;
    for (int m = 0; m < M_COUNT; m++) n_methods += e->a.use[m];
    fprintf(stderr, "dflash eval: %d prompts of %d tokens, %ld new tokens each, %d methods x %d block sizes x %d "
            "temperatures\n", e->N, e->P, e->a.new_tokens, n_methods, e->a.n_blocks, e->a.n_temps);
    for (int i = 0; i < e->N; i++) {
        if (eval_prompt(e, i) != 0) return -1;
        double t = now_seconds();
        if (t - last > 2 || i + 1 == e->N) {
            fprintf(stderr, "dflash eval: prompt %d/%d (%.0f s, about %.0f s to go)\n", i + 1, e->N, t - t_start,
                    (t - t_start) / (i + 1) * (e->N - i - 1));
            last = t;
        }
    }
    return 0;
}

/* one row of the table (and of --log) for cell c; t1 the 1-token decode
 * forward's seconds; wall_ar, cpu_ar target-only's summed times */
static int eval_row(Eval *e, int c, double t1, double wall_ar, double cpu_ar) {
    const EvalArgs *a = &e->a;
    int ti, m, bi, N = e->N;
    if (!cell_of(a, c, &ti, &m, &bi)) return 0;
    const Cell *ce = &e->cells[c];
    int B = a->blocks[bi];
    double *y = calloc((size_t)N * (size_t)(B > 1 ? B - 1 : 1), sizeof(double));
    if (!y) { dflash_set_error("out of memory"); return -1; }
    long R = 0;
    double sd = 0, sv = 0, st = 0, sc = 0;
    for (int i = 0; i < N; i++)
        R += ce->rounds[i], sd += ce->draft_s[i], sv += ce->verify_s[i], st += ce->total_s[i], sc += ce->cpu_s[i];
    double se_tau, se_prop;
    for (int i = 0; i < N; i++) y[i] = ce->tokens[i];
    double tau = ratio_se(y, ce->rounds, N, 1, &se_tau);
    for (int i = 0; i < N; i++) y[i] = ce->proposed[i];
    double prop = ratio_se(y, ce->rounds, N, 1, &se_prop);
    double vc = sv / R / t1, dc = sd / R / t1, cost = vc + dc, wall = wall_ar / st, cpu = cpu_ar / sc;
    int greedy = a->temps[ti] < 1e-5;
    char ll[32];
    if (greedy) snprintf(ll, sizeof ll, ce->lossless_fail ? "NO %d/%d" : "yes %d/%d",
                         ce->lossless_fail ? ce->lossless_fail : N, N);
    else snprintf(ll, sizeof ll, "-");
    char taus[48];
    snprintf(taus, sizeof taus, isnan(se_tau) ? "%.3f" : "%.3f±%.3f", tau, se_tau);
    printf("%-5g %-7s %3d %7ld %13s %6.2f %7.2f %7.2f %7.2f %7.2f %7.2fx %7.2fx %-9s ", a->temps[ti],
           METHOD_NAMES[m], B, R, taus, prop, vc, dc, cost, tau / cost, wall, cpu, ll);
    FILE *log = e->log ? out_stream(e->log) : NULL;
    if (log)
        fprintf(log, "%g\t%s\t%d\t%d\t%ld\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%d\t", a->temps[ti],
                METHOD_NAMES[m], B, N, R, tau, se_tau, prop, vc, dc, cost, tau / cost, wall, cpu,
                greedy ? ce->lossless_fail : -1);
    double accs[DFLASH_MAX_BLOCK], ses[DFLASH_MAX_BLOCK];
    for (int j = 1; j < B; j++) {
        for (int i = 0; i < N; i++) y[i] = ce->accepted[(size_t)i * (B - 1) + (j - 1)];
        accs[j] = ratio_se(y, ce->rounds, N, 1, &ses[j]);
        printf(" ");
        put_pm(stdout, accs[j], ses[j]);
    }
    printf("\n");
    if (log) {
        for (int j = 1; j < B; j++) fprintf(log, "%s%.6f", j > 1 ? "," : "", accs[j]);
        fputc('\t', log);
        for (int j = 1; j < B; j++) fprintf(log, "%s%.6f", j > 1 ? "," : "", ses[j]);
        fputc('\n', log);
    }
    free(y);
    return 0;
}

/* the table on stdout and the --log rows; *total_fail the greedy runs that
 * differ from target-only decoding */
static int eval_table(Eval *e, int *total_fail) {
    const EvalArgs *a = &e->a;
    double sum_ar = 0, sum_ar_total = 0, sum_ar_cpu = 0;
    long sum_fwd = 0;
    for (int i = 0; i < e->N; i++)
        sum_ar += e->ar_decode[i], sum_fwd += e->ar_fwd[i], sum_ar_total += e->ar_total[i], sum_ar_cpu += e->ar_cpu[i];
    double t1 = sum_fwd > 0 ? sum_ar / sum_fwd : NAN;
    printf("dflash eval: %s, %d prompts of %d tokens (%s), %ld new tokens each%s; %s build, one thread\n",
           a->weights ? a->weights : a->target, e->N, e->P, a->text ? a->text : a->ids_file ? a->ids_file : a->ids_stream,
           a->new_tokens, a->stop_at_eos ? " or up to a stop id" : "", REAL_NAME);
    printf("1-token decode forward of the target (target-only greedy runs, this run): %.3f ms\n", 1e3 * t1);
    printf("%-5s %-7s %3s %7s %13s %6s %7s %7s %7s %7s %8s %8s %-9s  %s\n", "T", "method", "B", "rounds", "tau",
           "prop", "verify", "draft", "cost", "tau/cost", "wall", "cpu", "lossless", "acceptance per position 1..B-1");
    if (e->log) fprintf(out_stream(e->log), "T\tmethod\tB\tprompts\trounds\ttau\ttau_se\tproposed\tverify_cost\t"
                        "draft_cost\tcost\tspeedup\twall_speedup\tcpu_speedup\tlossless_fail\tacceptance\tacceptance_se\n");
    *total_fail = 0;
    for (int c = 0; c < e->n_cells; c++) {
        if (eval_row(e, c, t1, sum_ar_total, sum_ar_cpu) != 0) return -1;
        *total_fail += e->cells[c].lossless_fail;
    }
    if (e->per_prompt) {  /* the sums every row's tau is the ratio of, prompt by prompt */
        FILE *f = out_stream(e->per_prompt);
        fprintf(f, "T\tmethod\tB\tprompt\trounds\ttokens\n");
        for (int c = 0; c < e->n_cells; c++) {
            int ti, m, bi;
            if (!cell_of(a, c, &ti, &m, &bi)) continue;
            for (int i = 0; i < e->N; i++)
                fprintf(f, "%g\t%s\t%d\t%d\t%d\t%d\n", a->temps[ti], METHOD_NAMES[m], a->blocks[bi], i,
                        e->cells[c].rounds[i], e->cells[c].tokens[i]);
        }
    }
    printf("(T: temperature; tau: tokens per round, the bonus included, ± its standard error over prompts;\n"
           " prop: tokens proposed per round; verify, draft: a round's verify forward and drafting, in 1-token\n"
           " decode forwards of this run; cost = verify + draft; tau/cost: the decode speedup over target-only\n"
           " decoding it implies; wall: target-only time / this method's time for the same runs, prefill\n"
           " included (the target-only runs are greedy); cpu: the same in this thread's CPU time, which the\n"
           " machine's other load does not inflate; lossless: greedy outputs equal to target-only's)\n");
    return 0;
}

static void eval_free(Eval *e) {
    if (e->log) out_abort(e->log);
    if (e->per_prompt) out_abort(e->per_prompt);
    for (int c = 0; e->cells && c < e->n_cells; c++) {
        free(e->cells[c].rounds);
        free(e->cells[c].tokens);
        free(e->cells[c].proposed);
        free(e->cells[c].accepted);
        free(e->cells[c].draft_s);
        free(e->cells[c].verify_s);
        free(e->cells[c].total_s);
        free(e->cells[c].cpu_s);
    }
    free(e->cells);
    free(e->ar_decode);
    free(e->ar_total);
    free(e->ar_cpu);
    free(e->ar_fwd);
    free(e->prompts);
    if (kernel_unpack_weights) kernel_unpack_weights(&e->draft), kernel_unpack_weights(&e->target);
    if (e->have_draft) model_free(&e->draft);
    model_free(&e->target);
    vocab_free(&e->vocab);
}

int eval_main(int argc, char **argv) {
    static Eval e;  /* ~13 KB of paths: not on the stack */
    memset(&e, 0, sizeof e);
    int pa = eval_parse(argc, argv, &e.a);
    if (pa == 1) { fputs(EVAL_USAGE, stdout); return 0; }
    if (pa < 0) { dflash_print_error("dflash eval", ""); return 2; }
    if (kernel_set_threads) kernel_set_threads((int)e.a.threads);
    int rc = 2, total_fail = 0;
    if (eval_open(&e) != 0 || eval_alloc(&e) != 0) goto done;
    if (e.a.log && !(e.log = out_open(e.a.log, "--log"))) goto done;
    if (e.a.per_prompt && !(e.per_prompt = out_open(e.a.per_prompt, "--per-prompt"))) goto done;
    if (eval_runs(&e) != 0 || eval_table(&e, &total_fail) != 0) goto done;
    if (e.log) {
        int lrc = out_commit(e.log);
        e.log = NULL;
        if (lrc != 0) goto done;
    }
    if (e.per_prompt) {
        int prc = out_commit(e.per_prompt);
        e.per_prompt = NULL;
        if (prc != 0) goto done;
    }
    if (total_fail > 0) {
        dflash_set_error("%d greedy runs differ from target-only decoding (not lossless: a bug; the table shows "
                         "which)", total_fail);
        goto done;
    }
    rc = 0;
done:
    if (rc != 0) dflash_print_error("dflash eval", "");
    eval_free(&e);
    return rc;
}
