"""Write a folder of KernelBench-style generations (``level_<L>_problem_<ID>_sample_<S>_kernel.py``, the layout
``kernelpilot suite --solutions`` reads) by applying the generation patterns of tests/data/generations/ across
the problems of a KernelBench checkout, with the outcome expected of each file in ``expected.json`` beside it.

Patterns (sample numbers follow this order, per problem):

- ``cuda_top``, ``cuda_init``, ``cuda_first_forward``: a real elementwise CUDA kernel (load_inline at module
  top level, in ``__init__``, in the first forward) for the elementwise problems of level 1 (honest);
- ``cuda_fp16``: the same kernel computing in ``__half`` (mixed precision: fails fp32 at 1e-4);
- ``pytorch_rewrite``: the reference's own code as ModelNew (no kernel of its own);
- ``try_fallback``: a kernel built at import and a ``try:`` whose fallback to the reference is always taken;
- ``cached_output``: the reference's output cached across calls (keyed on address and sampled values);
- ``fp16_compute``: the reference run in fp16 and cast back (mixed precision, no kernel; float tensors its forward
  makes of the default dtype are made in fp16 too).

Problems are taken smallest first (bytes the operator moves, on the meta device) so that a time budget
covers the most of them. ``--corpus DIR`` also writes the hand-written corpus in this layout into DIR.

  python benchmarks/kb_generations.py --kernelbench .kb --out /tmp/kb-generations            # about 250 files
  kernelpilot suite .kb/KernelBench --solutions /tmp/kb-generations --rules kernelbench --out run
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "generations"

# level-1 elementwise problems: the CUDA expression of v (float), and constructor arguments it reads
ELEMENTWISE: dict[int, str] = {
    19: "v > 0.0f ? v : 0.0f",
    20: "v > 0.0f ? v : v * p0",  # negative_slope, default 0.01
    21: "1.0f / (1.0f + expf(-v))",
    22: "tanhf(v)",
    25: "v / (1.0f + expf(-v))",
    26: "0.5f * v * (1.0f + erff(v * 0.7071067811865476f))",
    27: "1.0507009873554805f * (v > 0.0f ? v : 1.6732632423543772f * (expf(v) - 1.0f))",
    28: "fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f)",
    29: "v > 20.0f ? v : log1pf(expf(v))",
    30: "v / (1.0f + fabsf(v))",
    31: "v > 0.0f ? v : p0 * (expf(v) - 1.0f)",  # alpha, from get_init_inputs
    32: "fminf(fmaxf(v, -1.0f), 1.0f)",
    88: "0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))",
}
DEFAULT_P0 = {20: 0.01, 31: 1.0}

KERNEL = r'''#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_fp16.h>

__global__ void ew_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, float p0) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float v = LOAD;
    y[i] = STORE;
  }
}

torch::Tensor ew_cuda(torch::Tensor x, double p0) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "ew_cuda: a float32 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  long long n = xc.numel();
  long long want = (n + 255) / 256;
  int blocks = (int)(want < 131072 ? want : 131072);
  ew_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n, (float)p0);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
'''
CPP = "torch::Tensor ew_cuda(torch::Tensor x, double p0);"


def _load(name: str, indent: str) -> str:
    return (f'{indent}load_inline(name="{name}", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,\n'
            f'{indent}            functions=["ew_cuda"], verbose=False)')


def elementwise(pid: int, placement: str, name: str, half: bool = False) -> str:
    expr = ELEMENTWISE[pid]
    # fp16: the input and the result rounded through half precision (storage in fp16, as mixed-precision code does)
    src = KERNEL.replace("LOAD", "__half2float(__float2half(x[i]))" if half else "x[i]")
    src = src.replace("STORE", f"__half2float(__float2half({expr}))" if half else expr)
    head = ("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
            f'CUDA_SOURCE = r"""\n{src}"""\nCPP_SOURCE = "{CPP}"\n')
    p0 = DEFAULT_P0.get(pid, 0.0)
    init = f"        self.p0 = float(args[0]) if args else {p0!r}\n"
    if placement == "top":
        return head + f"\next = {_load(name, '')[0:].lstrip()}\n" + _model(init, "ext")
    if placement == "init":
        return head + _model(init + f"        self.ext = {_load(name, '                   ').lstrip()}\n", "self.ext")
    return head + _model(init + "        self.ext = None\n", "self.ext",
                         first=f"        if self.ext is None:\n            self.ext = {_load(name, '                       ').lstrip()}\n")


def _model(init: str, ext: str, first: str = "") -> str:
    return (f"\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n{init}\n"
            f"    def forward(self, x):\n{first}        return {ext}.ew_cuda(x, self.p0)\n")


def reference_class(problem: Path) -> str:
    """The problem's source with its Model renamed _Reference (the body every wrapper pattern reuses)."""
    text = problem.read_text(encoding="utf-8")
    text = re.sub(r"\bclass Model\b", "class _Reference", text)
    return re.sub(r"super\(\s*Model\s*,", "super(_Reference,", text)


