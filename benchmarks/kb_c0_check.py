"""Run converted c0 candidates against their problem on the GPU: does each run, and does it match?

    python benchmarks/kb_c0_check.py --kernelbench KB --c0 OUT [--only KEY,KEY] [--budget-s 120] [--timeout 60]

For each problem that ``kernelpilot init --from-inductor`` converted (OUT/c0-index.json), one fresh
process builds Model and ModelNew on the GPU, copies Model's state into ModelNew by name (as the
harness does), runs both on the same seeded inputs and compares (max abs difference, allclose at 1e-2).
This is a quick check of the conversion, not a verdict: the suite gives those. Prints one line per
problem and a summary; writes OUT/c0-check.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import importlib.util, json, sys, torch
from kernelpilot.problem import load_problem, make_inputs
problem, cand = sys.argv[1], sys.argv[2]
sys.path.insert(0, cand)
module = load_problem(problem).load_module()
spec = importlib.util.spec_from_file_location("model_new", cand + "/model_new.py")
new_mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(new_mod)
init = module.get_init_inputs()
torch.manual_seed(0); ref = module.Model(*init).cuda().eval()
torch.manual_seed(0); new = new_mod.ModelNew(*init)
have = new.state_dict()
with torch.no_grad():
    for k, v in ref.state_dict().items():
        have[k].copy_(v)
new = new.cuda().eval()
with torch.device("cuda"):
    torch.manual_seed(1); inputs = list(make_inputs(module))
with torch.no_grad():
    want = ref(*inputs)
    got = new(*inputs)
flat = lambda o: [t for t in (o if isinstance(o, (tuple, list)) else [o]) if isinstance(t, torch.Tensor)]
diffs, ok = [], True
for a, b in zip(flat(want), flat(got)):
    if a.shape != b.shape:
        ok = False; diffs.append(f"shape {tuple(b.shape)} != {tuple(a.shape)}"); continue
    d = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    ok = ok and torch.allclose(a.double(), b.double(), atol=1e-2, rtol=1e-2)
    diffs.append(d)
ok = ok and len(flat(want)) == len(flat(got))
print("C0CHECK " + json.dumps({"ok": bool(ok), "diffs": diffs}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench", required=True, type=Path)
    ap.add_argument("--c0", required=True, type=Path)
    ap.add_argument("--only", default="")
    ap.add_argument("--budget-s", type=float, default=120.0)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=3)  # each holds a problem twice over
    args = ap.parse_args()
    from kernelpilot.inductor.batch import discover

    paths = {i.key: i.path for i in discover([args.kernelbench])}
    rows = [r for r in json.loads((args.c0 / "c0-index.json").read_text()) if r.get("outcome") in ("converted", "eager")]
    if args.only:  # these first, then the others while the budget lasts
        wanted = args.only.split(",")
        rows = [r for r in rows if r["problem"] in wanted] + [r for r in rows if r["problem"] not in wanted]
    t0 = time.monotonic()

    def check(r: dict) -> dict:
        if time.monotonic() - t0 > args.budget_s:
            return {"problem": r["problem"], "status": "not_run"}
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD, str(paths[r["problem"]]), r["candidate"]],
                                  capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
            line = next((x for x in proc.stdout.splitlines() if x.startswith("C0CHECK ")), None)
            if line is None:
                res = {"status": "error", "error": "\n".join(proc.stderr.strip().splitlines()[-6:])}
            else:
                data = json.loads(line[8:])
                res = {"status": "ok" if data["ok"] else "mismatch", "diffs": data["diffs"]}
        except subprocess.TimeoutExpired:
            res = {"status": "timeout"}
        print(f"{r['problem']}: {res['status']} {res.get('diffs', '')} {res.get('error', '')[-400:]}", flush=True)
        return {"problem": r["problem"], "shape": r.get("shape"), **res}

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(check, rows))
    counts: dict[str, int] = {}
    for x in results:
        counts[x["status"]] = counts.get(x["status"], 0) + 1
    print("c0 check: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    (args.c0 / "c0-check.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
