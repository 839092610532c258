/* train/corpus.c - text files as a token stream (train/corpus.h). */
#include "train/corpus.h"

#include <stdlib.h>
#include <string.h>

#include "dflash.h"
#include "formats/files.h"
#include "formats/json.h"

static int push_id(Corpus *c, int id) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 4096;
        int *p = realloc(c->ids, cap * sizeof(int));
        if (!p) { dflash_set_error("out of memory (the token stream)"); return -1; }
        c->ids = p, c->cap = cap;
    }
    c->ids[c->n++] = id;
    return 0;
}

/* one document: its tokens, then eot (an empty one is skipped) */
static int emit(Corpus *c, const char *path, const char *doc, size_t len, CorpusEncode enc, void *ctx, int eot) {
    if (len == 0) return 0;
    if (enc(ctx, doc, len, &c->ids, &c->n, &c->cap) != 0 || push_id(c, eot) != 0) {
        char msg[sizeof dflash_errmsg];
        memcpy(msg, dflash_errmsg, sizeof msg);
        dflash_set_error("%s: document %ld: %s", path, c->documents, msg);
        return -1;
    }
    c->documents++;
    c->bytes += len;
    return 0;
}

int corpus_add_file(Corpus *c, const char *path, CorpusEncode enc, void *ctx, int eot) {
    char *text = NULL;
    size_t len = 0;
    if (file_read_all(path, &text, &len) != 0) return -1;
    for (size_t i = 0; i < len;) {
        int k = utf8_seq_len((const unsigned char *)text + i, len - i);
        if (k == 0 || text[i] == 0) {
            dflash_set_error("%s: byte %zu: %s; expected UTF-8 text", path, i,
                             text[i] == 0 ? "a NUL byte" : "not valid UTF-8");
            free(text);
            return -1;
        }
        i += (size_t)k;
    }
    size_t doc = 0, i = 0;   /* doc: where the current document starts */
    int rc = 0;
    while (rc == 0 && i < len) {
        size_t end = i;
        while (end < len && text[end] != '\n') end++;
        size_t next = end < len ? end + 1 : len;
        if (end - i == 1 && text[i] == '%') {   /* a separator line ends text[doc, i) */
            rc = emit(c, path, text + doc, i - doc, enc, ctx, eot);
            doc = next;
        }
        i = next;
    }
    if (rc == 0) rc = emit(c, path, text + doc, len - doc, enc, ctx, eot);
    free(text);
    return rc;
}

void corpus_free(Corpus *c) {
    free(c->ids);
    memset(c, 0, sizeof *c);
}

size_t corpus_windows(const Corpus *c, int T) {
    if (T < 2 || c->n < (size_t)T) return 0;
    return (c->n - (size_t)T) / (size_t)(T - 1) + 1;
}
