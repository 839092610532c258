/* formats/tracenames.c - the trace-name table, its matcher and shape evaluator, and
 * trace_shape_hand, which turns what dflash.c hands to the trace hook into the
 * tensor of the trace contract (formats/tracenames.h says what each one is).
 *
 * dflash.c names each tensor it traces and hands over its buffer as it lays
 * it out (TRACE(trace, a->q, "layers.%d.self_attn.q", l)); everything else
 * about the tensor is written here, once: its shape in the legend of
 * dflash.h, how its buffer is laid out, what it means and which function
 * computes it. The file tracer (trace.c), `dflash diff`'s hints, TRACE.md
 * (tools/mktrace.c) and a port's harness all read this one table.
 */
#include "formats/tracenames.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ===========================================================================
 * The matcher and the shape evaluator
 * ======================================================================== */

int trace_name_matches(const char *pattern, const char *name, int L) {
    if (strncmp(pattern, "P.", 2) == 0) {
        if (strncmp(name, "prefill.", 8) == 0) {
            name += 8;
        } else if (strncmp(name, "verify", 6) == 0 && name[6] >= '0' && name[6] <= '9') {
            name += 6;
            while (*name >= '0' && *name <= '9') name++;
            if (*name++ != '.') return 0;
        } else {
            return 0;
        }
        pattern += 2;
    }
    while (*pattern) {
        if (*pattern == '{') {
            if (*name < '0' || *name > '9') return 0;
            char *end;
            long v = strtol(name, &end, 10);
            if (pattern[1] == 'L' && v != L) return 0;
            if (pattern[1] == 'i' && (v < 1 || v >= L)) return 0;
            name = end;
            pattern = strchr(pattern, '}') + 1;
        } else if (*pattern++ != *name++) {
            return 0;
        }
    }
    return *name == 0;
}

const TraceName *dflash_trace_name_in(const TraceDims *dims, const char *name, int num_layers) {
    if (dims && dims->N == 0 && dims->B == 0 && strncmp(name, "train", 5) == 0) {
        for (int i = 0; i < dflash_n_lm_trace_names; i++)
            if (trace_name_matches(dflash_lm_trace_names[i].pattern, name, num_layers)) return &dflash_lm_trace_names[i];
        return NULL;
    }
    if (dims && dims->rd > 0)  /* a hybrid target's run: its own rows first */
        for (int i = 0; i < dflash_n_hybrid_trace_names; i++)
            if (trace_name_matches(dflash_hybrid_trace_names[i].pattern, name, num_layers))
                return &dflash_hybrid_trace_names[i];
    return dflash_trace_name(name, num_layers);
}

const TraceName *dflash_trace_name(const char *name, int num_layers) {
    if (strncmp(name, "train", 5) == 0 && name[5] >= '0' && name[5] <= '9') {
        for (int i = 0; i < dflash_n_train_trace_names; i++)
            if (trace_name_matches(dflash_train_trace_names[i].pattern, name, num_layers))
                return &dflash_train_trace_names[i];
        return NULL;
    }
    for (int i = 0; i < dflash_n_trace_names; i++)
        if (trace_name_matches(dflash_trace_names[i].pattern, name, num_layers)) return &dflash_trace_names[i];
    return NULL;
}

/* The value of one symbol of a shape ("Lc", "d", "4") */
static long dim_value(const char *sym, size_t len, const TraceDims *dm) {
    static const struct { const char *sym; size_t off; } DIMS[] = {
        {"n", offsetof(TraceDims, n)}, {"m", offsetof(TraceDims, m)}, {"T", offsetof(TraceDims, T)},
        {"S", offsetof(TraceDims, S)}, {"B", offsetof(TraceDims, B)}, {"Lc", offsetof(TraceDims, Lc)},
        {"V", offsetof(TraceDims, V)}, {"D", offsetof(TraceDims, D)}, {"I", offsetof(TraceDims, I)},
        {"H", offsetof(TraceDims, H)}, {"Hkv", offsetof(TraceDims, Hkv)}, {"d", offsetof(TraceDims, d)},
        {"k", offsetof(TraceDims, k)}, {"L", offsetof(TraceDims, L)}, {"b", offsetof(TraceDims, b)},
        {"N", offsetof(TraceDims, N)},
        {"rd", offsetof(TraceDims, rd)}, {"Hk", offsetof(TraceDims, Hk)}, {"dk", offsetof(TraceDims, dk)},
        {"Hv", offsetof(TraceDims, Hv)}, {"dv", offsetof(TraceDims, dv)}, {"C", offsetof(TraceDims, C)},
        {"K", offsetof(TraceDims, K)},
    };
    if (sym[0] >= '0' && sym[0] <= '9') return strtol(sym, NULL, 10);
    for (size_t i = 0; i < sizeof DIMS / sizeof DIMS[0]; i++)
        if (strlen(DIMS[i].sym) == len && strncmp(DIMS[i].sym, sym, len) == 0)
            return *(const int *)((const char *)dm + DIMS[i].off);
    return -1;
}

