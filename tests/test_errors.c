/* tests/test_errors.c - every bad input gets a clear error (issue #6).
 *
 * Each row of the tables below builds one bad input in a fresh temp
 * directory (a tiny weight set written byte by byte by testutil.h, then
 * edited), feeds it to the loader or to the built ./dflash, and checks:
 *   - the call fails: -1 from the library, exit status 2 from the program;
 *   - the message is one line and names the offending item (file, field,
 *     tensor, word or flag) and what was found;
 *   - the program printed nothing on stdout and left no output behind
 *     (no trace directory, no .partial / .old sibling, no text trace).
 * A few rows are accepted inputs (status 0): they show that the rejections
 * above are about the edit, not about the tiny set, and pin the decisions
 * (hidden_size != heads x head_dim is accepted; no "<mask>" check without a
 * draft).
 *
 * The program is run with fork/exec as ./dflash (the Makefile builds it
 * first); `make sanitize` runs this file from build/san/, where ./dflash is
 * the ASan+UBSan build, so a sanitizer report fails the row. */
#include "dflash.c"
#include "formats/load.c"
#include "trace.h"
#include "tests/testutil.h"

#include <signal.h>
#include <sys/wait.h>

/* ---- editing a weight set ------------------------------------------------ */

/* Replace the first `from` in s by `to` (fails the test when absent). */
static char *replace_first(const char *s, size_t len, const char *from, const char *to, size_t *out_len) {
    const char *at = NULL;
    size_t fl = strlen(from), tl = strlen(to);
    for (size_t i = 0; i + fl <= len && !at; i++)
        if (memcmp(s + i, from, fl) == 0) at = s + i;
    if (!at) fail_msg("edit: \"%s\" not found", from);
    size_t pre = (size_t)(at - s);
    char *r = malloc(len - fl + tl + 1);
    assert_non_null(r);
    memcpy(r, s, pre);
    memcpy(r + pre, to, tl);
    memcpy(r + pre + tl, at + fl, len - pre - fl);
    *out_len = len - fl + tl;
    r[*out_len] = 0;
    return r;
}

static void edit_text(const char *path, const char *from, const char *to) {
    size_t len = 0, nl;
    char *s = tu_read(path, &len);
    assert_non_null(s);
    char *r = replace_first(s, len, from, to, &nl);
    assert_int_equal(tu_write(path, r, nl), 0);
    free(s);
    free(r);
}

/* A safetensors file from its parts; hlen_field < 0: the true header length. */
static void st_write(const char *path, const char *header, size_t hl, const void *data, size_t dl, int64_t hlen_field) {
    unsigned char len8[8];
    uint64_t h = hlen_field < 0 ? (uint64_t)hl : (uint64_t)hlen_field;
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(h >> (8 * i));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(len8, 1, 8, f), 8);
    if (hl) assert_int_equal(fwrite(header, 1, hl, f), hl);
    if (dl) assert_int_equal(fwrite(data, 1, dl, f), dl);
    assert_int_equal(fclose(f), 0);
}

/* Edit a safetensors file: replace `from` by `to` in its header (from may be
 * NULL), append `append` zero bytes to the data; the length field follows. */
