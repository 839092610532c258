/* gguf/fwdtime.c - build/gguf/fwdtime TARGET_DIR: this program's T-token
 * target forward, timed as `./dflash bench` times it (cli/bench.c,
 * bench_forward: a cache of 64 positions, ids i % V; then REPS round-robin
 * repetitions of T = 1..8, 16 tokens after them, every row's logits, the
 * cache cropped back after each; the median of each T), alone, so that
 * gguf/llama-bench.sh can alternate it with llama.cpp's forward of the same
 * target (make llama-bench). Prints "fwd T WALL_MS CPU_MS" lines: the
 * medians of the wall time and of the process's CPU time (on a busy shared
 * machine the wall time counts the waits for a core; the CPU time does not).
 */
#include "dflash.h"
#include "formats/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 11
#define CTX 64

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    static const int Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 16};
    enum { NT = sizeof Ts / sizeof Ts[0] };
    if (argc != 2) { fprintf(stderr, "usage: fwdtime TARGET_DIR\n"); return 2; }
    Model m;
    memset(&m, 0, sizeof m);
    if (model_load(&m, argv[1], 0) != 0) { dflash_print_error("fwdtime", ""); return 1; }
    if (kernel_pack_weights) kernel_pack_weights(&m);   /* as ./dflash runs: packed, BF16 kept as BF16 */
    const Config *c = &m.cfg;
    KVCache kv;
    TargetRun tr;
    int ids[16], pre[CTX];
    if (cache_init(&kv, c, CTX + 16) != 0 || target_run_init(&tr, c, CTX, CTX + 16) != 0) {
        dflash_print_error("fwdtime", "");
        return 1;
    }
    for (int i = 0; i < CTX; i++) pre[i] = i % c->vocab_size;
    for (int i = 0; i < 16; i++) ids[i] = (i + 1) % c->vocab_size;
    target_forward(&m, &kv, &tr, pre, CTX, CTX - 1, NULL);
    static double t[NT][REPS], u[NT][REPS];
    for (int k = 0; k < NT; k++) {  /* warm-up */
        target_forward(&m, &kv, &tr, ids, Ts[k], 0, NULL);
        cache_crop(&kv, CTX);
    }
    for (int r = 0; r < REPS; r++)
        for (int k = 0; k < NT; k++) {
            double t0 = now_seconds(), u0 = cpu_seconds();
            target_forward(&m, &kv, &tr, ids, Ts[k], 0, NULL);
            u[k][r] = cpu_seconds() - u0;
            t[k][r] = now_seconds() - t0;
            cache_crop(&kv, CTX);
        }
    for (int k = 0; k < NT; k++) {
        qsort(t[k], REPS, sizeof t[k][0], cmp);
        qsort(u[k], REPS, sizeof u[k][0], cmp);
        printf("fwd %d %.4f %.4f\n", Ts[k], 1e3 * t[k][REPS / 2], 1e3 * u[k][REPS / 2]);
    }
    cache_free(&kv);
    target_run_free(&tr);
    if (kernel_unpack_weights) kernel_unpack_weights(&m);
    model_free(&m);
    return 0;
}
