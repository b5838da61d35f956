#!/bin/bash
# hybrid serve against llama-server on one GPU (the device tool's
# nvidia-h100-x1), side by side in one run: aggregate generated tokens/s and
# time to first token at 1, 4 and 16 concurrent streams (bench/serverload),
# TinyLlama-1.1B Q4_0 and Llama-7B Q4_K_M, both servers with one total
# context (CTX, default 4096) shared by N slots (-np N / --parallel N);
# llama-server with its default flash attention setting (auto: on, on CUDA).
# Carried in .device/mg (MG sets another folder): hybrid (-tags cuda),
# serverload, lcpp/lcpp.tgz.
# Parts: pack (here: llama.cpp's source from ../shared/tools/llamacpp-setup.sh
# into .device/mg/lcpp, with the scripts/ folder llama-server's build needs),
# prep (there: build llama-server and llama-batched-bench with CUDA and the
# FlashAttention kernels in the background, synthesize the models, wait for
# the build up to WAIT seconds), run. llama-server is built for any x86-64
# with AVX2 (GGML_NATIVE=OFF): the twelfth session's native build stopped
# with "Illegal instruction" at start; with every layer on the GPU its CPU
# code does not set the pace. The device machine goes back 30 s after
# a call ends, so prep (about 6 minutes) and run belong in one call:
#   WAIT=540 bash bench/cuda/serve.sh prep && bash bench/cuda/serve.sh run
# run takes TEMP (the requests' temperature, default 0: greedy; above 0 each
# server samples with its defaults, top-k 40 and top-p 0.95 on both),
# MODELS (default "tl 7b") and ONLY=hybrid (leave llama-server out, for an
# A/B of hybrid alone, such as HYBRID_DEVICE_TOPK=0).
set -u
MG=${MG:-.device/mg}
H=$MG/hybrid
L=$MG/serverload
S=/tmp/lcpp-srv/build/bin/llama-server
CTX=${CTX:-4096}
MAXT=${MAXT:-128}
PROMPT=${PROMPT:-64}
TEMP=${TEMP:-0}
MODELS=${MODELS:-tl 7b}
ONLY=${ONLY:-}

prep() {
  if [ ! -x $S ]; then
    cat >/tmp/build-server.sh <<'EOS'
D=/tmp/lcpp-srv; mkdir -p $D && tar -xzf ${MG:-.device/mg}/lcpp/lcpp.tgz -C $D
cmake -S $D -B $D/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DGGML_CUDA_FA=ON -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_CUDA_NCCL=OFF >$D/cmake.log 2>&1
cmake --build $D/build -j"$(nproc)" --target llama-server llama-batched-bench >$D/build.log 2>&1
EOS
    MG=$MG setsid nohup nice -n 10 bash /tmp/build-server.sh </dev/null >/tmp/build-server.out 2>&1 &
    echo "llama-server build started"
  fi
  [ -f /tmp/tl.gguf ] || $H synth --preset tinyllama-1.1b --type Q4_0 -o /tmp/tl.gguf >/dev/null
  [ -f /tmp/7b.gguf ] || $H synth --preset llama-7b --type Q4_K_M -o /tmp/7b.gguf >/dev/null
  for i in $(seq $((${WAIT:-500} / 5))); do [ -x $S ] && break; sleep 5; done
  [ -x $S ] && echo "llama-server built" || { echo "llama-server still building"; tail -3 /tmp/lcpp-srv/build.log; }
}

# waitup URL PID: waits for /health.
waitup() {
  for i in $(seq 600); do
    python3 -c "import sys,urllib.request; sys.exit(0 if urllib.request.urlopen(sys.argv[1] + '/health', timeout=2).status == 200 else 1)" "$1" >/dev/null 2>&1 && return 0
    kill -0 $2 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

# one NAME MODEL N: starts that server with N slots, warms it, measures.
one() {
  local name=$1 m=$2 n=$3 port=8091 pid
  if [ $name = hybrid ]; then
    $H serve --model $m --policy cuda-only --parallel $n --ctx $CTX --ctx-override --addr 127.0.0.1:$port >/tmp/srv.out 2>/tmp/srv.err &
  else
    $S -m $m -ngl 99 -np $n -c $CTX --port $port >/tmp/srv.out 2>/tmp/srv.err &
  fi
  pid=$!
  if ! waitup http://127.0.0.1:$port $pid; then echo "$name did not start"; tail -20 /tmp/srv.err; kill $pid 2>/dev/null; return; fi
  $L --url http://127.0.0.1:$port/v1 --streams 1 --requests 1 --max-tokens 8 --prompt-tokens $PROMPT >/dev/null 2>&1
  $L --url http://127.0.0.1:$port/v1 --streams $n --requests $((n < 2 ? 4 : 2 * n)) --max-tokens $MAXT --prompt-tokens $PROMPT --temperature $TEMP --json >/tmp/res/$name.s$n.json 2>/tmp/res/$name.s$n.err || tail -3 /tmp/res/$name.s$n.err
  kill -TERM $pid; wait $pid 2>/dev/null
}

run() {
  for m in $MODELS; do
    rm -rf /tmp/res; mkdir -p /tmp/res
    echo "== $m: $( [ $m = tl ] && echo TinyLlama-1.1B Q4_0 || echo Llama-7B Q4_K_M ), context $CTX shared by the slots, prompts of ~$PROMPT tokens, $MAXT tokens each, temperature $TEMP"
    for n in 1 4 16; do
      one hybrid /tmp/$m.gguf $n
      [ "$ONLY" = hybrid ] || one llama /tmp/$m.gguf $n
    done
    $L --compare /tmp/res
  done
}

pack() {
  local src
  src=$(bash "$(dirname "$0")/../../../shared/tools/llamacpp-setup.sh" | tail -1)/../..
  mkdir -p $MG/lcpp
  tar -C "$src" --exclude=build -czf $MG/lcpp/lcpp.tgz CMakeLists.txt cmake ggml src include common vendor tools licenses scripts
  echo "$MG/lcpp/lcpp.tgz"
}

case ${1:-} in
pack) pack ;;
prep) prep ;;
run) run ;;
*) echo "usage: serve.sh pack|prep|run" >&2; exit 2 ;;
esac
