#!/bin/bash
# bench/cuda/sampled.sh: a sampled decode on the GPU (hybrid run's default
# sampler: temperature 0.8, top-k 40, top-p 0.95, seed 1, 512 tokens) with
# its picks made on the GPU and its steps chained, against the same
# unchained (HYBRID_GREEDY_CHAIN=0: the device's top-k read back, the pick
# on the host) and with the logits read back (HYBRID_DEVICE_TOPK=0), and
# greedy (--temp 0) for scale; two rounds. Then chained and unchained
# pinned to one host core, alone and sharing it with a busy loop. H names
# the hybrid binary (built with -tags cuda), MODELS the synthetic files
# ("tinyllama-1.1b:Q4_0 llama-7b:Q4_K_M"), written to /tmp when missing.
# About three minutes with the 7B's synthesis.
set -u
H=${H:-.device/e2e/hybrid}
MODELS=${MODELS:-tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q4_K_M llama-7b:Q4_K_M}
C=${C:-3} # the core both share
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  [ -f $f ] || $H synth --preset ${m%%:*} --type ${m##*:} -o $f >/dev/null
done
dec() {
  env "$@" taskset -c ${CORES:-0-7} $H run --policy cuda-only --model $f -n 512 --seed 1 --temp ${T:-0.8} --json 2>/dev/null |
    python3 -c "import json,sys; d=json.load(sys.stdin); print('%.1f' % d['timings']['decode_tokens_per_s'])"
}
echo "decode tok/s: sampled chained / unchained / logits read back / greedy"
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  for r in 1 2; do echo "$m r$r: $(dec X=0) / $(dec HYBRID_GREEDY_CHAIN=0) / $(dec HYBRID_DEVICE_TOPK=0) / $(T=0 dec X=0)"; done
done
echo "sampled, on host core $C alone -> shared with a busy loop"
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  a1=$(CORES=$C dec X=0) a2=$(CORES=$C dec HYBRID_GREEDY_CHAIN=0)
  taskset -c $C bash -c 'while :; do :; done' &
  busy=$!
  b1=$(CORES=$C dec X=0) b2=$(CORES=$C dec HYBRID_GREEDY_CHAIN=0)
  kill $busy
  wait $busy 2>/dev/null
  echo "$m: chained $a1 -> $b1, unchained $a2 -> $b2"
done
