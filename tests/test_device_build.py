"""A kernel edit's device-only build (kernelpilot/native, evaluation/build/device_only.py), with real nvcc and ninja.

One full build of a small candidate in the device-only layout (tests/data/candidates/vector_scale_kp) per
module; each test edits that copy, builds, and restores it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelpilot.errors import ToolchainError
from kernelpilot.evaluation.build.standby import Standby
from kernelpilot.evaluation.build.step import build_candidate, build_env, standby_env
from kernelpilot.evaluation.candidate import Candidate, load_candidate
from kernelpilot.evaluation.build.device_only import DEVICE_ONLY, SassCheck
from kernelpilot.native import elf, identity, sources
from kernelpilot.native.device_build import DevicePlan
from kernelpilot.native.records import clear_device, ninja_commands, read_device, read_full
from kernelpilot.toolkit import find_cuda_home
from kernelpilot.verdict import BuildReport

DATA = Path(__file__).parent / "data" / "candidates" / "vector_scale_kp"
PARTS = {"KERNELPILOT_DEVICE_PARTS": "2"}  # split even on a 2-core machine


@dataclass
class Built:
    candidate: Candidate
    build_dir: Path
    cold: BuildReport

    def build(self, standby: Standby | None = None) -> BuildReport:
        return build_candidate(load_candidate(self.candidate.path), build_dir=self.build_dir, arch="sm_90", env=PARTS,
                               standby=standby)

    def edit(self, name: str, old: str, new: str) -> None:
        path = self.candidate.path / name
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    try:
        find_cuda_home()
    except ToolchainError:
        pytest.skip("needs the CUDA toolkit (nvcc)")
    root = tmp_path_factory.mktemp("device")
    shutil.copytree(DATA, root / "vector_scale_kp")
    candidate = load_candidate(root / "vector_scale_kp")
    build_dir = root / "objects"
    cold = build_candidate(candidate, build_dir=build_dir, arch="sm_90", env=PARTS)
    # the cold build's state, to put back after each test: its sources (bytes and mtimes) and build directory
    shutil.copytree(build_dir, root / "objects-after-cold-build", symlinks=True)
    return Built(candidate, build_dir, cold)


@pytest.fixture
def pristine(built: Built) -> Iterator[Built]:
    """The candidate and its build directory as the cold build left them, put back afterwards.

    A test whose edit took a full build (host code, build options) would otherwise leave a rebuild of the
    restored sources to the next test: the files go back with their mtimes, and the build directory is the
    cold build's copy, so ninja and the full build's record see the state they were made from."""
    originals = {p: (p.read_bytes(), p.stat()) for p in built.candidate.path.iterdir() if p.is_file()}
    yield built
    for p in built.candidate.path.iterdir():
        if p.is_file() and p not in originals:
            p.unlink()
    for p, (data, st) in originals.items():
        p.write_bytes(data)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    shutil.rmtree(built.build_dir)
    shutil.copytree(built.build_dir.parent / "objects-after-cold-build", built.build_dir, symlinks=True)
    report = built.build()  # back to the full build's state (its own kernels: nothing compiled)
    assert report.ok, report.log_tail
    assert report.rebuilt == [], report.command


def _errors(report: BuildReport) -> list[str]:
    return [d.message for d in report.diagnostics if d.severity == "error"]


def _notes(report: BuildReport) -> list[str]:
    return [d.message for d in report.diagnostics if d.severity == "note"]


def test_the_full_build_is_recorded_with_its_kernels_and_no_host_code(built: Built) -> None:
    assert built.cold.ok, built.cold.log_tail
    full = read_full(built.build_dir)
    assert full is not None and Path(full.library).is_file()
    cu = str((built.candidate.path / "scale.cu").resolve())
    assert sorted(full.stubs[cu]) == sorted([*(f"_Z12scale_kernelILi{t}EEvPKfPffl" for t in (128, 256, 512)),
                                             "_Z11fill_kernelPffl"])
    assert full.host_code[cu] == []
    command = ninja_commands(built.build_dir)[cu]
    assert "-c" in command and cu in command


@pytest.mark.slow
def test_a_kernel_edit_compiles_device_code_alone_and_matches_a_full_build(pristine: Built) -> None:
    pristine.edit("scale.cu", "y[i] = alpha * x[i];", "y[i] = x[i] * alpha + 1.0f;")
    report = pristine.build()
    assert report.ok, report.log_tail
    assert report.command.startswith(DEVICE_ONLY) and report.rebuilt == ["scale.cu"]
    assert any(n.startswith(DEVICE_ONLY) for n in _notes(report))
    assert sorted(k.kernel for k in report.kernels) == sorted(
        [*(f"void scale_kernel<{t}>(float const*, float*, float, long)" for t in (128, 256, 512)),
         "fill_kernel(float*, float, long)"])
    device, full = read_device(pristine.build_dir), read_full(pristine.build_dir)
    assert device is not None and full is not None
    assert len(device.cubins) == 2 and all(Path(c).is_file() for c in device.cubins)  # two parts
    # the template's instances split over the two parts; the plain kernel compiled in both
    assert sorted({k for c in device.cubins
                   for k in elf.kernels(Path(c))}) == sorted(full.stubs[next(iter(full.stubs))])
    env = build_env(pristine.candidate, build_dir=pristine.build_dir, arch="sm_90")
    result = identity.summary(identity.check(device, full, env))
    assert result == "same (4 kernels)", result

    again = pristine.build()  # nothing changed since: nothing compiled
    assert again.ok and again.command.endswith("0 compiled") and again.rebuilt == []


@pytest.mark.slow
def test_the_sass_check_compiles_beside_the_parts_and_stops_with_a_failed_build(pristine: Built) -> None:
    """The plain build's compile of the edited file starts when the parts are planned, before they compile, and
    gives the same answer as a check started afterwards; a build that fails kills that compile."""
    env = build_env(pristine.candidate, build_dir=pristine.build_dir, arch="sm_90", env=PARTS)
    seen: list[tuple[bool, int]] = []

    def build(sass: SassCheck) -> BuildReport:
        def on_plan(plan: DevicePlan) -> None:
            sass.start(plan)
            compiles = list(sass._started.values())
            # nothing of the parts compiled yet, the check's own compile already running
            seen.append((any(p.cubin.is_file() for p in plan.missing), len(compiles)))
        return build_candidate(load_candidate(pristine.candidate.path), build_dir=pristine.build_dir,
                               arch="sm_90", env=PARTS, on_device_plan=on_plan)

    pristine.edit("scale.cu", "y[i] = alpha * x[i];", "y[i] = alpha * x[i] - 2.0f;")
    sass = SassCheck(env)
    report = build(sass)
    assert report.ok and report.command.startswith(DEVICE_ONLY), report.log_tail
    assert seen == [(False, 1)]
    sass.begin(pristine.build_dir)
    assert sass.wait(300) == "same (4 kernels)"
    assert sass.seconds > 0

    again = SassCheck(env)  # the same state: its answer is kept, nothing compiles a second time
    assert build(again).ok and seen[-1] == (False, 0)
    again.begin(pristine.build_dir)
    assert again.wait(30) == "same (4 kernels)"

    pristine.edit("scale.cu", "alpha * x[i] - 2.0f;", "alpha * x[i] - 3.0f  // no semicolon")
    broken = SassCheck(env)
    compiles: list[identity.WholeCompile] = []
    report = build_candidate(load_candidate(pristine.candidate.path), build_dir=pristine.build_dir, arch="sm_90",
                             env=PARTS, on_device_plan=lambda plan: (broken.start(plan),
                                                                     compiles.extend(broken._started.values())))
    assert not report.ok and len(compiles) == 1
    broken.stop()
    assert compiles[0]._proc is not None and compiles[0]._proc.poll() is not None  # killed or finished, reaped
    assert not Path(compiles[0]._tmp).exists()


@pytest.mark.slow
def test_a_compile_error_in_a_part_is_reported_at_the_file_s_own_line(pristine: Built) -> None:
    pristine.edit("scale.cu", "y[i] = alpha * x[i];", "y[i] = alpha * x[i]  // missing semicolon")
    report = pristine.build()
    assert not report.ok and report.command.startswith(DEVICE_ONLY)
    located = [d for d in report.diagnostics if d.severity == "error" and d.file == "scale.cu"]
    # nvcc names the token after the statement (line 10) for the file itself too; once, not once per part
    assert [(d.line, d.message) for d in located] == [(10, 'expected a ";"')], report.diagnostics


@pytest.mark.slow
def test_host_code_changes_take_the_full_build(pristine: Built) -> None:
    pristine.edit("binding.cpp", '"fill kernel launch failed: "', '"the fill kernel did not launch: "')
    report = pristine.build()
    assert report.ok and not report.command.startswith(DEVICE_ONLY)
    assert "full build: binding.cpp changed (host code)" in _notes(report)


@pytest.mark.slow
def test_comments_in_binding_s_files_keep_the_device_only_build(pristine: Built) -> None:
    """Comments changed in binding.cpp and in the header it shares with scale.cu, with a kernel edit: the host code
    is what the full build compiled, so only scale.cu's device code compiles, and its SASS is a full build's."""
    pristine.edit("binding.cpp", "// Torch glue", "// The torch glue")
    pristine.edit("scale.h", "// The kernels of scale.cu", "// The kernels (scale.cu)")
    with (pristine.candidate.path / "scale.h").open("a") as fh:
        fh.write("// a note at the end\n")
    pristine.edit("scale.cu", "y[i] = alpha * x[i];", "y[i] = x[i] * alpha + 1.0f;")
    report = pristine.build()
    assert report.ok, report.log_tail
    assert report.command.startswith(DEVICE_ONLY) and report.rebuilt == ["scale.cu"], _notes(report)
    device, full = read_device(pristine.build_dir), read_full(pristine.build_dir)
    assert device is not None and full is not None
    env = build_env(pristine.candidate, build_dir=pristine.build_dir, arch="sm_90")
    assert identity.summary(identity.check(device, full, env)) == "same (4 kernels)"

    pristine.edit("scale.h", "// a note at the end", "long scale_count();  // a declaration now")
    report = pristine.build()  # code this time, in the header binding.cpp shares: host code
    assert report.ok and not report.command.startswith(DEVICE_ONLY)
    assert "full build: scale.h changed (host code)" in _notes(report)


@pytest.mark.slow
def test_new_build_options_in_model_new_take_the_full_build(pristine: Built) -> None:
    """A kernel edit compiled with the last full build's flags would not be what model_new.py now asks for."""
    pristine.edit("scale.cu", "y[i] = alpha * x[i];", "y[i] = x[i] * alpha;")
    pristine.edit("model_new.py", "load_extension(__file__)",
                  'load_extension(__file__, extra_cuda_cflags=["-DKP_TEST=1"])')
    report = pristine.build()
    assert report.ok and not report.command.startswith(DEVICE_ONLY)
    assert "full build: the build's options, sources or toolchain changed since the last full build" in _notes(report)


