#!/usr/bin/env bash
# gguf/llama-bench.sh - `make llama-bench`: llama.cpp's T-token forward of
# the learned target against this program's, in one run, as ratios.
#
# llama.cpp is node-llama-cpp's prebuilt library (the install make
# llama-check makes; gguf/llama_check.mjs --bench: one thread, F32 K/V, flash
# attention off, every row's logits) on two GGUF files of
# toy_weights/learned/target: as it is (BF16) and an F32 copy (--f32, BF16
# widened exactly); this program is build/gguf/fwdtime (the speed build's
# kernel, the weights packed as ./dflash runs them: BF16 kept as BF16). Each side
# times T = 1..8, 16 tokens after a cache of 64 positions as ./dflash bench
# does (medians of 11 round-robin repetitions); ROUNDS rounds alternate the
# sides, so a change of load hits all of them alike, and each number is the
# median of its rounds. Printed: milliseconds per forward, wall and CPU time
# (the process's: on a shared, loaded machine the wall time also counts the
# waits for a core), and llama.cpp's time over ours (> 1: this program is
# ahead). A measurement, not a test: it fails only when something cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${LLAMA_CHECK_DIR:-build/llama-check}
ROUNDS=${ROUNDS:-3}
T=toy_weights/learned/target
[ -f "$T/model.safetensors" ] || { echo "llama-bench: $T missing"; exit 1; }
out=$(gguf/llama-check.sh --install) || exit 1
case $out in *"skipped:"*) echo "llama-bench: skipped: ${out#*skipped: }"; exit 0;; esac
MOD="$DIR/npm/node_modules"
B="$DIR/bench"
mkdir -p "$B"
node gguf/llama_check.mjs "$MOD" --f32 "$T" "$B/target-f32"
./dflash gguf --target "$B/target-f32" --draft toy_weights/learned/draft --vocab "$T/tokenizer.json" "$B/f32" > /dev/null
./dflash gguf --weights toy_weights/learned "$B/bf16" > /dev/null
: > "$B/times"
for r in $(seq "$ROUNDS"); do
    build/gguf/fwdtime "$T" | sed 's/^fwd /ours /' >> "$B/times"
    node gguf/llama_check.mjs "$MOD" --bench 64 "$B/f32/target.gguf" "$B/bf16/target.gguf" 2> "$B/node.log" |
        sed -e "s|^bench $B/f32/target.gguf |f32 |" -e "s|^bench $B/bf16/target.gguf |bf16 |" >> "$B/times"
done
node - "$B/times" "$ROUNDS" <<'EOF'
const fs = require("fs");
const [f, rounds] = process.argv.slice(2);
const v = {};  // v[side][T] = [[wall, cpu], ...] one per round
for (const line of fs.readFileSync(f, "utf8").trim().split("\n")) {
    const [side, T, wall, cpu] = line.split(" ");
    ((v[side] ??= {})[T] ??= []).push([Number(wall), Number(cpu)]);
}
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const Ts = Object.keys(v.ours).map(Number).sort((a, b) => a - b);
let ahead = true;
for (const [k, what] of [[1, "CPU time"], [0, "wall time"]]) {
    console.log(`llama-bench: T-token forward of toy_weights/learned/target, ms (${what}; medians of ${rounds} alternating rounds)`);
    console.log("   T      ours  llama F32 llama BF16   F32/ours  BF16/ours");
    for (const T of Ts) {
        const o = med(v.ours[T].map((x) => x[k])), a = med(v.f32[T].map((x) => x[k])), b = med(v.bf16[T].map((x) => x[k]));
        if (k === 1 && (a <= o || b <= o)) ahead = false;
        console.log(`${String(T).padStart(4)} ${o.toFixed(2).padStart(9)} ${a.toFixed(2).padStart(10)} ${b.toFixed(2).padStart(10)}` +
                    ` ${(a / o).toFixed(2).padStart(10)} ${(b / o).toFixed(2).padStart(10)}`);
    }
}
console.log(`llama-bench: by CPU time this program is ${ahead ? "" : "NOT "}ahead of llama.cpp (F32 and BF16) on every T`);
EOF
