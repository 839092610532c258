/* train/train_target.c - `dflash train-target`: next-token training of a target
 * (Qwen3ForCausalLM or LlamaForCausalLM) around train/train.c's lm_step.
 *
 * train/train.c is the math (forward, cross-entropy, the hand-written backward,
 * clipping, AdamW). This file is everything around it:
 *   1. the flags (one table) and --help
 *   2. the data: --data FILE... through the tokenizer (train/corpus.c:
 *      documents, <|endoftext|> between them, windows of --seq-len tokens in
 *      a seeded order), or --batches FILE (lm_oracle.py's case file)
 *   3. the output folders: a Hugging Face target folder (config.json,
 *      model.safetensors F32 or BF16, tokenizer.json, generation_config.json)
 *      and a checkpoint (the same, in the build's precision, plus
 *      optimizer.safetensors and trainer_state.json), each written whole
 *      beside its final name and renamed into place, under a lock
 *   4. the held-out evaluation: loss per token and bits per byte
 *   5. the loop: the schedule (train/train_cli.c's train_lr_at), progress,
 *      checkpoints, SIGINT/SIGTERM, --resume
 *
 * Everything that can be refused (a flag, a file, a config, data that trains
 * nothing, an output that is an input) is refused before the first step, with
 * one line and exit status 2. */
#include "dflash.h"
#include "train/corpus.h"
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"
#include "tokenizer/tokenizer.h"
#include "trace.h"
#include "train/train.h"
#include "train/train_cli.h"
#include "train/train_target.h"
#include "train/checkpoint.h"
#include "cli/flags.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ===========================================================================
 * 1. Flags
 * ======================================================================== */

static const char *const TT_USAGE[2] = {
    "usage: dflash train-target (--config FILE | --target DIR | --resume DIR) --out DIR\n"
    "                           (--data FILE... | --batches FILE) [OPTIONS]\n"
    "\n"
    "Next-token training of a Qwen3 or Llama target (transformers' ForCausalLMLoss,\n"
    "clip_grad_norm_, torch.optim.AdamW; docs/learned.md).\n"
    "\n"
    "models:\n"
    "  --config FILE         a new target from this config.json (seeded initialisation:\n"
    "                        train/train.c, lm_init_target)\n"
    "  --target DIR          or: continue from this target folder's weights (its tokenizer.json\n"
    "                        is the default --tokenizer)\n"
    "  --resume DIR          or: continue a run from its checkpoint (weights, AdamW state, data\n"
    "                        position, PRNG, the log so far); the other training flags, the\n"
    "                        --data and the tokenizer must be the run's own (checked)\n"
    "  --tokenizer FILE      the tokenizer.json --data and --heldout are read through (a byte-level\n"
    "                        BPE with <|endoftext|>; dflash train-tokenizer writes one)\n"
    "  --out DIR             the trained target: config.json, model.safetensors, tokenizer.json,\n"
    "                        generation_config.json; DIR must be absent, empty, or a folder\n"
    "                        dflash train-target wrote\n"
    "  --dtype f32|bf16      model.safetensors' dtype (default f32; bf16 rounds to nearest even)\n"
    "data (exactly one of):\n"
    "  --data FILE...        text files: documents split on lines that are exactly \"%\" (the BSD\n"
    "                        fortune format; a file without one is one document), tokenized, each\n"
    "                        followed by <|endoftext|>, in the order given, cut into windows of\n"
    "                        --seq-len tokens sharing one token (every next-token pair in one\n"
    "                        window); each epoch visits the windows in a seeded shuffle\n"
    "  --batches FILE        lm_oracle.py's case file: step s trains on batches[s-1] (input_ids,\n"
    "                        loss_mask); its other keys are not read\n"
    "                        (--steps 0 needs neither: the model is evaluated and written)\n",
    "training:\n"
    "  --steps N             optimizer steps, 0..100000000 (default 100; --batches: its batch\n"
    "                        count); 0: evaluate and write the model as it starts\n"
    "  --batch b             windows per step, 1..4096 (default 8)\n"
    "  --seq-len T           tokens per window, 2..max_position_embeddings (default 128)\n"
    "  --lr LR               peak learning rate, > 0 (default 1e-3)\n"
    "  --warmup W            linear warmup steps, 0..steps-1 (default int(0.04 x steps))\n"
    "  --schedule cosine|constant   after the warmup: cosine decay to 0 (default) or constant\n"
    "  --weight-decay WD     AdamW's decoupled weight decay, >= 0 (default 0.1)\n"
    "  --decay-on all|matrices   decay every tensor (torch's AdamW over model.parameters()) or\n"
    "                        the matrices only, norm weights not (default matrices: nanoGPT's and\n"
    "                        llm.c's choice for a language model)\n"
    "  --max-grad-norm C     clip the global gradient norm to C; 0: no clipping (default 1)\n"
    "  --adam-eps E          AdamW's eps, > 0 (default 1e-8); betas 0.9, 0.95 (--beta2)\n"
    "  --beta2 B2            AdamW's beta2, in (0, 1) (default 0.95, nanoGPT's)\n"
    "  --seed S              the initialisation and the data order, 0..18446744073709551615\n"
    "                        (default 1337)\n"
    "  --threads N           pthreads for the matmuls, 1..64, bit-identical to 1 (default 1)\n"
    "long runs:\n"
    "  --log-every K         a progress line every K steps, and at the first and last (default 10)\n"
    "  --checkpoint-every N  a checkpoint every N steps, 0..100000000 (default 0: only on SIGINT\n"
    "                        or SIGTERM, which stop the run after the step in progress)\n"
    "  --checkpoint DIR      the checkpoint folder (default: --out with \".checkpoint\" appended)\n"
    "  --stop-after N        write a checkpoint after step N and stop (exit 0, --out not written):\n"
    "                        a run split into several; --resume goes on\n"
    "evaluation and logs:\n"
    "  --heldout FILE...     after training: loss per token and bits per byte over these text\n"
    "                        files (the --data format; every next-token pair of the stream once)\n"
    "  --log FILE            every step's loss, lr, grad norm, clip coefficient, wall and processor ms\n"
    "  --trace DIR           every step's tensors: DIR/train{s}.<name>.npy (TRACE.md)\n"
    "  -h, --help            this text\n"
    "exit status: 0 trained and wrote --out (or the --stop-after checkpoint); 2 bad input or a\n"
    "non-finite loss or gradient (nothing written but a checkpoint of the steps before);\n"
    "130/143 stopped by SIGINT/SIGTERM after writing a checkpoint\n"};

#define TT_MAX_FILES 64

