/* cli/train_cli.c - `dflash train`: the command around train.c's training step.
 *
 * train.c is the math (one step: the frozen target's forward, the draft's
 * block forward, the weighted cross-entropy, the hand-written backward,
 * clipping, AdamW). This file is everything around it:
 *   1. the flags and --help
 *   2. the data: --data FILE (the line format below), --generate N (the
 *      target writes its own training text), --batches FILE (train_oracle.py's
 *      case file: each step's sequences, masks, anchors and keep flags given)
 *   3. the learning-rate schedule (warmup, then cosine or constant)
 *   4. one step's batch: b sequences cut or padded to S, anchors drawn
 *   5. the output: a Hugging Face draft folder (config.json with the
 *      published DFlash fields + model.safetensors in F32), written whole
 *      into a temporary folder beside --out and renamed into place
 *   6. the loop: progress on stderr, --trace, the summary; --bench
 *
 * Everything that can be refused (a flag, a data line, an id out of range, a
 * draft config that does not fit the target, an output that is an input) is
 * refused before the first step, with one line and exit status 2. */
#include "dflash.h"
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"
#include "trace.h"
#include "train.h"
#include "train_cli.h"
#include "flags.h"

#include <stddef.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ===========================================================================
 * 1. Flags
 * ======================================================================== */

/* README.md's "Training" shows this text verbatim (tests/test_usage.c).
 * Two strings (C11 promises string literals of 4095 characters only). */
static const char *const TRAIN_USAGE[2] = {
    "usage: dflash train --target DIR (--draft DIR | --draft-config FILE) --out DIR\n"
    "                    (--data FILE | --generate N | --batches FILE) [OPTIONS]\n"
    "       dflash train --bench [--target DIR --draft DIR]   time training steps, write nothing\n"
    "\n"
    "Trains a DFlash draft against a frozen target (SpecForge's OnlineDFlashModel, loss\n"
    "\"dflash\"; README.md \"Training\", NOTES.md \"Training: the command\") and writes it\n"
    "as a Hugging Face draft folder.\n"
    "\n"
    "models:\n"
    "  --target DIR          the frozen target's folder (--bench default: toy_weights/random/target)\n"
    "  --draft DIR           continue from this draft folder's weights\n"
    "                        (--bench default: toy_weights/random/draft)\n"
    "  --draft-config FILE   or: a new draft from this config.json (a DFlashDraftModel config;\n"
    "                        seeded initialisation: train.c, train_init_draft)\n"
    "  --out DIR             the trained draft: DIR/config.json and DIR/model.safetensors (F32);\n"
    "                        DIR must be absent, empty, or a draft folder dflash train wrote\n"
    "data (exactly one of):\n"
    "  --data FILE           one sequence per line: token ids separated by spaces; a \"|\" (at most\n"
    "                        one per line): the ids before it get loss mask 0 (a prompt), the ids\n"
    "                        after it 1 (without one: every id 1); blank lines and lines starting\n"
    "                        with # are skipped\n",
    "  --generate N          N sequences, 1..1048576, written by the target (self-distillation):\n"
    "                        a random prompt (loss mask 0), then what the target generates (1)\n"
    "  --prompt-len P        --generate: prompt length, 1..seq-len - 2 (default 4)\n"
    "  --temperature T       --generate: the target's temperature, a finite number >= 0\n"
    "                        (default 0: greedy, the continuation verification accepts)\n"
    "  --batches FILE        train_oracle.py's case file: step s takes batches[s-1] (input_ids,\n"
    "                        loss_mask, anchors, keep) instead of drawing; its other keys are not read\n"
    "training (defaults: SpecForge's DFlash example examples/configs/qwen3-4b-dflash-online.yaml\n"
    "where it has one, else its code's; toy sizes where neither applies):\n"
    "  --steps N             optimizer steps, 0..100000000 (default 100; --batches: its batch count);\n"
    "                        0: write the draft as it starts (--draft-config: its seeded\n"
    "                        initialisation, NOTES.md \"A new draft\"); with --heldout, evaluated\n"
    "  --batch b             sequences per step, 1..4096 (default 4, SpecForge batch_size)\n"
    "  --seq-len S           tokens per sequence, B..max_position_embeddings - B: longer ones\n"
    "                        are cut, shorter ones padded with mask_token_id at loss mask 0\n"
    "                        (default: the longest --data line; --generate: 64)\n"
    "  --anchors N           blocks drawn per sequence, 1..65536 (default 512, SpecForge num_anchors)\n"
    "  --block-size B        1..64 (default: block_size in the draft's config.json)\n"
    "  --lr LR               peak learning rate, > 0 (default 6e-4, SpecForge learning_rate)\n"
    "  --warmup W            linear warmup steps, 0..steps-1 (default: int(0.04 x steps),\n"
    "                        SpecForge warmup_ratio 0.04)\n"
    "  --schedule cosine|constant   after the warmup: cosine decay to 0 (default, SpecForge\n"
    "                        lr_scheduler) or constant\n"
    "  --gamma G             loss weight exp(-(k-1)/G) at block position k >= 1; 0: no decay\n"
    "                        (default 7, SpecForge loss_decay_gamma)\n"
    "  --weight-decay WD     AdamW's decoupled weight decay, >= 0 (default 0, SpecForge's optimizer)\n"
    "  --max-grad-norm C     clip the global gradient norm to C; 0: no clipping (default 1,\n"
    "                        SpecForge max_grad_norm); AdamW betas 0.9, 0.999 (torch's)\n"
    "  --adam-eps E          AdamW's eps, > 0 (default 1e-8, torch's; the parity cases also use 1e-3)\n"
    "  --seed S              data order, anchors, prompts, a new draft's weights,\n"
    "                        0..18446744073709551615 (default 42, SpecForge seed)\n"
    "  --log-every K         a progress line every K steps, and at the first and the last (default 10)\n"
    "  --block-attention bidirectional|causal   inside a block: every position sees the whole\n"
    "                        block (default, DFlash) or only the positions before it and itself\n"
    "                        (EAGLE-style; an experiment: inference stays bidirectional)\n"
    "evaluation and logs:\n"
    "  --heldout N           after training: N held-out sequences the target generates from\n"
    "                        prompts no training sequence starts with (0..65536, default 0);\n"
    "                        the draft proposes a block at every anchor of their continuations\n"
    "                        under the training mask: per-position acceptance and tau printed\n"
    "  --save-data FILE      write the sequences trained on, in --data's format\n"
    "  --log FILE            every step's loss, the evaluation and the held-out sequences\n"
    "                        (README.md \"What training teaches\")\n"
    "  --trace DIR           every step's tensors: DIR/train{s}.<name>.npy and trace.jsonl\n"
    "  --bench               time training steps (default --batch 2 --seq-len 32 --steps 2: a\n"
    "                        warm-up step, then the timed ones) on random ids, write nothing\n"
    "                        (NOTES.md, \"Training speed\")\n"
    "  -h, --help            this text\n"
    "exit status: 0 trained and wrote --out; 2 bad input (a flag, a model, a data line, an output)\n"};

typedef struct {
    const char *target, *draft, *draft_config, *out, *data, *batches, *trace_dir, *save_data, *log;
    long heldout;
    int causal_block;  /* --block-attention: 0 bidirectional, 1 causal */
    long generate, prompt_len, steps, batch, seq_len, anchors, block_size, warmup, log_every;
    double temperature, lr, gamma, weight_decay, max_grad_norm, adam_eps;
    int schedule;      /* Schedule: 0 cosine, 1 constant (the order of --schedule's choices) */
    uint64_t seed;
    int bench;
} TrainArgs;

/* THE flags of dflash train (cli/flags.h; tests/test_flags.c checks them
 * against TRAIN_USAGE) */
