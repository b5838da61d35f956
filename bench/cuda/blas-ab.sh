#!/bin/bash
# bench/cuda/blas-ab.sh: a prompt's mat-muls on cuBLAS (weights decoded to
# f16, cublasGemmEx) against the device's own tensor-core kernels (mmt),
# checked and measured in one call on a lent GPU. Carry .device/blas with
# hybrid, cuda.test and rt.test built here (bins.txz, see bench/cuda/README.md).
# There: bash bench/cuda/blas-ab.sh (about 5 minutes with the 7B; MODELS= a subset).
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/blas} && pwd)
H=$P/hybrid
MODELS=${MODELS:-tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q4_K_M tinyllama-1.1b:Q8_0 llama-7b:Q4_K_M}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== where cuBLAS is"
ldconfig -p | grep -i "libcublas\.so" | head -4
ls /usr/local/cuda/lib64/libcublas.so* 2>/dev/null | head -3
if [ -z "${HYBRID_CUBLAS:-}" ] && ! ldconfig -p | grep -q "libcublas\.so" && [ ! -e /usr/local/cuda/lib64/libcublas.so ]; then
  f=$(find / -name 'libcublas.so.1[0-9]*' -not -path '*/proc/*' 2>/dev/null | sort | tail -1)
  [ -n "$f" ] && export HYBRID_CUBLAS=$f && echo "HYBRID_CUBLAS=$f"
fi
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  [ -f $f ] || $H synth --preset ${m%%:*} --type ${m##*:} -o $f >/dev/null
done
echo "== tests"
(cd devices/cuda && HYBRID_TEST_WANT_CUBLAS=1 timeout 300 $P/cuda.test -test.v -test.run 'TestBlasLoaded|TestMatMul$|TestFusedMatMuls' 2>&1 > $OUT/tests.txt; echo "rc $?")
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS: Test[A-Za-z]+ |panic|blas_cuda|cuBLAS" $OUT/tests.txt | head -20
grep -c "cublas" $OUT/tests.txt
echo "== TestPrefillMatMul (µs a mat-mul)"
(cd devices/cuda && HYBRID_PREFILL_N=${PN:-32,64,128,256,512} timeout 200 $P/cuda.test -test.v -test.run 'TestPrefillMatMul' 2>&1 | grep -E "PREFILL|FAIL|panic|no cuBLAS" > $OUT/prefill.txt)
cat $OUT/prefill.txt | sed 's/.*PREFILL/PREFILL/'
echo "== pp (tok/s): own kernels (HYBRID_CUBLAS=0) / cuBLAS, alternated twice"
for m in $MODELS; do
  f=/tmp/${m%%:*}-${m##*:}.gguf
  for p in 128 512; do
    for r in 1 2; do
      line="$(basename $f) pp$p:"
      for v in HYBRID_CUBLAS=0 X=1; do
        line="$line $(env $v $H bench --model $f --policies cuda-only -p $p -n 0 -r 2 2>&1 | hcol 4)"
      done
      echo "$line"
    done
  done
done
echo "== greedy tokens after a 300-token prompt, own kernels / cuBLAS (md5)"
P300=$(python3 -c "print(' '.join(['the cat sat on the mat and looked at the dog']*30))")
for v in HYBRID_CUBLAS=0 X=1; do
  env $v $H run --model /tmp/tinyllama-1.1b-Q4_0.gguf --policy cuda-only --temp 0 -n 32 --prompt "$P300" 2>/dev/null | md5sum
done
