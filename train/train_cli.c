/* train/train_cli.c - `dflash train`: the command around train/train.c's training step.
 *
 * train/train.c is the math (one step: the frozen target's forward, the draft's
 * block forward, the weighted cross-entropy, the hand-written backward,
 * clipping, AdamW; and the learning-rate schedule and the held-out
 * evaluation). The data (--data, --generate, --batches, the batch drawer)
 * is train/train_data.c; the draft folder it writes is train/draftdir.c.
 * This file is the command:
 *   1. the flags (TRAIN_FLAGS, cli/flags.h) and --help
 *   2. the run, in phases (TrainCmd): the outputs checked, the models, the
 *      data, the setup, the start (or --resume: a checkpoint's position),
 *      the loop (progress on stderr, --trace, --bench, checkpoints,
 *      SIGINT/SIGTERM), the held-out evaluation, the folder and the summary
 *
 * Everything that can be refused (a flag, a data line, an id out of range, a
 * draft config that does not fit the target, an output that is an input) is
 * refused before the first step, with one line and exit status 2. */
#include "dflash.h"
#include "train/draftdir.h"
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"
#include "trace.h"
#include "train/train.h"
#include "train/train_cli.h"
#include "train/train_data.h"
#include "train/checkpoint.h"
#include "cli/flags.h"

#include <stdarg.h>
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

/* dflash train --help (tests/test_usage.c checks its flags).
 * Three strings (C11 promises string literals of 4095 characters only). */
static const char *const TRAIN_USAGE[3] = {
    "usage: dflash train --target DIR (--draft DIR | --draft-config FILE) --out DIR\n"
    "                    (--data FILE | --generate N | --batches FILE | --steps 0) [OPTIONS]\n"
    "       dflash train --bench [--target DIR --draft DIR]   time training steps, write nothing\n"
    "\n"
    "Trains a DFlash draft against a frozen target (SpecForge's OnlineDFlashModel, loss\n"
    "\"dflash\"; docs/training.md, NOTES.md \"Training: the command\") and writes it\n"
    "as a Hugging Face draft folder.\n"
    "\n"
    "models:\n"
    "  --target DIR          the frozen target's folder (--bench default: toy_weights/random/target)\n"
    "  --draft DIR           continue from this draft folder's weights\n"
    "                        (--bench default: toy_weights/random/draft)\n"
    "  --draft-config FILE   or: a new draft from this config.json (a DFlashDraftModel config),\n"
    "                        seeded from --seed (NOTES.md \"A new draft\": the PRNG, its stream,\n"
    "                        the order); --steps 0 writes it as it starts. A sliding_attention\n"
    "                        layer trains under SpecForge's window mask (as with --draft)\n"
    "  --out DIR             the trained draft: DIR/config.json, DIR/model.safetensors and\n"
    "                        the marker DIR/dflash-train.txt; DIR must be absent, empty, or a\n"
    "                        folder dflash train wrote (marked); one run at a time (DIR.lock)\n"
    "  --dtype f32|bf16      model.safetensors' dtype (default f32; bf16 rounds to nearest even;\n"
    "                        training and checkpoints stay in the build's precision)\n"
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
    "                        0: no step (no data needed): write the draft as it starts (for\n"
    "                        parity: --draft-config's seeded initialisation); --heldout evaluates it\n"
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
    "  --threads N           split the draft step's matmuls' output rows over N threads, 1..64; the\n"
    "                        bits do not depend on N (default 1)\n"
    "  --block-attention bidirectional|causal   inside a block: every position sees the whole\n"
    "                        block (default, DFlash) or only the positions before it and itself\n"
    "                        (EAGLE-style; an experiment: inference stays bidirectional)\n"
    ,
    "long runs:\n"
    "  --checkpoint-every N  a checkpoint every N steps, 0..100000000 (default 0: only on SIGINT\n"
    "                        or SIGTERM, which stop the run after the step in progress)\n"
    "  --checkpoint DIR      the checkpoint folder (default: --out with \".checkpoint\" appended)\n"
    "  --stop-after N        write a checkpoint after step N and stop (exit 0, --out not written)\n"
    "  --resume DIR          continue from this checkpoint, bit for bit, with the run's own flags;\n"
    "                        these may differ: --threads, --log-every, --checkpoint-every,\n"
    "                        --checkpoint, --stop-after, --out, --heldout, --trace (the steps\n"
    "                        run here) and the paths of --data, --log and --save-data (a\n"
    "                        resumed --log holds the whole run's log)\n"
    "evaluation and logs:\n"
    "  --heldout N           after training: N held-out sequences the target generates from\n"
    "                        prompts no training sequence starts with (0..65536, default 0);\n"
    "                        the draft proposes a block at every anchor of their continuations\n"
    "                        under the training mask: per-position acceptance and tau printed\n"
    "  --save-data FILE      write the sequences trained on, in --data's format\n"
    "  --log FILE            every step's loss, the evaluation and the held-out sequences\n"
    "                        (walkthrough/training/README.md)\n"
    "  --trace DIR           every step's tensors: DIR/train{s}.<name>.npy and trace.jsonl\n"
    "  --bench               time training steps (default --batch 2 --seq-len 32 --steps 2: a\n"
    "                        warm-up step, then the timed ones) on random ids, write nothing\n"
    "                        (NOTES.md, \"Training speed\")\n"
    "  -h, --help            this text\n"
    "exit status: 0 trained and wrote --out (or the --stop-after checkpoint); 2 bad input (a flag,\n"
    "a model, a data line, an output; a non-finite step writes nothing but the checkpoints before\n"
    "it); 130/143 stopped by SIGINT/SIGTERM after writing a checkpoint\n"};

