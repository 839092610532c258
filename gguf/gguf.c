/* gguf/gguf.c - `dflash gguf`: a weight set written as the two GGUF files
 * llama.cpp's DFlash loads (target.gguf: architecture qwen3; draft.gguf:
 * architecture dflash), laid out as llama.cpp's own converter lays them out
 * (convert_hf_to_gguf.py, classes Qwen3Model and DFlashModel; NOTES.md,
 * "GGUF", names the commit followed and every rule below). A hybrid target
 * (Qwen3_5ForCausalLM) is written as architecture qwen35, as the converter's
 * Qwen3_5TextModel writes it: its tensor names, the zero-centred norms as
 * 1 + w, A_log as -exp(A_log), conv1d squeezed to 2-D and F32, and the value
 * heads of the Gated DeltaNet tensors reordered from grouped by key head to
 * tiled (_LinearAttentionVReorderBase).
 *
 * The file (GGUF v3, little-endian, alignment 32):
 *   "GGUF" u32 version=3, u64 n_tensors, u64 n_kv,
 *   n_kv x (string key, u32 type, value),      string = u64 length + bytes
 *   n_tensors x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset),
 *   zero padding to 32, then the data, each tensor at its offset (a multiple
 *   of 32, counted from the start of the data).
 * ne is the numpy shape reversed (ne[0] is the fastest index): a linear weight
 * of shape (out, in) is ne = {in, out}; the bytes are the safetensors bytes,
 * unchanged, except that 1-D tensors (the norms) are written F32 as the
 * converter writes them (BF16 and F16 widen exactly).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dflash.h"
#include "formats/files.h"
#include "gguf/gguf.h"
#include "cli/flags.h"
#include "formats/json.h"
#include "formats/load.h"

#define GGUF_ALIGN 32
enum { GV_U32 = 4, GV_I32 = 5, GV_F32 = 6, GV_BOOL = 7, GV_STRING = 8, GV_ARRAY = 9 };  /* gguf value types */
enum { GT_F32 = 0, GT_F16 = 1, GT_BF16 = 30 };                                        /* ggml tensor types */
enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5 };          /* llama token types */

/* ---------------------------------------------------------------------------
 * The safetensors tensors of one model folder, raw (model_load has validated
 * them already; this re-reads the headers only to find each tensor's bytes).
 */
typedef struct {
    char hf[160];          /* the safetensors name */
    char name[96];         /* the GGUF name */
    int file;              /* index into Source.files */
    int dtype, type;       /* source and GGUF ggml type */
    int ndim;
    uint64_t shape[2];     /* numpy order (a conv1d's (C, 1, K) squeezed to (C, K)) */
    /* qwen35 only: the value transform (XF_*), and the value-head reorder:
     * rows vrow0.. (or, vcols, the columns) in heads of vhd elements */
    int xform, vreorder, vcols, hk;
    uint64_t vrow0, vhd;
    uint64_t src_off, src_bytes, out_off, out_bytes;
} Tensor;

typedef struct {
    int n_files;
    char *paths[DFLASH_MAX_SHARDS];
    FILE *files[DFLASH_MAX_SHARDS];
    int n, cap;
    Tensor *t;
} Source;

static void source_free(Source *s) {
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i]) fclose(s->files[i]);
        free(s->paths[i]);
    }
    free(s->t);
    memset(s, 0, sizeof *s);
}

static uint64_t le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/* The GGUF name of a Hugging Face tensor name (Qwen3's tensor map in gguf-py,
 * and DFlashModel.modify_tensors: fc.weight stays, hidden_norm.weight is
 * enc.output_norm.weight). -1 with dflash_errmsg for a name it has none for. */
enum { XF_NONE, XF_PLUS1, XF_NEG_EXP };   /* the converter's value transforms (qwen35) */

/* The hybrid target's layout, when the target being written is one (NULL: qwen3) */
typedef struct { int hk, hv, dk, dv; } Hybrid;