@pytest.mark.slow
def test_a_kernel_binding_launches_that_the_edit_removed_fails_the_build(pristine: Built) -> None:
    pristine.edit("scale.cu", "template __global__ void scale_kernel<512>(const float*, float*, float, long);", "")
    report = pristine.build()
    assert not report.ok
    assert any("no longer defines kernels binding.cpp launches" in n for n in _notes(report))
    assert any("undefined symbol" in e and "scale_kernel<512>" in e for e in _errors(report)), report.diagnostics
    assert read_full(pristine.build_dir) is None  # the next save builds in full again


@pytest.mark.slow
def test_the_load_check_of_new_symbols_runs_in_the_waiting_builder(pristine: Built) -> None:
    """A full build by ninja alone whose library needs symbols the last one did not is load-checked by the standby
    builder (torch imported already) when one waits: a symbol nothing defines fails the build with the loader's
    words, one libc defines passes; each check takes the waiting process, and a fresh one waits after it."""
    standby = Standby(standby_env())
    try:
        pristine.edit("scale.cu", "template __global__ void scale_kernel<512>(const float*, float*, float, long);",
                      "")
        waiting = standby.proc
        report = pristine.build(standby)
        assert not report.ok
        assert any("undefined symbol" in e and "scale_kernel" in e for e in _errors(report)), report.diagnostics
        assert waiting is not None and waiting.poll() is not None and standby.proc not in (None, waiting)
        assert read_full(pristine.build_dir) is None
    finally:
        standby.close()


