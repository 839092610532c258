// gguf/llama_check.mjs - greedy decoding in llama.cpp (through node-llama-cpp)
// from token ids: the real-engine check of `dflash gguf` (gguf/llama-check.sh,
// `make llama-check`; docs/gguf.md).
//
//   node gguf/llama_check.mjs NODE_MODULES_DIR MODEL.gguf N IDS [IDS ...]
//
// For each prompt IDS ("2,3,4") prints one line: the prompt and N greedy new
// tokens, space-separated, as `dflash --mode ar --print-ids --ignore-eos`
// prints them. No tokenizer text round trip: ids in, ids out. One thread,
// F32 K/V, flash attention off (on, llama.cpp's CPU flash attention converts
// the K/V to F16 and 2 of the 12 cases differ within 200 tokens: not tested),
// CPU only, and yieldEogToken so that decoding goes on past <eos> as
// --ignore-eos does.
import {pathToFileURL} from "node:url";
import path from "node:path";

//
//   node gguf/llama_check.mjs NODE_MODULES_DIR --draft DRAFT.gguf
//
// loads a dflash draft through llama.cpp's own loader (its dflash
// load_arch_hparams / load_arch_tensors: every key and tensor it requires)
// and prints the target layers llama.cpp read ("extract_layers 4,8,12"). A
// draft cannot run here: its context needs the target's (ctx_other), which
// the binding does not pass.
//
//   node gguf/llama_check.mjs NODE_MODULES_DIR --tokenize MODEL.gguf TEXT [TEXT ...]
//
// prints, for each TEXT, the ids llama.cpp's tokenizer gives it (special
// tokens parsed, as llama-speculative-simple's -p does), comma-separated
// (gguf/llama-spec.sh).
//
//   node gguf/llama_check.mjs NODE_MODULES_DIR --tokenizer-case MODEL.gguf TOKENIZER.json TEXTS.inp DFLASH WORK [REF]
//
// the tokenization case of gguf/llama-check.sh: llama.cpp (vocab_only) on
// every text of TEXTS.inp (texts separated by "\n__dflash_tokenizer_test__\n",
// as tokenizer/tests/cases/texts.inp) against this program's tokenizer on
// TOKENIZER.json, the one `dflash gguf` converted into MODEL.gguf:
//   special tokens parsed (llama_tokenize's parse_special): llama.cpp's ids
//     must be `DFLASH tokenize --tokenizer TOKENIZER.json --no-special`'s
//     (neither adds BOS: node-llama-cpp passes add_special false);
//   not parsed: llama.cpp then still matches USER_DEFINED tokens (added,
//     special: false) but not CONTROL ones (special: true), so the ids must be
//     dflash tokenize's on a copy of TOKENIZER.json without its special
//     added tokens (WORK/nospecial.json);
//   detokenize (llama_detokenize, special tokens rendered, as HF's
//     skip_special_tokens=False) of those ids must be `DFLASH tokenize
//     --decode`'s bytes.
// llama.cpp has no normalizer: with an NFC tokenizer.json each text goes to
// llama.cpp as String.normalize("NFC") makes it (ICU, a second NFC), and the
// texts that are not NFC already are counted (the gap: a caller must NFC).
// With REF (tokenizer/tests/cases/qwen3: a real tokenizer's committed Hugging Face
// pairs, which make tokenizer-check shows are dflash tokenize's) the parsed
// ids are REF-nospecial.out's and the detokenized ones REF.out's against
// REF.dec, without a dflash process per text (0.7 s of CPU each for an
// 11 MB file); dflash runs only for the unparsed case of a text that holds
// a special token. Prints one line per difference (the text, both id lists)
// and a summary; exits 1 on any difference.
//
//   node gguf/llama_check.mjs NODE_MODULES_DIR --widen SRC_TARGET OUT_TARGET VOCAB_SIZE EOS_ID
//
// copies an F32 single-file target (config.json, model.safetensors) with
// vocab_size VOCAB_SIZE: embed_tokens and lm_head get zero rows up to it (a
// real tokenizer's vocabulary on a tiny model: only its vocabulary matters).
//
//   node gguf/llama_check.mjs NODE_MODULES_DIR --f32 SRC_TARGET OUT_TARGET
//
// copies a single-file target with every tensor F32 (BF16 widened exactly):
// the F32 GGUF of a BF16 target (gguf/llama-bench.sh).
//
//   node gguf/llama_check.mjs NODE_MODULES_DIR --hybrid OUT_DIR SEED
//
// writes a small random hybrid target (Qwen3_5ForCausalLM: 8 layers, every
// 4th full attention; Gated DeltaNet with Hk 2, Hv 4 (value heads grouped
// by key head: the converter reorders them), dk = dv = 16, conv 4; partial
// RoPE 0.25; vocabulary 64, eos 0) with OUT_DIR/vocab.txt: llama.cpp's qwen35
// must decode dflash gguf's file of it as --mode ar does (gguf/llama-check.sh).
// Uniform weights from a seeded generator, scaled as the Qwen3.5 layout
// needs them to matter: zero-centred norms 0 +- 0.1, q/k norms 1 +- 0.1, the
// gated norm 1 +- 0.1, decays exp(g) from ~0.5 to ~0.999, lm_head at scale 4.
//
//   node gguf/llama_check.mjs NODE_MODULES_DIR --bench CTX MODEL.gguf [MODEL.gguf ...]
//
// llama.cpp's T-token forward (gguf/llama-bench.sh, make llama-bench): for
// each model, one thread, F32 K/V, flash attention off, a cache of CTX
// positions, then FWD_REPS round-robin repetitions of T = 1..8, 16 tokens
// decoded after them (every token's logits computed, as a DFlash verify
// needs them; the cache cropped back to CTX after each), as ./dflash bench
// times its own. Prints "bench MODEL T WALL_MS CPU_MS" lines (medians; the
// CPU time is the process's, process.cpuUsage: every thread of it).
const [modulesDir, modelPath, nArg, ...prompts] = process.argv.slice(2);
const draftOnly = modelPath === "--draft";
if (modelPath === "--widen") await widen(nArg, ...prompts);
if (modelPath === "--f32") await widen(nArg, prompts[0], null, null);
if (modelPath === "--hybrid") await hybrid(nArg, Number(prompts[0] || 1));
if (modelPath === "--bench") await bench(Number(nArg), prompts);
if (modelPath === "--tokenizer-case") await tokenizerCase(nArg, ...prompts);
if (modelPath === "--tokenize") {
    const lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
    const llama = await lib.getLlama({gpu: false, build: "never", logLevel: lib.LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath: nArg, gpuLayers: 0, vocabOnly: true});
    for (const text of prompts) console.log(Array.from(model.tokenize(text, true)).join(","));
    await model.dispose();
    await llama.dispose();
    process.exit(0);
}
if (!modulesDir || !modelPath || !nArg || (!draftOnly && prompts.length === 0)) {
    console.error("usage: node gguf/llama_check.mjs NODE_MODULES_DIR MODEL.gguf N IDS [IDS ...]\n" +
                  "       node gguf/llama_check.mjs NODE_MODULES_DIR --draft DRAFT.gguf\n" +
                  "       node gguf/llama_check.mjs NODE_MODULES_DIR --tokenize MODEL.gguf TEXT [TEXT ...]\n" +
                  "       node gguf/llama_check.mjs NODE_MODULES_DIR --tokenizer-case MODEL.gguf TOKENIZER.json TEXTS.inp DFLASH WORK [REF]\n" +
                  "       node gguf/llama_check.mjs NODE_MODULES_DIR --widen SRC_TARGET OUT_TARGET VOCAB_SIZE EOS_ID");
    process.exit(2);
}
const n = Number(nArg);
const lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
let extract = null;
const logger = (level, message) => {
    const m = /DFlash extract_layers = \[([0-9, ]*)\]/.exec(message);
    if (m) extract = m[1].replace(/ /g, "");
    else if (level === lib.LlamaLogLevel.error || level === lib.LlamaLogLevel.fatal) console.error(message);
};
const llama = await lib.getLlama({gpu: false, build: "never", logLevel: draftOnly ? lib.LlamaLogLevel.info : lib.LlamaLogLevel.error,
                                  logger});
