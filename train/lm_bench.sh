#!/bin/sh
# train/lm_bench.sh - one training step of a target, C against PyTorch, on
# the same machine in one run (NOTES.md, "Training a target: speed"):
# train/lm_case (train/train.c's lm_step, --threads N) and train/lm_bench_torch.py
# (lm_oracle.py's step, one torch thread), alternating case by case so both
# see the same load. Not part of CI.
#
#   sh train/lm_bench.sh ORACLE_DIR CASE.json [THREADS]
#
# Builds train/lm_case into build/lm_case; prints every step of each and the
# steady-state ratio of processor times (steps 2..: the first step of each
# pays its page faults; processor time, as the machine is shared).
set -eu
oracle=$1 case=$2 threads=${3:-1}
mkdir -p build
cc -std=c11 -O2 -ffp-contract=off -fno-fast-math -D_POSIX_C_SOURCE=200809L -I. -o build/lm_case train/lm_case.c \
    dflash.c formats/json.c formats/load.c tokenizer/tokenizer.c trace.c formats/files.c formats/manifest.c formats/tracenames.c train/train.c \
    -lm -lpthread
c=$(mktemp) p=$(mktemp)
trap 'rm -f "$c" "$p"' EXIT
./build/lm_case "$case" - --threads "$threads" | tee "$c"
/usr/bin/python3 train/lm_bench_torch.py "$oracle" "$case" | tee "$p"
awk -v threads="$threads" '
    FNR == 1 { f++ }
    / cpu / { for (i = 1; i <= NF; i++) if ($i == "cpu") t = $(i + 1)
              n = $0; sub(/.*step /, "", n); sub(/:.*/, "", n)
              if (n + 0 >= 2) { sum[f] += t; cnt[f]++ } }
    END { if (cnt[1] && cnt[2]) printf "steady state (steps 2..), processor time: C (%d thread%s) %.3f s/step, torch (1 thread) %.3f s/step: torch/C = %.2f\n",
          threads, threads == 1 ? "" : "s", sum[1] / cnt[1], sum[2] / cnt[2], (sum[2] / cnt[2]) / (sum[1] / cnt[1]) }
' "$c" "$p"
