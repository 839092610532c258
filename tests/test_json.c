/* tests/test_json.c - formats/json.c on objects with many keys: the
 * duplicate-key check must not be quadratic, not even on keys chosen to
 * collide, an object may hold far more than the old 16,384 keys, and
 * duplicates are still refused with the key and the byte offset; and
 * formats/manifest.c's name table on names chosen to collide.
 *
 * Not timed: the key comparisons json.c and manifest.c make are counted
 * (strcmp is redirected to a counter for the included files). A quadratic check makes
 * n (n - 1) / 2 of them for n distinct keys; a hashed one about 1 per key. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static long key_compares;
static int counted_strcmp(const char *a, const char *b) { key_compares++; return strcmp(a, b); }
#define strcmp counted_strcmp
#include "formats/json.c"
#include "formats/manifest.c"  /* its NameMap: trace.jsonl's names, `dflash diff`'s index */
#undef strcmp
#include "dflash.h"

/* {"k0":0,"k1":1,...} with n keys, in objs objects of an array when objs > 1;
 * dup >= 0: the last key of the last object is "k<dup>" again. */
static char *many_keys(int objs, int n, int dup, size_t *len) {
    size_t cap = (size_t)objs * (size_t)n * 20 + 64, m = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    if (objs > 1) s[m++] = '[';
    for (int o = 0; o < objs; o++) {
        s[m++] = '{';
        for (int i = 0; i < n; i++) {
            int k = (o == objs - 1 && i == n - 1 && dup >= 0) ? dup : i;
            m += (size_t)snprintf(s + m, cap - m, "%s\"k%d\":%d", i ? "," : "", k, i);
        }
        s[m++] = '}';
        if (o + 1 < objs) s[m++] = ',';
    }
    if (objs > 1) s[m++] = ']';
    s[m] = 0;
    *len = m;
    return s;
}

/* 200,000 keys in one object (the old limit was 16,384): parsed, every key
 * kept in order, and at most a few comparisons per key (quadratic: 2e10). */
static void test_one_big_object(void **state) {
    (void)state;
    size_t len;
    const int n = 200000;
    char *s = many_keys(1, n, -1, &len);
    Json j;
    key_compares = 0;
    assert_int_equal(json_parse(s, len, "big.json", &j), 0);
    long cmp = key_compares;
    assert_int_equal(j.type, JSON_OBJECT);
    assert_int_equal(j.n, n);
    assert_string_equal(j.keys[123456], "k123456");
    assert_int_equal(j.items[123456].integer, 123456);
    assert_true(cmp < 4L * n);
    json_free(&j);
    free(s);
}

/* The crafted file, scaled: 60 objects of 16,383 keys. */
static void test_many_objects(void **state) {
    (void)state;
    size_t len;
    char *s = many_keys(60, 16383, -1, &len);
    Json j;
    key_compares = 0;
    assert_int_equal(json_parse(s, len, "many.json", &j), 0);
    assert_int_equal(j.n, 60);
    assert_true(key_compares < 4L * 60 * 16383);
    json_free(&j);
    free(s);
}

/* A duplicate as the 150,000th key is refused: the key, and the byte offset
 * just past it (the same message as before the change). */
static void test_duplicate_still_refused(void **state) {
    (void)state;
    size_t len;
    char *s = many_keys(1, 150000, 3, &len);
    Json j;
    assert_int_equal(json_parse(s, len, "dup.json", &j), -1);
    char want[128];
    size_t at = (size_t)(strstr(s, ",\"k3\":149999") - s) + 5;  /* past the key's closing quote */
    snprintf(want, sizeof want, "dup.json: invalid JSON at byte %zu: duplicate key \"k3\"", at);
    assert_string_equal(dflash_errmsg, want);
    free(s);
    /* and a small one, keys differing only past a common prefix */
    const char *t = "{\"abc\":1,\"abd\":2,\"ab\":3,\"abd\":4}";
    assert_int_equal(json_parse(t, strlen(t), "t.json", &j), -1);
    assert_non_null(strstr(dflash_errmsg, "duplicate key \"abd\""));
    const char *u = "{\"abc\":1,\"abd\":2,\"ab\":3,\"a\":4}";
    assert_int_equal(json_parse(u, strlen(u), "u.json", &j), 0);
    json_free(&j);
}

/* ---- keys chosen to collide. The low k bits of an FNV-style hash
 * (h = (h ^ byte) * P) depend only on the low k bits of the state before,
 * so two 3-byte blocks that take one state to the same low k bits collide
 * after anything; 14 positions with two such blocks each spell 2^14 distinct
 * keys with one low-k-bit hash: one slot of any table up to 2^k slots under
 * the fixed hash json.c used (and formats/manifest.c's FNV-1a). */
#define FLOOD_BITS 20
#define FLOOD_BLOCKS 14
typedef struct { uint64_t basis, prime; } Fnv;
static const Fnv FNV_JSON = {1469598103u, 16777619u};                       /* json.c's old key_hash */
static const Fnv FNV_1A64 = {1469598103934665603u, 1099511628211u};        /* manifest.c's old one */

static uint64_t fnv_step(const Fnv *f, uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * f->prime;
    return h;
}

