#!/bin/bash
# Issue 52's open questions, in one device call of about 8 minutes (H100 or H200):
# 1. prepare and approve the two drop-ins as apply_h100.sh does (Llama-3.2-1B's shapes, 16 x 1024 tokens);
# 2. why the head+loss swap's eager loss was outside the one-ulp band at step 1 (apply-2026-12-07c): its first-step
#    gradients per parameter against the unmodified run's, beside the one-ulp run's (benchmarks/step1_grads.py);
# 3. how transformers calls SDPA at these shapes and what each SDPA backend takes (attention_backends.py);
# 4. what of the compiled step's optimizer share torch's own fused AdamW closes (step_profile.py --fused-adamw).
#   OUT=... [BUDGET_S=560] bash benchmarks/issue52_diagnose.sh
# Back under $OUT: what apply_gpu.sh returns (apply.log, summary.json, logs.tar.gz, apply.tar.gz, versions.txt), and
# diag.tar.gz (approve.txt, step1_grads.json/.txt, attention.json/.txt, step_profile_fused.json/.txt).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
budget=${BUDGET_S:-560}
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
. "$root/benchmarks/gpu_env.sh"
diag=$(mktemp -d)/diag
mkdir -p "$diag"
OUT=$OUT BUDGET_S=$((budget - 200)) bash "$root/benchmarks/apply_h100.sh" --phase approve > "$diag/approve.txt" 2>&1
tail -5 "$diag/approve.txt"
repo=/tmp/apply/repo
left() { echo $((budget - SECONDS)); }
(cd "$repo" && timeout $(( $(left) - 120 )) python3 "$root/benchmarks/step1_grads.py" --kernels problems \
  --only head_loss --out "$diag/step1_grads.json" train.py) > "$diag/step1_grads.txt" 2>&1
echo "step1_grads: exit $? after ${SECONDS}s"
tail -20 "$diag/step1_grads.txt"
timeout 60 python3 "$root/benchmarks/attention_backends.py" --out "$diag/attention.json" > "$diag/attention.txt" 2>&1
echo "attention_backends: exit $? after ${SECONDS}s"
tail -5 "$diag/attention.txt"
[ "$(left)" -gt 60 ] && (cd "$repo" && timeout $(( $(left) - 10 )) python3 "$root/benchmarks/step_profile.py" \
  --mode default --fused-adamw --out "$diag/step_profile_fused.json" train.py) > "$diag/step_profile_fused.txt" 2>&1
echo "step_profile --fused-adamw: exit $? after ${SECONDS}s"
head -14 "$diag/step_profile_fused.txt"
tar czf "$OUT/diag.tar.gz" -C "$(dirname "$diag")" diag