typedef struct {
    const char *config, *target, *resume, *tokenizer, *out, *batches, *trace_dir, *log, *checkpoint;
    int bf16;          /* --dtype: 0 f32, 1 bf16 (the order of its choices) */
    int schedule;      /* Schedule: 0 cosine, 1 constant */
    int decay_on;      /* TRAIN_DECAY_ALL (0) or TRAIN_DECAY_MATRICES (1) */
    const char *data[TT_MAX_FILES], *heldout[TT_MAX_FILES];
    int n_data, n_heldout;
    long steps, batch, seq_len, warmup, log_every, checkpoint_every, stop_after, threads;
    double lr, weight_decay, max_grad_norm, adam_eps, beta2;
    uint64_t seed;
} TtArgs;

/* THE flags of dflash train-target (cli/flags.h; tests/test_flags.c checks
 * them against TT_USAGE). --data and --heldout take every argument up to
 * the next flag. */
#define TT(m) offsetof(TtArgs, m)
const Flag TRAIN_TARGET_FLAGS[] = {
    {.name = "--config", .kind = FLAG_STRING, .field = TT(config)},
    {.name = "--target", .kind = FLAG_STRING, .field = TT(target)},
    {.name = "--resume", .kind = FLAG_STRING, .field = TT(resume)},
    {.name = "--tokenizer", .kind = FLAG_STRING, .field = TT(tokenizer)},
    {.name = "--out", .kind = FLAG_STRING, .field = TT(out)},
    {.name = "--dtype", .kind = FLAG_CHOICE, .field = TT(bf16), .choices = "f32|bf16"},
    {.name = "--data", .kind = FLAG_LIST, .field = TT(data), .count = TT(n_data), .max = TT_MAX_FILES},
    {.name = "--batches", .kind = FLAG_STRING, .field = TT(batches)},
    {.name = "--steps", .kind = FLAG_INT, .field = TT(steps), .lo = 0, .hi = 100000000},
    {.name = "--batch", .kind = FLAG_INT, .field = TT(batch), .lo = 1, .hi = 4096},
    {.name = "--seq-len", .kind = FLAG_INT, .field = TT(seq_len), .lo = 2, .hi = 1 << 20},
    {.name = "--lr", .kind = FLAG_REAL, .field = TT(lr), .lo = 0, .open = FLAG_OPEN},
    {.name = "--warmup", .kind = FLAG_INT, .field = TT(warmup), .lo = 0, .hi = 100000000},
    {.name = "--schedule", .kind = FLAG_CHOICE, .field = TT(schedule), .choices = "cosine|constant"},
    {.name = "--weight-decay", .kind = FLAG_REAL, .field = TT(weight_decay), .lo = 0},
    {.name = "--decay-on", .kind = FLAG_CHOICE, .field = TT(decay_on), .choices = "all|matrices"},
    {.name = "--max-grad-norm", .kind = FLAG_REAL, .field = TT(max_grad_norm), .lo = 0},
    {.name = "--adam-eps", .kind = FLAG_REAL, .field = TT(adam_eps), .lo = 0, .open = FLAG_OPEN},
    {.name = "--beta2", .kind = FLAG_REAL, .field = TT(beta2), .lo = 0, .hi = 1, .open = FLAG_OPEN_BOTH},
    {.name = "--seed", .kind = FLAG_U64, .field = TT(seed)},
    {.name = "--threads", .kind = FLAG_INT, .field = TT(threads), .lo = 1, .hi = 64},
    {.name = "--log-every", .kind = FLAG_INT, .field = TT(log_every), .lo = 1, .hi = 100000000},
    {.name = "--checkpoint-every", .kind = FLAG_INT, .field = TT(checkpoint_every), .lo = 0, .hi = 100000000},
    {.name = "--checkpoint", .kind = FLAG_STRING, .field = TT(checkpoint)},
    {.name = "--stop-after", .kind = FLAG_INT, .field = TT(stop_after), .lo = 1, .hi = 100000000},
    {.name = "--heldout", .kind = FLAG_LIST, .field = TT(heldout), .count = TT(n_heldout), .max = TT_MAX_FILES},
    {.name = "--log", .kind = FLAG_STRING, .field = TT(log)},
    {.name = "--trace", .kind = FLAG_STRING, .field = TT(trace_dir)},
    FLAG_TABLE_END};
#undef TT

/* 0 run, 1 --help, -1 bad arguments (dflash_errmsg) */
static int tt_parse_args(int argc, char **argv, TtArgs *a) {
    memset(a, 0, sizeof *a);
    a->steps = a->warmup = -1;
    a->batch = 8;
    a->seq_len = 128;
    a->lr = 1e-3;
    a->weight_decay = 0.1;
    a->max_grad_norm = 1;
    a->adam_eps = 1e-8;
    a->beta2 = 0.95;
    a->seed = 1337;
    a->log_every = 10;
    a->threads = 1;
    a->decay_on = TRAIN_DECAY_MATRICES;
    int rc = flags_parse(TRAIN_TARGET_FLAGS, argc, argv, a, "dflash train-target", NULL, 0, NULL);
    if (rc != 0) return rc;
    if (!!a->config + !!a->target + !!a->resume != 1) {
        dflash_set_error("--config FILE, --target DIR or --resume DIR: expected exactly one, got %s",
                         a->config || a->target || a->resume ? "more" : "none");
        return -1;
    }
    if (!!a->n_data + !!a->batches != 1 && !(a->steps == 0 && !a->n_data && !a->batches)) {
        dflash_set_error("--data FILE... or --batches FILE: expected exactly one, got %s", a->batches ? "both" : "neither");
        return -1;
    }
    if (!a->out) { dflash_set_error("--out: missing (the folder the trained target goes to)"); return -1; }
    return train_check_steps(a->steps, a->warmup, a->stop_after);
}

/* ===========================================================================
 * 2. Data
 * ======================================================================== */

static int corpus_read(Corpus *c, const char *const *files, int n_files, const Tokenizer *tok, int eot, int V) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < n_files; i++)
        if (corpus_add_file(c, files[i], tok_encode_cb, (void *)tok, eot) != 0) return -1;
    for (size_t k = 0; k < c->n; k++)
        if (c->ids[k] < 0 || c->ids[k] >= V) {
            dflash_set_error("%s: token id %d: expected ids below the model's vocab_size %d", files[0], c->ids[k], V);
            return -1;
        }
    return 0;
}

/* lm_oracle.py's case file: batches[i].input_ids (b, S) and loss_mask */
typedef struct { int b, S; int *ids, *mask; } CaseBatch;
typedef struct { int n; CaseBatch *batch; } Case;

static void case_free(Case *c) {
    for (int i = 0; i < c->n; i++) free(c->batch[i].ids), free(c->batch[i].mask);
    free(c->batch);
    memset(c, 0, sizeof *c);
}

