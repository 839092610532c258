/* cli/main.c - the dflash command line: parse the flags, load a weight set,
 * run dflash_generate (or target-only decoding), print the output and the
 * per-round story; `dflash diff`, `dflash explore` and `dflash bench` are dispatched from here. */
#include "dflash.h"
#include "cli/bench.h"
#include "cli/diff.h"
#include "eval/eval.h"
#include "explorer/explore.h"
#include "explorer/figures.h"
#include "gguf/gguf.h"
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"
#include "tokenizer/tokenizer.h"
#include "cli/replay.h"
#include "trace.h"
#include "train/train_cli.h"
#include "tokenizer/tokenize.h"
#include "train/train_target.h"
#include "cli/flags.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* --help (tests/test_usage.c checks that every flag parse_args accepts is
 * listed here, and that no page holds a copy of it). */
static const char *const USAGE[] = {  /* parts: C11 compilers need not take a longer string */
    "usage: dflash [OPTIONS]                          generate; no options: the walkthrough run\n"
    "       dflash diff DIR_A DIR_B [DIFF OPTIONS]    compare traces: A the reference, B the port\n"
    "       dflash explore TRACE_DIR OUT.html [--vocab FILE]   one offline HTML page to explore a trace\n"
    "       dflash figures TRACE_DIR OUT_DIR [--round R] [--layer L] [--head H]\n"
    "                      [--phase draft|prefill|verify] [--vocab FILE]   a trace's figures as SVG files\n"
    "       dflash bench [--threads N]                DFlash vs target-only decoding, timed\n"
    "       dflash train [TRAIN OPTIONS]              train a draft (dflash train --help)\n"
    "       dflash eval [EVAL OPTIONS]                DFlash and the baselines on held-out prompts\n"
    "                                                 (dflash eval --help)\n"
    "       dflash tokenize --tokenizer FILE TEXT      text -> ids through a tokenizer.json (--help)\n"
    "       dflash train-tokenizer --vocab-size N --out FILE CORPUS...   a byte-level BPE (--help)\n"
    "       dflash gguf --weights DIR OUT_DIR          the pair as llama.cpp's GGUF files: OUT_DIR/target.gguf,\n"
    "                   (or --target DIR --draft DIR)  OUT_DIR/draft.gguf; --vocab FILE: vocab.txt or\n"
    "                                                  tokenizer.json (docs/gguf.md)\n"
    "\n"
    "options (each flag: its value, its range, its default):\n"
    "  --weights DIR         the weight set: DIR/{target,draft}/{config.json,model.safetensors}\n"
    "                        and DIR/vocab.txt (default toy_weights/walkthrough, or\n"
    "                        toy_weights/random when that is absent)\n"
    "  --target DIR          instead of --weights: the target's folder (a Hugging Face\n"
    "                        snapshot: config.json, model.safetensors or shards + index)\n"
    "  --draft DIR           with --target: the draft's folder\n"
    "  --prompt TEXT         words of vocab.txt, split on white space, \".\" its own token; with a\n"
    "                        tokenizer.json instead (no vocab.txt), its ids as dflash tokenize\n"
    "                        gives them (post-processor tokens included)\n"
    "  --chat                with a tokenizer.json: --prompt as one ChatML user turn, Qwen3's\n"
    "                        <|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n (not a\n"
    "                        chat template; default off)\n"
    "                        (default \"The cat sat\")\n"
    "",
    "  --ids I,J,...         the prompt as token ids instead: 0..vocab_size-1, comma-separated,\n"
    "                        at most 65536\n"
    "  --max-new-tokens N    new tokens to generate, 0..1048576 (default 16)\n"
    "  --block-size B        1..64; 1 is plain autoregressive decoding, no draft\n"
    "                        (default: block_size in the draft's config.json, 4 for the toy sets)\n"
    "  --temperature T       a finite number >= 0; 0 (default) is greedy\n"
    "  --seed S              the sampling PRNG's seed, 0..18446744073709551615 (default 0)\n"
    "  --mode dflash|ar      dflash (default), or ar: target-only autoregressive decoding\n"
    "  --draft-window trained|flash|full   the draft's sliding_attention layers (NOTES.md,\n"
    "                        \"Sliding-window draft layers\"): trained (default): the last\n"
    "                        sliding_window positions up to the query's own; flash: within\n"
    "                        sliding_window of it on both sides (the published code under\n"
    "                        flash_attention_2); full: every key (its eager and sdpa paths)\n"
    "  --print-ids           also print the output ids, prompt included, and list ids in the\n"
    "                        --rounds log (default off: a tokenizer.json's tokens as text)\n"
    "  --raw-bytes           print decoded text as the tokens' bytes, control characters\n"
    "                        included (default: those and \\ printed as \\xNN; in the --rounds\n"
    "                        log a newline as \\n)\n"
    "  --rounds              print the per-round summary (default: on with no arguments, else off)\n"
    "  --stop-id ID          stop at token ID, 0..2147483647; repeatable, at most 8 (default: the\n"
    "                        target's generation_config.json eos_token_id, else its config.json\n"
    "                        eos_token_id, else the vocabulary word <eos>)\n"
    "  --ignore-eos          do not stop at any stop id (default: stop there)\n"
    "  --trace DIR           write every intermediate: DIR/<name>.npy and DIR/trace.jsonl (TRACE.md)\n"
    "  --trace-text FILE|-   the same tensors as readable text, to FILE or - (stdout: the trace\n"
    "                        alone; the run's own output then goes to stderr)\n"
    "  --trace-filter GLOB   trace only names matching GLOB (*, ?, [..]); repeatable, at most 32\n"
    "                        (default: every name)\n"
    "  --replay DIR          follow the tokens of the trace in DIR (a port's): its prompt, first\n"
    "                        token, verified blocks and kept lengths (TRACE.md, \"Replay\")\n"
    "  --threads N           the matmuls' output rows split over N threads, 1..64, the same bits\n"
    "                        as one (default 1; the -debug build runs one)\n"
    "  -h, --help            this text\n"
    "\n",
    DIFF_HELP,
    "explore options:\n"
    "  --vocab FILE          words for the token ids (default: none; ids are shown)\n"
    "exit status: 0 success (diff: the traces agree); 1 diff: they differ or B lacks names;\n"
    "2 bad input (a flag, a weight file, the vocabulary, a prompt word, a trace)\n",
    NULL};

