#!/bin/bash
# bench/cuda/mv-ab.sh: builds of the decode kernels (kernels/fused.cu with
# other -D macros: MV_UNROLL, Q80_UNROLL, Q6K_UNROLL, Q40_TPB, Q80_TPB)
# against the embedded ones, with one hybrid binary and one cuda.test that
# load each build by HYBRID_CUDA_FUSED_PTX: TestDecodeMatVec at TinyLlama's
# and Llama-7B's shapes, each build's exactness (the tests that hold the
# fused, batched and single-op kernels to each other bit for bit), then
# tg128, alternated twice. The twenty-first and twenty-second sessions'
# variants are in bench/cuda/logs/issue15-2026-11-28-s21.txt and -s22.txt;
# the macros each build set are in kernels/q8.cuh and kernels/fused.cu
# (MV_XBASE, Q4K_U8HI, Q4K_WIDE, Q4K_TPB, MVW_THREADS*; Q40_WORDS and
# Q80_WORDS went with the file's Q4_0 and Q8_0 blocks: the device regroups them),
# each with its measurement (Q8K_REDUX, now the only code, and MV_NW_EARLY,
# dropped, were the twenty-second session's). The twenty-fifth session's
# -DMV_SILU_SEQ=1 became mvw2_q6_k (the twenty-sixth's: HYBRID_CUDA_MVW2=0
# and 1 switch it for hybrid bench). -DMV_STAGE_COPY=1 (timing only, its exactness line fails)
# copies a ready staged input instead of making it (=2: only in the launches
# without a norm, the o and down projections; thirty-eighth session, the
# tg128 lines of bench/cuda/logs/issue15-2026-11-29-s38.txt, call G): with main and
# -DMV_STAGE_SKIP=1, what an input quantized once by the launch before
# would save (V="main copy stage", X="", E="main copy stage"; the
# twenty-seventh session's run is in logs/issue15-2026-11-29-s27.txt). -DMV_STAGE_SKIP=1
# is a timing-only build (its exactness line fails: it stages no input)
# that says what a launch's input staging costs. -DMV_EVICT=0 gives the
# weights plain loads again in place of the evict-first ones (kernels/q8.cuh;
# the thirtieth session's A/B loaded 7106415's PTX instead, which also read
# each scale pair as two 16-bit loads).
#
#   here:  mkdir -p .device/v && (cd devices/cuda && cp kernels/fused.ptx ../../.device/v/main.ptx &&
#            nvcc -ptx -arch=compute_80 -O3 -DMV_UNROLL=4 -o ../../.device/v/u4.ptx kernels/fused.cu)
#          CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/v/hybrid ./cmd/hybrid
#          CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/v/cuda.test ./devices/cuda
#          (cd .device/v && tar -cJf bins.txz hybrid cuda.test *.ptx && rm hybrid cuda.test *.ptx)
#   there (carry .device/v): V="main u4" bash bench/cuda/mv-ab.sh
# V: the builds timed (about 30 s each); X: those checked for exactness
# (about 2.5 minutes each; default V but main and stage*, the timing-only
# builds); E: those run end to end (default V but stage*).
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/v} && pwd)
V=${V:-main}
X=${X-$(for v in $V; do case $v in main | stage* | copy*) ;; *) echo -n "$v " ;; esac; done)}
E=${E-$(for v in $V; do case $v in stage* | copy*) ;; *) echo -n "$v " ;; esac; done)}
[ -x $P/hybrid ] || tar -xJf $P/bins.txz -C $P
S=${S:-"Q4_0 2560x2048,Q4_0 5632x2048,Q8_0 2560x2048,Q8_0 5632x2048,Q4_K 4096x4096,Q4_K 12288x4096,Q4_K 11008x4096,Q6_K 4096x11008"}
for m in tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q4_K_M tinyllama-1.1b:Q8_0 llama-7b:Q4_K_M; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  [ -f $f ] || taskset -c 8-15 $P/hybrid synth --preset ${m%%:*} --type ${m##*:} -o $f >/dev/null &
done
cd devices/cuda
for v in $V; do
  echo "== $v: µs a launch and GB/s of weights, the wide blocks"
  HYBRID_CUDA_FUSED_PTX=$P/$v.ptx HYBRID_MATVEC_ONLY="$S" timeout 120 taskset -c 0-7 $P/cuda.test -test.v -test.run 'TestDecodeMatVec$' 2>&1 |
    grep -E "MATVEC|FAIL|panic" | sed -E "s/^.*MATVEC//; s/ GB\/s//g; s/one-wave.*wide/wide/"
done
for v in $X; do
  echo "$v exactness: $(HYBRID_CUDA_FUSED_PTX=$P/$v.ptx timeout 200 taskset -c 0-7 $P/cuda.test -test.run 'TestMatMul/[A-Z0-9_]+/.*/n=(1|5|13|27)$|TestFusedDecodeIsExact|TestFusedBatchIsExact|TestFusedMVRopeVariants|TestFusedMatMuls' 2>&1 | tail -1)"
done
cd ../..
while pgrep -f "hybrid synth" >/dev/null; do sleep 2; done
echo "== tg128 tok/s (hybrid bench -p 0 -n 128 -r 3), alternated"
for f in /tmp/tinyllama-1.1b-Q4_0.gguf /tmp/tinyllama-1.1b-Q4_K_M.gguf /tmp/tinyllama-1.1b-Q8_0.gguf /tmp/llama-7b-Q4_K_M.gguf; do
  for r in 1 2; do
    line="$(basename $f) r$r:"
    for v in $E; do
      line="$line $v $(HYBRID_CUDA_FUSED_PTX=$P/$v.ptx $P/hybrid bench --model $f --policies cuda-only -p 0 -n 128 -r 3 2>&1 | hcol 5)"
    done
    echo "$line"
  done
done
