/* tests/test_layouts.c - published checkpoint layouts (issue 13).
 *
 * On toy_weights/qwen3-layout (BF16, the target in two shards behind
 * model.safetensors.index.json, tied embeddings, head_dim != hidden/heads,
 * GQA 4:1, block size 16, 5 target layer ids, mask id = vocab_size - 1,
 * generation_config.json):
 *   - the loader sees the layout the configs describe (tied lm_head is the
 *     embedding matrix itself, the layer ids, the stop ids);
 *   - every loaded weight is a BF16 value (its low 16 bits are zero);
 *   - BF16 and F16 widening give the values the formats define (checked on
 *     bit patterns worked out by hand);
 *   - lossless: greedy DFlash gives the target-only greedy tokens at block
 *     sizes 16, 8, 3 and 1;
 *   - an F32 copy of the same (BF16-representable) values, in the same
 *     shards, gives the same weights and a byte-identical trace.
 *   - tokenizer.json decodes output ids to text (GPT-2's byte table, bytes
 *     joined across tokens); without it (and without vocab.txt) the output
 *     is the ids.
 * On toy_weights/sliding (sliding-window draft layers) and toy_weights/llama
 * (a LlamaForCausalLM target): the configured layout, the mask each way of
 * running a sliding layer gives (checked against the rule written from the
 * training code), that the window changes the drafts, losslessness at
 * several block sizes, F32 vs BF16 byte-identical traces, and the refusals.
 * Needs `make weights` and ./dflash, ./toy_weights/gen. */
#include "dflash.c"
#include "formats/load.c"
#include "cli/bench.c"   /* forward_spans: what the bench's roofline reads */
#include "tests/testutil.h"
#include "tokenizer/tokenizer.h"

#define Q3 "toy_weights/qwen3-layout"

static void load_q3(const char *set, Model *t, Model *d) {
    char p[600];
    snprintf(p, sizeof p, "%s/target", set);
    if (model_load(t, p, 0) != 0) fail_msg("%s: %s", p, dflash_errmsg);
    snprintf(p, sizeof p, "%s/draft", set);
    if (model_load(d, p, 1) != 0) fail_msg("%s: %s", p, dflash_errmsg);
}

/* every weight array of a model, with its element count */
typedef struct { const real *p; size_t n; } Arr;

static int model_arrays(const Model *m, Arr *a) {
    const Config *c = &m->cfg;
    size_t D = (size_t)c->hidden_size, I = (size_t)c->intermediate_size, d = (size_t)c->head_dim;
    size_t qd = (size_t)c->num_attention_heads * d, kvd = (size_t)c->num_key_value_heads * d;
    int n = 0;
    if (!c->is_draft) a[n++] = (Arr){m->embed_tokens, (size_t)c->vocab_size * D};
    for (int l = 0; l < c->num_hidden_layers; l++) {
        const LayerWeights *w = &m->layers[l];
        a[n++] = (Arr){w->input_layernorm, D};
        a[n++] = (Arr){w->q_proj, qd * D};
        a[n++] = (Arr){w->k_proj, kvd * D};
        a[n++] = (Arr){w->v_proj, kvd * D};
        a[n++] = (Arr){w->o_proj, D * qd};
        if (w->q_norm) a[n++] = (Arr){w->q_norm, d};  /* a Llama target has none */
        if (w->k_norm) a[n++] = (Arr){w->k_norm, d};
        a[n++] = (Arr){w->post_attention_layernorm, D};
        a[n++] = (Arr){w->gate_proj, I * D};
        a[n++] = (Arr){w->up_proj, I * D};
        a[n++] = (Arr){w->down_proj, D * I};
    }
    a[n++] = (Arr){m->norm, D};
    if (!c->is_draft && !m->tied) a[n++] = (Arr){m->lm_head, (size_t)c->vocab_size * D};
    if (c->is_draft) {
        a[n++] = (Arr){m->fc, D * (size_t)c->n_target_layer_ids * D};
        a[n++] = (Arr){m->hidden_norm, D};
    }
    return n;
}

static void test_layout_as_configured(void **state) {
    (void)state;
    Model t, d;
    load_q3(Q3, &t, &d);
    /* the shapes a published pair has, scaled down */
    assert_int_equal(t.cfg.head_dim, 32);
    assert_int_not_equal(t.cfg.head_dim * t.cfg.num_attention_heads, t.cfg.hidden_size);
    assert_int_equal(t.cfg.num_attention_heads / t.cfg.num_key_value_heads, 4);
    assert_int_equal(d.cfg.block_size, 16);
    assert_int_equal(d.cfg.mask_token_id, t.cfg.vocab_size - 1);
    /* target_layer_ids as build_target_layer_ids(10, 5) gives them: 1 + i * 6/4
     * = 1, 2.5, 4, 5.5, 7, and Python's round() takes ties to the even side */
    static const int want_ids[5] = {1, 2, 4, 6, 7};
    assert_int_equal(d.cfg.n_target_layer_ids, 5);
    assert_memory_equal(d.cfg.target_layer_ids, want_ids, sizeof want_ids);
    int built[5];
    build_target_layer_ids(10, 5, built);
    assert_memory_equal(built, want_ids, sizeof want_ids);
    /* tied: lm_head is the embedding matrix, not a copy */
    assert_true(t.tied);
    assert_ptr_equal(t.lm_head, t.embed_tokens);
    assert_false(d.tied);
    /* every tensor was BF16: all widened into Model.data, no mapping kept */
    assert_int_equal(t.n_maps, 0);
    assert_int_equal(d.n_maps, 0);
    /* stop ids: generation_config.json ([3, 4]) wins over config.json (3) */
    assert_int_equal(t.cfg.n_eos, 1);
    assert_int_equal(t.cfg.eos_token_id[0], 3);
    int ids[DFLASH_MAX_STOP], n = -1;
    char from[4200];
    assert_int_equal(stop_ids_default(Q3 "/target", &t, ids, &n, from, sizeof from), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 4);
    assert_non_null(strstr(from, "generation_config.json"));
    model_free(&t);
    model_free(&d);
}

