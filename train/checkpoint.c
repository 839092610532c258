/* train/checkpoint.c - checkpoints of the two trainers (train/checkpoint.h):
 * the stop flag of SIGINT/SIGTERM, folders written whole under a lock,
 * safetensors of the build's precision read back exactly, and
 * trainer_state.json's fields. What goes into a checkpoint, and what a
 * resume must agree on, is each command's (train/train_cli.c,
 * train/train_target.c). */
#include "train/checkpoint.h"
#include "train/draftdir.h"
#include "formats/files.h"
#include "formats/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ===========================================================================
 * SIGINT / SIGTERM during the steps: finish the step, write a checkpoint
 * ======================================================================== */

volatile sig_atomic_t ck_stop_signal = 0;
static void ck_on_stop(int sig) { ck_stop_signal = sig; }

void ck_signals_catch(CkSignals *s) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ck_on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &s->old_int);
    sigaction(SIGTERM, &sa, &s->old_term);
    s->on = 1;
}

void ck_signals_restore(CkSignals *s) {
    if (!s->on) return;
    sigaction(SIGINT, &s->old_int, NULL);
    sigaction(SIGTERM, &s->old_term, NULL);
    s->on = 0;
}

/* ===========================================================================
 * A folder written whole
 * ======================================================================== */

void ckdir_init(CkDir *o) {
    memset(o, 0, sizeof *o);
    o->lock_fd = -1;
}

void ckdir_discard(CkDir *o) {
    if (o->tmp) {
        sigset_t old;
        out_block_signals(&old);
        out_remove_owned(o);
        out_forget(o, 0, NULL);
        out_restore_signals(&old);
    }
    free(o->tmp);
    o->tmp = NULL;
}

void ckdir_release(CkDir *o) {
    ckdir_discard(o);
    if (o->lock_fd >= 0 && o->lock) {
        sigset_t old;
        out_block_signals(&old);
        unlink(o->lock);
        close(o->lock_fd);
        out_forget(o, 'l', NULL);
        out_restore_signals(&old);
    }
    free(o->dir);
    free(o->lock);
    ckdir_init(o);
}

/* The folder's lock ("<dir>.lock", an fcntl write lock held until the end:
 * one run at a time writes it), and the check that an existing folder holds
 * nothing but our files. */
/* dir/CKDIR_MARKER's first line is "<cmd> folder" */
static int has_marker(const char *dir, const char *cmd) {
    char *m = path_join(dir, CKDIR_MARKER), *text = NULL, want[128];
    size_t len = 0;
    snprintf(want, sizeof want, "%s folder\n", cmd);
    int ok = m && file_read_max(m, 4096, &text, &len) == 0 && len >= strlen(want) &&
             memcmp(text, want, strlen(want)) == 0;
    free(m);
    free(text);
    return ok;
}

