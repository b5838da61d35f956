#!/bin/bash
# bench/cuda/capped.sh: a model bigger than the GPU (issue 14). hybrid's auto
# under a GPU memory cap against llama.cpp's -ngl sweep (its FlashAttention
# kernels on, op offload on: its best split), side by side in one run on the
# lent H100: prefill (pp512) and decode (tg128), at 8 and 16 CPU threads,
# with the GPU memory each process used at its peak (nvidia-smi, every 0.1 s).
#
#   here:  mkdir -p .device/c && CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/c/hybrid ./cmd/hybrid
#          cp bench/cuda/capped.sh .device/c/ && bash ../shared/tools/llamacpp-cuda.sh pack .device/c
#   there: bash .device/c/llamacpp-cuda.sh build .device/c/lcpp.tgz    # once, ~6 min
#          bash .device/c/capped.sh [tinyllama|llama7b|tinyllama-alt|llama7b-alt]...  # default: tinyllama
#
# tinyllama: synthetic TinyLlama-1.1B Q4_0 (636 MB) capped at 300 MiB, -ngl
# 8, 10, 12. llama7b: synthetic Llama-7B Q4_K_M capped at half its file,
# -ngl 12, 14, 16. hybrid's prefill is planned for its own shape: layers the
# decode plan leaves on the CPU are multiplied on the GPU with their weights
# streamed in, and attend there with their KV cells streamed in and back
# (planner.MakeStep). KV_AB=1 also runs hybrid with HYBRID_KV_STREAM=0 (those
# layers attend on the CPU). CAP_TINY and CAP_7B (MiB) set other caps, e.g. ones
# under which hybrid's peak GPU memory is at most llama.cpp's largest -ngl's.
# hybrid prints what its GPU held at the peak (weights, caches, streaming
# slots, activations, scratch) and what the driver holds; the cap covers the
# first three.
# Raw output in /tmp/capped and $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
H=$here/hybrid B=/tmp/lcpp/build/bin
out=/tmp/capped; mkdir -p $out

# gpumem LOG CMD...: runs CMD, appending its output to LOG, and prints the
# most GPU memory in use while it ran (MiB, all processes: the GPU is ours).
gpumem() {
  local log=$1; shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >$out/smi.txt 2>/dev/null & local smi=$!
  "$@" >>"$log" 2>&1
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  sort -n $out/smi.txt | tail -1
}

case_() {
  local name=$1 preset=$2 type=$3 capMiB=$4; shift 4
  local m=/tmp/$preset-$type.gguf
  [ -f $m ] || $H synth --preset $preset --type $type -o $m >/dev/null
  cat $m >/dev/null
  printf 'name: auto-capped\nmemory:\n  cuda: %dMiB\n' $capMiB >$out/$name.yaml
  echo "== $name: $(basename $m), GPU capped at $capMiB MiB"
  $H plan --model $m --policy $out/$name.yaml --tokens 512 2>&1 | grep -E "^note|predicted" | head -6
  for th in 8 16; do
    mem=$(gpumem $out/$name.hybrid.t$th.log $H bench --model $m --policies $out/$name.yaml -p 512 -n 128 -r 2 --threads $th)
    echo "hybrid auto-capped, $th threads (peak GPU memory $mem MiB):"
    grep -E "^\| auto-capped|held at most" $out/$name.hybrid.t$th.log | tail -2
    if [ "${KV_AB:-0}" = 1 ]; then
      mem=$(HYBRID_KV_STREAM=0 gpumem $out/$name.hybrid-nokv.t$th.log $H bench --model $m --policies $out/$name.yaml -p 512 -n 128 -r 2 --threads $th)
      echo "hybrid auto-capped, HYBRID_KV_STREAM=0 (the CPU's layers attend on the CPU), $th threads (peak GPU memory $mem MiB):"
      grep -E "^\| auto-capped" $out/$name.hybrid-nokv.t$th.log | tail -1
    fi
    for ngl in "$@"; do
      mem=$(gpumem $out/$name.llama.t$th.ngl$ngl.log $B/llama-bench -m $m -p 512 -n 128 -r 2 -t $th -ngl $ngl -fa 1)
      echo "llama.cpp -ngl $ngl -fa 1, $th threads (peak GPU memory $mem MiB):"
      grep -E "pp512|tg128" $out/$name.llama.t$th.ngl$ngl.log
    done
  done
}

# alt_ NAME MODEL CAP NGL: decode only (tg128), hybrid under the cap and
# llama.cpp at one -ngl alternated for ALT_ROUNDS rounds (default 5) at
# ALT_THREADS threads (default 16): on a host whose speed drifts from minute
# to minute (a shared 16-core VM), ratios of neighbouring runs.
alt_() {
  local name=$1 m=$2 capMiB=$3 ngl=$4 th=${ALT_THREADS:-16}
  printf 'name: auto-capped\nmemory:\n  cuda: %dMiB\n' $capMiB >$out/$name-alt.yaml
  echo "== $name alternated: $(basename $m), hybrid capped at $capMiB MiB against llama.cpp -ngl $ngl, $th threads, tg128"
  for r in $(seq 1 ${ALT_ROUNDS:-5}); do
    h=$($H bench --model $m --policies $out/$name-alt.yaml -p 0 -n 128 -r 2 --threads $th 2>&1 | grep -E '^\| auto-capped' | awk -F'|' '{print $5}')
    l=$($B/llama-bench -m $m -p 0 -n 128 -r 2 -t $th -ngl $ngl -fa 1 2>&1 | grep tg128 | awk -F'|' '{print $(NF-1)}')
    echo "round $r: hybrid $h tok/s, llama.cpp $l tok/s"
  done
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=(tinyllama)
for p in "${parts[@]}"; do
  case $p in
  tinyllama) case_ tinyllama tinyllama-1.1b Q4_0 ${CAP_TINY:-300} 8 10 12 ;;
  llama7b)
    m=/tmp/llama-7b-Q4_K_M.gguf
    [ -f $m ] || $H synth --preset llama-7b --type Q4_K_M -o $m >/dev/null
    case_ llama7b llama-7b Q4_K_M ${CAP_7B:-$(( $(stat -L -c %s $m) / 2 / 1048576 ))} 12 14 16 ;;
  tinyllama-alt)
    m=/tmp/tinyllama-1.1b-Q4_0.gguf
    [ -f $m ] || $H synth --preset tinyllama-1.1b --type Q4_0 -o $m >/dev/null
    alt_ tinyllama $m ${CAP_TINY:-300} 12 ;;
  llama7b-alt)
    m=/tmp/llama-7b-Q4_K_M.gguf
    [ -f $m ] || $H synth --preset llama-7b --type Q4_K_M -o $m >/dev/null
    alt_ llama7b $m ${CAP_7B:-$(( $(stat -L -c %s $m) / 2 / 1048576 ))} 16 ;;
  esac
done
[ -n "${OUT:-}" ] && cp -r $out "$OUT/" 2>/dev/null
exit 0
