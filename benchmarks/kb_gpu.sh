#!/bin/bash
# Issue 25's GPU steps against a KernelBench checkout in .kb/ (carried, never committed).
#   OUT=... bash benchmarks/kb_gpu.sh STEP[:SECONDS][&] ...
# A step ending in & runs in the background while the next ones run; every step is waited for at the end.
# Steps:
#   record [520]   benchmarks/kb_record.py: torch.compile's output for every problem, one process each ($RECORD_ARGS)
#   c0 [560]       record ($RECORD_ARGS) then convert: `kernelpilot init --from-inductor --recordings`, into $OUT/c0/c0
#   mixed [300]    benchmarks/kb_diagnose.py mixed: corpus + KernelBench's examples and adversarial kernels, twice
#   compile [200]  benchmarks/kb_diagnose.py compile: the torch.compile baseline inside the worker, three ways
#   suite [560]    benchmarks/kb_suite.py over .kb: the c0 solutions in $C0 (default /tmp/c0), the run in $RUN
#                  (default /tmp/kb-run), resumed when it exists; on a fresh machine $C0_IN and $RUN_IN (tarballs
#                  carried back from earlier calls' $OUT) are unpacked first; $SUITE_ARGS go after `--`.
#                  Leaves $OUT/run.tar.gz (the run without its work folders) for the next call
# Each step's files go to $OUT/<step>.tar.gz; $OUT/kb.log has each step's tail and exit status.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
. "$root/benchmarks/gpu_env.sh"
log="$OUT/kb.log"
kb="$root/.kb"

checkpoint() {  # DB...: fold SQLite's write-ahead log into the database (a killed step leaves its verdicts there)
  for db in "$@"; do python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)")' "$db" 2>/dev/null; done
}

run_step() {  # NAME LIMIT COMMAND...
  local name=$1 limit=$2; shift 2
  local dir=/tmp/kp-kb/$name t0=$(date +%s)
  rm -rf "$dir" && mkdir -p "$dir"
  echo "== $name (limit ${limit} s) $(date -u +%H:%M:%S)" >> "$log"
  (cd "$root" && OUT="$dir" timeout "$limit" "$@") > "$dir/output.log" 2>&1
  local rc=$?
  { tail -30 "$dir/output.log"; echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s"; } >> "$log"
  # a step killed at its limit leaves its verdicts in SQLite's write-ahead log: fold it in, never delete it
  while IFS= read -r -d '' db; do checkpoint "$db"; done < <(find "$dir" -name '*.sqlite' -print0)
  tar czf "$OUT/$name.tar.gz" -C /tmp/kp-kb "$name" 2>/dev/null
}

step() {
  local name=$1 limit=$2
  case $name in
    record) run_step record "${limit:-520}" bash -c "python3 benchmarks/kb_record.py --kernelbench '$kb' --out \"\$OUT/rec\" ${RECORD_ARGS:-}" ;;
    c0) run_step c0 "${limit:-560}" bash -c "python3 benchmarks/kb_record.py --kernelbench '$kb' --out \"\$OUT/rec\" ${RECORD_ARGS:-} && python3 -m kernelpilot init --from-inductor '$kb/KernelBench' --recordings \"\$OUT/rec\" --out \"\$OUT/c0\"" ;;
    mixed) run_step mixed "${limit:-300}" bash -c "python3 benchmarks/kb_diagnose.py mixed --kernelbench '$kb' ${MIXED_ARGS:-}" ;;
    stress) run_step stress "${limit:-240}" bash -c "python3 benchmarks/kb_diagnose.py stress --kernelbench '$kb' --runs ${STRESS_ROUNDS:-150} --timeout ${STRESS_EACH:-70}" ;;
    stress2) run_step stress2 "${limit:-200}" bash -c "python3 benchmarks/kb_diagnose.py stress2 --kernelbench '$kb' --runs ${STRESS_ROUNDS:-300} --timeout ${STRESS_EACH:-30}" ;;
    compile) run_step compile "${limit:-200}" python3 benchmarks/kb_diagnose.py compile --kernelbench "$kb" ;;
    suite)
      local c0=${C0:-/tmp/c0} run=${RUN:-/tmp/kb-run}
      if [ ! -d "$c0" ] && [ -n "${C0_IN:-}" ]; then mkdir -p "$c0" && tar xzf "$root/$C0_IN" -C "$c0"; fi
      if [ ! -d "$run" ] && [ -n "${RUN_IN:-}" ]; then mkdir -p "$(dirname "$run")" && tar xzf "$root/$RUN_IN" -C "$(dirname "$run")"; fi
      run_step suite "${limit:-560}" bash -c "python3 benchmarks/kb_suite.py --kernelbench '$kb' --solutions '$c0' --run '$run' --budget-s $(( ${limit:-560} - 40 )) --grace-s 20 -- ${SUITE_ARGS:-}"
      checkpoint "$run/results.sqlite"
      tar czf "$OUT/run.tar.gz" -C "$(dirname "$run")" --exclude=work "$(basename "$run")" 2>/dev/null ;;
    *) echo "unknown step $name" >> "$log" ;;
  esac
}

for spec in "$@"; do
  bg=""; [ "${spec%&}" != "$spec" ] && bg=1 && spec=${spec%&}
  name=${spec%%:*}; limit=${spec#*:}; [ "$limit" = "$spec" ] && limit=""
  if [ -n "$bg" ]; then step "$name" "$limit" & else step "$name" "$limit"; fi
done
wait
cat "$log"
