/* tests/fuzz/fuzz_batches.c - libFuzzer target: the --batches case reader
 * (train/train_data.c, case_parse: the JSON reader, then each batch's
 * input_ids, loss_mask, anchors and keep), as dflash train reads a case
 * file against a vocabulary of 64. When a case is accepted, what the
 * command relies on holds: every batch has b >= 1 rows of S >= 1 ids in
 * 0..63, 1 <= N <= CASE_MAX_ANCHORS sorted anchors in 0..S-1 per row, masks
 * and keep flags 0/1; then batch_trained_positions reads it whole. A
 * refusal always sets a message. Seeds in tests/fuzz/batches/. */
#include "train/train_data.c"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size ? size : 1);  /* exactly size bytes, no NUL */
    if (!text) return 0;
    memcpy(text, data, size);
    Case c;
    dflash_errmsg[0] = 0;
    if (case_parse(&c, "case.json", text, size, 64) != 0) {
        if (!dflash_errmsg[0]) abort();
        free(text);
        return 0;
    }
    if (c.n < 1) abort();
    for (int i = 0; i < c.n; i++) {
        const CaseBatch *b = &c.batch[i];
        if (b->b < 1 || b->S < 1 || b->N < 1 || b->N > CASE_MAX_ANCHORS) abort();
        for (size_t k = 0; k < (size_t)b->b * (size_t)b->S; k++)
            if (b->ids[k] < 0 || b->ids[k] > 63 || (b->mask[k] != 0 && b->mask[k] != 1)) abort();
        for (int r = 0; r < b->b; r++)
            for (int n = 0; n < b->N; n++) {
                int a = b->anchors[(size_t)r * b->N + n], kp = b->keep[(size_t)r * b->N + n];
                if (a < 0 || a >= b->S || (kp != 0 && kp != 1)) abort();
                if (kp && n > 0 && b->keep[(size_t)r * b->N + n - 1] && a < b->anchors[(size_t)r * b->N + n - 1]) abort();   /* kept anchors sorted (a dropped slot may hold 0) */
            }
        for (int B = 2; B <= 16; B *= 2)
            if (batch_trained_positions(b->b, b->S, b->N, B, b->mask, b->anchors, b->keep) < 0) abort();
    }
    case_free(&c);
    free(text);
    return 0;
}