#define TA(m) offsetof(TrainArgs, m)
const Flag TRAIN_FLAGS[] = {
    {.name = "--target", .kind = FLAG_STRING, .field = TA(target)},
    {.name = "--draft", .kind = FLAG_STRING, .field = TA(draft)},
    {.name = "--draft-config", .kind = FLAG_STRING, .field = TA(draft_config)},
    {.name = "--out", .kind = FLAG_STRING, .field = TA(out)},
    {.name = "--data", .kind = FLAG_STRING, .field = TA(data)},
    {.name = "--generate", .kind = FLAG_INT, .field = TA(generate), .lo = 1, .hi = 1 << 20},
    {.name = "--prompt-len", .kind = FLAG_INT, .field = TA(prompt_len), .lo = 1, .hi = 1 << 20},
    {.name = "--temperature", .kind = FLAG_REAL, .field = TA(temperature), .lo = 0},
    {.name = "--batches", .kind = FLAG_STRING, .field = TA(batches)},
    {.name = "--steps", .kind = FLAG_INT, .field = TA(steps), .lo = 0, .hi = 100000000},
    {.name = "--batch", .kind = FLAG_INT, .field = TA(batch), .lo = 1, .hi = 4096},
    {.name = "--seq-len", .kind = FLAG_INT, .field = TA(seq_len), .lo = 1, .hi = 1 << 20},
    {.name = "--anchors", .kind = FLAG_INT, .field = TA(anchors), .lo = 1, .hi = 65536},
    {.name = "--block-size", .kind = FLAG_INT, .field = TA(block_size), .lo = 1, .hi = DFLASH_MAX_BLOCK},
    {.name = "--lr", .kind = FLAG_REAL, .field = TA(lr), .lo = 0, .hi = 0, .open = FLAG_OPEN},
    {.name = "--warmup", .kind = FLAG_INT, .field = TA(warmup), .lo = 0, .hi = 100000000},
    {.name = "--schedule", .kind = FLAG_CHOICE, .field = TA(schedule), .choices = "cosine|constant"},
    {.name = "--gamma", .kind = FLAG_REAL, .field = TA(gamma), .lo = 0},
    {.name = "--weight-decay", .kind = FLAG_REAL, .field = TA(weight_decay), .lo = 0},
    {.name = "--max-grad-norm", .kind = FLAG_REAL, .field = TA(max_grad_norm), .lo = 0},
    {.name = "--adam-eps", .kind = FLAG_REAL, .field = TA(adam_eps), .lo = 0, .hi = 0, .open = FLAG_OPEN},
    {.name = "--seed", .kind = FLAG_U64, .field = TA(seed)},
    {.name = "--log-every", .kind = FLAG_INT, .field = TA(log_every), .lo = 1, .hi = 100000000},
    {.name = "--block-attention", .kind = FLAG_CHOICE, .field = TA(causal_block), .choices = "bidirectional|causal"},
    {.name = "--heldout", .kind = FLAG_INT, .field = TA(heldout), .lo = 0, .hi = 65536},
    {.name = "--save-data", .kind = FLAG_STRING, .field = TA(save_data)},
    {.name = "--log", .kind = FLAG_STRING, .field = TA(log)},
    {.name = "--trace", .kind = FLAG_STRING, .field = TA(trace_dir)},
    {.name = "--bench", .kind = FLAG_SWITCH, .field = TA(bench)},
    FLAG_TABLE_END};
#undef TA

/* 0 run, 1 --help, -1 bad arguments (dflash_errmsg) */
static int train_parse_args(int argc, char **argv, TrainArgs *a) {
    memset(a, 0, sizeof *a);
    a->generate = a->steps = a->seq_len = a->block_size = a->warmup = -1;
    a->prompt_len = 4;
    a->batch = -1;  /* 4; --bench: 2 */
    a->anchors = 512;
    a->lr = 6e-4;
    a->gamma = 7;
    a->weight_decay = 0;
    a->max_grad_norm = 1;
    a->adam_eps = 1e-8;
    a->seed = 42;
    a->log_every = 10;
    a->schedule = SCHEDULE_COSINE;
    int rc = flags_parse(TRAIN_FLAGS, argc, argv, a, "dflash train", NULL, 0, NULL);
    if (rc != 0) return rc;
    int batch_given = a->batch > 0;
    if (!batch_given) a->batch = 4;
    if (a->bench) {
        if (!a->target) a->target = "toy_weights/random/target";
        if (!a->draft && !a->draft_config) a->draft = "toy_weights/random/draft";
        if (a->out || a->data || a->generate > 0 || a->batches || a->heldout > 0 || a->save_data || a->log) {
            dflash_set_error("--bench: times steps on random ids and writes nothing; expected no --out, --data, "
                             "--generate, --batches, --heldout, --save-data or --log");
            return -1;
        }
        if (a->steps < 0) a->steps = 2;
        if (a->seq_len < 0) a->seq_len = 32;
        if (!batch_given) a->batch = 2;
    }
    if (!a->target) { dflash_set_error("--target: missing (the frozen target's folder)"); return -1; }
    if (!!a->draft + !!a->draft_config != 1) {
        dflash_set_error("--draft DIR or --draft-config FILE: expected exactly one, got %s",
                         a->draft ? "both" : "neither");
        return -1;
    }
    if (!a->bench) {
        int n_data = !!a->data + (a->generate > 0) + !!a->batches;
        if (n_data != 1) {
            dflash_set_error("--data FILE, --generate N or --batches FILE: expected exactly one, got %s",
                             n_data ? "more" : "none");
            return -1;
        }
        if (!a->out) { dflash_set_error("--out: missing (the folder the trained draft goes to)"); return -1; }
    }
    if (a->steps == 0 && a->bench) {
        dflash_set_error("--steps 0: writes the draft as it starts; --bench times steps (expected --steps >= 1)");
        return -1;
    }
    if (a->warmup >= 0 && a->steps > 0 && a->warmup >= a->steps) {
        dflash_set_error("--warmup: expected fewer steps than --steps (%ld), got %ld", a->steps, a->warmup);
        return -1;
    }
    return 0;
}

/* ===========================================================================
 * 2. Data
 * ======================================================================== */

/* The run's PRNG for data order, --generate's prompts and --bench's ids:
 * xorshift64* seeded through one splitmix64 step, dflash.c's sampling
 * generator (dflash.c section 6). */
static uint64_t cli_rng_seed(uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (z ^ (z >> 31)) | 1;
}

static uint64_t cli_rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* uniform in 0..n-1 (n small: the modulo bias is below 2^-40) */
static int cli_rng_below(uint64_t *s, int n) { return (int)((cli_rng_next(s) >> 11) % (uint64_t)n); }

/* Sequences of different lengths, back to back. */
typedef struct {
    int n;              /* sequences */
    int *len;           /* (n) */
    size_t *off;        /* (n) where each starts in ids / mask */
    int *line;          /* (n) its line in the data file; 0: generated */
    int *ids, *mask;    /* (total) token ids, loss mask 0/1 */
    size_t total, cap_tokens;
    int cap;
} Seqs;

static void seqs_free(Seqs *s) {
    free(s->len);
    free(s->off);
    free(s->line);
    free(s->ids);
    free(s->mask);
    memset(s, 0, sizeof *s);
}

static int seqs_push(Seqs *s, const int *ids, const int *mask, int len, int line) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        int *l = realloc(s->len, sizeof(int) * (size_t)cap), *ln = NULL;
        size_t *o = NULL;
        if (l) s->len = l;
        if (l && (o = realloc(s->off, sizeof(size_t) * (size_t)cap))) s->off = o;
        if (o && (ln = realloc(s->line, sizeof(int) * (size_t)cap))) s->line = ln;
        if (!ln) { dflash_set_error("out of memory (data: %d sequences)", cap); return -1; }
        s->cap = cap;
    }
    if (s->total + (size_t)len > s->cap_tokens) {
        size_t cap = s->cap_tokens ? 2 * s->cap_tokens : 4096;
        while (cap < s->total + (size_t)len) cap *= 2;
        int *i = realloc(s->ids, sizeof(int) * cap), *m = NULL;
        if (i) s->ids = i;
        if (i && (m = realloc(s->mask, sizeof(int) * cap))) s->mask = m;
        if (!m) { dflash_set_error("out of memory (data: %zu tokens)", cap); return -1; }
        s->cap_tokens = cap;
    }
    s->len[s->n] = len;
    s->off[s->n] = s->total;
    s->line[s->n] = line;
    memcpy(s->ids + s->total, ids, sizeof(int) * (size_t)len);
    memcpy(s->mask + s->total, mask, sizeof(int) * (size_t)len);
    s->total += (size_t)len;
    s->n++;
    return 0;
}

/* --data FILE. Each line: token ids (decimal, 0..V-1) separated by spaces
 * or tabs, and at most one "|": the ids before it are a prompt (loss mask 0),
 * the ids after it are trained on (1); a line without "|" is trained on
 * everywhere. Blank lines and lines whose first non-blank is # are skipped. */