int trace_eval_shape(const char *shape, const TraceDims *dm, int64_t out[TRACE_MAX_DIMS]) {
    int ndim = 0;
    for (const char *s = shape; *s; ndim++) {
        if (ndim == TRACE_MAX_DIMS) return -1;
        /* one axis: terms joined by + and -, each symbols joined by * and / */
        long axis = 0, term = 1;
        char add = '+', mul = '*';
        for (;;) {
            size_t len = strcspn(s, ",+-*/");
            long v = dim_value(s, len, dm);
            if (v < 0 || (mul == '/' && v == 0)) return -1;
            term = mul == '*' ? term * v : term / v;
            s += len;
            if (*s == '*' || *s == '/') {
                mul = *s++;
                continue;
            }
            axis = add == '+' ? axis + term : axis - term;
            term = 1, mul = '*';
            if (*s != '+' && *s != '-') break;
            add = *s++;
        }
        out[ndim] = axis;
        if (*s == ',') s++;
    }
    return ndim;
}

/* ===========================================================================
 * From a hand to a tensor
 * ======================================================================== */

/* Look the name up, give the buffer its shape, and convert it to what the
 * table promises: int ids become int64; a (rows, heads*d) buffer becomes
 * (heads, rows, d), the reference's q.transpose(1, 2) layout. */
int trace_shape_hand(const TraceHand *hand, int (*fn)(void *ctx, const TraceTensor *t), void *ctx) {
    const char *name = hand->name;
    const void *buffer = hand->buffer;
    const TraceName *spec = dflash_trace_name_in(hand->dims, name, hand->dims->L);
    if (!spec) {
        dflash_set_error("trace: %s is not in the trace-name table (formats/tracenames.c)", name);
        return -1;
    }
    TraceTensor x = {name, hand->ph, spec->kind == TRACE_IDS, buffer, 0, {0}, spec,
                     spec->kind == TRACE_IDS ? (int)sizeof(int64_t) : (int)sizeof(real)};
    x.ndim = trace_eval_shape(spec->shape, hand->dims, x.shape);
    int64_t count = 1;
    for (int i = 0; i < x.ndim; i++) count *= x.shape[i];
    if (x.ndim < 0 || count < 0) {
        dflash_set_error("trace: %s: cannot size the shape [%s]", name, spec->shape);
        return -1;
    }
    void *copy = NULL;
    if (spec->kind == TRACE_IDS) {
        int64_t *ids = malloc(sizeof(int64_t) * (size_t)(count ? count : 1));
        if (ids)
            for (int64_t i = 0; i < count; i++) ids[i] = ((const int *)buffer)[i];
        x.data = copy = ids;
    } else if (spec->kind == TRACE_HEADS) {
        int64_t heads = x.shape[0], rows = x.shape[1], hd = x.shape[2];
        real *t = malloc(sizeof(real) * (size_t)(count ? count : 1));
        if (t)
            for (int64_t h = 0; h < heads; h++)
                for (int64_t row = 0; row < rows; row++)
                    memcpy(t + (h * rows + row) * hd, (const real *)buffer + (row * heads + h) * hd,
                           sizeof(real) * hd);
        x.data = copy = t;
    }
    if (spec->kind != TRACE_REAL && !copy) {
        dflash_set_error("out of memory tracing %s", name);
        return -1;
    }
    int rc = fn(ctx, &x);
    free(copy);
    return rc;
}

/* ===========================================================================
 * The table
 * ======================================================================== */

/* Every name the run traces, in the order the run computes them. P is
 * "prefill" or "verify{r}" (the target's two kinds of call), r counts rounds
 * from 1, l is a layer, i an index. Shapes use the legend of dflash.h and drop
 * the batch axis: T tokens in the call, S keys after appending, Lc context rows.
 * The same table gives trace.jsonl its "meaning" and TRACE.md its rows. */
