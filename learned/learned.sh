#!/bin/sh
# learned/learned.sh data|draft|experiments|experiment-full NAME|steps-full N|pitfall-full NAME|run|eval|regress - the learned pair
# (docs/learned.md): the DFlash draft of the learned English target
# (toy_weights/learned/target/, learned/learned_target.sh), trained, run and
# evaluated. Run from the repository root after `make dflash`; make
# learned-draft, make run-learned and make eval-learned call it.
#
#   draft  toy_weights/learned/draft/: the recipe below, trained in float
#          and written in BF16 (--dtype bf16, as published drafts ship), then
#          SHA256SUMS beside its files; the data (build/learned/data.txt) and the
#          training log (toy_weights/learned/draft-train.log) on the way (the
#          committed log is the run before --dtype: its command line lacks it,
#          its steps are the same; the committed BF16 file is that run's F32
#          draft written by `dflash train --draft DIR --steps 0 --dtype bf16`,
#          the same bytes as training with --dtype bf16)
#   run    ./dflash on the pair, --rounds, the first held-out prompt
#   eval   dflash eval on the held-out prompts (docs/evaluation.md), the
#          greedy DFlash rows and the baselines in one run: DFlash's rows
#          to build/learned/eval.tsv, the baselines' (greedy) to
#          build/learned/eval-baselines.tsv; UPDATE=1: the
#          committed toy_weights/learned/ ones
#   data   build/learned/data.txt only (the first half of draft; draft and
#          experiments make it when it is absent or its stamp, data.txt.stamp,
#          names other weights, prompts or recipe)
#   experiments  walkthrough/training/learned-logs/: the experiments of
#          walkthrough/training/learned.md, each a draft trained by the
#          shorter recipe XRECIPE below on build/learned/data.txt (made
#          first when absent) and decoded by dflash eval on the first
#          XPROMPTS held-out prompts; an experiment whose two logs are there
#          is not run again (stop it any time: the next run goes on)
#   experiment-full NAME  one experiment at the committed draft's recipe
#          but XFULLSTEPS (500) steps, 64 prompts: XLOGS/NAME-full.log,
#          .eval.tsv, compared with the 500-step pair (that recipe at 500
#          steps, the committed draft until it was trained for STEPS; its
#          figures frozen in XLOGS/pair500.eval.tsv, .log, .prompts.tsv)
#   steps-full N  the committed draft's recipe at N steps instead of
#          XFULLSTEPS (the same data, seed, warm-up; the cosine stretched
#          over N): how decoded tau grows with training, XLOGS/stepsN-full.log,
#          .eval.tsv (steps-full 1500 is the committed draft's run)
#   pitfall-full NAME  one training pitfall (walkthrough/train-pitfalls/,
#          build/pitfalls/dflash-train-NAME) trained from scratch at that
#          recipe and XFULLSTEPS steps, the 500-step pair its clean run:
#          TLOGS/NAME.log, .eval.tsv, .prompts.tsv (NAME clean: the 500-step
#          pair trained again by the clean ./dflash, the same bits, decoded
#          the same way)
#   regress  toy_weights/learned/draft-regression.txt: rounds and tokens
#          (accepted + bonus) of greedy DFlash at blocks 4, 8, 16 on the first
#          4 held-out prompts, 48 new tokens, no stop (learned/tests/test_learned.c
#          checks the committed pair against it)
#
# The files it reads (learned/learned_target.sh writes them; prompts are token
# ids, one prompt a line, ids separated by spaces):
#   toy_weights/learned/target/          config.json, model.safetensors, tokenizer.json
#   toy_weights/learned/train-prompts.ids   training-split prompts
#   toy_weights/learned/heldout.ids         held-out prompts (cut from heldout.txt)
#   toy_weights/learned/draft-config.json   the draft's config (DFlashDraftModel); when
#                                           absent it is written from the target's
#                                           config.json, the mask token <mask>
#
# The recipe (LEARNED_RECIPE, the published one: the target regenerates the
# responses): for every training prompt the target's greedy continuation and
# SAMPLES sampled ones at temperature 0.7 (seeds 1..SAMPLES), NEW tokens each,
# through its stop ids (--ignore-eos: the target goes on into the next
# fortune, as dflash eval decodes),
# two prompts at a time (JOBS; the order of the lines does not depend on it);
# then dflash train from a new draft (seeded) on those sequences, the prompt
# at loss mask 0. Deterministic: the same files give the same bytes. STEPS
# is the step count at which decoded greedy tau at block 8 on the 64 held-out
# prompts reaches 3.5 (3.54 at 1500; 2.67 at 500: `steps-full N` measured it).
# Time: 1500 steps took 1 h 23 min with THREADS=2 on a loaded 2-core machine
# (about 47 min on one quiet core); the responses a few minutes more.
set -eu
export LC_ALL=C
DFLASH=${DFLASH:-./dflash}
LEARNED=${LEARNED:-toy_weights/learned}
NEW=${NEW:-128}
SAMPLES=${SAMPLES:-1}
JOBS=${JOBS:-2}
STEPS=${STEPS:-1500}
LEARNED_RECIPE=${LEARNED_RECIPE:---batch 4 --lr 1e-3 --warmup 25 --gamma 7 --anchors 32 --seed 42 --heldout 32}
THREADS=${THREADS:-2}   # dflash train --threads: the bits do not depend on it
# the experiments: a shorter recipe than the committed draft's (ten
# experiments of its length would take many hours), the same for every row,
# the base row included; two experiments at a time (XJOBS), each trained
# with one thread (the bits do not depend on it)
XSTEPS=${XSTEPS:-120}
XRECIPE=${XRECIPE:---batch 4 --lr 1e-3 --warmup 8 --anchors 32 --seed 42 --heldout 32}
XPROMPTS=${XPROMPTS:-32}
XJOBS=${XJOBS:-2}
XLOGS=${XLOGS:-walkthrough/training/learned-logs}
XWINDOW=${XWINDOW:-16}   # the sliding experiment's sliding_window
TLOGS=${TLOGS:-walkthrough/train-pitfalls/learned-runs}   # pitfall-full's logs
# experiment-full, steps-full and pitfall-full: the committed recipe at 500
# steps (the 500-step pair's), so that their committed logs stay comparable
XFULLSTEPS=${XFULLSTEPS:-500}
NICE=${NICE:-nice -n 10}
target=$LEARNED/target
draft=$LEARNED/draft

