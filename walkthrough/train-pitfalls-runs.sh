#!/bin/sh
# walkthrough/train-pitfalls-runs.sh [NAME...] - the real runs behind the table
# of walkthrough/train-pitfalls.md (make train-pitfall-runs; minutes per run,
# not part of make test or the docs check).
#
# The recipe (a short one, sized for a shared 2-core machine; README.md
# "Training" has the full one): the random target; a new draft from the
# random set's draft config (seed 42); DATA_N sequences the target writes
# itself (greedy, from random 4-id prompts, up to 24 ids), generated once by
# the clean program and saved to walkthrough/train-pitfalls/runs/data.txt,
# so every run trains on the same ids in the same order; STEPS AdamW steps
# of batch 2, 4 anchors per sequence, block 4, SpecForge's other defaults
# (lr 6e-4 cosine, warmup 4%, gamma 7, clip 1); --heldout 12: twelve
# held-out sequences (prompts no training sequence starts with).
# For the clean program (./dflash, NAME "clean") and each training pitfall
# (build/pitfalls/dflash-train-NAME) it writes runs/NAME.log (the --log of
# the run: every step's loss, the held-out evaluation by the program
# itself, the held-out sequences), then decodes every held-out prompt with
# the CLEAN ./dflash and the trained draft (greedy, as many new tokens as
# the held-out continuation, stopping at the target's stop id) and writes
# runs/NAME.tau: one line per held-out prompt, the acceptance length of each
# of its rounds. walkthrough/mktrainpitfalls.sh turns these into the page.
# Run from the repository root after `make dflash pitfall-programs weights`.
set -eu
STEPS=100
DATA_N=120
out=walkthrough/train-pitfalls/runs
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
target=toy_weights/random/target
common="--target $target --draft-config toy_weights/random/draft/config.json --seq-len 24 --batch 2 --anchors 4"

if [ ! -s "$out/data.txt" ]; then   # the training data, once (one step is trained and thrown away)
    ./dflash train $common --generate $DATA_N --steps 1 --save-data "$tmp/data.txt" --out "$tmp/d0" > /dev/null 2>&1
    mv "$tmp/data.txt" "$out/data.txt"
fi
names=${*:-clean $(sed -e 's/#.*//' walkthrough/train-pitfalls/series)}
for name in $names; do
    prog=./dflash
    [ "$name" = clean ] || prog=./build/pitfalls/dflash-train-$name
    rm -rf "$tmp/draft"
    echo "train-pitfall-runs: $name ($prog)" >&2
    nice -n 10 "$prog" train $common --data "$out/data.txt" --steps $STEPS --log-every 25 --heldout 12 \
        --log "$tmp/log" --out "$tmp/draft" > "$tmp/stdout" 2>&1 || { cat "$tmp/stdout" >&2; exit 1; }
    grep '^heldout [0-9]' "$tmp/log" | while read -r _ rest; do
        prompt=$(echo "${rest%%|*}" | xargs | tr ' ' ',')
        n=$(echo "${rest#*|}" | wc -w)
        ./dflash --target $target --draft "$tmp/draft" --ids "$prompt" --max-new-tokens "$n" --rounds |
            sed -n 's/.*accepted \([0-9]*\) + bonus.*/\1/p' | tr '\n' ' ' | sed 's/ $//'
        echo
    done > "$tmp/tau"
    # the log without its first line's command (it names the temporary directory)
    grep -v '^command ' "$tmp/log" > "$out/$name.log"
    mv "$tmp/tau" "$out/$name.tau"
done
echo "train-pitfall-runs: wrote $out/{data.txt,*.log,*.tau}" >&2
