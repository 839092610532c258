/* testutil.h - small helpers common to the cmocka tests: scratch
 * directories, whole-file reads and writes, capturing what a function prints
 * on stdout/stderr, and small weight directories built byte by byte (so the
 * loader tests do not depend on the generator they check). All static inline
 * so a test that does not use one does not warn about it.
 *
 * Every test file does `#include "../dflash.c"` and `#include "../formats/load.c"`,
 * so it can reach their static functions, and links formats/json.c and trace.c. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* UNDER_ASAN: 1 in an AddressSanitizer build (make sanitize), where the runs
 * are slow: GCC defines __SANITIZE_ADDRESS__, clang answers __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* A shell command with stdout and stderr to `out` (NULL: /dev/null); its
 * exit status, -1 when it did not exit. */
static inline int tu_run(const char *cmd, const char *out) {
    char full[4096];
    snprintf(full, sizeof full, "%s > %s 2>&1", cmd, out ? out : "/dev/null");
    int rc = system(full);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

/* exit status of a printf-formatted shell command (-1: it did not exit) */
static inline int tu_runf(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* cmd refused: exit 2, one line on stderr holding needle, no dir/o written
 * (its stdout and stderr go to dir/out.txt and dir/err.txt) */
static inline void tu_expect_refusal(const char *dir, const char *cmd, const char *needle) {
    char full[8192];
    snprintf(full, sizeof full, "%s > %s/out.txt 2> %s/err.txt", cmd, dir, dir);
    int st = system(full);
    char errp[700], outp[700];
    snprintf(errp, sizeof errp, "%s/err.txt", dir);
    snprintf(outp, sizeof outp, "%s/o", dir);
    FILE *f = fopen(errp, "rb");
    assert_non_null(f);
    char err[4096];
    size_t n = fread(err, 1, sizeof err - 1, f);
    fclose(f);
    err[n] = 0;
    int lines = 0;
    for (char *p = err; *p; p++) lines += *p == '\n';
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || lines != 1 || !strstr(err, needle))
        fail_msg("%s: expected exit 2 and one line with \"%s\", got %d: %s", cmd, needle,
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1, err);
    assert_int_equal(access(outp, F_OK), -1);
}

/* A shell command's stdout, whole and NUL-terminated (malloc'd); *status
 * its exit status, -1 when it did not exit. */
static inline char *tu_sh(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
        n += got;
        if (n + 1 == cap) assert_non_null(buf = realloc(buf, cap *= 2));
    }
    buf[n] = 0;
    int st = pclose(p);
    *status = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

/* tu_sh of a command that must exit 0 */
static inline char *tu_capture(const char *cmd) {
    int st;
    char *out = tu_sh(cmd, &st);
    if (st != 0) fail_msg("%s: exit %d: %s", cmd, st, out);
    return out;
}

/* `make test` runs a representative subset of the long sweeps (every block
 * size 1..8 over two prompts per weight set, a 600-seed chi-square);
 * DFLASH_TEST_LONG=1 (`make test-long`) runs them in
 * full (20 + 6 prompts, 3000 seeds). `make sanitize` runs the subset. */
static inline int tu_long(void) {
    const char *q = getenv("DFLASH_TEST_LONG");
    return q && *q && strcmp(q, "0") != 0;
}

/* The former name (it was set by `make sanitize` only): quick is now the
 * default, and DFLASH_TEST_QUICK is no longer read. */
static inline int tu_quick(void) { return !tu_long(); }

/* Skip the current test, saying why: one line "SKIP: <why>" on stdout (after
 * cmocka's "[ RUN      ] <test>" line, in the same stream), then cmocka's
 * skip(). tools/run-tests.sh lists these lines under its summary, with the
 * test's name: a bare skip() would only count. printf-style arguments. */
#define tu_skip(...)                 \
    do {                             \
        printf("SKIP: ");            \
        printf(__VA_ARGS__);         \
        printf("\n");                \
        fflush(stdout);              \
        skip();                      \
    } while (0)

/* A fresh, empty directory under /tmp (malloc'd path; NULL on failure). */
static inline char *tu_tmpdir(void) {
    /* under $TMPDIR when set (tools/run-tests.sh points it at a tmpfs when there is one), else /tmp */
    const char *base = getenv("TMPDIR");
    char t[600];
    snprintf(t, sizeof t, "%.500s/dflash-test.XXXXXX", base && base[0] ? base : "/tmp");
    char *p = strdup(t);
    if (p && !mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

/* rm -rf path. Returns 0 when it is gone. */
static inline int tu_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return -1;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            size_t n = strlen(path) + strlen(e->d_name) + 2;
            char *c = malloc(n);
            if (!c) break;
            snprintf(c, n, "%s/%s", path, e->d_name);
            tu_rmtree(c);
            free(c);
        }
        closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

/* A suite's scratch directory: TU_SCRATCH, made by tu_scratch_setup and
 * removed by tu_scratch_teardown (cmocka_run_group_tests' group setup and
 * teardown). */
static inline char **tu_scratch_slot(void) {
    static char *dir;
    return &dir;
}
#define TU_SCRATCH (*tu_scratch_slot())
static inline int tu_scratch_setup(void **state) {
    (void)state;
    TU_SCRATCH = tu_tmpdir();
    return TU_SCRATCH ? 0 : -1;
}
static inline int tu_scratch_teardown(void **state) {
    (void)state;
    tu_rmtree(TU_SCRATCH);
    free(TU_SCRATCH);
    TU_SCRATCH = NULL;
    return 0;
}

/* a/b in a static ring of buffers, so a few can be alive at once. */
static inline const char *tu_path(const char *a, const char *b) {
    static char ring[8][1024];
    static int next;
    char tmp[sizeof ring[0]];  /* a or b may be an earlier ring entry */
    snprintf(tmp, sizeof tmp, "%s/%s", a, b);
    char *p = ring[next++ % 8];
    memcpy(p, tmp, sizeof tmp);
    return p;
}

/* This build's precision and the other one's, as in the fixtures' names
 * (./dflash is the REAL build: the same objects as ./dflash-TU_SELF). */
#ifdef DFLASH_DOUBLE
#define TU_SELF "double"
#define TU_OTHER "float"
#else
#define TU_SELF "float"
#define TU_OTHER "double"
#endif

/* build/fixtures/NAME: a trace tools/test-fixtures.sh makes before the
 * suites run (make test, make test-long, make sanitize; by hand: `sh
 * tools/test-fixtures.sh`), read where a suite would run the same command
 * itself; NAME-PRECISION, e.g. "random1-" TU_SELF. Fails the test when it is
 * missing. (tu_path's ring: copy what must live longer.) */
static inline const char *tu_fixture(const char *name) {
    char m[700];
    snprintf(m, sizeof m, "build/fixtures/%.600s/trace.jsonl", name);
    if (access(m, R_OK) != 0) fail_msg("%s: missing (sh tools/test-fixtures.sh; make test runs it)", m);
    return tu_path("build/fixtures", name);
}

static inline int tu_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* All of path, NUL-terminated (malloc'd; NULL when unreadable). */
static inline char *tu_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* All of path mapped, private and writable (a write changes this copy
 * only), for a large file read whole: tu_read copies it into fresh memory, a
 * page fault for every 4 KB of it, where the mapping shares the file's
 * cached pages (test_gguf reads ~700 MB). NULL when unreadable or empty;
 * tu_unmap(p, *len) when done. */
static inline unsigned char *tu_map(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return NULL;
    *len = (size_t)st.st_size;
    return m;
}
static inline void tu_unmap(void *p, size_t len) {
    if (p) munmap(p, len);
}

static inline int tu_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t put = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && put == len) ? 0 : -1;
}

/* Number of entries in a directory (without . and ..); -1 if unreadable. */
static inline int tu_count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Capture stdout and stderr (file descriptors 1 and 2) into a file. */
typedef struct {
    int saved_out, saved_err;
    char path[64];
} TuCapture;

static inline int tu_capture_begin(TuCapture *c) {
    fflush(stdout);
    fflush(stderr);
    snprintf(c->path, sizeof c->path, "/tmp/dflash-capture.XXXXXX");
    int fd = mkstemp(c->path);
    if (fd < 0) return -1;
    c->saved_out = dup(1);
    c->saved_err = dup(2);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    return 0;
}

/* Restore stdout/stderr; returns everything printed meanwhile (malloc'd). */
static inline char *tu_capture_end(TuCapture *c) {
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved_out, 1);
    dup2(c->saved_err, 2);
    close(c->saved_out);
    close(c->saved_err);
    char *text = tu_read(c->path, NULL);
    unlink(c->path);
    return text;
}

