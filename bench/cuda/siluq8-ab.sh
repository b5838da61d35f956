#!/bin/bash
# bench/cuda/siluq8-ab.sh: the down projection's input staged once, by the
# gate and up launch before it (mvwq_q4_0 and mvwq_q8_0 take whole groups of
# 32 rows a block and also write their SiLU·mul's output quantized,
# q8_group; the down projection's launch copies it in, MV_QIN, where each of
# its blocks quantized it before; q8Pair in devices/cuda/fuse_cuda.go pairs
# them). Checks it bit for bit (ab_setup's TestFusedDecodeIsExact, which
# also fails if no Q4_0 or Q8_0 layer was paired, TestFusedMVRopeVariants,
# TestMVPreIsExact; the greedy chains), then alternates tg128 three times:
# main's binary before the change (hybrid.main), this build with
# HYBRID_CUDA_SILU_Q8=0 (nothing paired) and this build. Thirty-ninth
# session, H200: TinyLlama Q4_0 1851 → 1897 tok/s, Q8_0 1479 → 1496, Q4_K_M
# (not paired) unchanged; the first version, with mvsp_q4_0's early loads in
# the grouped launch (mvsq_q4_0), lost 2.8% on Q4_0 (bench/RESULTS.md).
#
#   here:  as bench/cuda/nw-ab.sh into .device/q (bins.txz: hybrid,
#          cuda.test, runtime.test, and hybrid.main built from the commit
#          before; vm/: the stories260K files)
#   there (carry .device/q): P=.device/q bash bench/cuda/siluq8-ab.sh
set -u
. bench/cuda/lib.sh
P=$(cd ${P:-.device/q} && pwd)
MODELS=${MODELS:-tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q8_0 tinyllama-1.1b:Q4_K_M}
ab_setup
ab_rounds 3 "main=HB=$P/hybrid.main" "off=HYBRID_CUDA_SILU_Q8=0" "on=X=0"
echo "== done at ${SECONDS}s"
