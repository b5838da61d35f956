#!/bin/bash
# bench/cuda/unroll-ab.sh: the decode mat-vec's trips unrolled 4 (main), 2
# and 1 for the types other than Q6_K (MV_UNROLL in kernels/q8.cuh; Q6_K
# measured 2-3% faster at 2 in the twentieth session), timed by
# TestDecodeMatVec at TinyLlama's and Llama-7B's shapes, alternated twice,
# then each variant's exactness (the products do not depend on the unroll:
# the sums are taken in the same order). Build here, one cuda.test a variant:
#   mkdir -p .device/u && cp devices/cuda/kernels/fused.ptx /tmp/fused.main.ptx
#   for u in 4 2 1; do (cd devices/cuda && nvcc -ptx -arch=compute_80 -O3 -DMV_UNROLL=$u -o kernels/fused.ptx kernels/fused.cu) &&
#     CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/u/c$u.test ./devices/cuda; done
#   cp /tmp/fused.main.ptx devices/cuda/kernels/fused.ptx
#   (cd .device/u && tar -cJf bins.txz c4.test c2.test c1.test && rm c?.test)
# There (carry .device/u): bash bench/cuda/unroll-ab.sh (about 4 minutes).
set -u
P=$(cd ${P:-.device/u} && pwd)
[ -x $P/c4.test ] || tar -xJf $P/bins.txz -C $P
cd devices/cuda
for r in 1 2; do
  for s in "Q4_0 2560x2048" "Q4_0 5632x2048" "Q8_0 2560x2048" "Q4_K 4096x4096" "Q4_K 11008x4096" "Q4_K 4096x11008"; do
    for u in 4 2 1; do
      HYBRID_MATVEC_ONLY="$s" timeout 60 $P/c$u.test -test.v -test.run 'TestDecodeMatVec$' 2>&1 | grep -E "MATVEC|FAIL" | sed -E "s/^.*MATVEC/u$u/; s/ GB\/s//g"
    done
  done
done
for u in 2 1; do
  echo "== u$u exactness"
  timeout 120 $P/c$u.test -test.run 'TestMatMul/(Q4_0|Q4_K|Q8_0)/.*/n=(1|5|13|27)$|TestFusedDecodeIsExact|TestFusedBatchIsExact' 2>&1 | tail -3
done
