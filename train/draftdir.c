/* train/draftdir.c - the draft folder dflash train writes (train/draftdir.h). */
#include "train/draftdir.h"
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* config.json: the keys SpecForge's and z-lab's published DFlash configs
 * carry (configs/qwen3-4b-dflash.json; toy_weights' qwen3-layout set), in
 * their (sorted) order, with this draft's values; "dtype" bfloat16 when bf16,
 * else float32. bos_id < 0: the key is left out. Every key formats/load.c reads carries the input
 * config's meaning over (c is what the loader read from it): rope_scaling
 * (llama3 or null), layer_types, sliding_window and use_sliding_window (a
 * single window, as the loader keeps one), eos_token_id; train/tests/test_train_cli.c
 * checks that the loader reads the written file back to the same Config. */
void draftdir_write_config(FILE *f, const Config *c, int bos_id, int block_size, int bf16) {
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
    fprintf(f, "]},\n  \"dtype\": \"%s\",\n", bf16 ? "bfloat16" : "float32");
    if (c->n_eos == 1) fprintf(f, "  \"eos_token_id\": %d,\n", c->eos_token_id[0]);
    else if (c->n_eos > 1) {
        fprintf(f, "  \"eos_token_id\": [");
        for (int i = 0; i < c->n_eos; i++) fprintf(f, "%s%d", i ? ", " : "", c->eos_token_id[i]);
        fprintf(f, "],\n");
    }
    fprintf(f, "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n", c->head_dim, c->hidden_size);
    fprintf(f, "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n", c->intermediate_size);
    /* layer_types from the windows the loader read (sliding_attention: w > 0) */
    int window = 0;
    for (int i = 0; i < c->num_hidden_layers; i++)
        if (c->layer_window[i] > 0) window = c->layer_window[i];
    fprintf(f, "  \"layer_types\": [");
    for (int i = 0; i < c->num_hidden_layers; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", c->layer_window[i] > 0 ? "sliding_attention" : "full_attention");
    fprintf(f, "],\n  \"max_position_embeddings\": %d,\n", c->max_position_embeddings);
    fprintf(f, "  \"max_window_layers\": %d,\n  \"model_type\": \"qwen3\",\n", c->num_hidden_layers);
    fprintf(f, "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n", c->num_attention_heads,
            c->num_hidden_layers);
    fprintf(f, "  \"num_key_value_heads\": %d,\n  \"num_target_layers\": %d,\n", c->num_key_value_heads,
            c->num_target_layers);
    fprintf(f, "  \"rms_norm_eps\": %s,\n", eps);
    config_write_rope_scaling(f, c);
    fprintf(f, "  \"rope_theta\": %s,\n", theta);
    if (window > 0) fprintf(f, "  \"sliding_window\": %d,\n", window);
    else fprintf(f, "  \"sliding_window\": null,\n");
    fprintf(f, "  \"tie_word_embeddings\": false,\n");
    fprintf(f, "  \"use_cache\": true,\n  \"use_sliding_window\": %s,\n  \"vocab_size\": %d\n}\n",
            window > 0 ? "true" : "false", c->vocab_size);
}

static uint16_t bf16_of(float x) {  /* round to nearest even (x finite) */
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

int st_write_params(FILE *f, const TrainParam *const *sets, const char *const *prefix, int n_sets, int n,
                    const char *dtype, int align) {
    int item = strcmp(dtype, "F64") == 0 ? 8 : strcmp(dtype, "BF16") == 0 ? 2 : 4;
    size_t cap = 256 + (size_t)n * (size_t)n_sets * 220, len = 0, offset = 0;
    char *h = malloc(cap);
    if (!h) { dflash_set_error("out of memory (the safetensors header)"); return -1; }
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int j = 0; j < n_sets; j++)
        for (int i = 0; i < n; i++) {
            const TrainParam *p = &sets[j][i];
            size_t numel = (size_t)p->shape[0] * (size_t)(p->ndim == 2 ? p->shape[1] : 1);
            char shape[64];
            if (p->ndim == 2) snprintf(shape, sizeof shape, "%lld,%lld", (long long)p->shape[0], (long long)p->shape[1]);
            else snprintf(shape, sizeof shape, "%lld", (long long)p->shape[0]);
            len += (size_t)snprintf(h + len, cap - len,
                                    ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                                    prefix[j], p->key, dtype, shape, offset, offset + (size_t)item * numel);
            offset += (size_t)item * numel;
        }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while ((8 + len) % (size_t)align != 0 && len + 1 < cap) h[len++] = ' ';
    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)len >> (8 * b));
    fwrite(len8, 1, 8, f);
    fwrite(h, 1, len, f);
    free(h);
    unsigned char buf[8192];
    for (int j = 0; j < n_sets; j++)
        for (int i = 0; i < n; i++) {
            const TrainParam *p = &sets[j][i];
            size_t numel = (size_t)p->shape[0] * (size_t)(p->ndim == 2 ? p->shape[1] : 1), k = 0;
            while (k < numel) {
                size_t m = 0;
                for (; m < sizeof buf / 8 && k < numel; m++, k++) {
                    uint64_t u = 0;
                    if (item == 8) { double x = (double)p->data[k]; memcpy(&u, &x, 8); }
                    else if (item == 4) { float x = (float)p->data[k]; uint32_t w; memcpy(&w, &x, 4); u = w; }
                    else u = bf16_of((float)p->data[k]);
                    for (int b = 0; b < item; b++) buf[(size_t)item * m + (size_t)b] = (unsigned char)(u >> (8 * b));
                }
                fwrite(buf, 1, (size_t)item * m, f);
            }
        }
    return 0;  /* a write error is the stream's: out_commit reports it */
}

