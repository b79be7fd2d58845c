#!/bin/bash
# The RMSNorm sweep with our CuTe-DSL kernel in its own column beside our CUDA C++ kernel, Liger and QuACK
# (issue 53), bf16 and fp32, N = 4K-256K, 1 GiB inputs, the copy ceiling measured on the same card:
#   OUT=DIR bash benchmarks/sweep_cute_gpu.sh
# Needs the DSL's libs-cu13 wheel in /tmp/kp-stash/files (.carry/01-03, shared/gpu/split-carry.sh), its small wheels
# in .whl/dsl and the peers' wheels (quack-kernels 0.6.5, liger-kernel, apache-tvm-ffi, torch-c-dlpack-ext, einops)
# in .whl/peers (benchmarks/cute_site.sh). Back under $OUT: sweep.md, sweep.json,
# rows.jsonl, sweep.log.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
cd "$root"
. "$root/benchmarks/cute_site.sh"
python3 -c "import cutlass, quack, liger_kernel; print('DSL, quack and liger import')" 2>&1 | tail -1
OUT=$OUT timeout ${SWEEP_TIMEOUT_S:-420} python3 examples/bench_sweep.py --only rmsnorm --dtypes bf16,fp32 \
  --peers liger,quack,cute --measure-copy --no-compile > "$OUT/sweep.log" 2>&1
echo "bench_sweep.py: exit $?"
grep -E "copy ceiling|^rmsnorm" "$OUT/sweep.log" | head -12 | cut -c1-200
tail -28 "$OUT/sweep.log" | cut -c1-400