static int case_matrix(const Json *m, const char *path, int bi, const char *key, int V, int *b, int *S, int **out) {
    if (!m || m->type != JSON_ARRAY || m->n < 1) {
        dflash_set_error("%s: batches[%d].%s: expected a non-empty array of rows", path, bi, key);
        return -1;
    }
    if (*b < 0) *b = m->n, *S = m->items[0].type == JSON_ARRAY ? m->items[0].n : 0;
    if (m->n != *b || *S < 2) {
        dflash_set_error("%s: batches[%d].%s: expected %d rows of at least 2 values", path, bi, key, *b);
        return -1;
    }
    *out = malloc(sizeof(int) * (size_t)*b * (size_t)*S);
    if (!*out) { dflash_set_error("out of memory"); return -1; }
    for (int r = 0; r < *b; r++) {
        const Json *row = &m->items[r];
        if (row->type != JSON_ARRAY || row->n != *S) {
            dflash_set_error("%s: batches[%d].%s[%d]: expected %d values", path, bi, key, r, *S);
            return -1;
        }
        for (int t = 0; t < *S; t++) {
            const Json *x = &row->items[t];
            int hi = V < 0 ? 1 : V - 1;
            if (x->type != JSON_NUMBER || !x->is_integer || x->integer < 0 || x->integer > hi) {
                dflash_set_error("%s: batches[%d].%s[%d][%d]: expected an integer in 0..%d", path, bi, key, r, t, hi);
                return -1;
            }
            (*out)[(size_t)r * *S + t] = (int)x->integer;
        }
    }
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
    const Json *bs = json_get(&root, "batches");
    if (!bs || bs->type != JSON_ARRAY || bs->n < 1) {
        dflash_set_error("%s: \"batches\": expected a non-empty array", path);
        goto done;
    }
    c->batch = calloc((size_t)bs->n, sizeof(CaseBatch));
    if (!c->batch) { dflash_set_error("out of memory"); goto done; }
    c->n = bs->n;
    for (int i = 0; i < bs->n; i++) {
        CaseBatch *cb = &c->batch[i];
        cb->b = -1;
        if (case_matrix(json_get(&bs->items[i], "input_ids"), path, i, "input_ids", V, &cb->b, &cb->S, &cb->ids) != 0)
            goto done;
        const Json *lm = json_get(&bs->items[i], "loss_mask");
        if (lm && lm->type != JSON_NULL && case_matrix(lm, path, i, "loss_mask", -1, &cb->b, &cb->S, &cb->mask) != 0)
            goto done;
        long counted = 0;
        for (int r = 0; r < cb->b; r++)
            for (int t = 1; t < cb->S; t++) counted += cb->mask ? cb->mask[(size_t)r * cb->S + t] : 1;
        if (counted == 0) {
            dflash_set_error("%s: batches[%d]: no label carries a loss (loss_mask is 0 at every position after "
                             "the first); this batch cannot train", path, i);
            goto done;
        }
    }
    rc = 0;
done:
    json_free(&root);
    if (rc != 0) case_free(c);
    return rc;
}

/* The windows' order: epoch by epoch, a Fisher-Yates shuffle of 0..n-1 drawn
 * from dflash.c's PRNG (draw i swaps i with i + floor(u * (n - i))). The
 * position is (epoch, cursor) and epoch_rng, the PRNG as the epoch began:
 * a checkpoint holds these three, and the order is redrawn from them. */
typedef struct {
    size_t n, cursor;
    long epoch;
    uint64_t epoch_rng;   /* Rng.s before this epoch's shuffle */
    uint64_t rng;         /* after it */
    size_t *order;
} Order;

static void order_shuffle(Order *o) {
    Rng g = {o->epoch_rng};
    for (size_t i = 0; i < o->n; i++) o->order[i] = i;
    for (size_t i = 0; i + 1 < o->n; i++) {
        size_t j = i + (size_t)(rng_uniform(&g) * (double)(o->n - i));
        size_t t = o->order[i];
        o->order[i] = o->order[j], o->order[j] = t;
    }
    o->rng = g.s;
}

static size_t order_next(Order *o) {
    if (o->cursor == o->n) {
        o->epoch++;
        o->epoch_rng = o->rng;
        o->cursor = 0;
        order_shuffle(o);
    }
    return o->order[o->cursor++];
}

/* ===========================================================================
 * 3. The output folders
 * ======================================================================== */

/* config.json of a Qwen3ForCausalLM / LlamaForCausalLM, transformers' keys in
 * sorted order, with this model's values */
static void write_config_json(FILE *f, const Config *c, const char *dtype, int eot) {
    char eps[40], theta[40];
    json_number(eps, sizeof eps, c->rms_norm_eps);
    json_number(theta, sizeof theta, c->rope_theta);
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n", c->llama ? "LlamaForCausalLM" : "Qwen3ForCausalLM");
    fprintf(f, "  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n");
    if (eot >= 0) fprintf(f, "  \"bos_token_id\": %d,\n", eot);
    fprintf(f, "  \"dtype\": \"%s\",\n", dtype);
    if (eot >= 0) fprintf(f, "  \"eos_token_id\": %d,\n", eot);
    else if (c->n_eos >= 1) fprintf(f, "  \"eos_token_id\": %d,\n", c->eos_token_id[0]);
    fprintf(f, "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n", c->head_dim, c->hidden_size);
    fprintf(f, "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n", c->intermediate_size);
    fprintf(f, "  \"max_position_embeddings\": %d,\n", c->max_position_embeddings);
    if (!c->llama) fprintf(f, "  \"max_window_layers\": %d,\n", c->num_hidden_layers);
    fprintf(f, "  \"model_type\": \"%s\",\n", c->llama ? "llama" : "qwen3");
    fprintf(f, "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n", c->num_attention_heads,
            c->num_hidden_layers);
    fprintf(f, "  \"num_key_value_heads\": %d,\n  \"rms_norm_eps\": %s,\n", c->num_key_value_heads, eps);
    config_write_rope_scaling(f, c);
    fprintf(f, "  \"rope_theta\": %s,\n", theta);
    if (!c->llama) fprintf(f, "  \"sliding_window\": null,\n");
    fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"use_cache\": true,\n", c->tie_word_embeddings ? "true" : "false");
    if (!c->llama) fprintf(f, "  \"use_sliding_window\": false,\n");
    fprintf(f, "  \"vocab_size\": %d\n}\n", c->vocab_size);
}

/* The files a folder of this command may hold: an existing --out or
 * --checkpoint holding anything else is not replaced. */
enum { OF_CONFIG, OF_MODEL, OF_TOKENIZER, OF_GENCONFIG, OF_OPTIMIZER, OF_STATE, OF_LOG, OF_N };
static const char *const OUT_FILES[OF_N] = {"config.json", "model.safetensors", "tokenizer.json",
                                            "generation_config.json", "optimizer.safetensors", "trainer_state.json",
                                            "train.log"};

/* ===========================================================================
 * 4. The run
 * ======================================================================== */

/* what a checkpoint must agree on with the flags of the run that resumes it */
typedef struct {
    long steps, batch, seq_len, warmup;
    double lr, weight_decay, max_grad_norm, adam_eps, beta2;
    int schedule, decay_on;
    uint64_t seed;
    /* the position after the checkpoint's step */
    long step, adam_t, epoch;
    size_t cursor;
    uint64_t epoch_rng;
    double elapsed;   /* training seconds so far */
    long tokens;      /* tokens trained so far */
    /* fingerprints (FNV-1a 64, 0: not recorded, a checkpoint written before
     * them): the tokenizer.json's bytes, the training stream's token ids */
    uint64_t tokenizer_hash, data_hash;
} RunState;

