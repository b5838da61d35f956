#!/bin/bash
# bench/cuda/chain-ab.sh (branch experiment/chained-greedy): the greedy
# decode that queues each step before the pick it takes as its token is read
# back (runtime/chain.go; the CUDA device's argmax_next keeps the pick and the
# next position on the GPU), checked and measured in one call on a lent GPU.
# Carry .device/chain with hybrid, cuda.test and rt.test built here at this branch:
#   mkdir -p .device/chain && CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/chain/hybrid ./cmd/hybrid
#   CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/chain/cuda.test ./devices/cuda
#   CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/chain/rt.test ./runtime
# There: bash bench/cuda/chain-ab.sh (about 4 minutes with the 7B, MODELS= a subset).
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/chain} && pwd)
H=$P/hybrid
MODELS=${MODELS:-tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q4_K_M llama-7b:Q4_K_M}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  [ -f $f ] || $H synth --preset ${m%%:*} --type ${m##*:} -o $f >/dev/null
done
echo "== the chained greedy tokens against steps that wait for each pick (stories260K, TinyLlama Q4_0)"
for bm in "" /tmp/tinyllama-1.1b-Q4_0.gguf; do
  (cd runtime && HYBRID_BENCH_MODEL=$bm timeout 120 $P/rt.test -test.v -test.run 'TestCUDAGreedyChain|TestForwardGreedy|TestGreedyChain' 2>&1 | grep -E "^(--- |FAIL|ok|PASS)|chained|panic" | head)
done
(cd devices/cuda && timeout 120 $P/cuda.test -test.v -test.run 'TestArgmax|TestFusedDecodeIsExact' 2>&1 | grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS: Test[A-Za-z]+ |panic" | head)
echo "== greedy tokens of hybrid run, chained and not (md5)"
for v in HYBRID_GREEDY_CHAIN=0 X=1; do
  env $v $H run --model /tmp/tinyllama-1.1b-Q4_0.gguf --policy cuda-only --temp 0 -n 64 --prompt "Once upon a time" 2>/dev/null | md5sum
done
echo "== tg128 -r 2 (tok/s): waiting (HYBRID_GREEDY_CHAIN=0) / chained, alternated twice"
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  for r in 1 2; do
    line="$(basename $f):"
    for v in HYBRID_GREEDY_CHAIN=0 X=1; do
      line="$line $(env $v $H bench --model $f --policies cuda-only -p 0 -n 128 -r 2 2>&1 | hcol 5)"
    done
    echo "$line"
  done
done
echo "== GPU and host time a step (HYBRID_CUDA_DEBUG=1): waiting / chained"
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  for v in HYBRID_GREEDY_CHAIN=0 X=1; do
    echo "$(basename $f) $v: $(env $v HYBRID_CUDA_DEBUG=1 $H bench --model $f --policies cuda-only -p 0 -n 128 -r 1 2>&1 | grep -E "replays took" | tail -1 | sed 's/.*replays took //')"
  done
done