@pytest.mark.slow
def test_a_library_needing_symbols_that_exist_passes_the_waiting_builder_s_check(pristine: Built) -> None:
    standby = Standby(standby_env())
    try:
        pristine.edit("binding.cpp", '#include "scale.h"\n', '#include "scale.h"\n#include <cstdlib>\n')
        pristine.edit("binding.cpp", "if (x.numel() == 0) return y;",
                      'if (x.numel() == 0 || std::getenv("KP_NEVER_SET_9") != nullptr) return y;')
        waiting = standby.proc
        report = pristine.build(standby)
        assert report.ok, report.diagnostics
        full = read_full(pristine.build_dir)
        assert full is not None and "getenv" in full.undefined
        assert waiting is not None and waiting.poll() == 0 and standby.proc not in (None, waiting)
        loaded = Standby(standby_env())  # a standby in another loader environment is passed over
        assert not loaded.serves({**standby_env(), "LD_LIBRARY_PATH": "/nowhere"})
        loaded.close()
    finally:
        standby.close()


_IMPORT = """
import sys, torch
sys.path.insert(0, sys.argv[1])
import model_new
print(model_new._ext.__file__)
"""


@pytest.mark.slow
def test_the_worker_imports_the_last_full_build_as_it_is_while_its_files_are_those_it_read(pristine: Built) -> None:
    """After a full build the worker's import takes the build's snapshot (replace.full_module), not torch's builder
    (its ninja run and compiler checks, 0.6-0.9 s in the H100's worker): only while the files on disk are those the
    build read and the library is still the one it made."""
    import subprocess
    import sys

    import torch  # noqa: F401  # the extension's library needs torch's loaded first

    from kernelpilot.extension import make_spec
    from kernelpilot.extension_reload import file_fingerprint
    from kernelpilot.native.replace import full_module

    env = build_env(pristine.candidate, build_dir=pristine.build_dir, arch="sm_90")
    spec = make_spec(pristine.candidate.path.resolve(), build_dir=pristine.build_dir, env=env)
    clear_device(pristine.build_dir)  # as a full build leaves it: no device-only build since
    record = read_full(pristine.build_dir)
    assert record is not None
    shown = subprocess.run([sys.executable, "-c", _IMPORT, str(pristine.candidate.path)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    imported = Path(shown.stdout.strip().splitlines()[-1])
    assert imported.parent.name == "reloads" and file_fingerprint(imported) == record.fingerprint, shown.stdout
    module = full_module(spec.name, pristine.build_dir, spec.library)
    assert module is not None and file_fingerprint(Path(module.__file__)) == record.fingerprint
    pristine.edit("scale.cu", "y[i] = alpha * x[i];", "y[i] = x[i] * alpha;")
    assert full_module(spec.name, pristine.build_dir, spec.library) is None  # edited since: the caller builds
    pristine.edit("scale.cu", "y[i] = x[i] * alpha;", "y[i] = alpha * x[i];")
    assert full_module(spec.name, pristine.build_dir, spec.library) is not None
    spec.library.write_bytes(spec.library.read_bytes() + b"\0")  # built again since, and nothing recorded it
    assert full_module(spec.name, pristine.build_dir, spec.library) is None


def test_a_cu_of_host_code_alone_is_recorded_with_all_of_it_as_host_code(tmp_path: Path) -> None:
    """A .cu without kernels (cuBLASLt calls, as examples/gemm_bias_gelu) embeds a cubin with none: its full build is
    recorded (so the worker can import it as it is) and every function it defines is host code, C names shown first."""
    import subprocess

    from kernelpilot.native.device_build import _host_names
    from kernelpilot.native.records import stubs_and_host_code

    try:
        nvcc = find_cuda_home() / "bin" / "nvcc"
    except ToolchainError:
        pytest.skip("needs the CUDA toolkit (nvcc)")
    source = tmp_path / "host_only.cu"
    source.write_text('namespace { int twice(int x) { return 2 * x; } }\n'
                      'extern "C" int kp_host_only(int x) { return twice(x) + 1; }\n'
                      'int kp_cpp_name(int x) { return twice(x); }\n')
    obj = tmp_path / "host_only.cuda.o"
    done = subprocess.run([str(nvcc), "-c", "-O0", "-gencode=arch=compute_90,code=sm_90", str(source), "-o", str(obj)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stubs, host = stubs_and_host_code(obj)
    assert stubs == [] and "kp_host_only" in host and any("kp_cpp_name" in n for n in host), host
    assert _host_names(host).startswith("kp_host_only, _Z")


@pytest.mark.slow
def test_host_code_in_a_cu_file_keeps_every_edit_on_full_builds(pristine: Built) -> None:
    pristine.edit("scale.cu", '#include "scale.h"\n',
                  '#include "scale.h"\n\nextern "C" long kp_rounded(long n) { return n; }\n')
    pristine.edit("binding.cpp", '#include "scale.h"\n', '#include "scale.h"\n\nextern "C" long kp_rounded(long n);\n')
    pristine.edit("binding.cpp", "const long n = x.numel();\n    if (alpha",
                  "const long n = kp_rounded(x.numel());\n    if (alpha")
    assert pristine.build().ok
    pristine.edit("scale.cu", "y[i] = alpha * x[i];", "y[i] = x[i] * alpha;")
    report = pristine.build()
    assert report.ok and not report.command.startswith(DEVICE_ONLY)
    assert any("scale.cu has host code of its own (kp_rounded)" in n for n in _notes(report)), _notes(report)


def test_binding_must_launch_through_kernelpilot_s_header(tmp_path: Path) -> None:
    binding = tmp_path / "binding.cpp"
    helper = tmp_path / "launch_helper.h"
    binding.write_text('#include <kernelpilot/launch.h>\n#include "launch_helper.h"\n// cudaFuncSetAttribute in a '
                       'comment\n')
    helper.write_text("inline void f() {}\n")
    assert sources.host_launch_problem(binding, tmp_path) == ""
    helper.write_text("inline void f(void* k) {\n  cudaFuncSetAttribute(k, "
                      "cudaFuncAttributeMaxDynamicSharedMemorySize, 0);\n}\n")
    assert sources.host_launch_problem(binding,
                                       tmp_path).startswith("launch_helper.h line 2 calls cudaFuncSetAttribute")
    helper.write_text("inline void f() { k<<<1, 1>>>(); }\n")
    assert "calls <<<" in sources.host_launch_problem(binding, tmp_path)
    binding.write_text("#include <cuda_runtime.h>\n")
    assert "does not launch its kernels through kernelpilot/launch.h" in sources.host_launch_problem(binding, tmp_path)


def test_instances_split_keeps_every_line_and_only_the_chosen_instantiations() -> None:
    text = ('#include "k.h"\n// template __global__ void k<9>(int); in a comment\n'
            "template <int N> __global__ void k(int) {}\n"
            "template __global__ void k<1>(int);\ntemplate __global__ void\n  k<2>(int);\n"
            "extern template __global__ void k<3>(int);\n")
    found = sources.instances(text)
    assert found.splittable and len(found.spans) == 2
    part = sources.keep_only(text, found.spans, {1})
    assert part.count("\n") == text.count("\n")
    assert "k<1>" not in part and "k<2>(int);" in part and "k<3>" in part and "k<9>" in part
    assert not sources.instances(text.replace("template <int N>",
                                              "__constant__ int table[4];\ntemplate <int N>")).splittable


@pytest.mark.slow
def test_edited_kernels_that_do_not_load_are_judged_again_on_a_full_build(tmp_path: Path) -> None:
    """The worker's side of a device-only build, for real on the CPU: the cubins cannot be loaded here (no
    driver), which is not the candidate's doing, so the save is judged again on a full build and says so."""
    try:
        find_cuda_home()
    except ToolchainError:
        pytest.skip("needs the CUDA toolkit (nvcc)")
    from agent_support import PROBLEM

    from kernelpilot.evaluation import EvalSettings, Evaluator

    problem = tmp_path / "vector_scale.py"
    problem.write_text(PROBLEM)
    shutil.copytree(DATA, tmp_path / "candidate")
    candidate = tmp_path / "candidate"
    settings = EvalSettings(device="cpu", build_dir=str(tmp_path / "build"), build_timeout_s=600, confine=False,
                            start_timeout_s=300)
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        first = ev.evaluate(problem, candidate, mode="test")
        assert first.build is not None and first.build.ok and not first.build.command.startswith(DEVICE_ONLY)
        assert "CUDA tensor" in str(first.error)  # the full build's own module, on CPU tensors
        kernel = candidate / "scale.cu"
        kernel.write_text(kernel.read_text().replace("y[i] = alpha * x[i];", "y[i] = x[i] * alpha;"))
        again = ev.evaluate(problem, candidate, mode="test")
    assert any(f.startswith("judged on a full build: the device-only build's kernels failed to load or launch")
               for f in again.flags), again.flags
    assert again.build is not None and not again.build.command.startswith(DEVICE_ONLY)
    assert "CUDA tensor" in str(again.error)  # the full build's verdict: the edit's own module was loaded


def test_every_flag_of_the_full_build_reaches_the_device_only_command(tmp_path: Path) -> None:
    # torch's rule is `$nvcc -MD -MF $out.d $cuda_cflags -c $in ...`: the dependency file is -MF's value, so the
    # first of cuda_cflags (here -ccbin, as when $CC is set) must survive, with its value, and only the copy
    # may be an input file (a stray value is a second input: "A single input file is required")
    (tmp_path / "build.ninja").write_text(
        "ninja_required_version = 1.3\n"
        "nvcc = /usr/local/cuda/bin/nvcc\n"
        "cuda_cflags = -ccbin /usr/bin/gcc-13 -DTORCH_EXTENSION_NAME=kp_x -isystem /inc\n"
        "cuda_post_cflags = -gencode=arch=compute_90,code=sm_90 -std=c++17\n"
        "rule cuda_compile\n"
        "  depfile = $out.d\n"
        "  deps = gcc\n"
        "  command = $nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags\n"
        "\n"
        "build scale.cuda.o: cuda_compile /src/my$ dir/scale.cu\n"
    )
    from kernelpilot.native.device_build import cubin_argv, without_outputs

    full = ninja_commands(tmp_path)["/src/my dir/scale.cu"]
    assert full[full.index("-MF") + 1] == "scale.cuda.o.d"
    kept = without_outputs(full)
    assert kept[:4] == ["/usr/local/cuda/bin/nvcc", "-ccbin", "/usr/bin/gcc-13", "-DTORCH_EXTENSION_NAME=kp_x"]
    assert "-MF" not in kept and "scale.cuda.o" not in kept and "scale.cuda.o.d" not in kept
    argv = cubin_argv(full, tmp_path / "part-0.cu", tmp_path / "part-0.cubin", Path("/src/my dir"))
    values = {"-ccbin", "-isystem", "-o"}
    inputs = [a for i, a in enumerate(argv[1:], 1) if not a.startswith("-") and argv[i - 1] not in values]
    assert inputs == [str(tmp_path / "part-0.cu")]


@pytest.mark.slow
def test_a_save_landing_during_a_full_build_is_compiled_by_the_next_build(pristine: Built,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A save written while a full build runs (a pairing session's first save as its first build finishes: the GPU
    smoke of 2026-12-07 drew it as "0 part(s) of no edited file"): the library holds what nvcc read, and the record
    must say so. Digested after the build, the record called the new source built, and the next save ran the old
    kernel without compiling anything."""
    from kernelpilot.evaluation.build import step

    real = step.run_in_session
    saved: list[bool] = []

    def build_then_save(*args: object, **kwargs: object) -> object:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        if not saved:  # the save lands after nvcc read scale.cu, before the build is recorded
            pristine.edit("scale.cu", "y[i] = alpha * x[i];", "y[i] = x[i] * alpha + 1.0f;")
            saved.append(True)
        return out

    pristine.edit("binding.cpp", '"fill kernel launch failed: "', '"the fill kernel did not launch: "')  # host code
    monkeypatch.setattr(step, "run_in_session", build_then_save)
    report = pristine.build()
    assert report.ok and not report.command.startswith(DEVICE_ONLY) and saved
    monkeypatch.setattr(step, "run_in_session", real)
    again = pristine.build()
    assert again.ok, again.log_tail
    assert again.rebuilt == ["scale.cu"], again.command  # the saved kernel compiled, not the old one kept
