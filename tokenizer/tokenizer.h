/* tokenizer/tokenizer.h - a byte-level BPE tokenizer read from a Hugging Face
 * tokenizer.json, giving the ids the `tokenizers` library gives on Qwen2/3
 * and Llama-3/3.1 files (tokenizer/tokenizer.c; NOTES.md, "Tokenizer").
 *
 * Supported (anything else is refused, naming the field and its value):
 *   model          BPE (merges as "a b" strings or [a, b] pairs; ignore_merges;
 *                  no dropout, unk_token, byte_fallback, prefix or suffix)
 *   normalizer     null or NFC
 *   pre_tokenizer  Sequence [Split (the Qwen2/3 or Llama-3 regex, Isolated),
 *                  ByteLevel (no prefix space, no regex)]
 *   post_processor null, ByteLevel, TemplateProcessing (special tokens
 *                  around $A, e.g. Llama-3's BOS) or a Sequence of those
 *   decoder        null or ByteLevel
 *   added_tokens   matched in the text before anything else (leftmost, longest)
 *   model.vocab    byte-level strings; a byte without a token (the toy sets'
 *                  64 words) refuses the texts that need it, at tok_encode
 *
 *   Tokenizer t;
 *   if (tok_load(&t, "tokenizer.json") != 0) ... dflash_errmsg
 *   IntList ids = {0};
 *   tok_encode(&t, text, len, 1, &ids);      1: add the post-processor's tokens
 *   tok_decode(&t, ids.v, ids.n, &bytes, &n);
 *   int_list_free(&ids); tok_free(&t);
 */
#ifndef DFLASH_TOKENIZER_H
#define DFLASH_TOKENIZER_H

#include <stddef.h>

typedef struct { int *v; size_t n, cap; } IntList;
int  int_list_push(IntList *l, int x);   /* -1: out of memory (dflash_errmsg) */
void int_list_free(IntList *l);

typedef struct { int left, right, id; } TokMerge;          /* rank = index */
typedef struct { char *text; int len, id, special; } TokAdded;

/* Texts found in a text leftmost first, the longest there (Hugging Face's
 * LeftmostLongest, as added tokens are cut out): an Aho-Corasick automaton
 * of the texts read backwards (node 0 the root). Run from the end of a
 * text, the state at a byte names the longest of them that starts there. */
typedef struct {
    int n;                     /* nodes */
    int *edge;                 /* (n + 1) node k's children: edges edge[k] .. edge[k + 1] - 1 */
    unsigned char *byte;       /* (n - 1) an edge's byte, increasing within a node */
    int *to;                   /* (n - 1) the child it leads to */
    int *fail;                 /* (n) the longest proper suffix of the node's string that is a node */
    int *hit;                  /* (n) the longest text (its index) that is a suffix of the node's string, -1 none */
    int *len;                  /* (texts) each text's length */
    int max_len;               /* the longest text's length */
} TokMatcher;

/* the matcher of texts[0..n) (lens[k] bytes each, at least 1; the same text
 * twice: the lower index is found). 0, or -1 out of memory */
int  tok_matcher_build(TokMatcher *m, const char *const *texts, const int *lens, int n);
void tok_matcher_free(TokMatcher *m);
/* the matches in text, left to right, not overlapping: found(ctx, at, k) for
 * text k at byte at, each in O(1) amortized steps a byte. Returns found's
 * first nonzero, 0, or -1 out of memory (dflash_errmsg). */
int  tok_matcher_scan(const TokMatcher *m, const char *text, size_t len, int (*found)(void *ctx, size_t at, int k), void *ctx);