/* Without generation_config.json the target config.json's eos_token_id is
 * the default; with neither, none (main then falls back to "<eos>"). */
static void test_stop_id_fallbacks(void **state) {
    (void)state;
    Model t, d;
    char *dir = tu_load_tiny_pair(&t, &d);  /* no eos_token_id anywhere */
    int ids[DFLASH_MAX_STOP], n = -1;
    char from[4200] = "";
    assert_int_equal(stop_ids_default(tu_path(dir, "target"), &t, ids, &n, from, sizeof from), 0);
    assert_int_equal(n, 0);
    /* a generation_config.json without eos_token_id: config.json's (none) */
    tu_write_text(tu_path(dir, "target/generation_config.json"), "{\"do_sample\": false}");
    assert_int_equal(stop_ids_default(tu_path(dir, "target"), &t, ids, &n, from, sizeof from), 0);
    assert_int_equal(n, 0);
    t.cfg.n_eos = 1;  /* as if config.json said "eos_token_id": 4 */
    t.cfg.eos_token_id[0] = 4;
    assert_int_equal(stop_ids_default(tu_path(dir, "target"), &t, ids, &n, from, sizeof from), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 4);
    assert_non_null(strstr(from, "config.json"));
    assert_null(strstr(from, "generation_config"));
    tu_write_text(tu_path(dir, "target/generation_config.json"), "{\"eos_token_id\": 2}");
    assert_int_equal(stop_ids_default(tu_path(dir, "target"), &t, ids, &n, from, sizeof from), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 2);
    model_free(&t);
    model_free(&d);
    tu_rmtree(dir);
    free(dir);
}

/* A BF16 value is the top half of an F32: widened, its low 16 bits are 0. */
static void test_weights_are_bf16_values(void **state) {
    (void)state;
    Model t, d;
    load_q3(Q3, &t, &d);
    Arr a[160];
    const Model *ms[2] = {&t, &d};
    size_t checked = 0;
    for (int k = 0; k < 2; k++) {
        int n = model_arrays(ms[k], a);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < a[j].n; i++) {
                float x = (float)a[j].p[i];
                uint32_t u;
                memcpy(&u, &x, 4);
                if (u & 0xffffu) fail_msg("array %d element %zu: %.9g is not a BF16 value", j, i, (double)x);
                checked++;
            }
    }
    assert_true(checked > 1000000 / 2);  /* the whole pair, about 0.9M weights */
    model_free(&t);
    model_free(&d);
}

/* Bit patterns and their values, from the formats' definitions:
 * BF16 = sign, 8-bit exponent (bias 127), 7-bit mantissa;
 * F16 = sign, 5-bit exponent (bias 15), 10-bit mantissa, subnormals
 * mantissa x 2^-24. */
static void test_widening_bit_patterns(void **state) {
    (void)state;
    assert_true(bf16_to_float(0x3f80) == 1.0f);
    assert_true(bf16_to_float(0xc000) == -2.0f);
    assert_true(bf16_to_float(0x3f81) == 1.0f + 1.0f / 128);          /* one mantissa step */
    assert_true(bf16_to_float(0x4049) == 3.140625f);                  /* 1.5703125 x 2 */
    assert_true(bf16_to_float(0x0001) == ldexpf(1.0f, -133));         /* smallest subnormal */
    assert_true(bf16_to_float(0x8000) == 0.0f && signbit(bf16_to_float(0x8000)));
    assert_true(f16_to_float(0x3c00) == 1.0f);
    assert_true(f16_to_float(0xc000) == -2.0f);
    assert_true(f16_to_float(0x3555) == 0.333251953125f);             /* 1365/4096 */
    assert_true(f16_to_float(0x7bff) == 65504.0f);                    /* largest finite */
    assert_true(f16_to_float(0xfbff) == -65504.0f);
    assert_true(f16_to_float(0x0001) == ldexpf(1.0f, -24));           /* smallest subnormal */
    assert_true(f16_to_float(0x03ff) == 1023.0f * ldexpf(1.0f, -24)); /* largest subnormal */
    assert_true(f16_to_float(0x0400) == ldexpf(1.0f, -14));           /* smallest normal */
    assert_true(f16_to_float(0x8000) == 0.0f && signbit(f16_to_float(0x8000)));
    /* finite checks: Inf and NaN in both formats are refused by st_elem */
    unsigned char b[2];
    int fin;
    const uint16_t bad[4] = {0x7f80, 0xff81, 0x7c00, 0xfe00};
    const int dt[4] = {ST_BF16, ST_BF16, ST_F16, ST_F16};
    for (int k = 0; k < 4; k++) {
        b[0] = (unsigned char)bad[k];
        b[1] = (unsigned char)(bad[k] >> 8);
        (void)st_elem(b, dt[k], 0, &fin);
        assert_false(fin);
    }
    b[0] = 0x80, b[1] = 0x3f;  /* BF16 1.0 */
    assert_true(st_elem(b, ST_BF16, 0, &fin) == 1.0f && fin);
    b[0] = 0x00, b[1] = 0x3c;  /* F16 1.0 */
    assert_true(st_elem(b, ST_F16, 0, &fin) == 1.0f && fin);
}

