#!/bin/sh
# tools/docs.sh write|check SET... - the generated documentation.
#   write: regenerate the SET's files in place (each written beside itself
#          and renamed over the committed one);
#   check: regenerate into a temporary directory and fail, with a diff, when
#          a committed file differs, when a file is generated that is not
#          committed, or when a committed figure is no longer generated.
# SETs (each a gen_* function below, writing repository paths under $1):
#   trace-md     TRACE.md: tools/mktrace prints TRACE.md.in with its
#                @TRACE_NAMES@ line replaced by the name table; check also
#                traces three runs and has `tools/mktrace check` fail when a
#                name is matched by no row or by two, when a row matches
#                nothing, or when a call's names leave the table's order
#   walkthrough  the walkthrough pages (walkthrough/tools/mkwalk, from the
#                templates walkthrough/tools/README.md.in and README.zh.md.in),
#                and their figures walkthrough/figures/*.svg (dflash figures),
#                from a trace of the default run; the chapter "How the draft
#                learned this" and figures/train_attn_mask.svg from a trace of
#                one training step (train_trace below)
#   hybrid       the chapter "A recurrent state in the loop" (walkthrough/tools/mkhybrid,
#                from walkthrough/tools/hybrid.md.in and hybrid.zh.md.in):
#                walkthrough/hybrid/README.md, README.zh.md, from the hybrid set's
#                traced run (`make run-hybrid`), a run over the text its round 1
#                keeps, and the exercises' runs (gen_hybrid below)
#   learned      the chapter "One round on English text" (walkthrough/tools/mklearned,
#                from the templates walkthrough/tools/learned.md.in and
#                learned.zh.md.in): walkthrough/learned/README.md, README.zh.md and
#                the figure of the draft head the pages show, from a trace of the
#                learned pair's run of `make run-learned` (learned_trace below),
#                toy_weights/learned/eval.tsv and the exercises' runs of the same
#                prompt (block size 4, temperature 0.7)
#   explorer     walkthrough/explorer.html (dflash explore of the same run):
#                written by `make`, not committed, so only `write` makes sense
#   pitfalls     walkthrough/pitfalls.md (walkthrough/mkpitfalls.sh: real runs)
#                and walkthrough/train-pitfalls.md (walkthrough/mktrainpitfalls.sh:
#                training-step traces, and the committed results of the
#                training runs, walkthrough/train-pitfalls/runs/)
#   training     walkthrough/training/README.md and figures/*.svg
#                (train/mktraining.sh) from the committed run logs of
#                `make train-experiments` (walkthrough/training/logs/): the
#                training runs take too long for CI, the page is checked
#                against the logs they wrote; and walkthrough/training/learned.md
#                with figures/learned_*.svg (learned/mkexperiments.sh) from the logs
#                of `make learned-experiments` (walkthrough/training/learned-logs/)
#   performance  docs/performance.md (from docs/performance.md.in), README.md's
#                speed summary and docs/learned.md's speed statement, from the
#                committed transcript of one `dflash bench`,
#                docs/performance/bench.txt, and
#                toy_weights/learned/eval.tsv (perf_vars below)
# The runs are bit-reproducible and the generators print fixed formats, so
# the files are byte-identical on every machine. Run from the repository
# root after building what they use (make docs / make docs-check do).
# To add a generated file: write it in a gen_* function (a new SET needs a
# case in `sets` too).
set -u
export LC_ALL=C
mode=${1:?usage: tools/docs.sh write|check SET...}; shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM HUP

# the trace of the default run, made once and shared by the sets
walk_trace() {
    [ -d "$tmp/trace" ] || ./dflash --weights toy_weights/walkthrough --trace "$tmp/trace" > /dev/null
}

