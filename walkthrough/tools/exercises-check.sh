#!/bin/sh
# exercises-check.sh - check every answer stated in walkthrough/exercises.md
# by running the program.
#
#   sh walkthrough/tools/exercises-check.sh walkthrough/exercises.md   (`make exercises-check`)
#
# Every line of the form
#     <!-- check: COMMAND => EXPECTED -->
# is one stated answer: COMMAND runs under sh from the repository root and
# its output (surrounding blank space trimmed, lines joined by one space)
# must equal EXPECTED. The commands may use:
#     $T            a trace of the default run (./dflash --trace $T)
#     $TMP          a scratch directory
#     npy FILE      the values of a .npy file (format 1.0 as trace.c writes:
#                   <i8 or <f4), one per line, read with od(1)
#     npyshape FILE its shape, space separated
# Fails when any answer no longer holds, when the file holds fewer than 12
# exercises, or when an exercise has no checked answer.
set -eu
export LC_ALL=C
md=${1:-walkthrough/exercises.md}
[ -f "$md" ] || { echo "exercises-check: $md not found"; exit 1; }
[ -x ./dflash ] || { echo "exercises-check: ./dflash not built (make dflash weights)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/helpers.sh" <<'EOF'
npy() {
    case "$(head -c 128 "$1" | tr -c '[:print:]' ' ')" in
        *"'descr': '<i8'"*) t=d8 ;;
        *"'descr': '<f4'"*) t=f4 ;;
        *) echo "npy: $1: not an <i8 or <f4 .npy file" >&2; return 1 ;;
    esac
    hl=$(od -A n -t u2 -j 8 -N 2 "$1" | tr -d ' ')
    od -A n -v -t "$t" -j $((10 + hl)) "$1" | tr -s ' ' '\n' | sed '/^$/d'
}
npyshape() {
    head -c 128 "$1" | tr -c '[:print:]' ' ' | sed -n "s/.*'shape': (\([0-9, ]*\)).*/\1/p" | tr -d ','
}
EOF
T="$tmp/trace"
TMP="$tmp/scratch"
mkdir -p "$TMP"
./dflash --trace "$T" > /dev/null
export T TMP

n=0 fail=0
grep -n '^<!-- check: .* => .* -->[[:space:]]*$' "$md" | sed 's/<!-- check: //; s/ -->[[:space:]]*$//' > "$tmp/checks"
while IFS= read -r line; do
    ln=${line%%:*}
    rest=${line#*:}
    cmd=${rest% => *}
    want=${rest##* => }
    n=$((n + 1))
    got=$(cd "$PWD" && sh -c ". '$tmp/helpers.sh'; $cmd" 2>&1 < /dev/null | tr '\n' ' ' | tr -s ' ' | sed 's/^ //; s/ $//') || true
    if [ "$got" = "$want" ]; then
        printf 'ok   %s:%s  %s\n' "$md" "$ln" "$want"
    else
        printf 'FAIL %s:%s  %s\n       expected: %s\n       got:      %s\n' "$md" "$ln" "$cmd" "$want" "$got"
        fail=1
    fi
done < "$tmp/checks"
# every exercise ("## N. ...") states at least one checked answer, and there are at least 12
n_ex=$(grep -c '^## [0-9][0-9]*\. ' "$md")
if [ "$n_ex" -lt 12 ]; then echo "exercises-check: only $n_ex exercises in $md (at least 12)"; fail=1; fi
awk '/^## [0-9]+\. / { if (t != "" && !c) print t; t = $0; c = 0 } /^<!-- check: / { c = 1 }
     END { if (t != "" && !c) print t }' "$md" > "$tmp/unchecked"
if [ -s "$tmp/unchecked" ]; then
    echo "exercises-check: exercises without a checked answer:"; cat "$tmp/unchecked"; fail=1
fi
if [ "$fail" -ne 0 ]; then echo "exercises-check: FAILED"; exit 1; fi
echo "exercises-check: all $n stated answers of the $n_ex exercises hold"
