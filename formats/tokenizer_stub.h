/* PLACEHOLDER until the tokenizer (branch h-tok) is merged; removed then: stands in for h-tok's formats/tokenizer.h */
#ifndef DFLASH_TOKENIZER_H
#define DFLASH_TOKENIZER_H
#include <stddef.h>
typedef struct { int n; } Tokenizer;
int tokenizer_load(Tokenizer *t, const char *path);
void tokenizer_free(Tokenizer *t);
int tokenizer_encode_append(const Tokenizer *t, const char *text, size_t len, int **ids, size_t *n, size_t *cap);
int tokenizer_token_id(const Tokenizer *t, const char *tok);
int tokenizer_vocab_size(const Tokenizer *t);
#endif