typedef struct {
    const char *weights, *target, *draft, *prompt, *ids, *trace_dir, *trace_text, *replay;
    const char *filters[32];
    int n_filters;
    int mode;          /* --mode: 0 dflash, 1 ar */
    int draft_window;  /* --draft-window: -1 not given, 0 trained, 1 flash, 2 full */
    long max_new_tokens, block_size, threads;
    int print_ids, rounds, ignore_eos, raw_bytes, chat, mode_given;
    int n_stop, stop_ids[DFLASH_MAX_STOP];
    double temperature;
    uint64_t seed;
} Args;

/* THE flags of the main program (cli/flags.h; tests/test_flags.c checks
 * them against USAGE) */
#define MA(m) offsetof(Args, m)
const Flag MAIN_FLAGS[] = {
    {.name = "--weights", .kind = FLAG_STRING, .field = MA(weights)},
    {.name = "--target", .kind = FLAG_STRING, .field = MA(target)},
    {.name = "--draft", .kind = FLAG_STRING, .field = MA(draft)},
    {.name = "--prompt", .kind = FLAG_STRING, .field = MA(prompt)},
    {.name = "--ids", .kind = FLAG_STRING, .field = MA(ids)},
    {.name = "--max-new-tokens", .kind = FLAG_INT, .field = MA(max_new_tokens), .lo = 0, .hi = 1 << 20},
    {.name = "--block-size", .kind = FLAG_INT, .field = MA(block_size), .lo = 1, .hi = DFLASH_MAX_BLOCK},
    {.name = "--temperature", .kind = FLAG_REAL, .field = MA(temperature), .lo = 0},
    {.name = "--seed", .kind = FLAG_U64, .field = MA(seed)},
    {.name = "--mode", .kind = FLAG_CHOICE, .field = MA(mode), .choices = "dflash|ar"},
    {.name = "--draft-window", .kind = FLAG_CHOICE, .field = MA(draft_window), .choices = "trained|flash|full"},
    {.name = "--print-ids", .kind = FLAG_SWITCH, .field = MA(print_ids)},
    {.name = "--raw-bytes", .kind = FLAG_SWITCH, .field = MA(raw_bytes)},
    {.name = "--chat", .kind = FLAG_SWITCH, .field = MA(chat)},
    {.name = "--rounds", .kind = FLAG_SWITCH, .field = MA(rounds)},
    {.name = "--stop-id", .kind = FLAG_INTS, .field = MA(stop_ids), .lo = 0, .hi = 0x7fffffff, .count = MA(n_stop), .max = DFLASH_MAX_STOP},
    {.name = "--ignore-eos", .kind = FLAG_SWITCH, .field = MA(ignore_eos)},
    {.name = "--trace", .kind = FLAG_STRING, .field = MA(trace_dir)},
    {.name = "--trace-text", .kind = FLAG_STRING, .field = MA(trace_text)},
    {.name = "--trace-filter", .kind = FLAG_STRINGS, .field = MA(filters), .count = MA(n_filters), .max = 32},
    {.name = "--replay", .kind = FLAG_STRING, .field = MA(replay)},
    {.name = "--threads", .kind = FLAG_INT, .field = MA(threads), .lo = 1, .hi = 64},
    FLAG_TABLE_END};
#undef MA

/* 0: run; 1: --help was asked for; -1: bad arguments (dflash_errmsg) */
static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->max_new_tokens = 16;
    a->block_size = -1;  /* from the draft's config.json */
    a->threads = 1;
    a->draft_window = -1;
    a->mode = -1;        /* not given: dflash, or ar for a set without draft/ (main) */
    a->rounds = argc == 1;  /* the bare walkthrough run shows its rounds */
    int rc = flags_parse(MAIN_FLAGS, argc, argv, a, NULL, NULL, 0, NULL);
    if (rc != 0) return rc;
    a->mode_given = a->mode >= 0;
    if (a->mode < 0) a->mode = 0;
    if (a->prompt && a->ids) { dflash_set_error("--prompt and --ids: expected one of them, got both"); return -1; }
    if (a->replay && (a->prompt || a->ids)) {
        dflash_set_error("--replay and --%s: expected one of them (the replayed trace's input_ids is the prompt)",
                         a->prompt ? "prompt" : "ids");
        return -1;
    }
    if (a->replay && a->mode == 1) { dflash_set_error("--replay: expected --mode dflash, got ar"); return -1; }
    if (a->chat && !a->prompt) { dflash_set_error("--chat: expected --prompt TEXT to wrap"); return -1; }
    if (!a->prompt && !a->ids) a->prompt = "The cat sat";
    if (a->weights && (a->target || a->draft)) {
        dflash_set_error("--weights and --%s: expected one way to name the models, got both", a->target ? "target" : "draft");
        return -1;
    }
    if (a->draft && !a->target) { dflash_set_error("--draft: expected --target DIR as well"); return -1; }
    if (a->n_stop && a->ignore_eos) { dflash_set_error("--stop-id and --ignore-eos: expected one of them, got both"); return -1; }
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

