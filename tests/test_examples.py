"""The examples: problem files are valid, candidates follow the directory format, kernels compile.

No GPU needed. Kernel files are compiled with plain nvcc (-arch=sm_90 -c, CUDA headers only, a few
seconds each, in parallel) under the flags torch's builder adds; the replays' build steps are
compiled too. The full torch extension build of one example is marked slow.
"""

from __future__ import annotations

import ast
import concurrent.futures
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.native import sources

from kernelpilot.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
EXAMPLE_DIRS = sorted(p.parent for p in EXAMPLES.glob("*/problem.py"))
# the CUDA C++ examples (binding.cpp + .cu, the device-only layout); the CuTe-DSL ones are Python alone
NATIVE_DIRS = [d for d in EXAMPLE_DIRS if (d / "candidate" / "binding.cpp").is_file()]
CUTE_DIRS = [d for d in EXAMPLE_DIRS if d not in NATIVE_DIRS]
MEMORY_BOUND = {"softmax", "rmsnorm", "layernorm", "cross_entropy"}


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _cuda_home() -> Path | None:
    from kernelpilot.errors import ToolchainError
    from kernelpilot.toolkit import find_cuda_home

    try:
        return find_cuda_home()
    except ToolchainError:
        return None


def _extra_include_dirs() -> list[Path]:
    """Library headers (cublasLt.h) from the pip CUDA wheels, for toolkits that ship only the runtime."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs: list[Path] = []
    for base in spec.submodule_search_locations:
        dirs += sorted(Path(base).glob("*/include"))
    return [d for d in dirs if (d / "cublasLt.h").is_file()]


def test_there_are_at_least_eight_examples() -> None:
    names = {d.name for d in EXAMPLE_DIRS}
    assert len(names) >= 8, names
    assert MEMORY_BOUND <= names


@pytest.mark.parametrize("example", EXAMPLE_DIRS, ids=_ids(EXAMPLE_DIRS))
def test_problem_passes_the_static_check(example: Path) -> None:
    problem = load_problem(example / "problem.py")
    assert problem.name == "problem"
    assert (example / "README.md").is_file(), f"{example.name} needs a README.md"


@pytest.mark.parametrize("example", EXAMPLE_DIRS, ids=_ids(EXAMPLE_DIRS))
def test_problem_runs_on_the_meta_device(example: Path) -> None:
    from kernelpilot.problem import analyse

    info = analyse(load_problem(example / "problem.py"), device="meta")
    assert info.outputs, f"{example.name}: Model returned no tensor"
    assert info.bytes_moved > 0


def _init_signature(tree: ast.Module, cls: str) -> list[tuple[str, str | None]]:
    """(name, default source) of the constructor arguments after self."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args.args[1:]
                    defaults = [None] * (len(args) - len(item.args.defaults)) + list(item.args.defaults)
                    return [(a.arg, None if d is None else ast.unparse(d)) for a, d in zip(args, defaults)]
            return []
    raise AssertionError(f"no class {cls}")