static int gguf_name(const char *hf, int draft, char *out, size_t size) {
    static const char *const layer_map[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"},  {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},    {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},     {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    const char *n = strncmp(hf, "model.", 6) == 0 ? hf + 6 : hf;
    int layer, end = 0;
    if (draft && strcmp(hf, "fc.weight") == 0) { snprintf(out, size, "fc.weight"); return 0; }
    if (draft && strcmp(hf, "hidden_norm.weight") == 0) { snprintf(out, size, "enc.output_norm.weight"); return 0; }
    if (!draft && strcmp(n, "embed_tokens.weight") == 0) { snprintf(out, size, "token_embd.weight"); return 0; }
    if (!draft && strcmp(hf, "lm_head.weight") == 0) { snprintf(out, size, "output.weight"); return 0; }
    if (strcmp(n, "norm.weight") == 0) { snprintf(out, size, "output_norm.weight"); return 0; }
    if (sscanf(n, "layers.%d.%n", &layer, &end) == 1 && end > 0 && layer >= 0)
        for (size_t k = 0; k < sizeof layer_map / sizeof layer_map[0]; k++)
            if (strcmp(n + end, layer_map[k][0]) == 0) {
                snprintf(out, size, "blk.%d.%s", layer, layer_map[k][1]);
                return 0;
            }
    dflash_set_error("tensor \"%.150s\": no GGUF name for it in llama.cpp's %s layout", hf, draft ? "dflash" : "qwen3");
    return -1;
}

/* The hybrid target's names (the converter's Qwen3_5TextModel through gguf-py's
 * tensor map) and what it does to each tensor's values and heads. */
static int gguf_name_qwen35(Tensor *t, const Hybrid *h) {
    static const char *const linear_map[][2] = {
        {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"}, {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
        {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},   {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
        {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},    {"linear_attn.A_log", "ssm_a"},
        {"linear_attn.dt_bias", "ssm_dt.bias"},                {"linear_attn.norm.weight", "ssm_norm.weight"},
        {"linear_attn.out_proj.weight", "ssm_out.weight"},     {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    };
    const char *hf = t->hf, *n = strncmp(hf, "model.", 6) == 0 ? hf + 6 : hf;
    int layer, end = 0;
    size_t l = strlen(hf);
    const char *sub = NULL;
    if (sscanf(n, "layers.%d.%n", &layer, &end) == 1 && end > 0 && layer >= 0) sub = n + end;
    int mapped = 0;
    for (size_t k = 0; sub && k < sizeof linear_map / sizeof linear_map[0]; k++)
        if (strcmp(sub, linear_map[k][0]) == 0) {
            snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, linear_map[k][1]);
            mapped = 1;
        }
    if (!mapped && gguf_name(hf, 0, t->name, sizeof t->name) != 0) return -1;
    /* Qwen3NextModel.modify_tensors: every norm but the gated one is 1 + w; A_log is -exp(A_log) */
    if (l >= 11 && strcmp(hf + l - 11, "norm.weight") == 0 && !(sub && strcmp(sub, "linear_attn.norm.weight") == 0))
        t->xform = XF_PLUS1;
    if (sub && strcmp(sub, "linear_attn.A_log") == 0) t->xform = XF_NEG_EXP;
    /* _LinearAttentionVReorderBase: value heads grouped by key head -> tiled (only when Hv != Hk) */
    if (sub && h->hv != h->hk) {
        uint64_t qk = 2 * (uint64_t)h->hk * (uint64_t)h->dk;
        if (strcmp(sub, "linear_attn.in_proj_qkv.weight") == 0 || strcmp(sub, "linear_attn.conv1d.weight") == 0)
            t->vreorder = 1, t->vrow0 = qk, t->vhd = (uint64_t)h->dv;
        else if (strcmp(sub, "linear_attn.in_proj_z.weight") == 0) t->vreorder = 1, t->vhd = (uint64_t)h->dv;
        else if (strcmp(sub, "linear_attn.in_proj_b.weight") == 0 || strcmp(sub, "linear_attn.in_proj_a.weight") == 0 ||
                 strcmp(sub, "linear_attn.A_log") == 0 || strcmp(sub, "linear_attn.dt_bias") == 0)
            t->vreorder = 1, t->vhd = 1;
        else if (strcmp(sub, "linear_attn.out_proj.weight") == 0) t->vreorder = 1, t->vcols = 1, t->vhd = (uint64_t)h->dv;
        t->hk = h->hk;
    }
    return 0;
}

/* The tensors of one safetensors file, appended to s. */
static int source_add_file(Source *s, const char *path, int draft, const Hybrid *hy) {
    if (s->n_files == DFLASH_MAX_SHARDS) { dflash_set_error("%s: more than %d shards", path, DFLASH_MAX_SHARDS); return -1; }
    int fi = s->n_files;
    size_t size;
    FILE *f = file_open_regular(path, &size);
    if (!f) return -1;
    s->files[fi] = f;
    s->paths[fi] = str_cat(path, "");
    s->n_files++;
    if (!s->paths[fi]) return -1;
    unsigned char b8[8];
    if (size < 8 || fread(b8, 1, 8, f) != 8) { dflash_set_error("%s: cannot read the safetensors header", path); return -1; }
    uint64_t hn = le64(b8);
    if (hn > size - 8 || hn > (100u << 20)) { dflash_set_error("%s: safetensors header length %llu out of range", path, (unsigned long long)hn); return -1; }
    char *text = malloc(hn + 1);
    if (!text) { dflash_set_error("out of memory"); return -1; }
    if (fread(text, 1, hn, f) != hn) { free(text); dflash_set_error("%s: cannot read the safetensors header", path); return -1; }
    text[hn] = 0;
    Json root;
    int rc = json_parse(text, hn, path, &root);
    free(text);
    if (rc != 0) return -1;
    rc = -1;
    if (root.type != JSON_OBJECT) { dflash_set_error("%s: the header is not a JSON object", path); goto out; }
    for (int k = 0; k < root.n; k++) {
        if (strcmp(root.keys[k], "__metadata__") == 0) continue;
        const Json *e = &root.items[k], *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"), *of = json_get(e, "data_offsets");
        /* (C, 1, K): a hybrid's conv1d, squeezed below */
        int conv = hy && sh && sh->type == JSON_ARRAY && sh->n == 3 && sh->items[1].is_integer && sh->items[1].integer == 1;
        if (!dt || dt->type != JSON_STRING || !sh || sh->type != JSON_ARRAY || sh->n < 1 || (sh->n > 2 && !conv) || !of ||
            of->type != JSON_ARRAY || of->n != 2 || !of->items[0].is_integer || !of->items[1].is_integer) {
            dflash_set_error("%s: tensor \"%.150s\": unexpected header entry", path, root.keys[k]);
            goto out;
        }
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 64;
            Tensor *t = realloc(s->t, sizeof *t * (size_t)cap);
            if (!t) { dflash_set_error("out of memory"); goto out; }
            s->t = t, s->cap = cap;
        }
        Tensor *t = &s->t[s->n];
        memset(t, 0, sizeof *t);
        snprintf(t->hf, sizeof t->hf, "%s", root.keys[k]);
        if (hy ? gguf_name_qwen35(t, hy) : gguf_name(t->hf, draft, t->name, sizeof t->name)) goto out;
        t->file = fi;
        int esize;
        if (strcmp(dt->string, "F32") == 0) t->dtype = GT_F32, esize = 4;
        else if (strcmp(dt->string, "BF16") == 0) t->dtype = GT_BF16, esize = 2;
        else if (strcmp(dt->string, "F16") == 0) t->dtype = GT_F16, esize = 2;
        else { dflash_set_error("%s: tensor \"%.150s\": dtype %.20s (expected F32, BF16 or F16)", path, t->hf, dt->string); goto out; }
        t->ndim = conv ? 2 : sh->n;
        uint64_t numel = 1;
        for (int d = 0; d < sh->n; d++) {
            if (!sh->items[d].is_integer || sh->items[d].integer < 1) { dflash_set_error("%s: tensor \"%.150s\": bad shape", path, t->hf); goto out; }
            if (!conv || d != 1) t->shape[conv && d == 2 ? 1 : d] = (uint64_t)sh->items[d].integer;
            numel *= (uint64_t)sh->items[d].integer;
        }
        uint64_t vn = t->vcols ? (t->ndim == 2 ? t->shape[1] : 0) : t->shape[0] > t->vrow0 ? t->shape[0] - t->vrow0 : 0;
        if (t->vreorder && (vn == 0 || vn % t->vhd || vn / t->vhd % (uint64_t)t->hk)) {
            dflash_set_error("%s: tensor \"%.150s\": its value heads do not divide its shape", path, t->hf);
            goto out;
        }
        long long b = of->items[0].integer, e2 = of->items[1].integer;
        t->src_bytes = numel * (uint64_t)esize;
        if (b < 0 || e2 < b || (uint64_t)(e2 - b) != t->src_bytes || 8 + hn + (uint64_t)e2 > size) {
            dflash_set_error("%s: tensor \"%.150s\": data_offsets do not match its shape and dtype", path, t->hf);
            goto out;
        }
        t->src_off = 8 + hn + (uint64_t)b;
        /* the converter's rule: 1-D tensors (the norms) are F32, and a hybrid's
         * conv1d; the rest keep the source's type */
        int f32 = t->ndim == 1 || conv || t->xform != XF_NONE;
        t->type = f32 ? GT_F32 : t->dtype;
        t->out_bytes = f32 ? numel * 4 : t->src_bytes;
        s->n++;
    }
    rc = 0;
out:
    json_free(&root);
    return rc;
}

/* Every tensor of the folder dir: model.safetensors, or the shards named by
 * model.safetensors.index.json (in the order the index first names them). */
static int source_read(Source *s, const char *dir, int draft, const Hybrid *hy) {
    memset(s, 0, sizeof *s);
    char *index = path_join(dir, "model.safetensors.index.json");
    if (!index) return -1;
    struct stat st;
    int rc = -1;
    if (stat(index, &st) != 0) {
        char *one = path_join(dir, "model.safetensors");
        rc = one ? source_add_file(s, one, draft, hy) : -1;
        free(one);
        free(index);
        return rc;
    }
    char *text;
    size_t len;
    Json root;
    if (file_read_max(index, 64u << 20, &text, &len) != 0) { free(index); return -1; }
    rc = json_parse(text, len, index, &root);
    free(text);
    if (rc != 0) { free(index); return -1; }
    rc = -1;
    const Json *wm = json_get(&root, "weight_map");
    if (!wm || wm->type != JSON_OBJECT) { dflash_set_error("%s: no \"weight_map\" object", index); goto out; }
    const char *seen[DFLASH_MAX_SHARDS];
    int n_seen = 0;
    for (int k = 0; k < wm->n; k++) {
        const Json *v = &wm->items[k];
        if (v->type != JSON_STRING || strchr(v->string, '/')) { dflash_set_error("%s: weight_map: bad file name", index); goto out; }
        int dup = 0;
        for (int j = 0; j < n_seen; j++) dup |= strcmp(seen[j], v->string) == 0;
        if (dup) continue;
        if (n_seen == DFLASH_MAX_SHARDS) { dflash_set_error("%s: more than %d shards", index, DFLASH_MAX_SHARDS); goto out; }
        seen[n_seen++] = v->string;
        char *p = path_join(dir, v->string);
        int r = p ? source_add_file(s, p, draft, hy) : -1;
        free(p);
        if (r != 0) goto out;
    }
    rc = 0;
out:
    json_free(&root);
    free(index);
    return rc;
}

/* ---------------------------------------------------------------------------
 * The vocabulary both files carry (tokenizer.ggml.*): a gpt2-type (byte-level
 * BPE) vocabulary, from vocab.txt (the toy words, no merges) or from a
 * tokenizer.json whose pre-tokenizer llama.cpp names.
 */
typedef struct {
    int n;
    char **tok;         /* (n) */
    int32_t *type;      /* (n) */
    int n_merges;
    char **merges;      /* (n_merges) "a b" */
    const char *pre;    /* tokenizer.ggml.pre */
} GVocab;

static void gvocab_free(GVocab *v) {
    for (int i = 0; v->tok && i < v->n; i++) free(v->tok[i]);
    for (int i = 0; v->merges && i < v->n_merges; i++) free(v->merges[i]);
    free(v->tok);
    free(v->type);
    free(v->merges);
    memset(v, 0, sizeof *v);
}

static int gvocab_alloc(GVocab *v, int n) {
    v->n = n;
    v->tok = calloc((size_t)n, sizeof *v->tok);
    v->type = calloc((size_t)n, sizeof *v->type);
    if (!v->tok || !v->type) { dflash_set_error("out of memory"); return -1; }
    return 0;
}

/* vocab.txt: the words as they are, <...> words CONTROL, no merges, pre "default". */
static int gvocab_from_words(GVocab *g, const Vocab *v) {
    if (gvocab_alloc(g, v->n) != 0) return -1;
    for (int i = 0; i < v->n; i++) {
        size_t l = strlen(v->words[i]);
        if (!(g->tok[i] = str_cat(v->words[i], ""))) return -1;
        g->type[i] = l > 2 && v->words[i][0] == '<' && v->words[i][l - 1] == '>' ? TT_CONTROL : TT_NORMAL;
    }
    g->pre = "default";
    return 0;
}

/* Qwen2's (and Qwen3's) and Llama-3's pre-tokenizer splits, as their
 * tokenizer.json files write them (digits one at a time, or up to three) */
static const char QWEN2_SPLIT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_SPLIT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The pre-tokenizer llama.cpp must apply, named as convert_hf_to_gguf.py names
 * it; NULL (dflash_errmsg) when it is not one recognised here. llama.cpp
 * ties ignore_merges to the name (on for llama-bpe, off for gpt-2 and qwen2),
 * so a file whose model.ignore_merges says otherwise is refused too. */
static const char *tokenizer_pre(const Json *root, const char *path) {
    const Json *p = json_get(root, "pre_tokenizer"), *ty = p ? json_get(p, "type") : NULL;
    const Json *model = json_get(root, "model"), *im = model ? json_get(model, "ignore_merges") : NULL;
    int ignore_merges = im && im->type == JSON_BOOL && im->boolean;
    const char *pre = NULL;
    if (ty && ty->type == JSON_STRING && strcmp(ty->string, "ByteLevel") == 0) {
        const Json *re = json_get(p, "use_regex");
        if (!re || (re->type == JSON_BOOL && re->boolean)) pre = "gpt-2";  /* ByteLevel's own regex is GPT-2's */
    }
    if (ty && ty->type == JSON_STRING && strcmp(ty->string, "Sequence") == 0) {
        const Json *ps = json_get(p, "pretokenizers");
        if (ps && ps->type == JSON_ARRAY && ps->n == 2) {
            const Json *a = &ps->items[0], *b = &ps->items[1], *at = json_get(a, "type"), *bt = json_get(b, "type");
            const Json *pat = json_get(a, "pattern"), *rx = pat ? json_get(pat, "Regex") : NULL;
            if (at && at->type == JSON_STRING && strcmp(at->string, "Split") == 0 && rx && rx->type == JSON_STRING &&
                bt && bt->type == JSON_STRING && strcmp(bt->string, "ByteLevel") == 0)
                pre = strcmp(rx->string, QWEN2_SPLIT) == 0 ? "qwen2" : strcmp(rx->string, LLAMA3_SPLIT) == 0 ? "llama-bpe" : NULL;
        }
    }
    if (pre && ignore_merges != (strcmp(pre, "llama-bpe") == 0)) {
        dflash_set_error("%s: model.ignore_merges is %s, but llama.cpp's \"%s\" pre-tokenizer always has it %s: llama.cpp "
                         "would tokenize some texts differently", path, ignore_merges ? "true" : "false", pre,
                         ignore_merges ? "off" : "on");
        return NULL;
    }
    if (pre) return pre;
    dflash_set_error("%s: pre_tokenizer: expected GPT-2's ByteLevel, or Qwen2's or Llama-3's Split + ByteLevel; convert_hf_to_gguf.py "
                     "names other pre-tokenizers by a hash of the tokenizers library's output (get_vocab_base_pre), "
                     "which this program cannot compute: convert this vocabulary with it", path);
    return NULL;
}

/* tokenizer.json (model.type BPE): tokens by id, ids the file does not give
 * "[PAD<id>]" (UNUSED), added special tokens CONTROL, other added tokens
 * USER_DEFINED, model.merges as "a b" (as the converter's get_vocab_base and
 * SpecialVocab do). n_vocab: the config's vocab_size. */
static int gvocab_from_tokenizer_json(GVocab *g, const char *path, int n_vocab) {
    char *text;
    size_t len;
    Json root;
    if (file_read_max(path, 256u << 20, &text, &len) != 0) return -1;
    int rc = json_parse(text, len, path, &root);
    free(text);
    if (rc != 0) return -1;
    rc = -1;
    const Json *model = json_get(&root, "model"), *mt = model ? json_get(model, "type") : NULL;
    const Json *voc = model ? json_get(model, "vocab") : NULL, *mer = model ? json_get(model, "merges") : NULL;
    const Json *added = json_get(&root, "added_tokens");
    if (!mt || mt->type != JSON_STRING || strcmp(mt->string, "BPE") != 0 || !voc || voc->type != JSON_OBJECT) {
        dflash_set_error("%s: model: expected a BPE model with a \"vocab\" object (llama.cpp's gpt2 vocabulary)", path);
        goto out;
    }
    if (!(g->pre = tokenizer_pre(&root, path))) goto out;
    if (gvocab_alloc(g, n_vocab) != 0) goto out;
    for (int k = 0; k < voc->n + (added && added->type == JSON_ARRAY ? added->n : 0); k++) {
        const char *s;
        long long id;
        int type = TT_NORMAL;
        if (k < voc->n) {
            if (!voc->items[k].is_integer) { dflash_set_error("%s: vocab \"%.100s\": expected an integer id", path, voc->keys[k]); goto out; }
            s = voc->keys[k], id = voc->items[k].integer;
        } else {
            const Json *a = &added->items[k - voc->n], *c = json_get(a, "content"), *i = json_get(a, "id"), *sp = json_get(a, "special");
            if (!c || c->type != JSON_STRING || !i || !i->is_integer) { dflash_set_error("%s: added_tokens[%d]: expected id and content", path, k - voc->n); goto out; }
            s = c->string, id = i->integer;
            type = sp && sp->type == JSON_BOOL && sp->boolean ? TT_CONTROL : TT_USER_DEFINED;
        }
        if (id < 0 || id >= n_vocab) { dflash_set_error("%s: token \"%.100s\": id %lld, expected 0..%d (vocab_size)", path, s, id, n_vocab - 1); goto out; }
        free(g->tok[id]);
        if (!(g->tok[id] = str_cat(s, ""))) goto out;
        g->type[id] = type;
    }
    for (int i = 0; i < n_vocab; i++)
        if (!g->tok[i]) {
            char pad[32];
            snprintf(pad, sizeof pad, "[PAD%d]", i);
            if (!(g->tok[i] = str_cat(pad, ""))) goto out;
            g->type[i] = TT_UNUSED;
        }
    if (mer && mer->type == JSON_ARRAY && mer->n > 0) {
        if (!(g->merges = calloc((size_t)mer->n, sizeof *g->merges))) { dflash_set_error("out of memory"); goto out; }
        for (int k = 0; k < mer->n; k++) {
            const Json *m = &mer->items[k];
            if (m->type == JSON_STRING) g->merges[k] = str_cat(m->string, "");
            else if (m->type == JSON_ARRAY && m->n == 2 && m->items[0].type == JSON_STRING && m->items[1].type == JSON_STRING) {
                char *a = str_cat(m->items[0].string, " ");
                g->merges[k] = a ? str_cat(a, m->items[1].string) : NULL;
                free(a);
            } else { dflash_set_error("%s: model.merges[%d]: expected \"a b\" or [a, b]", path, k); goto out; }
            if (!g->merges[k]) goto out;
            g->n_merges++;
        }
    }
    rc = 0;
out:
    json_free(&root);
    return rc;
}

/* ---------------------------------------------------------------------------
 * The writer. With f NULL it only counts (key-value pairs and bytes).
 */
typedef struct {
    FILE *f;
    uint64_t pos, n_kv;
} Gw;

static void gw_bytes(Gw *w, const void *p, size_t n) {
    if (w->f && n) fwrite(p, 1, n, w->f);
    w->pos += n;
}
static void gw_u32(Gw *w, uint32_t v) {
    unsigned char b[4];
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> 8 * i);
    gw_bytes(w, b, 4);
}
static void gw_u64(Gw *w, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> 8 * i);
    gw_bytes(w, b, 8);
}
static void gw_str(Gw *w, const char *s) { gw_u64(w, strlen(s)); gw_bytes(w, s, strlen(s)); }
static void kv_key(Gw *w, const char *arch, const char *key, uint32_t type) {
    char k[160];
    snprintf(k, sizeof k, "%s%s%s", arch ? arch : "", arch ? "." : "", key);
    w->n_kv++;
    gw_str(w, k);
    gw_u32(w, type);
}
static void kv_u32(Gw *w, const char *arch, const char *key, uint32_t v) { kv_key(w, arch, key, GV_U32); gw_u32(w, v); }
static void kv_f32(Gw *w, const char *arch, const char *key, double v) {
    float x = (float)v;
    uint32_t u;
    memcpy(&u, &x, 4);
    kv_key(w, arch, key, GV_F32);
    gw_u32(w, u);
}
static void kv_bool(Gw *w, const char *key, int v) {
    unsigned char b = v ? 1 : 0;
    kv_key(w, NULL, key, GV_BOOL);
    gw_bytes(w, &b, 1);
}
static void kv_string(Gw *w, const char *key, const char *s) { kv_key(w, NULL, key, GV_STRING); gw_str(w, s); }
static void kv_strings(Gw *w, const char *key, char *const *s, int n) {
    kv_key(w, NULL, key, GV_ARRAY);
    gw_u32(w, GV_STRING);
    gw_u64(w, (uint64_t)n);  /* n = 0 is an empty array: what gguf-py refuses to write, llama.cpp reads */
    for (int i = 0; i < n; i++) gw_str(w, s[i]);
}
static void kv_i32s(Gw *w, const char *arch, const char *key, const int32_t *v, int n) {
    kv_key(w, arch, key, GV_ARRAY);
    gw_u32(w, GV_I32);
    gw_u64(w, (uint64_t)n);
    for (int i = 0; i < n; i++) gw_u32(w, (uint32_t)v[i]);
}

