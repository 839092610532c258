/* tests/patchutil.h - the mechanism of the patch-built programs
 * (tools/pitfall.sh build: a copy of one source file, a patch applied with
 * no fuzz, the copy compiled and linked with the other objects), checked the
 * same way for the porting pitfalls (test_pitfalls.c) and the training
 * pitfalls (test_train_pitfalls.c). Include after testutil.h. */
#ifndef PATCHUTIL_H
#define PATCHUTIL_H

/* PROGRAM's source, COPY_DIR/FILE (FILE the one file PATCH names), is FILE
 * with exactly PATCH: it differs from FILE, and reversing PATCH on a copy
 * (scratch, a path to write) gives FILE back, byte for byte. */
static inline void patch_check_program(const char *name, const char *patch, const char *program,
                                       const char *copy_dir, const char *scratch) {
    char cmd[2000], file[128];
    if (access(program, X_OK) != 0) fail_msg("%s: no program %s (make pitfall-programs)", name, program);
    char *text = tu_read(patch, NULL);
    assert_non_null(text);
    const char *plus = strstr(text, "\n+++ b/");
    if (!plus || sscanf(plus + 7, "%127s", file) != 1) fail_msg("%s: names no file (+++ b/FILE)", patch);
    free(text);
    snprintf(cmd, sizeof cmd, "cmp -s %s %s/%s", file, copy_dir, file);
    if (tu_run(cmd, NULL) != 1) fail_msg("%s: %s/%s is missing or the clean %s", name, copy_dir, file, file);
    snprintf(cmd, sizeof cmd, "cp %s/%s %s && patch --quiet --batch --fuzz=0 -R %s %s && cmp %s %s", copy_dir, file,
             scratch, scratch, patch, file, scratch);
    if (tu_run(cmd, NULL) != 0) fail_msg("%s: reversing its patch does not give %s back", name, file);
}

/* PATCH with one context line broken (the character `at` bytes into the
 * first occurrence of CONTEXT becomes 'X') no longer applies to FILE:
 * `tools/pitfall.sh build` fails naming it and leaves neither the program
 * DIR/dflash-LEAF nor its copy's directory (DIR/LEAF without "dflash-"...:
 * DIR/stale or DIR/train-stale). OBJECT: FILE's object, for the link line. */
static inline void patch_check_stale(const char *patch, const char *context, size_t at, const char *file,
                                     const char *object, const char *dir, const char *leaf) {
    char *p = tu_read(patch, NULL);
    assert_non_null(p);
    char *ctx = strstr(p, context);
    assert_non_null(ctx);
    assert_true(at < strlen(context));
    ctx[at] = 'X';
    char diff[600], prog[600], copy[600], out[600], cmd[3000], want[200];
    snprintf(diff, sizeof diff, "%s/stale.diff", dir);
    snprintf(prog, sizeof prog, "%s/dflash-%s", dir, leaf);
    snprintf(copy, sizeof copy, "%s/%s", dir, leaf);
    snprintf(out, sizeof out, "%s/stale.txt", dir);
    assert_int_equal(tu_write(diff, p, strlen(p)), 0);
    free(p);
    snprintf(cmd, sizeof cmd, "sh tools/pitfall.sh build %s %s cc '' %s", diff, prog, object);
    assert_int_equal(tu_run(cmd, out), 1);
    char *text = tu_read(out, NULL);
    assert_contains(text, "pitfall stale: ");
    snprintf(want, sizeof want, "no longer applies to %s", file);
    assert_contains(text, want);
    free(text);
    assert_false(tu_exists(prog));
    assert_false(tu_exists(copy));
}

/* config.json at path through formats/load.c's config_parse (the suites
 * include load.c): the pitfall suites read the random set's sizes */
static inline void patch_load_config(Config *c, const char *path, int draft) {
    size_t len = 0;
    char *text = tu_read(path, &len);
    assert_non_null(text);
    if (config_parse(c, path, text, len, draft) != 0) fail_msg("%s: %s", path, dflash_errmsg);
    free(text);
}

/* The names a series file lists (one a line, # comments), at most cap,
 * into names[]; their count, -1 when the file cannot be read. */
static inline int patch_series(const char *series, char (*names)[64], int cap) {
    char *text = tu_read(series, NULL);
    if (!text) return -1;
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char name[64];
        if (sscanf(line, "%63s", name) == 1 && n < cap) snprintf(names[n++], 64, "%s", name);
    }
    free(text);
    return n;
}

#endif /* PATCHUTIL_H */
