#!/usr/bin/env bash
# tools/llama-check.sh - `make llama-check`: llama.cpp itself (the prebuilt
# library of the npm package node-llama-cpp, pinned) decodes the GGUF files
# `dflash gguf` writes, and must give this program's greedy ids.
#
# For the walkthrough and random sets: ./dflash gguf --weights toy_weights/SET,
# then for 6 prompts each (12 cases), 200 new tokens past any <eos>:
#   ./dflash --weights toy_weights/SET --mode ar --ids P --max-new-tokens 200 --ignore-eos --print-ids
#   node tools/llama_check.mjs ... target.gguf 200 P   (one thread, F32 K/V, flash attention off)
# and the two id lines must be equal; then llama.cpp's dflash loader loads each
# draft.gguf (walkthrough, random, qwen3-layout) and must read target_layers as
# the config's target_layer_ids + 1. Prints "llama-check: skipped: <reason>"
# and exits 0 when npm is missing or the npm registry is unreachable (CI
# without network); any other failure (install, load, a differing id) fails.
#
# LLAMA_CHECK_DIR (default build/llama-check): the npm install (node_modules,
# ~730 MB with node-llama-cpp's prebuilt binaries; never committed) and the
# converted files. An install of the pinned version there is reused. The
# package's postinstall (which may download or build llama.cpp) is not run:
# the prebuilt CPU binary is loaded as it is (getLlama build "never").
# `tools/llama-check.sh --install` does the install alone (make llama-spec-check).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=3.21.1
DIR=${LLAMA_CHECK_DIR:-build/llama-check}
N=200
skip() { echo "llama-check: skipped: $*"; exit 0; }

command -v node > /dev/null || skip "node is not installed"
mkdir -p "$DIR/npm"
MOD="$DIR/npm/node_modules"
have=$(node -p "try { require('./$MOD/node-llama-cpp/package.json').version } catch (e) { '' }" 2> /dev/null || true)
if [ "$have" != "$VERSION" ]; then
    command -v npm > /dev/null || skip "npm is not installed"
    timeout 30 npm ping --fetch-retries=0 --fetch-timeout=20000 > /dev/null 2>&1 || skip "the npm registry is unreachable (npm ping failed)"
    echo "llama-check: npm i -E node-llama-cpp@$VERSION (into $DIR/npm)"
    (cd "$DIR/npm" && [ -f package.json ] || echo '{"private": true}' > package.json)
    if ! (cd "$DIR/npm" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true timeout 900 npm i -E "node-llama-cpp@$VERSION" --ignore-scripts --no-audit --no-fund > install.log 2>&1); then
        tail -5 "$DIR/npm/install.log" >&2
        echo "llama-check: npm i node-llama-cpp@$VERSION failed (log: $DIR/npm/install.log)" >&2
        exit 1
    fi
fi
# --install: only the install above (tools/llama-spec.sh builds from its bundled source)
[ "${1:-}" = --install ] && { echo "llama-check: node-llama-cpp $VERSION in $MOD"; exit 0; }

declare -A PROMPTS=(
    [walkthrough]="2,3,4 12,13 18 22,23 26,27 30,31"
    [random]="2,3,4 12,13 29,28,27,26 18,19 5,6,7,8 33,1,0"
)
fail=0 cases=0
for set in walkthrough random; do
    out="$DIR/$set"
    ./dflash gguf --weights "toy_weights/$set" "$out" > /dev/null
    # shellcheck disable=SC2086
    mapfile -t got < <(node tools/llama_check.mjs "$MOD" "$out/target.gguf" "$N" ${PROMPTS[$set]} 2> "$DIR/$set.node.log")
    i=0
    for p in ${PROMPTS[$set]}; do
        want=$(./dflash --weights "toy_weights/$set" --mode ar --ids "$p" --max-new-tokens "$N" --ignore-eos --print-ids | sed -n 2p)
        cases=$((cases + 1))
        if [ "${got[$i]:-}" != "$want" ]; then
            echo "llama-check: $set, prompt $p: llama.cpp gave"
            echo "  ${got[$i]:-(nothing; see $DIR/$set.node.log)}"
            echo "  dflash --mode ar gives"
            echo "  $want"
            fail=1
        fi
        i=$((i + 1))
    done
done
# the drafts: llama.cpp's dflash loader accepts every key and tensor, and reads
# target_layers as target_layer_ids + 1 (the draft cannot run here: its
# context needs the target's, which the binding does not pass)
for set in walkthrough random qwen3-layout; do
    out="$DIR/$set"
    [ -f "$out/draft.gguf" ] || ./dflash gguf --weights "toy_weights/$set" "$out" > /dev/null
    want=$(node -p "require('./toy_weights/$set/draft/config.json').dflash_config.target_layer_ids.map(i => i + 1).join(',')")
    got=$(node tools/llama_check.mjs "$MOD" --draft "$out/draft.gguf" 2> "$DIR/$set.draft.log" || true)
    cases=$((cases + 1))
    if [ "$got" != "extract_layers $want" ]; then
        echo "llama-check: $set: llama.cpp's dflash loader: \"${got:-(failed; see $DIR/$set.draft.log)}\", expected \"extract_layers $want\""
        fail=1
    fi
done
[ "$fail" = 0 ] || { echo "llama-check: FAILED"; exit 1; }
echo "llama-check: llama.cpp (node-llama-cpp $VERSION) gives this program's greedy ids in all 12 cases (walkthrough, random; $N new tokens each) and loads the three drafts (target_layers = ids + 1)"
