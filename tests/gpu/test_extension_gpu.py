"""On the GPU machine: a built candidate runs on CUDA and matches torch; an edit reloads in-process.

Run: .venv/bin/pytest -m gpu tests/gpu/test_extension_gpu.py -s
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data" / "candidates"


def _import(model_file: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, model_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def candidate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from kernelpilot.evaluation.build.step import build_candidate
    from kernelpilot.evaluation.candidate import load_candidate

    root = tmp_path_factory.mktemp("gpu-build")
    directory = root / "vector_scale"
    shutil.copytree(DATA / "vector_scale", directory)
    build_dir = root / "objects"
    report = build_candidate(load_candidate(directory), build_dir=build_dir)
    assert report.ok, report.log_tail
    print(f"\ncold build {report.seconds:.1f} s, arch {report.arch}, kernels {[k.kernel for k in report.kernels]}")
    return directory, build_dir


def test_built_candidate_matches_torch(candidate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    directory, build_dir = candidate
    monkeypatch.setenv("KERNELPILOT_BUILD_DIR", str(build_dir))
    module = _import(directory / "model_new.py", "kp_gpu_test_model_a")
    model = module.ModelNew(3.0).cuda()
    for n in (1, 255, 256, 257, 1 << 20, (1 << 24) + 3):
        x = torch.randn(n, device="cuda")
        torch.testing.assert_close(model(x), 3.0 * x, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="CUDA tensor"):
        model(torch.randn(4))


def test_edited_kernel_reloads_in_the_same_process(candidate: tuple[Path, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import torch

    from kernelpilot.extension import load_extension

    directory, build_dir = candidate
    monkeypatch.setenv("KERNELPILOT_BUILD_DIR", str(build_dir))
    first = load_extension(directory / "model_new.py")
    x = torch.randn(1 << 16, device="cuda")
    torch.testing.assert_close(first.scale(x, 2.0), 2.0 * x)

    kernel = directory / "kernel.cu"
    original = kernel.read_text()
    try:
        kernel.write_text(original.replace("y[i] = alpha * x[i];", "y[i] = alpha * x[i] + 1.0f;"))
        start = time.perf_counter()
        second = load_extension(directory / "model_new.py")
        seconds = time.perf_counter() - start
        print(f"\nin-process rebuild + reload after a one-line edit: {seconds:.2f} s")
        assert second is not first
        torch.testing.assert_close(second.scale(x, 2.0), 2.0 * x + 1.0)
        # the module imported first keeps working with its own code
        torch.testing.assert_close(first.scale(x, 2.0), 2.0 * x)
    finally:
        kernel.write_text(original)
    third = load_extension(directory / "model_new.py")
    torch.testing.assert_close(third.scale(x, 2.0), 2.0 * x)


def test_arch_follows_the_gpu() -> None:
    import torch

    from kernelpilot.toolkit import detect_arch

    major, minor = torch.cuda.get_device_capability()
    assert detect_arch({}) == f"sm_{major}{minor}"


@pytest.mark.slow
def test_single_file_load_inline_candidate_builds_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelpilot.evaluation.build.step import build_candidate
    from kernelpilot.evaluation.candidate import load_candidate

    path = tmp_path / "model_new_inline.py"
    shutil.copy(DATA / "single_file" / "model_new_inline.py", path)
    extensions = tmp_path / "torch_extensions"
    report = build_candidate(load_candidate(path), build_dir=extensions, timeout_s=600)
    assert report.ok, report.log_tail
    rebuilt = {Path(r).name for r in report.rebuilt}  # paths relative to the build dir's parent
    assert {"cuda.cu", "main.cpp"} <= rebuilt, report.rebuilt
    assert any(k.kernel.startswith("scale_kernel") for k in report.kernels)
    # The worker imports it with the same TORCH_EXTENSIONS_DIR: no rebuild, same module.
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(extensions))
    built = {so: so.stat().st_mtime_ns for so in extensions.rglob("*.so")}
    assert built, list(extensions.rglob("*"))
    start = __import__("time").perf_counter()
    module = _import(path, "kp_gpu_test_inline")
    print(f"\nsingle-file cold build {report.seconds:.1f} s; import after it "
          f"{__import__('time').perf_counter() - start:.2f} s")
    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(module.ModelNew(2.0)(x), 2.0 * x)
    # the same shared object, not a rebuild (torch imports it without registering it in sys.modules)
    assert module.scale_ext.__name__ == "kp_test_inline_scale"
    assert {so: so.stat().st_mtime_ns for so in extensions.rglob("*.so")} == built