/* trainer_state.json: the position, then the settings (with the flag that
 * sets each: a resume must agree on them), in this order */
#define RS(m) offsetof(RunState, m)
static const CkField RUN_STATE_FIELDS[] = {
    {"step", CK_LONG, RS(step), NULL}, {"adam_t", CK_LONG, RS(adam_t), NULL}, {"epoch", CK_LONG, RS(epoch), NULL},
    {"cursor", CK_SIZE, RS(cursor), NULL}, {"epoch_rng", CK_U64, RS(epoch_rng), NULL},
    {"tokens", CK_LONG, RS(tokens), NULL}, {"elapsed", CK_REAL, RS(elapsed), NULL},
    {"steps", CK_LONG, RS(steps), "--steps"}, {"batch", CK_LONG, RS(batch), "--batch"},
    {"seq_len", CK_LONG, RS(seq_len), "--seq-len"}, {"warmup", CK_LONG, RS(warmup), "--warmup"},
    {"lr", CK_REAL, RS(lr), "--lr"}, {"weight_decay", CK_REAL, RS(weight_decay), "--weight-decay"},
    {"max_grad_norm", CK_REAL, RS(max_grad_norm), "--max-grad-norm"}, {"adam_eps", CK_REAL, RS(adam_eps), "--adam-eps"},
    {"beta2", CK_REAL, RS(beta2), "--beta2"}, {"schedule", CK_INT, RS(schedule), "--schedule"},
    {"decay_on", CK_INT, RS(decay_on), "--decay-on"}, {"seed", CK_U64, RS(seed), "--seed"},
    {"tokenizer_hash", CK_HASH, RS(tokenizer_hash), "--tokenizer"},
    {"data_hash", CK_HASH, RS(data_hash), "--data (its token ids)"}};
#undef RS
#define N_RUN_STATE_FIELDS ((int)(sizeof RUN_STATE_FIELDS / sizeof RUN_STATE_FIELDS[0]))
#define TT_CHECKPOINT_FORMAT "dflash train-target checkpoint 1"

typedef struct {
    const TtArgs *a;
    Config cfg;
    Model model;
    int have_model;
    LmState *st;
    TrainParam *params, *m, *v;
    int n_params;
    const char *tok_path;    /* copied into the folders, or NULL */
    char *tok_json;
    size_t tok_len;
    int eot;
    RunState rs;
    Order order;
} Run;

/* the model files of a folder: config.json, model.safetensors (dtype),
 * tokenizer.json (a copy), generation_config.json */
static int write_model_files(Run *r, CkDir *o, const char *st_dtype, const char *cfg_dtype) {
    char *p;
    OutFile *f = ckdir_file(o, OF_CONFIG, &p);
    if (!f) return -1;
    write_config_json(out_stream(f), &r->cfg, cfg_dtype, r->eot);
    if (ckdir_file_done(o, f, p) != 0) return -1;
    if (!(f = ckdir_file(o, OF_MODEL, &p))) return -1;
    const TrainParam *sets[1] = {r->params};
    const char *none[1] = {""};
    if (ck_write_safetensors(out_stream(f), sets, none, 1, r->n_params, st_dtype) != 0) {
        out_abort(f);
        free(p);
        return -1;
    }
    if (ckdir_file_done(o, f, p) != 0) return -1;
    if (r->tok_json && ckdir_write_text(o, OF_TOKENIZER, r->tok_json, r->tok_len) != 0) return -1;
    if (!(f = ckdir_file(o, OF_GENCONFIG, &p))) return -1;
    if (r->eot >= 0)
        fprintf(out_stream(f), "{\n  \"bos_token_id\": %d,\n  \"eos_token_id\": %d\n}\n", r->eot, r->eot);
    else
        fprintf(out_stream(f), "{\n}\n");
    return ckdir_file_done(o, f, p);
}

/* a checkpoint: the model files, AdamW's state, the position and settings,
 * and --log's lines so far (log: NULL without --log), which a resumed run
 * writes again before its own, so that its --log holds the whole run's */
static int write_checkpoint(Run *r, CkDir *o, const char *log, size_t log_len) {
    if (ckdir_begin(o, "--checkpoint") != 0) return -1;
    if (write_model_files(r, o, CK_REAL_DTYPE, CK_REAL_TORCH) != 0) goto fail;
    if (ck_write_optimizer(o, OF_OPTIMIZER, r->m, r->v, r->n_params) != 0) goto fail;
    char *p;
    OutFile *f = ckdir_file(o, OF_STATE, &p);
    if (!f) goto fail;
    ck_state_write(out_stream(f), TT_CHECKPOINT_FORMAT, RUN_STATE_FIELDS, N_RUN_STATE_FIELDS, &r->rs);
    if (ckdir_file_done(o, f, p) != 0) goto fail;
    if (log && ckdir_write_text(o, OF_LOG, log, log_len) != 0) goto fail;
    if (ckdir_commit(o, "--checkpoint") != 0) goto fail;
    return 0;
fail:
    ckdir_discard(o);
    return -1;
}

/* the held-out evaluation: every next-token pair of the stream once, in
 * windows of T tokens (the last one shorter), b per batch */
static int evaluate(Run *r, const Corpus *c, int b, int T, double *loss_per_token, double *bits_per_byte, long *n_out) {
    lm_set_threads(r->st, (int)r->a->threads);
    double total = 0;
    long counted = 0;
    int *ids = malloc(sizeof(int) * (size_t)b * (size_t)T);
    if (!ids) { dflash_set_error("out of memory"); return -1; }
    size_t start = 0;   /* the next window's first token */
    long batches = 0;
    double t0 = now_seconds();
    while (start + 1 < c->n) {
        int rows = 0, len = T;
        if (c->n - start < (size_t)T) len = (int)(c->n - start);   /* the tail */
        while (rows < b && start + 1 < c->n && (size_t)len <= c->n - start) {
            memcpy(ids + (size_t)rows * len, c->ids + start, sizeof(int) * (size_t)len);
            rows++;
            start += (size_t)(len - 1);
            if (len < T) break;
        }
        LmBatch lb = {rows, len, ids, NULL};
        double loss;
        long n;
        if (lm_eval_loss(&r->model, r->st, &lb, &loss, &n) != 0) { free(ids); return -1; }
        if (!isfinite(loss)) { free(ids); dflash_set_error("--heldout: the loss is not finite"); return -1; }
        total += loss * (double)n;
        counted += n;
        if (++batches % 50 == 0)   /* progress: a held-out pass of the learned target takes minutes */
            fprintf(stderr, "heldout: %ld of %zu tokens scored, %.1f s\n", counted, c->n - 1, now_seconds() - t0);
        if (len < T) break;
    }
    free(ids);
    *loss_per_token = counted ? total / (double)counted : 0;
    *bits_per_byte = c->bytes ? total / log(2.0) / (double)c->bytes : 0;
    *n_out = counted;
    return 0;
}

