/* formats/json.c - a small strict JSON reader (RFC 8259), for config.json, the
 * safetensors header and trace.c's manifests. Declared in dflash.h.
 *
 * Rejects duplicate keys, invalid UTF-8, nesting deeper than JSON_MAX_DEPTH,
 * and anything after the value but white space. Hostile input stays cheap:
 * at most JSON_MAX_VALUES values in all, the one bound (a value's node is 64
 * bytes: at most 256 MB of nodes, plus the strings). An object may hold as
 * many keys as that allows (a real tokenizer.json's vocab has 151,643); the
 * duplicate-key check is a hash table of the object's keys under a hash
 * keyed per process (keyed_hash), so an object of n keys costs O(n) expected
 * time, not O(n^2), whatever keys a file chooses. */
#include "formats/json.h"
#include "dflash.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#define JSON_MAX_DEPTH 32
#define JSON_MAX_VALUES (1 << 22)

typedef struct {
    const char *s;
    size_t len, pos;
    const char *what;       /* file name for messages */
    long values;            /* values parsed so far (JSON_MAX_VALUES) */
} JsonParser;

void json_free(Json *j) {
    if (!j) return;
    free(j->string);
    for (int i = 0; i < j->n; i++) {
        json_free(&j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    memset(j, 0, sizeof *j);
}

static int json_fail(JsonParser *p, const char *msg) {
    dflash_set_error("%s: invalid JSON at byte %zu: %s", p->what, p->pos, msg);
    return -1;
}

static void json_skip_ws(JsonParser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* length of a valid UTF-8 sequence at s (max n bytes), or 0 if invalid */
int utf8_seq_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; }
    else return 0;
    if ((size_t)len > n) return 0;
    unsigned cp = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

static int json_parse_string(JsonParser *p, char **out) {
    p->pos++;  /* opening quote */
    size_t cap = 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return json_fail(p, "out of memory");
    for (;;) {
        if (p->pos >= p->len) { free(buf); return json_fail(p, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[p->pos];
        char tmp[4];
        int tn = 0;
        if (c == '"') { p->pos++; break; }
        if (c < 0x20) { free(buf); return json_fail(p, "control character in string"); }
        if (c == '\\') {
            if (p->pos + 1 >= p->len) { free(buf); return json_fail(p, "unterminated escape"); }
            char e = p->s[p->pos + 1];
            p->pos += 2;
            switch (e) {
            case '"': tmp[tn++] = '"'; break;
            case '\\': tmp[tn++] = '\\'; break;
            case '/': tmp[tn++] = '/'; break;
            case 'b': tmp[tn++] = '\b'; break;
            case 'f': tmp[tn++] = '\f'; break;
            case 'n': tmp[tn++] = '\n'; break;
            case 'r': tmp[tn++] = '\r'; break;
            case 't': tmp[tn++] = '\t'; break;
            case 'u': {
                unsigned cp = 0;
                for (int i = 0; i < 4; i++) {
                    int h = p->pos + i < p->len ? hexval(p->s[p->pos + i]) : -1;
                    if (h < 0) { free(buf); return json_fail(p, "bad \\u escape"); }
                    cp = cp * 16 + (unsigned)h;
                }
                p->pos += 4;
                if (cp >= 0xD800 && cp <= 0xDFFF) {  /* surrogates: only NUL-free BMP accepted */
                    free(buf);
                    return json_fail(p, "surrogate \\u escape not supported");
                }
                if (cp == 0) { free(buf); return json_fail(p, "\\u0000 in string"); }
                if (cp < 0x80) tmp[tn++] = (char)cp;
                else if (cp < 0x800) { tmp[tn++] = (char)(0xC0 | (cp >> 6)); tmp[tn++] = (char)(0x80 | (cp & 0x3F)); }
                else {
                    tmp[tn++] = (char)(0xE0 | (cp >> 12));
                    tmp[tn++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    tmp[tn++] = (char)(0x80 | (cp & 0x3F));
                }
                break;
            }
            default: free(buf); return json_fail(p, "unknown escape");
            }
        } else {
            int sl = utf8_seq_len((const unsigned char *)p->s + p->pos, p->len - p->pos);
            if (sl == 0) { free(buf); return json_fail(p, "invalid UTF-8 in string"); }
            memcpy(tmp, p->s + p->pos, (size_t)sl);
            tn = sl;
            p->pos += (size_t)sl;
        }
        if (n + (size_t)tn + 1 > cap) {
            cap = cap * 2 + (size_t)tn;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); return json_fail(p, "out of memory"); }
            buf = nb;
        }
        memcpy(buf + n, tmp, (size_t)tn);
        n += (size_t)tn;
    }
    buf[n] = 0;
    *out = buf;
    return 0;
}

static int json_parse_value(JsonParser *p, Json *out, int depth);

/* ---- keyed_hash: SipHash-1-3 (Aumasson and Bernstein) under a 128-bit key
 * drawn once per process (/dev/urandom, else the clock and addresses). The
 * keys of the tables that use it come from files; a fixed hash (FNV) lets a
 * file hold thousands of keys that share one slot, and each lookup then
 * walks them all. Nothing printed depends on the key: the tables only answer
 * "is it there" and "where is it", never list their slots. */
static uint64_t rotl64(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

#define SIPROUND(v0, v1, v2, v3)                                                \
    do {                                                                        \
        v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);           \
        v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;                                 \
        v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;                                 \
        v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);           \
    } while (0)

static uint64_t hash_key[2];
static int hash_keyed;

static void hash_init(void) {
    unsigned char b[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    uint64_t k0 = 0, k1 = 0;
    for (size_t i = 0; i < 8 && got == sizeof b; i++) k0 = k0 << 8 | b[i], k1 = k1 << 8 | b[8 + i];
    int here;  /* no /dev/urandom: the time, the clock and where the stack and the code are (ASLR) */
    k0 ^= (uint64_t)time(NULL) * 0x9E3779B97F4A7C15u ^ (uint64_t)(uintptr_t)&here;
    k1 ^= (uint64_t)clock() * 0xC2B2AE3D27D4EB4Fu ^ (uint64_t)(uintptr_t)&hash_init ^ (uint64_t)(uintptr_t)b;
    hash_key[0] = k0, hash_key[1] = k1;
    hash_keyed = 1;
}

uint64_t keyed_hash(const void *data, size_t n) {
    if (!hash_keyed) hash_init();
    const unsigned char *p = data;
    uint64_t v0 = hash_key[0] ^ 0x736f6d6570736575u, v1 = hash_key[1] ^ 0x646f72616e646f6du;
    uint64_t v2 = hash_key[0] ^ 0x6c7967656e657261u, v3 = hash_key[1] ^ 0x7465646279746573u;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m = 0;
        for (int k = 7; k >= 0; k--) m = m << 8 | p[i + (size_t)k];  /* little-endian word */
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t m = (uint64_t)n << 56;
    for (size_t k = 0; i + k < n; k++) m |= (uint64_t)p[i + k] << (8 * k);
    v3 ^= m;
    SIPROUND(v0, v1, v2, v3);
    v0 ^= m;
    v2 ^= 0xff;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- the duplicate-key check: an open-addressing table of key indices
 * (slot = index + 1, 0 = empty), at most half full, keyed_hash. */
typedef struct { int *slot; size_t size; } KeySet;

static size_t key_hash(const char *k) { return (size_t)keyed_hash(k, strlen(k)); }

/* keyset_add: keys[i] into the set; 1 if an equal key is already there,
 * -1 out of memory, 0 added. keys[0..i-1] are the set's keys. */
static int keyset_add(KeySet *ks, char **keys, int i) {
    if (2 * ((size_t)i + 1) > ks->size) {  /* grow (and rehash keys 0..i-1) */
        size_t size = ks->size ? ks->size * 2 : 16;
        int *slot = calloc(size, sizeof *slot);
        if (!slot) return -1;
        for (int k = 0; k < i; k++) {
            size_t h = key_hash(keys[k]) & (size - 1);
            while (slot[h]) h = (h + 1) & (size - 1);
            slot[h] = k + 1;
        }
        free(ks->slot);
        ks->slot = slot, ks->size = size;
    }
    size_t h = key_hash(keys[i]) & (ks->size - 1);
    for (; ks->slot[h]; h = (h + 1) & (ks->size - 1))
        if (strcmp(keys[ks->slot[h] - 1], keys[i]) == 0) return 1;
    ks->slot[h] = i + 1;
    return 0;
}

static int json_parse_number(JsonParser *p, Json *out) {
    size_t b = p->pos;
    int integer = 1;
    if (p->pos < p->len && p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->len) return json_fail(p, "bad number");
    if (p->s[p->pos] == '0') p->pos++;
    else if (p->s[p->pos] >= '1' && p->s[p->pos] <= '9')
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    else return json_fail(p, "bad number");
    if (p->pos < p->len && p->s[p->pos] == '.') {
        integer = 0;
        p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return json_fail(p, "bad fraction");
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integer = 0;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return json_fail(p, "bad exponent");
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    }
    char tok[64];
    size_t n = p->pos - b;
    if (n >= sizeof tok) return json_fail(p, "number too long");
    memcpy(tok, p->s + b, n);
    tok[n] = 0;
    out->type = JSON_NUMBER;
    out->number = strtod(tok, NULL);
    if (integer) {
        errno = 0;
        long long v = strtoll(tok, NULL, 10);
        if (errno == 0) { out->is_integer = 1; out->integer = v; }
    }
    return 0;
}

static int json_parse_items(JsonParser *p, Json *out, int depth, int object, KeySet *ks);

static int json_parse_container(JsonParser *p, Json *out, int depth, int object) {
    KeySet ks = {NULL, 0};
    int rc = json_parse_items(p, out, depth, object, &ks);
    free(ks.slot);
    return rc;
}

static int json_parse_items(JsonParser *p, Json *out, int depth, int object, KeySet *ks) {
    out->type = object ? JSON_OBJECT : JSON_ARRAY;
    p->pos++;
    int cap = 0;
    json_skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) { p->pos++; return 0; }
    for (;;) {
        if (out->n == cap) {  /* cap stays below JSON_MAX_VALUES * 2, far from INT_MAX */
            cap = cap ? cap * 2 : 8;
            Json *ni = realloc(out->items, sizeof(Json) * (size_t)cap);
            if (!ni) return json_fail(p, "out of memory");
            out->items = ni;
            if (object) {
                char **nk = realloc(out->keys, sizeof(char *) * (size_t)cap);
                if (!nk) return json_fail(p, "out of memory");
                out->keys = nk;
            }
        }
        Json *item = &out->items[out->n];
        memset(item, 0, sizeof *item);
        json_skip_ws(p);
        if (object) {
            char *key = NULL;
            if (p->pos >= p->len || p->s[p->pos] != '"') return json_fail(p, "expected a string key");
            if (json_parse_string(p, &key) != 0) return -1;
            out->keys[out->n] = key;
            int dup = keyset_add(ks, out->keys, out->n);
            if (dup != 0) {
                char msg[160];
                snprintf(msg, sizeof msg, dup < 0 ? "out of memory" : "duplicate key \"%.100s\"", key);
                free(key);
                return json_fail(p, msg);
            }
            json_skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') { out->n++; return json_fail(p, "expected ':'"); }
            p->pos++;
        }
        out->n++;  /* count it now so json_free frees a half-parsed item */
        if (json_parse_value(p, item, depth + 1) != 0) return -1;
        json_skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') { p->pos++; continue; }
        if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) { p->pos++; return 0; }
        return json_fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int json_parse_value(JsonParser *p, Json *out, int depth) {
    if (depth > JSON_MAX_DEPTH) return json_fail(p, "nested too deeply");
    if (++p->values > JSON_MAX_VALUES) return json_fail(p, "more than 4194304 values");
    json_skip_ws(p);
    if (p->pos >= p->len) return json_fail(p, "unexpected end");
    char c = p->s[p->pos];
    if (c == '{' || c == '[') return json_parse_container(p, out, depth, c == '{');
    if (c == '"') { out->type = JSON_STRING; return json_parse_string(p, &out->string); }
    if (c == '-' || (c >= '0' && c <= '9')) return json_parse_number(p, out);
    static const struct { const char *word; JsonType type; int b; } lits[] = {
        {"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
    for (int i = 0; i < 3; i++) {
        size_t wl = strlen(lits[i].word);
        if (p->len - p->pos >= wl && memcmp(p->s + p->pos, lits[i].word, wl) == 0) {
            out->type = lits[i].type;
            out->boolean = lits[i].b;
            p->pos += wl;
            return 0;
        }
    }
    return json_fail(p, "unexpected character");
}

/* json_parse: the whole text must be one JSON value. what names the source. */
int json_parse(const char *text, size_t len, const char *what, Json *out) {
    JsonParser p = {text, len, 0, what, 0};
    memset(out, 0, sizeof *out);
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)  /* Python's json refuses it too */
        return json_fail(&p, "a UTF-8 byte order mark (expected the JSON value; save the file without BOM)");
    if (json_parse_value(&p, out, 0) != 0) { json_free(out); return -1; }
    json_skip_ws(&p);
    if (p.pos != p.len) { json_free(out); return json_fail(&p, "trailing characters after the value"); }
    return 0;
}

const Json *json_get(const Json *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (int i = 0; i < obj->n; i++) if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

/* json_describe: a value as a message shows what it found ("got ..."). */
const char *json_describe(const Json *v, char *buf, size_t size) {
    switch (v->type) {
    case JSON_NULL: snprintf(buf, size, "null"); break;
    case JSON_BOOL: snprintf(buf, size, v->boolean ? "true" : "false"); break;
    case JSON_NUMBER:
        if (v->is_integer) snprintf(buf, size, "%lld", v->integer);
        else {  /* 512.0 is not an integer: show it as written, with its fraction */
            int k = snprintf(buf, size, "%.15g", v->number);
            if (k > 0 && (size_t)k + 2 < size && strspn(buf, "-0123456789") == (size_t)k) strcat(buf, ".0");
        }
        break;
    case JSON_STRING: snprintf(buf, size, "the string \"%.40s%s\"", v->string, strlen(v->string) > 40 ? "..." : ""); break;
    case JSON_ARRAY: snprintf(buf, size, "an array of %d items", v->n); break;
    case JSON_OBJECT: snprintf(buf, size, "an object"); break;
    }
    return buf;
}


double json_number_or(const Json *obj, const char *key, double dflt) {
    const Json *v = obj ? json_get(obj, key) : NULL;
    return v && v->type == JSON_NUMBER ? v->number : dflt;
}

int *json_int_rows(const Json *v, int *rows, int *cols) {
    if (!v || v->type != JSON_ARRAY || v->n < 1 || v->items[0].type != JSON_ARRAY || v->items[0].n < 1) return NULL;
    *rows = v->n;
    *cols = v->items[0].n;
    int *out = calloc((size_t)*rows * (size_t)*cols, sizeof(int));
    for (int r = 0; out && r < *rows; r++) {
        if (v->items[r].type != JSON_ARRAY || v->items[r].n != *cols) { free(out); return NULL; }
        for (int c = 0; c < *cols; c++) {
            const Json *x = &v->items[r].items[c];
            out[(size_t)r * *cols + c] = x->type == JSON_BOOL ? x->boolean : (int)x->number;
        }
    }
    return out;
}

void json_number(char *buf, size_t size, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
}