die() { echo "learned/learned.sh: $*" >&2; exit 2; }

need_target() {
    [ -f "$target/config.json" ] && { [ -f "$target/model.safetensors" ] || [ -f "$target/model.safetensors.index.json" ]; } ||
        die "$target/config.json or model.safetensors is missing: make learned-target trains it (learned/learned_target.sh)"
}
need_file() { [ -f "$1" ] || die "$1 is missing: $2"; }
need_draft() {
    [ -f "$draft/model.safetensors" ] || die "$draft/model.safetensors is missing: make learned-draft trains it"
}

# the ids line ./dflash --print-ids prints (the second-last line) of one run
continuation() {  # $1 ids (comma-separated), $2 temperature, $3 seed
    "$DFLASH" --target "$target" --mode ar --ids "$1" --max-new-tokens "$NEW" --temperature "$2" --seed "$3" \
        --ignore-eos --print-ids | tail -n 2 | head -n 1
}

# job $1 of JOBS: the continuations of prompts $1, $1 + JOBS, ... as lines
# "prompt-number<TAB>variant<TAB>data line" (variant 0 greedy, s sample s)
continue_prompts() {
    n=0 m=0
    while read -r line; do
        [ -n "$line" ] || continue
        n=$((n + 1))
        [ $(((n - 1) % JOBS)) -eq "$1" ] || continue
        ids=$(echo "$line" | tr -s ' ' ',')
        np=$(echo "$line" | wc -w)
        for s in 0 $(seq 1 "$SAMPLES"); do
            if [ "$s" = 0 ]; then out=$(continuation "$ids" 0 0); else out=$(continuation "$ids" 0.7 "$s"); fi
            # the --data line: the prompt, "|", the continuation (loss mask 1); a
            # continuation is NEW tokens (--ignore-eos), one that is not is an error
            echo "$out" | awk -v n="$n" -v s="$s" -v np="$np" -v new="$NEW" 'NF - np != new { exit 1 }
                { printf "%d\t%d\t", n, s; for (i = 1; i <= NF; i++) printf "%s%s", (i > 1 ? " " : ""), $i (i == np ? " |" : ""); print "" }' ||
                { echo "learned.sh: prompt $n: the target's continuation is not $NEW tokens (the ids line: $out)" >&2; exit 1; }
        done
        m=$((m + 1))
        [ $((m % 16)) -ne 0 ] || echo "learned.sh: job $1 of $JOBS: $m prompts continued ($total in all)" >&2
    done < "$LEARNED/train-prompts.ids"
}

