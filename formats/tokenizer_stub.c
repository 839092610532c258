/* PLACEHOLDER until the tokenizer (branch h-tok) is merged; removed then: bytes as ids, <|endoftext|> = 256 */
#include "formats/tokenizer_stub.h"
#include <stdlib.h>
#include <string.h>
int tokenizer_load(Tokenizer *t, const char *path) { (void)path; t->n = 258; return 0; }
void tokenizer_free(Tokenizer *t) { (void)t; }
int tokenizer_encode_append(const Tokenizer *t, const char *text, size_t len, int **ids, size_t *n, size_t *cap) {
    (void)t;
    for (size_t i = 0; i < len; i++) {
        if (*n == *cap) { *cap = *cap ? 2 * *cap : 4096; *ids = realloc(*ids, *cap * sizeof(int)); }
        (*ids)[(*n)++] = (unsigned char)text[i];
    }
    return 0;
}
int tokenizer_token_id(const Tokenizer *t, const char *tok) { (void)t; return strcmp(tok, "<|endoftext|>") == 0 ? 256 : -1; }
int tokenizer_vocab_size(const Tokenizer *t) { return t->n; }