/* --raw-bytes: decoded text as its bytes; else escaped (text_put) */
static int raw_bytes;

static void put_text(FILE *out, const char *s, size_t n) {
    if (raw_bytes) fwrite(s, 1, n, out);
    else text_put(out, s, n);
}

/* a piece of text inside one line of the round log: a newline as \n, a tab
 * as \t, the rest escaped as put_text does */
static void put_one_line(FILE *out, const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\n' && s[i] != '\t') continue;
        put_text(out, s + k, i - k);
        if (i < n) fputs(s[i] == '\n' ? "\\n" : "\\t", out);
        k = i + 1;
    }
}

/* --print-ids: the round log lists token ids even with a tokenizer.json */
static int log_ids;

/* token id's word, or the id itself when there is no vocabulary (v->n 0) */
static const char *tok_str(const Vocab *v, int id, char *buf, size_t size) {
    if (v->n == 0) { snprintf(buf, size, "%d", id); return buf; }
    return id >= 0 && id < v->n ? v->words[id] : "<?>";
}

/* words of ids[0..n) joined by spaces ("." sticks to the word before it);
 * with a tokenizer.json (bv->n > 0), the tokens' bytes back to back (put:
 * put_text for the output, put_one_line inside the round log); without
 * either, the ids joined by spaces */
static void print_words(FILE *out, const Vocab *v, const ByteVocab *bv, const int *ids, int n,
                        void (*put)(FILE *, const char *, size_t)) {
    char buf[16];
    if (bv->n) {
        /* the bytes of each run of decodable tokens back to back, escaped as
         * one text: a character split over two tokens (0xC3, then 0xA9) is
         * printed whole, a lone half of one as \xc3 */
        size_t cap = 0;
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < bv->n && bv->words[ids[i]]) cap += (size_t)bv->lens[ids[i]];
        char *text = malloc(cap + 1);
        size_t len = 0;
        for (int i = 0; i <= n; i++) {
            int ok = i < n && ids[i] >= 0 && ids[i] < bv->n && bv->words[ids[i]];
            if (ok && text) {
                memcpy(text + len, bv->words[ids[i]], (size_t)bv->lens[ids[i]]);
                len += (size_t)bv->lens[ids[i]];
                continue;
            }
            if (len) put(out, text, len);
            len = 0;
            if (ok) put(out, bv->words[ids[i]], (size_t)bv->lens[ids[i]]);  /* out of memory: token by token */
            else if (i < n) fprintf(out, "<%d>", ids[i]);
        }
        free(text);
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *w = tok_str(v, ids[i], buf, sizeof buf);
        fputs(i == 0 || (v->n && strcmp(w, ".") == 0) ? "" : " ", out);
        put_text(out, w, strlen(w));
    }
}

/* one token: its word, its text (a tokenizer.json, no --print-ids) or its id */
static void print_tok(FILE *out, const Vocab *v, const ByteVocab *bv, int id) {
    char buf[16];
    if (bv->n && !log_ids && id >= 0 && id < bv->n && bv->words[id]) {
        put_one_line(out, bv->words[id], (size_t)bv->lens[id]);
        return;
    }
    const char *w = tok_str(v, id, buf, sizeof buf);
    put_text(out, w, strlen(w));
}

/* [w1 w2 ...]: the words; with a tokenizer.json each token's text in quotes
 * (["a" " man" "<|mask|>"]), or its id with --print-ids or when it has none */
static void print_list(FILE *out, const Vocab *v, const ByteVocab *bv, const int *ids, int n) {
    char buf[16];
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        if (i) fputc(' ', out);
        if (bv->n && !log_ids && ids[i] >= 0 && ids[i] < bv->n && bv->words[ids[i]]) {
            fputc('"', out);
            put_one_line(out, bv->words[ids[i]], (size_t)bv->lens[ids[i]]);
            fputc('"', out);
            continue;
        }
        const char *w = tok_str(v, ids[i], buf, sizeof buf);
        put_text(out, w, strlen(w));
    }
    fputc(']', out);
}

/* --prompt through a tokenizer.json: HF's encode(text) (post-processor
 * tokens added); --chat: the text as one ChatML user turn, the string
 * Qwen3's chat template makes of a single user message without a system
 * prompt (not the Jinja template: no tools, no thinking switch). */
static int encode_prompt(const Tokenizer *tk, const char *path, const char *text, int chat, int *ids, int cap, int *n) {
    static const char *const OPEN = "<|im_start|>user\n", *const CLOSE = "<|im_end|>\n<|im_start|>assistant\n";
    size_t len = strlen(text), total = chat ? strlen(OPEN) + len + strlen(CLOSE) : len;
    char *s = malloc(total + 1);
    if (!s) { dflash_set_error("out of memory"); return -1; }
    snprintf(s, total + 1, "%s%s%s", chat ? OPEN : "", text, chat ? CLOSE : "");
    IntList l = {0};
    int rc = tok_encode(tk, s, total, 1, &l);
    free(s);
    if (rc != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("--prompt: %.500s: %s", path, msg);
    } else if (l.n == 0) {
        dflash_set_error("--prompt: the text gives no tokens (%.500s); give a non-empty prompt", path);
        rc = -1;
    } else if (l.n > (size_t)cap) {
        dflash_set_error("--prompt: %zu tokens, expected at most %d", l.n, cap);
        rc = -1;
    } else {
        memcpy(ids, l.v, sizeof(int) * l.n);
        *n = (int)l.n;
    }
    int_list_free(&l);
    return rc;
}

/* Where the run's own output goes (the round log, the text, the summary):
 * stdout, or stderr when the text trace is written to stdout (--trace-text -),
 * so that stdout holds the trace alone. */
