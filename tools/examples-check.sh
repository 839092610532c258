#!/bin/sh
# tools/examples-check.sh - run the example harness (examples/hook_harness.c)
# three ways and check what each must do (make examples-check; make test):
#   1. examples/hook_harness (float objects): exit 0, "hook_harness: OK"
#      (it recomputed two tensors it received and they agree);
#   2. build/examples/hook_harness-on-double (the same float harness linked
#      with the double build's objects): exit 2, refusing the first real
#      tensor by its element size (8-byte values, the harness reads 4);
#   3. build/examples/hook_harness-doc (built with TRACE.md's link line):
#      the same as 1.
set -u
fail=0
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT

run() {  # run WANT_STATUS WANT_TEXT PROGRAM
    want=$1; text=$2; prog=$3
    "$prog" toy_weights/walkthrough > "$out" 2>&1
    got=$?
    if [ "$got" != "$want" ] || ! grep -q -- "$text" "$out"; then
        echo "examples-check: FAIL: $prog exited $got (want $want), output (want \"$text\"):"
        sed 's/^/  /' "$out"
        fail=1
    else
        echo "examples-check: $prog: exit $got, \"$text\""
    fi
}

run 0 'hook_harness: OK' ./examples/hook_harness
run 2 'prefill.rope_angles has 8-byte values, this harness reads 4-byte float' build/examples/hook_harness-on-double
run 0 'hook_harness: OK' build/examples/hook_harness-doc
[ "$fail" = 0 ] && sed -n '1,3p' "$out"
exit $fail
