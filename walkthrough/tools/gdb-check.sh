#!/bin/sh
# walkthrough/tools/gdb-check.sh - the gdb guide, generated and checked.
#
#   sh walkthrough/tools/gdb-check.sh           (make gdb-check)  check walkthrough/gdb.md
#   sh walkthrough/tools/gdb-check.sh --write   (make gdb-guide)  regenerate it
#   sh walkthrough/tools/gdb-check.sh --typed   type it into gdb in tmux and compare the screen
#
# Run from the repository root after building ./dflash-debug and the toy
# weights (the make targets do both). walkthrough/gdb.md is written by
# walkthrough/tools/gdb-guide.py, which runs every command of the ```gdb blocks of
# walkthrough/tools/gdb.md.in in gdb as if typed, with walkthrough/dflash.gdb
# loaded, and puts gdb's real output under each command. The check:
#   1. the template quotes no line number of dflash.c by hand ({{L:TEXT}}
#      finds one by its text);
#   2. every command dflash.gdb defines is used in the guide;
#   3. a fresh run prints exactly what gdb.md shows (addresses, process ids
#      and the $N of finish's "Value returned" aside), so every transcript line and every line
#      number in gdb.md is the real one; when they differ because dflash.c
#      moved, it says so and `make gdb-guide` regenerates the page;
#   4. the same with `print` commands run between the commands (a student
#      exploring): the transcripts do not depend on gdb's value history;
#      and the commands run as a script (gdb -batch -x) print the same, but
#      for "Continuing." and "Run till exit", which gdb prints for typed
#      commands only;
#   5. each "NNN<tab>source" line of the transcripts (a stop, a `next`) is
#      line NNN of dflash.c;
#   6. no command of the guide printed an error (a vanished name);
#   7. the facts the guide is about: acceptance lengths 2 and 3, the planted
#      look-ahead heads of draft layer 0 on the anchor, the draft cache crop.
set -u
cd "$(dirname "$0")/../.." || exit 1

if ! command -v gdb > /dev/null 2>&1; then
    echo "gdb-check: gdb is not installed (apt-get install gdb)"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# gen OUT [1]: run the guide, write the page to OUT (with noise when $2 = 1).
# debuginfod off: no download query (DEBUGINFOD_URLS from a login shell).
gen() {
    GDB_GUIDE_OUT="$1" GDB_GUIDE_RAW="$1.raw" GDB_GUIDE_NOISE="${2:-0}" \
        gdb -q -batch -nx -iex 'set debuginfod enabled off' -x walkthrough/tools/gdb-guide.py ./dflash-debug > "$1.raw" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || [ ! -s "$1" ]; then
        echo "gdb-check: running the guide failed (gdb exit status $rc); its output:"
        tail -n 40 "$1.raw"
        return 1
    fi
}

# --typed: type the guide's commands into gdb in a tmux pane, one by one as
# a student does, and compare the screen with gdb.md (needs tmux; not in CI)
if [ "${1:-}" = "--typed" ]; then
    command -v tmux > /dev/null 2>&1 || { echo "gdb-check --typed: needs tmux"; exit 1; }
    T="tmux -L gdb-check-$$"
    awk '/^```/ { g = ($0 == "```gdb") && !g; next } g && NF' walkthrough/tools/gdb.md.in > "$tmp/cmds"
    $T -f /dev/null new-session -d -s g -x 300 -y 50 "gdb -q -nx -iex 'set debuginfod enabled off' ./dflash-debug" || exit 1
    $T set-option -t g history-limit 100000 > /dev/null
    prompt() {  # wait until the pane's last line is the prompt
        i=0
        while [ $i -lt 300 ]; do
            [ "$($T capture-pane -p -t g | grep -v '^$' | tail -n 1)" = "(gdb)" ] && return 0
            sleep 0.2; i=$((i + 1))
        done
        return 1
    }
    prompt
    while IFS= read -r cmd; do
        $T send-keys -t g -l "$cmd"; $T send-keys -t g Enter
        sleep 0.1; prompt || { echo "gdb-check --typed: no prompt after '$cmd'"; break; }
    done < "$tmp/cmds"
    $T capture-pane -p -J -S - -t g > "$tmp/screen"
    $T kill-server
    clean() { expand | sed -e 's/0x[0-9a-f][0-9a-f]*/0x?/g' -e 's/process [0-9][0-9]*/process ?/g' -e 's/ *$//' | grep -v '^(gdb)$'; }
    awk '/^```/ { t = ($0 == "```text"); next } t' walkthrough/gdb.md | clean > "$tmp/want"
    sed -n '/^(gdb) source/,$p' "$tmp/screen" | clean > "$tmp/got"
    if diff -u "$tmp/want" "$tmp/got" > "$tmp/diff"; then
        echo "gdb-check --typed: the $(grep -c '^(gdb) ' "$tmp/got") commands typed in tmux showed exactly gdb.md's transcripts"
        exit 0
    fi
    head -n 40 "$tmp/diff"; echo "gdb-check --typed: FAILED"; exit 1
