"""Does torch.compile already fuse a chain? Compile the chain's problem with Inductor and count.

Each chain is written as a problem file, compiled with ``torch.compile`` (Inductor) on the device
the script ran on, in one fresh process, and run once; ``torch._inductor.metrics.generated_kernel_count``
is the number of kernels Inductor generated for it (library calls such as the matmul of a matmul
chain are not generated kernels). One generated kernel for the chain's pointwise and reduction calls
means Inductor already fuses it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelpilot.profiling.fusion import Chain

COUNT = """
import json, sys, torch, importlib.util
import torch._inductor.metrics as metrics
device = sys.argv[1]
out = {}
for path in sys.argv[2:]:
    try:
        spec = importlib.util.spec_from_file_location("chain", path)
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        with torch.device(device):
            model = m.Model(*m.get_init_inputs())
            inputs = m.get_inputs()
        torch._dynamo.reset(); metrics.reset()
        with torch.no_grad():
            torch.compile(model)(*inputs)
        out[path] = metrics.generated_kernel_count
    except Exception as exc:
        out[path] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
print("COUNTS " + json.dumps(out))
"""


def verdict(chain: Chain, count: int | str, device: str) -> str:
    if isinstance(count, str):
        return f"unknown (torch.compile failed: {count[:80]})"
    kinds = {k for k in (c.name for c in chain.compute_ops())}
    has_matmul = chain.kind() == "matmul+epilogue"
    where = "" if device == "cuda" else " on CPU"
    if has_matmul:
        return (f"epilogue in 1 kernel{where}, matmul apart" if count <= 1 else f"no: {count} kernels{where} + matmul")
    del kinds
    return f"yes: 1 kernel{where}" if count <= 1 else f"no: {count} kernels{where}"


def check_chains(sources: list[tuple[Chain, str]], device: str, timeout: float = 900) -> None:
    """Set ``chain.compiled`` for each (chain, problem source)."""
    if not sources:
        return
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (_, source) in enumerate(sources):
            path = Path(tmp) / f"chain_{i}.py"
            path.write_text(source)
            paths.append(str(path))
        env = dict(os.environ)
        if device != "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ""
        try:
            res = subprocess.run([sys.executable, "-c", COUNT, device, *paths], capture_output=True, text=True,
                                 timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            for chain, _ in sources:
                chain.compiled = f"unknown (torch.compile took over {timeout:.0f} s)"
            return
        line = next((x for x in res.stdout.splitlines() if x.startswith("COUNTS ")), None)
        if line is None:
            tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
            for chain, _ in sources:
                chain.compiled = f"unknown (the check failed: {tail[:80]})"
            return
        counts = json.loads(line[len("COUNTS "):])
        for (chain, _), path in zip(sources, paths):
            chain.compiled = verdict(chain, counts.get(path, "no result"), device)


CPU_UNKNOWN = ("unknown (CPU run: Inductor's C++ backend does not fuse as its GPU one does; "
               "pass --compile-check to ask it anyway)")
