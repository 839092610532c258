#!/bin/sh
# walkthrough/gdb-check.sh - run the gdb guide as written and check what it
# printed. `make gdb-check` calls it from the repository root, after building
# ./dflash-debug and the toy weights.
#
# Checks:
#   1. gdb -batch -x walkthrough/walkthrough.gdb ./dflash-debug exits 0 and
#      the program exits normally under it;
#   2. the facts the guide is about: the shapes and values at each step, the
#      first verification's acceptance length (2, then 3 in round 2), and that
#      in draft layer 0 the planted look-ahead head m (heads 1..3) makes the
#      query at position 3+m peak on the anchor, key 3 ("on");
#   3. every line of every ```text block of walkthrough/gdb.md (the
#      transcript excerpts) appears in the output, and every line of every
#      ```gdb block (the commands shown) in walkthrough.gdb, each in the same
#      order, so the guide is reproducible exactly as written.
# On failure it prints what is missing and the whole gdb output.
set -u
cd "$(dirname "$0")/.." || exit 1

if ! command -v gdb > /dev/null 2>&1; then
    echo "gdb-check: gdb is not installed (apt-get install gdb)"
    exit 1
fi
out=$(mktemp)
trap 'rm -f "$out" "$out.want"' EXIT INT TERM

gdb -batch -x walkthrough/walkthrough.gdb ./dflash-debug > "$out" 2>&1
rc=$?
fail=0
checks=0
if [ $rc -ne 0 ]; then
    echo "gdb-check: gdb exited with status $rc"
    fail=1
fi

# expect LINE: LINE occurs in the output as a whole line
expect() {
    checks=$((checks + 1))
    if ! grep -qxF -- "$1" "$out"; then
        echo "gdb-check: missing line: $1"
        fail=1
    fi
}

checks=$((checks + 1))
if ! grep -q '^\[Inferior 1 (process [0-9]*) exited normally\]$' "$out"; then
    echo "gdb-check: the program did not exit normally under gdb"
    fail=1
fi

# Step 1: prefill and the context features
expect "== Step 1: prefill: target_forward, T = 3 tokens at positions 0..2 (cache->len = 0)"
expect "tr.logits of the last prompt position [1, 36]: argmax token 5 (on), logit 16.0184"
expect "== Step 1: extract_context_feature: 3 rows, target_layer_ids = {3, 7, 11}, read from hidden_states[id + 1]"
expect "target_hidden [n, k*D] = [3, 1536]; columns 0..5 (hidden_states[4]):"
# Steps 2-3: the draft's inputs
expect "== Steps 2-5: draft_forward: Lc = 3 context rows, draft cache->len = 0, block at positions 3..6:"
expect "  words: on <mask> <mask> <mask>"
expect "r->pos (position_ids): {0, 1, 2, 3, 4, 5, 6}"
# Step 4: Q, K, RoPE, attention in draft layer 0
expect "== Step 4: attention: T = 4 block queries over S = 7 keys, 8 heads, causal = 0"
expect "  key 3  position 3  H W_K (block)    k[0]  80.0000  k[16]   0.0000  k[31]   0.0000"
expect "  q'_5 . k'_2 = -12.9889   score = q'_5 . k'_2 / sqrt(d) = -1.6236"
expect "-- 4.4 back in draft_layer: a->att [H, B, S] = [8, 4, 7]; head 1 (look-ahead 1):"
# the planted look-ahead heads: head m, query at position 3+m -> key 3 (the anchor)
expect "head 1 (look-ahead 1), query at position 4: argmax index 3, value 1.0000"
expect "head 2 (look-ahead 2), query at position 5: argmax index 3, value 1.0000"
expect "head 3 (look-ahead 3), query at position 6: argmax index 3, value 1.0000"
# Step 5: the proposal, the draft cache crop
expect "  row 0 (position 4): argmax token 6 (the), logit 15.7826"
expect "  row 2 (position 6): argmax token 11 (.), logit 15.2123"
expect "== cache_crop(n = 3) on the cache with 2 layers (the draft's): len 7 -> 3, only the context K/V stay"
# Step 6: verification; the FIRST acceptance length must be 2
expect "== Step 6: verification: target_forward, T = 4 tokens at positions 3..6 (cache->len = 3)"
expect "  words: the mat in <eos>"
checks=$((checks + 1))
acc=$(grep '^acceptance_length returned ' "$out" | sed 's/^acceptance_length returned //' | tr '\n' ' ')
if [ "$acc" != "2 3 " ]; then
    echo "gdb-check: acceptance lengths seen: '$acc', expected '2 3 ' (2 at the first verification)"
    fail=1
fi
expect "ri->match   = {1, 1, 0}"
expect "ri->cumprod = {1, 1, 0}"
# Step 7 and round 2
expect "== Step 7: cache_crop(n = 6) on the cache with 12 layers (the target's): len 7 -> 6"
expect "  words: on the mat in"
expect "== Round 2: draft_forward: Lc = 3 context rows, draft cache->len = 3, block at positions 6..9:"

# 3. gdb.md: its ```text blocks (transcripts) must appear in the output and
#    its ```gdb blocks (commands) in walkthrough.gdb, each in order.
blocks() {  # blocks LANG: the non-empty lines of gdb.md's ```LANG blocks
    awk -v open="\`\`\`$1" '/^```/ { inblk = !inblk && $0 == open; next }
                                inblk && length($0) > 0 { print }' walkthrough/gdb.md
}
in_order() {  # in_order WANT HAVE: the first line of WANT not found in order in HAVE
    awk 'NR == FNR { want[n++] = $0; next }
         k < n && $0 == want[k] { k++ }
         END { if (k < n) printf "%d: %s", k + 1, want[k] }' "$1" "$2"
}
blocks text > "$out.want"
n_want=$(wc -l < "$out.want")
checks=$((checks + 1))
if [ "$n_want" -lt 20 ]; then
    echo "gdb-check: walkthrough/gdb.md has only $n_want transcript lines in \`\`\`text blocks"
    fail=1
fi
missing=$(in_order "$out.want" "$out")
if [ -n "$missing" ]; then
    echo "gdb-check: gdb.md transcript line $missing"
    echo "           is not in the gdb output (after the lines before it); update gdb.md"
    fail=1
fi
blocks gdb > "$out.want"
n_cmds=$(wc -l < "$out.want")
checks=$((checks + 1))
if [ "$n_cmds" -lt 20 ]; then
    echo "gdb-check: walkthrough/gdb.md has only $n_cmds command lines in \`\`\`gdb blocks"
    fail=1
fi
missing=$(in_order "$out.want" walkthrough/walkthrough.gdb)
if [ -n "$missing" ]; then
    echo "gdb-check: gdb.md command line $missing"
    echo "           is not in walkthrough/walkthrough.gdb (after the lines before it); update gdb.md"
    fail=1
fi

if [ $fail -ne 0 ]; then
    echo "gdb-check: FAILED. The gdb output was:"
    echo "----------------------------------------------------------------------"
    cat "$out"
    echo "----------------------------------------------------------------------"
    exit 1
fi
echo "gdb-check: OK: $checks checks passed; gdb.md's transcripts appear in the output and its $n_cmds command lines in walkthrough.gdb, in order"
exit 0