static void st_edit(const char *path, const char *from, const char *to, size_t append) {
    size_t len = 0;
    char *s = tu_read(path, &len);
    assert_non_null(s);
    assert_true(len >= 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (unsigned char)s[i];
    size_t nl = (size_t)hl;
    char *h = from ? replace_first(s + 8, (size_t)hl, from, to, &nl) : NULL;
    size_t dl = len - 8 - (size_t)hl;
    char *data = calloc(dl + append + 1, 1);
    assert_non_null(data);
    memcpy(data, s + 8 + hl, dl);
    st_write(path, h ? h : s + 8, nl, data, dl + append, -1);
    free(h);
    free(data);
    free(s);
}

/* Overwrite the 4 bytes at data-section offset `at` with float x. */
static void st_poke(const char *path, size_t at, float x) {
    size_t len = 0;
    char *s = tu_read(path, &len);
    assert_non_null(s);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (unsigned char)s[i];
    memcpy(s + 8 + hl + at, &x, 4);
    assert_int_equal(tu_write(path, s, len), 0);
    free(s);
}

/* ---- loader rows: model_load / vocab_load / check_* called directly ----- */

typedef enum { RUN_TARGET, RUN_DRAFT, RUN_VOCAB, RUN_CHECK_VOCAB, RUN_PAIR, RUN_PROMPT } RunKind;

typedef struct {
    const char *name;
    RunKind run;
    const char *file;               /* in the set: edited by from -> to */
    const char *from, *to;          /* safetensors files: edits the header */
    void (*make)(const char *set);  /* or a builder of its own */
    const char *prompt;             /* RUN_PROMPT */
    const char *want[4];            /* substrings of dflash_errmsg */
} LoadCase;

#define TST "target/model.safetensors"
#define DST "draft/model.safetensors"
#define TCFG "target/config.json"
#define DCFG "draft/config.json"

/* custom builders (set = the weight set's directory) */
static const char *P(const char *set, const char *rel) { return tu_path(set, rel); }
static void mk_st_short(const char *set) { assert_int_equal(tu_write(P(set, TST), "\x10\0\0", 3), 0); }
static void mk_st_empty(const char *set) { assert_int_equal(tu_write(P(set, TST), "", 0), 0); }
static void mk_st_hlen_past_end(const char *set) { st_write(P(set, TST), "{}", 2, NULL, 0, 1000); }
static void mk_st_hlen_huge(const char *set) { st_write(P(set, TST), "{}", 2, NULL, 0, (int64_t)1 << 40); }
static void mk_st_not_json(const char *set) { st_write(P(set, TST), "hello, world", 12, NULL, 0, -1); }
static void mk_st_hlen_zero(const char *set) { st_write(P(set, TST), "", 0, "abcd", 4, -1); }
static void mk_st_array(const char *set) { st_write(P(set, TST), "[1, 2]", 6, NULL, 0, -1); }
static void mk_st_trailing_text(const char *set) { st_write(P(set, TST), "{} x", 4, NULL, 0, -1); }
static void mk_st_unterminated(const char *set) { st_write(P(set, TST), "{\"__metadata__\":{}", 18, NULL, 0, -1); }
static void mk_st_deep(const char *set) {
    char h[200];
    int n = 0;
    for (int i = 0; i < 40; i++) h[n++] = '[';
    for (int i = 0; i < 40; i++) h[n++] = ']';
    st_write(P(set, TST), h, (size_t)n, NULL, 0, -1);
}
static void mk_st_bad_utf8(const char *set) { st_edit(P(set, TST), "\"lm_head.weight\"", "\"lm_head.\xff\xfe\"", 0); }
static void mk_st_nan(const char *set) { st_poke(P(set, TST), 224 + 4 * 10, NAN); }         /* q_proj[10] */
static void mk_st_inf(const char *set) { st_poke(P(set, DST), 2400 + 4 * 3, -INFINITY); }   /* fc[3] */
static void mk_st_hole(const char *set) {
    st_edit(P(set, TST), "\"data_offsets\":[2624,2816]", "\"data_offsets\":[2656,2848]", 32);
}
static void mk_st_trailing(const char *set) { st_edit(P(set, TST), NULL, NULL, 4); }
static void mk_st_missing_file(const char *set) { assert_int_equal(unlink(P(set, TST)), 0); }
static void mk_st_directory(const char *set) {
    assert_int_equal(unlink(P(set, TST)), 0);
    assert_int_equal(mkdir(P(set, TST), 0755), 0);
}
static void mk_fifo(const char *path) {
    unlink(path);
    assert_int_equal(mkfifo(path, 0644), 0);
}
static void mk_st_fifo(const char *set) { mk_fifo(P(set, TST)); }
static void mk_cfg_fifo(const char *set) { mk_fifo(P(set, TCFG)); }
static void mk_cfg_bom(const char *set) {
    size_t len = 0;
    char *s = tu_read(P(set, TCFG), &len), *b = malloc(len + 4);
    assert_non_null(s);
    assert_non_null(b);
    memcpy(b, "\xEF\xBB\xBF", 3);
    memcpy(b + 3, s, len);
    assert_int_equal(tu_write(P(set, TCFG), b, len + 3), 0);
    free(s);
    free(b);
}
static void mk_cfg_empty(const char *set) { tu_write_text(P(set, TCFG), ""); }
static void mk_cfg_not_json(const char *set) { tu_write_text(P(set, TCFG), "{hidden_size: 8}"); }
static void mk_cfg_array(const char *set) { tu_write_text(P(set, TCFG), "[]"); }
static void mk_cfg_missing(const char *set) { assert_int_equal(unlink(P(set, TCFG)), 0); }
static void mk_cfg_nul(const char *set) { assert_int_equal(tu_write(P(set, TCFG), "{\"a\":\0}", 7), 0); }
static void mk_vocab(const char *set, const char *text) { tu_write_text(P(set, "vocab.txt"), text); }
static void mk_vocab_empty(const char *set) { mk_vocab(set, ""); }
static void mk_vocab_dup(const char *set) { mk_vocab(set, "a\nb\na\n.\n<eos>\n<mask>\n"); }
static void mk_vocab_7(const char *set) { mk_vocab(set, "a\nb\nc\n.\n<eos>\n<mask>\nd\n"); }
static void mk_vocab_5(const char *set) { mk_vocab(set, "a\nb\nc\n.\n<mask>\n"); }
static void mk_vocab_no_mask(const char *set) { mk_vocab(set, "a\nb\nc\n.\n<eos>\nmask\n"); }
static void mk_vocab_mask_moved(const char *set) { mk_vocab(set, "a\nb\nc\n.\n<mask>\n<eos>\n"); }
static void mk_vocab_blank(const char *set) { mk_vocab(set, "a\nb\n\n.\n<eos>\n<mask>\n"); }
static void mk_vocab_space(const char *set) { mk_vocab(set, "a\nb c\nc\n.\n<eos>\n<mask>\n"); }
static void mk_vocab_utf8(const char *set) { mk_vocab(set, "a\nb\n\xc3\x28\n.\n<eos>\n<mask>\n"); }
static void mk_vocab_ctrl(const char *set) { mk_vocab(set, "a\nb\nc\x01\n.\n<eos>\n<mask>\n"); }
static void mk_vocab_nul(const char *set) {
    static const char text[] = "a\nb\0x\nc\n.\n<eos>\n<mask>\n";
    assert_int_equal(tu_write(P(set, "vocab.txt"), text, sizeof text - 1), 0);
}
/* 2 draft layers over 1 target layer and no target_layer_ids: the
 * reference's default (build_target_layer_ids) gives [1, -2] */
static void mk_default_layer_ids(const char *set) {
    edit_text(P(set, DCFG), ",\"target_layer_ids\":[0]", "");
    edit_text(P(set, DCFG), "\"num_hidden_layers\":1", "\"num_hidden_layers\":2");
}
static void mk_vocab_missing(const char *set) { assert_int_equal(unlink(P(set, "vocab.txt")), 0); }
static void mk_vocab_bom(const char *set) { mk_vocab(set, "\xEF\xBB\xBF" "a\nb\nc\n.\n<eos>\n<mask>\n"); }
static void mk_vocab_dir(const char *set) {
    assert_int_equal(unlink(P(set, "vocab.txt")), 0);
    assert_int_equal(mkdir(P(set, "vocab.txt"), 0755), 0);
}

/* ---- sharded targets (model.safetensors.index.json, issue 13) */

/* The tiny target split in two shards behind an index: s1 holds tensors
 * 0..6 (embed_tokens .. o_proj), s2 holds 7..13 (q_norm .. lm_head).
 * extra_in_s2: s2 also holds tensor 0; drop_from_s2: s2 leaves out its
 * last tensor (lm_head) though the index still names it. */
static void mk_sharded(const char *set, int extra_in_s2, int drop_from_s2) {
    TuModel m;
    tu_model_tensors(&m, 0);
    assert_int_equal(unlink(P(set, TST)), 0);
    tu_write_safetensors(P(set, "target/s1.safetensors"), m.t, 7);
    TuTensor s2[8];
    int n2 = 0;
    if (extra_in_s2) s2[n2++] = m.t[0];
    for (int k = 7; k < m.n - drop_from_s2; k++) s2[n2++] = m.t[k];
    tu_write_safetensors(P(set, "target/s2.safetensors"), s2, n2);
    char idx[4096];
    int o = snprintf(idx, sizeof idx, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
    for (int k = 0; k < m.n; k++)
        o += snprintf(idx + o, sizeof idx - (size_t)o, "%s\"%s\":\"%s\"", k ? "," : "", m.names[k], k < 7 ? "s1.safetensors" : "s2.safetensors");
    snprintf(idx + o, sizeof idx - (size_t)o, "}}");
    tu_write_text(P(set, "target/model.safetensors.index.json"), idx);
    tu_model_free(&m);
}
static void mk_shard_missing(const char *set) { mk_sharded(set, 0, 0); assert_int_equal(unlink(P(set, "target/s2.safetensors")), 0); }
static void mk_shard_twice(const char *set) { mk_sharded(set, 1, 0); }
static void mk_shard_index_names_absent(const char *set) { mk_sharded(set, 0, 1); }
static void mk_shard_index_unknown(const char *set) {
    mk_sharded(set, 0, 0);
    edit_text(P(set, "target/model.safetensors.index.json"), "\"model.norm.weight\"", "\"model.norm.bias\"");
}
static void mk_shard_index_path(const char *set) {
    mk_sharded(set, 0, 0);
    edit_text(P(set, "target/model.safetensors.index.json"), "\"s2.safetensors\"", "\"../s2.safetensors\"");
}
static void mk_shard_index_no_map(const char *set) {
    mk_sharded(set, 0, 0);
    edit_text(P(set, "target/model.safetensors.index.json"), "\"weight_map\"", "\"weights\"");
}
/* tied, and the index (not only the file) names lm_head.weight */
static void mk_shard_tied_index(const char *set) {
    mk_sharded(set, 0, 0);
    edit_text(P(set, TCFG), "\"tie_word_embeddings\":false", "\"tie_word_embeddings\":true");
}

/* q_proj's first entry, as tu_write_safetensors writes it */
#define QP "\"shape\":[8,8],\"data_offsets\":[224,480]"

static const LoadCase LOAD_CASES[] = {
    /* ---- safetensors */
    {"st: file shorter than 8 bytes", RUN_TARGET, 0, 0, 0, mk_st_short, 0, {TST, "8-byte header length", "3 bytes"}},
    {"st: empty file", RUN_TARGET, 0, 0, 0, mk_st_empty, 0, {TST, "8-byte header length", "0 bytes"}},
    {"st: header length past the end", RUN_TARGET, 0, 0, 0, mk_st_hlen_past_end, 0, {TST, "header length 1000", "larger than the rest of the file"}},
    {"st: header length above the limit", RUN_TARGET, 0, 0, 0, mk_st_hlen_huge, 0, {TST, "header length 1099511627776", "above the limit"}},
    {"st: header length 0", RUN_TARGET, 0, 0, 0, mk_st_hlen_zero, 0, {TST, "(header)", "unexpected end"}},
    {"st: header not JSON", RUN_TARGET, 0, 0, 0, mk_st_not_json, 0, {TST, "(header): invalid JSON at byte 0"}},
    {"st: header not UTF-8", RUN_TARGET, 0, 0, 0, mk_st_bad_utf8, 0, {TST, "(header)", "invalid UTF-8"}},
    {"st: header an array", RUN_TARGET, 0, 0, 0, mk_st_array, 0, {TST, "expected a JSON object", "an array of 2 items"}},
    {"st: header with text after the JSON", RUN_TARGET, 0, 0, 0, mk_st_trailing_text, 0, {TST, "trailing characters"}},
    {"st: header JSON unterminated", RUN_TARGET, 0, 0, 0, mk_st_unterminated, 0, {TST, "(header): invalid JSON"}},
    {"st: header nested too deeply", RUN_TARGET, 0, 0, 0, mk_st_deep, 0, {TST, "nested too deeply"}},
    {"st: duplicate tensor name", RUN_TARGET, TST, "\"model.norm.weight\"", "\"lm_head.weight\"", 0, 0, {TST, "duplicate key \"lm_head.weight\""}},
    {"st: unknown dtype", RUN_TARGET, TST, "\"F32\"", "\"Q4_K\"", 0, 0, {TST, "model.embed_tokens.weight", "\"dtype\"", "\"Q4_K\" (not a safetensors dtype)"}},
    {"st: unsupported dtype I32", RUN_TARGET, TST, "\"F32\"", "\"I32\"", 0, 0, {TST, "model.embed_tokens.weight", "expected \"F32\", \"BF16\" or \"F16\"", "\"I32\" (a safetensors dtype this program does not read)"}},
    {"st: BF16 header over F32 data (span twice the BF16 size)", RUN_TARGET, TST, "\"F32\"", "\"BF16\"", 0, 0, {TST, "model.embed_tokens.weight", "expected a span of 96 bytes (shape [6, 8] x 2-byte BF16)", "got 192"}},
    {"st: F16 header over F32 data", RUN_DRAFT, DST, "\"F32\"", "\"F16\"", 0, 0, {DST, "x 2-byte F16", "got 32"}},
    {"shards: a shard the index lists is missing", RUN_TARGET, 0, 0, 0, mk_shard_missing, 0, {"target/s2.safetensors", "cannot open", "listed in model.safetensors.index.json"}},
    {"shards: a tensor in two shards", RUN_TARGET, 0, 0, 0, mk_shard_twice, 0, {"target/s2.safetensors", "\"model.embed_tokens.weight\" is also in s1.safetensors", "exactly one shard"}},
    {"shards: the index names a tensor no shard holds", RUN_TARGET, 0, 0, 0, mk_shard_index_names_absent, 0, {"target/s2.safetensors", "missing tensor \"lm_head.weight\"", "index.json puts it in this shard"}},
    {"shards: the index names a tensor not in the model", RUN_TARGET, 0, 0, 0, mk_shard_index_unknown, 0, {"model.safetensors.index.json", "\"weight_map\"", "unexpected tensor \"model.norm.bias\""}},
    {"shards: a shard name with a path", RUN_TARGET, 0, 0, 0, mk_shard_index_path, 0, {"model.safetensors.index.json", "k_norm.weight", "a file in this folder", "\"../s2.safetensors\""}},
    {"shards: index without weight_map", RUN_TARGET, 0, 0, 0, mk_shard_index_no_map, 0, {"model.safetensors.index.json", "missing field \"weight_map\""}},
    {"shards: tied model whose index names lm_head.weight", RUN_TARGET, 0, 0, 0, mk_shard_tied_index, 0, {"model.safetensors.index.json", "tie_word_embeddings: true", "the index also names \"lm_head.weight\""}},
    {"st: dtype not a string", RUN_TARGET, TST, "\"F32\"", "32", 0, 0, {TST, "model.embed_tokens.weight", "\"dtype\"", "got 32"}},
    {"st: shape disagrees with config.json", RUN_TARGET, TST, QP, "\"shape\":[8,9],\"data_offsets\":[224,480]", 0, 0, {TST, "model.layers.0.self_attn.q_proj.weight", "expected [8, 8] (from config.json), got [8, 9]"}},
    {"st: shape with one axis too few", RUN_TARGET, TST, QP, "\"shape\":[64],\"data_offsets\":[224,480]", 0, 0, {TST, "q_proj.weight", "got [64]"}},
    {"st: shape with a huge float", RUN_TARGET, TST, QP, "\"shape\":[1e300,8],\"data_offsets\":[224,480]", 0, 0, {TST, "q_proj.weight", "got [1e+300, 8]"}},
    {"st: shape negative", RUN_TARGET, TST, QP, "\"shape\":[-8,8],\"data_offsets\":[224,480]", 0, 0, {TST, "q_proj.weight", "got [-8, 8]"}},
    {"st: shape not a list", RUN_TARGET, TST, QP, "\"shape\":\"8x8\",\"data_offsets\":[224,480]", 0, 0, {TST, "q_proj.weight", "\"shape\"", "the string \"8x8\""}},
    {"st: size != elements x dtype size", RUN_TARGET, TST, "[0,192]", "[0,188]", 0, 0, {TST, "model.embed_tokens.weight", "expected a span of 192 bytes", "got 188"}},
    {"st: offsets overlapping", RUN_TARGET, TST, "[192,224]", "[160,192]", 0, 0, {TST, "model.layers.0.input_layernorm.weight", "overlaps", "model.embed_tokens.weight"}},
    {"st: offsets leaving a hole", RUN_TARGET, 0, 0, 0, mk_st_hole, 0, {TST, "hole of 32 bytes before tensor \"lm_head.weight\""}},
    {"st: offsets past the end", RUN_TARGET, TST, "[2624,2816]", "[2656,2848]", 0, 0, {TST, "lm_head.weight", "got 2848 (past the end of the file)"}},
    {"st: offsets begin > end", RUN_TARGET, TST, "[0,192]", "[192,0]", 0, 0, {TST, "model.embed_tokens.weight", "0 <= begin <= end", "got [192, 0]"}},
    {"st: offsets not a pair", RUN_TARGET, TST, "[0,192]", "[0,96,192]", 0, 0, {TST, "model.embed_tokens.weight", "\"data_offsets\"", "an array of 3 items"}},
    {"st: offsets not integers", RUN_TARGET, TST, "[0,192]", "[0,192.0]", 0, 0, {TST, "model.embed_tokens.weight", "got [0, 192.0]"}},
    {"st: trailing bytes", RUN_TARGET, 0, 0, 0, mk_st_trailing, 0, {TST, "4 trailing bytes after the last tensor"}},
    {"st: missing tensor", RUN_TARGET, TST, ",\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[2592,2624]}", "", 0, 0, {TST, "missing tensor \"model.norm.weight\""}},
    {"st: unexpected tensor", RUN_TARGET, TST, "\"model.norm.weight\"", "\"model.norm.bias\"", 0, 0, {TST, "unexpected tensor \"model.norm.bias\""}},
    {"st: draft file with a target tensor", RUN_DRAFT, DST, "\"fc.weight\"", "\"model.fc.weight\"", 0, 0, {DST, "unexpected tensor \"model.fc.weight\""}},
    {"st: entry not an object", RUN_TARGET, TST, "{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[2592,2624]}", "5", 0, 0, {TST, "model.norm.weight", "got 5"}},
    {"st: entry without dtype", RUN_TARGET, TST, "\"model.norm.weight\":{\"dtype\":\"F32\",", "\"model.norm.weight\":{", 0, 0, {TST, "model.norm.weight", "without \"dtype\""}},
    {"st: __metadata__ not an object", RUN_TARGET, TST, "{\"format\":\"pt\"}", "\"pt\"", 0, 0, {TST, "\"__metadata__\"", "the string \"pt\""}},
    {"st: NaN in a weight", RUN_TARGET, 0, 0, 0, mk_st_nan, 0, {TST, "model.layers.0.self_attn.q_proj.weight", "element 10", "got NaN"}},
    {"st: Inf in a weight", RUN_DRAFT, 0, 0, 0, mk_st_inf, 0, {DST, "fc.weight", "element 3", "got -Inf"}},
    {"st: file missing", RUN_TARGET, 0, 0, 0, mk_st_missing_file, 0, {TST, "cannot open"}},
    {"st: a directory", RUN_TARGET, 0, 0, 0, mk_st_directory, 0, {TST, "expected a regular file, got a directory"}},
    {"st: a FIFO (must not block)", RUN_TARGET, 0, 0, 0, mk_st_fifo, 0, {TST, "expected a regular file, got a special file"}},
    /* ---- config.json */
    {"config: missing field", RUN_TARGET, TCFG, "\"hidden_size\":8,", "", 0, 0, {TCFG, "missing field \"hidden_size\""}},
    {"config: field a string", RUN_TARGET, TCFG, "\"hidden_size\":8", "\"hidden_size\":\"8\"", 0, 0, {TCFG, "field \"hidden_size\"", "expected an integer", "got the string \"8\""}},
    {"config: integer written as float", RUN_TARGET, TCFG, "\"hidden_size\":8", "\"hidden_size\":8.0", 0, 0, {TCFG, "field \"hidden_size\"", "got 8.0"}},
    {"config: integer too large for int64", RUN_TARGET, TCFG, "\"hidden_size\":8", "\"hidden_size\":99999999999999999999", 0, 0, {TCFG, "field \"hidden_size\"", "got 1e+20"}},
    {"config: field null", RUN_TARGET, TCFG, "\"head_dim\":4", "\"head_dim\":null", 0, 0, {TCFG, "field \"head_dim\"", "got null"}},
    {"config: zero size", RUN_TARGET, TCFG, "\"intermediate_size\":16", "\"intermediate_size\":0", 0, 0, {TCFG, "field \"intermediate_size\"", "expected an integer in 1..", "got 0"}},
    {"config: negative size", RUN_TARGET, TCFG, "\"num_hidden_layers\":1", "\"num_hidden_layers\":-1", 0, 0, {TCFG, "field \"num_hidden_layers\"", "got -1"}},
    {"config: absurd size", RUN_TARGET, TCFG, "\"vocab_size\":6", "\"vocab_size\":2000000000", 0, 0, {TCFG, "field \"vocab_size\"", "got 2000000000"}},
    {"config: heads not divisible by KV heads", RUN_TARGET, TCFG, "\"num_key_value_heads\":1", "\"num_key_value_heads\":3", 0, 0, {TCFG, "field \"num_attention_heads\"", "multiple of num_key_value_heads (3)", "got 2"}},
    {"config: odd head_dim", RUN_TARGET, TCFG, "\"head_dim\":4", "\"head_dim\":3", 0, 0, {TCFG, "field \"head_dim\"", "even", "got 3"}},
    {"config: heads x head_dim absurd", RUN_TARGET, TCFG, "\"num_attention_heads\":2", "\"num_attention_heads\":65536", 0, 0, {TCFG, "\"num_attention_heads\" x \"head_dim\"", "65536 x 4"}},
    {"config: rms_norm_eps negative", RUN_TARGET, TCFG, "\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":-1e-6", 0, 0, {TCFG, "field \"rms_norm_eps\"", "got -1e-06"}},
    {"config: rms_norm_eps a string", RUN_TARGET, TCFG, "\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":\"1e-6\"", 0, 0, {TCFG, "field \"rms_norm_eps\"", "the string \"1e-6\""}},
    {"config: rope_theta absurd", RUN_TARGET, TCFG, "\"rope_theta\":10000.0", "\"rope_theta\":1e300", 0, 0, {TCFG, "field \"rope_theta\"", "got 1e+300"}},
    {"config: rope_theta below 1", RUN_TARGET, TCFG, "\"rope_theta\":10000.0", "\"rope_theta\":0.5", 0, 0, {TCFG, "field \"rope_theta\"", "got 0.5"}},
    {"config: max_position_embeddings 0", RUN_TARGET, TCFG, "\"max_position_embeddings\":64", "\"max_position_embeddings\":0", 0, 0, {TCFG, "field \"max_position_embeddings\"", "got 0"}},
    {"config: wrong architecture", RUN_TARGET, TCFG, "Qwen3ForCausalLM", "MistralForCausalLM", 0, 0, {TCFG, "field \"architectures\"", "expected [\"Qwen3ForCausalLM\"] or [\"LlamaForCausalLM\"]", "\"MistralForCausalLM\""}},
    {"config: a Llama config over Qwen3 weights", RUN_TARGET, TCFG, "Qwen3ForCausalLM", "LlamaForCausalLM", 0, 0, {TST, "[\"LlamaForCausalLM\"] (no per-head q/k norms)", "also holds \"model.layers.0.self_attn.q_norm.weight\"", "expected no q_norm / k_norm"}},
    {"config: draft config given as the target", RUN_TARGET, TCFG, "Qwen3ForCausalLM", "DFlashDraftModel", 0, 0, {TCFG, "field \"architectures\"", "\"DFlashDraftModel\""}},
    {"config: tied model that ships lm_head.weight", RUN_TARGET, TCFG, "\"tie_word_embeddings\":false", "\"tie_word_embeddings\":true", 0, 0, {TST, "tie_word_embeddings: true", "also holds \"lm_head.weight\"", "expected no lm_head.weight"}},
    {"config: tie_word_embeddings not a boolean", RUN_TARGET, TCFG, "\"tie_word_embeddings\":false", "\"tie_word_embeddings\":1", 0, 0, {TCFG, "field \"tie_word_embeddings\"", "true or false", "got 1"}},
    {"config: use_sliding_window true", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"use_sliding_window\":true,", 0, 0, {TCFG, "field \"use_sliding_window\"", "not implemented", "got true"}},
    {"config: rope_scaling yarn", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0},", 0, 0, {TCFG, "field \"rope_scaling\"", "expected null", "rope_type \"yarn\""}},
    {"config: rope_scaling not an object", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"rope_scaling\":2,", 0, 0, {TCFG, "field \"rope_scaling\"", "got 2"}},
    {"config: layer_types with sliding attention", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"layer_types\":[\"sliding_attention\"],", 0, 0, {TCFG, "field \"layer_types\"[0]", "\"full_attention\"", "\"sliding_attention\""}},
    {"config: layer_types of the wrong length", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"layer_types\":[\"full_attention\",\"full_attention\"],", 0, 0, {TCFG, "field \"layer_types\"", "a list of 1", "an array of 2 items"}},
    {"config: rope_parameters yarn", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":10000.0},", 0, 0, {TCFG, "field \"rope_parameters\"", "\"default\"", "got rope_type yarn"}},
    {"config: rope_parameters with another theta", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":500.0},", 0, 0, {TCFG, "field \"rope_parameters\"", "10000", "got rope_type default, rope_theta 500.0"}},
    {"config: mlp_bias true", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"mlp_bias\":true,", 0, 0, {TCFG, "field \"mlp_bias\"", "expected false", "got true"}},
    {"config: hidden_act gelu", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"hidden_act\":\"gelu\",", 0, 0, {TCFG, "field \"hidden_act\"", "\"silu\"", "\"gelu\""}},
    {"config: eos_token_id outside the vocabulary", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"eos_token_id\":[4,6],", 0, 0, {TCFG, "field \"eos_token_id\"", "0..5", "got 6"}},
    {"config: eos_token_id a string", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"eos_token_id\":\"4\",", 0, 0, {TCFG, "field \"eos_token_id\"", "the string \"4\""}},
    {"config: attention_bias true", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"attention_bias\":true,", 0, 0, {TCFG, "field \"attention_bias\"", "got true"}},
    {"config: duplicate key", RUN_TARGET, TCFG, "\"head_dim\":4,", "\"head_dim\":4,\"head_dim\":4,", 0, 0, {TCFG, "duplicate key \"head_dim\""}},
    {"config: not JSON", RUN_TARGET, 0, 0, 0, mk_cfg_not_json, 0, {TCFG, "invalid JSON at byte 1", "expected a string key"}},
    {"config: empty", RUN_TARGET, 0, 0, 0, mk_cfg_empty, 0, {TCFG, "invalid JSON", "unexpected end"}},
    {"config: NUL byte", RUN_TARGET, 0, 0, 0, mk_cfg_nul, 0, {TCFG, "invalid JSON at byte 5"}},
    {"config: an array", RUN_TARGET, 0, 0, 0, mk_cfg_array, 0, {TCFG, "expected a JSON object"}},
    {"config: missing file", RUN_TARGET, 0, 0, 0, mk_cfg_missing, 0, {TCFG, "cannot open"}},
    {"config: a FIFO (must not block)", RUN_TARGET, 0, 0, 0, mk_cfg_fifo, 0, {TCFG, "expected a regular file, got a special file"}},
    {"config: UTF-8 byte order mark", RUN_TARGET, 0, 0, 0, mk_cfg_bom, 0, {TCFG, "at byte 0", "byte order mark"}},
    {"draft config: target_layer_ids out of range", RUN_DRAFT, DCFG, "\"target_layer_ids\":[0]", "\"target_layer_ids\":[1]", 0, 0, {DCFG, "\"target_layer_ids\"[0]", "0..0", "got 1"}},
    {"draft config: target_layer_ids negative", RUN_DRAFT, DCFG, "\"target_layer_ids\":[0]", "\"target_layer_ids\":[-1]", 0, 0, {DCFG, "\"target_layer_ids\"[0]", "got -1"}},
    {"draft config: target_layer_ids repeated", RUN_DRAFT, DCFG, "\"target_layer_ids\":[0]", "\"target_layer_ids\":[0,0]", 0, 0, {DCFG, "\"target_layer_ids\"", "distinct", "layer 0 twice"}},
    {"draft config: target_layer_ids empty", RUN_DRAFT, DCFG, "\"target_layer_ids\":[0]", "\"target_layer_ids\":[]", 0, 0, {DCFG, "\"target_layer_ids\"", "an array of 0 items"}},
    {"draft config: target_layer_ids not a list", RUN_DRAFT, DCFG, "\"target_layer_ids\":[0]", "\"target_layer_ids\":0", 0, 0, {DCFG, "\"target_layer_ids\"", "got 0"}},
    {"draft config: default target_layer_ids out of range", RUN_DRAFT, 0, 0, 0, mk_default_layer_ids, 0, {DCFG, "no \"target_layer_ids\"", "gives 1, outside 0..0", "give target_layer_ids"}},
    {"draft config: mask_token_id outside the vocabulary", RUN_DRAFT, DCFG, "\"mask_token_id\":5", "\"mask_token_id\":6", 0, 0, {DCFG, "dflash_config", "field \"mask_token_id\"", "0..5, got 6"}},
    {"draft config: mask_token_id missing", RUN_DRAFT, DCFG, "\"mask_token_id\":5,", "", 0, 0, {DCFG, "missing field \"mask_token_id\""}},
    {"draft config: block_size 0", RUN_DRAFT, DCFG, "\"block_size\":2", "\"block_size\":0", 0, 0, {DCFG, "field \"block_size\"", "1..64", "got 0"}},
    {"draft config: block_size absurd", RUN_DRAFT, DCFG, "\"block_size\":2", "\"block_size\":100000", 0, 0, {DCFG, "field \"block_size\"", "got 100000"}},
    {"draft config: dflash_config missing", RUN_DRAFT, DCFG, ",\"dflash_config\":{\"mask_token_id\":5,\"target_layer_ids\":[0]}", "", 0, 0, {DCFG, "missing field \"dflash_config\""}},
    {"draft config: dflash_config not an object", RUN_DRAFT, DCFG, "{\"mask_token_id\":5,\"target_layer_ids\":[0]}", "[5]", 0, 0, {DCFG, "field \"dflash_config\"", "expected an object", "an array of 1 items"}},
    {"draft config: num_target_layers 0", RUN_DRAFT, DCFG, "\"num_target_layers\":1", "\"num_target_layers\":0", 0, 0, {DCFG, "field \"num_target_layers\"", "got 0"}},
    {"draft/target: hidden_size differ", RUN_PAIR, DCFG, "\"hidden_size\":8", "\"hidden_size\":16", 0, 0, {"draft config.json", "field \"hidden_size\"", "expected 8", "got 16"}},
    {"draft/target: vocab_size differ", RUN_PAIR, DCFG, "\"vocab_size\":6", "\"vocab_size\":7", 0, 0, {"draft config.json", "field \"vocab_size\"", "expected 6", "got 7"}},
    {"draft/target: num_target_layers != target layers", RUN_PAIR, DCFG, "\"num_target_layers\":1", "\"num_target_layers\":2", 0, 0, {"draft config.json", "field \"num_target_layers\"", "num_hidden_layers", "got 2"}},
    /* ---- vocab.txt */
    {"vocab: empty", RUN_VOCAB, 0, 0, 0, mk_vocab_empty, 0, {"vocab.txt", "empty"}},
    {"vocab: duplicate token", RUN_VOCAB, 0, 0, 0, mk_vocab_dup, 0, {"vocab.txt", "token \"a\" appears more than once (ids 0 and 2)"}},
    {"vocab: blank line", RUN_VOCAB, 0, 0, 0, mk_vocab_blank, 0, {"vocab.txt", "line 3 (token id 2) is empty"}},
    {"vocab: token with a space", RUN_VOCAB, 0, 0, 0, mk_vocab_space, 0, {"vocab.txt", "line 2 (token id 1) contains white space"}},
    {"vocab: invalid UTF-8", RUN_VOCAB, 0, 0, 0, mk_vocab_utf8, 0, {"vocab.txt", "line 3 (token id 2)", "UTF-8", "0xc3"}},
    {"vocab: control character", RUN_VOCAB, 0, 0, 0, mk_vocab_ctrl, 0, {"vocab.txt", "line 3 (token id 2)", "0x01"}},
    {"vocab: NUL byte", RUN_VOCAB, 0, 0, 0, mk_vocab_nul, 0, {"vocab.txt", "NUL byte"}},
    {"vocab: missing file", RUN_VOCAB, 0, 0, 0, mk_vocab_missing, 0, {"vocab.txt", "cannot open"}},
    {"vocab: a directory", RUN_VOCAB, 0, 0, 0, mk_vocab_dir, 0, {"vocab.txt", "expected a regular file, got a directory"}},
    {"vocab: UTF-8 byte order mark", RUN_VOCAB, 0, 0, 0, mk_vocab_bom, 0, {"vocab.txt", "line 1 (token id 0)", "byte order mark"}},
    {"vocab: more tokens than vocab_size", RUN_CHECK_VOCAB, 0, 0, 0, mk_vocab_7, 0, {"vocab.txt", "expected 6 tokens (vocab_size in the target config.json), got 7"}},
    {"vocab: fewer tokens than vocab_size", RUN_CHECK_VOCAB, 0, 0, 0, mk_vocab_5, 0, {"vocab.txt", "expected 6 tokens", "got 5"}},
    {"vocab: no <mask> though the draft names one", RUN_CHECK_VOCAB, 0, 0, 0, mk_vocab_no_mask, 0, {"vocab.txt", "no token \"<mask>\"", "mask_token_id 5"}},
    {"vocab: mask_token_id is another word", RUN_CHECK_VOCAB, 0, 0, 0, mk_vocab_mask_moved, 0, {"vocab.txt", "token id 5 (the draft's mask_token_id)", "expected \"<mask>\", got \"<eos>\"", "id 4"}},
    /* ---- the prompt */
    {"prompt: word not in the vocabulary", RUN_PROMPT, 0, 0, 0, 0, "a b zebra c", {"--prompt", "word 3, \"zebra\"", "--ids"}},
    {"prompt: empty", RUN_PROMPT, 0, 0, 0, 0, " \t\n", {"--prompt", "empty prompt"}},
    {"prompt: word longer than any token", RUN_PROMPT, 0, 0, 0, 0, "a " /* + 300 x, see run_load_case */, {"--prompt", "word 2", "300 bytes", "--ids"}},
};

