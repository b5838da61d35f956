#!/bin/bash
# bench/policies.sh: compares placement policies on the same model and
# prompt lengths in one run (`hybrid bench --policies`): prefill and decode
# tokens/s, copies and bytes per decoded token, and the plan's predicted time
# per token next to the time the executor accounted (op times, modelled on
# simulated devices, plus copies) and the wall time on this machine.
#
#   bash bench/policies.sh [MODEL]    # default: synthetic TinyLlama-1.1B Q4_0
#
# Two comparisons: real devices (one CPU; two CPU devices splitting the
# cores, with real copies between them; the per-op ablation), and the
# simulated Apple M4 Pro (metal-only against mac-hybrid against auto), whose
# times are modelled, not measured. Writes bench/out/policies/*.{txt,json}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
m=${1:-bench/out/models/tinyllama-1.1b-Q4_0.gguf}
out=bench/out/policies
mkdir -p "$out" bench/out/models
go build -o bench/out/hybrid ./cmd/hybrid
[[ -f $m ]] || bench/out/hybrid synth --preset tinyllama-1.1b --type Q4_0 -o "$m"
printf 'name: cpu-split-per-op\ndescription: cpu-split with a host round trip around every op (the ablation)\ndevices: [cpu, "cpu:1"]\ntransfers: per-op\nrules:\n  - layers: "1-1000/2"\n    device: "cpu:1"\n  - device: cpu\n' > "$out/cpu-split-per-op.yaml"
args=(--model "$m" -p 64 -n 32 -r 2)
bench/out/hybrid bench "${args[@]}" --cpus 2 --policies "cpu-only,cpu-split,$out/cpu-split-per-op.yaml" | tee "$out/real.txt"
bench/out/hybrid bench "${args[@]}" --cpus 2 --policies "cpu-only,cpu-split,$out/cpu-split-per-op.yaml" --json > "$out/real.json"
bench/out/hybrid bench "${args[@]}" --hardware m4-pro --policies metal-only,mac-hybrid,auto | tee "$out/m4-pro.txt"
bench/out/hybrid bench "${args[@]}" --hardware m4-pro --policies metal-only,mac-hybrid,auto --json > "$out/m4-pro.json"