# a draft config.json from the target's: the published layout at toy size
# (2 layers, block 16, three target layers spread over the depth)
write_config() {  # $1 out
    # the mask token: <mask> in the target's tokenizer.json (train-tokenizer adds it), or MASK_ID
    [ -n "${MASK_ID:-}" ] || MASK_ID=$("$DFLASH" tokenize --tokenizer "$target/tokenizer.json" --no-special "<mask>" 2>/dev/null | grep -E '^[0-9]+$') ||
        die "$target/tokenizer.json has no <mask> token: give MASK_ID=<the mask token's id>"
    get() { sed -n "s/^ *\"$1\": *\\([^,}]*\\).*/\\1/p" "$target/config.json" | head -n 1; }
    L=$(get num_hidden_layers)
    [ -n "$L" ] || die "$target/config.json: no num_hidden_layers"
    cat > "$1" <<EOF
{
  "architectures": ["DFlashDraftModel"],
  "model_type": "qwen3",
  "hidden_size": $(get hidden_size),
  "intermediate_size": $(get intermediate_size),
  "num_hidden_layers": 2,
  "num_attention_heads": $(get num_attention_heads),
  "num_key_value_heads": $(get num_key_value_heads),
  "head_dim": $(get head_dim),
  "vocab_size": $(get vocab_size),
  "rms_norm_eps": $(get rms_norm_eps),
  "rope_theta": $(get rope_theta),
  "max_position_embeddings": $(get max_position_embeddings),
  "hidden_act": "silu",
  "attention_bias": false,
  "tie_word_embeddings": false,
  "num_target_layers": $L,
  "block_size": 16,
  "dflash_config": {"mask_token_id": $MASK_ID, "target_layer_ids": [1, $((L / 2)), $((L - 2))]},
  "torch_dtype": "float32"
}
EOF
}