static FILE *RUN_OUT;

/* first_new: the token sampled at prefill, -1 when none was kept (--max-new-tokens 0);
 * stopped: the output ends at a stop id (else, if cut, at --max-new-tokens) */
/* a hybrid target's round: where every linear layer's recurrent state and
 * conv window are rolled back to after the verify of positions s..s+B-1 that
 * kept the anchor and acc proposals: the state after position p = s + acc
 * (dflash.c, cache_rollback_linear: replayed over those acc + 1 tokens from
 * the state before the verify), the window the K-1 inputs up to p */
static void print_rollback(const Config *tc, const RoundInfo *ri, int B) {
    int acc = ri->acceptance_length, p = ri->start_before + acc, K = tc->linear_conv_kernel_dim;
    fprintf(RUN_OUT, "         rollback    linear layers ");
    for (int l = 0, n = 0; l < tc->num_hidden_layers; l++)
        if (tc->layer_linear[l]) fprintf(RUN_OUT, n++ ? ",%d" : "%d", l);
    fprintf(RUN_OUT, ": state after position %d ", p);
    if (acc + 1 < B) fprintf(RUN_OUT, "(replayed over %d of the %d verified tokens: the anchor + %d accepted)", acc + 1, B, acc);
    else fprintf(RUN_OUT, "(all %d verified tokens kept: nothing to roll back)", B);
    int lo = p - (K - 2);
    fprintf(RUN_OUT, ", conv window positions %d..%d", lo < 0 ? 0 : lo, p);
    if (lo < 0) fprintf(RUN_OUT, " after %d zero rows", -lo);
    fprintf(RUN_OUT, "\n");
}

/* tc: the target's config (a hybrid target's rounds also say where its
 * linear layers are rolled back to) */
static void print_rounds(const GenResult *r, const Vocab *v, const ByteVocab *bv, const Config *tc, int B, int n_prompt,
                         int first_new, int stopped) {
    fprintf(RUN_OUT, "prefill: ");
    print_words(RUN_OUT, v, bv, r->output_ids, n_prompt, put_one_line);
    if (first_new >= 0) {
        fprintf(RUN_OUT, " at positions 0..%d -> \"", n_prompt - 1);
        print_tok(RUN_OUT, v, bv, first_new);
        fprintf(RUN_OUT, "\" (position %d", n_prompt);
        if (bv->n) fprintf(RUN_OUT, ", id %d", first_new);
        fprintf(RUN_OUT, ")\n");
    }
    else {
        fprintf(RUN_OUT, " at positions 0..%d -> no new token (--max-new-tokens 0)\n", n_prompt - 1);
    }
    for (int i = 0; i < r->n_rounds; i++) {
        const RoundInfo *ri = &r->rounds[i];
        int acc = ri->acceptance_length;
        fprintf(RUN_OUT, "round %d: block in   ", i + 1);
        print_list(RUN_OUT, v, bv, ri->block_in, B);
        fprintf(RUN_OUT, " at positions %d..%d\n", ri->start_before, ri->start_before + B - 1);
        if (B > 1) {
            fprintf(RUN_OUT, "         draft       ");
            print_list(RUN_OUT, v, bv, ri->block + 1, B - 1);
            fprintf(RUN_OUT, "\n");
        }
        fprintf(RUN_OUT, "         posterior   ");
        print_list(RUN_OUT, v, bv, ri->posterior, B);
        fprintf(RUN_OUT, "\n         match [");
        for (int j = 0; j + 1 < B; j++) fprintf(RUN_OUT, j ? " %d" : "%d", ri->match[j]);
        fprintf(RUN_OUT, "]  cumprod [");
        for (int j = 0; j + 1 < B; j++) fprintf(RUN_OUT, j ? " %d" : "%d", ri->cumprod[j]);
        fprintf(RUN_OUT, "]  accepted %d + bonus: keep ", acc);
        print_list(RUN_OUT, v, bv, ri->block, acc + 1);
        fprintf(RUN_OUT, " + \"");
        print_tok(RUN_OUT, v, bv, ri->posterior[acc]);
        fprintf(RUN_OUT, "\"");
        /* kept tokens past the output's end (positions from n_output on): a
         * stop id came first, or --max-new-tokens cut them; tau counts them
         * all the same (acc + 1), as the published code's acceptance_lengths do */
        int first_cut = r->n_output - ri->start_before;  /* block index of the first position not output */
        if (first_cut < 1) first_cut = 1;
        if (first_cut <= acc + 1) {
            fprintf(RUN_OUT, "  (%s, not in the output: ", stopped ? "after the stop id" : "past --max-new-tokens");
            for (int j = first_cut; j <= acc + 1; j++) {
                if (j > first_cut) fputc(' ', RUN_OUT);
                print_tok(RUN_OUT, v, bv, j <= acc ? ri->block[j] : ri->posterior[acc]);
            }
            fprintf(RUN_OUT, "; tau counts %s)", first_cut == acc + 1 ? "it" : "them");
        }
        fprintf(RUN_OUT, "\n");
        if (bv->n) {
            /* with a tokenizer.json the lists above are ids: the kept tokens and the bonus as text */
            fprintf(RUN_OUT, "         text        \"");
            print_words(RUN_OUT, v, bv, ri->block, acc + 1, put_one_line);
            fprintf(RUN_OUT, "\" + \"");
            print_words(RUN_OUT, v, bv, &ri->posterior[acc], 1, put_one_line);
            fprintf(RUN_OUT, "\"\n");
        }
        fprintf(RUN_OUT, "         start %d -> %d; target cache %d positions (0..%d)", ri->start_before,
               ri->start_after, ri->target_cache_after, ri->target_cache_after - 1);
        if (B > 1)
            fprintf(RUN_OUT, "; draft cache %d -> %d positions (0..%d)", ri->draft_cache_before, ri->draft_cache_after,
                   ri->draft_cache_after - 1);
        fprintf(RUN_OUT, "\n");
        if (tc->hybrid) print_rollback(tc, ri, B);
    }
    if (B > 1 && r->n_rounds > 0) {
        int count[DFLASH_MAX_BLOCK] = {0};
        int rounds = acceptance_count(r, B, count);
        fprintf(RUN_OUT, "acceptance per position (rounds in which proposal i was accepted, of %d):", rounds);
        for (int i = 1; i < B; i++) fprintf(RUN_OUT, " %d: %.2f", i, (double)count[i - 1] / rounds);
        fprintf(RUN_OUT, "\n");
    }
}


