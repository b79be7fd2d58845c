#!/bin/bash
# Why a CuTe re-run compiles again (issue 53: "a re-run with nothing changed compiles nothing"), one device call
# after the calls that ran `bash .carry/01/stash.sh` and `.carry/02/stash.sh` (this one carries .carry/03 and .whl):
#   OUT=DIR bash benchmarks/cute_cache_gpu.sh
# 1. the CuTe DSL installed by benchmarks/cute_site.sh;
# 2. two fresh processes compile the example's kernel on GPU tensors through kernelpilot's hook: each prints its
#    cache key's parts, how the compile was served and why the cache was not used (the record's note);
# 3. two `kernelpilot eval` runs of examples/rmsnorm_cute (fresh processes): what compiled, the cache warnings;
# 4. benchmarks/cute_edits.py --quick (one warm worker: cold, re-run, one edit), and the cache folder's entries.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
cd "$root"
. "$root/benchmarks/cute_site.sh" > "$OUT/cute-install.txt" 2>&1 || tail -3 "$OUT/cute-install.txt"
cache=$HOME/.cache/kernelpilot/cute
rm -rf "$cache"
cat > /tmp/cute_key.py <<'PY'
import json, math, sys
sys.path.insert(0, sys.argv[1])
from kernelpilot.evaluation.worker import cute_hook
cute_hook.install(sys.argv[1])
import torch, cutlass, cutlass.cute as cute
from cuda.bindings.driver import CUstream
import model_new as m
x = torch.randn(8, 4096, dtype=torch.bfloat16, device="cuda"); w = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
vec, threads, cluster, reload = m.row_config(4096, 2)
args = (m._tensor(x), cute.runtime.from_dlpack(w, assumed_align=16), m._tensor(x), cutlass.Float32(1e-6),
        CUstream(torch.cuda.current_stream().cuda_stream), vec, math.ceil(4096 // vec / (threads * cluster)), threads,
        cluster, reload)
print("parts", json.dumps([cute_hook._describe(a) for a in args]))
for _ in range(2):  # the second compile in the same process: loaded from the entry the first one stored?
    cute.compile(m.rmsnorm_host, *args)
print("compiles", json.dumps(cute_hook.take().get("build_compiles")))
PY
for n in 1 2; do
  CUTE_DSL_CACHE_DIR=/tmp/cute-key-cache timeout 120 python3 /tmp/cute_key.py examples/rmsnorm_cute/candidate \
    > "$OUT/key-$n.txt" 2>&1; echo "process $n: $(grep -E '^compiles' "$OUT/key-$n.txt" | cut -c1-600)"
done
cmp -s <(grep ^parts "$OUT/key-1.txt") <(grep ^parts "$OUT/key-2.txt") && echo "key parts: same in both processes" \
  || { echo "key parts differ:"; grep ^parts "$OUT"/key-*.txt | cut -c1-900; }
grep -v -E "^(parts|compiles)" "$OUT/key-1.txt" | tail -5 | cut -c1-300
for n in 1 2; do
  timeout 150 python3 -m kernelpilot eval examples/rmsnorm_cute/problem.py examples/rmsnorm_cute/candidate --json \
    > "$OUT/eval-$n.json" 2> "$OUT/eval-$n.err"
  python3 -c "
import json,sys; v=json.load(open(sys.argv[1])); b=v.get('build') or {}
print('eval $n:', v.get('status'), 'rebuilt', b.get('rebuilt'), 'cache', repr(b.get('cache')), 'warm-up', v.get('phases',{}).get('build_warmup'),
      [d['message'][:300] for d in b.get('diagnostics', []) if d.get('tool') == 'cute'])" "$OUT/eval-$n.json" \
    || tail -3 "$OUT/eval-$n.err"
done
echo "cache entries after the evals: $(ls "$cache/kernelpilot" 2>/dev/null | tr '\n' ' ')"
timeout 240 python3 benchmarks/cute_edits.py --out "$OUT" --quick --edits 1 > "$OUT/cute-edits.log" 2>&1
cut -c1-400 "$OUT/cute-edits.log" | tail -6
echo "cache entries after cute_edits: $(ls "$cache/kernelpilot" 2>/dev/null | tr '\n' ' ')"
