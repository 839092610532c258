/* formats/load.c - reading the files a run needs: config.json, model.safetensors
 * (validated, then mapped), vocab.txt and the word-level tokenizer.
 * Everything here returns 0 or -1 with a one-line dflash_errmsg naming the
 * file, the field, what was expected and what was found. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* glibc: madvise's MADV_HUGEPAGE (not POSIX), in advise_huge below */
#endif
#include "formats/load.h"
#include "dflash.h"
#include "formats/files.h"
#include "formats/json.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>      /* POSIX: open, and mmap for the weight files */
#include <signal.h>     /* sig_atomic_t: the mapped files, read by the SIGBUS handler */
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- config.json */

#define MAX_DIM (1 << 16)        /* hidden, intermediate, head_dim, heads */
#define MAX_LAYERS DFLASH_MAX_LAYERS
#define MAX_VOCAB (1 << 20)

static int cfg_int(const Json *root, const char *path, const char *key, int lo, int hi, int *out) {
    const Json *v = json_get(root, key);
    char got[96];
    if (!v) {
        dflash_set_error("%s: missing field \"%s\" (expected an integer in %d..%d)", path, key, lo, hi);
        return -1;
    }
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < lo || v->integer > hi) {
        dflash_set_error("%s: field \"%s\": expected an integer in %d..%d, got %s", path, key, lo, hi,
                         json_describe(v, got, sizeof got));
        return -1;
    }
    *out = (int)v->integer;
    return 0;
}

/* a number in (lo, hi]: rms_norm_eps and rope_theta, converted to float later */
static int cfg_double(const Json *root, const char *path, const char *key, double lo, double hi, double *out) {
    const Json *v = json_get(root, key);
    char got[96];
    if (!v) {
        dflash_set_error("%s: missing field \"%s\" (expected a number in (%g, %g])", path, key, lo, hi);
        return -1;
    }
    if (v->type != JSON_NUMBER || !(v->number > lo && v->number <= hi)) {
        dflash_set_error("%s: field \"%s\": expected a number in (%g, %g], got %s", path, key, lo, hi,
                         json_describe(v, got, sizeof got));
        return -1;
    }
    *out = v->number;
    return 0;
}

/* The smallest normal number of the build's `real`: a smaller (or
 * subnormal) rms_norm_eps would become 0 or lose its digits on conversion. */
#ifdef DFLASH_DOUBLE
#define REAL_MIN_NORMAL DBL_MIN
#else
#define REAL_MIN_NORMAL FLT_MIN
#endif

/* The config's reals as the computation will see them, in `real`. */
static int config_check_reals(const Config *c, const char *path) {
    if (!(c->rms_norm_eps >= REAL_MIN_NORMAL)) {
        dflash_set_error("%s: field \"rms_norm_eps\": expected at least %g (the smallest normal %s; a smaller eps "
                         "becomes 0 or loses its precision), got %g", path, (double)REAL_MIN_NORMAL, REAL_NAME,
                         c->rms_norm_eps);
        return -1;
    }
    return 0;
}

/* inv_freq = 1 / theta^(2i/d) as computed (rope_inv_freq), for every i of
 * the head_dim: finite and normal, and the largest angle finite. */
static int check_rope(const real *inv_freq, int head_dim, double theta, int max_pos, const char *path) {
    for (int i = 0; i < head_dim / 2; i++) {
        real f = inv_freq[i], angle = (real)(max_pos - 1) * f;
        if (!isfinite(f) || !(f >= REAL_MIN_NORMAL) || !isfinite(angle)) {
            dflash_set_error("%s: field \"rope_theta\": %g gives inv_freq[%d] = 1/theta^(%d/%d) = %g with head_dim %d, "
                             "expected a finite nonzero %s", path, theta, i, 2 * i, head_dim, (double)f, head_dim,
                             REAL_NAME);
            return -1;
        }
    }
    return 0;
}

/* architectures names want (or alt, when given) */
static int cfg_architecture(const Json *root, const char *path, const char *want, const char *alt) {
    const Json *a = json_get(root, "architectures");
    char got[96], also[64] = "";
    if (alt) snprintf(also, sizeof also, " or [\"%s\"]", alt);
    if (!a) { dflash_set_error("%s: missing field \"architectures\" (expected [\"%s\"]%s)", path, want, also); return -1; }
    if (a->type == JSON_ARRAY)
        for (int i = 0; i < a->n; i++)
            if (a->items[i].type == JSON_STRING && strcmp(a->items[i].string, want) == 0) return 0;
    if (a->type == JSON_ARRAY && a->n > 0) json_describe(&a->items[0], got, sizeof got);
    else json_describe(a, got, sizeof got);
    dflash_set_error("%s: field \"architectures\": expected [\"%s\"]%s, got %s", path, want, also, got);
    return -1;
}

/* build_target_layer_ids: the reference's default when dflash_config has none */
static void build_target_layer_ids(int num_target_layers, int num_draft_layers, int *ids) {
    if (num_draft_layers == 1) { ids[0] = num_target_layers / 2; return; }
    int start = 1, end = num_target_layers - 3, span = end - start;
    for (int i = 0; i < num_draft_layers; i++) {
        double x = start + (double)i * span / (num_draft_layers - 1);
        ids[i] = (int)floor(x + 0.5);  /* Python round(): ties to even, see NOTES.md */
        if (x + 0.5 == floor(x + 0.5) && ids[i] % 2 != 0) ids[i] -= 1;
    }
}

/* config.json in sections, each 0 or -1 with dflash_errmsg; config_parse
 * runs them in this order. */

/* the sizes: architecture, layers, heads, head_dim, vocabulary, positions,
 * eps and theta, and what must hold between them */
static int config_sizes(Config *c, const Json *root, const char *path, int draft) {
    /* the target: a Qwen3 or (transformers' LlamaForCausalLM) a Llama decoder */
    c->llama = !draft && cfg_architecture(root, path, "LlamaForCausalLM", NULL) == 0;
    if (!c->llama && cfg_architecture(root, path, draft ? "DFlashDraftModel" : "Qwen3ForCausalLM",
                                      draft ? NULL : "LlamaForCausalLM") != 0)
        return -1;
    if (cfg_int(root, path, "hidden_size", 1, MAX_DIM, &c->hidden_size) ||
        cfg_int(root, path, "intermediate_size", 1, MAX_DIM, &c->intermediate_size) ||
        cfg_int(root, path, "num_hidden_layers", 1, MAX_LAYERS, &c->num_hidden_layers) ||
        cfg_int(root, path, "num_attention_heads", 1, MAX_DIM, &c->num_attention_heads) ||
        cfg_int(root, path, "num_key_value_heads", 1, MAX_DIM, &c->num_key_value_heads))
        return -1;
    /* LlamaConfig's head_dim defaults to hidden_size / num_attention_heads (Llama 3.1 writes none) */
    if (c->llama && !json_get(root, "head_dim")) c->head_dim = c->hidden_size / c->num_attention_heads;
    else if (cfg_int(root, path, "head_dim", 2, MAX_DIM, &c->head_dim)) return -1;
    if (c->head_dim < 2) {
        dflash_set_error("%s: no field \"head_dim\", and hidden_size / num_attention_heads = %d / %d is below 2",
                         path, c->hidden_size, c->num_attention_heads);
        return -1;
    }
    if (
        cfg_int(root, path, "vocab_size", 1, MAX_VOCAB, &c->vocab_size) ||
        cfg_int(root, path, "max_position_embeddings", 1, 1 << 20, &c->max_position_embeddings) ||
        /* eps and theta become floats: (0, 1] and (1, 1e30] keep every
         * derived value (eps, theta^(2i/d), its inverse) finite in float */
        cfg_double(root, path, "rms_norm_eps", 0, 1, &c->rms_norm_eps) ||
        cfg_double(root, path, "rope_theta", 1, 1e30, &c->rope_theta))
        return -1;
    if (config_check_reals(c, path) != 0) return -1;
    if (c->num_attention_heads % c->num_key_value_heads != 0) {
        dflash_set_error("%s: field \"num_attention_heads\": expected a multiple of num_key_value_heads (%d), "
                         "got %d", path, c->num_key_value_heads, c->num_attention_heads);
        return -1;
    }
    if (c->head_dim % 2 != 0) {
        dflash_set_error("%s: field \"head_dim\": expected an even number (RoPE rotates pairs of dims), got %d",
                         path, c->head_dim);
        return -1;
    }
    /* hidden_size need not equal heads x head_dim (Qwen3 allows it: q_proj is
     * [H*d, D], o_proj [D, H*d]); only an absurd H*d is refused. */
    if ((long)c->num_attention_heads * c->head_dim > MAX_DIM) {
        dflash_set_error("%s: fields \"num_attention_heads\" x \"head_dim\": expected at most %d, got %d x %d = %ld",
                         path, MAX_DIM, c->num_attention_heads, c->head_dim,
                         (long)c->num_attention_heads * c->head_dim);
        return -1;
    }
    return 0;
}

/* keys of published Qwen3 / DFlash configs that change what is computed:
 * the values this program computes are accepted, the others refused by
 * name (never silently computed as something else) */
static int config_computed_keys(Config *c, const Json *root, const char *path, int draft) {
    char got[96];
    const Json *tie = json_get(root, "tie_word_embeddings");
    if (tie && tie->type != JSON_BOOL) {
        dflash_set_error("%s: field \"tie_word_embeddings\": expected true or false, got %s", path,
                         json_describe(tie, got, sizeof got));
        return -1;
    }
    c->tie_word_embeddings = tie && tie->boolean && !draft;  /* the draft has no lm_head of its own */
    const Json *bias = json_get(root, "attention_bias");
    if (bias && !(bias->type == JSON_BOOL && bias->boolean == 0)) {
        dflash_set_error("%s: field \"attention_bias\": expected false (no bias tensors), got %s", path,
                         json_describe(bias, got, sizeof got));
        return -1;
    }
    const Json *tp = json_get(root, "pretraining_tp");
    if (tp && !(tp->type == JSON_NUMBER && tp->is_integer && tp->integer == 1)) {
        dflash_set_error("%s: field \"pretraining_tp\": expected 1 (the one projection layout implemented), got %s",
                         path, json_describe(tp, got, sizeof got));
        return -1;
    }
    const Json *mb = json_get(root, "mlp_bias");
    if (mb && !(mb->type == JSON_BOOL && mb->boolean == 0)) {
        dflash_set_error("%s: field \"mlp_bias\": expected false (no bias tensors), got %s", path,
                         json_describe(mb, got, sizeof got));
        return -1;
    }
    const Json *act = json_get(root, "hidden_act");
    if (act && !(act->type == JSON_STRING && strcmp(act->string, "silu") == 0)) {
        dflash_set_error("%s: field \"hidden_act\": expected \"silu\" (the only activation implemented), got %s", path,
                         json_describe(act, got, sizeof got));
        return -1;
    }
    return 0;
}