/* ---- the process around a run: descriptors 0-2, signals, stdout -------- */

/* A closed descriptor 0, 1 or 2 would be handed to the first file the run
 * opens (the manifest would then receive what is printed): /dev/null. */
static void open_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        int r = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);  /* the lowest free one: fd */
        if (r != fd) _exit(2);  /* no /dev/null: nowhere to say so either */
    }
}

/* SIGINT, SIGTERM, SIGHUP, SIGPIPE: remove the run's partial output
 * (async-signal-safe: unlink and rmdir), then die of the same signal with
 * its default action, so the exit status is the conventional 128 + signal. */
static void on_signal(int sig) {
    out_cleanup_on_signal();
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
    _exit(128 + sig);
}

/* write(2) of a NUL-terminated string, from a signal handler */
static void say(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* SIGBUS: a mapped weight file shrank under the run (F32 tensors are read
 * in place). One line naming the file, the partial outputs removed, then
 * death by SIGBUS as by the other signals. */
static void on_sigbus(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    const char *file = load_mapped_file(si->si_addr);
    if (file) {
        say("dflash: ");
        say(file);
        say(" shrank while this run read it (weights are used in place, mapped: SIGBUS); the run stopped, its "
            "partial outputs were removed; run again once the file is complete\n");
    } else {
        say("dflash: bus error (SIGBUS) outside the weight files; the partial outputs were removed\n");
    }
    on_signal(sig);
}

static void install_signal_handlers(void) {
    const int sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++) sigaddset(&sa.sa_mask, sigs[i]);
    for (int i = 0; i < 4; i++) {
        struct sigaction old;
        /* a signal ignored by whoever started us stays ignored (nohup, `&`) */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
    /* SIGXFSZ (a file past `ulimit -f`): ignored, so the write fails with
     * EFBIG and the run stops as on a full disk: one line naming the file,
     * the partial outputs removed, exit 2 (docs/your-files.md) */
    signal(SIGXFSZ, SIG_IGN);
    sa.sa_handler = NULL;
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, NULL);
}

/* Every write to stdout so far, and its flush: -1 with dflash_errmsg. */
static int check_stdout(void) {
    errno = 0;
    int flushed = fflush(stdout) == 0;
    if (flushed && !ferror(stdout)) return 0;
    dflash_set_error("cannot write to standard output: %s", !flushed && errno ? strerror(errno) : "an earlier write failed");
    return -1;
}

/* --trace and --trace-text may not be, or be inside, an input of the run
 * (a weight file, a config, vocab.txt, the --replay trace, ...) or each other. */
static int check_output_paths(const Args *a) {
    if (!a->trace_dir && !a->trace_text) return 0;
    char target[4096], draft[4096];
    const char *inputs[4];
    int n = 0;
    if (a->weights) {   /* --weights DIR: DIR, DIR/target, DIR/draft */
        snprintf(target, sizeof target, "%s/target", a->weights);
        snprintf(draft, sizeof draft, "%s/draft", a->weights);
        inputs[n++] = a->weights;
        inputs[n++] = target;
        inputs[n++] = draft;
    } else {            /* --target DIR [--draft DIR] */
        inputs[n++] = a->target;
        if (a->draft) inputs[n++] = a->draft;
    }
    if (a->replay) inputs[n++] = a->replay;   /* the port's trace is read, never written */
    return trace_check_outputs(a->trace_dir, a->trace_text, inputs, n);
}

static int file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Every return of main goes through here: every write to stdout (dflash,
 * diff, bench, --help) and the last flush must have worked; a failure is
 * exit status 2 and one line (none more when rc is 2: one was printed). */
static int finish(int rc) {
    if (check_stdout() != 0) {
        if (rc != 2) dflash_print_error("dflash", "");
        rc = 2;
    }
    if (fflush(stderr) != 0 || ferror(stderr)) rc = 2;
    return rc;
}

/* One run of the decoder: what it read, what it decodes, what it wrote. */
typedef struct {
    Args a;
    char tdir[4096], ddir[4096], vocab_path[4200];
    const char *set_name;  /* --weights or --target, for messages */
    Model target, draft;
    Vocab vocab;           /* vocab.txt */
    ByteVocab tok;         /* or tokenizer.json: its bytes, for output */
    Tokenizer tk;          /* and the tokenizer itself, for --prompt */
    int have_draft, have_vocab, have_tok, dflash_mode;
    GenParams p;
    int *prompt, n_prompt; /* (n_prompt) */
    ReplayTrace replay;
    Tracer *tracer;
    GenResult res;
} Run;

/* the vocabulary is optional: W/vocab.txt, W/tokenizer.json (--weights),
 * the target folder's vocab.txt, its tokenizer.json, the first found;
 * without one, --ids works and output is ids. A tokenizer.json encodes
 * --prompt when tokenizer/tokenizer.c can (else it decodes output only). */