gen_trace_md() {
    ./tools/mktrace md TRACE.md.in > "$1/TRACE.md"
}
# the training chapter's step: one step of `dflash train` on walkthrough/tools/train-step.txt
train_trace() {
    [ -d "$tmp/train" ] || ./dflash train --target toy_weights/walkthrough/target \
        --draft-config toy_weights/walkthrough/draft/config.json --data walkthrough/tools/train-step.txt \
        --batch 1 --anchors 2 --steps 1 --trace "$tmp/train" --out "$tmp/train-draft" > /dev/null 2>&1
}
# every tensor a page cites with its shape ("`draft1.logits` [3, 36]",
# "(`train1.attn_mask`, [1, 8, 19])", the Chinese page's "，") has that shape in the trace it comes
# from: the default run's (prefill, draft{r}, verify{r}) or the training
# step's (train{s})
check_cited_shapes() {
    for page in "$@"; do
        grep -o '`\(prefill\|draft[0-9]*\|verify[0-9]*\|train[0-9]*\)\.[A-Za-z0-9_.]*`\(, \|，\| \)\[[0-9, ]*\]' "$page" |
        while IFS= read -r cite; do
            name=$(echo "$cite" | sed 's/^`\([^`]*\)`.*/\1/')
            said=$(echo "$cite" | sed 's/.*\[\([0-9, ]*\)\]$/\1/; s/ //g')
            case $name in train*) dir=$tmp/train;; *) dir=$tmp/trace;; esac
            [ -f "$dir/$name.npy" ] || { echo "docs.sh: $page cites $name, which the trace does not hold"; return 1; }
            have=$(head -c 256 "$dir/$name.npy" | tr -c '[:print:]' ' ' | sed -n "s/.*'shape': (\([0-9, ]*\)).*/\1/p" | tr -d ' ' | sed 's/,$//')
            [ "$said" = "$have" ] || { echo "docs.sh: $page gives $name as [$said], the trace's is [$have]"; return 1; }
        done || return 1
    done
}
gen_walk() {
    mkdir -p "$1/walkthrough" && walk_trace && train_trace &&
    ./walkthrough/tools/mkwalk "$tmp/trace" toy_weights/walkthrough/vocab.txt "$1/walkthrough" \
        --train "$tmp/train" toy_weights/walkthrough/target > /dev/null &&
    check_cited_shapes "$1/walkthrough/README.md" "$1/walkthrough/README.zh.md" &&
    ./dflash figures --phase draft --round 1 --layer 0 --vocab toy_weights/walkthrough/vocab.txt \
        "$tmp/trace" "$1/walkthrough/figures" > /dev/null
}
# the learned pair's run: `make run-learned` (learned/learned.sh run), traced
LEARNED_PAIR="--target toy_weights/learned/target --draft toy_weights/learned/draft --max-new-tokens 64"
learned_ids() { sed -n 1p toy_weights/learned/heldout.ids | tr -s ' ' ','; }
learned_trace() {
    [ -d "$tmp/learned" ] || ./dflash $LEARNED_PAIR --ids "$(learned_ids)" --trace "$tmp/learned" > /dev/null
}
# the exercises' runs, each "@@ NAME" and its --rounds output (mklearned reads the answers there)
learned_runs() {
    for run in "greedy:" "b4:--block-size 4" "t07:--temperature 0.7 --seed 1"; do
        echo "@@ ${run%%:*}" && ./dflash $LEARNED_PAIR --ids "$(learned_ids)" ${run#*:} --rounds --print-ids || return 1
    done
}
gen_learned() {
    mkdir -p "$1/walkthrough/learned/figures" && learned_trace && learned_runs > "$tmp/learned-runs.txt" &&
    ./walkthrough/tools/mklearned "$tmp/learned" toy_weights/learned/target/tokenizer.json toy_weights/learned/heldout.ids \
        toy_weights/learned/eval.tsv "$tmp/learned-runs.txt" "$1/walkthrough/learned" > /dev/null &&
    ./dflash figures --phase draft --round 1 --layer 0 --vocab toy_weights/learned/target/tokenizer.json \
        "$tmp/learned" "$tmp/learned-figures" > /dev/null || return 1
    # the figures the pages show (the head mklearned picked), and only those
    for f in $(grep -ho 'figures/attn_draft_[a-z0-9_]*\.svg' "$1/walkthrough/learned/README.md" "$1/walkthrough/learned/README.zh.md" | sort -u); do
        cp "$tmp/learned-figures/${f#figures/}" "$1/walkthrough/learned/$f" || return 1
    done
}
# the hybrid chapter: `make run-hybrid`'s run traced, a run over the text its
# round 1 keeps (the fresh prefill the rolled-back state is compared with),
# and the exercises' runs ("@@ NAME" and the --rounds output)
HYBRID="--weights toy_weights/hybrid"
gen_hybrid() {
    mkdir -p "$1/walkthrough/hybrid" &&
    ./dflash $HYBRID --prompt "The cat sat" --trace "$tmp/hybrid" > /dev/null &&
    ./dflash $HYBRID --prompt "The cat sat on the mat" --max-new-tokens 1 --trace "$tmp/hybrid-prefix" > /dev/null &&
    { for run in b4:"--block-size 4" b2:"--block-size 2"; do
        echo "@@ ${run%%:*}" && ./dflash $HYBRID --prompt "The cat sat" ${run#*:} --rounds || return 1
      done; } > "$tmp/hybrid-runs.txt" &&
    ./walkthrough/tools/mkhybrid "$tmp/hybrid" "$tmp/hybrid-prefix" toy_weights/hybrid/vocab.txt "$tmp/hybrid-runs.txt" \
        "$1/walkthrough/hybrid" > /dev/null
}
gen_explorer() {
    mkdir -p "$1/walkthrough" && walk_trace &&
    ./dflash explore --vocab toy_weights/walkthrough/vocab.txt "$tmp/trace" "$1/walkthrough/explorer.html"
}
gen_training() {
    mkdir -p "$1/walkthrough/training" && sh train/mktraining.sh walkthrough/training/logs "$1/walkthrough/training" &&
    sh learned/mkexperiments.sh walkthrough/training/learned-logs "$1/walkthrough/training"
}
gen_pitfalls() {
    mkdir -p "$1/walkthrough" && sh walkthrough/mkpitfalls.sh "$1/walkthrough/pitfalls.md" > /dev/null &&
    sh walkthrough/mktrainpitfalls.sh "$1/walkthrough/train-pitfalls.md" > /dev/null
}

# the committed files a set must still generate (figures only: pages are
# listed by what the generator writes)
figures_walk() { find walkthrough/figures -name '*.svg' | sort; }
figures_training() { find walkthrough/training -name '*.svg' | sort; }
figures_learned() { find walkthrough/learned -name '*.svg' | sort; }

# trace-md's second half: the three runs (the default run, a random-set run
# with block size 6, a block-size-1 run with no draft: match/cumprod are empty)
check_trace_names() {
    ./dflash --trace "$tmp/t1" > /dev/null &&
    ./dflash --weights toy_weights/random --prompt 'A dog saw' --block-size 6 --max-new-tokens 12 \
        --ignore-eos --trace "$tmp/t2" > /dev/null &&
    ./dflash --block-size 1 --trace "$tmp/t3" > /dev/null &&
    ./tools/mktrace check "$tmp/t1" "$tmp/t2" "$tmp/t3"
}

# learned's second half: mklearned refuses a claim the runs do not support
# (here block 4's tau made higher than block 16's: exercise 1 says lower), and
# writes nothing
check_learned_refuses() {
    awk '/^@@ / { run = $2 } run == "b4" && /tokens per round \(tau\)/ { sub(/\(tau\): [0-9.]*/, "(tau): 9.00") } { print }' \
        "$tmp/learned-runs.txt" > "$tmp/learned-runs-bad.txt"
    cmp -s "$tmp/learned-runs.txt" "$tmp/learned-runs-bad.txt" && { echo "learned-check: the runs have no block-4 tau to alter"; return 1; }
    mkdir -p "$tmp/learned-bad"
    if ./walkthrough/tools/mklearned "$tmp/learned" toy_weights/learned/target/tokenizer.json toy_weights/learned/heldout.ids \
        toy_weights/learned/eval.tsv "$tmp/learned-runs-bad.txt" "$tmp/learned-bad" > /dev/null 2> "$tmp/learned-bad.err"; then
        echo "learned-check: mklearned wrote the pages from runs that contradict them"; return 1
    fi
    grep -q 'block 4 gives a lower tau' "$tmp/learned-bad.err" && [ ! -e "$tmp/learned-bad/README.md" ] ||
        { echo "learned-check: mklearned did not refuse the altered runs as expected:"; cat "$tmp/learned-bad.err"; return 1; }
}

# hybrid's second half: mkhybrid refuses runs that contradict exercise 1 (a
# block-2 round made to replay), and writes nothing
check_hybrid_refuses() {
    awk '/^@@ / { run = $2 } run == "b2" && /state after position/ && !done { sub(/\(all [0-9]* verified tokens kept: nothing to roll back\)/, "(replayed over 1 of the 2 verified tokens: the anchor + 0 accepted)"); done = 1 } { print }' \
        "$tmp/hybrid-runs.txt" > "$tmp/hybrid-runs-bad.txt"
    cmp -s "$tmp/hybrid-runs.txt" "$tmp/hybrid-runs-bad.txt" && { echo "hybrid-check: the runs have no block-2 rollback line to alter"; return 1; }
    mkdir -p "$tmp/hybrid-bad"
    if ./walkthrough/tools/mkhybrid "$tmp/hybrid" "$tmp/hybrid-prefix" toy_weights/hybrid/vocab.txt "$tmp/hybrid-runs-bad.txt" \
        "$tmp/hybrid-bad" > /dev/null 2> "$tmp/hybrid-bad.err"; then
        echo "hybrid-check: mkhybrid wrote the pages from runs that contradict them"; return 1
    fi
    grep -q 'at block 2 no round replays' "$tmp/hybrid-bad.err" && [ ! -e "$tmp/hybrid-bad/README.md" ] ||
        { echo "hybrid-check: mkhybrid did not refuse the altered runs as expected:"; cat "$tmp/hybrid-bad.err"; return 1; }
}

# performance: docs/performance.md from the template docs/performance.md.in,
# with the transcript docs/performance/bench.txt (the output of one
# `./dflash bench`, committed) inlined at @BENCH@ and every number the prose
# quotes read by perf_vars from that transcript, from a second one,
# docs/performance/bench-threads2.txt (`./dflash bench --threads 2`: its
# names T2_...), and from toy_weights/learned/eval.tsv (the learned pair's 64
# held-out prompts);
# README.md's speed summary, between its markers `<!-- speed: ... -->` and
# `<!-- /speed -->`, is the page's own block between the same markers. To
# refresh: `./dflash bench > docs/performance/bench.txt`, the same with
# `--threads 2` into bench-threads2.txt, then `make performance`.
PERF_BENCH=docs/performance/bench.txt
PERF_BENCH2=docs/performance/bench-threads2.txt
# NAME VALUE lines: @NAME@ in the template becomes VALUE; TRANSCRIPT2's names
# get the prefix T2_
perf_vars() { # TRANSCRIPT [TRANSCRIPT2]
    perf_bench_vars "" "$1" && perf_bench_vars T2_ "${2:-$PERF_BENCH2}" && perf_eval_vars
}
perf_bench_vars() { # PREFIX TRANSCRIPT
    awk -v P="$1" '
    function num(s) { gsub(/[^0-9.]/, "", s); return s }
    # a ratio of DFlash to target-only decoding, as words
    function cmp(x) { return x >= 1.05 ? "faster than" : x <= 0.95 ? "slower than" : "about as fast as" }
    function put(k, v) { print P k, v }
    # the threads the run used, and its load average at the start
    NR == 2 && /load average at the start/ {
        put("LOAD_START", num($NF)); start = num($NF) + 0
        threads = $4 == "one" ? 1 : $4 + 0; put("THREADS", threads)
    }
    # the target-forward sections: the first is the walkthrough target, the second the learned target
    /^== the target forward against/ { tf = tf == "" ? "WT" : "LT"; next }
    /^== DFlash vs target-only decoding: / {
        set = $6; sub(/^toy_weights\//, "", set); b = $NF; sub(/\)$/, "", b)
        sec = set == "walkthrough" ? "WALK" : set == "random" ? "RANDOM" : set == "trained" ? "TRAINED" : set == "learned" ? "LP_B" b : ""
        if (sec == "") { print "perf_vars: an unknown set in: " $0 > "/dev/stderr"; bad = 1 }
        put(sec "_BLOCK", b)
        next
    }
    /^weights a 1-token forward reads:/ && tf != "" {
        put(tf "_MB", $6); put(tf "_PROBE_MS", $(NF-4)); put(tf "_GBS", $(NF-1)) }
    /^1-token target forward:/ && tf != "" { put(tf "_T1_MS", $4); put(tf "_ROOF", num($7)) }
    /^  cost / && tf != "" { put(tf "_COST2", $3); put(tf "_COST4", $5); put(tf "_COST8", $9); put(tf "_COST16", $10) }
    /^  ms / && tf != "" { put(tf "_MS4", $5); put(tf "_MS8", $9); put(tf "_MS16", $10) }
    /^arithmetic probe/ && tf != "" { put(tf "_ARITH", $(NF-1)) }
    /^a token.s matmuls:/ && tf != "" { put(tf "_MMUL_M", $4); put(tf "_FLOOR8", num($(NF-4))) }
    /^the kernel.s 7 extra tokens at T = 8:/ && tf != "" { put(tf "_EXTRA_GFLOPS", $(NF-6)); put(tf "_EXTRA_PCT", num($(NF-4))) }
    # a decoding row: ... tau histogram prefill draft verify tok/s-AR tok/s-DF speedup
    sec != "" && NF >= 12 && $NF ~ /^[0-9.]+x$/ && $(NF-6) ~ /\// {
        t = $(NF-7) + 0
        if (!(sec in tmin) || t < tmin[sec]) tmin[sec] = t
        if (!(sec in tmax) || t > tmax[sec]) tmax[sec] = t
    }
    # the forward table split: the work outside the matmuls, per token and as a share of the forward
    /^  matmuls / && tf != "" { put(tf "_MM1_MS", $2); put(tf "_MM8_MS", $9) }
    /^  rest\/tok/ && tf != "" { put(tf "_REST1_MS", $2); put(tf "_REST4_TOK", $5); put(tf "_REST8_TOK", $9); put(tf "_REST16_TOK", $10) }
    /^  rest % / && tf != "" { put(tf "_REST1_PCT", $3); put(tf "_REST8_PCT", $10); put(tf "_REST16_PCT", $11) }
    # the learned pair: one table, DFlash and the other drafters against target-only decoding
    /^== the learned pair: / { sec = "PAIR"; next }
    /^== what a DFlash round costs/ { sec = "DC"; next }
    /^== / { sec = ""; }
    sec == "PAIR" && /^1-token decode forward|round robin; 1-token/ { put("PAIR_T1_MS", $(NF-1)) }
    sec == "PAIR" && /held-out prompts of/ { put("PAIR_PROMPTS", $1); put("PAIR_NEW", $7) }
    sec == "PAIR" && $1 ~ /^(dflash|ngram|lookup)$/ && $2 ~ /^[0-9]+$/ {
        k = "LP_" toupper($1) "_B" $2
        put(k "_TAU", $4); put(k "_VERIFY", $5); put(k "_DRAFT", $6); put(k "_COST", $7); put(k "_X", num($9))
        put(k "_CMP", cmp(num($9)))
    }
    # B tau verify-fwd verify-runs draft layers lm_head mm predicted-fwd predicted-runs measured for-2.0x published
    sec == "DC" && $1 ~ /^[0-9]+$/ && NF == 13 {
        k = "DC_B" $1
        put(k "_VFWD", $3); put(k "_VRUN", $4); put(k "_DRAFT", $5); put(k "_LAYERS", $6); put(k "_HEAD", $7)
        put(k "_MM", $8); put(k "_PREDF", num($9)); put(k "_PRED", num($10)); put(k "_MEAS", num($11)); put(k "_NEED", $12)
        put(k "_PUB", num($13)); put(k "_COST", sprintf("%.2f", $4 + $5))
        put(k "_VBOUND", $4 + 0 > $12 + 0 ? "alone is over that bound" : "alone is within it, and the draft is what is left")
    }
    sec == "DC" && /layers scaled to [0-9]+ draft layers over a [0-9]+-layer target/ {
        l = $0; sub(/.*layers scaled to /, "", l); split(l, f, " "); put("PUB_LAYERS", f[1]); put("PUB_TARGET", num(f[6])) }
    sec == "DC" && /; here [0-9]+\/[0-9]+ = / { l = $0; sub(/.*; here /, "", l); split(l, f, "/"); put("DRAFT_LAYERS", f[1]); put("TARGET_LAYERS", f[2] + 0) }
    /^  learned pair, best block each side/ {
        l = $0; sub(/.*: DFlash /, "", l); split(l, f, " ")
        put("LP_BEST_X", num(f[1])); put("LP_BEST_B", f[6]); put("LP_MET", l ~ /NOT met$/ ? "not met" : "met")
        put("LP_BEST_CMP", cmp(num(f[1]))) }
    /^  learned pair, the best other drafter:/ {
        put("BASE_BEST_NAME", $7 == "ngram" ? "the n-gram drafter" : $7 == "lookup" ? "lookup decoding" : $7)
        put("BASE_BEST_X", num($8)); put("BASE_BEST_B", num($11)); put("LP_VS_BASE", $13 == "behind" ? "behind" : "ahead of") }
    sec != "" && /^total, all runs/ { put(sec "_ALL", num($NF)); put(sec "_ALL_CMP", cmp(num($NF))) }
    sec != "" && /^total, long runs/ { put(sec "_LONG", num($NF)); put(sec "_LONG_CMP", cmp(num($NF))) }
    /^peak resident memory:/ { put("PEAK_MIB", $4); put("MODEL_MIB", $(NF-2)) }
    /^the default run .*its own process:/ { put("DEFAULT_S", $(NF-4)) }
    /^\(bench took/ {
        put("BENCH_S", num($3)); put("LOAD_END", num($NF)); load = num($NF) + 0
        # the machine, as the load averages show it (a bench on N threads alone: about N)
        busy = (threads > 0 ? threads : 1) + 0.5
        put("LOAD_WORDS", (load > busy || start > 1.5) ? "on a machine shared with other jobs" : "on a machine with little else running")
    }
    END {
        for (s in tmin) { put(s "_TAU_MIN", sprintf("%.2f", tmin[s])); put(s "_TAU_MAX", sprintf("%.2f", tmax[s])) }
        exit bad
    }' "$2"
}
# the learned pair on 64 held-out prompts, greedy: tau, the round cost in
# 1-token forwards (verify + draft), tau / cost (speedup: PAYS), and wall =
# target-only time / DFlash time
perf_eval_vars() {
    awk -F '\t' '
    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $c["T"] == "0" && $c["method"] == "dflash" {
        b = $c["B"]; k = "EV_B" b
        print k "_TAU", sprintf("%.2f", $c["tau"]); print k "_TAU_SE", sprintf("%.2f", $c["tau_se"])
        print k "_VERIFY", sprintf("%.2f", $c["verify_cost"]); print k "_DRAFT", sprintf("%.2f", $c["draft_cost"])
        print k "_COST", sprintf("%.2f", $c["cost"]); print k "_WALL", sprintf("%.2f", $c["wall_speedup"])
        w = $c["wall_speedup"] + 0
        print k "_CMP", (w >= 1.05 ? "faster than" : w <= 0.95 ? "slower than" : "about as fast as")
        print k "_PAYS", ($c["speedup"] + 0 >= 1 ? "pays for" : "does not pay for")
        print "EV_PROMPTS", $c["prompts"]
    }' toy_weights/learned/eval.tsv
}
# TEMPLATE with @NAME@ replaced from VARS and the line @BENCH@ by TRANSCRIPT
# (its hybrid-target section left out: the page is about the dense pairs; and
# the random set's, which the summary quotes: the page stays short;
# docs/performance/bench.txt holds both); a name with no value fails (naming it)
perf_fill() { # VARS TEMPLATE TRANSCRIPT
    awk -v bench="$3" '
    NR == FNR { v[$1] = substr($0, length($1) + 2); next }
    $0 == "@BENCH@" {
        skip = 0
        while ((getline l < bench) > 0) {
            if (l ~ /^== the hybrid/) { skip = 1; print "(the hybrid target'"'"'s section: docs/performance/bench.txt)"; print "" }
            else if (l ~ /^targets \(ratios/) skip = 0
            if (l ~ /^== DFlash vs target-only decoding: toy_weights\/random /) {
                rskip = 1; print "(the random set'"'"'s section: docs/performance/bench.txt)"; print ""
            } else if (rskip && (l ~ /^== / || l ~ /^\(toy_weights/)) rskip = 0
            if (!skip && !rskip) print l
        }
        close(bench); next
    }
    {
        out = ""; s = $0
        while (match(s, /@[A-Za-z0-9_]+@/)) {
            name = substr(s, RSTART + 1, RLENGTH - 2)
            if (!(name in v) || v[name] == "") {
                print "docs.sh: " FILENAME ":" FNR ": no value for @" name "@ in the transcript" > "/dev/stderr"; bad = 1; exit
            }
            out = out substr(s, 1, RSTART - 1) v[name]; s = substr(s, RSTART + RLENGTH)
        }
        print out s
    }
    END { exit bad }' "$1" "$2"
}
# README.md with the lines between its speed markers replaced by the page's
perf_readme() { # PAGE
    awk -v page="$1" '
    BEGIN {
        while ((getline l < page) > 0) {
            if (l ~ /^<!-- speed: /) on = 1
            if (on) s = s l "\n"
            if (l == "<!-- /speed -->") on = 0
        }
        if (s == "") { print "docs.sh: " page " has no speed block" > "/dev/stderr"; exit 1 }
    }
    /^<!-- speed: / { printf "%s", s; skip = 1; n++; next }
    skip { if ($0 == "<!-- /speed -->") skip = 0; next }
    { print }
    END { if (n != 1 || skip) { print "docs.sh: README.md needs one speed block (<!-- speed: ... --> to <!-- /speed -->)" > "/dev/stderr"; exit 1 } }' README.md
}
# docs/learned.md's speed statement, between its markers `<!-- speed-learned:
# ... -->` and `<!-- /speed-learned -->`: this template, filled as the page
perf_learned_tpl() {
    cat <<'EOF'
<!-- speed-learned: generated by tools/docs.sh write performance -->
On this machine, one thread, at its best block (@LP_BEST_B@) DFlash is
@LP_BEST_CMP@ target-only decoding on the pair, @LP_BEST_X@x, and @LP_VS_BASE@
@BASE_BEST_NAME@ (@BASE_BEST_X@x); over the @EV_PROMPTS@ held-out prompts
@EV_B4_WALL@x / @EV_B8_WALL@x / @EV_B16_WALL@x at block 4 / 8 / 16. A round
at block 8 keeps @LP_DFLASH_B8_TAU@ tokens but costs @DC_B8_VRUN@ 1-token
forwards to verify and @DC_B8_DRAFT@ to draft
([performance](performance.md) decomposes it and says what would close the
gap to 2.0x).
<!-- /speed-learned -->
EOF
}
# FILE with the lines between the markers of BLOCK's first line replaced by BLOCK
perf_block() { # FILE BLOCK
    awk -v blockf="$2" '
    BEGIN {
        while ((getline l < blockf) > 0) { if (s == "") { open = l; sub(/ generated.*/, "", open) } s = s l "\n"; last = l }
    }
    index($0, open) == 1 { printf "%s", s; skip = 1; n++; next }
    skip { if ($0 == last) skip = 0; next }
    { print }
    END { if (n != 1 || skip) { print "docs.sh: " FILENAME " needs one " open " ... block" > "/dev/stderr"; exit 1 } }' "$1"
}
gen_performance() {
    mkdir -p "$1/docs" && perf_vars "$PERF_BENCH" > "$tmp/perf-vars" &&
    perf_fill "$tmp/perf-vars" docs/performance.md.in "$PERF_BENCH" > "$1/docs/performance.md" &&
    perf_readme "$1/docs/performance.md" > "$1/README.md" &&
    perf_learned_tpl > "$tmp/perf-learned.in" &&
    perf_fill "$tmp/perf-vars" "$tmp/perf-learned.in" "$PERF_BENCH" > "$tmp/perf-learned" &&
    perf_block docs/learned.md "$tmp/perf-learned" > "$1/docs/learned.md"
}
# performance's second half: the page keeps no @NAME@; README.md stays within
# 2,500 words and the page within 2,000; and the numbers come from the
# transcript: a copy of it with the walkthrough set's ratios made 0.50x must
# change README's summary to that number and to "slower than"
# the page, README.md and learned.md regenerated into $tmp/perf-bad from
# TRANSCRIPT (inlined and read) and TRANSCRIPT2 (read as T2_): what an
# altered transcript makes of them
perf_bad_pages() { # TRANSCRIPT TRANSCRIPT2
    rm -rf "$tmp/perf-bad" && mkdir -p "$tmp/perf-bad/docs" && perf_vars "$1" "$2" > "$tmp/perf-bad-vars" &&
    perf_fill "$tmp/perf-bad-vars" docs/performance.md.in "$1" > "$tmp/perf-bad/docs/performance.md" &&
    perf_readme "$tmp/perf-bad/docs/performance.md" > "$tmp/perf-bad/README.md" &&
    perf_fill "$tmp/perf-bad-vars" "$tmp/perf-learned.in" "$1" > "$tmp/perf-bad-learned" &&
    perf_block docs/learned.md "$tmp/perf-bad-learned" > "$tmp/perf-bad/docs/learned.md"
}
check_performance() {
    if grep -n '@[A-Za-z0-9_]*@' "$1/docs/performance.md"; then echo "performance-check: a placeholder is left in the page"; return 1; fi
    # the front door and the page stay short (words as wc -w counts them, code blocks included)
    for lim in README.md:2500 docs/performance.md:2000; do
        n=$(wc -w < "$1/${lim%:*}")
        [ "$n" -le "${lim#*:}" ] || { echo "performance-check: ${lim%:*} has $n words, more than ${lim#*:}"; return 1; }
    done
    awk '/^== DFlash vs target-only decoding: / { w = /toy_weights\/walkthrough / }
         w && /^total, [a-z]* runs / { sub(/[0-9.]+x$/, "0.50x") } { print }' "$PERF_BENCH" > "$tmp/perf-bad.txt"
    cmp -s "$PERF_BENCH" "$tmp/perf-bad.txt" && { echo "performance-check: the transcript has no walkthrough totals to alter"; return 1; }
    perf_bad_pages "$tmp/perf-bad.txt" "$PERF_BENCH2" || return 1
    sed -n '/^<!-- speed: /,/^<!-- \/speed -->/p' "$tmp/perf-bad/README.md" > "$tmp/perf-bad-speed"
    grep '0\.50x' "$tmp/perf-bad-speed" | grep -q 'slower than' &&
        ! cmp -s "$tmp/perf-bad/README.md" "$1/README.md" ||
        { echo "performance-check: README's summary did not follow an altered transcript (walkthrough totals 0.50x)"; return 1; }
    # and the learned pair's: DFlash's tau at block 8 made 9.99 must reach README's summary and learned.md
    awk '/^== / { p = /^== the learned pair: / } p && $1 == "dflash" && $2 == "8" { $4 = "9.99" } { print }' \
        "$PERF_BENCH" > "$tmp/perf-bad2.txt"
    cmp -s "$PERF_BENCH" "$tmp/perf-bad2.txt" && { echo "performance-check: the transcript has no learned-pair DFlash row at block 8 to alter"; return 1; }
    perf_bad_pages "$tmp/perf-bad2.txt" "$PERF_BENCH2" || return 1
    sed -n '/^<!-- speed: /,/^<!-- \/speed -->/p' "$tmp/perf-bad/README.md" | grep -q 'keeps 9\.99 tokens' &&
        grep -q 'keeps 9\.99 tokens' "$tmp/perf-bad/docs/learned.md" ||
        { echo "performance-check: README's summary or learned.md did not follow an altered transcript (tau 9.99 at block 8)"; return 1; }
    # and the two-thread run's: its best-block DFlash speedup made 9.99x must reach README's summary
    awk '/^  learned pair, best block each side/ { sub(/DFlash [0-9.]+x/, "DFlash 9.99x") } { print }' \
        "$PERF_BENCH2" > "$tmp/perf-bad3.txt"
    cmp -s "$PERF_BENCH2" "$tmp/perf-bad3.txt" && { echo "performance-check: the two-thread transcript has no best-block line to alter"; return 1; }
    perf_bad_pages "$PERF_BENCH" "$tmp/perf-bad3.txt" || return 1
    sed -n '/^<!-- speed: /,/^<!-- \/speed -->/p' "$tmp/perf-bad/README.md" | grep '^- \*\*Two threads' | grep -q '9\.99x' ||
        { echo "performance-check: README's summary did not follow an altered two-thread transcript (9.99x)"; return 1; }
}

sets() {
    case $1 in
    trace-md) echo trace_md;;
    walkthrough) echo walk;;
    learned) echo learned;;
    hybrid) echo hybrid;;
    explorer) echo explorer;;
    pitfalls) echo pitfalls;;
    training) echo training;;
    performance) echo performance;;
    *) echo "docs.sh: no set '$1' (trace-md, walkthrough, learned, hybrid, explorer, pitfalls, training, performance)" >&2; return 1;;
    esac
}

