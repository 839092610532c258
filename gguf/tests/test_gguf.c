/* gguf/tests/test_gguf.c - `dflash gguf` (issue 27), read back by a GGUF reader of
 * its own (nothing of gguf/gguf.c is used here):
 *   - the header (magic, version 3, counts), every key-value pair (types,
 *     lengths, arrays), the tensor table (names, dims, types, offsets), the
 *     alignment (general.alignment or 32) of the data section and of every
 *     offset, no tensor outside the file or overlapping the next;
 *   - every tensor against the safetensors source, byte for byte after the
 *     documented conversion: the GGUF name of llama.cpp's qwen3 / dflash
 *     layout, ne = the numpy shape reversed, 2-D tensors in the source's type
 *     and bytes, 1-D tensors F32 (BF16/F16 widened: value worked out here
 *     from sign, exponent and fraction with ldexp), nothing more, nothing less
 *     (the draft has no token_embd/output of its own);
 *   - the metadata llama.cpp's loaders read, with the types they accept:
 *     general.architecture, the hyperparameters against config.json,
 *     dflash.block_size, dflash.target_layers = target_layer_ids + 1 (read from
 *     the draft's config.json), tokenizer.ggml.mask_token_id, the gpt2
 *     vocabulary (tokens = vocab.txt's lines or tokenizer.json's ids, an empty
 *     merges array that is present), for walkthrough, random and qwen3-layout;
 *   - a hybrid target (toy_weights/hybrid, when made) as llama.cpp's qwen35:
 *     names, the converter's value transforms and value-head reorder worked
 *     out here, its keys; layer_types off the interval refused;
 *   - the reader fails on a flipped data byte and on a misaligned offset;
 *   - bad input: exit 2, one line, no OUT_DIR left behind.
 * Needs `make weights` and ./dflash. */
#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

#include <math.h>
#include <sys/wait.h>

/* ---- the reader ------------------------------------------------------------ */

enum { V_U8, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STR, V_ARR, V_U64, V_I64, V_F64 };

typedef struct {
    char key[160];
    uint32_t type, arr_type;
    uint64_t arr_n;
    const unsigned char *val;  /* the value's bytes (after the type; an array: after type and count) */
} Kv;

typedef struct {
    char name[128];
    uint32_t ndim, type;
    uint64_t ne[4], off, nbytes;
} Ti;

typedef struct {
    unsigned char *buf;
    size_t len;
    uint64_t n_t, n_kv;
    Kv *kv;
    Ti *ti;
    size_t data;
    uint32_t align;
    char err[1200];
} Gg;

typedef struct {
    const unsigned char *p, *end;
    int bad;
} Cur;

static uint64_t rd(Cur *c, int n) {
    uint64_t v = 0;
    if (c->bad || c->end - c->p < n) { c->bad = 1; return 0; }
    for (int i = n - 1; i >= 0; i--) v = v << 8 | c->p[i];
    c->p += n;
    return v;
}

static const unsigned char *rd_str(Cur *c, uint64_t *n) {
    *n = rd(c, 8);
    if (c->bad || (uint64_t)(c->end - c->p) < *n) { c->bad = 1; return NULL; }
    const unsigned char *s = c->p;
    c->p += *n;
    return s;
}

static int scalar_size(uint32_t t) {
    static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t <= V_F64 ? sz[t] : -1;
}

static void skip_value(Cur *c, uint32_t t) {
    uint64_t n;
    if (t == V_STR) { rd_str(c, &n); return; }
    int s = scalar_size(t);
    if (s <= 0) { c->bad = 1; return; }
    rd(c, s);
}

static void gg_free(Gg *g) {
    tu_unmap(g->buf, g->len);
    free(g->kv);
    free(g->ti);
    memset(g, 0, sizeof *g);
}

static int ggml_type_size(uint32_t t) { return t == 0 ? 4 : (t == 1 || t == 30) ? 2 : -1; }

#define GFAIL(...) do { snprintf(g->err, sizeof g->err, __VA_ARGS__); return -1; } while (0)