static void run_load_case(void **state) {
    const LoadCase *c = *state;
    char *set = tu_tmpdir();
    assert_non_null(set);
    tu_write_tiny_set(set);
    if (c->file && strstr(c->file, ".safetensors")) st_edit(P(set, c->file), c->from, c->to, 0);
    else if (c->file) edit_text(P(set, c->file), c->from, c->to);
    if (c->make) c->make(set);

    int rc = 0;
    Model t, d;
    Vocab v;
    memset(&t, 0, sizeof t);
    memset(&d, 0, sizeof d);
    memset(&v, 0, sizeof v);
    dflash_errmsg[0] = 0;
    switch (c->run) {
    case RUN_TARGET: rc = model_load(&t, P(set, "target"), 0); break;
    case RUN_DRAFT: rc = model_load(&d, P(set, "draft"), 1); break;
    case RUN_VOCAB: rc = vocab_load(&v, P(set, "vocab.txt")); break;
    case RUN_CHECK_VOCAB:
        assert_int_equal(vocab_load(&v, P(set, "vocab.txt")), 0);
        assert_int_equal(model_load(&t, P(set, "target"), 0), 0);
        assert_int_equal(model_load(&d, P(set, "draft"), 1), 0);
        rc = check_vocab(&v, P(set, "vocab.txt"), &t, &d);
        break;
    case RUN_PAIR: {  /* the configs alone: the tensors would disagree first */
        for (int k = 0; k < 2; k++) {
            size_t len;
            const char *path = P(set, k ? DCFG : TCFG);
            char *text;
            assert_int_equal(file_read_max(path, 1 << 20, &text, &len), 0);
            assert_int_equal(config_parse(k ? &d.cfg : &t.cfg, path, text, len, k), 0);
            free(text);
        }
        rc = check_pair(&t, &d);
        break;
    }
    case RUN_PROMPT: {
        assert_int_equal(vocab_load(&v, P(set, "vocab.txt")), 0);
        char text[400];
        snprintf(text, sizeof text, "%s", c->prompt);
        if (strstr(c->name, "longer")) {
            memset(text + 2, 'x', 300);
            text[302] = 0;
        }
        int ids[16], n = 0;
        rc = tokenize(&v, text, ids, 16, &n);
        break;
    }
    }
    char msg[sizeof dflash_errmsg];
    memcpy(msg, dflash_errmsg, sizeof msg);
    model_free(&t);
    model_free(&d);
    vocab_free(&v);
    tu_rmtree(set);
    free(set);
    if (rc != -1) fail_msg("expected the bad input to be refused (-1), got %d", rc);
    if (!msg[0] || strchr(msg, '\n')) fail_msg("expected a one-line message, got \"%s\"", msg);
    for (int k = 0; k < 4 && c->want[k]; k++) assert_contains(msg, c->want[k]);
    print_message("     %s\n", msg);
}

