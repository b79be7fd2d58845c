#!/bin/bash
# The GPU smoke of the main path, run on the final commit of every session that changes kernelpilot/:
#   OUT=DIR bash benchmarks/gpu_smoke.sh [EXAMPLE ...]      (default: every shipped example)
# 1. `kernelpilot doctor` (toolchain, then a native and a Triton verdict);
# 2. every shipped example evaluated in test mode (`kernelpilot eval ... --mode test --json`), the CuTe-DSL one
#    (examples/rmsnorm_cute) where the [cute] extra is installed, and a line saying so where it is not;
# 3. one pairing session in the real TUI driven by Pilot (benchmarks/pair_session.py) with real saves of a
#    kernel edit on the softmax example (the verdicts drawn, their times), then one that breaks the kernel
#    (its verdict must be `incorrect`: the edited kernel is the one that ran).
# Writes $OUT/smoke/ (packed as $OUT/smoke.tar.gz) and prints one table last, with the commit.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
cd "$root"
dir="$OUT/smoke"
mkdir -p "$dir"
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain -- kernelpilot 2>/dev/null | head -1)
examples=("$@")
[ ${#examples[@]} -gt 0 ] || examples=(softmax rmsnorm layernorm cross_entropy residual_rmsnorm_gate gemm_bias_gelu diag_matmul linear_sum_scale)

timeout 300 python3 -m kernelpilot doctor > "$dir/doctor.txt" 2>&1
doctor_exit=$?
echo "doctor: exit $doctor_exit ($(tail -1 "$dir/doctor.txt")), commit $commit"
# the examples four at a time (test mode times nothing: they may share the GPU); each row as it finishes
eval_one() {
  local name=$1 start took
  start=$(date +%s.%N)
  timeout 300 python3 -m kernelpilot eval "examples/$name/problem.py" "examples/$name/candidate" --mode test --json \
    > "$dir/eval-$name.json" 2> "$dir/eval-$name.err"
  took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get('status') or d.get('kind') or '?')" \
    "$dir/eval-$name.json" 2>/dev/null > "$dir/status-$name" || echo "no-verdict" > "$dir/status-$name"
  echo "$took" > "$dir/seconds-$name"
  echo "eval $name: $(cat "$dir/status-$name") in $took s"
}
export -f eval_one
export dir
printf '%s\n' "${examples[@]}" | xargs -P 4 -I{} bash -c 'eval_one {}'
# the CuTe-DSL example where the [cute] extra is installed on this machine, or where an earlier call on it stashed
# the DSL's wheels (.carry/ and stash.sh, as benchmarks/cute_gpu.sh does) or installed them (/tmp/cute-site); said
# when it is not
if [ -d /tmp/cute-site/nvidia_cutlass_dsl ] || ls /tmp/kp-stash/files/nvidia_cutlass_dsl_libs_cu13-*.whl >/dev/null 2>&1
then . "$root/benchmarks/cute_site.sh" >/dev/null 2>&1; fi
if python3 -c "import cutlass.cute" 2>/dev/null; then
  eval_one rmsnorm_cute; examples+=(rmsnorm_cute)
else
  echo "CuTe example: not run (the [cute] extra is not installed here: pip install 'kernelpilot[cute]'; on the" \
    "device, stash the DSL's wheels in an earlier call on the same machine, as benchmarks/cute_gpu.sh says)" \
    | tee "$dir/cute.txt"
fi
rows=()
for name in "${examples[@]}"; do
  rows+=("$name|$(cat "$dir/status-$name" 2>/dev/null || echo not-run)|$(cat "$dir/seconds-$name" 2>/dev/null || echo -)")
done
tar czf "$OUT/smoke.tar.gz" -C "$OUT" smoke

work=$(mktemp -d)
python3 - "$work" <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from pathlib import Path
from edit_loop import copy_example
print(copy_example("softmax", Path(sys.argv[1]), False))
PY
example=$(ls -d "$work"/softmax-* | head -1)
(cd "$example" && KERNELPILOT_DATA_DIR="$work/data" timeout 420 python3 "$root/benchmarks/pair_session.py" "$example" \
  "$dir/pair-session.json" --edits kernel,kernel,kernel,break 2>&1 | tee "$dir/pair-session.log" | grep "^  ")
pair_exit=$?

tar czf "$OUT/smoke.tar.gz" -C "$OUT" smoke
echo
echo "GPU smoke, commit $commit${dirty:+ (kernelpilot/ has uncommitted changes)}, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
echo "doctor: exit $doctor_exit ($(tail -1 "$dir/doctor.txt"))"
printf '%-24s %-14s %s\n' example "test verdict" seconds
for row in "${rows[@]}"; do IFS='|' read -r n s t <<< "$row"; printf '%-24s %-14s %s\n' "$n" "$s" "$t"; done
[ -f "$dir/cute.txt" ] && cat "$dir/cute.txt"
python3 - "$dir/pair-session.json" "$pair_exit" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print(f"pairing session (TUI, Pilot): no result (exit {sys.argv[2]}; see pair-session.log)")
    sys.exit(0)
print(f"pairing session (TUI, Pilot): card {d.get('card_s')} s, baselines {d.get('baselines_s')} s after launch")
for e in d.get("edits", []):
    # every save edits its kernel anew: one whose build compiled nothing was judged on an older library
    stale = "no edited file" in (e.get("build") or "") and e.get("kind") in ("kernel", "break")
    print(f"  save of {e.get('file')}: {e.get('status')} drawn {e.get('drawn_s')} s (engine {e.get('engine_s')} s), "
          f"benchmark {e.get('benchmark_status')} drawn {e.get('benchmark_drawn_s')} s, sass {e.get('sass_check')}"
          + ("  <- STALE: this kernel save compiled nothing" if stale else ""))
PY
# only the archive comes back (a device call returns at most 8 files)
mv "$dir/doctor.txt" "$OUT/doctor.txt" 2>/dev/null; rm -rf "$dir"
