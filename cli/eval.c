/* cli/eval.c - `dflash eval`: decoded held-out evaluation of DFlash and the
 * baselines a user would pick instead (cli/lookup.h: copy, ngram, lookup),
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
 * README.md, "Held-out evaluation: dflash eval", says how prompts are cut
 * and how each figure is computed. */
#include "dflash.h"
#include "eval.h"
#include "flags.h"
#include "lookup.h"
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
    "(README.md, \"Held-out evaluation: dflash eval\")\n"
    "  --weights DIR         DIR/target, DIR/draft (if present) and DIR/vocab.txt\n"
    "  --target DIR          the target's folder\n"
    "  --draft DIR           with --target: the DFlash draft's folder (without one the dflash\n"
    "                        method is left out)\n"
    "  --text FILE           words of vocab.txt, one stream: prompt i of N is the P tokens from\n"
    "                        floor(i (L - P) / (N - 1)) (L: the stream's tokens)\n"
    "  --ids-stream FILE     the same from token ids (white space or commas between them)\n"
    "  --ids-file FILE       one sequence of ids a line (a \"|\" is skipped: dflash train --data\n"
    "                        lines): prompt i is the first P ids of the i-th line of at least P\n"
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
    "  -h, --help            this text\n";

#define EVAL_MAX_LIST 16
enum { M_DFLASH, M_COPY, M_NGRAM, M_LOOKUP, M_COUNT };
static const char *const METHOD_NAMES[M_COUNT] = {"dflash", "copy", "ngram", "lookup"};

