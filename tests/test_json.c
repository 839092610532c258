/* tests/test_json.c - formats/json.c on objects with many keys (issue 34,
 * item 11): the duplicate-key check must not be quadratic, an object may
 * hold far more than the old 16,384 keys, and duplicates are still refused
 * with the key and the byte offset.
 *
 * Not timed: the key comparisons json.c makes are counted (strcmp is
 * redirected to a counter for the included json.c). A quadratic check makes
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
