#!/bin/bash
# c0 for all of KernelBench on one GPU machine, then a quick GPU check of a sample (benchmarks/kb_c0_check.py).
#   OUT=... [C0=/tmp/c0] [INIT_LIMIT=400] [CHECK_KEYS=k,k] bash benchmarks/kb_c0_gpu.sh
# Needs .kb/ (a KernelBench checkout) and, where textual etc. are missing, .whl/ (carried). Writes into $OUT:
# init.log, check.log, c0.tar.gz (the candidates and c0-index.json), rec-index.json, rec.tar.gz (CHECK_KEYS' recordings),
# rec-all.tar.gz (every recording). Recordings in .kb/rec0 (rec-all.tar.gz unpacked) are kept, not made again. SKIP_CHECK=1: no check.
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
C0=${C0:-/tmp/c0}
python3 -c "import textual, platformdirs, git" 2>/dev/null || \
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)"; nproc
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
( time python3 -c "import torch, torch._inductor.compile_fx, triton" ) 2>&1 | grep real
T0=$(date +%s)
if [ -d .kb/rec0 ]; then  # recordings made before (rec-all.tar.gz of an earlier call, unpacked): the recorder keeps them
  mkdir -p "$C0/_recordings" && cp -rn .kb/rec0/. "$C0/_recordings/"
  echo "seeded $(find .kb/rec0 -name '*.json' | wc -l) recordings from .kb/rec0"
fi
timeout -k 10 "${INIT_LIMIT:-400}" python3 -m kernelpilot init --from-inductor .kb/KernelBench --out "$C0" ${INIT_ARGS:-} > "$OUT/init.log" 2>&1
rc=$?
echo "init rc=$rc after $(( $(date +%s) - T0 )) s" | tee -a "$OUT/init.log"
if [ $rc -ne 0 ]; then  # killed while recording: convert what was recorded
  timeout 120 python3 -m kernelpilot init --from-inductor .kb/KernelBench --recordings "$C0/_recordings" --out "$C0" >> "$OUT/init.log" 2>&1
  echo "convert rc=$? after $(( $(date +%s) - T0 )) s" | tee -a "$OUT/init.log"
fi
tail -2 "$OUT/init.log"
K=${CHECK_KEYS:-level1/23_Softmax}
[ -n "${SKIP_CHECK:-}" ] || timeout 110 python3 benchmarks/kb_c0_check.py --kernelbench .kb/KernelBench --c0 "$C0" --only "$K" --budget-s 80 --timeout 40 --jobs 8 > "$OUT/check.log" 2>&1
tail -1 "$OUT/check.log"
(cd "$C0" && tar czf "$OUT/c0.tar.gz" --exclude=_recordings . && cp _recordings/index.json "$OUT/rec-index.json")
(cd "$C0" && tar czf "$OUT/rec.tar.gz" $(for k in ${K//,/ }; do [ -f "_recordings/$k.json" ] && echo "_recordings/$k.json"; done))
(cd "$C0/_recordings" && tar czf "$OUT/rec-all.tar.gz" .)  # every recording: unpack into .kb/rec0 to skip them next time
ls -la "$OUT"