/* Greedy DFlash must give exactly the target-only greedy tokens. */
static void test_lossless_block_sizes(void **state) {
    (void)state;
    Model t, d;
    load_q3(Q3, &t, &d);
    static const int prompts[3][4] = {{5, 6, 7, 0}, {33, 34, 35, 36}, {3, 62, 1, 0}};
    static const int plen[3] = {3, 4, 3};
    static const int blocks[4] = {16, 8, 3, 1};
    int rounds_with_acceptance = 0;
    for (int pi = 0; pi < 3; pi++) {
        GenParams p = {0};
        p.max_new_tokens = 40;
        p.block_size = 1;
        GenResult ar = {0};
        assert_int_equal(ar_generate(&t, prompts[pi], plen[pi], &p, &ar), 0);
        assert_int_equal(ar.n_output, plen[pi] + 40);
        for (int bi = 0; bi < 4; bi++) {
            p.block_size = blocks[bi];
            GenResult r = {0};
            assert_int_equal(dflash_generate(blocks[bi] > 1 ? &d : NULL, &t, prompts[pi], plen[pi], &p, &r), 0);
            assert_int_equal(r.n_output, ar.n_output);
            assert_memory_equal(r.output_ids, ar.output_ids, sizeof(int) * (size_t)ar.n_output);
            for (int k = 0; k < r.n_rounds; k++) rounds_with_acceptance += r.rounds[k].acceptance_length > 0;
            gen_result_free(&r);
        }
        gen_result_free(&ar);
    }
    print_message("     rounds with accepted draft tokens: %d\n", rounds_with_acceptance);
    model_free(&t);
    model_free(&d);
}

/* the same values as F32 (the generator rounds to BF16, then writes F32,
 * same shards and index): the same weights, byte-identical traces (and
 * the F32 weights are used in place from the mapping) */
static int sh(const char *cmd) {
    int rc = system(cmd);
    return rc;
}

static void compare_dirs(const char *a, const char *b) {
    DIR *d = opendir(a);
    assert_non_null(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char pa[1200], pb[1200];
        snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
        size_t la = 0, lb = 0;
        char *xa = tu_read(pa, &la), *xb = tu_read(pb, &lb);
        if (!xb) fail_msg("%s: only in %s", e->d_name, a);
        /* the manifest's "argv" (the run's flags: other weight folders here) is not the trace's values */
        if (!strcmp(e->d_name, "trace.jsonl")) {
            char *x[2] = {xa, xb};
            for (int k = 0; k < 2; k++) {
                char *p = strstr(x[k], ",\"argv\":["), *q = p ? strstr(p, "]}") : NULL;
                if (q) memmove(p, q + 1, strlen(q + 1) + 1);
            }
            la = strlen(xa);
            lb = strlen(xb);
        }
        if (la != lb || memcmp(xa, xb, la) != 0) fail_msg("%s differs between %s and %s", e->d_name, a, b);
        free(xa);
        free(xb);
        files++;
    }
    closedir(d);
    assert_int_equal(files, tu_count_entries(b));
    assert_true(files > 100);
}

/* gen KIND OUT f32 (the same values as the set SET, written as F32) gives
 * the same weights and, at each of the block sizes, a byte-identical trace
 * and output; first_file is the target's first weight file */