/* ---- program rows: ./dflash run with fork/exec -------------------------- */

typedef struct {
    const char *name;
    const char *args;              /* '|'-separated; $W the weight set, $T the temp dir */
    const char *file, *from, *to;  /* an edit of the set, as in LoadCase */
    void (*make)(const char *t);   /* builds more inputs in $T */
    int status;                    /* expected exit status (0 or 2) */
    const char *want[4];           /* substrings of stderr */
} CliCase;

/* builders for CLI rows ($T = t; the set is t/w) */
static void mk_foreign_dir(const char *t) {
    mkdir(tu_path(t, "tr"), 0755);
    tu_write_text(tu_path(t, "tr/keep.txt"), "not a trace\n");
}
static void mk_cli_vocab_no_mask(const char *t) { mk_vocab_no_mask(tu_path(t, "w")); }
static void mk_cli_nan(const char *t) { mk_st_nan(tu_path(t, "w")); }
static void mk_cli_file(const char *t) { tu_write_text(tu_path(t, "file"), "x"); }
static void mk_cli_ids(const char *t) { tu_write_text(tu_path(t, "ids.txt"), "1 2 3\n"); }
static void mk_cli_no_vocab(const char *t) { assert_int_equal(unlink(tu_path(t, "w/vocab.txt")), 0); }
/* a tokenizer.json instead of vocab.txt */
static void mk_tok(const char *t, const char *text) {
    assert_int_equal(unlink(tu_path(t, "w/vocab.txt")), 0);
    tu_write_text(tu_path(t, "w/tokenizer.json"), text);
}
#define TOK_OK "{\"added_tokens\":[{\"id\":4,\"content\":\"<|end|>\"}],\"decoder\":{\"type\":\"ByteLevel\"}," \
               "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"\\u0120b\":1,\"c\":2},\"merges\":[]}}"