/* One run of dflash train-target: what its phases share. train_target_main
 * runs them in order (tt_paths, tt_load, tt_data, tt_state, tt_resume,
 * tt_open, tt_loop, tt_finish), each 0 or -1 with dflash_errmsg; tt_free
 * releases what any of them made. */
typedef struct {
    TtArgs a;
    int argc;
    char **argv;
    Run r;
    Corpus train, held;
    Case cs;
    CkDir od, ck;
    Tokenizer tok;
    int have_tok;
    Tracer *tracer;
    OutFile *logf;
    char *log_text;   /* every line of --log so far (a checkpoint's train.log) */
    size_t log_len, log_cap;
    int *batch_ids;
    char ck_default[4200], tok_default[4200];
    const char *ck_dir;
    int V, T, b, steps, warmup, first_step;
    size_t n_weights;
    TrainHyper hp;
    CkSignals sig;
    double t_run, cpu_run, first_loss, last_loss;  /* cpu_run: processor seconds of this process's steps */
    long tokens_run;
    int rc;   /* tt_loop stopped early: the exit status */
} TtCmd;

/* A line (or lines) of --log: into the file and into log_text, which the
 * checkpoints carry (-1 with dflash_errmsg: out of memory) */
static int tt_log(TtCmd *tc, const char *fmt, ...) {
    if (!tc->logf) return 0;
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) { va_end(aq); dflash_set_error("--log: a line that cannot be formatted"); return -1; }
    if (tc->log_len + (size_t)n + 1 > tc->log_cap) {
        size_t cap = tc->log_cap ? tc->log_cap : 4096;
        while (tc->log_len + (size_t)n + 1 > cap) cap *= 2;
        char *t = realloc(tc->log_text, cap);
        if (!t) { va_end(aq); dflash_set_error("out of memory (--log)"); return -1; }
        tc->log_text = t, tc->log_cap = cap;
    }
    vsnprintf(tc->log_text + tc->log_len, (size_t)n + 1, fmt, aq);
    va_end(aq);
    fwrite(tc->log_text + tc->log_len, 1, (size_t)n, out_stream(tc->logf));
    tc->log_len += (size_t)n;
    return 0;
}

/* the paths: the outputs against the inputs, before anything is read */
static int tt_paths(TtCmd *tc) {
    TtArgs *a = &tc->a;
    snprintf(tc->ck_default, sizeof tc->ck_default, "%.4000s.checkpoint", a->out);
    const char *ck_dir = tc->ck_dir = a->checkpoint ? a->checkpoint : tc->ck_default;
    if (!a->tokenizer && (a->target || a->resume)) {
        snprintf(tc->tok_default, sizeof tc->tok_default, "%.4000s/tokenizer.json", a->target ? a->target : a->resume);
        struct stat sb;
        if (stat(tc->tok_default, &sb) == 0) a->tokenizer = tc->tok_default;
    }
    /* --resume DIR with DIR the run's own checkpoint folder (the usual case):
     * everything in it is read into memory before the first step, and a new
     * checkpoint replaces the folder by a rename, so it is not an input to
     * protect from itself */
    struct stat rs_st, ck_st;
    int resume_own = a->resume && stat(a->resume, &rs_st) == 0 && stat(ck_dir, &ck_st) == 0 &&
                     rs_st.st_dev == ck_st.st_dev && rs_st.st_ino == ck_st.st_ino;
    const char *inputs[2 * TT_MAX_FILES + 8];
    int n_in = 0;
    for (int i = 0; i < a->n_data; i++) inputs[n_in++] = a->data[i];
    for (int i = 0; i < a->n_heldout; i++) inputs[n_in++] = a->heldout[i];
    if (a->config) inputs[n_in++] = a->config;
    if (a->target) inputs[n_in++] = a->target;
    if (a->resume && !resume_own) inputs[n_in++] = a->resume;
    if (a->tokenizer && !(resume_own && a->tokenizer == tc->tok_default)) inputs[n_in++] = a->tokenizer;
    if (a->batches) inputs[n_in++] = a->batches;
    OutPath outs[4] = {{a->out, "--out", 1}, {ck_dir, "--checkpoint", 1}, {a->log, "--log", 0}, {a->trace_dir, "--trace", 1}};
    return train_outputs_apart("dflash train-target", outs, 4, inputs, n_in);
}

/* the model (a config's, initialised later, or a folder's) and the tokenizer */
static int tt_load(TtCmd *tc) {
    const TtArgs *a = &tc->a;
    Run *r = &tc->r;
    Tokenizer *tok = &tc->tok;
    if (a->config) {
        if (config_load(&r->cfg, a->config, 0) != 0) return -1;   /* initialised after every check */
    } else {
        const char *dir = a->target ? a->target : a->resume;
        if (model_load(&r->model, dir, 0) != 0) return -1;
        r->cfg = r->model.cfg;
        r->have_model = 1;
    }
    if (r->cfg.hybrid) {   /* train/train.c's target is Qwen3's or Llama's: no Gated DeltaNet backward */
        dflash_set_error("%s: a hybrid (Qwen3.5) target: train-target trains Qwen3 and Llama targets only (it "
                         "has no Gated DeltaNet backward)",
                         a->config ? a->config : a->target ? a->target : a->resume);
        return -1;
    }
    int V = tc->V = r->cfg.vocab_size;

    /* the tokenizer */
    if (a->tokenizer) {
        if (tok_load(tok, a->tokenizer) != 0) return -1;
        tc->have_tok = 1;
        if (file_read_all(a->tokenizer, &r->tok_json, &r->tok_len) != 0) return -1;
        r->eot = tok_added_id(tok, "<|endoftext|>");
        if (r->eot < 0) {
            dflash_set_error("%s: no <|endoftext|> token (the separator between documents)", a->tokenizer);
            return -1;
        }
        if (tok->n_ids > V) {
            dflash_set_error("%s: %d tokens, the model's vocab_size is %d (expected at most that)", a->tokenizer,
                             tok->n_ids, V);
            return -1;
        }
    } else if (a->n_data || a->n_heldout) {
        dflash_set_error("--data and --heldout read text through a tokenizer: give --tokenizer FILE");
        return -1;
    }
    return 0;
}

