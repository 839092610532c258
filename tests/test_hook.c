/* tests/test_hook.c - a port's C harness takes every tensor in-process.
 *
 * This file uses only the public interfaces (dflash.h, and formats/tracenames.h for
 * the table that shapes each tensor) and is linked with dflash.c,
 * formats/tracenames.c and the loader (formats/load.c, formats/json.c, formats/files.c) but NOT trace.c: if dflash.c needed the
 * file tracer, this test would not link. It installs its own TraceHook
 * (each hand shaped by trace_shape_hand, as a port's harness does) and checks
 * what arrives against the walkthrough (sizes, positions, acceptance) and
 * against a second computation done here (RoPE of the received q at the
 * block's positions must give the received q_rope). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dflash.h"
#include "formats/load.h"
#include "formats/tracenames.h"
#include "tests/testutil.h"

#define WALK "toy_weights/walkthrough"

/* What the harness keeps of each tensor: its name, shape and a copy. */
typedef struct {
    char name[160];
    int is_int, ndim;
    int64_t shape[TRACE_MAX_DIMS];
    const TraceName *spec;
    void *data;
    size_t bytes;
} Got;

typedef struct {
    Got *got;
    int n, cap;
    int fail_at;     /* return -1 on this tensor (-1: never) */
} Harness;

static int take(void *ctx, const TraceTensor *t) {
    Harness *h = ctx;
    /* the element size the library was built with, checked before reading */
    assert_int_equal(t->elem_size, t->is_int ? (int)sizeof(int64_t) : (int)sizeof(real));
    if (h->n == h->fail_at) {
        dflash_set_error("harness: refused %s", t->name);
        return -1;
    }
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->got = realloc(h->got, sizeof(Got) * (size_t)h->cap);
        assert_non_null(h->got);
    }
    Got *g = &h->got[h->n++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", t->name);
    g->is_int = t->is_int;
    g->ndim = t->ndim;
    g->spec = t->spec;
    size_t count = 1;
    for (int i = 0; i < t->ndim; i++) {
        g->shape[i] = t->shape[i];
        count *= (size_t)t->shape[i];
    }
    g->bytes = count * (t->is_int ? sizeof(int64_t) : sizeof(real));
    g->data = malloc(g->bytes ? g->bytes : 1);
    assert_non_null(g->data);
    if (g->bytes) memcpy(g->data, t->data, g->bytes);
    return 0;
}

/* the hook: dflash.c's hand, in the table's shape, to take() */
static int harness_hook(void *ctx, const TraceHand *hand) { return trace_shape_hand(hand, take, ctx); }

static void harness_free(Harness *h) {
    for (int i = 0; i < h->n; i++) free(h->got[i].data);
    free(h->got);
    memset(h, 0, sizeof *h);
}

static const Got *find(const Harness *h, const char *name) {
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->got[i].name, name) == 0) return &h->got[i];
    fail_msg("the hook never received %s", name);
    return NULL;
}

static int position_of(const Harness *h, const char *name) {
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->got[i].name, name) == 0) return i;
    return -1;
}

static void assert_shape(const Got *g, int ndim, ...) {
    va_list ap;
    va_start(ap, ndim);
    if (g->ndim != ndim) fail_msg("%s: %d axes, want %d", g->name, g->ndim, ndim);
    for (int i = 0; i < ndim; i++) {
        int64_t want = va_arg(ap, int64_t);
        if (g->shape[i] != want)
            fail_msg("%s: axis %d is %lld, want %lld", g->name, i, (long long)g->shape[i], (long long)want);
    }
    va_end(ap);
}

typedef TuSet Set;

static int setup(void **state) { return tu_set_setup(state, WALK); }
static int teardown(void **state) { return tu_set_teardown(state); }

/* "The cat sat", block 4, up to 16 new tokens, stop at <eos>: the walkthrough run */
static int run(Set *s, const TraceHook *hook, GenResult *res) {
    int ids[8], n;
    assert_int_equal(tokenize(&s->vocab, "The cat sat", ids, 8, &n), 0);
    GenParams p = {0};
    p.max_new_tokens = 16;
    p.block_size = 4;
    p.n_stop = 1;
    p.stop_ids[0] = vocab_find(&s->vocab, "<eos>");
    p.trace = hook;
    return dflash_generate(&s->draft, &s->target, ids, n, &p, res);
}

