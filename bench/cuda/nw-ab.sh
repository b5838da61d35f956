#!/bin/bash
# bench/cuda/nw-ab.sh: the decode mat-vecs with a norm (q, k, v; gate and
# up; the output) copy the norm weight into shared memory before
# griddepcontrol.wait and before their first weights' loads (MV_NW_EARLY in
# devices/cuda/kernels/fused.cu), where they read it after the sum of
# squares before. Checks it bit for bit (TestFusedDecodeIsExact,
# TestFusedMVRopeVariants, TestMVPreIsExact), the greedy chains, then
# alternates tg128 with HYBRID_CUDA_NW_EARLY=0 and without, twice, on
# TinyLlama Q4_0, Q8_0, Q4_K_M and Llama-7B Q4_K_M. Thirty-seventh session,
# H200 (bench/cuda/logs/issue15-2026-11-29-s37.txt, calls B and C): Q4_0
# 1823 → 1847 tok/s, Q8_0 1468 → 1480, Q4_K_M 1643 → 1671, Llama-7B 554 → 568.
#
#   here:  mkdir -p .device/a && CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/a/hybrid ./cmd/hybrid
#          CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/a/cuda.test ./devices/cuda
#          CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/a/runtime.test ./runtime
#          mkdir -p .device/a/vm && cp ../shared/models/stories260K*.gguf .device/a/vm/
#          (cd .device/a && tar -cJf bins.txz hybrid cuda.test runtime.test && rm hybrid cuda.test runtime.test)
#   there (carry .device/a): P=.device/a bash bench/cuda/nw-ab.sh
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/a} && pwd)
MODELS=${MODELS:-tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q8_0 tinyllama-1.1b:Q4_K_M llama-7b:Q4_K_M}
ab_setup
ab_rounds 2 late=HYBRID_CUDA_NW_EARLY=0 early=X=0
echo "== done at ${SECONDS}s"
