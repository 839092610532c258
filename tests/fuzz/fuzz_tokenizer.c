/* tests/fuzz/fuzz_tokenizer.c - libFuzzer target: vocab.txt parsing and the
 * prompt tokenizer. The input is "<vocab.txt bytes> NUL <prompt>" (no NUL:
 * all of it is the vocab, the prompt is "a b"). Every id the tokenizer
 * returns must be a valid index. Seeds in tests/fuzz/tokenizer/. */
#include "dflash.c"
#include "formats/load.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t vlen = nul ? (size_t)(nul - data) : size;
    char *vtext = malloc(vlen + 1);  /* vocab_parse owns it from here */
    size_t plen = nul ? size - vlen - 1 : 3;
    char *prompt = malloc(plen + 1);
    if (!vtext || !prompt) { free(vtext); free(prompt); return 0; }
    memcpy(vtext, data, vlen);
    vtext[vlen] = 0;
    memcpy(prompt, nul ? (const char *)nul + 1 : "a b", plen);
    prompt[plen] = 0;
    Vocab v;
    dflash_errmsg[0] = 0;
    if (vocab_parse(&v, "vocab.txt", vtext, vlen) == 0) {
        int ids[64], n = 0;
        if (tokenize(&v, prompt, ids, 64, &n) == 0) {
            if (n < 1 || n > 64) abort();
            for (int i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= v.n) abort();
        } else if (!dflash_errmsg[0]) {
            abort();
        }
        vocab_free(&v);
    } else if (!dflash_errmsg[0]) {
        abort();
    }
    free(prompt);
    return 0;
}