/* The walkthrough's sizes and positions arrive, in the order computed. */
static void test_hook_receives_the_walkthrough(void **state) {
    Set *s = *state;
    Harness h = {NULL, 0, 0, -1};
    TraceHook th = {harness_hook, &h};
    GenResult res;
    assert_int_equal(run(s, &th, &res), 0);

    /* every tensor names its table row, and the row is the one its name finds */
    for (int i = 0; i < h.n; i++) {
        assert_non_null(h.got[i].spec);
        assert_ptr_equal(h.got[i].spec, dflash_trace_name(h.got[i].name, s->target.cfg.num_hidden_layers));
        assert_int_equal(h.got[i].is_int, h.got[i].spec->kind == TRACE_IDS);
    }
    assert_string_equal(h.got[0].name, "input_ids");
    assert_string_equal(h.got[h.n - 1].name, "output_ids");

    /* walkthrough: n = 3 prompt tokens, D = 512, 12 target layers (13
     * hidden states), 8 heads of 64, k = 3 context layers, B = 4 */
    assert_shape(find(&h, "prefill.hidden_states.12"), 2, (int64_t)3, (int64_t)512);
    assert_shape(find(&h, "prefill.target_hidden"), 2, (int64_t)3, (int64_t)(3 * 512));
    /* round 1: Lc = 3 context rows + B = 4 block rows = 7 keys (the 4x7 matrix) */
    assert_shape(find(&h, "draft1.layers.0.self_attn.attn_weights"), 3, (int64_t)8, (int64_t)4, (int64_t)7);
    assert_shape(find(&h, "draft1.layers.0.self_attn.k"), 3, (int64_t)8, (int64_t)7, (int64_t)64);
    assert_shape(find(&h, "draft1.layers.0.self_attn.q"), 3, (int64_t)8, (int64_t)4, (int64_t)64);
    assert_shape(find(&h, "verify1.acceptance_length"), 0);
    /* draft positions [cache_len, start + B): 0..6 in round 1; round 2 starts
     * at the draft cache length after crop(3), 3, and ends at start + B = 6 + 4 */
    const Got *pos1 = find(&h, "draft1.position_ids"), *pos2 = find(&h, "draft2.position_ids");
    assert_shape(pos1, 1, (int64_t)7);
    for (int i = 0; i < 7; i++) assert_int_equal(((int64_t *)pos1->data)[i], i);
    assert_shape(pos2, 1, (int64_t)7);
    for (int i = 0; i < 7; i++) assert_int_equal(((int64_t *)pos2->data)[i], 3 + i);
    /* Step 6: cumprod [1,1,0], acceptance 2 */
    const int64_t *cum = find(&h, "verify1.cumprod")->data;
    assert_int_equal(cum[0], 1);
    assert_int_equal(cum[1], 1);
    assert_int_equal(cum[2], 0);
    assert_int_equal(*(int64_t *)find(&h, "verify1.acceptance_length")->data, 2);
    assert_int_equal(res.rounds[0].acceptance_length, 2);

    /* order: each round's draft before its verification, each layer's
     * attention before its output */
    assert_true(position_of(&h, "draft1.sampled") < position_of(&h, "verify1.input_ids"));
    assert_true(position_of(&h, "verify1.acceptance_length") < position_of(&h, "draft2.target_hidden_raw"));
    assert_true(position_of(&h, "draft1.layers.0.self_attn.attn_weights") < position_of(&h, "draft1.layers.0"));
    gen_result_free(&res);
    harness_free(&h);
}

/* A second computation: RoPE applied here to the received q, at the block's
 * positions start..start+B-1 = 3..6 (the LAST B of the 7 draft positions),
 * must give the received q_rope, head by head and row by row. This also
 * checks the (heads, rows, d) layout of both. */
static void test_hook_q_rope_is_q_rotated_at_block_positions(void **state) {
    Set *s = *state;
    Harness h = {NULL, 0, 0, -1};
    TraceHook th = {harness_hook, &h};
    GenResult res;
    assert_int_equal(run(s, &th, &res), 0);
    const Got *q = find(&h, "draft1.layers.0.self_attn.q"), *qr = find(&h, "draft1.layers.0.self_attn.q_rope");
    int H = (int)q->shape[0], B = (int)q->shape[1], d = (int)q->shape[2], half = d / 2;
    double theta = s->draft.cfg.rope_theta, worst = 0;
    for (int hh = 0; hh < H; hh++)
        for (int t = 0; t < B; t++) {
            const real *x = (const real *)q->data + ((size_t)hh * B + t) * d;
            const real *y = (const real *)qr->data + ((size_t)hh * B + t) * d;
            double pos = 3 + t;
            for (int i = 0; i < half; i++) {
                double a = pos * pow(theta, -2.0 * i / d), c = cos(a), sn = sin(a);
                double y1 = x[i] * c - x[i + half] * sn, y2 = x[i + half] * c + x[i] * sn;
                double e1 = fabs(y1 - y[i]), e2 = fabs(y2 - y[i + half]);
                if (e1 > worst) worst = e1;
                if (e2 > worst) worst = e2;
            }
        }
    if (worst > 1e-3) fail_msg("q_rope differs from q rotated at positions 3..6 by %g", worst);
    gen_result_free(&res);
    harness_free(&h);
}

/* A hook that fails stops the run: dflash_generate returns -1 with the
 * hook's message, and nothing more is handed out. Tracing never changes
 * what is generated. */
static void test_hook_failure_stops_the_run(void **state) {
    Set *s = *state;
    GenResult plain, traced, failed;
    assert_int_equal(run(s, NULL, &plain), 0);
    Harness h = {NULL, 0, 0, -1};
    TraceHook th = {harness_hook, &h};
    assert_int_equal(run(s, &th, &traced), 0);
    assert_int_equal(plain.n_output, traced.n_output);
    assert_memory_equal(plain.output_ids, traced.output_ids, sizeof(int) * (size_t)plain.n_output);
    int total = h.n;
    harness_free(&h);

    Harness f = {NULL, 0, 0, total / 2};
    TraceHook failing = {harness_hook, &f};
    assert_int_equal(run(s, &failing, &failed), -1);
    assert_int_equal(f.n, total / 2);
    assert_non_null(strstr(dflash_errmsg, "harness: refused"));
    gen_result_free(&plain);
    gen_result_free(&traced);
    harness_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hook_receives_the_walkthrough),
        cmocka_unit_test(test_hook_q_rope_is_q_rotated_at_block_positions),
        cmocka_unit_test(test_hook_failure_stops_the_run),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