static int run_vocab(Run *r) {
    const char *vdirs[2] = {r->a.weights, r->tdir};
    for (int k = 0; k < 4 && !r->have_vocab && !r->have_tok; k++) {
        if (!vdirs[k / 2]) continue;
        snprintf(r->vocab_path, sizeof r->vocab_path, "%s/%s", vdirs[k / 2], k % 2 ? "tokenizer.json" : "vocab.txt");
        if (!file_exists(r->vocab_path) && errno == ENOENT) continue;
        if (k % 2 ? tok_load_decoder(&r->tk, r->vocab_path) || byte_vocab_from(&r->tok, &r->tk, r->vocab_path)
                  : vocab_load(&r->vocab, r->vocab_path))
            return -1;
        r->have_tok = k % 2, r->have_vocab = !r->have_tok;
    }
    return 0;
}

/* the vocabulary, the target and (DFlash) the draft, each checked against
 * the others and the flags */
static int run_models(Run *r) {
    Args *a = &r->a;
    /* the two model folders: --weights W means W/target and W/draft */
    if (a->weights) {
        snprintf(r->tdir, sizeof r->tdir, "%s/target", a->weights);
        snprintf(r->ddir, sizeof r->ddir, "%s/draft", a->weights);
    } else {
        snprintf(r->tdir, sizeof r->tdir, "%s", a->target);
        snprintf(r->ddir, sizeof r->ddir, "%s", a->draft ? a->draft : "");
    }
    r->set_name = a->weights ? a->weights : a->target;
    if (run_vocab(r) != 0) return -1;
    if (model_load(&r->target, r->tdir, 0) != 0) return -1;
    if (kernel_pack_weights) kernel_pack_weights(&r->target);   /* read-only from here on (kernel.c) */
    if (a->chat && !r->have_tok) {
        dflash_set_error("--chat: wraps the prompt for a tokenizer.json; %.500s has vocab.txt words", r->set_name);
        return -1;
    }
    if (!r->have_vocab && !a->ids && !a->replay && !(r->have_tok && !r->tk.no_encode[0])) {
        if (r->have_tok && r->tk.no_encode[0])
            dflash_set_error("--prompt: %.500s decodes output only, it cannot encode text (%.400s); give token ids "
                             "with --ids", r->vocab_path, r->tk.no_encode);
        else if (!r->have_tok)
            dflash_set_error("--prompt: no vocab.txt in %.500s%s to look the words up in; give token ids with --ids",
                             a->weights ? a->weights : r->tdir, a->weights ? "" : " (the target folder)");
        return -1;
    }
    /* a weight set with no draft/ at all is decoded target-only unless
     * --mode dflash asks for the draft; a draft/ that is there but broken
     * (its config.json missing, say) is an error, as any broken input */
    struct stat dst;
    if (a->weights && !a->mode_given && lstat(r->ddir, &dst) != 0 && errno == ENOENT) {
        a->mode = 1;
        fprintf(stderr, "note: %s has no draft (%s/): target-only decoding, as with --mode ar\n", a->weights, r->ddir);
    }
    r->dflash_mode = a->mode == 0;
    if (r->dflash_mode && a->block_size != 1) {
        if (!r->ddir[0]) {
            dflash_set_error("--target: DFlash decoding needs the draft too (--draft DIR); for target-only decoding "
                             "give --block-size 1 or --mode ar");
            return -1;
        }
        if (model_load(&r->draft, r->ddir, 1) != 0) return -1;
        r->have_draft = 1;
        if (kernel_pack_weights) kernel_pack_weights(&r->draft);
        /* --draft-window: a sliding layer's window one-sided and causal
         * (trained, formats/load.c's default), two-sided, or none (full) */
        for (int l = 0; a->draft_window >= 0 && l < r->draft.cfg.num_hidden_layers; l++) {
            if (a->draft_window == 2) r->draft.cfg.layer_window[l] = 0;  /* full */
            r->draft.cfg.layer_causal[l] = a->draft_window == 0 && r->draft.cfg.layer_window[l] > 0;  /* trained */
        }
        if (check_pair(&r->target, &r->draft) != 0) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("%.500s: %s", r->set_name, msg);  /* name the weight set */
            return -1;
        }
        if (a->block_size < 0) a->block_size = r->draft.cfg.block_size;
    }
    if (r->have_tok && r->tok.n > r->target.cfg.vocab_size) {
        dflash_set_error("%s: token id %d: expected ids below %d (vocab_size in %.500s/config.json)", r->vocab_path,
                         r->tok.n - 1, r->target.cfg.vocab_size, r->tdir);
        return -1;
    }
    if (r->have_vocab && check_vocab(&r->vocab, r->vocab_path, &r->target, r->have_draft ? &r->draft : NULL) != 0)
        return -1;
    if (a->block_size < 0) a->block_size = 1;
    return 0;
}

/* the generation parameters; stop ids: --stop-id; else generation_config.json
 * / config.json eos_token_id of the target; else the vocabulary word <eos> */
static int run_params(Run *r) {
    const Args *a = &r->a;
    GenParams *p = &r->p;
    p->max_new_tokens = a->max_new_tokens;
    p->block_size = r->dflash_mode ? a->block_size : 1;
    p->temperature = a->temperature;
    p->seed = a->seed;
    if (a->n_stop) {
        for (int i = 0; i < a->n_stop; i++) {
            if (a->stop_ids[i] >= r->target.cfg.vocab_size) {
                dflash_set_error("--stop-id: expected a token id in 0..%d (vocab_size in %.500s/config.json), got %d",
                                 r->target.cfg.vocab_size - 1, r->tdir, a->stop_ids[i]);
                return -1;
            }
            p->stop_ids[p->n_stop++] = a->stop_ids[i];
        }
    } else if (!a->ignore_eos) {
        char from[4200];
        if (stop_ids_default(r->tdir, &r->target, p->stop_ids, &p->n_stop, from, sizeof from) != 0) return -1;
        int eos = r->have_vocab ? vocab_find(&r->vocab, "<eos>") : -1;
        if (p->n_stop == 0 && eos >= 0) p->stop_ids[p->n_stop++] = eos;
    }
    return 0;
}