/* rope_scaling (none, "default" or Llama 3.1's "llama3") and transformers 5's rope_parameters */
static int config_rope(Config *c, const Json *root, const char *path) {
    char got[96];
    const Json *rs = json_get(root, "rope_scaling");
    if (rs && rs->type != JSON_NULL) {
        /* {"rope_type": "default"} (or "type") is plain RoPE; "llama3" (Llama 3.1) is
         * implemented; anything else is not */
        const Json *rt = json_get(rs, "rope_type");
        if (!rt) rt = json_get(rs, "type");
        if (rs->type == JSON_OBJECT && rt && rt->type == JSON_STRING && strcmp(rt->string, "llama3") == 0) {
            char sub[600];
            snprintf(sub, sizeof sub, "%.500s: rope_scaling", path);
            double omax;
            if (cfg_double(rs, sub, "factor", 0, 1e6, &c->rope_factor) ||
                cfg_double(rs, sub, "low_freq_factor", 0, 1e6, &c->rope_low_freq_factor) ||
                cfg_double(rs, sub, "high_freq_factor", c->rope_low_freq_factor, 1e6, &c->rope_high_freq_factor) ||
                cfg_double(rs, sub, "original_max_position_embeddings", 0, 1 << 30, &omax))
                return -1;
            if (omax != floor(omax)) {
                dflash_set_error("%s: field \"original_max_position_embeddings\": expected an integer, got %g", sub, omax);
                return -1;
            }
            c->rope_llama3 = 1;
            c->rope_original_max_position_embeddings = (int)omax;
        } else if (!(rs->type == JSON_OBJECT && rs->n == 1 && rt && rt->type == JSON_STRING && strcmp(rt->string, "default") == 0)) {
            if (rt && rt->type == JSON_STRING)
                dflash_set_error("%s: field \"rope_scaling\": expected null or rope_type \"llama3\" (other RoPE "
                                 "scalings are not implemented), got rope_type \"%.60s\"", path, rt->string);
            else
                dflash_set_error("%s: field \"rope_scaling\": expected null or rope_type \"llama3\" (other RoPE "
                                 "scalings are not implemented), got %s", path, json_describe(rs, got, sizeof got));
            return -1;
        }
    }
    /* transformers 5 writes RoPE as rope_parameters {rope_type, rope_theta} */
    const Json *rp = json_get(root, "rope_parameters");
    if (rp && rp->type != JSON_NULL) {
        const Json *rt = json_get(rp, "rope_type"), *th = json_get(rp, "rope_theta");
        int ok = rp->type == JSON_OBJECT && (!rt || (rt->type == JSON_STRING && strcmp(rt->string, "default") == 0)) &&
                 (!th || (th->type == JSON_NUMBER && th->number == c->rope_theta));
        for (int i = 0; ok && i < rp->n; i++)
            ok = strcmp(rp->keys[i], "rope_type") == 0 || strcmp(rp->keys[i], "rope_theta") == 0;
        if (!ok) {
            char g2[96] = "";
            if (rp->type == JSON_OBJECT && th) json_describe(th, g2, sizeof g2);
            if (rp->type == JSON_OBJECT)
                snprintf(got, sizeof got, "rope_type %.30s%s%.40s", rt && rt->type == JSON_STRING ? rt->string : "(none)",
                         th ? ", rope_theta " : "", g2);
            else
                json_describe(rp, got, sizeof got);
            dflash_set_error("%s: field \"rope_parameters\": expected {\"rope_type\": \"default\", \"rope_theta\": %g} "
                             "(plain RoPE with the config's rope_theta), got %s", path, c->rope_theta, got);
            return -1;
        }
    }
    return 0;
}

/* which layers attend within a sliding window (c->layer_window, 0: full) */
static int config_layer_types(Config *c, const Json *root, const char *path, int draft) {
    char got[96];
    /* sliding windows: in a draft, layer_types (below) says which layers; a
     * sliding target is not implemented */
    const Json *sw = json_get(root, "use_sliding_window");
    if (sw && !(sw->type == JSON_BOOL && (sw->boolean == 0 || draft))) {
        dflash_set_error("%s: field \"use_sliding_window\": expected false (%s), got %s", path,
                         draft ? "or true" : "sliding-window targets are not implemented", json_describe(sw, got, sizeof got));
        return -1;
    }
    int use_sw = sw && sw->boolean, window = 0;
    if (use_sw && cfg_int(root, path, "sliding_window", 1, 1 << 30, &window)) return -1;
    /* layer_types: "full_attention", or in a draft "sliding_attention" (then
     * use_sliding_window must be true: transformers' Qwen3Config otherwise sets
     * sliding_window to null and the published code runs the layer as full
     * attention). Absent, transformers makes layer i sliding when
     * use_sliding_window and i >= max_window_layers. */
    const Json *lt = json_get(root, "layer_types");
    const char *kinds = draft ? "\"full_attention\" or \"sliding_attention\"" : "\"full_attention\"";
    if (lt && lt->type != JSON_NULL) {
        if (lt->type != JSON_ARRAY || lt->n != c->num_hidden_layers) {
            dflash_set_error("%s: field \"layer_types\": expected a list of %d %s (one per layer), got %s",
                             path, c->num_hidden_layers, kinds, json_describe(lt, got, sizeof got));
            return -1;
        }
        for (int i = 0; i < lt->n; i++) {
            const Json *v = &lt->items[i];
            int sliding = v->type == JSON_STRING && strcmp(v->string, "sliding_attention") == 0;
            if (!(v->type == JSON_STRING && strcmp(v->string, "full_attention") == 0) && !(sliding && draft)) {
                dflash_set_error("%s: field \"layer_types\"[%d]: expected %s (the attentions implemented%s), got %s",
                                 path, i, kinds, draft ? "" : "; sliding-window targets are not", json_describe(v, got, sizeof got));
                return -1;
            }
            if (sliding && !use_sw) {
                dflash_set_error("%s: field \"layer_types\"[%d] is \"sliding_attention\" but use_sliding_window is not "
                                 "true (transformers then drops sliding_window: which window is meant?)", path, i);
                return -1;
            }
            c->layer_window[i] = sliding ? window : 0;
        }
    } else if (use_sw) {
        int mwl;
        if (cfg_int(root, path, "max_window_layers", 0, MAX_LAYERS, &mwl)) return -1;
        for (int i = mwl; i < c->num_hidden_layers; i++) c->layer_window[i] = window;
    }
    for (int i = 0; i < c->num_hidden_layers; i++) c->layer_causal[i] = c->layer_window[i] > 0;
    return 0;
}

/* eos_token_id: an int, a list of ints, or null (the stop-token default) */
static int config_eos(Config *c, const Json *root, const char *path) {
    char got[96];
    const Json *eos = json_get(root, "eos_token_id");
    if (eos && eos->type != JSON_NULL) {
        int n = eos->type == JSON_ARRAY ? eos->n : 1;
        for (int i = 0; i < n; i++) {
            const Json *v = eos->type == JSON_ARRAY ? &eos->items[i] : eos;
            if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer >= c->vocab_size ||
                i >= DFLASH_MAX_STOP) {
                dflash_set_error("%s: field \"eos_token_id\": expected a token id in 0..%d or a list of at most %d, "
                                 "got %s", path, c->vocab_size - 1, DFLASH_MAX_STOP,
                                 json_describe(i >= DFLASH_MAX_STOP ? eos : v, got, sizeof got));
                return -1;
            }
            c->eos_token_id[c->n_eos++] = (int)v->integer;
        }
    }
    return 0;
}

/* a draft's own keys: num_target_layers, block_size, dflash_config
 * (mask_token_id, target_layer_ids or the reference's default) */
static int config_draft(Config *c, const Json *root, const char *path) {
    char got[96];
    c->is_draft = 1;
    if (cfg_int(root, path, "num_target_layers", 1, MAX_LAYERS, &c->num_target_layers) ||
        cfg_int(root, path, "block_size", 1, DFLASH_MAX_BLOCK, &c->block_size))
        return -1;
    const Json *dfc = json_get(root, "dflash_config");
    if (!dfc || dfc->type != JSON_OBJECT) {
        if (!dfc) dflash_set_error("%s: missing field \"dflash_config\" (expected an object)", path);
        else dflash_set_error("%s: field \"dflash_config\": expected an object, got %s", path,
                              json_describe(dfc, got, sizeof got));
        return -1;
    }
    char sub[600];
    snprintf(sub, sizeof sub, "%.500s: dflash_config", path);
    if (cfg_int(dfc, sub, "mask_token_id", 0, c->vocab_size - 1, &c->mask_token_id)) return -1;
    const Json *ids = json_get(dfc, "target_layer_ids");
    if (!ids) {
        /* the reference's default (build_target_layer_ids) */
        c->n_target_layer_ids = c->num_hidden_layers;
        if (c->n_target_layer_ids > DFLASH_MAX_LAYER_IDS) {
            dflash_set_error("%s: no target_layer_ids and too many draft layers for the default", sub);
            return -1;
        }
        build_target_layer_ids(c->num_target_layers, c->num_hidden_layers, c->target_layer_ids);
    } else {
        if (ids->type != JSON_ARRAY || ids->n < 1 || ids->n > DFLASH_MAX_LAYER_IDS) {
            dflash_set_error("%s: field \"target_layer_ids\": expected a list of 1..%d layer indices, got %s",
                             sub, DFLASH_MAX_LAYER_IDS, json_describe(ids, got, sizeof got));
            return -1;
        }
        c->n_target_layer_ids = ids->n;
        for (int i = 0; i < ids->n; i++) {
            const Json *v = &ids->items[i];
            if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 ||
                v->integer >= c->num_target_layers) {
                dflash_set_error("%s: field \"target_layer_ids\"[%d]: expected an integer in 0..%d "
                                 "(num_target_layers - 1), got %s", sub, i, c->num_target_layers - 1,
                                 json_describe(v, got, sizeof got));
                return -1;
            }
            c->target_layer_ids[i] = (int)v->integer;
        }
    }
    /* every id, given or defaulted (the default goes out of range for
     * fewer than 4 target layers), must name a distinct target layer */
    for (int i = 0; i < c->n_target_layer_ids; i++) {
        if (c->target_layer_ids[i] < 0 || c->target_layer_ids[i] >= c->num_target_layers) {
            dflash_set_error("%s: no \"target_layer_ids\", and the default for %d target layers and %d draft "
                             "layers gives %d, outside 0..%d; give target_layer_ids", sub,
                             c->num_target_layers, c->num_hidden_layers, c->target_layer_ids[i],
                             c->num_target_layers - 1);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (c->target_layer_ids[j] == c->target_layer_ids[i]) {
                dflash_set_error("%s: field \"target_layer_ids\": expected distinct layers, got layer %d twice%s",
                                 sub, c->target_layer_ids[i], ids ? "" : " (from the default: give target_layer_ids)");
                return -1;
            }
    }
    if ((long)c->n_target_layer_ids * c->hidden_size > MAX_DIM * 4L) {
        dflash_set_error("%s: field \"target_layer_ids\": %d layers x hidden_size %d = %ld fc.weight inputs, "
                         "expected at most %ld", sub, c->n_target_layer_ids, c->hidden_size,
                         (long)c->n_target_layer_ids * c->hidden_size, MAX_DIM * 4L);
        return -1;
    }
    return 0;
}