/* model.safetensors, laid out as toy_weights/gen.c writes it: float32 (or
 * bfloat16, each value rounded to nearest even) with the header padded to
 * 64 bytes, every tensor in train_params order (fc, hidden_norm, layers,
 * norm). The double build rounds each value to float once here. */
static int write_safetensors(FILE *f, const TrainParam *p, int n, int bf16) {
    const TrainParam *const sets[1] = {p};
    const char *const none[1] = {""};
    return st_write_params(f, sets, none, 1, n, bf16 ? "BF16" : "F32", 64);
}

/* The folder is written whole into "<out>.partial.XXXXXX" beside it and
 * renamed into place at the end, under the lock "<out>.lock" (held from
 * outdir_prepare to outdir_discard: one run at a time writes a --out; the
 * run that takes it removes the partial and old folders a killed run left).
 * Every path is in formats/files.c's partial-output registry before it
 * exists, so a failure (outdir_discard) or a signal (cli/main.c's handler,
 * out_cleanup_on_signal) removes it; the files inside are OutFiles. An
 * existing --out is replaced only when it is empty, or holds the marker
 * DRAFTDIR_MARKER (its first line DRAFTDIR_MARKER_LINE) and nothing but the
 * files this command writes. */
static const char *const OUT_FILES[DRAFTDIR_FILES] = {"config.json", "model.safetensors", DRAFTDIR_MARKER};

static int is_out_file(const char *name) {
    for (int i = 0; i < DRAFTDIR_FILES; i++)
        if (strcmp(name, OUT_FILES[i]) == 0) return 1;
    return 0;
}

/* dir holds the marker (its first line ours) and regular files of
 * OUT_FILES only; *bad gets the first other name (or "" when the marker is
 * missing) */