/* the prompt's ids (--replay, --ids, --prompt through vocab.txt or the
 * tokenizer.json), checked with the run's arguments */
static int run_prompt(Run *r) {
    const Args *a = &r->a;
    int cap = 1 << 16;
    r->prompt = malloc(sizeof(int) * (size_t)cap);
    if (!r->prompt) { dflash_set_error("out of memory"); return -1; }
    int rc = 0;
    if (a->replay) {  /* the prompt and the tokens to follow: the trace's (cli/replay.c) */
        rc = replay_load(a->replay, r->target.cfg.vocab_size, &r->replay);
        if (rc == 0 && r->replay.B != r->p.block_size) {
            dflash_set_error("--replay: %.500s verified blocks of %d tokens, this run's block size is %d (give "
                             "--block-size %d)", a->replay, r->replay.B, r->p.block_size, r->replay.B);
            rc = -1;
        }
        if (rc == 0 && r->replay.n_prompt > cap) { dflash_set_error("--replay: the prompt has over %d ids", cap); rc = -1; }
        if (rc == 0) {
            memcpy(r->prompt, r->replay.prompt, sizeof(int) * (size_t)r->replay.n_prompt);
            r->n_prompt = r->replay.n_prompt;
            r->p.replay = &r->replay.r;
        }
    } else {
        if (a->ids) rc = parse_ids(a->ids, r->prompt, cap, &r->n_prompt);
        else if (r->have_vocab) rc = tokenize(&r->vocab, a->prompt, r->prompt, cap, &r->n_prompt);
        else rc = encode_prompt(&r->tk, r->vocab_path, a->prompt, a->chat, r->prompt, cap, &r->n_prompt);
    }
    int n_ids = r->have_vocab ? r->vocab.n : r->target.cfg.vocab_size;
    for (int i = 0; rc == 0 && (a->ids || a->replay) && i < r->n_prompt; i++)
        if (r->prompt[i] >= n_ids) {
            char cfg_path[4300];
            snprintf(cfg_path, sizeof cfg_path, "%s/config.json", r->tdir);
            dflash_set_error("--ids: id %d (position %d): expected a token id in 0..%d (%s), got %d", i + 1, i,
                             n_ids - 1, r->have_vocab ? r->vocab_path : cfg_path, r->prompt[i]);
            rc = -1;
        }
    /* every check of the run's arguments before any output file is opened; the
     * positions first, in the flags' words (check_gen_args says it in GenParams') */
    long last = (long)r->n_prompt + r->p.max_new_tokens + r->p.block_size;
    if (rc == 0 && last > r->target.cfg.max_position_embeddings) {
        dflash_set_error("prompt (%d tokens) + --max-new-tokens (%d) + block size (%d) = %ld exceeds "
                         "max_position_embeddings %d (%.500s/config.json)", r->n_prompt, r->p.max_new_tokens,
                         r->p.block_size, last, r->target.cfg.max_position_embeddings, r->tdir);
        rc = -1;
    }
    if (rc == 0 && check_gen_args(&r->target, r->n_prompt, &r->p, r->p.block_size, r->prompt) != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("%s (%.500s/config.json)", msg, r->tdir);
        rc = -1;
    }
    return rc;
}

/* --trace / --trace-text: the tracer, its filters checked, the run's flags
 * recorded, hooked into the run */
static int run_trace_open(Run *r, int argc, char **argv) {
    const Args *a = &r->a;
    if (!r->dflash_mode) { dflash_set_error("--trace: traces are written in --mode dflash only"); return -1; }
    if (trace_check_filters(a->filters, a->n_filters, r->target.cfg.num_hidden_layers,
                            r->have_draft ? r->draft.cfg.num_hidden_layers : 0, r->p.block_size, r->p.max_new_tokens,
                            r->target.cfg.hybrid) != 0)
        return -1;
    r->tracer = trace_open(a->trace_dir, a->trace_text, a->filters, a->n_filters);
    /* the run's flags, for `dflash diff` to rerun on the other precision's build; without the trace's
     * own outputs (--trace, --trace-text: diff gives its own), so two traces of one run are one file */
    const char **run_argv = r->tracer ? malloc(sizeof *run_argv * (size_t)argc) : NULL;
    int n_run = 0;
    for (int i = 1; run_argv && i < argc; i++) {
        if ((!strcmp(argv[i], "--trace") || !strcmp(argv[i], "--trace-text")) && i + 1 < argc) { i++; continue; }
        run_argv[n_run++] = argv[i];
    }
    int set_rc = run_argv ? trace_set_run(r->tracer, n_run, run_argv) : -1;
    if (r->tracer && !run_argv) dflash_set_error("out of memory");
    free(run_argv);
    if (!r->tracer || set_rc != 0) return -1;
    trace_set_vocab(r->tracer, r->have_vocab ? &r->vocab : NULL);
    r->p.trace = trace_hook(r->tracer);
    return 0;
}

