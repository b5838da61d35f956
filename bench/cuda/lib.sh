# bench/cuda/lib.sh: helpers the bench/cuda scripts source.
# hcol N: column N of the cuda-only row of `hybrid bench`'s table on stdin
# (4: prompt tok/s, 5: decode tok/s).
hcol() { grep -E "^\| cuda-only" | awk -F'|' -v c="$1" '{gsub(/ /, "", $c); print $c}'; }

# ab_setup: the A/B scripts' start, with P the folder of the binaries
# (bins.txz: hybrid, cuda.test, runtime.test; vm/: stories260K files) and
# MODELS "preset:type ...": unpack the binaries, synthesize the missing
# models into /tmp on cores 8-15 while cuda.test's exactness tests
# (TestFusedDecodeIsExact, TestFusedMVRopeVariants, TestMVPreIsExact) and the
# greedy chains run on cores 0-7, then wait for the synths.
ab_setup() {
  [ -x $P/hybrid ] || tar -xJf $P/bins.txz -C $P
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  local m f
  for m in $MODELS; do
    f=/tmp/${m%%:*}-${m##*:}.gguf
    [ -f $f ] || (taskset -c 8-15 $P/hybrid synth --preset ${m%%:*} --type ${m##*:} -o $f </dev/null >/dev/null 2>&1 &)
  done
  echo "== exactness $(cd devices/cuda && timeout 200 taskset -c 0-7 $P/cuda.test -test.run 'TestFusedDecodeIsExact|TestFusedMVRopeVariants|TestMVPreIsExact' 2>&1 | tail -1) at ${SECONDS}s"
  echo "   chains $(cd runtime && HYBRID_TEST_MODELS=$P/vm timeout 90 taskset -c 0-7 $P/runtime.test -test.short -test.run 'TestCUDAGreedyChain|TestCUDASequences' 2>&1 | tail -1)"
  sleep 2
  while pgrep -f "hybrid synth" >/dev/null; do sleep 1; done
  echo "== synths at ${SECONDS}s"
}
# tg ENV...: tg128 of the file $f (hybrid bench -r 3, cuda-only, cores 0-7)
# with the environment ENV, its decode tok/s; a first argument HB=path runs
# that hybrid binary instead of $P/hybrid.
tg() {
  local hb=$P/hybrid
  case "$1" in HB=*) hb=${1#HB=} && shift && set -- X=0 "$@" ;; esac
  env "$@" taskset -c 0-7 $hb bench --model $f --policies cuda-only -p 0 -n 128 -r 3 2>&1 | hcol 5
}
# ab_rounds N LABEL=ENV...: for each file of MODELS, N rounds of tg128 with
# each setting in turn, a line a round ("LABEL tok/s ..."); ENV is one
# VAR=value (X=0 for none).
ab_rounds() {
  local n=$1 m r s line
  shift
  for m in $MODELS; do
    f=/tmp/${m%%:*}-${m##*:}.gguf
    for r in $(seq $n); do
      line="$(basename $f) r$r at ${SECONDS}s:"
      for s in "$@"; do line="$line ${s%%=*} $(tg ${s#*=})"; done
      echo "$line"
    done
  done
}
