"""Triton candidates on the CPU: the format, the static policy, and the real ahead-of-time build (Triton
compiles for sm_90 here, with no GPU)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpilot.evaluation.build.step import build_candidate
from kernelpilot.evaluation.candidate import load_candidate
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.static.policy import blocking, check_candidate, check_python

DATA = Path(__file__).parent / "data" / "triton"
PROBLEM = DATA / "add_problem.py"
KB = DATA / "kernelbench_add.py"

triton = pytest.importorskip("triton")


def rules(findings: list) -> set[str]:
    return {f.rule for f in blocking(findings)}


# ---- format ------------------------------------------------------------------------------------------
def test_kernelbench_triton_file_is_a_triton_candidate() -> None:
    c = load_candidate(KB)
    assert c.kind == "triton" and c.model_file == KB.resolve() and c.kernel_files == [KB.resolve()]
    assert c.sources == [] and c.root == DATA.resolve() and c.name == "kernelbench_add"


def test_directory_with_kernels_beside_model_new(tmp_path: Path) -> None:
    target = shutil.copytree(DATA / "split", tmp_path / "cand")
    c = load_candidate(target)
    assert c.kind == "triton" and [p.name for p in c.kernel_files] == ["kernels.py"]
    assert [p.name for p in c.files] == ["kernels.py", "model_new.py"]
    assert load_candidate(target / "model_new.py") == c  # naming model_new.py means its directory


def test_a_file_without_kernels_says_what_to_add(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_text("import torch\nfrom torch import nn\n\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, x):\n        return x\n")
    assert load_candidate(path).kind == "pytorch"  # a PyTorch rewrite: judged, timed, no-kernel
    (tmp_path / "model_new.py").write_text(path.read_text())
    assert load_candidate(tmp_path).kind == "pytorch"


# ---- static policy -----------------------------------------------------------------------------------
def test_kernelbench_triton_file_passes_the_policy() -> None:
    assert blocking(check_candidate(KB)) == []


def test_sibling_kernel_module_may_be_imported(tmp_path: Path) -> None:
    target = shutil.copytree(DATA / "split", tmp_path / "cand")
    assert blocking(check_candidate(target)) == []
    # the same import in a single file (no such sibling) is not on the allow-list
    assert rules(check_python((target / "model_new.py").read_text())) == {"import-kernels"}


def test_a_sibling_named_like_an_installed_module_does_not_unlock_it(tmp_path: Path) -> None:
    target = shutil.copytree(DATA / "split", tmp_path / "cand")
    (target / "os.py").write_text("X = 1\n")
    (target / "model_new.py").write_text((target / "model_new.py").read_text() + "import os\n")
    assert "import-os" in rules(check_candidate(target))


@pytest.mark.parametrize("line, rule", [
    ("import triton.runtime", "import-triton"),
    ("from triton.runtime import driver", "import-triton"),
    ("from triton import knobs", "triton-internals"),
    ("import triton\ntriton.knobs.runtime.launch_enter_hook = print", "triton-internals"),
    ("import triton as t\nt.testing.do_bench(print)", "triton-internals"),
    ("import triton\ntriton.compile(None)", "triton-internals"),
    ("import torch._inductor", "import-torch"),
    ("import os", "import-os"),
])
def test_triton_internals_stay_refused(line: str, rule: str) -> None:
    assert rule in rules(check_python(line + "\n"))


@pytest.mark.parametrize("line", [
    "import triton\nimport triton.language as tl",
    "from triton.language.extra import libdevice",
    "import triton\nx = triton.cdiv(10, 3) + triton.next_power_of_2(5)",
    "from triton import jit, autotune, Config, heuristics",
])
def test_what_a_kernel_author_needs_is_allowed(line: str) -> None:
    assert blocking(check_python(line + "\n")) == []


def test_side_stream_around_a_triton_launch_is_refused() -> None:
    src = KB.read_text().replace("        return triton_add(a, b)",
                                 "        with torch.cuda.stream(torch.cuda.Stream()):\n            return "
                                 "triton_add(a, b)")
    assert "side-stream" in rules(check_python(src))


# ---- the ahead-of-time build (real triton.compile for sm_90, no GPU) --------------------------------
@pytest.mark.slow
def test_build_compiles_each_kernel_ahead_with_its_registers(tmp_path: Path) -> None:
    report = build_candidate(load_candidate(KB), problem=PROBLEM, arch="sm_90",
                             env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert report.ok, report.diagnostics
    assert [k.kernel for k in report.kernels] == ["add_kernel"]
    k = report.kernels[0]
    assert k.arch == "sm_90" and k.registers and 0 < k.registers <= 255 and k.spill_stores_bytes == 0
    # it ran forward on fake CUDA tensors: the `assert x.is_cuda` of the KernelBench wrapper held, nothing deferred
    assert not [d for d in report.diagnostics if d.severity != "note"] and not report.diagnostics
    cubins = list((tmp_path / "triton").rglob("add_kernel.cubin"))
    assert cubins, "the compiled kernel is in the Triton cache the worker reads"


@pytest.mark.slow
def test_a_confined_build_compiles_into_the_cache_and_writes_nowhere_else(tmp_path: Path) -> None:
    """The Triton build runs the candidate's forward (fake tensors): confined as the worker is, it still
    compiles into the Triton cache the worker reads, and a write outside its folders is refused."""
    from kernelpilot.evaluation.sandbox.confine import detect

    if not detect().landlock_abi:
        pytest.skip("no Landlock on this machine")
    report = build_candidate(load_candidate(KB), problem=PROBLEM, arch="sm_90", confine=True,
                             build_dir=tmp_path / "build", env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert report.ok, report.diagnostics
    assert list((tmp_path / "triton").rglob("add_kernel.cubin"))
    assert not any("unconfined" in d.message for d in report.diagnostics), report.diagnostics
    outside = tmp_path / "outside.txt"
    hostile = tmp_path / "cand" / "hostile.py"
    hostile.parent.mkdir()
    hostile.write_text(f"open({str(outside)!r}, 'w').write('x')\n" + KB.read_text())
    refused = build_candidate(load_candidate(hostile), problem=PROBLEM, arch="sm_90", confine=True,
                              build_dir=tmp_path / "build2", env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert not refused.ok and not outside.exists(), refused.diagnostics
    assert "Permission" in " ".join(d.message for d in refused.diagnostics), refused.diagnostics


@pytest.mark.slow
def test_a_waiting_builder_takes_a_triton_build_in_the_builds_own_environment(tmp_path: Path) -> None:
    """A pairing session's standby builder (torch and Triton imported before the save) takes a Triton candidate's
    build: the same kernels and registers as a fresh process, the cubins in the Triton cache the build's
    environment names (not the one the waiting process started with), the same confinement."""
    from kernelpilot.evaluation.build.standby import Standby
    from kernelpilot.evaluation.build.step import standby_env
    from kernelpilot.evaluation.sandbox.confine import detect

    fresh = build_candidate(load_candidate(KB), problem=PROBLEM, arch="sm_90",
                            env={"TRITON_CACHE_DIR": str(tmp_path / "fresh")})
    standby = Standby(standby_env({"TRITON_CACHE_DIR": str(tmp_path / "wrong")}))
    try:
        waiting = standby.proc
        assert waiting is not None
        report = build_candidate(load_candidate(KB), problem=PROBLEM, arch="sm_90", standby=standby,
                                 env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
        assert waiting.wait(30) == 0 and standby.proc is not waiting  # it took the build and exited
        assert report.ok and fresh.ok, report.diagnostics
        assert [(k.kernel, k.registers) for k in report.kernels] == [(k.kernel, k.registers) for k in fresh.kernels]
        assert list((tmp_path / "triton").rglob("add_kernel.cubin")) and not (tmp_path / "wrong").exists()
        if not detect().landlock_abi:
            return
        outside = tmp_path / "outside.txt"
        hostile = tmp_path / "cand" / "hostile.py"
        hostile.parent.mkdir()
        hostile.write_text(f"open({str(outside)!r}, 'w').write('x')\n" + KB.read_text())
        refused = build_candidate(load_candidate(hostile), problem=PROBLEM, arch="sm_90", confine=True,
                                  standby=standby, build_dir=tmp_path / "build",
                                  env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
        assert not refused.ok and not outside.exists(), refused.diagnostics
        assert "Permission" in " ".join(d.message for d in refused.diagnostics), refused.diagnostics
    finally:
        standby.close()


@pytest.mark.slow
def test_the_same_candidate_for_the_same_problem_is_built_once(tmp_path: Path) -> None:
    cand = tmp_path / "cand.py"
    shutil.copyfile(KB, cand)
    env = {"TRITON_CACHE_DIR": str(tmp_path / "triton")}
    first = build_candidate(load_candidate(cand), problem=PROBLEM, arch="sm_90", env=env)
    again = build_candidate(load_candidate(cand), problem=PROBLEM, arch="sm_90", env=env)
    assert first.ok and first.cache == "" and first.seconds > 0
    assert again.cache == "hit" and again.seconds == 0.0 and [k.kernel for k in again.kernels] == ["add_kernel"]
    assert again.kernels[0].registers == first.kernels[0].registers
    cand.write_text(cand.read_text() + "\n# an edit\n")
    edited = build_candidate(load_candidate(cand), problem=PROBLEM, arch="sm_90", env=env)
    assert edited.ok and edited.cache == ""  # another file: built again


@pytest.mark.slow
def test_compile_error_is_a_diagnostic_at_the_kernel_line(tmp_path: Path) -> None:
    report = build_candidate(load_candidate(DATA / "broken_kernel.py"), problem=PROBLEM, arch="sm_90",
                             env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert not report.ok
    errors = [d for d in report.diagnostics if d.severity == "error"]
    assert len(errors) == 1, report.diagnostics
    d = errors[0]
    assert d.file == "broken_kernel.py" and d.line == 22 and d.tool == "triton"
    assert "z is not defined" in d.message


@pytest.mark.slow
def test_autotuned_kernel_compiles_every_config_and_defers_the_choice(tmp_path: Path) -> None:
    target = shutil.copytree(DATA / "split", tmp_path / "cand")
    report = build_candidate(load_candidate(target), problem=PROBLEM, arch="sm_90",
                             env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert report.ok, report.diagnostics
    assert [k.kernel for k in report.kernels] == ["add_kernel"]
    notes = [d.message for d in report.diagnostics if d.severity == "note"]
    assert any("autotuned over 2 configs" in n and "warm-up" in n for n in notes), notes
    # the second config compiled in a forked process while the builder compiled the first
    assert any("1 of them in forked processes" in n for n in notes), notes
    assert len(list((tmp_path / "triton").rglob("add_kernel.cubin"))) == 2


@pytest.mark.slow
def test_engine_build_mode_runs_the_triton_build_with_the_problem(tmp_path: Path) -> None:
    from kernelpilot.evaluation import EvalSettings, Evaluator

    with Evaluator(EvalSettings(device="cpu", confine=False), workdir=tmp_path / "work") as ev:
        v = ev.evaluate(PROBLEM, KB, mode="build")
    assert v.status == "ok", (v.error, v.build)
    assert v.build is not None and [k.kernel for k in v.build.kernels] == ["add_kernel"]
    assert v.phases["build"] > 0 or v.build.cache == "hit"  # built now, or by an earlier test (the record)


def test_declared_libraries_are_allowed_for_that_candidate_and_listed(tmp_path: Path) -> None:
    from kernelpilot.evaluation.static.declarations import (
        declared_settings,
        within_compile_flag,
    )
    from kernelpilot.verdict import Performance, Timing, Verdict

    path = tmp_path / "c0.py"
    path.write_text(KB.read_text() + '\nKERNELPILOT_LIBRARIES = ("cublas", "os")\nKERNELPILOT_ORIGIN = "inductor"\n')
    v = Verdict(status="ok")
    settings, declared = declared_settings(load_candidate(path), EvalSettings(allowed_libraries=["add"]), v)
    assert settings.allowed_libraries == ["add", "cublas"]  # unknown names are not libraries
    assert [(f.rule, f.severity, f.evidence) for f in v.findings] == [("library-call", "warn", "cublas")]
    # a plain candidate declares nothing and changes nothing
    plain, nothing = declared_settings(load_candidate(KB), EvalSettings(allowed_libraries=[]), Verdict(status="ok"))
    assert plain == EvalSettings(allowed_libraries=[]) and nothing == {}

    def perf(cand: float, comp: float) -> Performance:
        def t(ms: float) -> Timing:
            return Timing(median_ms=ms, q1_ms=ms, q3_ms=ms, min_ms=ms, samples=10)

        return Performance(candidate=t(cand), compiled=t(comp))

    assert within_compile_flag(declared, perf(1.04, 1.0)) == []
    flag = within_compile_flag(declared, perf(1.2, 1.0))
    assert len(flag) == 1 and "+20.0%" in flag[0] and "not within 5%" in flag[0]
    assert within_compile_flag({}, perf(2.0, 1.0)) == []