def _registered(tree: ast.Module, cls: str) -> list[str]:
    """Attributes assigned nn.Parameter(...) or nn.<Module>(...) in __init__, in order."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in ast.walk(node):
                if not (isinstance(item, ast.Assign) and isinstance(item.value, ast.Call)):
                    continue
                callee = ast.unparse(item.value.func)
                if callee.startswith(("nn.", "torch.nn.")):
                    names += [ast.unparse(t) for t in item.targets]
    return names


@pytest.mark.parametrize("example", EXAMPLE_DIRS, ids=_ids(EXAMPLE_DIRS))
def test_model_new_matches_model(example: Path) -> None:
    problem = ast.parse((example / "problem.py").read_text())
    candidate = ast.parse((example / "candidate" / "model_new.py").read_text())
    assert _init_signature(candidate, "ModelNew") == _init_signature(problem, "Model")
    assert _registered(candidate, "ModelNew") == _registered(problem, "Model")


def test_every_example_is_cuda_cxx_or_cute_dsl() -> None:
    from kernelpilot.evaluation.candidate import load_candidate

    assert len(NATIVE_DIRS) >= 8
    for example in CUTE_DIRS:  # a CuTe-DSL candidate: its kernels in Python, no binding to build
        assert load_candidate(example / "candidate").kind == "cute", example
        assert "@cute.kernel" in (example / "candidate" / "model_new.py").read_text()


@pytest.mark.parametrize("example", NATIVE_DIRS, ids=_ids(NATIVE_DIRS))
def test_candidate_follows_the_directory_format(example: Path) -> None:
    cand = example / "candidate"
    model_new = (cand / "model_new.py").read_text()
    assert re.search(r"load_extension\(__file__", model_new), "model_new.py must call load_extension(__file__)"
    binding = (cand / "binding.cpp").read_text()
    # the torch.Tensor caster and PYBIND11_MODULE: torch's pybind header, or all of torch/extension.h
    assert re.search(r"#include <torch/(extension|csrc/utils/pybind)\.h>",
                     binding), "binding.cpp includes no torch pybind header"
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME" in binding
    assert "getCurrentCUDAStream()" in binding and "TORCH_CHECK" in binding
    kernels = sorted(cand.glob("*.cu"))
    assert kernels, "a candidate needs at least one .cu file"
    for path in [*kernels, *cand.glob("*.cuh")]:
        text = path.read_text()
        includes = re.findall(r'#include\s*[<"]([^>"]+)[>"]', text)
        torchy = [i for i in includes if i.startswith(("torch/", "ATen/", "c10/", "pybind11/"))]
        assert not torchy, f"{path.name} includes {torchy}: keep torch headers in binding.cpp"
    device = [p for p in kernels if "__global__" in p.read_text()]
    if not device:  # a library call (cuBLASLt) and no kernel of its own: host code in the .cu, every edit in full
        launchers = re.findall(r'extern "C" \w+ (\w+)\(', "".join(p.read_text() for p in kernels))
        assert launchers and all(re.search(rf'extern "C" \w+ {n}\(', binding) for n in launchers)
        return
    # the device-only layout: kernels and their explicit instantiations in the .cu files, every launch in
    # binding.cpp through kernelpilot/launch.h, so a kernel edit builds device code alone
    assert sources.host_launch_problem(cand / "binding.cpp", cand) == ""
    for path in device:
        text = sources.strip_comments(path.read_text())
        assert "<<<" not in text and not re.search(r'extern "C"', text), f"{path.name} has host code"
        assert sources.instances(path.read_text()).spans, f"{path.name} instantiates no kernel explicitly"


# What torch.utils.cpp_extension adds to every nvcc command line: kernels must compile under them.
TORCH_NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"]


def _compile(source: Path, out_dir: Path, includes: list[Path], nvcc: Path) -> tuple[Path, int, str]:
    cmd = [str(nvcc), "-O3", "-std=c++17", "-arch=sm_90", "-Xptxas", "-v", *TORCH_NVCC_FLAGS, "-c", str(source),
           "-o", str(out_dir / f"{source.parent.parent.name}-{source.stem}.o")]
    cmd += [f"-I{d}" for d in includes]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return source, proc.returncode, proc.stdout + proc.stderr


def test_every_kernel_compiles_for_sm90_without_spills(tmp_path: Path) -> None:
    home = _cuda_home()
    if home is None:
        pytest.skip("no CUDA toolkit found (set CUDA_HOME)")
    nvcc = home / "bin" / "nvcc"
    extra = _extra_include_dirs()
    sources = sorted(EXAMPLES.glob("*/candidate/*.cu"))
    assert len(sources) >= 8
    skipped: list[str] = []
    jobs = []
    for src in sources:
        needs_cublas = "cublasLt.h" in src.read_text()
        if needs_cublas and not (home / "include" / "cublasLt.h").is_file() and not extra:
            skipped.append(src.name)
            continue
        jobs.append(src)
    workers = max(2, min(len(jobs), os.cpu_count() or 2))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda s: _compile(s, tmp_path, extra, nvcc), jobs))
    failures = [f"{s}:\n{log[-2000:]}" for s, rc, log in results if rc != 0]
    assert not failures, "\n\n".join(failures)
    for source, _, log in results:
        spills = re.findall(r"(\d+) bytes spill stores", log)
        assert all(int(s) == 0 for s in spills), f"{source.name} spills: {spills}"
        if "__global__" in source.read_text():
            assert "registers" in log, f"no ptxas report for {source.name}"
    if skipped:
        pytest.skip(f"compiled {len(jobs)} kernels; skipped {skipped}: cublasLt.h not found in {home} or pip wheels")


@pytest.mark.slow
def test_softmax_extension_builds_with_torch(tmp_path: Path) -> None:
    """The whole toolchain once: binding.cpp with torch headers + the kernel, linked and loadable."""
    if _cuda_home() is None:
        pytest.skip("no CUDA toolkit found (set CUDA_HOME)")
    env = dict(os.environ, KERNELPILOT_ARCH="sm_90", KERNELPILOT_BUILD_DIR=str(tmp_path / "build"))
    proc = subprocess.run(
        [sys.executable, "-m", "kernelpilot.extension", "--build", str(EXAMPLES / "softmax" / "candidate"), "--quiet"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert '"ok": true' in proc.stdout


REPLAYS = sorted(EXAMPLES.glob("*/replay.jsonl"))


def _replay_files(replay: Path) -> list[tuple[str, dict[str, str]]]:
    """Apply the session's write_file/edit_file calls in order; the candidate files at each tool call."""
    files: dict[str, str] = {}
    states: list[tuple[str, dict[str, str]]] = []
    for line in replay.read_text().splitlines():
        for tc in json.loads(line).get("tool_calls", []):
            name, args = tc["name"], tc["arguments"]
            if name == "write_file":
                files[args["path"].replace("${candidate_dir}/", "")] = args["content"]
            elif name == "edit_file":
                rel = args["path"].replace("${candidate_dir}/", "")
                assert files[rel].count(args["search"]) == 1, f"{replay}: edit of {rel} must match exactly once"
                files[rel] = files[rel].replace(args["search"], args["replace"])
            states.append((name, dict(files)))
    return states


