#!/bin/sh
# learned/learned_data.sh SRC_DIR OUT_DIR - the learned target's corpus (make learned-data).
#
# SRC_DIR is Debian's `fortunes` package (/usr/share/games/fortunes; BSD fortune
# files, BSD licence: /usr/share/doc/fortunes/copyright). The rule, so anyone can
# rebuild the same bytes:
#   - the files: every regular file of SRC_DIR except *.dat (strfile's indexes),
#     *.u8 (symlinks to the same files) and ascii-art (pictures, not English),
#     in C-locale name order;
#   - documents: each file's records, split on the lines that are exactly "%";
#     in each record overstrikes are undone (a byte followed by backspace is
#     dropped: "_\bX" and "X\bX" become "X"), the other control bytes except
#     tab and newline are dropped, leading and trailing blank lines removed;
#     a record left empty is no document;
#   - the split: documents are numbered 0, 1, ... across the files in that
#     order; number i is held out iff i % 16 == 7 (1 in 16, 6.25%), the rest
#     are training text;
#   - the output: OUT_DIR/train.txt and OUT_DIR/heldout.txt are fortune files
#     again: each document's lines, then a line "%" (the separator
#     `dflash train-target --data` splits on).
# Deterministic: LC_ALL=C, no clock, no randomness. Written to temporary
# files and renamed into place.
set -eu
src=${1:?usage: learned_data.sh SRC_DIR OUT_DIR}
out=${2:?usage: learned_data.sh SRC_DIR OUT_DIR}
LC_ALL=C
export LC_ALL
if [ ! -f "$src/fortunes" ]; then
    echo "learned-data: $src/fortunes not found: install Debian's fortunes package (apt-get install fortunes)" >&2
    exit 2
fi
mkdir -p "$out"
files=$(cd "$src" && for f in *; do
    case $f in *.dat|*.u8|ascii-art) continue ;; esac
    [ -f "$f" ] && [ ! -L "$f" ] && printf '%s\n' "$f"
done | sort)
trap 'rm -f "$out/train.txt.tmp" "$out/heldout.txt.tmp"' EXIT INT TERM
(cd "$src" && cat $files) | awk -v train="$out/train.txt.tmp" -v held="$out/heldout.txt.tmp" '
function flush(   i, first, last, dst) {
    first = 1; last = n
    while (first <= last && lines[first] ~ /^[ \t]*$/) first++
    while (last >= first && lines[last] ~ /^[ \t]*$/) last--
    if (first <= last) {
        dst = (doc % 16 == 7) ? held : train
        for (i = first; i <= last; i++) print lines[i] > dst
        print "%" > dst
        doc++
    }
    n = 0
}
BEGIN { n = 0; doc = 0 }
{
    sub(/\r$/, "")
    while (gsub(/[^\b]\b/, "")) {}
    gsub(/[\001-\010\013-\037\177]/, "")
}
$0 == "%" { flush(); next }
{ lines[++n] = $0 }
END {
    flush()
    printf "learned-data: %d documents (%d held out)\n", doc, int((doc + 8) / 16) > "/dev/stderr"
}'
mv "$out/train.txt.tmp" "$out/train.txt"
mv "$out/heldout.txt.tmp" "$out/heldout.txt"
trap - EXIT INT TERM
