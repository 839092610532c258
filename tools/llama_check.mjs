// tools/llama_check.mjs - greedy decoding in llama.cpp (through node-llama-cpp)
// from token ids: the real-engine check of `dflash gguf` (tools/llama-check.sh,
// `make llama-check`; README, "llama.cpp").
//
//   node tools/llama_check.mjs NODE_MODULES_DIR MODEL.gguf N IDS [IDS ...]
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
//   node tools/llama_check.mjs NODE_MODULES_DIR --draft DRAFT.gguf
//
// loads a dflash draft through llama.cpp's own loader (its dflash
// load_arch_hparams / load_arch_tensors: every key and tensor it requires)
// and prints the target layers llama.cpp read ("extract_layers 4,8,12"). A
// draft cannot run here: its context needs the target's (ctx_other), which
// the binding does not pass.
//
//   node tools/llama_check.mjs NODE_MODULES_DIR --tokenize MODEL.gguf TEXT [TEXT ...]
//
// prints, for each TEXT, the ids llama.cpp's tokenizer gives it (special
// tokens parsed, as llama-speculative-simple's -p does), comma-separated
// (tools/llama-spec.sh).
const [modulesDir, modelPath, nArg, ...prompts] = process.argv.slice(2);
const draftOnly = modelPath === "--draft";
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
    console.error("usage: node tools/llama_check.mjs NODE_MODULES_DIR MODEL.gguf N IDS [IDS ...]\n" +
                  "       node tools/llama_check.mjs NODE_MODULES_DIR --draft DRAFT.gguf");
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