/* ---- small weight sets ---------------------------------------------- */

static inline void tu_write_text(const char *path, const char *text) { assert_int_equal(tu_write(path, text, strlen(text)), 0); }

/* A safetensors file from a list of F32 tensors. Offsets are laid out in
 * list order; the header is padded with spaces to a multiple of 8. */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[2];
    const float *data;   /* numel floats */
} TuTensor;

static inline int64_t tu_numel(const TuTensor *t) { return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1]; }

static inline void tu_write_safetensors(const char *path, const TuTensor *ts, int n) {
    size_t hcap = 256 + (size_t)n * 200, hl = 0;
    char *h = malloc(hcap);
    assert_non_null(h);
    int64_t off = 0;
    hl += (size_t)snprintf(h + hl, hcap - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        int64_t bytes = tu_numel(&ts[i]) * 4;
        if (ts[i].ndim == 1)
            hl += (size_t)snprintf(h + hl, hcap - hl, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%lld,%lld]}",
                                   ts[i].name, (long long)ts[i].shape[0], (long long)off, (long long)(off + bytes));
        else
            hl += (size_t)snprintf(h + hl, hcap - hl, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}",
                                   ts[i].name, (long long)ts[i].shape[0], (long long)ts[i].shape[1], (long long)off,
                                   (long long)(off + bytes));
        off += bytes;
    }
    hl += (size_t)snprintf(h + hl, hcap - hl, "}");
    while (hl % 8) h[hl++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    assert_int_equal(fwrite(len8, 1, 8, f), 8);
    assert_int_equal(fwrite(h, 1, hl, f), hl);
    for (int i = 0; i < n; i++) assert_int_equal(fwrite(ts[i].data, 4, (size_t)tu_numel(&ts[i]), f), (size_t)tu_numel(&ts[i]));
    assert_int_equal(fclose(f), 0);
    free(h);
}

