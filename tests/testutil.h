/* tests/testutil.h - shared helpers for the cmocka suites.
 *
 * Every test file does `#include "../dflash.c"` (the Makefile defines
 * DFLASH_NO_MAIN), so it can reach the static kernels, and links trace.c.
 * This header builds small weight directories byte by byte, so loader tests
 * do not depend on the generator they check.
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

/* a fresh directory under /tmp, removed by tu_rmtree */
static inline void tu_tmpdir(char *buf, size_t size, const char *tag) {
    snprintf(buf, size, "/tmp/dflash-test-%s-XXXXXX", tag);
    assert_non_null(mkdtemp(buf));
}

static inline void tu_rmtree(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static inline void tu_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static inline void tu_write_text(const char *path, const char *text) { tu_write(path, text, strlen(text)); }

/* A safetensors file from a list of F32 tensors. Offsets are laid out in
 * list order; the header is padded with spaces to a multiple of 8. */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[2];
    const float *data;   /* numel floats */
} TuTensor;

static inline int64_t tu_numel(const TuTensor *t) { return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1]; }

static inline void tu_write_safetensors(const char *path, const TuTensor *ts, int n) {
    size_t hcap = 256 + (size_t)n * 200, hl = 0;
    char *h = malloc(hcap);
    assert_non_null(h);
    int64_t off = 0;
    hl += (size_t)snprintf(h + hl, hcap - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        int64_t bytes = tu_numel(&ts[i]) * 4;
        if (ts[i].ndim == 1)
            hl += (size_t)snprintf(h + hl, hcap - hl, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%lld,%lld]}",
                                   ts[i].name, (long long)ts[i].shape[0], (long long)off, (long long)(off + bytes));
        else
            hl += (size_t)snprintf(h + hl, hcap - hl, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}",
                                   ts[i].name, (long long)ts[i].shape[0], (long long)ts[i].shape[1], (long long)off,
                                   (long long)(off + bytes));
        off += bytes;
    }
    hl += (size_t)snprintf(h + hl, hcap - hl, "}");
    while (hl % 8) h[hl++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    assert_int_equal(fwrite(len8, 1, 8, f), 8);
    assert_int_equal(fwrite(h, 1, hl, f), hl);
    for (int i = 0; i < n; i++) assert_int_equal(fwrite(ts[i].data, 4, (size_t)tu_numel(&ts[i]), f), (size_t)tu_numel(&ts[i]));
    assert_int_equal(fclose(f), 0);
    free(h);
}

/* A tiny model: D=8, 1 layer, 2 heads, 1 KV head, head_dim 4, I=16, V=6.
 * Every value is a known function of (tensor index, element index), so a
 * test can recompute what any element must be. */
enum { TU_D = 8, TU_L = 1, TU_H = 2, TU_KV = 1, TU_HD = 4, TU_I = 16, TU_V = 6 };

static inline float tu_value(int tensor, int64_t i) { return (float)(tensor + 1) * 0.01f + (float)(i % 97) * 0.001f; }

typedef struct {
    TuTensor t[32];
    char names[32][96];
    float *bufs[32];
    int n;
} TuModel;

static inline void tu_add(TuModel *m, const char *name, int ndim, int64_t s0, int64_t s1) {
    int k = m->n++;
    snprintf(m->names[k], sizeof m->names[k], "%s", name);
    m->t[k].name = m->names[k];
    m->t[k].ndim = ndim;
    m->t[k].shape[0] = s0;
    m->t[k].shape[1] = s1;
    int64_t numel = tu_numel(&m->t[k]);
    m->bufs[k] = malloc(sizeof(float) * (size_t)numel);
    assert_non_null(m->bufs[k]);
    for (int64_t i = 0; i < numel; i++) m->bufs[k][i] = tu_value(k, i);
    m->t[k].data = m->bufs[k];
}

static inline void tu_model_tensors(TuModel *m, int draft) {
    const char *pre = draft ? "" : "model.";
    char nm[96];
    memset(m, 0, sizeof *m);
    if (!draft) tu_add(m, "model.embed_tokens.weight", 2, TU_V, TU_D);
#define L1(suffix, s0) snprintf(nm, sizeof nm, "%slayers.0.%s", pre, suffix); tu_add(m, nm, 1, s0, 0)
#define L2(suffix, s0, s1) snprintf(nm, sizeof nm, "%slayers.0.%s", pre, suffix); tu_add(m, nm, 2, s0, s1)
    L1("input_layernorm.weight", TU_D);
    L2("self_attn.q_proj.weight", TU_H * TU_HD, TU_D);
    L2("self_attn.k_proj.weight", TU_KV * TU_HD, TU_D);
    L2("self_attn.v_proj.weight", TU_KV * TU_HD, TU_D);
    L2("self_attn.o_proj.weight", TU_D, TU_H * TU_HD);
    L1("self_attn.q_norm.weight", TU_HD);
    L1("self_attn.k_norm.weight", TU_HD);
    L1("post_attention_layernorm.weight", TU_D);
    L2("mlp.gate_proj.weight", TU_I, TU_D);
    L2("mlp.up_proj.weight", TU_I, TU_D);
    L2("mlp.down_proj.weight", TU_D, TU_I);
#undef L1
#undef L2
    if (draft) {
        tu_add(m, "fc.weight", 2, TU_D, 1 * TU_D);
        tu_add(m, "hidden_norm.weight", 1, TU_D, 0);
        tu_add(m, "norm.weight", 1, TU_D, 0);
    } else {
        tu_add(m, "model.norm.weight", 1, TU_D, 0);
        tu_add(m, "lm_head.weight", 2, TU_V, TU_D);
    }
}

static inline void tu_model_free(TuModel *m) {
    for (int i = 0; i < m->n; i++) free(m->bufs[i]);
}

static inline const char *tu_config(int draft) {
    return draft ? "{\"architectures\":[\"DFlashDraftModel\"],\"model_type\":\"qwen3\",\"hidden_size\":8,"
                   "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                   "\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":6,\"rms_norm_eps\":1e-6,"
                   "\"rope_theta\":10000.0,\"max_position_embeddings\":64,\"tie_word_embeddings\":false,"
                   "\"num_target_layers\":1,\"block_size\":2,"
                   "\"dflash_config\":{\"mask_token_id\":5,\"target_layer_ids\":[0]}}"
                 : "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":8,"
                   "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                   "\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":6,\"rms_norm_eps\":1e-6,"
                   "\"rope_theta\":10000.0,\"max_position_embeddings\":64,\"tie_word_embeddings\":false}";
}

/* write DIR/{target,draft}/{config.json,model.safetensors} and DIR/vocab.txt */
static inline void tu_write_tiny_set(const char *dir) {
    char p[1200];
    for (int draft = 0; draft < 2; draft++) {
        snprintf(p, sizeof p, "%s/%s", dir, draft ? "draft" : "target");
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/%s/config.json", dir, draft ? "draft" : "target");
        tu_write_text(p, tu_config(draft));
        TuModel m;
        tu_model_tensors(&m, draft);
        snprintf(p, sizeof p, "%s/%s/model.safetensors", dir, draft ? "draft" : "target");
        tu_write_safetensors(p, m.t, m.n);
        tu_model_free(&m);
    }
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    tu_write_text(p, "a\nb\nc\n.\n<eos>\n<mask>\n");
}

/* substring check with a readable failure */
#define assert_contains(hay, needle) do { \
        if (!strstr((hay), (needle))) fail_msg("expected \"%s\" in \"%s\"", (needle), (hay)); } while (0)

#endif
