/* tests/fuzz/fuzz_explore.c - libFuzzer target: `dflash explore` whole, on a
 * hostile trace directory. The input is split at its first two 0 bytes:
 *   manifest (trace.jsonl) \0 x.npy \0 vocabulary (vocab.txt or tokenizer.json)
 * (a missing part: no such file). They are written into a fresh directory
 * and explore_main runs on it, writing page.html beside it. Checked: the
 * exit status is 0 or 2; a refusal sets a message and leaves no page; an
 * accepted trace gives a page with the data, within the documented bound
 * (8 MiB of values: at most 11.2 MB of base64 plus the names), and nothing
 * else in the directory. Links dflash.c, formats/json.c, formats/load.c, trace.c, formats/files.c and
 * build/explorer_page.c. Seeds in tests/fuzz/explore/. */
#define _XOPEN_SOURCE 700   /* explorer/explore.c's realpath */
#include "explorer/explore.c"

#include <dirent.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64];

/* the directory made for the inputs goes when the fuzzer exits */
static void remove_root(void) {
    char p[128];
    static const char *const left[4] = {"t/trace.jsonl", "t/x.npy", "t/vocab", "page.html"};
    for (int k = 0; k < 4; k++) {
        snprintf(p, sizeof p, "%s/%s", root, left[k]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/t", root);
    rmdir(p);
    rmdir(root);
}

static void put(const char *name, const uint8_t *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/t/%s", root, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

static int entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) abort();
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!root[0]) {
        strcpy(root, "/tmp/dflash-fuzz-explore.XXXXXX");
        if (!mkdtemp(root)) abort();
        atexit(remove_root);
    }
    char dir[96], page[96], vocab[96];
    snprintf(dir, sizeof dir, "%s/t", root);
    snprintf(page, sizeof page, "%s/page.html", root);
    snprintf(vocab, sizeof vocab, "%s/t/vocab", root);
    mkdir(dir, 0755);
    const uint8_t *end = data + size, *z1 = memchr(data, 0, size);
    const uint8_t *z2 = z1 ? memchr(z1 + 1, 0, (size_t)(end - z1 - 1)) : NULL;
    put("trace.jsonl", data, z1 ? (size_t)(z1 - data) : size);
    if (z1) put("x.npy", z1 + 1, (size_t)((z2 ? z2 : end) - z1 - 1));
    if (z2) put("vocab", z2 + 1, (size_t)(end - z2 - 1));
    char *argv[] = {"explore", dir, page, "--vocab", vocab, NULL};
    dflash_errmsg[0] = 0;
    int rc = explore_main(z2 ? 5 : 3, argv);
    struct stat st;
    if (rc == 2) {
        if (!dflash_errmsg[0] || stat(page, &st) == 0) abort();
    } else if (rc == 0) {
        if (stat(page, &st) != 0 || (size_t)st.st_size > explorer_page_head_len + explorer_page_tail_len + (size_t)12000000)
            abort();
        unlink(page);
    } else {
        abort();
    }
    if (entries(root) != 1) abort();   /* no temporary file left beside the page */
    unlink(vocab);
    char p[128];
    snprintf(p, sizeof p, "%s/t/x.npy", root);
    unlink(p);
    snprintf(p, sizeof p, "%s/t/trace.jsonl", root);
    unlink(p);
    return 0;
}