static void mk_tok_ok(const char *t) { mk_tok(t, TOK_OK); }
static void mk_tok_metaspace(const char *t) {
    mk_tok(t, "{\"decoder\":{\"type\":\"Metaspace\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}");
}
static void mk_tok_wordpiece(const char *t) {
    mk_tok(t, "{\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}");
}
static void mk_tok_not_bytes(const char *t) {
    mk_tok(t, "{\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b c\":1}}}");
}
static void mk_tok_bad_json(const char *t) { mk_tok(t, "{\"model\": {\"type\": \"BPE\", "); }
static void mk_tok_id_too_big(const char *t) {
    mk_tok(t, "{\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":9}}}");
}
static void mk_cli_genconf_bad(const char *t) { tu_write_text(tu_path(t, "w/target/generation_config.json"), "{\"eos_token_id\": 4,"); }
static void mk_cli_genconf_str(const char *t) { tu_write_text(tu_path(t, "w/target/generation_config.json"), "{\"eos_token_id\": \"4\"}"); }
static void mk_cli_genconf_range(const char *t) { tu_write_text(tu_path(t, "w/target/generation_config.json"), "{\"eos_token_id\": [4, 9]}"); }
static void mk_cli_genconf_array(const char *t) { tu_write_text(tu_path(t, "w/target/generation_config.json"), "[4]"); }
/* what published Qwen3 / DFlash configs carry, with the values computed here */
static void mk_cli_published_keys(const char *t) {
    static const char *const KEYS =
        "\"head_dim\":4,\"dtype\":\"bfloat16\",\"torch_dtype\":\"bfloat16\",\"layer_types\":[\"full_attention\"],"
        "\"rope_scaling\":null,\"use_sliding_window\":false,\"sliding_window\":null,\"max_window_layers\":1,"
        "\"attention_bias\":false,\"attention_dropout\":0.0,\"hidden_act\":\"silu\",\"initializer_range\":0.02,"
        "\"auto_map\":{\"AutoModel\":\"dflash.DFlashDraftModel\"},\"transformers_version\":\"4.57.1\","
        "\"use_cache\":true,\"bos_token_id\":4,\"eos_token_id\":[4],\"mlp_bias\":false,"
        "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000.0},";
    edit_text(tu_path(t, "w/" TCFG), "\"head_dim\":4,", KEYS);
    edit_text(tu_path(t, "w/" DCFG), "\"head_dim\":4,", KEYS);
}

/* head_dim 2 in both models: H*d = 4 != hidden_size 8, with q_proj [4, 8],
 * o_proj [8, 4], k/v_proj [2, 8], q/k_norm [2] */
static void mk_cli_head_dim(const char *t) {
    char set[600];
    snprintf(set, sizeof set, "%s/w", t);
    for (int f = 0; f < 2; f++) {
        edit_text(P(set, f ? DCFG : TCFG), "\"head_dim\":4", "\"head_dim\":2");
        TuModel m;
        tu_model_tensors(&m, f);
        for (int k = 0; k < m.n; k++) {
            if (strstr(m.names[k], "q_proj")) m.t[k].shape[0] = 4;
            if (strstr(m.names[k], "k_proj") || strstr(m.names[k], "v_proj")) m.t[k].shape[0] = 2;
            if (strstr(m.names[k], "o_proj")) m.t[k].shape[1] = 4;
            if (strstr(m.names[k], "q_norm") || strstr(m.names[k], "k_norm")) m.t[k].shape[0] = 2;
        }
        tu_write_safetensors(P(set, f ? DST : TST), m.t, m.n);
        tu_model_free(&m);
    }
}

/* An earlier trace in $T/tr (a valid one, written by trace.c). */
static void mk_earlier_trace(const char *t) {
    Tracer *tr = trace_open(tu_path(t, "tr"), NULL, NULL, 0);
    assert_non_null(tr);
    int64_t one = 1, shape[1] = {1};
    assert_int_equal(trace_i64(tr, (TracePhase){"prefill", 0}, "x", "x", &one, 1, shape), 0);
    assert_int_equal(trace_close(tr), 0);
}

/* ---- .npy files and trace directories for `dflash diff` */

#define F4_2 "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"

/* a version 1.0 .npy at path: magic, the header dict padded to 64 bytes,
 * then `data` zero bytes */
static void write_npy(const char *path, const char *dict, size_t data) {
    size_t dl = strlen(dict), hl = ((10 + dl + 1 + 63) / 64) * 64 - 10;
    unsigned char *b = calloc(10 + hl + data + 1, 1);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(hl & 0xff);
    b[9] = (unsigned char)(hl >> 8);
    memset(b + 10, ' ', hl);
    memcpy(b + 10, dict, dl);
    b[10 + hl - 1] = '\n';
    assert_int_equal(tu_write(path, b, 10 + hl + data), 0);
    free(b);
}

/* A: trace.jsonl listing x.npy = bytes; B: the same manifest and x.npy, a
 * valid (2,) <f4 array. */
static void mk_diff_pair(const char *t, const void *bytes, size_t len) {
    mkdir(tu_path(t, "a"), 0755);
    mkdir(tu_path(t, "b"), 0755);
    tu_write_text(tu_path(t, "a/trace.jsonl"), "{\"name\": \"x\", \"file\": \"x.npy\"}\n");
    tu_write_text(tu_path(t, "b/trace.jsonl"), "{\"name\": \"x\", \"file\": \"x.npy\"}\n");
    assert_int_equal(tu_write(tu_path(t, "a/x.npy"), bytes, len), 0);
    write_npy(tu_path(t, "b/x.npy"), F4_2, 8);
}

