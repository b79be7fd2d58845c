#!/bin/bash
# Where a worker's start goes on this machine (issue 49: 7-8 s on the H100 and H200, 3.0-3.2 s of it importing torch
# and 3.4-4.0 s torch._dynamo and the profiler): whether the interpreter can use or write bytecode caches for torch,
# and the imports timed as they are, then twice with a writable PYTHONPYCACHEPREFIX (the first run writes it).
#   bash benchmarks/import_probe.sh [OUT_DIR]
py=${PYTHON:-python3}
out=${1:-/tmp/import-probe}; mkdir -p "$out"
$py - <<'PY'
import os, sys, importlib.util, pathlib
print("python", sys.executable, sys.version.split()[0], "dont_write_bytecode", sys.flags.dont_write_bytecode,
      "pycache_prefix", sys.pycache_prefix, "PYTHONDONTWRITEBYTECODE", os.environ.get("PYTHONDONTWRITEBYTECODE"))
for mod in ("torch", "torch._dynamo", "torch._inductor", "sympy"):
    spec = importlib.util.find_spec(mod)
    if spec is None or not spec.origin:
        print(f"{mod:16} not installed"); continue
    d = pathlib.Path(spec.origin).parent
    cache = d / "__pycache__"
    pys = len(list(d.glob("*.py")))
    pycs = len(list(cache.glob("*.pyc"))) if cache.is_dir() else 0
    print(f"{mod:16} {d}  .py {pys}  .pyc {pycs}  cache dir writable {os.access(cache if cache.is_dir() else d, os.W_OK)}")
PY
t() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; echo "$(( ($(date +%s%N) - s) / 1000000 ))"; }
echo "as installed: import torch, torch._dynamo, torch.profiler $(t $py -c 'import torch, torch._dynamo, torch.profiler') ms"
export PYTHONPYCACHEPREFIX=$out/pycache-probe; was=${PYTHONDONTWRITEBYTECODE-}; unset PYTHONDONTWRITEBYTECODE
for run in 1 2; do
  echo "with a writable PYTHONPYCACHEPREFIX, run $run: $(t $py -c 'import torch, torch._dynamo, torch.profiler') ms"
done
unset PYTHONPYCACHEPREFIX; [ -n "$was" ] && export PYTHONDONTWRITEBYTECODE=$was
$py -X importtime -c 'import torch, torch._dynamo, torch.profiler' 2> $out/importtime.txt
echo "largest self times (us), of $(wc -l < $out/importtime.txt) imports:"
sort -t'|' -k1 -n -r <(sed 's/^import time: *//' $out/importtime.txt | grep -v self) | head -12