def test_at_least_two_replays() -> None:
    assert {p.parent.name for p in REPLAYS} >= {"softmax", "rmsnorm"}


@pytest.mark.parametrize("replay", REPLAYS, ids=[p.parent.name for p in REPLAYS])
def test_replay_tells_the_whole_loop_and_ends_on_the_reference(replay: Path) -> None:
    from kernelpilot.agent.tools import build_tools

    known = set(build_tools())
    states = _replay_files(replay)
    calls = [name for name, _ in states]
    assert set(calls) <= known, set(calls) - known
    for needed in ("show_problem", "read_skill", "write_file", "edit_file", "build", "test", "benchmark",
                   "profile", "propose"):
        assert needed in calls, f"{replay.parent.name} replay never calls {needed}"
    assert calls[-1] == "propose"
    final = states[-1][1]
    reference = {p.name: p.read_text() for p in (replay.parent / "candidate").iterdir() if p.is_file()}
    assert final == reference, "the replay's last files differ from the reference: run examples/make_replays.py"


@pytest.mark.parametrize("replay", REPLAYS, ids=[p.parent.name for p in REPLAYS])
def test_replay_builds_fail_then_pass(replay: Path, tmp_path: Path) -> None:
    """The first build fails with a compiler error, every later build of the kernels compiles."""
    home = _cuda_home()
    if home is None:
        pytest.skip("no CUDA toolkit found (set CUDA_HOME)")
    builds = [files for name, files in _replay_files(replay) if name == "build"]
    assert len(builds) >= 2
    outcomes = []
    for i, files in enumerate(builds):
        step = tmp_path / f"build{i}"
        step.mkdir()
        for rel, text in files.items():
            (step / rel).write_text(text)
        results = [_compile(src, step, [], home / "bin" / "nvcc") for src in sorted(step.glob("*.cu"))]
        outcomes.append(all(rc == 0 for _, rc, _ in results))
        if i == 0:
            assert any("error" in log for _, _, log in results)
    assert outcomes[0] is False and all(outcomes[1:]), outcomes


@pytest.mark.parametrize("replay", REPLAYS, ids=[p.parent.name for p in REPLAYS])
def test_replay_defines_every_kernel_its_binding_can_launch_at_each_evaluation(replay: Path) -> None:
    """At every test and benchmark of the replay, each kernel the headers binding.cpp includes declare is defined
    (or, a template, explicitly instantiated) in a .cu file: else the library does not load (an undefined
    symbol) where the replay says "Correct"."""
    declared = re.compile(r"__global__\s+void\s+(\w+)\s*\(")
    instantiated = re.compile(r"^\s*template\s+__global__\s+void\s+(\w+)\s*<", re.MULTILINE)
    plain = re.compile(r"^(?!\s*template)[^\n]*__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?"
                       r"(\w+)\s*\([^;{]*\)\s*\{",
                       re.MULTILINE)
    steps = 0
    for name, files in _replay_files(replay):
        if name not in ("test", "benchmark"):
            continue
        steps += 1
        binding = files.get("binding.cpp", "")
        headers = [text for rel, text in files.items() if rel.endswith(".h") and f'"{rel.split("/")[-1]}"' in binding]
        needed = {n for text in headers for n in declared.findall(sources.strip_comments(text))}
        cu = [sources.strip_comments(text) for rel, text in files.items() if rel.endswith(".cu")]
        have = {n for text in cu for n in instantiated.findall(text) + plain.findall(text)}
        assert needed and needed <= have, f"{replay.parent.name} {name}: {sorted(needed - have)} declared, not defined"
    assert steps >= 2


@pytest.mark.parametrize("header", ["row_reduce.cuh", "row_launch.h"])
def test_row_reduce_copies_are_identical(header: str) -> None:
    """Each candidate directory is self-contained, so the shared headers (device code, and the host launches
    of the device-only layout) are copied: keep the copies equal."""
    copies = sorted(EXAMPLES.glob(f"*/candidate/{header}"))
    assert len(copies) >= 4
    texts = {p.read_text() for p in copies}
    assert len(texts) == 1, f"{header} differs between {[str(p.relative_to(EXAMPLES)) for p in copies]}"


@pytest.mark.parametrize("example", EXAMPLE_DIRS, ids=_ids(EXAMPLE_DIRS))
def test_reference_candidate_passes_the_static_policy(example: Path) -> None:
    from kernelpilot.evaluation.static.policy import check_candidate

    findings = check_candidate(example / "candidate")
    assert not findings, [f"{f.rule} {f.file}:{f.line}" for f in findings]
