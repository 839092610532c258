#!/bin/sh
# learned/mkexperiments.sh LOGDIR OUTDIR - the learned pair's experiments page and
# its figures from the committed logs of `make learned-experiments`
# (learned/learned.sh experiments, experiment-full, steps-full), the 500-step
# pair's frozen figures and the committed pair's evaluation:
#   OUTDIR/learned.md                    walkthrough/training/learned.md.in with
#                                        its @...@ lines replaced by tables
#   OUTDIR/figures/learned_loss.svg      training loss of every experiment
#                                        (mean of each 10 steps)
#   OUTDIR/figures/learned_acceptance.svg  decoded acceptance per position at
#                                        block 16 of every experiment
#   OUTDIR/figures/learned_blocks.svg    decoded tau against the block size at
#                                        inference, drafts trained at 4, 8, 16
#   OUTDIR/figures/learned_temperature.svg  the committed pair's acceptance per
#                                        position at block 16, T = 0, 0.7, 1
# Every number comes from LOGDIR/NAME.log (dflash train --log),
# LOGDIR/NAME.eval.tsv (dflash eval --log), toy_weights/learned/eval.tsv and
# draft-train.log (the committed pair: run "pair") and LOGDIR/pair500.eval.tsv,
# pair500.log, pair500.prompts.tsv (run "pair500": the committed recipe at 500
# steps, the draft committed before the 1500-step one, its figures frozen
# there: every -full row is trained at 500 steps and compared with it);
# tools/docs.sh's "training" set regenerates them and make docs-check fails
# when a committed file differs.
set -eu
root=$(dirname "$0")/..   # tools/runsummary.awk, explorer/svg.awk, learned/paired.awk
export LC_ALL=C
logs=${1:?usage: learned/mkexperiments.sh LOGDIR OUTDIR}
out=${2:?usage: learned/mkexperiments.sh LOGDIR OUTDIR}
tmpl=walkthrough/training/learned.md.in
pair=toy_weights/learned/eval.tsv
pair_log=toy_weights/learned/draft-train.log
# experiment-full rows (learned/learned.sh experiment-full NAME) and the
# committed recipe at other step counts (steps-full N): shown when their logs
# are there
FULL="no-injection-full causal-full layers1-full gamma0-full gamma4-full train4-full train8-full sliding-full steps1500-full"
# the 500-step pair's decoding prompt by prompt (learned/learned.sh pitfall-full
# clean's, frozen): a -full row with its own NAME.prompts.tsv is compared with
# it paired by prompt
PAIR_PROMPTS=${PAIR_PROMPTS:-$logs/pair500.prompts.tsv}
NAMES="base no-injection layers1 causal train4 train8 gamma0 gamma4 sliding sliding-imposed pair500 $FULL"
[ -f "$logs/base.log" ] && [ -f "$logs/base.eval.tsv" ] ||
    { echo "mkexperiments.sh: $logs/base.log or base.eval.tsv missing (make learned-experiments)" >&2; exit 2; }
[ -f "$pair" ] && [ -f "$pair_log" ] || { echo "mkexperiments.sh: $pair or $pair_log missing (make learned-draft eval-learned)" >&2; exit 2; }
[ -f "$logs/pair500.log" ] && [ -f "$logs/pair500.eval.tsv" ] ||
    { echo "mkexperiments.sh: $logs/pair500.log or pair500.eval.tsv missing (the 500-step pair's frozen figures)" >&2; exit 2; }
mkdir -p "$out/figures"

# one summary: per run "run NAME setup... final_loss L first_loss F eval ..."
# (the trainer's held-out line), "loss NAME step value", and every eval row
# "dec NAME T B tau se acceptance acceptance_se" (tab-separated fields of
# dflash eval --log, by their header's names); the pair's rows as run "pair"
sum=$out/learned-summary.txt
: > "$sum"
summarise() {  # $1 name, $2 training log
    awk -v name="$1" -v losses="$(case $1 in pair|pair500) echo 0;; esac)" -f "$root/tools/runsummary.awk" "$2" >> "$sum"
}
for n in $NAMES; do
    [ -f "$logs/$n.log" ] && [ -f "$logs/$n.eval.tsv" ] || continue
    summarise "$n" "$logs/$n.log"
    awk -F '\t' -v name="$n" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { printf "dec %s %s %s %s %s %s %s %s %s %s\n", name, $col["T"], $col["B"], $col["tau"], $col["tau_se"], $col["rounds"],
                 $col["acceptance"], $col["acceptance_se"], $col["prompts"], $col["lossless_fail"] }' "$logs/$n.eval.tsv" >> "$sum"
