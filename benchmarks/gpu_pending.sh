#!/bin/bash
# The GPU evidence still owed by issues 14-17, in as few device calls as possible.
#   OUT=... bash benchmarks/gpu_pending.sh STEP[:SECONDS]...
# Steps (each under its own time limit, default in brackets; output kept even when a step is cut short):
#   cold [420]       benchmarks/cold_path.py: cold/warm edit -> verdict, both formats, the planted hang (issue 14)
#   corpus [240]     benchmarks/eval_gpu.py --skip-latency --skip-fidelity: the corpus with the Triton twins
#   inductor [480]   benchmarks/inductor_gpu.py: Inductor's kernels as Triton candidates, the twins (issue 17)
#   screen [200]     benchmarks/first_screen_gpu.sh: the TUI's first screen in tmux (issue 16)
#   gputests [300]   pytest -m gpu tests/gpu/test_baselines_gpu.py tests/gpu/test_eval_gpu_parts.py
#   suite [560]      benchmarks/suite_gpu.py --mode test --prime (primed headers, serial loop, suite, --ray when Ray imports)
#   suite-again [200] the same suite alone (no serial loop, no Ray), against the serial loop in $SERIAL_FROM
#   twins [150]      benchmarks/inductor_gpu.py twins $TWINS: the Triton cheat twins alone (those named in $TWINS, or all)
#   nvcc [150]       benchmarks/nvcc_profile.py: nvcc --time on a KernelBench candidate's CUDA source (issue 14)
#   scaling [560]    benchmarks/suite_scaling.py --prime $SCALING_ARGS: the 26-candidate suite per GPU set (issue 19;
#                    default runs 0, 0,1 and ray:2, which need nvidia-h200-x2; on one GPU: SCALING_ARGS="--runs 0")
#   sweep [560]      examples/bench_sweep.py $SWEEP_ARGS with the Liger and QuACK peers (issue 18): carry .whl-peers
#                    and, stashed the call before, the CuTe DSL library wheel (split-carry.sh); output in sweep.tar.gz
# Each step's files are packed into $OUT/<step>.tar.gz (the device tool brings back at most 8 files);
# $OUT/pending.log has every step's tail and exit status. Carry .whl (shared/gpu/wheelhouse.sh); for the
# suite's Ray run, stash Ray's wheel first (shared/gpu/split-carry.sh) and install it into /tmp/site.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
. "$root/benchmarks/gpu_env.sh"
log="$OUT/pending.log"

run_step() {  # NAME LIMIT COMMAND...
  local name=$1 limit=$2; shift 2
  local dir=/tmp/kp-pending/$name t0=$(date +%s)
  rm -rf "$dir" && mkdir -p "$dir"
  echo "== $name (limit ${limit} s) $(date -u +%H:%M:%S)" | tee -a "$log"
  (cd "$root" && OUT="$dir" timeout "$limit" "$@") > "$dir/output.log" 2>&1
  local rc=$?
  tail -25 "$dir/output.log" >> "$log"
  echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$log"
  find "$dir" -name '*.sqlite-*' -delete 2>/dev/null
  tar czf "$OUT/$name.tar.gz" -C /tmp/kp-pending "$name" 2>/dev/null
}

for spec in "$@"; do
  name=${spec%%:*}; limit=${spec#*:}; [ "$limit" = "$spec" ] && limit=""
  case $name in
    cold) run_step cold "${limit:-420}" bash -c 'python3 benchmarks/cold_path.py "$OUT"' ;;
    corpus) run_step corpus "${limit:-240}" bash -c 'python3 benchmarks/eval_gpu.py --skip-latency --skip-fidelity --out "$OUT/corpus.md"' ;;
    inductor) run_step inductor "${limit:-480}" python3 benchmarks/inductor_gpu.py ;;
    screen) run_step screen "${limit:-200}" bash benchmarks/first_screen_gpu.sh ;;
    gputests) run_step gputests "${limit:-300}" python3 -m pytest -q -m gpu tests/gpu/test_baselines_gpu.py tests/gpu/test_eval_gpu_parts.py ;;
    suite) run_step suite "${limit:-560}" python3 benchmarks/suite_gpu.py --mode test --timeout 120 --prime ;;
    suite-again) run_step suite-again "${limit:-200}" python3 benchmarks/suite_gpu.py --mode test --timeout 120 --prime \
                   --no-ray --serial-from "${SERIAL_FROM:?set SERIAL_FROM to the serial.json of an earlier run}" ;;
    twins) run_step twins "${limit:-150}" bash -c 'python3 benchmarks/inductor_gpu.py twins ${TWINS:-}' ;;
    scaling) run_step scaling "${limit:-560}" bash -c 'python3 benchmarks/suite_scaling.py --prime ${SCALING_ARGS:-}' ;;
    nvcc) run_step nvcc "${limit:-150}" bash -c 'python3 benchmarks/nvcc_profile.py "$OUT"' ;;
    sweep) if [ -d "$root/.whl-peers" ]; then
             python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
               "$root"/.whl-peers/*.whl /tmp/kp-stash/files/nvidia_cutlass_dsl_libs_*.whl 2>&1 | tail -3 | tee -a "$log"
           fi
           # the CuTe DSL wheel puts its packages on sys.path through a .pth file, which a --target dir
           # on PYTHONPATH never reads: add its directory by hand
           [ -d /tmp/site/nvidia_cutlass_dsl/dsl_packages ] && export PYTHONPATH="/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH"
           run_step sweep "${limit:-560}" bash -c 'python3 examples/bench_sweep.py ${SWEEP_ARGS:-}' ;;
    *) echo "unknown step $name (cold, corpus, inductor, screen, gputests, suite, suite-again, twins, nvcc, scaling, sweep)" | tee -a "$log" ;;
  esac
done
grep '^== ' "$log"
