#!/bin/bash
# Two GPUs of one host (the device tool's nvidia-h200-x2): hybrid's plans
# over cuda:0 and cuda:1 checked against cpu-only, and side by side with
# llama.cpp's CUDA build split over the same GPUs (-sm layer / row, -ts and
# -ub sweeps, -fa 1) on synthetic Llama-7B Q4_K_M.
# Carried in .device/mg: hybrid and cuda.test (-tags cuda), models/ (the
# shared stories260K files), lcpp/ (../shared/tools/llamacpp-cuda.sh pack
# .device/mg/lcpp). Parts, run from the repository root there:
#   peer    start llama.cpp's build in the background (about 5 minutes on 32
#           cores) and synthesize the models
#   check   the GPUs, their link, TestCopyToPeer, TestDevice, TestMatMul
#   verify  hybrid verify --device cuda with every two-GPU policy, on a
#           prompt of over 128 tokens (so that it runs in micro-batches)
#   pipelined  TestCUDAPipelinedPrefill on TinyLlama, and the 3 GiB-capped
#           auto plan against cpu-only
#   wait    wait for llama.cpp's build (up to WAIT seconds, default 500)
#   bench   the speed table
# The machine goes back 30 s after a call ends: "peer check verify" in one
# call and "wait bench" at once in the next, or "peer pipelined wait bench"
# in one.
set -u
H=.device/mg/hybrid
B=/tmp/lcpp/build/bin
M7=/tmp/llama-7b-Q4_K_M.gguf
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

synth() { [ -f /tmp/$1-$2.gguf ] || $H synth --preset $1 --type $2 -o /tmp/$1-$2.gguf >/dev/null; }

# policies CAP: auto over both GPUs (and the CPU) with each GPU capped at
# CAP, layers alternating between the GPUs (every block boundary a
# GPU-to-GPU copy), halves (llama.cpp's -sm layer -ts 1/1) and one GPU.
policies() {
  printf 'name: two-gpus-capped\ndescription: auto over cuda:0 and cuda:1, each capped\ndevices: ["cuda:0", "cuda:1", cpu]\nmemory:\n  "cuda:0": %s\n  "cuda:1": %s\n' $1 $1 >/tmp/capped-$1.yaml
  printf 'name: two-gpus-alternating\ndescription: even blocks on cuda:0, odd on cuda:1\ndevices: ["cuda:0", "cuda:1"]\nrules:\n  - layers: "0-1000/2"\n    device: "cuda:0"\n  - layers: "1-1000/2"\n    device: "cuda:1"\n  - device: "cuda:0"\n' >/tmp/alternating.yaml
  printf 'name: two-gpus-halves\ndescription: the embedding and blocks 0-15 on cuda:0, the rest and the head on cuda:1 (llama.cpp -sm layer -ts 1/1)\ndevices: ["cuda:0", "cuda:1"]\nrules:\n  - ops: [embed]\n    device: "cuda:0"\n  - layers: "0-15"\n    device: "cuda:0"\n  - device: "cuda:1"\n' >/tmp/halves.yaml
  printf 'name: one-gpu\ndescription: every op on cuda:0\ndevices: ["cuda:0"]\n' >/tmp/one-gpu.yaml
}

# peak LABEL CMD...: runs CMD while sampling each GPU's memory in use, then
# prints the peak of each.
peak() {
  local label=$1; shift
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 100 >/tmp/mem.log 2>/dev/null &
  local smi=$!
  "$@"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  awk -F', ' -v l="$label" '{ if ($2 > m[$1]) m[$1] = $2 } END { printf "  peak GPU memory, %s:", l; for (g in m) printf " cuda:%s %d MiB", g, m[g]; print "" }' /tmp/mem.log
}