/* ---- a hybrid target: Qwen3.5's text model (Qwen3_5ForCausalLM, model_type
 * "qwen3_5_text"), or the text_config of a nested "qwen3_5" config
 * (Qwen3_5ForConditionalGeneration; its tensors are model.language_model.*,
 * model.visual.* and mtp.* are ignored as transformers does). Keys absent
 * take Qwen3_5TextConfig's defaults; what is not implemented is refused by
 * name: MoE (num_experts > 0, qwen3_5_moe), rope types other than "default",
 * attn_output_gate false, activations other than silu, attention bias. */

/* is root (a config.json) a Qwen3.5 text target, plain or nested? */
static int config_is_hybrid(const Json *root) {
    const Json *mt = json_get(root, "model_type"), *tc = json_get(root, "text_config");
    if (mt && mt->type == JSON_STRING && strncmp(mt->string, "qwen3_5", 7) == 0) return 1;
    if (tc && tc->type == JSON_OBJECT) return 1;
    const Json *a = json_get(root, "architectures");
    if (a && a->type == JSON_ARRAY)
        for (int i = 0; i < a->n; i++)
            if (a->items[i].type == JSON_STRING && strncmp(a->items[i].string, "Qwen3_5", 7) == 0) return 1;
    return 0;
}

/* an optional integer key: its value (lo..hi) or the default */
static int cfg_int_or(const Json *root, const char *path, const char *key, int lo, int hi, int dflt, int *out) {
    const Json *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) { *out = dflt; return 0; }
    return cfg_int(root, path, key, lo, hi, out);
}
static int cfg_double_or(const Json *root, const char *path, const char *key, double lo, double hi, double dflt,
                         double *out) {
    const Json *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) { *out = dflt; return 0; }
    return cfg_double(root, path, key, lo, hi, out);
}

static int config_hybrid(Config *c, const Json *top, const char *path) {
    char got[96], sub[600];
    const Json *tc = json_get(top, "text_config"), *root = top;
    const Json *mt = json_get(top, "model_type");
    if (tc && tc->type != JSON_OBJECT) {
        dflash_set_error("%s: field \"text_config\": expected an object, got %s", path, json_describe(tc, got, sizeof got));
        return -1;
    }
    if (tc) {
        root = tc;
        c->hybrid_nested = 1;
        snprintf(sub, sizeof sub, "%.500s: text_config", path);
        mt = json_get(tc, "model_type");
    } else {
        snprintf(sub, sizeof sub, "%.500s", path);
    }
    if (mt && !(mt->type == JSON_STRING && (strcmp(mt->string, "qwen3_5_text") == 0 || strcmp(mt->string, "qwen3_5") == 0))) {
        dflash_set_error("%s: field \"model_type\": expected \"qwen3_5_text\" (or \"qwen3_5\" with a text_config; "
                         "the MoE variant qwen3_5_moe is not implemented), got %s", sub, json_describe(mt, got, sizeof got));
        return -1;
    }
    c->hybrid = 1;
    int ne = 0;
    if (cfg_int_or(root, sub, "num_experts", 0, 1 << 20, 0, &ne)) return -1;
    if (ne > 0) {
        dflash_set_error("%s: field \"num_experts\": expected 0 (mixture-of-experts Qwen3.5 is not implemented), "
                         "got %d", sub, ne);
        return -1;
    }
    const Json *gate = json_get(root, "attn_output_gate");
    if (gate && !(gate->type == JSON_BOOL && gate->boolean)) {
        dflash_set_error("%s: field \"attn_output_gate\": expected true (Qwen3_5Attention always gates; an ungated "
                         "attention is not implemented), got %s", sub, json_describe(gate, got, sizeof got));
        return -1;
    }
    if (cfg_int(root, sub, "hidden_size", 1, MAX_DIM, &c->hidden_size) ||
        cfg_int(root, sub, "intermediate_size", 1, MAX_DIM, &c->intermediate_size) ||
        cfg_int(root, sub, "num_hidden_layers", 1, MAX_LAYERS, &c->num_hidden_layers) ||
        cfg_int(root, sub, "num_attention_heads", 1, MAX_DIM, &c->num_attention_heads) ||
        cfg_int(root, sub, "num_key_value_heads", 1, MAX_DIM, &c->num_key_value_heads) ||
        cfg_int(root, sub, "vocab_size", 1, MAX_VOCAB, &c->vocab_size) ||
        cfg_int_or(root, sub, "head_dim", 2, MAX_DIM, 256, &c->head_dim) ||
        cfg_int_or(root, sub, "max_position_embeddings", 1, 1 << 20, 32768, &c->max_position_embeddings) ||
        cfg_double_or(root, sub, "rms_norm_eps", 0, 1, 1e-6, &c->rms_norm_eps) ||
        cfg_int_or(root, sub, "linear_conv_kernel_dim", 1, 64, 4, &c->linear_conv_kernel_dim) ||
        cfg_int_or(root, sub, "linear_key_head_dim", 1, 1024, 128, &c->linear_key_head_dim) ||
        cfg_int_or(root, sub, "linear_value_head_dim", 1, 1024, 128, &c->linear_value_head_dim) ||
        cfg_int_or(root, sub, "linear_num_key_heads", 1, MAX_DIM, 16, &c->linear_num_key_heads) ||
        cfg_int_or(root, sub, "linear_num_value_heads", 1, MAX_DIM, 32, &c->linear_num_value_heads))
        return -1;
    if (config_check_reals(c, sub) != 0) return -1;
    if (c->num_attention_heads % c->num_key_value_heads != 0) {
        dflash_set_error("%s: field \"num_attention_heads\": expected a multiple of num_key_value_heads (%d), got %d",
                         sub, c->num_key_value_heads, c->num_attention_heads);
        return -1;
    }
    if (c->linear_num_value_heads % c->linear_num_key_heads != 0) {
        dflash_set_error("%s: field \"linear_num_value_heads\": expected a multiple of linear_num_key_heads (%d), "
                         "got %d", sub, c->linear_num_key_heads, c->linear_num_value_heads);
        return -1;
    }
    if ((long)c->num_attention_heads * c->head_dim * 2 > MAX_DIM ||
        (long)c->linear_num_key_heads * c->linear_key_head_dim * 2 +
                (long)c->linear_num_value_heads * c->linear_value_head_dim > MAX_DIM) {
        dflash_set_error("%s: the attention or linear-attention projections are above %d outputs", sub, MAX_DIM);
        return -1;
    }
    /* the config keys of Qwen3 that mean the same here */
    if (config_computed_keys(c, root, sub, 0) != 0) return -1;
    if (tc) {  /* nested: transformers reads tie_word_embeddings at the top first */
        const Json *tie = json_get(top, "tie_word_embeddings");
        if (tie && tie->type == JSON_BOOL) c->tie_word_embeddings = tie->boolean;
    }
    /* layer_types, or full_attention_interval (default 4): layer i is linear
     * if (i + 1) % interval, else full attention */
    const Json *lt = json_get(root, "layer_types");
    if (lt && lt->type != JSON_NULL) {
        if (lt->type != JSON_ARRAY || lt->n != c->num_hidden_layers) {
            dflash_set_error("%s: field \"layer_types\": expected a list of %d \"linear_attention\" or "
                             "\"full_attention\", got %s", sub, c->num_hidden_layers, json_describe(lt, got, sizeof got));
            return -1;
        }
        for (int i = 0; i < lt->n; i++) {
            const Json *v = &lt->items[i];
            int lin = v->type == JSON_STRING && strcmp(v->string, "linear_attention") == 0;
            if (!lin && !(v->type == JSON_STRING && strcmp(v->string, "full_attention") == 0)) {
                dflash_set_error("%s: field \"layer_types\"[%d]: expected \"linear_attention\" or \"full_attention\", "
                                 "got %s", sub, i, json_describe(v, got, sizeof got));
                return -1;
            }
            c->layer_linear[i] = lin;
        }
    } else {
        int interval;
        if (cfg_int_or(root, sub, "full_attention_interval", 1, MAX_LAYERS, 4, &interval)) return -1;
        for (int i = 0; i < c->num_hidden_layers; i++) c->layer_linear[i] = (i + 1) % interval != 0;
    }
    /* RoPE: rope_parameters {rope_type "default", rope_theta, partial_rotary_factor,
     * mrope_section, mrope_interleaved} (the three mrope grids are equal for
     * text: plain RoPE), or the legacy top-level rope_theta / partial_rotary_factor */
    const Json *rs = json_get(root, "rope_scaling"), *rp = json_get(root, "rope_parameters");
    if (rs && rs->type != JSON_NULL) {
        const Json *rt = json_get(rs, "rope_type");
        if (!rt) rt = json_get(rs, "type");
        if (!(rt && rt->type == JSON_STRING && strcmp(rt->string, "default") == 0)) {
            dflash_set_error("%s: field \"rope_scaling\": expected null or rope_type \"default\" (other RoPE types are "
                             "not implemented for Qwen3.5), got %s", sub, json_describe(rs, got, sizeof got));
            return -1;
        }
    }
    double theta = 10000.0, prf = 0.25;
    if (cfg_double_or(root, sub, "rope_theta", 1, 1e30, 10000.0, &theta) ||
        cfg_double_or(root, sub, "partial_rotary_factor", 0, 1, 0.25, &prf))
        return -1;
    if (rp && rp->type != JSON_NULL) {
        char rsub[700];
        snprintf(rsub, sizeof rsub, "%.600s: rope_parameters", sub);
        if (rp->type != JSON_OBJECT) {
            dflash_set_error("%s: expected an object, got %s", rsub, json_describe(rp, got, sizeof got));
            return -1;
        }
        const Json *rt = json_get(rp, "rope_type");
        if (rt && !(rt->type == JSON_STRING && strcmp(rt->string, "default") == 0)) {
            dflash_set_error("%s: field \"rope_type\": expected \"default\" (other RoPE types are not implemented), "
                             "got %s", rsub, json_describe(rt, got, sizeof got));
            return -1;
        }
        if (cfg_double_or(rp, rsub, "rope_theta", 1, 1e30, theta, &theta) ||
            cfg_double_or(rp, rsub, "partial_rotary_factor", 0, 1, prf, &prf))
            return -1;
    }
    c->rope_theta = theta;
    c->rotary_dim = (int)(c->head_dim * prf);
    if (c->rotary_dim < 2 || c->rotary_dim % 2 != 0) {
        dflash_set_error("%s: partial_rotary_factor %g x head_dim %d = rotary dims %d: expected an even number >= 2",
                         sub, prf, c->head_dim, c->rotary_dim);
        return -1;
    }
    if (config_eos(c, root, sub) != 0) return -1;
    if (tc && c->n_eos == 0 && config_eos(c, top, path) != 0) return -1;
    return 0;
}