fi

if [ "${1:-}" = "--write" ]; then
    gen "$tmp/gdb.md" || exit 1
    cp "$tmp/gdb.md" walkthrough/gdb.md
    echo "gdb-guide: wrote walkthrough/gdb.md ($(grep -c '^(gdb) ' walkthrough/gdb.md) commands run in gdb)"
    exit 0
fi

fail=0
checks=0
# what may differ from machine to machine: addresses, process ids (and a
# software watchpoint where the machine has no hardware ones); and the
# history number of finish's "Value returned is $N", which counts the values
# printed before. Any other $N in the output (a helper using `print`) is kept,
# so the replay with prints in between (4.) catches it.
normalize() {
    sed -e 's/0x[0-9a-f][0-9a-f]*/0x?/g' -e 's/process [0-9][0-9]*/process ?/g' \
        -e 's/^Value returned is \$[0-9][0-9]*/Value returned is $?/' \
        -e 's/^Hardware watchpoint /Watchpoint /' "$1"
}

# 1. no hand-written line numbers in the template
checks=$((checks + 1))
if grep -n -e 'dflash\.c:[0-9]' -e '[Ll]ines\{0,1\} [0-9]' walkthrough/tools/gdb.md.in; then
    echo "gdb-check: walkthrough/tools/gdb.md.in quotes line numbers of dflash.c by hand (above);"
    echo "           write {{L:TEXT}} (the line containing TEXT) or let a command print it"
    fail=1
fi

# 2. every command of dflash.gdb appears as a command in the guide
used=$(awk '/^```/ { g = ($0 == "```gdb") && !g; next } g && NF { print $1 }' walkthrough/tools/gdb.md.in | sort -u)
defined=$(sed -n -e 's/^@dflash_command("\([^"]*\)").*/\1/p' -e 's/^define \([^ ]*\).*/\1/p' walkthrough/dflash.gdb)
n_defined=0
for c in $defined; do
    n_defined=$((n_defined + 1))
    checks=$((checks + 1))
    if ! printf '%s\n' "$used" | grep -qxF -- "$c"; then
        echo "gdb-check: walkthrough/dflash.gdb defines '$c', but no \`\`\`gdb block of gdb.md.in uses it"
        fail=1
    fi
done
if [ "$n_defined" -lt 10 ]; then
    echo "gdb-check: found only $n_defined commands in walkthrough/dflash.gdb"
    fail=1
fi

# 3. a fresh run against the committed page
gen "$tmp/fresh.md" || exit 1
checks=$((checks + 1))
normalize walkthrough/gdb.md > "$tmp/want"
normalize "$tmp/fresh.md" > "$tmp/got"
if ! cmp -s "$tmp/want" "$tmp/got"; then
    fail=1
    sed 's/[0-9][0-9]*/N/g' "$tmp/want" > "$tmp/want.n"
    sed 's/[0-9][0-9]*/N/g' "$tmp/got" > "$tmp/got.n"
    if cmp -s "$tmp/want.n" "$tmp/got.n"; then
        echo "gdb-check: walkthrough/gdb.md is stale: only numbers differ from a fresh run, e.g. line"
        echo "           numbers after an edit of dflash.c, or values after a change of the arithmetic."
    else
        echo "gdb-check: walkthrough/gdb.md differs from what gdb prints now (dflash.c, dflash.gdb or"
        echo "           gdb.md.in changed since it was generated, or gdb prints something else):"
    fi
    diff -u walkthrough/gdb.md "$tmp/fresh.md" | head -n 60
    echo "gdb-check: \`make gdb-guide\` regenerates walkthrough/gdb.md; read the diff, then commit it."
fi

# 4. the same with values printed between the commands
gen "$tmp/noise.md" 1 || exit 1
checks=$((checks + 1))
normalize "$tmp/noise.md" > "$tmp/noise"
if ! cmp -s "$tmp/got" "$tmp/noise"; then
    echo "gdb-check: the transcripts change when the student prints values in between:"
    diff -u "$tmp/got" "$tmp/noise" | head -n 30
    fail=1
