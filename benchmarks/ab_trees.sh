#!/bin/bash
# The edit loop on two trees in one device call: H100s lent differ from call to call (2026-12-07: a kernel edit
# 1.79 s on one, 2.06 s on the next, for trees whose device-only build and verification were the same code), so
# a change is judged only against the other tree timed on the same machine, in alternating rounds.
#   OUT=DIR OLD=.carry/old-tree.tar.gz [EXAMPLES=softmax] [EDITS=3] [ROUNDS=2] [DEVICE=cuda] bash benchmarks/ab_trees.sh
# OLD: the other tree, made on the CPU machine (the device copy's .git is stale):
#   git archive COMMIT | gzip > .carry/old-tree.tar.gz      (then carry ".carry")
# Each round runs benchmarks/edit_loop.py of the old tree on the old tree, then this tree's on this one (--no-screen,
# a fresh data folder each); writes $OUT/ab-trees.tar.gz and prints one table: tree, round, .cu edit, model_new
# edit, benchmark after an edit, cold test verdict.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
OLD=${OLD:?set OLD to a git archive of the other tree}
. "$root/benchmarks/gpu_env.sh" >/dev/null 2>&1
old=$(mktemp -d)
tar xzf "$OLD" -C "$old" || { echo "cannot unpack $OLD"; exit 2; }
work=$(mktemp -d)
small=()
[ "${DEVICE:-cuda}" = cpu ] && small=(--small)
for round in $(seq 1 "${ROUNDS:-2}"); do
  for tree in old new; do
    dir=$root; [ "$tree" = old ] && dir=$old
    out="$work/$tree-$round"
    (cd "$dir" && PYTHONPATH="/tmp/site:$dir" KERNELPILOT_DATA_DIR="$out/data" timeout 300 python3 \
      benchmarks/edit_loop.py --out "$out" --examples "${EXAMPLES:-softmax}" --device "${DEVICE:-cuda}" \
      "${small[@]}" --no-screen --edits "${EDITS:-3}" --budget-s 240 > "$out.log" 2>&1)
    echo "$tree round $round: exit $?"
  done
done
tar czf "$OUT/ab-trees.tar.gz" -C "$work" --exclude=data . 2>/dev/null
python3 - "$work" <<'PY'
import glob, json, os, sys
print(f"{'tree':5} {'round':>5} {'example':14} {'.cu edit s':>10} {'model_new s':>11} {'benchmark s':>11} {'cold s':>7}")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-*", "edit-loop-*", "results.json"))):
    tree, rnd = os.path.basename(path.split("/edit-loop-")[0]).split("-")
    for r in json.load(open(path)):
        print(f"{tree:5} {rnd:>5} {r['example']:14} {r.get('warm_kernel_s')!s:>10} {r.get('warm_model_s')!s:>11} "
              f"{r.get('warm_benchmark_s')!s:>11} {r.get('cold_test_s')!s:>7}")
PY
