#!/bin/sh
# walkthrough/mktrainpitfalls.sh OUT.md - writes walkthrough/train-pitfalls.md:
# for every training pitfall (walkthrough/train-pitfalls/NAME.diff, in the
# order of its series) its patch; where `dflash diff` locates it, from a
# clean and a pitfall training-step trace made here (the runs of
# train/tests/test_train_pitfalls.c: one sequence, one step, two for a mistake that
# shows in step 2); and what it does to a real training run, read from the
# committed results of walkthrough/train-pitfalls-runs.sh
# (walkthrough/train-pitfalls/runs/NAME.log and NAME.tau; make
# train-pitfall-runs makes them again, in minutes). Every number comes from
# those runs; the traces are bit-reproducible and the numbers are printed
# with fixed formats, so the page is byte-identical on every machine (the
# docs check holds CI to it).
# Run from the repository root after `make dflash pitfall-programs weights`.
set -eu
export LC_ALL=C
out=${1:?usage: walkthrough/mktrainpitfalls.sh OUT.md}
dir=walkthrough/train-pitfalls
runs=${TRAIN_PITFALL_RUNS:-$dir/runs}   # (a test may point it elsewhere)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$dir/series" > "$tmp/list"
[ -s "$tmp/list" ] || { echo "mktrainpitfalls: no pitfall listed in $dir/series" >&2; exit 1; }
for n in clean $(cat "$tmp/list"); do
    [ -s "$runs/$n.log" ] && [ -s "$runs/$n.tau" ] ||
        { echo "mktrainpitfalls: no $runs/$n.log or .tau (make train-pitfall-runs)" >&2; exit 1; }
done

what() { head -n 1 "$dir/$1.diff"; }
story() { sed -n '3,/^--- a\//p' "$dir/$1.diff" | sed '$d' | tr '\n' ' ' | sed 's/  */ /g; s/ $//'; }
patch_of() { sed -n '/^--- a\//,$p' "$dir/$1.diff"; }

# the located departure: the test's data and runs
printf '2 3 | 4 5 6 7 8 9 10 11 12 13\n' > "$tmp/data.txt"
step_run() {   # PROG STEPS DIR
    "$1" train --target toy_weights/random/target --draft toy_weights/random/draft --data "$tmp/data.txt" \
        --batch 1 --anchors 512 --steps "$2" --out "$3-out" --trace "$3" > /dev/null 2>&1
}
step_run ./dflash 1 "$tmp/ref1"
step_run ./dflash 2 "$tmp/ref2"
departure() {   # NAME -> `tensor` (first departure on step 1, else with 2 steps)
    for s in 1 2; do
        rm -rf "$tmp/p" "$tmp/p-out"
        step_run "./build/pitfalls/dflash-train-$1" $s "$tmp/p"
        d=$(./dflash diff "$tmp/ref$s" "$tmp/p" 2> /dev/null | sed -n 's/^first departure: \([^: ]*\).*/\1/p' | head -n 1)
        case $d in train1.*|train2.*) echo "\`$d\`"; return;; esac
    done
    echo 'none'
}

# a run's numbers from its log: loss over steps 1-10, 41-50 and the last 10
# (means), the program's own held-out evaluation; from its .tau: decoding
loss_mean() { awk -v a="$2" -v b="$3" '$1 == "step" && $2 >= a && $2 <= b { s += $4; n++ } END { printf "%.2f", s / n }' "$1"; }
last_step() { awk '$1 == "step" { s = $2 } END { print s }' "$1"; }
self_tau() { awk '$1 == "heldout_eval" { for (i = 1; i < NF; i++) if ($i == "tau") printf "%.2f", $(i + 1) }' "$1"; }
dec_tau() { awk '{ for (i = 1; i <= NF; i++) { r++; t += $i + 1 } } END { printf "%.2f", t / r }' "$1"; }
# per position: the fraction of rounds whose proposal i (1..3) was accepted
dec_pos() {
    awk '{ for (i = 1; i <= NF; i++) { r++; for (k = 1; k <= 3; k++) if ($i >= k) a[k]++ } }
         END { printf "%.2f %.2f %.2f", a[1] / r, a[2] / r, a[3] / r }' "$1"
}
rounds() { awk '{ r += NF } END { print r }' "$1"; }