static void kv_bools(Gw *w, const char *arch, const char *key, const int *v, int n) {
    kv_key(w, arch, key, GV_ARRAY);
    gw_u32(w, GV_BOOL);
    gw_u64(w, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        unsigned char b = v[i] ? 1 : 0;
        gw_bytes(w, &b, 1);
    }
}

/* What one file says besides its tensors. */
typedef struct {
    const char *arch;       /* "qwen3" or "dflash" */
    const char *name;       /* general.name */
    const Config *cfg;
    const GVocab *voc;
    int eos, bos, pad;      /* -1: not written */
    uint32_t file_type;
    const Hybrid *hy;       /* qwen35: the Gated DeltaNet's shape */
    int interval;           /* qwen35: full_attention_interval */
    int32_t sections[4];    /* qwen35: rope.dimension_sections */
} Meta;

static void write_kvs(Gw *w, const Meta *m) {
    const Config *c = m->cfg;
    const char *a = m->arch;
    kv_string(w, "general.architecture", a);
    kv_string(w, "general.type", "model");
    kv_string(w, "general.name", m->name);
    kv_u32(w, NULL, "general.quantization_version", 2);
    kv_u32(w, NULL, "general.file_type", m->file_type);
    kv_u32(w, a, "block_count", (uint32_t)c->num_hidden_layers);
    kv_u32(w, a, "context_length", (uint32_t)c->max_position_embeddings);
    kv_u32(w, a, "embedding_length", (uint32_t)c->hidden_size);
    kv_u32(w, a, "feed_forward_length", (uint32_t)c->intermediate_size);
    kv_u32(w, a, "attention.head_count", (uint32_t)c->num_attention_heads);
    kv_u32(w, a, "attention.head_count_kv", (uint32_t)c->num_key_value_heads);
    kv_f32(w, a, "rope.freq_base", c->rope_theta);
    kv_f32(w, a, "attention.layer_norm_rms_epsilon", c->rms_norm_eps);
    kv_u32(w, a, "attention.key_length", (uint32_t)c->head_dim);
    kv_u32(w, a, "attention.value_length", (uint32_t)c->head_dim);
    if (m->hy) {  /* Qwen3NextModel.set_gguf_parameters and _Qwen35MRopeMixin */
        kv_u32(w, a, "ssm.conv_kernel", (uint32_t)c->linear_conv_kernel_dim);
        kv_u32(w, a, "ssm.state_size", (uint32_t)m->hy->dk);
        kv_u32(w, a, "ssm.group_count", (uint32_t)m->hy->hk);
        kv_u32(w, a, "ssm.time_step_rank", (uint32_t)m->hy->hv);
        kv_u32(w, a, "ssm.inner_size", (uint32_t)(m->hy->dv * m->hy->hv));
        kv_u32(w, a, "full_attention_interval", (uint32_t)m->interval);
        kv_u32(w, a, "rope.dimension_count", (uint32_t)c->rotary_dim);
        kv_i32s(w, a, "rope.dimension_sections", m->sections, 4);
    }
    if (c->is_draft) {
        int32_t ids[DFLASH_MAX_LAYER_IDS];
        for (int i = 0; i < c->n_target_layer_ids; i++) ids[i] = c->target_layer_ids[i] + 1;  /* llama.cpp's +1 */
        kv_u32(w, a, "block_size", (uint32_t)c->block_size);
        kv_i32s(w, a, "target_layers", ids, c->n_target_layer_ids);
        /* sliding_attention layers: llama.cpp's dflash load_arch_hparams reads
         * attention.sliding_window (u32) and, per layer, whether it slides
         * (attention.sliding_window_pattern, bools; the names of its LLM_KV
         * table). Without them it runs every layer as full attention. One
         * window for all sliding layers (config.json has one sliding_window). */
        int window = 0, sliding[DFLASH_MAX_LAYERS];
        for (int l = 0; l < c->num_hidden_layers; l++) {
            sliding[l] = c->layer_window[l] > 0;
            if (sliding[l]) window = c->layer_window[l];
        }
        if (window > 0) {
            kv_u32(w, a, "attention.sliding_window", (uint32_t)window);
            kv_bools(w, a, "attention.sliding_window_pattern", sliding, c->num_hidden_layers);
        }
    }
    kv_string(w, "tokenizer.ggml.model", "gpt2");
    kv_string(w, "tokenizer.ggml.pre", m->voc->pre);
    kv_strings(w, "tokenizer.ggml.tokens", m->voc->tok, m->voc->n);
    kv_i32s(w, NULL, "tokenizer.ggml.token_type", m->voc->type, m->voc->n);
    kv_strings(w, "tokenizer.ggml.merges", m->voc->merges, m->voc->n_merges);
    if (m->eos >= 0) kv_u32(w, NULL, "tokenizer.ggml.eos_token_id", (uint32_t)m->eos);
    if (m->bos >= 0) kv_u32(w, NULL, "tokenizer.ggml.bos_token_id", (uint32_t)m->bos);
    if (m->pad >= 0) kv_u32(w, NULL, "tokenizer.ggml.padding_token_id", (uint32_t)m->pad);
    kv_bool(w, "tokenizer.ggml.add_bos_token", 0);
    if (c->is_draft) kv_u32(w, NULL, "tokenizer.ggml.mask_token_id", (uint32_t)c->mask_token_id);
}

