"""CuTe-DSL candidates without a GPU: the language recognised, the policy on DSL sources (allowed and refused),
the audit's reading of DSL kernel names, the build step's missing-extra line, the starter; and, where the DSL is
installed (marker ``cute``), compiles for sm_90a on the CPU through the worker's cache."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import pytest

from kernelpilot.evaluation.audit import runtime as ra
from kernelpilot.evaluation.build import cute_build
from kernelpilot.evaluation.candidate import cute_kernels, load_candidate
from kernelpilot.evaluation.static.cute_names import names_dsl_kernel
from kernelpilot.evaluation.static.policy import check_candidate, check_python
from kernelpilot.evaluation.worker import cute_hook

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rmsnorm_cute"
HAS_DSL = importlib.util.find_spec("cutlass") is not None
needs_dsl = pytest.mark.skipif(not HAS_DSL, reason="the CuTe DSL ([cute] extra) is not installed")

KB_CUTE = textwrap.dedent('''\
    import torch
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack

    @cute.kernel
    def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        gC[0, tidx] = gA[0, tidx] + gB[0, tidx]

    @cute.jit
    def add_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
        add_kernel(mA, mB, mC).launch(grid=(1, 1, 1), block=(128, 1, 1))

    class ModelNew(torch.nn.Module):
        def forward(self, A, B):
            C = torch.empty_like(A)
            f = cute.compile(add_host, from_dlpack(A), from_dlpack(B), from_dlpack(C))
            f(from_dlpack(A), from_dlpack(B), from_dlpack(C))
            return C
    ''')


def _rules(source: str) -> list[str]:
    return [f.rule for f in check_python(source, "model_new.py") if f.severity == "reject"]


def test_cute_candidates_are_recognised(tmp_path: Path) -> None:
    single = tmp_path / "kb_cute.py"
    single.write_text(KB_CUTE)
    cand = load_candidate(single)
    assert cand.kind == "cute" and cute_kernels(cand) == ["add_kernel"]
    example = load_candidate(EXAMPLE / "candidate")
    assert example.kind == "cute" and cute_kernels(example) == ["rmsnorm_kernel"]
    assert {p.name for p in example.files} == {"model_new.py", "row_config.py"}
    # kernels in a helper beside model_new.py, imported through `from cutlass import cute`
    d = tmp_path / "dir"
    d.mkdir()
    (d / "kernels.py").write_text("from cutlass import cute as ct\n\n@ct.kernel\ndef k(x):\n    pass\n")
    (d / "model_new.py").write_text("import torch\nfrom kernels import k\n\nclass ModelNew(torch.nn.Module):\n"
                                    "    def forward(self, x):\n        return x\n")
    helper = load_candidate(d / "model_new.py")
    assert helper.kind == "cute" and cute_kernels(helper) == ["k"]


def test_policy_allows_the_dsl_and_the_example() -> None:
    assert _rules(KB_CUTE) == []
    assert [f for f in check_candidate(EXAMPLE / "candidate") if f.severity == "reject"] == []
    ok = ("import cuda.bindings.driver as cuda\nimport torch\n"
          "s = cuda.CUstream(torch.cuda.current_stream().cuda_stream)\n"
          "from cutlass.utils import SmemAllocator\nimport cutlass.pipeline\n")
    assert _rules(ok) == []


@pytest.mark.parametrize("source, rule", [
    ("from cutlass.cute.runtime import load_module\n", "cute-internals"),
    ("import cutlass.cute as cute\nm = cute.runtime.load_module('k.o')\n", "cute-internals"),
    ("import cutlass.cute as cute\ndef f(c):\n    c.export_to_c('.', 'k')\n", "cute-internals"),
    ("import cutlass.cute as cute\ncute.testing.benchmark(print)\n", "cute-internals"),
    ("from cutlass.base_dsl import dsl\n", "import-cutlass"),
    ("import cutlass._mlir.ir\n", "import-cutlass"),
    ("import cuda.bindings.driver as cuda\ns = cuda.cuStreamCreate(0)\n", "cute-internals"),
    ("from cuda.bindings.driver import cuModuleLoad\n", "cute-internals"),
    ("import cuda.bindings.runtime\n", "import-cuda"),
    ("import cutlass.cute as cute\nimport torch\ns = torch.cuda.Stream()\n", "side-stream"),
    ("import cutlass.cute as cute\ncute.compile = None\n", "module-patch"),
    ("import os\nimport cutlass.cute as cute\n", "import-os"),
])
def test_policy_refuses_dsl_escapes_and_the_usual_cheats(source: str, rule: str) -> None:
    assert rule in _rules(source)


def test_dsl_kernels_are_the_candidates_own_and_cutlass_library_kernels_are_not() -> None:
    own = ["rmsnorm_kernel"]
    dsl = "kernel_cutlass_rmsnorm_kernel_tensorptrbf16gmemalign16o40961_tensorptrbf16gmemalign16o4096_0"
    assert names_dsl_kernel(dsl, "rmsnorm_kernel") and not names_dsl_kernel(dsl, "layernorm_kernel")
    assert not names_dsl_kernel("void rmsnorm_kernel<float>(float const*)", "rmsnorm_kernel")
    assert ra.kernel_findings(ra.KernelTrace(kernels=[(dsl, 7)], home_stream=7), own, []) == []
    library = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(Params)"
    trace = ra.KernelTrace(kernels=[(library, 7)], home_stream=7)
    assert [f.rule for f in ra.kernel_findings(trace, own, [])] == ["no-custom-kernel", "library-kernel"]
    sm90 = "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8_warpspecialized"
    both = ra.KernelTrace(kernels=[(dsl, 7), (sm90, 7)], home_stream=7)
    assert [f.rule for f in ra.kernel_findings(both, own, [])] == ["library-kernel"]
    side = ra.KernelTrace(kernels=[(dsl, 13)], home_stream=7)
    assert [f.rule for f in ra.kernel_findings(side, own, [])] == ["side-stream"]


def test_a_cute_candidate_without_the_extra_is_a_build_error_naming_it(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cute_build, "_version", lambda dist: None)
    report = cute_build.build_cute(load_candidate(EXAMPLE / "candidate"), env={}, directory=tmp_path)
    errors = [d.message for d in report.diagnostics if d.severity == "error"]
    assert not report.ok and len(errors) == 1 and "pip install 'kernelpilot[cute]'" in errors[0]
    # the DSL for the other CUDA: the matching wheel is named
    monkeypatch.setattr(cute_build, "_version", lambda d: None if d.endswith("cu13") else cute_build.DSL_VERSION)
    monkeypatch.setattr(cute_build, "torch_cuda_version", lambda: "13.0")
    report = cute_build.build_cute(load_candidate(EXAMPLE / "candidate"), env={}, directory=tmp_path)
    assert not report.ok and "nvidia-cutlass-dsl[cu13]==4.8.1" in report.diagnostics[0].message
    assert cute_build.wheel_for("12.8") == "nvidia-cutlass-dsl==4.8.1"


def test_torch_cuda_version_is_read_without_importing_torch() -> None:
    import torch

    assert cute_build.torch_cuda_version() == torch.version.cuda


def test_the_compile_key_covers_argument_types_and_every_candidate_source(tmp_path: Path) -> None:
    (tmp_path / "model_new.py").write_text("x = 1\n")
    (tmp_path / "helper.py").write_text("y = 2\n")

    def f() -> None:
        pass

    key = cute_hook.compile_key(f, (1, "a"), {"options": ""}, arch="sm_90a", versions="v", candidate_dir=str(tmp_path))
    assert key == cute_hook.compile_key(f, (1, "a"), {"options": ""}, arch="sm_90a", versions="v",
                                        candidate_dir=str(tmp_path))
    changed = [cute_hook.compile_key(f, (2, "a"), {"options": ""}, arch="sm_90a", versions="v",
                                     candidate_dir=str(tmp_path)),
               cute_hook.compile_key(f, (1, "a"), {"options": "x"}, arch="sm_90a", versions="v",
                                     candidate_dir=str(tmp_path)),
               cute_hook.compile_key(f, (1, "a"), {"options": ""}, arch="sm_100a", versions="v",
                                     candidate_dir=str(tmp_path)),
               cute_hook.compile_key(f, (1, "a"), {"options": ""}, arch="sm_90a", versions="w",
                                     candidate_dir=str(tmp_path))]
    (tmp_path / "helper.py").write_text("y = 3\n")  # a helper edited: every kernel of the candidate recompiles
    changed.append(cute_hook.compile_key(f, (1, "a"), {"options": ""}, arch="sm_90a", versions="v",
                                         candidate_dir=str(tmp_path)))
    assert key not in changed and len(set(changed)) == len(changed)
    assert cute_hook.compile_key(f, (object(),), {}, arch="a", versions="v", candidate_dir=str(tmp_path)) is None


_COMPILE = '''
import math, sys, time
sys.path.insert(0, sys.argv[1])
from kernelpilot.evaluation.worker import cute_hook
cute_hook.install(sys.argv[1])
import torch, cutlass, cutlass.cute as cute
from cuda.bindings.driver import CUstream
import model_new as m
x = torch.empty(4, 4096, dtype=torch.bfloat16)
w = torch.empty(4096, dtype=torch.bfloat16)
vec, threads, cluster, reload = m.row_config(4096, 2)
c = cute.compile(m.rmsnorm_host, m._tensor(x), cute.runtime.from_dlpack(w, assumed_align=16), m._tensor(x),
                 cutlass.Float32(1e-6), CUstream(0), vec, math.ceil(4096 // vec / (threads * cluster)), threads,
                 cluster, reload)
hows = [record["how"] for record in cute_hook.compiles]
print(hows.count("compiled"), hows.count("loaded"), list(c.kernel_info)[0])
'''


@pytest.mark.cute
@needs_dsl
def test_the_example_compiles_on_the_cpu_and_a_second_worker_loads_it(tmp_path: Path) -> None:
    cand = tmp_path / "candidate"
    cand.mkdir()
    for f in ("model_new.py", "row_config.py"):
        (cand / f).write_text((EXAMPLE / "candidate" / f).read_text())
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": path}

    def run() -> list[str]:
        out = subprocess.run([sys.executable, "-c", _COMPILE, str(cand)], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.split()

    first, second = run(), run()
    assert first[:2] == ["1", "0"] and second[:2] == ["0", "1"]  # compiled once, then loaded
    assert first[2].startswith("kernel_cutlass_rmsnorm_kernel_") and second[2] == first[2]
    (cand / "row_config.py").write_text((cand / "row_config.py").read_text() + "\n# edited\n")
    assert run()[:2] == ["1", "0"]  # a helper edited: compiled again


def test_init_language_cute_writes_a_cute_starter_the_policy_accepts(tmp_path: Path) -> None:
    from kernelpilot.cli_parser import build_parser
    from kernelpilot.starter import init_project

    args = build_parser().parse_args(["init", str(tmp_path), "--language", "cute"])
    assert args.language == "cute"
    written = init_project(tmp_path, "softmax", language="cute")
    cand = load_candidate(tmp_path / "kernels" / "softmax")
    assert cand.kind == "cute" and cute_kernels(cand) == ["softmax_kernel"]
    assert [p.name for p in written][2:] == ["model_new.py"]
    assert [f for f in check_candidate(cand.path) if f.severity == "reject"] == []


@pytest.mark.cute
@needs_dsl
def test_the_cute_starter_compiles_on_the_cpu(tmp_path: Path) -> None:
    from kernelpilot.starter import write_starter_candidate

    write_starter_candidate(tmp_path, "cute")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import torch, cutlass.cute as cute, model_new as m\n"
            "from cuda.bindings.driver import CUstream\nx = torch.empty(4, 4096, dtype=torch.bfloat16)\n"
            "c = cute.compile(m.softmax_host, m._tensor(x), m._tensor(x), CUstream(0)); print(list(c.kernel_info))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CUTE_DSL_ARCH": "sm_90a"})
    assert out.returncode == 0 and "kernel_cutlass_softmax_kernel_" in out.stdout, out.stderr[-2000:]


def test_the_cute_twins_of_the_corpus_cheats_meet_the_policy_as_their_cuda_twins_do(tmp_path: Path) -> None:
    """The CuTe cases of tests/adversarial_corpus.py: each is a CuTe candidate; the side-stream cheat is refused
    before it runs (like its Triton twin), the others reach the runtime defences (tests/gpu/test_adversarial.py and
    benchmarks/cute_gpu.sh run them on the GPU)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from adversarial_corpus import CUTE_CASES, materialize

    assert {c.name for c in CUTE_CASES} >= {"cute_honest_scale_add", "cute_out_of_bounds_write",
                                           "cute_torch_op_after_launch", "cute_cache_content", "cute_side_stream"}
    for case in CUTE_CASES:
        directory = materialize(case, tmp_path / "candidate")
        assert directory.name == "candidate-cute"
        cand = load_candidate(directory)
        assert cand.kind == "cute" and cute_kernels(cand) == ["scale_add_kernel"], case.name
        refused = {f.rule for f in check_candidate(directory) if f.severity == "reject"}
        assert refused == ({case.static_rule} if case.static_rule else set()), case.name
        assert not {f.rule for f in check_candidate(directory, relaxed=case.relax) if f.severity == "reject"}