static int data_parse(Seqs *s, const char *path, const char *text, size_t len, int V) {
    int *ids = NULL, *mask = NULL, cap = 0, rc = -1;
    int line = 0;
    for (size_t pos = 0; pos < len;) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        line++;
        int n = 0, bars = 0, mask_now = 1;
        /* a "|" anywhere in the line: ids before it are the prompt */
        for (size_t k = pos; k < end; k++) if (text[k] == '|') { mask_now = 0; break; }
        size_t p = pos;
        while (p < end && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r')) p++;
        if (p < end && text[p] == '#') { pos = end + 1; continue; }
        while (p < end) {
            while (p < end && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r')) p++;
            if (p >= end) break;
            size_t q = p;
            while (q < end && text[q] != ' ' && text[q] != '\t' && text[q] != '\r') q++;
            if (q - p == 1 && text[p] == '|') {
                if (++bars > 1) { dflash_set_error("%s:%d: a second \"|\": expected at most one per line", path, line); goto done; }
                mask_now = 1;
                p = q;
                continue;
            }
            long v = 0;
            int ok = q - p <= 10;
            for (size_t k = p; ok && k < q; k++) {
                if (text[k] < '0' || text[k] > '9') ok = 0;
                else v = 10 * v + (text[k] - '0');
            }
            if (!ok) {
                dflash_set_error("%s:%d: token %d: expected a token id (digits) or \"|\", got \"%.*s\"", path, line,
                                 n + 1, (int)(q - p > 40 ? 40 : q - p), text + p);
                goto done;
            }
            if (v >= V) {
                dflash_set_error("%s:%d: token %d: expected a token id in 0..%d (the target's vocab_size), got %ld",
                                 path, line, n + 1, V - 1, v);
                goto done;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                int *ni = realloc(ids, sizeof(int) * (size_t)cap), *nm = NULL;
                if (ni) ids = ni;
                if (ni && (nm = realloc(mask, sizeof(int) * (size_t)cap))) mask = nm;
                if (!nm) { dflash_set_error("out of memory (%s:%d)", path, line); goto done; }
            }
            ids[n] = (int)v;
            mask[n] = mask_now;
            n++;
            p = q;
        }
        if (n == 0 && bars) { dflash_set_error("%s:%d: expected token ids, got only \"|\"", path, line); goto done; }
        if (n > 0 && seqs_push(s, ids, mask, n, line) != 0) goto done;
        pos = end + 1;
    }
    if (s->n == 0) { dflash_set_error("%s: no sequences (every line is blank or a comment)", path); goto done; }
    rc = 0;
done:
    free(ids);
    free(mask);
    return rc;
}

/* Each sequence must hold a block and, cut to S, give a batch of its own at
 * least one anchor slot (train_anchor_count, train.c: SpecForge's
 * min(num_anchors, candidates - 1), the candidates being the positions
 * 0..S-B with loss mask 1), so no batch drawn from the data can lack one. */
static int data_check(const Seqs *s, const char *what, int S, int B, int N) {
    for (int i = 0; i < s->n; i++) {
        char where[4200];
        if (s->line[i]) snprintf(where, sizeof where, "%.4000s:%d", what, s->line[i]);
        else snprintf(where, sizeof where, "%.4000s: sequence %d", what, i + 1);
        if (s->len[i] < B) {
            dflash_set_error("%s: %d ids: expected at least a block (block size %d)", where, s->len[i], B);
            return -1;
        }
        int n = s->len[i] < S ? s->len[i] : S;
        if (train_anchor_count(s->mask + s->off[i], 1, n, B, N) < 1) {
            dflash_set_error("%s: no valid anchor: expected at least 2 positions 0..%d (its first %d ids less a block) "
                             "with loss mask 1 (SpecForge's anchor count rule; README.md \"Training\")", where, n - B, n);
            return -1;
        }
    }
    return 0;
}

/* --generate N: the target continues N random prompts of P ids (uniform
 * over the vocabulary, mask_token_id excepted) up to S tokens at the given
 * temperature, stopping at its stop ids; loss mask 0 on the prompt, 1 on
 * the rest. A sequence that gives no anchor (the target stopped at once) is
 * drawn again, at most 10 N times in all; so is one whose prompt is the
 * start of a sequence of `exclude` (NULL: none; --heldout: the training
 * data). stream: the PRNG stream ("generate", "heldout"). */
static int prompt_excluded(const Seqs *ex, const int *prompt, int P) {
    for (int i = 0; ex && i < ex->n; i++)
        if (ex->len[i] >= P && memcmp(ex->ids + ex->off[i], prompt, sizeof(int) * (size_t)P) == 0) return 1;
    return 0;
}

static int data_generate(Seqs *s, const Model *target, const char *target_dir, int N, int P, int S, int B,
                         int n_anchors, double temperature, int mask_id, uint64_t seed, uint64_t stream,
                         const Seqs *exclude, const char *what) {
    GenParams p = {0};
    char from[4200];
    if (stop_ids_default(target_dir, target, p.stop_ids, &p.n_stop, from, sizeof from) != 0) return -1;
    p.max_new_tokens = S - P;
    p.block_size = 1;
    p.temperature = temperature;
    int V = target->cfg.vocab_size;
    int *prompt = malloc(sizeof(int) * (size_t)P), *mask = malloc(sizeof(int) * (size_t)S);
    int rc = -1, tries = 0, dropped = 0;
    uint64_t rng = cli_rng_seed(seed ^ stream);
    double t0 = now_seconds(), last = t0;
    if (!prompt || !mask) { dflash_set_error("out of memory"); goto done; }
    while (s->n < N) {
        if (++tries > 10 * N) {
            dflash_set_error("%s: %d of %d tries gave no anchor (the target stops right after the prompt) or a "
                             "training prompt; try a larger --prompt-len or --temperature", what, dropped, tries - 1);
            goto done;
        }
        for (int i = 0; i < P; i++) {
            do prompt[i] = cli_rng_below(&rng, V); while (prompt[i] == mask_id && V > 1);
        }
        p.seed = cli_rng_next(&rng);
        if (prompt_excluded(exclude, prompt, P)) { dropped++; continue; }
        GenResult r;
        if (ar_generate(target, prompt, P, &p, &r) != 0) goto done;
        int n = r.n_output;
        for (int i = 0; i < n; i++) mask[i] = i >= P;
        int usable = n >= B && train_anchor_count(mask, 1, n, B, n_anchors) >= 1;
        int push = usable ? seqs_push(s, r.output_ids, mask, n, 0) : 0;
        gen_result_free(&r);
        if (push != 0) goto done;
        if (!usable) dropped++;
        double t = now_seconds();
        if (t - last > 2 || s->n == N) {
            fprintf(stderr, "%s: %d/%d sequences of up to %d ids (%.1f s)\n", what, s->n, N, S, t - t0);
            last = t;
        }
    }
    if (dropped) fprintf(stderr, "%s: %d sequences gave no anchor%s and were drawn again\n", what, dropped,
                         exclude ? " or began like a training sequence" : "");
    rc = 0;
done:
    free(prompt);
    free(mask);
    return rc;
}

/* --batches FILE: train_oracle.py's case file. Only its "batches" list is
 * read: each {"input_ids": b x S ids, "loss_mask": b x S 0/1 (optional, all
 * 1), "anchors": b x N positions 0..S-1, "keep": b x N booleans (optional,
 * all true)}. */
typedef struct {
    int b, S, N;
    int *ids, *mask, *anchors, *keep;  /* (b, S), (b, S), (b, N), (b, N) */
} CaseBatch;

typedef struct {
    int n;
    CaseBatch *batch;  /* (n) */
} Case;

static void case_free(Case *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->batch[i].ids);
        free(c->batch[i].mask);
        free(c->batch[i].anchors);
        free(c->batch[i].keep);
    }
    free(c->batch);
    memset(c, 0, sizeof *c);
}

/* kind: 'i' ids 0..hi, 'm' 0 or 1, 'a' anchors 0..hi, 'k' true/false (or 0/1).
 * rows/cols: the expected shape (-1: any, then set). */
static int case_matrix(const Json *obj, const char *path, int bi, const char *key, char kind, int hi, int *rows,
                       int *cols, int **out) {
    const Json *m = json_get(obj, key);
    char got[96];
    if (!m) { dflash_set_error("%s: batches[%d]: no \"%s\"", path, bi, key); return -1; }
    if (m->type != JSON_ARRAY || m->n == 0 || (*rows >= 0 && m->n != *rows)) {
        dflash_set_error("%s: batches[%d].%s: expected a list of %s%d rows, got %s", path, bi, key,
                         *rows >= 0 ? "" : "at least ", *rows >= 0 ? *rows : 1, json_describe(m, got, sizeof got));
        return -1;
    }
    *rows = m->n;
    for (int r = 0; r < m->n; r++) {
        const Json *row = &m->items[r];
        if (row->type != JSON_ARRAY || row->n == 0 || (*cols >= 0 && row->n != *cols)) {
            dflash_set_error("%s: batches[%d].%s[%d]: expected a list of %s%d values, got %s", path, bi, key, r,
                             *cols >= 0 ? "" : "at least ", *cols >= 0 ? *cols : 1, json_describe(row, got, sizeof got));
            return -1;
        }
        *cols = row->n;
    }
    int *v = malloc(sizeof(int) * (size_t)*rows * (size_t)*cols);
    if (!v) { dflash_set_error("out of memory (%s)", path); return -1; }
    for (int r = 0; r < *rows; r++)
        for (int c = 0; c < *cols; c++) {
            const Json *x = &m->items[r].items[c];
            long long val = -1;
            if (kind == 'k' && x->type == JSON_BOOL) val = x->boolean;
            else if (x->type == JSON_NUMBER && x->is_integer) val = x->integer;
            else if (x->type == JSON_NUMBER && (x->number == 0.0 || x->number == 1.0)) val = (long long)x->number;
            int ok = kind == 'm' || kind == 'k' ? (val == 0 || val == 1) : (val >= 0 && val <= hi);
            if (!ok) {
                const char *want = kind == 'm' ? "0 or 1" : kind == 'k' ? "true or false" : NULL;
                if (want) dflash_set_error("%s: batches[%d].%s[%d][%d]: expected %s, got %s", path, bi, key, r, c, want,
                                           json_describe(x, got, sizeof got));
                else dflash_set_error("%s: batches[%d].%s[%d][%d]: expected an integer in 0..%d%s, got %s", path, bi,
                                      key, r, c, hi, kind == 'i' ? " (the target's vocab_size - 1)" : " (S - 1)",
                                      json_describe(x, got, sizeof got));
                free(v);
                return -1;
            }
            v[(size_t)r * (size_t)*cols + (size_t)c] = (int)val;
        }
    *out = v;
    return 0;
}

