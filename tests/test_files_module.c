/* tests/test_files_module.c - formats/files.c, the file layer every program shares: the
 * .npy writer against NumPy's format rules (checked here byte by byte, not
 * with formats/files.c's own reader alone), the reader on what the writer wrote,
 * OutFile (the old file stays until commit; abort and failure leave nothing
 * behind; the mode is kept), the whole-file reader's limits and path_join. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dflash.c"
#include "formats/load.c"
#include "tests/testutil.h"

/* npy_write: magic, version 1.0, header length so that 10 + it is a
 * multiple of 64, the header dict as NumPy writes it, then little-endian
 * values; and npy_read_values gives back shape and values. */
static void test_npy_write_then_read(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    const char *path = tu_path(dir, "x.npy");
    const float v[6] = {1.0f, -2.5f, 0.125f, 3e-8f, -0.0f, 65504.0f};
    const int64_t shape[2] = {2, 3};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(npy_write(f, "<f4", 2, shape, v, 6), 0);
    assert_int_equal(fclose(f), 0);

    size_t len;
    char *b = tu_read(path, &len);
    assert_non_null(b);
    assert_memory_equal(b, "\x93NUMPY\x01\x00", 8);
    size_t hl = (unsigned char)b[8] | (size_t)(unsigned char)b[9] << 8;
    assert_int_equal((10 + hl) % 64, 0);
    assert_int_equal(b[10 + hl - 1], '\n');
    const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    assert_memory_equal(b + 10, dict, sizeof dict - 1);
    assert_int_equal(len, 10 + hl + 6 * 4);
    /* 1.0f is 0x3f800000: little-endian 00 00 80 3f */
    assert_memory_equal(b + 10 + hl, "\x00\x00\x80\x3f", 4);
    free(b);

    NpyValues r;
    assert_int_equal(npy_read_values(path, &r), 0);
    assert_int_equal(r.is_int, 0);
    assert_int_equal(r.ndim, 2);
    assert_int_equal(r.shape[0], 2);
    assert_int_equal(r.shape[1], 3);
    for (int k = 0; k < 6; k++) assert_true(r.f[k] == (double)v[k]);
    npy_values_free(&r);

    /* a 1-d int64 array: the 1-tuple keeps its comma, (3,) */
    const int64_t ids[3] = {-1, 0, 1LL << 40};
    const int64_t s1[1] = {3};
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(npy_write(f, "<i8", 1, s1, ids, 3), 0);
    assert_int_equal(fclose(f), 0);
    b = tu_read(path, &len);
    assert_non_null(strstr(b + 10, "'shape': (3,), }"));  /* after the preamble's 0 byte */
    free(b);
    assert_int_equal(npy_read_values(path, &r), 0);
    assert_int_equal(r.is_int, 1);
    for (int k = 0; k < 3; k++) assert_true(r.i[k] == ids[k]);
    npy_values_free(&r);
    /* an unknown descr is refused */
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(npy_write(f, "<f2", 1, s1, ids, 3), -1);
    fclose(f);
    tu_rmtree(dir);
    free(dir);
}

/* OutFile: until out_commit the old file is untouched; out_abort leaves it
 * as it was and nothing beside it; out_commit replaces it, keeping its mode. */
static void test_outfile_commit_and_abort(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    const char *path = tu_path(dir, "page.html");
    tu_write_text(path, "old");
    assert_int_equal(chmod(path, 0640), 0);

    OutFile *o = out_open(path, "test");
    assert_non_null(o);
    fputs("new, not wanted", out_stream(o));
    assert_int_equal(tu_count_entries(dir), 2);  /* the file and its temporary */
    char *t = tu_read(path, NULL);
    assert_string_equal(t, "old");
    free(t);
    out_abort(o);
    assert_int_equal(tu_count_entries(dir), 1);
    t = tu_read(path, NULL);
    assert_string_equal(t, "old");
    free(t);

    o = out_open(path, "test");
    assert_non_null(o);
    fputs("new", out_stream(o));
    assert_int_equal(out_commit(o), 0);
    assert_int_equal(tu_count_entries(dir), 1);
    t = tu_read(path, NULL);
    assert_string_equal(t, "new");
    free(t);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);

    /* a directory is refused with one line; a missing directory too */
    assert_null(out_open(dir, "test"));
    assert_non_null(strstr(dflash_errmsg, "is a directory"));
    assert_null(out_open(tu_path(dir, "no/such.html"), "test"));
    assert_non_null(strstr(dflash_errmsg, "test: cannot create"));
    assert_int_equal(tu_count_entries(dir), 1);
    tu_rmtree(dir);
    free(dir);
}

/* file_read_max refuses a file over the limit and anything not a regular
 * file; file_read_all NUL-terminates; path_join joins with one '/'. */
static void test_read_limits_and_join(void **state) {
    (void)state;
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    const char *path = tu_path(dir, "f.txt");
    tu_write_text(path, "0123456789");
    char *b;
    size_t n;
    assert_int_equal(file_read_max(path, 10, &b, &n), 0);
    assert_int_equal(n, 10);
    assert_int_equal(b[10], '\0');
    free(b);
    assert_int_equal(file_read_max(path, 9, &b, &n), -1);
    assert_non_null(strstr(dflash_errmsg, "larger than 9 bytes"));
    assert_null(b);
    assert_int_equal(file_read_all(dir, &b, &n), -1);
    assert_non_null(strstr(dflash_errmsg, "expected a regular file, got a directory"));
    char *j = path_join("a/b", "c.npy");
    assert_string_equal(j, "a/b/c.npy");
    free(j);
    tu_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_write_then_read),
        cmocka_unit_test(test_outfile_commit_and_abort),
        cmocka_unit_test(test_read_limits_and_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