/* parse a whole file held in g->buf */
static int gg_parse(Gg *g) {
    Cur c = {g->buf, g->buf + g->len, 0};
    if (g->len < 24 || memcmp(g->buf, "GGUF", 4) != 0) GFAIL("no GGUF magic");
    c.p += 4;
    uint32_t version = (uint32_t)rd(&c, 4);
    if (version != 3) GFAIL("version %u, expected 3", version);
    g->n_t = rd(&c, 8), g->n_kv = rd(&c, 8);
    if (g->n_t > 100000 || g->n_kv > 100000) GFAIL("counts out of range");
    g->kv = calloc(g->n_kv + 1, sizeof *g->kv);
    g->ti = calloc(g->n_t + 1, sizeof *g->ti);
    if (!g->kv || !g->ti) GFAIL("out of memory");
    g->align = 32;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        Kv *k = &g->kv[i];
        uint64_t kl;
        const unsigned char *ks = rd_str(&c, &kl);
        if (c.bad || kl == 0 || kl >= sizeof k->key) GFAIL("key %llu: bad string", (unsigned long long)i);
        memcpy(k->key, ks, kl);
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->kv[j].key, k->key) == 0) GFAIL("key %s twice", k->key);
        k->type = (uint32_t)rd(&c, 4);
        if (k->type == V_ARR) {
            k->arr_type = (uint32_t)rd(&c, 4);
            k->arr_n = rd(&c, 8);
            k->val = c.p;
            if (k->arr_type == V_ARR) GFAIL("%s: nested array", k->key);
            for (uint64_t j = 0; j < k->arr_n && !c.bad; j++) skip_value(&c, k->arr_type);
        } else {
            k->val = c.p;
            skip_value(&c, k->type);
        }
        if (c.bad) GFAIL("%s: value runs past the end or has an unknown type", k->key);
        if (strcmp(k->key, "general.alignment") == 0) {
            if (k->type != V_U32) GFAIL("general.alignment is not u32");
            Cur a = {k->val, k->val + 4, 0};
            g->align = (uint32_t)rd(&a, 4);
            if (g->align == 0 || (g->align & (g->align - 1))) GFAIL("alignment %u", g->align);
        }
    }
    for (uint64_t i = 0; i < g->n_t; i++) {
        Ti *t = &g->ti[i];
        uint64_t nl;
        const unsigned char *ns = rd_str(&c, &nl);
        if (c.bad || nl == 0 || nl >= sizeof t->name) GFAIL("tensor %llu: bad name", (unsigned long long)i);
        memcpy(t->name, ns, nl);
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->ti[j].name, t->name) == 0) GFAIL("tensor %s twice", t->name);
        t->ndim = (uint32_t)rd(&c, 4);
        if (t->ndim < 1 || t->ndim > 4) GFAIL("%s: %u dims", t->name, t->ndim);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->ndim; d++) n *= (t->ne[d] = rd(&c, 8));
        t->type = (uint32_t)rd(&c, 4);
        t->off = rd(&c, 8);
        if (c.bad) GFAIL("%s: the tensor table runs past the end", t->name);
        if (ggml_type_size(t->type) < 0) GFAIL("%s: ggml type %u (expected F32, F16 or BF16)", t->name, t->type);
        t->nbytes = n * (uint64_t)ggml_type_size(t->type);
        if (t->off % g->align) GFAIL("%s: offset %llu is not a multiple of %u", t->name, (unsigned long long)t->off, g->align);
    }
    size_t pos = (size_t)(c.p - g->buf);
    g->data = (pos + g->align - 1) / g->align * g->align;
    for (size_t k = pos; k < g->data && k < g->len; k++)
        if (g->buf[k]) GFAIL("padding before the data is not zero");
    for (uint64_t i = 0; i < g->n_t; i++) {
        const Ti *t = &g->ti[i];
        if (g->data + t->off + t->nbytes > g->len) GFAIL("%s: data past the end of the file", t->name);
        if (i + 1 < g->n_t && t->off + t->nbytes > g->ti[i + 1].off) GFAIL("%s overlaps %s", t->name, g->ti[i + 1].name);
    }
    return 0;
}

static int gg_load(Gg *g, const char *path) {
    memset(g, 0, sizeof *g);
    g->buf = tu_map(path, &g->len);
    if (!g->buf) { snprintf(g->err, sizeof g->err, "%s: cannot read", path); return -1; }
    return gg_parse(g);
}

