#!/bin/bash
# bench/cuda/final-checks.sh: issue 15's checks at the final kernels in two
# device calls of under 600 s each, the machine kept warm between them (the
# next call within its 30 s of idle time):
#
#   start   llama.cpp's CUDA build in the background (setsid, every core, at
#           nice 19 so that the suite keeps its cores: without it, in the
#           fortieth session, TestMatMul alone passed its 430 s there),
#           the four synthetic models (cores 8-15), then on cores 0-7 the
#           whole tagged cuda.test -test.short (up to SUITE_S, 430 s), the
#           greedy-chain tests and hybrid verify --device cuda
#   finish  the suite's tests that did not finish in start (go test's -skip
#           of those that passed; beside the build, TestMatMul alone took
#           380 s in the thirty-ninth session, against about 190 s for the
#           whole suite on a quiet host), then, once llama.cpp is built,
#           fa.sh's side-by-side table
#
# Each part prints its verdicts and leaves its whole output in $OUT
# (suite.txt, rest.txt, fa.txt); start's suite output also stays in
# /tmp/final-suite.txt, which finish reads.
#
#   here:  mkdir -p .device/f/vm
#          CGO_ENABLED=1 go build -tags cuda -ldflags="-s -w" -o .device/f/hybrid ./cmd/hybrid
#          CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/f/cuda.test ./devices/cuda
#          CGO_ENABLED=1 go test -c -tags cuda -ldflags="-s -w" -o .device/f/runtime.test ./runtime
#          (cd .device/f && tar -cJf bins.txz hybrid cuda.test runtime.test && rm hybrid cuda.test runtime.test)
#          cp ../shared/models/stories260K*.gguf .device/f/vm/
#          bash ../shared/tools/llamacpp-cuda.sh pack .device/f
#   there (carry .device/f): bash bench/cuda/final-checks.sh start
#                            bash bench/cuda/final-checks.sh finish
set -u
P=$(cd ${P:-.device/f} && pwd)
[ -x $P/hybrid ] || tar -xJf $P/bins.txz -C $P
OUT=${OUT:-/tmp}
B=/tmp/lcpp/build/bin
MODELS="tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q4_K_M tinyllama-1.1b:Q8_0 llama-7b:Q4_K_M"
verdict() { echo "pass $(grep -c -- '--- PASS' $1) fail $(grep -c -- '--- FAIL' $1), $(tail -1 $1)"; }
case ${1:-} in
start)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  [ -x $B/llama-bench ] || (setsid nohup nice -n 19 bash $P/llamacpp-cuda.sh build $P/lcpp.tgz </dev/null >/tmp/lcbuild.log 2>&1 &)
  for m in $MODELS; do
    f=/tmp/${m%%:*}-${m##*:}.gguf
    [ -f $f ] || (setsid nohup taskset -c 8-15 $P/hybrid synth --preset ${m%%:*} --type ${m##*:} -o $f </dev/null >/dev/null 2>&1 &)
  done
  (cd devices/cuda && timeout ${SUITE_S:-430} taskset -c 0-7 $P/cuda.test -test.short -test.v >/tmp/final-suite.txt 2>&1; echo "rc $?" >>/tmp/final-suite.txt)
  cp /tmp/final-suite.txt $OUT/suite.txt
  echo "== tagged suite at ${SECONDS}s: $(verdict $OUT/suite.txt)"
  echo "   chains $(cd runtime && HYBRID_TEST_MODELS=$P/vm timeout 120 taskset -c 0-7 $P/runtime.test -test.short -test.run 'Chain|TestCUDASequences' 2>&1 | tail -1)"
  echo "   verify $(taskset -c 0-7 $P/hybrid verify --device cuda --policies cuda-only,auto --models $P/vm 2>&1 | tail -1)"
  echo "== llama.cpp built: $([ -x $B/llama-bench ] && echo yes || echo not yet) at ${SECONDS}s" ;;
finish)
  # The top-level tests that passed or were skipped in start (its output
  # stays in /tmp while the machine is warm), skipped here.
  S=/tmp/final-suite.txt
  [ -f $S ] || { echo "no $S: run start first, on this machine"; exit 1; }
  if ! grep -q '^rc 0$' $S; then
    done=$(grep -E '^--- (PASS|SKIP): Test' "$S" | awk '{print $3}' | paste -sd'|')
    (cd devices/cuda && timeout 400 $P/cuda.test -test.short -test.v ${done:+-test.skip "^($done)\$"} >$OUT/rest.txt 2>&1; echo "rc $?" >>$OUT/rest.txt)
    echo "== the suite's rest at ${SECONDS}s: $(verdict $OUT/rest.txt)"
  fi
  while pgrep -f "hybrid synth" >/dev/null; do sleep 2; done
  while [ ! -x $B/llama-bench ] && [ $SECONDS -lt 400 ]; do sleep 5; done
  [ -x $B/llama-bench ] || { echo "llama.cpp not built:"; tail -5 /tmp/lcbuild.log; exit 1; }
  H=$P/hybrid timeout $((590 - SECONDS)) bash bench/cuda/fa.sh >/dev/null 2>&1
  echo "== fa at ${SECONDS}s"; tail -8 $OUT/fa.txt ;;
*) echo "usage: final-checks.sh start | finish" >&2; exit 2 ;;
esac
