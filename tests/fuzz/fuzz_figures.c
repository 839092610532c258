/* tests/fuzz/fuzz_figures.c - libFuzzer target: `dflash figures` whole, on a
 * hostile trace directory. The input is split at each "@@FILE@@":
 *   manifest (trace.jsonl) @@FILE@@ vocab.txt @@FILE@@ f0.npy @@FILE@@ f1.npy ...
 * (an empty vocabulary part: no --vocab; at most FIG_PARTS .npy files; the
 * seeds' manifests name f0.npy, f1.npy, ...). They are written into a fresh
 * trace directory and figures_main runs on it, with an OUT_DIR that does not
 * exist yet. Checked: the exit status is 0 or 2; a refusal sets a message
 * and leaves no OUT_DIR; an accepted trace gives OUT_DIR with timeline.svg
 * and only timeline.svg / attn_*.svg in it, none empty; the trace directory
 * holds only what was put there (no temporary file, no figure). Links
 * dflash.c, formats/json.c, formats/load.c, trace.c, formats/files.c and formats/manifest.c. Seeds in
 * tests/fuzz/figures/ (made from a filtered trace of the walkthrough set,
 * block sizes 3 and 6, and the random set). */
#define _XOPEN_SOURCE 700
#include "explorer/figures.c"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#define FIG_PARTS 64
#define SEP "@@FILE@@"
#define SEP_LEN 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64];

/* remove every entry of dir (plain files only), then dir */
static void clear(const char *dir, int and_dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[256];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    if (and_dir) rmdir(dir);
}

/* the directory made for the inputs goes when the fuzzer exits */
static void remove_root(void) {
    char p[128];
    snprintf(p, sizeof p, "%s/t", root);
    clear(p, 1);
    snprintf(p, sizeof p, "%s/figs", root);
    clear(p, 1);
    unlink(root);
    rmdir(root);
}

static void put(const char *dir, const char *name, const uint8_t *p, size_t n) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

/* entries of dir; *bad: one that figures does not write, or an empty one */
static int entries(const char *dir, int figures_only, int *bad) {
    DIR *d = opendir(dir);
    if (!d) abort();
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0) continue;
        n++;
        if (!figures_only) continue;
        size_t l = strlen(nm);
        char p[256];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        if ((strcmp(nm, "timeline.svg") != 0 && !(l > 9 && strncmp(nm, "attn_", 5) == 0 && strcmp(nm + l - 4, ".svg") == 0)) ||
            lstat(p, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
            *bad = 1;
    }
    closedir(d);
    return n;
}

/* the next separator at or after p, or end */
static const uint8_t *next_sep(const uint8_t *p, const uint8_t *end) {
    for (; p + SEP_LEN <= end; p++)
        if (memcmp(p, SEP, SEP_LEN) == 0) return p;
    return end;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!root[0]) {
        strcpy(root, "/tmp/dflash-fuzz-figures.XXXXXX");
        if (!mkdtemp(root)) abort();
        atexit(remove_root);
        int null = open("/dev/null", O_WRONLY);  /* "wrote ..." lines */
        if (null < 0 || dup2(null, 1) < 0) abort();
        close(null);
    }
    char dir[96], figs[96], vocab[96];
    snprintf(dir, sizeof dir, "%s/t", root);
    snprintf(figs, sizeof figs, "%s/figs", root);
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", root);
    mkdir(dir, 0755);
    const uint8_t *end = data + size, *p = data;
    int part = 0, n_put = 0, has_vocab = 0;
    while (part < FIG_PARTS + 2) {
        const uint8_t *s = next_sep(p, end);
        if (part == 0) {
            put(dir, "trace.jsonl", p, (size_t)(s - p));
            n_put++;
        } else if (part == 1) {
            if (s > p) { put(root, "vocab.txt", p, (size_t)(s - p)); has_vocab = 1; }
        } else {
            char nm[32];
            snprintf(nm, sizeof nm, "f%d.npy", part - 2);
            put(dir, nm, p, (size_t)(s - p));
            n_put++;
        }
        part++;
        if (s == end) break;
        p = s + SEP_LEN;
    }
    char *argv[] = {"figures", dir, figs, "--vocab", vocab, NULL};
    dflash_errmsg[0] = 0;
    int rc = figures_main(has_vocab ? 5 : 3, argv);
    struct stat st;
    int bad = 0;
    if (rc == 2) {
        if (!dflash_errmsg[0] || stat(figs, &st) == 0) abort();
    } else if (rc == 0) {
        char tl[128];
        snprintf(tl, sizeof tl, "%s/timeline.svg", figs);
        if (stat(tl, &st) != 0 || st.st_size == 0) abort();
        if (entries(figs, 1, &bad) < 1 || bad) abort();
        clear(figs, 1);
    } else {
        abort();
    }
    if (entries(dir, 0, &bad) != n_put) abort();   /* nothing written into the trace */
    if (entries(root, 0, &bad) != 1 + has_vocab) abort();  /* nor beside OUT_DIR */
    clear(dir, 0);
    unlink(vocab);
    return 0;
}