/* A tiny model: D=8, 1 layer, 2 heads, 1 KV head, head_dim 4, I=16, V=6.
 * Every value is a known function of (tensor index, element index), so a
 * test can recompute what any element must be. */
enum { TU_D = 8, TU_L = 1, TU_H = 2, TU_KV = 1, TU_HD = 4, TU_I = 16, TU_V = 6 };

static inline float tu_value(int tensor, int64_t i) { return (float)(tensor + 1) * 0.01f + (float)(i % 97) * 0.001f; }

typedef struct {
    TuTensor t[64];
    char names[64][96];
    float *bufs[64];
    int n;
} TuModel;

static inline void tu_add(TuModel *m, const char *name, int ndim, int64_t s0, int64_t s1) {
    int k = m->n++;
    snprintf(m->names[k], sizeof m->names[k], "%s", name);
    m->t[k].name = m->names[k];
    m->t[k].ndim = ndim;
    m->t[k].shape[0] = s0;
    m->t[k].shape[1] = s1;
    int64_t numel = tu_numel(&m->t[k]);
    m->bufs[k] = malloc(sizeof(float) * (size_t)numel);
    assert_non_null(m->bufs[k]);
    for (int64_t i = 0; i < numel; i++) m->bufs[k][i] = tu_value(k, i);
    m->t[k].data = m->bufs[k];
}

/* The tensors of a target of L layers (vocabulary V) or of a 1-layer
 * draft reading k target layers (fc is (D, k*D)). */
