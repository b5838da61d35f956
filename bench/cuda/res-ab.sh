#!/bin/bash
# bench/cuda/res-ab.sh: the decode's mat-vec with the residual add (the o
# and down projections, MV_ADD) asks for the residual before each row's
# product, where it read it after the product's store before, a trip to L2
# that followed the row (devices/cuda/kernels/fused.cu, MV_RES_LATE). Checks
# it bit for bit (TestFusedDecodeIsExact, TestMVPreIsExact,
# TestFusedMVRopeVariants), the greedy chains, then alternates tg128 with
# HYBRID_CUDA_RES_LATE=1 and without, three times, on TinyLlama Q4_0, Q8_0,
# Q4_K_M and Llama-7B Q4_K_M. It prints "late wins" or "early wins" by the
# rounds' sums over the files: run it with nothing else on the host, as one
# disturbed round decides that. Thirty-seventh session, H200, nothing else
# running (bench/cuda/logs/issue15-2026-11-29-s37.txt, call E): Q4_0 1816 →
# 1825 tok/s, Q8_0 1459 → 1470, Q4_K_M 1644 → 1651, Llama-7B 565.9 → 567.1.
#
#   here:  as bench/cuda/nw-ab.sh, into .device/a
#   there (carry .device/a): P=.device/a bash bench/cuda/res-ab.sh
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/a} && pwd)
MODELS=${MODELS:-tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q8_0 tinyllama-1.1b:Q4_K_M llama-7b:Q4_K_M}
ab_setup
: >/tmp/res-ab.txt
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  for r in 1 2 3; do
    l=$(tg HYBRID_CUDA_RES_LATE=1) e=$(tg X=0)
    echo "$(basename $f) r$r at ${SECONDS}s: late $l early $e" | tee -a /tmp/res-ab.txt
  done
done
awk '{l += $(NF-2) / ($(NF-2) + $NF); n++} END {print (l / n > 0.5 ? "late wins" : "early wins"), "(late share", l / n ")"}' /tmp/res-ab.txt
echo "== done at ${SECONDS}s"
