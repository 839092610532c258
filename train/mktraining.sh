#!/bin/sh
# train/mktraining.sh LOGDIR OUTDIR - the training page and its figures from
# the committed run logs of `make train-experiments` (train/train.sh):
#   OUTDIR/README.md                   walkthrough/training/README.md.in with
#                                      its @...@ lines replaced by tables
#   OUTDIR/figures/training_loss.svg   loss per step of every run (mean of
#                                      each 10 steps)
#   OUTDIR/figures/training_acceptance.svg   held-out acceptance per position
#                                      (teacher-forced) of every run
#   OUTDIR/figures/training_blocks.svg decoded tau at block 2, 4, 8 of the
#                                      drafts trained at 4 and at 8
# Every number comes from LOGDIR/NAME.log (dflash train --log) and
# LOGDIR/NAME.decode (train/train_decode.sh); tools/docs.sh's "training" set
# regenerates them and make docs-check fails when a committed file differs.
set -eu
root=$(dirname "$0")/..   # tools/runsummary.awk, explorer/svg.awk, learned/paired.awk
export LC_ALL=C
logs=${1:?usage: train/mktraining.sh LOGDIR OUTDIR}
out=${2:?usage: train/mktraining.sh LOGDIR OUTDIR}
tmpl=walkthrough/training/README.md.in
# base (make train's run) must be there; an experiment without its two
# files is shown as not run
names=
for n in untrained base causal block8 gamma0 gamma4 layers1; do
    if [ -f "$logs/$n.log" ] && [ -f "$logs/$n.decode" ]; then names="$names $n"
    elif [ $n = base ]; then echo "mktraining.sh: $logs/base.log or base.decode missing (make train train-experiments)" >&2; exit 2
    fi
done
mkdir -p "$out/figures"

# one summary line per run: name, setup fields, final loss (mean of the last
# 10 steps), held-out eval, decode lines; then the step losses
summary() {
    for n in $names; do
        awk -v name="$n" -v acc=1 -f "$root/tools/runsummary.awk" "$logs/$n.log"
        sed "s/^decode /decode $n /" "$logs/$n.decode"
    done
}
summary > "$out/summary.txt"

# the held-out sequences of the recipe's log: how often a token repeats the
# one before it or the one two before (loops), and the teacher-forced tau of
# a draft that would only propose the anchor again (B-1 copies), counted at
# the same anchors as --heldout (positions p >= the prompt with p + B <= n)
awk -v B=4 '
/^setup / { for (i = 2; i < NF; i++) if ($i == "block") B = $(i + 1) }
/^heldout / {
    n = 0; P = -1
    for (i = 2; i <= NF; i++) { if ($i == "|") { P = n; continue } s[n++] = $i }
    for (t = P; t < n; t++) {
        if (t >= 1) { tok++; rep1 += s[t] == s[t - 1]; rep2 += t >= 2 && s[t] == s[t - 2] && s[t] != s[t - 1] }
    }
    for (p = P; p + B <= n; p++) {
        L = 0; for (k = 1; k < B && s[p + k] == s[p]; k++) L++
        blocks++; sumL += L
    }
}
END {
    printf "data heldout_tokens %d repeat1 %.4f repeat2 %.4f copy_tau %.4f copy_blocks %d\n", tok, rep1 / tok, rep2 / tok,
           1 + sumL / blocks, blocks
}' "$logs/base.log" >> "$out/summary.txt"

