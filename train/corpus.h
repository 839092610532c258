/* train/corpus.h - text files as a token stream for next-token training
 * and evaluation (train/corpus.c): `dflash train-target --data/--heldout`
 * and eval/ngram.c read text through it, so the model and the n-gram
 * baselines see the same tokens.
 *
 * The format of a text file: documents separated by lines that are exactly
 * "%" (the BSD fortune file format, which make learned-data writes); a file
 * without such a line is one document. A document's text is its lines, each
 * with its "\n" (a last line without one keeps none); empty documents (no
 * bytes) are skipped.
 *
 * The stream: the documents of every file in the order given, each one's
 * tokens followed by the end-of-text id (<|endoftext|>):
 *     doc0 EOT doc1 EOT ... docN EOT
 * Training windows (corpus_windows): window k holds stream tokens
 * k*(T-1) .. k*(T-1)+T-1, so consecutive windows share one token and every
 * next-token pair of the stream is in exactly one window; the tokens after
 * the last whole window (fewer than T-1 pairs) are in none.
 */
#ifndef DFLASH_CORPUS_H
#define DFLASH_CORPUS_H

#include <stddef.h>

/* A tokenizer as the corpus sees it: encode len bytes of text, appending
 * the ids to *ids (growing it with realloc; *n ids, *cap room). 0, or -1
 * with dflash_errmsg. */
typedef int (*CorpusEncode)(void *ctx, const char *text, size_t len, int **ids, size_t *n, size_t *cap);

typedef struct {
    int *ids;          /* (n) the stream */
    size_t n, cap;
    long documents;    /* documents read */
    size_t bytes;      /* bytes of document text tokenized (the "%" lines excluded) */
} Corpus;

/* Append the documents of the text file at path (eot appended after each).
 * Refuses (one line naming the file) a file that is not valid UTF-8 or
 * holds a NUL byte. */
int  corpus_add_file(Corpus *c, const char *path, CorpusEncode enc, void *ctx, int eot);
void corpus_free(Corpus *c);
/* The number of whole windows of T tokens (T >= 2) in the stream. */
size_t corpus_windows(const Corpus *c, int T);

#endif /* DFLASH_CORPUS_H */
