/* tests/fuzz/fuzz_encode.c - libFuzzer target: the encoder (tokenizer/tokenizer.c:
 * added tokens, NFC, the Split scanner, BPE) on any bytes, with the committed
 * trained tokenizer (tokenizer/tests/cases/trained.json, read once; make fuzz runs
 * from the repository root). Checks what callers rely on: invalid UTF-8 is
 * refused at the offset tok_utf8_check gives, with a message; valid text
 * encodes, every id is a token, and decoding gives the text's NFC back
 * (the trained file's normalizer; its pieces cover the text). */
#include "dflash.c"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static Tokenizer T;

static int contains(const char *s, size_t n, const char *w) {
    size_t k = strlen(w);
    for (size_t i = 0; i + k <= n; i++) if (memcmp(s + i, w, k) == 0) return 1;
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (tok_load(&T, "tokenizer/tests/cases/trained.json") != 0) {
        fprintf(stderr, "fuzz_encode: %s (run from the repository root)\n", dflash_errmsg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    IntList ids = {0};
    dflash_errmsg[0] = 0;
    size_t bad = tok_utf8_check(buf, size);
    int rc = tok_encode(&T, buf, size, 1, &ids);
    if (bad != size) {
        char want[64];
        snprintf(want, sizeof want, "invalid UTF-8 at byte %zu ", bad);
        if (rc == 0 || strncmp(dflash_errmsg, want, strlen(want)) != 0) abort();
    } else {
        if (rc != 0) abort();
        for (size_t i = 0; i < ids.n; i++) if (ids.v[i] < 0 || ids.v[i] >= T.n_ids || !T.bytes[ids.v[i]]) abort();
        char *out, *nfc;
        size_t n, m;
        if (tok_decode(&T, ids.v, ids.n, &out, &n) != 0) abort();
        /* NFC applies between added tokens: compare with the text's NFC only when it has none */
        if (!contains(buf, size, "<|endoftext|>") && !contains(buf, size, "<mask>")) {
            if (!(nfc = tok_nfc(buf, size, &m))) abort();
            if (m != n || memcmp(out, nfc, n) != 0) abort();
            free(nfc);
        }
        free(out);
    }
    int_list_free(&ids);
    free(buf);
    return 0;
}
