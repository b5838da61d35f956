#!/bin/bash
# bench/cpu-host.sh: the CPU device against llama.cpp's CPU build, side by
# side in one run, on a many-core host (the H100 machine lent by the device
# tool: 16 cores, no Go there).
#
#   here:      bash bench/cpu-host.sh pack      # .build/cpuhost/{hybrid,lcpp.tgz,cpu-host.sh}
#   on host:   bash .build/cpuhost/cpu-host.sh build    # llama.cpp CPU tools, ~3 min on 16 cores
#              bash .build/cpuhost/cpu-host.sh run [THREADS...]   # default: 8 16
#              bash .build/cpuhost/cpu-host.sh ab   # alternated rounds of the CPU switches
#
# `run` writes synthetic TinyLlama-1.1B Q4_0 and Q4_K_M (hybrid synth), then
# for each thread count measures pp512 and tg128 (3 repetitions) with
# `hybrid bench` and `llama-bench` (CPU build, GGML_NATIVE, so its best
# kernels for that CPU), the peak RSS of each, the machine's read bandwidth
# (`hybrid membw`), and at the largest thread count decode (tg16) again
# while a competing process keeps every core busy (`yes` per core, niced 0
# like the benchmarks; each side given at most 60 s, an empty result when it
# runs out), and for Q4_0 decode at a depth of 4096 cached tokens. TYPES
# (default "Q4_0 Q4_K_M Q8_0") picks the files. Raw output goes to
# /tmp/cpuhost, and as cpuhost.tgz to $OUT (the device tool brings it back);
# here, `go run ./bench/report DIR` makes the table of bench/RESULTS.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case ${1:-} in
pack)
  root=$(cd "$here/.." && pwd)
  d=$root/.build/cpuhost
  mkdir -p "$d"
  (cd "$root" && go build -o "$d/hybrid" ./cmd/hybrid)
  bash "$root/../shared/tools/llamacpp-cuda.sh" pack "$d" >/dev/null
  rm -f "$d/llamacpp-cuda.sh"
  cp "$0" "$d/cpu-host.sh"
  echo "$d" ;;
build)
  D=/tmp/lcpp-cpu; mkdir -p $D && tar -xzf "$here/lcpp.tgz" -C $D
  cmake -S $D -B $D/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF >$D/cmake.log 2>&1
  cmake --build $D/build -j"$(nproc)" --target llama-bench >$D/build.log 2>&1
  echo $D/build/bin ;;
ab)
  # Alternated rounds on one machine: llama-bench, then hybrid with the
  # CPU device's switches (held mat-vecs, software prefetch) each way.
  H=$here/hybrid LB=/tmp/lcpp-cpu/build/bin/llama-bench
  for t in Q8_0 Q4_0; do
    m=/tmp/tinyllama-1.1b-$t.gguf
    [[ -f $m ]] || $H synth --preset tinyllama-1.1b --type $t -o $m >/dev/null
    cat $m >/dev/null
  done
  $H membw --threads 16
  lb() { $LB -m "$1" -p 0 -n 128 -r 3 -t "$2" 2>/dev/null | grep tg | awk -F'|' '{print $8}'; }
  hb() { env $3 $H bench --model "$1" -p 0 -n 128 -r 3 --threads "$2" | grep tg; }
  for r in 1 2; do
    for th in 16 8; do
      m=/tmp/tinyllama-1.1b-Q8_0.gguf
      echo "Q8_0 t$th r$r llama $(lb $m $th)"
      for v in "HYBRID_CPU_FUSE=1 HYBRID_CPU_PREFETCH=1" "HYBRID_CPU_FUSE=1 HYBRID_CPU_PREFETCH=0" "HYBRID_CPU_FUSE=0 HYBRID_CPU_PREFETCH=1"; do
        echo "Q8_0 t$th r$r $v $(hb $m $th "$v")"
      done
    done
    m=/tmp/tinyllama-1.1b-Q4_0.gguf
    echo "Q4_0 t16 r$r llama $(lb $m 16)"
    for v in HYBRID_CPU_PREFETCH=1 HYBRID_CPU_PREFETCH=0; do echo "Q4_0 t16 r$r $v $(hb $m 16 "$v")"; done
  done ;;