# build/learned/data.txt: the training sequences (the recipe above)
make_data() {
    need_target
    need_file "$LEARNED/train-prompts.ids" "the training-split prompts (token ids, one prompt a line)"
    mkdir -p build/learned
    data=build/learned/data.txt
    total=$(grep -c . "$LEARNED/train-prompts.ids")
    rm -f "$data" "$data.stamp"
    j=0 pids=
    while [ $j -lt "$JOBS" ]; do
        continue_prompts $j > "$data.part$j" &
        pids="$pids $!"
        j=$((j + 1))
    done
    for pid in $pids; do wait "$pid" || die "the target's continuations failed (above)"; done
    # back into the prompts' order: prompt, then greedy before the samples
    sort -s -n -k1,1 -k2,2 "$data".part* | cut -f 3 > "$data.tmp"
    rm -f "$data".part*
    [ "$(wc -l < "$data.tmp")" -eq $((total * (SAMPLES + 1))) ] || die "$data.tmp: expected $((total * (SAMPLES + 1))) sequences"
    mv "$data.tmp" "$data"
    data_stamp > "$data.stamp"
    echo "learned.sh: $(wc -l < "$data") sequences in $data" >&2
}
# what build/learned/data.txt is made from: the target's weights, the
# prompts, the recipe's numbers (data.txt.stamp; need_data makes it again
# when they change)
data_stamp() {
    sha256sum "$target"/model.safetensors* "$LEARNED/train-prompts.ids" | awk '{ print $1 }'
    echo "NEW $NEW SAMPLES $SAMPLES"
}
need_data() {
    data=build/learned/data.txt
    if [ -f "$data" ] && [ -f "$data.stamp" ] && [ "$(data_stamp)" = "$(cat "$data.stamp")" ]; then
        echo "learned.sh: $data is made from these files already ($data.stamp)" >&2
    else
        make_data
    fi
}

# the draft's config: the committed one, or one written from the target's
draft_config() {
    cfg=$LEARNED/draft-config.json
    [ -f "$cfg" ] || { mkdir -p build/learned; cfg=build/learned/draft-config.json; write_config "$cfg"; }
}

# the experiments, one a line: name, trainer, decoder, config (base, layers1,
# sliding), the block sizes dflash eval decodes at, then dflash train's flags
# ("imposed" as trainer: no training, base's draft under the sliding config:
# the window imposed only at inference)
experiment_list() {   # (two lanes take alternate lines: the most telling first)
    cat <<EOF
base ./dflash ./dflash base 2,4,8,16 --gamma 7
sliding-imposed imposed ./dflash sliding 8,16 --gamma 7
no-injection build/variants/dflash-no-injection-train build/variants/dflash-no-injection-run base 8,16 --gamma 7
train8 ./dflash ./dflash base 2,4,8,16 --gamma 7 --block-size 8
causal ./dflash build/pitfalls/dflash-draft-causal base 8,16 --gamma 7 --block-attention causal
sliding ./dflash ./dflash sliding 8,16 --gamma 7
layers1 ./dflash ./dflash layers1 8,16 --gamma 7
gamma0 ./dflash ./dflash base 8,16 --gamma 0
train4 ./dflash ./dflash base 2,4,8,16 --gamma 7 --block-size 4
gamma4 ./dflash ./dflash base 8,16 --gamma 4
EOF
}

# the experiments' configs from the draft's: layers1 takes the one target
# layer the published build_target_layer_ids gives one layer (L / 2);
# sliding makes both draft layers sliding_attention with XWINDOW
experiment_configs() {  # $1 dir
    draft_config
    cp "$cfg" "$1/base.json"
    L=$(sed -n 's/^ *"num_target_layers": *\([0-9]*\).*/\1/p' "$cfg")
    sed "s/\"target_layer_ids\": *\[[^]]*\]/\"target_layer_ids\": [$((L / 2))]/" "$cfg" > "$1/layers1.json"
    sed -e 's/^\( *\)"num_hidden_layers": *2,/\1"num_hidden_layers": 2,\
\1"layer_types": ["sliding_attention", "sliding_attention"],\
\1"use_sliding_window": true,\
\1"sliding_window": '"$XWINDOW"',/' "$cfg" > "$1/sliding.json"
    grep -q '"target_layer_ids": \['"$((L / 2))"'\]' "$1/layers1.json" && grep -q sliding_attention "$1/sliding.json" ||
        die "$cfg: could not derive the layers1 and sliding configs from it"
}

