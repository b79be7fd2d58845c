"""What torch.profiler records for one problem's eager call, as the runtime audit's kernel trace reads it.

    python benchmarks/trace_probe.py PROBLEM.py [--out DIR]

Runs the problem's ``Model`` on its ``get_inputs()`` on the GPU through ``kernel_trace.profile_call`` (the
audit's own profiling: a one-element marker fill first), and prints the GPU events of the raw chrome trace
(category, name, stream, correlation, the aten ops around each launch) beside what ``parse_trace`` kept.
Written for level1/46 (avg_pool3d over 2.1e9 elements), whose trace showed "no GPU work at all".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kernelpilot.evaluation.audit import kernel_trace
    from kernelpilot.problem import load_problem

    prob = load_problem(args.problem)
    module = prob.load_module()
    with torch.device("cuda"):
        model = module.Model(*module.get_init_inputs()).cuda().eval()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    with torch.no_grad():
        model(*inputs)  # warm
    torch.cuda.synchronize()
    parsed = kernel_trace.profile_call(model, inputs, "cuda")
    marker = torch.empty(1, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        marker.fill_(1.0)
        with torch.no_grad():
            model(*inputs)
        torch.cuda.synchronize()
    path = Path("/tmp/kp-trace-probe.json")
    prof.export_chrome_trace(str(path))
    raw = json.loads(path.read_text())
    gpu = [e for e in raw.get("traceEvents", []) if isinstance(e, dict)
           and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")]
    report = {"problem": str(args.problem), "input_numel": [getattr(x, "numel", lambda: 0)() for x in inputs],
              "parsed": {"home_stream": parsed.home_stream, "kernels": parsed.kernels[:20],
                         "launched_by": [list(x) for x in parsed.launched_by[:20]],
                         "start_mark": parsed.start_mark, "end_mark": parsed.end_mark,
                         "syncs_recorded": parsed.syncs_recorded, "syncs": [vars(y) for y in parsed.syncs[:20]]},
              "raw_gpu_events": [{k: e.get(k) for k in ("cat", "name", "ph", "ts", "dur")} |
                                 {"stream": (e.get("args") or {}).get("stream"),
                                  "correlation": (e.get("args") or {}).get("correlation")} for e in gpu[:40]],
              "categories": sorted({str(e.get("cat")) for e in raw.get("traceEvents", []) if isinstance(e, dict)})}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"trace-probe-{args.problem.stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["parsed"])[:1500])
    for e in report["raw_gpu_events"][:12]:
        print(e)
    print("categories:", report["categories"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
