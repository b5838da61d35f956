#!/bin/bash
# bench/mac/bench.sh: the SIMULATED Apple M4 Pro (configs/hardware/m4-pro.yaml):
# metal-only against mac-hybrid (and ane-max, bench/mac/ane-max.yaml, which
# puts every op the Neural Engine supports on it), each fp16 placement twice:
# with the f32<->fp16 conversions at the boundary (the default: activations
# stay f32, the Neural Engine rounds inside each op) and per op (the
# ablation: a conversion pass of every input and output of every op on the
# fp16 device, charged 1.5 x the activations' f32 bytes at its bandwidth).
#
#   bash bench/mac/bench.sh [MODELS_DIR]   # default MODELS_DIR: $HYBRID_TEST_MODELS or ../shared/models
#
# Models: synthetic TinyLlama-1.1B Q4_K_M (`hybrid synth`, written once to
# bench/out/models/) and every *.gguf in MODELS_DIR. Every time in the
# "accounted" and "predicted" columns is modelled, not measured; the wall
# columns are this host's CPU computing the same values. Writes
# bench/out/mac/bench-*.{txt,json}.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
models=${1:-${HYBRID_TEST_MODELS:-../shared/models}}
out=bench/out/mac
mkdir -p "$out" bench/out/models
go build -o "$out/hybrid" ./cmd/hybrid
tiny=bench/out/models/tinyllama-1.1b-Q4_K_M.gguf
[[ -f $tiny ]] || "$out/hybrid" synth --preset tinyllama-1.1b --type Q4_K_M -o "$tiny"

pols=metal-only,mac-hybrid,bench/mac/ane-max.yaml
run() { # NAME MODEL ARGS...
	local name=$1 model=$2
	shift 2
	echo "== $name: hybrid bench --model $model $* --hardware m4-pro --policies $pols --conversions boundary,per-op"
	"$out/hybrid" bench --model "$model" "$@" --threads 2 --hardware m4-pro --policies "$pols" \
		--conversions boundary,per-op --json-out "$out/bench-$name.json" | tee "$out/bench-$name.txt"
}
run tinyllama-1.1b-Q4_K_M "$tiny" -p 512 -n 32 -r 1
for m in "$models"/*.gguf; do
	run "$(basename "$m" .gguf)" "$m" -p 64 -n 32 -r 1
done
