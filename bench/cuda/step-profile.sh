#!/bin/bash
# bench/cuda/step-profile.sh: where a decode step's time goes. For each file,
# hybrid's tg128 (its step time is 1/tok/s), then every kernel of a few
# decode steps timed alone by ncu (gpu__time_duration, clocks and caches
# left alone), summed by kernel name a step. The steps' kernels summed
# against the step's time says what the launches' gaps cost. ncu runs each
# file twice (a count of its launches, then the last 600): about 2 minutes
# for TinyLlama, past 5 for Llama-7B (M picks the files). DRAM=1 also
# reads each kernel's DRAM bytes (dram__bytes_read.sum, the same single
# pass) and prints, a kernel name, the MB it reads a launch and that over its
# time alone, against the copy rate (COPY, GB/s; 4211, the H200's, by
# default): what a launch's bytes take of its time.
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
  $NCU --csv --metrics gpu__time_duration.sum${DRAM:+,dram__bytes_read.sum} --clock-control none --cache-control none --launch-skip $((n - 600)) --launch-count 600 \
    $P/hybrid bench --model $f --policies cuda-only -p 0 -n 48 -r 1 2>/dev/null | grep -E 'gpu__time_duration|dram__bytes_read' >/tmp/ncu-all.csv
  grep gpu__time_duration /tmp/ncu-all.csv >/tmp/ncu.csv
  # CSV: "ID","PID","Process","Host","Kernel Name",...,"Metric Name","Metric Unit","Metric Value"
  awk -F'","' '{name=$5; sub(/\(.*/, "", name); u=$(NF-1); v=$NF; gsub(/[",]/, "", v); if (u == "us" || u == "usecond") v *= 1000; else if (u == "ms" || u == "msecond") v *= 1e6;
      c[name]++; s[name] += v; tot += v; if (name ~ /argmax|pick/) {if (lastA) per = NR - lastA; lastA = NR; nA++}}
    # A step is the launches from one argmax to the next; the window holds NR/per steps
    # (counting its argmax launches would count a cut step whole).
    END {steps = per ? NR / per : (nA ? nA : 1); printf "%d launches, %.1f steps: %.1f launches and %.1f µs of kernels a step\n", NR, steps, NR/steps, tot/steps/1000;
      for (k in c) printf "  %-28s %6.1f a step %8.2f µs each %8.1f µs a step\n", k, c[k]/steps, s[k]/c[k]/1000, s[k]/steps/1000}' /tmp/ncu.csv | sort -k6 -n -r
  head -c 600 /tmp/ncu.csv | head -3
  [ -n "${DRAM:-}" ] || continue
  # A launch's ID is the CSV's first field; its two rows are its time and bytes.
  awk -F'","' -v copy=${COPY:-4211} '{id=$1; name=$5; sub(/\(.*/, "", name); u=$(NF-1); v=$NF; gsub(/[",]/, "", v); nm[id]=name
      if ($(NF-2) ~ /gpu__time/) {if (u ~ /^us/) v *= 1000; else if (u ~ /^ms/) v *= 1e6; t[id]=v}
      else {if (u ~ /^K/) v *= 1e3; else if (u ~ /^M/) v *= 1e6; else if (u ~ /^G/) v *= 1e9; b[id]=v}}
    END {for (id in nm) {k=nm[id]; c[k]++; T[k]+=t[id]; B[k]+=b[id]}
      for (k in c) printf "  %-28s %5d launches %8.2f µs %8.2f MB each from DRAM: %6.0f GB/s, %3.0f%% of the copy rate\n", k, c[k], T[k]/c[k]/1000, B[k]/c[k]/1e6, B[k]/T[k], 100*B[k]/T[k]/copy}' /tmp/ncu-all.csv | sort -k4 -n -r
done