/* the data (--batches, --data, --heldout) and the steps it gives */
static int tt_data(TtCmd *tc) {
    const TtArgs *a = &tc->a;
    Run *r = &tc->r;
    Case *cs = &tc->cs;
    Corpus *train = &tc->train, *held = &tc->held;
    const Tokenizer *tok = &tc->tok;
    int V = tc->V;
    int T = (int)a->seq_len, b = (int)a->batch, steps = (int)a->steps;
    if (T > r->cfg.max_position_embeddings) {
        dflash_set_error("--seq-len: expected 2..%d (max_position_embeddings), got %d", r->cfg.max_position_embeddings, T);
        return -1;
    }
    if (a->batches) {
        if (case_load(cs, a->batches, V) != 0) return -1;
        if (steps < 0) steps = cs->n;
        if (steps > cs->n) {
            dflash_set_error("--steps: expected at most %d (the batches in %s), got %d", cs->n, a->batches, steps);
            return -1;
        }
        T = b = 0;
        for (int i = 0; i < cs->n; i++) {
            if (cs->batch[i].S > r->cfg.max_position_embeddings) {
                dflash_set_error("%s: batches[%d]: %d ids: expected at most %d (max_position_embeddings)", a->batches,
                                 i, cs->batch[i].S, r->cfg.max_position_embeddings);
                return -1;
            }
            if (cs->batch[i].S > T) T = cs->batch[i].S;
            if (cs->batch[i].b > b) b = cs->batch[i].b;
        }
    } else if (a->n_data) {
        if (steps < 0) steps = 100;
        if (corpus_read(train, a->data, a->n_data, tok, r->eot, V) != 0) return -1;
        r->order.n = corpus_windows(train, T);
        if (r->order.n == 0 && steps > 0) {
            dflash_set_error("--data: %zu tokens, fewer than one window of --seq-len %d: nothing to train on",
                             train->n, T);
            return -1;
        }
    }
    if (a->n_heldout && corpus_read(held, a->heldout, a->n_heldout, tok, r->eot, V) != 0) return -1;
    if (a->n_heldout && held->n < 2) { dflash_set_error("--heldout: fewer than 2 tokens"); return -1; }
    int warmup = a->warmup >= 0 ? (int)a->warmup : (int)(0.04 * steps);
    if (steps > 0 && warmup >= steps) {
        dflash_set_error("--warmup: expected fewer steps than --steps (%d), got %d", steps, warmup);
        return -1;
    }
    if (a->stop_after > 0 && a->stop_after >= steps) {
        dflash_set_error("--stop-after: expected a step before the last (%d), got %ld", steps, a->stop_after);
        return -1;
    }
    tc->T = T, tc->b = b, tc->steps = steps, tc->warmup = warmup;
    return 0;
}

/* the settings a checkpoint records; the state: weights made private,
 * gradients, AdamW, activations; the windows' order */
static int tt_state(TtCmd *tc) {
    const TtArgs *a = &tc->a;
    Run *r = &tc->r;
    int T = tc->T, b = tc->b, steps = tc->steps, warmup = tc->warmup;
    RunState *s = &r->rs;
    s->steps = steps, s->batch = b, s->seq_len = T, s->warmup = warmup;
    s->lr = a->lr, s->weight_decay = a->weight_decay, s->max_grad_norm = a->max_grad_norm, s->adam_eps = a->adam_eps;
    s->beta2 = a->beta2;
    s->schedule = a->schedule;
    s->decay_on = a->decay_on;
    s->seed = a->seed;
    /* the fingerprints --resume checks: another tokenizer or other data is
     * another run (the stream's ids cover the text and its tokenizer) */
    s->tokenizer_hash = r->tok_json ? fnv_words(0xcbf29ce484222325ull, r->tok_json, r->tok_len) : 0;
    s->data_hash = tc->train.n ? fnv_words(0xcbf29ce484222325ull, tc->train.ids, sizeof(int) * tc->train.n) : 0;

    /* the state: weights made private, gradients, AdamW, activations */
    if (a->config) {
        if (lm_init_target(&r->model, &r->cfg, a->seed) != 0) return -1;
        r->have_model = 1;
    }
    if (!(r->st = lm_state_new(&r->model, b, T > 2 ? T : 2))) return -1;
    int cap = 16 * r->cfg.num_hidden_layers + 8;
    r->params = calloc((size_t)cap, sizeof(TrainParam));
    r->m = calloc((size_t)cap, sizeof(TrainParam));
    r->v = calloc((size_t)cap, sizeof(TrainParam));
    if (!r->params || !r->m || !r->v) { dflash_set_error("out of memory"); return -1; }
    r->n_params = lm_params(&r->model, r->params, cap);
    if (r->n_params <= 0 || r->n_params > cap || lm_optimizer_tensors(r->st, r->m, r->v, cap) != r->n_params) {
        if (!dflash_errmsg[0]) dflash_set_error("the model's tensors: unexpected count");
        return -1;
    }
    r->order.order = r->order.n ? malloc(sizeof(size_t) * r->order.n) : NULL;
    if (r->order.n && !r->order.order) { dflash_set_error("out of memory (the windows' order)"); return -1; }
    {
        Rng g;
        rng_seed(&g, a->seed ^ 0x64617461ull);   /* "data" */
        r->order.epoch_rng = g.s;
        r->order.epoch = 0, r->order.cursor = 0;
        if (r->order.n) order_shuffle(&r->order);
    }
    return 0;
}

/* --resume: the checkpoint's position, after checking it is this run's */
static int tt_resume(TtCmd *tc) {
    const TtArgs *a = &tc->a;
    Run *r = &tc->r;
    RunState *s = &r->rs;
    int steps = tc->steps;
    tc->first_step = 1;
    if (a->resume) {   /* the checkpoint's position, after checking it is this run's */
        RunState c;
        memset(&c, 0, sizeof c);
        char *p = path_join(a->resume, "trainer_state.json");
        int src = p ? ck_state_read(p, TT_CHECKPOINT_FORMAT, "dflash train-target", RUN_STATE_FIELDS,
                                    N_RUN_STATE_FIELDS, &c) : -1;
        free(p);
        if (src != 0) return -1;
        const char *bad = ck_disagree(RUN_STATE_FIELDS, N_RUN_STATE_FIELDS, &c, s);
        if (bad) {
            dflash_set_error("--resume %s: the checkpoint's run had another %s; give the run's own flags", a->resume, bad);
            return -1;
        }
        if (c.step >= steps || (r->order.n && c.cursor > r->order.n) || (!r->order.n && !a->batches)) {
            dflash_set_error("--resume %s: step %ld of %d: nothing left to train, or another data set", a->resume,
                             c.step, steps);
            return -1;
        }
        if (ck_read_weights(a->resume, r->params, r->m, r->v, r->n_params) != 0) return -1;
        lm_set_optimizer_step(r->st, c.adam_t);
        r->order.epoch = c.epoch, r->order.epoch_rng = c.epoch_rng;
        if (r->order.n) order_shuffle(&r->order);
        r->order.cursor = c.cursor;
        s->tokens = c.tokens, s->elapsed = c.elapsed;
        tc->first_step = (int)c.step + 1;
    }
    return 0;
}

/* every check passed: the folders' locks, the log, the trace, the lines
 * before the first step */
