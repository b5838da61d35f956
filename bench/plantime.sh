#!/usr/bin/env bash
# Times `hybrid plan --policy auto` on TinyLlama-1.1B (synthetic Q4_0) with many
# devices: 1, 8 and 16 CPU devices (--cpus N, interchangeable), a hardware
# profile of fifteen simulated CPUs and a GPU, and one of sixteen unlike
# simulated CPUs (each its own bandwidth: nothing merges, the search is
# bounded and the plan says it is not proven optimal).
# Usage: bash bench/plantime.sh   (from the repository root)
set -euo pipefail
out=${OUT_DIR:-bench/out}
mkdir -p "$out"
go build -o "$out/hybrid" ./cmd/hybrid
model="$out/tinyllama-q4_0.gguf"
[ -f "$model" ] || "$out/hybrid" synth --preset tinyllama-1.1b --type Q4_0 -o "$model"
profile() { # $1: file, $2: "same" or "unlike"
  {
    echo "name: sixteen-$2"
    echo "source: made up to time the planner"
    echo "devices:"
    for i in $(seq 0 14); do
      bw=20; [ "$2" = unlike ] && bw=$((20 + i))
      echo "  - {name: cpu$i, kind: cpu, memory_gb: 64, bandwidth_gbs: $bw, tflops: 0.1, launch_us: 2}"
    done
    if [ "$2" = unlike ]; then
      echo "  - {name: cpu15, kind: cpu, memory_gb: 64, bandwidth_gbs: 35, tflops: 0.1, launch_us: 2}"
    else
      echo "  - {name: gpu, kind: cuda, memory_gb: 80, bandwidth_gbs: 3000, tflops: 60, launch_us: 3}"
      echo "links:"
      for i in $(seq 0 14); do echo "  - {from: cpu$i, to: gpu, latency_us: 10, bandwidth_gbs: 25}"; done
    fi
  } > "$1"
}
profile "$out/sixteen-same.yaml" same
profile "$out/sixteen-unlike.yaml" unlike
printf '| devices | wall s | max RSS MiB | plan note |\n|---|---:|---:|---|\n'
run() { # $1: label, rest: flags
  local label=$1; shift
  local t0 t1 note
  t0=$(date +%s.%N)
  note=$("$out/hybrid" plan --model "$model" --policy auto "$@" --format json | grep -o 'not proven optimal' | head -1 || true)
  t1=$(date +%s.%N)
  rss=$(/usr/bin/time -f %M "$out/hybrid" plan --model "$model" --policy auto "$@" 2>&1 >/dev/null | tail -1)
  printf '| %s | %.2f | %d | %s |\n' "$label" "$(echo "$t1 - $t0" | bc)" $((rss / 1024)) "${note:-exact}"
}
run "1 CPU (--cpus 1)" --cpus 1
run "8 CPUs (--cpus 8)" --cpus 8
run "16 CPUs (--cpus 16)" --cpus 16
run "15 simulated CPUs + a GPU" --hardware "$out/sixteen-same.yaml"
run "16 unlike simulated CPUs" --hardware "$out/sixteen-unlike.yaml"
