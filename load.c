/* load.c - reading the files a run needs: config.json, model.safetensors
 * (validated, then mapped), vocab.txt and the word-level tokenizer.
 * Everything here returns 0 or -1 with a one-line dflash_errmsg naming the
 * file, the field, what was expected and what was found. */
#include "dflash.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>      /* POSIX: open, and mmap for the weight files */
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- files */

/* read_file: the whole file into a NUL-terminated buffer (at most max bytes) */
static char *read_file(const char *path, size_t max, size_t *len_out) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only a
     * regular file is read (a directory or a device is refused) */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) { dflash_set_error("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        close(fd);
        dflash_set_error("%s: expected a regular file, got %s", path, dir ? "a directory" : "a special file");
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); dflash_set_error("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) { fclose(f); dflash_set_error("%s: out of memory", path); return NULL; }
        if (n + 1 >= cap) {
            if (cap > max) { free(buf); fclose(f); dflash_set_error("%s: larger than %zu bytes", path, max); return NULL; }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; continue; }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(buf); dflash_set_error("%s: read error", path); return NULL; }
    if (n > max) { free(buf); dflash_set_error("%s: larger than %zu bytes", path, max); return NULL; }
    buf[n] = 0;
    *len_out = n;
    return buf;
}

/* ---- config.json */

#define MAX_DIM (1 << 16)        /* hidden, intermediate, head_dim, heads */
#define MAX_LAYERS 256
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