#define R TRACE_REAL
#define IDS TRACE_IDS
#define HEADS TRACE_HEADS
const TraceName dflash_trace_names[] = {
    /* Step 1: the prompt, then the target's prefill; every verification
     * (verify{r}, Step 6) is the same target forward over the block */
    {TN_INPUT_IDS, "n", IDS, "prompt ids", "dflash_generate"},
    {"P." TN_INPUT_IDS, "T", IDS, "token ids fed to the target", "target_forward"},
    {"P." TN_POSITION_IDS, "T", IDS, "positions of those tokens (RoPE and the KV cache slots)", "target_forward"},
    {"P." TN_ROPE_ANGLES, "T,d/2", R, "RoPE angles = position * inv_freq", "rope_cos_sin"},
    {"P.cos", "T,d", R, "cos(cat(angles, angles))", "rope_cos_sin"},
    {"P.sin", "T,d", R, "sin(cat(angles, angles))", "rope_cos_sin"},
    {"P.hidden_states.0", "T,D", R, "hidden_states[0]: embedding output", "target_forward"},
    {"P.layers.{l}.input_layernorm", "T,D", R, "X = input_layernorm(h): the layer's normed input",
     "target_forward"},
    {"P.layers.{l}." TN_Q, "H,T,d", HEADS, "q = q_norm(q_proj(X)) per head, before RoPE", "target_forward"},
    {"P.layers.{l}." TN_K, "Hkv,T,d", HEADS, "k = k_norm(k_proj(X)) per KV head, before RoPE: the new rows only",
     "target_forward"},
    {"P.layers.{l}." TN_V, "Hkv,T,d", HEADS, "v = v_proj(X): the new rows only", "target_forward"},
    {"P.layers.{l}." TN_Q_ROPE, "H,T,d", HEADS, "q after RoPE at the tokens' positions", "apply_rotary_pos_emb"},
    {"P.layers.{l}." TN_K_ROPE, "Hkv,T,d", HEADS, "k after RoPE: what the KV cache stores",
     "apply_rotary_pos_emb"},
    {"P.layers.{l}." TN_ATTN_SCORES, "H,T,S", R,
     "q'.k'/sqrt(d) over every cached and new key, before the causal mask and the softmax", "attention"},
    {"P.layers.{l}." TN_ATTN_WEIGHTS, "H,T,S", R,
     "target causal attention weights softmax(q.k/sqrt(d)) over the cache", "attention"},
    {"P.layers.{l}.self_attn.attn_output", "T,D", R, "o_proj(attention output, heads side by side)",
     "target_forward"},
    {"P.layers.{l}.post_attention_layernorm", "T,D", R, "post_attention_layernorm(h + attn_output): the MLP's input",
     "mlp_block"},
    {"P.layers.{l}.mlp.gate_proj", "T,I", R, "gate_proj(x)", "mlp_block"},
    {"P.layers.{l}.mlp.up_proj", "T,I", R, "up_proj(x)", "mlp_block"},
    {"P.layers.{l}.mlp.act", "T,I", R, "silu(gate_proj(x)) * up_proj(x)", "mlp_block"},
    {"P.layers.{l}.mlp.down_proj", "T,D", R, "down_proj(act): added to the residual stream", "mlp_block"},
    {"P.hidden_states.{L}", "T,D", R, "hidden_states[L]: AFTER the final model.norm (transformers semantics)",
     "target_forward"},
    {"P.hidden_states.{i}", "T,D", R, "hidden_states[i]: output of decoder layer i-1", "target_forward"},
    {"prefill." TN_LOGITS, "1,V", R, "target logits of the last prompt position (logits_to_keep=1)", "target_forward"},
    {"prefill." TN_SAMPLED, "1", IDS, "the first new token, sampled at prefill", "sample_row"},
    {"prefill." TN_TARGET_HIDDEN, "n,k*D", R,
     "extract_context_feature: [hidden_states[id+1] for id in target_layer_ids]", "extract_context_feature"},
    /* Steps 2-5: the draft */
    {"draft{r}." TN_TARGET_HIDDEN_RAW, "Lc,k*D", R,
     "target_hidden_raw = [h3; h7; h11] per position: the context handed in", "draft_forward"},
    {"draft{r}.fc", "Lc,D", R, "W_fc . target_hidden_raw: k*D features projected back to D", "draft_forward"},
    {"draft{r}.hidden_norm", "Lc,D", R,
     "C = RMSNorm(W_fc . target_hidden_raw): target context injected into every draft layer", "draft_forward"},
    {"draft{r}." TN_BLOCK_OUTPUT_IDS, "B", IDS, "the block entering the draft: anchor + B-1 mask ids", "draft_forward"},
    {"draft{r}.noise_embedding", "B,D", R, "embed_tokens(block): the block's own input (noise embedding)",
     "draft_forward"},
    {"draft{r}." TN_POSITION_IDS, "Lc+B", IDS, "position_ids = [cache_len, start+B): keys use all, queries the last B",
     "draft_forward"},
    {"draft{r}." TN_ROPE_ANGLES, "Lc+B,d/2", R, "RoPE angles theta = position * inv_freq", "rope_cos_sin"},
    {"draft{r}.cos", "Lc+B,d", R, "cos(cat(angles, angles))", "rope_cos_sin"},
    {"draft{r}.sin", "Lc+B,d", R, "sin(cat(angles, angles))", "rope_cos_sin"},
    {"draft{r}.layers.{l}.input_layernorm", "B,D", R, "X = input_layernorm(h): the block's normed input",
     "draft_layer"},
    {"draft{r}.layers.{l}." TN_Q, "H,B,d", HEADS, "Q = QNorm(X W_Q): queries from the block only, before RoPE",
     "draft_layer"},
    {"draft{r}.layers.{l}." TN_K, "Hkv,Lc+B,d", HEADS,
     "K = KNorm(concat[C W_K, X W_K]): context keys then block keys, before RoPE (the new rows only)",
     "draft_layer"},
    {"draft{r}.layers.{l}." TN_V, "Hkv,Lc+B,d", HEADS,
     "V = concat[C W_V, X W_V]: context values then block values (the new rows only)", "draft_layer"},
    {"draft{r}.layers.{l}." TN_Q_ROPE, "H,B,d", HEADS, "Q after RoPE at the block positions (cos[-q_len:])",
     "apply_rotary_pos_emb"},
    {"draft{r}.layers.{l}." TN_K_ROPE, "Hkv,Lc+B,d", HEADS, "K after RoPE at all context + block positions",
     "apply_rotary_pos_emb"},
    {"draft{r}.layers.{l}." TN_ATTN_SCORES, "H,B,S", R,
     "scores = q'.k'/sqrt(d) before the softmax: block queries over the whole draft cache", "attention"},
    {"draft{r}.layers.{l}." TN_ATTN_WEIGHTS, "H,B,S", R,
     "A = softmax(q'.k'/sqrt(d)): block queries over context (KV injection) + block keys, non-causal",
     "attention"},
    {"draft{r}.layers.{l}.self_attn.attn_output", "B,D", R, "Attn_out = concat(heads) W_O: only the block's B rows",
     "draft_layer"},
    {"draft{r}.layers.{l}.post_attention_layernorm", "B,D", R,
     "post_attention_layernorm(h + attn_output): the MLP's input", "mlp_block"},
    {"draft{r}.layers.{l}.mlp.gate_proj", "B,I", R, "gate_proj(x)", "mlp_block"},
    {"draft{r}.layers.{l}.mlp.up_proj", "B,I", R, "up_proj(x)", "mlp_block"},
    {"draft{r}.layers.{l}.mlp.act", "B,I", R, "silu(gate_proj(x)) * up_proj(x)", "mlp_block"},
    {"draft{r}.layers.{l}.mlp.down_proj", "B,D", R, "down_proj(act): added to the residual stream", "mlp_block"},
    {"draft{r}.layers.{l}", "B,D", R, "draft decoder layer output (the block's hidden states)", "draft_layer"},
    {"draft{r}.norm", "B,D", R, "final draft norm of the block's B positions", "draft_forward"},
    {"draft{r}." TN_LOGITS, "B-1,V", R, "draft logits = target.lm_head(out[1:]): one row per masked position",
     "draft_forward"},
    {"draft{r}." TN_SAMPLED, "B-1", IDS, "the draft's proposal: argmax of each row (the draft is always greedy)",
     "dflash_generate"},
    /* Steps 6-7: verification (the target rows above, then these) and the update */
    {"verify{r}." TN_LOGITS, "B,V", R, "target logits at every block position", "target_forward"},
    {"verify{r}." TN_SAMPLED, "B", IDS, "posterior = sample(target logits): the target's own next token at each position",
     "sample_row"},
    {"verify{r}." TN_MATCH, "B-1", IDS, "match = block[1:] == posterior[:-1]", "acceptance_length"},
    {"verify{r}." TN_CUMPROD, "B-1", IDS, "cumprod(match): 1 until the first mismatch", "acceptance_length"},
    {"verify{r}." TN_ACCEPTANCE, "", IDS, "acceptance_length = sum(cumprod): draft tokens accepted",
     "acceptance_length"},
    {"verify{r}." TN_TARGET_HIDDEN, "B,k*D", R,
     "extract_context_feature of the block: all B rows; the next round reads rows 0..acc",
     "extract_context_feature"},
    {TN_OUTPUT_IDS, "m", IDS, "final output ids: prompt + new tokens", "dflash_generate"},
    {"acceptance_per_position", "B-1", R,
     "for i = 1..B-1: the fraction of the run's rounds in which proposal i was accepted (cumprod[i-1] = 1); "
     "written by the tracer from the rounds (no rounds: not written)",
     "trace_acceptance (trace.c)"},
};
#undef R
#undef IDS
#undef HEADS
const int dflash_n_trace_names = (int)(sizeof dflash_trace_names / sizeof dflash_trace_names[0]);