typedef struct {
    const char *target, *draft, *draft_config, *out, *data, *batches, *trace_dir, *save_data, *log;
    const char *checkpoint, *resume;
    long checkpoint_every, stop_after;
    long heldout;
    int causal_block;  /* --block-attention: 0 bidirectional, 1 causal */
    long generate, prompt_len, steps, batch, seq_len, anchors, block_size, warmup, log_every, threads;
    double temperature, lr, gamma, weight_decay, max_grad_norm, adam_eps;
    int schedule;      /* Schedule: 0 cosine, 1 constant (the order of --schedule's choices) */
    int bf16;          /* --dtype: 0 f32, 1 bf16 (the order of its choices) */
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
    {.name = "--dtype", .kind = FLAG_CHOICE, .field = TA(bf16), .choices = "f32|bf16"},
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
    {.name = "--threads", .kind = FLAG_INT, .field = TA(threads), .lo = 1, .hi = 64},
    {.name = "--block-attention", .kind = FLAG_CHOICE, .field = TA(causal_block), .choices = "bidirectional|causal"},
    {.name = "--checkpoint-every", .kind = FLAG_INT, .field = TA(checkpoint_every), .lo = 0, .hi = 100000000},
    {.name = "--checkpoint", .kind = FLAG_STRING, .field = TA(checkpoint)},
    {.name = "--stop-after", .kind = FLAG_INT, .field = TA(stop_after), .lo = 1, .hi = 100000000},
    {.name = "--resume", .kind = FLAG_STRING, .field = TA(resume)},
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
    a->threads = 1;
    a->schedule = SCHEDULE_COSINE;
    int rc = flags_parse(TRAIN_FLAGS, argc, argv, a, "dflash train", NULL, 0, NULL);
    if (rc != 0) return rc;
    int batch_given = a->batch > 0;
    if (!batch_given) a->batch = 4;
    if (a->bench) {
        if (!a->target) a->target = "toy_weights/random/target";
        if (!a->draft && !a->draft_config) a->draft = "toy_weights/random/draft";
        if (a->out || a->data || a->generate > 0 || a->batches || a->heldout > 0 || a->save_data || a->log ||
            a->checkpoint || a->checkpoint_every || a->stop_after || a->resume) {
            dflash_set_error("--bench: times steps on random ids and writes nothing; expected no --out, --data, "
                             "--generate, --batches, --heldout, --save-data, --log or checkpoint flags");
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
        /* --steps 0 reads no data: it writes the draft as it starts */
        if (n_data > 1 || (n_data == 0 && a->steps != 0)) {
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
    return train_check_steps(a->steps, a->warmup, a->stop_after);
}

int train_check_steps(long steps, long warmup, long stop_after) {
    if (warmup >= 0 && steps > 0 && warmup >= steps) {
        dflash_set_error("--warmup: expected fewer steps than --steps (%ld), got %ld", steps, warmup);
        return -1;
    }
    if (stop_after > 0 && steps >= 0 && stop_after >= steps) {
        dflash_set_error("--stop-after: expected a step before the last (--steps %ld), got %ld", steps, stop_after);
        return -1;
    }
    return 0;
}

int train_checkpoint_due(int s, int steps, long stop_after, long checkpoint_every, int *stop_now) {
    *stop_now = ck_stop_signal || (stop_after > 0 && s == stop_after);
    return *stop_now || (checkpoint_every > 0 && s % checkpoint_every == 0 && s < steps);
}

int train_stopped(int s) {
    if (ck_stop_signal) fprintf(stderr, "stopped by signal %d after step %d\n", (int)ck_stop_signal, s);
    else fprintf(stderr, "stopped after step %d (--stop-after)\n", s);
    return ck_stop_signal ? 128 + ck_stop_signal : 0;
}

/* ===========================================================================
 * 2. The command
 * ======================================================================== */

/* No run lies: a step whose loss, gradient norm (any non-finite gradient
 * makes it non-finite) or updated weights are not finite stops the run
 * there, naming what; nothing is written (the caller's fail path). */
static int step_nonfinite(int s, const TrainStats *ts, const TrainParam *p, int n, const TrainHyper *hp) {
    if (!isfinite(ts->loss)) {
        dflash_set_error("step %d: the loss is not finite (%g); stopped, nothing written", s, ts->loss);
        return -1;
    }
    if (!isfinite(ts->grad_norm)) {
        dflash_set_error("step %d: the gradient norm is not finite (%g: a gradient overflowed); stopped, nothing "
                         "written", s, ts->grad_norm);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        size_t m = (size_t)p[i].shape[0] * (size_t)(p[i].ndim == 2 ? p[i].shape[1] : 1);
        for (size_t k = 0; k < m; k++)
            if (!isfinite(p[i].data[k])) {
                dflash_set_error("step %d: weight %s[%zu] is not finite (%g) after the update (lr %g, weight decay %g); "
                                 "stopped, nothing written", s, p[i].key, k, (double)p[i].data[k], hp->lr,
                                 hp->weight_decay);
                return -1;
            }
    }
    return 0;
}

/* The largest buffer of a step, the block attention mask (train/train.c,
 * run_init): b x N·B rows x (S + N·B) keys, one int each. More than
 * TRAIN_MAX_MASK values is refused before anything is allocated (a
 * --batches row of 70,000 anchors asked for 314 GB). where: the case file
 * (then batch bi) or NULL (the flags). */
#define TRAIN_MAX_MASK ((double)(1ull << 32))

static int step_size_check(const char *where, int bi, int b, int S, int N, int B) {
    double Q = (double)N * B, values = (double)b * Q * ((double)S + Q);
    if (values <= TRAIN_MAX_MASK) return 0;
    char at[4200];
    if (where) snprintf(at, sizeof at, "%.4000s: batches[%d]", where, bi);
    else snprintf(at, sizeof at, "--batch %d, --seq-len %d, --anchors", b, S);
    dflash_set_error("%s: a step of %d x %d anchors x block %d over %d positions needs an attention mask of %.3g "
                     "values (b x N·B x (S + N·B)), more than 2^32 (%.0f GiB); expected fewer anchors, rows or "
                     "positions", at, b, N, B, S, values, values * sizeof(int) / (1024.0 * 1024 * 1024));
    return -1;
}

void fmt_duration(char *buf, size_t size, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, size, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60) snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, size, "%.1fs", s);
}

/* What a checkpoint holds besides the tensors (trainer_state.json): the
 * position after its step, then the settings a resume must agree on. */
typedef struct {
    long step, adam_t;
    int cursor;                           /* the drawer's, in its epoch's order */
    uint64_t epoch_rng, data_rng, anchor_rng;
    uint64_t target_hash, data_hash;      /* fingerprints: the target's weights, the training data */
    int source;                           /* 0 none (--steps 0), 1 --data, 2 --generate, 3 --batches */
    long steps, batch, seq_len, anchors, block_size, warmup, generate, prompt_len;
    double lr, gamma, weight_decay, max_grad_norm, adam_eps, temperature;
    int schedule, block_attention, log;
    uint64_t seed;
} DraftRunState;

#define DS(m) offsetof(DraftRunState, m)
static const CkField DRAFT_STATE_FIELDS[] = {
    {"step", CK_LONG, DS(step), NULL}, {"adam_t", CK_LONG, DS(adam_t), NULL}, {"cursor", CK_INT, DS(cursor), NULL},
    {"epoch_rng", CK_U64, DS(epoch_rng), NULL}, {"data_rng", CK_U64, DS(data_rng), NULL},
    {"anchor_rng", CK_U64, DS(anchor_rng), NULL}, {"data_hash", CK_U64, DS(data_hash), NULL},
    {"source", CK_INT, DS(source), "--data, --generate or --batches"},
    {"target_hash", CK_U64, DS(target_hash), "--target (its weights)"},
    {"steps", CK_LONG, DS(steps), "--steps"}, {"batch", CK_LONG, DS(batch), "--batch"},
    {"seq_len", CK_LONG, DS(seq_len), "--seq-len"}, {"anchors", CK_LONG, DS(anchors), "--anchors"},
    {"block_size", CK_LONG, DS(block_size), "--block-size"}, {"warmup", CK_LONG, DS(warmup), "--warmup"},
    {"lr", CK_REAL, DS(lr), "--lr"}, {"schedule", CK_INT, DS(schedule), "--schedule"},
    {"gamma", CK_REAL, DS(gamma), "--gamma"}, {"weight_decay", CK_REAL, DS(weight_decay), "--weight-decay"},
    {"max_grad_norm", CK_REAL, DS(max_grad_norm), "--max-grad-norm"},
    {"adam_eps", CK_REAL, DS(adam_eps), "--adam-eps"}, {"seed", CK_U64, DS(seed), "--seed"},
    {"block_attention", CK_INT, DS(block_attention), "--block-attention"},
    {"generate", CK_LONG, DS(generate), "--generate"}, {"prompt_len", CK_LONG, DS(prompt_len), "--prompt-len"},
    {"temperature", CK_REAL, DS(temperature), "--temperature"}, {"log", CK_INT, DS(log), "--log"}};
#undef DS
#define N_DRAFT_STATE_FIELDS ((int)(sizeof DRAFT_STATE_FIELDS / sizeof DRAFT_STATE_FIELDS[0]))
#define TRAIN_CHECKPOINT_FORMAT "dflash train checkpoint 1"

/* The files of a checkpoint folder: a draft folder (in the float build one
 * ./dflash --draft loads: config.json, model.safetensors in the build's
 * precision), AdamW's state, the position, and the log so far. */
enum { CKF_CONFIG, CKF_MODEL, CKF_OPTIMIZER, CKF_STATE, CKF_LOG, CKF_N };
static const char *const CK_FILES[CKF_N] = {"config.json", "model.safetensors", "optimizer.safetensors",
                                            "trainer_state.json", "train.log"};

/* One run of dflash train: what its phases share. train_main runs the
 * phases in order (train_check_outputs, train_load, train_data, train_setup,
 * train_start, train_loop, train_heldout, train_write), each 0 or -1 with
 * dflash_errmsg (train_loop: 1 stopped at a checkpoint); train_run_free
 * releases what any of them made. */
typedef struct {
    TrainArgs a;
    int argc;
    char **argv;
    Model target, draft;
    int have_draft;
    char src_config[4200];   /* the draft's config.json (--draft's or --draft-config) */
    const Config *dc;        /* draft.cfg */
    int V, B, S, steps, warmup, max_pos;
    Seqs seqs, held;
    Case cs;
    Drawer dr;
    OutDir od;
    OutFile *logf, *savef;
    TrainState *st;
    Tracer *tracer;
    TrainParam *params;
    int n_params;
    TrainHyper hp;
    /* checkpoints: the folder, the position, AdamW's m and v, the log so far */
    CkDir ck;
    char ck_default[4200];
    const char *ck_dir;
    CkSignals sig;
    DraftRunState rs;
    int have_target_hash;
    TrainParam *m, *v;
    Config out_cfg;          /* the draft's config.json (--out's and the checkpoints') */
    int bos;
    uint64_t data_rng, anchor_rng;
    int first_step;
    char *log_text;          /* every line of --log so far (a checkpoint's train.log) */
    size_t log_len, log_cap;
    int stop_rc;             /* train_loop stopped at a checkpoint: the exit status */
    /* the loop's figures */
    double t_start, t_steps, cpu_steps, first_loss, last_loss, first_acc, last_acc;
    long tokens;
} TrainCmd;

/* A line (or lines) of --log: into the file and into log_text. */
static int log_add(TrainCmd *r, const char *fmt, ...) {
    if (!r->logf) return 0;
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || r->log_len + (size_t)n + 1 > r->log_cap) {
        size_t cap = r->log_cap ? r->log_cap : 4096;
        while (n >= 0 && r->log_len + (size_t)n + 1 > cap) cap *= 2;
        char *t = n >= 0 ? realloc(r->log_text, cap) : NULL;
        if (!t) { va_end(aq); dflash_set_error("out of memory (the log)"); return -1; }
        r->log_text = t, r->log_cap = cap;
    }
    vsnprintf(r->log_text + r->log_len, (size_t)n + 1, fmt, aq);
    va_end(aq);
    fwrite(r->log_text + r->log_len, 1, (size_t)n, out_stream(r->logf));
    r->log_len += (size_t)n;
    return 0;
}