_REMARKS = ("\x1b[96mremark[ptxas info]:\x1b[0m ptxas output: ptxas info    : 0 bytes gmem\n"
            "ptxas info    : Compiling entry function 'kernel_cutlass_k_tensorptrf32__0' for 'sm_90a'\n"
            "ptxas info    : Function properties for kernel_cutlass_k_tensorptrf32__0\n"
            "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
            "ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]\n")


_WRAPPED = """remark[ptxas]: ptxas detected register spills

  --> model_new.py:36:4
   |
> 36 |     rX.fill(0)
  remark: Spilled values are placed in local memory and can add memory traffic and latency.

          ptxas output:
          ptxas info    : 0 bytes gmem
          ptxas info    : Compiling entry function
          'kernel_cutlass_rmsnorm_kernel_tensorptrbf16genericalign16o1310721310721__8_32_512_0'
          for 'sm_90a'
          ptxas info    : Function properties for
          kernel_cutlass_rmsnorm_kernel_tensorptrbf16genericalign16o1310721310721__8_32_512_0
          ptxas         .     1864 bytes stack frame, 3424 bytes spill stores, 3424 bytes spill
          loads
          ptxas info    : Used 32 registers, used 1 barriers, 1864 bytes cumulative stack size
          ptxas info    : Compile time = 222.832 ms
  suggestion: reduce live ranges in the reported kernel
"""