/* ---- A hybrid target (Qwen3.5 text: dflash.c section 3b): the rows that
 * differ from the dense target's or are new. A run with a hybrid target
 * (TraceDims.rd > 0) looks a name up here first, then in the table above. */
const TraceName dflash_hybrid_trace_names[] = {
    {"P.rope_angles", "T,rd/2", TRACE_REAL, "RoPE angles = position * inv_freq over the rd = int(d * partial_rotary_factor) "
     "rotary dims", "rope_cos_sin"},
    {"P.cos", "T,rd", TRACE_REAL, "cos(cat(angles, angles)): only the first rd dims of a head rotate", "rope_cos_sin"},
    {"P.sin", "T,rd", TRACE_REAL, "sin(cat(angles, angles))", "rope_cos_sin"},
    {"P.layers.{l}.self_attn.gate", "T,H*d", TRACE_REAL,
     "the gate half of q_proj (per head: query d, then gate d), heads side by side, before the sigmoid",
     "gated_attention"},
    {"P.layers.{l}.self_attn.q", "H,T,d", TRACE_HEADS, "q = q_norm(query half of q_proj(X)), zero-centred, before RoPE",
     "gated_attention"},
    {"P.layers.{l}.self_attn.attn_output", "T,D", TRACE_REAL, "o_proj(attention output * sigmoid(gate))", "gated_attention"},
    {"P.layers.{l}.linear_attn.in_proj_qkv", "T,C", TRACE_REAL, "in_proj_qkv(X): the conv's input rows (q | k | v channels)",
     "gated_deltanet"},
    {"P.layers.{l}.linear_attn.in_proj_z", "T,Hv*dv", TRACE_REAL, "in_proj_z(X): the output gate", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.in_proj_b", "T,Hv", TRACE_REAL, "in_proj_b(X): beta before the sigmoid", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.in_proj_a", "T,Hv", TRACE_REAL, "in_proj_a(X): the decay's input", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.conv_state_in", "K-1,C", TRACE_REAL,
     "the conv rows the cache held before the call (zeros at the prefill)", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.state_in", "Hv,dk,dv", TRACE_REAL,
     "the recurrent state before the call (zeros at the prefill)", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.conv_in", "K-1+T,C", TRACE_REAL, "conv_state_in rows, then the T in_proj_qkv rows",
     "gated_deltanet"},
    {"P.layers.{l}.linear_attn.conv_out", "T,C", TRACE_REAL, "silu(depthwise causal conv of conv_in), kernel K",
     "gated_deltanet"},
    {"P.layers.{l}.linear_attn.q", "T,Hk,dk", TRACE_REAL, "query split of conv_out, l2-normalised (not yet scaled)",
     "gated_deltanet"},
    {"P.layers.{l}.linear_attn.k", "T,Hk,dk", TRACE_REAL, "key split of conv_out, l2-normalised", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.v", "T,Hv,dv", TRACE_REAL, "value split of conv_out", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.g", "T,Hv", TRACE_REAL, "g = -exp(A_log) * softplus(a + dt_bias): the log decay",
     "gated_deltanet"},
    {"P.layers.{l}.linear_attn.beta", "T,Hv", TRACE_REAL, "beta = sigmoid(b): the write strength", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.core_out", "T,Hv,dv", TRACE_REAL, "the gated delta rule's output (recurrent form)",
     "gated_delta_rule"},
    {"P.layers.{l}.linear_attn.state_out", "Hv,dk,dv", TRACE_REAL, "the recurrent state after the call", "gated_delta_rule"},
    {"P.layers.{l}.linear_attn.conv_state_out", "K-1,C", TRACE_REAL, "the last K-1 rows of conv_in", "gated_deltanet"},
    {"P.layers.{l}.linear_attn.norm_out", "T,Hv*dv", TRACE_REAL, "gated RMSNorm w * norm(core_out) * silu(z), per value head",
     "rmsnorm_gated"},
    {"P.layers.{l}.linear_attn.out_proj", "T,D", TRACE_REAL, "out_proj(norm_out): the layer's mixer output",
     "gated_deltanet"},
    {"verify{r}.rollback.layers.{l}.state", "Hv,dk,dv", TRACE_REAL,
     "after the crop: the state after the accepted acceptance_length+1 tokens of the block (a replay from state_in)",
     "cache_rollback_linear"},
    {"verify{r}.rollback.layers.{l}.conv_state", "K-1,C", TRACE_REAL,
     "after the crop: conv_in[m : m+K-1], m = acceptance_length+1", "cache_rollback_linear"},
};
const int dflash_n_hybrid_trace_names = (int)(sizeof dflash_hybrid_trace_names / sizeof dflash_hybrid_trace_names[0]);