/* FNV-1a over 64-bit words (a fingerprint, not a defence) */
uint64_t fnv_words(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = data;
    size_t k = 0;
    for (; k + 8 <= len; k += 8) {
        uint64_t w;
        memcpy(&w, p + k, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; k < len; k++) h = (h ^ p[k]) * 0x100000001b3ull;
    return h;
}
#define FNV_BASIS 0xcbf29ce484222325ull

/* outputs against inputs and each other, before anything is read or
 * written: formats/files.c's one check (docs/your-files.md) */
static int train_check_outputs(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    const char *inputs[5];
    int n_inputs = 0;
    inputs[n_inputs++] = a->target;
    inputs[n_inputs++] = a->draft ? a->draft : a->draft_config;
    if (a->data) inputs[n_inputs++] = a->data;
    if (a->batches) inputs[n_inputs++] = a->batches;
    const char *ck_dir = NULL;
    if (a->out) {
        snprintf(r->ck_default, sizeof r->ck_default, "%.4000s.checkpoint", a->out);
        ck_dir = r->ck_dir = a->checkpoint ? a->checkpoint : r->ck_default;
    }
    /* --resume DIR with DIR the run's own checkpoint folder (the usual case):
     * everything in it is read before the first step and a new checkpoint
     * replaces the folder by a rename, so it is no input to protect */
    struct stat rs_st, ck_st;
    int resume_own = a->resume && ck_dir && stat(a->resume, &rs_st) == 0 && stat(ck_dir, &ck_st) == 0 &&
                     rs_st.st_dev == ck_st.st_dev && rs_st.st_ino == ck_st.st_ino;
    if (a->resume && !resume_own) inputs[n_inputs++] = a->resume;
    OutPath outs[5] = {{a->out, "the draft folder (--out)", 1}, {a->trace_dir, "the trace directory (--trace)", 1},
                       {a->log, "the log (--log)", 0}, {a->save_data, "the saved data (--save-data)", 0},
                       {ck_dir, "the checkpoint folder (--checkpoint)", 1}};
    return train_outputs_apart("dflash train", outs, 5, inputs, n_inputs);
}

int train_outputs_apart(const char *cmd, const OutPath *outs, int n_out, const char *const *inputs, int n_inputs) {
    if (out_check_paths(cmd, outs, n_out, inputs, n_inputs) == 0) return 0;
    size_t n = strlen(cmd);   /* dflash_print_error adds the prefix once */
    if (strncmp(dflash_errmsg, cmd, n) == 0 && strncmp(dflash_errmsg + n, ": ", 2) == 0)
        memmove(dflash_errmsg, dflash_errmsg + n + 2, strlen(dflash_errmsg + n + 2) + 1);
    return -1;
}

/* the models: the target, the draft (loaded or seeded), and every check of
 * the pair; r->B, r->max_pos */
static int train_load(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    if (model_load(&r->target, a->target, 0) != 0) return -1;
    if (a->draft) {
        if (model_load(&r->draft, a->draft, 1) != 0) return -1;
        snprintf(r->src_config, sizeof r->src_config, "%s/config.json", a->draft);
    } else {
        Config dcfg;
        if (config_load(&dcfg, a->draft_config, 1) != 0) return -1;
        Model probe;
        memset(&probe, 0, sizeof probe);
        probe.cfg = dcfg;
        if (check_pair(&r->target, &probe) != 0) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("%.500s: %s", a->draft_config, strncmp(msg, "draft config.json: ", 19) == 0 ? msg + 19 : msg);
            return -1;
        }
        if (train_init_draft(&r->draft, &dcfg, &r->target, a->seed) != 0) return -1;
        snprintf(r->src_config, sizeof r->src_config, "%s", a->draft_config);
    }
    r->have_draft = 1;
    if (check_pair(&r->target, &r->draft) != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("%.500s: %s", a->draft ? a->draft : a->draft_config, msg);
        return -1;
    }
    const Config *dc = r->dc = &r->draft.cfg;
    r->V = r->target.cfg.vocab_size;
    r->B = a->block_size > 0 ? (int)a->block_size : dc->block_size;
    if (dc->mask_token_id < 0 || dc->mask_token_id >= r->V) {
        dflash_set_error("%s: mask_token_id %d: expected a token id in 0..%d (the target's vocab_size - 1)",
                         r->src_config, dc->mask_token_id, r->V - 1);
        return -1;
    }
    r->max_pos = r->target.cfg.max_position_embeddings < dc->max_position_embeddings
                     ? r->target.cfg.max_position_embeddings : dc->max_position_embeddings;
    if (r->B < 2) {
        dflash_set_error("--block-size %d: a block of 1 has no position to predict (the anchor's own token is given): "
                         "the loss would be 0 and nothing trained; expected 2..%d", r->B, DFLASH_MAX_BLOCK);
        return -1;
    }
    return 0;
}