static void mk_npy(const char *t, const char *dict, size_t data) {
    mk_diff_pair(t, "", 0);
    write_npy(tu_path(t, "a/x.npy"), dict, data);
}
static void mk_npy_magic(const char *t) { mk_diff_pair(t, "\x93NUMPX\x01\x00\x02\x00{}", 12); }
static void mk_npy_empty(const char *t) { mk_diff_pair(t, "", 0); }
static void mk_npy_version(const char *t) { mk_diff_pair(t, "\x93NUMPY\x04\x00\x02\x00{}", 12); }
static void mk_npy_v2_short(const char *t) { mk_diff_pair(t, "\x93NUMPY\x02\x00\x02\x00{", 11); }
static void mk_npy_header_huge(const char *t) { mk_diff_pair(t, "\x93NUMPY\x02\x00\x00\x00\x20\x00{}", 14); }
static void mk_npy_header_past_end(const char *t) { mk_diff_pair(t, "\x93NUMPY\x01\x00\x00\x01{}", 12); }
static void mk_npy_truncated(const char *t) { mk_npy(t, F4_2, 7); }
static void mk_npy_trailing(const char *t) { mk_npy(t, F4_2, 12); }
static void mk_npy_8_bytes(const char *t) { mk_diff_pair(t, "\x93NUMPY\x01\x00", 8); }
static void mk_diff_dup_key(const char *t) {
    mk_npy(t, F4_2, 8);
    tu_write_text(tu_path(t, "a/trace.jsonl"), "{\"name\": \"x\", \"file\": \"x.npy\", \"name\": \"y\"}\n");
}
static void mk_npy_descr(const char *t) { mk_npy(t, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16); }
static void mk_npy_not_dict(const char *t) { mk_npy(t, "['descr', '<f4']", 8); }
static void mk_npy_no_shape(const char *t) { mk_npy(t, "{'descr': '<f4', 'fortran_order': False}", 8); }
static void mk_npy_shape_int(const char *t) { mk_npy(t, "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", 8); }
static void mk_npy_shape_neg(const char *t) { mk_npy(t, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", 8); }
static void mk_npy_shape_huge(const char *t) {
    mk_npy(t, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}", 8);
}
static void mk_npy_open_brace(const char *t) { mk_diff_pair(t, "\x93NUMPY\x01\x00\x01\x00{", 11); }
static void mk_diff_no_manifest(const char *t) {
    mkdir(tu_path(t, "a"), 0755);
    mkdir(tu_path(t, "b"), 0755);
    tu_write_text(tu_path(t, "a/notes.txt"), "x");
}
static void mk_diff_bad_manifest(const char *t) {
    mk_npy(t, F4_2, 8);
    tu_write_text(tu_path(t, "a/trace.jsonl"), "{\"name\": \"x\", \"file\": \"x.npy\"}\n{\"name\": 3}\n");
}
static void mk_diff_escape(const char *t) {
    mk_npy(t, F4_2, 8);
    tu_write_text(tu_path(t, "a/trace.jsonl"), "{\"name\": \"x\", \"file\": \"../b/x.npy\"}\n");
}
static void mk_diff_listed_missing(const char *t) {
    mk_npy(t, F4_2, 8);
    unlink(tu_path(t, "a/x.npy"));
}
static void mk_diff_dup_name(const char *t) {
    mk_npy(t, F4_2, 8);
    tu_write_text(tu_path(t, "a/trace.jsonl"), "{\"name\": \"x\", \"file\": \"x.npy\"}\n{\"name\": \"x\", \"file\": \"x.npy\"}\n");
}
static void mk_diff_a_is_file(const char *t) { mk_npy(t, F4_2, 8); mk_cli_file(t); }
static void mk_diff_good(const char *t) { mk_npy(t, F4_2, 8); }
static void mk_diff_b_no_manifest(const char *t) {
    mk_npy(t, F4_2, 8);
    unlink(tu_path(t, "b/trace.jsonl"));
    unlink(tu_path(t, "b/x.npy"));   /* B's .npy files alone are read by name (tests/test_diff_hints.c) */
}
static void mk_npy_fifo(const char *t) { mk_npy(t, F4_2, 8); mk_fifo(tu_path(t, "a/x.npy")); }

static const CliCase CLI_CASES[] = {
    /* accepted inputs (controls) */
    {"cli: the tiny set runs", "--weights|$W|--prompt|a b|--max-new-tokens|3", 0, 0, 0, 0, 0, {0}},
    {"cli: hidden_size != heads x head_dim is accepted", "--weights|$W|--prompt|a|--max-new-tokens|3", 0, 0, 0,
     mk_cli_head_dim, 0, {0}},
    {"cli: no <mask> check without a draft (--mode ar)", "--weights|$W|--prompt|a|--max-new-tokens|2|--mode|ar", 0, 0, 0,
     mk_cli_vocab_no_mask, 0, {0}},
    {"cli: diff of two good traces", "diff|$T/a|$T/a", 0, 0, 0, mk_diff_good, 0, {0}},
    /* the prompt */
    {"cli: word not in the vocabulary", "--weights|$W|--prompt|a zebra", 0, 0, 0, 0, 2, {"word 2, \"zebra\"", "--ids"}},
    {"cli: empty prompt", "--weights|$W|--prompt|", 0, 0, 0, 0, 2, {"--prompt", "empty prompt"}},
    {"cli: --ids out of range", "--weights|$W|--ids|1,6", 0, 0, 0, 0, 2, {"--ids", "id 2 (position 1)", "0..5", "got 6"}},
    {"cli: --ids not numbers", "--weights|$W|--ids|1,x", 0, 0, 0, 0, 2, {"--ids", "\"1,x\"", "(id 2)"}},
    {"cli: --ids empty item", "--weights|$W|--ids|1,,2", 0, 0, 0, 0, 2, {"--ids", "(id 2)"}},
    {"cli: --ids negative", "--weights|$W|--ids|-1", 0, 0, 0, 0, 2, {"--ids", "non-negative"}},
    {"cli: --ids trailing comma", "--weights|$W|--ids|1,", 0, 0, 0, 0, 2, {"--ids", "(id 2)"}},
    {"cli: prompt + max-new-tokens + block beyond max_position_embeddings", "--weights|$W|--prompt|a b|--max-new-tokens|61",
     0, 0, 0, 0, 2, {"--max-new-tokens (61)", "block size (2)", "max_position_embeddings 64", "target/config.json"}},
    /* flags */
    {"cli: unknown flag", "--weights|$W|--temprature|1", 0, 0, 0, 0, 2, {"unknown flag \"--temprature\""}},
    {"cli: stray argument", "--weights|$W|hello", 0, 0, 0, 0, 2, {"unexpected argument \"hello\""}},
    {"cli: missing value at the end", "--weights|$W|--prompt", 0, 0, 0, 0, 2, {"--prompt: missing value"}},
    {"cli: a flag where a value belongs", "--weights|--prompt|a", 0, 0, 0, 0, 2, {"--weights: missing value", "\"--prompt\", is a flag"}},
    {"cli: --max-new-tokens not a number", "--weights|$W|--max-new-tokens|ten", 0, 0, 0, 0, 2, {"--max-new-tokens", "got \"ten\""}},
    {"cli: --max-new-tokens negative", "--weights|$W|--max-new-tokens|-3", 0, 0, 0, 0, 2, {"--max-new-tokens", "got -3"}},
    {"cli: --max-new-tokens with junk", "--weights|$W|--max-new-tokens|5x", 0, 0, 0, 0, 2, {"--max-new-tokens", "got \"5x\""}},
    {"cli: --max-new-tokens overflow", "--weights|$W|--max-new-tokens|99999999999999999999", 0, 0, 0, 0, 2, {"--max-new-tokens", "99999999999999999999"}},
    {"cli: --temperature negative", "--weights|$W|--temperature|-0.5", 0, 0, 0, 0, 2, {"--temperature", ">= 0", "got \"-0.5\""}},
    {"cli: --temperature NaN", "--weights|$W|--temperature|nan", 0, 0, 0, 0, 2, {"--temperature", "got \"nan\""}},
    {"cli: --temperature Inf", "--weights|$W|--temperature|inf", 0, 0, 0, 0, 2, {"--temperature", "got \"inf\""}},
    {"cli: --temperature empty", "--weights|$W|--temperature|", 0, 0, 0, 0, 2, {"--temperature", "got \"\""}},
    {"cli: --block-size 0", "--weights|$W|--block-size|0", 0, 0, 0, 0, 2, {"--block-size", "1..64", "got 0"}},
    {"cli: --block-size too large", "--weights|$W|--block-size|65", 0, 0, 0, 0, 2, {"--block-size", "got 65"}},
    {"cli: --seed negative", "--weights|$W|--seed|-1", 0, 0, 0, 0, 2, {"--seed", "got \"-1\""}},
    {"cli: --seed with a space", "--weights|$W|--seed| 1", 0, 0, 0, 0, 2, {"--seed", "got \" 1\""}},
    {"cli: --mode unknown", "--weights|$W|--mode|fast", 0, 0, 0, 0, 2, {"--mode", "dflash or ar", "got \"fast\""}},
    {"cli: --prompt and --ids", "--weights|$W|--prompt|a|--ids|1", 0, 0, 0, 0, 2, {"--prompt and --ids"}},
    {"cli: bench with an argument", "bench|now", 0, 0, 0, 0, 2, {"bench takes no arguments"}},
    /* weight sets */
    {"cli: weights directory missing", "--weights|$T/none", 0, 0, 0, 0, 2, {"none/target/config.json", "cannot open"}},
    {"cli: bad safetensors", "--weights|$W", TST, "\"F32\"", "\"BF16\"", 0, 2, {"w/target/model.safetensors", "model.embed_tokens.weight", "BF16", "got 192"}},
    /* two model folders, stop ids, no vocabulary (issue 13) */
    {"cli: --target and --draft accepted", "--target|$W/target|--draft|$W/draft|--ids|1,2|--max-new-tokens|2", 0, 0, 0, 0, 0, {0}},
    {"cli: --target alone with --block-size 1 accepted", "--target|$W/target|--ids|1,2|--max-new-tokens|2|--block-size|1", 0, 0, 0, 0, 0, {0}},
    {"cli: --target without --draft in DFlash mode", "--target|$W/target|--ids|1,2", 0, 0, 0, 0, 2, {"--target", "--draft DIR", "--block-size 1"}},
    {"cli: --draft without --target", "--draft|$W/draft|--ids|1,2", 0, 0, 0, 0, 2, {"--draft", "--target DIR"}},
    {"cli: --weights and --target", "--weights|$W|--target|$W/target|--ids|1", 0, 0, 0, 0, 2, {"--weights and --target"}},
    {"cli: --stop-id outside the vocabulary", "--weights|$W|--ids|1|--stop-id|6", 0, 0, 0, 0, 2, {"--stop-id", "0..5", "got 6"}},
    {"cli: --stop-id not a number", "--weights|$W|--ids|1|--stop-id|eos", 0, 0, 0, 0, 2, {"--stop-id", "\"eos\""}},
    {"cli: --stop-id and --ignore-eos", "--weights|$W|--ids|1|--stop-id|4|--ignore-eos", 0, 0, 0, 0, 2, {"--stop-id and --ignore-eos"}},
    {"cli: no vocab.txt, --ids accepted", "--weights|$W|--ids|1,2|--max-new-tokens|2", 0, 0, 0, mk_cli_no_vocab, 0, {0}},
    {"cli: no vocab.txt, --prompt refused", "--weights|$W|--prompt|a b", 0, 0, 0, mk_cli_no_vocab, 2, {"--prompt", "no vocab.txt in", "--ids"}},
    {"cli: no vocab.txt, --ids outside vocab_size", "--weights|$W|--ids|1,6", 0, 0, 0, mk_cli_no_vocab, 2, {"--ids", "0..5", "target/config.json", "got 6"}},
    {"cli: generation_config.json not JSON", "--weights|$W|--ids|1|--max-new-tokens|2", 0, 0, 0, mk_cli_genconf_bad, 2, {"target/generation_config.json", "invalid JSON"}},
    {"cli: generation_config.json eos_token_id a string", "--weights|$W|--ids|1|--max-new-tokens|2", 0, 0, 0, mk_cli_genconf_str, 2, {"target/generation_config.json", "field \"eos_token_id\"", "the string \"4\""}},
    {"cli: generation_config.json eos_token_id outside the vocabulary", "--weights|$W|--ids|1|--max-new-tokens|2", 0, 0, 0, mk_cli_genconf_range, 2, {"target/generation_config.json", "\"eos_token_id\"", "0..5", "got 9"}},
    {"cli: generation_config.json an array", "--weights|$W|--ids|1|--max-new-tokens|2", 0, 0, 0, mk_cli_genconf_array, 2, {"target/generation_config.json", "expected a JSON object"}},
    {"cli: tokenizer.json decodes output", "--weights|$W|--ids|0,1,2|--max-new-tokens|2", 0, 0, 0, mk_tok_ok, 0, {0}},
    {"cli: tokenizer.json and --prompt", "--weights|$W|--prompt|a", 0, 0, 0, mk_tok_ok, 2, {"w/tokenizer.json", "decodes output only", "pre_tokenizer", "--ids"}},
    {"cli: tokenizer.json with a Metaspace decoder", "--weights|$W|--ids|1", 0, 0, 0, mk_tok_metaspace, 2, {"w/tokenizer.json", "decoder.type", "ByteLevel", "\"Metaspace\""}},
    {"cli: tokenizer.json with a WordPiece model", "--weights|$W|--ids|1", 0, 0, 0, mk_tok_wordpiece, 2, {"w/tokenizer.json", "model.type", "BPE", "\"WordPiece\""}},
    {"cli: tokenizer.json token not byte-level", "--weights|$W|--ids|1", 0, 0, 0, mk_tok_not_bytes, 2, {"w/tokenizer.json", "model.vocab[\"b c\"]", "not a byte-level token"}},
    {"cli: tokenizer.json cut short", "--weights|$W|--ids|1", 0, 0, 0, mk_tok_bad_json, 2, {"w/tokenizer.json", "at byte"}},
    {"cli: tokenizer.json id past vocab_size", "--weights|$W|--ids|1", 0, 0, 0, mk_tok_id_too_big, 2, {"w/tokenizer.json", "token id 9", "below 6"}},
    {"cli: published config keys accepted", "--weights|$W|--ids|1,2|--max-new-tokens|2", 0, 0, 0, mk_cli_published_keys, 0, {0}},
    {"cli: NaN weight", "--weights|$W", 0, 0, 0, mk_cli_nan, 2, {"w/target/model.safetensors", "q_proj.weight", "NaN"}},
    {"cli: tensor name with a newline (one-line message)", "--weights|$W", TST, "\"model.norm.weight\"", "\"model.norm\\nweight\"", 0, 2, {"unexpected tensor \"model.norm?weight\""}},
    {"cli: bad config", "--weights|$W", DCFG, "\"block_size\":2", "\"block_size\":-2", 0, 2, {"w/draft/config.json", "field \"block_size\"", "got -2"}},
    {"cli: draft and target disagree on vocab_size", "--weights|$W", DCFG, "\"vocab_size\":6", "\"vocab_size\":7", 0, 2, {"/w: draft config.json", "field \"vocab_size\"", "expected 6", "got 7"}},
    {"cli: vocab size != vocab_size", "--weights|$W", "vocab.txt", "<mask>\n", "<mask>\nextra\n", 0, 2, {"w/vocab.txt", "expected 6 tokens", "got 7"}},
    {"cli: vocab without <mask>", "--weights|$W", 0, 0, 0, mk_cli_vocab_no_mask, 2, {"w/vocab.txt", "no token \"<mask>\"", "mask_token_id 5"}},
    /* outputs: nothing is left behind */
    {"cli: bad input leaves no trace and no text trace", "--weights|$W|--prompt|a|--max-new-tokens|100|--trace|$T/tr|--trace-text|$T/tt.txt",
     0, 0, 0, 0, 2, {"max_position_embeddings"}},
    {"cli: bad input keeps the earlier trace", "--weights|$W|--prompt|zebra|--trace|$T/tr", 0, 0, 0, mk_earlier_trace, 2, {"\"zebra\""}},
    {"cli: trace into a directory with other files", "--weights|$W|--prompt|a|--max-new-tokens|2|--trace|$T/tr", 0, 0, 0, mk_foreign_dir, 2,
     {"tr holds \"keep.txt\"", "not part of a trace"}},
    {"cli: trace under a regular file", "--weights|$W|--prompt|a|--max-new-tokens|2|--trace|$T/file/tr", 0, 0, 0, mk_cli_file, 2,
     {"trace:", "file/tr"}},
    {"cli: text trace in a missing directory", "--weights|$W|--prompt|a|--max-new-tokens|2|--trace|$T/tr|--trace-text|$T/no/t.txt", 0, 0, 0, 0, 2,
     {"no/t.txt"}},
    {"cli: text trace that cannot be written (/dev/full)", "--weights|$W|--prompt|a|--max-new-tokens|2|--trace|$T/tr|--trace-text|/dev/full",
     0, 0, 0, 0, 2, {"trace: cannot write /dev/full"}},
    {"eval: --log a directory", "eval|--weights|$W|--ids-file|$T/ids.txt|--prompts|1|--prompt-len|2|--new|1|--log|$T", 0, 0, 0,
     mk_cli_ids, 2, {"dflash eval: --log: ", "is a directory"}},
    {"eval: --log the ids file", "eval|--weights|$W|--ids-file|$T/ids.txt|--prompts|1|--prompt-len|2|--new|1|--log|$T/ids.txt", 0, 0,
     0, mk_cli_ids, 2, {"dflash eval: --log: ", "is the input"}},
    {"cli: trace in --mode ar", "--weights|$W|--prompt|a|--mode|ar|--trace|$T/tr", 0, 0, 0, 0, 2, {"--trace", "--mode dflash only"}},
    {"cli: too many --trace-filter", "--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|"
     "--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|"
     "--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|"
     "--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|"
     "--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a|--trace-filter|a", 0, 0, 0, 0, 2,
     {"--trace-filter", "at most 32"}},
    /* .npy files read by diff */
    {"npy: bad magic", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_magic, 2, {"a/x.npy", "bad magic"}},
    {"npy: empty file", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_empty, 2, {"a/x.npy", "bad magic"}},
    {"npy: unsupported version", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_version, 2, {"a/x.npy", "unsupported .npy format version 4.0"}},
    {"npy: version 2 preamble cut short", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_v2_short, 2, {"a/x.npy", "12-byte preamble", "11 bytes"}},
    {"npy: header too long", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_header_huge, 2, {"a/x.npy", "header length 2097152", "1 MiB"}},
    {"npy: header past the end", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_header_past_end, 2, {"a/x.npy", "header length 256 runs past the end"}},
    {"npy: header cut after '{'", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_open_brace, 2, {"a/x.npy", "expected a quoted key"}},
    {"npy: data shorter than the shape", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_truncated, 2, {"a/x.npy", "data is 7 bytes", "need 8", "truncated"}},
    {"npy: data longer than the shape", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_trailing, 2, {"a/x.npy", "data is 12 bytes", "trailing bytes"}},
    {"npy: 8 bytes, a cut preamble (truncated, not bad magic)", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_8_bytes, 2, {"a/x.npy", "truncated: 8 bytes"}},
    {"npy: unsupported descr", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_descr, 2, {"a/x.npy", "unsupported descr '<c8'"}},
    {"npy: header not a dict", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_not_dict, 2, {"a/x.npy", "not a Python dict"}},
    {"npy: header without shape", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_no_shape, 2, {"a/x.npy", "missing key 'shape'"}},
    {"npy: shape (2) is not a tuple", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_shape_int, 2, {"a/x.npy", "not a tuple"}},
    {"npy: negative shape", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_shape_neg, 2, {"a/x.npy", "non-negative integers"}},
    {"npy: a FIFO (must not block)", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_fifo, 2, {"a/x.npy", "expected a regular file, got a special file"}},
    {"npy: shape overflowing the element count", "diff|$T/a|$T/b", 0, 0, 0, mk_npy_shape_huge, 2, {"a/x.npy", "overflows"}},
    /* trace directories given to diff */
    {"diff: directory missing", "diff|$T/a|$T/b", 0, 0, 0, 0, 2, {"/a: cannot open directory"}},
    {"diff: a regular file", "diff|$T/file|$T/b", 0, 0, 0, mk_diff_a_is_file, 2, {"/file: cannot open directory", "not a directory"}},
    {"diff: not a trace directory", "diff|$T/a|$T/b", 0, 0, 0, mk_diff_no_manifest, 2, {"/a: no trace.jsonl", "not a trace directory"}},
    {"diff: B with neither a manifest nor a .npy file", "diff|$T/a|$T/b", 0, 0, 0, mk_diff_b_no_manifest, 2, {"/b: no trace.jsonl, names.json or .npy file", "not a trace directory"}},
    {"diff: malformed manifest line", "diff|$T/a|$T/b", 0, 0, 0, mk_diff_bad_manifest, 2, {"a/trace.jsonl", "line 2"}},
    {"diff: manifest file outside the directory", "diff|$T/a|$T/b", 0, 0, 0, mk_diff_escape, 2, {"a/trace.jsonl", "\"../b/x.npy\"", "not a plain .npy file name"}},
    {"diff: listed file missing", "diff|$T/a|$T/b", 0, 0, 0, mk_diff_listed_missing, 2, {"a/x.npy", "cannot open"}},
    {"diff: duplicate key in a manifest line (the JSON reader's message)", "diff|$T/a|$T/b", 0, 0, 0, mk_diff_dup_key, 2, {"a/trace.jsonl line 1", "duplicate key"}},
    {"diff: name listed twice", "diff|$T/a|$T/b", 0, 0, 0, mk_diff_dup_name, 2, {"a/trace.jsonl", "\"x\" is listed twice"}},
    {"diff: one directory", "diff|$T/a", 0, 0, 0, 0, 2, {"need two trace directories", "usage"}},
    {"diff: bad tolerance", "diff|$T/a|$T/b|--rtol|-1", 0, 0, 0, mk_diff_good, 2, {"--rtol: expected a finite number >= 0"}},
    /* dflash explore: the same readers, its own arguments */
    {"explore: a good trace", "explore|$T/a|$T/a.html", 0, 0, 0, mk_diff_good, 0, {0}},
    {"explore: directory missing", "explore|$T/a|$T/a.html", 0, 0, 0, 0, 2, {"dflash explore:", "/a: cannot open directory"}},
    {"explore: not a trace directory", "explore|$T/a|$T/a.html", 0, 0, 0, mk_diff_no_manifest, 2, {"/a: no trace.jsonl", "not a trace directory"}},
    {"explore: malformed manifest line", "explore|$T/a|$T/a.html", 0, 0, 0, mk_diff_bad_manifest, 2, {"a/trace.jsonl", "line 2"}},
    {"explore: manifest file outside the directory", "explore|$T/a|$T/a.html", 0, 0, 0, mk_diff_escape, 2, {"a/trace.jsonl", "\"../b/x.npy\"", "not a plain .npy file name"}},
    {"explore: listed file missing", "explore|$T/a|$T/a.html", 0, 0, 0, mk_diff_listed_missing, 2, {"a/x.npy", "cannot open"}},
    {"explore: bad .npy", "explore|$T/a|$T/a.html", 0, 0, 0, mk_npy_truncated, 2, {"a/x.npy", "truncated"}},
    {"explore: name listed twice", "explore|$T/a|$T/a.html", 0, 0, 0, mk_diff_dup_name, 2, {"\"x\" is listed twice"}},
    {"explore: output cannot be written", "explore|$T/a|$T/no/a.html", 0, 0, 0, mk_diff_good, 2, {"no/a.html", "cannot create"}},
    {"explore: output full (/dev/full)", "explore|$T/a|/dev/full", 0, 0, 0, mk_diff_good, 2, {"/dev/full", "cannot write"}},
    {"explore: vocabulary missing", "explore|$T/a|$T/a.html|--vocab|$T/none.txt", 0, 0, 0, mk_diff_good, 2, {"none.txt", "cannot open"}},
    {"explore: page inside the trace directory", "explore|$T/a|$T/a/page.html", 0, 0, 0, mk_diff_good, 2, {"a/page.html", "into the trace directory"}},
    {"explore: one argument", "explore|$T/a", 0, 0, 0, 0, 2, {"need a trace directory and an output file", "usage"}},
    {"explore: unknown option", "explore|$T/a|$T/a.html|--vocabulary|x", 0, 0, 0, mk_diff_good, 2, {"unknown flag \"--vocabulary\"", "usage"}},
};

/* Run ./dflash with args (after $W/$T substitution); stdout and stderr
 * go to t/out and t/err. Returns the exit status (-1: killed). */
static int run_dflash(const char *t, const char *args, char **out, char **err) {
    char *argv[128], buf[4096];
    int argc = 0;
    argv[argc++] = "./dflash";
    size_t n = 0;
    for (const char *s = args; *s && n + 200 < sizeof buf; s++) {
        if (s[0] == '$' && (s[1] == 'W' || s[1] == 'T')) {
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", t, s[1] == 'W' ? "/w" : "");
            s++;
        } else {
            buf[n++] = *s == '|' ? 0 : *s;
        }
    }
    buf[n] = 0;
    for (size_t i = 0; i <= n && argc < 127; i++) {
        argv[argc++] = buf + i;
        i += strlen(buf + i);
    }
    argv[argc] = NULL;
    char out_path[1100], err_path[1100];
    snprintf(out_path, sizeof out_path, "%s/out", t);
    snprintf(err_path, sizeof err_path, "%s/err", t);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(127);
        dup2(fo, 1);
        dup2(fe, 2);
        alarm(300);  /* a hang fails the row (SIGALRM), even under valgrind */
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    *out = tu_read(out_path, NULL);
    *err = tu_read(err_path, NULL);
    unlink(out_path);
    unlink(err_path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* no "<x>.partial.*" or "<x>.old.*" directory anywhere in t */
static void assert_no_leftovers(const char *t) {
    DIR *d = opendir(t);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".partial.") || strstr(e->d_name, ".old.")) fail_msg("left behind: %s/%s", t, e->d_name);
    closedir(d);
}

static void run_cli_case(void **state) {
    const CliCase *c = *state;
    char *t = tu_tmpdir();
    assert_non_null(t);
    char set[600];
    snprintf(set, sizeof set, "%s/w", t);
    mkdir(set, 0755);
    tu_write_tiny_set(set);
    if (c->file && strstr(c->file, ".safetensors")) st_edit(P(set, c->file), c->from, c->to, 0);
    else if (c->file) edit_text(P(set, c->file), c->from, c->to);
    int expect = c->status;
    if (c->make) c->make(t);
    int has_earlier = tu_exists(tu_path(t, "tr/trace.jsonl"));
    char *out, *err;
    int st = run_dflash(t, c->args, &out, &err);
    assert_non_null(out);
    assert_non_null(err);
    int left_text = tu_exists(tu_path(t, "tt.txt")), left_trace = tu_exists(tu_path(t, "tr"));
    int kept_foreign = !strstr(c->name, "other files") || tu_exists(tu_path(t, "tr/keep.txt"));
    int kept_earlier = !has_earlier || tu_exists(tu_path(t, "tr/x.npy"));
    assert_no_leftovers(t);
    tu_rmtree(t);
    free(t);
    if (st != expect) fail_msg("expected exit status %d, got %d; stderr: %s", expect, st, err);
    if (expect == 2) {
        size_t el = strlen(err);
        if (el == 0 || err[el - 1] != '\n' || strchr(err, '\n') != err + el - 1)
            fail_msg("expected one line on stderr, got \"%s\"", err);
        if (strncmp(err, "dflash", 6) != 0) fail_msg("expected the message to start with \"dflash\", got \"%s\"", err);
        const char *colon = strstr(err, ": ");  /* the prefix ("dflash eval: ") once, not twice */
        if (colon) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "%.*s", (int)(colon + 2 - err), err);
            if (strstr(colon + 2, prefix)) fail_msg("the message repeats its prefix \"%s\": \"%s\"", prefix, err);
        }
        if (out[0]) fail_msg("expected nothing on stdout, got \"%s\"", out);
        for (int k = 0; k < 4 && c->want[k]; k++) assert_contains(err, c->want[k]);
        if (left_text) fail_msg("a failed run left its text trace behind");
        if (left_trace && !has_earlier && !strstr(c->name, "other files")) fail_msg("a failed run left a trace directory");
        if (!kept_foreign || !kept_earlier) fail_msg("a failed run removed an earlier file");
        print_message("     %s", err);
    } else if (err[0]) {
        fail_msg("expected nothing on stderr, got \"%s\"", err);
    }
    free(out);
    free(err);
}