int ckdir_open(CkDir *o, const char *dir, const char *label, const char *cmd, const char *const *files, int n_files) {
    ckdir_init(o);
    if (n_files < 1 || n_files >= (int)(sizeof o->names / sizeof o->names[0])) {
        dflash_set_error("%s: %d files in a folder (internal)", label, n_files);
        return -1;
    }
    for (int k = 0; k < n_files; k++) o->names[k] = files[k];
    o->names[n_files] = CKDIR_MARKER;
    o->cmd = cmd, o->label = label, o->files = o->names, o->n_files = n_files + 1;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == 0 || n > 4000) { dflash_set_error("%s: expected a folder name of 1..4000 characters", label); return -1; }
    if (!(o->dir = malloc(n + 1))) { dflash_set_error("out of memory"); return -1; }
    memcpy(o->dir, dir, n);
    o->dir[n] = 0;
    if (!(o->lock = str_cat(o->dir, ".lock"))) return -1;
    sigset_t old;
    out_block_signals(&old);
    int fd = -1, err = 0, busy = 0;
    if (out_register(o, 'l', o->lock) != 0) err = ENOMEM;
    else if ((fd = open(o->lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666)) < 0) err = errno;
    else {
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        if (fcntl(fd, F_SETLK, &fl) != 0) busy = errno == EACCES || errno == EAGAIN, err = busy ? 0 : errno;
    }
    if ((err || busy) && err != ENOMEM) out_unregister_last();
    if (err || busy) { if (fd >= 0) close(fd); fd = -1; }
    out_restore_signals(&old);
    if (busy) {
        dflash_set_error("%s %s: another run is writing it (it holds %s); wait for it or choose another folder",
                         label, o->dir, o->lock);
        return -1;
    }
    if (err == ENOENT) {
        dflash_set_error("%s %s: its parent folder does not exist (create it first)", label, o->dir);
        return -1;
    }
    if (err) { dflash_set_error("%s %s: cannot create the lock %s: %s", label, o->dir, o->lock, strerror(err)); return -1; }
    o->lock_fd = fd;
    struct stat st;
    if (lstat(o->dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            dflash_set_error("%s %s: exists and is not a folder; refusing to replace it (choose another path)", label,
                             o->dir);
            return -1;
        }
        DIR *d = opendir(o->dir);
        if (!d) { dflash_set_error("%s %s: cannot read the folder: %s", label, o->dir, strerror(errno)); return -1; }
        struct dirent *e;
        char bad[256] = "";
        int entries = 0;
        while (!bad[0] && (e = readdir(d)) != NULL) {
            int ours = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
            entries += !ours;
            for (int k = 0; k < o->n_files; k++) ours |= strcmp(e->d_name, o->files[k]) == 0;
            if (!ours) snprintf(bad, sizeof bad, "%s", e->d_name);
        }
        closedir(d);
        if (!bad[0] && entries > 0 && !has_marker(o->dir, cmd)) {
            dflash_set_error("%s %s: holds no %s saying \"%s folder\" (a folder %s did not write); refusing to "
                             "replace it (choose another path, or an empty folder)", label, o->dir, CKDIR_MARKER, cmd,
                             cmd);
            return -1;
        }
        if (bad[0]) {
            dflash_set_error("%s %s: holds %s, which %s does not write; refusing to replace the folder (choose "
                             "another path)", label, o->dir, bad, o->cmd);
            return -1;
        }
        o->exists = 1;
    } else if (errno != ENOENT) {
        dflash_set_error("%s %s: %s", label, o->dir, strerror(errno));
        return -1;
    }
    return 0;
}

int ckdir_begin(CkDir *o, const char *label) {
    size_t n = strlen(o->dir);
    char *tmp = malloc(n + 32);
    if (!tmp) { dflash_set_error("out of memory"); return -1; }
    snprintf(tmp, n + 32, "%s.partial.XXXXXX", o->dir);
    sigset_t old;
    out_block_signals(&old);
    int made = mkdtemp(tmp) != NULL, err = errno;
    if (made && out_register(o, 'd', tmp) != 0) { rmdir(tmp); made = 0; err = ENOMEM; }
    out_restore_signals(&old);
    if (!made) {
        dflash_set_error("%s %s: cannot create %s: %s", label, o->dir, tmp, strerror(err));
        free(tmp);
        return -1;
    }
    mode_t mask = file_umask();
    chmod(tmp, 0777 & ~mask);
    o->tmp = tmp;
    char text[256];
    int n_text = snprintf(text, sizeof text, "%s folder\nWritten by %s; a later run of it may replace this folder "
                          "whole.\n", o->cmd, o->cmd);
    return ckdir_write_text(o, o->n_files - 1, text, (size_t)n_text);
}

OutFile *ckdir_file(CkDir *o, int which, char **path_out) {
    char *p = path_join(o->tmp, o->files[which]);
    if (!p) return NULL;
    OutFile *f = out_open(p, o->label);
    if (!f) { free(p); return NULL; }
    *path_out = p;
    return f;
}

int ckdir_file_done(CkDir *o, OutFile *f, char *path) {
    sigset_t old;
    out_block_signals(&old);
    int reg = out_register(o, 'f', path);
    out_restore_signals(&old);
    free(path);
    if (reg != 0) { out_abort(f); dflash_set_error("out of memory"); return -1; }
    return out_commit(f);
}

int ckdir_write_text(CkDir *o, int which, const char *text, size_t len) {
    char *p;
    OutFile *f = ckdir_file(o, which, &p);
    if (!f) return -1;
    fwrite(text, 1, len, out_stream(f));
    return ckdir_file_done(o, f, p);
}

/* rename the partial folder onto dir (an earlier one moved aside first and
 * removed after), signals blocked throughout */
