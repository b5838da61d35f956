#!/bin/bash
# Two GPUs of one host (the device tool's nvidia-h200-x2): hybrid's plans
# over cuda:0 and cuda:1 checked against cpu-only, and side by side with
# llama.cpp's CUDA build split over the same GPUs (-sm layer / row, -fa 1).
# Run from the repository root there with .device/mg carried: hybrid,
# cuda.test, lcpp/ (../shared/tools/llamacpp-cuda.sh pack .device/mg/lcpp).
# Parts: peer (start llama.cpp's build in the background), check, verify,
# bench.
set -u
H=.device/mg/hybrid
B=/tmp/lcpp/build/bin
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

synth() { [ -f /tmp/$1-$2.gguf ] || $H synth --preset $1 --type $2 -o /tmp/$1-$2.gguf >/dev/null; }

# policies CAP0 CAP1: auto over both GPUs under per-GPU caps, and layers
# alternating between the GPUs (every block boundary a GPU-to-GPU copy).
policies() {
  printf 'name: two-gpus-capped\ndescription: auto over cuda:0 and cuda:1, each capped\ndevices: ["cuda:0", "cuda:1", cpu]\nmemory:\n  "cuda:0": %s\n  "cuda:1": %s\n' $1 $2 >/tmp/capped-$1.yaml
  printf 'name: two-gpus-alternating\ndescription: even blocks on cuda:0, odd on cuda:1\ndevices: ["cuda:0", "cuda:1"]\nrules:\n  - layers: "0-1000/2"\n    device: "cuda:0"\n  - layers: "1-1000/2"\n    device: "cuda:1"\n  - device: "cuda:0"\n' >/tmp/alternating.yaml
  printf 'name: two-gpus-halves\ndescription: blocks 0-15 on cuda:0, the rest and the head on cuda:1 (llama.cpp -sm layer -ts 1/1)\ndevices: ["cuda:0", "cuda:1"]\nrules:\n  - layers: "0-15"\n    device: "cuda:0"\n  - device: "cuda:1"\n' >/tmp/halves.yaml
  printf 'name: one-gpu\ndescription: every op on cuda:0\ndevices: ["cuda:0"]\n' >/tmp/one-gpu.yaml
}

# peak LABEL CMD...: runs CMD while sampling each GPU's memory in use, then
# prints the peak of each.
peak() {
  local label=$1; shift
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 >/tmp/mem.log 2>/dev/null &
  local smi=$!
  "$@"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  awk -F', ' -v l="$label" '{ if ($2 > m[$1]) m[$1] = $2 } END { printf "peak GPU memory, %s:", l; for (g in m) printf " cuda:%s %d MiB", g, m[g]; print "" }' /tmp/mem.log >&2
}

# peer: builds llama.cpp in the background, synthesizes the 7B file, and
# waits for the build (up to WAIT seconds, default 500).
peer() {
  if [ ! -x $B/llama-bench ]; then
    setsid nohup bash .device/mg/lcpp/llamacpp-cuda.sh build .device/mg/lcpp/lcpp.tgz >/tmp/lcpp-build.out 2>&1 < /dev/null &
    echo "llama.cpp build started"
  fi
  synth llama-7b Q4_K_M
  for i in $(seq $((${WAIT:-500} / 5))); do [ -x $B/llama-bench ] && break; sleep 5; done
  [ -x $B/llama-bench ] && echo "llama.cpp built" || { echo "llama.cpp still building"; tail -3 /tmp/lcpp/build.log; }
}

check() {
  nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader
  nvidia-smi topo -m
  (cd devices/cuda && ../../.device/mg/cuda.test -test.v -test.run 'TestCopyToPeer|TestDevice$' 2>&1 | grep -vE "^=== RUN" | head -30)
  $H devices
}

verify() {
  policies 2GiB 2GiB
  synth tinyllama-1.1b Q4_0
  synth llama-7b Q4_K_M
  mkdir -p /tmp/vm && ln -sf /tmp/tinyllama-1.1b-Q4_0.gguf /tmp/llama-7b-Q4_K_M.gguf /tmp/vm/
  cp .device/mg/models/*.gguf /tmp/vm/ 2>/dev/null
  policies 350MiB 350MiB; cp /tmp/capped-350MiB.yaml /tmp/capped-small.yaml
  policies 2GiB 2GiB
  $H verify --device cuda --models /tmp/vm -n 32 --threads 16 --policies cuda-only,/tmp/alternating.yaml,/tmp/capped-2GiB.yaml,/tmp/capped-small.yaml 2>&1 | tail -40
  echo "== the capped plan of Llama-7B Q4_K_M"
  $H plan --model /tmp/llama-7b-Q4_K_M.gguf --policy /tmp/capped-2GiB.yaml 2>&1 | tail -25
  echo "== copy costs measured"
  $H profile --model /tmp/tinyllama-1.1b-Q4_0.gguf -o /tmp/prof.yaml --threads 16 --steps 2 --prefill 0 >/dev/null 2>&1; grep -A12 -i "copies" /tmp/prof.yaml | head -40
}

# bench: Llama-7B Q4_K_M (3.9 GiB of weights, 2 GiB of f16 KV cache at
# its 4096 context) with each GPU capped at 3 GiB, so that neither holds it.
bench() {
  policies 3GiB 3GiB
  m=/tmp/llama-7b-Q4_K_M.gguf
  synth llama-7b Q4_K_M
  [ -x $B/llama-bench ] || { echo "llama.cpp is not built: run the part peer first (and wait for it)"; return 1; }
  echo "== Llama-7B Q4_K_M: hybrid"
  for p in one-gpu halves alternating; do
    peak "hybrid $p" $H bench --model $m --policies /tmp/$p.yaml -p 512 -n 128 -r 2 --threads 16 2>&1 | grep -vE "^\+"
  done
  echo "== Llama-7B Q4_K_M: llama.cpp, -fa 1: one GPU, -sm layer, -sm row"
  peak "llama.cpp one GPU" env CUDA_VISIBLE_DEVICES=0 $B/llama-bench -m $m -p 512 -n 128 -r 2 -ngl 99 -fa 1 2>/dev/null | grep -E "pp512|tg128"
  for sm in layer row; do
    peak "llama.cpp -sm $sm" $B/llama-bench -m $m -p 512 -n 128 -r 2 -ngl 99 -fa 1 -sm $sm -ts 1/1 2>/dev/null | grep -E "pp512|tg128"
  done
}

case ${1:-} in
peer) peer ;;
check) check ;;
verify) verify ;;
bench) bench ;;
*) echo "usage: multigpu.sh peer|check|verify|bench" >&2; exit 2 ;;
esac
