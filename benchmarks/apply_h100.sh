#!/bin/bash
# Issue 52's first call on an H100 when no H200 comes: Llama-3.2-1B's shapes at 16 x 1024 tokens with the caching
# allocator's expandable segments (the 12-06 OOM under hotspots had 11.3 GiB reserved but unallocated); if the head's
# extraction still runs out of memory, the run falls back to 8 x 1024 tokens and says so. Then the phases named
# (default: approve, eager), within BUDGET_S seconds of the script's start (default 545).
#   OUT=... [BUDGET_S=...] bash benchmarks/apply_h100.sh [--phase approve ...]
# The later phases (on the same machine: /tmp/apply is kept) go through apply_gpu.sh with the same PYTORCH_CUDA_ALLOC_CONF.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
. "$root/benchmarks/gpu_env.sh"
common=(--llama32 --loss-in-forward --only head_loss,module)
(cd "$root" && timeout 300 python3 benchmarks/apply_gpu.py --out /tmp/apply "${common[@]}" --batch 16 --phase prepare) \
  > /tmp/prepare16.log 2>&1
if python3 -c 'import json,sys; d=json.load(open("/tmp/apply/summary.json")); sys.exit(d["extract_rc"].get("head_loss") != 0)'
then batch=16; phases=(); else batch=8; phases=(--phase prepare); mv /tmp/apply /tmp/apply16; fi
echo "prepare at 16 x 1024: $([ $batch = 16 ] && echo ok || echo failed, falling back to 8) after ${SECONDS}s" \
  | tee -a /tmp/prepare16.log
mkdir -p /tmp/apply/logs && cp /tmp/prepare16.log /tmp/apply/logs/
[ -d /tmp/apply16/logs ] && cp -r /tmp/apply16/logs /tmp/apply/logs/batch16
rest=("$@")
[ ${#rest[@]} -gt 0 ] || rest=(--phase approve --phase eager)
OUT=$OUT LIMIT_S=$((${BUDGET_S:-545} - SECONDS)) bash "$root/benchmarks/apply_gpu.sh" "${common[@]}" --batch $batch \
  "${phases[@]}" "${rest[@]}"
