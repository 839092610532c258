// tokenizer/tokenizer_check.mjs - Hugging Face's own tokenizer (npm `tokenizers`,
// the Rust library prebuilt) on a set of texts: the reference side of
// `make tokenizer-check` (tokenizer/tokenizer-check.sh) and the generator of the
// committed pairs in tokenizer/tests/cases/ (docs/tokenizer.md).
//
//   node tokenizer/tokenizer_check.mjs NODE_MODULES_DIR TOKENIZER.json TEXTS.inp OUT_PREFIX
//       writes OUT_PREFIX.out (encode(text): the ids of each text, one line
//       each, comma-separated), OUT_PREFIX-nospecial.out (add_special_tokens
//       false) and OUT_PREFIX.dec (decode(ids, skip_special_tokens=false) of
//       the .out ids, the texts separated as in TEXTS.inp).
//   node tokenizer/tokenizer_check.mjs NODE_MODULES_DIR TOKENIZER.json --bench FILE REPEATS
//       encodes FILE's text REPEATS times (add_special_tokens true) and prints
//       "hf_encode_seconds S ids N": the fastest single call; the ids go to
//       FILE.hf.ids (one line, comma-separated).
// TEXTS.inp: texts separated by "\n__dflash_tokenizer_test__\n" (as
// llama.cpp's tokenizer tests separate theirs).
import {createRequire} from "node:module";
import fs from "node:fs";
import path from "node:path";

const SEP = "\n__dflash_tokenizer_test__\n";
const [modulesDir, tokPath, inp, outPrefix, repeats] = process.argv.slice(2);
if (!modulesDir || !tokPath || !inp || !outPrefix) {
    console.error("usage: node tokenizer/tokenizer_check.mjs NODE_MODULES_DIR TOKENIZER.json (TEXTS.inp OUT_PREFIX | --bench FILE REPEATS)");
    process.exit(2);
}
const require = createRequire(path.resolve(modulesDir) + "/");
const {Tokenizer} = require("tokenizers");
const tok = await Tokenizer.fromFile(tokPath);
const ids = async (text, special) => Array.from((await tok.encode(text, undefined, {addSpecialTokens: special})).getIds());

if (inp === "--bench") {
    const text = fs.readFileSync(outPrefix, "utf8");
    let best = Infinity, n = 0, got = [];
    for (let r = 0; r < Number(repeats || 3); r++) {
        const t0 = process.hrtime.bigint();
        got = await ids(text, true);
        n = got.length;
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        if (s < best) best = s;
    }
    fs.writeFileSync(outPrefix + ".hf.ids", got.join(",") + "\n");
    console.log(`hf_encode_seconds ${best.toFixed(4)} ids ${n}`);
} else {
    const texts = fs.readFileSync(inp, "utf8").split(SEP);
    const withSpecial = [], plain = [], decoded = [];
    for (const t of texts) {
        const a = await ids(t, true);
        withSpecial.push(a.join(","));
        plain.push((await ids(t, false)).join(","));
        decoded.push(await tok.decode(a, false));
    }
    fs.writeFileSync(outPrefix + ".out", withSpecial.join("\n") + "\n");
    fs.writeFileSync(outPrefix + "-nospecial.out", plain.join("\n") + "\n");
    fs.writeFileSync(outPrefix + ".dec", decoded.join(SEP));
}
