#!/bin/bash
# bench/cuda/host-work.sh: how a greedy decode's speed depends on the host
# (issue 15's host independence), on a lent GPU: BenchmarkCUDAChainHostWork
# spends 0, 100, 200 and 400 µs of host time (a busy loop) before each step
# and takes it chained (queued before the pick before it is read) or waiting
# for that pick. Carry .device/blas with rt.test and hybrid built here:
#   CGO_ENABLED=1 go test -c -tags cuda -o .device/blas/rt.test ./runtime
#   CGO_ENABLED=1 go build -tags cuda -o .device/blas/hybrid ./cmd/hybrid
# There: bash bench/cuda/host-work.sh (about a minute).
set -u
P=$(cd ${P:-.device/blas} && pwd)
f=/tmp/tinyllama-1.1b-Q4_K_M.gguf
[ -f $f ] || $P/hybrid synth --preset tinyllama-1.1b --type Q4_K_M -o $f >/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(cd runtime && HYBRID_BENCH_MODEL=$f $P/rt.test -test.run XXX -test.bench BenchmarkCUDAChainHostWork -test.benchtime 5x 2>&1 | grep -E "Benchmark|FAIL|panic|ok")
