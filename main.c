/* main.c - the dflash command line: parse the flags, load a weight set,
 * run dflash_generate (or target-only decoding), print the output and the
 * per-round story; `dflash diff` and `dflash bench` are dispatched from here. */
#include "dflash.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char *USAGE =
    "usage: dflash [--weights DIR] [--prompt TEXT | --ids 2,3,4] [--max-new-tokens N]\n"
    "              [--block-size B] [--temperature T] [--seed S] [--mode dflash|ar]\n"
    "              [--print-ids] [--rounds] [--ignore-eos]\n"
    "              [--trace DIR] [--trace-text FILE|-] [--trace-filter GLOB]...\n"
    "              [--pitfall NAME]   (./dflash-pitfall only: one planted porting mistake)\n"
    "       dflash diff A B [--rtol R] [--atol A] [--only GLOB]... [--verbose]   (A the reference, B the port)\n"
    "       dflash bench\n"
    "With no arguments: the walkthrough run (\"The cat sat\", block 4) with a per-round summary.\n";

typedef struct {
    const char *weights, *prompt, *ids, *mode, *trace_dir, *trace_text;
    const char *filters[32];
    int n_filters;
    int max_new_tokens, block_size, print_ids, rounds, ignore_eos;
    double temperature;
    uint64_t seed;
} Args;

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    /* strtol would also take " 5" and "+5": only digits, with an optional '-' */
    if (!(*s == '-' || (*s >= '0' && *s <= '9')) || *end || errno) {
        dflash_set_error("%s: expected an integer in %ld..%ld, got \"%.100s\"", flag, lo, hi, s);
        return -1;
    }
    if (v < lo || v > hi) { dflash_set_error("%s: expected an integer in %ld..%ld, got %ld", flag, lo, hi, v); return -1; }
    *out = v;
    return 0;
}

/* --pitfall NAME: switch on one planted porting mistake (dflash.h). Only
 * ./dflash-pitfall (built with -DDFLASH_PITFALLS) has them. */
static int set_pitfall(const char *name) {
    char list[1024] = "";
    for (int k = 1; k < PITFALL_COUNT; k++) {
        if (strcmp(name, dflash_pitfall_names[k]) == 0) {
#ifdef DFLASH_PITFALLS
            dflash_pitfall = k;
            return 0;
#else
            dflash_set_error("--pitfall: this ./dflash is built without pitfalls; use ./dflash-pitfall "
                             "(make dflash-pitfall, compiled with -DDFLASH_PITFALLS)");
            return -1;
#endif
        }
        strncat(list, k > 1 ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, dflash_pitfall_names[k], sizeof list - strlen(list) - 1);
    }
    dflash_set_error("--pitfall: expected one of %s, got \"%.100s\"", list, name);
    return -1;
}

/* 0: run; 1: --help was asked for; -1: bad arguments (dflash_errmsg) */
static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->max_new_tokens = 16;
    a->block_size = -1;  /* from the draft's config.json */
    a->mode = "dflash";
    a->rounds = argc == 1;  /* the bare walkthrough run shows its rounds */
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        long v;
        int has_value = i + 1 < argc;
        const char *val = has_value ? argv[i + 1] : NULL;
        /* a flag's value may not look like a flag: "--weights --prompt x" */
        if (has_value && strncmp(val, "--", 2) == 0 && val[2]) has_value = 0;
