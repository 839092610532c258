/* cli/replay.c - `dflash --replay DIR`: another run's token decisions, read from
 * its trace (cli/replay.h says what is read and checked; TRACE.md "Replay" says
 * what it is for). The following is not in dflash.c: build/dflash-replay is
 * ./dflash with cli/replay.diff, a patch of dflash.c (built as the pitfalls
 * are, tools/pitfall.sh), whose dflash_generate, with GenParams.replay set,
 * computes and traces every tensor as usual but goes on, round after round,
 * with the other run's first token, blocks and kept lengths. `./dflash
 * --replay` runs that program (replay_exec).
 */
#include "cli/replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/files.h"
#include "formats/manifest.h"

/* The values of DIR's tensor `name` as int64, with n values; 1 when the
 * trace has no such name, 0 read, -1 error. */
static int read_ids(const char *dir, const Manifest *m, const char *name, NpyValues *v) {
    int k = namemap_get(&m->index, name);
    if (k < 0) return 1;
    char *path = path_join(dir, m->files.s[k]);
    if (!path) return -1;
    /* the header against the manifest's dtype and shape (formats/manifest.c, as diff, explore, figures) */
    NpyArray h;
    int rc = npy_open(path, &h) == 0 && manifest_check_npy(m, k, path, &h) == 0 ? 0 : -1;
    if (rc != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("--replay: %s", msg);
    }
    if (rc == 0) rc = npy_read_values(path, v);
    if (rc == 0 && !v->is_int) {
        dflash_set_error("--replay: %s: expected integer ids (the contract's int64), got %s", path, v->descr);
        npy_values_free(v);
        rc = -1;
    }
    free(path);
    return rc;
}

/* name must hold `want` values (want_ndim axes: 0 for a 0-d scalar, which may
 * also be written as shape [1]), each in lo..hi. */
static int check_ids(const char *dir, const char *name, const NpyValues *v, size_t want, int want_ndim, int64_t lo,
                     int64_t hi) {
    if (v->n != want || (v->ndim != want_ndim && !(want_ndim == 0 && v->ndim == 1))) {
        dflash_set_error("--replay: %s/%s: expected %zu value%s (%s), got %zu in %d axes", dir, name, want,
                         want == 1 ? "" : "s", want_ndim ? "1 axis" : "0-d", v->n, v->ndim);
        return -1;
    }
    for (size_t i = 0; i < v->n; i++)
        if (v->i[i] < lo || v->i[i] > hi) {
            dflash_set_error("--replay: %s/%s: value %zu is %lld, expected %lld..%lld", dir, name, i,
                             (long long)v->i[i], (long long)lo, (long long)hi);
            return -1;
        }
    return 0;
}

void replay_free(ReplayTrace *t) {
    free(t->prompt);
    free(t->block);
    free(t->acc);
    free(t->bonus);
    memset(t, 0, sizeof *t);
}