# ---- on the learned pair: each pitfall's draft trained from scratch by the
# committed pair's recipe at 500 steps (learned/learned.sh pitfall-full NAME,
# make learned-train-pitfalls), decoded on its 64 held-out prompts; the clean
# run is the 500-step pair (pitfall-full clean: trained again and decoded the
# same way), whose figures are frozen in walkthrough/training/learned-logs/
# pair500.* (the committed draft is trained longer: not these runs' clean run)
lruns=${TRAIN_PITFALL_LEARNED:-$dir/learned-runs}
pair_eval=${TRAIN_PITFALL_PAIR_EVAL:-walkthrough/training/learned-logs/pair500.eval.tsv}
pair_log=${TRAIN_PITFALL_PAIR_LOG:-walkthrough/training/learned-logs/pair500.log}
pair_prompts=${TRAIN_PITFALL_PAIR_PROMPTS:-walkthrough/training/learned-logs/pair500.prompts.tsv}
# NAME B -> "tau se" from NAME.eval.tsv (T 0, dflash, block B)
l_tau() {
    awk -F'\t' -v B="$2" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["T"] == 0 && $c["method"] == "dflash" && $c["B"] == B { printf "%.6f %.6f\n", $c["tau"], $c["tau_se"] }' "$1"
}
# NAME B -> "tau d se lower higher N": NAME's tau at block B from its
# prompts.tsv, d = it minus clean's, se the paired standard error of d
# (the ratio estimators linearised prompt by prompt: rounds within a prompt
# are not independent, and the same prompts decode both drafts), and the
# prompts whose tau is lower and higher than clean's
l_paired() { awk -F'\t' -v B="$3" -f learned/paired.awk "$1" "$2"; }
l_list() { if [ -n "$1" ]; then echo "${1#, }."; else echo "none."; fi; }
learned_section() {
    echo '## On the learned pair'
    echo
    have=""
    for name in $(cat "$tmp/list"); do
        [ -s "$lruns/$name.log" ] && [ -s "$lruns/$name.eval.tsv" ] && [ -s "$lruns/$name.prompts.tsv" ] && have="$have $name"
    done
    if [ -z "$have" ] || ! [ -s "$lruns/clean.prompts.tsv" ]; then
        echo 'No pitfall has been run on the learned pair yet (`make learned-train-pitfalls`).'
        return 0
    fi
    # the clean decoding is the 500-step pair's evaluation, row for row, and
    # prompt for prompt
    for B in 8 16; do
        [ "$(l_tau "$lruns/clean.eval.tsv" $B)" = "$(l_tau "$pair_eval" $B)" ] ||
            { echo "mktrainpitfalls: $lruns/clean.eval.tsv at block $B is not $pair_eval's row (decode it again)" >&2; exit 1; }
    done
    cmp -s "$lruns/clean.prompts.tsv" "$pair_prompts" ||
        { echo "mktrainpitfalls: $lruns/clean.prompts.tsv is not $pair_prompts" >&2; exit 1; }
    steps=$(last_step "$pair_log")
    echo 'The same pitfalls on the learned pair ([the training chapter](training/learned.md)): each'
    echo "pitfall's draft is trained from scratch by the committed draft's own recipe stopped at $steps steps (batch 4, the"
    echo 'same data in the same order, seed 42, `learned/learned.sh pitfall-full NAME`, 20 to 45 minutes'
    echo 'of one core each on the machines they ran on, `blocks-see-each-other` about twice that: its blocks attend to each other),'
    echo "so the $steps-step pair (\`walkthrough/training/learned-logs/pair500.*\`) is the clean run (the committed draft is"
    echo 'the same recipe trained longer: [Training longer](training/learned.md#training-longer)). The clean `./dflash` decodes each draft'
    echo 'greedily on the 64 held-out prompts, 128 new tokens each (`walkthrough/train-pitfalls/learned-runs/`:'
    echo 'the training log, `dflash eval --log` and `--per-prompt`). A difference is **beyond the noise** when'
    echo 'it exceeds twice its standard error, paired by prompt (both drafts decode the same prompts; the'
    echo 'prompts differ far more from each other than two drafts do on one prompt).'
    echo
    echo '| pitfall | loss, last 10 steps | teacher-forced tau (its own code) | decoded tau, block 8 | decoded tau, block 16 | block 16 minus clean, ± paired s.e. | prompts lower / higher at block 16 | verdict |'
    echo '|---|---|---|---|---|---|---|---|'
    c8=$(l_tau "$lruns/clean.eval.tsv" 8); c16=$(l_tau "$lruns/clean.eval.tsv" 16)
    echo "| clean (the $steps-step pair) | $(loss_mean "$pair_log" $((steps - 9)) "$steps") | $(self_tau "$pair_log") | $(printf '%.2f &plusmn; %.2f' $c8) | $(printf '%.2f &plusmn; %.2f' $c16) | | | |"
    beyond="" within="" fooled="" better="" same=""
    for name in $have; do
        ls_=$(last_step "$lruns/$name.log")
        [ "$ls_" = "$steps" ] || { echo "mktrainpitfalls: $lruns/$name.log has $ls_ steps, the pair $steps" >&2; exit 1; }
        p8=$(l_tau "$lruns/$name.eval.tsv" 8); p16=$(l_tau "$lruns/$name.eval.tsv" 16)
        paired=$(l_paired "$lruns/$name.prompts.tsv" "$lruns/clean.prompts.tsv" 16) ||
            { echo "mktrainpitfalls: $name.prompts.tsv and clean.prompts.tsv are not the same prompts at block 16" >&2; exit 1; }
        set -- $paired
        # the per-prompt rows are the eval rows' own sums
        [ "$(printf '%.4f' "$1")" = "$(printf '%.4f' "${p16% *}")" ] ||
            { echo "mktrainpitfalls: $name.prompts.tsv does not sum to $name.eval.tsv's tau" >&2; exit 1; }
        verdict=$(awk -v d="$2" -v se="$3" 'BEGIN { print (d < -2 * se ? "**accepts less, beyond the noise**" : d > 2 * se ? "accepts more, beyond the noise" : "within the noise") }')
        # the clean run's decoding on every prompt (each prompt's rounds and tokens equal)
        if [ "$4 $5" = "0 0" ] && cmp -s "$lruns/$name.prompts.tsv" "$lruns/clean.prompts.tsv"; then
            verdict="the clean decoding, prompt for prompt"; same="$same $name"
        fi
        case $verdict in *beyond*) beyond="$beyond, \`$name\` ($(printf '%+.2f' "$2"))";; "the clean"*) ;; *) within="$within, \`$name\` ($(printf '%+.2f' "$2"))";; esac
        case $verdict in "accepts more, beyond"*) better="$better, \`$name\` ($(printf '%+.2f' "$2") at block 16, lower on $4 and higher on $5 of $6 prompts$([ "$4" -gt "$5" ] && echo ': a gain carried by a few prompts'); block 8 $(printf '%.2f' "${p8% *}") against $(printf '%.2f' "${c8% *}"))";; esac
        case $verdict in *"less, beyond"*)
            awk -v p="$(self_tau "$lruns/$name.log")" -v c="$(self_tau "$pair_log")" 'BEGIN { exit !(p >= c) }' &&
                fooled="$fooled, \`$name\` ($(self_tau "$lruns/$name.log") against $(self_tau "$pair_log"))";;
        esac
        echo "| \`$name\` | $(loss_mean "$lruns/$name.log" $((steps - 9)) "$steps") | $(self_tau "$lruns/$name.log") | $(printf '%.2f &plusmn; %.2f' $p8) | $(printf '%.2f &plusmn; %.2f' $p16) | $(printf '%+.2f &plusmn; %.2f' "$2" "$3") | $4 / $5 of $6 | $verdict |"
    done
    echo
    echo "Beyond the noise at block 16: $(l_list "$beyond") Within it: $(l_list "$within")"
    if [ -n "$same" ]; then
        why=""
        for name in $same; do case $name in
            decay-from-0) why="$why; \`decay-from-0\` (the decay's common factor cancels in the normalised loss, as on the random pair: section $(grep -n -x decay-from-0 "$tmp/list" | cut -d: -f1))";;
            context-prenorm)
                # it changes the feature of target layer L-1 only: a no-op only when the pair reads no such layer
                ids=$(sed -n 's/.*"target_layer_ids": *\[\([^]]*\)\].*/\1/p' toy_weights/learned/draft/config.json | tr -d ' ')
                nl=$(sed -n 's/^ *"num_hidden_layers": *\([0-9]*\).*/\1/p' toy_weights/learned/target/config.json)
                case ",$ids," in *",$((nl - 1)),"*) echo "mktrainpitfalls: context-prenorm decodes as clean although the pair reads layer $((nl - 1))" >&2; exit 1;; esac
                why="$why; \`context-prenorm\` (it changes the feature of the target's last layer only, and this pair's draft reads target layers $(echo "$ids" | sed 's/,/, /g') of 0..$((nl - 1)): the mistake cannot show on this pair; the random pair's draft reads layer 11 of 12, and there it changes the run: section $(grep -n -x context-prenorm "$tmp/list" | cut -d: -f1))";;
            *) why="$why; \`$name\` (not examined)";;
        esac; done
        echo; echo "Decoding exactly as the clean run, every prompt's rounds and tokens equal: ${why#; }."
    fi
    [ -z "$better" ] || { echo; echo "Accepting **more** beyond the noise: $(l_list "$better") A departure from the published recipe that decodes better on this toy pair, trained this long: a measured fact about this pair and budget, not a reason to depart (a port that means to reproduce SpecForge's recipe must not make it), and not measured at longer training."
        case $better in *'`loss-on-anchor`'*) echo "For \`loss-on-anchor\` one reading (a hypothesis, not tested here): the draft shares the target's frozen embedding and lm_head, so a loss on row 0 trains its layers to carry the anchor's own token through to their output, and the mask rows, which attend to row 0, then read the anchor more clearly in the second layer (its first layer sees row 0 as the plain embedding either way).";; esac; }
    [ -z "$fooled" ] || { echo; echo "Accepting less beyond the noise while its own teacher-forced tau is at or above the clean run's (the program's evaluation runs the same wrong code as its training, so it cannot see the mistake): $(l_list "$fooled")"; }
    rest=""
    for name in $(cat "$tmp/list"); do case " $have " in *" $name "*) ;; *) rest="$rest \`$name\`";; esac; done
    [ -z "$rest" ] || { echo; echo "Not run on the learned pair yet:$(echo "$rest" | sed 's/ /, /g; s/^, / /') (\`make learned-train-pitfalls PITFALLS='NAME ...'\`)."; }
}

