#!/bin/sh
# train/train_decode.sh LOG DRAFT_DIR BLOCK... - decode the held-out prompts of
# a `dflash train --log` file with ./dflash (the random target, the draft in
# DRAFT_DIR, greedy, stop at <eos>) at each block size, and print one line per
# block size:
#   decode block K prompts n rounds R round_tokens T tau X acceptance_per_position p1 .. p(K-1)
# T = the tokens the rounds committed (accepted + bonus; the prefill gives
# the first new token); tau = T / R, the mean of (accepted + 1) as ./dflash
# prints it, pooled over the prompts; p_i = the fraction of rounds whose
# acceptance length is >= i (proposal i accepted; for each prompt these
# fractions must equal the acceptance_per_position line ./dflash --rounds
# prints). Each run must reproduce the held-out sequence (DFlash is
# lossless and the sequence is the target's greedy continuation): otherwise
# the script fails. walkthrough/training/README.md.
set -eu
export LC_ALL=C
DFLASH=${DFLASH:-./dflash}   # the program (make: ./dflash)
log=${1:?usage: train/train_decode.sh LOG DRAFT_DIR BLOCK...}
draft=${2:?usage: train/train_decode.sh LOG DRAFT_DIR BLOCK...}
shift 2
target=${TARGET:-toy_weights/random/target}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM HUP
grep '^heldout ' "$log" | sed 's/^heldout //' > "$tmp/held"
[ -s "$tmp/held" ] || { echo "train_decode.sh: $log: no heldout lines (train with --heldout N --log FILE)" >&2; exit 2; }
for K in "$@"; do
    : > "$tmp/acc"
    n=0
    while IFS= read -r line; do
        prompt=$(echo "$line" | sed 's/ |.*//' | tr ' ' ',')
        want=$(echo "$line" | sed 's/ | / /')
        new=$(echo "$line" | sed 's/.*| //' | wc -w)
        "$DFLASH" --target "$target" --draft "$draft" --ids "$prompt" --max-new-tokens "$new" --block-size "$K" \
            --rounds --print-ids > "$tmp/out"
        got=$(grep -v '^ \|^round\|^prefill\|^new tokens' "$tmp/out" | grep -E '^[0-9]+( [0-9]+)*$' | tail -1)
        if [ "$got" != "$want" ]; then
            echo "train_decode.sh: prompt $prompt, block $K: $DFLASH gave \"$got\", the log's held-out sequence is \"$want\"" >&2
            exit 1
        fi
        sed -n 's/.*cumprod \[.*\]  accepted \([0-9]*\) + bonus.*/\1/p' "$tmp/out" > "$tmp/acc1"
        # the same fractions as ./dflash's own acceptance_per_position line for this prompt
        mine=$(awk -v K="$K" '{ r++; for (i = 1; i <= $1; i++) a[i]++ }
            END { printf "of %d):", r; for (i = 1; i < K; i++) printf " %d: %.2f", i, a[i] / r }' "$tmp/acc1")
        theirs=$(sed -n 's/^acceptance per position (rounds in which proposal i was accepted, //p' "$tmp/out")
        if [ "$K" -gt 1 ] && [ "$mine" != "$theirs" ]; then
            echo "train_decode.sh: prompt $prompt, block $K: ./dflash printed \"$theirs\", the rounds give \"$mine\"" >&2
            exit 1
        fi
        cat "$tmp/acc1" >> "$tmp/acc"
        n=$((n + 1))
    done < "$tmp/held"
    awk -v K="$K" -v n="$n" '
        { r++; s += $1 + 1; for (i = 1; i <= $1; i++) a[i]++ }
        END {
            printf "decode block %d prompts %d rounds %d round_tokens %d tau %.4f acceptance_per_position", K, n, r, s, s / r
            for (i = 1; i < K; i++) printf " %.4f", a[i] / r
            printf "\n"
        }' "$tmp/acc"
done