static uint64_t align_up(uint64_t x) { return (x + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN; }

static int reorder_v_heads(const Tensor *t, unsigned char *src);
static void widen(const Tensor *t, const unsigned char *src, unsigned char *out);

/* One tensor's bytes as the file holds them: 1-D BF16/F16 widened to F32; a
 * hybrid's value heads reordered and its values transformed (XF_*). */
static int tensor_bytes(Source *s, const Tensor *t, unsigned char *src, unsigned char *out) {
    FILE *f = s->files[t->file];
    if (fseeko(f, (off_t)t->src_off, SEEK_SET) != 0 || fread(src, 1, t->src_bytes, f) != t->src_bytes) {
        dflash_set_error("%s: cannot read tensor \"%.150s\"", s->paths[t->file], t->hf);
        return -1;
    }
    if (t->vreorder && reorder_v_heads(t, src) != 0) return -1;
    if (t->type == t->dtype) memcpy(out, src, t->src_bytes);
    else widen(t, src, out);
    if (t->xform != XF_NONE)
        for (uint64_t i = 0; i < t->out_bytes / 4; i++) {
            float x;
            memcpy(&x, out + 4 * i, 4);
            x = t->xform == XF_PLUS1 ? x + 1.0f : -expf(x);
            memcpy(out + 4 * i, &x, 4);
        }
    return 0;
}

/* _reorder_v_heads: along the rows from vrow0 (or along the columns), the
 * heads of vhd elements grouped by key head, [g0 v0..v(r-1), g1 v0.., ...],
 * become tiled, [g0 v0, g1 v0, ..., g0 v1, g1 v1, ...]: new head j * Hk + g is
 * old head g * r + j (r = Hv / Hk). In place, on the source bytes. */
static int reorder_v_heads(const Tensor *t, unsigned char *src) {
    uint64_t es = t->dtype == GT_F32 ? 4 : 2, cols = t->ndim == 2 ? t->shape[1] : 1, rows = t->shape[0];
    uint64_t n = t->vcols ? cols : rows - t->vrow0, heads = n / t->vhd, r = heads / (uint64_t)t->hk;
    uint64_t unit = t->vcols ? es * t->vhd : es * cols * t->vhd;  /* bytes of one head in one row, or of its rows */
    unsigned char *tmp = malloc((size_t)(unit * heads));
    if (!tmp) { dflash_set_error("out of memory"); return -1; }
    for (uint64_t row = 0; row < (t->vcols ? rows : 1); row++) {
        unsigned char *base = t->vcols ? src + row * cols * es : src + t->vrow0 * cols * es;
        for (uint64_t j = 0; j < r; j++)
            for (uint64_t g = 0; g < (uint64_t)t->hk; g++)
                memcpy(tmp + (j * (uint64_t)t->hk + g) * unit, base + (g * r + j) * unit, (size_t)unit);
        memcpy(base, tmp, (size_t)(unit * heads));
    }
    free(tmp);
    return 0;
}

/* 16-bit source values (BF16 or F16) widened to F32, exactly */
static void widen(const Tensor *t, const unsigned char *src, unsigned char *out) {
    for (uint64_t i = 0; i < t->src_bytes / 2; i++) {
        uint32_t h = (uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8, u;
        if (t->dtype == GT_BF16) u = h << 16;  /* bf16 is the top half of a float */
        else {                                 /* f16: sign, 5-bit exponent (bias 15), 10-bit fraction */
            uint32_t sign = (h & 0x8000u) << 16, e = h >> 10 & 0x1f, fr = h & 0x3ff;
            if (e == 0x1f) u = sign | 0x7f800000u | fr << 13;
            else if (e) u = sign | (e + 112) << 23 | fr << 13;
            else if (!fr) u = sign;
            else {                             /* subnormal: normalise */
                int sh = 0;
                while (!(fr & 0x400)) fr <<= 1, sh++;
                u = sign | (uint32_t)(113 - sh) << 23 | (fr & 0x3ff) << 13;
            }
        }
        for (int b = 0; b < 4; b++) out[4 * i + b] = (unsigned char)(u >> 8 * b);
    }
}

/* The whole file to f: header, key-value pairs, tensor table, data. */
static int write_gguf(FILE *f, Source *s, const Meta *m) {
    Gw count = {NULL, 0, 0}, w = {f, 0, 0};
    write_kvs(&count, m);
    uint64_t off = 0, biggest = 0;
    for (int i = 0; i < s->n; i++) {
        s->t[i].out_off = off;
        off = align_up(off + s->t[i].out_bytes);
        if (s->t[i].out_bytes > biggest) biggest = s->t[i].out_bytes;
    }
    gw_bytes(&w, "GGUF", 4);
    gw_u32(&w, 3);
    gw_u64(&w, (uint64_t)s->n);
    gw_u64(&w, count.n_kv);
    write_kvs(&w, m);
    for (int i = 0; i < s->n; i++) {
        const Tensor *t = &s->t[i];
        gw_str(&w, t->name);
        gw_u32(&w, (uint32_t)t->ndim);
        for (int d = t->ndim - 1; d >= 0; d--) gw_u64(&w, t->shape[d]);  /* ne: the numpy shape reversed */
        gw_u32(&w, (uint32_t)t->type);
        gw_u64(&w, t->out_off);
    }
    static const unsigned char zeros[GGUF_ALIGN];
    gw_bytes(&w, zeros, (size_t)(align_up(w.pos) - w.pos));
    unsigned char *src = malloc(biggest ? biggest : 1), *out = malloc(biggest ? biggest : 1);
    int rc = -1;
    if (!src || !out) { dflash_set_error("out of memory"); goto done; }
    for (int i = 0; i < s->n; i++) {
        const Tensor *t = &s->t[i];
        if (tensor_bytes(s, t, src, out) != 0) goto done;
        gw_bytes(&w, out, t->out_bytes);
        gw_bytes(&w, zeros, (size_t)(align_up(t->out_bytes) - t->out_bytes));
    }
    rc = 0;
done:
    free(src);
    free(out);
    return rc;
}

/* ---------------------------------------------------------------------------
 * dflash gguf
 */
static const char *USAGE_GGUF =
    "usage: dflash gguf --weights DIR OUT_DIR | dflash gguf --target DIR --draft DIR OUT_DIR [--vocab FILE]";

static int file_present(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* config.json's integer field key, or -1 when absent or not an integer */
static int config_id(const char *dir, const char *key) {
    char *p = path_join(dir, "config.json"), *text;
    size_t len;
    Json root;
    int id = -1;
    if (p && file_read_max(p, 1u << 20, &text, &len) == 0) {
        if (json_parse(text, len, p, &root) == 0) {
            const Json *v = json_get(&root, key);
            if (v && v->is_integer && v->integer >= 0 && v->integer < 0x7fffffff) id = (int)v->integer;
            json_free(&root);
        }
        free(text);
    }
    free(p);
    return id;
}

/* the first of the target config's "architectures" is llama.cpp's qwen3, or
 * (hybrid) its qwen35 */
static int check_qwen3(const char *dir, int hybrid) {
    char *p = path_join(dir, "config.json"), *text;
    size_t len;
    Json root;
    int rc = -1;
    if (!p) return -1;
    if (file_read_max(p, 1u << 20, &text, &len) == 0) {
        if (json_parse(text, len, p, &root) == 0) {
            const Json *a = json_get(&root, "architectures");
            if (a && a->type == JSON_ARRAY && a->n >= 1 && a->items[0].type == JSON_STRING &&
                strcmp(a->items[0].string, hybrid ? "Qwen3_5ForCausalLM" : "Qwen3ForCausalLM") == 0)
                rc = 0;
            else
                dflash_set_error("%s: architectures: expected [\"Qwen3ForCausalLM\"] (llama.cpp's qwen3) or "
                                 "[\"Qwen3_5ForCausalLM\"] (its qwen35; dflash gguf writes no other target architecture)", p);
            json_free(&root);
        }
        free(text);
    }
    free(p);
    return rc;
}

/* What llama.cpp's qwen35 can hold of a hybrid target, and its keys: the
 * layer pattern as full_attention_interval (layer i is full attention iff
 * (i + 1) % interval == 0, what its loader derives), the value head size
 * equal to the key head size (its loader sizes the value heads and the state
 * by ssm.state_size, dk), the text model alone, and rope_parameters'
 * mrope_section (3 values, padded with 0) as rope.dimension_sections. */
static int hybrid_layout(const char *dir, const Config *c, int *interval, int32_t sections[4]) {
    if (c->hybrid_nested) {
        dflash_set_error("%s: a nested qwen3_5 config (model.language_model.*): dflash gguf writes the text model "
                         "(Qwen3_5ForCausalLM) only", dir);
        return -1;
    }
    if (c->linear_value_head_dim != c->linear_key_head_dim) {
        dflash_set_error("%s: linear_value_head_dim %d != linear_key_head_dim %d: llama.cpp's qwen35 sizes the Gated "
                         "DeltaNet's value heads and state by ssm.state_size (the key head size), so it cannot hold this "
                         "target", dir, c->linear_value_head_dim, c->linear_key_head_dim);
        return -1;
    }
    int iv = config_id(dir, "full_attention_interval");
    *interval = iv > 0 ? iv : 4;
    for (int l = 0; l < c->num_hidden_layers; l++)
        if (c->layer_linear[l] != ((l + 1) % *interval != 0)) {
            dflash_set_error("%s: layer_types: layer %d is %s, but llama.cpp's qwen35 makes every %dth layer full "
                             "attention and the rest linear (full_attention_interval)", dir, l,
                             c->layer_linear[l] ? "linear_attention" : "full_attention", *interval);
            return -1;
        }
    char *p = path_join(dir, "config.json"), *text;
    size_t len;
    Json root;
    int rc = 0;
    if (!p || file_read_max(p, 1u << 20, &text, &len) != 0) { free(p); return -1; }
    if (json_parse(text, len, p, &root) == 0) {
        const Json *rp = json_get(&root, "rope_parameters"), *ms = rp ? json_get(rp, "mrope_section") : NULL;
        if (ms && ms->type == JSON_ARRAY) {
            int sum = 0;
            for (int k = 0; k < 4; k++) {
                sections[k] = k < ms->n && ms->items[k].is_integer ? (int32_t)ms->items[k].integer : 0;
                sum += sections[k];
            }
            if (ms->n > 4 || sum != c->rotary_dim / 2) {
                dflash_set_error("%s: rope_parameters.mrope_section: expected up to 4 integers summing to %d (half the "
                                 "rotary dims)", p, c->rotary_dim / 2);
                rc = -1;
            }
        }
        json_free(&root);
    } else rc = -1;
    free(text);
    free(p);
    return rc;
}

static const char *base_name(const char *path, char *buf, size_t size) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(buf, size, "%.*s", (int)(n - b), path + b);
    return buf;
}

static uint32_t file_type_of(const Source *s) {
    for (int i = 0; i < s->n; i++)
        if (s->t[i].ndim == 2) return s->t[i].type == GT_BF16 ? 32 : s->t[i].type == GT_F16 ? 1 : 0;  /* LlamaFileType */
    return 0;
}

/* THE flags of dflash gguf (cli/flags.h; tests/test_flags.c checks them
 * against USAGE_GGUF) */
typedef struct { const char *weights, *target, *draft, *vocab; } GgufArgs;
#define GA(m) offsetof(GgufArgs, m)
const Flag GGUF_FLAGS[] = {
    {.name = "--weights", .kind = FLAG_STRING, .field = GA(weights)},
    {.name = "--target", .kind = FLAG_STRING, .field = GA(target)},
    {.name = "--draft", .kind = FLAG_STRING, .field = GA(draft)},
    {.name = "--vocab", .kind = FLAG_STRING, .field = GA(vocab)},
    FLAG_TABLE_END};
#undef GA

int gguf_main(int argc, char **argv) {
    GgufArgs ga = {NULL, NULL, NULL, NULL};
    const char *out_dir = NULL;
    int n_pos = 0;
    int prc = flags_parse(GGUF_FLAGS, argc, argv, &ga, "dflash gguf", &out_dir, 1, &n_pos);
    if (prc == 1) { printf("%s\n", USAGE_GGUF); return 0; }
    if (prc != 0) {
        fprintf(stderr, "dflash gguf: %s (%s)\n", dflash_errmsg, USAGE_GGUF);
        return 2;
    }
    const char *weights = ga.weights, *tflag = ga.target, *dflag = ga.draft, *vflag = ga.vocab;
    const char *why = !out_dir ? "expected OUT_DIR" : weights && (tflag || dflag) ? "expected --weights or --target/--draft, got both"
                    : !weights && !(tflag && dflag) ? "expected --weights DIR, or --target DIR and --draft DIR" : NULL;
    if (why) { fprintf(stderr, "dflash gguf: %s (%s)\n", why, USAGE_GGUF); return 2; }

    char tdir[4096], ddir[4096], vpath[4200] = "", name[256], tname[300], dname[300];
    snprintf(tdir, sizeof tdir, "%s%s", weights ? weights : tflag, weights ? "/target" : "");
    snprintf(ddir, sizeof ddir, "%s%s", weights ? weights : dflag, weights ? "/draft" : "");
    base_name(weights ? weights : tflag, name, sizeof name);
    snprintf(tname, sizeof tname, "%s%s", name, weights ? " target" : "");
    snprintf(dname, sizeof dname, "%s%s", weights ? name : base_name(dflag, name, sizeof name), weights ? " draft" : "");
    Model target, draft;
    Vocab words;
    GVocab voc;
    Source ts, ds;
    OutFile *ot = NULL, *od = NULL;
    char *tpath = NULL, *dpath = NULL;
    int have_t = 0, have_d = 0, have_w = 0, made_dir = 0, rc = 2;
    memset(&words, 0, sizeof words);
    memset(&voc, 0, sizeof voc);
    memset(&ts, 0, sizeof ts);
    memset(&ds, 0, sizeof ds);

    /* the inputs, validated as for a run */
    if (model_load(&target, tdir, 0) != 0) goto fail;
    have_t = 1;
    if (check_qwen3(tdir, target.cfg.hybrid) != 0) goto fail;
    Hybrid hy = {target.cfg.linear_num_key_heads, target.cfg.linear_num_value_heads, target.cfg.linear_key_head_dim,
                 target.cfg.linear_value_head_dim};
    int interval = 0;
    int32_t sections[4] = {11, 11, 10, 0};  /* _Qwen35MRopeMixin's default */
    if (target.cfg.hybrid && hybrid_layout(tdir, &target.cfg, &interval, sections) != 0) goto fail;
    if (model_load(&draft, ddir, 1) != 0) goto fail;
    have_d = 1;
    if (check_pair(&target, &draft) != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("%.500s and %.500s: %s", tdir, ddir, msg);  /* name the pair, as the run does */
        goto fail;
    }
    /* the vocabulary: --vocab FILE, else as the run looks for it (W/vocab.txt,
     * W/tokenizer.json, then the target folder's) */
    const char *vdirs[2] = {weights, tdir};
    int found = 0;
    for (int k = vflag ? -1 : 0; k < 4 && !found; k++) {
        if (k >= 0 && !vdirs[k / 2]) continue;
        if (k >= 0) snprintf(vpath, sizeof vpath, "%s/%s", vdirs[k / 2], k % 2 ? "tokenizer.json" : "vocab.txt");
        else snprintf(vpath, sizeof vpath, "%s", vflag);
        if (k >= 0 && !file_present(vpath)) continue;
        found = 1;
        size_t vl = strlen(vpath);
        if (k >= 0 ? k % 2 : vl >= 5 && strcmp(vpath + vl - 5, ".json") == 0) {
            if (gvocab_from_tokenizer_json(&voc, vpath, target.cfg.vocab_size) != 0) goto fail;
        } else {
            if (vocab_load(&words, vpath) != 0) goto fail;
            have_w = 1;
            if (check_vocab(&words, vpath, &target, &draft) != 0) goto fail;
            if (gvocab_from_words(&voc, &words) != 0) goto fail;
        }
    }
    if (!found) {
        dflash_set_error("%s: no vocab.txt or tokenizer.json%s: a GGUF file carries its vocabulary (tokenizer.ggml.tokens); "
                         "name one with --vocab FILE", weights ? weights : tdir, weights ? " here or in target/" : "");
        goto fail;
    }
    if (source_read(&ts, tdir, 0, target.cfg.hybrid ? &hy : NULL) != 0 || source_read(&ds, ddir, 1, NULL) != 0) goto fail;

    /* the outputs: OUT_DIR/target.gguf and OUT_DIR/draft.gguf, never an input */
    if (!(tpath = path_join(out_dir, "target.gguf")) || !(dpath = path_join(out_dir, "draft.gguf"))) goto fail;
    {
        OutPath outs[4] = {{out_dir, "the output directory", 2}, {tpath, "target.gguf", 0}, {dpath, "draft.gguf", 0}};
        const char *inputs[4] = {weights ? weights : tdir, weights ? tdir : ddir, weights ? ddir : vpath, vpath};
        int n_in = weights ? 4 : 3;
        if (out_check_paths("OUT_DIR", outs, 4, inputs, n_in) != 0) goto fail;
    }
    struct stat so;
    if (stat(out_dir, &so) != 0) {
        /* registered first, so that a signal removes it too (after the partial files in it) */
        sigset_t old;
        out_block_signals(&old);
        int reg = out_register(&made_dir, 'd', out_dir), mk = reg == 0 ? mkdir(out_dir, 0777) : -1, err = errno;
        if (reg == 0 && mk != 0) out_unregister_last();
        out_restore_signals(&old);
        if (reg != 0) { dflash_set_error("out of memory"); goto fail; }
        if (mk != 0) {
            dflash_set_error("%s: cannot create the output directory (%s)", out_dir, strerror(err));
            goto fail;
        }
        made_dir = 1;
    } else if (!S_ISDIR(so.st_mode)) {
        dflash_set_error("%s: not a directory", out_dir);
        goto fail;
    }
    int eos = target.cfg.n_eos > 0 ? target.cfg.eos_token_id[0] : have_w ? vocab_find(&words, "<eos>") : -1;
    Meta mt = {target.cfg.hybrid ? "qwen35" : "qwen3", tname, &target.cfg, &voc, eos, config_id(tdir, "bos_token_id"),
               config_id(tdir, "pad_token_id"), file_type_of(&ts), target.cfg.hybrid ? &hy : NULL, interval,
               {sections[0], sections[1], sections[2], sections[3]}};
    Meta md = mt;
    md.arch = "dflash", md.name = dname, md.cfg = &draft.cfg, md.file_type = file_type_of(&ds), md.hy = NULL;
    if (!(ot = out_open(tpath, "OUT_DIR"))) goto fail;
    if (write_gguf(out_stream(ot), &ts, &mt) != 0 || out_finish(ot) != 0) goto fail;
    if (!(od = out_open(dpath, "OUT_DIR"))) goto fail;
    if (write_gguf(out_stream(od), &ds, &md) != 0 || out_finish(od) != 0) goto fail;
    int c1 = out_commit(ot);
    ot = NULL;
    if (c1 != 0) goto fail;
    int c2 = out_commit(od);
    od = NULL;
    if (c2 != 0) goto fail;
    printf("dflash gguf: wrote %s (%s, %d tensors) and %s (dflash, %d tensors)\n", tpath, mt.arch, ts.n, dpath, ds.n);
    rc = 0;
    goto done;
fail:
    out_abort(ot);
    out_abort(od);
    if (made_dir) rmdir(out_dir);  /* made here, and empty again: nothing left behind */
    dflash_print_error("dflash gguf", "");
done:
    if (made_dir) out_forget(&made_dir, 'd', NULL);
    free(tpath);
    free(dpath);
    source_free(&ts);
    source_free(&ds);
    gvocab_free(&voc);
    if (have_w) vocab_free(&words);
    if (have_d) model_free(&draft);
    if (have_t) model_free(&target);
    return rc;
}
