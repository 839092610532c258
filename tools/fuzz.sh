#!/bin/sh
# tools/fuzz.sh TARGET... - runs each libFuzzer target build/fuzz/fuzz_TARGET
# for FUZZ_SECONDS (60) from its committed seeds (tests/fuzz/TARGET/, read
# only: new inputs go to build/fuzz/corpus/TARGET). Deterministic seed; a
# crash, a leak, a sanitizer report or a slow input (-timeout) stops the
# target and fails (the input is left in build/fuzz/crash-TARGET-*). make fuzz.
set -eu
secs=${FUZZ_SECONDS:-60}
for t in "$@"; do
    echo "== fuzz $t: $secs s"
    rm -rf build/fuzz/corpus/$t && mkdir -p build/fuzz/corpus/$t
    dict=
    case $t in safetensors|config|tokjson|explore|figures|batches|gguf) dict=-dict=tests/fuzz/json.dict;; esac
    if ./build/fuzz/fuzz_$t -seed=1 -max_total_time=$secs -max_len=8192 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 $dict -artifact_prefix=build/fuzz/crash-$t- \
        build/fuzz/corpus/$t tests/fuzz/$t > build/fuzz/$t.log 2>&1; then
        grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss)|INFO: seed corpus' build/fuzz/$t.log
    else
        grep -v '^#[0-9]' build/fuzz/$t.log; echo "fuzz $t: FAILED (log: build/fuzz/$t.log)"; exit 1
    fi
done