static void f32_copy_same_trace(const char *kind, const char *Q3_, const char *first_file, const char *const *blocks,
                                int n_blocks) {
    char *tmp = tu_tmpdir();
    assert_non_null(tmp);
    char cmd[2000], set[600], leaf[200];
    snprintf(set, sizeof set, "%s/f32", tmp);
    snprintf(cmd, sizeof cmd, "./toy_weights/gen %s %s f32 > /dev/null", kind, set);
    assert_int_equal(sh(cmd), 0);
    /* the F32 copy: F32 files (shards behind the same index) */
    size_t len = 0;
    snprintf(leaf, sizeof leaf, "target/%s", first_file);
    char *hdr = tu_read(tu_path(set, leaf), &len);
    assert_non_null(hdr);
    assert_true(len > 200);
    assert_non_null(strstr(hdr + 8, "\"F32\""));
    assert_null(strstr(hdr + 8, "\"BF16\""));
    free(hdr);

    Model t1, d1, t2, d2;
    load_q3(Q3_, &t1, &d1);
    load_q3(set, &t2, &d2);
#ifdef DFLASH_DOUBLE
    assert_int_equal(t2.n_maps, 0);  /* make REAL=double: F32 is widened on load too */
#else
    assert_true(t2.n_maps > 0);  /* F32: used in place from the mapping */
#endif
    Arr a1[160], a2[160];
    const Model *m1[2] = {&t1, &d1}, *m2[2] = {&t2, &d2};
    for (int k = 0; k < 2; k++) {
        int n1 = model_arrays(m1[k], a1), n2 = model_arrays(m2[k], a2);
        assert_int_equal(n1, n2);
        for (int j = 0; j < n1; j++) assert_memory_equal(a1[j].p, a2[j].p, sizeof(real) * a1[j].n);
    }
    model_free(&t1);
    model_free(&d1);
    model_free(&t2);
    model_free(&d2);

    for (int k = 0; k < n_blocks; k++) {
        snprintf(cmd, sizeof cmd,
                 "./dflash --weights %s --ids 5,6,7 --max-new-tokens 12 --ignore-eos --block-size %s --trace %s/tb > %s/ob && "
                 "./dflash --target %s/target --draft %s/draft --ids 5,6,7 --max-new-tokens 12 --ignore-eos --block-size %s "
                 "--trace %s/tf > %s/of",
                 Q3_, blocks[k], tmp, tmp, set, set, blocks[k], tmp, tmp);
        assert_int_equal(sh(cmd), 0);
        compare_dirs(tu_path(tmp, "tb"), tu_path(tmp, "tf"));
        size_t l1, l2;
        char *o1 = tu_read(tu_path(tmp, "ob"), &l1), *o2 = tu_read(tu_path(tmp, "of"), &l2);
        assert_non_null(o1);
        assert_non_null(o2);
        assert_string_equal(o1, o2);
        free(o1);
        free(o2);
        snprintf(cmd, sizeof cmd, "rm -rf %s/tb %s/tf", tmp, tmp);
        assert_int_equal(sh(cmd), 0);
    }
    tu_rmtree(tmp);
    free(tmp);
}

static void test_f32_copy_same_trace(void **state) {
    (void)state;
    /* make test: the draft's own block 16; 3 too with DFLASH_TEST_LONG, as the layouts below (what
     * the loaders give is compared array by array above, whatever the block size) */
    static const char *const blocks[2] = {"16", "3"};
    f32_copy_same_trace("qwen3-layout", Q3, "model-00001-of-00002.safetensors", blocks, tu_quick() ? 1 : 2);
}

/* Output text. The set's tokenizer.json decodes: ids 0 1 2 are the
 * byte-level strings "The", "\xc4\xa0cat", "\xc4\xa0sat" ("\xc4\xa0" is
 * U+0120, GPT-2's stand-in for the space byte), 61 and 62 are "\xc3\x83"
 * (U+00C3, the byte 0xC3) and "\xc2\xa9" (U+00A9, the byte 0xA9), which
 * together are the UTF-8 of "é"; 3 is the added token "<|im_end|>".
 * Without tokenizer.json (and no vocab.txt) the output is the ids. */
static void test_cli_output_text_and_ids(void **state) {
    (void)state;
    char *tmp = tu_tmpdir();
    assert_non_null(tmp);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "./dflash --weights " Q3 " --ids 0,1,2,61,62,15,3,9 --max-new-tokens 0 > %s/o", tmp);
    assert_int_equal(sh(cmd), 0);
    char *o = tu_read(tu_path(tmp, "o"), NULL);
    assert_non_null(o);
    /* the newline token (15) printed escaped, as every control character of
     * decoded text is (issue 21); --raw-bytes prints it as it is */
    assert_true(strncmp(o, "The cat sat\xc3\xa9\\x0a<|im_end|> A\n", strlen("The cat sat\xc3\xa9\\x0a<|im_end|> A\n")) == 0);
    free(o);
    snprintf(cmd, sizeof cmd, "./dflash --weights " Q3 " --ids 0,1,2,61,62,15,3,9 --max-new-tokens 0 --raw-bytes > %s/o",
             tmp);
    assert_int_equal(sh(cmd), 0);
    o = tu_read(tu_path(tmp, "o"), NULL);
    assert_non_null(o);
    assert_true(strncmp(o, "The cat sat\xc3\xa9\n<|im_end|> A\n", strlen("The cat sat\xc3\xa9\n<|im_end|> A\n")) == 0);
    free(o);
    /* a lone 0xC3 (id 61 without its 0xA9) is not UTF-8: printed as \xc3,
     * as the explorer and figures show it; with --raw-bytes as the byte.
     * Split between two ids, 61 then 62 still give the whole "é". */
    snprintf(cmd, sizeof cmd, "./dflash --weights " Q3 " --ids 0,61,1,61,62 --max-new-tokens 0 > %s/o", tmp);
    assert_int_equal(sh(cmd), 0);
    o = tu_read(tu_path(tmp, "o"), NULL);
    assert_non_null(o);
    assert_true(strncmp(o, "The\\xc3 cat\xc3\xa9\n", strlen("The\\xc3 cat\xc3\xa9\n")) == 0);
    free(o);
    snprintf(cmd, sizeof cmd, "./dflash --weights " Q3 " --ids 0,61,1 --max-new-tokens 0 --raw-bytes > %s/o", tmp);
    assert_int_equal(sh(cmd), 0);
    o = tu_read(tu_path(tmp, "o"), NULL);
    assert_non_null(o);
    assert_true(strncmp(o, "The\xc3 cat\n", strlen("The\xc3 cat\n")) == 0);
    free(o);
    /* a copy without tokenizer.json: 40 tokens as ids; the text line is
     * the --print-ids line less a trailing stop id (3 or 4, from
     * generation_config.json) */
    snprintf(cmd, sizeof cmd, "cp -r " Q3 " %s/set && rm %s/set/target/tokenizer.json && "
             "./dflash --target %s/set/target --draft %s/set/draft --ids 5,6,7 --max-new-tokens 40 --print-ids > %s/o",
             tmp, tmp, tmp, tmp, tmp);
    assert_int_equal(sh(cmd), 0);
    o = tu_read(tu_path(tmp, "o"), NULL);
    assert_non_null(o);
    char *nl = strchr(o, '\n');
    assert_non_null(nl);
    *nl = 0;
    char *ids = nl + 1, *nl2 = strchr(ids, '\n');
    assert_non_null(nl2);
    *nl2 = 0;
    size_t tl = strlen(o), il = strlen(ids);
    assert_true(il >= tl);
    assert_memory_equal(o, ids, tl);
    const char *rest = ids + tl;
    assert_true(strcmp(rest, "") == 0 || strcmp(rest, " 3") == 0 || strcmp(rest, " 4") == 0);
    assert_true(strncmp(o, "5 6 7 ", 6) == 0);
    free(o);
    tu_rmtree(tmp);
    free(tmp);
}

