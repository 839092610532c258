/* formats/load.h - the files a run reads (formats/load.c): config.json, model.safetensors
 * (validated, then mapped; shards, BF16/F16, tied embeddings), vocab.txt
 * and its word-level tokenizer, tokenizer.json (byte-level BPE, for output),
 * the default stop ids. Defines Vocab, ByteVocab and their loaders, and
 * model_load / model_free / check_pair / check_vocab / stop_ids_default.
 * Each returns 0, or -1 with a one-line dflash_errmsg naming the file, the
 * field, what was expected and what was found.
 */
#ifndef DFLASH_LOAD_H
#define DFLASH_LOAD_H

#include <stddef.h>

#include "dflash.h"

#include <stdio.h>

/* Word-level vocabulary: line number in vocab.txt = token id. */
typedef struct {
    int n;
    char **words;  /* (n) */
    char *text;    /* storage for the words */
} Vocab;

/* A Hugging Face tokenizer.json's vocabulary (byte-level BPE, e.g. Qwen's),
 * for decoding output only: words[id] is the token's bytes (lens[id] of
 * them, then a NUL; NULL: no token has that id). */
typedef struct {
    int n;
    char **words;  /* (n) */
    int *lens;     /* (n) */
    char *text;    /* storage for the words */
} ByteVocab;

int  model_load(Model *m, const char *dir, int expect_draft);
void model_free(Model *m);
/* config.json alone (no weights): `dflash train --draft-config` */
int  config_load(Config *c, const char *path, int expect_draft);
/* The weight file mapped at addr (model_load maps them; F32 tensors are
 * used in place), or NULL: for main's SIGBUS handler, which names the file
 * that shrank under the run. Async-signal-safe. */
const char *load_mapped_file(const void *addr);
int  check_pair(const Model *target, const Model *draft);
/* vocab.txt (read from path) against the configs: vocab_size tokens, and the
 * draft's mask_token_id must be the id of "<mask>" (draft may be NULL). */
int  check_vocab(const Vocab *v, const char *path, const Model *target, const Model *draft);
/* The default stop ids: the target folder's generation_config.json
 * eos_token_id, else its config.json's (n = 0: neither has one). */
int  stop_ids_default(const char *target_dir, const Model *target, int *ids, int *n, char *from, size_t from_size);
int  vocab_load(Vocab *v, const char *path);
/* tokenizer.json (byte-level BPE, e.g. Qwen's): ids -> bytes, for output */
int  tokenizer_json_load(ByteVocab *v, const char *path);
/* the same from a tokenizer tokenizer/tokenizer.c read (main keeps it to encode --prompt) */
struct Tokenizer;
int  byte_vocab_from(ByteVocab *v, const struct Tokenizer *t, const char *path);
void byte_vocab_free(ByteVocab *v);
void vocab_free(Vocab *v);
int  vocab_find(const Vocab *v, const char *word);
/* Split on whitespace; "." is its own token. ids gets at most cap ids. */
int  tokenize(const Vocab *v, const char *text, int *ids, int cap, int *n_ids);

/* config.json's "rope_scaling" line as the trainers write it: null, or
 * Llama 3.1's llama3 object (the fields formats/load.c reads) */
void config_write_rope_scaling(FILE *f, const Config *c);

#endif /* DFLASH_LOAD_H */
