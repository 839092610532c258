/* formats/json.h - a small strict JSON reader (RFC 8259), formats/json.c: config.json, the
 * safetensors header, tokenizer.json and the trace manifests. Defines Json
 * (one parsed value), json_parse / json_get / json_free / json_describe, and
 * utf8_seq_len (the UTF-8 check json_parse uses, for printing decoded text).
 * json_parse rejects duplicate keys, invalid UTF-8, deep nesting and
 * trailing text, naming `what` and the byte offset; -1 with dflash_errmsg.
 */
#ifndef DFLASH_JSON_H
#define DFLASH_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct Json {
    JsonType type;
    int boolean;            /* JSON_BOOL */
    double number;          /* JSON_NUMBER */
    int is_integer;         /* the number was written without fraction/exponent and fits int64 */
    long long integer;
    char *string;           /* JSON_STRING, decoded, NUL-terminated */
    int n;                  /* JSON_ARRAY / JSON_OBJECT: number of items */
    struct Json *items;     /* (n) */
    char **keys;            /* (n) JSON_OBJECT keys */
} Json;

int json_parse(const char *text, size_t len, const char *what, Json *out);
const Json *json_get(const Json *obj, const char *key);  /* NULL: absent or not an object */
void json_free(Json *j);
/* v as a JSON number: the shortest "%.{15,16,17}g" that reads back exactly
 * (1e-06 stays 1e-06, 1000000 stays 1000000) */
void json_number(char *buf, size_t size, double v);
/* obj's number at key, or dflt (obj NULL, the key absent or not a number) */
double json_number_or(const Json *obj, const char *key, double dflt);
/* a non-empty list of equal-length lists as rows x cols ints, row-major,
 * malloc'd (true/false as 1/0, a number truncated); NULL for another
 * shape or out of memory (the case files of train/lm_case, train/train_case) */
int *json_int_rows(const Json *v, int *rows, int *cols);
/* "the number 3", "a string", ...: what a value is, for error messages */
const char *json_describe(const Json *v, char *buf, size_t size);
/* the UTF-8 sequence length at s (1..4), or 0 when it is not valid UTF-8 */
int  utf8_seq_len(const unsigned char *s, size_t n);
/* SipHash-1-3 of n bytes under a key drawn once per process: for hash tables
 * whose keys come from files (a fixed hash lets a file choose keys that all
 * land in one slot). Differs from run to run: use it to place, never to order. */
uint64_t keyed_hash(const void *data, size_t n);

#endif /* DFLASH_JSON_H */