static int tt_open(TtCmd *tc) {
    const TtArgs *a = &tc->a;
    Run *r = &tc->r;
    const RunState *s = &r->rs;
    CkDir *od = &tc->od, *ck = &tc->ck;
    const Corpus *train = &tc->train;
    const char *ck_dir = tc->ck_dir;
    int T = tc->T, b = tc->b, steps = tc->steps, warmup = tc->warmup, first_step = tc->first_step;
    if (ckdir_open(od, a->out, "--out", "dflash train-target", OUT_FILES, OF_N) != 0 ||
        ckdir_open(ck, ck_dir, "--checkpoint", "dflash train-target", OUT_FILES, OF_N) != 0)
        return -1;
    if (a->log && !(tc->logf = out_open(a->log, "--log"))) return -1;
    if (a->trace_dir && !(tc->tracer = trace_open(a->trace_dir, NULL, NULL, 0))) return -1;
    if (!(tc->batch_ids = malloc(sizeof(int) * (size_t)b * (size_t)T))) { dflash_set_error("out of memory"); return -1; }

    size_t n_weights = 0;
    for (int i = 0; i < r->n_params; i++)
        n_weights += (size_t)r->params[i].shape[0] * (size_t)(r->params[i].ndim == 2 ? r->params[i].shape[1] : 1);
    if (a->batches)
        fprintf(stderr, "train-target: %zu parameters, %d steps on the batches of %s\n", n_weights, steps, a->batches);
    else
        fprintf(stderr, "train-target: %zu parameters, %d steps of %d x %d tokens; data: %ld documents, %zu tokens, "
                        "%zu windows (%zu tokens after the last are in none), %.2f epochs\n", n_weights, steps, b, T,
                train->documents, train->n, r->order.n, train->n - (r->order.n ? (r->order.n - 1) * (size_t)(T - 1) + T : 0),
                r->order.n ? (double)steps * b / (double)r->order.n : 0.0);
    fprintf(stderr, "train-target: lr %g (%s, warmup %d), weight decay %g on %s, clip %g, betas 0.9 %g, eps %g, seed "
                    "%llu, %ld thread%s%s\n", a->lr, s->schedule == SCHEDULE_COSINE ? "cosine" : "constant", warmup,
            a->weight_decay, s->decay_on == TRAIN_DECAY_ALL ? "all tensors" : "matrices", a->max_grad_norm, a->beta2,
            a->adam_eps, (unsigned long long)a->seed, a->threads, a->threads > 1 ? "s" : "",
            first_step > 1 ? ", resumed" : "");
    if (tc->logf && a->resume) {   /* the run's log so far (a checkpoint's train.log), then this command */
        char *lp = path_join(a->resume, OUT_FILES[OF_LOG]), *text = NULL;
        size_t len = 0;
        struct stat lst;
        int have = lp && stat(lp, &lst) == 0;   /* a checkpoint written before it carried the log: none */
        int rrc = have ? file_read_all(lp, &text, &len) : 0;
        free(lp);
        if (rrc != 0) return -1;
        int arc = have ? tt_log(tc, "%.*s", (int)len, text) : 0;
        free(text);
        if (arc != 0 || tt_log(tc, "resumed after step %d: dflash", first_step - 1) != 0) return -1;
    } else if (tt_log(tc, "# dflash train-target log\ncommand dflash") != 0) {
        return -1;
    }
    for (int i = 0; i < tc->argc; i++) if (tt_log(tc, " %s", tc->argv[i]) != 0) return -1;
    if (tt_log(tc, "\n") != 0) return -1;
    tc->n_weights = n_weights;
    return 0;
}

/* the steps: progress, the log, checkpoints, SIGINT/SIGTERM and
 * --stop-after (1: stopped there, tc->rc the exit status) */
static int tt_loop(TtCmd *tc) {
    const TtArgs *a = &tc->a;
    Run *r = &tc->r;
    RunState *s = &r->rs;
    CkDir *ck = &tc->ck;
    const Corpus *train = &tc->train;
    int T = tc->T, b = tc->b, steps = tc->steps, warmup = tc->warmup, first_step = tc->first_step;
    TrainHyper hp;
    memset(&hp, 0, sizeof hp);
    hp.beta1 = 0.9, hp.beta2 = a->beta2, hp.eps = a->adam_eps, hp.weight_decay = a->weight_decay;
    hp.max_grad_norm = a->max_grad_norm, hp.decay_on = s->decay_on, hp.threads = (int)a->threads;

    ck_signals_catch(&tc->sig);
    tc->t_run = now_seconds(), tc->cpu_run = 0;   /* tc->cpu_run: processor seconds of this process's steps */
    tc->tokens_run = 0;
    tc->first_loss = NAN, tc->last_loss = NAN;
    for (int step = first_step; step <= steps; step++) {
        LmBatch lb;
        if (a->batches) {
            const CaseBatch *cb = &tc->cs.batch[step - 1];
            lb.b = cb->b, lb.T = cb->S, lb.input_ids = cb->ids, lb.loss_mask = cb->mask;
        } else {
            for (int q = 0; q < b; q++) {
                size_t w = order_next(&r->order);
                memcpy(tc->batch_ids + (size_t)q * T, train->ids + w * (size_t)(T - 1), sizeof(int) * (size_t)T);
            }
            lb.b = b, lb.T = T, lb.input_ids = tc->batch_ids, lb.loss_mask = NULL;
        }
        hp.lr = train_lr_at((Schedule)s->schedule, a->lr, warmup, steps, step);
        LmStats ls;
        memset(&ls, 0, sizeof ls);
        double t0 = now_seconds();
        clock_t c0 = clock();
        if (lm_step(&r->model, r->st, &lb, &hp, step, tc->tracer ? trace_hook(tc->tracer) : NULL, &ls) != 0) {
            char msg[sizeof dflash_errmsg];
            memcpy(msg, dflash_errmsg, sizeof msg);
            dflash_set_error("%s; stopped, nothing written (the last checkpoint, if any, is in %s)", msg, ck->dir);
            return -1;
        }
        double dt = now_seconds() - t0;
        double dcpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
        tc->cpu_run += dcpu;
        s->elapsed += dt;
        s->tokens += (long)lb.b * lb.T;
        tc->tokens_run += (long)lb.b * lb.T;
        s->step = step;
        s->adam_t = lm_optimizer_step(r->st);
        s->epoch = r->order.epoch, s->cursor = r->order.cursor, s->epoch_rng = r->order.epoch_rng;
        if (step == first_step) tc->first_loss = ls.loss;
        tc->last_loss = ls.loss;
        if (tc->logf) {   /* flushed each step: a long run's log can be followed in its partial file */
            if (tt_log(tc, "step %d loss %.6f lr %.6e grad_norm %.6f clip %.6f ms %.1f cpu_ms %.1f\n", step, ls.loss,
                       hp.lr, ls.grad_norm, ls.clip_coef, dt * 1e3, dcpu * 1e3) != 0)
                return -1;
            fflush(out_stream(tc->logf));
        }
        if (step == first_step || step == steps || step % a->log_every == 0) {
            double el = now_seconds() - tc->t_run, per = el / (step - first_step + 1);
            char e1[32], e2[32];
            fmt_duration(e1, sizeof e1, el);
            fmt_duration(e2, sizeof e2, per * (steps - step));
            fprintf(stderr, "step %d/%d  loss %.4f  lr %.3e  grad norm %.3f  %.0f tok/s  elapsed %s  ETA %s\n", step,
                    steps, ls.loss, hp.lr, ls.grad_norm, el > 0 ? (double)tc->tokens_run / el : 0.0, e1, e2);
        }
        int stop_now;
        if (train_checkpoint_due(step, steps, a->stop_after, a->checkpoint_every, &stop_now)) {
            if (write_checkpoint(r, ck, tc->logf ? (tc->log_text ? tc->log_text : "") : NULL, tc->log_len) != 0)
                return -1;
            fprintf(stderr, "checkpoint: step %d written to %s%s\n", step, ck->dir,
                    stop_now ? " (resume with --resume and the same flags)" : "");
        }
        if (stop_now) {
            if (tc->logf) { int lrc = out_commit(tc->logf); tc->logf = NULL; if (lrc != 0) return -1; }
            if (tc->tracer) { int trc = trace_close(tc->tracer); tc->tracer = NULL; if (trc != 0) return -1; }
            tc->rc = train_stopped(step);
            return 1;
        }
    }
    return 0;
}

