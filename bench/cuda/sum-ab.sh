#!/bin/bash
# bench/cuda/sum-ab.sh: the decode mat-vecs with a norm (q, k, v; gate and
# up; the output) sum the squares of their input over the block with one
# barrier (block_sum_all in devices/cuda/kernels/common.cuh: every warp sums
# the warps' partial sums itself) where block_sum took two (warp 0 summed
# them and wrote the sum back through shared memory). The same butterfly
# over the same lanes gives every warp block_sum's value, so every product
# is the same bit for bit. Checks it (ab_setup's exactness tests and
# greedy chains), then alternates tg128 on the kernels built with
# -DMV_SUM_ALL=0 (sum2.ptx, loaded by HYBRID_CUDA_FUSED_PTX) and the
# embedded ones, twice, on TinyLlama Q4_0, Q4_K_M and Llama-7B Q4_K_M.
# devices/cuda/measure/stamps.cu measured the staging alone in chains of
# launches (µs a launch): 4096 columns 3.87 → 3.30, 2048 columns 2.52 → 2.45.
#
#   here:  as bench/cuda/nw-ab.sh, into .device/b, and
#          (cd devices/cuda && nvcc -ptx -arch=compute_90 -O3 -DMV_SUM_ALL=0 -o ../../.device/b/sum2.ptx kernels/fused.cu)
#          before the tar (add sum2.ptx to it)
#   there (carry .device/b): P=.device/b bash bench/cuda/sum-ab.sh
# SETUP=0 skips ab_setup (an orchestrating script that ran it already).
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/b} && pwd)
MODELS=${MODELS:-tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q4_K_M llama-7b:Q4_K_M}
[ "${SETUP:-1}" = 0 ] || ab_setup
[ -x $P/hybrid ] || tar -xJf $P/bins.txz -C $P
ab_rounds 2 "two barriers=HYBRID_CUDA_FUSED_PTX=$P/sum2.ptx" "one=X=0"
echo "== done at ${SECONDS}s"
