#!/bin/bash
# One device call that checks a session's final commit (2026-12-06): the main-path smoke (benchmarks/gpu_smoke.sh),
# kernel edits through the device-only build (benchmarks/device_edits.py), then the hand-written generation corpus
# (tests/data/generations/) under the three rule sets in test mode, compared with its expected.json
# (benchmarks/rescore_gpu.py, KernelBench's checkout carried in .kb/), within what is left of LIMIT_S.
#   OUT=DIR [LIMIT_S=570] bash benchmarks/session_gpu.sh
# Back under $OUT: smoke.tar.gz, doctor.txt, device-edits.json, rescore-summary.md/.json, corpus-reports.tar.gz.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
limit=${LIMIT_S:-570}
start=$(date +%s)
left() { echo $(( limit - ($(date +%s) - start) )); }
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
cd "$root"
echo "commit $(git rev-parse HEAD) $(git status --porcelain -- kernelpilot | head -1)"
smoke_s=$(( limit < 360 ? limit - 70 : 300 ))
OUT=$OUT timeout "$smoke_s" bash benchmarks/gpu_smoke.sh > /tmp/smoke.log 2>&1
[ "$(left)" -gt 50 ] && timeout $(( $(left) - 10 < 120 ? $(left) - 10 : 120 )) python3 benchmarks/device_edits.py --out "$OUT" --examples softmax,rmsnorm --edits 3 > /tmp/edits.log 2>&1
budget=$(( $(left) - 40 ))
if [ -d .kb ] && [ "$budget" -gt 60 ]; then
  timeout $(( budget + 30 )) python3 benchmarks/rescore_gpu.py --kernelbench "$root/.kb" --out /tmp/rs-out --work /tmp/rs-work \
    --plan corpus-kernelpilot,corpus-kernelbench-v0.1,corpus-kernelbench --only corpus --mode test --budget "$budget" > /tmp/rescore.log 2>&1
  cp /tmp/rs-out/rescore-summary.* "$OUT/" 2>/dev/null
  tar czf "$OUT/corpus-reports.tar.gz" -C /tmp/rs-out --exclude=runs . /tmp/rescore.log 2>/dev/null
fi
tail -32 /tmp/smoke.log
tail -12 /tmp/edits.log
grep -A12 "^# Re-scoring" /tmp/rs-out/rescore-summary.md 2>/dev/null | head -14
echo "session_gpu.sh: $(( $(date +%s) - start )) s"
