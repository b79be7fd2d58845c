#!/bin/bash
# The CuTe RMSNorm's launch ladder on the GPU (issue 53): the sweep with the committed row_config.py and peers,
# then the same sweep (CuTe column only) with two other ladders patched into this machine's copy of the file:
#   V2: 128 elements a thread (clusters half as wide); V3: 32 elements a thread (clusters twice as wide).
#   OUT=DIR bash benchmarks/cute_ladder_gpu.sh     (after the stash calls of benchmarks/sweep_cute_gpu.sh)
# The patches edit MAX_ELEMENTS of row_config.py as it was at d242d2e and 4e61ad7 (where the runs of
# benchmarks/cute-2026-12-06/sweep/ were made); the committed ladder has no such constant, so on later commits
# V2 and V3 time the committed ladder again.
# Back under $OUT: v1/ (sweep.md, sweep.json, sweep.log), v2.log, v3.log.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
cd "$root"
OUT=$OUT/v1 SWEEP_TIMEOUT_S=200 bash benchmarks/sweep_cute_gpu.sh > /tmp/v1.txt 2>&1
rm -f "$OUT/v1/rows.jsonl"
cfg=examples/rmsnorm_cute/candidate/row_config.py
cp $cfg /tmp/row_config.keep
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
. "$root/benchmarks/cute_site.sh"
sed -i 's/^MAX_ELEMENTS = 64/MAX_ELEMENTS = 128/' $cfg
timeout 150 python3 examples/bench_sweep.py --only rmsnorm --dtypes bf16,fp32 --peers cute --measure-copy --no-compile > "$OUT/v2.log" 2>&1
cp /tmp/row_config.keep $cfg
sed -i 's/^MAX_ELEMENTS = 64/MAX_ELEMENTS = 32/' $cfg
timeout 150 python3 examples/bench_sweep.py --only rmsnorm --dtypes bf16,fp32 --peers cute --measure-copy --no-compile > "$OUT/v3.log" 2>&1
cp /tmp/row_config.keep $cfg
grep -h "copy ceiling measured" /tmp/v1.txt "$OUT/v2.log" "$OUT/v3.log" | head -3
echo "== V1 (committed): dtype shape | liger | quack | cute | ours =="
grep -E "^\| rmsnorm" "$OUT/v1/sweep.md" | awk -F'|' '{print $3 $4 "|" $7 "|" $8 "|" $9 "|" $10 "|" $18}' | cut -c1-150
for v in v2 v3; do echo "== $v: dtype shape | cute | ours =="
  grep -E "^\| rmsnorm" "$OUT/$v.log" | tail -10 | awk -F'|' '{print $3 $4 "|" $7 "|" $8 "|" $16}' | cut -c1-150; done