/* trace_discard (main calls it when generation fails after trace_open):
 * the partial directory and the text trace go, the earlier trace stays,
 * and the run's error message is kept. */
static void test_trace_discard_leaves_nothing(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    assert_non_null(t);
    mk_earlier_trace(t);
    Tracer *tr = trace_open(tu_path(t, "tr"), tu_path(t, "tt.txt"), NULL, 0);
    assert_non_null(tr);
    int64_t v[2] = {1, 2}, shape[1] = {2};
    assert_int_equal(trace_i64(tr, (TracePhase){"prefill", 0}, "y", "y", v, 1, shape), 0);
    assert_false(tu_exists(tu_path(t, "tt.txt")));  /* written beside it, renamed at close */
    dflash_set_error("the run failed");
    trace_discard(tr);
    assert_string_equal(dflash_errmsg, "the run failed");
    assert_false(tu_exists(tu_path(t, "tt.txt")));
    assert_true(tu_exists(tu_path(t, "tr/x.npy")));   /* the earlier trace */
    assert_false(tu_exists(tu_path(t, "tr/y.npy")));
    assert_int_equal(tu_count_entries(t), 1);          /* tr only: no .partial */
    trace_discard(NULL);
    tu_rmtree(t);
    free(t);
}

/* The ids-file reader (formats/files.c: dflash eval --ids-file, make
 * bench's learned pair, test_learned): lines shorter than min_len skipped,
 * longer ones cut at max_len, "|" and commas between ids; an id that is not
 * one of 0..V-1 (a word, a sign, one too many) is refused naming the file,
 * its line and the text, and nothing past the last line taken is read. */