int ckdir_commit(CkDir *o, const char *label) {
    sigset_t sig;
    out_block_signals(&sig);
    struct stat st;
    o->exists = lstat(o->dir, &st) == 0;
    int rc = dir_replace(label, o->dir, o->tmp, o->exists, "the earlier folder", o->files, o->n_files);
    if (rc == 0) {
        out_forget(o, 'f', NULL);
        out_forget(o, 'd', NULL);
        free(o->tmp);
        o->tmp = NULL;
    }
    out_restore_signals(&sig);
    return rc;
}

/* ===========================================================================
 * safetensors
 * ======================================================================== */

int ck_write_safetensors(FILE *f, const TrainParam *const *sets, const char *const *prefix, int n_sets, int n,
                         const char *dtype) {
    return st_write_params(f, sets, prefix, n_sets, n, dtype, 8);
}

int ck_read_safetensors(const char *path, TrainParam *p, int n, const char *prefix) {
    char *bytes = NULL;
    size_t len = 0;
    Json h;
    if (file_read_all(path, &bytes, &len) != 0) return -1;
    uint64_t hl = 0;
    for (int b = 0; b < 8 && len >= 8; b++) hl |= (uint64_t)(unsigned char)bytes[b] << (8 * b);
    if (len < 8 || hl > len - 8 || json_parse(bytes + 8, (size_t)hl, path, &h) != 0) {
        if (len < 8 || hl > len - 8) dflash_set_error("%s: not a safetensors file (header length)", path);
        free(bytes);
        return -1;
    }
    const char *want = CK_REAL_DTYPE;
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        char key[TRAIN_MAX_KEY + 16];
        snprintf(key, sizeof key, "%s%s", prefix, p[i].key);
        const Json *t = json_get(&h, key), *dt = json_get(t, "dtype"), *sh = json_get(t, "shape"),
                   *off = json_get(t, "data_offsets");
        size_t numel = (size_t)p[i].shape[0] * (size_t)(p[i].ndim == 2 ? p[i].shape[1] : 1);
        int ok = t && dt && dt->type == JSON_STRING && strcmp(dt->string, want) == 0 && sh && sh->type == JSON_ARRAY &&
                 sh->n == p[i].ndim && off && off->type == JSON_ARRAY && off->n == 2;
        for (int d = 0; ok && d < p[i].ndim; d++)
            ok = sh->items[d].type == JSON_NUMBER && sh->items[d].number == (double)p[i].shape[d];
        if (ok) {
            double a = off->items[0].number, b = off->items[1].number;
            ok = a >= 0 && b - a == (double)(numel * sizeof(real)) && 8 + (double)hl + b <= (double)len;
            if (ok) memcpy(p[i].data, bytes + 8 + hl + (size_t)a, numel * sizeof(real));
        }
        if (!ok) {
            dflash_set_error("%s: tensor %s: expected %s of the model's shape (a checkpoint of this build and "
                             "config)", path, key, want);
            rc = -1;
        }
    }
    json_free(&h);
    free(bytes);
    return rc;
}

int ck_write_optimizer(CkDir *o, int which, const TrainParam *m, const TrainParam *v, int n) {
    char *p;
    OutFile *f = ckdir_file(o, which, &p);
    if (!f) return -1;
    const TrainParam *sets[2] = {m, v};
    const char *prefix[2] = {"exp_avg.", "exp_avg_sq."};
    if (ck_write_safetensors(out_stream(f), sets, prefix, 2, n, CK_REAL_DTYPE) != 0) {
        out_abort(f);
        free(p);
        return -1;
    }
    return ckdir_file_done(o, f, p);
}

int ck_read_optimizer(const char *path, TrainParam *m, TrainParam *v, int n) {
    return ck_read_safetensors(path, m, n, "exp_avg.") == 0 && ck_read_safetensors(path, v, n, "exp_avg_sq.") == 0
               ? 0 : -1;
}

int ck_read_weights(const char *dir, TrainParam *params, TrainParam *m, TrainParam *v, int n) {
    char *mp = path_join(dir, "model.safetensors"), *op = path_join(dir, "optimizer.safetensors");
    int rc = mp && op && ck_read_safetensors(mp, params, n, "") == 0 && ck_read_optimizer(op, m, v, n) == 0 ? 0 : -1;
    if (!mp || !op) dflash_set_error("out of memory");
    free(mp);
    free(op);
    return rc;
}

/* ===========================================================================
 * trainer_state.json
 * ======================================================================== */

