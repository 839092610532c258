/* tests/fuzz/fuzz_npy.c - libFuzzer target: the readers of `dflash diff`.
 * An input starting with 0x93 (the .npy magic) goes to formats/files.c's npy_parse,
 * anything else to formats/manifest.c's readers (trace.jsonl and names.json).
 * Links formats/files.c and formats/manifest.c, and dflash.c, formats/json.c and formats/load.c for
 * dflash_set_error. Seeds in tests/fuzz/npy/. */
#include "dflash.h"
#include "formats/files.h"
#include "formats/manifest.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char *buf = malloc(size ? size : 1);  /* exactly size bytes */
    if (!buf) return 0;
    memcpy(buf, data, size);
    dflash_errmsg[0] = 0;
    if (size > 0 && buf[0] == 0x93) {
        NpyArray a;
        if (npy_parse("x.npy", buf, size, &a) == 0) {
            size_t n = 1;
            for (int k = 0; k < a.ndim; k++) n *= (size_t)a.shape[k];
            if (n != a.n || !a.data) abort();
            for (size_t k = 0; k < a.n; k++) (void)(a.kind == 'f' ? npy_f(&a, k) : (double)npy_i(&a, k));
            npy_free(&a);
        } else if (!dflash_errmsg[0]) {
            abort();
        }
    } else {
        for (int k = 0; k < 2; k++) {
            Manifest m;
            memset(&m, 0, sizeof m);
            m.path = strdup(k ? "names.json" : "trace.jsonl");
            if (!m.path) break;
            if (k == 0) manifest_parse_jsonl(&m, (const char *)buf, size);
            else manifest_parse_names_json(&m, (const char *)buf, size);
            for (int i = 0; i < m.files.n; i++)
                if (!manifest_file_ok(m.files.s[i])) abort();
            manifest_free(&m);
        }
    }
    free(buf);
    return 0;
}
