/* tests/test_hybrid.c - a hybrid target (Qwen3.5 text: Gated DeltaNet layers
 * between gated full-attention layers; dflash.c section 3b).
 *
 * The suite writes its own small hybrid set (no generator, no torch): a
 * 4-layer target (layers 0 and 2 Gated DeltaNet, 1 and 3 gated full
 * attention; Hv = 2 Hk and dk != dv; partial RoPE on half of each head) and
 * a 1-layer draft, weights from a fixed pseudo-random stream. It checks:
 *   - the loader: the config as written (layer types, linear sizes, rotary
 *     dims), a nested qwen3_5 config with model.language_model.* tensors in
 *     two shards and model.visual.* / mtp.* tensors ignored, tied embeddings;
 *   - the refusals (MoE, another rope type, attn_output_gate false, value
 *     heads not a multiple of key heads, an unknown layer type), each naming
 *     its key;
 *   - one step of the gated delta rule and one gated RMSNorm against values
 *     worked out by hand (in the comments);
 *   - the rollback: after a verify of a block, crop(n + m) leaves every
 *     linear layer's recurrent and conv state equal to those of a fresh
 *     prefill over the n + m kept tokens (a second computation), for every
 *     m; keeping the whole block's state (no rollback) differs;
 *   - losslessness: greedy DFlash == greedy target-only decoding at several
 *     block sizes, with rejections in most rounds (the untrained draft);
 *   - the trace of a run (through the hook): every name is a row of the
 *     table with its shape, and the states chain: a linear layer's state_in
 *     and conv_state_in in round r are the rollback states of round r-1 (the
 *     prefill's state_out in round 1), and the rollback conv state is
 *     conv_in[acc+1 : acc+K] of the verify;
 *   - the round log (--rounds): each round's rollback line names the
 *     position the accepted count on the same round's line gives, and the
 *     traced state there equals a fresh prefill up to that position;
 *   - a draft of another head_dim and intermediate_size traces with its own
 *     shapes. */
#include "dflash.c"
#include "formats/load.c"
#include "formats/tracenames.h"
#include "formats/files.h"
#include "trace.h"
#include "tests/testutil.h"
#include "tests/sampleutil.h"

/* ---- a small hybrid set, written here ------------------------------------- */

enum { HD = 16, HL = 4, HH = 2, HKV = 1, HDH = 8, HI = 32, HV = 24, HHK = 1, HDK = 4, HHV = 2, HDV = 6, HK = 3 };
#define HC (2 * HHK * HDK + HHV * HDV)

typedef struct {
    char name[128];
    int ndim;
    int64_t shape[3];
    float *data;
} HT;

typedef struct {
    HT t[96];
    int n;
    uint64_t rng;
} HSet;

