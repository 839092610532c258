#!/bin/sh
# tools/run-tests.sh [-C DIR] [--label TEXT] [-j N] [--fixtures] [--check TARGET]... TEST...
# runs the cmocka test binaries TEST and the checks TARGET (make targets
# that are not suites, e.g. standalone-check) N at a time (they share
# nothing but the read-only weights; N: -j, else TEST_JOBS, else the number
# of CPUs plus one), each into its own log, build/test-logs/NAME.log (under
# DIR), kept. --fixtures first makes the traces several suites read
# (tools/test-fixtures.sh, in DIR). A few at a time, not all at once: thirty
# suites side by side on two cores took three times the CPU seconds of the
# same suites one after another (each one's working set evicting the
# others' from the caches).
#
# What it prints, in the order given (suites, then checks): one line per
# suite with its cmocka counts, exit status, seconds and CPU seconds (user +
# system, the binary and what it ran: the shell's `times`); under it one
# line per skipped test, "SKIP test_name: why" (the line the test printed
# with tu_skip, tests/testutil.h); a failed suite's or check's whole log.
# TEST_VERBOSE=1 prints every log. Then the CPU total (the wall time is
# about the total over the number of CPUs when the machine is quiet) and,
# last, one line alone, which CI reads:
#     N passed, M failed, K skipped
# counting cmocka test cases (each suite's "[  PASSED  ] N test(s)." and
# its SKIPPED and FAILED summaries; a test that was declared ("Running N
# test(s)") but neither passed nor skipped, an error in a setup or a crash,
# counts as failed, and a suite that exits non-zero counts at least one
# failure), and each check and a failed --fixtures as one.
#
# Their scratch files (tu_tmpdir, and dflash diff's) go under TMPDIR; when it
# is unset and /dev/shm is a tmpfs with 4 GB free, under a directory made
# there and removed at the end: the suites write traces, thousands of files,
# and on this machine's ext4 /tmp a traced random-set run (8 tokens) spent
# 0.75 s of system time, on the tmpfs 0.06 s.
# Exits 1 if anything failed.
# make test, make test-long (DFLASH_TEST_LONG=1 in the environment) and make
# sanitize (-C build/san, the sanitizer options in the environment) run it;
# a check runs as `$MAKE --no-print-directory -s TARGET` ($MAKE: make).
set -u
dir=. label= jobs=${TEST_JOBS:-} fixtures=0 checks=
while [ $# -gt 0 ]; do
    case $1 in
    -C) dir=$2; shift 2;;
    --label) label=" ($2)"; shift 2;;
    -j) jobs=$2; shift 2;;
    --fixtures) fixtures=1; shift;;
    --check) checks="$checks $2"; shift 2;;
    -*) echo "run-tests.sh: unknown option $1" >&2; exit 2;;
    *) break;;
    esac
done
logs=build/test-logs
# the CPU seconds in FILE, the output of `times` (its second line, the
# shell's children's: `times > FILE` in the shell itself, not in a pipe or
# $(...), whose subshell has no children)
cpu_in() {
    awk 'NR == 2 { u = $1; s = $2; gsub(/s/, "", u); gsub(/s/, "", s);
        split(u, a, "m"); split(s, b, "m"); printf "%.1f", a[1] * 60 + a[2] + b[1] * 60 + b[2] }' "$1"
    rm -f "$1"
}
# one item, a test binary or make:TARGET: its log, and NAME.rc holding
# "exit-status seconds cpu-seconds"
one() {
    case $1 in
    make:*) n=${1#make:};;
    *) n=$(basename "$1");;
    esac
    s=$(date +%s)
    case $1 in
    make:*) ${MAKE:-make} --no-print-directory -s "$n" > "$logs/$n.log" 2>&1; rc=$?;;
    *) ./"$1" > "$logs/$n.log" 2>&1; rc=$?;;
    esac
    times > "$logs/$n.cpu"
    cpu=$(cpu_in "$logs/$n.cpu")
    echo "$rc $(( $(date +%s) - s )) $cpu" > "$logs/$n.rc"
}
# (xargs below calls this script back with RUN_TESTS_ONE=1 for each item,
# in DIR)
if [ "${RUN_TESTS_ONE:-}" = 1 ]; then one "$1"; exit 0; fi
case $jobs in
'') jobs=$(( $(getconf _NPROCESSORS_ONLN 2> /dev/null || echo 1) + 1 ));;
*[!0-9]*|0) echo "run-tests.sh: -j needs a number >= 1, got \"$jobs\"" >&2; exit 2;;
esac
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")   # before the cd: $0 may be relative
cd "$dir" || exit 2
mkdir -p "$logs" || exit 2
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
start=$(date +%s)
passed=0 failed=0 skipped=0 total=0
if [ $fixtures = 1 ]; then
    if sh "$(dirname "$self")/test-fixtures.sh" > "$logs/test-fixtures.log" 2>&1; then
        tail -n 1 "$logs/test-fixtures.log"
    else
        cat "$logs/test-fixtures.log"
        echo "== test fixtures: FAILED (log: $(show "$logs/test-fixtures.log"))"
        failed=1
    fi