/* --batches: every batch of the case file checked; r->steps */
static int train_data_batches(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    int B = r->B;
    if (case_load(&r->cs, a->batches, r->V) != 0) return -1;
    if (r->steps < 0) r->steps = r->cs.n;
    if (r->steps > r->cs.n) {
        dflash_set_error("--steps: expected at most %d (the batches in %s), got %d", r->cs.n, a->batches, r->steps);
        return -1;
    }
    for (int i = 0; i < r->cs.n; i++) {
        const CaseBatch *cb = &r->cs.batch[i];
        if (cb->S < B) {
            dflash_set_error("%s: batches[%d]: sequences of %d ids: expected at least a block (block size %d)",
                             a->batches, i, cb->S, B);
            return -1;
        }
        if (cb->S + B > r->max_pos) {
            dflash_set_error("%s: batches[%d]: %d ids: expected at most %d (max_position_embeddings - block size)",
                             a->batches, i, cb->S, r->max_pos - B);
            return -1;
        }
        if (batch_trained_positions(cb->b, cb->S, cb->N, B, cb->mask, cb->anchors, cb->keep) == 0) {
            dflash_set_error("%s: batches[%d]: trains nothing: no kept anchor has a block position with loss "
                             "mask 1 (keep false, or loss mask 0 at positions anchor+1..anchor+%d); expected at "
                             "least one", a->batches, i, B - 1);
            return -1;
        }
        if (step_size_check(a->batches, i, cb->b, cb->S, cb->N, B) != 0) return -1;
    }
    return 0;
}

/* the data, read and checked (--generate's sequences come in train_setup,
 * once every check passed): r->S, r->steps, r->warmup */
static int train_data(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    int B = r->B, max_pos = r->max_pos;
    r->S = (int)a->seq_len, r->steps = (int)a->steps;
    if (a->batches) {
        if (train_data_batches(r) != 0) return -1;
    } else {
        if (r->steps < 0) r->steps = 100;
        if (a->data) {
            char *text = NULL;
            size_t len = 0;
            if (file_read_all(a->data, &text, &len) != 0) return -1;
            int prc = data_parse(&r->seqs, a->data, text, len, r->V);
            free(text);
            if (prc != 0) return -1;
            if (r->S < 0) {  /* the longest line, cut to what the positions allow (--help: longer ones are cut) */
                int longest = 0;
                for (int i = 0; i < r->seqs.n; i++) if (r->seqs.len[i] > longest) longest = r->seqs.len[i];
                r->S = longest < B ? B : longest;
                if (r->S + B > max_pos && max_pos - B >= B) {
                    r->S = max_pos - B;
                    fprintf(stderr, "train: %s: the longest line has %d ids; sequences are cut to %d "
                                    "(max_position_embeddings - block size; --seq-len sets the length)\n",
                            a->data, longest, r->S);
                }
            }
        } else if (r->S < 0) {
            r->S = 64;
        }
        int S = r->S;
        if (S < B || S + B > max_pos) {
            dflash_set_error("--seq-len: expected %d..%d (the block size .. max_position_embeddings - block size), got %d",
                             B, max_pos - B, S);
            return -1;
        }
        if (a->generate > 0 && a->prompt_len > S - 2) {
            dflash_set_error("--prompt-len: expected 1..%d (--seq-len - 2), got %ld", S - 2, a->prompt_len);
            return -1;
        }
        if (a->data && data_check(&r->seqs, a->data, S, B, (int)a->anchors) != 0) return -1;
        /* a drawn batch has at most min(--anchors, S - B) anchor slots
         * (train_anchor_count: the candidates 0..S-B, less one) */
        int n_max = (int)a->anchors < S - B ? (int)a->anchors : S - B;
        if (step_size_check(NULL, 0, (int)a->batch, S, n_max > 0 ? n_max : 1, B) != 0) return -1;
    }
    r->warmup = a->warmup >= 0 ? (int)a->warmup : (int)(0.04 * r->steps);
    if (r->steps > 0 && r->warmup >= r->steps) {
        dflash_set_error("--warmup: expected fewer steps than --steps (%d), got %d", r->steps, r->warmup);
        return -1;
    }
    if (a->stop_after > 0 && a->stop_after >= r->steps) {
        dflash_set_error("--stop-after: expected a step before the last (%d), got %ld", r->steps, a->stop_after);
        return -1;
    }
    return 0;
}