# ---- the tables ---------------------------------------------------------
awk -v tmpl="$tmpl" '
function field(line, key,    i, n, f) {
    n = split(line, f, " ")
    for (i = 1; i < n; i++) if (f[i] == key) return f[i + 1]
    return ""
}
function accs(line, key,    i, n, f, s, on) {   # the numbers after key, "0.12 / 0.05 / ..."
    n = split(line, f, " "); s = ""; on = 0
    for (i = 1; i <= n; i++) {
        if (on) s = s (s == "" ? "" : " / ") sprintf("%.2f", f[i])
        if (f[i] == key) on = 1
    }
    return s
}
function evalrow(name, what,    r) {
    r = run[name]
    if (r == "") return sprintf("| %s | %s | not run | | | |", name, what)
    return sprintf("| %s | %s | %.3f | %.3f | %.2f | %s |", name, what, field(r, "first_loss"), field(r, "final_loss"),
                   field(r, "tau"), accs(r, "acceptance_per_position"))
}
function decrow(name, K,    d) {
    d = dec[name, K]
    if (d == "") return run[name] == "" ? "not run" : "-"
    return sprintf("%.2f (%s)", field(d, "tau"), accs(d, "acceptance_per_position"))
}
FILENAME != tmpl && /^run / { run[$2] = $0 }
FILENAME != tmpl && /^decode / { dec[$2, $4] = $0 }
FILENAME != tmpl && /^data / { data = $0 }
FILENAME == tmpl {
    if ($0 == "@SETUP@") {
        r = run["base"]
        printf "| steps | batch | sequence length | block | peak lr | warm-up | schedule | gamma | training sequences | held-out sequences | held-out blocks |\n"
        printf "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n"
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", field(r, "steps"), field(r, "batch"),
               field(r, "seq_len"), field(r, "block"), field(r, "lr"), field(r, "warmup"), field(r, "schedule"),
               field(r, "gamma"), field(r, "sequences"), field(r, "eval") == "" ? "" : field(r, "sequences") == "" ? "" : field(substr(r, index(r, " eval ")), "sequences"), field(r, "blocks")
    } else if ($0 == "@DATA@") {
        printf "Of the %d tokens of the held-out continuations, %.0f%% repeat the token before them and %.0f%% the token\n", field(data, "heldout_tokens"), 100 * field(data, "repeat1"), 100 * field(data, "repeat2")
        printf "two before (but not the one before: a loop of period 2); the rest follow no such rule. A draft that only\n"
        printf "proposed the anchor again would reach a teacher-forced tau of %.2f on the same %d blocks.\n", field(data, "copy_tau"), field(data, "copy_blocks")
    } else if ($0 == "@TRAINED@") {
        print "| draft | trained at block | held-out tau, teacher-forced | decoded tau at block 2 | at block 4 | at block 8 |"
        print "|---|---:|---:|---|---|---|"
        r = run["base"]
        if (run["untrained"] == "") print "| untrained (the new draft of the recipe, before step 1) | 4 | not run | | | |"
        else printf "| untrained (the new draft of the recipe, before step 1) | %s | %.2f | %s | %s | %s |\n", field(run["untrained"], "block"),
                    field(run["untrained"], "tau"), decrow("untrained", 2), decrow("untrained", 4), decrow("untrained", 8)
        printf "| trained (`make train`) | %s | %.2f | %s | %s | %s |\n", field(r, "block"), field(r, "tau"),
               decrow("base", 2), decrow("base", 4), decrow("base", 8)
    } else if ($0 == "@EVAL@") {
        print "| run | what differs from the recipe | loss, step 1 | loss, last 10 steps | held-out tau (teacher-forced) | held-out acceptance per position |"
        print "|---|---|---:|---:|---:|---|"
        print evalrow("base", "nothing (block-bidirectional, block 4, gamma 7, target layers 3,7,11)")
        print evalrow("causal", "`--block-attention causal`")
        print evalrow("block8", "`--block-size 8`")
        print evalrow("gamma0", "`--gamma 0` (no decay)")
        print evalrow("gamma4", "`--gamma 4`")
        print evalrow("layers1", "target layer 11 only")
    } else if ($0 == "@BLOCKS@") {
        print "| trained at | decoded at block 2 | at block 4 | at block 8 |"
        print "|---:|---|---|---|"
        printf "| 4 | %s | %s | %s |\n", decrow("base", 2), decrow("base", 4), decrow("base", 8)
        printf "| 8 | %s | %s | %s |\n", decrow("block8", 2), decrow("block8", 4), decrow("block8", 8)
    } else if ($0 == "@DECODE4@") {
        print "| run | decoded tau at block 4 (acceptance per position) |"
        print "|---|---|"
        n = split("base gamma0 gamma4 layers1", L, " ")
        for (i = 1; i <= n; i++) printf "| %s | %s |\n", L[i], decrow(L[i], 4)
    } else print
}' "$out/summary.txt" "$tmpl" > "$out/README.md"

# ---- the figures (explorer/figures.c's style: sans-serif, plain shapes) -----------
awk -v out="$out/figures" "$(cat "$root/explorer/svg.awk")"'