int replay_load(const char *dir, int vocab_size, ReplayTrace *t) {
    memset(t, 0, sizeof *t);
    Manifest m;
    int mr = manifest_load(&m, dir, 1);
    if (mr != 0) {
        if (mr == 1) dflash_set_error("--replay: %s: no trace.jsonl (or names.json): not a trace directory", dir);
        return -1;
    }
    int rc = -1, cap = 0;
    char name[64];
    NpyValues v = {0};
    int64_t V1 = vocab_size - 1;

    /* the prompt and the first token */
    int got = read_ids(dir, &m, "input_ids", &v);
    if (got == 1) got = read_ids(dir, &m, "prefill.input_ids", &v);
    if (got == 1) dflash_set_error("--replay: %s: no input_ids (nor prefill.input_ids): the prompt is needed", dir);
    if (got != 0) goto done;
    if (v.n < 1 || check_ids(dir, "input_ids", &v, v.n, 1, 0, V1) != 0) {
        if (v.n < 1) dflash_set_error("--replay: %s/input_ids: empty (the prompt needs a token)", dir);
        goto done;
    }
    t->n_prompt = (int)v.n;
    t->prompt = malloc(sizeof(int) * v.n);
    if (!t->prompt) { dflash_set_error("out of memory"); goto done; }
    for (size_t i = 0; i < v.n; i++) t->prompt[i] = (int)v.i[i];
    npy_values_free(&v);
    got = read_ids(dir, &m, "prefill.sampled", &v);
    if (got == 1) dflash_set_error("--replay: %s: no prefill.sampled (the first new token)", dir);
    if (got != 0 || check_ids(dir, "prefill.sampled", &v, 1, 1, 0, V1) != 0) goto done;
    t->r.first = (int)v.i[0];
    npy_values_free(&v);

    /* the rounds, while verify{r}.input_ids exists */
    int anchor = t->r.first;  /* the token the next block must start with */
    for (int r = 1;; r++) {
        snprintf(name, sizeof name, "verify%d.input_ids", r);
        got = read_ids(dir, &m, name, &v);
        if (got == 1) break;
        if (got != 0) goto done;
        if (r == 1) {
            if (v.n < 1 || v.n > DFLASH_MAX_BLOCK) {
                dflash_set_error("--replay: %s/%s: %zu ids, expected a block of 1..%d", dir, name, v.n, DFLASH_MAX_BLOCK);
                goto done;
            }
            t->B = (int)v.n;
        }
        if (check_ids(dir, name, &v, (size_t)t->B, 1, 0, V1) != 0) goto done;
        if (v.i[0] != anchor) {
            dflash_set_error("--replay: %s/%s: the block starts with %lld, but the run had reached %d (%s): the trace "
                             "is not one run's", dir, name, (long long)v.i[0], anchor,
                             r == 1 ? "prefill.sampled" : "the previous round's bonus token");
            goto done;
        }
        if (r > cap) {
            cap = cap ? 2 * cap : 16;
            int *nb = realloc(t->block, sizeof(int) * (size_t)cap * (size_t)t->B);
            if (nb) t->block = nb;
            int *na = realloc(t->acc, sizeof(int) * (size_t)cap);
            if (na) t->acc = na;
            int *nn = realloc(t->bonus, sizeof(int) * (size_t)cap);
            if (nn) t->bonus = nn;
            if (!nb || !na || !nn) { dflash_set_error("out of memory"); goto done; }
        }
        for (int i = 0; i < t->B; i++) t->block[(size_t)(r - 1) * t->B + i] = (int)v.i[i];
        npy_values_free(&v);

        snprintf(name, sizeof name, "verify%d.acceptance_length", r);
        got = read_ids(dir, &m, name, &v);
        if (got == 1) dflash_set_error("--replay: %s: verify%d.input_ids but no %s", dir, r, name);
        if (got != 0 || check_ids(dir, name, &v, 1, 0, 0, t->B - 1) != 0) goto done;
        int acc = (int)v.i[0];
        npy_values_free(&v);
        snprintf(name, sizeof name, "verify%d.sampled", r);
        got = read_ids(dir, &m, name, &v);
        if (got == 1) dflash_set_error("--replay: %s: verify%d.input_ids but no %s", dir, r, name);
        if (got != 0 || check_ids(dir, name, &v, (size_t)t->B, 1, 0, V1) != 0) goto done;
        t->acc[r - 1] = acc;
        t->bonus[r - 1] = anchor = (int)v.i[acc];
        npy_values_free(&v);
        t->r.n_rounds = r;
    }
    if (t->r.n_rounds == 0) {
        dflash_set_error("--replay: %s: no verify1.input_ids: the trace has no round to follow", dir);
        goto done;
    }
    t->r.block = t->block;
    t->r.acc = t->acc;
    t->r.bonus = t->bonus;
    rc = 0;
done:
    npy_values_free(&v);
    manifest_free(&m);
    if (rc != 0) replay_free(t);
    return rc;
}

/* The program that replays: this one when its name ends in "-replay"
 * (build/dflash-replay), else DIR/build/NAME-replay beside this program
 * DIR/NAME (the running executable, /proc/self/exe, else argv[0]), which
 * replaces this process. Returns 0 in the replay program, -1 (dflash_errmsg)
 * when the other cannot be run. */
int replay_exec(char **argv) {
    char self[4096], prog[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) self[len] = 0;
    else snprintf(self, sizeof self, "%s", argv[0]);
    const char *slash = strrchr(self, '/'), *name = slash ? slash + 1 : self;
    size_t nl = strlen(name);
    if (nl >= 7 && strcmp(name + nl - 7, "-replay") == 0) return 0;
    snprintf(prog, sizeof prog, "%.*sbuild/%s-replay", slash ? (int)(slash - self + 1) : 0, self, name);
    char *old = argv[0];
    argv[0] = prog;
    execv(prog, argv);
    argv[0] = old;
    dflash_set_error("--replay: cannot run %s (%s), the replay program (%s with cli/replay.diff; `make` builds "
                     "build/dflash-replay for ./dflash)", prog, strerror(errno), name);
    return -1;
}