#define NEED_VALUE() do { if (!has_value) { \
            dflash_set_error("%s: missing value%s%.100s%s", f, val ? " (the next argument, \"" : "", \
                             val ? val : "", val ? "\", is a flag)" : ""); return -1; } i++; } while (0)
        if (strcmp(f, "--weights") == 0) { NEED_VALUE(); a->weights = val; }
        else if (strcmp(f, "--prompt") == 0) { NEED_VALUE(); a->prompt = val; }
        else if (strcmp(f, "--ids") == 0) { NEED_VALUE(); a->ids = val; }
        else if (strcmp(f, "--mode") == 0) {
            NEED_VALUE();
            if (strcmp(val, "dflash") != 0 && strcmp(val, "ar") != 0) {
                dflash_set_error("--mode: expected dflash or ar, got \"%.100s\"", val);
                return -1;
            }
            a->mode = val;
        } else if (strcmp(f, "--max-new-tokens") == 0) {
            NEED_VALUE();
            if (parse_int(f, val, 0, 1 << 20, &v)) return -1;
            a->max_new_tokens = (int)v;
        } else if (strcmp(f, "--block-size") == 0) {
            NEED_VALUE();
            if (parse_int(f, val, 1, DFLASH_MAX_BLOCK, &v)) return -1;
            a->block_size = (int)v;
        } else if (strcmp(f, "--seed") == 0) {
            NEED_VALUE();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            /* strtoull would take " -1" (as 2^64 - 1): digits only */
            if (!(*val >= '0' && *val <= '9') || *end || errno) {
                dflash_set_error("--seed: expected an integer in 0..%llu, got \"%.100s\"", ~0ull, val);
                return -1;
            }
            a->seed = s;
        } else if (strcmp(f, "--temperature") == 0) {
            NEED_VALUE();
            char *end;
            double t = strtod(val, &end);
            if (!*val || *end || !isfinite(t) || t < 0) {
                dflash_set_error("--temperature: expected a finite number >= 0, got \"%.100s\"", val);
                return -1;
            }
            a->temperature = t;
        } else if (strcmp(f, "--trace") == 0) { NEED_VALUE(); a->trace_dir = val; }
        else if (strcmp(f, "--trace-text") == 0) { NEED_VALUE(); a->trace_text = val; }
        else if (strcmp(f, "--trace-filter") == 0) {
            NEED_VALUE();
            if (a->n_filters == 32) { dflash_set_error("--trace-filter: expected at most 32, got more"); return -1; }
            a->filters[a->n_filters++] = val;
        } else if (strcmp(f, "--print-ids") == 0) a->print_ids = 1;
        else if (strcmp(f, "--rounds") == 0) a->rounds = 1;
        else if (strcmp(f, "--ignore-eos") == 0) a->ignore_eos = 1;
        else if (strcmp(f, "--pitfall") == 0) { NEED_VALUE(); if (set_pitfall(val) != 0) return -1; }
        else if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) return 1;
        else if (f[0] == '-') { dflash_set_error("unknown flag \"%.100s\" (see --help)", f); return -1; }
        else { dflash_set_error("unexpected argument \"%.100s\": expected a flag (see --help)", f); return -1; }
#undef NEED_VALUE
    }
    if (a->prompt && a->ids) { dflash_set_error("--prompt and --ids: expected one of them, got both"); return -1; }
    if (!a->prompt && !a->ids) a->prompt = "The cat sat";
    return 0;
}

static int parse_ids(const char *s, int *ids, int cap, int *n_out) {
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (!(*p >= '0' && *p <= '9') || errno || v > 0x7fffffff || (*end && *end != ',')) {
            dflash_set_error("--ids: expected comma-separated non-negative integers, got \"%.100s\" "
                             "(id %d)", s, n + 1);
            return -1;
        }
        if (n >= cap) { dflash_set_error("--ids: expected at most %d ids, got more", cap); return -1; }
        ids[n++] = (int)v;
        if (!*end) break;
        p = end + 1;
    }
    *n_out = n;
    return 0;
}

/* words of ids[0..n) joined by spaces ("." sticks to the word before it) */
static void print_words(FILE *out, const Vocab *v, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        const char *w = ids[i] >= 0 && ids[i] < v->n ? v->words[ids[i]] : "<?>";
        fprintf(out, "%s%s", i == 0 || strcmp(w, ".") == 0 ? "" : " ", w);
    }
}

static void print_list(FILE *out, const Vocab *v, const int *ids, int n) {
    fputc('[', out);
    for (int i = 0; i < n; i++) fprintf(out, i ? " %s" : "%s", ids[i] >= 0 && ids[i] < v->n ? v->words[ids[i]] : "<?>");
    fputc(']', out);
}