/* the log's header: the command and the setup */
static int train_log_header(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    const Config *dc = r->dc;
    int rc = log_add(r, "# dflash train log (README.md \"What training teaches\")\ncommand dflash");
    for (int i = 1; rc == 0 && i < r->argc; i++) rc = log_add(r, " %s", r->argv[i]);
    if (rc == 0)
        rc = log_add(r, "\nsetup steps %d batch %d seq_len %d block %d anchors %ld lr %g warmup %d schedule %s gamma %g "
                        "block_attention %s layers %d target_layers", r->steps,
                     a->batches ? r->cs.batch[0].b : (int)a->batch, r->S, r->B, a->anchors, a->lr, r->warmup,
                     a->schedule == SCHEDULE_COSINE ? "cosine" : "constant", a->gamma,
                     a->causal_block ? "causal" : "bidirectional", dc->num_hidden_layers);
    for (int i = 0; rc == 0 && i < dc->n_target_layer_ids; i++)
        rc = log_add(r, "%s%d", i ? "," : " ", dc->target_layer_ids[i]);
    if (rc == 0) rc = log_add(r, " sequences %d seed %llu\n", r->seqs.n, (unsigned long long)a->seed);
    return rc;
}

/* every check passed: the output folder, the files, the generated
 * sequences, the drawer, the training state, the trace */
static int train_setup(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    const Config *dc = r->dc;
    int S = r->S, B = r->B;
    if (a->out && outdir_prepare(&r->od, a->out) != 0) return -1;
    if (r->ck_dir && ckdir_open(&r->ck, r->ck_dir, "--checkpoint", "dflash train", CK_FILES, CKF_N) != 0) return -1;
    if (a->log && !(r->logf = out_open(a->log, "--log"))) return -1;
    if (a->save_data && !(r->savef = out_open(a->save_data, "--save-data"))) return -1;
    if (a->generate > 0 && data_generate(&r->seqs, &r->target, a->target, (int)a->generate, (int)a->prompt_len, S, B,
                                         (int)a->anchors, a->temperature, dc->mask_token_id, a->seed,
                                         0x67656e6572617465ull /* "generate" */, NULL, "generate") != 0)
        return -1;
    if (a->bench) {  /* random ids, every position trained */
        uint64_t g = train_rng_seed(a->seed ^ 0x62656e6368ull);  /* "bench" */
        int *ids = malloc(sizeof(int) * (size_t)S), *mask = malloc(sizeof(int) * (size_t)S);
        int prc = ids && mask ? 0 : -1;
        for (int q = 0; prc == 0 && q < (int)a->batch; q++) {
            for (int k = 0; k < S; k++) ids[k] = cli_rng_below(&g, r->V), mask[k] = 1;
            prc = seqs_push(&r->seqs, ids, mask, S, 0);
        }
        free(ids);
        free(mask);
        if (prc != 0) { dflash_set_error("out of memory"); return -1; }
    }
    if (a->heldout > 0 && !a->batches &&
        data_generate(&r->held, &r->target, a->target, (int)a->heldout, (int)a->prompt_len, S, B, (int)a->anchors,
                      a->temperature, dc->mask_token_id, a->seed, 0x68656c646f7574ull /* "heldout" */, &r->seqs,
                      "heldout") != 0)
        return -1;
    if (r->savef) {
        fprintf(out_stream(r->savef), "# dflash train: the %d sequences trained on (--data format: prompt | "
                                      "continuation)\n", r->seqs.n);
        for (int q = 0; q < r->seqs.n; q++) seq_write(out_stream(r->savef), &r->seqs, q);
    }
    if (!a->batches && drawer_init(&r->dr, (int)a->batch, S, (int)a->anchors, B, r->seqs.n) != 0) return -1;
    if (!a->batches && !a->bench && !a->trace_dir) drawer_cache_init(&r->dr, &r->draft, r->seqs.n);
    r->st = train_state_new(&r->draft, &r->target);
    if (!r->st) return -1;
    /* the trained tensors (checked after every step, then written) */
    int cap = 11 * dc->num_hidden_layers + 8;
    r->params = calloc((size_t)cap, sizeof(TrainParam));
    if (!r->params) { dflash_set_error("out of memory"); return -1; }
    r->n_params = train_params(&r->draft, r->params, cap);
    if (r->n_params <= 0 || r->n_params > cap) {
        if (r->n_params > cap) dflash_set_error("train: %d trained tensors, more than the %d expected", r->n_params, cap);
        return -1;
    }
    if (a->trace_dir && !(r->tracer = trace_open(a->trace_dir, NULL, NULL, 0))) return -1;
    TrainHyper *hp = &r->hp;
    memset(hp, 0, sizeof *hp);
    hp->beta1 = 0.9, hp->beta2 = 0.999;  /* torch.optim.AdamW's defaults (SpecForge passes none) */
    hp->eps = a->adam_eps;
    hp->weight_decay = a->weight_decay;
    hp->max_grad_norm = a->max_grad_norm;
    hp->gamma = a->gamma;
    hp->causal_block = a->causal_block;
    hp->threads = (int)a->threads;
    /* the draft's config.json: the draft's values, the target's eos, a bos */
    r->out_cfg = *r->dc;
    r->out_cfg.n_eos = r->target.cfg.n_eos;
    memcpy(r->out_cfg.eos_token_id, r->target.cfg.eos_token_id, sizeof r->out_cfg.eos_token_id);
    r->bos = config_bos(r->src_config);
    if (r->bos < 0) {
        char tcfg[4200];
        snprintf(tcfg, sizeof tcfg, "%s/config.json", a->target);
        r->bos = config_bos(tcfg);
    }
    return 0;
}

/* the target's weights, fingerprinted (once: a checkpoint, a resume) */
static int target_hash(TrainCmd *r) {
    if (r->have_target_hash) return 0;
    int n = lm_params(&r->target, NULL, 0);
    TrainParam *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    if (!p) { dflash_set_error("out of memory"); return -1; }
    lm_params(&r->target, p, n);
    uint64_t h = FNV_BASIS;
    for (int i = 0; i < n; i++) {
        size_t m = (size_t)p[i].shape[0] * (size_t)(p[i].ndim == 2 ? p[i].shape[1] : 1);
        h = fnv_words(h, p[i].key, strlen(p[i].key));
        h = fnv_words(h, p[i].data, m * sizeof(real));
    }
    free(p);
    r->rs.target_hash = h;
    r->have_target_hash = 1;
    return 0;
}