BEGIN {
    split("base causal block8 gamma0 gamma4 layers1", N, " ")
    split("#2171b5 #cb181d #6a51a3 #238b45 #d94801 #737373", C, " ")
}
/^loss / { L[$2, $3] = $4; if ($3 > S) S = $3 }
/^run / { line[$2] = $0 }
/^decode / { dt[$2, $4] = $0 }
function field(s, key,    i, n, f) { n = split(s, f, " "); for (i = 1; i < n; i++) if (f[i] == key) return f[i + 1]; return "" }
function after(s, key, a,    i, n, f, k, on) {
    n = split(s, f, " "); k = 0; on = 0
    for (i = 1; i <= n; i++) { if (on) a[++k] = f[i]; if (f[i] == key) on = 1 }
    return k
}
END {
    # 1. loss: the mean of each 10 steps
    f = out "/training_loss.svg"; x0 = 60; y0 = 50; pw = 560; ph = 300
    ymax = 0
    for (i = 1; i <= 6; i++) if (line[N[i]] != "") for (s = 1; s <= S; s += 10) {
        m = 0; c = 0; for (t = s; t < s + 10 && t <= S; t++) { m += L[N[i], t]; c++ }
        M[i, s] = m / c; if (M[i, s] > ymax) ymax = M[i, s]
    }
    ymax = int(ymax + 1.999)
    head(f, 760, 400, "Training loss per step (mean of each 10 steps)")
    axes(f, x0, y0, pw, ph, 0, S, 0, ymax, S >= 100 ? 25 : 10, ymax > 8 ? 2 : 1, "step", "weighted cross-entropy")
    for (i = 1; i <= 6; i++) {
        if (line[N[i]] == "") continue
        pts = ""
        for (s = 1; s <= S; s += 10) {
            mid = s + 4.5; if (mid > S) mid = S
            pts = pts sprintf("%.1f,%.1f ", x0 + mid / S * pw, y0 + ph - M[i, s] / ymax * ph)
        }
        printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts, C[i] > f
        legend(f, x0 + pw + 20, y0 + 10 + 20 * i, C[i], N[i])
    }
    print "</svg>" > f; close(f)

    # 2. held-out acceptance per position (teacher-forced)
    f = out "/training_acceptance.svg"; x0 = 60; y0 = 50; pw = 480; ph = 280
    head(f, 680, 390, "Held-out acceptance per position (teacher-forced, every anchor)")
    axes(f, x0, y0, pw, ph, 1, 7, 0, 1, 1, 0.2, "proposal position i in the block", "fraction of blocks with proposals 1..i all accepted")
    for (i = 1; i <= 6; i++) {
        if (line[N[i]] == "") continue
        k = after(line[N[i]], "acceptance_per_position", A)
        pts = ""
        for (j = 1; j <= k; j++) {
            X = x0 + (j - 1) / 6 * pw; Y = y0 + ph - A[j] * ph
            pts = pts sprintf("%.1f,%.1f ", X, Y)
            printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X, Y, C[i] > f
        }
        printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts, C[i] > f
        legend(f, x0 + pw + 20, y0 + 10 + 20 * i, C[i], N[i])
    }
    print "</svg>" > f; close(f)

    # 3. decoded tau against the block size at inference
    f = out "/training_blocks.svg"; x0 = 60; y0 = 50; pw = 360; ph = 260
    ymax = 1
    for (i = 1; i <= 3; i++) for (b = 2; b <= 8; b *= 2) {
        r = (i == 1 ? "base" : "block8"); v = field(dt[r, b], "tau"); if (v + 0 > ymax) ymax = v + 0
    }
    ymax = int(ymax * 2 + 1.999) / 2
    head(f, 600, 370, "Decoded tau on the held-out prompts against the block size at inference")
    axes(f, x0, y0, pw, ph, 0, 3, 0, ymax, 0, 0.5, "block size at inference (2, 4, 8)", "tau (tokens per round)")
    for (i = 1; i <= 2; i++) {
        r = (i == 1 ? "base" : "block8"); ci = (i == 1 ? 1 : 3)
        if (line[r] == "") continue
        for (j = 0; j < 3; j++) {
            b = 2 * 2 ^ j; v = field(dt[r, b], "tau") + 0
            X = x0 + (j + 0.5) / 3 * pw + (i == 1 ? -22 : 2); H = v / ymax * ph
            printf "<rect x=\"%.1f\" y=\"%.1f\" width=\"20\" height=\"%.1f\" fill=\"%s\"/>\n", X, y0 + ph - H, H, C[ci] > f
            printf "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"10\" text-anchor=\"middle\" fill=\"#222222\">%.2f</text>\n", X + 10, y0 + ph - H - 4, v > f
            if (i == 1) printf "<text x=\"%.1f\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555555\">%d</text>\n", X + 22, y0 + ph + 16, b > f
        }
        printf "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", x0 + pw + 20, y0 + 20 * i, C[ci] > f
        printf "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">trained at %d</text>\n", x0 + pw + 40, y0 + 12 + 20 * i, i == 1 ? 4 : 8 > f
    }
    print "</svg>" > f; close(f)
}' "$out/summary.txt"
rm -f "$out/summary.txt"
