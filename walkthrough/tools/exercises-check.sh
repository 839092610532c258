#!/bin/sh
# exercises-check.sh - check every answer stated in walkthrough/exercises.md
# (or another page of exercises: walkthrough/learned/README.md, .zh.md) by
# running the program.
#
#   sh walkthrough/tools/exercises-check.sh walkthrough/exercises.md   (`make exercises-check`)
#   sh walkthrough/tools/exercises-check.sh PAGE MIN   (a page of at least MIN exercises, default 12)
#
# Every line of the form
#     <!-- check: COMMAND => EXPECTED -->
# is one stated answer: COMMAND runs as a student pastes it, from the
# repository root, in a fresh shell (sh -u, an empty environment but PATH and
# HOME) after the file's setup block (its first ``` block: the trace $T of the
# default run, the helpers npy and npyshape), and its output (surrounding
# blank space trimmed, lines joined by one space) must equal EXPECTED. Every
# other ``` block inside an exercise (a command shown to paste) runs the same
# way and must exit 0. A command that uses a variable the setup does not
# define fails (sh -u: exercise 16's $TMP once wrote /a9 at the root).
# The exercises write under build/exercises/, removed before and after.
# Fails when any answer no longer holds, when the file holds fewer than MIN
# (12) exercises, or when an exercise has no checked answer.
set -eu
export LC_ALL=C
md=${1:-walkthrough/exercises.md}
min=${2:-12}
[ -f "$md" ] || { echo "exercises-check: $md not found"; exit 1; }
[ -x ./dflash ] || { echo "exercises-check: ./dflash not built (make dflash weights)"; exit 1; }
tmp=$(mktemp -d)
rm -rf build/exercises
trap 'rm -rf "$tmp" build/exercises' EXIT

# the setup block, as the file gives it
awk '/^```/ { if (inb) exit; inb = 1; next } inb' "$md" > "$tmp/setup.sh"
[ -s "$tmp/setup.sh" ] || { echo "exercises-check: $md has no setup block"; exit 1; }
# COMMAND in a fresh shell after the setup (its own output discarded)
fresh() {
    env -i PATH="$PATH" HOME="${HOME:-/}" LC_ALL=C sh -u -c "{ . '$tmp/setup.sh'; } > /dev/null 2>&1 || { echo 'setup block failed'; exit 1; }
$1"
}

n=0 fail=0
grep -n '^<!-- check: .* => .* -->[[:space:]]*$' "$md" | sed 's/<!-- check: //; s/ -->[[:space:]]*$//' > "$tmp/checks"
while IFS= read -r line; do
    ln=${line%%:*}
    rest=${line#*:}
    cmd=${rest% => *}
    want=${rest##* => }
    n=$((n + 1))
    got=$(fresh "$cmd" 2>&1 < /dev/null | tr '\n' ' ' | tr -s ' ' | sed 's/^ //; s/ $//') || true
    if [ "$got" = "$want" ]; then
        printf 'ok   %s:%s  %s\n' "$md" "$ln" "$want"
    else
        printf 'FAIL %s:%s  %s\n       expected: %s\n       got:      %s\n' "$md" "$ln" "$cmd" "$want" "$got"
        fail=1
    fi
done < "$tmp/checks"
# every command block inside an exercise, pasted after the setup, exits 0
awk -v dir="$tmp" '/^## [0-9]+\. / { ex = 1 } /^```/ { if (inb) { inb = 0; close(f); next } if (ex) { nb++; f = dir "/block" nb; print NR > (dir "/blocks"); inb = 1; next } }
     inb { print > f }' "$md"
nb=0
if [ -f "$tmp/blocks" ]; then
    while IFS= read -r ln; do
        nb=$((nb + 1))
        if out=$(fresh "$(cat "$tmp/block$nb")" 2>&1 < /dev/null); then
            printf 'ok   %s:%s  the command block runs as pasted\n' "$md" "$ln"
        else
            printf 'FAIL %s:%s  the command block fails when pasted after the setup:\n%s\n' "$md" "$ln" "$(echo "$out" | tail -n 3)"
            fail=1
        fi
    done < "$tmp/blocks"
fi
# every exercise ("## N. ...") states at least one checked answer, and there are at least MIN
n_ex=$(grep -c '^## [0-9][0-9]*\. ' "$md")
if [ "$n_ex" -lt "$min" ]; then echo "exercises-check: only $n_ex exercises in $md (at least $min)"; fail=1; fi
awk '/^## [0-9]+\. / { if (t != "" && !c) print t; t = $0; c = 0 } /^<!-- check: / { c = 1 }
     END { if (t != "" && !c) print t }' "$md" > "$tmp/unchecked"
if [ -s "$tmp/unchecked" ]; then
    echo "exercises-check: exercises without a checked answer:"; cat "$tmp/unchecked"; fail=1
fi
if [ "$fail" -ne 0 ]; then echo "exercises-check: FAILED"; exit 1; fi
echo "exercises-check: all $n stated answers of the $n_ex exercises hold, and its $nb command blocks run as pasted (each in a fresh shell after the setup block)"