def test_ptxas_figures_of_a_cute_compile_reach_the_build_section() -> None:
    from kernelpilot.evaluation.assembly import merge_response
    from kernelpilot.verdict import BuildReport, Verdict

    assert cute_hook.with_remarks({}) == {"options": "remarks{ptx}"}
    assert cute_hook.with_remarks({"options": "--opt-level 2"}) == {"options": "--opt-level 2 remarks{ptx}"}
    assert cute_hook.with_remarks({"options": object()}) is None
    [k] = cute_hook.figures(_REMARKS)
    assert (k["kernel"], k["arch"], k["registers"], k["shared_bytes"], k["stack_frame_bytes"],
            k["spill_stores_bytes"], k["spill_loads_bytes"]) == ("kernel_cutlass_k_tensorptrf32__0", "sm_90a", 255,
                                                                1024, 16, 8, 12)
    [spilled] = cute_hook.figures(_WRAPPED)  # the DSL wraps ptxas's lines when it saw spills
    assert (spilled["kernel"].endswith("__8_32_512_0"), spilled["arch"], spilled["registers"],
            spilled["stack_frame_bytes"], spilled["spill_stores_bytes"], spilled["spill_loads_bytes"]) == (
        True, "sm_90a", 32, 1864, 3424, 3424)
    cute_hook.kernels.extend([k, dict(k)])
    assert cute_hook.take_kernels() == [k] and cute_hook.kernels == []
    v = Verdict(status="ok", problem="p", candidate="c", mode="test", build=BuildReport(ok=True, seconds=0.1))
    merge_response(v, {"verdict": {"status": "ok", "build_kernels": [k]}})
    assert [(b.kernel, b.registers, b.spill_stores_bytes) for b in v.build.kernels] == [
        ("kernel_cutlass_k_tensorptrf32__0", 255, 8)]
    assert v.build.rebuilt == [] and v.build.cache == ""  # no word of the compiles: nothing said of them