peer() {
  if [ ! -x $B/llama-bench ]; then
    setsid nohup bash .device/mg/lcpp/llamacpp-cuda.sh build .device/mg/lcpp/lcpp.tgz >/tmp/lcpp-build.out 2>&1 </dev/null &
    echo "llama.cpp build started"
  fi
  synth llama-7b Q4_K_M
  synth tinyllama-1.1b Q4_0
  ls -la /tmp/*.gguf
}

check() {
  nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv,noheader
  nvidia-smi topo -m
  (cd devices/cuda && ../../.device/mg/cuda.test -test.timeout 240s -test.run "${CHECK_TESTS:-TestCopyToPeer|TestDevice\$|TestMatMul}" 2>&1 | grep -E "^(--- FAIL|FAIL|ok|PASS)|panic" | head -40)
  $H devices
}

verify() {
  policies 2GiB
  mkdir -p /tmp/vm && ln -sf /tmp/tinyllama-1.1b-Q4_0.gguf $M7 /tmp/vm/
  cp .device/mg/models/stories260K.gguf .device/mg/models/stories260K-Q4_0.gguf /tmp/vm/ 2>/dev/null
  echo "== the pipelined prompt against the same micro-batches on one GPU (bit for bit)"
  (cd runtime && HYBRID_BENCH_MODEL=/tmp/tinyllama-1.1b-Q4_0.gguf timeout 120 ../.device/mg/rt.test -test.v -test.run 'TestCUDAPipelinedPrefill' 2>&1 | grep -E "^(--- |FAIL|ok|PASS)|pipelined|panic" | head)
  echo "== every two-GPU plan against cpu-only, the default prompt (one step)"
  timeout 200 $H verify --device cuda --models /tmp/vm -n 32 --threads 16 \
    --policies cuda-only,/tmp/halves.yaml,/tmp/alternating.yaml,/tmp/capped-2GiB.yaml 2>&1 | grep -E "^\| generate|checks"
  # 331 tokens: a prompt that runs in micro-batches on the halves (256 + 75).
  p="Once upon a time there was a little girl who lived in a village near the forest."
  p="$p $p $p $p $p $p $p $p $p $p"
  echo "== a prompt of 331 tokens, pipelined in micro-batches on the halves"
  timeout 150 $H verify --device cuda --models /tmp/vm -n 32 --threads 16 --prompt "$p" \
    --policies cuda-only,/tmp/halves.yaml 2>&1 | grep -E "^\| generate|checks"
  echo "== the capped plan of Llama-7B Q4_K_M at 3 GiB a GPU"
  policies 3GiB
  $H plan --model $M7 --policy /tmp/capped-3GiB.yaml --ctx 640 2>&1 | tail -12
}

# pipelined: the prompt pipelined over the GPUs against the same
# micro-batches on one GPU, bit for bit, on TinyLlama; and auto with both
# GPUs capped at 3 GiB (the split the bench runs) against cpu-only.
pipelined() {
  policies 3GiB
  (cd runtime && HYBRID_BENCH_MODEL=/tmp/tinyllama-1.1b-Q4_0.gguf timeout 120 ../.device/mg/rt.test -test.v -test.run 'TestCUDAPipelinedPrefill' 2>&1 | tail -4)
  mkdir -p /tmp/vc && ln -sf /tmp/tinyllama-1.1b-Q4_0.gguf $M7 /tmp/vc/
  timeout 200 $H verify --device cuda --models /tmp/vc -n 32 --threads 16 --policies /tmp/capped-3GiB.yaml 2>&1 | grep -E "^\| generate|checks"
  $H plan --model $M7 --policy /tmp/capped-3GiB.yaml --ctx 640 2>&1 | grep -E "^\| (cuda|BOUND)|prefill step"
}

wait_peer() {
  for i in $(seq $((${WAIT:-500} / 5))); do [ -x $B/llama-bench ] && break; sleep 5; done
  [ -x $B/llama-bench ] && echo "llama.cpp built" || { echo "llama.cpp still building"; tail -3 /tmp/lcpp/build.log; }
}

# bench: Llama-7B Q4_K_M (3.80 GiB) on one GPU and split over two;
# auto with each GPU capped at 3 GiB, so that neither holds the model.
bench() {
  policies 3GiB
  [ -x $B/llama-bench ] || { echo "llama.cpp is not built: run the parts peer and wait first"; return 1; }
  echo "== Llama-7B Q4_K_M: hybrid (pp512, tg128, -r 3)"
  # one-gpu with --ubatch: the same micro-batches on one GPU (what a
  # micro-batch costs); with 0: the default (256 on a chain).
  for run in ${HYBRID_RUNS:-one-gpu_-1 one-gpu_256 halves_-1 halves_0 capped-3GiB_-1 capped-3GiB_0}; do
    set -- ${run//_/ }
    echo "-- $1, --ubatch $2"
    peak "hybrid $1 ubatch $2" $H bench --model $M7 --policies /tmp/$1.yaml --ubatch $2 -p 512 -n 128 -r 3 --threads 16 2>&1 | grep -vE "^\+|^loading"
  done
  echo "== Llama-7B Q4_K_M: llama.cpp -fa 1 (pp512, tg128, -r 3)"
  lb() { peak "llama.cpp $*" $B/llama-bench -m $M7 -p 512 -n 128 -r 3 -ngl 99 -fa 1 "$@" 2>/tmp/lb.err | grep -E "pp512|tg128|peak GPU"; grep -iE "error|failed" /tmp/lb.err | head -3; }
  echo "-- one GPU"; CUDA_VISIBLE_DEVICES=0 lb
  for ub in 512 256; do echo "-- -sm layer -ts 1/1 -ub $ub"; lb -sm layer -ts 1/1 -ub $ub; done
  echo "-- -sm layer -ts 2/3"; lb -sm layer -ts 2/3
  echo "-- -sm row -ts 1/1"; lb -sm row -ts 1/1
}

for part in "$@"; do
  case $part in
  peer) peer ;;
  check) check ;;
  verify) verify ;;
  pipelined) pipelined ;;
  wait) wait_peer ;;
  bench) bench ;;
  *) echo "usage: multigpu.sh peer|check|verify|wait|bench ..." >&2; exit 2 ;;
  esac
done