static int config_parse(Config *c, const char *path, const char *text, size_t len, int draft) {
    Json root;
    memset(c, 0, sizeof *c);
    if (json_parse(text, len, path, &root) != 0) return -1;
    int rc = -1;
    if (root.type != JSON_OBJECT) dflash_set_error("%s: expected a JSON object", path);
    else if (!draft && config_is_hybrid(&root)) rc = config_hybrid(c, &root, path);
    else if (config_sizes(c, &root, path, draft) == 0 && config_computed_keys(c, &root, path, draft) == 0 &&
             config_rope(c, &root, path) == 0 && config_layer_types(c, &root, path, draft) == 0 &&
             config_eos(c, &root, path) == 0 && (!draft || config_draft(c, &root, path) == 0))
        rc = 0;
    json_free(&root);
    return rc;
}

/* ---- the tensor table: every tensor a model file must hold, with the shape
 * the config implies and where it goes in Model.data (llm.c-style carving). */
typedef struct {
    char name[96];
    int ndim;
    int64_t shape[3];
    real **dst;          /* the Model field that will point at it; NULL: must be absent (tied lm_head) */
    int found;
    int dtype;           /* ST_F32, ST_BF16, ST_F16 (from the file's header) */
    int shard;           /* the file the index puts it in (0 without an index) */
    int64_t begin, end;  /* byte offsets in that file's data section */
} TensorSpec;

enum { ST_F32, ST_BF16, ST_F16 };
static const char *const ST_READ_NAMES[] = {"F32", "BF16", "F16"};
static const int ST_READ_SIZES[] = {4, 2, 2};


/* a hybrid target's tensors (Qwen3_5ForCausalLM's keys; nested configs put
 * them under model.language_model.) */
static int tensor_table_hybrid(Model *m, TensorSpec **out_specs, int *out_n) {
    const Config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim, L = c->num_hidden_layers;
    int qd = c->num_attention_heads * d, kvd = c->num_key_value_heads * d;
    int Hv = c->linear_num_value_heads, vd = Hv * c->linear_value_head_dim;
    int C = 2 * c->linear_num_key_heads * c->linear_key_head_dim + vd;
    int n = 0, cap = 14 * L + 8;
    TensorSpec *s = xcalloc((size_t)cap, sizeof(TensorSpec), "tensor table");
    if (!s) return -1;
    const char *pre = c->hybrid_nested ? "model.language_model." : "model.";
#define ADD3(ptr, nd, s0, s1, s2, ...) do { \
        snprintf(s[n].name, sizeof s[n].name, __VA_ARGS__); \
        s[n].ndim = nd; s[n].shape[0] = s0; s[n].shape[1] = s1; s[n].shape[2] = s2; s[n].dst = ptr; n++; } while (0)
    ADD3(&m->embed_tokens, 2, c->vocab_size, D, 0, "%sembed_tokens.weight", pre);
    for (int l = 0; l < L; l++) {
        LayerWeights *w = &m->layers[l];
        ADD3(&w->input_layernorm, 1, D, 0, 0, "%slayers.%d.input_layernorm.weight", pre, l);
        if (c->layer_linear[l]) {
            ADD3(&w->in_proj_qkv, 2, C, D, 0, "%slayers.%d.linear_attn.in_proj_qkv.weight", pre, l);
            ADD3(&w->in_proj_z, 2, vd, D, 0, "%slayers.%d.linear_attn.in_proj_z.weight", pre, l);
            ADD3(&w->in_proj_b, 2, Hv, D, 0, "%slayers.%d.linear_attn.in_proj_b.weight", pre, l);
            ADD3(&w->in_proj_a, 2, Hv, D, 0, "%slayers.%d.linear_attn.in_proj_a.weight", pre, l);
            ADD3(&w->conv1d, 3, C, 1, c->linear_conv_kernel_dim, "%slayers.%d.linear_attn.conv1d.weight", pre, l);
            ADD3(&w->A_log, 1, Hv, 0, 0, "%slayers.%d.linear_attn.A_log", pre, l);
            ADD3(&w->dt_bias, 1, Hv, 0, 0, "%slayers.%d.linear_attn.dt_bias", pre, l);
            ADD3(&w->linear_norm, 1, c->linear_value_head_dim, 0, 0, "%slayers.%d.linear_attn.norm.weight", pre, l);
            ADD3(&w->out_proj, 2, D, vd, 0, "%slayers.%d.linear_attn.out_proj.weight", pre, l);
        } else {
            ADD3(&w->q_proj, 2, 2 * qd, D, 0, "%slayers.%d.self_attn.q_proj.weight", pre, l);
            ADD3(&w->k_proj, 2, kvd, D, 0, "%slayers.%d.self_attn.k_proj.weight", pre, l);
            ADD3(&w->v_proj, 2, kvd, D, 0, "%slayers.%d.self_attn.v_proj.weight", pre, l);
            ADD3(&w->o_proj, 2, D, qd, 0, "%slayers.%d.self_attn.o_proj.weight", pre, l);
            ADD3(&w->q_norm, 1, d, 0, 0, "%slayers.%d.self_attn.q_norm.weight", pre, l);
            ADD3(&w->k_norm, 1, d, 0, 0, "%slayers.%d.self_attn.k_norm.weight", pre, l);
        }
        ADD3(&w->post_attention_layernorm, 1, D, 0, 0, "%slayers.%d.post_attention_layernorm.weight", pre, l);
        ADD3(&w->gate_proj, 2, I, D, 0, "%slayers.%d.mlp.gate_proj.weight", pre, l);
        ADD3(&w->up_proj, 2, I, D, 0, "%slayers.%d.mlp.up_proj.weight", pre, l);
        ADD3(&w->down_proj, 2, D, I, 0, "%slayers.%d.mlp.down_proj.weight", pre, l);
    }
    ADD3(&m->norm, 1, D, 0, 0, "%snorm.weight", pre);
    ADD3(c->tie_word_embeddings ? NULL : &m->lm_head, 2, c->vocab_size, D, 0, "lm_head.weight");
    /* ignored, as transformers' Qwen3_5ForCausalLM ignores them: the vision
     * tower and the multi-token-prediction head (ndim -1: a name prefix) */
    ADD3(NULL, -1, 0, 0, 0, "model.visual.");
    ADD3(NULL, -1, 0, 0, 0, "mtp.");
#undef ADD3
    *out_specs = s;
    *out_n = n;
    return 0;
}

static int tensor_table(Model *m, TensorSpec **out_specs, int *out_n) {
    const Config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, d = c->head_dim;
    int qd = c->num_attention_heads * d, kvd = c->num_key_value_heads * d;
    int L = c->num_hidden_layers;
    int n = 0, cap = 11 * L + 8;
    TensorSpec *s = xcalloc((size_t)cap, sizeof(TensorSpec), "tensor table");
    if (!s) return -1;
    const char *pre = c->is_draft ? "" : "model.";
#define ADD(ptr, nd, s0, s1, ...) do { \
        snprintf(s[n].name, sizeof s[n].name, __VA_ARGS__); \
        s[n].ndim = nd; s[n].shape[0] = s0; s[n].shape[1] = s1; s[n].dst = ptr; n++; } while (0)
    if (c->hybrid) {
        free(s);
        return tensor_table_hybrid(m, out_specs, out_n);
    }
    if (!c->is_draft) ADD(&m->embed_tokens, 2, c->vocab_size, D, "model.embed_tokens.weight");
    for (int l = 0; l < L; l++) {
        LayerWeights *w = &m->layers[l];
        ADD(&w->input_layernorm, 1, D, 0, "%slayers.%d.input_layernorm.weight", pre, l);
        ADD(&w->q_proj, 2, qd, D, "%slayers.%d.self_attn.q_proj.weight", pre, l);
        ADD(&w->k_proj, 2, kvd, D, "%slayers.%d.self_attn.k_proj.weight", pre, l);
        ADD(&w->v_proj, 2, kvd, D, "%slayers.%d.self_attn.v_proj.weight", pre, l);
        ADD(&w->o_proj, 2, D, qd, "%slayers.%d.self_attn.o_proj.weight", pre, l);
        /* a Llama target has no q_norm / k_norm: a file holding them is refused */
        ADD(c->llama ? NULL : &w->q_norm, 1, d, 0, "%slayers.%d.self_attn.q_norm.weight", pre, l);
        ADD(c->llama ? NULL : &w->k_norm, 1, d, 0, "%slayers.%d.self_attn.k_norm.weight", pre, l);
        ADD(&w->post_attention_layernorm, 1, D, 0, "%slayers.%d.post_attention_layernorm.weight", pre, l);
        ADD(&w->gate_proj, 2, I, D, "%slayers.%d.mlp.gate_proj.weight", pre, l);
        ADD(&w->up_proj, 2, I, D, "%slayers.%d.mlp.up_proj.weight", pre, l);
        ADD(&w->down_proj, 2, D, I, "%slayers.%d.mlp.down_proj.weight", pre, l);
    }
    if (c->is_draft) {
        ADD(&m->fc, 2, D, (int64_t)c->n_target_layer_ids * D, "fc.weight");
        ADD(&m->hidden_norm, 1, D, 0, "hidden_norm.weight");
        ADD(&m->norm, 1, D, 0, "norm.weight");
    } else {
        ADD(&m->norm, 1, D, 0, "model.norm.weight");
        /* tied: lm_head is the embedding matrix, and a file that also holds
         * lm_head.weight is refused (which of the two would be meant?) */
        ADD(c->tie_word_embeddings ? NULL : &m->lm_head, 2, c->vocab_size, D, "lm_head.weight");
    }
#undef ADD
    *out_specs = s;
    *out_n = n;
    return 0;
}

static int64_t spec_numel(const TensorSpec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->shape[i];
    return n;
}