def test_the_build_section_says_which_cute_functions_compiled_and_when_the_cache_served_all() -> None:
    from kernelpilot.evaluation.assembly import merge_response
    from kernelpilot.evaluation.render import render_text
    from kernelpilot.verdict import BuildReport, Verdict

    def merged(compiles: list[dict[str, object]]) -> Verdict:
        v = Verdict(status="ok", problem="p", candidate="c", mode="test", build=BuildReport(ok=True, seconds=0.1))
        merge_response(v, {"verdict": {"status": "ok", "build_compiles": compiles}})
        return v

    edited = merged([{"function": "rmsnorm_host", "how": "compiled", "seconds": 2.1},
                     {"function": "row_config", "how": "loaded"}, {"function": "rmsnorm_host", "how": "compiled"}])
    assert edited.build.rebuilt == ["cute.compile rmsnorm_host"] and edited.build.cache == ""
    assert "rebuilt cute.compile rmsnorm_host" in render_text(edited)
    uncached = merged([{"function": "f", "how": "uncached"}, {"function": "g", "how": "loaded"}])
    assert uncached.build.rebuilt == ["cute.compile f"] and uncached.build.cache == ""
    again = merged([{"function": "rmsnorm_host", "how": "loaded"}, {"function": "row_config", "how": "loaded"}])
    assert again.build.rebuilt == [] and again.build.cache == "hit"
    assert "nothing compiled (cache hit)" in render_text(again)
    assert merged([]).build.cache == ""  # no compile at all is not a hit
    full = "not stored in the cache (OSError: full)"
    unkept = merged([{"function": "rmsnorm_host", "how": "compiled", "note": full}] * 2)
    warned = [d for d in unkept.build.diagnostics if d.severity == "warning"]
    assert [d.message for d in warned] == ["CuTe compile cache, rmsnorm_host: not stored in the cache (OSError: full)"]
    assert "not stored in the cache (OSError: full)" in render_text(unkept)
    assert not again.build.diagnostics  # a cache that served has nothing to say