/* the training data, fingerprinted: the sequences (--data, --generate) or the
 * case file's bytes (--batches) */
static int data_hash(TrainCmd *r, uint64_t *out) {
    uint64_t h = FNV_BASIS;
    if (r->a.batches) {
        char *text = NULL;
        size_t len = 0;
        if (file_read_all(r->a.batches, &text, &len) != 0) return -1;
        h = fnv_words(h, text, len);
        free(text);
    } else {
        const Seqs *q = &r->seqs;
        h = fnv_words(h, &q->n, sizeof q->n);
        for (int i = 0; i < q->n; i++) {
            h = fnv_words(h, &q->len[i], sizeof q->len[i]);
            h = fnv_words(h, q->ids + q->off[i], sizeof(int) * (size_t)q->len[i]);
            h = fnv_words(h, q->mask + q->off[i], sizeof(int) * (size_t)q->len[i]);
        }
    }
    *out = h;
    return 0;
}

/* A checkpoint of the steps so far: config.json and model.safetensors (the
 * build's precision), optimizer.safetensors, trainer_state.json and the log
 * so far, written whole into the --checkpoint folder. */
static int train_checkpoint(TrainCmd *r) {
    CkDir *o = &r->ck;
    if (target_hash(r) != 0 || ckdir_begin(o, "--checkpoint") != 0) return -1;
    char *p;
    OutFile *f = ckdir_file(o, CKF_CONFIG, &p);
    if (!f) goto fail;
    draftdir_write_config(out_stream(f), &r->out_cfg, r->bos, r->B, 0);   /* the checkpoint: the build's precision */
    if (ckdir_file_done(o, f, p) != 0) goto fail;
    if (!(f = ckdir_file(o, CKF_MODEL, &p))) goto fail;
    const TrainParam *sets[1] = {r->params};
    const char *none[1] = {""};
    if (ck_write_safetensors(out_stream(f), sets, none, 1, r->n_params, CK_REAL_DTYPE) != 0) {
        out_abort(f);
        free(p);
        goto fail;
    }
    if (ckdir_file_done(o, f, p) != 0) goto fail;
    if (ck_write_optimizer(o, CKF_OPTIMIZER, r->m, r->v, r->n_params) != 0) goto fail;
    if (!(f = ckdir_file(o, CKF_STATE, &p))) goto fail;
    ck_state_write(out_stream(f), TRAIN_CHECKPOINT_FORMAT, DRAFT_STATE_FIELDS, N_DRAFT_STATE_FIELDS, &r->rs);
    if (ckdir_file_done(o, f, p) != 0) goto fail;
    if (r->logf && ckdir_write_text(o, CKF_LOG, r->log_text ? r->log_text : "", r->log_len) != 0) goto fail;
    if (ckdir_commit(o, "--checkpoint") != 0) goto fail;
    return 0;
fail:
    ckdir_discard(o);
    return -1;
}

/* the position before the first step: step 1 (the log's header), or
 * --resume's checkpoint, after checking it is this run's */
static int train_start(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    DraftRunState *s = &r->rs;
    s->source = a->batches ? 3 : a->generate > 0 ? 2 : a->data ? 1 : 0;
    s->steps = r->steps, s->batch = a->batch, s->seq_len = r->S > 0 ? r->S : 0, s->anchors = a->anchors;
    s->block_size = r->B;
    s->warmup = r->warmup, s->generate = a->generate > 0 ? a->generate : 0, s->prompt_len = a->prompt_len;
    s->lr = a->lr, s->gamma = a->gamma, s->weight_decay = a->weight_decay, s->max_grad_norm = a->max_grad_norm;
    s->adam_eps = a->adam_eps, s->temperature = a->temperature;
    s->schedule = a->schedule, s->block_attention = a->causal_block, s->log = !!a->log, s->seed = a->seed;
    r->data_rng = train_rng_seed(a->seed ^ 0x64617461ull);        /* "data" */
    r->anchor_rng = train_rng_seed(a->seed ^ 0x616e63686f72ull); /* "anchor" */
    r->first_step = 1;
    if (a->bench) return 0;
    r->m = calloc((size_t)r->n_params, sizeof(TrainParam));
    r->v = calloc((size_t)r->n_params, sizeof(TrainParam));
    if (!r->m || !r->v) { dflash_set_error("out of memory"); return -1; }
    if (train_optimizer_tensors(r->st, r->m, r->v, r->n_params) != r->n_params) {
        dflash_set_error("train: AdamW's tensors: unexpected count");
        return -1;
    }
    if (data_hash(r, &s->data_hash) != 0) return -1;
    if (!a->resume) return r->logf ? train_log_header(r) : 0;

    DraftRunState c;
    memset(&c, 0, sizeof c);
    char *p = path_join(a->resume, "trainer_state.json");
    int src = p ? ck_state_read(p, TRAIN_CHECKPOINT_FORMAT, "dflash train", DRAFT_STATE_FIELDS, N_DRAFT_STATE_FIELDS,
                                &c) : -1;
    free(p);
    if (src != 0 || target_hash(r) != 0) return -1;
    const char *bad = ck_disagree(DRAFT_STATE_FIELDS, N_DRAFT_STATE_FIELDS, &c, s);
    if (bad && strcmp(bad, "--log") == 0) {
        dflash_set_error("--resume %s: the checkpoint's run kept %s; give the run's own flags (%s)", a->resume,
                         c.log ? "a log (train.log)" : "no log", c.log ? "--log FILE: it continues there" :
                         "no --log: its log would lack the steps before");
        return -1;
    }
    if (bad) {
        dflash_set_error("--resume %s: the checkpoint's run had another %s; give the run's own flags", a->resume, bad);
        return -1;
    }
    if (c.data_hash != s->data_hash) {
        const char *flag = a->batches ? "--batches" : a->data ? "--data" : "--generate";
        dflash_set_error("--resume %s: the checkpoint's run trained on other data than %s %s gives (another file, "
                         "or the file changed)", a->resume, flag, a->batches ? a->batches : a->data ? a->data : "");
        return -1;
    }
    if (c.step < 1 || c.step >= r->steps) {
        dflash_set_error("--resume %s: step %ld of %d: nothing left to train", a->resume, c.step, r->steps);
        return -1;
    }
    if (ck_read_weights(a->resume, r->params, r->m, r->v, r->n_params) != 0) return -1;
    train_set_optimizer_step(r->st, c.adam_t);
    if (!a->batches && drawer_resume(&r->dr, r->seqs.n, c.cursor, c.epoch_rng, c.data_rng) != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("--resume %s: %s", a->resume, msg);
        return -1;
    }
    r->data_rng = c.data_rng, r->anchor_rng = c.anchor_rng;
    if (r->logf) {   /* the log so far, then a line naming this command */
        char *lp = path_join(a->resume, "train.log"), *text = NULL;
        size_t len = 0;
        int rrc = lp ? file_read_all(lp, &text, &len) : -1;
        free(lp);
        if (rrc != 0) return -1;
        int arc = log_add(r, "%.*s", (int)len, text);
        free(text);
        if (arc != 0) return -1;
        if (log_add(r, "resumed after step %ld: dflash", c.step) != 0) return -1;
        for (int i = 1; i < r->argc; i++)
            if (log_add(r, " %s", r->argv[i]) != 0) return -1;
        if (log_add(r, "\n") != 0) return -1;
    }
    r->first_step = (int)c.step + 1;
    *s = c;   /* the settings agree; the position is the checkpoint's */
    return 0;
}