/* ---- Training (train/train.c, `dflash train --trace`): every name a traced
 * training step emits, in the order it computes them: s is the step (from
 * 1), l a draft layer; the functions are train/train.c's. Shapes keep the batch axis:
 * b sequences of S tokens, N blocks of B per sequence (train/train.h). */
#define R TRACE_REAL
#define IDS TRACE_IDS
#define GRAD_PARAM(which, when)                                                                              \
    {"train{s}." which ".fc.weight", "D,k*D", R, "fc.weight " when, "train_step"},                            \
    {"train{s}." which ".hidden_norm.weight", "D", R, "hidden_norm.weight " when, "train_step"},              \
    {"train{s}." which ".layers.{l}.input_layernorm.weight", "D", R, "input_layernorm.weight " when,         \
     "train_step"},                                                                                          \
    {"train{s}." which ".layers.{l}.self_attn.q_proj.weight", "H*d,D", R, "q_proj.weight " when, "train_step"}, \
    {"train{s}." which ".layers.{l}.self_attn.k_proj.weight", "Hkv*d,D", R, "k_proj.weight " when,           \
     "train_step"},                                                                                          \
    {"train{s}." which ".layers.{l}.self_attn.v_proj.weight", "Hkv*d,D", R, "v_proj.weight " when,           \
     "train_step"},                                                                                          \
    {"train{s}." which ".layers.{l}.self_attn.q_norm.weight", "d", R, "q_norm.weight " when, "train_step"},   \
    {"train{s}." which ".layers.{l}.self_attn.k_norm.weight", "d", R, "k_norm.weight " when, "train_step"},   \
    {"train{s}." which ".layers.{l}.self_attn.o_proj.weight", "D,H*d", R, "o_proj.weight " when, "train_step"}, \
    {"train{s}." which ".layers.{l}.post_attention_layernorm.weight", "D", R,                                \
     "post_attention_layernorm.weight " when, "train_step"},                                                 \
    {"train{s}." which ".layers.{l}.mlp.gate_proj.weight", "I,D", R, "gate_proj.weight " when, "train_step"}, \
    {"train{s}." which ".layers.{l}.mlp.up_proj.weight", "I,D", R, "up_proj.weight " when, "train_step"},     \
    {"train{s}." which ".layers.{l}.mlp.down_proj.weight", "D,I", R, "down_proj.weight " when, "train_step"}, \
    {"train{s}." which ".norm.weight", "D", R, "norm.weight " when, "train_step"}