typedef struct {
    const char *weights, *target, *draft, *text, *ids_file, *ids_stream, *log;
    const char *blocks_s, *temps_s, *methods_s;  /* the lists as given */
    long prompts, prompt_len, new_tokens, ngram_min, ngram_max;
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
    a->prompts = 64, a->prompt_len = 16, a->new_tokens = 128, a->ngram_min = 1, a->ngram_max = 4;
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

int eval_main(int argc, char **argv) {
    EvalArgs a;
    int pa = eval_parse(argc, argv, &a);
    if (pa == 1) { fputs(EVAL_USAGE, stdout); return 0; }
    if (pa < 0) { dflash_print_error("dflash eval", ""); return 2; }
    char tdir[4096], ddir[4096], vocab_path[4200];
    Model target, draft;
    Vocab vocab;
    int have_draft = 0, have_vocab = 0, rc = 2, N = (int)a.prompts, P = (int)a.prompt_len;
    int *prompts = NULL;
    Cell *cells = NULL;
    int n_cells = 0;
    OutFile *log = NULL;
    double *ar_decode = NULL, *ar_total = NULL, *ar_cpu = NULL;
    int *ar_fwd = NULL;
    memset(&target, 0, sizeof target);
    memset(&draft, 0, sizeof draft);
    memset(&vocab, 0, sizeof vocab);
    if (a.weights) {
        snprintf(tdir, sizeof tdir, "%s/target", a.weights);
        snprintf(ddir, sizeof ddir, "%s/draft", a.weights);
        snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", a.weights);
    } else {
        snprintf(tdir, sizeof tdir, "%s", a.target);
        snprintf(ddir, sizeof ddir, "%s", a.draft ? a.draft : "");
        snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", a.target);
    }
    /* the log may not be an input */
    if (a.log) {
        const char *inputs[4] = {tdir, ddir[0] ? ddir : tdir, a.text ? a.text : a.ids_file ? a.ids_file : a.ids_stream,
                                 vocab_path};
        OutPath o = {a.log, "the log", 0};
        if (out_check_paths("dflash eval", &o, 1, inputs, 4) != 0) goto fail;
    }
    if (model_load(&target, tdir, 0) != 0) goto fail;
    char cfgp[4200];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", ddir);
    if (ddir[0] && (a.draft || access(cfgp, R_OK) == 0)) {
        if (model_load(&draft, ddir, 1) != 0) goto fail;
        have_draft = 1;
        if (check_pair(&target, &draft) != 0) goto fail;
    }
    if (!a.methods_given) for (int m = 0; m < M_COUNT; m++) a.use[m] = m != M_DFLASH || have_draft;
    if (a.use[M_DFLASH] && !have_draft) {
        dflash_set_error("--methods dflash: no draft (%s)", a.weights ? "DIR/draft has no config.json" : "give --draft DIR");
        goto fail;
    }
    if (access(vocab_path, R_OK) == 0) {
        if (vocab_load(&vocab, vocab_path) != 0) goto fail;
        if (check_vocab(&vocab, vocab_path, &target, have_draft ? &draft : NULL) != 0) goto fail;
        have_vocab = 1;
    }
    if (cut_prompts(&a, have_vocab ? &vocab : NULL, vocab_path, target.cfg.vocab_size, &prompts) != 0) goto fail;
    Drafter drafters[M_COUNT] = {{DRAFT_COPY, 0, 0}, {DRAFT_COPY, 0, 0},
                                 {DRAFT_NGRAM, (int)a.ngram_min, (int)a.ngram_max},
                                 {DRAFT_LOOKUP, (int)a.ngram_min, (int)a.ngram_max}};
    if (a.use[M_LOOKUP] && drafter_check(&drafters[M_LOOKUP]) != 0) goto fail;

    GenParams p = {0};
    p.max_new_tokens = (int)a.new_tokens;
    if (a.stop_at_eos) {
        char from[4200];
        if (stop_ids_default(tdir, &target, p.stop_ids, &p.n_stop, from, sizeof from) != 0) goto fail;
        int eos = have_vocab ? vocab_find(&vocab, "<eos>") : -1;
        if (p.n_stop == 0 && eos >= 0) p.stop_ids[p.n_stop++] = eos;
    }
    int maxB = 1;
    for (int k = 0; k < a.n_blocks; k++) if (a.blocks[k] > maxB) maxB = a.blocks[k];
    for (int i = 0; i < N; i++)
        if (check_gen_args(&target, P, &p, maxB, prompts + (size_t)i * P) != 0) goto fail;

    /* the cells: [temperature][method][block] */
    n_cells = a.n_temps * M_COUNT * a.n_blocks;
    cells = calloc((size_t)n_cells, sizeof *cells);
    ar_decode = calloc((size_t)N, sizeof(double));
    ar_total = calloc((size_t)N, sizeof(double));
    ar_cpu = calloc((size_t)N, sizeof(double));
    ar_fwd = calloc((size_t)N, sizeof(int));
    if (!cells || !ar_decode || !ar_total || !ar_cpu || !ar_fwd) { dflash_set_error("out of memory"); goto fail; }
    for (int c = 0; c < n_cells; c++) {
        int B = a.blocks[c % a.n_blocks];
        Cell *ce = &cells[c];
        ce->rounds = calloc((size_t)N, sizeof(int));
        ce->tokens = calloc((size_t)N, sizeof(int));
        ce->proposed = calloc((size_t)N, sizeof(int));
        ce->accepted = calloc((size_t)N * (size_t)(B - 1), sizeof(int));
        ce->draft_s = calloc((size_t)N, sizeof(double));
        ce->verify_s = calloc((size_t)N, sizeof(double));
        ce->total_s = calloc((size_t)N, sizeof(double));
        ce->cpu_s = calloc((size_t)N, sizeof(double));
        if (!ce->rounds || !ce->tokens || !ce->proposed || !ce->accepted || !ce->draft_s || !ce->verify_s ||
            !ce->total_s || !ce->cpu_s) {
            dflash_set_error("out of memory");
            goto fail;
        }
    }
    if (a.log && !(log = out_open(a.log, "dflash eval"))) goto fail;

    /* the runs: prompt by prompt (so a change of load on the machine hits
     * every method alike), target-only greedy first (the lossless reference
     * and the 1-token forward time), then each temperature, method, block */
    double t_start = now_seconds(), last = t_start;
    int n_methods = 0;
    for (int m = 0; m < M_COUNT; m++) n_methods += a.use[m];
    fprintf(stderr, "dflash eval: %d prompts of %d tokens, %ld new tokens each, %d methods x %d block sizes x %d "
            "temperatures\n", N, P, a.new_tokens, n_methods, a.n_blocks, a.n_temps);
    for (int i = 0; i < N; i++) {
        const int *prompt = prompts + (size_t)i * P;
        GenResult ar = {0};
        p.block_size = 1, p.temperature = 0, p.seed = a.seed + (unsigned long long)i;
        double t0 = now_seconds(), c0 = cpu_seconds();
        if (ar_generate(&target, prompt, P, &p, &ar) != 0) goto fail;
        ar_total[i] = now_seconds() - t0;
        ar_cpu[i] = cpu_seconds() - c0;
        ar_decode[i] = ar.seconds_verify;
        ar_fwd[i] = ar.target_forwards - 1;
        for (int c = 0; c < n_cells; c++) {
            int ti, m, bi;
            if (!cell_of(&a, c, &ti, &m, &bi)) continue;
            Cell *ce = &cells[c];
            int B = a.blocks[bi];
            GenResult r = {0};
            p.block_size = B, p.temperature = a.temps[ti];
            t0 = now_seconds(), c0 = cpu_seconds();
            int grc = m == M_DFLASH ? dflash_generate(&draft, &target, prompt, P, &p, &r)
                                    : lookup_generate(&drafters[m], &target, prompt, P, &p, &r);
            if (grc != 0) { gen_result_free(&ar); goto fail; }
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
            if (a.temps[ti] < 1e-5 && (r.n_output != ar.n_output ||
                                       memcmp(r.output_ids, ar.output_ids, sizeof(int) * (size_t)ar.n_output)))
                ce->lossless_fail++;
            gen_result_free(&r);
        }
        gen_result_free(&ar);
        double t = now_seconds();
        if (t - last > 2 || i + 1 == N) {
            fprintf(stderr, "dflash eval: prompt %d/%d (%.0f s, about %.0f s to go)\n", i + 1, N, t - t_start,
                    (t - t_start) / (i + 1) * (N - i - 1));
            last = t;
        }
    }

    /* the table */
    double sum_ar = 0, sum_ar_total = 0, sum_ar_cpu = 0;
    long sum_fwd = 0;
    for (int i = 0; i < N; i++)
        sum_ar += ar_decode[i], sum_fwd += ar_fwd[i], sum_ar_total += ar_total[i], sum_ar_cpu += ar_cpu[i];
    double t1 = sum_fwd > 0 ? sum_ar / sum_fwd : NAN;
    printf("dflash eval: %s, %d prompts of %d tokens (%s), %ld new tokens each%s; %s build, one thread\n",
           a.weights ? a.weights : a.target, N, P, a.text ? a.text : a.ids_file ? a.ids_file : a.ids_stream,
           a.new_tokens, a.stop_at_eos ? " or up to a stop id" : "", REAL_NAME);
    printf("1-token decode forward of the target (target-only greedy runs, this run): %.3f ms\n", 1e3 * t1);
    printf("%-5s %-7s %3s %7s %13s %6s %7s %7s %7s %7s %8s %8s %-9s  %s\n", "T", "method", "B", "rounds", "tau",
           "prop", "verify", "draft", "cost", "tau/cost", "wall", "cpu", "lossless", "acceptance per position 1..B-1");
    if (log) fprintf(out_stream(log), "T\tmethod\tB\tprompts\trounds\ttau\ttau_se\tproposed\tverify_cost\tdraft_cost\t"
                     "cost\tspeedup\twall_speedup\tcpu_speedup\tlossless_fail\tacceptance\tacceptance_se\n");
    int total_fail = 0;
    for (int c = 0; c < n_cells; c++) {
        int ti, m, bi;
        if (!cell_of(&a, c, &ti, &m, &bi)) continue;
        Cell *ce = &cells[c];
        int B = a.blocks[bi];
        double *y = malloc(sizeof(double) * (size_t)N * (size_t)(B > 1 ? B - 1 : 1));
        if (!y) { dflash_set_error("out of memory"); goto fail; }
        long R = 0;
        double sd = 0, sv = 0, st = 0, sc = 0;
        for (int i = 0; i < N; i++)
            R += ce->rounds[i], sd += ce->draft_s[i], sv += ce->verify_s[i], st += ce->total_s[i], sc += ce->cpu_s[i];
        double se_tau, se_prop;
        for (int i = 0; i < N; i++) y[i] = ce->tokens[i];
        double tau = ratio_se(y, ce->rounds, N, 1, &se_tau);
        for (int i = 0; i < N; i++) y[i] = ce->proposed[i];
        double prop = ratio_se(y, ce->rounds, N, 1, &se_prop);
        double vc = sv / R / t1, dc = sd / R / t1, cost = vc + dc, wall = sum_ar_total / st, cpu = sum_ar_cpu / sc;
        int greedy = a.temps[ti] < 1e-5;
        total_fail += ce->lossless_fail;
        char ll[32];
        if (greedy) snprintf(ll, sizeof ll, ce->lossless_fail ? "NO %d/%d" : "yes %d/%d",
                             ce->lossless_fail ? ce->lossless_fail : N, N);
        else snprintf(ll, sizeof ll, "-");
        char taus[48];
        snprintf(taus, sizeof taus, isnan(se_tau) ? "%.3f" : "%.3f±%.3f", tau, se_tau);
        printf("%-5g %-7s %3d %7ld %13s %6.2f %7.2f %7.2f %7.2f %7.2f %7.2fx %7.2fx %-9s ", a.temps[ti],
               METHOD_NAMES[m], B, R, taus, prop, vc, dc, cost, tau / cost, wall, cpu, ll);
        if (log)
            fprintf(out_stream(log), "%g\t%s\t%d\t%d\t%ld\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%d\t",
                    a.temps[ti], METHOD_NAMES[m], B, N, R, tau, se_tau, prop, vc, dc, cost, tau / cost, wall, cpu,
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
            for (int j = 1; j < B; j++) fprintf(out_stream(log), "%s%.6f", j > 1 ? "," : "", accs[j]);
            fputc('\t', out_stream(log));
            for (int j = 1; j < B; j++) fprintf(out_stream(log), "%s%.6f", j > 1 ? "," : "", ses[j]);
            fputc('\n', out_stream(log));
        }
        free(y);
    }
    printf("(T: temperature; tau: tokens per round, the bonus included, ± its standard error over prompts;\n"
           " prop: tokens proposed per round; verify, draft: a round's verify forward and drafting, in 1-token\n"
           " decode forwards of this run; cost = verify + draft; tau/cost: the decode speedup over target-only\n"
           " decoding it implies; wall: target-only time / this method's time for the same runs, prefill\n"
           " included (the target-only runs are greedy); cpu: the same in this thread's CPU time, which the\n"
           " machine's other load does not inflate; lossless: greedy outputs equal to target-only's)\n");
    if (log) {
        int lrc = out_commit(log);
        log = NULL;
        if (lrc != 0) goto fail;
    }
    if (total_fail > 0) {
        dflash_set_error("%d greedy runs differ from target-only decoding (not lossless: a bug; the table shows "
                         "which)", total_fail);
        goto fail;
    }
    rc = 0;
fail:
    if (rc != 0) dflash_print_error("dflash eval", "");
    if (log) out_abort(log);
    for (int c = 0; cells && c < n_cells; c++) {
        free(cells[c].rounds);
        free(cells[c].tokens);
        free(cells[c].proposed);
        free(cells[c].accepted);
        free(cells[c].draft_s);
        free(cells[c].verify_s);
        free(cells[c].total_s);
        free(cells[c].cpu_s);
    }
    free(cells);
    free(ar_decode);
    free(ar_total);
    free(ar_cpu);
    free(ar_fwd);
    free(prompts);
    if (have_draft) model_free(&draft);
    model_free(&target);
    vocab_free(&vocab);
    return rc;
}
