#!/bin/bash
# newmodels.sh: run on the GPU machine from a folder holding a `-tags cuda` hybrid
# binary and vocab/ggml-vocab-{qwen2,gpt-2,llama-bpe}.gguf (copied from
# ../shared/models/vocab): synthesizes the new presets in several types, checks
# that CUDA's greedy tokens equal the CPU's (hybrid verify), then times cuda-only.
# Prepared here with: go build -tags cuda -o .device/hybrid ./cmd/hybrid; mkdir -p
# .device/vocab; cp ../shared/models/vocab/ggml-vocab-{qwen2,gpt-2,llama-bpe}.gguf
# .device/vocab/; cp bench/cuda/newmodels.sh .device/; then the device tool runs
# `bash .device/newmodels.sh` with carry [".device"].
cd "$(dirname "$0")"
mkdir -p m
s() { ./hybrid synth --preset "$1" --type "$2" --seed 1 --vocab "vocab/$3" -o "m/$1-$2.gguf" >/dev/null || echo "synth $1 $2 failed"; }
s smollm2-135m Q4_K_M ggml-vocab-gpt-2.gguf
s qwen2.5-0.5b Q4_K_M ggml-vocab-qwen2.gguf
s qwen2.5-0.5b IQ4_XS ggml-vocab-qwen2.gguf
s qwen3-0.6b Q8_0 ggml-vocab-qwen2.gguf
s qwen3-0.6b Q2_K ggml-vocab-qwen2.gguf
s llama-3.2-1b Q3_K ggml-vocab-llama-bpe.gguf
ls -la m
./hybrid verify --device cuda --models m -n 32 --policies cuda-only,auto 2>&1 | tail -60
for f in m/*.gguf; do
  ./hybrid bench --model "$f" --policies cuda-only -p 512 -n 128 -r 2 2>&1 | tail -4
done
