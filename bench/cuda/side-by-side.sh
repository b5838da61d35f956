#!/bin/bash
# Side by side on the GPU: llama.cpp's CUDA build and hybrid, same files, one run.
B=$(bash .device/lcpp/llamacpp-cuda.sh build .device/lcpp/lcpp.tgz) || { tail -20 /tmp/lcpp/build.log; exit 1; }
H=.device/e2e/hybrid
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in Q4_0 Q4_K_M Q8_0; do
  m=/tmp/tl-$t.gguf
  $H synth --preset tinyllama-1.1b --type $t -o $m >/dev/null
  echo "== $t llama.cpp (CUDA, -ngl 99, no flash-attention kernels)"
  $B/llama-bench -m $m -p 128 -n 64 -r 3 -ngl 99 2>/dev/null | grep -E "pp128|tg64"
  echo "== $t hybrid"
  $H bench --model $m --policies cuda-only,auto -p 128 -n 64 -r 3 --threads 16 | grep -E "cuda-only|auto "
done