static void print_rounds(const GenResult *r, const Vocab *v, int B, int n_prompt, int first_new) {
    printf("prefill: ");
    print_words(stdout, v, r->output_ids, n_prompt);
    printf(" at positions 0..%d -> \"%s\" (position %d)\n", n_prompt - 1, v->words[first_new], n_prompt);
    for (int i = 0; i < r->n_rounds; i++) {
        const RoundInfo *ri = &r->rounds[i];
        int acc = ri->acceptance_length;
        printf("round %d: block in   ", i + 1);
        print_list(stdout, v, ri->block_in, B);
        printf(" at positions %d..%d\n", ri->start_before, ri->start_before + B - 1);
        if (B > 1) {
            printf("         draft       ");
            print_list(stdout, v, ri->block + 1, B - 1);
            printf("\n");
        }
        printf("         posterior   ");
        print_list(stdout, v, ri->posterior, B);
        printf("\n         match [");
        for (int j = 0; j + 1 < B; j++) printf(j ? " %d" : "%d", ri->match[j]);
        printf("]  cumprod [");
        for (int j = 0; j + 1 < B; j++) printf(j ? " %d" : "%d", ri->cumprod[j]);
        printf("]  acceptance length %d: keep ", acc);
        print_list(stdout, v, ri->block, acc + 1);
        printf(" + bonus \"%s\"\n", v->words[ri->posterior[acc]]);
        printf("         start %d -> %d; target cache %d positions (0..%d)", ri->start_before,
               ri->start_after, ri->target_cache_after, ri->target_cache_after - 1);
        if (B > 1)
            printf("; draft cache %d -> %d positions (0..%d)", ri->draft_cache_before, ri->draft_cache_after,
                   ri->draft_cache_after - 1);
        printf("\n");
    }
}


