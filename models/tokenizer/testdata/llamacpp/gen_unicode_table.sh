#!/bin/sh
# Regenerates ../../unicode_table.go from a built llama.cpp: run by
# `go generate ./models/tokenizer/` (from models/tokenizer, as go generate
# does). LLAMACPP names the llama.cpp checkout, whose build/bin holds
# libllama.so; it defaults to the copy the project's tests use.
set -eu
L=${LLAMACPP:-$HOME/.cache/hybrid-llamacpp/llama.cpp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -std=c++17 -I"$L/src" testdata/llamacpp/unicode_table.cpp \
	-L"$L/build/bin" -lllama -Wl,-rpath,"$L/build/bin" -o "$tmp/unicode-table"
"$tmp/unicode-table" > "$tmp/unicode_table.go"
gofmt "$tmp/unicode_table.go" > unicode_table.go
