#!/bin/bash
# build.sh: compiles refdump against the llama.cpp that
# ../shared/tools/llamacpp-setup.sh built (HYBRID_LLAMACPP, default
# ~/.cache/hybrid-llamacpp). Prints the binary's path.
set -euo pipefail
L=${HYBRID_LLAMACPP:-$HOME/.cache/hybrid-llamacpp}/llama.cpp
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../out/refdump}
mkdir -p "$(dirname "$out")"
g++ -O2 -std=c++17 -I"$L/include" -I"$L/ggml/include" "$here/refdump.cpp" \
  -L"$L/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$L/build/bin" -o "$out"
echo "$out"
