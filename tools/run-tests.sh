#!/bin/sh
# tools/run-tests.sh [-C DIR] [--label TEXT] [-j N] TEST... - runs the
# cmocka test binaries N at a time (they share nothing but the read-only
# weights; N: -j, else TEST_JOBS, else the number of CPUs plus one), each
# into its own log (TEST.log), then prints the logs in the order given with
# each binary's exit status, seconds and CPU seconds (user + system, the
# binary and what it ran: the shell's `times`), and the total CPU seconds:
# the wall time is about the total over the number of CPUs when the machine
# is quiet. A few at a time, not all at once: thirty suites side by side on
# two cores took three times the CPU seconds of the same suites one after
# another (each one's working set evicting the others' from the caches).
# Their scratch files (tu_tmpdir, and dflash diff's) go under TMPDIR; when it
# is unset and /dev/shm is a tmpfs with 4 GB free, under a directory made
# there and removed at the end: the suites write traces, thousands of files,
# and on this machine's ext4 /tmp a traced random-set run (8 tokens) spent
# 0.75 s of system time, on the tmpfs 0.06 s.
# Exits 1 if any binary failed.
# make test, make test-long (DFLASH_TEST_LONG=1 in the environment) and make
# sanitize (-C build/san, the sanitizer options in the environment) run it.
set -u
dir=. label= jobs=${TEST_JOBS:-}
while [ $# -gt 0 ]; do
    case $1 in
    -C) dir=$2; shift 2;;
    --label) label=" ($2)"; shift 2;;
    -j) jobs=$2; shift 2;;
    -*) echo "run-tests.sh: unknown option $1" >&2; exit 2;;
    *) break;;
    esac
done
# one binary: TEST.log, and TEST.rc holding "exit-status seconds cpu-seconds"
one() {
    s=$(date +%s); ./"$1" > "$1.log" 2>&1; rc=$?
    # times: the shell's own user/system line, then its children's
    times > "$1.cpu"
    cpu=$(awk 'NR == 2 { u = $1; s = $2; gsub(/s/, "", u); gsub(/s/, "", s);
        split(u, a, "m"); split(s, b, "m"); printf "%.1f", a[1] * 60 + a[2] + b[1] * 60 + b[2] }' "$1.cpu")
    rm -f "$1.cpu"
    echo "$rc $(( $(date +%s) - s )) $cpu" > "$1.rc"
}
# (xargs below calls this script back with RUN_TESTS_ONE=1 for each binary)
if [ "${RUN_TESTS_ONE:-}" = 1 ]; then one "$1"; exit 0; fi
case $jobs in
'') jobs=$(( $(getconf _NPROCESSORS_ONLN 2> /dev/null || echo 1) + 1 ));;
*[!0-9]*|0) echo "run-tests.sh: -j needs a number >= 1, got \"$jobs\"" >&2; exit 2;;
esac
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")   # before the cd: $0 may be relative
cd "$dir" || exit 2
scratch=
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
   [ "$(stat -f -c %T /dev/shm 2> /dev/null)" = tmpfs ] &&
   [ "$(df -Pk /dev/shm 2> /dev/null | awk 'NR == 2 { print ($4 >= 4194304) }')" = 1 ] &&
   scratch=$(mktemp -d /dev/shm/dflash-tests.XXXXXX); then
    export TMPDIR="$scratch"
    trap 'rm -rf "$scratch"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
fi
show() { [ "$dir" = . ] && echo "$1" || echo "$dir/$1"; }
for t in "$@"; do rm -f "$t.log" "$t.rc"; done
printf '%s\n' "$@" | RUN_TESTS_ONE=1 xargs -P "$jobs" -n 1 sh "$self"
fail=0 total=0
for t in "$@"; do
    if ! read rc secs cpu < "$t.rc"; then rc=? secs=? cpu=0; fi
    echo "== $(show "$t")$label: exit $rc, $secs s, $cpu s CPU"
    cat "$t.log"
    [ "$rc" = 0 ] || { fail=1; echo "== $(show "$t"): FAILED"; }
    total=$(awk -v a="$total" -v b="$cpu" 'BEGIN { printf "%.1f", a + b }')
    rm -f "$t.log" "$t.rc"
done
echo "== $# test binaries$label, $jobs at a time: $total s CPU in all"
exit $fail
