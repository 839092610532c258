#!/bin/sh
# tools/memcheck.sh - valgrind memcheck on ./dflash (make memcheck; see the
# Makefile for what runs). Fails on any error and on any definitely or
# indirectly lost byte. Outputs go to build/memcheck/.
set -eu
VALGRIND="valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect
          --show-leak-kinds=definite,indirect"
m=build/memcheck
rm -rf $m && mkdir -p $m
exec 3>&1   # the command lines go to the terminal, the outputs to files
run() { echo "memcheck: ./dflash $*" >&3; $VALGRIND ./dflash "$@"; }
run > $m/default.txt
run --trace $m/walk --trace-text $m/walk.txt > $m/walk-run.txt
run --weights toy_weights/random --prompt "A dog saw" --block-size 5 --max-new-tokens 8 \
    --ignore-eos --trace $m/rand --trace-text $m/rand.txt > $m/rand-run.txt
run diff $m/rand $m/rand > $m/diff.txt
run explore $m/rand $m/rand.html --vocab toy_weights/random/vocab.txt
# refused inputs exit 2 (valgrind's own error exit is 1)
rc=0; run --prompt "The zebra" --trace $m/walk > /dev/null 2> $m/refused.txt || rc=$?
[ $rc = 2 ] || { echo "memcheck: refused prompt: exit $rc, not 2 ($m/refused.txt)"; exit 1; }
rc=0; run --trace-text toy_weights/walkthrough/vocab.txt > /dev/null 2> $m/refused-output.txt || rc=$?
[ $rc = 2 ] || { echo "memcheck: output that is an input: exit $rc, not 2 ($m/refused-output.txt)"; exit 1; }
echo "memcheck: 0 errors, no definitely or indirectly lost bytes"