static int case_load(Case *c, const char *path, int V) {
    char *text = NULL;
    size_t len = 0;
    Json root;
    memset(c, 0, sizeof *c);
    if (file_read_all(path, &text, &len) != 0) return -1;
    int rc = json_parse(text, len, path, &root);
    free(text);
    if (rc != 0) return -1;
    rc = -1;
    char got[96];
    const Json *bl = json_get(&root, "batches");
    if (!bl || bl->type != JSON_ARRAY || bl->n == 0) {
        dflash_set_error("%s: field \"batches\": expected a non-empty list (train_oracle.py's case format), got %s",
                         path, bl ? json_describe(bl, got, sizeof got) : "nothing");
        goto done;
    }
    c->batch = calloc((size_t)bl->n, sizeof(CaseBatch));
    if (!c->batch) { dflash_set_error("out of memory (%s)", path); goto done; }
    c->n = bl->n;
    for (int i = 0; i < bl->n; i++) {
        const Json *o = &bl->items[i];
        CaseBatch *b = &c->batch[i];
        if (o->type != JSON_OBJECT) {
            dflash_set_error("%s: batches[%d]: expected an object, got %s", path, i, json_describe(o, got, sizeof got));
            goto done;
        }
        int rows = -1, S = -1, rows2, N = -1;
        if (case_matrix(o, path, i, "input_ids", 'i', V - 1, &rows, &S, &b->ids) != 0) goto done;
        rows2 = rows;
        if (case_matrix(o, path, i, "anchors", 'a', S - 1, &rows2, &N, &b->anchors) != 0) goto done;
        b->b = rows, b->S = S, b->N = N;
        b->mask = malloc(sizeof(int) * (size_t)rows * (size_t)S);
        b->keep = malloc(sizeof(int) * (size_t)rows * (size_t)N);
        if (!b->mask || !b->keep) { dflash_set_error("out of memory (%s)", path); goto done; }
        for (size_t k = 0; k < (size_t)rows * (size_t)S; k++) b->mask[k] = 1;
        for (size_t k = 0; k < (size_t)rows * (size_t)N; k++) b->keep[k] = 1;
        const Json *lm = json_get(o, "loss_mask"), *kp = json_get(o, "keep");
        int r = rows, cS = S, cN = N;
        if (lm && lm->type != JSON_NULL) {
            free(b->mask), b->mask = NULL;
            if (case_matrix(o, path, i, "loss_mask", 'm', 1, &r, &cS, &b->mask) != 0) goto done;
        }
        if (kp && kp->type != JSON_NULL) {
            free(b->keep), b->keep = NULL;
            if (case_matrix(o, path, i, "keep", 'k', 1, &r, &cN, &b->keep) != 0) goto done;
        }
        for (int q = 0; q < rows; q++)
            for (int n = 1; n < N; n++)
                if (b->anchors[q * N + n] < b->anchors[q * N + n - 1]) {
                    dflash_set_error("%s: batches[%d].anchors[%d]: expected sorted positions, got %d after %d", path,
                                     i, q, b->anchors[q * N + n], b->anchors[q * N + n - 1]);
                    goto done;
                }
    }
    rc = 0;
done:
    json_free(&root);
    if (rc != 0) case_free(c);
    return rc;
}

/* ===========================================================================
 * 3. The learning-rate schedule
 * ======================================================================== */

double train_lr_at(Schedule kind, double lr, int warmup, int steps, int s) {
    if (s <= warmup) return lr * (double)s / (double)warmup;
    if (kind == SCHEDULE_CONSTANT) return lr;
    const double pi = 3.14159265358979323846;
    return lr * (1.0 + cos(pi * (double)(s - 1 - warmup) / (double)(steps - warmup))) / 2.0;
}

/* ===========================================================================
 * 4. One step's batch
 * ======================================================================== */

/* The buffers of one drawn batch: b sequences of S tokens, N anchor slots. */
typedef struct {
    int b, S, N, B;
    int *ids, *mask;        /* (b, S) */
    int *anchors, *keep;    /* (b, Nb): Nb = train_anchor_count <= N = --anchors */
    int *order;             /* (n_seqs) this epoch's order */
    int *rows;              /* (b) the sequence in each row */
    int cursor;
    /* the target's context features of each sequence (cut/padded to S, as
     * train_step would compute them), kept after its first batch: from the
     * second epoch on, a step runs the draft only. NULL: not kept (more
     * than DRAWER_CACHE_MAX bytes) */
    real *feat;             /* (n_seqs, S, kD) */
    char *have;             /* (n_seqs) */
    real *batch_feat;       /* (b, S, kD) */
    size_t kD;
} Drawer;

#define DRAWER_CACHE_MAX ((size_t)1 << 30)

static void drawer_free(Drawer *d) {
    free(d->ids);
    free(d->mask);
    free(d->anchors);
    free(d->keep);
    free(d->order);
    free(d->rows);
    free(d->feat);
    free(d->have);
    free(d->batch_feat);
    memset(d, 0, sizeof *d);
}

static int drawer_init(Drawer *d, int b, int S, int N, int B, int n_seqs) {
    memset(d, 0, sizeof *d);
    d->b = b, d->S = S, d->N = N, d->B = B;
    size_t bs = (size_t)b * (size_t)S, bn = (size_t)b * (size_t)N;
    d->ids = malloc(sizeof(int) * bs);
    d->mask = malloc(sizeof(int) * bs);
    d->anchors = malloc(sizeof(int) * bn);
    d->keep = malloc(sizeof(int) * bn);
    d->order = malloc(sizeof(int) * (size_t)(n_seqs > 0 ? n_seqs : 1));
    d->rows = malloc(sizeof(int) * (size_t)b);
    d->cursor = n_seqs;  /* shuffle before the first draw */
    if (!d->ids || !d->mask || !d->anchors || !d->keep || !d->order || !d->rows) {
        drawer_free(d);
        dflash_set_error("out of memory (a batch of %d x %d)", b, S);
        return -1;
    }
    return 0;
}

/* The next b sequences of this epoch's order (a fresh Fisher-Yates shuffle
 * of all sequences at each epoch's start), cut to S or padded with pad_id at
 * loss mask 0; then the batch's anchor slot count Nb = train_anchor_count
 * (SpecForge: min(num_anchors, max candidate count - 1)) and per sequence
 * train_draw_anchors(Nb) from the one anchor PRNG, in batch order. */
static int drawer_next(Drawer *d, const Seqs *s, uint64_t *data_rng, uint64_t *anchor_rng, int pad_id, TrainBatch *tb) {
    int S = d->S;
    for (int r = 0; r < d->b; r++) {
        if (d->cursor >= s->n) {
            for (int i = 0; i < s->n; i++) d->order[i] = i;
            for (int i = s->n - 1; i > 0; i--) {
                int j = cli_rng_below(data_rng, i + 1), t = d->order[i];
                d->order[i] = d->order[j];
                d->order[j] = t;
            }
            d->cursor = 0;
        }
        int q = d->order[d->cursor++];
        d->rows[r] = q;
        int n = s->len[q] < S ? s->len[q] : S;
        int *ids = d->ids + (size_t)r * S, *mask = d->mask + (size_t)r * S;
        memcpy(ids, s->ids + s->off[q], sizeof(int) * (size_t)n);
        memcpy(mask, s->mask + s->off[q], sizeof(int) * (size_t)n);
        for (int k = n; k < S; k++) ids[k] = pad_id, mask[k] = 0;
    }
    int Nb = train_anchor_count(d->mask, d->b, S, d->B, d->N);
    if (Nb < 1) { dflash_set_error("train: a batch with no valid anchor (data_check should have refused it)"); return -1; }
    for (int r = 0; r < d->b; r++)
        if (train_draw_anchors(anchor_rng, d->mask + (size_t)r * S, S, d->B, Nb, d->anchors + (size_t)r * Nb,
                               d->keep + (size_t)r * Nb) < 0)
            return -1;
    tb->b = d->b, tb->S = S, tb->N = Nb, tb->B = d->B;
    tb->input_ids = d->ids;
    tb->loss_mask = d->mask;
    tb->anchors = d->anchors;
    tb->keep = d->keep;
    tb->target_hidden = NULL;
    return 0;
}

/* Keep each sequence's context features (drawer_init's d->feat), when they
 * fit in DRAWER_CACHE_MAX bytes. */
static void drawer_cache_init(Drawer *d, const Model *draft, int n_seqs) {
    d->kD = (size_t)draft->cfg.n_target_layer_ids * (size_t)draft->cfg.hidden_size;
    size_t per = (size_t)d->S * d->kD * sizeof(real);
    if (n_seqs <= 0 || per == 0 || (size_t)n_seqs > DRAWER_CACHE_MAX / per) return;
    d->feat = malloc(per * (size_t)n_seqs);
    d->have = calloc((size_t)n_seqs, 1);
    d->batch_feat = malloc(per * (size_t)d->b);
    if (!d->feat || !d->have || !d->batch_feat) {  /* not kept: train_step runs the target */
        free(d->feat), free(d->have), free(d->batch_feat);
        d->feat = d->batch_feat = NULL, d->have = NULL;
    }
}

/* The batch's features from the kept ones, computing those not kept yet
 * exactly as train_step would (target_forward over the row's S ids,
 * train_context_features). */
