#!/bin/bash
# bench/cuda/slow-host.sh: issue 15's host independence with one lent host,
# side by side: tg128 of hybrid (cuda-only) and of llama.cpp's CUDA build
# (-ngl 99 -fa 1), each pinned to one core, alone and then with a busy loop
# pinned to the same core, so that the process gets about half of it (a
# host half as fast, as far as the decode's host work goes). Prints each
# one's tok/s and the share it keeps. Run it after llama.cpp's build (as
# fa.sh): H names the hybrid binary, B llama.cpp's bin folder, MODELS a
# subset ("tl-q4_0 7b-q4_k_m"). About two minutes.
set -u
. bench/cuda/lib.sh
H=${H:-.device/c/hybrid} B=${B:-/tmp/lcpp/build/bin}
MODELS=${MODELS:-tl-q4_0 7b-q4_k_m}
C=${C:-3} # the core both share
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
val() { grep -E "tg128" | head -1 | sed -E 's/.*\| *([0-9.]+) ± [0-9.]+ *\|.*/\1/'; }
hyb() { taskset -c $C $H bench --model $1 --policies cuda-only -p 0 -n 128 -r 3 --threads 1 2>&1 | hcol 5; }
lcp() { taskset -c $C $B/llama-bench -m $1 -p 0 -n 128 -r 3 -ngl 99 -fa 1 -t 1 2>/dev/null | val; }
for spec in $MODELS; do
  case $spec in
  tl-q4_0) set -- tinyllama-1.1b Q4_0 ;;
  tl-q4_k_m) set -- tinyllama-1.1b Q4_K_M ;;
  7b-q4_k_m) set -- llama-7b Q4_K_M ;;
  esac
  m=/tmp/$1-$2.gguf
  [ -f $m ] || $H synth --preset $1 --type $2 -o $m >/dev/null
  for r in 1 2; do
    h0=$(hyb $m) l0=$(lcp $m)
    taskset -c $C bash -c 'while :; do :; done' &
    busy=$!
    h1=$(hyb $m) l1=$(lcp $m)
    # how deep the chain of greedy steps grew, shared (runtime's grownDepth)
    c1=$(taskset -c $C $H bench --model $m --policies cuda-only -p 0 -n 128 -r 1 -d 1 --threads 1 --json 2>/dev/null | sed -E 's/.*"chain_depth":([0-9]+).*/\1/')
    kill $busy; wait $busy 2>/dev/null
    python3 - "$1 $2 r$r" "$h0" "$h1" "$l0" "$l1" "$c1" <<'PY'
import sys
name, h0, h1, l0, l1, c1 = sys.argv[1], *map(float, sys.argv[2:6]), sys.argv[6]
print(f"{name}: hybrid {h0:.1f} -> {h1:.1f} tok/s (keeps {100*h1/h0:.0f}%; up to {c1} steps queued), llama.cpp {l0:.1f} -> {l1:.1f} (keeps {100*l1/l0:.0f}%)")
PY
  done
done
