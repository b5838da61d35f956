#!/bin/bash
# bench/cuda/fa.sh: CUDA prefill and decode side by side with llama.cpp's
# CUDA build at its best (-fa 1: its FlashAttention kernels), in one run on
# the lent GPU (issue 15's table): pp512 and tg128, and tg128 after a
# 4096-token context (llama-bench -d 4096; hybrid bench -d 4096), on
# synthetic TinyLlama-1.1B Q4_0, Q4_K_M, Q8_0 and Llama-7B Q4_K_M, with each
# decode's weight reads as a fraction of the device-to-device copy rate
# (cuda.test's TestBandwidth, bytes read and written) and a summary table.
# bash bench/cuda/side-by-side.sh runs it after building llama.cpp.
#
#   here:  mkdir -p .device/c && CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/c/hybrid ./cmd/hybrid
#          CGO_ENABLED=1 go test -c -tags cuda -o .device/c/cuda.test ./devices/cuda
#          bash ../shared/tools/llamacpp-cuda.sh pack .device/c
#   there: bash .device/c/llamacpp-cuda.sh build .device/c/lcpp.tgz    # once, ~6 min
#          bash bench/cuda/fa.sh                                       # ~6 min
# H names the hybrid binary (its cuda.test beside it), B llama.cpp's bin
# folder, MODELS a subset ("tl-q4_0 tl-q4_k_m tl-q8_0 7b-q4_k_m").
set -u
# Where $OUT is a folder (the device tool's machine: its files come back),
# the whole output is also kept in $OUT/fa.txt: a command's returned text
# is only its last 12,000 characters.
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then exec > >(tee -a "$OUT/fa.txt") 2>&1; fi
H=${H:-.device/c/hybrid} B=${B:-/tmp/lcpp/build/bin}
T=$(cd "$(dirname "$H")" && pwd)/cuda.test
MODELS=${MODELS:-tl-q4_0 tl-q4_k_m tl-q8_0 7b-q4_k_m}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
copy=$([ -x "$T" ] && (cd devices/cuda && "$T" -test.v -test.run 'TestBandwidth' 2>&1 | grep -E "COPY") | tee /dev/stderr | sed -E 's/.*: ([0-9]+) GB\/s.*/\1/')
S=/tmp/fa-summary.txt; : >$S
# first NUMBER in the line of llama-bench or hybrid bench output matching $1
val() { grep -E "$1" | head -1 | sed -E 's/.*\| *([0-9.]+) ± [0-9.]+ *\|.*/\1/; s/.*: ([0-9.]+) ± .*/\1/'; }
for spec in $MODELS; do
  case $spec in
  tl-q4_0) set -- tinyllama-1.1b Q4_0 d ;;
  tl-q4_k_m) set -- tinyllama-1.1b Q4_K_M ;;
  tl-q8_0) set -- tinyllama-1.1b Q8_0 ;;
  7b-q4_k_m) set -- llama-7b Q4_K_M d ;;
  esac
  m=/tmp/$1-$2.gguf
  [ -f $m ] || $H synth --preset $1 --type $2 -o $m >/dev/null
  wb=$($H bench --model $m -p 0 -n 1 -r 1 --json 2>/dev/null | sed -E 's/.*"decode_weight_bytes":([0-9]+).*/\1/')
  echo "== $1 $2 ($(stat -L -c %s $m) bytes; a decode step reads $wb bytes of weights)"
  echo "llama.cpp -ngl 99 -fa 1:"
  lo=$($B/llama-bench -m $m -p 512 -n 128 -r 3 -ngl 99 -fa 1 2>/dev/null | grep -E "pp512|tg128" | tee /dev/stderr)
  echo "hybrid cuda-only:"
  ho=$($H bench --model $m --policies cuda-only -p 512 -n 128 -r 3 | grep -E "^\| cuda-only" | tee /dev/stderr)
  lpp=$(echo "$lo" | val pp512) ltg=$(echo "$lo" | val tg128)
  hpp=$(echo "$ho" | awk -F'|' '{gsub(/ /,"",$4); print $4}') htg=$(echo "$ho" | awk -F'|' '{gsub(/ /,"",$5); print $5}')
  ld= hd=
  if [ "${3:-}" = d ]; then
    echo "at depth 4096, llama.cpp:"
    ld=$($B/llama-bench -m $m -p 0 -n 128 -d 4096 -r 2 -ngl 99 -fa 1 2>/dev/null | grep -E "tg128" | tee /dev/stderr | val tg128)
    echo "at depth 4096, hybrid:"
    hd=$($H bench --model $m --policies cuda-only -p 0 -n 128 -d 4096 -r 2 --ctx-override | grep -E "tg128" | tee /dev/stderr | val tg128)
  fi
  echo "$1 $2|$lpp|$hpp|$ltg|$htg|$ld|$hd|$wb" >>$S
done
echo
echo "| file | llama.cpp pp512 | hybrid pp512 | ratio | llama.cpp tg128 | hybrid tg128 | ratio | hybrid weights GB/s (of copy rate $copy GB/s) | llama.cpp tg128 @ d4096 | hybrid | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
while IFS='|' read -r f lpp hpp ltg htg ld hd wb; do
  python3 - "$f" "$lpp" "$hpp" "$ltg" "$htg" "$ld" "$hd" "$wb" "$copy" <<'PY'
import sys
f, lpp, hpp, ltg, htg, ld, hd, wb, copy = sys.argv[1:]
num = lambda s: float(s) if s.replace('.', '', 1).isdigit() else None
lpp, hpp, ltg, htg, ld, hd, wb, copy = map(num, (lpp, hpp, ltg, htg, ld, hd, wb, copy))
r = lambda a, b: (f"**{b / a:.2f}**" if b >= a else f"{b / a:.2f}") if a and b else ""
g = lambda v: f"{v:.1f}" if v else ""
bw = f"{htg * wb / 1e9:.0f} ({100 * htg * wb / 1e9 / copy:.0f}%)" if htg and wb and copy else ""
print(f"| {f} | {g(lpp)} | {g(hpp)} | {r(lpp, hpp)} | {g(ltg)} | {g(htg)} | {r(ltg, htg)} | {bw} | {g(ld)} | {g(hd)} | {r(ld, hd)} |")
PY
done <$S