static int is_marked_draft(const char *dir, char *bad, size_t size) {
    bad[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int ok = 1;
    while (ok && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = path_join(dir, e->d_name);
        struct stat st;
        ok = p && is_out_file(e->d_name) && lstat(p, &st) == 0 && S_ISREG(st.st_mode);
        if (!ok) snprintf(bad, size, "%s", e->d_name);
        free(p);
    }
    closedir(d);
    if (!ok) return 0;
    char *m = path_join(dir, DRAFTDIR_MARKER), *text = NULL;
    size_t len = 0, ll = strlen(DRAFTDIR_MARKER_LINE);
    char saved[sizeof dflash_errmsg];
    memcpy(saved, dflash_errmsg, sizeof saved);
    ok = m && file_read_max(m, 4096, &text, &len) == 0 && len >= ll && memcmp(text, DRAFTDIR_MARKER_LINE, ll) == 0;
    memcpy(dflash_errmsg, saved, sizeof saved);
    free(m);
    free(text);
    return ok;
}

/* a name dflash train writes into its folder: one of OUT_FILES, or one's
 * OutFile temporary "<name>.partial.XXXXXX" (a killed run's) */
static int is_own_entry(const char *name) {
    if (is_out_file(name)) return 1;
    for (int i = 0; i < DRAFTDIR_FILES; i++) {
        size_t l = strlen(OUT_FILES[i]);
        if (strncmp(name, OUT_FILES[i], l) == 0 && strncmp(name + l, ".partial.", 9) == 0 && strlen(name + l) == 15)
            return 1;
    }
    return 0;
}

/* A folder of regular files dflash train writes only: its files and the
 * folder removed (0); -1 when it holds anything else (nothing removed). */
static int remove_draft_dir(const char *dir) {
    for (int pass = 0; pass < 2; pass++) {  /* 0: check every entry, 1: remove */
        DIR *d = opendir(dir);
        if (!d) return -1;
        struct dirent *e;
        int ok = 1;
        while (ok && (e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *p = path_join(dir, e->d_name);
            struct stat st;
            ok = p && is_own_entry(e->d_name) && lstat(p, &st) == 0 && S_ISREG(st.st_mode);
            if (ok && pass == 1) unlink(p);
            free(p);
        }
        closedir(d);
        if (!ok) return -1;
    }
    return rmdir(dir);
}

/* With the lock held: the "<dir>.partial.XXXXXX" and "<dir>.old.XXXXXX"
 * folders a killed run left (only the lock's holder makes them, so their
 * writer is gone), when they hold draft files only; one line each. */
static int remove_stale_one(void *ctx, const char *p) {
    (void)ctx;
    return remove_draft_dir(p);
}

static void remove_stale(const char *dir) { out_stale_siblings(dir, 1, remove_stale_one, NULL); }

void outdir_discard(OutDir *o) {
    if (o->tmp) {
        sigset_t old;
        out_block_signals(&old);
        out_remove_owned(o);   /* the files, then the folder (newest first) */
        out_forget(o, 0, NULL);
        out_restore_signals(&old);
    }
    if (o->locked) out_lock_release(&o->lock_fd, o->lock_fd);
    free(o->dir);
    free(o->tmp);
    for (int i = 0; i < DRAFTDIR_FILES; i++) free(o->file[i]);
    memset(o, 0, sizeof *o);
}

int outdir_prepare(OutDir *o, const char *dir) {
    memset(o, 0, sizeof *o);
    o->lock_fd = -1;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == 0 || n > 4000) { dflash_set_error("--out: expected a folder name of 1..4000 characters"); return -1; }
    o->dir = malloc(n + 1);
    char *tmp = malloc(n + 32);
    if (!o->dir || !tmp) { free(tmp); dflash_set_error("out of memory"); return -1; }
    memcpy(o->dir, dir, n);
    o->dir[n] = 0;
    struct stat st;
    if (lstat(o->dir, &st) == 0 && S_ISLNK(st.st_mode)) {
        free(tmp);
        dflash_set_error("--out %s: is a symbolic link; give the folder's own path (the draft folder is replaced "
                         "whole: the link would be replaced, not the folder it names)", o->dir);
        return -1;
    }
    if (out_lock_take(&o->lock_fd, o->dir, "--out", "the draft folder", &o->lock_fd) != 0) {
        free(tmp);
        return -1;
    }
    o->locked = 1;
    remove_stale(o->dir);
    if (lstat(o->dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            free(tmp);
            dflash_set_error("--out %s: exists and is not a folder; refusing to replace it (choose another path)", o->dir);
            return -1;
        }
        DIR *d = opendir(o->dir);
        if (!d) { free(tmp); dflash_set_error("--out %s: cannot read the folder: %s", o->dir, strerror(errno)); return -1; }
        struct dirent *e;
        int empty = 1;
        while (empty && (e = readdir(d)) != NULL) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        closedir(d);
        char bad[256];
        if (!empty && !is_marked_draft(o->dir, bad, sizeof bad)) {
            free(tmp);
            if (bad[0])
                dflash_set_error("--out %s: holds %s, which dflash train does not write; refusing to replace the "
                                 "folder (choose another path)", o->dir, bad);
            else
                dflash_set_error("--out %s: a folder not marked as written by dflash train (no %s); refusing to "
                                 "replace it (choose another path, or an empty folder)", o->dir, DRAFTDIR_MARKER);
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
    for (int i = 0; i < DRAFTDIR_FILES; i++)
        if (!(o->file[i] = path_join(o->tmp, OUT_FILES[i]))) return -1;
    return 0;
}

/* which 0: config.json, 1: model.safetensors, 2: the marker, as an OutFile
 * inside the partial folder (registered before its rename makes it a real
 * file) */
int outdir_write_file(OutDir *o, int which, const Config *c, int bos_id, int B, const TrainParam *p, int n,
                      int bf16) {
    OutFile *f = out_open(o->file[which], "--out");
    if (!f) return -1;
    if (which == 0) draftdir_write_config(out_stream(f), c, bos_id, B, bf16);
    else if (which == 2)
        fprintf(out_stream(f), "%s\nThis folder is a draft dflash train wrote (config.json, model.safetensors); a "
                               "later dflash train --out may replace it whole.\n", DRAFTDIR_MARKER_LINE);
    else if (write_safetensors(out_stream(f), p, n, bf16) != 0 && !ferror(out_stream(f))) { out_abort(f); return -1; }
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
    sigset_t sig;
    out_block_signals(&sig);
    int rc = dir_replace("--out", o->dir, o->tmp, o->exists, "the earlier draft", OUT_FILES, DRAFTDIR_FILES);
    if (rc == 0) {
        out_forget(o, 0, NULL);
        free(o->tmp);
        o->tmp = NULL;
    }
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