static int drawer_features(Drawer *d, const Model *draft, const Model *target, TrainBatch *tb) {
    if (!d->feat) return 0;
    const Config *tc = &target->cfg;
    int S = d->S, rc = -1;
    size_t per = (size_t)S * d->kD;
    KVCache cache = {0};
    TargetRun tr = {0};
    for (int r = 0; r < d->b; r++) {
        int q = d->rows[r];
        if (!d->have[q]) {
            if (!cache.key && (cache_init(&cache, tc, S) != 0 || target_run_init(&tr, tc, S, S) != 0)) goto done;
            cache.len = 0;
            target_forward(target, &cache, &tr, d->ids + (size_t)r * S, S, S - 1, NULL);
            train_context_features(d->feat + (size_t)q * per, &tr, target, draft, S);
            d->have[q] = 1;
        }
        memcpy(d->batch_feat + (size_t)r * per, d->feat + (size_t)q * per, sizeof(real) * per);
    }
    tb->target_hidden = d->batch_feat;
    rc = 0;
done:
    cache_free(&cache);
    target_run_free(&tr);
    return rc;
}

/* ===========================================================================
 * 4b. Held-out evaluation, the log, the saved data
 * ======================================================================== */

/* --heldout: what the draft proposes at every anchor of a held-out
 * sequence, teacher-forced. A sequence goes through train_loss_grad alone
 * (b 1, no update) with every position 0..n-B of loss mask 1 as an anchor
 * (keep 1), under the training mask (--block-attention); the hook copies
 * train0.logits. At anchor a, proposal k = 1..B-1 is argmax(logits of block
 * row k); the block accepts L = the number of leading proposals equal to
 * ids[a+k] (the sequence is the target's greedy continuation, so this is
 * what greedy verification accepts at that anchor, given the target's exact
 * context features). accepted[i] counts blocks with L >= i (i = 1..B-1);
 * tau = 1 + mean L (accepted + the bonus token), every anchor weighted
 * alike (decoding visits only the anchors its rounds reach). */
typedef struct { real *logits; size_t cap; int ok; } EvalCapture;

static int eval_hook(void *ctx, const TraceHand *h) {
    EvalCapture *c = ctx;
    const char *dot = strchr(h->name, '.');
    if (!dot || strcmp(dot + 1, "logits") != 0) return 0;
    size_t n = (size_t)h->dims->b * (size_t)h->dims->N * (size_t)h->dims->B * (size_t)h->dims->V;
    if (n > c->cap) { dflash_set_error("--heldout: logits larger than expected"); return -1; }
    memcpy(c->logits, h->buffer, sizeof(real) * n);
    c->ok = 1;
    return 0;
}

static int eval_heldout(const Model *draft, const Model *target, TrainState *st, const Seqs *held, int S, int B,
                        const TrainHyper *hp, long *accepted /* (B) */, long *n_blocks, long *sum_len) {
    int V = target->cfg.vocab_size, rc = -1;
    int *ids = malloc(sizeof(int) * (size_t)S), *mask = malloc(sizeof(int) * (size_t)S);
    int *anchors = malloc(sizeof(int) * (size_t)S), *keep = malloc(sizeof(int) * (size_t)S);
    EvalCapture cap = {NULL, (size_t)S * (size_t)B * (size_t)V, 0};
    cap.logits = malloc(sizeof(real) * cap.cap);
    TraceHook hook = {eval_hook, &cap};
    for (int i = 0; i < B; i++) accepted[i] = 0;
    *n_blocks = *sum_len = 0;
    if (!ids || !mask || !anchors || !keep || !cap.logits) { dflash_set_error("out of memory (--heldout)"); goto done; }
    for (int q = 0; q < held->n; q++) {
        int n = held->len[q] < S ? held->len[q] : S, N = 0;
        memcpy(ids, held->ids + held->off[q], sizeof(int) * (size_t)n);
        memcpy(mask, held->mask + held->off[q], sizeof(int) * (size_t)n);
        for (int p = 0; p + B <= n; p++)
            if (mask[p]) anchors[N] = p, keep[N] = 1, N++;
        if (N == 0) continue;
        TrainBatch tb = {1, n, N, B, ids, mask, anchors, keep, NULL};
        TrainStats ts;
        cap.ok = 0;
        if (train_loss_grad(draft, target, st, &tb, hp, 0, &hook, &ts) != 0) goto done;
        if (!cap.ok) { dflash_set_error("--heldout: the step traced no logits"); goto done; }
        for (int k = 0; k < N; k++) {
            int L = 0;
            for (int j = 1; j < B; j++) {
                int idx = anchors[k] + j;
                if (!mask[idx] || argmax(cap.logits + ((size_t)k * B + j) * V, V) != ids[idx]) break;
                L++;
            }
            for (int i = 1; i <= L; i++) accepted[i]++;
            (*n_blocks)++;
            *sum_len += L;
        }
    }
    rc = 0;
done:
    free(ids);
    free(mask);
    free(anchors);
    free(keep);
    free(cap.logits);
    return rc;
}

/* One sequence as a --data line: the ids of loss mask 0 before a "|"
 * (when the first id has mask 0), then the rest. */
static void seq_write(FILE *f, const Seqs *s, int q) {
    const int *ids = s->ids + s->off[q], *m = s->mask + s->off[q];
    int bar = s->len[q] > 0 && !m[0];
    for (int i = 0; i < s->len[q]; i++) {
        if (bar && m[i]) { fputs(i ? " |" : "|", f); bar = 0; }
        fprintf(f, "%s%d", i ? " " : "", ids[i]);
    }
    fputc('\n', f);
}

/* ===========================================================================
 * 5. The output: a Hugging Face draft folder
 * ======================================================================== */

/* A number as JSON, the shortest "%.{15,16,17}g" that reads back exactly
 * (1e-06 stays 1e-06, 1000000 stays 1000000). */
static void json_number(char *buf, size_t size, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
}

/* config.json: the keys SpecForge's and z-lab's published DFlash configs
 * carry (configs/qwen3-4b-dflash.json; toy_weights' qwen3-layout set), in
 * their (sorted) order, with this draft's values; "dtype" float32. bos_id < 0:
 * the key is left out. */
static void write_config_json(FILE *f, const Config *c, int bos_id, int block_size) {
    char eps[40], theta[40];
    json_number(eps, sizeof eps, c->rms_norm_eps);
    json_number(theta, sizeof theta, c->rope_theta);
    fprintf(f, "{\n  \"architectures\": [\"DFlashDraftModel\"],\n");
    fprintf(f, "  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n");
    fprintf(f, "  \"auto_map\": {\"AutoModel\": \"dflash.DFlashDraftModel\"},\n");
    fprintf(f, "  \"block_size\": %d,\n", block_size);
    if (bos_id >= 0) fprintf(f, "  \"bos_token_id\": %d,\n", bos_id);
    fprintf(f, "  \"dflash_config\": {\"mask_token_id\": %d, \"target_layer_ids\": [", c->mask_token_id);
    for (int i = 0; i < c->n_target_layer_ids; i++) fprintf(f, "%s%d", i ? ", " : "", c->target_layer_ids[i]);
    fprintf(f, "]},\n  \"dtype\": \"float32\",\n");
    if (c->n_eos == 1) fprintf(f, "  \"eos_token_id\": %d,\n", c->eos_token_id[0]);
    else if (c->n_eos > 1) {
        fprintf(f, "  \"eos_token_id\": [");
        for (int i = 0; i < c->n_eos; i++) fprintf(f, "%s%d", i ? ", " : "", c->eos_token_id[i]);
        fprintf(f, "],\n");
    }
    fprintf(f, "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n", c->head_dim, c->hidden_size);
    fprintf(f, "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n", c->intermediate_size);
    fprintf(f, "  \"layer_types\": [");
    for (int i = 0; i < c->num_hidden_layers; i++) fprintf(f, "%s\"full_attention\"", i ? ", " : "");
    fprintf(f, "],\n  \"max_position_embeddings\": %d,\n", c->max_position_embeddings);
    fprintf(f, "  \"max_window_layers\": %d,\n  \"model_type\": \"qwen3\",\n", c->num_hidden_layers);
    fprintf(f, "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n", c->num_attention_heads,
            c->num_hidden_layers);
    fprintf(f, "  \"num_key_value_heads\": %d,\n  \"num_target_layers\": %d,\n", c->num_key_value_heads,
            c->num_target_layers);
    fprintf(f, "  \"rms_norm_eps\": %s,\n  \"rope_scaling\": null,\n  \"rope_theta\": %s,\n", eps, theta);
    fprintf(f, "  \"sliding_window\": null,\n  \"tie_word_embeddings\": false,\n");
    fprintf(f, "  \"use_cache\": true,\n  \"use_sliding_window\": false,\n  \"vocab_size\": %d\n}\n", c->vocab_size);
}

/* model.safetensors, laid out as toy_weights/gen.c writes it: u64 LE header
 * length N, the JSON header {"__metadata__":{"format":"pt"},"key":{"dtype":
 * "F32","shape":[..],"data_offsets":[a,b]},...} space-padded so 8 + N is a
 * multiple of 64, then every tensor's little-endian float32 data back to
 * back in train_params order (fc, hidden_norm, layers, norm). The double
 * build rounds each value to float once here. */