done
# "paired NAME B tau d se lower higher n": a -full row against the 500-step
# pair, paired by prompt (learned/paired.awk), when both per-prompt files are
# there; the pair's tau from them must be pair500.eval.tsv's
for n in $FULL; do
    [ -f "$logs/$n.prompts.tsv" ] && [ -f "$logs/$n.eval.tsv" ] && [ -f "$PAIR_PROMPTS" ] || continue
    for B in 8 16; do
        p=$(awk -F '\t' -v B=$B -f "$root/learned/paired.awk" "$logs/$n.prompts.tsv" "$PAIR_PROMPTS") ||
            { echo "mkexperiments.sh: $n.prompts.tsv and $PAIR_PROMPTS are not the same prompts at block $B" >&2; exit 1; }
        set -- $p
        want=$(awk -F '\t' -v B=$B 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
            $c["T"] == 0 && $c["method"] == "dflash" && $c["B"] == B { printf "%.4f", $c["tau"] }' "$logs/pair500.eval.tsv")
        [ "$(awk -v a="$1" -v d="$2" 'BEGIN { printf "%.4f", a - d }')" = "$want" ] ||
            { echo "mkexperiments.sh: $PAIR_PROMPTS does not sum to $logs/pair500.eval.tsv's tau at block $B" >&2; exit 1; }
        echo "paired $n $B $p" >> "$sum"
    done
done
summarise pair "$pair_log"
awk -F '\t' 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["method"] == "dflash" { printf "dec pair %s %s %s %s %s %s %s %s %s\n", $col["T"], $col["B"], $col["tau"], $col["tau_se"], $col["rounds"],
                                 $col["acceptance"], $col["acceptance_se"], $col["prompts"], $col["lossless_fail"] }' "$pair" >> "$sum"
# a run of the committed draft's steps is the committed draft (the same
# recipe, data and seed: the same bits, whatever the threads), so its greedy
# decoding must be the committed pair's, row for row (pair500 before the
# 1500-step draft was committed, steps1500-full after), while the committed
# draft is F32 as the experiments' are; written in BF16 (learned.sh draft,
# --dtype bf16) it is that draft rounded, which decodes a little otherwise
steps_of() { sed -n 's/^setup steps \([0-9]*\) .*/\1/p' "$1"; }
psteps=$(steps_of "$pair_log")
[ -n "$psteps" ] || { echo "mkexperiments.sh: $pair_log has no setup line" >&2; exit 1; }
pair_f32=$(grep -c '"dtype": "float32"' toy_weights/learned/draft/config.json || :)
for n in pair500 $FULL; do
    [ "$pair_f32" = 1 ] || continue
    [ -f "$logs/$n.log" ] && [ -f "$logs/$n.eval.tsv" ] && [ "$(steps_of "$logs/$n.log")" = "$psteps" ] || continue
    case $n in pair500|steps*-full) ;; *) continue;; esac
    rows() { awk -v n="$1" '$1 == "dec" && $2 == n && $3 == 0 && ($4 == 8 || $4 == 16) { printf "%s %.4f %s %s\n", $4, $5, $7, $10 }' "$sum"; }
    [ -n "$(rows "$n")" ] && [ "$(rows "$n")" = "$(rows pair)" ] ||
        { echo "mkexperiments.sh: $logs/$n has the committed draft's $psteps steps but decodes otherwise than $pair at T 0, blocks 8 and 16" >&2; exit 1; }
done

