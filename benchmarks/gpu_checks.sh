#!/bin/bash
# Short GPU checks run ahead of a long step in the same device call (2026-12-03):
#   OUT=... bash benchmarks/gpu_checks.sh        (then: source $OUT/checks.env to take its verdict along)
# - tests/gpu/test_compare_gpu.py: the fused comparison equals the torch passes; when it fails,
#   checks.env turns the fused path off (KERNELPILOT_FUSED_COMPARE=0) for what follows
# - benchmarks/compare_speed.py: fused vs torch comparison time on the slow verdicts' sizes
# - benchmarks/trace_probe.py on KernelBench level1/46 (the "no GPU work at all" trace), when .kb is there
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
log="$OUT/checks.log"
dir="$OUT/checks"   # packed into $OUT/checks.tar.gz at the end (a call returns at most 8 files)
mkdir -p "$dir"
cd "$root"
: > "$OUT/checks.env"
if ! timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_compare_gpu.py > "$dir/compare-test.log" 2>&1; then
  echo "export KERNELPILOT_FUSED_COMPARE=0" > "$OUT/checks.env"
fi
{ echo "== compare test: $(tail -1 "$dir/compare-test.log")"; } >> "$log"
timeout 120 python3 benchmarks/compare_speed.py --out "$dir" >> "$log" 2>&1; echo "== compare_speed exit $?" >> "$log"
p46=$(ls "$root"/.kb/KernelBench/level1/46_*.py 2>/dev/null | head -1)
if [ -n "$p46" ]; then
  timeout 90 python3 benchmarks/trace_probe.py "$p46" --out "$dir" >> "$log" 2>&1; echo "== trace_probe exit $?" >> "$log"
fi
tar czf "$OUT/checks.tar.gz" -C "$OUT" checks && rm -rf "$dir"
cat "$log"