def test_the_key_is_the_same_for_each_import_the_worker_makes_of_one_candidate(tmp_path: Path) -> None:
    """The worker imports every evaluation's candidate under a new module name (kp_candidate_<n>_<path hash>): a
    re-run with nothing changed, or the same files in another folder, must find the function compiled before."""
    import importlib.util

    from kernelpilot.evaluation.worker import cute_hook

    def imported(folder: Path, name: str):  # as worker/main.py's import_candidate does
        spec = importlib.util.spec_from_file_location(name, folder / "model_new.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.host

    keys = []
    for folder, name in ((tmp_path / "a", "kp_candidate_1_aaaaaaaa"), (tmp_path / "a", "kp_candidate_2_aaaaaaaa"),
                         (tmp_path / "b", "kp_candidate_3_bbbbbbbb")):
        folder.mkdir(exist_ok=True)
        (folder / "model_new.py").write_text("def host(x, n):\n    return x\n")
        keys.append(cute_hook.compile_key(imported(folder, name), (1.5, 64), {}, arch="sm_90a", versions="v",
                                          candidate_dir=str(folder)))
    assert keys[0] is not None and keys[0] == keys[1] == keys[2]
    (tmp_path / "b" / "model_new.py").write_text("def host(x, n):\n    return x  # edited\n")
    edited = imported(tmp_path / "b", "kp_candidate_4_bbbbbbbb")
    assert cute_hook.compile_key(edited, (1.5, 64), {}, arch="sm_90a", versions="v",
                                 candidate_dir=str(tmp_path / "b")) != keys[0]


def test_an_argument_the_key_cannot_describe_is_named_as_why_nothing_was_cached(tmp_path: Path) -> None:
    from kernelpilot.evaluation.worker import cute_hook

    (tmp_path / "model_new.py").write_text("def host(*args):\n    pass\n")
    namespace: dict[str, object] = {}
    exec(compile((tmp_path / "model_new.py").read_text(), str(tmp_path / "model_new.py"), "exec"), namespace)
    host = namespace["host"]

    class Config:  # an object of the candidate's own: its fields could change the compiled code unseen
        pass

    args = (4096, Config())
    assert cute_hook.compile_key(host, args, {}, arch="sm_90a", versions="v", candidate_dir=str(tmp_path)) is None
    keyed = partial(cute_hook.key_or_reason, arch="sm_90a", versions="v", candidate_dir=str(tmp_path))
    key, why = keyed(host, args, {})
    assert key is None and why.startswith("not cached: argument 1 (") and "Config" in why
    assert "argument cfg=" in keyed(host, (4096,), {"cfg": Config()})[1]


@pytest.mark.cute
@needs_dsl
def test_a_cute_compile_records_ptxas_figures_and_a_cache_hit_gives_them_back(tmp_path: Path) -> None:
    cand = tmp_path / "candidate"
    cand.mkdir()
    twin = ROOT / "tests" / "data" / "adversarial" / "candidates" / "cute_honest_scale_add.py"
    (cand / "model_new.py").write_text(twin.read_text())
    code = textwrap.dedent('''
        import json, sys
        sys.path.insert(0, sys.argv[1])
        from kernelpilot.evaluation.worker import cute_hook
        cute_hook.install(sys.argv[1])
        import torch, cutlass, cutlass.cute as cute
        from cuda.bindings.driver import CUstream
        from cutlass.cute.runtime import from_dlpack
        import model_new as m
        x = torch.empty(4096)
        cute.compile(m.scale_add_host, *(from_dlpack(x, assumed_align=16) for _ in range(3)), cutlass.Float32(0.5),
                     CUstream(0))
        taken = cute_hook.take()
        hows = [record["how"] for record in taken["build_compiles"]]
        counts = {how: hows.count(how) for how in ("compiled", "loaded", "uncached")}
        print(json.dumps([counts, taken.get("build_kernels", []), taken["build_compiles"]]))
    ''')
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": path}
    import json

    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code, str(cand)], env=env, capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    (first_stats, first, first_compiles), (second_stats, second, second_compiles) = runs
    assert first_stats["compiled"] == 1 and second_stats["loaded"] == 1
    assert [(c["function"], c["how"]) for c in first_compiles] == [("scale_add_host", "compiled")]
    assert [(c["function"], c["how"]) for c in second_compiles] == [("scale_add_host", "loaded")]
    assert len(first) == 1 and first[0]["registers"] and first[0]["spill_stores_bytes"] == 0
    assert second == first  # the figures come back with the cached function
    assert first_compiles[0]["key"] == second_compiles[0]["key"] and "note" not in first_compiles[0]

    (tmp_path / "a-file").write_text("")  # a cache folder that cannot be made: the compile says why nothing was kept
    done = subprocess.run([sys.executable, "-c", code, str(cand)], capture_output=True, text=True, timeout=240,
                          env={**env, "CUTE_DSL_CACHE_DIR": str(tmp_path / "a-file")})
    assert done.returncode == 0, done.stderr[-2000:]
    unkept = json.loads(done.stdout.strip().splitlines()[-1])[2]
    assert unkept[0]["how"] == "compiled" and unkept[0]["note"].startswith("not stored in the cache (")


