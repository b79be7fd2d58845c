#!/bin/bash
# Issue 26's GPU call: benchmarks/rescore_gpu.py over the KernelBench checkout in .kb/ (carried, never committed;
# a COMMIT file at its root names its commit), its runs kept in /tmp/rs-work between calls on a warm machine and
# packed into $OUT/runs.tar.gz for a fresh one (carry it back and pass WORK_IN=path/to/runs.tar.gz).
#   OUT=... [WORK_IN=...] bash benchmarks/rescore_gpu.sh [rescore_gpu.py flags: --budget S --plan ...]
# Back under $OUT: versions.txt, preflight.log, rescore-summary.md/.json, rescore.log, reports.tar.gz (every run's
# report), runs.tar.gz.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
. "$root/benchmarks/gpu_env.sh"
work=/tmp/rs-work out=/tmp/rs-out
if [ ! -d "$work" ] && [ -n "${WORK_IN:-}" ]; then mkdir -p "$work" && tar xzf "$root/$WORK_IN" -C "$work"; fi
mkdir -p "$work" "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/versions.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$OUT/versions.txt" 2>&1
# preflight (about 40 s): the profiler's trace as the kernel and stream rules read it; a failure there would make
# every verdict's kernel checks wrong, so the call stops (a joined side stream not recognised, or a baselines
# record without what its verdicts need, is only noted);
# once per machine (/tmp/rs-preflight holds the log once the kernel-check part passed)
if [ -f /tmp/rs-preflight ]; then cp /tmp/rs-preflight "$OUT/preflight.log"
else
  (cd "$root" && timeout 240 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_eval_gpu_parts.py tests/gpu/test_baselines_gpu.py \
      -k "profiler_sees_streams or library_streams or joined_both_ways or watch_covers or baselines_on_the_gpu") > "$OUT/preflight.log" 2>&1
  if grep -q "FAILED.*\(profiler_sees_streams\|library_streams\)" "$OUT/preflight.log"; then
    tail -40 "$OUT/preflight.log"; echo "preflight failed: the rescore did not run"; exit 1
  fi
  cp "$OUT/preflight.log" /tmp/rs-preflight  # the kernel-check part passed: not again on this machine
fi
tail -3 "$OUT/preflight.log"
(cd "$root" && python3 benchmarks/rescore_gpu.py --kernelbench "$root/.kb" --out "$out" --work "$work" "$@") > "$OUT/rescore.log" 2>&1
echo "rescore_gpu.py exit $?" >> "$OUT/rescore.log"
cp "$out"/rescore-summary.* "$OUT/" 2>/dev/null
tar czf "$OUT/reports.tar.gz" -C "$out" --exclude=runs . 2>/dev/null
tar czf "$OUT/runs.tar.gz" -C "$work" . 2>/dev/null
tail -40 "$OUT/rescore.log"