static int write_safetensors(FILE *f, const TrainParam *p, int n) {
    size_t cap = 256 + (size_t)n * 160, len = 0, offset = 0;
    char *h = malloc(cap);
    if (!h) { dflash_set_error("out of memory (the safetensors header)"); return -1; }
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t numel = (size_t)p[i].shape[0] * (size_t)(p[i].ndim == 2 ? p[i].shape[1] : 1);
        char shape[64];
        if (p[i].ndim == 2) snprintf(shape, sizeof shape, "%lld,%lld", (long long)p[i].shape[0], (long long)p[i].shape[1]);
        else snprintf(shape, sizeof shape, "%lld", (long long)p[i].shape[0]);
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                                p[i].key, shape, offset, offset + 4 * numel);
        offset += 4 * numel;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while ((8 + len) % 64 != 0 && len + 1 < cap) h[len++] = ' ';
    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)len >> (8 * b));
    fwrite(len8, 1, 8, f);
    fwrite(h, 1, len, f);
    free(h);
    unsigned char buf[4096];
    for (int i = 0; i < n; i++) {
        size_t numel = (size_t)p[i].shape[0] * (size_t)(p[i].ndim == 2 ? p[i].shape[1] : 1), k = 0;
        while (k < numel) {
            size_t m = 0;
            for (; m < sizeof buf / 4 && k < numel; m++, k++) {
                float x = (float)p[i].data[k];
                uint32_t u;
                memcpy(&u, &x, 4);
                buf[4 * m + 0] = (unsigned char)u;
                buf[4 * m + 1] = (unsigned char)(u >> 8);
                buf[4 * m + 2] = (unsigned char)(u >> 16);
                buf[4 * m + 3] = (unsigned char)(u >> 24);
            }
            fwrite(buf, 1, 4 * m, f);
        }
    }
    return 0;  /* a write error is the stream's: out_commit reports it */
}

/* The folder is written whole into "<out>.partial.XXXXXX" beside it and
 * renamed into place at the end. Every path is in formats/files.c's partial-output
 * registry before it exists, so a failure (outdir_discard) or a signal
 * (cli/main.c's handler, out_cleanup_on_signal) removes it; the files inside are
 * OutFiles. An existing --out is replaced only when it is empty or holds
 * nothing but config.json and model.safetensors (a draft folder this
 * command wrote). */
static const char *const OUT_FILES[2] = {"config.json", "model.safetensors"};

typedef struct {
    char *dir;       /* --out, trailing '/' removed */
    char *tmp;       /* "<dir>.partial.XXXXXX"; NULL: not made */
    char *file[2];   /* tmp/config.json, tmp/model.safetensors */
    int exists;      /* dir is there now (empty or a draft folder) */
} OutDir;

static void outdir_discard(OutDir *o) {
    if (o->tmp) {
        sigset_t old;
        out_block_signals(&old);
        out_remove_owned(o);   /* the files, then the folder (newest first) */
        out_forget(o, 0, NULL);
        out_restore_signals(&old);
    }
    free(o->dir);
    free(o->tmp);
    free(o->file[0]);
    free(o->file[1]);
    memset(o, 0, sizeof *o);
}

static int outdir_prepare(OutDir *o, const char *dir) {
    memset(o, 0, sizeof *o);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == 0 || n > 4000) { dflash_set_error("--out: expected a folder name of 1..4000 characters"); return -1; }
    o->dir = malloc(n + 1);
    char *tmp = malloc(n + 32);
    if (!o->dir || !tmp) { free(tmp); dflash_set_error("out of memory"); return -1; }
    memcpy(o->dir, dir, n);
    o->dir[n] = 0;
    struct stat st;
    if (lstat(o->dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            free(tmp);
            dflash_set_error("--out %s: exists and is not a folder; refusing to replace it (choose another path)", o->dir);
            return -1;
        }
        DIR *d = opendir(o->dir);
        if (!d) { free(tmp); dflash_set_error("--out %s: cannot read the folder: %s", o->dir, strerror(errno)); return -1; }
        struct dirent *e;
        char bad[256] = "";
        while (!bad[0] && (e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, OUT_FILES[0]) &&
                strcmp(e->d_name, OUT_FILES[1]))
                snprintf(bad, sizeof bad, "%s", e->d_name);
        closedir(d);
        if (bad[0]) {
            free(tmp);
            dflash_set_error("--out %s: holds %s, which dflash train does not write; refusing to replace the folder "
                             "(choose another path)", o->dir, bad);
            return -1;
        }
        o->exists = 1;
    } else if (errno != ENOENT) {
        free(tmp);
        dflash_set_error("--out %s: %s", o->dir, strerror(errno));
        return -1;
    }
    snprintf(tmp, n + 32, "%s.partial.XXXXXX", o->dir);
    sigset_t old;
    out_block_signals(&old);
    int made = mkdtemp(tmp) != NULL, err = errno;
    if (made && out_register(o, 'd', tmp) != 0) { rmdir(tmp); made = 0; err = ENOMEM; }
    out_restore_signals(&old);
    if (!made) {
        dflash_set_error("--out %s: cannot create %s: %s", o->dir, tmp, strerror(err));
        free(tmp);
        return -1;
    }
    o->tmp = tmp;
    mode_t mask = umask(0);  /* mkdtemp makes it 0700: the folder gets the usual mode */
    umask(mask);
    chmod(o->tmp, 0777 & ~mask);
    for (int i = 0; i < 2; i++)
        if (!(o->file[i] = path_join(o->tmp, OUT_FILES[i]))) return -1;
    return 0;
}

/* which 0: config.json, 1: model.safetensors, as an OutFile inside the
 * partial folder (registered before its rename makes it a real file) */
static int outdir_write_file(OutDir *o, int which, const Config *c, int bos_id, int B, const TrainParam *p, int n) {
    OutFile *f = out_open(o->file[which], "dflash train");
    if (!f) return -1;
    if (which == 0) write_config_json(out_stream(f), c, bos_id, B);
    else if (write_safetensors(out_stream(f), p, n) != 0 && !ferror(out_stream(f))) { out_abort(f); return -1; }
    sigset_t old;
    out_block_signals(&old);
    int reg = out_register(o, 'f', o->file[which]);
    out_restore_signals(&old);
    if (reg != 0) { out_abort(f); dflash_set_error("out of memory"); return -1; }
    return out_commit(f);
}

/* rename the partial folder onto --out, signals blocked throughout (an
 * existing --out is first moved into an empty "<out>.old.XXXXXX" and
 * removed after the switch) */
static int outdir_commit(OutDir *o) {
    char old[4200] = "";
    int rc = -1;
    sigset_t sig;
    out_block_signals(&sig);
    if (o->exists) {
        snprintf(old, sizeof old, "%s.old.XXXXXX", o->dir);
        if (!mkdtemp(old)) {
            dflash_set_error("--out %s: cannot create %s: %s", o->dir, old, strerror(errno));
            goto done;
        }
        if (rename(o->dir, old) != 0) {
            dflash_set_error("--out %s: cannot move the earlier draft aside: %s", o->dir, strerror(errno));
            rmdir(old);
            goto done;
        }
    }
    if (rename(o->tmp, o->dir) != 0) {
        dflash_set_error("--out %s: cannot rename %s into place: %s", o->dir, o->tmp, strerror(errno));
        if (old[0]) rename(old, o->dir);
        goto done;
    }
    out_forget(o, 0, NULL);
    free(o->tmp);
    o->tmp = NULL;
    if (old[0]) {
        for (int i = 0; i < 2; i++) {
            char *p = path_join(old, OUT_FILES[i]);
            if (p) unlink(p);
            free(p);
        }
        rmdir(old);
    }
    rc = 0;
done:
    out_restore_signals(&sig);
    return rc;
}

/* ===========================================================================
 * 6. The command
 * ======================================================================== */

/* bos_token_id of a config.json (-1: absent, not an integer, unreadable) */
static int config_bos(const char *path) {
    char *text = NULL;
    size_t len = 0;
    Json root;
    int bos = -1;
    char saved[sizeof dflash_errmsg];
    memcpy(saved, dflash_errmsg, sizeof saved);
    if (file_read_all(path, &text, &len) == 0 && json_parse(text, len, path, &root) == 0) {
        const Json *b = json_get(&root, "bos_token_id");
        if (b && b->type == JSON_NUMBER && b->is_integer && b->integer >= 0 && b->integer < 0x7fffffff) bos = (int)b->integer;
        json_free(&root);
    }
    free(text);
    memcpy(dflash_errmsg, saved, sizeof saved);
    return bos;
}

static void fmt_duration(char *buf, size_t size, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, size, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60) snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, size, "%.1fs", s);
}

