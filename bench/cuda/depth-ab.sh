#!/bin/bash
# bench/cuda/depth-ab.sh: CUDA decode at depth 0 and after a 4096-token
# context, hybrid's decode attention by KV head (attention_g, the default)
# and by query head (HYBRID_CUDA_GQA=0), against llama.cpp's CUDA build with
# its FlashAttention kernels (-fa 1), alternated in one run on the lent H100:
# TinyLlama-1.1B Q4_0 (32 query heads on 4 KV heads of 64) and Llama-7B
# Q4_K_M (32 heads of 128).
#
#   here:  mkdir -p .device/c && CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/c/hybrid ./cmd/hybrid
#          cp bench/cuda/depth-ab.sh .device/c/ && bash ../shared/tools/llamacpp-cuda.sh pack .device/c
#   there: bash .device/c/llamacpp-cuda.sh build .device/c/lcpp.tgz    # once, ~6 min
#          ROUNDS="1 2" bash .device/c/depth-ab.sh                     # ~1 min a round
set -u
R=$(cd "$(dirname "$0")/../.." && pwd)
H=${H:-$R/.device/c/hybrid} B=${B:-/tmp/lcpp/build/bin}
for m in tinyllama-1.1b:Q4_0 llama-7b:Q4_K_M; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  [ -f $f ] || $H synth --preset ${m%%:*} --type ${m##*:} -o $f >/dev/null
done
for r in ${ROUNDS:-1 2}; do
  for m in tinyllama-1.1b-Q4_0 llama-7b-Q4_K_M; do
    f=/tmp/$m.gguf
    echo "== $m round $r"
    echo "llama d0 $($B/llama-bench -m $f -p 0 -n 128 -r 3 -ngl 99 -fa 1 2>/dev/null | grep tg128 | awk -F'|' '{print $(NF-1)}')"
    echo "llama d4096 $($B/llama-bench -m $f -p 0 -n 128 -d 4096 -r 2 -ngl 99 -fa 1 2>/dev/null | grep tg128 | awk -F'|' '{print $(NF-1)}')"
    for g in 1 0; do
      echo "hybrid GQA=$g d0 $(HYBRID_CUDA_GQA=$g $H bench --model $f --policies cuda-only -p 0 -n 128 -r 3 | grep -E '^\| cuda-only')"
      echo "hybrid GQA=$g d4096 $(HYBRID_CUDA_GQA=$g $H bench --model $f --policies cuda-only -p 0 -n 128 -d 4096 -r 2 --ctx-override | grep -E "tg128")"
    done
  done
done
