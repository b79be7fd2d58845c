#!/bin/bash
# Issue 28's GPU call: benchmarks/apply_gpu.py in /tmp/apply, restored from a carried tarball on a fresh machine
# (APPLY_IN=path/to/apply.tar.gz, relative to the repository) and packed back into $OUT/apply.tar.gz after the
# call (without kp-data, the sessions' scratch), so that the phases can be spread over calls and machines:
#   OUT=... LIMIT_S=540 bash benchmarks/apply_gpu.sh --batch 16 --phase prepare --phase approve   # call 1
#   OUT=... APPLY_IN=.apply/apply.tar.gz bash benchmarks/apply_gpu.sh --batch 16 --phase eager --phase compile --phase write
# Back under $OUT: apply.log, summary.json, logs.tar.gz (every command's output), apply.tar.gz, versions.txt.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
. "$root/benchmarks/gpu_env.sh"
work=/tmp/apply
if [ ! -d "$work" ] && [ -n "${APPLY_IN:-}" ]; then mkdir -p "$work" && tar xzf "$root/$APPLY_IN" -C "$work"; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/versions.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$OUT/versions.txt" 2>&1
# LIMIT_S: the script's own limit (the device call's less the packing below), so that a run cut short still
# comes back packed and its finished phases can go on in the next call
limit=()
[ -n "${LIMIT_S:-}" ] && limit=(timeout "$LIMIT_S")
(cd "$root" && "${limit[@]}" python3 benchmarks/apply_gpu.py --out "$work" "$@") > "$OUT/apply.log" 2>&1
echo "apply_gpu.py exit $? (124: cut at LIMIT_S=${LIMIT_S:-})" >> "$OUT/apply.log"
cp "$work/summary.json" "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tar.gz" -C "$work" logs 2>/dev/null
tar czf "$OUT/apply.tar.gz" -C "$work" --exclude=kp-data . 2>/dev/null
tail -30 "$OUT/apply.log"