/* GPT-2's byte table: the 68 bytes that are not printable Latin-1 map to
 * U+0100.. in byte order: 0x00 -> U+0100, 0x20 (space) -> U+0120,
 * 0x0a -> U+010A, 0x7f -> U+0121, 0xad -> U+0143; printable ones map to
 * themselves. */
static unsigned byte_cp(unsigned char b) {  /* tok_byte_char's character, as a code point */
    char ch[3];
    tok_byte_char(b, ch);
    unsigned char c0 = (unsigned char)ch[0];
    return c0 < 0x80 ? c0 : ((c0 & 0x1Fu) << 6) | ((unsigned char)ch[1] & 0x3Fu);
}

static void test_byte_table(void **state) {
    (void)state;
    assert_int_equal(byte_cp(0x00), 0x100);
    assert_int_equal(byte_cp(0x0a), 0x10a);
    assert_int_equal(byte_cp(0x20), 0x120);
    assert_int_equal(byte_cp(0x7f), 0x121);
    assert_int_equal(byte_cp(0xad), 0x143);
    assert_int_equal(byte_cp('A'), 'A');
    assert_int_equal(byte_cp(0xe9), 0xe9);
    int seen[0x200] = {0};
    for (int b = 0; b < 256; b++) {
        unsigned cp = byte_cp((unsigned char)b);
        assert_true(cp != 0x20 && cp < 0x144);  /* space itself is not a byte character; 68 past U+00FF */
        seen[cp]++;
    }
    for (unsigned cp = 0; cp < 0x200; cp++) assert_true(seen[cp] <= 1);  /* a bijection from the 256 bytes */
}

/* greedy DFlash == target-only greedy on SET at these block sizes, for each
 * prompt (up to 4 ids), max_new new tokens */
static void lossless_with(const char *set, const int (*prompts)[4], const int *plen, int n_prompts, int max_new,
                          const int *blocks, int n_blocks) {
    Model t, d;
    load_q3(set, &t, &d);
    for (int pi = 0; pi < n_prompts; pi++) {
        GenParams p = {0};
        p.max_new_tokens = max_new;
        p.block_size = 1;
        GenResult ar = {0};
        assert_int_equal(ar_generate(&t, prompts[pi], plen[pi], &p, &ar), 0);
        for (int bi = 0; bi < n_blocks; bi++) {
            p.block_size = blocks[bi];
            GenResult r = {0};
            assert_int_equal(dflash_generate(blocks[bi] > 1 ? &d : NULL, &t, prompts[pi], plen[pi], &p, &r), 0);
            assert_int_equal(r.n_output, ar.n_output);
            assert_memory_equal(r.output_ids, ar.output_ids, sizeof(int) * (size_t)ar.n_output);
            gen_result_free(&r);
        }
        gen_result_free(&ar);
    }
    model_free(&t);
    model_free(&d);
}

/* the published layouts' prompts, 20 new tokens (make test-long: 40) */
static void lossless_on(const char *set, const int *blocks, int n_blocks) {
    static const int prompts[3][4] = {{5, 6, 7, 0}, {33, 34, 35, 36}, {3, 62, 1, 0}};
    static const int plen[3] = {3, 4, 3};
    lossless_with(set, prompts, plen, 3, tu_quick() ? 20 : 40, blocks, n_blocks);
}

/* The other two sets too, at the same block sizes (16 is four times
 * their trained block; tests/test_core.c covers the random set at 1..8). */
static void test_lossless_other_sets(void **state) {
    (void)state;
    static const char *const SETS[2] = {"toy_weights/walkthrough", "toy_weights/random"};
    static const int prompts[2][4] = {{2, 3, 4, 0}, {12, 13, 0, 0}};
    static const int plen[2] = {3, 2};
    static const int blocks[4] = {16, 8, 3, 1};
    for (int si = 0; si < 2; si++) lossless_with(SETS[si], prompts, plen, 2, tu_quick() ? 6 : 12, blocks, 4);
}