run)
  shift
  threads=("$@"); [[ ${#threads[@]} -gt 0 ]] || threads=(8 16)
  H=$here/hybrid LB=/tmp/lcpp-cpu/build/bin/llama-bench
  out=/tmp/cpuhost; rm -rf "$out"; mkdir -p "$out"
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
    echo "llama.cpp: $($LB --version 2>&1 | grep -m1 -o 'version: .*' || true)"
  } | tee "$out/machine.txt"
  types=(${TYPES:-Q4_0 Q4_K_M Q8_0})
  for t in "${types[@]}"; do
    m=/tmp/tinyllama-1.1b-$t.gguf
    [[ -f $m ]] || $H synth --preset tinyllama-1.1b --type $t -o $m >/dev/null
  done
  for th in "${threads[@]}"; do
    $H membw --threads "$th" --json | tee "$out/membw.t$th.json"
  done
  # peak RSS OUT CMD...: runs CMD, writing its peak RSS (KiB, VmHWM, read
  # every 0.1 s) to OUT; /usr/bin/time may be missing on the host.
  peak() {
    local o=$1 pid hwm=0 v rc; shift
    "$@" & pid=$!
    while kill -0 $pid 2>/dev/null; do
      v=$(awk '/VmHWM/{print $2}' /proc/$pid/status 2>/dev/null || true)
      [[ -n $v ]] && hwm=$v
      sleep 0.1
    done
    wait $pid; rc=$?
    echo $hwm >"$o"
    return $rc
  }
  for t in "${types[@]}"; do
    m=/tmp/tinyllama-1.1b-$t.gguf
    cat $m >/dev/null
    for th in "${threads[@]}"; do
      b=$out/$t.t$th
      stat -L -c %s $m >$b.size
      echo $(( 22 * 640 * 256 * 2 * 2 )) >$b.kv   # f16 K and V, 22 layers, 640 positions
      peak $b.hybrid.rss $H bench --model $m -p 512 -n 128 -r 3 --threads $th --json >$b.hybrid.json
      peak $b.llama.rss $LB -m $m -p 512 -n 128 -r 3 -t $th -o json >$b.llama.json 2>$b.llama.log
      # Decode at a depth of 4096 cached tokens, llama.cpp's flash attention on.
      if [[ $t == Q4_0 ]]; then
        $H bench --model $m -p 0 -n 32 -d 4096 --ctx-override -r 2 --threads $th --json >$b.hybrid.depth.json
        $LB -m $m -p 0 -n 32 -d 4096 -fa 1 -r 2 -t $th -o json >$b.llama.depth.json 2>>$b.llama.log
      fi
      # Decode under a competing load (one busy process per core), at the
      # largest thread count: llama.cpp's spinning threads can take minutes.
      if [[ $th == "${threads[-1]}" ]]; then
        pids=(); for _ in $(seq "$(nproc)"); do yes >/dev/null & pids+=($!); done
        timeout 60 $H bench --model $m -p 0 -n 16 -r 2 --threads $th --json >$b.hybrid.loaded.json || echo '{}' >$b.hybrid.loaded.json
        timeout 60 $LB -m $m -p 0 -n 16 -r 2 -t $th -o json >$b.llama.loaded.json 2>/dev/null || echo '[]' >$b.llama.loaded.json
        kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null || true
      fi
      echo "done $t threads $th"
    done
  done
  # The device tool brings back few files: one archive.
  [[ -n ${OUT:-} ]] && tar -czf "$OUT/cpuhost.tgz" -C "$out" . ;;
*) echo "usage: cpu-host.sh pack | build | run [THREADS...]" >&2; exit 2 ;;
esac
