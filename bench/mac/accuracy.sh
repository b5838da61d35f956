#!/bin/bash
# bench/mac/accuracy.sh: what the SIMULATED Neural Engine's fp16 arithmetic
# does to the output. For every model in MODELS_DIR and each of its reference
# prompts (reference/<model>.p*.json), runs cpu-only and each policy over the
# simulated M4 Pro, greedy, 32 tokens, and compares with cpu-only: first-step
# logit error (max and mean |Δlogit| / max|logit|), identical leading tokens,
# the first divergence and cpu-only's top-1 margin there.
#
#   bash bench/mac/accuracy.sh [MODELS_DIR]   # default: $HYBRID_TEST_MODELS or ../shared/models
#
# metal-only computes in f32 (it must be exact); mac-hybrid puts silu·mul on
# the fp16 Neural Engine; ane-max (bench/mac/ane-max.yaml) every op the
# Neural Engine supports. Writes bench/out/mac/accuracy.{md,json}.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
models=${1:-${HYBRID_TEST_MODELS:-../shared/models}}
out=bench/out/mac
mkdir -p "$out"
go run ./bench/mac/accuracy -models "$models" -n 32 -hardware m4-pro \
	-policies metal-only,mac-hybrid,bench/mac/ane-max.yaml -json "$out/accuracy.json" | tee "$out/accuracy.md"
