/* formats/draftdir.c - the draft folder dflash train writes (formats/draftdir.h). */
#include "draftdir.h"
#include "files.h"
#include "json.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* A number as JSON, the shortest "%.{15,16,17}g" that reads back exactly
 * (1e-06 stays 1e-06, 1000000 stays 1000000). */
static void json_number(char *buf, size_t size, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
}

/* config.json: the keys SpecForge's and z-lab's published DFlash configs
 * carry (configs/qwen3-4b-dflash.json; toy_weights' qwen3-layout set), in
 * their (sorted) order, with this draft's values; "dtype" float32. bos_id < 0:
 * the key is left out. */
static void write_config_json(FILE *f, const Config *c, int bos_id, int block_size) {
    char eps[40], theta[40];
    json_number(eps, sizeof eps, c->rms_norm_eps);
    json_number(theta, sizeof theta, c->rope_theta);
    fprintf(f, "{\n  \"architectures\": [\"DFlashDraftModel\"],\n");
    fprintf(f, "  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n");
    fprintf(f, "  \"auto_map\": {\"AutoModel\": \"dflash.DFlashDraftModel\"},\n");
    fprintf(f, "  \"block_size\": %d,\n", block_size);
    if (bos_id >= 0) fprintf(f, "  \"bos_token_id\": %d,\n", bos_id);
    fprintf(f, "  \"dflash_config\": {\"mask_token_id\": %d, \"target_layer_ids\": [", c->mask_token_id);
    for (int i = 0; i < c->n_target_layer_ids; i++) fprintf(f, "%s%d", i ? ", " : "", c->target_layer_ids[i]);
    fprintf(f, "]},\n  \"dtype\": \"float32\",\n");
    if (c->n_eos == 1) fprintf(f, "  \"eos_token_id\": %d,\n", c->eos_token_id[0]);
    else if (c->n_eos > 1) {
        fprintf(f, "  \"eos_token_id\": [");
        for (int i = 0; i < c->n_eos; i++) fprintf(f, "%s%d", i ? ", " : "", c->eos_token_id[i]);
        fprintf(f, "],\n");
    }
    fprintf(f, "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n", c->head_dim, c->hidden_size);
    fprintf(f, "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n", c->intermediate_size);
    fprintf(f, "  \"layer_types\": [");
    for (int i = 0; i < c->num_hidden_layers; i++) fprintf(f, "%s\"full_attention\"", i ? ", " : "");
    fprintf(f, "],\n  \"max_position_embeddings\": %d,\n", c->max_position_embeddings);
    fprintf(f, "  \"max_window_layers\": %d,\n  \"model_type\": \"qwen3\",\n", c->num_hidden_layers);
    fprintf(f, "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n", c->num_attention_heads,
            c->num_hidden_layers);
    fprintf(f, "  \"num_key_value_heads\": %d,\n  \"num_target_layers\": %d,\n", c->num_key_value_heads,
            c->num_target_layers);
    fprintf(f, "  \"rms_norm_eps\": %s,\n  \"rope_scaling\": null,\n  \"rope_theta\": %s,\n", eps, theta);
    fprintf(f, "  \"sliding_window\": null,\n  \"tie_word_embeddings\": false,\n");
    fprintf(f, "  \"use_cache\": true,\n  \"use_sliding_window\": false,\n  \"vocab_size\": %d\n}\n", c->vocab_size);
}

/* model.safetensors, laid out as toy_weights/gen.c writes it: u64 LE header
 * length N, the JSON header {"__metadata__":{"format":"pt"},"key":{"dtype":
 * "F32","shape":[..],"data_offsets":[a,b]},...} space-padded so 8 + N is a
 * multiple of 64, then every tensor's little-endian float32 data back to
 * back in train_params order (fc, hidden_norm, layers, norm). The double
 * build rounds each value to float once here. */