# a draft decoded greedily by dflash eval on the first PROMPTS held-out
# prompts (9 tokens each, 128 new), at BLOCKS: build/learned/x/NAME.eval.tmp
# (dflash eval --log; its output in NAME.eval.out), then eval's further flags
decode_greedy() {  # $1 name, $2 decoder, $3 draft, $4 prompts, $5 blocks, then eval's flags
    name_=$1 decoder_=$2 draft_=$3 prompts_=$4 blocks_=$5
    shift 5
    $NICE "$decoder_" eval --target "$target" --draft "$draft_" --ids-file "$LEARNED/heldout.ids" --prompts "$prompts_" \
        --prompt-len 9 --new 128 --methods dflash --temperatures 0 --blocks "$blocks_" \
        --log "build/learned/x/$name_.eval.tmp" "$@" > "build/learned/x/$name_.eval.out" 2>&1 ||
        { tail -n 5 "build/learned/x/$name_.eval.out" >&2; die "$name_: dflash eval failed"; }
}

# one experiment, in two halves (train, decode), each skipped when done:
# its draft in build/learned/x/NAME, its two logs in XLOGS only when whole
experiment_train() {  # $1 threads, then the fields of one experiment_list line
    threads=$1 name=$2 trainer=$3 conf=$5
    shift 6
    x=build/learned/x
    [ -f "$x/$name.log" ] && [ -f "$x/$name/model.safetensors" ] && return 0
    [ -f "$XLOGS/$name.log" ] && [ -f "$XLOGS/$name.eval.tsv" ] && return 0
    rm -rf "$x/$name" "$x/$name.lock" "$x/$name.in"
    echo "learned.sh: $name: training ($(date -u +%H:%M:%S))" >&2
    if [ "$trainer" = imposed ]; then
        # base's weights under the sliding config: --steps 0 evaluates them as they are
        [ -f "$x/base/model.safetensors" ] || die "$name: the base experiment's draft is missing (run base first)"
        mkdir -p "$x/$name.in" && cp "$x/base/model.safetensors" "$x/$name.in/" && cp "$x/$conf.json" "$x/$name.in/config.json"
        $NICE "$DFLASH" train --target "$target" --draft "$x/$name.in" --data build/learned/data.txt --out "$x/$name" \
            --steps 0 $XRECIPE "$@" --log "$x/$name.log.tmp" > "$x/$name.out" 2>&1 ||
            { tail -n 5 "$x/$name.out" >&2; die "$name: dflash train failed"; }
    else
        $NICE "$trainer" train --target "$target" --draft-config "$x/$conf.json" --data build/learned/data.txt --out "$x/$name" \
            --steps "$XSTEPS" $XRECIPE "$@" --threads "$threads" --log-every 20 --log "$x/$name.log.tmp" > "$x/$name.out" 2>&1 ||
            { tail -n 5 "$x/$name.out" >&2; die "$name: dflash train failed"; }
    fi
    mv "$x/$name.log.tmp" "$x/$name.log"
}
experiment_decode() {  # the fields of one experiment_list line
    name=$1 decoder=$3 blocks=$5
    x=build/learned/x
    [ -f "$XLOGS/$name.log" ] && [ -f "$XLOGS/$name.eval.tsv" ] && { echo "learned.sh: $name: done before" >&2; return 0; }
    echo "learned.sh: $name: decoding at blocks $blocks ($(date -u +%H:%M:%S))" >&2
    decode_greedy "$name" "$decoder" "$x/$name" "$XPROMPTS" "$blocks"
    mkdir -p "$XLOGS"
    mv "$x/$name.eval.tmp" "$XLOGS/$name.eval.tsv"
    cp "$x/$name.log" "$XLOGS/$name.log"
    echo "learned.sh: $name: $XLOGS/$name.log and $name.eval.tsv written ($(date -u +%H:%M:%S))" >&2
}