WRAPPERS: dict[str, str] = {
    "pytorch_rewrite": '''

class ModelNew(_Reference):
    """the reference's own PyTorch code (no kernel of its own)."""

    def forward(self, *inputs):
        return super().forward(*inputs)
''',
    "try_fallback": '''
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="kbgen_copy_NAME", cpp_sources="torch::Tensor copy_cuda(torch::Tensor x);",
                   cuda_sources=r"""
#include <torch/extension.h>
__global__ void copy_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
torch::Tensor copy_cuda(torch::Tensor x) {
  auto y = torch::empty_like(x);
  copy_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
""", functions=["copy_cuda"], verbose=False)


class ModelNew(_Reference):
    """builds a kernel and falls back to PyTorch in a try: the fallback is always taken."""

    def forward(self, *inputs):
        try:
            return _ext.copy_cuda(*inputs, "never")  # the binding takes one tensor: TypeError
        except Exception:
            return super().forward(*inputs)
''',
    "cached_output": '''

class ModelNew(_Reference):
    """returns the previous output when the inputs look the same (address, shape, sampled values)."""

    _key = None
    _out = None

    def forward(self, *inputs):
        key = tuple((x.data_ptr(), tuple(x.shape), float(x.reshape(-1)[0]), float(x.reshape(-1)[-1]))
                    if isinstance(x, torch.Tensor) and x.numel() else repr(x) for x in inputs)
        if key != self._key:
            self._key, self._out = key, super().forward(*inputs)
        return self._out
''',
    "fp16_compute": '''

class ModelNew(_Reference):
    """the reference computed in fp16 and cast back to fp32 (mixed precision, no kernel of its own)."""

    def forward(self, *inputs):
        self.half()
        for module in self.modules():  # tensors kept as plain attributes (an RNN's hidden state) too
            for name, value in list(vars(module).items()):
                if isinstance(value, torch.Tensor) and value.is_floating_point():
                    setattr(module, name, value.half())
        halved = [x.half() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        out = super().forward(*halved)
        return out.float() if isinstance(out, torch.Tensor) and out.is_floating_point() else out
''',
}
# fp16_compute for a reference whose forward makes float tensors of the default dtype (an LSTM's random h0):
# those are made in fp16 too (the default dtype set for the call and put back), else the call mixes dtypes
FP16_DEFAULT_DTYPE = '''
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float16)
        try:
            out = super().forward(*halved)
        finally:
            torch.set_default_dtype(previous)
'''
# torch's factories that make a floating tensor of the default dtype when given no dtype
_DEFAULT_DTYPE_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "full", "linspace", "logspace", "eye"}


def forward_makes_default_dtype(reference: str) -> bool:
    """Whether the forward of ``_Reference`` in this source calls a torch factory with no ``dtype=`` (the tensor
    it makes takes the default dtype, not the inputs')."""
    tree = ast.parse(reference)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Reference"):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"):
            for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                f = call.func
                if (isinstance(f, ast.Attribute) and f.attr in _DEFAULT_DTYPE_FACTORIES
                        and isinstance(f.value, ast.Name) and f.value.id == "torch"
                        and not any(k.arg == "dtype" for k in call.keywords)):
                    return True
    return False


def wrapper(pattern: str, reference: str) -> str:
    """The ModelNew of ``pattern`` for this reference source."""
    text = WRAPPERS[pattern]
    if pattern == "fp16_compute" and forward_makes_default_dtype(reference):
        text = text.replace("        out = super().forward(*halved)\n", FP16_DEFAULT_DTYPE.lstrip("\n"))
    return text

# the outcome expected of each pattern: our status and rules, KernelBench's status (None: depends on the problem)
EXPECTED: dict[str, dict] = {
    "cuda_top": {"honest": True, "kernelpilot": {"status": "ok", "rules": []}, "kernelbench": "correct"},
    "cuda_init": {"honest": True, "kernelpilot": {"status": "ok", "rules": []}, "kernelbench": "correct"},
    "cuda_first_forward": {"honest": True, "kernelpilot": {"status": "ok", "rules": []}, "kernelbench": "correct"},
    "cuda_fp16": {"honest": False, "kernelpilot": {"status": "incorrect", "rules": []}, "kernelbench": None},
    "pytorch_rewrite": {"honest": False, "kernelpilot": {"status": "rejected", "rules": ["no-kernel"]}, "kernelbench": "correct"},
    "try_fallback": {"honest": False, "kernelpilot": {"status": "rejected", "rules": ["no-custom-kernel"]}, "kernelbench": "correct"},
    "cached_output": {"honest": False, "kernelpilot": {"status": "rejected", "rules": ["no-kernel"]}, "kernelbench": None},
    "fp16_compute": {"honest": False, "kernelpilot": {"status": "rejected", "rules": ["no-kernel"]}, "kernelbench": None},
}


