#!/bin/sh
# tools/run-tests.sh [-C DIR] [--label TEXT] TEST... - runs the cmocka test
# binaries side by side (they share nothing but the read-only weights), each
# into its own log (TEST.log), then prints the logs in the order given with
# each binary's exit status and seconds. Exits 1 if any binary failed.
# make test, make test-long (DFLASH_TEST_LONG=1 in the environment) and make
# sanitize (-C build/san, the sanitizer options in the environment) run it.
set -u
dir=. label=
while [ $# -gt 0 ]; do
    case $1 in
    -C) dir=$2; shift 2;;
    --label) label=" ($2)"; shift 2;;
    *) break;;
    esac
done
cd "$dir" || exit 1
show() { [ "$dir" = . ] && echo "$1" || echo "$dir/$1"; }
for t in "$@"; do rm -f "$t.log" "$t.rc"; done
for t in "$@"; do
    ( s=$(date +%s); ./"$t" > "$t.log" 2>&1; rc=$?
      echo "$rc $(( $(date +%s) - s ))" > "$t.rc" ) &
done
wait
fail=0
for t in "$@"; do
    read rc secs < "$t.rc"
    echo "== $(show "$t")$label: exit $rc, $secs s"
    cat "$t.log"
    [ "$rc" = 0 ] || { fail=1; echo "== $(show "$t"): FAILED"; }
    rm -f "$t.log" "$t.rc"
done
exit $fail