/* the line before the first step */
static void train_announce(const TrainCmd *r) {
    const TrainArgs *a = &r->a;
    const Config *dc = r->dc;
    if (a->bench)
        fprintf(stderr, "bench: %s draft (%d layers, hidden %d) against %s, batch %ld x %d tokens, block %d, "
                        "%ld anchors at most, %s\n", a->draft ? a->draft : a->draft_config, dc->num_hidden_layers,
                dc->hidden_size, a->target, a->batch, r->S, r->B, a->anchors, REAL_NAME);
    else if (r->steps == 0)
        fprintf(stderr, "train: --steps 0: no step; the draft as it starts (%s, seed %llu)\n",
                a->draft ? "--draft's weights" : "--draft-config: the seeded initialisation, NOTES.md \"A new draft\"",
                (unsigned long long)a->seed);
    else
        fprintf(stderr, "train: %d steps on %s%s, batch %d x %d, block %d, lr %g (%s, warmup %d), gamma %g, "
                        "weight decay %g, clip %g, seed %llu\n", r->steps,
                a->batches ? "the batches of " : a->data ? "the sequences of " : "generated sequences",
                a->batches ? a->batches : a->data ? a->data : "", a->batches ? r->cs.batch[0].b : (int)a->batch,
                a->batches ? r->cs.batch[0].S : r->S, r->B, a->lr, a->schedule == SCHEDULE_COSINE ? "cosine" : "constant",
                r->warmup, a->gamma, a->weight_decay, a->max_grad_norm, (unsigned long long)a->seed);
}

/* the steps: progress on stderr, the log, checkpoints, SIGINT/SIGTERM and
 * --stop-after (1: stopped there, r->stop_rc the exit status); --bench: the
 * timing line */
static int train_loop(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    int steps = r->steps, first = r->first_step;
    TrainHyper *hp = &r->hp;
    /* --bench: processor time too (the wall clock of a shared machine says little) */
    r->t_start = now_seconds();
    train_announce(r);
    if (first > 1) fprintf(stderr, "train: resumed from %s after step %d\n", a->resume, first - 1);
    if (!a->bench) ck_signals_catch(&r->sig);
    for (int s = first; s <= steps; s++) {
        TrainBatch tb;
        if (a->batches) {
            const CaseBatch *cb = &r->cs.batch[s - 1];
            tb.b = cb->b, tb.S = cb->S, tb.N = cb->N, tb.B = r->B;
            tb.input_ids = cb->ids, tb.loss_mask = cb->mask, tb.anchors = cb->anchors, tb.keep = cb->keep;
            tb.target_hidden = NULL;
        } else if (drawer_next(&r->dr, &r->seqs, &r->data_rng, &r->anchor_rng, r->dc->mask_token_id, &tb) != 0 ||
                   drawer_features(&r->dr, &r->draft, &r->target, &tb) != 0) {
            return -1;
        }
        hp->lr = train_lr_at(a->schedule, a->lr, r->warmup, steps, s);
        if (!isfinite(hp->lr)) {
            dflash_set_error("step %d: the learning rate is not finite (%g: --lr %g overflows the schedule); stopped, "
                             "nothing written", s, hp->lr, a->lr);
            return -1;
        }
        TrainStats ts;
        memset(&ts, 0, sizeof ts);
        double t0 = now_seconds();
        clock_t c0 = clock();
        if (train_step(&r->draft, &r->target, r->st, &tb, hp, s, r->tracer ? trace_hook(r->tracer) : NULL, &ts) != 0)
            return -1;
        if (step_nonfinite(s, &ts, r->params, r->n_params, hp) != 0) return -1;
        double dt = now_seconds() - t0, dcpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
        if (!(a->bench && s == 1 && steps > 1)) {  /* bench: step 1 warms up */
            r->t_steps += dt;
            r->cpu_steps += dcpu;
            r->tokens += (long)tb.b * tb.S;
        }
        if (log_add(r, "step %d loss %.6f acc %.6f lr %.6e grad_norm %.6f\n", s, ts.loss, ts.accuracy, hp->lr,
                    ts.grad_norm) != 0)
            return -1;
        if (s == first) r->first_loss = ts.loss, r->first_acc = ts.accuracy;
        r->last_loss = ts.loss, r->last_acc = ts.accuracy;
        if (s == first || s == steps || s % a->log_every == 0) {
            char eta[32];
            double per = (now_seconds() - r->t_start) / (s - first + 1);
            fmt_duration(eta, sizeof eta, per * (steps - s));
            fprintf(stderr, "step %d/%d  loss %.4f  acc %.4f  lr %.3e  grad norm %.4f  %.0f tok/s  %.0f ms/step  "
                            "ETA %s\n", s, steps, ts.loss, ts.accuracy, hp->lr, ts.grad_norm,
                    dt > 0 ? (double)tb.b * tb.S / dt : 0.0, dt * 1e3, eta);
        }
        if (a->bench) continue;
        DraftRunState *rs = &r->rs;   /* the position after step s */
        rs->step = s, rs->adam_t = train_optimizer_step(r->st);
        rs->cursor = r->dr.cursor, rs->epoch_rng = r->dr.epoch_rng;
        rs->data_rng = r->data_rng, rs->anchor_rng = r->anchor_rng;
        int stop_now;
        if (train_checkpoint_due(s, steps, a->stop_after, a->checkpoint_every, &stop_now)) {
            if (train_checkpoint(r) != 0) return -1;
            fprintf(stderr, "checkpoint: step %d written to %s%s\n", s, r->ck.dir,
                    stop_now ? " (resume with --resume and the same flags)" : "");
        }
        if (stop_now) {   /* the log, the saved data and the trace so far are the user's */
            OutFile **files[2] = {&r->savef, &r->logf};
            for (int k = 0; k < 2; k++)
                if (*files[k]) {
                    int frc = out_commit(*files[k]);
                    *files[k] = NULL;
                    if (frc != 0) return -1;
                }
            if (r->tracer) { int trc = trace_close(r->tracer); r->tracer = NULL; if (trc != 0) return -1; }
            r->stop_rc = train_stopped(s);
            return 1;
        }
    }
    ck_signals_restore(&r->sig);   /* from here a signal removes the partial output (cli/main.c) */
    if (a->bench) {
        int timed = steps > 1 ? steps - 1 : 1;
        printf("train step (%s, batch %ld x %d tokens, block %d): %.1f ms per step, %.1f training tokens/s; "
               "processor time %.1f ms per step, %.1f tokens/s (mean of %d step%s after a warm-up step)\n", REAL_NAME,
               a->batch, r->S, r->B, 1e3 * r->t_steps / timed, r->t_steps > 0 ? r->tokens / r->t_steps : 0.0,
               1e3 * r->cpu_steps / timed, r->cpu_steps > 0 ? r->tokens / r->cpu_steps : 0.0, timed,
               timed > 1 ? "s" : "");
    }
    return 0;
}

