#!/bin/sh
# learned/learned_target.sh train|resume|eval|prompts|check - the learned target (docs/learned.md).
#
#   train  (make learned-target) the whole recipe, from the corpus to the
#          committed folder: the tokenizer trained on build/learned/train.txt,
#          then the target trained from learned/config.json with the
#          flags below, written in BF16 to toy_weights/learned/target/, and
#          toy_weights/learned/SHA256SUMS rewritten. The same inputs give the
#          same bytes (every step is deterministic, --threads does not change
#          a bit, a run resumed from a checkpoint equals an uninterrupted one),
#          so after a retrain `git status toy_weights/learned` shows nothing.
#          Hours on a 2-core machine: checkpoints go to
#          build/learned/checkpoint/ every 10 steps; after an interruption
#          `sh learned/learned_target.sh resume` goes on from the last one.
#   resume the same training, from build/learned/checkpoint/.
#   eval   (make learned-target-eval) what README reports, measured on the committed
#          BF16 model: loss per token and bits per byte on heldout.txt beside
#          the unigram and bigram baselines (eval/ngram), then greedy and
#          T=0.8 samples from held-out prompts.
#   prompts  toy_weights/learned/train-prompts.ids and heldout.ids, the
#          prompts the learned pair's recipe (learned/learned.sh) reads.
#   check  (make learned-check, part of make test-long) the committed files
#          against toy_weights/learned/SHA256SUMS and the draft's against
#          toy_weights/learned/draft/SHA256SUMS.
set -eu
B=build/learned
OUT=toy_weights/learned
# the recipe: every flag that changes a bit is here
TOKENIZER_FLAGS="--vocab-size 2048"
TRAIN_FLAGS="--steps 2400 --batch 8 --seq-len 64 --lr 1e-3 --warmup 100 --schedule cosine --weight-decay 0.1 \
--decay-on matrices --max-grad-norm 1 --adam-eps 1e-8 --beta2 0.95 --seed 1337"
THREADS=${THREADS:-2}
DFLASH=${DFLASH:-./dflash}   # the program (a copy, so a rebuild during hours of training changes nothing)

case "${1:-}" in
check)
    (cd "$OUT" && sha256sum -c --quiet SHA256SUMS) && echo "learned-check: $OUT matches SHA256SUMS"
    if [ -f "$OUT/draft/SHA256SUMS" ]; then
        (cd "$OUT/draft" && sha256sum -c --quiet SHA256SUMS) && echo "learned-check: $OUT/draft matches its SHA256SUMS"
    fi
    ;;
train|resume)
    if [ "$1" = train ]; then
        $DFLASH train-tokenizer $TOKENIZER_FLAGS --out "$B/tokenizer.json" "$B/train.txt"
        from="--config learned/config.json --tokenizer $B/tokenizer.json"
    else
        from="--resume $B/checkpoint"
    fi
    # shellcheck disable=SC2086
    $DFLASH train-target $from --data "$B/train.txt" $TRAIN_FLAGS \
        --threads "$THREADS" --checkpoint-every 10 --checkpoint "$B/checkpoint" --log "$B/train.log" \
        --dtype bf16 --out "$B/target"
    # the committed folder holds the four files its sums cover (train-target's
    # marker, dflash-train.txt, stays in build/: the folder is git's, not a run's)
    mkdir -p "$OUT/target"
    for f in config.json generation_config.json model.safetensors tokenizer.json; do
        cp "$B/target/$f" "$OUT/target/$f.tmp" && mv "$OUT/target/$f.tmp" "$OUT/target/$f" || exit 1
    done
    (cd "$OUT" && sha256sum target/config.json target/generation_config.json target/model.safetensors \
        target/tokenizer.json > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
    cat "$OUT/SHA256SUMS"
    ;;
eval)
    ./dflash train-target --target "$OUT/target" --steps 0 --heldout "$B/heldout.txt" --seq-len 128 --batch 4 \
        --threads "$THREADS" --out "$B/eval"
    ./eval/ngram "$OUT/target/tokenizer.json" "$B/train.txt" "$B/heldout.txt"
    # prompts: the first words of held-out documents 1, 101, 201, ...; the
    # samples are the target's alone (--mode ar: the set has a draft too)
    awk 'BEGIN { RS = "\n%\n" } NR % 100 == 2 && n < 4 { split($0, w, /[ \t\n]+/); print w[1] " " w[2] " " w[3] " " w[4]; n++ }' \
        "$B/heldout.txt" | while IFS= read -r p; do
        echo "== prompt: $p"
        ./dflash --weights "$OUT" --mode ar --prompt "$p" --max-new-tokens 48 2>/dev/null
        ./dflash --weights "$OUT" --mode ar --prompt "$p" --max-new-tokens 48 --temperature 0.8 --seed 1 2>/dev/null
    done
    ;;
prompts)
    # the learned pair's prompts (learned/learned.sh): <|endoftext|>
    # then the first 8 tokens of a document, one prompt a line, ids
    # separated by spaces; documents 0, 50, 100, ... of train.txt (256 of
    # them) and every held-out document (the first 128) with at least 16
    # tokens in its first 400 bytes
    eot=$($DFLASH tokenize --tokenizer "$OUT/target/tokenizer.json" --no-special "<|endoftext|>")
    for split in train heldout; do
        if [ $split = train ]; then every=50 want=256 dst="$OUT/train-prompts.ids"; else every=1 want=128 dst="$OUT/heldout.ids"; fi
        tmp=$(mktemp -d)
        awk -v every=$every -v dir="$tmp" 'BEGIN { RS = "\n%\n" } (NR - 1) % every == 0 {
            f = sprintf("%s/%06d", dir, NR); printf "%s", substr($0, 1, 400) > f; close(f) }' "$B/$split.txt"
        : > "$dst.tmp"
        for f in "$tmp"/*; do
            ids=$($DFLASH tokenize --tokenizer "$OUT/target/tokenizer.json" --no-special --file "$f" | tr ',' ' ')
            set -- $ids
            [ $# -ge 16 ] || continue
            echo "$eot $1 $2 $3 $4 $5 $6 $7 $8" >> "$dst.tmp"
            [ "$(wc -l < "$dst.tmp")" -lt "$want" ] || break
        done
        rm -rf "$tmp"
        mv "$dst.tmp" "$dst"
        echo "learned_target.sh: $(wc -l < "$dst") prompts in $dst" >&2
    done
    ;;
*)
    echo "usage: sh learned/learned_target.sh train|resume|eval|prompts|check" >&2
    exit 2
    ;;
esac