static int write_safetensors(FILE *f, const TrainParam *p, int n) {
    size_t cap = 256 + (size_t)n * 160, len = 0, offset = 0;
    char *h = malloc(cap);
    if (!h) { dflash_set_error("out of memory (the safetensors header)"); return -1; }
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t numel = (size_t)p[i].shape[0] * (size_t)(p[i].ndim == 2 ? p[i].shape[1] : 1);
        char shape[64];
        if (p[i].ndim == 2) snprintf(shape, sizeof shape, "%lld,%lld", (long long)p[i].shape[0], (long long)p[i].shape[1]);
        else snprintf(shape, sizeof shape, "%lld", (long long)p[i].shape[0]);
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                                p[i].key, shape, offset, offset + 4 * numel);
        offset += 4 * numel;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while ((8 + len) % 64 != 0 && len + 1 < cap) h[len++] = ' ';
    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)len >> (8 * b));
    fwrite(len8, 1, 8, f);
    fwrite(h, 1, len, f);
    free(h);
    unsigned char buf[4096];
    for (int i = 0; i < n; i++) {
        size_t numel = (size_t)p[i].shape[0] * (size_t)(p[i].ndim == 2 ? p[i].shape[1] : 1), k = 0;
        while (k < numel) {
            size_t m = 0;
            for (; m < sizeof buf / 4 && k < numel; m++, k++) {
                float x = (float)p[i].data[k];
                uint32_t u;
                memcpy(&u, &x, 4);
                buf[4 * m + 0] = (unsigned char)u;
                buf[4 * m + 1] = (unsigned char)(u >> 8);
                buf[4 * m + 2] = (unsigned char)(u >> 16);
                buf[4 * m + 3] = (unsigned char)(u >> 24);
            }
            fwrite(buf, 1, 4 * m, f);
        }
    }
    return 0;  /* a write error is the stream's: out_commit reports it */
}

/* The folder is written whole into "<out>.partial.XXXXXX" beside it and
 * renamed into place at the end. Every path is in formats/files.c's partial-output
 * registry before it exists, so a failure (outdir_discard) or a signal
 * (cli/main.c's handler, out_cleanup_on_signal) removes it; the files inside are
 * OutFiles. An existing --out is replaced only when it is empty or holds
 * nothing but config.json and model.safetensors (a draft folder this
 * command wrote). */
static const char *const OUT_FILES[2] = {"config.json", "model.safetensors"};


void outdir_discard(OutDir *o) {
    if (o->tmp) {
        sigset_t old;
        out_block_signals(&old);
        out_remove_owned(o);   /* the files, then the folder (newest first) */
        out_forget(o, 0, NULL);
        out_restore_signals(&old);
    }
    free(o->dir);
    free(o->tmp);
    free(o->file[0]);
    free(o->file[1]);
    memset(o, 0, sizeof *o);
}

int outdir_prepare(OutDir *o, const char *dir) {
    memset(o, 0, sizeof *o);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == 0 || n > 4000) { dflash_set_error("--out: expected a folder name of 1..4000 characters"); return -1; }
    o->dir = malloc(n + 1);
    char *tmp = malloc(n + 32);
    if (!o->dir || !tmp) { free(tmp); dflash_set_error("out of memory"); return -1; }
    memcpy(o->dir, dir, n);
    o->dir[n] = 0;
    struct stat st;
    if (lstat(o->dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            free(tmp);
            dflash_set_error("--out %s: exists and is not a folder; refusing to replace it (choose another path)", o->dir);
            return -1;
        }
        DIR *d = opendir(o->dir);
        if (!d) { free(tmp); dflash_set_error("--out %s: cannot read the folder: %s", o->dir, strerror(errno)); return -1; }
        struct dirent *e;
        char bad[256] = "";
        while (!bad[0] && (e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, OUT_FILES[0]) &&
                strcmp(e->d_name, OUT_FILES[1]))
                snprintf(bad, sizeof bad, "%s", e->d_name);
        closedir(d);
        if (bad[0]) {
            free(tmp);
            dflash_set_error("--out %s: holds %s, which dflash train does not write; refusing to replace the folder "
                             "(choose another path)", o->dir, bad);
            return -1;
        }
        o->exists = 1;
    } else if (errno != ENOENT) {
        free(tmp);
        dflash_set_error("--out %s: %s", o->dir, strerror(errno));
        return -1;
    }
    snprintf(tmp, n + 32, "%s.partial.XXXXXX", o->dir);
    sigset_t old;
    out_block_signals(&old);
    int made = mkdtemp(tmp) != NULL, err = errno;
    if (made && out_register(o, 'd', tmp) != 0) { rmdir(tmp); made = 0; err = ENOMEM; }
    out_restore_signals(&old);
    if (!made) {
        dflash_set_error("--out %s: cannot create %s: %s", o->dir, tmp, strerror(err));
        free(tmp);
        return -1;
    }
    o->tmp = tmp;
    mode_t mask = umask(0);  /* mkdtemp makes it 0700: the folder gets the usual mode */
    umask(mask);
    chmod(o->tmp, 0777 & ~mask);
    for (int i = 0; i < 2; i++)
        if (!(o->file[i] = path_join(o->tmp, OUT_FILES[i]))) return -1;
    return 0;
}

