/* train/case_paths.h - where a case file's folders are (train_case.c and
 * lm_case.c): a folder named in CASE.json is taken as it is when it is
 * absolute or exists from the current directory, else from CASE.json's own
 * folder. A path that does not fit is an error, never cut short. */
#ifndef DFLASH_CASE_PATHS_H
#define DFLASH_CASE_PATHS_H

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* out = the folder p (+ suffix, "" for none) of the case file case_json;
 * 0, or -1 after a one-line message naming tool and case. */
static int case_dir(const char *tool, const char *case_json, const char *p, const char *suffix, char *out, size_t size) {
    struct stat sb;
    const char *slash = strrchr(case_json, '/');
    int n = p[0] == '/' || stat(p, &sb) == 0 ? snprintf(out, size, "%s%s", p, suffix)
          : slash ? snprintf(out, size, "%.*s/%s%s", (int)(slash - case_json), case_json, p, suffix)
                  : snprintf(out, size, "./%s%s", p, suffix);
    if (n < 0 || (size_t)n >= size) {
        fprintf(stderr, "%s: %s: the folder \"%s%s\" is longer than %zu bytes\n", tool, case_json, p, suffix, size - 1);
        return -1;
    }
    return 0;
}

#endif