# ---- the page -------------------------------------------------------------
awk -v tmpl="$tmpl" -v full="$FULL" -v psteps="$psteps" -v xsteps="$(steps_of "$logs/pair500.log")" -v pair_f32="$pair_f32" '
function field(line, key,    i, n, f) {
    n = split(line, f, " ")
    for (i = 1; i < n; i++) if (f[i] == key) return f[i + 1]
    return ""
}
function accs(list, k,    n, a, i, s) {   # the first k of "0.5,0.3,..." as "0.50 / 0.30"
    n = split(list, a, ","); s = ""
    for (i = 1; i <= n && i <= k; i++) s = s (s == "" ? "" : " / ") sprintf("%.2f", a[i])
    return s
}
function tau(name, B,    d) {
    d = dec[name, 0, B]
    if (d == "") return run[name] == "" ? "not run" : "-"
    split(d, f, " ")
    return sprintf("%.2f &plusmn; %.2f", f[5], f[6])
}
function ref(name) { return name ~ /-full$/ ? "pair500" : "base" }   # a -full row against the 500-step pair
function verdict(name, B,    d, b, x, y, D, se, how) {   # against its reference at block B
    d = dec[name, 0, B]; b = dec[ref(name), 0, B]
    if (d == "" || b == "" || name == "base" || name == "pair" || name == "pair500") return "-"
    split(d, x, " "); split(b, y, " ")
    D = x[5] - y[5]; se = sqrt(x[6] * x[6] + y[6] * y[6]); how = "se"
    if ((name, B) in paired) { split(paired[name, B], x, " "); D = x[5]; se = x[6]; how = "paired se" }
    return sprintf("%+.2f (%s 2 %s)", D, (D > 2 * se || D < -2 * se) ? "beyond" : "within", how)
}
function first(list,    a) { split(list, a, ","); return a[1] }
function acc1(name, B,    d, f) {   # acceptance at position 1 +- its se
    d = dec[name, 0, B]
    if (d == "") return "-"
    split(d, f, " ")
    return sprintf("%.3f &plusmn; %.3f", first(f[8]), first(f[9]))
}
function verdict1(name, B,    d, b, x, y, D, se) {   # position 1 against its reference at block B
    d = dec[name, 0, B]; b = dec[ref(name), 0, B]
    if (d == "" || b == "" || name == "base" || name == "pair" || name == "pair500") return "-"
    split(d, x, " "); split(b, y, " ")
    D = first(x[8]) - first(y[8]); se = sqrt(first(x[9]) ^ 2 + first(y[9]) ^ 2)
    return sprintf("%+.3f (%s)", D, (D > 2 * se || D < -2 * se) ? "beyond 2 se" : "within 2 se")
}
function row(name, what,    r) {
    r = run[name]
    if (r == "") return sprintf("| %s | %s | not run | | | | | | | |", name, what)
    return sprintf("| %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %s |", name, what,
                   field(r, "steps") + 0 == 0 ? "- (no step)" : sprintf("%.3f", field(r, "final_loss")), field(r, "tau"),
                   tau(name, 8), tau(name, 16), verdict(name, 16), acc1(name, 16), verdict1(name, 16), accs(acc[name, 0, 16], 4))
}
FILENAME != tmpl && /^run / { run[$2] = $0 }
FILENAME != tmpl && /^paired / { paired[$2, $3] = $0 }
FILENAME != tmpl && /^dec / { dec[$2, $3, $4] = $0; acc[$2, $3, $4] = $8; if ($2 != "pair" && $2 != "pair500") fails += $11
                              if ($2 == "base" && $3 == 0 && $4 == 16) { rounds16 = $7; prompts16 = $10 } }