fi
items=
for t in "$@"; do items="$items $t"; done
for c in $checks; do items="$items make:$c"; done
for t in $items; do
    case $t in make:*) n=${t#make:};; *) n=$(basename "$t");; esac
    rm -f "$logs/$n.log" "$logs/$n.rc"
done
# shellcheck disable=SC2086
printf '%s\n' $items | RUN_TESTS_ONE=1 xargs -P "$jobs" -n 1 sh "$self"
nsuites=0 nchecks=0
for t in $items; do
    case $t in make:*) n=${t#make:} what=$n;; *) n=$(basename "$t") what=$(show "$t");; esac
    log=$logs/$n.log
    if ! read rc secs cpu < "$logs/$n.rc"; then rc=? secs=? cpu=0; fi
    rm -f "$logs/$n.rc"
    [ -f "$log" ] || : > "$log"
    total=$(awk -v a="$total" -v b="$cpu" 'BEGIN { printf "%.1f", a + b }')
    case $t in
    make:*)
        nchecks=$((nchecks + 1))
        if [ "$rc" = 0 ]; then
            passed=$((passed + 1)) bad=0
            echo "== $what: passed ($secs s, $cpu s CPU)"
        else
            failed=$((failed + 1)) bad=1
            echo "== $what: FAILED (exit $rc, $secs s, $cpu s CPU)"
        fi;;
    *)
        nsuites=$((nsuites + 1))
        # "passed failed skipped", then "SKIP test: why" lines
        counts=$(awk -v rc="$rc" '
            /^\[==========\].* Running [0-9]+ test\(s\)\./ {
                for (i = 1; i <= NF; i++) if ($i == "Running") declared += $(i + 1) }
            /^\[       OK \] / { ok++ }
            /^\[  PASSED  \] [0-9]+ test\(s\)\./ { passed += $4 }
            /^\[  FAILED  \] .*[0-9]+ test\(s\), listed below/ {
                for (i = 1; i <= NF; i++) if ($i == "test(s),") failed += $(i - 1) }
            /^\[  SKIPPED \] .*[0-9]+ test\(s\), listed below/ {
                for (i = 1; i <= NF; i++) if ($i == "test(s),") skipped += $(i - 1) }
            /^\[ RUN      \] / { cur = $NF }
            /^SKIP: / { why[++nwhy] = "SKIP " cur ": " substr($0, 7) }
            END {
                if (ok > passed) passed = ok   # a crash before a group summary
                left = declared - passed - skipped - failed
                if (left > 0) failed += left   # errors, and tests a crash or a failed setup left unrun
                if (rc != "0" && failed == 0) failed = 1
                print passed + 0, failed + 0, skipped + 0
                for (i = 1; i <= nwhy; i++) print why[i]
            }' "$log")
        set -- $(echo "$counts" | head -n 1)
        p=$1 f=$2 s=$3
        passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
        line="$p passed"
        [ "$f" = 0 ] || line="$line, $f FAILED"
        [ "$s" = 0 ] || line="$line, $s skipped"
        echo "== $what$label: $line (exit $rc, $secs s, $cpu s CPU)"
        echo "$counts" | sed -n '2,$s/^/   /p'
        bad=0
        [ "$f" = 0 ] || bad=1;;
    esac
    if [ $bad = 1 ] || [ "${TEST_VERBOSE:-0}" = 1 ]; then
        sed 's/^/   | /' "$log"
        [ $bad = 0 ] || echo "== $what: FAILED (its log above: $(show "$log"))"
    fi
done
times > "$logs/.cpu"   # everything this script ran: the fixtures too
echo "== $nsuites test binaries and $nchecks checks$label, $jobs at a time: $total s CPU ($(cpu_in "$logs/.cpu") s in all$([ $fixtures = 0 ] || echo ', the fixtures included')), $(( $(date +%s) - start )) s wall"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed = 0 ]
