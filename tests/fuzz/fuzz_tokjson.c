/* tests/fuzz/fuzz_tokjson.c - libFuzzer target: the tokenizer.json reader
 * (tokenizer_json_parse: its own forward-only JSON scanner, the byte-level
 * table) on whole files. The input is copied into a buffer of exactly its
 * size plus the NUL read_file adds, so AddressSanitizer catches any read
 * past it. Built by `make fuzz`; seeds in tests/fuzz/tokjson/. */
#include "../../dflash.c"
#include "../../formats/load.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    ByteVocab v;
    if (tokenizer_json_parse(&v, "tokenizer.json", buf, size) == 0) {
        /* what main relies on: every word has its length, ids below n */
        for (int i = 0; i < v.n; i++)
            if (v.words[i] && (v.lens[i] < 0 || memchr(v.words[i], 0, (size_t)v.lens[i] + 1) == NULL)) abort();
        byte_vocab_free(&v);
    } else if (!dflash_errmsg[0]) {
        abort();
    }
    dflash_errmsg[0] = 0;
    free(buf);
    return 0;
}