static int file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "diff") == 0) return trace_diff_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        if (argc > 2) { fprintf(stderr, "dflash: bench takes no arguments\n"); return 2; }
        if (bench_main() != 0) { dflash_print_error("dflash bench", ""); return 2; }
        return 0;
    }
    Args a;
    int pa = parse_args(argc, argv, &a);
    if (pa < 0) { dflash_print_error("dflash", ""); return 2; }
    if (pa == 1) { fputs(USAGE, stdout); return 0; }
    if (!a.weights)
        a.weights = file_exists("toy_weights/walkthrough/target/model.safetensors") ? "toy_weights/walkthrough"
                                                                                     : "toy_weights/random";
    char path[4096], vocab_path[4096];
    Model target, draft;
    Vocab vocab;
    int have_draft = 0, rc = 2;
    Tracer *tracer = NULL;
    GenResult res = {0};
    memset(&target, 0, sizeof target);
    memset(&draft, 0, sizeof draft);
    memset(&vocab, 0, sizeof vocab);

    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", a.weights);
    if (vocab_load(&vocab, vocab_path) != 0) goto fail;
    snprintf(path, sizeof path, "%s/target", a.weights);
    if (model_load(&target, path, 0) != 0) goto fail;
    int dflash_mode = strcmp(a.mode, "dflash") == 0;
    if (dflash_mode && a.block_size != 1) {
        snprintf(path, sizeof path, "%s/draft", a.weights);
        if (model_load(&draft, path, 1) != 0) goto fail;
        have_draft = 1;
        if (check_pair(&target, &draft) != 0) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("%.500s: %s", a.weights, msg);  /* name the weight set */
            goto fail;
        }
        if (a.block_size < 0) a.block_size = draft.cfg.block_size;
    }
    if (check_vocab(&vocab, vocab_path, &target, have_draft ? &draft : NULL) != 0) goto fail;
    if (a.block_size < 0) a.block_size = 1;

    GenParams p = {0};
    p.max_new_tokens = a.max_new_tokens;
    p.block_size = dflash_mode ? a.block_size : 1;
    p.temperature = a.temperature;
    p.seed = a.seed;
    int eos = vocab_find(&vocab, "<eos>");
    if (!a.ignore_eos && eos >= 0) p.stop_ids[p.n_stop++] = eos;

    int cap = 1 << 16, n_prompt = 0;
    int *prompt = malloc(sizeof(int) * (size_t)cap);
    if (!prompt) { dflash_set_error("out of memory"); goto fail; }
    int tok_rc = a.ids ? parse_ids(a.ids, prompt, cap, &n_prompt) : tokenize(&vocab, a.prompt, prompt, cap, &n_prompt);
    for (int i = 0; tok_rc == 0 && a.ids && i < n_prompt; i++)
        if (prompt[i] >= vocab.n) {
            dflash_set_error("--ids: id %d (position %d): expected a token id in 0..%d (%s), got %d", i + 1, i,
                             vocab.n - 1, vocab_path, prompt[i]);
            tok_rc = -1;
        }
    /* every check of the run's arguments before any output file is opened */
    if (tok_rc == 0 && check_gen_args(&target, n_prompt, &p, p.block_size, prompt) != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("%s (%.500s/target/config.json)", msg, a.weights);
        tok_rc = -1;
    }
    if (tok_rc != 0) { free(prompt); goto fail; }

    if (a.trace_dir || a.trace_text) {
        if (!dflash_mode) { free(prompt); dflash_set_error("--trace: traces are written in --mode dflash only"); goto fail; }
        tracer = trace_open(a.trace_dir, a.trace_text, a.filters, a.n_filters);
        if (!tracer) { free(prompt); goto fail; }
        trace_set_vocab(tracer, &vocab);
        p.trace = trace_hook(tracer);
    }
    int gen_rc = dflash_mode ? dflash_generate(have_draft ? &draft : NULL, &target, prompt, n_prompt, &p, &res)
                             : ar_generate(&target, prompt, n_prompt, &p, &res);
    free(prompt);
    if (tracer) {
        /* a failed run leaves no trace behind (an earlier one stays) */
        int close_rc = gen_rc == 0 ? trace_close(tracer) : (trace_discard(tracer), -1);
        tracer = NULL;
        if (gen_rc == 0 && close_rc != 0) gen_rc = -1;
    }
    if (gen_rc != 0) goto fail;

    if (a.rounds && dflash_mode) print_rounds(&res, &vocab, p.block_size, res.n_prompt, res.output_ids[res.n_prompt < res.n_output ? res.n_prompt : 0]);
    /* the decoded text, without the stop token */
    int shown = res.n_output;
    if (shown > res.n_prompt && p.n_stop && res.output_ids[shown - 1] == p.stop_ids[0]) shown--;
    print_words(stdout, &vocab, res.output_ids, shown);
    printf("\n");
    if (a.print_ids) {  /* the output ids, space-separated (as the oracle prints them) */
        for (int i = 0; i < res.n_output; i++) printf(i ? " %d" : "%d", res.output_ids[i]);
        printf("\n");
    }
    int new_tokens = res.n_output - res.n_prompt;
    if (dflash_mode && res.n_rounds > 0) {
        int total = 0;
        for (int i = 0; i < res.n_rounds; i++) total += res.rounds[i].acceptance_length + 1;
        printf("new tokens: %d, target forward passes: %d, mean acceptance length: %.2f "
               "(tokens per verification, bonus included; block size %d)\n",
               new_tokens, res.target_forwards, (double)total / res.n_rounds, p.block_size);
    } else {
        printf("new tokens: %d, target forward passes: %d, mean acceptance length: - (%s)\n", new_tokens,
               res.target_forwards, dflash_mode ? "no verification rounds" : "autoregressive");
    }
    rc = 0;
fail:
    if (rc != 0) dflash_print_error("dflash", "");
    if (tracer) trace_discard(tracer);
    gen_result_free(&res);
    if (have_draft) model_free(&draft);
    model_free(&target);
    vocab_free(&vocab);
    return rc;
}

