#!/bin/sh
# tools/test-fixtures.sh - the traces several test suites read, made once
# before they run (make test, make test-long; make sanitize in build/san with
# the sanitized programs), into build/fixtures/ of the current directory:
#   walkthrough-float, walkthrough-double: the default run (the walkthrough
#     set, "The cat sat") by ./dflash-float and ./dflash-double
#     (test_parity, test_trace_run);
#   random1-float, random1-double: the random set, "A dog saw", one new
#     token, --ignore-eos (test_pitfalls, test_diff_hints).
# Each is the plain `--trace` of that run, nothing else: a suite reads it
# where it would otherwise run the same command itself (tests/testutil.h,
# tu_fixture). Made anew every time (each costs a run; a stale one would be
# a wrong reference), each written beside and renamed, as --trace does.
# Prints the CPU seconds it took. Exits 1 if a run failed.
set -u
W='--weights toy_weights/walkthrough'
R1='--weights toy_weights/random --prompt "A dog saw" --max-new-tokens 1 --ignore-eos'
mkdir -p build/fixtures || exit 1
fail=0
for p in float double; do
    for f in "walkthrough $W" "random1 $R1"; do
        name=${f%% *} args=${f#* }
        eval "./dflash-$p $args --trace build/fixtures/$name-$p" > build/fixtures/$name-$p.log 2>&1 ||
            { echo "test-fixtures: ./dflash-$p $args failed:" >&2; cat build/fixtures/$name-$p.log >&2; fail=1; }
        rm -f build/fixtures/$name-$p.log
    done
done
times > build/fixtures/.times   # the shell's own line, then its children's
cpu=$(awk 'NR == 2 { u = $1; s = $2; gsub(/s/, "", u); gsub(/s/, "", s);
    split(u, a, "m"); split(s, b, "m"); printf "%.1f", a[1] * 60 + a[2] + b[1] * 60 + b[2] }' build/fixtures/.times)
rm -f build/fixtures/.times
echo "== test fixtures (build/fixtures: the default run and a random-set run, float and double): $cpu s CPU"
exit $fail