static int cmp_begin(const void *a, const void *b) {
    const TensorSpec *x = *(const TensorSpec *const *)a, *y = *(const TensorSpec *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static void shape_str(char *buf, size_t size, const int64_t *shape, int ndim) {
    int off = snprintf(buf, size, "[");
    for (int i = 0; i < ndim && off < (int)size; i++)
        off += snprintf(buf + off, size - (size_t)off, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (off < (int)size) snprintf(buf + off, size - (size_t)off, "]");
}

#define MAX_HEADER (100u << 20)   /* a safetensors header above 100 MiB is refused */

/* the safetensors dtypes: F32, BF16 and F16 are read; the others are named as such */
static const char *const SAFETENSORS_DTYPES[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64",
                                                 "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};

#define TIED_MSG "config.json says tie_word_embeddings: true (lm_head is the embedding matrix), but %s " \
                 "\"lm_head.weight\"; expected no lm_head.weight in a tied model"
#define LLAMA_MSG "config.json says architectures [\"LlamaForCausalLM\"] (no per-head q/k norms), but %s \"%s\"; " \
                  "expected no q_norm / k_norm in a Llama target"
/* the message for a tensor that must be absent (what: "the file also holds", ...) */
static void absent_error(const char *path, const char *name, const char *what) {
    if (strcmp(name, "lm_head.weight") == 0) dflash_set_error("%s: " TIED_MSG, path, what);
    else dflash_set_error("%s: " LLAMA_MSG, path, what, name);
}

/* a tensor the table ignores (a name prefix with ndim -1: a hybrid target's
 * model.visual.* and mtp.*) */
static int st_ignored(const TensorSpec *specs, int n_specs, const char *name) {
    for (int j = 0; j < n_specs; j++)
        if (specs[j].ndim < 0 && strncmp(name, specs[j].name, strlen(specs[j].name)) == 0) return 1;
    return 0;
}

/* st_check_file: buf is a whole safetensors file (len bytes), file number
 * `file` of the model (0 without an index; shard_names: the index's file
 * names, or NULL). Checks the 8-byte header length, the JSON header and every
 * entry against the table (names, dtype F32/BF16/F16, shapes from
 * config.json, offsets, and with an index: the shard the index names), and
 * that this file's tensors tile its data section exactly; sets .found,
 * .dtype, .begin, .end of the tensors it holds. *data_start (may be NULL)
 * gets 8 + header length. Reads nothing of the data section. */
static int st_check_file(const unsigned char *buf, size_t len, TensorSpec *specs, int n_specs,
                         const char *path, size_t *data_start, int file, const char *const *shard_names) {
    int rc = -1;
    TensorSpec **order = NULL;
    Json root = {0};
    char got[96];
    if (len < 8) {
        dflash_set_error("%s: expected at least the 8-byte header length, got a file of %zu bytes", path, len);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > MAX_HEADER) {  /* first: garbage lengths are named as such */
        dflash_set_error("%s: header length %llu is above the limit of %u bytes", path,
                         (unsigned long long)hlen, MAX_HEADER);
        return -1;
    }
    if (hlen > (uint64_t)(len - 8)) {
        dflash_set_error("%s: header length %llu is larger than the rest of the file (%zu bytes)", path,
                         (unsigned long long)hlen, len - 8);
        return -1;
    }
    const char *header = (const char *)buf + 8;
    char what[600];
    snprintf(what, sizeof what, "%.500s (header)", path);
    if (json_parse(header, (size_t)hlen, what, &root) != 0) return -1;
    if (root.type != JSON_OBJECT) {
        dflash_set_error("%s: header: expected a JSON object, got %s", path, json_describe(&root, got, sizeof got));
        goto done;
    }
    int64_t data_size = (int64_t)(len - 8 - hlen);
    int n_here = 0, n_ignored = 0;  /* ignored tensors (st_ignored) leave holes in the tiling */

    for (int i = 0; i < root.n; i++) {
        const char *name = root.keys[i];
        const Json *e = &root.items[i];
        if (strcmp(name, "__metadata__") == 0) {
            if (e->type != JSON_OBJECT) {
                dflash_set_error("%s: \"__metadata__\": expected an object of strings, got %s", path,
                                 json_describe(e, got, sizeof got));
                goto done;
            }
            continue;
        }
        TensorSpec *s = NULL;
        if (st_ignored(specs, n_specs, name)) { n_ignored++; continue; }
        for (int j = 0; j < n_specs; j++) if (strcmp(specs[j].name, name) == 0) s = &specs[j];
        if (!s) { dflash_set_error("%s: unexpected tensor \"%.200s\" (not part of this model)", path, name); goto done; }
        if (!s->dst) { absent_error(path, s->name, "the file also holds"); goto done; }
        if (shard_names && s->found) {
            dflash_set_error("%s: tensor \"%s\" is also in %s: expected every tensor in exactly one shard", path,
                             name, shard_names[s->shard]);
            goto done;
        }
        if (shard_names && s->shard != file) {
            dflash_set_error("%s: tensor \"%s\": model.safetensors.index.json puts it in %s, not in this shard", path,
                             name, shard_names[s->shard]);
            goto done;
        }
        const Json *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"), *off = json_get(e, "data_offsets");
        if (e->type != JSON_OBJECT || !dt || !sh || !off) {
            dflash_set_error("%s: tensor \"%s\": expected an object with \"dtype\", \"shape\" and \"data_offsets\", "
                             "got %s%s", path, name, json_describe(e, got, sizeof got),
                             e->type != JSON_OBJECT ? "" : !dt ? " without \"dtype\"" : !sh ? " without \"shape\""
                                                                                     : " without \"data_offsets\"");
            goto done;
        }
        int dtype = -1;
        for (int k = 0; dt->type == JSON_STRING && k < 3; k++)
            if (strcmp(dt->string, ST_READ_NAMES[k]) == 0) dtype = k;
        if (dtype < 0) {
            int known = 0;
            for (size_t k = 0; dt->type == JSON_STRING && k < sizeof SAFETENSORS_DTYPES / sizeof *SAFETENSORS_DTYPES; k++)
                known |= strcmp(dt->string, SAFETENSORS_DTYPES[k]) == 0;
            dflash_set_error("%s: tensor \"%s\": field \"dtype\": expected \"F32\", \"BF16\" or \"F16\", got %s%s", path,
                             name, json_describe(dt, got, sizeof got),
                             known ? " (a safetensors dtype this program does not read)"
                                   : dt->type == JSON_STRING ? " (not a safetensors dtype)" : "");
            goto done;
        }
        int ok = sh->type == JSON_ARRAY && sh->n == s->ndim;
        for (int k = 0; ok && k < sh->n; k++) {
            const Json *v = &sh->items[k];
            ok = v->type == JSON_NUMBER && v->is_integer && v->integer == s->shape[k];
        }
        if (!ok) {
            char want[64], have[160];
            shape_str(want, sizeof want, s->shape, s->ndim);
            if (sh->type != JSON_ARRAY) {
                json_describe(sh, have, sizeof have);
            } else {  /* the list as written, each item described */
                int o = snprintf(have, sizeof have, "[");
                for (int k = 0; k < sh->n && k < 8 && o < (int)sizeof have; k++)
                    o += snprintf(have + o, sizeof have - (size_t)o, "%s%s", k ? ", " : "",
                                  json_describe(&sh->items[k], got, sizeof got));
                if (o < (int)sizeof have) snprintf(have + o, sizeof have - (size_t)o, "%s]", sh->n > 8 ? ", ..." : "");
            }
            dflash_set_error("%s: tensor \"%s\": field \"shape\": expected %s (from config.json), got %s", path, name,
                             want, have);
            goto done;
        }
        const Json *b = off->type == JSON_ARRAY && off->n == 2 ? &off->items[0] : NULL;
        const Json *en = b ? &off->items[1] : NULL;
        if (!b || b->type != JSON_NUMBER || !b->is_integer || en->type != JSON_NUMBER || !en->is_integer ||
            b->integer < 0 || en->integer < b->integer) {
            char g1[44], g2[44];
            if (b) snprintf(got, sizeof got, "[%s, %s]", json_describe(b, g1, sizeof g1), json_describe(en, g2, sizeof g2));
            else json_describe(off, got, sizeof got);
            dflash_set_error("%s: tensor \"%s\": field \"data_offsets\": expected [begin, end] with "
                             "0 <= begin <= end, got %s", path, name, got);
            goto done;
        }
        if (en->integer > data_size) {
            dflash_set_error("%s: tensor \"%s\": field \"data_offsets\": expected end <= %lld (the data section), "
                             "got %lld (past the end of the file)", path, name, (long long)data_size, en->integer);
            goto done;
        }
        int esize = ST_READ_SIZES[dtype];
        if (en->integer - b->integer != spec_numel(s) * esize) {
            char sh_s[64];
            shape_str(sh_s, sizeof sh_s, s->shape, s->ndim);
            dflash_set_error("%s: tensor \"%s\": field \"data_offsets\": expected a span of %lld bytes "
                             "(shape %s x %d-byte %s), got %lld", path, name, (long long)spec_numel(s) * esize,
                             sh_s, esize, ST_READ_NAMES[dtype], en->integer - b->integer);
            goto done;
        }
        s->found = 1;
        s->shard = file;
        s->dtype = dtype;
        s->begin = b->integer;
        s->end = en->integer;
        n_here++;
    }
    if (!shard_names)
        for (int j = 0; j < n_specs; j++)
            if (!specs[j].found && specs[j].dst) {
                dflash_set_error("%s: missing tensor \"%s\"", path, specs[j].name);
                goto done;
            }

    /* this file's tensors must tile its data section exactly: no overlap, no hole, nothing after */
    order = xcalloc((size_t)(n_here ? n_here : 1), sizeof *order, "tensor order");
    if (!order) goto done;
    int k = 0;
    for (int j = 0; j < n_specs; j++)
        if (specs[j].found && specs[j].shard == file) order[k++] = &specs[j];
    qsort(order, (size_t)n_here, sizeof *order, cmp_begin);
    int64_t at = 0;
    for (int j = 0; j < n_here; j++) {
        if (order[j]->begin < at) {
            dflash_set_error("%s: tensor \"%s\" overlaps the previous tensor \"%s\" (begins at byte %lld, "
                             "expected %lld)", path, order[j]->name, order[j - 1]->name,
                             (long long)order[j]->begin, (long long)at);
            goto done;
        }
        if (order[j]->begin > at && !n_ignored) {
            dflash_set_error("%s: hole of %lld bytes before tensor \"%s\" (begins at byte %lld, expected %lld)", path,
                             (long long)(order[j]->begin - at), order[j]->name, (long long)order[j]->begin,
                             (long long)at);
            goto done;
        }
        at = order[j]->end;
    }
    if (at != data_size && !(n_ignored && at < data_size)) {
        dflash_set_error("%s: %lld trailing bytes after the last tensor (expected the data section to end at "
                         "byte %lld, got %lld)", path, (long long)(data_size - at), (long long)at,
                         (long long)data_size);
        goto done;
    }
    if (data_start) *data_start = (size_t)(8 + hlen);
    rc = 0;
done:
    free(order);
    json_free(&root);
    return rc;
}

/* safetensors_check_header: one whole model.safetensors (no index): every
 * tensor of the table must be in it. The whole parser a fuzzer needs. */
static int safetensors_check_header(const unsigned char *buf, size_t len, TensorSpec *specs, int n_specs,
                                    const char *path, size_t *data_start) {
    for (int j = 0; j < n_specs; j++) specs[j].found = 0, specs[j].shard = 0;
    return st_check_file(buf, len, specs, n_specs, path, data_start, 0, NULL);
}

/* st_map: a regular file mapped read/write private (a write, e.g. a test
 * poking a weight, is copy-on-write, never to disk) */
/* The weight files mapped now, for the SIGBUS handler: F32 tensors are
 * used in place, so a file that shrinks under a running program (a
 * re-download, a regeneration) makes the next read of a page past its new
 * end raise SIGBUS. load_mapped_file names the file; async-signal-safe. */
typedef struct {
    const unsigned char *start;
    size_t len;
    char path[512];
} MappedFile;
static MappedFile mapped[256];
static volatile sig_atomic_t n_mapped;

static void mapped_add(const unsigned char *start, size_t len, const char *path) {
    if (n_mapped == (sig_atomic_t)(sizeof mapped / sizeof mapped[0])) return;  /* unnamed then, still handled */
    MappedFile *m = &mapped[n_mapped];
    m->start = start;
    m->len = len;
    size_t n = strlen(path) < sizeof m->path - 1 ? strlen(path) : sizeof m->path - 1;
    memcpy(m->path, path, n);
    m->path[n] = '\0';
    n_mapped = n_mapped + 1;
}

/* munmap, and forget the mapping */
static void unmap(void *start, size_t len) {
    for (int i = 0; i < n_mapped; i++) {
        if (mapped[i].start != start) continue;
        mapped[i] = mapped[n_mapped - 1];
        n_mapped = n_mapped - 1;
        break;
    }
    munmap(start, len);
}

const char *load_mapped_file(const void *addr) {
    const unsigned char *a = addr;
    for (int i = 0; i < n_mapped; i++)
        if (a >= mapped[i].start && a < mapped[i].start + mapped[i].len) return mapped[i].path;
    return NULL;
}

static unsigned char *st_map(const char *path, size_t *size) {
    size_t st_size;
    int fd = file_open_fd(path, &st_size);  /* a FIFO must not block the open */
    if (fd < 0) return NULL;
    int64_t fsize = (int64_t)st_size;
    if (fsize < 8) {  /* also keeps mmap away from an empty file */
        close(fd);
        dflash_set_error("%s: expected at least the 8-byte header length, got a file of %lld bytes", path,
                         (long long)fsize);
        return NULL;
    }
    unsigned char *map = mmap(NULL, (size_t)fsize, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) { dflash_set_error("%s: cannot map: %s", path, strerror(errno)); return NULL; }
    mapped_add(map, (size_t)fsize, path);
    *size = (size_t)fsize;
    return map;
}

/* Widening to float, exact: BF16 is the top half of an F32; an F16 normal
 * number gets its exponent rebiased and its 10-bit mantissa shifted, a
 * subnormal is mantissa x 2^-24 (exact in float). Inf and NaN are refused
 * before this is called. */
static float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float f16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (e == 0) {
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    uint32_t u = sign | (e - 15 + 127) << 23 | man << 13;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* element i of a tensor as a float, and whether it is finite */
static float st_elem(const unsigned char *src, int dtype, int64_t i, int *finite) {
    if (dtype == ST_F32) {
        float x;
        memcpy(&x, src + 4 * i, 4);
        *finite = x - x == 0;  /* 0 for every finite x, NaN for NaN and Inf */
        return x;
    }
    uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
    if (dtype == ST_BF16) {
        *finite = (h & 0x7f80) != 0x7f80;
        return *finite ? bf16_to_float(h) : 0;
    }
    *finite = (h & 0x7c00) != 0x7c00;
    return *finite ? f16_to_float(h) : 0;
}

/* st_nonfinite_name: what a refused element is, for the message */
static const char *st_nonfinite_name(const unsigned char *src, int dtype, int64_t i) {
    if (dtype == ST_F32) {
        float x;
        memcpy(&x, src + 4 * i, 4);
        return isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf";
    }
    uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
    int nan = dtype == ST_BF16 ? (h & 0x7f) != 0 : (h & 0x3ff) != 0;
    return nan ? "NaN" : h & 0x8000 ? "-Inf" : "+Inf";
}

/* st_read_index: dir/model.safetensors.index.json. Gives every tensor of the
 * table its shard (specs[].shard) and the list of shard file names (each
 * a plain file name in dir, malloc'd). 0, or -1 with dflash_errmsg. */

static int st_read_index(const char *path, TensorSpec *specs, int n_specs, char **names, int *n_names) {
    size_t len;
    char *text;
    if (file_read_max(path, 64u << 20, &text, &len) != 0) return -1;
    Json root;
    int rc = json_parse(text, len, path, &root);
    free(text);
    if (rc != 0) return -1;
    rc = -1;
    char got[96];
    const Json *wm = root.type == JSON_OBJECT ? json_get(&root, "weight_map") : NULL;
    if (!wm || wm->type != JSON_OBJECT) {
        if (root.type != JSON_OBJECT) dflash_set_error("%s: expected a JSON object, got %s", path, json_describe(&root, got, sizeof got));
        else if (!wm) dflash_set_error("%s: missing field \"weight_map\" (expected an object: tensor name -> shard file)", path);
        else dflash_set_error("%s: field \"weight_map\": expected an object (tensor name -> shard file), got %s", path,
                              json_describe(wm, got, sizeof got));
        goto done;
    }
    for (int j = 0; j < n_specs; j++) specs[j].found = 0, specs[j].shard = -1;
    for (int i = 0; i < wm->n; i++) {
        const char *name = wm->keys[i];
        const Json *f = &wm->items[i];
        TensorSpec *s = NULL;
        if (st_ignored(specs, n_specs, name)) continue;
        for (int j = 0; j < n_specs; j++) if (strcmp(specs[j].name, name) == 0) s = &specs[j];
        if (!s) { dflash_set_error("%s: field \"weight_map\": unexpected tensor \"%.200s\" (not part of this model)", path, name); goto done; }
        if (!s->dst) { absent_error(path, s->name, "the index also names"); goto done; }
        if (f->type != JSON_STRING || !f->string[0] || strchr(f->string, '/') || strcmp(f->string, ".") == 0 ||
            strcmp(f->string, "..") == 0 || strlen(f->string) > 255) {
            dflash_set_error("%s: field \"weight_map\": tensor \"%s\": expected the name of a file in this folder, got %s",
                             path, name, json_describe(f, got, sizeof got));
            goto done;
        }
        int k = 0;
        while (k < *n_names && strcmp(names[k], f->string) != 0) k++;
        if (k == *n_names) {
            if (k == DFLASH_MAX_SHARDS) { dflash_set_error("%s: more than %d shard files", path, DFLASH_MAX_SHARDS); goto done; }
            names[k] = malloc(strlen(f->string) + 1);
            if (!names[k]) { dflash_set_error("%s: out of memory", path); goto done; }
            strcpy(names[k], f->string);
            (*n_names)++;
        }
        s->shard = k;
    }
    for (int j = 0; j < n_specs; j++)
        if (specs[j].dst && specs[j].shard < 0) {
            dflash_set_error("%s: field \"weight_map\": missing tensor \"%s\"", path, specs[j].name);
            goto done;
        }
    rc = 0;
done:
    json_free(&root);
    return rc;
}

/* advise_huge: ask the kernel for 2 MB pages for a large block the loader
 * fills (the weights a double build widens): one page fault per 2 MB rather
 * than per 4 KB, where transparent huge pages are "madvise" (Debian's
 * default). Only a hint: the bytes are the same either way. */
static void advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096, a = ((uintptr_t)p + page - 1) / page * page, end = (uintptr_t)p + bytes;
    if (end > a + page) (void)madvise((void *)a, (end - a) / page * page, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* safetensors_load: dir/model.safetensors, or the shards listed in
 * dir/model.safetensors.index.json. Every header is checked against the
 * table first, then every tensor is read into its place: F32 weights stay in
 * the mapping (float build); BF16 and F16 (and everything in the double
 * build) are widened exactly into Model.data. NaN and Inf are refused. */
static int safetensors_load(const char *dir, TensorSpec *specs, int n_specs, Model *m) {
    char path[4200], index[4200];
    char *names[DFLASH_MAX_SHARDS];
    unsigned char *maps[DFLASH_MAX_SHARDS];
    size_t sizes[DFLASH_MAX_SHARDS], starts[DFLASH_MAX_SHARDS];
    int n_files = 0, rc = -1, use_index;
    memset(maps, 0, sizeof maps);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    use_index = access(index, F_OK) == 0;
    if (use_index) {
        if (st_read_index(index, specs, n_specs, names, &n_files) != 0) goto done;
    } else {
        names[0] = malloc(sizeof "model.safetensors");
        if (!names[0]) { dflash_set_error("%s: out of memory", dir); goto done; }
        strcpy(names[0], "model.safetensors");
        n_files = 1;
        for (int j = 0; j < n_specs; j++) specs[j].found = 0, specs[j].shard = 0;
    }
    for (int f = 0; f < n_files; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        maps[f] = st_map(path, &sizes[f]);
        if (!maps[f]) {
            if (use_index) {  /* say where the name came from */
                char msg[sizeof dflash_errmsg];
                memcpy(msg, dflash_errmsg, sizeof msg);
                dflash_set_error("%.900s (a shard listed in model.safetensors.index.json)", msg);
            }
            goto done;
        }
        if (use_index ? st_check_file(maps[f], sizes[f], specs, n_specs, path, &starts[f], f,
                                      (const char *const *)names)
                      : safetensors_check_header(maps[f], sizes[f], specs, n_specs, path, &starts[f]))
            goto done;
    }
    for (int j = 0; j < n_specs; j++)
        if (specs[j].dst && !specs[j].found) {
            snprintf(path, sizeof path, "%s/%s", dir, names[specs[j].shard]);
            dflash_set_error("%s: missing tensor \"%s\" (model.safetensors.index.json puts it in this shard)", path,
                             specs[j].name);
            goto done;
        }

    /* where each tensor goes: in place (F32, float build, 4-byte aligned in
     * the page-aligned mapping) or widened into Model.data */
    size_t total = 0;
    int keep[DFLASH_MAX_SHARDS];
    memset(keep, 0, sizeof keep);
    for (int j = 0; j < n_specs; j++) {
        TensorSpec *s = &specs[j];
        if (!s->dst) continue;
        int in_place = sizeof(real) == sizeof(float) && s->dtype == ST_F32 && (starts[s->shard] + (size_t)s->begin) % 4 == 0;
        if (in_place) keep[s->shard] = 1;
        else total += (size_t)spec_numel(s);
    }
    if (total) {
        m->data = xcalloc(total, sizeof(real), "weights");
        if (!m->data) goto done;
        advise_huge(m->data, total * sizeof(real));
    }
    real *conv = m->data;
    for (int j = 0; j < n_specs; j++) {
        TensorSpec *s = &specs[j];
        if (!s->dst) continue;
        int64_t numel = spec_numel(s);
        const unsigned char *src = maps[s->shard] + starts[s->shard] + s->begin;
        int in_place = sizeof(real) == sizeof(float) && s->dtype == ST_F32 && (starts[s->shard] + (size_t)s->begin) % 4 == 0;
        int nonfinite = 0, fin;
        if (s->dtype == ST_F32) {
            /* NaN and Inf are the floats whose 8 exponent bits are all ones.
             * Checked 16 values at a time into 16 flags (a fixed-length inner
             * loop the compiler turns into vector instructions at -O2; a plain
             * loop over numel was left scalar, and this scan of every weight was
             * half the default run's time) */
            uint32_t flag[16] = {0};
            int64_t i = 0;
            for (; i + 16 <= numel; i += 16)
                for (int k = 0; k < 16; k++) {
                    uint32_t u;
                    memcpy(&u, src + 4 * (i + k), 4);
                    flag[k] |= (u & 0x7f800000u) == 0x7f800000u;
                }
            for (; i < numel; i++) {
                uint32_t u;
                memcpy(&u, src + 4 * i, 4);
                flag[0] |= (u & 0x7f800000u) == 0x7f800000u;
            }
            for (int k = 0; k < 16; k++) nonfinite |= flag[k] != 0;
            if (!in_place)
                for (i = 0; i < numel; i++) conv[i] = (real)st_elem(src, s->dtype, i, &fin);
        } else {   /* BF16, F16: widened one by one */
            for (int64_t i = 0; i < numel; i++) { conv[i] = (real)st_elem(src, s->dtype, i, &fin); nonfinite |= !fin; }
        }
        if (nonfinite)
            for (int64_t i = 0; i < numel; i++) {
                (void)st_elem(src, s->dtype, i, &fin);
                if (!fin) {
                    snprintf(path, sizeof path, "%s/%s", dir, names[s->shard]);
                    dflash_set_error("%s: tensor \"%s\": element %lld: expected a finite %s, got %s", path, s->name,
                                     (long long)i, ST_READ_NAMES[s->dtype], st_nonfinite_name(src, s->dtype, i));
                    goto done;
                }
            }
        if (in_place) {
            *s->dst = (real *)(void *)(maps[s->shard] + starts[s->shard] + s->begin);
        } else {
            *s->dst = conv;
            conv += numel;
        }
    }
    /* keep the mappings F32 weights point into; the others are done with */
    for (int f = 0; f < n_files; f++)
        if (keep[f]) {
            m->map[m->n_maps] = maps[f];
            m->map_size[m->n_maps++] = sizes[f];
            maps[f] = NULL;
        }
    rc = 0;
done:
    for (int f = 0; f < n_files; f++) {
        if (maps[f]) unmap(maps[f], sizes[f]);
        free(names[f]);
    }
    return rc;
}

static int host_is_little_endian(void) {
    uint32_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* model_load: dir/config.json and dir/model.safetensors (or its shards). */
int model_load(Model *m, const char *dir, int expect_draft) {
    memset(m, 0, sizeof *m);
    if (!host_is_little_endian()) { dflash_set_error("this program reads little-endian files on little-endian hosts only"); return -1; }
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text;
    if (file_read_max(path, 1 << 20, &text, &len) != 0) return -1;
    int rc = config_parse(&m->cfg, path, text, len, expect_draft);
    free(text);
    if (rc != 0) return -1;

    TensorSpec *specs = NULL;
    int n_specs = 0;
    m->layers = xcalloc((size_t)m->cfg.num_hidden_layers, sizeof(LayerWeights), "layers");
    m->inv_freq = xcalloc((size_t)m->cfg.head_dim / 2, sizeof(real), "inv_freq");
    if (!m->layers || !m->inv_freq || tensor_table(m, &specs, &n_specs) != 0) goto fail;
    size_t total = 0;
    for (int j = 0; j < n_specs; j++) if (specs[j].dst) total += (size_t)spec_numel(&specs[j]);
    /* 2^36 parameters (256 GiB as float) is far above any model this runs */
    if ((uint64_t)total > ((uint64_t)1 << 36) || total > SIZE_MAX / 2 / sizeof(real)) {
        dflash_set_error("%s: model too large (%zu parameters)", dir, total);
        goto fail;
    }
    m->n_params = total;
    if (safetensors_load(dir, specs, n_specs, m) != 0) goto fail;
    if (m->cfg.tie_word_embeddings && !m->cfg.is_draft) {
        m->lm_head = m->embed_tokens;  /* the same matrix, no copy */
        m->tied = 1;
    }
    /* a hybrid target rotates the first rotary_dim dims only: inv_freq has rotary_dim/2 entries */
    int rope_dims = m->cfg.hybrid ? m->cfg.rotary_dim : m->cfg.head_dim;
    rope_inv_freq(m->inv_freq, rope_dims, m->cfg.rope_theta);
    if (m->cfg.rope_llama3) rope_llama3(m->inv_freq, m->cfg.head_dim, &m->cfg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (check_rope(m->inv_freq, rope_dims, m->cfg.rope_theta, m->cfg.max_position_embeddings, path) != 0) goto fail;
    free(specs);
    return 0;
fail:
    free(specs);
    model_free(m);
    return -1;
}

int config_load(Config *c, const char *path, int expect_draft) {
    size_t len;
    char *text;
    if (file_read_max(path, 1 << 20, &text, &len) != 0) return -1;
    int rc = config_parse(c, path, text, len, expect_draft);
    free(text);
    return rc;
}

void model_free(Model *m) {
    free(m->data);
    for (int i = 0; i < m->n_maps; i++) unmap(m->map[i], m->map_size[i]);
    free(m->layers);
    free(m->inv_freq);
    memset(m, 0, sizeof *m);
}
/* check_pair: the draft and the target must agree where they share tensors. */
int check_pair(const Model *target, const Model *draft) {
    const Config *t = &target->cfg, *d = &draft->cfg;
    const char *field = NULL, *their = NULL;
    int want = 0, got = 0;
    if (d->hidden_size != t->hidden_size) {
        field = "hidden_size", their = "hidden_size", want = t->hidden_size, got = d->hidden_size;
    } else if (d->vocab_size != t->vocab_size) {
        field = "vocab_size", their = "vocab_size", want = t->vocab_size, got = d->vocab_size;
    } else if (d->num_target_layers != t->num_hidden_layers) {
        field = "num_target_layers", their = "num_hidden_layers", want = t->num_hidden_layers, got = d->num_target_layers;
    }
    if (field) {
        dflash_set_error("draft config.json: field \"%s\": expected %d (the target config.json's %s), got %d",
                         field, want, their, got);
        return -1;
    }
    return 0;
}

/* ---- vocab.txt: one token per line, line number = token id */

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The Unicode White_Space characters beyond ASCII ("U+00A0 (NO-BREAK
 * SPACE)"), or NULL: a token holding one prints as two words. s: a valid
 * UTF-8 sequence of sl bytes. */
static const char *unicode_space(const unsigned char *s, int sl) {
    static const struct { uint32_t cp; const char *name; } SPACES[] = {
        {0x85, "U+0085 (NEXT LINE)"}, {0xA0, "U+00A0 (NO-BREAK SPACE)"}, {0x1680, "U+1680 (OGHAM SPACE MARK)"},
        {0x2000, "U+2000 (EN QUAD)"}, {0x2001, "U+2001 (EM QUAD)"}, {0x2002, "U+2002 (EN SPACE)"},
        {0x2003, "U+2003 (EM SPACE)"}, {0x2004, "U+2004 (THREE-PER-EM SPACE)"},
        {0x2005, "U+2005 (FOUR-PER-EM SPACE)"}, {0x2006, "U+2006 (SIX-PER-EM SPACE)"},
        {0x2007, "U+2007 (FIGURE SPACE)"}, {0x2008, "U+2008 (PUNCTUATION SPACE)"}, {0x2009, "U+2009 (THIN SPACE)"},
        {0x200A, "U+200A (HAIR SPACE)"}, {0x2028, "U+2028 (LINE SEPARATOR)"},
        {0x2029, "U+2029 (PARAGRAPH SEPARATOR)"}, {0x202F, "U+202F (NARROW NO-BREAK SPACE)"},
        {0x205F, "U+205F (MEDIUM MATHEMATICAL SPACE)"}, {0x3000, "U+3000 (IDEOGRAPHIC SPACE)"},
    };
    if (sl < 2) return NULL;
    uint32_t cp = s[0] & (0x7F >> sl);
    for (int b = 1; b < sl; b++) cp = cp << 6 | (s[b] & 0x3F);
    for (size_t i = 0; i < sizeof SPACES / sizeof SPACES[0]; i++)
        if (SPACES[i].cp == cp) return SPACES[i].name;
    return NULL;
}

/* vocab_parse: text (len bytes + a NUL, malloc'd) becomes v's storage,
 * also on failure (then it is freed). */
static int vocab_parse(Vocab *v, const char *path, char *text, size_t len) {
    memset(v, 0, sizeof *v);
    if (len == 0) { free(text); dflash_set_error("%s: empty (expected one token per line)", path); return -1; }
    if (memchr(text, 0, len)) { free(text); dflash_set_error("%s: contains a NUL byte", path); return -1; }
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {  /* it would silently become part of token 0 */
        free(text);
        dflash_set_error("%s: line 1 (token id 0): starts with a UTF-8 byte order mark; save the file without BOM", path);
        return -1;
    }
    int lines = 0;
    for (size_t i = 0; i < len; i++) if (text[i] == '\n') lines++;
    if (text[len - 1] != '\n') lines++;
    v->text = text;
    v->words = xcalloc((size_t)lines, sizeof(char *), "vocab");
    if (!v->words) { vocab_free(v); return -1; }
    char *s = text;
    for (int i = 0; i < lines; i++) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = 0;
        size_t wl = strlen(s);
        if (wl && s[wl - 1] == '\r') s[--wl] = 0;
        if (wl == 0) { dflash_set_error("%s: line %d (token id %d) is empty", path, i + 1, i); vocab_free(v); return -1; }
        for (size_t k = 0; k < wl; k++)
            if (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\v' || s[k] == '\f') {
                dflash_set_error("%s: line %d (token id %d) contains white space", path, i + 1, i);
                vocab_free(v);
                return -1;
            }
        for (size_t k = 0; k < wl;) {
            int sl = utf8_seq_len((const unsigned char *)s + k, wl - k);
            if (sl == 0 || (unsigned char)s[k] < 0x20 || s[k] == 0x7f) {
                dflash_set_error("%s: line %d (token id %d): expected printable UTF-8, got byte 0x%02x at "
                                 "column %zu", path, i + 1, i, (unsigned char)s[k], k + 1);
                vocab_free(v);
                return -1;
            }
            const char *space = unicode_space((const unsigned char *)s + k, sl);
            if (space) {
                dflash_set_error("%s: line %d (token id %d) contains white space %s at column %zu (a token must be "
                                 "one word a prompt can spell)", path, i + 1, i, space, k + 1);
                vocab_free(v);
                return -1;
            }
            k += (size_t)sl;
        }
        v->words[i] = s;
        v->n = i + 1;
        s = nl ? nl + 1 : s + wl;
    }
    /* duplicates: sort a copy of the word pointers, then name both ids */
    const char **sorted = malloc(sizeof(char *) * (size_t)v->n);
    if (!sorted) { dflash_set_error("%s: out of memory", path); vocab_free(v); return -1; }
    memcpy(sorted, v->words, sizeof(char *) * (size_t)v->n);
    qsort(sorted, (size_t)v->n, sizeof(char *), cmp_str);
    for (int i = 1; i < v->n; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            int first = vocab_find(v, sorted[i]), second = first + 1;
            while (strcmp(v->words[second], sorted[i]) != 0) second++;
            dflash_set_error("%s: token \"%.100s\" appears more than once (ids %d and %d)", path, sorted[i],
                             first, second);
            free(sorted);
            vocab_free(v);
            return -1;
        }
    free(sorted);
    return 0;
}

int vocab_load(Vocab *v, const char *path) {
    memset(v, 0, sizeof *v);
    size_t len;
    char *text;
    if (file_read_max(path, 64u << 20, &text, &len) != 0) return -1;
    return vocab_parse(v, path, text, len);
}

/* check_vocab: vocab.txt against the configs. It must have the target's
 * vocab_size tokens, and, when a draft is loaded, the draft's mask_token_id
 * must be the id of the token "<mask>" (a vocab without "<mask>", or with a
 * different word at that id, is refused: the draft would read a real word as
 * its mask). draft may be NULL (block size 1, --mode ar): no mask check. */
int check_vocab(const Vocab *v, const char *path, const Model *target, const Model *draft) {
    if (v->n != target->cfg.vocab_size) {
        dflash_set_error("%s: expected %d tokens (vocab_size in the target config.json), got %d", path,
                         target->cfg.vocab_size, v->n);
        return -1;
    }
    if (draft) {
        int mask = draft->cfg.mask_token_id, at = vocab_find(v, "<mask>");
        if (mask < 0 || mask >= v->n || strcmp(v->words[mask], "<mask>") != 0) {
            if (at < 0)
                dflash_set_error("%s: no token \"<mask>\", but the draft config.json names mask_token_id %d "
                                 "(expected \"<mask>\" on line %d)", path, mask, mask + 1);
            else
                dflash_set_error("%s: token id %d (the draft's mask_token_id): expected \"<mask>\", got \"%.100s\" "
                                 "(\"<mask>\" is id %d)", path, mask, mask >= 0 && mask < v->n ? v->words[mask] : "",
                                 at);
            return -1;
        }
    }
    return 0;
}

void vocab_free(Vocab *v) {
    free(v->words);
    free(v->text);
    memset(v, 0, sizeof *v);
}

int vocab_find(const Vocab *v, const char *word) {
    for (int i = 0; i < v->n; i++) if (v->words[i] && strcmp(v->words[i], word) == 0) return i;
    return -1;
}

/* tokenize: split on white space; every "." is a token of its own. */
int tokenize(const Vocab *v, const char *text, int *ids, int cap, int *n_ids) {
    int n = 0, word_no = 0;
    const char *s = text;
    char word[256];
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f') s++;
        if (!*s) break;
        size_t wl = 0;
        if (*s == '.') wl = 1;
        else
            while (s[wl] && s[wl] != '.' && s[wl] != ' ' && s[wl] != '\t' && s[wl] != '\n' &&
                   s[wl] != '\r' && s[wl] != '\v' && s[wl] != '\f')
                wl++;
        if (wl >= sizeof word) {
            dflash_set_error("--prompt: word %d (\"%.40s...\"): expected a word from vocab.txt, got %zu bytes, "
                             "longer than any (%zu); give token ids with --ids", word_no + 1, s, wl, sizeof word - 1);
            return -1;
        }
        memcpy(word, s, wl);
        word[wl] = 0;
        int id = vocab_find(v, word);
        if (id < 0) {
            dflash_set_error("--prompt: word %d, \"%s\", is not in the vocabulary; "
                             "use words from vocab.txt, or give token ids with --ids", word_no + 1, word);
            return -1;
        }
        if (n >= cap) { dflash_set_error("--prompt: expected at most %d tokens, got more", cap); return -1; }
        ids[n++] = id;
        word_no++;
        s += wl;
    }
    if (n == 0) { dflash_set_error("--prompt: expected at least one word, got an empty prompt"); return -1; }
    *n_ids = n;
    return 0;
}


/* ---- stop tokens: generation_config.json, then config.json */

/* stop_ids_default: the target folder's generation_config.json eos_token_id
 * (an int or a list) when the file has one, else the target config.json's
 * eos_token_id; *n = 0 when neither names one. `from` gets the file used.
 * A generation_config.json that is not valid JSON, not an object, or whose
 * eos_token_id is not a token id (or a list of them) is refused. */
int stop_ids_default(const char *target_dir, const Model *target, int *ids, int *n, char *from, size_t from_size) {
    char path[4200], got[96];
    *n = 0;
    snprintf(path, sizeof path, "%s/generation_config.json", target_dir);
    if (access(path, F_OK) == 0) {
        size_t len;
        char *text;
        if (file_read_max(path, 1 << 20, &text, &len) != 0) return -1;
        Json root;
        int rc = json_parse(text, len, path, &root);
        free(text);
        if (rc != 0) return -1;
        rc = -1;
        const Json *eos = root.type == JSON_OBJECT ? json_get(&root, "eos_token_id") : NULL;
        if (root.type != JSON_OBJECT) {
            dflash_set_error("%s: expected a JSON object, got %s", path, json_describe(&root, got, sizeof got));
        } else if (eos && eos->type != JSON_NULL) {
            int cnt = eos->type == JSON_ARRAY ? eos->n : 1, V = target->cfg.vocab_size;
            rc = 0;
            for (int i = 0; i < (cnt < 1 ? 1 : cnt) && rc == 0; i++) {
                const Json *v = eos->type == JSON_ARRAY && cnt >= 1 ? &eos->items[i] : eos;
                if (cnt < 1 || cnt > DFLASH_MAX_STOP || v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 ||
                    v->integer >= V) {
                    dflash_set_error("%s: field \"eos_token_id\": expected a token id in 0..%d (the target's "
                                     "vocab_size - 1) or a list of 1..%d of them, got %s", path, V - 1,
                                     DFLASH_MAX_STOP, json_describe(cnt < 1 || cnt > DFLASH_MAX_STOP ? eos : v, got, sizeof got));
                    rc = -1;
                } else {
                    ids[(*n)++] = (int)v->integer;
                }
            }
            if (rc == 0) snprintf(from, from_size, "%.4000s", path);
        } else {
            rc = 1;  /* no eos_token_id: config.json's */
        }
        json_free(&root);
        if (rc <= 0) return rc;
        *n = 0;
    }
    for (int i = 0; i < target->cfg.n_eos; i++) ids[(*n)++] = target->cfg.eos_token_id[i];
    if (*n) snprintf(from, from_size, "%.4000s/config.json", target_dir);
    return 0;
}

/* ---- tokenizer.json, for decoding output ids: tokenizer/tokenizer.c reads it
 * (tok_load_decoder: a toy set's file without merges or pre-tokenizer is
 * fine for decoding), and v->words[id] holds each id's bytes: model.vocab's
 * byte-level strings decoded, added_tokens' content as is; v->n = highest
 * id + 1 (ids without a token print as "<id>"). */
void byte_vocab_free(ByteVocab *v) {
    free(v->words);
    free(v->lens);
    free(v->text);
    memset(v, 0, sizeof *v);
}

int byte_vocab_from(ByteVocab *v, const Tokenizer *t, const char *path) {
    size_t total = 0;
    memset(v, 0, sizeof *v);
    if (t->n_ids > MAX_VOCAB) {
        dflash_set_error("%s: token id %d: expected ids below %d", path, t->n_ids - 1, MAX_VOCAB);
        return -1;
    }
    for (int i = 0; i < t->n_ids; i++) if (t->bytes[i]) total += (size_t)t->len[i] + 1;
    v->n = t->n_ids;
    v->words = xcalloc((size_t)(v->n ? v->n : 1), sizeof(char *), "tokenizer vocabulary");
    v->lens = xcalloc((size_t)(v->n ? v->n : 1), sizeof(int), "tokenizer vocabulary");
    v->text = malloc(total ? total : 1);
    if (!v->words || !v->lens || !v->text) { dflash_set_error("%s: out of memory", path); byte_vocab_free(v); return -1; }
    char *at = v->text;
    for (int i = 0; i < t->n_ids; i++) {
        if (!t->bytes[i]) continue;
        memcpy(at, t->bytes[i], (size_t)t->len[i] + 1);
        v->words[i] = at;
        v->lens[i] = t->len[i];
        at += t->len[i] + 1;
    }
    return 0;
}

int tokenizer_json_load(ByteVocab *v, const char *path) {
    Tokenizer t;
    memset(v, 0, sizeof *v);
    if (tok_load_decoder(&t, path) != 0) return -1;
    int rc = byte_vocab_from(v, &t, path);
    tok_free(&t);
    return rc;
}

void config_write_rope_scaling(FILE *f, const Config *c) {
    if (!c->rope_llama3) {
        fprintf(f, "  \"rope_scaling\": null,\n");
        return;
    }
    char fa[40], lo[40], hi[40];
    json_number(fa, sizeof fa, c->rope_factor);
    json_number(lo, sizeof lo, c->rope_low_freq_factor);
    json_number(hi, sizeof hi, c->rope_high_freq_factor);
    fprintf(f, "  \"rope_scaling\": {\"factor\": %s, \"high_freq_factor\": %s, \"low_freq_factor\": %s, "
               "\"original_max_position_embeddings\": %d, \"rope_type\": \"llama3\"},\n", fa, hi, lo,
            c->rope_original_max_position_embeddings);
}