static inline void tu_model_tensors_lv(TuModel *m, int draft, int L, int V, int k) {
    const char *pre = draft ? "" : "model.";
    char nm[96];
    memset(m, 0, sizeof *m);
    if (!draft) tu_add(m, "model.embed_tokens.weight", 2, V, TU_D);
    for (int l = 0; l < (draft ? 1 : L); l++) {
#define L1(suffix, s0) snprintf(nm, sizeof nm, "%slayers.%d.%s", pre, l, suffix); tu_add(m, nm, 1, s0, 0)
#define L2(suffix, s0, s1) snprintf(nm, sizeof nm, "%slayers.%d.%s", pre, l, suffix); tu_add(m, nm, 2, s0, s1)
        L1("input_layernorm.weight", TU_D);
        L2("self_attn.q_proj.weight", TU_H * TU_HD, TU_D);
        L2("self_attn.k_proj.weight", TU_KV * TU_HD, TU_D);
        L2("self_attn.v_proj.weight", TU_KV * TU_HD, TU_D);
        L2("self_attn.o_proj.weight", TU_D, TU_H * TU_HD);
        L1("self_attn.q_norm.weight", TU_HD);
        L1("self_attn.k_norm.weight", TU_HD);
        L1("post_attention_layernorm.weight", TU_D);
        L2("mlp.gate_proj.weight", TU_I, TU_D);
        L2("mlp.up_proj.weight", TU_I, TU_D);
        L2("mlp.down_proj.weight", TU_D, TU_I);
#undef L1
#undef L2
    }
    if (draft) {
        tu_add(m, "fc.weight", 2, TU_D, (int64_t)k * TU_D);
        tu_add(m, "hidden_norm.weight", 1, TU_D, 0);
        tu_add(m, "norm.weight", 1, TU_D, 0);
    } else {
        tu_add(m, "model.norm.weight", 1, TU_D, 0);
        tu_add(m, "lm_head.weight", 2, V, TU_D);
    }
}

static inline void tu_model_tensors(TuModel *m, int draft) { tu_model_tensors_lv(m, draft, TU_L, TU_V, 1); }

static inline void tu_model_free(TuModel *m) {
    for (int i = 0; i < m->n; i++) free(m->bufs[i]);
}

static inline const char *tu_config(int draft) {
    return draft ? "{\"architectures\":[\"DFlashDraftModel\"],\"model_type\":\"qwen3\",\"hidden_size\":8,"
                   "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                   "\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":6,\"rms_norm_eps\":1e-6,"
                   "\"rope_theta\":10000.0,\"max_position_embeddings\":64,\"tie_word_embeddings\":false,"
                   "\"num_target_layers\":1,\"block_size\":2,"
                   "\"dflash_config\":{\"mask_token_id\":5,\"target_layer_ids\":[0]}}"
                 : "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":8,"
                   "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                   "\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":6,\"rms_norm_eps\":1e-6,"
                   "\"rope_theta\":10000.0,\"max_position_embeddings\":64,\"tie_word_embeddings\":false}";
}

/* write DIR/{target,draft}/{config.json,model.safetensors} and DIR/vocab.txt */
static inline void tu_write_tiny_set(const char *dir) {
    char p[1200];
    for (int draft = 0; draft < 2; draft++) {
        snprintf(p, sizeof p, "%s/%s", dir, draft ? "draft" : "target");
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/%s/config.json", dir, draft ? "draft" : "target");
        tu_write_text(p, tu_config(draft));
        TuModel m;
        tu_model_tensors(&m, draft);
        snprintf(p, sizeof p, "%s/%s/model.safetensors", dir, draft ? "draft" : "target");
        tu_write_safetensors(p, m.t, m.n);
        tu_model_free(&m);
    }
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    tu_write_text(p, "a\nb\nc\n.\n<eos>\n<mask>\n");
}

/* The small set of issue 21 in DIR: a 4-layer target (hidden size 8, 2
 * heads, 1 KV head, head_dim 4, I 16, a 16-token vocabulary) and a 1-layer
 * draft reading target layers 1 and 3; vocab.txt "w0".."w13", "<eos>" (14),
 * "<mask>" (15). The tensors whose names match the glob `scaled` (of either
 * model; NULL: none) are multiplied by scale: "model.embed_tokens.weight" by 1e21 stays finite in
 * float, but its square (1e42) does not, so the first RMSNorm's sum of
 * squares overflows (issue 21's m_big). */
