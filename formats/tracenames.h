/* formats/tracenames.h - the trace-name table, and the tensor a hand becomes.
 *
 * Defines (formats/tracenames.c):
 *   - dflash_trace_names: every name a run traces, with its symbolic shape,
 *     its kind (real, ids, per-head), its meaning and the C function of
 *     dflash.c that computes it. TRACE.md is generated from it (tools/mktrace).
 *   - trace_name_matches / dflash_trace_name: the matcher that finds a full
 *     name's row ("verify2.layers.3.self_attn.q" -> "P.layers.{l}.self_attn.q").
 *   - trace_eval_shape: a symbolic shape ("Hkv,Lc+B,d") with a call's sizes.
 *   - trace_shape_hand: what turns a TraceHand, as dflash.c hands it to the
 *     hook (dflash.h), into the TraceTensor of the contract: C order, the
 *     table's shape, ids as int64, (rows, heads*d) buffers as (heads, rows, d).
 *
 * dflash.c does not use this file: it hands out names and buffers only. The
 * hooks do: trace.c (the file tracer) and a port's own C harness. A harness
 * that takes tensors in-process links dflash.c and formats/tracenames.c (and formats/load.c,
 * formats/json.c, formats/files.c to load the weights; tests/test_hook.c is one), and calls
 * trace_shape_hand from its hook:
 *     static int my_hook(void *ctx, const TraceHand *h) { return trace_shape_hand(h, my_tensor, ctx); }
 */
#ifndef TRACENAMES_H
#define TRACENAMES_H

#include "dflash.h"

#include <stdint.h>

#define TRACE_MAX_DIMS 4

/* How a traced buffer is laid out in dflash.c (the trace itself is always
 * C order in the table's shape): */
typedef enum {
    TRACE_REAL,   /* real values, already in the shape's order                */
    TRACE_IDS,    /* int token ids / positions / flags, traced as int64       */
    TRACE_HEADS   /* real (rows, heads*d), traced as (heads, rows, d)         */
} TraceKind;

/* One row of the trace-name table. */
typedef struct {
    const char *pattern;   /* "P.layers.{l}.self_attn.q"; P = prefill | verify{r} */
    const char *shape;     /* symbolic, in dflash.h's legend: "H,T,d"; "" = 0-d */
    TraceKind kind;
    const char *meaning;
    const char *function;  /* the C function of dflash.c that computes it */
} TraceName;

extern const TraceName dflash_trace_names[];
extern const int dflash_n_trace_names;
/* A hybrid target's rows (Qwen3.5 text; TRACE.md "Hybrid targets"): looked up
 * first by dflash_trace_name_in when the sizes are a hybrid run's (rd > 0). */
extern const TraceName dflash_hybrid_trace_names[];
extern const int dflash_n_hybrid_trace_names;
/* The training step's rows (train/train.c; TRACE.md "Training"): names
 * "train{s}.*", shapes in b, S, N, B and the draft's sizes. */
extern const TraceName dflash_train_trace_names[];
extern const int dflash_n_train_trace_names;
/* The target training step's rows (train/train.c lm_step; TRACE.md "Training a
 * target"): names "train{s}.*" handed with sizes without blocks (N = B = 0). */
extern const TraceName dflash_lm_trace_names[];
extern const int dflash_n_lm_trace_names;

/* The last parts of the table's names, for code outside the tracer that
 * finds a tensor by name (the explorer, dflash diff, the figures, the page
 * generators): the rows of formats/tracenames.c are spelled with them, so a
 * name looked up as "draft%d.layers.%d." TN_ATTN_WEIGHTS is the table's. */
#define TN_SELF_ATTN        "self_attn."   /* every per-head tensor of a layer starts so */
#define TN_Q                TN_SELF_ATTN "q"
#define TN_K                TN_SELF_ATTN "k"
#define TN_V                TN_SELF_ATTN "v"
#define TN_Q_ROPE           TN_SELF_ATTN "q_rope"
#define TN_K_ROPE           TN_SELF_ATTN "k_rope"
#define TN_ATTN_SCORES      TN_SELF_ATTN "attn_scores"
#define TN_ATTN_WEIGHTS     TN_SELF_ATTN "attn_weights"
#define TN_INPUT_IDS        "input_ids"
#define TN_POSITION_IDS     "position_ids"
#define TN_ROPE_ANGLES      "rope_angles"
#define TN_LOGITS           "logits"
#define TN_SAMPLED          "sampled"
#define TN_MATCH            "match"
#define TN_CUMPROD          "cumprod"
#define TN_ACCEPTANCE       "acceptance_length"
#define TN_BLOCK_OUTPUT_IDS "block_output_ids"
#define TN_TARGET_HIDDEN    "target_hidden"
#define TN_TARGET_HIDDEN_RAW "target_hidden_raw"
#define TN_OUTPUT_IDS       "output_ids"

/* Does a full trace name match a table pattern? "P." matches "prefill." and
 * "verify<r>."; {l}, {r} match a decimal number; {L} only the number
 * num_layers, {i} only 1..num_layers-1 (so every name matches one row). */
int trace_name_matches(const char *pattern, const char *name, int num_layers);
/* The table row a full trace name belongs to (NULL: none). num_layers is the
 * target's L (hidden_states.{L} is the post-norm entry). */
const TraceName *dflash_trace_name(const char *name, int num_layers);
/* The same for a hand's sizes: a "train{s}." name with N = B = 0 (a target's
 * training step: no blocks) is looked up in the target training rows, any
 * other as dflash_trace_name. */
const TraceName *dflash_trace_name_in(const TraceDims *dims, const char *name, int num_layers);
/* A symbolic shape ("Hkv,Lc+B,d", "B-1", "" for a 0-d tensor) with the
 * sizes dm: each axis is symbols joined by + - * / (* and / first). Returns
 * the number of axes (written to out), or -1 when the shape cannot be read. */
int trace_eval_shape(const char *shape, const TraceDims *dm, int64_t out[TRACE_MAX_DIMS]);

/* One tensor as the contract has it (TRACE.md, "The hook: a C API").
 * data is valid only during the call that hands it over: copy what you keep. */
typedef struct {
    const char *name;      /* "draft1.layers.0.self_attn.q" */
    TracePhase ph;
    int is_int;            /* 1: data is int64_t; 0: real */
    const void *data;      /* C order, `shape` */
    int ndim;              /* 0 = a scalar */
    int64_t shape[TRACE_MAX_DIMS];
    const TraceName *spec; /* its row of the table */
    int elem_size;         /* bytes per value of data, as the library was built:
                              8 for ids (int64_t); sizeof(real) for reals, 4 in the
                              float build, 8 in the double build. A receiver checks
                              it against its own element type before reading data. */
} TraceTensor;

/* Look the hand's name up, give its buffer the row's shape, convert it
 * (ids to int64, per-head buffers transposed) and call fn(ctx, &tensor).
 * Returns fn's result, or -1 with dflash_errmsg (a name not in the table, a
 * shape that cannot be sized, out of memory). */
int trace_shape_hand(const TraceHand *hand, int (*fn)(void *ctx, const TraceTensor *t), void *ctx);

#endif /* TRACENAMES_H */