void ck_state_write(FILE *f, const char *format, const CkField *fields, int n, const void *base) {
    const char *b = base;
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"real\": \"%s\"", format, REAL_NAME);
    for (int k = 0; k < n; k++) {
        const void *p = b + fields[k].off;
        fprintf(f, ",\n  \"%s\": ", fields[k].key);
        switch (fields[k].kind) {
        case CK_LONG: fprintf(f, "%ld", *(const long *)p); break;
        case CK_SIZE: fprintf(f, "%zu", *(const size_t *)p); break;
        case CK_INT: fprintf(f, "%d", *(const int *)p); break;
        case CK_U64:
        case CK_HASH: fprintf(f, "\"%llu\"", (unsigned long long)*(const uint64_t *)p); break;
        case CK_REAL: {
            char num[40];
            json_number(num, sizeof num, *(const double *)p);
            fputs(num, f);
            break;
        }
        }
    }
    fputs("\n}\n", f);
}

int ck_state_read(const char *path, const char *format, const char *what, const CkField *fields, int n, void *base) {
    char *text = NULL, *b = base;
    size_t len = 0;
    Json j;
    if (file_read_all(path, &text, &len) != 0) return -1;
    int rc = json_parse(text, len, path, &j);
    free(text);
    if (rc != 0) return -1;
    rc = -1;
    const Json *fmt = json_get(&j, "format"), *re = json_get(&j, "real");
    if (!fmt || fmt->type != JSON_STRING || strcmp(fmt->string, format) != 0) {
        dflash_set_error("%s: not a %s checkpoint (\"format\")", path, what);
        goto done;
    }
    if (!re || re->type != JSON_STRING || strcmp(re->string, REAL_NAME) != 0) {
        dflash_set_error("%s: a checkpoint of the %s build; this is the %s build", path,
                         re && re->type == JSON_STRING ? re->string : "?", REAL_NAME);
        goto done;
    }
    for (int k = 0; k < n; k++) {
        const Json *x = json_get(&j, fields[k].key);
        void *p = b + fields[k].off;
        CkKind kind = fields[k].kind;
        if (kind == CK_HASH && !x) {
            *(uint64_t *)p = 0;
            continue;
        }
        if (kind == CK_U64 || kind == CK_HASH) {
            char *end = NULL;
            errno = 0;
            unsigned long long u = x && x->type == JSON_STRING ? strtoull(x->string, &end, 10) : 0;
            if (!x || x->type != JSON_STRING || !x->string[0] || *end || errno || x->string[0] == '-') {
                dflash_set_error("%s: \"%s\": expected a decimal string (a 64-bit unsigned integer)", path,
                                 fields[k].key);
                goto done;
            }
            *(uint64_t *)p = (uint64_t)u;
            continue;
        }
        if (!x || x->type != JSON_NUMBER || (kind != CK_REAL && (!x->is_integer || x->integer < 0))) {
            dflash_set_error("%s: \"%s\": expected %s", path, fields[k].key,
                             kind == CK_REAL ? "a number" : "an integer >= 0");
            goto done;
        }
        if (kind == CK_REAL) *(double *)p = x->number;
        else if (kind == CK_LONG) *(long *)p = (long)x->integer;
        else if (kind == CK_SIZE) *(size_t *)p = (size_t)x->integer;
        else *(int *)p = (int)x->integer;
    }
    rc = 0;
done:
    json_free(&j);
    return rc;
}

const char *ck_disagree(const CkField *fields, int n, const void *a, const void *b) {
    for (int k = 0; k < n; k++) {
        if (!fields[k].flag) continue;
        const char *x = (const char *)a + fields[k].off, *y = (const char *)b + fields[k].off;
        int same;
        switch (fields[k].kind) {
        case CK_LONG: same = *(const long *)x == *(const long *)y; break;
        case CK_SIZE: same = *(const size_t *)x == *(const size_t *)y; break;
        case CK_INT: same = *(const int *)x == *(const int *)y; break;
        case CK_U64: same = *(const uint64_t *)x == *(const uint64_t *)y; break;
        case CK_HASH: same = *(const uint64_t *)x == *(const uint64_t *)y || !*(const uint64_t *)x; break;
        default: same = *(const double *)x == *(const double *)y; break;
        }
        if (!same) return fields[k].flag;
    }
    return NULL;
}