typedef struct Tokenizer {
    int n_ids;                 /* the tokenizer's size: its highest id + 1 (every id
                                  below may still be a hole: bytes NULL) */
    int cap_ids;               /* the room allocated (>= n_ids, a power of two); ids
                                  n_ids..cap_ids-1 are NULL */
    unsigned char **bytes;     /* (cap_ids) id -> the token's bytes, NULL: no such id */
    int *len;                  /* (cap_ids) */
    int *slot;                 /* bytes -> id: open addressing, slot = id + 1 */
    size_t n_slots;
    int byte_id[256];          /* the one-byte tokens */
    TokMerge *merges;          /* (n_merges), rank order */
    int *by_pair;              /* (n_merges) merge ranks sorted by (left, right) */
    int n_merges;
    TokAdded *added;           /* (n_added), longest first */
    int n_added;
    unsigned char added_first[256];  /* 1: some added token starts with this byte */
    TokMatcher added_match;    /* the added tokens' texts, index k = added[k] */
    int nfc;                   /* normalizer NFC */
    int digits;                /* \p{N}{1,digits}: 1 Qwen2/3, 3 Llama-3 */
    int ignore_merges;         /* a piece that is a token is that token */
    int prefix[8], n_prefix;   /* post-processor ids before and after the text */
    int suffix[8], n_suffix;
    int *is_added;             /* (cap_ids) 1: an added token (not byte-level) */
    char no_encode[1024];      /* tok_load_decoder: why it cannot encode ("": it can) */
} Tokenizer;

/* The two patterns (the Split pre-tokenizer's "Regex"), digits 1 and 3. */
extern const char *const TOK_QWEN2_PATTERN, *const TOK_LLAMA3_PATTERN;

int  tok_load(Tokenizer *t, const char *path);
/* tok_parse: text (len bytes) as a tokenizer.json named path */
int  tok_parse(Tokenizer *t, const char *path, const char *text, size_t len);
void tok_free(Tokenizer *t);
/* decoding only (output, whatever the file's pre-tokenizer or merges):
 * what encoding needs may be missing or unsupported, then t->no_encode
 * says why; the vocabulary and added tokens are read as tok_load reads them */
int  tok_load_decoder(Tokenizer *t, const char *path);
int  tok_parse_decoder(Tokenizer *t, const char *path, const char *text, size_t len);
/* text (len bytes, UTF-8; invalid UTF-8 refused with its byte offset) ->
 * ids appended to out. add_special: the post-processor's tokens (HF's
 * add_special_tokens). 0, or -1 with dflash_errmsg. */
int  tok_encode(const Tokenizer *t, const char *text, size_t len, int add_special, IntList *out);
/* ids -> the bytes HF's decode(ids, skip_special_tokens=False) gives before
 * its lossy UTF-8 conversion (malloc'd, *n bytes + a NUL). An id without a
 * token is refused naming it. */
int  tok_decode(const Tokenizer *t, const int *ids, size_t n_ids, char **out, size_t *n);

/* The id of the added (special) token text ("<|endoftext|>"), or -1. */
int  tok_added_id(const Tokenizer *t, const char *text);

/* tok_encode(ctx, text, len, no post-processor tokens) in the form
 * train/corpus.h's corpus_add_file calls it (ctx: the Tokenizer). */
int  tok_encode_cb(void *ctx, const char *text, size_t len, int **ids, size_t *n, size_t *cap);

/* ---- the pieces, for the trainer (tokenizer/tokenize.c) */
/* the first invalid UTF-8 byte's offset in s, or n when it is all valid */
size_t tok_utf8_check(const char *s, size_t n);
/* NFC of s (valid UTF-8): malloc'd, *out_n bytes + NUL; NULL: out of memory */
char *tok_nfc(const char *s, size_t n, size_t *out_n);
/* the Split regex's matches in s (valid UTF-8): calls piece(ctx, p, len) for
 * each, in order; they cover s. Returns the callback's first nonzero. */
int  tok_split(const char *s, size_t n, int digits, int (*piece)(void *ctx, const char *p, size_t len), void *ctx);
/* the byte-level alphabet (GPT-2's bytes_to_unicode): byte -> UTF-8 of its
 * character, 1 or 2 bytes + NUL */
void tok_byte_char(unsigned char b, char out[3]);

#endif /* DFLASH_TOKENIZER_H */
