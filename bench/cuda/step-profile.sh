#!/bin/bash
# bench/cuda/step-profile.sh: where a decode step's time goes. For each file,
# hybrid's tg128 (its step time is 1/tok/s), then every kernel of a few
# decode steps timed alone by ncu (gpu__time_duration, clocks and caches
# left alone), summed by kernel name a step. The steps' kernels summed
# against the step's time says what the launches' gaps cost. ncu runs each
# file twice (a count of its launches, then the last 600): about 2 minutes
# for TinyLlama, past 5 for Llama-7B (M picks the files).
#   here:  build .device/f as in bench/cuda/fa.sh's header
#   there (carry .device/f): P=.device/f bash bench/cuda/step-profile.sh
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/f} && pwd)
[ -x $P/hybrid ] || tar -xJf $P/bins.txz -C $P
NCU=$(command -v ncu || echo /usr/local/cuda-13.0/bin/ncu)
M=${M:-"tinyllama-1.1b:Q4_0 llama-7b:Q4_K_M"}
for m in $M; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  [ -f $f ] || $P/hybrid synth --preset ${m%%:*} --type ${m##*:} -o $f >/dev/null
  tg=$($P/hybrid bench --model $f --policies cuda-only -p 0 -n 128 -r 3 2>&1 | hcol 5)
  echo "== $(basename $f): tg128 $tg tok/s, a step $(awk -v t=$tg 'BEGIN{printf "%.1f", 1e6/t}') µs"
  # The last 600 launches of a 48-token decode: whole steps of it.
  n=$($NCU --csv --metrics gpu__time_duration.sum --clock-control none --cache-control none \
    $P/hybrid bench --model $f --policies cuda-only -p 0 -n 48 -r 1 2>/dev/null | grep -c gpu__time_duration)
  $NCU --csv --metrics gpu__time_duration.sum --clock-control none --cache-control none --launch-skip $((n - 600)) --launch-count 600 \
    $P/hybrid bench --model $f --policies cuda-only -p 0 -n 48 -r 1 2>/dev/null | grep gpu__time_duration >/tmp/ncu.csv
  # CSV: "ID","PID","Process","Host","Kernel Name",...,"Metric Name","Metric Unit","Metric Value"
  awk -F'","' '{name=$5; sub(/\(.*/, "", name); u=$(NF-1); v=$NF; gsub(/[",]/, "", v); if (u == "us" || u == "usecond") v *= 1000; else if (u == "ms" || u == "msecond") v *= 1e6;
      c[name]++; s[name] += v; tot += v; if (name ~ /argmax|pick/) {if (lastA) per = NR - lastA; lastA = NR; nA++}}
    # A step is the launches from one argmax to the next; the window holds NR/per steps
    # (counting its argmax launches would count a cut step whole).
    END {steps = per ? NR / per : (nA ? nA : 1); printf "%d launches, %.1f steps: %.1f launches and %.1f µs of kernels a step\n", NR, steps, NR/steps, tot/steps/1000;
      for (k in c) printf "  %-28s %6.1f a step %8.2f µs each %8.1f µs a step\n", k, c[k]/steps, s[k]/c[k]/1000, s[k]/steps/1000}' /tmp/ncu.csv | sort -k6 -n -r
  head -c 600 /tmp/ncu.csv | head -3
done