static void test_ids_file_names_the_bad_line(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    assert_non_null(t);
    const char *f = tu_path(t, "p.ids");
    const char *good = "1 2 3 4\n5\n6,7 | 8 9 10\n";
    assert_int_equal(tu_write(f, good, strlen(good)), 0);
    int prompts[3 * 3], lens[3];
    assert_int_equal(ids_file_prompts(f, 3, 2, 3, 11, prompts, lens), 2);   /* line 2 has 1 id */
    static const int want[2][3] = {{1, 2, 3}, {6, 7, 8}};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(lens[i], 3);
        for (int k = 0; k < 3; k++) assert_int_equal(prompts[i * 3 + k], want[i][k]);
    }
    static const struct { const char *text, *msg; } BAD[] = {
        {"1 2\n3 4\n5 x7 6\n", "p.ids: line 3: expected token ids 0..10, got \"x7\""},
        {"1 2\n-3 4\n", "p.ids: line 2: expected token ids 0..10, got \"-3\""},
        {"11 2\n", "p.ids: line 1: expected token ids 0..10, got \"11\""},
        {"1 2 3q\n", "p.ids: line 1: expected token ids 0..10, got \"3q\""},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        assert_int_equal(tu_write(f, BAD[i].text, strlen(BAD[i].text)), 0);
        dflash_errmsg[0] = 0;
        if (ids_file_prompts(f, 3, 1, 3, 11, prompts, NULL) != -1) fail_msg("%s: accepted", BAD[i].text);
        assert_non_null(strstr(dflash_errmsg, BAD[i].msg));
        assert_null(strchr(dflash_errmsg, '\n'));
    }
    /* what dflash train --save-data writes: a '#' line first (train/train_cli.c), then --data lines */
    const char *saved = "# dflash train: the 2 sequences trained on (--data format: prompt | completion)\n1 2 | 3\n  # 9 9 9\n4 5 6\n";
    assert_int_equal(tu_write(f, saved, strlen(saved)), 0);
    assert_int_equal(ids_file_prompts(f, 3, 1, 3, 11, prompts, lens), 2);
    assert_int_equal(lens[0], 3);
    assert_int_equal(prompts[0 * 3 + 2], 3);
    assert_int_equal(prompts[1 * 3 + 0], 4);
    /* the lines after the last one taken are not read */
    const char *tail = "1 2\nbad\n";
    assert_int_equal(tu_write(f, tail, strlen(tail)), 0);
    assert_int_equal(ids_file_prompts(f, 1, 1, 3, 11, prompts, lens), 1);
    assert_int_equal(ids_file_prompts(tu_path(t, "none.ids"), 1, 1, 3, 11, prompts, lens), -1);
    tu_rmtree(t);
    free(t);
}

/* Under `ulimit -f` a write past the limit raises SIGXFSZ, whose default
 * action kills the run (exit 153) with no word and its partial files left
 * behind. dflash ignores it: the write fails (EFBIG) and the run stops as on
 * a full disk, one line naming the file, exit 2, no partial left. */
static void test_file_size_limit_is_a_clear_error(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    assert_non_null(t);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "sh -c 'ulimit -f 100; exec ./dflash --weights toy_weights/walkthrough --trace-text %s/o'", t);
    tu_expect_refusal(t, cmd, "/o: File too large");
    char ls[1024];
    snprintf(ls, sizeof ls, "ls -a %s | grep -c partial", t);
    int st;
    char *out = tu_sh(ls, &st);
    assert_string_equal(out, "0\n");
    free(out);
    tu_rmtree(t);
    free(t);
}

/* --replay DIR is an input: neither --trace DIR nor --trace-text DIR/trace.jsonl
 * may write over the port's trace it reads (both used to replace it). */
static void test_replay_folder_is_an_input(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    assert_non_null(t);
    char cmd[2048], manifest[1200];
    snprintf(cmd, sizeof cmd, "./dflash --weights toy_weights/walkthrough --trace %s/port", t);
    assert_int_equal(tu_run(cmd, NULL), 0);
    snprintf(manifest, sizeof manifest, "%s/port/trace.jsonl", t);
    size_t len0 = 0;
    char *before = tu_read(manifest, &len0);
    assert_non_null(before);
    snprintf(cmd, sizeof cmd, "./dflash --weights toy_weights/walkthrough --replay %s/port --trace %s/port", t, t);
    tu_expect_refusal(t, cmd, "refusing to replace it");
    snprintf(cmd, sizeof cmd, "./dflash --weights toy_weights/walkthrough --replay %s/port --trace-text %s", t, manifest);
    tu_expect_refusal(t, cmd, "refusing to write over it");
    size_t len1 = 0;
    char *after = tu_read(manifest, &len1);
    assert_non_null(after);
    assert_true(len0 == len1 && memcmp(before, after, len0) == 0);
    free(before);
    free(after);
    tu_rmtree(t);
    free(t);
}

/* Only an absent draft/ means target-only decoding; a draft/ that is there
 * but broken (no config.json) is an error (it used to run target-only, exit 0). */
static void test_broken_draft_folder_is_an_error(void **state) {
    (void)state;
    char *t = tu_tmpdir();
    assert_non_null(t);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/w && ln -s \"$PWD/toy_weights/walkthrough/target\" %s/w/target && "
             "cp toy_weights/walkthrough/vocab.txt %s/w/", t, t, t);
    assert_int_equal(tu_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "./dflash --weights %s/w --max-new-tokens 2 2>&1 | grep -c 'has no draft'", t);
    int st;
    char *out = tu_sh(cmd, &st);
    assert_string_equal(out, "1\n");   /* no draft/: a note, target-only */
    free(out);
    snprintf(cmd, sizeof cmd, "mkdir %s/w/draft", t);
    assert_int_equal(tu_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "./dflash --weights %s/w --max-new-tokens 2", t);
    tu_expect_refusal(t, cmd, "draft/config.json");
    tu_rmtree(t);
    free(t);
}

int main(void) {
    enum { NL = sizeof LOAD_CASES / sizeof LOAD_CASES[0], NC = sizeof CLI_CASES / sizeof CLI_CASES[0] };
    static struct CMUnitTest load[NL], cli[NC];
    for (int i = 0; i < NL; i++) load[i] = (struct CMUnitTest){LOAD_CASES[i].name, run_load_case, NULL, NULL, (void *)&LOAD_CASES[i]};
    for (int i = 0; i < NC; i++) cli[i] = (struct CMUnitTest){CLI_CASES[i].name, run_cli_case, NULL, NULL, (void *)&CLI_CASES[i]};
    const struct CMUnitTest other[] = {cmocka_unit_test(test_trace_discard_leaves_nothing),
                                       cmocka_unit_test(test_ids_file_names_the_bad_line),
                                       cmocka_unit_test(test_file_size_limit_is_a_clear_error),
                                       cmocka_unit_test(test_replay_folder_is_an_input),
                                       cmocka_unit_test(test_broken_draft_folder_is_an_error)};
    int failed = _cmocka_run_group_tests("errors: loader, config, vocab, prompt", load, NL, NULL, NULL);
    failed += cmocka_run_group_tests_name("errors: a failed run's trace, the ids-file reader", other, NULL, NULL);
    failed += _cmocka_run_group_tests("errors: ./dflash and dflash diff (exit status 2, one line)", cli, NC, NULL, NULL);
    return failed ? 1 : 0;
}
