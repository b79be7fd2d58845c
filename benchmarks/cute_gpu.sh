#!/bin/bash
# CuTe-DSL candidates on one GPU (issue 53), one device call (H100/H200, torch 2.11+cu130, no network):
#   OUT=DIR [LIMIT_S=570] bash benchmarks/cute_gpu.sh
# 1. installs the DSL from carried wheels with benchmarks/cute_site.sh (.whl/dsl/, and /tmp/kp-stash/files/ from
#    the .carry/ folders' stash.sh):
#    nvidia-cutlass-dsl 4.8.1, -libs-base, -libs-core, -libs-cu13 with --no-deps (cuda-bindings, protobuf and
#    typing-extensions are on the machine; the meta package's cu12 libraries are not needed) into /tmp/cute-site;
# 2. compiles examples/rmsnorm_cute and the starter on the CPU path's twin (tests/test_cute.py -m cute);
# 3. `kernelpilot eval` of examples/rmsnorm_cute in test and benchmark mode (fresh processes, cold CuTe cache);
# 4. benchmarks/cute_edits.py: warm edits, a re-run, a helper edit, a breaking edit, benchmark, KernelBench's cute
#    example as it is and with a bound check (benchmarks/data/kb_model_new_ex_add_cute.py, or .kb/ when carried).
# Writes under $OUT: cute-install.txt, eval-test.json, eval-benchmark.json, cute-edits.json, logs; prints a table.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
limit=${LIMIT_S:-570}
start0=$(date +%s)
left() { echo $(( limit - ($(date +%s) - start0) )); }
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
cd "$root"
. "$root/benchmarks/cute_site.sh" > "$OUT/cute-install.txt" 2>&1  # the CuTe scripts' one installer
python3 -c "import torch, cutlass, importlib.metadata as m; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'| nvidia-cutlass-dsl', m.version('nvidia-cutlass-dsl'), '| cuda-bindings', m.version('cuda-bindings'),
'|', torch.cuda.get_device_name())" >> "$OUT/cute-install.txt" 2>&1
tail -1 "$OUT/cute-install.txt"
rm -rf "$HOME/.cache/kernelpilot/cute"  # a cold CuTe cache: the first verdict shows the cold compile
timeout 90 python3 -m pytest -q tests/test_cute.py > "$OUT/pytest-cute.txt" 2>&1; echo "pytest tests/test_cute.py: $(tail -1 "$OUT/pytest-cute.txt")"
for mode in test benchmark; do
  start=$(date +%s.%N)
  t=$(( $(left) / 3 ))
  timeout "$t" python3 -m kernelpilot eval examples/rmsnorm_cute/problem.py examples/rmsnorm_cute/candidate \
    --mode $mode --json > "$OUT/eval-$mode.json" 2> "$OUT/eval-$mode.err"
  echo "eval $mode: exit $? in $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
done
# KernelBench's cute example (src/kernelbench/prompts/model_new_ex_add_cute.py at 423217d), judged unchanged
kb="--kb-example benchmarks/data/kb_model_new_ex_add_cute.py"
[ -f .kb/src/kernelbench/prompts/model_new_ex_add_cute.py ] && kb="--kb-example .kb/src/kernelbench/prompts/model_new_ex_add_cute.py"
timeout $(( $(left) - 15 )) python3 benchmarks/cute_edits.py --out "$OUT" $kb > "$OUT/cute-edits.log" 2>&1
echo "cute_edits.py: exit $?"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print(f"{'verdict':<36} {'status':<14} {'wall s':>7} {'warm-up s':>9} {'build s':>8}  findings / error")
for mode in ("test", "benchmark"):
    try:
        v = json.loads((out / f"eval-{mode}.json").read_text())
    except (OSError, ValueError):
        print(f"eval {mode:<31} (no verdict: see eval-{mode}.err)"); continue
    perf = v.get("performance") or {}
    extra = f" speedup {perf.get('speedup_vs_eager')}" if mode == "benchmark" else ""
    print(f"{'eval ' + mode:<36} {v.get('status', '?'):<14} {'':>7} {v.get('phases', {}).get('build_warmup', '-'):>9} "
          f"{(v.get('build') or {}).get('seconds', '-'):>8}  {','.join(sorted({f['rule'] for f in v.get('findings', [])}))}"
          f"{extra} {(v.get('error') or '')[:80]}")
try:
    rows = json.loads((out / "cute-edits.json").read_text())
except (OSError, ValueError):
    rows = []
    print("cute-edits.json missing: see cute-edits.log")
for r in rows:
    extra = f" in_bounds={r.get('in_bounds')}" + (f" KB={r['kernelbench']}" if r.get("kernelbench") else "")
    if "expected" in r:
        extra += " RIGHT" if not r["expected"] else f" WRONG {r['expected']}"
    print(f"{r['what']:<36} {r['status']:<14} {r['wall_s']:>7} {r['phases'].get('build_warmup', '-'):>9} "
          f"{r['build_s'] if r['build_s'] is not None else '-':>8}  {','.join(r['findings'])}{extra} {r['error'][:60]}")
PY
tail -3 "$OUT/cute-edits.log"
