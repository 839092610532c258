/* tests/fuzz/fuzz_safetensors.c - libFuzzer target: the safetensors header
 * reader (safetensors_check_header) on whole files, against the tensor
 * tables of a tiny target and a tiny draft (D = I = d = V = 2, one layer).
 * Every input is copied into a buffer of exactly its size, so AddressSanitizer
 * catches any read past the end. Built by `make fuzz` with clang
 * -fsanitize=fuzzer,address,undefined; seeds in tests/fuzz/safetensors/. */
#include "dflash.c"
#include "formats/load.c"

static const char TARGET_CFG[] =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"hidden_size\":2,\"intermediate_size\":2,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":1,\"num_key_value_heads\":1,\"head_dim\":2,"
    "\"vocab_size\":2,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"max_position_embeddings\":64}";
static const char DRAFT_CFG[] =
    "{\"architectures\":[\"DFlashDraftModel\"],\"hidden_size\":2,\"intermediate_size\":2,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":1,\"num_key_value_heads\":1,\"head_dim\":2,"
    "\"vocab_size\":2,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"max_position_embeddings\":64,"
    "\"num_target_layers\":1,\"block_size\":2,\"dflash_config\":{\"mask_token_id\":1,\"target_layer_ids\":[0]}}";

static Model models[2];
static TensorSpec *specs[2];
static int n_specs[2];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (int k = 0; k < 2; k++) {
        const char *cfg = k ? DRAFT_CFG : TARGET_CFG;
        Model *m = &models[k];
        if (config_parse(&m->cfg, "config.json", cfg, strlen(cfg), k) != 0) abort();
        m->layers = xcalloc((size_t)m->cfg.num_hidden_layers, sizeof(LayerWeights), "layers");
        if (!m->layers || tensor_table(m, &specs[k], &n_specs[k]) != 0) abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    for (int k = 0; k < 2; k++) {
        size_t start = 0;
        if (safetensors_check_header(buf, size, specs[k], n_specs[k], "model.safetensors", &start) == 0) {
            /* what safetensors_load relies on: every tensor inside the file */
            for (int j = 0; j < n_specs[k]; j++)
                if (!specs[k][j].found || start + (size_t)specs[k][j].end > size ||
                    specs[k][j].end - specs[k][j].begin != spec_numel(&specs[k][j]) * ST_READ_SIZES[specs[k][j].dtype])
                    abort();
        } else if (!dflash_errmsg[0]) {
            abort();  /* a refusal always comes with a message (main prints
                       * it on one line, whatever control characters a
                       * quoted tensor name holds) */
        }
        dflash_errmsg[0] = 0;
    }
    free(buf);
    return 0;
}