fail=0
for set in "$@"; do
    parts=$(sets "$set") || exit 2
    out=$tmp/out-$set
    mkdir -p "$out"
    ok=1
    for p in $parts; do gen_$p "$out" || { echo "docs.sh: generating $set ($p) failed"; ok=0; }; done
    files=$(cd "$out" && find . -type f | sed 's|^\./||' | sort)
    if [ $ok = 0 ]; then
        fail=1
    elif [ "$mode" = write ]; then
        for f in $files; do
            mkdir -p "$(dirname "$f")"
            cp "$out/$f" "$f.tmp.$$" && mv "$f.tmp.$$" "$f" || { rm -f "$f.tmp.$$"; fail=1; }
        done
        echo "docs: wrote $(echo $files)"
    else
        bad=0
        for f in $files; do
            if [ ! -e "$f" ]; then
                echo "$set-check: $f is generated but not committed"; bad=1
            elif ! cmp -s "$f" "$out/$f"; then
                diff -u "$f" "$out/$f" | head -n 40
                echo "$set-check: $f differs from a regeneration"; bad=1
            fi
        done
        for p in $parts; do
            command -v figures_$p > /dev/null 2>&1 || continue
            for f in $(figures_$p); do
                [ -e "$out/$f" ] || { echo "$set-check: $f is no longer generated"; bad=1; }
            done
        done
        if [ $set = trace-md ] && [ $bad = 0 ]; then check_trace_names || bad=1; fi
        if [ $set = learned ] && [ $bad = 0 ]; then check_learned_refuses || bad=1; fi
        if [ $set = hybrid ] && [ $bad = 0 ]; then check_hybrid_refuses || bad=1; fi
        if [ $set = performance ] && [ $bad = 0 ]; then check_performance "$out" || bad=1; fi
        if [ $bad = 0 ]; then echo "$set-check: $(echo $files): each equals a fresh regeneration"
        else echo "$set-check: FAILED (make $set regenerates; read the diff, then commit)"; fail=1; fi
    fi
done
exit $fail
