#!/bin/bash
# Nsight Compute on the CuTe RMSNorm, QuACK's and our CUDA C++ kernel at bf16 64K and 256K (issue 53's gap), after
# the stash calls of benchmarks/sweep_cute_gpu.sh:   OUT=DIR bash benchmarks/cute_profile_gpu.sh
# Back under $OUT: ncu-bf16-65536.txt, ncu-bf16-262144.txt (ncu's details per kernel), profile.log.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
cd "$root"
. "$root/benchmarks/cute_site.sh"
python3 -m kernelpilot.extension --build examples/rmsnorm/candidate --quiet > "$OUT/profile.log" 2>&1
for n in 65536 262144; do
  timeout 120 python3 benchmarks/cute_profile.py --n $n --dtype bf16 --time >> "$OUT/profile.log" 2>&1
  timeout 200 ncu --kernel-name regex:[Rr][Mm][Ss] --launch-skip 0 --launch-count 12 --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    python3 benchmarks/cute_profile.py --n $n --dtype bf16 > "$OUT/ncu-bf16-$n.txt" 2>&1
  echo "ncu n=$n: exit $?"
done
grep -E "median" "$OUT/profile.log"
for n in 65536 262144; do
  echo "== bf16 $n: kernel | duration | DRAM % | achieved occupancy % | registers | cluster | top stall =="
  python3 - "$OUT/ncu-bf16-$n.txt" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
for block in re.split(r"\n  (?=\S.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\))", text)[1:]:
    name = block.split("(")[0].strip()[:60]
    def get(label):
        m = re.search(r"^\s*" + re.escape(label) + r"\s+\S+\s+([\d.,]+)", block, re.M)
        return m.group(1) if m else "-"
    print(f"{name:60s} | {get('Duration')} | {get('DRAM Throughput')} | {get('Achieved Occupancy')} | "
          f"{get('Registers Per Thread')} | {get('Cluster Size')} | {get('Warp Cycles Per Issued Instruction')}")
PY
done