fi

# 4b. the commands run as a script (gdb -batch -x): the same output, except
#     the lines gdb prints only for typed commands
awk '/^```/ { g = ($0 == "```gdb") && !g; next } g && NF' walkthrough/tools/gdb.md.in > "$tmp/cmds.gdb"
gdb -q -batch -nx -iex 'set debuginfod enabled off' -x "$tmp/cmds.gdb" ./dflash-debug 2>&1 |
    grep -v '^warning: Error disabling address space randomization' > "$tmp/batch.raw"
checks=$((checks + 1))
awk '/^```/ { t = ($0 == "```text"); next } t' "$tmp/fresh.md" |
    grep -v -e '^(gdb) ' -e '^Continuing\.$' -e '^Run till exit from ' > "$tmp/batch.want"
normalize "$tmp/batch.want" > "$tmp/batch.want.n"
normalize "$tmp/batch.raw" > "$tmp/batch.got.n"
if ! cmp -s "$tmp/batch.want.n" "$tmp/batch.got.n"; then
    echo "gdb-check: the guide's commands run with gdb -batch -x print something else:"
    diff -u "$tmp/batch.want.n" "$tmp/batch.got.n" | head -n 30
    fail=1
fi

# 5. every "NNN<tab>text" line gdb printed in dflash.c is line NNN of dflash.c
checks=$((checks + 1))
bad=$(awk -F '\t' 'NR == FNR { src[FNR] = $0; next }
    /^```/ { file = ""; next }
    { if (match($0, /[A-Za-z0-9_]+\.c:[0-9]+/)) file = substr($0, RSTART, RLENGTH) }
    /^[0-9]+\t/ && file ~ /^dflash\.c:/ {
        n++; line = substr($0, length($1) + 2)
        if (line != src[$1]) print "  line " $1 ": gdb.md shows \"" line "\"" }
    END { if (n < 30) print "  only " n + 0 " source lines found to check" }' dflash.c walkthrough/gdb.md)
if [ -n "$bad" ]; then
    echo "gdb-check: source lines quoted in walkthrough/gdb.md are not those of dflash.c:"
    echo "$bad"
    fail=1
fi

# 6. no command of the guide failed (an error is printed and the guide goes
#    on, so a renamed local would otherwise be regenerated into the page)
checks=$((checks + 1))
if grep -n -E 'No symbol "|^[A-Za-z0-9_-]+: (No symbol|Cannot access|There is no member)' "$tmp/fresh.md"; then
    echo "gdb-check: a command of the guide failed (above): a name in gdb.md.in or dflash.gdb no longer exists"
    fail=1
fi

# 7. the facts, in the fresh run (independent of what gdb.md says)
expect() {
    checks=$((checks + 1))
    if ! grep -qxF -- "$1" "$tmp/fresh.md"; then
        echo "gdb-check: the fresh run did not print: $1"
        fail=1
    fi
}
expect "acc = 2: keep block[:3] = on the mat, then the bonus posterior[2] = in"
expect "acc = 3: keep block[:4] = in a box ., then the bonus posterior[3] = <eos>"
# round 1, draft layer 0 (pattn 1, pattn 3): head m sends q@(3+m) to the anchor's key k@3
expect "  q@4    0.000 0.000 0.000  |  1.000 0.000 0.000 0.000"
expect "  q@6    0.000 0.000 0.000  |  1.000 0.000 0.000 0.000"
# round 2 (step4 4): the same for heads 1..3 and the new anchor at position 6
for m in 1 2 3; do
    expect "head $m, query $m places after the anchor (q@$((6 + m))): largest weight 1.0000 on k@6"
done
expect "Old value = 7"
expect "New value = 3"
expect "draft cache: crop(3) right after the draft forward kept only context K/V: len 0 -> 3"
expect "block [4] at positions 3..6: on <mask> <mask> <mask> (ids 5 1 1 1)"
checks=$((checks + 1))
if ! grep -q '^Value returned is \$[0-9]* = 2$' "$tmp/fresh.md"; then
    echo "gdb-check: finish in acceptance_length did not return 2"
    fail=1
fi

if [ $fail -ne 0 ]; then
    echo "gdb-check: FAILED"
    exit 1
fi
echo "gdb-check: OK: $checks checks; walkthrough/gdb.md is what gdb prints now ($(grep -c '^(gdb) ' walkthrough/gdb.md) commands, $n_defined defined in dflash.gdb, all used), with or without values printed in between, typed or as a script"
exit 0