int train_main(int argc, char **argv) {
    TrainArgs a;
    int pa = train_parse_args(argc, argv, &a);
    if (pa == 1) { fputs(TRAIN_USAGE[0], stdout); fputs(TRAIN_USAGE[1], stdout); return 0; }
    if (pa < 0) { dflash_print_error("dflash train", ""); return 2; }

    Model target, draft;
    Seqs seqs, held;
    OutFile *logf = NULL, *savef = NULL;
    long *accepted = NULL;
    Case cs;
    Drawer dr;
    OutDir od;
    TrainState *st = NULL;
    Tracer *tracer = NULL;
    TrainParam *params = NULL;
    int have_draft = 0, rc = 2;
    memset(&target, 0, sizeof target);
    memset(&draft, 0, sizeof draft);
    memset(&seqs, 0, sizeof seqs);
    memset(&held, 0, sizeof held);
    memset(&cs, 0, sizeof cs);
    memset(&dr, 0, sizeof dr);
    memset(&od, 0, sizeof od);

    /* outputs against inputs, before anything is read or written */
    const char *inputs[8];
    int n_inputs = 0;
    inputs[n_inputs++] = a.target;
    inputs[n_inputs++] = a.draft ? a.draft : a.draft_config;
    if (a.data) inputs[n_inputs++] = a.data;
    if (a.batches) inputs[n_inputs++] = a.batches;
    if (a.out) {
        if (trace_check_outputs(a.out, NULL, inputs, n_inputs) != 0) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("--out: %s", strncmp(msg, "trace: ", 7) == 0 ? msg + 7 : msg);
            goto fail;
        }
        inputs[n_inputs++] = a.out;
    }
    if (a.trace_dir && trace_check_outputs(a.trace_dir, NULL, inputs, n_inputs) != 0) goto fail;
    {
        OutPath outs[4] = {{a.log, "the log", 0}, {a.save_data, "the saved data", 0}, {a.out, "the draft folder", 1},
                           {a.trace_dir, "the trace directory", 1}};
        if ((a.log || a.save_data) && out_check_paths("dflash train", outs, 4, inputs, n_inputs - !!a.out) != 0)
            goto fail;
    }
    /* --out and --trace apart (each is replaced whole): the text-trace
     * check of trace_check_outputs compares two paths both ways */
    if (a.trace_dir && a.out && trace_check_outputs(a.trace_dir, a.out, NULL, 0) != 0) {
        dflash_set_error("--out %s and --trace %s: expected two separate folders, neither inside the other", a.out,
                         a.trace_dir);
        goto fail;
    }

    /* the models */
    if (model_load(&target, a.target, 0) != 0) goto fail;
    char src_config[4200];
    if (a.draft) {
        if (model_load(&draft, a.draft, 1) != 0) goto fail;
        snprintf(src_config, sizeof src_config, "%s/config.json", a.draft);
    } else {
        Config dcfg;
        if (config_load(&dcfg, a.draft_config, 1) != 0) goto fail;
        Model probe;
        memset(&probe, 0, sizeof probe);
        probe.cfg = dcfg;
        if (check_pair(&target, &probe) != 0) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("%.500s: %s", a.draft_config, strncmp(msg, "draft config.json: ", 19) == 0 ? msg + 19 : msg);
            goto fail;
        }
        if (train_init_draft(&draft, &dcfg, &target, a.seed) != 0) goto fail;
        snprintf(src_config, sizeof src_config, "%s", a.draft_config);
    }
    have_draft = 1;
    if (check_pair(&target, &draft) != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("%.500s: %s", a.draft ? a.draft : a.draft_config, msg);
        goto fail;
    }
    const Config *dc = &draft.cfg;
    int V = target.cfg.vocab_size;
    int B = a.block_size > 0 ? (int)a.block_size : dc->block_size;
    if (dc->mask_token_id < 0 || dc->mask_token_id >= V) {
        dflash_set_error("%s: mask_token_id %d: expected a token id in 0..%d (the target's vocab_size - 1)", src_config,
                         dc->mask_token_id, V - 1);
        goto fail;
    }
    int max_pos = target.cfg.max_position_embeddings < dc->max_position_embeddings ? target.cfg.max_position_embeddings
                                                                                   : dc->max_position_embeddings;

    /* the data */
    int S = (int)a.seq_len, steps = (int)a.steps;
    if (a.batches) {
        if (case_load(&cs, a.batches, V) != 0) goto fail;
        if (steps < 0) steps = cs.n;
        if (steps > cs.n) {
            dflash_set_error("--steps: expected at most %d (the batches in %s), got %d", cs.n, a.batches, steps);
            goto fail;
        }
        for (int i = 0; i < cs.n; i++) {
            if (cs.batch[i].S < B) {
                dflash_set_error("%s: batches[%d]: sequences of %d ids: expected at least a block (block size %d)",
                                 a.batches, i, cs.batch[i].S, B);
                goto fail;
            }
            if (cs.batch[i].S + B > max_pos) {
                dflash_set_error("%s: batches[%d]: %d ids: expected at most %d (max_position_embeddings - block size)",
                                 a.batches, i, cs.batch[i].S, max_pos - B);
                goto fail;
            }
        }
    } else {
        if (steps < 0) steps = 100;
        if (a.data) {
            char *text = NULL;
            size_t len = 0;
            if (file_read_all(a.data, &text, &len) != 0) goto fail;
            int prc = data_parse(&seqs, a.data, text, len, V);
            free(text);
            if (prc != 0) goto fail;
            if (S < 0) {
                S = 0;
                for (int i = 0; i < seqs.n; i++) if (seqs.len[i] > S) S = seqs.len[i];
                if (S > 4096) S = 4096;
                if (S < B) S = B;
            }
        } else if (S < 0) {
            S = 64;
        }
        if (S < B || S + B > max_pos) {
            dflash_set_error("--seq-len: expected %d..%d (the block size .. max_position_embeddings - block size), got %d",
                             B, max_pos - B, S);
            goto fail;
        }
        if (a.generate > 0) {
            if (a.prompt_len > S - 2) {
                dflash_set_error("--prompt-len: expected 1..%d (--seq-len - 2), got %ld", S - 2, a.prompt_len);
                goto fail;
            }
        }
        if (a.data && data_check(&seqs, a.data, S, B, (int)a.anchors) != 0) goto fail;
    }
    int warmup = a.warmup >= 0 ? (int)a.warmup : (int)(0.04 * steps);
    if (steps > 0 && warmup >= steps) {
        dflash_set_error("--warmup: expected fewer steps than --steps (%d), got %d", steps, warmup);
        goto fail;
    }

    /* every check passed: the output folder, the trace, then the work */
    if (a.out && outdir_prepare(&od, a.out) != 0) goto fail;
    if (a.log && !(logf = out_open(a.log, "dflash train"))) goto fail;
    if (a.save_data && !(savef = out_open(a.save_data, "dflash train"))) goto fail;
    if (a.generate > 0 && data_generate(&seqs, &target, a.target, (int)a.generate, (int)a.prompt_len, S, B,
                                        (int)a.anchors, a.temperature, dc->mask_token_id, a.seed,
                                        0x67656e6572617465ull /* "generate" */, NULL, "generate") != 0)
        goto fail;
    if (a.bench) {  /* random ids, every position trained */
        uint64_t r = cli_rng_seed(a.seed ^ 0x62656e6368ull);  /* "bench" */
        int *ids = malloc(sizeof(int) * (size_t)S), *mask = malloc(sizeof(int) * (size_t)S);
        int prc = ids && mask ? 0 : -1;
        for (int q = 0; prc == 0 && q < (int)a.batch; q++) {
            for (int k = 0; k < S; k++) ids[k] = cli_rng_below(&r, V), mask[k] = 1;
            prc = seqs_push(&seqs, ids, mask, S, 0);
        }
        free(ids);
        free(mask);
        if (prc != 0) { dflash_set_error("out of memory"); goto fail; }
    }
    if (a.heldout > 0 && !a.batches &&
        data_generate(&held, &target, a.target, (int)a.heldout, (int)a.prompt_len, S, B, (int)a.anchors, a.temperature,
                      dc->mask_token_id, a.seed, 0x68656c646f7574ull /* "heldout" */, &seqs, "heldout") != 0)
        goto fail;
    if (savef) {
        fprintf(out_stream(savef), "# dflash train: the %d sequences trained on (--data format: prompt | "
                                   "continuation)\n", seqs.n);
        for (int q = 0; q < seqs.n; q++) seq_write(out_stream(savef), &seqs, q);
    }
    if (logf) {
        FILE *f = out_stream(logf);
        fprintf(f, "# dflash train log (README.md \"What training teaches\")\ncommand dflash");
        for (int i = 1; i < argc; i++) fprintf(f, " %s", argv[i]);
        fprintf(f, "\nsetup steps %d batch %d seq_len %d block %d anchors %ld lr %g warmup %d schedule %s gamma %g "
                   "block_attention %s layers %d target_layers", steps, a.batches ? cs.batch[0].b : (int)a.batch, S, B,
                a.anchors, a.lr, warmup, a.schedule == SCHEDULE_COSINE ? "cosine" : "constant", a.gamma,
                a.causal_block ? "causal" : "bidirectional", dc->num_hidden_layers);
        for (int i = 0; i < dc->n_target_layer_ids; i++) fprintf(f, "%s%d", i ? "," : " ", dc->target_layer_ids[i]);
        fprintf(f, " sequences %d seed %llu\n", seqs.n, (unsigned long long)a.seed);
    }
    if (!a.batches && drawer_init(&dr, (int)a.batch, S, (int)a.anchors, B, seqs.n) != 0) goto fail;
    if (!a.batches && !a.bench && !a.trace_dir) drawer_cache_init(&dr, &draft, seqs.n);
    st = train_state_new(&draft, &target);
    if (!st) goto fail;
    if (a.trace_dir) {
        tracer = trace_open(a.trace_dir, NULL, NULL, 0);
        if (!tracer) goto fail;
    }

    TrainHyper hp = {0};
    hp.beta1 = 0.9, hp.beta2 = 0.999;  /* torch.optim.AdamW's defaults (SpecForge passes none) */
    hp.eps = a.adam_eps;
    hp.weight_decay = a.weight_decay;
    hp.max_grad_norm = a.max_grad_norm;
    hp.gamma = a.gamma;
    hp.causal_block = a.causal_block;
    uint64_t data_rng = cli_rng_seed(a.seed ^ 0x64617461ull);      /* "data" */
    uint64_t anchor_rng = train_rng_seed(a.seed ^ 0x616e63686f72ull); /* "anchor" */
    double cpu_steps = 0;  /* --bench: processor time too (the wall clock of a shared machine says little) */
    double t_start = now_seconds(), t_steps = 0, first_loss = 0, last_loss = 0, last_acc = 0, first_acc = 0;
    long tokens = 0;
    if (a.bench)
        fprintf(stderr, "bench: %s draft (%d layers, hidden %d) against %s, batch %ld x %d tokens, block %d, "
                        "%ld anchors at most, %s\n", a.draft ? a.draft : a.draft_config, dc->num_hidden_layers,
                dc->hidden_size, a.target, a.batch, S, B, a.anchors, REAL_NAME);
    else
        fprintf(stderr, "train: %d steps on %s%s, batch %d x %d, block %d, lr %g (%s, warmup %d), gamma %g, "
                        "weight decay %g, clip %g, seed %llu\n", steps,
                a.batches ? "the batches of " : a.data ? "the sequences of " : "generated sequences",
                a.batches ? a.batches : a.data ? a.data : "", a.batches ? cs.batch[0].b : (int)a.batch,
                a.batches ? cs.batch[0].S : S, B, a.lr, a.schedule == SCHEDULE_COSINE ? "cosine" : "constant", warmup,
                a.gamma, a.weight_decay, a.max_grad_norm, (unsigned long long)a.seed);
    for (int s = 1; s <= steps; s++) {
        TrainBatch tb;
        if (a.batches) {
            const CaseBatch *cb = &cs.batch[s - 1];
            tb.b = cb->b, tb.S = cb->S, tb.N = cb->N, tb.B = B;
            tb.input_ids = cb->ids, tb.loss_mask = cb->mask, tb.anchors = cb->anchors, tb.keep = cb->keep;
            tb.target_hidden = NULL;
        } else if (drawer_next(&dr, &seqs, &data_rng, &anchor_rng, dc->mask_token_id, &tb) != 0 ||
                   drawer_features(&dr, &draft, &target, &tb) != 0) {
            goto fail;
        }
        hp.lr = train_lr_at(a.schedule, a.lr, warmup, steps, s);
        TrainStats ts;
        memset(&ts, 0, sizeof ts);
        double t0 = now_seconds();
        clock_t c0 = clock();
        if (train_step(&draft, &target, st, &tb, &hp, s, tracer ? trace_hook(tracer) : NULL, &ts) != 0) goto fail;
        double dt = now_seconds() - t0, dcpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
        if (!(a.bench && s == 1 && steps > 1)) {  /* bench: step 1 warms up */
            t_steps += dt;
            cpu_steps += dcpu;
            tokens += (long)tb.b * tb.S;
        }
        if (logf)
            fprintf(out_stream(logf), "step %d loss %.6f acc %.6f lr %.6e grad_norm %.6f\n", s, ts.loss, ts.accuracy,
                    hp.lr, ts.grad_norm);
        if (s == 1) first_loss = ts.loss, first_acc = ts.accuracy;
        last_loss = ts.loss, last_acc = ts.accuracy;
        if (s == 1 || s == steps || s % a.log_every == 0) {
            char eta[32];
            double per = (now_seconds() - t_start) / s;
            fmt_duration(eta, sizeof eta, per * (steps - s));
            fprintf(stderr, "step %d/%d  loss %.4f  acc %.4f  lr %.3e  grad norm %.4f  %.0f tok/s  %.0f ms/step  "
                            "ETA %s\n", s, steps, ts.loss, ts.accuracy, hp.lr, ts.grad_norm,
                    dt > 0 ? (double)tb.b * tb.S / dt : 0.0, dt * 1e3, eta);
        }
    }
    if (a.bench) {
        int timed = steps > 1 ? steps - 1 : 1;
        printf("train step (%s, batch %ld x %d tokens, block %d): %.1f ms per step, %.1f training tokens/s; "
               "processor time %.1f ms per step, %.1f tokens/s (mean of %d step%s after a warm-up step)\n", REAL_NAME,
               a.batch, S, B, 1e3 * t_steps / timed, t_steps > 0 ? tokens / t_steps : 0.0, 1e3 * cpu_steps / timed,
               cpu_steps > 0 ? tokens / cpu_steps : 0.0, timed, timed > 1 ? "s" : "");
        rc = 0;
        goto fail;
    }

    /* the held-out evaluation */
    if (held.n > 0) {
        long n_blocks, sum_len;
        accepted = calloc((size_t)B + 1, sizeof(long));
        if (!accepted) { dflash_set_error("out of memory"); goto fail; }
        double t0 = now_seconds();
        if (eval_heldout(&draft, &target, st, &held, S, B, &hp, accepted, &n_blocks, &sum_len) != 0) goto fail;
        double tau = n_blocks ? 1.0 + (double)sum_len / (double)n_blocks : 0;
        fprintf(stderr, "heldout: %d sequences, %ld blocks (%.1f s): tau %.4f, acceptance per position", held.n,
                n_blocks, now_seconds() - t0, tau);
        for (int i = 1; i < B; i++) fprintf(stderr, " %.4f", n_blocks ? (double)accepted[i] / (double)n_blocks : 0);
        fputc('\n', stderr);
        if (logf) {
            FILE *f = out_stream(logf);
            fprintf(f, "heldout_eval sequences %d blocks %ld tau %.6f acceptance_per_position", held.n, n_blocks, tau);
            for (int i = 1; i < B; i++) fprintf(f, " %.6f", n_blocks ? (double)accepted[i] / (double)n_blocks : 0);
            fputc('\n', f);
            for (int q = 0; q < held.n; q++) {
                fputs("heldout ", f);
                seq_write(f, &held, q);
            }
        }
    }

    /* the draft folder */
    int cap = 11 * dc->num_hidden_layers + 8;
    params = calloc((size_t)cap, sizeof(TrainParam));
    if (!params) { dflash_set_error("out of memory"); goto fail; }
    int n_params = train_params(&draft, params, cap);
    if (n_params <= 0) goto fail;
    Config out_cfg = *dc;
    out_cfg.n_eos = target.cfg.n_eos;
    memcpy(out_cfg.eos_token_id, target.cfg.eos_token_id, sizeof out_cfg.eos_token_id);
    int bos = config_bos(src_config);
    if (bos < 0) {
        char tcfg[4200];
        snprintf(tcfg, sizeof tcfg, "%s/config.json", a.target);
        bos = config_bos(tcfg);
    }
    if (outdir_write_file(&od, 0, &out_cfg, bos, B, params, n_params) != 0 ||
        outdir_write_file(&od, 1, &out_cfg, bos, B, params, n_params) != 0)
        goto fail;
    if (tracer) {
        int crc = trace_close(tracer);
        tracer = NULL;
        if (crc != 0) goto fail;
    }
    if (outdir_commit(&od) != 0) goto fail;
    if (savef) {
        int src = out_commit(savef);
        savef = NULL;
        if (src != 0) goto fail;
    }
    if (logf) {
        int lrc = out_commit(logf);
        logf = NULL;
        if (lrc != 0) goto fail;
    }
    double total = now_seconds() - t_start;
    char dur[32];
    fmt_duration(dur, sizeof dur, total);
    size_t n_weights = 0;
    for (int i = 0; i < n_params; i++)
        n_weights += (size_t)params[i].shape[0] * (size_t)(params[i].ndim == 2 ? params[i].shape[1] : 1);
    fprintf(stderr, "trained %d steps in %s (%.0f training tokens/s): loss %.4f -> %.4f, accuracy %.4f -> %.4f\n",
            steps, dur, t_steps > 0 ? tokens / t_steps : 0.0, first_loss, last_loss, first_acc, last_acc);
    fprintf(stderr, "wrote %s: config.json, model.safetensors (%d tensors, %zu parameters, F32)%s%s\n", od.dir,
            n_params, n_weights, a.trace_dir ? "; trace " : "", a.trace_dir ? a.trace_dir : "");
    rc = 0;
fail:
    if (rc != 0) dflash_print_error("dflash train", "");
    if (tracer) trace_discard(tracer);
    out_abort(logf);
    out_abort(savef);
    free(accepted);
    seqs_free(&held);
    outdir_discard(&od);
    free(params);
    train_state_free(st);
    drawer_free(&dr);
    case_free(&cs);
    seqs_free(&seqs);
    if (have_draft) model_free(&draft);
    model_free(&target);
    return rc;
}