@pytest.mark.cute
@needs_dsl
def test_the_example_takes_a_cluster_for_long_rows_and_spills_nothing(tmp_path: Path) -> None:
    """Rows past 32K bf16 / 16K fp32 elements run on a cluster of CTAs (distributed shared memory for the sum);
    compiled for sm_90a on the CPU, ptxas reports no spills at the sweep's largest rows."""
    code = textwrap.dedent('''
        import contextlib, io, json, math, sys
        sys.path.insert(0, sys.argv[1])
        import torch, cutlass, cutlass.cute as cute
        from cuda.bindings.driver import CUstream
        from kernelpilot.evaluation.worker.cute_hook import figures
        import model_new as m
        out = []
        for dt, n in ((torch.bfloat16, 262144), (torch.float32, 262144), (torch.bfloat16, 65536)):
            x, w = torch.empty(2, n, dtype=dt), torch.empty(n, dtype=dt)
            vec, threads, cluster, reload = m.row_config(n, x.element_size())
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                cute.compile(m.rmsnorm_host, m._tensor(x), cute.runtime.from_dlpack(w, assumed_align=16), m._tensor(x),
                             cutlass.Float32(1e-6), CUstream(0), vec, math.ceil(n // vec / (threads * cluster)),
                             threads, cluster, reload, options="remarks{ptx}")
            out.append([cluster, figures(err.getvalue())])
        print(json.dumps(out))
    ''')
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-c", code, str(EXAMPLE / "candidate")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert [c for c, _ in rows] == [16, 16, 4]
    for _, [k] in rows:
        assert k["spill_stores_bytes"] == 0 and k["spill_loads_bytes"] == 0 and k["registers"] <= 128  # two CTAs an SM