# one run at the committed draft's recipe at XFULLSTEPS steps, then its
# decoding on PROMPTS (64) held-out prompts at blocks 8 and 16: LOGDIR/NAME.log
# and .eval.tsv
full_run() {  # $1 name, $2 trainer, $3 decoder, $4 config, $5 logdir, then dflash train's flags
    name=$1 trainer=$2 decoder=$3 conf=$4 logs=$5
    shift 5
    need_target
    [ -x "$trainer" ] && [ -x "$decoder" ] || die "$trainer or $decoder is missing: make variant-programs pitfall-programs"
    need_data
    x=build/learned/x
    mkdir -p "$x" "$logs"
    experiment_configs "$x"
    if ! [ -f "$x/$name.log" ] || ! [ -f "$x/$name/model.safetensors" ]; then
        rm -rf "$x/$name" "$x/$name.lock"
        echo "learned.sh: $name: training ($(date -u +%H:%M:%S))" >&2
        # the committed recipe, then the run's own flags (the last of a flag wins)
        $NICE "$trainer" train --target "$target" --draft-config "$x/$conf.json" --data build/learned/data.txt --out "$x/$name" \
            --steps "$XFULLSTEPS" $LEARNED_RECIPE "$@" --threads "$THREADS" --log-every 25 --log "$x/$name.log.tmp" ||
            die "$name: dflash train failed"
        mv "$x/$name.log.tmp" "$x/$name.log"
    fi
    full_decode "$name" "$decoder" "$x/$name" "$logs"
    cp "$x/$name.log" "$logs/$name.log"
}
# its decoding: LOGDIR/NAME.eval.tsv and NAME.prompts.tsv (each prompt's
# rounds and tokens: the pages' paired differences)
full_decode() {  # $1 name, $2 decoder, $3 draft, $4 logdir
    x=build/learned/x
    mkdir -p "$x" "$4"
    echo "learned.sh: $1: decoding ($(date -u +%H:%M:%S))" >&2
    decode_greedy "$1" "$2" "$3" "${PROMPTS:-64}" 8,16 --per-prompt "$x/$1.prompts.tmp"
    mv "$x/$1.eval.tmp" "$4/$1.eval.tsv"
    mv "$x/$1.prompts.tmp" "$4/$1.prompts.tsv"
    echo "learned.sh: $1: $4/$1.eval.tsv and $1.prompts.tsv written ($(date -u +%H:%M:%S))" >&2
}

case ${1:-} in
experiment-full)
    # one experiment at the committed draft's recipe (LEARNED_RECIPE,
    # XFULLSTEPS, THREADS) and its 64 prompts: XLOGS/NAME-full.log and
    # .eval.tsv, beside the 500-step pair's figures (the page shows the row
    # when it is there)
    line=$(experiment_list | awk -v n="${2:-}" '$1 == n') && [ -n "$line" ] && [ "${2:-}" != base ] ||
        die "experiment-full NAME: NAME is one of the experiments but base (the 500-step pair is base at this recipe)"
    set -- $line
    name=$1 trainer=$2 decoder=$3 conf=$4
    shift 5
    [ "$trainer" != imposed ] || die "$name-full: nothing to train"
    full_run "$name-full" "$trainer" "$decoder" "$conf" "$XLOGS" "$@"
    ;;
steps-full)
    # the committed recipe at N steps: the base row at N steps (the last
    # --steps dflash train is given wins: XFULLSTEPS, then N)
    case ${2:-} in ''|*[!0-9]*) die "steps-full N: N is a number of steps";; esac
    [ "$2" != "$XFULLSTEPS" ] || die "steps-full $2: the 500-step pair is that run ($XLOGS/pair500.*)"
    full_run "steps$2-full" ./dflash ./dflash base "$XLOGS" --steps "$2"
    ;;
