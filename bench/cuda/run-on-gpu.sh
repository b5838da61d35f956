#!/bin/bash
H=.device/e2e/hybrid
$H synth --preset tinyllama-1.1b --type Q4_0 -o /tmp/tl-q40.gguf >/dev/null
$H synth --preset tinyllama-1.1b --type Q4_K_M -o /tmp/tl-q4km.gguf >/dev/null
for m in /tmp/tl-q40.gguf /tmp/tl-q4km.gguf; do
  $H bench --model $m --policies cpu-only,cuda-only,auto,.device/e2e/capped.yaml -p 128 -n 64 -r 2 --threads 16
done
$H run --model /tmp/tl-q40.gguf --policy .device/e2e/capped.yaml --temp 0 -n 16 2>&1 | tail -12
$H run --model /tmp/tl-q40.gguf --policy cuda-only --transfers per-op --temp 0 -n 16 2>&1 | tail -10