static int cfg_architecture(const Json *root, const char *path, const char *want) {
    const Json *a = json_get(root, "architectures");
    char got[96];
    if (!a) { dflash_set_error("%s: missing field \"architectures\" (expected [\"%s\"])", path, want); return -1; }
    if (a->type == JSON_ARRAY)
        for (int i = 0; i < a->n; i++)
            if (a->items[i].type == JSON_STRING && strcmp(a->items[i].string, want) == 0) return 0;
    if (a->type == JSON_ARRAY && a->n > 0) json_describe(&a->items[0], got, sizeof got);
    else json_describe(a, got, sizeof got);
    dflash_set_error("%s: field \"architectures\": expected [\"%s\"], got %s", path, want, got);
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

static int config_parse(Config *c, const char *path, const char *text, size_t len, int draft) {
    Json root;
    memset(c, 0, sizeof *c);
    if (json_parse(text, len, path, &root) != 0) return -1;
    int rc = -1;
    if (root.type != JSON_OBJECT) { dflash_set_error("%s: expected a JSON object", path); goto done; }
    if (cfg_architecture(&root, path, draft ? "DFlashDraftModel" : "Qwen3ForCausalLM") != 0) goto done;
    if (cfg_int(&root, path, "hidden_size", 1, MAX_DIM, &c->hidden_size) ||
        cfg_int(&root, path, "intermediate_size", 1, MAX_DIM, &c->intermediate_size) ||
        cfg_int(&root, path, "num_hidden_layers", 1, MAX_LAYERS, &c->num_hidden_layers) ||
        cfg_int(&root, path, "num_attention_heads", 1, MAX_DIM, &c->num_attention_heads) ||
        cfg_int(&root, path, "num_key_value_heads", 1, MAX_DIM, &c->num_key_value_heads) ||
        cfg_int(&root, path, "head_dim", 2, MAX_DIM, &c->head_dim) ||
        cfg_int(&root, path, "vocab_size", 1, MAX_VOCAB, &c->vocab_size) ||
        cfg_int(&root, path, "max_position_embeddings", 1, 1 << 20, &c->max_position_embeddings) ||
        /* eps and theta become floats: (0, 1] and (1, 1e30] keep every
         * derived value (eps, theta^(2i/d), its inverse) finite in float */
        cfg_double(&root, path, "rms_norm_eps", 0, 1, &c->rms_norm_eps) ||
        cfg_double(&root, path, "rope_theta", 1, 1e30, &c->rope_theta))
        goto done;
    if (c->num_attention_heads % c->num_key_value_heads != 0) {
        dflash_set_error("%s: field \"num_attention_heads\": expected a multiple of num_key_value_heads (%d), "
                         "got %d", path, c->num_key_value_heads, c->num_attention_heads);
        goto done;
    }
    if (c->head_dim % 2 != 0) {
        dflash_set_error("%s: field \"head_dim\": expected an even number (RoPE rotates pairs of dims), got %d",
                         path, c->head_dim);
        goto done;
    }
    /* hidden_size need not equal heads x head_dim (Qwen3 allows it: q_proj is
     * [H*d, D], o_proj [D, H*d]); only an absurd H*d is refused. */
    if ((long)c->num_attention_heads * c->head_dim > MAX_DIM) {
        dflash_set_error("%s: fields \"num_attention_heads\" x \"head_dim\": expected at most %d, got %d x %d = %ld",
                         path, MAX_DIM, c->num_attention_heads, c->head_dim,
                         (long)c->num_attention_heads * c->head_dim);
        goto done;
    }
    const Json *tie = json_get(&root, "tie_word_embeddings");
    char got[96];
    if (tie && !(tie->type == JSON_BOOL && tie->boolean == 0)) {
        dflash_set_error("%s: field \"tie_word_embeddings\": expected false (lm_head is its own tensor), got %s",
                         path, json_describe(tie, got, sizeof got));
        goto done;
    }
    const Json *bias = json_get(&root, "attention_bias");
    if (bias && !(bias->type == JSON_BOOL && bias->boolean == 0)) {
        dflash_set_error("%s: field \"attention_bias\": expected false (no bias tensors), got %s", path,
                         json_describe(bias, got, sizeof got));
        goto done;
    }
    if (draft) {
        c->is_draft = 1;
        if (cfg_int(&root, path, "num_target_layers", 1, MAX_LAYERS, &c->num_target_layers) ||
            cfg_int(&root, path, "block_size", 1, DFLASH_MAX_BLOCK, &c->block_size))
            goto done;
        const Json *dfc = json_get(&root, "dflash_config");
        if (!dfc || dfc->type != JSON_OBJECT) {
            if (!dfc) dflash_set_error("%s: missing field \"dflash_config\" (expected an object)", path);
            else dflash_set_error("%s: field \"dflash_config\": expected an object, got %s", path,
                                  json_describe(dfc, got, sizeof got));
            goto done;
        }
        char sub[600];
        snprintf(sub, sizeof sub, "%.500s: dflash_config", path);
        if (cfg_int(dfc, sub, "mask_token_id", 0, c->vocab_size - 1, &c->mask_token_id)) goto done;
        const Json *ids = json_get(dfc, "target_layer_ids");
        if (!ids) {
            /* the reference's default (build_target_layer_ids) */
            c->n_target_layer_ids = c->num_hidden_layers;
            if (c->n_target_layer_ids > DFLASH_MAX_LAYER_IDS) {
                dflash_set_error("%s: no target_layer_ids and too many draft layers for the default", sub);
                goto done;
            }
            build_target_layer_ids(c->num_target_layers, c->num_hidden_layers, c->target_layer_ids);
        } else {
            if (ids->type != JSON_ARRAY || ids->n < 1 || ids->n > DFLASH_MAX_LAYER_IDS) {
                dflash_set_error("%s: field \"target_layer_ids\": expected a list of 1..%d layer indices, got %s",
                                 sub, DFLASH_MAX_LAYER_IDS, json_describe(ids, got, sizeof got));
                goto done;
            }
            c->n_target_layer_ids = ids->n;
            for (int i = 0; i < ids->n; i++) {
                const Json *v = &ids->items[i];
                if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 ||
                    v->integer >= c->num_target_layers) {
                    dflash_set_error("%s: field \"target_layer_ids\"[%d]: expected an integer in 0..%d "
                                     "(num_target_layers - 1), got %s", sub, i, c->num_target_layers - 1,
                                     json_describe(v, got, sizeof got));
                    goto done;
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
                goto done;
            }
            for (int j = 0; j < i; j++)
                if (c->target_layer_ids[j] == c->target_layer_ids[i]) {
                    dflash_set_error("%s: field \"target_layer_ids\": expected distinct layers, got layer %d twice%s",
                                     sub, c->target_layer_ids[i], ids ? "" : " (from the default: give target_layer_ids)");
                    goto done;
                }
        }
        if ((long)c->n_target_layer_ids * c->hidden_size > MAX_DIM * 4L) {
            dflash_set_error("%s: field \"target_layer_ids\": %d layers x hidden_size %d = %ld fc.weight inputs, "
                             "expected at most %ld", sub, c->n_target_layer_ids, c->hidden_size,
                             (long)c->n_target_layer_ids * c->hidden_size, MAX_DIM * 4L);
            goto done;
        }
    }
    rc = 0;
done:
    json_free(&root);
    return rc;
}

/* ---- the tensor table: every tensor a model file must hold, with the shape
 * the config implies and where it goes in Model.data (llm.c-style carving). */
typedef struct {
    char name[96];
    int ndim;
    int64_t shape[2];
    real **dst;          /* the Model field that will point at it */
    int found;
    int64_t begin, end;  /* byte offsets in the data section */
} TensorSpec;

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
    if (!c->is_draft) ADD(&m->embed_tokens, 2, c->vocab_size, D, "model.embed_tokens.weight");
    for (int l = 0; l < L; l++) {
        LayerWeights *w = &m->layers[l];
        ADD(&w->input_layernorm, 1, D, 0, "%slayers.%d.input_layernorm.weight", pre, l);
        ADD(&w->q_proj, 2, qd, D, "%slayers.%d.self_attn.q_proj.weight", pre, l);
        ADD(&w->k_proj, 2, kvd, D, "%slayers.%d.self_attn.k_proj.weight", pre, l);
        ADD(&w->v_proj, 2, kvd, D, "%slayers.%d.self_attn.v_proj.weight", pre, l);
        ADD(&w->o_proj, 2, D, qd, "%slayers.%d.self_attn.o_proj.weight", pre, l);
        ADD(&w->q_norm, 1, d, 0, "%slayers.%d.self_attn.q_norm.weight", pre, l);
        ADD(&w->k_norm, 1, d, 0, "%slayers.%d.self_attn.k_norm.weight", pre, l);
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
        ADD(&m->lm_head, 2, c->vocab_size, D, "lm_head.weight");
    }
#undef ADD
    *out_specs = s;
    *out_n = n;
    return 0;
}

