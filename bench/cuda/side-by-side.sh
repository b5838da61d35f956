#!/bin/bash
# Side by side on the GPU machine: llama.cpp's CUDA build and hybrid on the same
# files, in one run. Run from the repository root there, with .device/e2e
# (hybrid, cuda.test, models/ with the shared GGUF files, capped.yaml) and
# .device/lcpp (from ../shared/tools/llamacpp-cuda.sh pack) carried; see
# bench/cuda/README.md. Parts: table (default: build llama.cpp with its
# FlashAttention kernels, then fa.sh's table: pp512, tg128, tg128 at depth
# 4096 against -fa 1, and decode's weight reads as a fraction of the copy
# rate), peer (build llama.cpp only), main (the policies against llama.cpp
# built without FlashAttention, at pp128/tg64), split (the memory-capped
# split against fixed layer splits), split-ab (auto against the best fixed
# splits, alternated), all (peer, main, split). H and LCPP name other
# folders for hybrid and the llama.cpp pack.
set -u
H=${H:-.device/e2e/hybrid}
LCPP=${LCPP:-.device/lcpp}
B=/tmp/lcpp/build/bin
part=${1:-table}

peer() {
  [ -x $B/llama-bench ] && return
  B=$(bash $LCPP/llamacpp-cuda.sh build $LCPP/lcpp.tgz) || { tail -20 /tmp/lcpp/build.log; exit 1; }
}

synth() { [ -f /tmp/tl-$1.gguf ] || $H synth --preset tinyllama-1.1b --type $1 -o /tmp/tl-$1.gguf >/dev/null; }

main() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
  (cd devices/cuda && ../../.device/e2e/cuda.test -test.v -test.run 'TestBandwidth' 2>&1 | grep -E "BANDWIDTH|COPY|LAUNCH|FAIL")
  for t in Q4_0 Q4_K_M Q8_0; do
    synth $t
    m=/tmp/tl-$t.gguf
    echo "== TinyLlama-1.1B $t: llama.cpp (CUDA, -ngl 99, built without its FlashAttention kernels)"
    $B/llama-bench -m $m -p 128 -n 64 -r 3 -ngl 99 2>/dev/null | grep -E "pp128|tg64"
    echo "== TinyLlama-1.1B $t: hybrid"
    $H bench --model $m --policies cpu-only,cuda-only,auto -p 128 -n 64 -r 3 --threads 16 | grep -E "POLICY|cpu-only|cuda-only|auto "
  done
  for m in .device/e2e/models/*.gguf; do
    echo "== $(basename $m): llama.cpp"
    $B/llama-bench -m $m -p 128 -n 64 -r 3 -ngl 99 2>/dev/null | grep -E "pp128|tg64"
    echo "== $(basename $m): hybrid"
    $H bench --model $m --policies cpu-only,cuda-only,auto -p 128 -n 64 -r 3 --threads 16 | grep -E "cpu-only|cuda-only|auto "
  done
  echo "== per-op transfers ablation, TinyLlama Q4_0, cuda-only (boundary, then per-op)"
  $H run --model /tmp/tl-Q4_0.gguf --policy cuda-only --temp 0 -n 64 2>&1 | grep generated
  $H run --model /tmp/tl-Q4_0.gguf --policy cuda-only --transfers per-op --temp 0 -n 64 2>&1 | grep generated
}

# split: the GPU capped at 300 MiB (half of TinyLlama Q4_0). auto, against
# every fixed layer split that fits: the first k blocks on the GPU, or the
# last k blocks and the output head (llama.cpp's -ngl), the rest on the CPU;
# and llama.cpp's own -ngl splits of the same file.
split() {
  synth Q4_0
  m=/tmp/tl-Q4_0.gguf
  pols=.device/e2e/capped.yaml
  for k in 4 8 10 12; do
    printf 'name: first-%d\nmemory:\n  cuda: 300MiB\nrules:\n  - layers: "0-%d"\n    device: cuda\n  - device: cpu\n' $k $((k - 1)) >/tmp/first-$k.yaml
    pols=$pols,/tmp/first-$k.yaml
  done
  for k in 4 6 8 9; do
    printf 'name: last-%d+head\nmemory:\n  cuda: 300MiB\nrules:\n  - layers: "%d-21"\n    device: cuda\n  - layers: "0-%d"\n    device: cpu\n  - ops: [rms_norm, mat_mul]\n    device: cuda\n  - device: cpu\n' $k $((22 - k)) $((21 - k)) >/tmp/last-$k.yaml
    pols=$pols,/tmp/last-$k.yaml
  done
  echo "== capped at 300 MiB: hybrid auto against fixed layer splits (TinyLlama Q4_0)"
  $H bench --model $m --policies cpu-only,$pols -p 64 -n 32 -r 2 --threads 16 | grep -vE "^\+"
  echo "== llama.cpp -ngl splits of the same file (last k blocks on the GPU)"
  $B/llama-bench -m $m -p 64 -n 32 -r 2 -ngl 0,4,8,10,12 2>/dev/null | grep -E "pp64|tg32"
  echo "== hybrid profile on this machine, then the capped plan with measured costs"
  $H profile --model $m -o /tmp/prof.yaml --threads 16 --steps 3 --prefill 0 2>&1 | tail -2
  $H run --model $m --policy .device/e2e/capped.yaml --profile /tmp/prof.yaml --temp 0 -n 32 2>&1 | tail -14
}

# split-ab: auto under the cap against the best fixed splits of the split
# table, alternated in four rounds (this host's CPU speed drifts by more than
# the difference), with 8 CPU threads so that the 16-core host keeps cores
# for the GPU's thread and the Go runtime.
split_ab() {
  synth Q4_0
  m=/tmp/tl-Q4_0.gguf
  for k in 11 12; do
    printf 'name: first-%d\nmemory:\n  cuda: 300MiB\nrules:\n  - layers: "0-%d"\n    device: cuda\n  - device: cpu\n' $k $((k - 1)) >/tmp/first-$k.yaml
  done
  printf 'name: last-9+head\nmemory:\n  cuda: 300MiB\nrules:\n  - layers: "13-21"\n    device: cuda\n  - layers: "0-12"\n    device: cpu\n  - ops: [rms_norm, mat_mul]\n    device: cuda\n  - device: cpu\n' >/tmp/last-9.yaml
  for r in 1 2 3 4; do
    echo "== round $r"
    $H bench --model $m --policies .device/e2e/capped.yaml,/tmp/first-11.yaml,/tmp/first-12.yaml,/tmp/last-9.yaml -p 64 -n 64 -r 2 --threads 8 | grep -E "^\| (auto|first|last)"
  done
}

case $part in
table) peer; H=$H B=$B bash "$(dirname "$0")/fa.sh" ;;
peer) peer ;;
main) peer; main ;;
split) peer; split ;;
split-ab) split_ab ;;
all) peer; main; split ;;
esac