/* 2^FLOOD_BLOCKS keys of 3 * FLOOD_BLOCKS letters, malloc'd, one string each */
static char **flood_keys(const Fnv *f, int *n_keys) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const uint64_t mask = ((uint64_t)1 << FLOOD_BITS) - 1;
    char blk[FLOOD_BLOCKS][2][4];
    int *seen = malloc(sizeof(int) << FLOOD_BITS);
    assert_non_null(seen);
    uint64_t h = f->basis;
    for (int b = 0; b < FLOOD_BLOCKS; b++) {  /* a birthday search among 62^3 blocks */
        memset(seen, -1, sizeof(int) << FLOOD_BITS);
        int found = 0;
        for (int c = 0; c < 62 * 62 * 62 && !found; c++) {
            char s[4] = {al[c % 62], al[c / 62 % 62], al[c / 3844], 0};
            uint64_t x = fnv_step(f, h, s, 3) & mask;
            if (seen[x] < 0) { seen[x] = c; continue; }
            int d = seen[x];
            char t[4] = {al[d % 62], al[d / 62 % 62], al[d / 3844], 0};
            memcpy(blk[b][0], t, 4), memcpy(blk[b][1], s, 4);
            h = fnv_step(f, h, s, 3);
            found = 1;
        }
        assert_true(found);
    }
    free(seen);
    *n_keys = 1 << FLOOD_BLOCKS;
    char **keys = malloc(sizeof *keys * (size_t)*n_keys);
    assert_non_null(keys);
    for (int k = 0; k < *n_keys; k++) {
        keys[k] = malloc(3 * FLOOD_BLOCKS + 1);
        assert_non_null(keys[k]);
        for (int b = 0; b < FLOOD_BLOCKS; b++) memcpy(keys[k] + 3 * b, blk[b][k >> b & 1], 3);
        keys[k][3 * FLOOD_BLOCKS] = 0;
        /* the construction's claim, checked: every key in the one slot */
        assert_true((fnv_step(f, f->basis, keys[k], 3 * FLOOD_BLOCKS) & mask) == (fnv_step(f, f->basis, keys[0], 3 * FLOOD_BLOCKS) & mask));
    }
    return keys;
}

static void free_keys(char **keys, int n) {
    for (int k = 0; k < n; k++) free(keys[k]);
    free(keys);
}

/* An object of 16,384 keys that all share a slot under the old fixed hash:
 * still about one comparison per key (the fixed hash: n (n - 1) / 2 = 1.3e8). */
static void test_colliding_keys(void **state) {
    (void)state;
    int n;
    char **keys = flood_keys(&FNV_JSON, &n);
    size_t cap = (size_t)n * (3 * FLOOD_BLOCKS + 16) + 8, m = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    s[m++] = '{';
    for (int k = 0; k < n; k++) m += (size_t)snprintf(s + m, cap - m, "%s\"%s\":%d", k ? "," : "", keys[k], k);
    s[m++] = '}';
    s[m] = 0;
    Json j;
    key_compares = 0;
    assert_int_equal(json_parse(s, m, "flood.json", &j), 0);
    long cmp = key_compares;
    assert_int_equal(j.n, n);
    assert_string_equal(j.keys[n - 1], keys[n - 1]);
    json_free(&j);
    if (cmp >= 4L * n) fail_msg("%ld key comparisons for %d keys (at most %d expected)", cmp, n, 4 * n);
    /* and the duplicate of a colliding key is still found */
    m -= 1;
    m += (size_t)snprintf(s + m, cap - m, ",\"%s\":0}", keys[n / 2]);
    assert_int_equal(json_parse(s, m, "flood.json", &j), -1);
    assert_non_null(strstr(dflash_errmsg, "duplicate key"));
    free(s);
    free_keys(keys, n);
}

/* The same flood on a manifest's names (formats/manifest.c's NameMap: a
 * trace.jsonl read for `dflash diff`, the tracer's names already written):
 * adding 16,384 names that share a slot under FNV-1a, then looking each up,
 * costs a few comparisons a name (FNV-1a: 1.3e8 to add them, as many again
 * to look them up). */
static void test_colliding_names(void **state) {
    (void)state;
    int n;
    char **keys = flood_keys(&FNV_1A64, &n);
    NameMap m = {0};
    key_compares = 0;
    for (int k = 0; k < n; k++) assert_int_equal(namemap_add(&m, keys[k], k), 0);
    for (int k = 0; k < n; k++) assert_int_equal(namemap_get(&m, keys[k]), k);
    assert_int_equal(namemap_add(&m, keys[n / 3], 0), 1);  /* a repeat is still one */
    assert_int_equal(namemap_get(&m, "absent"), -1);
    long cmp = key_compares;
    namemap_free(&m);
    free_keys(keys, n);
    if (cmp >= 8L * n) fail_msg("%ld name comparisons for %d names (at most %d expected)", cmp, n, 8 * n);
}

/* The one bound that remains: values in all (JSON_MAX_VALUES). */
static void test_value_bound(void **state) {
    (void)state;
    size_t n = (size_t)JSON_MAX_VALUES + 1, len = 2 * n + 1;
    char *s = malloc(len + 1);
    assert_non_null(s);
    s[0] = '[';
    for (size_t i = 0; i < n; i++) s[1 + 2 * i] = '0', s[2 + 2 * i] = ',';
    s[len - 1] = ']';
    s[len] = 0;
    Json j;
    assert_int_equal(json_parse(s, len, "v.json", &j), -1);
    assert_non_null(strstr(dflash_errmsg, "more than 4194304 values"));
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_big_object),
        cmocka_unit_test(test_many_objects),
        cmocka_unit_test(test_duplicate_still_refused),
        cmocka_unit_test(test_value_bound),
        cmocka_unit_test(test_colliding_keys),
        cmocka_unit_test(test_colliding_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