/* the output: --rounds, the decoded text (without the stop token), --print-ids, the summary */
static void run_report(const Run *r) {
    const GenResult *res = &r->res;
    int shown = res->n_output;
    for (int i = 0; shown > res->n_prompt && i < r->p.n_stop; i++)
        if (res->output_ids[shown - 1] == r->p.stop_ids[i]) { shown--; break; }
    if (r->a.rounds && r->dflash_mode)
        print_rounds(res, &r->vocab, &r->tok, &r->target.cfg, r->p.block_size, res->n_prompt,
                     res->n_prompt < res->n_output ? res->output_ids[res->n_prompt] : -1, shown < res->n_output);
    print_words(RUN_OUT, &r->vocab, &r->tok, res->output_ids, shown, put_text);
    fprintf(RUN_OUT, "\n");
    if (r->a.print_ids) {  /* the output ids, space-separated (as the oracle prints them) */
        for (int i = 0; i < res->n_output; i++) fprintf(RUN_OUT, i ? " %d" : "%d", res->output_ids[i]);
        fprintf(RUN_OUT, "\n");
    }
    int new_tokens = res->n_output - res->n_prompt;
    if (r->dflash_mode && res->n_rounds > 0) {
        int total = 0;
        for (int i = 0; i < res->n_rounds; i++) total += res->rounds[i].acceptance_length + 1;
        fprintf(RUN_OUT, "new tokens: %d, target forward passes: %d, tokens per round (tau): %.2f "
               "(accepted + bonus; block size %d)\n",
               new_tokens, res->target_forwards, (double)total / res->n_rounds, r->p.block_size);
    } else {
        fprintf(RUN_OUT, "new tokens: %d, target forward passes: %d, tokens per round (tau): - (%s)\n", new_tokens,
               res->target_forwards, r->dflash_mode ? "no verification rounds" : "autoregressive");
    }
}

static void run_free(Run *r) {
    if (r->tracer) trace_discard(r->tracer);
    free(r->prompt);
    gen_result_free(&r->res);
    replay_free(&r->replay);
    if (kernel_unpack_weights) {   /* the packed copies go before the weights */
        if (r->have_draft) kernel_unpack_weights(&r->draft);
        kernel_unpack_weights(&r->target);
    }
    if (r->have_draft) model_free(&r->draft);
    model_free(&r->target);
    vocab_free(&r->vocab);
    byte_vocab_free(&r->tok);
    tok_free(&r->tk);
}

/* the subcommands: dflash NAME ARGS... */
static const struct { const char *name; int (*main)(int argc, char **argv); } COMMANDS[] = {
    {"diff", diff_main}, {"explore", explore_main}, {"figures", figures_main}, {"train", train_main},
    {"gguf", gguf_main}, {"eval", eval_main}, {"tokenize", tokenize_main}, {"train-tokenizer", train_tokenizer_main},
    {"train-target", train_target_main},
};

int main(int argc, char **argv) {
    open_std_fds();
    install_signal_handlers();
    for (size_t i = 0; argc > 1 && i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (strcmp(argv[1], COMMANDS[i].name) == 0) return finish(COMMANDS[i].main(argc - 1, argv + 1));
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        long threads = 1;
        if (argc == 4 && strcmp(argv[2], "--threads") == 0) {
            if (flags_int("--threads", argv[3], 1, 64, &threads) != 0) { dflash_print_error("dflash bench", ""); return finish(2); }
        } else if (argc > 2) {
            fprintf(stderr, "dflash: bench takes no arguments but --threads N\n");
            return finish(2);
        }
        if (kernel_set_threads) kernel_set_threads((int)threads);
        if (bench_main() != 0) { dflash_print_error("dflash bench", ""); return finish(2); }
        return finish(0);
    }
    static Run r;  /* ~13 KB of paths and the models: not on the stack */
    memset(&r, 0, sizeof r);
    int pa = parse_args(argc, argv, &r.a);
    if (pa < 0) { dflash_print_error("dflash", ""); return finish(2); }
    if (pa == 1) { for (int i = 0; USAGE[i]; i++) fputs(USAGE[i], stdout); return finish(0); }
    if (kernel_set_threads) kernel_set_threads((int)r.a.threads);
    if (r.a.replay && replay_exec(argv) != 0) { dflash_print_error("dflash", ""); return finish(2); }
    raw_bytes = r.a.raw_bytes;
    log_ids = r.a.print_ids;
    RUN_OUT = r.a.trace_text && strcmp(r.a.trace_text, "-") == 0 ? stderr : stdout;
    if (!r.a.weights && !r.a.target)
        r.a.weights = file_exists("toy_weights/walkthrough/target/model.safetensors") ? "toy_weights/walkthrough"
                                                                                       : "toy_weights/random";
    if (check_output_paths(&r.a) != 0) { dflash_print_error("dflash", ""); return finish(2); }
    int rc = 2;
    if (run_models(&r) != 0 || run_params(&r) != 0 || run_prompt(&r) != 0) goto fail;
    if ((r.a.trace_dir || r.a.trace_text) && run_trace_open(&r, argc, argv) != 0) goto fail;
    int gen_rc = r.dflash_mode ? dflash_generate(r.have_draft ? &r.draft : NULL, &r.target, r.prompt, r.n_prompt, &r.p, &r.res)
                               : ar_generate(&r.target, r.prompt, r.n_prompt, &r.p, &r.res);
    if (gen_rc != 0) goto fail;  /* a failed run leaves no trace behind (an earlier one stays) */
    run_report(&r);
    /* the trace is installed only when everything else worked, stdout too */
    if (check_stdout() != 0) goto fail;
    if (r.tracer && r.dflash_mode && trace_acceptance(r.tracer, &r.res, r.p.block_size) != 0) goto fail;
    if (r.tracer) {
        int close_rc = trace_close(r.tracer);
        r.tracer = NULL;
        if (close_rc != 0) goto fail;
    }
    rc = 0;
fail:
    if (rc != 0) dflash_print_error("dflash", "");
    run_free(&r);
    return finish(rc);
}
