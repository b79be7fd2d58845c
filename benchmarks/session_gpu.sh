#!/bin/bash
# The device calls that check a session's final commit (2026-12-06), in two parts that each fit one call:
#   OUT=DIR [LIMIT_S=570] PART=A bash benchmarks/session_gpu.sh
#     the main-path smoke (benchmarks/gpu_smoke.sh: doctor, every example, a Pilot-driven pairing session), the
#     first screen cold and warm (benchmarks/first_screen.py), then the edit loop of EDIT_EXAMPLES (default softmax,
#     rmsnorm: each edit kind on its own, the session's baselines, a staged benchmark after a kernel edit;
#     benchmarks/edit_loop.py), then the Triton candidates' edits of TRITON_EXAMPLES (default softmax, rmsnorm:
#     `edit_loop.py --triton`) within what is left of LIMIT_S;
#   OUT=DIR [LIMIT_S=570] PART=B [KB_PROBLEMS=k,k] bash benchmarks/session_gpu.sh
#     the hand-written generation corpus (tests/data/generations/) under the three rule sets in test mode, compared
#     with its expected.json (benchmarks/rescore_gpu.py, KernelBench's checkout carried in .kb/), then KernelBench's
#     c0 candidates of KB_PROBLEMS in benchmark mode (benchmarks/kb_gpu.sh suite: same-minute ratios,
#     torch.compile's own check), within what is left of LIMIT_S.
#   OUT=DIR [LIMIT_S=570] PART=C bash benchmarks/session_gpu.sh
#     the first save after a cold launch alone (part A's, ~50 s): kernelpilot's bytecode written first (what
#     `kernelpilot doctor` in part A's smoke leaves), then a pairing session with every other cache empty, saved as
#     soon as it exists (cold-first-verdict.json), for a call with little device time left.
# Back under $OUT: A: smoke.tar.gz, doctor.txt, cold-first-verdict.json, first-screen.json, edit-loop.tar.gz,
# triton-loop.tar.gz;
# B: rescore-summary.md/.json, corpus-reports.tar.gz, kb-subset.tar.gz (the run without its work folders and its
# report).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
limit=${LIMIT_S:-570}
start=$(date +%s)
left() { echo $(( limit - ($(date +%s) - start) )); }
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
cd "$root"
echo "commit $(git rev-parse HEAD) $(git status --porcelain -- kernelpilot | head -1)"
cold_first_verdict() {
  local cold example
  cold=$(mktemp -d)
  mkdir -p "$cold/cache/kernelpilot"
  cp -r "${XDG_CACHE_HOME:-$HOME/.cache}/kernelpilot/pycache" "$cold/cache/kernelpilot/" 2>/dev/null \
    && echo "bytecode kept" || echo "no bytecode to keep"
  example=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from pathlib import Path
from edit_loop import copy_example; print(copy_example('softmax', Path(sys.argv[1]), False))" "$cold")
  (cd "$cold/$(basename "$example")" && XDG_CACHE_HOME="$cold/cache" KERNELPILOT_DATA_DIR="$cold/data" timeout 150 \
    python3 "$root/benchmarks/pair_session.py" . "$OUT/cold-first-verdict.json" --edits kernel,kernel \
    --first-save --no-benchmark --timeout 120)
}
case ${PART:-A} in
A)
  OUT=$OUT timeout 330 bash benchmarks/gpu_smoke.sh > /tmp/smoke.log 2>&1
  # the first verdict after a cold launch: kernelpilot's, Inductor's and Triton's caches empty (a fresh
  # XDG_CACHE_HOME) but for the bytecode `kernelpilot doctor` wrote above; the first save made as soon as the session
  # exists, the baselines still being measured (pair_session.py --first-save)
  [ "$(left)" -gt 200 ] && cold_first_verdict > /tmp/cold.log 2>&1
  [ "$(left)" -gt 120 ] && timeout 100 python3 benchmarks/first_screen.py --example softmax --seconds 6 \
    --timeout 90 --out "$OUT/first-screen.json" > /tmp/first.log 2>&1
  [ "$(left)" -gt 60 ] && timeout $(( $(left) - 15 )) python3 benchmarks/edit_loop.py --out /tmp/el \
    --examples ${EDIT_EXAMPLES:-softmax,rmsnorm} --no-screen --edits 2 --budget-s $(( $(left) - 30 )) > /tmp/el.log 2>&1
  tar czf "$OUT/edit-loop.tar.gz" -C /tmp/el . /tmp/el.log 2>/dev/null
  [ "$(left)" -gt 100 ] && timeout $(( $(left) - 10 )) python3 benchmarks/edit_loop.py --out /tmp/tl --triton \
    --examples ${TRITON_EXAMPLES:-softmax,rmsnorm} --no-screen --edits 2 --budget-s $(( $(left) - 40 )) \
    > /tmp/tl.log 2>&1 \
    && tar czf "$OUT/triton-loop.tar.gz" -C /tmp/tl . /tmp/tl.log 2>/dev/null
  tail -32 /tmp/smoke.log
  tail -3 /tmp/cold.log
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('cold launch:', {k: v for k, v in d.items()
if k != 'edits'})" "$OUT/cold-first-verdict.json" 2>/dev/null
  tail -8 /tmp/first.log
  tail -6 /tmp/el.log | cut -c1-300
  tail -4 /tmp/tl.log 2>/dev/null | cut -c1-300
  ;;
C)
  python3 -c "from kernelpilot.evaluation.sandbox import bytecode as b
print('bytecode', 'ready' if b.ready() else ('written in %.1f s' % b.write()) if b.needed() else 'not needed')"
  [ "$(left)" -gt 60 ] && cold_first_verdict 2>&1 | tail -3
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('cold launch:', {k: v for k, v in d.items()
if k != 'edits'}); [print(e) for e in d['edits']]" "$OUT/cold-first-verdict.json" 2>/dev/null
  ;;
B)
  reserve=30; [ -n "${KB_PROBLEMS:-}" ] && reserve=200  # KernelBench's c0 run after the corpus needs 200 s
  budget=$(( $(left) - reserve ))
  if [ -d .kb ] && [ "$budget" -gt 60 ]; then
    timeout $(( budget + 30 )) python3 benchmarks/rescore_gpu.py --kernelbench "$root/.kb" --out /tmp/rs-out \
      --work /tmp/rs-work --plan corpus-kernelpilot,corpus-kernelbench-v0.1,corpus-kernelbench --only corpus \
      --mode test --budget "$budget" > /tmp/rescore.log 2>&1
    cp /tmp/rs-out/rescore-summary.* "$OUT/" 2>/dev/null
    tar czf "$OUT/corpus-reports.tar.gz" -C /tmp/rs-out --exclude=runs . /tmp/rescore.log 2>/dev/null
  fi
  if [ -n "${KB_PROBLEMS:-}" ] && [ "$(left)" -gt 90 ]; then
    C0_IN=benchmarks/kernelbench-2026-12-02/session-3/c0.tar.gz SUITE_ARGS="--problems $KB_PROBLEMS" \
      OUT=/tmp/kb-out bash benchmarks/kb_gpu.sh suite:$(( $(left) - 30 )) > /tmp/kb.log 2>&1
    tar czf "$OUT/kb-subset.tar.gz" -C /tmp --exclude=work kb-run 2>/dev/null
    grep -E "^call|^statuses" /tmp/kb.log
  fi
  grep -A12 "^# Re-scoring" /tmp/rs-out/rescore-summary.md 2>/dev/null | head -14
  ;;
esac
echo "session_gpu.sh part ${PART:-A}: $(( $(date +%s) - start )) s"
