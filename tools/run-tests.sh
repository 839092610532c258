#!/bin/sh
# tools/run-tests.sh [-C DIR] [--label TEXT] TEST... - runs the cmocka test
# binaries side by side (they share nothing but the read-only weights), each
# into its own log (TEST.log), then prints the logs in the order given with
# each binary's exit status, seconds and CPU seconds (user + system, the
# binary and what it ran: the shell's `times`), and the total CPU seconds:
# with the suites side by side on 2 cores, the wall time is about half the
# total when the machine is quiet. Exits 1 if any binary failed.
# make test, make test-long (DFLASH_TEST_LONG=1 in the environment) and make
# sanitize (-C build/san, the sanitizer options in the environment) run it.
set -u
dir=. label=
while [ $# -gt 0 ]; do
    case $1 in
    -C) dir=$2; shift 2;;
    --label) label=" ($2)"; shift 2;;
    -*) echo "run-tests.sh: unknown option $1" >&2; exit 2;;
    *) break;;
    esac
done
cd "$dir" || exit 2
show() { [ "$dir" = . ] && echo "$1" || echo "$dir/$1"; }
for t in "$@"; do rm -f "$t.log" "$t.rc"; done
for t in "$@"; do
    ( s=$(date +%s); ./"$t" > "$t.log" 2>&1; rc=$?
      # times: the shell's own user/system line, then its children's
      times > "$t.cpu"
      cpu=$(awk 'NR == 2 { u = $1; s = $2; gsub(/s/, "", u); gsub(/s/, "", s);
          split(u, a, "m"); split(s, b, "m"); printf "%.1f", a[1] * 60 + a[2] + b[1] * 60 + b[2] }' "$t.cpu")
      rm -f "$t.cpu"
      echo "$rc $(( $(date +%s) - s )) $cpu" > "$t.rc" ) &
done
wait
fail=0 total=0
for t in "$@"; do
    read rc secs cpu < "$t.rc"
    echo "== $(show "$t")$label: exit $rc, $secs s, $cpu s CPU"
    cat "$t.log"
    [ "$rc" = 0 ] || { fail=1; echo "== $(show "$t"): FAILED"; }
    total=$(awk -v a="$total" -v b="$cpu" 'BEGIN { printf "%.1f", a + b }')
    rm -f "$t.log" "$t.rc"
done
echo "== $# test binaries$label: $total s CPU in all"
exit $fail
