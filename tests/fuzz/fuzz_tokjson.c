/* tests/fuzz/fuzz_tokjson.c - libFuzzer target: the tokenizer.json reader
 * (tokenizer/tokenizer.c over formats/json.c) on whole files, both ways it is
 * used: tok_parse (to encode: every table checked) and tok_parse_decoder +
 * byte_vocab_from (what main and explore decode output with). A file that
 * loads to encode must encode and decode a short text, or refuse it with a
 * message (a vocabulary may lack a byte the text needs). The input is copied
 * into a buffer of exactly its size, so AddressSanitizer catches any read
 * past it. Built by `make fuzz`; seeds in tests/fuzz/tokjson/. */
#include "dflash.c"
#include "formats/load.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    Tokenizer t;
    dflash_errmsg[0] = 0;
    if (tok_parse(&t, "tokenizer.json", buf, size) == 0) {
        IntList ids = {0};
        char *out;
        size_t n;
        static const char text[] = "Hello, world! 123 \xc3\xa9";
        dflash_errmsg[0] = 0;
        if (tok_encode(&t, text, sizeof text - 1, 1, &ids) != 0) {
            if (!dflash_errmsg[0]) abort();   /* refused, and says why */
        } else {
            for (size_t i = 0; i < ids.n; i++) if (ids.v[i] < 0 || ids.v[i] >= t.n_ids || !t.bytes[ids.v[i]]) abort();
            if (tok_decode(&t, ids.v, ids.n, &out, &n) != 0) abort();
            free(out);
        }
        int_list_free(&ids);
        tok_free(&t);
    } else if (!dflash_errmsg[0]) {
        abort();
    }
    dflash_errmsg[0] = 0;
    if (tok_parse_decoder(&t, "tokenizer.json", buf, size) == 0) {
        ByteVocab v;
        if (byte_vocab_from(&v, &t, "tokenizer.json") == 0) {
            for (int i = 0; i < v.n; i++)
                if (v.words[i] && (v.lens[i] < 0 || memchr(v.words[i], 0, (size_t)v.lens[i] + 1) == NULL)) abort();
            byte_vocab_free(&v);
        }
        tok_free(&t);
    } else if (!dflash_errmsg[0]) {
        abort();
    }
    dflash_errmsg[0] = 0;
    free(buf);
    return 0;
}