static const Kv *kv_find(const Gg *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

static const Ti *ti_find(const Gg *g, const char *name) {
    for (uint64_t i = 0; i < g->n_t; i++)
        if (strcmp(g->ti[i].name, name) == 0) return &g->ti[i];
    return NULL;
}

static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* the key as an u32 (llama.cpp's get_key<uint32_t> wants exactly that type) */
static long long kv_u32(const Gg *g, const char *key) {
    const Kv *k = kv_find(g, key);
    if (!k) fail_msg("missing key %s", key);
    if (k->type != V_U32) fail_msg("%s: type %u, expected u32", key, k->type);
    return le32(k->val);
}

static float kv_f32(const Gg *g, const char *key) {
    const Kv *k = kv_find(g, key);
    if (!k) fail_msg("missing key %s", key);
    if (k->type != V_F32) fail_msg("%s: type %u, expected f32", key, k->type);
    uint32_t u = le32(k->val);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void kv_str_is(const Gg *g, const char *key, const char *want) {
    const Kv *k = kv_find(g, key);
    if (!k) fail_msg("missing key %s", key);
    if (k->type != V_STR) fail_msg("%s: type %u, expected a string", key, k->type);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | k->val[i];
    if (n != strlen(want) || memcmp(k->val + 8, want, n) != 0) fail_msg("%s: \"%.*s\", expected \"%s\"", key, (int)n, k->val + 8, want);
}

/* element i of a string array (the pointer, its length in *n) */
static const unsigned char *arr_str(const Kv *k, uint64_t i, uint64_t *n) {
    Cur c = {k->val, k->val + (1u << 30), 0};
    for (uint64_t j = 0; j < i; j++) skip_value(&c, V_STR);
    return rd_str(&c, n);
}

/* ---- the source --------------------------------------------------------- */

static Json read_json(const char *path) {
    size_t len = 0;
    char *t = tu_read(path, &len);
    if (!t) fail_msg("%s: cannot read", path);
    Json j;
    if (json_parse(t, len, path, &j) != 0) fail_msg("%s", dflash_errmsg);
    free(t);
    return j;
}

static long long jint(const Json *o, const char *key) {
    const Json *v = json_get(o, key);
    if (!v || !v->is_integer) fail_msg("config: %s is not an integer", key);
    return v->integer;
}

static double jnum(const Json *o, const char *key) {
    const Json *v = json_get(o, key);
    if (!v || v->type != JSON_NUMBER) fail_msg("config: %s is not a number", key);
    return v->number;
}

/* llama.cpp's names (gguf-py's Qwen3 tensor map; DFlashModel.modify_tensors) */
static void expected_name(const char *hf, char *out, size_t size) {
    static const char *const m[][2] = {
        {"input_layernorm", "attn_norm"}, {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
        {"self_attn.v_proj", "attn_v"}, {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"},
        {"self_attn.k_norm", "attn_k_norm"}, {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
        {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"},
    };
    char base[160];
    snprintf(base, sizeof base, "%s", hf + (strncmp(hf, "model.", 6) ? 0 : 6));
    if (strcmp(base, "embed_tokens.weight") == 0) { snprintf(out, size, "token_embd.weight"); return; }
    if (strcmp(base, "lm_head.weight") == 0) { snprintf(out, size, "output.weight"); return; }
    if (strcmp(base, "norm.weight") == 0) { snprintf(out, size, "output_norm.weight"); return; }
    if (strcmp(base, "hidden_norm.weight") == 0) { snprintf(out, size, "enc.output_norm.weight"); return; }
    if (strcmp(base, "fc.weight") == 0) { snprintf(out, size, "fc.weight"); return; }
    int l, e = 0;
    if (sscanf(base, "layers.%d.%n", &l, &e) == 1)
        for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
            size_t n = strlen(m[k][0]);
            if (strncmp(base + e, m[k][0], n) == 0 && strcmp(base + e + n, ".weight") == 0) {
                snprintf(out, size, "blk.%d.%s.weight", l, m[k][1]);
                return;
            }
        }
    fail_msg("source tensor %s: no expected name", hf);
}

/* a 16-bit float's value, from its fields */
static float half_value(uint16_t h, int bf16) {
    int sign = h >> 15, e, f;
    double v;
    if (bf16) {
        e = h >> 7 & 0xff, f = h & 0x7f;
        v = e ? ldexp(128 + f, e - 127 - 7) : ldexp(f, -126 - 7);
    } else {
        e = h >> 10 & 0x1f, f = h & 0x3ff;
        v = e ? ldexp(1024 + f, e - 15 - 10) : ldexp(f, -14 - 10);
    }
    return (float)(sign ? -v : v);
}

/* every tensor of the folder against g; 0, or -1 with g->err */
static int check_tensors(Gg *g, const char *dir, int draft) {
    char files[8][600];
    int n_files = 0;
    char idx[600];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    if (tu_exists(idx)) {
        Json j = read_json(idx);
        const Json *wm = json_get(&j, "weight_map");
        for (int k = 0; k < wm->n; k++) {
            int seen = 0;
            for (int f = 0; f < n_files; f++) seen |= strcmp(files[f] + strlen(dir) + 1, wm->items[k].string) == 0;
            if (!seen) snprintf(files[n_files++], 600, "%s/%s", dir, wm->items[k].string);
        }
        json_free(&j);
    } else snprintf(files[n_files++], 600, "%s/model.safetensors", dir);
    uint64_t n_src = 0;
    for (int f = 0; f < n_files; f++) {
        size_t len = 0;
        unsigned char *b = tu_map(files[f], &len);
        assert_non_null(b);
        uint64_t hn = 0;
        for (int i = 7; i >= 0; i--) hn = hn << 8 | b[i];
        Json h;
        assert_int_equal(json_parse((char *)b + 8, hn, files[f], &h), 0);
        for (int k = 0; k < h.n; k++) {
            if (strcmp(h.keys[k], "__metadata__") == 0) continue;
            n_src++;
            const Json *e = &h.items[k], *sh = json_get(e, "shape"), *of = json_get(e, "data_offsets");
            const char *dt = json_get(e, "dtype")->string;
            int src_t = strcmp(dt, "F32") == 0 ? 0 : strcmp(dt, "F16") == 0 ? 1 : strcmp(dt, "BF16") == 0 ? 30 : -1;
            char name[160];
            expected_name(h.keys[k], name, sizeof name);
            const Ti *t = ti_find(g, name);
            if (!t) { snprintf(g->err, sizeof g->err, "%.200s: no tensor %.60s", files[f], name); json_free(&h); tu_unmap(b, len); return -1; }
            int ok = t->ndim == (uint32_t)sh->n;
            uint64_t numel = 1;
            for (int d = 0; ok && d < sh->n; d++) {
                ok = t->ne[d] == (uint64_t)sh->items[sh->n - 1 - d].integer;  /* ne = shape reversed */
                numel *= t->ne[d];
            }
            ok = ok && t->type == (uint32_t)(sh->n == 1 ? 0 : src_t);  /* 1-D: F32; else the source's type */
            const unsigned char *src = b + 8 + hn + of->items[0].integer, *dst = g->buf + g->data + t->off;
            if (ok && t->type == (uint32_t)src_t) ok = memcmp(src, dst, t->nbytes) == 0;
            else
                for (uint64_t i = 0; ok && i < numel; i++) {
                    uint32_t u = le32(dst + 4 * i);
                    float got, want = half_value((uint16_t)(src[2 * i] | src[2 * i + 1] << 8), src_t == 30);
                    memcpy(&got, &u, 4);
                    ok = memcmp(&got, &want, 4) == 0;
                }
            if (!ok) {
                snprintf(g->err, sizeof g->err, "%.200s: %.60s (from %.60s): dims, type or bytes differ", dir, name, h.keys[k]);
                json_free(&h);
                tu_unmap(b, len);
                return -1;
            }
        }
        json_free(&h);
        tu_unmap(b, len);
    }
    if (n_src != g->n_t) { snprintf(g->err, sizeof g->err, "%.200s: %llu tensors, the source has %llu", dir, (unsigned long long)g->n_t, (unsigned long long)n_src); return -1; }
    if (draft && (ti_find(g, "token_embd.weight") || ti_find(g, "output.weight"))) { snprintf(g->err, sizeof g->err, "the draft has an embedding or output of its own"); return -1; }
    return 0;
}

/* ---- the metadata ----------------------------------------------------------- */

static void check_meta(const Gg *g, const char *dir, const char *arch) {
    char p[1200], k[200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    Json c = read_json(p);
    kv_str_is(g, "general.architecture", arch);
#define A(key) (snprintf(k, sizeof k, "%s." key, arch), k)
    /* what llama_model::load_hparams requires for both (and the optional keys the toys need) */
    assert_int_equal(kv_u32(g, A("block_count")), jint(&c, "num_hidden_layers"));
    assert_int_equal(kv_u32(g, A("context_length")), jint(&c, "max_position_embeddings"));
    assert_int_equal(kv_u32(g, A("embedding_length")), jint(&c, "hidden_size"));
    assert_int_equal(kv_u32(g, A("feed_forward_length")), jint(&c, "intermediate_size"));
    assert_int_equal(kv_u32(g, A("attention.head_count")), jint(&c, "num_attention_heads"));
    assert_int_equal(kv_u32(g, A("attention.head_count_kv")), jint(&c, "num_key_value_heads"));
    assert_int_equal(kv_u32(g, A("attention.key_length")), jint(&c, "head_dim"));
    assert_int_equal(kv_u32(g, A("attention.value_length")), jint(&c, "head_dim"));
    assert_true(kv_f32(g, A("attention.layer_norm_rms_epsilon")) == (float)jnum(&c, "rms_norm_eps"));
    assert_true(kv_f32(g, A("rope.freq_base")) == (float)jnum(&c, "rope_theta"));
    if (strcmp(arch, "dflash") == 0) {
        const Json *dc = json_get(&c, "dflash_config"), *ids = json_get(dc, "target_layer_ids");
        assert_int_equal(kv_u32(g, "dflash.block_size"), jint(&c, "block_size"));
        assert_int_equal(kv_u32(g, "tokenizer.ggml.mask_token_id"), jint(dc, "mask_token_id"));
        const Kv *tl = kv_find(g, "dflash.target_layers");  /* required: "DFlash model requires 'target_layers'" */
        assert_non_null(tl);
        assert_int_equal(tl->type, V_ARR);
        assert_true(tl->arr_type == V_I32 || tl->arr_type == V_U32);
        assert_int_equal(tl->arr_n, ids->n);
        for (int i = 0; i < ids->n; i++) assert_int_equal(le32(tl->val + 4 * i), ids->items[i].integer + 1);  /* +1 */
        /* the sliding layers, as llama.cpp's dflash load_arch_hparams reads
         * them (LLM_KV_ATTENTION_SLIDING_WINDOW, u32, and ..._PATTERN, a bool
         * array, one per layer): from config.json's layer_types (or, without
         * it, transformers' rule: layer i slides when use_sliding_window and
         * i >= max_window_layers); no sliding layer, no keys */
        const Json *usw = json_get(&c, "use_sliding_window"), *lt = json_get(&c, "layer_types");
        int L = (int)jint(&c, "num_hidden_layers"), n_sl = 0, want[256] = {0};
        for (int l = 0; l < L && l < 256; l++) {
            if (lt && lt->type == JSON_ARRAY) want[l] = strcmp(lt->items[l].string, "sliding_attention") == 0;
            else want[l] = usw && usw->type == JSON_BOOL && usw->boolean && l >= jint(&c, "max_window_layers");
            n_sl += want[l];
        }
        const Kv *pat = kv_find(g, "dflash.attention.sliding_window_pattern");
        if (n_sl == 0) {
            assert_null(kv_find(g, "dflash.attention.sliding_window"));
            assert_null(pat);
        } else {
            assert_int_equal(kv_u32(g, "dflash.attention.sliding_window"), jint(&c, "sliding_window"));
            assert_non_null(pat);
            assert_int_equal(pat->type, V_ARR);
            assert_int_equal(pat->arr_type, V_BOOL);
            assert_int_equal(pat->arr_n, L);
            for (int l = 0; l < L; l++) assert_int_equal(pat->val[l], want[l]);
        }
    }
#undef A
    /* the vocabulary llama_vocab::load reads for a gpt2 model */
    kv_str_is(g, "tokenizer.ggml.model", "gpt2");
    const Kv *tok = kv_find(g, "tokenizer.ggml.tokens"), *ty = kv_find(g, "tokenizer.ggml.token_type");
    const Kv *mer = kv_find(g, "tokenizer.ggml.merges");
    assert_non_null(tok);
    assert_non_null(ty);
    assert_non_null(mer);  /* "cannot find tokenizer merges in model file" otherwise */
    assert_int_equal(tok->type, V_ARR);
    assert_int_equal(tok->arr_type, V_STR);
    assert_int_equal(tok->arr_n, jint(&c, "vocab_size"));
    assert_int_equal(ty->arr_type, V_I32);
    assert_int_equal(ty->arr_n, tok->arr_n);
    assert_int_equal(mer->type, V_ARR);
    assert_int_equal(mer->arr_type, V_STR);
    assert_int_equal(kv_u32(g, "tokenizer.ggml.eos_token_id"), json_get(&c, "eos_token_id")->is_integer
                                                                  ? jint(&c, "eos_token_id")
                                                                  : json_get(&c, "eos_token_id")->items[0].integer);
    json_free(&c);
}

/* tokens = vocab.txt's lines, or tokenizer.json's tokens by id; merges as many as the source's */
static void check_tokens(const Gg *g, const char *set) {
    const Kv *tok = kv_find(g, "tokenizer.ggml.tokens"), *mer = kv_find(g, "tokenizer.ggml.merges");
    char p[1200];
    snprintf(p, sizeof p, "%s/vocab.txt", set);
    if (tu_exists(p)) {
        size_t len;
        char *t = tu_read(p, &len), *line = t, *save = NULL;
        uint64_t i = 0, n;
        for (char *w = strtok_r(line, "\n", &save); w; w = strtok_r(NULL, "\n", &save), i++) {
            const unsigned char *s = arr_str(tok, i, &n);
            if (n != strlen(w) || memcmp(s, w, n) != 0) fail_msg("token %llu: \"%.*s\", vocab.txt has \"%s\"", (unsigned long long)i, (int)n, s, w);
        }
        assert_int_equal(i, tok->arr_n);
        assert_int_equal(mer->arr_n, 0);  /* the toy words: no merges, the key present */
        free(t);
        return;
    }
    snprintf(p, sizeof p, "%s/target/tokenizer.json", set);
    Json j = read_json(p);
    const Json *v = json_get(json_get(&j, "model"), "vocab"), *add = json_get(&j, "added_tokens");
    uint64_t n;
    for (int k = 0; k < v->n; k++) {
        const unsigned char *s = arr_str(tok, (uint64_t)v->items[k].integer, &n);
        assert_true(n == strlen(v->keys[k]) && memcmp(s, v->keys[k], n) == 0);
    }
    for (int k = 0; k < add->n; k++) {
        const char *w = json_get(&add->items[k], "content")->string;
        const unsigned char *s = arr_str(tok, (uint64_t)jint(&add->items[k], "id"), &n);
        assert_true(n == strlen(w) && memcmp(s, w, n) == 0);
    }
    assert_int_equal(mer->arr_n, json_get(json_get(&j, "model"), "merges")->n);
    json_free(&j);
}

/* ---- the tests ---------------------------------------------------------------- */

static char *TMP;

static void convert(const char *set, char *out, size_t size) {
    snprintf(out, size, "%s/%s", TMP, set);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "./dflash gguf --weights toy_weights/%s %s >/dev/null", set, out);
    assert_int_equal(system(cmd), 0);
}

static void check_set(const char *set) {
    char out[600], src[600], dir[700];
    convert(set, out, sizeof out);
    snprintf(src, sizeof src, "toy_weights/%s", set);
    const char *which[2] = {"target", "draft"};
    for (int m = 0; m < 2; m++) {
        Gg g;
        if (gg_load(&g, tu_path(out, m ? "draft.gguf" : "target.gguf")) != 0) fail_msg("%s %s: %s", set, which[m], g.err);
        snprintf(dir, sizeof dir, "%s/%s", src, which[m]);
        if (check_tensors(&g, dir, m) != 0) fail_msg("%s", g.err);
        check_meta(&g, dir, m ? "dflash" : "qwen3");
        check_tokens(&g, src);
        gg_free(&g);
    }
}

static void test_walkthrough(void **s) { (void)s; check_set("walkthrough"); }
static void test_random(void **s) { (void)s; check_set("random"); }
static void test_qwen3_layout(void **s) { (void)s; check_set("qwen3-layout"); }
/* draft layers 0..3 sliding (window 6), layer 4 full */
static void test_sliding(void **s) { (void)s; check_set("sliding"); }

/* A hybrid target (toy_weights/hybrid: Qwen3_5ForCausalLM) as llama.cpp's
 * qwen35, worked out here from the converter's rules (Qwen3_5TextModel,
 * Qwen3NextModel.modify_tensors, _LinearAttentionVReorderBase): every source
 * tensor under its qwen35 name, ne = the shape reversed (conv1d's (C, 1, K)
 * squeezed), F32 here; the values: norms but linear_attn.norm as 1 + w,
 * A_log as -exp; value heads grouped by key head [g0 v0..v(r-1), g1 ...]
 * become tiled [g0 v0, g1 v0, ...] (output head j * Hk + g = source head
 * g * r + j) along in_proj_qkv's and conv1d's value rows, in_proj_z's,
 * in_proj_a's, in_proj_b's, A_log's and dt_bias's rows, out_proj's columns;
 * and the keys llama.cpp's qwen35 loader reads. Skipped without the set. */
static void test_hybrid_qwen35(void **s) {
    (void)s;
    const char *set = "toy_weights/hybrid";
    char p[1200], out[600], cmd[2400];
    snprintf(p, sizeof p, "%s/target/model.safetensors", set);
    if (!tu_exists(p)) tu_skip("%s missing (make weights)", p);
    snprintf(out, sizeof out, "%s/hybrid", TMP);
    snprintf(cmd, sizeof cmd, "./dflash gguf --weights %s %s >/dev/null", set, out);
    assert_int_equal(system(cmd), 0);
    Gg g;
    if (gg_load(&g, tu_path(out, "target.gguf")) != 0) fail_msg("%s", g.err);
    snprintf(p, sizeof p, "%s/target/config.json", set);
    Json c = read_json(p);
    int Hk = (int)jint(&c, "linear_num_key_heads"), Hv = (int)jint(&c, "linear_num_value_heads");
    int dk = (int)jint(&c, "linear_key_head_dim"), dv = (int)jint(&c, "linear_value_head_dim"), r = Hv / Hk;
    kv_str_is(&g, "general.architecture", "qwen35");
    assert_int_equal(kv_u32(&g, "qwen35.block_count"), jint(&c, "num_hidden_layers"));
    assert_int_equal(kv_u32(&g, "qwen35.ssm.conv_kernel"), jint(&c, "linear_conv_kernel_dim"));
    assert_int_equal(kv_u32(&g, "qwen35.ssm.state_size"), dk);
    assert_int_equal(kv_u32(&g, "qwen35.ssm.group_count"), Hk);
    assert_int_equal(kv_u32(&g, "qwen35.ssm.time_step_rank"), Hv);
    assert_int_equal(kv_u32(&g, "qwen35.ssm.inner_size"), Hv * dv);
    assert_int_equal(kv_u32(&g, "qwen35.full_attention_interval"), jint(&c, "full_attention_interval"));
    const Json *rp = json_get(&c, "rope_parameters");
    assert_int_equal(kv_u32(&g, "qwen35.rope.dimension_count"),
                     (long long)(jint(&c, "head_dim") * jnum(rp, "partial_rotary_factor")));
    assert_true(kv_f32(&g, "qwen35.rope.freq_base") == (float)jnum(rp, "rope_theta"));
    const Kv *sec = kv_find(&g, "qwen35.rope.dimension_sections");
    const Json *ms = json_get(rp, "mrope_section");
    assert_non_null(sec);
    assert_int_equal(sec->arr_type, V_I32);
    assert_int_equal(sec->arr_n, 4);
    for (int k = 0; k < 4; k++) assert_int_equal(le32(sec->val + 4 * k), k < ms->n ? ms->items[k].integer : 0);
    static const char *const names[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"}, {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"}, {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
        {"linear_attn.in_proj_z.weight", "attn_gate.weight"}, {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
        {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"}, {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
        {"linear_attn.A_log", "ssm_a"}, {"linear_attn.dt_bias", "ssm_dt.bias"},
        {"linear_attn.norm.weight", "ssm_norm.weight"}, {"linear_attn.out_proj.weight", "ssm_out.weight"},
    };
    snprintf(p, sizeof p, "%s/target/model.safetensors", set);
    size_t len = 0;
    unsigned char *b = tu_map(p, &len);
    assert_non_null(b);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | b[i];
    Json h;
    assert_int_equal(json_parse((char *)b + 8, hn, p, &h), 0);
    int n_src = 0, n_moved = 0;
    for (int k = 0; k < h.n; k++) {
        const char *hf = h.keys[k];
        if (strcmp(hf, "__metadata__") == 0) continue;
        n_src++;
        const Json *e = &h.items[k], *sh = json_get(e, "shape"), *of = json_get(e, "data_offsets");
        assert_string_equal(json_get(e, "dtype")->string, "F32");
        char name[160] = "", sub[160] = "";
        int l = -1, end = 0;
        if (sscanf(hf, "model.layers.%d.%n", &l, &end) == 1) {
            snprintf(sub, sizeof sub, "%s", hf + end);
            for (size_t m = 0; m < sizeof names / sizeof names[0]; m++)
                if (strcmp(sub, names[m][0]) == 0) snprintf(name, sizeof name, "blk.%d.%s", l, names[m][1]);
        } else if (strcmp(hf, "model.embed_tokens.weight") == 0) snprintf(name, sizeof name, "token_embd.weight");
        else if (strcmp(hf, "model.norm.weight") == 0) snprintf(name, sizeof name, "output_norm.weight");
        else if (strcmp(hf, "lm_head.weight") == 0) snprintf(name, sizeof name, "output.weight");
        if (!name[0]) fail_msg("%s: no expected name", hf);
        const Ti *t = ti_find(&g, name);
        if (!t) fail_msg("%s: no tensor %s", hf, name);
        /* the shape, squeezed, in numpy order */
        uint64_t shape[2] = {1, 1};
        int nd = 0;
        for (int d = 0; d < sh->n; d++)
            if (!(sh->n == 3 && d == 1)) shape[nd++] = (uint64_t)sh->items[d].integer;
        assert_int_equal(t->ndim, nd);
        for (int d = 0; d < nd; d++) assert_int_equal(t->ne[d], shape[nd - 1 - d]);
        assert_int_equal(t->type, 0);
        uint64_t rows = shape[0], cols = nd == 2 ? shape[1] : 1;
        /* the value head reorder: which rows (from row0, heads of hd rows) or columns */
        int rowwise = 0, colwise = 0;
        uint64_t row0 = 0, hd = 0;
        if (!strcmp(sub, "linear_attn.in_proj_qkv.weight") || !strcmp(sub, "linear_attn.conv1d.weight"))
            rowwise = 1, row0 = 2 * (uint64_t)Hk * dk, hd = dv;
        else if (!strcmp(sub, "linear_attn.in_proj_z.weight")) rowwise = 1, hd = dv;
        else if (!strcmp(sub, "linear_attn.in_proj_a.weight") || !strcmp(sub, "linear_attn.in_proj_b.weight") ||
                 !strcmp(sub, "linear_attn.A_log") || !strcmp(sub, "linear_attn.dt_bias"))
            rowwise = 1, hd = 1;
        else if (!strcmp(sub, "linear_attn.out_proj.weight")) colwise = 1, hd = dv;
        size_t hl = strlen(hf);
        int plus1 = hl >= 11 && !strcmp(hf + hl - 11, "norm.weight") && strcmp(sub, "linear_attn.norm.weight");
        int negexp = !strcmp(sub, "linear_attn.A_log");
        const unsigned char *src = b + 8 + hn + of->items[0].integer, *dst = g.buf + g.data + t->off;
        for (uint64_t i = 0; i < rows; i++)
            for (uint64_t j = 0; j < cols; j++) {
                uint64_t si = i, sj = j;  /* the source element the output's (i, j) comes from */
                if (rowwise && i >= row0) {
                    uint64_t head = (i - row0) / hd, jj = head / (uint64_t)Hk, gg = head % (uint64_t)Hk;
                    si = row0 + (gg * (uint64_t)r + jj) * hd + (i - row0) % hd;
                }
                if (colwise) {
                    uint64_t head = j / hd, jj = head / (uint64_t)Hk, gg = head % (uint64_t)Hk;
                    sj = (gg * (uint64_t)r + jj) * hd + j % hd;
                }
                n_moved += si != i || sj != j;
                float x, got;
                uint32_t u = le32(src + 4 * (si * cols + sj)), v = le32(dst + 4 * (i * cols + j));
                memcpy(&x, &u, 4);
                memcpy(&got, &v, 4);
                float want = plus1 ? x + 1.0f : negexp ? -expf(x) : x;
                if (memcmp(&got, &want, 4) != 0)
                    fail_msg("%s -> %s: element (%llu, %llu) is %.9g, expected %.9g", hf, name, (unsigned long long)i,
                             (unsigned long long)j, got, want);
            }
    }
    assert_int_equal(g.n_t, n_src);
    assert_true(r == 1 || n_moved > 0);  /* with Hv > Hk, the reorder moved something */
    json_free(&h);
    tu_unmap(b, len);
    json_free(&c);
    gg_free(&g);
    /* what llama.cpp's qwen35 cannot hold is refused: layer_types that are not
     * every full_attention_interval-th layer full attention (its loader
     * derives the pattern from the interval) -- exit 2, one line, nothing written */
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/iv/target && ln -s \"$PWD/%s/draft\" %s/iv/draft && cp %s/vocab.txt %s/iv/ && "
             "ln -s \"$PWD/%s/target/model.safetensors\" %s/iv/target/ && "
             "sed 's/\"full_attention_interval\": *[0-9]*/\"full_attention_interval\": 3/' %s/target/config.json > %s/iv/target/config.json && "
             "grep -q '\"full_attention_interval\": 3' %s/iv/target/config.json",
             TMP, set, TMP, set, TMP, set, TMP, set, TMP, TMP);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "./dflash gguf --weights %s/iv %s/iv-out 2>%s/iv-err", TMP, TMP, TMP);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    snprintf(p, sizeof p, "%s/iv-err", TMP);
    char *err = tu_read(p, NULL);
    assert_non_null(err);
    if (WEXITSTATUS(st) != 2 || strncmp(err, "dflash gguf: ", 13) != 0 || !strstr(err, "full_attention_interval") ||
        strchr(err, '\n') != err + strlen(err) - 1)
        fail_msg("exit %d: %s", WEXITSTATUS(st), err);
    free(err);
    snprintf(p, sizeof p, "%s/iv-out", TMP);
    assert_false(tu_exists(p));
}

/* the reader can fail: one data byte changed, one offset made misaligned */
static void test_reader_catches_damage(void **s) {
    (void)s;
    char out[600];
    convert("qwen3-layout", out, sizeof out);
    Gg g;
    assert_int_equal(gg_load(&g, tu_path(out, "draft.gguf")), 0);
    const Ti *t = ti_find(&g, "blk.0.attn_q.weight");
    assert_non_null(t);
    g.buf[g.data + t->off + 7] ^= 0x40;
    assert_int_equal(check_tensors(&g, "toy_weights/qwen3-layout/draft", 1), -1);
    assert_non_null(strstr(g.err, "blk.0.attn_q.weight"));
    gg_free(&g);
    /* the first tensor's offset field is the last 8 bytes before the second tensor's name */
    assert_int_equal(gg_load(&g, tu_path(out, "draft.gguf")), 0);
    size_t pos = 24;
    Cur c = {g.buf + pos, g.buf + g.len, 0};
    c.p = g.buf + 24;
    for (uint64_t i = 0; i < g.n_kv; i++) {
        uint64_t n;
        rd_str(&c, &n);
        uint32_t ty = (uint32_t)rd(&c, 4);
        if (ty == V_ARR) {
            uint32_t at = (uint32_t)rd(&c, 4);
            uint64_t an = rd(&c, 8);
            for (uint64_t j = 0; j < an; j++) skip_value(&c, at);
        } else skip_value(&c, ty);
    }
    uint64_t n;
    rd_str(&c, &n);
    uint32_t nd = (uint32_t)rd(&c, 4);
    c.p += 8 * nd + 4;
    ((unsigned char *)c.p)[0] += 4;  /* offset 0 -> 4 */
    unsigned char *buf = g.buf;
    size_t len = g.len;
    g.buf = NULL;
    gg_free(&g);
    g.buf = buf, g.len = len;
    assert_int_equal(gg_parse(&g), -1);
    assert_non_null(strstr(g.err, "not a multiple of 32"));
    gg_free(&g);
}

/* bad input: exit 2, one line on stderr, no OUT_DIR made */
static void test_refusals(void **s) {
    (void)s;
    const char *cases[] = {
        "--weights toy_weights/none OUT",                                  /* no such set */
        "--weights toy_weights/random",                                    /* no OUT_DIR */
        "--target toy_weights/random/target --draft toy_weights/random/draft OUT",  /* no vocabulary */
        "--target toy_weights/random/target --draft toy_weights/qwen3-layout/draft --vocab toy_weights/random/vocab.txt OUT",
        "--weights toy_weights/random toy_weights/random/target",           /* output inside an input */
        "--weights toy_weights/random OUT --frobnicate",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[4000], out[600], err[600];
        snprintf(out, sizeof out, "%s/refused%zu", TMP, i);
        snprintf(err, sizeof err, "%s/err%zu", TMP, i);
        char args[1000];
        snprintf(args, sizeof args, "%s", cases[i]);
        char *o = strstr(args, "OUT");
        if (o) { *o = 0; snprintf(cmd, sizeof cmd, "./dflash gguf %s%s%s 2>%s", args, out, o + 3, err); }
        else snprintf(cmd, sizeof cmd, "./dflash gguf %s 2>%s", args, err);
        int st = system(cmd);
        assert_true(WIFEXITED(st));
        if (WEXITSTATUS(st) != 2) fail_msg("%s: exit %d, expected 2", cases[i], WEXITSTATUS(st));
        size_t len = 0;
        char *e = tu_read(err, &len);
        assert_non_null(e);
        int lines = 0;
        for (size_t k = 0; k < len; k++) lines += e[k] == '\n';
        if (lines != 1 || strncmp(e, "dflash gguf: ", 13) != 0) fail_msg("%s: stderr \"%s\"", cases[i], e);
        free(e);
        assert_false(tu_exists(out));
    }
    assert_false(tu_exists("toy_weights/random/target/target.gguf"));
    /* an output that cannot be created: "dflash gguf: " once (issue 34, 10: it was doubled) */
    char cmd[2000], err[600];
    snprintf(err, sizeof err, "%s/err-dir", TMP);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/withdir/target.gguf && ./dflash gguf --weights toy_weights/random %s/withdir 2>%s",
             TMP, TMP, err);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    char *e = tu_read(err, NULL);
    assert_non_null(e);
    if (strncmp(e, "dflash gguf: ", 13) != 0 || strstr(e + 13, "dflash gguf: ") || !strstr(e, "target.gguf"))
        fail_msg("stderr \"%s\"", e);
    free(e);
}

/* tokenizer.json: Qwen2's pre-tokenizer is named "qwen2", Llama-3's (digits
 * up to three) "llama-bpe", merges given as [a, b] are written "a b"; a
 * pre-tokenizer llama.cpp's converter names by hash only is refused (exit 2,
 * one line, nothing written), and so is Llama-3's split without
 * ignore_merges (llama.cpp's llama-bpe always ignores merges for a piece
 * that is a token) */
static void test_tokenizer_json_rules(void **s) {
    (void)s;
    size_t len;
    char *src = tu_read("toy_weights/qwen3-layout/target/tokenizer.json", &len);
    assert_non_null(src);
    static const char qwen2[] =
        "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
        "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|"
        "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}]}";
    static const char llama3[] =
        "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
        "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|"
        "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]}";
    const char *ws = "\"pre_tokenizer\": {\"type\": \"Whitespace\"}";
    /* the set's file has Llama-3's pre-tokenizer and ignore_merges: the
     * latter out, each case below says it or not */
    const char *bl = llama3, *im = "\"ignore_merges\": true,\n    ";
    char *imp = strstr(src, im);
    assert_non_null(imp);
    memmove(imp, imp + strlen(im), strlen(imp + strlen(im)) + 1);
    char *at = strstr(src, bl), *mg = strstr(src, "\"merges\": []");
    assert_non_null(at);
    assert_non_null(mg);
    /* k: 0 qwen2, 1 Whitespace (refused), 2 llama3 + ignore_merges, 3 llama3 without (refused) */
    for (int k = 0; k < 4; k++) {
        char path[700], out[700], cmd[2600];
        FILE *f;
        snprintf(path, sizeof path, "%s/tok%d.json", TMP, k);
        snprintf(out, sizeof out, "%s/tokout%d", TMP, k);
        assert_non_null(f = fopen(path, "wb"));
        fwrite(src, 1, (size_t)(at - src), f);
        fputs(k == 0 ? qwen2 : k == 1 ? ws : llama3, f);
        fwrite(at + strlen(bl), 1, (size_t)(mg - at - strlen(bl)), f);
        if (k == 2) fputs("\"ignore_merges\": true, ", f);
        fputs("\"merges\": [[\"\u0120\", \"c\"], \"a t\"]", f);
        fputs(mg + strlen("\"merges\": []"), f);
        assert_int_equal(fclose(f), 0);
        snprintf(cmd, sizeof cmd, "./dflash gguf --weights toy_weights/qwen3-layout --vocab %s %s >/dev/null 2>%s.err", path, out, out);
        int st = system(cmd);
        if (k == 1 || k == 3) {
            char en[64];
            snprintf(en, sizeof en, "tokout%d.err", k);
            assert_int_equal(WEXITSTATUS(st), 2);
            assert_false(tu_exists(out));
            size_t elen = 0;
            char *e = tu_read(tu_path(TMP, en), &elen);
            assert_non_null(e);
            assert_non_null(strstr(e, k == 1 ? "pre_tokenizer" : "ignore_merges"));
            assert_true(elen > 0 && memchr(e, '\n', elen) == e + elen - 1);  /* one line */
            free(e);
            continue;
        }
        assert_int_equal(st, 0);
        Gg g;
        if (gg_load(&g, tu_path(out, "target.gguf")) != 0) fail_msg("%s", g.err);
        kv_str_is(&g, "tokenizer.ggml.pre", k == 0 ? "qwen2" : "llama-bpe");
        const Kv *m = kv_find(&g, "tokenizer.ggml.merges");
        assert_non_null(m);
        assert_int_equal(m->arr_n, 2);
        uint64_t n;
        const unsigned char *m0 = arr_str(m, 0, &n);
        assert_true(n == 4 && memcmp(m0, "\xc4\xa0 c", 4) == 0);  /* U+0120 is UTF-8 C4 A0 */
        m0 = arr_str(m, 1, &n);
        assert_true(n == 3 && memcmp(m0, "a t", 3) == 0);
        gg_free(&g);
    }
    free(src);
}

/* the converted files (~400 MB for the two 12-layer sets) in memory when the
 * machine has a /dev/shm, else under /tmp */
static int setup(void **s) {
    (void)s;
    TMP = strdup("/dev/shm/dflash-test-gguf.XXXXXX");
    if (TMP && !mkdtemp(TMP)) {
        free(TMP);
        TMP = tu_tmpdir();
    }
    return TMP ? 0 : -1;
}
static int teardown(void **s) { (void)s; tu_rmtree(TMP); free(TMP); return 0; }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walkthrough),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_qwen3_layout),
        cmocka_unit_test(test_sliding),
        cmocka_unit_test(test_hybrid_qwen35),
        cmocka_unit_test(test_reader_catches_damage),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_tokenizer_json_rules),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