/* which 0: config.json, 1: model.safetensors, as an OutFile inside the
 * partial folder (registered before its rename makes it a real file) */
int outdir_write_file(OutDir *o, int which, const Config *c, int bos_id, int B, const TrainParam *p, int n) {
    OutFile *f = out_open(o->file[which], "dflash train");
    if (!f) return -1;
    if (which == 0) write_config_json(out_stream(f), c, bos_id, B);
    else if (write_safetensors(out_stream(f), p, n) != 0 && !ferror(out_stream(f))) { out_abort(f); return -1; }
    sigset_t old;
    out_block_signals(&old);
    int reg = out_register(o, 'f', o->file[which]);
    out_restore_signals(&old);
    if (reg != 0) { out_abort(f); dflash_set_error("out of memory"); return -1; }
    return out_commit(f);
}

/* rename the partial folder onto --out, signals blocked throughout (an
 * existing --out is first moved into an empty "<out>.old.XXXXXX" and
 * removed after the switch) */
int outdir_commit(OutDir *o) {
    char old[4200] = "";
    int rc = -1;
    sigset_t sig;
    out_block_signals(&sig);
    if (o->exists) {
        snprintf(old, sizeof old, "%s.old.XXXXXX", o->dir);
        if (!mkdtemp(old)) {
            dflash_set_error("--out %s: cannot create %s: %s", o->dir, old, strerror(errno));
            goto done;
        }
        if (rename(o->dir, old) != 0) {
            dflash_set_error("--out %s: cannot move the earlier draft aside: %s", o->dir, strerror(errno));
            rmdir(old);
            goto done;
        }
    }
    if (rename(o->tmp, o->dir) != 0) {
        dflash_set_error("--out %s: cannot rename %s into place: %s", o->dir, o->tmp, strerror(errno));
        if (old[0]) rename(old, o->dir);
        goto done;
    }
    out_forget(o, 0, NULL);
    free(o->tmp);
    o->tmp = NULL;
    if (old[0]) {
        for (int i = 0; i < 2; i++) {
            char *p = path_join(old, OUT_FILES[i]);
            if (p) unlink(p);
            free(p);
        }
        rmdir(old);
    }
    rc = 0;
done:
    out_restore_signals(&sig);
    return rc;
}


/* bos_token_id of a config.json (-1: absent, not an integer, unreadable) */
int config_bos(const char *path) {
    char *text = NULL;
    size_t len = 0;
    Json root;
    int bos = -1;
    char saved[sizeof dflash_errmsg];
    memcpy(saved, dflash_errmsg, sizeof saved);
    if (file_read_all(path, &text, &len) == 0 && json_parse(text, len, path, &root) == 0) {
        const Json *b = json_get(&root, "bos_token_id");
        if (b && b->type == JSON_NUMBER && b->is_integer && b->integer >= 0 && b->integer < 0x7fffffff) bos = (int)b->integer;
        json_free(&root);
    }
    free(text);
    memcpy(dflash_errmsg, saved, sizeof saved);
    return bos;
}