/* the held-out evaluation (--heldout N): acceptance per position and tau */
static int train_heldout(TrainCmd *r) {
    const Seqs *held = &r->held;
    int B = r->B;
    if (held->n == 0) return 0;
    long n_blocks, sum_len;
    long *accepted = calloc((size_t)B + 1, sizeof(long));
    if (!accepted) { dflash_set_error("out of memory"); return -1; }
    double t0 = now_seconds();
    if (train_eval_heldout(&r->draft, &r->target, r->st, held->n, held->ids, held->mask, held->off, held->len, r->S, B,
                           &r->hp, accepted, &n_blocks, &sum_len) != 0) {
        free(accepted);
        return -1;
    }
    double tau = n_blocks ? 1.0 + (double)sum_len / (double)n_blocks : 0;
    fprintf(stderr, "heldout: %d sequences, %ld blocks (%.1f s): tau %.4f, acceptance per position", held->n, n_blocks,
            now_seconds() - t0, tau);
    for (int i = 1; i < B; i++) fprintf(stderr, " %.4f", n_blocks ? (double)accepted[i] / (double)n_blocks : 0);
    fputc('\n', stderr);
    if (r->logf) {
        FILE *f = out_stream(r->logf);
        fprintf(f, "heldout_eval sequences %d blocks %ld tau %.6f acceptance_per_position", held->n, n_blocks, tau);
        for (int i = 1; i < B; i++) fprintf(f, " %.6f", n_blocks ? (double)accepted[i] / (double)n_blocks : 0);
        fputc('\n', f);
        for (int q = 0; q < held->n; q++) {
            fputs("heldout ", f);
            seq_write(f, held, q);
        }
    }
    free(accepted);
    return 0;
}

/* the draft folder, the trace, the saved data and the log, then the summary */
static int train_write(TrainCmd *r) {
    const TrainArgs *a = &r->a;
    for (int k = 0; k < 3; k++)
        if (outdir_write_file(&r->od, k, &r->out_cfg, r->bos, r->B, r->params, r->n_params, a->bf16) != 0) return -1;
    if (r->tracer) {
        int crc = trace_close(r->tracer);
        r->tracer = NULL;
        if (crc != 0) return -1;
    }
    if (outdir_commit(&r->od) != 0) return -1;
    OutFile **files[2] = {&r->savef, &r->logf};
    for (int k = 0; k < 2; k++)
        if (*files[k]) {
            int frc = out_commit(*files[k]);
            *files[k] = NULL;
            if (frc != 0) return -1;
        }
    char dur[32];
    fmt_duration(dur, sizeof dur, now_seconds() - r->t_start);
    size_t n_weights = 0;
    for (int i = 0; i < r->n_params; i++)
        n_weights += (size_t)r->params[i].shape[0] * (size_t)(r->params[i].ndim == 2 ? r->params[i].shape[1] : 1);
    if (r->steps > 0 && r->first_step > 1)
        fprintf(stderr, "trained steps %d..%d in %s (%.0f training tokens/s): loss %.4f -> %.4f, accuracy %.4f -> "
                        "%.4f\n", r->first_step, r->steps, dur, r->t_steps > 0 ? r->tokens / r->t_steps : 0.0,
                r->first_loss, r->last_loss, r->first_acc, r->last_acc);
    else if (r->steps > 0)
        fprintf(stderr, "trained %d steps in %s (%.0f training tokens/s): loss %.4f -> %.4f, accuracy %.4f -> %.4f\n",
                r->steps, dur, r->t_steps > 0 ? r->tokens / r->t_steps : 0.0, r->first_loss, r->last_loss,
                r->first_acc, r->last_acc);
    fprintf(stderr, "wrote %s: config.json, model.safetensors (%d tensors, %zu parameters, %s)%s%s\n", r->od.dir,
            r->n_params, n_weights, a->bf16 ? "BF16" : "F32", a->trace_dir ? "; trace " : "", a->trace_dir ? a->trace_dir : "");
    return 0;
}

static void train_run_free(TrainCmd *r) {
    ck_signals_restore(&r->sig);
    if (r->tracer) trace_discard(r->tracer);
    out_abort(r->logf);
    out_abort(r->savef);
    seqs_free(&r->held);
    outdir_discard(&r->od);
    ckdir_release(&r->ck);
    free(r->log_text);
    free(r->m);
    free(r->v);
    free(r->params);
    train_state_free(r->st);
    drawer_free(&r->dr);
    case_free(&r->cs);
    seqs_free(&r->seqs);
    if (r->have_draft) model_free(&r->draft);
    model_free(&r->target);
}

int train_main(int argc, char **argv) {
    TrainCmd run;
    TrainCmd *r = &run;
    memset(r, 0, sizeof *r);
    int pa = train_parse_args(argc, argv, &r->a);
    if (pa == 1) { for (int k = 0; k < 3; k++) fputs(TRAIN_USAGE[k], stdout); return 0; }
    if (pa < 0) { dflash_print_error("dflash train", ""); return 2; }
    r->argc = argc, r->argv = argv;
    ckdir_init(&r->ck);
    int ok = train_check_outputs(r) == 0 && train_load(r) == 0 && train_data(r) == 0 && train_setup(r) == 0 &&
             train_start(r) == 0;
    int lrc = ok ? train_loop(r) : -1;
    int rc = lrc == 1 ? r->stop_rc
           : lrc == 0 && (r->a.bench || (train_heldout(r) == 0 && train_write(r) == 0)) ? 0 : 2;
    if (rc == 2) dflash_print_error("dflash train", "");
    train_run_free(r);
    return rc;
}
