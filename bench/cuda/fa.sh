#!/bin/bash
# bench/cuda/fa.sh: CUDA prefill and decode side by side with llama.cpp's
# CUDA build at its best (-fa 1: its FlashAttention kernels), in one run on
# the lent H100 (issue 15's table): pp512 and tg128, and tg128 after a
# 4096-token context (llama-bench -d 4096; hybrid bench -d 4096), on
# synthetic TinyLlama-1.1B Q4_0, Q4_K_M, Q8_0 and Llama-7B Q4_K_M, with the
# device-to-device copy rate that decode's weight rates are compared to.
#
#   here:  mkdir -p .device/c && CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/c/hybrid ./cmd/hybrid
#          CGO_ENABLED=1 go test -c -tags cuda -o .device/c/cuda.test ./devices/cuda
#          bash ../shared/tools/llamacpp-cuda.sh pack .device/c
#   there: bash .device/c/llamacpp-cuda.sh build .device/c/lcpp.tgz    # once, ~6 min
#          bash bench/cuda/fa.sh                                       # ~5 min
set -u
H=${H:-.device/c/hybrid} B=${B:-/tmp/lcpp/build/bin}
T=$(cd "$(dirname "$H")" && pwd)/cuda.test
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[ -x "$T" ] && (cd devices/cuda && "$T" -test.v -test.run 'TestBandwidth' 2>&1 | grep -E "COPY")
for spec in "tinyllama-1.1b Q4_0 d" "tinyllama-1.1b Q4_K_M" "tinyllama-1.1b Q8_0" "llama-7b Q4_K_M d"; do
  set -- $spec
  m=/tmp/$1-$2.gguf
  [ -f $m ] || $H synth --preset $1 --type $2 -o $m >/dev/null
  echo "== $1 $2 ($(stat -L -c %s $m) bytes)"
  echo "llama.cpp -ngl 99 -fa 1:"
  $B/llama-bench -m $m -p 512 -n 128 -r 3 -ngl 99 -fa 1 2>/dev/null | grep -E "pp512|tg128"
  echo "hybrid cuda-only:"
  $H bench --model $m --policies cuda-only -p 512 -n 128 -r 3 | grep -E "^\| cuda-only"
  if [ "${3:-}" = d ]; then
    echo "at depth 4096, llama.cpp:"
    $B/llama-bench -m $m -p 0 -n 128 -d 4096 -r 2 -ngl 99 -fa 1 2>/dev/null | grep -E "tg128"
    echo "at depth 4096, hybrid:"
    $H bench --model $m --policies cuda-only -p 0 -n 128 -d 4096 -r 2 --ctx-override | tail -1
  fi
done