/* ---------------------------------------------------------------------------
 * The sliding set (toy_weights/sliding): draft layer_types [sliding x 4,
 * full], sliding_window 6, block size 8 (NOTES.md, "Sliding-window draft
 * layers").
 */
#define SL "toy_weights/sliding"
#define LL "toy_weights/llama"

static void test_sliding_as_configured(void **state) {
    (void)state;
    Model t, d;
    load_q3(SL, &t, &d);
    assert_int_equal(d.cfg.block_size, 6);
    assert_int_equal(d.cfg.num_hidden_layers, 5);
    for (int l = 0; l < 5; l++) {
        assert_int_equal(d.cfg.layer_window[l], l < 4 ? 6 : 0);
        assert_int_equal(d.cfg.layer_causal[l], l < 4);
    }
    for (int l = 0; l < t.cfg.num_hidden_layers; l++) assert_int_equal(t.cfg.layer_window[l], 0);
    model_free(&t);
    model_free(&d);
}

/* tu_config(draft) with extra keys before its closing brace */
static int parse_with(Config *c, int draft, const char *extra) {
    char text[2000];
    const char *base = tu_config(draft);
    snprintf(text, sizeof text, "%.*s,%s}", (int)strlen(base) - 1, base, extra);
    return config_parse(c, "x/config.json", text, strlen(text), draft);
}

/* The keys: layer_types wins; without it transformers' Qwen3Config makes
 * layer i sliding when use_sliding_window and i >= max_window_layers;
 * a sliding layer without use_sliding_window (transformers then drops the
 * window), and a sliding target, are refused, naming the key. */
static void test_sliding_config_keys(void **state) {
    (void)state;
    Config c;
    assert_int_equal(parse_with(&c, 1, "\"layer_types\":[\"sliding_attention\"],\"use_sliding_window\":true,"
                                       "\"sliding_window\":3,\"max_window_layers\":1"), 0);
    assert_int_equal(c.layer_window[0], 3);
    assert_int_equal(c.layer_causal[0], 1);
    assert_int_equal(parse_with(&c, 1, "\"use_sliding_window\":true,\"sliding_window\":3,\"max_window_layers\":0"), 0);
    assert_int_equal(c.layer_window[0], 3);
    assert_int_equal(parse_with(&c, 1, "\"use_sliding_window\":true,\"sliding_window\":3,\"max_window_layers\":1"), 0);
    assert_int_equal(c.layer_window[0], 0);
    assert_int_equal(parse_with(&c, 1, "\"use_sliding_window\":false,\"sliding_window\":3"), 0);
    assert_int_equal(c.layer_window[0], 0);
    assert_int_equal(parse_with(&c, 1, "\"layer_types\":[\"sliding_attention\"],\"sliding_window\":3"), -1);
    assert_non_null(strstr(dflash_errmsg, "\"layer_types\"[0] is \"sliding_attention\" but use_sliding_window"));
    assert_int_equal(parse_with(&c, 1, "\"layer_types\":[\"sliding_attention\"],\"use_sliding_window\":true"), -1);
    assert_non_null(strstr(dflash_errmsg, "missing field \"sliding_window\""));
    assert_int_equal(parse_with(&c, 1, "\"layer_types\":[\"chunked_attention\"]"), -1);
    assert_non_null(strstr(dflash_errmsg, "\"layer_types\"[0]: expected \"full_attention\" or \"sliding_attention\""));
    assert_non_null(strstr(dflash_errmsg, "\"chunked_attention\""));
    assert_int_equal(parse_with(&c, 0, "\"use_sliding_window\":true,\"sliding_window\":3"), -1);
    assert_non_null(strstr(dflash_errmsg, "\"use_sliding_window\": expected false (sliding-window targets"));
    assert_int_equal(parse_with(&c, 0, "\"layer_types\":[\"sliding_attention\"]"), -1);
    assert_non_null(strstr(dflash_errmsg, "sliding-window targets are not"));
}

/* A hook that checks every draft attn_weights against the mask rule, written
 * here from the training code's definition (SpecForge, create_dflash_sdpa_mask
 * with sliding_window; see NOTES.md) rather than from attention(): a block
 * query at offset q of the block that starts at position `start` sees the
 * context keys k < start with k >= start + q - (w - 1), and the block keys
 * at offsets j <= q (the block is not windowed there: the same keys as the
 * positional window when B <= w, as here). mode 1: flash_attention_2's
 * two-sided window |k - (start + q)| < w, non-causal; mode 2: every key.
 * Allowed weights are > 0, the others exactly 0. */
typedef struct { const Config *dc; int mode; int checked, masked; } MaskCheck;

