#!/bin/bash
# bench/cuda/pre-ab.sh: the decode's Q4_0, Q8_0,
# Q4_K and Q6_K mat-vec launches of at most one block a multiprocessor
# (TinyLlama's o and down, and the q, k, v of Q4_0, Q8_0 and of Q4_K with a
# Q4_K v: HYBRID_CUDA_PRE_ROPE=0 leaves those out) on mvp_<type> or mvrp_,
# and Q4_0's gate and up on mvsp_q4_0 (HYBRID_CUDA_PRE_SILU=0 leaves it
# out), whose warps load their first row's
# first trips (four; two for Q4_K, one for Q6_K) into registers before
# griddepcontrol.wait (devices/cuda/measure/boundary.cu on an H200: 2048×2048
# 3.03 µs a phase as graph launches, 2.98 as PDL, 2.36 as PDL with the first
# row held). Checks it bit for bit
# (TestFusedDecodeIsExact: the unfused device on the compute_80 modules
# launched plainly; the fused ones on mvp_ where it applies), the greedy
# chains, then alternates tg128 with HYBRID_CUDA_PRE=0 (mvw_, as before),
# HYBRID_CUDA_PRE_ROPE=0, HYBRID_CUDA_PRE_SILU=0 and neither, twice, on
# TinyLlama Q4_0, Q8_0 and Q4_K_M. Thirty-third session, H200: Q4_0 1667 →
# 1729 tok/s, Q8_0 1353 → 1390, Q4_K_M 1563 → 1599, before Q4_0's q, k, v took
# it too (HYBRID_CUDA_PRE_ROPE=0 against it: 1709 → 1790;
# bench/cuda/logs/issue15-2026-11-29-s33.txt); thirty-fourth, the q, k, v of
# Q4_K (1600 → 1621) and of Q8_0 (1393 → 1438), Q4_0's gate and up (1780 →
# 1811; bench/cuda/logs/issue15-2026-11-29-s34.txt). Thirty-fifth session, these
# columns at main 638ea17 (call E of bench/cuda/logs/issue15-2026-11-29-s35.txt; mvw,
# no-rope, no-silu, all): Q4_0 1662 / 1739 / 1785 / 1811, Q8_0 1347 / 1390 / 1430 /
# 1432, Q4_K_M 1562 / 1597 / 1600 / 1621 tok/s.
#
#   here:  mkdir -p .device/n && CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/n/hybrid ./cmd/hybrid
#          CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/n/cuda.test ./devices/cuda
#          CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/n/runtime.test ./runtime
#          mkdir -p .device/n/vm && cp ../shared/models/stories260K*.gguf .device/n/vm/
#          (cd .device/n && tar -cJf bins.txz hybrid cuda.test runtime.test && rm hybrid cuda.test runtime.test)
#   there (carry .device/n): P=.device/n bash bench/cuda/pre-ab.sh    # about 3 minutes with the synths
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/n} && pwd)
MODELS="tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q8_0 tinyllama-1.1b:Q4_K_M"
ab_setup
for f in /tmp/tinyllama-1.1b-Q4_0.gguf /tmp/tinyllama-1.1b-Q8_0.gguf /tmp/tinyllama-1.1b-Q4_K_M.gguf; do
  for r in 1 2; do
    echo "$(basename $f) r$r: mvw $(tg HYBRID_CUDA_PRE=0) no-rope $(tg HYBRID_CUDA_PRE_ROPE=0) no-silu $(tg HYBRID_CUDA_PRE_SILU=0) all $(tg X=0)"
  done
done
echo "== done at ${SECONDS}s"