L=$(last_step "$runs/clean.log")
# the prose below names three results; they must still hold for these runs
# (a new make train-pitfall-runs that changes them fails here: rewrite it)
numbers() { echo "$(loss_mean "$runs/$1.log" 1 10) $(loss_mean "$runs/$1.log" $((L - 9)) "$L") $(self_tau "$runs/$1.log") $(dec_tau "$runs/$1.tau")"; }
claims_hold() {
    [ "$(numbers decay-from-0)" = "$(numbers clean)" ] || { echo "decay-from-0 differs from clean"; return 1; }
    awk -v l="$(loss_mean "$runs/loss-on-anchor.log" $((L - 9)) "$L")" -v cl="$(loss_mean "$runs/clean.log" $((L - 9)) "$L")" \
        -v t="$(dec_tau "$runs/loss-on-anchor.tau")" -v ct="$(dec_tau "$runs/clean.tau")" \
        -v m="$(loss_mean "$runs/mask-is-eos.log" $((L - 9)) "$L")" -v mt="$(dec_tau "$runs/mask-is-eos.tau")" \
        'BEGIN { if (!(l < 0.8 * cl && t + 0.005 >= ct)) { print "loss-on-anchor: not a far lower loss for no tau"; exit 1 }
                 if (!(m <= 1.1 * cl && mt - 1 < 0.5 * (ct - 1))) { print "mask-is-eos: not converges, accepts little"; exit 1 } }'
}
why=$(claims_hold) || { echo "mktrainpitfalls: the page's prose no longer holds ($why): edit it" >&2; exit 1; }
c_first=$(loss_mean "$runs/clean.log" 1 10)
c_last=$(loss_mean "$runs/clean.log" $((L - 9)) "$L")
c_tau=$(dec_tau "$runs/clean.tau")
{
echo '# Training pitfalls: mistakes that converge and still accept little'
echo
echo '<!-- generated by walkthrough/mktrainpitfalls.sh (make pitfalls) from real runs; do not edit -->'
echo
echo 'Each pitfall below is one classic mistake in training a DFlash draft, written as a patch of the'
echo 'clean `train/train.c`: `walkthrough/train-pitfalls/NAME.diff` changes the lines a training script gets'
echo 'wrong, the way it gets them wrong (the inference pitfalls are in [pitfalls.md](pitfalls.md); the'
echo 'recipe these lines implement is walked through in the chapter [How the draft learned'
echo 'this](README.md#how-the-draft-learned-this-one-training-step)). `make pitfall-programs` applies each'
echo 'patch on its own to a copy, `build/pitfalls/train-NAME/train.c`, and builds'
echo '`build/pitfalls/dflash-train-NAME`: `./dflash` whose `dflash train` has that one mistake. Locate one:'
echo
echo '```'
echo 'make pitfall-programs'
echo './dflash train --target toy_weights/random/target --draft toy_weights/random/draft --data DATA --steps 1 --trace correct --out d1'
echo './build/pitfalls/dflash-train-labels-shifted train ...the same... --trace port --out d2'
echo './dflash diff correct port'
echo '```'
echo
echo 'For each pitfall the page gives where `dflash diff` first sees it on such a training-step trace'
echo '(`train/tests/test_train_pitfalls.c` holds every one of them to the tensor where the mistake enters), and'
echo 'what it does to a real, short training run, made by `walkthrough/train-pitfalls-runs.sh` (`make'
echo 'train-pitfall-runs`, minutes per run) and committed under `walkthrough/train-pitfalls/runs/`:'
echo
echo "- the recipe: the random target, a new draft (the random set's draft config, seed 42),"
echo "  $(grep -vc "^#" "$runs/data.txt") sequences of up to 24 ids the target wrote itself (greedy, from random 4-id prompts;"
echo "  \`runs/data.txt\`, the same ids in the same order for every run), $L AdamW steps of batch 2 with 4"
echo '  anchors per sequence and block size 4, SpecForge'"'"'s other defaults (lr 6e-4 with a cosine'
echo '  schedule, gamma 7, clipping at 1). This is a short recipe on a random target, sized for a shared'
echo '  2-core machine (the README'"'"'s trained toy set has 150 steps, the learned pair'"'"'s pitfall runs 500 steps of'
echo '  batch 4 on English text: [below](#on-the-learned-pair)), so the absolute numbers'
echo '  here are small; what matters is each column against the clean run'"'"'s;'
echo '- **loss**: the training loss, the mean over steps 1-10 and over the last 10 steps (each step sees'
echo '  other sequences, so single steps are noisy); the loss each program computes with its own'
echo '  (possibly wrong) labels, weights and mask;'
echo '- **tau, own evaluation**: the program'"'"'s own held-out evaluation (`dflash train --heldout 12`:'
echo '  twelve sequences from prompts no training sequence starts with, the draft proposing a block at'
echo '  every position, scored with the training code itself, mistakes included);'
echo '- **tau, decoding**: the trained draft in real speculative decoding by the clean `./dflash` on the'
echo '  same held-out prompts (greedy, as many new tokens as the held-out continuation): the mean'
echo '  acceptance length per round, bonus included, and per position the fraction of rounds in which'
echo '  proposal 1, 2, 3 was accepted.'
echo
echo "The clean run goes from a loss of $c_first to $c_last and decodes at tau $c_tau."
echo 'A pitfall is marked **converges, accepts little** when its last-10 loss is within 10% of the'
echo 'clean run'"'"'s or below it, while its decoding tau keeps less than half of the clean run'"'"'s gain'
echo 'over 1.00 (the tau of a draft that is never right).'
echo
echo '| pitfall | first departure | loss, steps 1-10 | loss, last 10 | tau, own evaluation | tau, decoding | per position 1 2 3 | verdict |'
echo '|---|---|---|---|---|---|---|---|'
echo "| clean \`train/train.c\` | | $c_first | $c_last | $(self_tau "$runs/clean.log") | $c_tau | $(dec_pos "$runs/clean.tau") | |"
n=0
while read -r name; do
    n=$((n + 1))
    f=$(loss_mean "$runs/$name.log" 1 10)
    l=$(loss_mean "$runs/$name.log" $((L - 9)) "$L")
    t=$(dec_tau "$runs/$name.tau")
    verdict=$(awk -v l="$l" -v cl="$c_last" -v t="$t" -v ct="$c_tau" 'BEGIN {
        conv = l <= 1.1 * cl; lost = (t - 1) < 0.5 * (ct - 1)
        if (conv && lost) print "**converges, accepts little**"
        else if (lost) print "loss higher, accepts little"
        else if (t + 0.005 < ct) print "accepts less"
        else print "no loss in tau here" }')
    echo "$n|$name|$verdict" >> "$tmp/verdicts"
    echo "| [\`$name\`](#$n-$name) | $(departure "$name") | $f | $l | $(self_tau "$runs/$name.log") | $t | $(dec_pos "$runs/$name.tau") | $verdict |"
done < "$tmp/list"
echo
echo '(tau, decoding: over the rounds of the twelve held-out prompts, '"$(rounds "$runs/clean.tau")"' for the clean draft.)'
echo
rep=$(awk -F'|' '!/^#/ { n = split($2, a, " "); for (i = 2; i <= n; i++) { t++; r1 += a[i] == a[i - 1]; if (i > 2) r2 += a[i] == a[i - 2] } }
                END { printf "%.0f%% %.0f%%", 100 * r1 / t, 100 * r2 / t }' "$runs/data.txt")
echo 'Read the numbers with the data in mind. The random target'"'"'s greedy continuations fall into loops'
echo "(\`runs/data.txt\`: of the continuation tokens after the first, ${rep% *} equal the token before them and"
echo "${rep#* } the one two before), so the token at a position and the next one are often the same, and a"
echo 'draft that predicts the wrong position, sees the answer in training or reads other inputs still'
echo 'guesses many loop tokens right: on this data most mistakes cost some tau rather than all of it. The'
echo 'gap that matters is between the two tau columns: the program'"'"'s own evaluation runs the same wrong'
echo 'code as its training (its mask, its labels, its inputs), so it cannot see a mistake that training'
echo 'and evaluation share; the clean decoder, which is what inference does, shows what the draft is worth.'
echo 'Each run is one seed and twelve held-out prompts; run-to-run variation was not measured, so a'
echo 'tau difference of a few hundredths (most of the **accepts less** rows) is a hint, not a result. The'
echo 'clear ones: `mask-is-eos` converges like the clean run and keeps only about half of its gain in'
echo 'tau (its own evaluation, which uses the same wrong mask id, does not notice); `loss-on-anchor`'
echo 'reaches a far lower loss (copying row 0 is easy) for no gain in tau; `decay-from-0` changes the'
echo 'weights and nothing else (the normalised loss cancels the common factor: every number equals the'
echo 'clean run'"'"'s).'
echo
echo 'The loss curves (each a trailing mean over 10 steps), each pitfall over the clean run:'
echo
echo '![the training loss of each pitfall against the clean run](train-pitfalls/loss.svg)'
echo
learned_section
echo
n=0
while read -r name; do
    n=$((n + 1))
    echo "## $n. \`$name\`"
    echo
    echo "**The mistake.** $(what "$name")"
    echo
    echo "**Why it is wrong.** $(story "$name")"
    echo
    echo "**Its run.** $(sed -n "s/^$n|$name|//p" "$tmp/verdicts"): loss $(loss_mean "$runs/$name.log" 1 10) -> $(loss_mean "$runs/$name.log" $((L - 9)) "$L") (clean $c_first -> $c_last), its own held-out tau $(self_tau "$runs/$name.log") (clean $(self_tau "$runs/clean.log")), decoding tau $(dec_tau "$runs/$name.tau") (clean $c_tau)."
    echo
    echo "**The patch** (\`walkthrough/train-pitfalls/$name.diff\`):"
    echo
    echo '```diff'
    patch_of "$name"
    echo '```'
    echo
done < "$tmp/list"
} > "$out"

# the figure: each pitfall's loss curve (a trailing mean over 10 steps) over
# the clean run's, one panel each, the decoding tau in its title
svg=$(dirname "$out")/train-pitfalls/loss.svg
mkdir -p "$(dirname "$svg")"
{
    for name in clean $(cat "$tmp/list"); do
        echo "run $name $(dec_tau "$runs/$name.tau")"
        awk '$1 == "step" { print "loss", $2, $4 }' "$runs/$name.log"
    done
} | awk -v L="$L" '
function esc(s) { return s }
$1 == "run" { k++; name[k] = $2; tau[k] = $3; next }
$1 == "loss" { v[k, $2] = $3; if ($3 > ymax) ymax = $3 }
END {
    cols = 5; pw = 200; ph = 130; mx = 40; my = 56; gap = 16
    rows = int((k - 1 + cols - 1) / cols)
    W = mx + cols * (pw + gap) + 10; H = my + rows * (ph + gap + 30) + 30
    ymax = int(ymax + 1)
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", W, H, W, H
    printf "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H
    printf "<text x=\"12\" y=\"24\" font-family=\"sans-serif\" font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">the training loss of each pitfall (a trailing mean over 10 steps), against the clean run</text>\n"
    printf "<text x=\"12\" y=\"44\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#555555\">grey: clean train/train.c (decoding tau %s); colour: the pitfall; steps 1..%d, loss 0..%d; the title gives its decoding tau</text>\n", tau[1], L, ymax
    for (p = 2; p <= k; p++) {
        i = p - 2; cx = mx + (i % cols) * (pw + gap); cy = my + int(i / cols) * (ph + gap + 30) + 24
        printf "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">%s (tau %s)</text>\n", cx, cy - 6, name[p], tau[p]
        printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#cccccc\"/>\n", cx, cy, pw, ph
        if (i % cols == 0) {   # the loss axis, left of each row
            printf "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"end\" fill=\"#555555\">%d</text>\n", cx - 4, cy + 10, ymax
            printf "<text x=\"%d\" y=\"%d\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"end\" fill=\"#555555\">0</text>\n", cx - 4, cy + ph
        }
        for (q = 1; q <= 2; q++) {
            r = q == 1 ? 1 : p
            pts = ""
            for (s = 1; s <= L; s++) {
                sum = 0; n = 0
                for (t = s - 9; t <= s; t++) if (t >= 1) { sum += v[r, t]; n++ }
                x = cx + (s - 1) * pw / (L - 1); y = cy + ph - (sum / n) * ph / ymax
                pts = pts sprintf("%.1f,%.1f ", x, y)
            }
            printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"/>\n", pts, q == 1 ? "#aaaaaa" : "#d94801", q == 1 ? "1.5" : "1.8"
        }
    }
    printf "</svg>\n"
}' > "$svg"
echo "mktrainpitfalls: wrote $out ($n pitfalls) and $svg"