/* the held-out evaluation, the folder, the summary */
static int tt_finish(TtCmd *tc) {
    const TtArgs *a = &tc->a;
    Run *r = &tc->r;
    const RunState *s = &r->rs;
    CkDir *od = &tc->od;
    const Corpus *held = &tc->held;
    int T = tc->T, b = tc->b, steps = tc->steps, first_step = tc->first_step;
    ck_signals_restore(&tc->sig);   /* from here a signal removes the partial output (cli/main.c) */

    /* the held-out evaluation, then the folder */
    if (a->n_heldout) {
        double lpt, bpb;
        long n;
        double t0 = now_seconds();
        if (evaluate(r, held, b > 0 ? b : 1, T > 2 ? T : 2, &lpt, &bpb, &n) != 0) return -1;
        fprintf(stderr, "heldout: %ld documents, %zu bytes, %ld predicted tokens: loss %.4f per token, %.4f bits per "
                        "byte (%.1f s)\n", held->documents, held->bytes, n, lpt, bpb, now_seconds() - t0);
        if (tt_log(tc, "heldout documents %ld bytes %zu tokens %ld loss %.6f bpb %.6f\n", held->documents, held->bytes,
                   n, lpt, bpb) != 0)
            return -1;
    }
    int bf16 = a->bf16;
    if (ckdir_begin(od, "--out") != 0 ||
        write_model_files(r, od, bf16 ? "BF16" : "F32", bf16 ? "bfloat16" : "float32") != 0)
        return -1;
    if (tc->tracer) { int trc = trace_close(tc->tracer); tc->tracer = NULL; if (trc != 0) return -1; }
    if (ckdir_commit(od, "--out") != 0) return -1;
    if (tc->logf) { int lrc = out_commit(tc->logf); tc->logf = NULL; if (lrc != 0) return -1; }
    char dur[32];
    fmt_duration(dur, sizeof dur, s->elapsed);
    /* achieved FLOP/s as llm.c counts them: 6 x the matmul weights per
     * token (forward 2, backward 4; an untied embedding is a lookup, not a
     * matmul; attention's scores and the elementwise ops not counted) */
    double mm = 0;
    for (int i = 0; i < r->n_params; i++)
        if (r->params[i].ndim == 2 && !(strcmp(r->params[i].key, "model.embed_tokens.weight") == 0 && !r->cfg.tie_word_embeddings))
            mm += (double)r->params[i].shape[0] * (double)r->params[i].shape[1];
    if (steps >= first_step)
        fprintf(stderr, "trained steps %d..%d: loss %.4f -> %.4f; %ld tokens in %s of steps (%.1f tokens/s, %.2f "
                        "GFLOP/s at 6 x %.0f matmul weights per token)\n", first_step, steps, tc->first_loss, tc->last_loss,
                s->tokens, dur, s->elapsed > 0 ? s->tokens / s->elapsed : 0.0,
                s->elapsed > 0 ? 6 * mm * (double)s->tokens / s->elapsed / 1e9 : 0.0, mm);
    if (steps >= first_step && tc->cpu_run > 0)
        fprintf(stderr, "this process's steps: %ld tokens, %.1f s, processor time %.1f s (all threads): %.2f GFLOP "
                        "per processor second\n", tc->tokens_run, now_seconds() - tc->t_run, tc->cpu_run,
                6 * mm * (double)tc->tokens_run / tc->cpu_run / 1e9);
    fprintf(stderr, "wrote %s: config.json, model.safetensors (%d tensors, %zu parameters, %s)%s, "
                    "generation_config.json\n", od->dir, r->n_params, tc->n_weights, bf16 ? "BF16" : "F32",
            r->tok_json ? ", tokenizer.json" : "");
    return 0;
}

static void tt_free(TtCmd *tc) {
    Run *r = &tc->r;
    ck_signals_restore(&tc->sig);
    if (tc->tracer) trace_discard(tc->tracer);
    out_abort(tc->logf);
    free(tc->log_text);
    ckdir_release(&tc->od);
    ckdir_release(&tc->ck);
    free(tc->batch_ids);
    free(r->order.order);
    free(r->params);
    free(r->m);
    free(r->v);
    free(r->tok_json);
    lm_state_free(r->st);
    if (r->have_model) model_free(&r->model);
    if (tc->have_tok) tok_free(&tc->tok);
    corpus_free(&tc->train);
    corpus_free(&tc->held);
    case_free(&tc->cs);
}

int train_target_main(int argc, char **argv) {
    TtCmd cmd;
    TtCmd *tc = &cmd;
    memset(tc, 0, sizeof *tc);
    int pa = tt_parse_args(argc, argv, &tc->a);
    if (pa == 1) { fputs(TT_USAGE[0], stdout); fputs(TT_USAGE[1], stdout); return 0; }
    if (pa < 0) { dflash_print_error("dflash train-target", ""); return 2; }
    tc->argc = argc, tc->argv = argv;
    ckdir_init(&tc->od);
    ckdir_init(&tc->ck);
    tc->r.a = &tc->a;
    tc->r.eot = -1;
    int ok = tt_paths(tc) == 0 && tt_load(tc) == 0 && tt_data(tc) == 0 && tt_state(tc) == 0 && tt_resume(tc) == 0 &&
             tt_open(tc) == 0;
    int lrc = ok ? tt_loop(tc) : -1;
    int rc = lrc == 1 ? tc->rc : lrc == 0 && tt_finish(tc) == 0 ? 0 : 2;
    if (rc == 2) dflash_print_error("dflash train-target", "");
    tt_free(tc);
    return rc;
}
