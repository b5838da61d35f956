#!/usr/bin/env python3
"""loops.py [-Dmacro=value ...]: the SASS instructions, dp4a (IDP) and loads
in the loops of the decode mat-vec's row loop (trip.cu: row_dotq of Q4_K,
Q6_K, Q4_0 and Q8_0), compiled for sm_90 with this machine's nvcc and the
given macros (kernels/q8.cuh's build switches), so that a change's
instruction count is seen before a GPU times it. The first loop a type
prints is the innermost: the unrolled trips. No GPU needed:
    python3 bench/cuda/sass/loops.py -DMV_XBASE=1
"""
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
with tempfile.TemporaryDirectory() as tmp:
    cubin = os.path.join(tmp, "trip.cubin")
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-O3", *sys.argv[1:], "-o", cubin, os.path.join(here, "trip.cu")], check=True)
    for k in ["ib_q4_k", "ib_q6_k", "ib_q4_0", "ib_q8_0"]:
        out = subprocess.run(["cuobjdump", "-sass", "-fun", k, cubin], capture_output=True, text=True, check=True).stdout
        ins = []
        for line in out.splitlines():
            m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
            if m:
                ins.append((int(m.group(1), 16), m.group(2)))
        for i, (a, t) in enumerate(ins):
            m = re.search(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)", t)
            if m and int(m.group(1), 16) < a:
                body = [x for x in ins[: i + 1] if x[0] >= int(m.group(1), 16)]
                n, d = len(body), sum("IDP" in x[1] for x in body)
                loads = sum(bool(re.search(r"LDG|LDS", x[1])) for x in body)
                print(f"{k[3:]} loop {int(m.group(1), 16):x}-{a:x}: {n} instructions, {d} dp4a, {loads} loads, {n / max(d, 1):.2f} a dp4a")