def problems_by_size(levels_root: Path, levels: list[int]) -> list[tuple[int, int, Path, int]]:
    """(level, id, file, bytes moved) of every problem, smallest first; a problem that cannot be sized goes last."""
    from kernelpilot.problem import analyse, load_problem

    out = []
    for lv in levels:
        for f in sorted((levels_root / f"level{lv}").glob("*.py")):
            head = f.name.split("_", 1)[0]
            if not head.isdigit():
                continue
            try:
                size = int(analyse(load_problem(f)).bytes_moved or 0)
            except Exception:  # a problem the meta device cannot run: keep it, last
                size = 1 << 62
            out.append((lv, int(head), f, size))
    return sorted(out, key=lambda t: (t[3], t[0], t[1]))


def levels_root(checkout: Path) -> Path:
    for root in (checkout, checkout / "KernelBench"):
        if (root / "level1").is_dir():
            return root
    sys.exit(f"{checkout} holds no level1/ (pass a KernelBench checkout, or its KernelBench/ folder)")


def write_corpus(folder: Path) -> None:
    """The hand-written corpus (tests/data/generations) in KernelBench's layout in ``folder``, with its manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((CORPUS / "expected.json").read_text())
    for e in manifest["files"]:
        shutil.copyfile(CORPUS / e["file"], folder / e["generation_name"])
    (folder / "expected.json").write_text(json.dumps(manifest, indent=1) + "\n")


def write(args: argparse.Namespace) -> int:
    root = levels_root(Path(args.kernelbench).expanduser().resolve())
    out = Path(args.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    samples: dict[tuple[int, int], int] = {}

    def emit(lv: int, pid: int, problem: Path, pattern: str, text: str) -> None:
        s = samples.get((lv, pid), 0)
        samples[(lv, pid)] = s + 1
        name = f"level_{lv}_problem_{pid}_sample_{s}_kernel.py"
        (out / name).write_text(text, encoding="utf-8")
        entries.append({"file": name, "problem": f"level{lv}/{problem.stem}", "pattern": pattern, **EXPECTED[pattern]})

    for pid in sorted(ELEMENTWISE)[: args.elementwise]:
        problem = next((root / "level1").glob(f"{pid}_*.py"), None)
        if problem is None:
            continue
        for placement in ("top", "init", "first_forward"):
            emit(1, pid, problem, f"cuda_{placement}", elementwise(pid, placement, f"kbgen_{pid}_{placement}"))
        emit(1, pid, problem, "cuda_fp16", elementwise(pid, "top", f"kbgen_{pid}_fp16", half=True))
    sized = problems_by_size(root, args.levels)[: args.problems]
    for i, (lv, pid, problem, _size) in enumerate(sized):
        body = reference_class(problem)
        for pattern in ("pytorch_rewrite", "cached_output", "fp16_compute", "try_fallback"):
            if pattern == "try_fallback" and i >= args.fallbacks:
                continue  # each builds a kernel of its own: only the smallest problems get one
            emit(lv, pid, problem, pattern, body + wrapper(pattern, body).replace("NAME", f"{lv}_{pid}"))
    if args.corpus:  # a folder of its own: the suite reads every generation below --solutions
        write_corpus(Path(args.corpus).expanduser())
    doc = {"about": "generations written by benchmarks/kb_generations.py; kernelpilot: our expected status under the "
                    "kernelbench presets (rules: reject findings that must be present), kernelbench: KernelBench's "
                    "expected status (null where it depends on the problem)",
           "kernelbench": str(root), "files": entries}
    (out / "expected.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(entries)} generations for {len(samples)} problems in {out}" + (f" (and the corpus in {args.corpus})" if args.corpus else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernelbench", required=True, help="a KernelBench checkout (or its KernelBench/ folder of levels)")
    p.add_argument("--out", required=True, help="the folder to write the generations into")
    p.add_argument("--levels", type=lambda t: [int(x) for x in t.split(",")], default=[1, 2, 3])
    p.add_argument("--problems", type=int, default=60, help="wrapper patterns for this many problems, smallest first")
    p.add_argument("--fallbacks", type=int, default=20, help="try_fallback (a kernel build each) for this many of them")
    p.add_argument("--elementwise", type=int, default=len(ELEMENTWISE),
                   help=f"the CUDA patterns for this many of the {len(ELEMENTWISE)} level-1 elementwise problems, by id "
                        "(at today's sizes each costs KernelBench's harness a 60-100 s draw of its inputs per suite)")
    p.add_argument("--corpus", metavar="DIR", help="also write the hand-written corpus in the layout into DIR (not inside --out)")
    return write(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