static inline void tu_write_small_set(const char *dir, const char *scaled, float scale) {
    char p[1200];
    static const char *const CFG[2] = {
        "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":8,"
        "\"intermediate_size\":16,\"num_hidden_layers\":4,\"num_attention_heads\":2,"
        "\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":16,\"rms_norm_eps\":1e-6,"
        "\"rope_theta\":10000.0,\"max_position_embeddings\":4096,\"tie_word_embeddings\":false,"
        "\"eos_token_id\":14}",
        "{\"architectures\":[\"DFlashDraftModel\"],\"model_type\":\"qwen3\",\"hidden_size\":8,"
        "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
        "\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":16,\"rms_norm_eps\":1e-6,"
        "\"rope_theta\":10000.0,\"max_position_embeddings\":4096,\"tie_word_embeddings\":false,"
        "\"num_target_layers\":4,\"block_size\":4,"
        "\"dflash_config\":{\"mask_token_id\":15,\"target_layer_ids\":[1,3]}}"};
    for (int draft = 0; draft < 2; draft++) {
        snprintf(p, sizeof p, "%s/%s", dir, draft ? "draft" : "target");
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/%s/config.json", dir, draft ? "draft" : "target");
        tu_write_text(p, CFG[draft]);
        TuModel m;
        tu_model_tensors_lv(&m, draft, 4, 16, 2);
        /* tu_value repeats every 97 elements: vary the rows so tokens differ */
        for (int k = 0; k < m.n; k++)
            for (int64_t i = 0; i < tu_numel(&m.t[k]); i++)
                m.bufs[k][i] = (float)(((i * 7 + k * 13) % 23) - 11) * 0.05f + 0.01f * (float)(k % 5);
        for (int k = 0; k < m.n; k++)
            if (scaled && fnmatch(scaled, m.names[k], 0) == 0)
                for (int64_t i = 0; i < tu_numel(&m.t[k]); i++) m.bufs[k][i] *= scale;
        snprintf(p, sizeof p, "%s/%s/model.safetensors", dir, draft ? "draft" : "target");
        tu_write_safetensors(p, m.t, m.n);
        tu_model_free(&m);
    }
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    tu_write_text(p, "w0\nw1\nw2\nw3\nw4\nw5\nw6\nw7\nw8\nw9\nw10\nw11\nw12\nw13\n<eos>\n<mask>\n");
}

/* a fresh tiny weight set in a temp dir, loaded: the caller frees the two
 * models, then tu_rmtree(dir) and free(dir) */
static inline char *tu_load_tiny_pair(Model *t, Model *d) {
    char p[400], *dir = tu_tmpdir();
    assert_non_null(dir);
    tu_write_tiny_set(dir);
    snprintf(p, sizeof p, "%s/target", dir);
    assert_int_equal(model_load(t, p, 0), 0);
    snprintf(p, sizeof p, "%s/draft", dir);
    assert_int_equal(model_load(d, p, 1), 0);
    return dir;
}

/* A generated weight set (target, draft, vocabulary), e.g. the walkthrough's */
typedef struct {
    Model target, draft;
    Vocab vocab;
} TuSet;

/* setup for a cmocka group: *state = the loaded set at dir (-1: not built) */
static inline int tu_set_setup(void **state, const char *dir) {
    char p[400];
    TuSet *s = calloc(1, sizeof *s);
    if (!s) return -1;
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    int rc = vocab_load(&s->vocab, p);
    snprintf(p, sizeof p, "%s/target", dir);
    if (rc == 0) rc = model_load(&s->target, p, 0);
    snprintf(p, sizeof p, "%s/draft", dir);
    if (rc == 0) rc = model_load(&s->draft, p, 1);
    if (rc != 0) {
        fprintf(stderr, "cannot load %s (run make first): %s\n", dir, dflash_errmsg);
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static inline int tu_set_teardown(void **state) {
    TuSet *s = *state;
    if (!s) return 0;
    model_free(&s->target);
    model_free(&s->draft);
    vocab_free(&s->vocab);
    free(s);
    return 0;
}

/* substring check with a readable failure */
#define assert_contains(hay, needle)                                                     \
    do {                                                                                 \
        const char *h_ = (hay), *n_ = (needle);                                          \
        if (!h_ || !strstr(h_, n_)) fail_msg("expected \"%s\" in:\n%s", n_, h_ ? h_ : "(null)"); \
    } while (0)

/* `dflash diff`'s "first departure: NAME: ..." -> NAME (a static buffer; "" when absent) */
static inline const char *first_departure(const char *out) {
    static char name[256];
    name[0] = 0;
    const char *p = strstr(out, "first departure: ");
    if (!p) return name;
    p += strlen("first departure: ");
    size_t n = 0;
    while (p[n] && p[n] != '\n' && !(p[n] == ':' && p[n + 1] == ' ') && n + 1 < sizeof name) n++;
    memcpy(name, p, n);
    name[n] = 0;
    return name;
}

#endif /* TESTUTIL_H */