pitfall-full)
    # one training pitfall at the committed draft's recipe and XFULLSTEPS
    # steps, from scratch (the same data, seed and steps: the 500-step pair
    # is its clean run): TLOGS/NAME.log and NAME.eval.tsv
    # (walkthrough/train-pitfalls.md's learned-pair table)
    # (NAME clean: the 500-step pair trained again by the clean ./dflash and
    # decoded the same way, the rows they are paired with; its decoding is
    # XLOGS/pair500.eval.tsv's, which walkthrough/mktrainpitfalls.sh checks)
    [ -n "${2:-}" ] && { [ "$2" = clean ] || grep -qx -- "$2" walkthrough/train-pitfalls/series; } ||
        die "pitfall-full NAME: NAME is clean or a line of walkthrough/train-pitfalls/series"
    if [ "$2" = clean ]; then
        full_run clean ./dflash ./dflash base "$TLOGS"
    else
        full_run "$2" "build/pitfalls/dflash-train-$2" ./dflash base "$TLOGS"
    fi
    ;;
experiments)
    need_target
    need_file "$LEARNED/heldout.ids" "the held-out prompts (token ids, one prompt a line)"
    for p in build/variants/dflash-no-injection-train build/variants/dflash-no-injection-run build/pitfalls/dflash-draft-causal; do
        [ -x "$p" ] || die "$p is missing: make variant-programs $p"
    done
    need_data
    mkdir -p build/learned/x
    experiment_configs build/learned/x
    # base's training first, on THREADS threads (sliding-imposed reads its
    # draft), then XJOBS lanes, one thread each: base's decoding and the rest
    experiment_train "$THREADS" $(experiment_list | head -n 1)
    j=0
    while [ $j -lt "$XJOBS" ]; do
        experiment_list | awk -v j=$j -v n="$XJOBS" '(NR - 1) % n == j' | while read -r line; do
            experiment_train 1 $line && experiment_decode $line
        done &
        j=$((j + 1))
    done
    wait
    n=$(ls "$XLOGS"/*.eval.tsv 2>/dev/null | wc -l)
    [ "$n" -eq "$(experiment_list | wc -l)" ] || die "only $n of $(experiment_list | wc -l) experiments have their logs: run it again"
    echo "learned.sh: the experiments' logs are in $XLOGS; make training makes the page" >&2
    ;;
data)
    make_data
    ;;
draft)
    need_data
    draft_config
    # the folder's SHA256SUMS (committed) aside while dflash train replaces
    # the folder (it refuses to replace files it does not write), back if it fails
    mkdir -p build/learned
    sums=build/learned/SHA256SUMS.before
    rm -f "$sums"
    [ -f "$draft/SHA256SUMS" ] && mv "$draft/SHA256SUMS" "$sums"
    $NICE "$DFLASH" train --target "$target" --draft-config "$cfg" --data "$data" --out "$draft" --steps "$STEPS" \
        $LEARNED_RECIPE --dtype bf16 --threads "$THREADS" --log "$LEARNED/draft-train.log" ||
        { [ -f "$sums" ] && mv "$sums" "$draft/SHA256SUMS"; die "dflash train failed: $draft is as it was"; }
    (cd "$draft" && sha256sum config.json model.safetensors > SHA256SUMS)
    echo "learned.sh: $draft written; SHA256SUMS:" >&2
    cat "$draft/SHA256SUMS" >&2
    if [ -f "$sums" ]; then
        if cmp -s "$sums" "$draft/SHA256SUMS"; then echo "learned.sh: the same bytes as before (the SHA256SUMS it had)" >&2
        else echo "learned.sh: NOT the bytes it had before: its SHA256SUMS was" >&2; cat "$sums" >&2; fi
    fi
    ;;
run)
    need_target
    need_draft
    need_file "$LEARNED/heldout.ids" "the held-out prompts (token ids, one prompt a line)"
    ids=$(grep -m 1 . "$LEARNED/heldout.ids" | tr -s ' ' ',')
    "$DFLASH" --target "$target" --draft "$draft" --ids "$ids" --max-new-tokens "${RUN_NEW:-64}" --rounds
    ;;
eval)
    need_target
    need_draft
    need_file "$LEARNED/heldout.ids" "the held-out prompts (token ids, one prompt a line)"
    # Greedy: DFlash at every block size and the baselines (copy, n-gram,
    # lookup) in ONE run, so that their wall and cpu ratios are against the
    # same target-only runs, every output checked equal to target-only
    # decoding's (dflash eval exits 2 when one is not); then DFlash at
    # temperatures 0.7 and 1. DFlash's rows go to build/learned/eval.tsv
    # (greedy first), the baselines' to eval-baselines.tsv; UPDATE=1 writes
    # the committed ones the learned chapter and docs/performance.md quote.
    if [ "${UPDATE:-0}" = 1 ]; then dest=$LEARNED; else dest=build/learned; mkdir -p "$dest"; fi
    mkdir -p build/learned
    t0=$(date +%s)
    "$DFLASH" eval --target "$target" --draft "$draft" --ids-file "$LEARNED/heldout.ids" --prompts "${PROMPTS:-64}" \
        --prompt-len "${PROMPT_LEN:-9}" --new "${EVAL_NEW:-128}" --methods dflash,copy,ngram,lookup --temperatures 0 \
        --log build/learned/eval-greedy.tmp || die "eval-learned: the greedy run failed"
    t1=$(date +%s)
    "$DFLASH" eval --target "$target" --draft "$draft" --ids-file "$LEARNED/heldout.ids" --prompts "${PROMPTS:-64}" \
        --prompt-len "${PROMPT_LEN:-9}" --new "${EVAL_NEW:-128}" --methods dflash --temperatures 0.7,1 \
        --log build/learned/eval-sampled.tmp || die "eval-learned: the sampled run failed"
    awk -F '\t' 'NR == 1 || $2 == "dflash"' build/learned/eval-greedy.tmp > build/learned/eval.tmp &&
        awk 'NR > 1' build/learned/eval-sampled.tmp >> build/learned/eval.tmp &&
        awk -F '\t' 'NR == 1 || $2 != "dflash"' build/learned/eval-greedy.tmp > build/learned/eval-baselines.tmp &&
        mv build/learned/eval.tmp "$dest/eval.tsv" && mv build/learned/eval-baselines.tmp "$dest/eval-baselines.tsv" ||
        die "eval-learned: could not write $dest/eval.tsv"
    rm -f build/learned/eval-greedy.tmp build/learned/eval-sampled.tmp
    echo "eval-learned: $dest/eval.tsv and $dest/eval-baselines.tsv in $(( $(date +%s) - t0 )) s" \
         "(the greedy run, DFlash and the baselines, all lossless: $(( t1 - t0 )) s)" \
         "$([ "$dest" = "$LEARNED" ] || echo "(UPDATE=1 writes the committed $LEARNED/ ones)")"
    ;;
regress)
    need_target
    need_draft
    : > "$LEARNED/draft-regression.txt.tmp"
    for B in 4 8 16; do
        head -n 4 "$LEARNED/heldout.ids" | while read -r line; do
            "$DFLASH" --target "$target" --draft "$draft" --ids "$(echo "$line" | tr -s ' ' ',')" --max-new-tokens 48 \
                --block-size $B --ignore-eos --rounds
        done | awk -v B=$B '/^round [0-9]+:/ { r++ } / accepted [0-9]+ \+ bonus/ { for (i = 1; i < NF; i++) if ($i == "accepted") n += $(i + 1) + 1 }
            END { printf "block %d rounds %d tokens %d\n", B, r, n }' >> "$LEARNED/draft-regression.txt.tmp"
    done
    mv "$LEARNED/draft-regression.txt.tmp" "$LEARNED/draft-regression.txt"
    cat "$LEARNED/draft-regression.txt"
    ;;
*)
    echo "usage: learned/learned.sh data|draft|experiments|experiment-full NAME|steps-full N|pitfall-full NAME|run|eval|regress" >&2
    exit 2
    ;;
esac