static int mask_hook(void *ctx, const TraceHand *h) {
    MaskCheck *m = ctx;
    int l;
    if (strcmp(h->ph.phase, "draft") != 0 || sscanf(strchr(h->name, '.') + 1, "layers.%d.", &l) != 1 ||
        !strstr(h->name, ".self_attn.attn_weights"))
        return 0;
    const TraceDims *dm = h->dims;
    int B = dm->T, S = dm->S, start = S - B, w = m->dc->layer_window[l], H = m->dc->num_attention_heads;
    const real *a = h->buffer;
    for (int hh = 0; hh < H; hh++)
        for (int q = 0; q < B; q++)
            for (int k = 0; k < S; k++) {
                int p = start + q, ok;
                if (w == 0 || m->mode == 2) ok = 1;
                else if (m->mode == 1) ok = k > p - w && k < p + w;
                else ok = k < start ? k >= start + q - (w - 1) : k - start <= q;
                real x = a[((size_t)hh * B + q) * S + k];
                if (ok ? !(x > 0) : x != 0) {
                    dflash_set_error("%s head %d query %d key %d: %g, expected %s", h->name, hh, q, k, (double)x,
                                     ok ? "> 0" : "0");
                    return -1;
                }
                m->checked++;
                m->masked += !ok;
            }
    return 0;
}

static void test_sliding_attention_weights(void **state) {
    (void)state;
    Model t, d;
    load_q3(SL, &t, &d);
    static const int prompt[12] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17};
    for (int mode = 0; mode < 3; mode++) {
        for (int l = 0; l < d.cfg.num_hidden_layers; l++) {
            d.cfg.layer_causal[l] = mode == 0 && l < 4;
            d.cfg.layer_window[l] = mode == 2 || l == 4 ? 0 : 6;
        }
        MaskCheck m = {&d.cfg, mode, 0, 0};
        TraceHook hook = {mask_hook, &m};
        GenParams p = {0};
        p.max_new_tokens = 16;
        p.block_size = 6;  /* B <= w: see mask_hook */
        p.trace = &hook;
        GenResult r = {0};
        if (dflash_generate(&d, &t, prompt, 12, &p, &r) != 0) fail_msg("mode %d: %s", mode, dflash_errmsg);
        assert_true(m.checked > 0);
        if (mode < 2) assert_true(m.masked > 0); else assert_int_equal(m.masked, 0);
        gen_result_free(&r);
    }
    model_free(&t);
    model_free(&d);
}

/* The window changes the draft's proposals within a default-length run
 * (16 new tokens), and every way of running the layers stays lossless. */
static void test_sliding_window_changes_proposals(void **state) {
    (void)state;
    Model t, d;
    load_q3(SL, &t, &d);
    static const int prompt[3] = {0, 1, 2};
    GenParams p = {0};
    p.max_new_tokens = 16;
    p.block_size = 1;
    GenResult ar = {0}, r[2] = {{0}};
    assert_int_equal(ar_generate(&t, prompt, 3, &p, &ar), 0);
    p.block_size = 6;
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            for (int l = 0; l < d.cfg.num_hidden_layers; l++) d.cfg.layer_window[l] = d.cfg.layer_causal[l] = 0;
        assert_int_equal(dflash_generate(&d, &t, prompt, 3, &p, &r[k]), 0);
        assert_int_equal(r[k].n_output, ar.n_output);
        assert_memory_equal(r[k].output_ids, ar.output_ids, sizeof(int) * (size_t)ar.n_output);
    }
    int differ = 0;
    for (int i = 0; i < r[0].n_rounds && i < r[1].n_rounds; i++)
        differ += memcmp(r[0].rounds[i].block + 1, r[1].rounds[i].block + 1, sizeof(int) * 5) != 0;
    assert_true(differ > 0);
    print_message("     rounds whose proposals the window changed: %d of %d\n", differ, r[0].n_rounds);
    gen_result_free(&r[0]);
    gen_result_free(&r[1]);
    gen_result_free(&ar);
    model_free(&t);
    model_free(&d);
}


/* ---------------------------------------------------------------------------
 * The llama set (toy_weights/llama): a LlamaForCausalLM target.
 */

/* inv_freq with rope_scaling llama3 (factor 8, low 1, high 4, original 8192),
 * theta 500000, d = 16: plain inv_freq_i = theta^(-i/8); wavelength
 * 2 pi / inv_freq_i. Below 8192 / 4 = 2048 (i = 0..3) it is kept, above
 * 8192 (i = 5..7) divided by 8 (exact in binary), between (i = 4: 4493) blended:
 * (1 - s) f / 8 + s f with s = (8192 / wavelength - 1) / 3, computed here in
 * double from the formula. */