const TraceName dflash_train_trace_names[] = {
    /* the batch */
    {"train{s}.input_ids", "b,S", IDS, "the batch's token sequences", "train_step"},
    {"train{s}.loss_mask", "b,S", IDS, "1: the position is trained on (a label may come from it)", "train_step"},
    {"train{s}.anchors", "b,N", IDS, "block n starts at anchors[n] (sorted; 0 where keep is 0)", "train_step"},
    {"train{s}.keep", "b,N", IDS, "0: the block is all mask ids, sees nothing and carries no loss", "train_step"},
    /* the frozen target, once over each whole sequence */
    {"train{s}.target_hidden", "b,S,k*D", R,
     "extract_context_feature of the target's hidden states: the context at positions 0..S-1",
     "extract_context_feature"},
    /* the blocks */
    {"train{s}.noise_ids", "b,N*B", IDS,
     "block n = [input_ids[anchors[n]], B-1 mask ids]; all mask ids when keep is 0", "batch_setup"},
    {"train{s}.position_ids", "b,S+N*B", IDS, "0..S-1 for the context, anchors[n] + 0..B-1 for block n",
     "batch_setup"},
    {"train{s}.attn_mask", "b,N*B,S+N*B", IDS,
     "1: a query of block n sees the key: context j < anchors[n] and its own block; nothing when keep is 0",
     "block_mask"},
    {"train{s}.attn_mask_sliding", "b,N*B,S+N*B", IDS,
     "the sliding_attention layers' mask (a draft with such layers): attn_mask's context keys j >= anchors[n] + k "
     "- (sliding_window - 1) only (k: the query's block offset), its own block's offsets <= k only",
     "block_mask"},
    /* the draft */
    {"train{s}.fc", "b,S,D", R, "fc(target_hidden)", "forward_backward"},
    {"train{s}.hidden_norm", "b,S,D", R, "C = hidden_norm(fc(target_hidden)): the context every layer injects",
     "forward_backward"},
    {"train{s}.layers.{l}", "b,N*B,D", R, "draft decoder layer l's output at every block row", "layer_forward"},
    {"train{s}.norm", "b,N*B,D", R, "the draft's final norm", "forward_backward"},
    {"train{s}.logits", "b,N*B,V", R, "target.lm_head(norm) at every block row (the frozen lm_head)",
     "forward_backward"},
    /* the loss */
    {"train{s}.labels", "b,N,B", IDS, "row k of block n predicts input_ids[anchors[n] + k] (clamped to S-1)",
     "batch_setup"},
    {"train{s}.loss_weights", "b,N,B", R,
     "keep x (anchors[n]+k < S) x (k > 0) x loss_mask[anchors[n]+k] x exp(-(k-1)/gamma)", "batch_setup"},
    {"train{s}.ce", "b,N,B", R, "cross-entropy of each row's logits against its label", "cross_entropy"},
    {"train{s}.loss", "", R, "sum(loss_weights x ce) / (sum(loss_weights) + 1e-6)", "forward_backward"},
    {"train{s}.accuracy", "", R,
     "argmax == label where the weight before the decay is > 0.5, over their count + 1e-6", "forward_backward"},
    /* the backward pass and the update */
    GRAD_PARAM("grad", "gradient (before clipping)"),
    {"train{s}.grad_norm", "", R, "global L2 norm of every gradient, before clipping", "forward_backward"},
    GRAD_PARAM("param", "after the AdamW step"),
};
#undef GRAD_PARAM
#undef R
#undef IDS
const int dflash_n_train_trace_names = (int)(sizeof dflash_train_trace_names / sizeof dflash_train_trace_names[0]);