FILENAME == tmpl {
    if ($0 == "@SETUP@") {
        r = run["base"]
        print "| steps | batch | sequence length | block | peak lr | warm-up | schedule | anchors | gamma | training sequences | seed |"
        print "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", field(r, "steps"), field(r, "batch"),
               field(r, "seq_len"), field(r, "block"), field(r, "lr"), field(r, "warmup"), field(r, "schedule"),
               field(r, "anchors"), field(r, "gamma"), field(r, "sequences"), field(r, "seed")
    } else if ($0 == "@TABLE@") {
        print "| run | what differs from the base recipe | loss, last 10 steps | teacher-forced tau | decoded tau, block 8 | decoded tau, block 16 | tau at 16 minus base (a -full row: minus pair500) | block 16: acceptance at position 1 | position 1 minus base (-full: pair500) | block 16: acceptance at positions 1-4 |"
        print "|---|---|---:|---:|---:|---:|---|---:|---|---|"
        print row("base", "nothing: block-bidirectional, trained at block 16, gamma 7, target layers 1, 4, 6")
        print row("pair", "the committed draft: the base row trained for " psteps " steps (64 prompts)" \
                  (pair_f32 == 1 ? "" : ", written in BF16"))
        print row("pair500", "the 500-step pair: the committed draft'\''s recipe stopped at " xsteps " steps (64 prompts)" \
                  (xsteps == psteps ? ", the committed draft itself" : "") "; every -full row is compared with it")
        print row("no-injection", "no KV injection: the block sees no context key, trained and decoded so (`variants/no-injection-train.diff`, `variants/no-injection-run.diff`)")
        print row("layers1", "one target layer (4) instead of three")
        print row("causal", "`--block-attention causal`, decoded causal too (the inference pitfall `draft-causal.diff`)")
        print row("train4", "`--block-size 4` (trained at block 4)")
        print row("train8", "`--block-size 8`")
        print row("gamma0", "`--gamma 0` (no decay)")
        print row("gamma4", "`--gamma 4`")
        print row("sliding", "both draft layers `sliding_attention`, window 16, trained with SpecForge'\''s window mask")
        print row("sliding-imposed", "base'\''s weights run under the sliding config: the window imposed only at inference")
        n = split(full, X, " ")
        for (i = 1; i <= n; i++) if (run[X[i]] != "") {
            b = X[i]; sub(/-full$/, "", b)
            if (b ~ /^steps[0-9]+$/)
                print row(X[i], "the committed draft'\''s recipe at " field(run[X[i]], "steps") " steps instead of " xsteps " (64 prompts)" \
                          (field(run[X[i]], "steps") == psteps ? ", the committed draft'\''s run (the same decoding, checked)" : "") ": against pair500")
            else
                print row(X[i], b " at the committed draft'\''s recipe (" field(run[X[i]], "steps") " steps, 64 prompts): against pair500")
        }
    } else if ($0 == "@BLOCKS@") {
        print "| trained at | decoded at block 2 | block 4 | block 8 | block 16 |"
        print "|---:|---:|---:|---:|---:|"
        printf "| 4 (train4) | %s | %s | %s | %s |\n", tau("train4", 2), tau("train4", 4), tau("train4", 8), tau("train4", 16)
        printf "| 8 (train8) | %s | %s | %s | %s |\n", tau("train8", 2), tau("train8", 4), tau("train8", 8), tau("train8", 16)
        printf "| 16 (base) | %s | %s | %s | %s |\n", tau("base", 2), tau("base", 4), tau("base", 8), tau("base", 16)
    } else if ($0 == "@STEPS@") {
        print "| run | steps | prompts decoded | loss, last 10 steps | teacher-forced tau | decoded tau, block 8 | decoded tau, block 16 | block 16: acceptance at position 1 |"
        print "|---|---:|---:|---:|---:|---:|---:|---:|"
        n = split("base pair500 pair", X, " ")
        m = split(full, Y, " ")
        for (i = 1; i <= m; i++) if (Y[i] ~ /^steps[0-9]+-full$/ && run[Y[i]] != "") X[++n] = Y[i]
        for (i = 1; i <= n; i++) {
            r = run[X[i]]; d = dec[X[i], 0, 16]
            if (r == "" || d == "") { printf "| %s | | | not run | | | | |\n", X[i]; continue }
            split(d, f, " ")
            printf "| %s | %s | %s | %.3f | %.2f | %s | %s | %s |\n", X[i], field(r, "steps"), f[10], field(r, "final_loss"), field(r, "tau"),
                   tau(X[i], 8), tau(X[i], 16), acc1(X[i], 16)
        }
    } else if ($0 == "@TEMPS@") {
        print "| temperature | decoded tau, block 4 | block 8 | block 16 | block 16: acceptance at positions 1-4 |"
        print "|---:|---:|---:|---:|---|"
        n = split("0 0.7 1", T, " ")
        for (i = 1; i <= n; i++) {
            printf "| %s |", T[i]
            for (b = 4; b <= 16; b *= 2) { d = dec["pair", T[i], b]; split(d, f, " "); printf " %s |", d == "" ? "-" : sprintf("%.2f &plusmn; %.2f", f[5], f[6]) }
            printf " %s |\n", accs(acc["pair", T[i], 16], 4)
        }
    } else if ($0 == "@ROUNDS@") {
        printf "Every row decodes the same %d held-out prompts; the base draft took %d rounds at block 16. Lossless failures\n", prompts16, rounds16
        printf "(greedy DFlash output different from target-only output) over all the experiments\047 runs: %d.\n", fails
    } else if ($0 == "@FINDINGS@") {
        beyond = ""; within = ""
        n = split("no-injection layers1 causal train4 train8 gamma0 gamma4 sliding sliding-imposed " full, X, " ")
        for (i = 1; i <= n; i++) {
            v = verdict(X[i], 16); if (v == "-") continue
            item = sprintf("%s (%s)", X[i], substr(v, 1, index(v, " ") - 1))
            if (v ~ /beyond/) beyond = beyond (beyond == "" ? "" : ", ") item; else within = within (within == "" ? "" : ", ") item
        }
        printf "**Against the base row at block 16** (a -full row: against the 500-step pair), decoded tau beyond twice the standard error of the difference: %s. Within it: %s.\n", beyond == "" ? "none" : beyond, within == "" ? "none" : within
        beyond = ""; within = ""
        for (i = 1; i <= n; i++) {
            v = verdict1(X[i], 16); if (v == "-") continue
            item = sprintf("%s (%s)", X[i], substr(v, 1, index(v, " ") - 1))
            if (v ~ /beyond/) beyond = beyond (beyond == "" ? "" : ", ") item; else within = within (within == "" ? "" : ", ") item
        }
        printf "\n**Acceptance at position 1** (block 16), beyond twice the standard error of the difference: %s. Within it: %s.\n", beyond == "" ? "none" : beyond, within == "" ? "none" : within
    } else {
        # in the prose: @PAIR_STEPS@ the committed draft'\''s steps, @FULL_STEPS@ the 500-step pair'\''s
        gsub(/@PAIR_STEPS@/, psteps); gsub(/@FULL_STEPS@/, xsteps)
        if ($0 ~ /@[A-Z_]+@/) { print "mkexperiments.sh: " tmpl ": an unknown @...@ in: " $0 > "/dev/stderr"; exit 1 }
        print
    }
}' "$sum" "$tmpl" > "$out/learned.md"