static void test_llama_layout(void **state) {
    (void)state;
    Model t, d;
    load_q3(LL, &t, &d);
    assert_true(t.cfg.llama);
    assert_false(d.cfg.llama);
    assert_int_equal(t.cfg.head_dim, 16);  /* no head_dim key: 64 / 4 */
    assert_false(t.tied);
    assert_ptr_not_equal(t.lm_head, t.embed_tokens);
    for (int l = 0; l < t.cfg.num_hidden_layers; l++) {
        assert_null(t.layers[l].q_norm);
        assert_null(t.layers[l].k_norm);
    }
    for (int l = 0; l < d.cfg.num_hidden_layers; l++) assert_non_null(d.layers[l].q_norm);
    /* dflash bench's read roofline reads what a forward reads: per layer 2
     * norms and 7 projections, no q/k norms, then the final norm and lm_head */
    static Span sp[4096];
    const Config *c = &t.cfg;
    size_t D = (size_t)c->hidden_size, I = (size_t)c->intermediate_size, qd = (size_t)c->num_attention_heads * 16;
    size_t kvd = (size_t)c->num_key_value_heads * 16, want = 0;
    want = (size_t)c->num_hidden_layers * (2 * D + 2 * qd * D + 2 * kvd * D + 3 * I * D) + D + (size_t)c->vocab_size * D;
    int n_sp = forward_spans(&t, sp, 4096);
    assert_int_equal(n_sp, c->num_hidden_layers * 9 + 2);
    size_t got = 0;
    for (int i = 0; i < n_sp; i++) {
        assert_non_null(sp[i].p);
        got += sp[i].n;
    }
    assert_true(got == want);
    assert_int_equal(t.cfg.n_eos, 2);
    assert_int_equal(d.cfg.block_size, 10);
    real plain[8];
    rope_inv_freq(plain, 16, 500000.0);
    const Model *ms[2] = {&t, &d};
    for (int k = 0; k < 2; k++) {
        const real *f = ms[k]->inv_freq;
        for (int i = 0; i < 4; i++) assert_true(f[i] == plain[i]);
        for (int i = 5; i < 8; i++) assert_true(f[i] == plain[i] / 8);
        double wl = 2 * 3.14159265358979323846 / (double)plain[4], sm = (8192 / wl - 1) / 3;
        double want = (1 - sm) * (double)plain[4] / 8 + sm * (double)plain[4];
        assert_true(wl > 2048 && wl < 8192);
        assert_true(fabs((double)f[4] - want) <= 1e-6 * want);
        assert_true(f[4] > plain[4] / 8 && f[4] < plain[4]);
    }
    model_free(&t);
    model_free(&d);
}

/* ---------------------------------------------------------------------------
 * The sliding and llama sets alike: greedy DFlash gives the target-only
 * tokens at each block size (the draft's own, below and above it, 1), and an
 * F32 copy of the set (its shard named here) gives byte-identical traces.
 */
static const struct {
    const char *name, *dir, *shard;
    int blocks[5];                 /* lossless_on's block sizes */
    const char *f32_blocks[2];     /* the F32 copy's runs (make test: the first) */
} LAYOUTS[] = {
    {"sliding", SL, "model-00001-of-00002.safetensors", {16, 8, 6, 3, 1}, {"6", "8"}},
    {"llama", LL, "model.safetensors", {16, 10, 5, 2, 1}, {"10", "4"}},
};

static void test_layouts_lossless(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++) lossless_on(LAYOUTS[i].dir, LAYOUTS[i].blocks, 5);
}

static void test_layouts_f32_copy_same_trace(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++)
        f32_copy_same_trace(LAYOUTS[i].name, LAYOUTS[i].dir, LAYOUTS[i].shard, LAYOUTS[i].f32_blocks, tu_quick() ? 1 : 2);
}

/* What is still refused names the key and the value: other RoPE scalings;
 * a Llama config over Qwen3 weights (q_norm / k_norm present). */
static void test_llama_refusals(void **state) {
    (void)state;
    Config c;
    assert_int_equal(parse_with(&c, 0, "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0}"), -1);
    assert_non_null(strstr(dflash_errmsg, "\"rope_scaling\": expected null or rope_type \"llama3\""));
    assert_non_null(strstr(dflash_errmsg, "\"yarn\""));
    assert_int_equal(parse_with(&c, 0, "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0}"), -1);
    assert_non_null(strstr(dflash_errmsg, "rope_scaling: missing field \"low_freq_factor\""));
    assert_int_equal(parse_with(&c, 0, "\"pretraining_tp\":2"), -1);
    assert_non_null(strstr(dflash_errmsg, "\"pretraining_tp\": expected 1"));
    char *tmp = tu_tmpdir();
    assert_non_null(tmp);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cp -r " Q3 "/target %s/t && sed -i 's/Qwen3ForCausalLM/LlamaForCausalLM/' %s/t/config.json",
             tmp, tmp);
    assert_int_equal(sh(cmd), 0);
    Model m;
    assert_int_equal(model_load(&m, tu_path(tmp, "t"), 0), -1);
    assert_non_null(strstr(dflash_errmsg, "LlamaForCausalLM"));
    assert_non_null(strstr(dflash_errmsg, "self_attn.q_norm.weight"));
    tu_rmtree(tmp);
    free(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_as_configured),
        cmocka_unit_test(test_stop_id_fallbacks),
        cmocka_unit_test(test_weights_are_bf16_values),
        cmocka_unit_test(test_widening_bit_patterns),
        cmocka_unit_test(test_lossless_block_sizes),
        cmocka_unit_test(test_lossless_other_sets),
        cmocka_unit_test(test_f32_copy_same_trace),
        cmocka_unit_test(test_cli_output_text_and_ids),
        cmocka_unit_test(test_byte_table),
        cmocka_unit_test(test_sliding_as_configured),
        cmocka_unit_test(test_sliding_config_keys),
        cmocka_unit_test(test_sliding_attention_weights),
        cmocka_unit_test(test_sliding_window_changes_proposals),
        cmocka_unit_test(test_llama_layout),
        cmocka_unit_test(test_layouts_lossless),
        cmocka_unit_test(test_layouts_f32_copy_same_trace),
        cmocka_unit_test(test_llama_refusals),
    };
    return cmocka_run_group_tests_name("layouts: qwen3-layout (BF16, shards, tied, block 16), sliding, llama", tests,
                                       NULL, NULL);
}