/* ---- Training a target (train/train.c's lm_step, `dflash train-target --trace`):
 * the names lm_oracle.py writes, then what a porter of the optimizer needs
 * (lr, the clip coefficient, the clipped gradients, AdamW's m and v). s is
 * the step (from 1), i a hidden-state index 0..L (L: after the final norm),
 * l a layer. Shapes in b sequences of S tokens and the target's sizes. The
 * hand's phase is "train", as the draft's; its sizes have no blocks (N = B =
 * 0), which is how the lookup tells these rows from the draft's (some names
 * are shared, with other shapes). */
#define R TRACE_REAL
#define IDS TRACE_IDS
#define LM_PARAM(which, when)                                                                                   \
    {"train{s}." which ".model.embed_tokens.weight", "V,D", R, "model.embed_tokens.weight " when, "lm_step"},     \
    {"train{s}." which ".model.layers.{l}.self_attn.q_proj.weight", "H*d,D", R, "q_proj.weight " when, "lm_step"}, \
    {"train{s}." which ".model.layers.{l}.self_attn.k_proj.weight", "Hkv*d,D", R, "k_proj.weight " when,         \
     "lm_step"},                                                                                                 \
    {"train{s}." which ".model.layers.{l}.self_attn.v_proj.weight", "Hkv*d,D", R, "v_proj.weight " when,         \
     "lm_step"},                                                                                                 \
    {"train{s}." which ".model.layers.{l}.self_attn.o_proj.weight", "D,H*d", R, "o_proj.weight " when, "lm_step"}, \
    {"train{s}." which ".model.layers.{l}.self_attn.q_norm.weight", "d", R, "q_norm.weight (Qwen3) " when,       \
     "lm_step"},                                                                                                 \
    {"train{s}." which ".model.layers.{l}.self_attn.k_norm.weight", "d", R, "k_norm.weight (Qwen3) " when,       \
     "lm_step"},                                                                                                 \
    {"train{s}." which ".model.layers.{l}.mlp.gate_proj.weight", "I,D", R, "gate_proj.weight " when, "lm_step"},  \
    {"train{s}." which ".model.layers.{l}.mlp.up_proj.weight", "I,D", R, "up_proj.weight " when, "lm_step"},      \
    {"train{s}." which ".model.layers.{l}.mlp.down_proj.weight", "D,I", R, "down_proj.weight " when, "lm_step"},  \
    {"train{s}." which ".model.layers.{l}.input_layernorm.weight", "D", R, "input_layernorm.weight " when,       \
     "lm_step"},                                                                                                 \
    {"train{s}." which ".model.layers.{l}.post_attention_layernorm.weight", "D", R,                              \
     "post_attention_layernorm.weight " when, "lm_step"},                                                        \
    {"train{s}." which ".model.norm.weight", "D", R, "model.norm.weight " when, "lm_step"},                       \
    {"train{s}." which ".lm_head.weight", "V,D", R, "lm_head.weight (untied only) " when, "lm_step"}
