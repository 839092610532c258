/* tests/fuzz/fuzz_gguf.c - libFuzzer target: gguf/gguf.c's own readers and
 * its writer (`dflash gguf`). The first input byte chooses:
 *   bit 0 clear: the rest is a tokenizer.json, read by
 *                gvocab_from_tokenizer_json (vocab_size 64, the toy sets');
 *   bit 0 set:   the rest is a model.safetensors, read by source_add_file
 *                (gguf.c re-reads the headers itself to find each tensor's
 *                bytes), as a draft when bit 1 is set;
 *   bits 2-4:    a sliding window 0..7 for the one draft layer of the
 *                metadata written (dflash.attention.sliding_window*);
 *   bit 5:       a target's tensors read as a hybrid's (qwen35 names, the
 *                value transforms, the value-head reorder; Hk 2, Hv 4).
 * The rest is written to a file in a fresh directory (the readers take a
 * path). Checked: a refusal sets a message; an accepted vocabulary has
 * every id's token, a known token type, every merge; an accepted tensor
 * table places every tensor inside the file with its size; then the whole
 * GGUF is written (write_gguf: key-value pairs, table, every tensor's bytes,
 * BF16/F16 norms widened to F32) to /dev/null and must succeed. Links
 * dflash.c, formats/json.c, formats/load.c, formats/files.c and
 * formats/manifest.c. Seeds in tests/fuzz/gguf/ (the tokjson and
 * safetensors targets' seeds with the first byte put before them). */
#define _XOPEN_SOURCE 700
#include "gguf/gguf.c"

#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64], path[96];

static void remove_root(void) {
    unlink(path);
    rmdir(root);
}

/* the metadata write_kvs writes: a tiny config (one layer; a draft with one
 * target layer id), voc as given */
static void meta_for(Meta *m, Config *c, const GVocab *voc, int draft, int window) {
    memset(c, 0, sizeof *c);
    c->num_hidden_layers = 1;
    c->hidden_size = c->intermediate_size = c->num_attention_heads = c->num_key_value_heads = c->head_dim = 2;
    c->vocab_size = voc->n;
    c->max_position_embeddings = 64;
    c->rope_theta = 10000;
    c->rms_norm_eps = 1e-6;
    c->is_draft = draft;
    c->block_size = 4;
    c->n_target_layer_ids = 1;
    c->layer_window[0] = draft ? window : 0;
    memset(m, 0, sizeof *m);
    m->arch = draft ? "dflash" : "qwen3";
    m->name = "fuzz";
    m->cfg = c;
    m->voc = voc;
    m->eos = m->bos = m->pad = -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!root[0]) {
        snprintf(root, sizeof root, "/tmp/dflash-fuzz-gguf.XXXXXX");
        if (!mkdtemp(root)) abort();
        snprintf(path, sizeof path, "%s/in", root);
        atexit(remove_root);
    }
    if (size < 1) return 0;
    int mode = data[0] & 1, draft = data[0] >> 1 & 1, window = data[0] >> 2 & 7, hybrid = data[0] >> 5 & 1;
    static const Hybrid hy = {2, 4, 2, 2};  /* bit 5: read as a hybrid target's tensors (qwen35 names, reorders) */
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size > 1 && fwrite(data + 1, 1, size - 1, f) != size - 1) abort();
    if (fclose(f) != 0) abort();
    dflash_errmsg[0] = 0;

    Config cfg;
    Meta m;
    if (mode == 0) {
        GVocab g;
        memset(&g, 0, sizeof g);
        if (gvocab_from_tokenizer_json(&g, path, 64) == 0) {
            if (g.n != 64 || !g.pre) abort();
            for (int i = 0; i < g.n; i++) {
                if (!g.tok[i]) abort();
                int t = g.type[i];
                if (t != TT_NORMAL && t != TT_CONTROL && t != TT_USER_DEFINED && t != TT_UNUSED) abort();
            }
            for (int i = 0; i < g.n_merges; i++)
                if (!g.merges[i]) abort();
            meta_for(&m, &cfg, &g, draft, window);
            Gw count = {NULL, 0, 0};
            write_kvs(&count, &m);
            if (count.n_kv < 20) abort();
        } else if (!dflash_errmsg[0]) {
            abort();
        }
        gvocab_free(&g);
    } else {
        Source s;
        memset(&s, 0, sizeof s);
        if (source_add_file(&s, path, draft, hybrid && !draft ? &hy : NULL) == 0) {
            for (int i = 0; i < s.n; i++) {
                const Tensor *t = &s.t[i];
                uint64_t numel = t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
                int esize = t->dtype == GT_F32 ? 4 : 2;
                if (!t->name[0] || t->src_bytes != numel * (uint64_t)esize || t->src_off + t->src_bytes > size - 1 ||
                    t->out_bytes != (t->type == GT_F32 ? numel * 4 : t->src_bytes) || (t->ndim == 1 && t->type != GT_F32))
                    abort();
            }
            static char *one_tok[1] = {(char *)"a"};
            static int32_t one_type[1] = {TT_NORMAL};
            GVocab g = {1, one_tok, one_type, 0, NULL, "default"};
            meta_for(&m, &cfg, &g, draft, window);
            FILE *out = fopen("/dev/null", "wb");
            if (!out) abort();
            if (write_gguf(out, &s, &m) != 0) abort();
            fclose(out);
        } else if (!dflash_errmsg[0]) {
            abort();
        }
        source_free(&s);
    }
    dflash_errmsg[0] = 0;
    return 0;
}
