#!/bin/bash
# bench/run.sh: hybrid against llama.cpp on the CPU, side by side in one run.
#
# For synthetic TinyLlama-1.1B in Q4_0, Q4_K_M and Q8_0 (written by
# `hybrid synth` into bench/out/models/ if missing), measures prefill (pp512)
# and decode (tg128) tokens/s with 2 threads, 3 repetitions, by
# `hybrid bench` and by llama.cpp's `llama-bench` on the same files, and the
# peak RSS of each process (/usr/bin/time), and the machine's read bandwidth
# (`hybrid membw`) that decode's weight traffic is a fraction of, and for
# Q4_0 decode at a depth of 4096 cached tokens (DEPTH=0 skips it). Prints a Markdown table (the one in
# bench/RESULTS.md) and keeps the raw JSON in bench/out/bench/.
#
# Needs llama.cpp's CPU tools: bash ../shared/tools/llamacpp-setup.sh
# (HYBRID_LLAMACPP, default ~/.cache/hybrid-llamacpp). Not run by tests or CI.
#
#   bash bench/run.sh [TYPES...]     # default: Q4_0 Q4_K_M Q8_0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
LL=${HYBRID_LLAMACPP:-$HOME/.cache/hybrid-llamacpp}/llama.cpp/build/bin
[[ -x $LL/llama-bench ]] || { echo "bench/run.sh: no llama-bench in $LL: run ../shared/tools/llamacpp-setup.sh" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench/run.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
types=("$@")
[[ ${#types[@]} -gt 0 ]] || types=(Q4_0 Q4_K_M Q8_0)
P=512 N=128 R=3 T=2
out=bench/out/bench
mkdir -p bench/out/models "$out"
go build -o bench/out/hybrid ./cmd/hybrid
# The ceiling of decode: how fast these threads read memory.
bench/out/hybrid membw --threads $T --json > "$out/membw.json"
for t in "${types[@]}"; do
  m=bench/out/models/tinyllama-1.1b-$t.gguf
  [[ -f $m ]] || bench/out/hybrid synth --preset tinyllama-1.1b --type "$t" -o "$m"
  stat -L -c %s "$m" > "$out/$t.size"  # -L: the file, where models/ holds links
  # f16 KV cache for the bench's context of max(P, N) positions: 22 layers ×
  # 256 K and V values × 2 bytes; llama-bench's default context is P+N.
  echo $(( 22 * (P + N) * 256 * 2 * 2 )) > "$out/$t.kv"
  cat "$m" > /dev/null   # both runs start with the file in the page cache
  /usr/bin/time -f %M -o "$out/$t.hybrid.rss" \
    bench/out/hybrid bench --model "$m" -p $P -n $N -r $R --threads $T --json > "$out/$t.hybrid.json"
  /usr/bin/time -f %M -o "$out/$t.llama.rss" \
    "$LL/llama-bench" -m "$m" -p $P -n $N -r $R -t $T -o json > "$out/$t.llama.json" 2> "$out/$t.llama.log"
  # Decode at a depth of 4096 cached tokens (past TinyLlama's 2048, as
  # llama-bench allows), llama.cpp with flash attention on, its best there.
  if [[ $t == Q4_0 && ${DEPTH:-1} != 0 ]]; then
    bench/out/hybrid bench --model "$m" -p 0 -n 32 -d 4096 --ctx-override -r 2 --threads $T --json > "$out/$t.hybrid.depth.json"
    "$LL/llama-bench" -m "$m" -p 0 -n 32 -d 4096 -fa 1 -r 2 -t $T -o json > "$out/$t.llama.depth.json" 2>> "$out/$t.llama.log"
  fi
done
{
  echo "$(date -u +%F) · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores · llama.cpp $("$LL/llama-bench" --version 2>&1 | grep -m1 -o 'version: .*' || true)"
  echo
  go run ./bench/report "$out"
} | tee "$out/table.md"
