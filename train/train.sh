#!/bin/sh
# train/train.sh trained|experiments|NAME... - the training runs of README.md
# "What training teaches" (make train, make train-experiments). Run from the
# repository root after `make dflash weights`.
#
#   trained      toy_weights/trained/: the random target (target/, a hard
#                link of toy_weights/random/target's files, or a copy), the
#                draft the recipe below trains (draft/), vocab.txt; beside it
#                train.log (every step's loss, the held-out evaluation, the
#                held-out sequences), data.txt (the sequences trained on) and
#                decode.txt (train/train_decode.sh at block 2, 4, 8)
#   experiments  every experiment below, each trained on toy_weights/trained's
#                data.txt (make train first): walkthrough/training/logs/NAME.log
#                and NAME.decode (committed: the page and its figures are made
#                from them, train/mktraining.sh)
#   NAME...      only those experiments (untrained: the recipe's new draft
#                before its first step, evaluated and decoded the same way)
#
# The recipe (TRAIN_RECIPE): a new draft (the random set's draft config, its
# Linear weights drawn from N(0, 0.02^2) with the seed) trained on 96
# sequences the random target writes itself (a random 4-id prompt, then its
# greedy continuation to 32 tokens: --generate), batch 2, every anchor of a
# sequence (28), 150 AdamW steps at a peak lr of 1e-3 (5 warm-up steps, then
# cosine), gamma 7, clip 1, seed 42; 24 held-out sequences (prompts no
# training sequence starts with) evaluated after training. Deterministic:
# the same seed gives the same bytes (tests/test_train_long.sh).
set -eu
export LC_ALL=C
DFLASH=${DFLASH:-./dflash}   # the program (make: ./dflash)
TRAIN_RECIPE=${TRAIN_RECIPE:---seq-len 32 --batch 2 --steps 150 --lr 1e-3 --warmup 5 --heldout 24 --seed 42}
TRAIN_SEQUENCES=${TRAIN_SEQUENCES:-96}
NICE=${NICE:-nice -n 10}
target=toy_weights/random/target
config=toy_weights/random/draft/config.json
logs=walkthrough/training/logs

# one experiment: its extra flags (after the recipe's: the last one wins)
flags() {
    case $1 in
    base) echo "";;
    untrained) echo "--steps 0";;
    causal) echo "--block-attention causal";;
    block8) echo "--block-size 8 --data build/train/data-block8.txt";;
    gamma0) echo "--gamma 0";;
    gamma4) echo "--gamma 4";;
    layers1) echo "--draft-config build/train/config-layers1.json";;
    *) echo "train.sh: no experiment '$1' (untrained base causal block8 gamma0 gamma4 layers1)" >&2; return 1;;
    esac
}
# the block sizes each experiment's draft is decoded at (none: dflash.c's
# draft attention is bidirectional, so a causally trained draft is measured
# by the teacher-forced evaluation alone)
decode_blocks() {
    case $1 in
    untrained|base|block8) echo "2 4 8";;
    causal) echo "";;
    *) echo "4";;
    esac
}

trained() {
    out=toy_weights/trained
    rm -rf "$out.partial"
    mkdir -p "$out.partial/target"
    for f in config.json model.safetensors; do
        ln "$target/$f" "$out.partial/target/$f" 2>/dev/null || cp "$target/$f" "$out.partial/target/$f"
    done
    cp toy_weights/random/vocab.txt "$out.partial/vocab.txt"
    # shellcheck disable=SC2086
    $NICE "$DFLASH" train --target "$target" --draft-config "$config" --generate "$TRAIN_SEQUENCES" $TRAIN_RECIPE \
        --out "$out.partial/draft" --log "$out.partial/train.log" --save-data "$out.partial/data.txt"
    sh "${TOOLS:-tools}/train_decode.sh" "$out.partial/train.log" "$out.partial/draft" 2 4 8 > "$out.partial/decode.txt"
    rm -rf "$out"
    mv "$out.partial" "$out"
    cat "$out/decode.txt"
    echo "wrote $out: target/ (toy_weights/random's), draft/ (trained), vocab.txt, train.log, data.txt, decode.txt"
}

experiment() {
    name=$1
    extra=$(flags "$name")
    [ -f toy_weights/trained/data.txt ] || { echo "train.sh: toy_weights/trained/data.txt missing: make train first" >&2; exit 2; }
    mkdir -p build/train "$logs"
    if [ "$name" = base ]; then  # the recipe itself: make train's run (the same bytes on its data: NOTES.md)
        cp toy_weights/trained/train.log "$logs/base.log.tmp" && mv "$logs/base.log.tmp" "$logs/base.log"
        cp toy_weights/trained/decode.txt "$logs/base.decode.tmp" && mv "$logs/base.decode.tmp" "$logs/base.decode"
        echo "wrote $logs/base.log, $logs/base.decode (toy_weights/trained's)"
        return 0
    fi
    sed 's/"target_layer_ids": \[[0-9, ]*\]/"target_layer_ids": [11]/' "$config" > build/train/config-layers1.json
    # block 8: the sequences with an anchor at block 8 (at least 13 ids: 2
    # positions >= the 4-id prompt with p + 8 <= n); --generate at block 4
    # kept some shorter ones (the target stopped at <eos>)
    awk '/^#/ || NF - 1 >= 13' toy_weights/trained/data.txt > build/train/data-block8.txt
    rm -rf "build/train/$name"
    # shellcheck disable=SC2086
    $NICE "$DFLASH" train --target "$target" --draft-config "$config" --data toy_weights/trained/data.txt $TRAIN_RECIPE \
        $extra --out "build/train/$name" --log "$logs/$name.log"
    blocks=$(decode_blocks "$name")
    if [ -n "$blocks" ]; then
        # shellcheck disable=SC2086
        sh "${TOOLS:-tools}/train_decode.sh" "$logs/$name.log" "build/train/$name" $blocks > "$logs/$name.decode.tmp"
    else
        : > "$logs/$name.decode.tmp"
    fi
    mv "$logs/$name.decode.tmp" "$logs/$name.decode"
    echo "wrote $logs/$name.log, $logs/$name.decode"
}

case ${1:?usage: train/train.sh trained|experiments|NAME...} in
trained) trained;;
experiments) for n in untrained base causal block8 gamma0 layers1 gamma4; do experiment "$n"; done;;
*) for n in "$@"; do flags "$n" > /dev/null; done; for n in "$@"; do experiment "$n"; done;;
esac