static float hrand(HSet *s) {  /* uniform in [-1, 1) */
    s->rng = s->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(s->rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int64_t ht_numel(const HT *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* a tensor with values base + noise * uniform */
static void hadd(HSet *s, const char *name, int ndim, int64_t s0, int64_t s1, int64_t s2, float base, float noise) {
    HT *t = &s->t[s->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = s0, t->shape[1] = s1, t->shape[2] = s2;
    t->data = malloc(sizeof(float) * (size_t)ht_numel(t));
    assert_non_null(t->data);
    for (int64_t i = 0; i < ht_numel(t); i++) t->data[i] = base + noise * hrand(s);
}

static void hset_free(HSet *s) {
    for (int i = 0; i < s->n; i++) free(s->t[i].data);
    s->n = 0;
}

/* the tensors [from, to) of s as one F32 safetensors file */
static void hwrite(const char *path, const HSet *s, int from, int to) {
    size_t cap = 512 + (size_t)(to - from) * 256, hl = 0;
    char *h = malloc(cap);
    assert_non_null(h);
    int64_t off = 0;
    hl += (size_t)snprintf(h, cap, "{");
    for (int i = from; i < to; i++) {
        const HT *t = &s->t[i];
        int64_t bytes = ht_numel(t) * 4;
        hl += (size_t)snprintf(h + hl, cap - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[", i > from ? "," : "", t->name);
        for (int k = 0; k < t->ndim; k++) hl += (size_t)snprintf(h + hl, cap - hl, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        hl += (size_t)snprintf(h + hl, cap - hl, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + bytes));
        off += bytes;
    }
    hl += (size_t)snprintf(h + hl, cap - hl, "}");
    while (hl % 8) h[hl++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    assert_int_equal(fwrite(len8, 1, 8, f), 8);
    assert_int_equal(fwrite(h, 1, hl, f), hl);
    for (int i = from; i < to; i++) assert_int_equal(fwrite(s->t[i].data, 4, (size_t)ht_numel(&s->t[i]), f), (size_t)ht_numel(&s->t[i]));
    assert_int_equal(fclose(f), 0);
    free(h);
}

/* the target's tensors under prefix pre ("model." or "model.language_model.") */
static void target_tensors(HSet *s, const char *pre, int tied) {
    char nm[128];
    s->n = 0;
    s->rng = 12345;
    snprintf(nm, sizeof nm, "%sembed_tokens.weight", pre);
    hadd(s, nm, 2, HV, HD, 0, 0, 1.7f);
    for (int l = 0; l < HL; l++) {
#define T(suffix, nd, a, b, c, base, noise) snprintf(nm, sizeof nm, "%slayers.%d.%s", pre, l, suffix); \
        hadd(s, nm, nd, a, b, c, base, noise)
        T("input_layernorm.weight", 1, HD, 0, 0, 0, 0.1f);
        if (l % 2 == 0) {  /* Gated DeltaNet */
            T("linear_attn.in_proj_qkv.weight", 2, HC, HD, 0, 0, 0.43f);
            T("linear_attn.in_proj_z.weight", 2, HHV * HDV, HD, 0, 0, 0.43f);
            T("linear_attn.in_proj_b.weight", 2, HHV, HD, 0, 0, 0.43f);
            T("linear_attn.in_proj_a.weight", 2, HHV, HD, 0, 0, 0.2f);
            T("linear_attn.conv1d.weight", 3, HC, 1, HK, 0, 1.0f);
            T("linear_attn.A_log", 1, HHV, 0, 0, -1.5f, 1.0f);
            T("linear_attn.dt_bias", 1, HHV, 0, 0, -1.0f, 1.0f);
            T("linear_attn.norm.weight", 1, HDV, 0, 0, 1.0f, 0.1f);
            T("linear_attn.out_proj.weight", 2, HD, HHV * HDV, 0, 0, 0.6f);
        } else {           /* gated full attention */
            T("self_attn.q_proj.weight", 2, 2 * HH * HDH, HD, 0, 0, 0.43f);
            T("self_attn.k_proj.weight", 2, HKV * HDH, HD, 0, 0, 0.43f);
            T("self_attn.v_proj.weight", 2, HKV * HDH, HD, 0, 0, 0.43f);
            T("self_attn.o_proj.weight", 2, HD, HH * HDH, 0, 0, 0.5f);
            T("self_attn.q_norm.weight", 1, HDH, 0, 0, 0, 0.1f);
            T("self_attn.k_norm.weight", 1, HDH, 0, 0, 0, 0.1f);
        }
        T("post_attention_layernorm.weight", 1, HD, 0, 0, 0, 0.1f);
        T("mlp.gate_proj.weight", 2, HI, HD, 0, 0, 0.43f);
        T("mlp.up_proj.weight", 2, HI, HD, 0, 0, 0.43f);
        T("mlp.down_proj.weight", 2, HD, HI, 0, 0, 0.3f);
#undef T
    }
    snprintf(nm, sizeof nm, "%snorm.weight", pre);
    hadd(s, nm, 1, HD, 0, 0, 0, 0.1f);
    if (!tied) hadd(s, "lm_head.weight", 2, HV, HD, 0, 0, 1.5f);
}

/* the draft: 1 layer, 2 heads of head_dim dh, intermediate di (the
 * target's 8 and 32, or other sizes: test_trace_draft_sizes) */
static void draft_tensors_sized(HSet *s, int dh, int di) {
    char nm[128];
    s->n = 0;
    s->rng = 777;
#define T(suffix, nd, a, b, base, noise) snprintf(nm, sizeof nm, "layers.0.%s", suffix); hadd(s, nm, nd, a, b, 0, base, noise)
    T("input_layernorm.weight", 1, HD, 0, 1, 0.1f);
    T("self_attn.q_proj.weight", 2, 2 * dh, HD, 0, 0.43f);
    T("self_attn.k_proj.weight", 2, dh, HD, 0, 0.43f);
    T("self_attn.v_proj.weight", 2, dh, HD, 0, 0.43f);
    T("self_attn.o_proj.weight", 2, HD, 2 * dh, 0, 0.5f);
    T("self_attn.q_norm.weight", 1, dh, 0, 1, 0.1f);
    T("self_attn.k_norm.weight", 1, dh, 0, 1, 0.1f);
    T("post_attention_layernorm.weight", 1, HD, 0, 1, 0.1f);
    T("mlp.gate_proj.weight", 2, di, HD, 0, 0.43f);
    T("mlp.up_proj.weight", 2, di, HD, 0, 0.43f);
    T("mlp.down_proj.weight", 2, HD, di, 0, 0.3f);
#undef T
    hadd(s, "fc.weight", 2, HD, 2 * HD, 0, 0, 0.3f);
    hadd(s, "hidden_norm.weight", 1, HD, 0, 0, 1, 0.1f);
    hadd(s, "norm.weight", 1, HD, 0, 0, 1, 0.1f);
}

static void draft_tensors(HSet *s) { draft_tensors_sized(s, HDH, HI); }

/* the text config's keys (no braces); extra is spliced in first */
static void text_config(char *buf, size_t size, const char *extra, int tied) {
    snprintf(buf, size,
             "%s\"model_type\":\"qwen3_5_text\",\"hidden_size\":%d,\"intermediate_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"head_dim\":%d,"
             "\"vocab_size\":%d,\"rms_norm_eps\":1e-6,\"max_position_embeddings\":256,\"tie_word_embeddings\":%s,"
             "\"layer_types\":[\"linear_attention\",\"full_attention\",\"linear_attention\",\"full_attention\"],"
             "\"linear_conv_kernel_dim\":%d,\"linear_key_head_dim\":%d,\"linear_value_head_dim\":%d,"
             "\"linear_num_key_heads\":%d,\"linear_num_value_heads\":%d,\"attn_output_gate\":true,"
             "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000.0,\"partial_rotary_factor\":0.5,"
             "\"mrope_section\":[1,1,0],\"mrope_interleaved\":true},\"eos_token_id\":0",
             extra, HD, HI, HL, HH, HKV, HDH, HV, tied ? "true" : "false", HK, HDK, HDV, HHK, HHV);
}

#define DRAFT_CONFIG_FMT                                                                      \
    "{\"architectures\":[\"DFlashDraftModel\"],\"model_type\":\"qwen3\",\"hidden_size\":16,"     \
    "\"intermediate_size\":%d,\"num_hidden_layers\":1,\"num_attention_heads\":2,"               \
    "\"num_key_value_heads\":1,\"head_dim\":%d,\"vocab_size\":24,"                             \
    "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"max_position_embeddings\":256,\"tie_word_embeddings\":false," \
    "\"num_target_layers\":4,\"block_size\":4,"                                               \
    "\"dflash_config\":{\"mask_token_id\":23,\"target_layer_ids\":[0,2]}}"

/* DIR/target (plain layout, or nested: qwen3_5 + text_config, two shards with
 * model.visual.* and mtp.* tensors) and DIR/draft; extra goes into the text config */
static void write_hybrid_set(const char *dir, int nested, int tied, const char *extra) {
    char p[1200], tc[2048], cfg[2600];
    HSet s = {0};
    snprintf(p, sizeof p, "%s/target", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/draft", dir);
    mkdir(p, 0755);
    text_config(tc, sizeof tc, extra, tied);
    if (nested)
        snprintf(cfg, sizeof cfg, "{\"architectures\":[\"Qwen3_5ForConditionalGeneration\"],\"model_type\":\"qwen3_5\","
                                  "\"tie_word_embeddings\":%s,\"text_config\":{%s},\"vision_config\":{\"depth\":1}}",
                 tied ? "true" : "false", tc);
    else
        snprintf(cfg, sizeof cfg, "{\"architectures\":[\"Qwen3_5ForCausalLM\"],%s}", tc);
    snprintf(p, sizeof p, "%s/target/config.json", dir);
    tu_write_text(p, cfg);
    target_tensors(&s, nested ? "model.language_model." : "model.", tied);
    if (nested) {
        hadd(&s, "model.visual.patch_embed.proj.weight", 2, 3, 5, 0, 0, 1);
        hadd(&s, "mtp.fc.weight", 2, 2, 2, 0, 0, 1);
        int half = s.n / 2;
        snprintf(p, sizeof p, "%s/target/model-00001-of-00002.safetensors", dir);
        hwrite(p, &s, 0, half);
        snprintf(p, sizeof p, "%s/target/model-00002-of-00002.safetensors", dir);
        hwrite(p, &s, half, s.n);
        size_t cap = 64 + (size_t)s.n * 200, o = 0;
        char *idx = malloc(cap);
        assert_non_null(idx);
        o += (size_t)snprintf(idx, cap, "{\"metadata\":{},\"weight_map\":{");
        for (int i = 0; i < s.n; i++)
            o += (size_t)snprintf(idx + o, cap - o, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "",
                                  s.t[i].name, i < half ? 1 : 2);
        snprintf(idx + o, cap - o, "}}");
        snprintf(p, sizeof p, "%s/target/model.safetensors.index.json", dir);
        tu_write_text(p, idx);
        free(idx);
    } else {
        snprintf(p, sizeof p, "%s/target/model.safetensors", dir);
        hwrite(p, &s, 0, s.n);
    }
    hset_free(&s);
    draft_tensors(&s);
    snprintf(p, sizeof p, "%s/draft/model.safetensors", dir);
    hwrite(p, &s, 0, s.n);
    hset_free(&s);
    snprintf(p, sizeof p, "%s/draft/config.json", dir);
    char dcfg[800];
    snprintf(dcfg, sizeof dcfg, DRAFT_CONFIG_FMT, HI, HDH);
    tu_write_text(p, dcfg);
}

/* DIR/draft again, its heads of head_dim dh and its MLP of di */
static void write_draft_sized(const char *dir, int dh, int di) {
    char p[1200], dcfg[800];
    HSet s = {0};
    draft_tensors_sized(&s, dh, di);
    snprintf(p, sizeof p, "%s/draft/model.safetensors", dir);
    hwrite(p, &s, 0, s.n);
    hset_free(&s);
    snprintf(p, sizeof p, "%s/draft/config.json", dir);
    snprintf(dcfg, sizeof dcfg, DRAFT_CONFIG_FMT, di, dh);
    tu_write_text(p, dcfg);
}

static char *load_set(Model *t, Model *d, int nested, int tied) {
    char p[400], *dir = tu_tmpdir();
    assert_non_null(dir);
    write_hybrid_set(dir, nested, tied, "");
    snprintf(p, sizeof p, "%s/target", dir);
    if (model_load(t, p, 0) != 0) fail_msg("%s: %s", p, dflash_errmsg);
    snprintf(p, sizeof p, "%s/draft", dir);
    if (d && model_load(d, p, 1) != 0) fail_msg("%s: %s", p, dflash_errmsg);
    return dir;
}

static void drop_set(char *dir, Model *t, Model *d) {
    model_free(t);
    if (d) model_free(d);
    tu_rmtree(dir);
    free(dir);
}

/* ---- the loader ---------------------------------------------------------- */

static void check_layout(const Model *t) {
    const Config *c = &t->cfg;
    assert_true(c->hybrid);
    assert_int_equal(c->num_hidden_layers, HL);
    for (int l = 0; l < HL; l++) assert_int_equal(c->layer_linear[l], l % 2 == 0);
    assert_int_equal(c->rotary_dim, HDH / 2);  /* partial_rotary_factor 0.5 */
    assert_int_equal(c->linear_conv_kernel_dim, HK);
    assert_int_equal(c->linear_num_key_heads, HHK);
    assert_int_equal(c->linear_key_head_dim, HDK);
    assert_int_equal(c->linear_num_value_heads, HHV);
    assert_int_equal(c->linear_value_head_dim, HDV);
    assert_non_null(t->layers[0].conv1d);
    assert_null(t->layers[0].q_proj);
    assert_non_null(t->layers[1].q_proj);
    assert_null(t->layers[1].in_proj_qkv);
    /* inv_freq over the rotary dims: 1 / 10000^(2i/rd) */
    assert_float_equal(t->inv_freq[1], 1.0 / pow(10000.0, 2.0 / (HDH / 2)), 1e-6);
}

static void test_load_plain_and_nested(void **state) {
    (void)state;
    Model t, d, tn;
    char *dir = load_set(&t, &d, 0, 0);
    check_layout(&t);
    assert_false(t.tied);
    assert_int_equal(check_pair(&t, &d), 0);
    char *dir2 = load_set(&tn, NULL, 1, 1);  /* nested, sharded, tied, visual/mtp ignored */
    check_layout(&tn);
    assert_true(tn.cfg.hybrid_nested);
    assert_true(tn.tied);
    assert_ptr_equal(tn.lm_head, tn.embed_tokens);
    /* the same weights under the other prefix */
    assert_memory_equal(t.layers[2].conv1d, tn.layers[2].conv1d, sizeof(real) * HC * HK);
    assert_memory_equal(t.layers[3].q_proj, tn.layers[3].q_proj, sizeof(real) * 2 * HH * HDH * HD);
    drop_set(dir2, &tn, NULL);
    drop_set(dir, &t, &d);
}

/* dflash train-target has no Gated DeltaNet backward: a hybrid target (as
 * --target, or its config as --config) is refused with one line, exit 2
 * (it ran the dense trainer on the missing q_proj and crashed, SIGSEGV) */
static void test_train_target_refuses_a_hybrid(void **state) {
    (void)state;
    char *dir = tu_tmpdir(), cmd[2048];
    assert_non_null(dir);
    write_hybrid_set(dir, 0, 0, "");
    char batches[600];   /* one batch of token ids (the set's vocabulary is too small for a tokenizer) */
    snprintf(batches, sizeof batches, "%s/b.json", dir);
    tu_write_text(batches, "{\"batches\": [{\"input_ids\": [[1, 2, 3, 4, 5, 6]], \"loss_mask\": [[1, 1, 1, 1, 1, 1]]}]}\n");
    const char *as[2] = {"--target %s/target", "--config %s/target/config.json"};
    for (int k = 0; k < 2; k++) {
        char from[600];
        snprintf(from, sizeof from, as[k], dir);
        snprintf(cmd, sizeof cmd, "./dflash train-target %s --batches %s --steps 1 --out %s/o", from, batches, dir);
        tu_expect_refusal(dir, cmd, "a hybrid (Qwen3.5) target: train-target trains Qwen3 and Llama targets only");
    }
    tu_rmtree(dir);
    free(dir);
}

/* layer_types absent: full_attention_interval (layer i is linear if (i + 1) %
 * interval); rope_parameters absent: the top-level rope_theta and
 * partial_rotary_factor (transformers' legacy keys) */
static void test_load_interval_and_legacy_rope(void **state) {
    (void)state;
    char *dir = tu_tmpdir(), p[400];
    write_hybrid_set(dir, 0, 0, "");
    snprintf(p, sizeof p, "%s/target/config.json", dir);
    char *text = tu_read(p, NULL);
    const char *edits[][2] = {
        {"\"layer_types\":[\"linear_attention\",\"full_attention\",\"linear_attention\",\"full_attention\"]",
         "\"full_attention_interval\":2"},
        {"\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000.0,\"partial_rotary_factor\":0.5,"
         "\"mrope_section\":[1,1,0],\"mrope_interleaved\":true}",
         "\"rope_theta\":10000.0,\"partial_rotary_factor\":0.5"},
    };
    for (int i = 0; i < 2; i++) {
        char *at = strstr(text, edits[i][0]), out[4096];
        assert_non_null(at);
        snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, edits[i][1], at + strlen(edits[i][0]));
        free(text);
        text = strdup(out);
    }
    tu_write_text(p, text);
    free(text);
    snprintf(p, sizeof p, "%s/target", dir);
    Model t;
    if (model_load(&t, p, 0) != 0) fail_msg("%s", dflash_errmsg);
    check_layout(&t);
    model_free(&t);
    tu_rmtree(dir);
    free(dir);
}

static void test_refusals(void **state) {
    (void)state;
    static const struct { const char *extra, *want; } CASES[] = {
        {"\"num_experts\":8,", "num_experts"},
        {"\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4},", "rope_scaling"},
        {"\"hidden_act\":\"gelu\",", "hidden_act"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char *dir = tu_tmpdir(), p[400];
        write_hybrid_set(dir, 0, 0, CASES[i].extra);
        snprintf(p, sizeof p, "%s/target", dir);
        Model t;
        assert_int_equal(model_load(&t, p, 0), -1);
        if (!strstr(dflash_errmsg, CASES[i].want)) fail_msg("case %zu: %s", i, dflash_errmsg);
        tu_rmtree(dir);
        free(dir);
    }
    /* another rope type in rope_parameters, and a layer type not implemented */
    const char *bad[][2] = {
        {"\"rope_type\":\"default\"", "\"rope_type\":\"yarn\""},
        {"\"full_attention\",\"linear_attention\",\"full_attention\"]", "\"sliding_attention\",\"linear_attention\",\"full_attention\"]"},
        {"\"model_type\":\"qwen3_5_text\"", "\"model_type\":\"qwen3_5_moe\""},
        {"\"attn_output_gate\":true", "\"attn_output_gate\":false"},
        {"\"linear_num_key_heads\":1", "\"linear_num_key_heads\":4"},
    };
    const char *want[] = {"rope_type", "layer_types", "model_type", "attn_output_gate", "linear_num_value_heads"};
    for (int i = 0; i < 5; i++) {
        char *dir = tu_tmpdir(), p[400];
        write_hybrid_set(dir, 0, 0, "");
        snprintf(p, sizeof p, "%s/target/config.json", dir);
        size_t len;
        char *text = tu_read(p, &len);
        char *at = strstr(text, bad[i][0]);
        assert_non_null(at);
        char out[4096];
        snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, bad[i][1], at + strlen(bad[i][0]));
        tu_write_text(p, out);
        free(text);
        snprintf(p, sizeof p, "%s/target", dir);
        Model t;
        assert_int_equal(model_load(&t, p, 0), -1);
        if (!strstr(dflash_errmsg, want[i])) fail_msg("edit %d: %s", i, dflash_errmsg);
        tu_rmtree(dir);
        free(dir);
    }
}

/* ---- kernels by hand ------------------------------------------------------ */

/* One token, one head, dk = dv = 2:
 *   S0 = [[1, 0], [0, 2]], g = log 0.5 -> S = [[0.5, 0], [0, 1]]
 *   k = [0.6, 0.8]: kv_mem = k^T S = [0.3, 0.8]
 *   v = [1, 1], beta = 0.5: delta = ([1, 1] - [0.3, 0.8]) * 0.5 = [0.35, 0.1]
 *   S += k delta^T = [[0.5 + 0.21, 0.06], [0.28, 1 + 0.08]] = [[0.71, 0.06], [0.28, 1.08]]
 *   q = [1, 0] scaled by 1/sqrt(2): o = [0.71, 0.06] / sqrt(2) = [0.502046, 0.042426] */
static void test_gated_delta_rule_by_hand(void **state) {
    (void)state;
    real S[4] = {1, 0, 0, 2}, q[2] = {1, 0}, k[2] = {(real)0.6, (real)0.8}, v[2] = {1, 1};
    real g[1] = {(real)log(0.5)}, beta[1] = {(real)0.5}, o[2];
    gated_delta_rule(o, S, q, k, v, g, beta, 1, 1, 2, 1, 2);
    const double want_S[4] = {0.71, 0.06, 0.28, 1.08};
    for (int i = 0; i < 4; i++) assert_float_equal(S[i], want_S[i], 1e-6);
    assert_float_equal(o[0], 0.71 / sqrt(2.0), 1e-6);
    assert_float_equal(o[1], 0.06 / sqrt(2.0), 1e-6);
    /* two value heads sharing one key head (Hv = 2 Hk) each get the same
     * k and q: head 1 with the same inputs ends where head 0 does */
    real S2[8] = {1, 0, 0, 2, 1, 0, 0, 2}, v2[4] = {1, 1, 1, 1}, g2[2] = {g[0], g[0]}, b2[2] = {beta[0], beta[0]}, o2[4];
    gated_delta_rule(o2, S2, q, k, v2, g2, b2, 1, 1, 2, 2, 2);
    for (int i = 0; i < 4; i++) assert_float_equal(S2[4 + i], want_S[i], 1e-6);
    assert_float_equal(o2[2], 0.71 / sqrt(2.0), 1e-6);
}

/* x = [3, 4]: mean(x^2) = 12.5; w = [1, 2], z = [0, 1]:
 *   out = [1 * 3/sqrt(12.5) * silu(0), 2 * 4/sqrt(12.5) * silu(1)]
 *       = [0, 2.2627417 * 0.7310586] = [0, 1.6541970] */
static void test_gated_rmsnorm_by_hand(void **state) {
    (void)state;
    real x[2] = {3, 4}, z[2] = {0, 1}, w[2] = {1, 2}, out[2];
    rmsnorm_gated(out, x, z, w, 2, (real)1e-6);
    assert_float_equal(out[0], 0.0, 1e-7);
    assert_float_equal(out[1], 1.6541970, 1e-5);
}

/* ---- the rollback vs a fresh prefill -------------------------------------- */

static double max_abs_diff(const real *a, const real *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

static void test_rollback_equals_fresh_prefill(void **state) {
    (void)state;
    Model t;
    char *dir = load_set(&t, NULL, 0, 0);
    enum { N = 5, B = 5, CAP = 32 };
    const int prompt[N] = {3, 9, 1, 17, 4};
    const int block[B] = {7, 12, 2, 20, 5};
    int seq[N + B];
    memcpy(seq, prompt, sizeof prompt);
    memcpy(seq + N, block, sizeof block);
    for (int m = 1; m <= B; m++) {
        KVCache a, f, *caches[2] = {&a, &f};
        TargetRun ra, rf;
        for (int i = 0; i < 2; i++) assert_int_equal(cache_init(caches[i], &t.cfg, CAP), 0);
        assert_int_equal(target_run_init(&ra, &t.cfg, CAP, CAP), 0);
        assert_int_equal(target_run_init(&rf, &t.cfg, CAP, CAP), 0);
        /* prefill, verify the block, keep m of its tokens */
        target_forward(&t, &a, &ra, prompt, N, N - 1, NULL);
        target_forward(&t, &a, &ra, block, B, 0, NULL);
        real *whole = malloc(sizeof(real) * HHV * HDK * HDV);
        memcpy(whole, a.linear[0].state, sizeof(real) * HHV * HDK * HDV);
        cache_crop(&a, N + m);
        /* a fresh prefill over the n + m kept tokens */
        target_forward(&t, &f, &rf, seq, N + m, N + m - 1, NULL);
        assert_int_equal(a.len, f.len);
        for (int l = 0; l < HL; l++) {
            if (!t.cfg.layer_linear[l]) continue;
            size_t ns = (size_t)HHV * HDK * HDV, nc = (size_t)(HK - 1) * HC;
            double ds = max_abs_diff(a.linear[l].state, f.linear[l].state, ns);
            double dc = max_abs_diff(a.linear[l].conv_state, f.linear[l].conv_state, nc);
            if (ds > 1e-5 || dc > 1e-6) fail_msg("m = %d layer %d: state differs by %g, conv by %g", m, l, ds, dc);
        }
        /* without the rollback (the whole block's state kept) it differs */
        if (m < B) assert_true(max_abs_diff(whole, f.linear[0].state, (size_t)HHV * HDK * HDV) > 1e-4);
        /* and the next token's logits agree */
        int next = 11;
        target_forward(&t, &a, &ra, &next, 1, 0, NULL);
        target_forward(&t, &f, &rf, &next, 1, 0, NULL);
        assert_true(max_abs_diff(ra.logits, rf.logits, HV) < 1e-4);
        free(whole);
        target_run_free(&ra);
        target_run_free(&rf);
        cache_free(&a);
        cache_free(&f);
    }
    drop_set(dir, &t, NULL);
}

/* ---- lossless ------------------------------------------------------------- */

static void test_greedy_dflash_equals_ar(void **state) {
    (void)state;
    Model t, d;
    char *dir = load_set(&t, &d, 0, 0);
    const int prompts[][4] = {{3, 9, 1, 17}, {5, 5, 6, 2}, {20, 1, 8, 13}};
    int rounds = 0, rejecting = 0;
    for (size_t pi = 0; pi < 3; pi++)
        for (int B = 2; B <= 5; B++) {
            GenParams p = {.max_new_tokens = 24, .block_size = B};
            GenResult ar, df;
            assert_int_equal(ar_generate(&t, prompts[pi], 4, &p, &ar), 0);
            assert_int_equal(dflash_generate(&d, &t, prompts[pi], 4, &p, &df), 0);
            assert_int_equal(ar.n_output, df.n_output);
            assert_memory_equal(ar.output_ids, df.output_ids, sizeof(int) * (size_t)ar.n_output);
            for (int r = 0; r < df.n_rounds; r++) {
                rounds++;
                rejecting += df.rounds[r].acceptance_length < B - 1;
            }
            gen_result_free(&ar);
            gen_result_free(&df);
        }
    /* the untrained draft: most rounds reject, so the rollback runs */
    assert_true(rounds > 0 && rejecting * 2 > rounds);
    drop_set(dir, &t, &d);
}


/* Sampling at T = 1 on the hybrid set is lossless in distribution: the first
 * three new tokens of target-only decoding and of DFlash at blocks 2 and 3 fit
 * the exact target distribution (tests/sampleutil.h: a second computation,
 * a fresh forward of each prefix); the third token comes after a rollback
 * whenever round 1 rejected, so a state rolled back wrong shows (each
 * rollback pitfall of walkthrough/pitfalls/ fails it). 600 seeds a mode (3000 with
 * DFLASH_TEST_LONG). */
static void test_temperature_sampling_is_lossless(void **state) {
    (void)state;
    Model t, d;
    char *dir = load_set(&t, &d, 0, 0);
    int prompt[4] = {3, 9, 1, 17}, N = tu_long() ? 3000 : 600;
    int accepted[3], rejected[3];   /* AR, DFlash B=2, DFlash B=3 */
    tu_assert_modes_fit(&d, &t, prompt, 4, 1.0, 3, N, 0, accepted, rejected);
    for (int mode = 1; mode < 3; mode++) assert_true(rejected[mode] > 0);   /* rounds that rolled the state back */
    drop_set(dir, &t, &d);
}

/* --trace-filter takes a hybrid target's names (it refused them: the check
 * knew the dense names only), and still refuses them for a dense target */
static void test_trace_filter_knows_hybrid_names(void **state) {
    (void)state;
    const char *f[] = {"verify*.rollback.*", "*.linear_attn.state_out"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(trace_check_filters(&f[i], 1, 12, 2, 4, 8, 1), 0);
        assert_int_equal(trace_check_filters(&f[i], 1, 12, 2, 4, 8, 0), -1);
    }
}

/* ---- the trace: names, shapes, the chain of states ------------------------- */

typedef struct {
    char names[4096][96];
    double *data[4096];
    int64_t count[4096];
    int n;
} Store;

static int store_tensor(void *ctx, const TraceTensor *t) {
    Store *st = ctx;
    if (st->n == 4096) return -1;
    int64_t c = 1;
    for (int i = 0; i < t->ndim; i++) c *= t->shape[i];
    snprintf(st->names[st->n], sizeof st->names[0], "%s", t->name);
    st->data[st->n] = malloc(sizeof(double) * (size_t)(c ? c : 1));
    for (int64_t i = 0; i < c; i++)
        st->data[st->n][i] = t->is_int ? (double)((const int64_t *)t->data)[i] : (double)((const real *)t->data)[i];
    st->count[st->n++] = c;
    return 0;
}

static int store_hand(void *ctx, const TraceHand *h) { return trace_shape_hand(h, store_tensor, ctx); }

static const double *stored(const Store *st, const char *name, int64_t *count) {
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->names[i], name) == 0) {
            if (count) *count = st->count[i];
            return st->data[i];
        }
    fail_msg("%s was not traced", name);
    return NULL;
}

/* A DFlash run (block 4, max_new new tokens) of prompt[0..4) with every
 * traced tensor stored: the store (store_free) and the run in *res */
static Store *traced_run(const Model *d, const Model *t, const int *prompt, int max_new, GenResult *res) {
    Store *st = calloc(1, sizeof *st);
    assert_non_null(st);
    TraceHook hook = {store_hand, st};
    GenParams gp = {.max_new_tokens = max_new, .block_size = 4, .trace = &hook};
    if (dflash_generate(d, t, prompt, 4, &gp, res) != 0) fail_msg("%s", dflash_errmsg);
    return st;
}

static void store_free(Store *st) {
    for (int i = 0; i < st->n; i++) free(st->data[i]);
    free(st);
}

static void test_trace_states_chain(void **state) {
    (void)state;
    Model t, d;
    char *dir = load_set(&t, &d, 0, 0);
    const int prompt[4] = {3, 9, 1, 17};
    GenResult res;
    Store *st = traced_run(&d, &t, prompt, 12, &res);
    int64_t ns = (int64_t)HHV * HDK * HDV, nc = (int64_t)(HK - 1) * HC, c;
    /* the shapes the table gives the hybrid names */
    stored(st, "prefill.layers.0.linear_attn.state_out", &c);
    assert_int_equal(c, ns);
    stored(st, "prefill.layers.0.linear_attn.conv_in", &c);
    assert_int_equal(c, (int64_t)(HK - 1 + 4) * HC);
    stored(st, "prefill.rope_angles", &c);
    assert_int_equal(c, 4 * HDH / 4);  /* T x rd/2 */
    stored(st, "prefill.layers.1.self_attn.gate", &c);
    assert_int_equal(c, 4 * HH * HDH);
    char a[128], b[128];
    for (int r = 1; r <= res.n_rounds; r++)
        for (int l = 0; l < HL; l += 2) {
            const char *prev = r == 1 ? "prefill" : NULL;
            char pr[32];
            snprintf(pr, sizeof pr, "verify%d", r - 1);
            /* state_in of round r == the state the cache held after round r-1 */
            snprintf(a, sizeof a, "verify%d.layers.%d.linear_attn.state_in", r, l);
            if (prev) snprintf(b, sizeof b, "prefill.layers.%d.linear_attn.state_out", l);
            else snprintf(b, sizeof b, "%s.rollback.layers.%d.state", pr, l);
            assert_memory_equal(stored(st, a, NULL), stored(st, b, NULL), sizeof(double) * (size_t)ns);
            snprintf(a, sizeof a, "verify%d.layers.%d.linear_attn.conv_state_in", r, l);
            if (prev) snprintf(b, sizeof b, "prefill.layers.%d.linear_attn.conv_state_out", l);
            else snprintf(b, sizeof b, "%s.rollback.layers.%d.conv_state", pr, l);
            assert_memory_equal(stored(st, a, NULL), stored(st, b, NULL), sizeof(double) * (size_t)nc);
            /* the rollback conv state: conv_in rows acc+1 .. acc+K-1 */
            snprintf(a, sizeof a, "verify%d.acceptance_length", r);
            int acc = (int)stored(st, a, NULL)[0];
            snprintf(a, sizeof a, "verify%d.layers.%d.linear_attn.conv_in", r, l);
            snprintf(b, sizeof b, "verify%d.rollback.layers.%d.conv_state", r, l);
            assert_memory_equal(stored(st, a, NULL) + (size_t)(acc + 1) * HC, stored(st, b, NULL),
                                sizeof(double) * (size_t)nc);
        }
    store_free(st);
    gen_result_free(&res);
    drop_set(dir, &t, &d);
}

/* a draft whose head_dim and intermediate_size differ from the target's
 * (a published Qwen3.5 drafter's head_dim is 128, its target's 256): the
 * draft phases' names have the draft's shapes, the target's the target's
 * (the trace took every size from the target, and a traced run read past
 * the draft's buffers) */
static void test_trace_draft_sizes(void **state) {
    (void)state;
    enum { DH = 4, DI = 20 };
    char *dir = tu_tmpdir(), p[400];
    assert_non_null(dir);
    write_hybrid_set(dir, 0, 0, "");
    write_draft_sized(dir, DH, DI);
    Model t, d;
    snprintf(p, sizeof p, "%s/target", dir);
    if (model_load(&t, p, 0) != 0) fail_msg("%s", dflash_errmsg);
    snprintf(p, sizeof p, "%s/draft", dir);
    if (model_load(&d, p, 1) != 0) fail_msg("%s", dflash_errmsg);
    assert_int_equal(check_pair(&t, &d), 0);
    const int prompt[4] = {3, 9, 1, 17};
    GenResult res, ar;
    Store *st = traced_run(&d, &t, prompt, 8, &res);
    int64_t c;
    stored(st, "draft1.layers.0.self_attn.q", &c);
    assert_int_equal(c, 4 * 2 * DH);             /* B x H x the draft's d */
    stored(st, "draft1.rope_angles", &c);
    assert_int_equal(c, (4 + 4) * DH / 2);       /* (Lc + B) x d/2 */
    stored(st, "draft1.layers.0.mlp.act", &c);
    assert_int_equal(c, 4 * DI);
    stored(st, "verify1.layers.1.self_attn.q", &c);  /* the target's sizes again */
    assert_int_equal(c, 4 * HH * HDH);
    stored(st, "verify1.layers.1.mlp.act", &c);
    assert_int_equal(c, 4 * HI);
    /* and the traced run is the untraced one */
    GenParams plain = {.max_new_tokens = 8, .block_size = 1};
    assert_int_equal(ar_generate(&t, prompt, 4, &plain, &ar), 0);
    assert_int_equal(ar.n_output, res.n_output);
    assert_memory_equal(ar.output_ids, res.output_ids, sizeof(int) * (size_t)ar.n_output);
    store_free(st);
    gen_result_free(&res);
    gen_result_free(&ar);
    model_free(&t);
    model_free(&d);
    tu_rmtree(dir);
    free(dir);
}

/* the round log's rollback lines (cli/main.c, --rounds) on the suite's set:
 * in every round the position printed is the block's first position + the
 * accepted count printed on the same round's line, the conv window the K-1
 * positions up to it; and the state the run's cache holds after the round
 * (traced: verify{r}.rollback.layers.{l}.state) equals a fresh prefill of
 * the output up to that printed position, for every linear layer */
static void test_round_log_rollback(void **state) {
    (void)state;
    Model t, d;
    char *dir = load_set(&t, &d, 0, 0), cmd[1400];
    snprintf(cmd, sizeof cmd, "./dflash --weights %s --ids 3,9,1,17 --block-size 4 --max-new-tokens 12 --ignore-eos --rounds", dir);
    char *log = tu_capture(cmd);
    /* the same run in this process, traced */
    const int prompt[4] = {3, 9, 1, 17};
    GenResult res;
    Store *st = traced_run(&d, &t, prompt, 12, &res);
    int rounds = 0, rolled = 0;
    for (const char *at = strstr(log, "round "); at; at = strstr(at + 1, "\nround ")) {
        if (*at == '\n') at++;
        int r, a, b, acc, p, lo, hi;
        assert_int_equal(sscanf(at, "round %d: block in %*[^]] ] at positions %d..%d", &r, &a, &b), 3);
        const char *k = strstr(at, "accepted ");
        assert_non_null(k);
        assert_int_equal(sscanf(k, "accepted %d", &acc), 1);
        const char *rb = strstr(at, "rollback    linear layers 0,2: state after position ");
        if (!rb) fail_msg("round %d: no rollback line in:\n%s", r, log);
        assert_int_equal(sscanf(rb, "rollback    linear layers 0,2: state after position %d", &p), 1);
        const char *w = strstr(rb, "conv window positions ");
        assert_non_null(w);
        assert_int_equal(sscanf(w, "conv window positions %d..%d", &lo, &hi), 2);
        assert_int_equal(p, a + acc);
        assert_int_equal(hi, p);
        assert_int_equal(lo, p - (HK - 2));
        assert_true(strstr(rb, acc < 3 ? "replayed over" : "nothing to roll back") < strchr(rb, '\n'));
        rolled += acc < 3;
        /* a fresh prefill of output[0..p] */
        assert_true(r <= res.n_rounds && res.rounds[r - 1].acceptance_length == acc);
        KVCache f;
        TargetRun rf;
        assert_int_equal(cache_init(&f, &t.cfg, 64), 0);
        assert_int_equal(target_run_init(&rf, &t.cfg, 64, 64), 0);
        int ids[64];
        for (int i = 0; i <= p; i++) ids[i] = i < 4 ? prompt[i] : res.output_ids[i];
        assert_true(p + 1 <= res.n_output || r == res.n_rounds);
        target_forward(&t, &f, &rf, ids, p + 1, p, NULL);
        for (int l = 0; l < HL; l += 2) {
            char nm[96];
            snprintf(nm, sizeof nm, "verify%d.rollback.layers.%d.state", r, l);
            const double *got = stored(st, nm, NULL);
            double m = 0;
            for (int i = 0; i < HHV * HDK * HDV; i++) m = fmax(m, fabs(got[i] - (double)f.linear[l].state[i]));
            if (m > 1e-5) fail_msg("round %d layer %d: the rollback state differs from a prefill of 0..%d by %g", r, l, p, m);
        }
        target_run_free(&rf);
        cache_free(&f);
        rounds++;
    }
    assert_int_equal(rounds, res.n_rounds);
    assert_true(rolled > 0);  /* some round did roll back */
    store_free(st);
    free(log);
    gen_result_free(&res);
    drop_set(dir, &t, &d);
}

/* dflash train with a hybrid target (frozen: only its forward): each
 * sequence of a batch gets the target's features from a fresh state. Two
 * identical sequences in one batch must get identical target_hidden rows
 * (the second started from the first's final Gated DeltaNet state when the
 * cache was reset by its length alone) */
static void test_train_draft_fresh_state_per_sequence(void **state) {
    (void)state;
    char *dir = tu_tmpdir(), p[600], cmd[2400];
    assert_non_null(dir);
    write_hybrid_set(dir, 0, 0, "");
    snprintf(p, sizeof p, "%s/data.txt", dir);
    tu_write_text(p, "3 9 1 17 4 7 12 2\n3 9 1 17 4 7 12 2\n");
    snprintf(cmd, sizeof cmd, "./dflash train --target %s/target --draft %s/draft --data %s --seq-len 8 --batch 2 "
             "--anchors 1 --steps 1 --trace %s/tr --out %s/out > %s/log 2>&1", dir, dir, p, dir, dir, dir);
    if (system(cmd) != 0) fail_msg("%s failed", cmd);
    snprintf(p, sizeof p, "%s/tr/train1.target_hidden.npy", dir);
    NpyValues v;
    if (npy_read_values(p, &v) != 0) fail_msg("%s", dflash_errmsg);
    assert_int_equal(v.ndim, 3);
    assert_int_equal(v.shape[0], 2);
    size_t half = v.n / 2;
    double m = 0;
    for (size_t i = 0; i < half; i++) m = fmax(m, fabs(v.f[i] - v.f[half + i]));
    if (m != 0) fail_msg("the two identical sequences' target features differ by %g", m);
    npy_values_free(&v);
    tu_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_plain_and_nested),
        cmocka_unit_test(test_load_interval_and_legacy_rope),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_gated_delta_rule_by_hand),
        cmocka_unit_test(test_gated_rmsnorm_by_hand),
        cmocka_unit_test(test_rollback_equals_fresh_prefill),
        cmocka_unit_test(test_greedy_dflash_equals_ar),
        cmocka_unit_test(test_temperature_sampling_is_lossless),
        cmocka_unit_test(test_trace_filter_knows_hybrid_names),
        cmocka_unit_test(test_trace_states_chain),
        cmocka_unit_test(test_trace_draft_sizes),
        cmocka_unit_test(test_round_log_rollback),
        cmocka_unit_test(test_train_draft_fresh_state_per_sequence),
        cmocka_unit_test(test_train_target_refuses_a_hybrid),
    };
    return cmocka_run_group_tests_name("hybrid targets: loader, kernels, rollback, lossless", tests, NULL, NULL);
}