# ---- the figures (explorer/figures.c's style: sans-serif, plain shapes) -----------
awk -v out="$out/figures" "$(cat "$root/explorer/svg.awk")"'

BEGIN {
    n = split("base no-injection layers1 causal gamma0 gamma4 sliding sliding-imposed", N, " ")
    split("#2171b5 #cb181d #6a51a3 #238b45 #d94801 #737373 #e7298a #66a61e", C, " ")
}
/^loss / { L[$2, $3] = $4; for (i = 1; i <= n; i++) if (N[i] == $2 && $3 > S) S = $3 }   # the step range of the curves drawn
/^run / { line[$2] = $0 }
/^dec / { A[$2, $3, $4] = $8; TAU[$2, $3, $4] = $5; SE[$2, $3, $4] = $6 }
function curve(f, x0, y0, pw, ph, list, k, ymax, color,    a, j, X, Y, pts) {   # acceptance per position 1..k
    split(list, a, ","); pts = ""
    for (j = 1; j <= k; j++) {
        X = x0 + (j - 1) / (k - 1) * pw; Y = y0 + ph - a[j] / ymax * ph
        pts = pts sprintf("%.1f,%.1f ", X, Y)
        printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X, Y, color > f
    }
    printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts, color > f
}
END {
    # 1. loss: the mean of each 10 steps (sliding-imposed has no step)
    f = out "/learned_loss.svg"; x0 = 60; y0 = 50; pw = 560; ph = 300
    ymax = 0
    for (i = 1; i <= n; i++) if (line[N[i]] != "") for (s = 1; s <= S; s += 10) {
        m = 0; c = 0; for (t = s; t < s + 10 && t <= S; t++) if ((N[i], t) in L) { m += L[N[i], t]; c++ }
        M[i, s] = c ? m / c : -1; if (M[i, s] > ymax) ymax = M[i, s]
    }
    ymax = int(ymax / 5 + 0.999) * 5
    head(f, 800, 400, "Training loss of the experiments (mean of each 10 steps)")
    axes(f, x0, y0, pw, ph, 0, S, 0, ymax, S >= 100 ? 20 : 10, 5, "step", "weighted cross-entropy (nats)")
    k = 0
    for (i = 1; i <= n; i++) {
        if (line[N[i]] == "" || M[i, 1] < 0) continue
        pts = ""
        for (s = 1; s <= S; s += 10) {
            mid = s + 4.5; if (mid > S) mid = S
            pts = pts sprintf("%.1f,%.1f ", x0 + mid / S * pw, y0 + ph - M[i, s] / ymax * ph)
        }
        printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts, C[i] > f
        legend(f, x0 + pw + 20, y0 + 10 + 20 * ++k, C[i], N[i])
    }
    print "</svg>" > f; close(f)

    # 2. decoded acceptance per position at block 16 (greedy)
    f = out "/learned_acceptance.svg"; x0 = 60; y0 = 50; pw = 520; ph = 300
    head(f, 800, 410, "Decoded acceptance per position at block 16 (greedy, held-out prompts)")
    axes(f, x0, y0, pw, ph, 1, 15, 0, 0.8, 1, 0.1, "proposal position i in the block", "fraction of rounds that accepted proposal i")
    k = 0
    for (i = 1; i <= n; i++) {
        if (A[N[i], 0, 16] == "") continue
        curve(f, x0, y0, pw, ph, A[N[i], 0, 16], 15, 0.8, C[i])
        legend(f, x0 + pw + 20, y0 + 10 + 20 * ++k, C[i], N[i])
    }
    print "</svg>" > f; close(f)

    # 3. decoded tau against the block size at inference, by the block trained at
    f = out "/learned_blocks.svg"; x0 = 60; y0 = 50; pw = 420; ph = 280
    split("train4 train8 base", R, " "); split("trained at 4;trained at 8;trained at 16 (base)", RL, ";")
    split("#d94801 #6a51a3 #2171b5", RC, " ")
    ymax = 1
    for (i = 1; i <= 3; i++) for (b = 2; b <= 16; b *= 2) if (TAU[R[i], 0, b] + 0 > ymax) ymax = TAU[R[i], 0, b] + 0
    ymax = int(ymax * 2 + 1.999) / 2
    head(f, 720, 390, "Decoded tau against the block size at inference")
    axes(f, x0, y0, pw, ph, 0, 3, 0, ymax, 0, 0.5, "block size at inference", "tau (tokens per round), with 2 se")
    for (j = 0; j < 4; j++) printf "<text x=\"%.1f\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555555\">%d</text>\n", x0 + j / 3 * pw, y0 + ph + 16, 2 * 2 ^ j > f
    for (i = 1; i <= 3; i++) {
        pts = ""
        for (j = 0; j < 4; j++) {
            b = 2 * 2 ^ j; if (TAU[R[i], 0, b] == "") continue
            X = x0 + j / 3 * pw; Y = y0 + ph - TAU[R[i], 0, b] / ymax * ph; E = 2 * SE[R[i], 0, b] / ymax * ph
            pts = pts sprintf("%.1f,%.1f ", X, Y)
            printf "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1\"/>\n", X, Y - E, X, Y + E, RC[i] > f
            printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X, Y, RC[i] > f
        }
        if (pts != "") printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts, RC[i] > f
        legend(f, x0 + pw + 20, y0 + 10 + 20 * i, RC[i], RL[i])
    }
    print "</svg>" > f; close(f)

    # 4. the committed pair at block 16 by temperature
    f = out "/learned_temperature.svg"; x0 = 60; y0 = 50; pw = 520; ph = 300
    split("0 0.7 1", T, " "); split("#2171b5 #d94801 #cb181d", TC, " ")
    head(f, 800, 410, "The committed pair: acceptance per position at block 16 by temperature")
    axes(f, x0, y0, pw, ph, 1, 15, 0, 0.8, 1, 0.1, "proposal position i in the block", "fraction of rounds that accepted proposal i")
    for (i = 1; i <= 3; i++) {
        if (A["pair", T[i], 16] == "") continue
        curve(f, x0, y0, pw, ph, A["pair", T[i], 16], 15, 0.8, TC[i])
        legend(f, x0 + pw + 20, y0 + 10 + 20 * i, TC[i], "T = " T[i])
    }
    print "</svg>" > f; close(f)
}' "$sum"
rm -f "$sum"