const TraceName dflash_lm_trace_names[] = {
    {"train{s}.input_ids", "b,S", IDS, "the batch's token sequences", "lm_forward_backward"},
    {"train{s}.loss_mask", "b,S", IDS, "1: the label at this position counts (it is predicted from position - 1)",
     "lm_forward_backward"},
    {"train{s}.hidden_states.{l}", "b,S,D", R,
     "0: embed_tokens(input_ids); i: decoder layer i-1's output; L: the final norm's (output_hidden_states)",
     "lm_forward_backward"},
    {"train{s}.logits", "b,S,V", R, "lm_head(hidden_states.L) at every position", "lm_forward_backward"},
    {"train{s}.labels", "b,S-1", IDS, "position t's label input_ids[t+1], -100 where loss_mask[t+1] is 0",
     "lm_forward_backward"},
    {"train{s}.ce", "b,S-1", R, "cross-entropy of logits[t] against labels[t], 0 where ignored", "cross_entropy"},
    {"train{s}.loss", "", R, "the mean of ce over the counted labels", "lm_forward_backward"},
    LM_PARAM("grad", "gradient (before clipping; tied: embedding plus lm_head)"),
    {"train{s}.grad_norm", "", R, "global L2 norm of every gradient, before clipping", "lm_forward_backward"},
    {"train{s}.lr", "", R, "the step's learning rate", "lm_update"},
    {"train{s}.clip_coef", "", R, "min(1, max_grad_norm / (grad_norm + 1e-6)): what the gradients are multiplied by",
     "lm_update"},
    LM_PARAM("grad_clipped", "gradient after clipping"),
    LM_PARAM("adam_m", "AdamW exp_avg after the step"),
    LM_PARAM("adam_v", "AdamW exp_avg_sq after the step"),
    LM_PARAM("param", "after the AdamW step"),
};
#undef LM_PARAM
#undef R
#undef IDS
const int dflash_n_lm_trace_names = (int)(sizeof dflash_lm_trace_names / sizeof dflash_lm_trace_names[0]);