static int64_t spec_numel(const TensorSpec *s) { return s->ndim == 1 ? s->shape[0] : s->shape[0] * s->shape[1]; }

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

/* the safetensors dtypes: only F32 is read; the others are named as such */
static const char *const SAFETENSORS_DTYPES[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64",
                                                 "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};

/* safetensors_check_header: buf is a whole model.safetensors file (len
 * bytes). Checks the 8-byte header length, the JSON header and every entry
 * against the table (names, dtype F32, shapes from config.json, offsets),
 * and that the tensors tile the data section exactly; fills specs[].begin,
 * .end, .found. *data_start (may be NULL) gets 8 + header length. Reads
 * nothing of the data section, so it is the whole parser a fuzzer needs. */
static int safetensors_check_header(const unsigned char *buf, size_t len, TensorSpec *specs, int n_specs,
                                    const char *path, size_t *data_start) {
    int rc = -1;
    TensorSpec **order = NULL;
    Json root = {0};
    char got[96];
    for (int j = 0; j < n_specs; j++) specs[j].found = 0;
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
        for (int j = 0; j < n_specs; j++) if (strcmp(specs[j].name, name) == 0) s = &specs[j];
        if (!s) { dflash_set_error("%s: unexpected tensor \"%.200s\" (not part of this model)", path, name); goto done; }
        const Json *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"), *off = json_get(e, "data_offsets");
        if (e->type != JSON_OBJECT || !dt || !sh || !off) {
            dflash_set_error("%s: tensor \"%s\": expected an object with \"dtype\", \"shape\" and \"data_offsets\", "
                             "got %s%s", path, name, json_describe(e, got, sizeof got),
                             e->type != JSON_OBJECT ? "" : !dt ? " without \"dtype\"" : !sh ? " without \"shape\""
                                                                                     : " without \"data_offsets\"");
            goto done;
        }
        if (dt->type != JSON_STRING || strcmp(dt->string, "F32") != 0) {
            int known = 0;
            for (size_t k = 0; dt->type == JSON_STRING && k < sizeof SAFETENSORS_DTYPES / sizeof *SAFETENSORS_DTYPES; k++)
                known |= strcmp(dt->string, SAFETENSORS_DTYPES[k]) == 0;
            dflash_set_error("%s: tensor \"%s\": field \"dtype\": expected \"F32\", got %s%s", path, name,
                             json_describe(dt, got, sizeof got),
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
        if (en->integer - b->integer != spec_numel(s) * 4) {
            char sh_s[64];
            shape_str(sh_s, sizeof sh_s, s->shape, s->ndim);
            dflash_set_error("%s: tensor \"%s\": field \"data_offsets\": expected a span of %lld bytes "
                             "(shape %s x 4-byte F32), got %lld", path, name, (long long)spec_numel(s) * 4,
                             sh_s, en->integer - b->integer);
            goto done;
        }
        s->found = 1;
        s->begin = b->integer;
        s->end = en->integer;
    }
    for (int j = 0; j < n_specs; j++)
        if (!specs[j].found) { dflash_set_error("%s: missing tensor \"%s\"", path, specs[j].name); goto done; }

    /* the tensors must tile the data section exactly: no overlap, no hole, nothing after */
    order = xcalloc((size_t)n_specs, sizeof *order, "tensor order");
    if (!order) goto done;
    for (int j = 0; j < n_specs; j++) order[j] = &specs[j];
    qsort(order, (size_t)n_specs, sizeof *order, cmp_begin);
    int64_t at = 0;
    for (int j = 0; j < n_specs; j++) {
        if (order[j]->begin < at) {
            dflash_set_error("%s: tensor \"%s\" overlaps the previous tensor \"%s\" (begins at byte %lld, "
                             "expected %lld)", path, order[j]->name, order[j - 1]->name,
                             (long long)order[j]->begin, (long long)at);
            goto done;
        }
        if (order[j]->begin > at) {
            dflash_set_error("%s: hole of %lld bytes before tensor \"%s\" (begins at byte %lld, expected %lld)", path,
                             (long long)(order[j]->begin - at), order[j]->name, (long long)order[j]->begin,
                             (long long)at);
            goto done;
        }
        at = order[j]->end;
    }
    if (at != data_size) {
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

/* safetensors_load: check the header against the table, then read every
 * tensor (little-endian F32) into its place, converting to `real`. */
static int safetensors_load(const char *path, TensorSpec *specs, int n_specs, Model *m) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);  /* a FIFO must not block the open */
    if (fd < 0) { dflash_set_error("%s: cannot open: %s", path, strerror(errno)); return -1; }
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        close(fd);
        dflash_set_error("%s: expected a regular file, got %s", path, dir ? "a directory" : "a special file");
        return -1;
    }
    int64_t fsize = (int64_t)st.st_size;
    if (fsize < 8) {  /* also keeps mmap away from an empty file */
        close(fd);
        dflash_set_error("%s: expected at least the 8-byte header length, got a file of %lld bytes", path,
                         (long long)fsize);
        return -1;
    }
    /* Map the file instead of reading it: the weights are used in place
     * (float build), with no copy and no zeroed pages to fill. MAP_PRIVATE
     * makes a write (a test poking a weight) copy-on-write, never to disk. */
    unsigned char *map = mmap(NULL, (size_t)fsize, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) { dflash_set_error("%s: cannot map: %s", path, strerror(errno)); return -1; }
    int rc = -1;
    size_t data_start;
    if (safetensors_check_header(map, (size_t)fsize, specs, n_specs, path, &data_start) != 0) goto done;

    /* the data: F32 little-endian, refusing NaN and Inf. In the float build
     * the weights stay in the mapping (every tensor begins at a multiple of 4
     * bytes from the data section, so only the section must be aligned);
     * otherwise they are converted into Model.data. */
    const unsigned char *data = map + data_start;
    int in_place = sizeof(real) == sizeof(float) && data_start % sizeof(float) == 0;
    if (!in_place) {
        size_t total = 0;
        for (int j = 0; j < n_specs; j++) total += (size_t)spec_numel(&specs[j]);
        m->data = xcalloc(total, sizeof(real), "weights");
        if (!m->data) goto done;
    }
    real *conv = m->data;
    for (int j = 0; j < n_specs; j++) {
        TensorSpec *s = &specs[j];
        int64_t numel = spec_numel(s);
        const unsigned char *src = data + s->begin;
        /* NaN and Inf are the floats whose 8 exponent bits are all ones.
         * Checked 16 values at a time into 16 flags (a fixed-length inner
         * loop the compiler turns into vector instructions at -O2; a plain
         * loop over numel was left scalar, and this scan of every weight was
         * half the default run's time) */
        uint32_t flag[16] = {0};
        int64_t i = 0;
        for (; i + 16 <= numel; i += 16)
            for (int j = 0; j < 16; j++) {
                uint32_t u;
                memcpy(&u, src + 4 * (i + j), 4);
                flag[j] |= (u & 0x7f800000u) == 0x7f800000u;
            }
        for (; i < numel; i++) {
            uint32_t u;
            memcpy(&u, src + 4 * i, 4);
            flag[0] |= (u & 0x7f800000u) == 0x7f800000u;
        }
        int nonfinite = 0;
        for (int j = 0; j < 16; j++) nonfinite |= flag[j] != 0;
        if (nonfinite)
            for (int64_t i = 0; i < numel; i++) {
                float x;
                memcpy(&x, src + 4 * i, 4);
                if (!isfinite(x)) {
                    dflash_set_error("%s: tensor \"%s\": element %lld: expected a finite F32, got %s", path, s->name,
                                     (long long)i, isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf");
                    goto done;
                }
            }
        if (in_place) {
            *s->dst = (real *)(void *)(map + data_start + s->begin);
        } else {
            for (int64_t i = 0; i < numel; i++) {
                float x;
                memcpy(&x, src + 4 * i, 4);
                conv[i] = (real)x;
            }
            *s->dst = conv;
            conv += numel;
        }
    }
    m->map = map;
    m->map_size = (size_t)fsize;
    map = NULL;
    rc = 0;
done:
    if (map) munmap(map, (size_t)fsize);
    return rc;
}

static int host_is_little_endian(void) {
    uint32_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* model_load: dir/config.json and dir/model.safetensors. */
int model_load(Model *m, const char *dir, int expect_draft) {
    memset(m, 0, sizeof *m);
    if (!host_is_little_endian()) { dflash_set_error("this program reads little-endian files on little-endian hosts only"); return -1; }
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = read_file(path, 1 << 20, &len);
    if (!text) return -1;
    int rc = config_parse(&m->cfg, path, text, len, expect_draft);
    free(text);
    if (rc != 0) return -1;

    TensorSpec *specs = NULL;
    int n_specs = 0;
    m->layers = xcalloc((size_t)m->cfg.num_hidden_layers, sizeof(LayerWeights), "layers");
    m->inv_freq = xcalloc((size_t)m->cfg.head_dim / 2, sizeof(real), "inv_freq");
    if (!m->layers || !m->inv_freq || tensor_table(m, &specs, &n_specs) != 0) goto fail;
    size_t total = 0;
    for (int j = 0; j < n_specs; j++) total += (size_t)spec_numel(&specs[j]);
    if (total > ((size_t)1 << 31)) { dflash_set_error("%s: model too large (%zu parameters)", dir, total); goto fail; }
    m->n_params = total;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (safetensors_load(path, specs, n_specs, m) != 0) goto fail;
    rope_inv_freq(m->inv_freq, m->cfg.head_dim, m->cfg.rope_theta);
    free(specs);
    return 0;
fail:
    free(specs);
    model_free(m);
    return -1;
}

void model_free(Model *m) {
    free(m->data);
    if (m->map) munmap(m->map, m->map_size);
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
    char *text = read_file(path, 64u << 20, &len);
    if (!text) return -1;
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
    for (int i = 0; i < v->n; i++) if (strcmp(v->words[i], word) == 0) return i;
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