if (draftOnly) {
    const draft = await llama.loadModel({modelPath: nArg, gpuLayers: 0});
    // the library hands its log lines over asynchronously: a large file's may
    // arrive after loadModel resolved (seen on qwen3-layout), so wait for it (5 s at most)
    for (let i = 0; i < 100 && extract === null; i++) await new Promise((r) => setTimeout(r, 50));
    console.log(`extract_layers ${extract}`);
    await draft.dispose();
    await llama.dispose();
    process.exit(extract === null ? 1 : 0);
}
const model = await llama.loadModel({modelPath, gpuLayers: 0});
// K/V in F32 as this program keeps them (node-llama-cpp's default is F16:
// then 2 of the 12 cases differ within 200 tokens, random "12,13" and "5,6,7,8")
const context = await model.createContext({contextSize: 512, batchSize: 512, threads: 1, flashAttention: false, sequences: 1,
                                           experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
const seq = context.getSequence();
for (const p of prompts) {
    const ids = p.split(",").map(Number);
    const out = [];
    if (n > 0)
        for await (const t of seq.evaluate(ids, {temperature: 0, yieldEogToken: true})) {
            out.push(t);
            if (out.length >= n) break;
        }
    console.log([...ids, ...out].join(" "));
    await seq.clearHistory();
}
await context.dispose();
await model.dispose();
await llama.dispose();

async function hybrid(out, seed) {
    const fs = await import("node:fs");
    const D = 64, L = 8, I = 128, H = 4, KV = 2, d = 16, Hk = 2, Hv = 4, dk = 16, dv = 16, K = 4, V = 64;
    const C = 2 * Hk * dk + Hv * dv;
    let st = (seed * 2654435761 + 12345) >>> 0;
    const rnd = () => { st = (Math.imul(st, 1664525) + 1013904223) >>> 0; return st / 4294967296; };   // [0, 1)
    const uni = (n, c, h) => Float32Array.from({length: n}, () => c + h * (2 * rnd() - 1));
    const lin = (o, i, scale = 1) => uni(o * i, 0, scale * Math.sqrt(3 / i));   // RMS scale / sqrt(fan_in)
    const t = [];
    const put = (name, shape, data) => t.push([name, shape, data]);
    put("model.embed_tokens.weight", [V, D], uni(V * D, 0, Math.sqrt(3)));
    for (let l = 0; l < L; l++) {
        const p = `model.layers.${l}.`;
        put(p + "input_layernorm.weight", [D], uni(D, 0, 0.1));
        if ((l + 1) % 4 === 0) {
            put(p + "self_attn.q_proj.weight", [2 * H * d, D], lin(2 * H * d, D));
            put(p + "self_attn.k_proj.weight", [KV * d, D], lin(KV * d, D));
            put(p + "self_attn.v_proj.weight", [KV * d, D], lin(KV * d, D));
            put(p + "self_attn.o_proj.weight", [D, H * d], lin(D, H * d, 0.5));
            put(p + "self_attn.q_norm.weight", [d], uni(d, 1, 0.1));
            put(p + "self_attn.k_norm.weight", [d], uni(d, 1, 0.1));
        } else {
            const a = p + "linear_attn.";
            put(a + "in_proj_qkv.weight", [C, D], lin(C, D));
            put(a + "in_proj_z.weight", [Hv * dv, D], lin(Hv * dv, D));
            put(a + "in_proj_b.weight", [Hv, D], lin(Hv, D));
            put(a + "in_proj_a.weight", [Hv, D], lin(Hv, D, 0.5));
            put(a + "conv1d.weight", [C, 1, K], uni(C * K, 0, Math.sqrt(3 / K)));
            put(a + "A_log", [Hv], Float32Array.from({length: Hv}, () => Math.log(0.02 + 0.98 * rnd())));
            put(a + "dt_bias", [Hv], uni(Hv, -1, 1));
            put(a + "norm.weight", [dv], uni(dv, 1, 0.1));
            put(a + "out_proj.weight", [D, Hv * dv], lin(D, Hv * dv, 0.5));
        }
        put(p + "post_attention_layernorm.weight", [D], uni(D, 0, 0.1));
        put(p + "mlp.gate_proj.weight", [I, D], lin(I, D));
        put(p + "mlp.up_proj.weight", [I, D], lin(I, D));
        put(p + "mlp.down_proj.weight", [D, I], lin(D, I, 0.5));
    }
    put("model.norm.weight", [D], uni(D, 0, 0.1));
    put("lm_head.weight", [V, D], lin(V, D, 4));
    const header = {__metadata__: {format: "pt"}};
    let off = 0;
    for (const [name, shape, data] of t) { header[name] = {dtype: "F32", shape, data_offsets: [off, off + 4 * data.length]}; off += 4 * data.length; }
    let hs = JSON.stringify(header);
    hs += " ".repeat((8 - (hs.length % 8)) % 8);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(hs.length));
    const cfg = {architectures: ["Qwen3_5ForCausalLM"], model_type: "qwen3_5_text", attention_bias: false, attn_output_gate: true,
                 eos_token_id: 0, full_attention_interval: 4, head_dim: d, hidden_act: "silu", hidden_size: D, intermediate_size: I,
                 layer_types: Array.from({length: L}, (_, l) => (l + 1) % 4 ? "linear_attention" : "full_attention"),
                 linear_conv_kernel_dim: K, linear_key_head_dim: dk, linear_num_key_heads: Hk, linear_num_value_heads: Hv,
                 linear_value_head_dim: dv, max_position_embeddings: 4096, num_attention_heads: H, num_hidden_layers: L,
                 num_key_value_heads: KV, rms_norm_eps: 1e-6, tie_word_embeddings: false, torch_dtype: "float32", vocab_size: V,
                 rope_parameters: {mrope_interleaved: true, mrope_section: [1, 1, 0], partial_rotary_factor: 0.25,
                                   rope_theta: 10000000.0, rope_type: "default"}};
    fs.mkdirSync(out, {recursive: true});
    fs.writeFileSync(path.join(out, "config.json"), JSON.stringify(cfg, null, 1) + "\n");
    fs.writeFileSync(path.join(out, "model.safetensors"),
                     Buffer.concat([len, Buffer.from(hs), ...t.map(([, , x]) => Buffer.from(x.buffer, x.byteOffset, x.byteLength))]));
    fs.writeFileSync(path.join(out, "vocab.txt"), ["<eos>", ...Array.from({length: V - 2}, (_, i) => `t${i + 1}`), "<mask>"].join("\n") + "\n");
    process.exit(0);
}

async function bench(ctxLen, models) {
    const REPS = 11, Ts = [1, 2, 3, 4, 5, 6, 7, 8, 16];
    const lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
    const llama = await lib.getLlama({gpu: false, build: "never", logLevel: lib.LlamaLogLevel.error});
    for (const mp of models) {
        const model = await llama.loadModel({modelPath: mp, gpuLayers: 0});
        const context = await model.createContext({contextSize: 128, batchSize: 64, threads: 1, flashAttention: false, sequences: 1,
                                                   experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
        const seq = context.getSequence(), V = model.tokens.count ?? 2048;
        // the cache: positions 0..ctxLen-1 (ids i % V), as ./dflash bench fills it
        await seq.evaluateWithoutGeneratingNewTokens(Array.from({length: ctxLen}, (_, i) => i % V));
        const ids = Array.from({length: 16}, (_, i) => (i + 1) % V);
        const once = async (T) => {
            const t0 = performance.now(), u0 = process.cpuUsage();
            await seq.controlledEvaluate(ids.slice(0, T).map((t) => [t, {generateNext: {token: true}}]));
            const ms = performance.now() - t0, u = process.cpuUsage(u0);
            await seq.eraseContextTokenRanges([{start: ctxLen, end: ctxLen + T}]);
            return [ms, (u.user + u.system) / 1e3];
        };
        for (const T of Ts) await once(T);   // warm-up
        const wall = Ts.map(() => []), cpu = Ts.map(() => []);
        for (let r = 0; r < REPS; r++)
            for (let k = 0; k < Ts.length; k++) {
                const [w, c] = await once(Ts[k]);
                wall[k].push(w), cpu[k].push(c);
            }
        const med = (v) => v.sort((a, b) => a - b)[REPS >> 1].toFixed(4);
        for (let k = 0; k < Ts.length; k++) console.log(`bench ${mp} ${Ts[k]} ${med(wall[k])} ${med(cpu[k])}`);
        await context.dispose();
        await model.dispose();
    }
    await llama.dispose();
    process.exit(0);
}

async function widen(src, out, vocabArg, eosArg) {
    const fs = await import("node:fs");
    const cfg = JSON.parse(fs.readFileSync(path.join(src, "config.json"), "utf8"));
    const old = cfg.vocab_size, f32 = vocabArg === null;  // f32: every tensor F32, the vocabulary as it is
    const V = f32 ? old : Number(vocabArg), eos = Number(eosArg);
    if (f32) cfg.torch_dtype = cfg.dtype = "float32";
    else Object.assign(cfg, {vocab_size: V, eos_token_id: eos, bos_token_id: eos});
    const b = fs.readFileSync(path.join(src, "model.safetensors"));
    const hl = Number(b.readBigUInt64LE(0)), header = JSON.parse(b.subarray(8, 8 + hl).toString("utf8"));
    const names = Object.keys(header).filter((k) => k !== "__metadata__");
    names.sort((x, y) => header[x].data_offsets[0] - header[y].data_offsets[0]);
    const parts = [], nh = {__metadata__: header.__metadata__ || {format: "pt"}};
    let off = 0;
    for (const k of names) {
        const t = header[k], data = b.subarray(8 + hl + t.data_offsets[0], 8 + hl + t.data_offsets[1]);
        let shape = t.shape, bytes = data;
        if (f32 && t.dtype === "BF16") {  // BF16 is the top half of an F32: exact
            const w = Buffer.alloc(data.length * 2);
            for (let i = 0; i < data.length / 2; i++) w.writeUInt16LE(data.readUInt16LE(2 * i), 4 * i + 2);
            bytes = w;
        } else if (t.dtype !== "F32") throw new Error(`${k}: ${t.dtype}, expected F32`);
        if (!f32 && (k === "model.embed_tokens.weight" || k === "lm_head.weight") && shape[0] === old) {
            shape = [V, shape[1]];
            bytes = Buffer.alloc(V * shape[1] * 4);
            data.copy(bytes);
        }
        nh[k] = {dtype: "F32", shape, data_offsets: [off, off + bytes.length]};
        parts.push(bytes);
        off += bytes.length;
    }
    let hs = JSON.stringify(nh);
    hs += " ".repeat((8 - (hs.length % 8)) % 8);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(Buffer.byteLength(hs)));
    fs.mkdirSync(out, {recursive: true});
    fs.writeFileSync(path.join(out, "config.json"), JSON.stringify(cfg, null, 2) + "\n");
    fs.writeFileSync(path.join(out, "model.safetensors"), Buffer.concat([len, Buffer.from(hs), ...parts]));
    process.exit(0);
}

async function tokenizerCase(gguf, tokPath, inp, dflash, work, ref) {
    const fs = await import("node:fs");
    const {execFileSync} = await import("node:child_process");
    const SEP = "\n__dflash_tokenizer_test__\n";
    const texts = fs.readFileSync(inp, "utf8").split(SEP);
    const tj = JSON.parse(fs.readFileSync(tokPath, "utf8"));
    const nfc = tj.normalizer && tj.normalizer.type === "NFC";
    const special = (tj.added_tokens || []).filter((a) => a.special).map((a) => a.content);
    fs.mkdirSync(work, {recursive: true});
    const nosp = path.join(work, "nospecial.json");
    // (no post-processor either: it names special tokens, and --no-special skips it)
    fs.writeFileSync(nosp, JSON.stringify({...tj, added_tokens: (tj.added_tokens || []).filter((a) => !a.special), post_processor: null}));
    const run = (args) => {
        try {
            return execFileSync(dflash, ["tokenize", ...args], {maxBuffer: 1 << 28, stdio: ["ignore", "pipe", "pipe"]});
        } catch (e) {
            console.error(`${dflash} tokenize ${args.join(" ")}: ${String(e.stderr || e.message).trim()}`);
            process.exit(1);
        }
    };
    const ids = (tok, i) => { const f = path.join(work, `text${i}`); fs.writeFileSync(f, texts[i]);
                              return run(["--tokenizer", tok, "--no-special", "--file", f]).toString().trim(); };
    // transformers' decode, with the model's tokenizer_config.json beside
    // tokenizer.json saying clean_up_tokenization_spaces (Llama-3.1: true,
    // Qwen3: false), also runs its clean_up_tokenization over the text (the
    // tokenizers library, ours and the committed .dec do not); llama.cpp does
    // it for the pre-tokenizers whose models set it (llama-bpe yes, qwen2 no)
    let clean = false;
    try {
        clean = JSON.parse(fs.readFileSync(path.join(path.dirname(tokPath), "tokenizer_config.json"), "utf8")).clean_up_tokenization_spaces === true;
    } catch (e) { /* no tokenizer_config.json: the default of the tokenizers library, no clean-up */ }
    const cleanUp = (t) => [[" .", "."], [" ?", "?"], [" !", "!"], [" ,", ","], [" ' ", "'"], [" n't", "n't"], [" 'm", "'m"],
                            [" 's", "'s"], [" 've", "'ve"], [" 're", "'re"]].reduce((a, [x, y]) => a.replaceAll(x, y), t);
    const lines = (f) => fs.readFileSync(f, "utf8").split("\n");
    const refOn = ref ? lines(`${ref}-nospecial.out`) : null, refAll = ref ? lines(`${ref}.out`) : null;
    const refDec = ref ? fs.readFileSync(`${ref}.dec`, "utf8").split(SEP) : null;
    if (ref && (refOn.length < texts.length || refAll.length < texts.length || refDec.length !== texts.length)) {
        console.error(`${ref}.out, -nospecial.out, .dec: not one entry per text of ${inp} (regenerate them: NOTES.md, "Tokenizer")`);
        process.exit(1);
    }

    const lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
    const llama = await lib.getLlama({gpu: false, build: "never", logLevel: lib.LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath: gguf, gpuLayers: 0, vocabOnly: true});
    const gg = model.fileInfo.metadata.tokenizer.ggml, nm = (tj.model.merges || []).length;
    console.log(`tokenizer.ggml.pre ${gg.pre} merges ${(gg.merges || []).length}`);
    if ((gg.merges || []).length !== nm) {
        console.log(`DIFF tokenizer.ggml.merges: ${(gg.merges || []).length} in ${gguf}, ${nm} in ${tokPath}`);
        process.exit(1);
    }
    const show = (t) => JSON.stringify(t.length > 300 ? t.slice(0, 300) + "..." : t);
    let diffs = 0, compared = 0, gap = 0;
    const same = (what, i, want, got) => {
        compared++;
        if (want === got) return;
        diffs++;
        console.log(`DIFF ${what}, text ${i} ${show(texts[i])}:\n  llama.cpp ${got}\n  ours      ${want}`);
    };
    for (let i = 0; i < texts.length; i++) {
        const t = nfc ? texts[i].normalize("NFC") : texts[i];
        const on = Array.from(model.tokenize(t, true)).join(",");
        const off = Array.from(model.tokenize(t, false)).join(",");
        const want = ref ? refOn[i] : ids(tokPath, i);
        same("special tokens parsed", i, want, on);
        if (t !== texts[i] && Array.from(model.tokenize(texts[i], true)).join(",") !== want) gap++;
        same("special tokens not parsed", i, special.some((s) => texts[i].includes(s)) ? ids(nosp, i) : want, off);
        const dec = ref ? refAll[i] : want;
        if (dec === "") continue;
        const got = Buffer.from(model.detokenize(dec.split(",").map(Number), true), "utf8").toString("hex");
        let ours = ref ? Buffer.from(refDec[i], "utf8") : run(["--tokenizer", tokPath, "--decode", dec]);
        if (clean) ours = Buffer.from(cleanUp(ours.toString("utf8")), "utf8");
        ours = ours.toString("hex");
        let k = 0;
        while (k < ours.length && ours[k] === got[k]) k++;
        const cut = (h) => h.length > 400 ? h.slice(0, 400) + "..." : h;
        same(`detokenize (UTF-8 in hex; first difference at byte ${k >> 1})`, i, cut(ours), cut(got));
        if (ours !== got && cut(ours) === cut(got)) diffs++, console.log(`DIFF detokenize, text ${i}: after byte 200`);
    }
    console.log(`tokenizer-case ${texts.length} texts ${compared} comparisons ${diffs} differ` + (clean ? "; detokenize with clean_up_tokenization_spaces" : "") +
                (gap ? `; ${gap} texts not in NFC give other ids unless NFC'd first (llama.cpp has no normalizer)` : ""));
    await model.dispose();
    await llama.dispose();
    process.exit(diffs ? 1 : 0);
}
