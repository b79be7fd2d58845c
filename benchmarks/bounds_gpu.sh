#!/bin/bash
# Writes out of bounds on the GPU (issue 53: KernelBench's CuTe example was judged ok), one device call:
#   OUT=DIR [LIMIT_S=560] bash benchmarks/bounds_gpu.sh
# (after the calls that ran `bash .carry/01/stash.sh` and `.carry/02/stash.sh`; this one carries .carry/03 and .whl
# and starts with `bash .carry/03/stash.sh`, so the CuTe DSL's wheels are in /tmp/kp-stash/files).
# 1. tests/gpu/test_bounds_gpu.py (the guard bands alone: honest calls, stores past the end, a cache emptied);
# 2. tests/gpu/test_adversarial.py without the cases that break a worker on purpose (each case's verdict, the
#    new out_of_bounds_write and its Triton twin among them; every ok verdict must say in_bounds=True);
# 3. benchmarks/cute_gpu.sh: the CuTe example, its edits, KernelBench's CuTe example as it is and bound-checked
#    under the three rule sets, and the CuTe twins of the corpus cheats.
# Back under $OUT: bounds.tar.gz (every log), pytest-bounds.txt, pytest-adversarial.txt, cute-edits.json.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
limit=${LIMIT_S:-560}
start=$(date +%s)
left() { echo $(( limit - ($(date +%s) - start) )); }
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
cd "$root"
work=/tmp/bounds-out
mkdir -p "$work/cute"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_bounds_gpu.py > "$work/pytest-bounds.txt" 2>&1
echo "test_bounds_gpu: $(tail -1 "$work/pytest-bounds.txt")"
timeout 270 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_adversarial.py \
  -k "not hang and not crash and not oom and not background and not timer and not cute" > "$work/pytest-adversarial.txt" 2>&1
echo "test_adversarial: $(tail -1 "$work/pytest-adversarial.txt")"
grep -E "^(FAILED|ERROR)" "$work/pytest-adversarial.txt" | cut -c1-240 | head -8
OUT=$work/cute LIMIT_S=$(( $(left) - 10 )) bash benchmarks/cute_gpu.sh > "$work/cute-gpu.log" 2>&1
cp "$work/pytest-bounds.txt" "$work/pytest-adversarial.txt" "$OUT/" 2>/dev/null
cp "$work/cute/cute-edits.json" "$OUT/" 2>/dev/null
tar czf "$OUT/bounds.tar.gz" -C "$work" . 2>/dev/null
tail -30 "$work/cute-gpu.log" | cut -c1-260
