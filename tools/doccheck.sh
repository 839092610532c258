#!/bin/sh
# tools/doccheck.sh - the prose checks of make docs-check:
#   1. lengths: README.md at most 2,500 words (the student's front page),
#      each docs/*.md at most 2,000, NOTES.md at most 8,000 (wc -w: code
#      blocks count, as a reader scrolls past them too);
#   2. every relative link of every tracked Markdown page resolves, with its
#      #anchor (tools/doccheck.awk says how anchors are made).
# The figures that come from runs are checked by their generators
# (tools/docs.sh check ...), which fill them in.
# Exits 1 on any failure, naming the page and the line.
set -u
cd "$(dirname "$0")/.." || exit 2
# doccheck.sh --selftest: the checks on pages made to fail (and one made
# to pass), so that a check that cannot fail fails here
if [ "${1:-}" = --selftest ]; then
    t=$(mktemp -d) || exit 2
    trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/tools" "$t/docs" "$t/sub"
    cp tools/doccheck.sh tools/doccheck.awk "$t/tools/"
    printf '# Top\n\n## Why `x` (and y)?\n\n## 1. `gqa-tile`\n\n## Top\n\n```\n## not a heading\n[in code](nowhere.md)\n```\n[a](#why-x-and-y) [b](#1-gqa-tile) [c](#top-1) [d](sub/p.md#deep) [e](sub/p.md#L2) `[f](nowhere.md)` [g](https://example.org/x)\n' > "$t/README.md"
    printf '## Deep\n\nline 3\n' > "$t/sub/p.md"
    (cd "$t" && sh tools/doccheck.sh > out.txt 2>&1) || { cat "$t/out.txt"; echo "doccheck --selftest: a page with good links failed"; exit 1; }
    printf '[x](sub/gone.md) [y](#nope) [z](sub/p.md#L9) [w](sub/p.md#deep-1)\n' >> "$t/README.md"
    i=0; while [ $i -lt 2001 ]; do printf 'word '; i=$((i + 1)); done > "$t/docs/long.md"
    (cd "$t" && sh tools/doccheck.sh > out.txt 2>&1) && { echo "doccheck --selftest: broken links passed"; exit 1; }
    for want in 'sub/gone.md: no file' "no heading or anchor 'nope'" 'has 3 lines' "no heading or anchor 'deep-1'" 'docs/long.md has 2001 words'; do
        grep -q -F "$want" "$t/out.txt" || { cat "$t/out.txt"; echo "doccheck --selftest: no \"$want\""; exit 1; }
    done
    [ "$(wc -l < "$t/out.txt")" -eq 5 ] || { cat "$t/out.txt"; echo "doccheck --selftest: expected 5 problems"; exit 1; }
    echo "doccheck --selftest: a good page passes; a missing file, two missing anchors, a line past the end and a long page are each caught"
    exit 0
fi
rc=0
limit() {   # limit FILE WORDS
    [ -f "$1" ] || return 0
    n=$(wc -w < "$1" | tr -d ' ')
    if [ "$n" -gt "$2" ]; then
        echo "doccheck: $1 has $n words; its limit is $2"; rc=1
    fi
}
limit README.md 2500
limit NOTES.md 8000
for f in docs/*.md; do limit "$f" 2000; done
pages=$(git ls-files '*.md' 2> /dev/null | grep -v '^tests/fuzz/')
[ -n "$pages" ] || pages=$(find . -name '*.md' -not -path './build/*' -not -path './tests/fuzz/*' | sed 's|^\./||')
# shellcheck disable=SC2086
LC_ALL=C awk -f tools/doccheck.awk pass=1 $pages pass=2 $pages || rc=1
n=$(echo "$pages" | wc -l | tr -d ' ')
[ $rc = 0 ] && echo "doccheck: README, NOTES and docs/ within their word limits; every relative link and anchor of the $n pages resolves"
exit $rc
