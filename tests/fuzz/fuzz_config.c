/* tests/fuzz/fuzz_config.c - libFuzzer target: the JSON reader and
 * config_parse on config.json text, read as a target and as a draft
 * config; when a config is accepted, its tensor table is built (the sizes
 * it implies must not overflow). Seeds in tests/fuzz/config/. */
#include "dflash.c"
#include "formats/load.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size ? size : 1);  /* exactly size bytes, no NUL */
    if (!text) return 0;
    memcpy(text, data, size);
    for (int draft = 0; draft < 2; draft++) {
        Model m;
        memset(&m, 0, sizeof m);
        dflash_errmsg[0] = 0;
        if (config_parse(&m.cfg, "config.json", text, size, draft) != 0) {
            if (!dflash_errmsg[0]) abort();
            continue;
        }
        const Config *c = &m.cfg;
        if (c->hidden_size < 1 || c->head_dim % 2 || c->num_attention_heads % c->num_key_value_heads) abort();
        for (int i = 0; draft && i < c->n_target_layer_ids; i++)
            if (c->target_layer_ids[i] < 0 || c->target_layer_ids[i] >= c->num_target_layers) abort();
        TensorSpec *specs = NULL;
        int n = 0;
        m.layers = xcalloc((size_t)c->num_hidden_layers, sizeof(LayerWeights), "layers");
        if (m.layers && tensor_table(&m, &specs, &n) == 0) {
            int64_t total = 0;
            for (int j = 0; j < n; j++) total += spec_numel(&specs[j]);
            if (total <= 0) abort();
            free(specs);
        }
        free(m.layers);
    }
    free(text);
    return 0;
}
