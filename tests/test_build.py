"""Real builds with nvcc and ninja (no GPU needed): diagnostics, incremental rebuilds, the timeout kill.

One cold build of the test candidate per session (binding.cpp with the torch headers is the slow
part); every other test edits that copy and rebuilds incrementally, restoring it afterwards.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelpilot.errors import ToolchainError
from kernelpilot.evaluation.build.step import build_candidate, build_env
from kernelpilot.evaluation.candidate import Candidate, load_candidate
from kernelpilot.toolkit import find_cuda_home
from kernelpilot.verdict import BuildReport

DATA = Path(__file__).parent / "data" / "candidates"
VARIANTS = DATA / "variants"


def _toolkit_or_skip() -> None:
    try:
        find_cuda_home()
    except ToolchainError:
        pytest.skip("needs the CUDA toolkit (nvcc)")


@dataclass
class Built:
    candidate: Candidate
    build_dir: Path
    cold: BuildReport

    def build(self, **kw: object) -> BuildReport:
        return build_candidate(load_candidate(self.candidate.path), build_dir=self.build_dir, arch="sm_90", **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    _toolkit_or_skip()
    root = tmp_path_factory.mktemp("build")
    shutil.copytree(DATA / "vector_scale", root / "vector_scale")
    candidate = load_candidate(root / "vector_scale")
    build_dir = root / "objects"
    cold = build_candidate(candidate, build_dir=build_dir, arch="sm_90")
    return Built(candidate, build_dir, cold)


@pytest.fixture
def pristine(built: Built) -> Iterator[Built]:
    """Give the test the candidate as it was, and put its files back afterwards.

    A restored file gets a new mtime, so the next build recompiles it: tests that check the exact
    list of rebuilt sources build once first.
    """
    directory = built.candidate.path
    saved = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    yield built
    for p in directory.iterdir():
        if p.is_file() and p.name not in saved:
            p.unlink()
    for name, content in saved.items():
        path = directory / name
        if not path.exists() or path.read_bytes() != content:
            path.write_bytes(content)


# y = 2x, a problem for single files whose build is what is tested
DOUBLE = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
          "    def forward(self, x):\n        return x * 2\n\n\n"
          "def get_inputs():\n    return [torch.randn(8)]\n\n\ndef get_init_inputs():\n    return []\n")


def _doubling(tmp_path: Path, folder: str, model_new: str) -> tuple[Path, Path]:
    """The y = 2x problem in ``tmp_path`` and a single-file candidate for it, ``folder``/model_new.py."""
    problem = tmp_path / "problem.py"
    problem.write_text(DOUBLE)
    candidate = tmp_path / folder / "model_new.py"
    candidate.parent.mkdir()
    candidate.write_text(model_new)
    return problem, candidate


def _errors(report: BuildReport) -> list[str]:
    return [f"{d.tool} {d.file}:{d.line}: {d.message}" for d in report.diagnostics if d.severity == "error"]


@pytest.mark.slow
def test_good_candidate_builds_with_ptxas_figures(built: Built) -> None:
    report = built.cold
    assert report.ok, report.log_tail
    assert not _errors(report)
    assert sorted(report.rebuilt) == ["binding.cpp", "kernel.cu"]
    assert report.arch == "sm_90"
    assert report.build_dir == str(built.build_dir)
    kernels = {k.kernel: k for k in report.kernels}
    scale = kernels["scale_kernel(float const*, float*, float, long)"]
    assert scale.arch == "sm_90"
    assert scale.registers is not None and 4 <= scale.registers <= 64
    assert scale.spill_stores_bytes == 0 and scale.stack_frame_bytes == 0
    assert list(built.build_dir.glob("kp_vector_scale_*.so"))
    # The caller never imports the candidate's extension.
    assert not [m for m in sys.modules if m.startswith("kp_vector_scale")]


@pytest.mark.slow
def test_unchanged_candidate_rebuilds_nothing_and_keeps_the_figures(pristine: Built) -> None:
    pristine.build()
    report = pristine.build()
    assert report.ok, report.log_tail
    assert report.rebuilt == []
    assert "ninja: no work to do." in report.log_tail
    assert [k.kernel for k in report.kernels] == ["scale_kernel(float const*, float*, float, long)"]


@pytest.mark.slow
def test_editing_one_line_recompiles_only_that_file(pristine: Built) -> None:
    pristine.build()  # whatever earlier tests left, start from an up-to-date build
    kernel = pristine.candidate.path / "kernel.cu"
    text = kernel.read_text()
    assert "y[i] = alpha * x[i];" in text
    kernel.write_text(text.replace("y[i] = alpha * x[i];", "y[i] = x[i] * alpha;"))
    report = pristine.build()
    assert report.ok, report.log_tail
    assert report.rebuilt == ["kernel.cu"]
    # torch already wrote build.ninja for these sources and flags: ninja runs without Python or torch
    assert Path(report.command.split()[0]).name == "ninja"
    # binding.cpp (the torch headers) is what makes a cold build slow; an edit skips it.
    assert report.seconds < max(20.0, 0.5 * pristine.cold.seconds), (report.seconds, pristine.cold.seconds)


@pytest.mark.slow
def test_broken_kernel_reports_file_and_line(pristine: Built) -> None:
    shutil.copy(VARIANTS / "broken_kernel.cu", pristine.candidate.path / "kernel.cu")
    report = pristine.build()
    assert not report.ok
    assert not report.timed_out
    assert report.rebuilt == ["kernel.cu"]
    located = {(d.file, d.line, d.tool) for d in report.diagnostics if d.severity == "error"}
    assert ("kernel.cu", 6, "nvcc") in located
    assert ("kernel.cu", 8, "nvcc") in located  # the missing ";" of line 7, found at the next token
    messages = " | ".join(_errors(report))
    assert 'identifier "undefined_offset" is undefined' in messages
    assert 'expected a ";"' in messages


@pytest.mark.slow
def test_spilling_kernel_reports_stack_and_spills(pristine: Built) -> None:
    shutil.copy(VARIANTS / "spill_kernel.cu", pristine.candidate.path / "spill_kernel.cu")
    report = pristine.build()
    assert report.ok, report.log_tail
    assert "spill_kernel.cu" in report.rebuilt and "binding.cpp" not in report.rebuilt
    assert "-m kernelpilot.extension --build" in report.command  # a new source: torch rewrites build.ninja
    kernels = {k.kernel.split("(")[0]: k for k in report.kernels}
    assert set(kernels) == {"scale_kernel", "spill_kernel", "local_array_kernel"}
    spill = kernels["spill_kernel"]
    assert spill.registers is not None and spill.registers <= 32  # __launch_bounds__(1024, 2)
    assert spill.spill_stores_bytes and spill.spill_stores_bytes > 0
    assert spill.spill_loads_bytes and spill.spill_loads_bytes > 0
    local = kernels["local_array_kernel"]
    assert local.stack_frame_bytes is not None and local.stack_frame_bytes >= 1024


@pytest.mark.slow
def test_duplicate_launcher_is_a_link_error(pristine: Built) -> None:
    shutil.copy(VARIANTS / "duplicate_launcher.cu", pristine.candidate.path / "duplicate_launcher.cu")
    report = pristine.build()
    assert not report.ok
    linker = [d for d in report.diagnostics if d.tool == "ld" and d.severity == "error"]
    assert linker, report.log_tail
    assert linker[0].message.startswith("multiple definition of kp_scale_launch (also defined in ")
    assert {linker[0].file, linker[0].message.split("also defined in ")[1].split(")")[0]} == {
        "kernel.cu", "duplicate_launcher.cu"}


@pytest.mark.slow
def test_undefined_function_fails_when_the_library_loads(pristine: Built) -> None:
    shutil.copy(VARIANTS / "missing_function.cu", pristine.candidate.path / "missing_function.cu")
    report = pristine.build()
    assert not report.ok
    assert "missing_function.cu" in report.rebuilt and "binding.cpp" not in report.rebuilt
    errors = [d for d in report.diagnostics if d.severity == "error"]
    assert errors and errors[0].tool == "ld", report.log_tail
    assert "undefined symbol kp_helper_never_defined" in errors[0].message


_RELOAD_SCRIPT = """
import sys
from pathlib import Path
from kernelpilot.extension import load_extension
model = Path(sys.argv[1])
first = load_extension(model)
kernel = model.parent / "kernel.cu"
kernel.write_text(kernel.read_text().replace("y[i] = alpha * x[i];", "y[i] = alpha * x[i] + 1.0f;"))
second = load_extension(model)
again = load_extension(model)
maps = Path("/proc/self/maps").read_text()
print("RELOAD", first is second, second is again, Path(first.__file__).parent.name, Path(second.__file__).parent.name,
      second.__file__ in maps)
"""


@pytest.mark.slow
def test_a_warm_process_reloads_an_edited_extension(pristine: Built) -> None:
    """The evaluation worker stays alive between edits: load_extension must hand it the new build."""
    import subprocess

    pristine.build()
    env = build_env(pristine.candidate, build_dir=pristine.build_dir, arch="sm_90")
    proc = subprocess.run(
        [sys.executable, "-c", _RELOAD_SCRIPT, str(pristine.candidate.model_file)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RELOAD"))
    # a new module for the new library (a content-addressed copy, really mapped), the same one when unchanged; the
    # first is the full build's snapshot too (replace.full_module: the build env asks for device-only builds), loaded
    # in a process that had not imported torch
    assert line.split()[1:] == ["False", "True", "reloads", "reloads", "True"]


@pytest.mark.slow
def test_timeout_kills_the_whole_build(built: Built, tmp_path: Path) -> None:
    # A fresh build directory means a cold build (tens of seconds): stop it after a few.
    objects = tmp_path / "cold"
    start = time.monotonic()
    report = build_candidate(built.candidate, build_dir=objects, arch="sm_90", timeout_s=6)
    elapsed = time.monotonic() - start
    assert not report.ok and report.timed_out
    assert any(d.message == "build timed out after 6 s and was killed" for d in report.diagnostics)
    assert elapsed < 20
    time.sleep(0.2)
    assert not _processes_mentioning(str(objects)), "a compiler of the killed build is still running"
    assert not (objects / "lock").exists()


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if text in cmdline or cwd.startswith(text):
            found.append(f"{entry}: {cmdline[:200]}")
    return found


def test_single_file_import_error_points_at_the_line(tmp_path: Path) -> None:
    _toolkit_or_skip()
    source = (DATA / "single_file" / "model_new_inline.py").read_text()
    marker = "cpp_source = "
    assert marker in source
    broken = source.replace(marker, "raise ValueError('kernel config is wrong')\n" + marker, 1)
    path = tmp_path / "model_new_inline.py"
    path.write_text(broken)
    line = broken.splitlines().index("raise ValueError('kernel config is wrong')") + 1
    report = build_candidate(load_candidate(path), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=120)
    assert not report.ok
    errors = [d for d in report.diagnostics if d.severity == "error"]
    assert errors[0].tool == "python"
    assert errors[0].file == "model_new_inline.py" and errors[0].line == line
    assert "ValueError: kernel config is wrong" in errors[0].message


def test_a_single_file_writes_nothing_beside_itself_while_it_builds(tmp_path: Path) -> None:
    """Published solutions write sources and build folders to relative paths: the build step runs them in a
    folder of kernelpilot's, not in the user's folder of solutions."""
    _toolkit_or_skip()
    source = (DATA / "single_file" / "model_new_inline.py").read_text()
    marker = "cpp_source = "
    written = "open('written_at_build.cu', 'w').write('// x')\nraise ValueError('stop here')\n"
    path = tmp_path / "solutions" / "model_new_inline.py"
    path.parent.mkdir()
    path.write_text(source.replace(marker, written + marker, 1))
    report = build_candidate(load_candidate(path), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=120)
    assert not report.ok and "stop here" in " ".join(d.message for d in report.diagnostics)
    assert sorted(p.name for p in path.parent.iterdir()) == ["model_new_inline.py"]
    assert list((tmp_path / "ext").rglob("written_at_build.cu"))


def test_a_confined_single_file_build_compiles_and_writes_nowhere_else(tmp_path: Path) -> None:
    """The build step runs the candidate's code (KernelBench's presets list file writes without refusing them):
    confined, its extension still compiles, and a write outside the build folder is refused."""
    _toolkit_or_skip()
    from kernelpilot.evaluation.sandbox.confine import detect

    if not detect().landlock_abi:
        pytest.skip("no Landlock on this machine")
    outside = tmp_path / "outside.txt"
    source = (DATA / "single_file" / "model_new_inline.py").read_text()
    path = tmp_path / "solutions" / "model_new_inline.py"
    path.parent.mkdir()
    path.write_text("import tempfile\nscratch = tempfile.mkdtemp()  # the private TMPDIR: allowed\n" + source)
    report = build_candidate(load_candidate(path), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=600,
                             confine=True)
    assert report.ok, report.diagnostics
    assert not any("unconfined" in d.message for d in report.diagnostics), report.diagnostics
    assert not any(d.message.startswith("no extension was compiled") for d in report.diagnostics)  # it compiled
    hostile = tmp_path / "solutions2" / "model_new_inline.py"
    hostile.parent.mkdir()
    hostile.write_text(f"open({str(outside)!r}, 'w').write('x')\n" + source)
    refused = build_candidate(load_candidate(hostile), build_dir=tmp_path / "ext2", arch="sm_90", timeout_s=600,
                              confine=True)
    assert not refused.ok and not outside.exists()
    assert "PermissionError" in " ".join(d.message for d in refused.diagnostics), refused.diagnostics
    # a waiting builder (torch imported before it took the build's environment) takes the same rules
    from kernelpilot.evaluation.build.step import standby_env
    from kernelpilot.evaluation.build.standby import Standby

    from kernelpilot.evaluation.build.load_inline import INLINE_RECORD

    standby = Standby(standby_env())
    try:
        (tmp_path / "ext" / INLINE_RECORD).unlink()  # else the record answers and the standby runs nothing
        waiting = standby.proc
        again = build_candidate(load_candidate(path), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=600,
                                confine=True, standby=standby)
        assert waiting is not None and waiting.poll() is not None  # the standby ran the file
        assert again.ok, again.diagnostics  # its mkdtemp() lands in the build's private TMPDIR
        refused = build_candidate(load_candidate(hostile), build_dir=tmp_path / "ext2", arch="sm_90", timeout_s=600,
                                  confine=True, standby=standby)
        assert not refused.ok and not outside.exists()
    finally:
        standby.close()
    # the same file without confinement: what the sandbox stopped. Its build runs in the folder of the confined
    # build above (less that build's record, which would answer without running anything): the file runs in
    # full, and its load_inline finds the extension built there instead of compiling it a second time
    (tmp_path / "ext" / INLINE_RECORD).unlink()
    control = build_candidate(load_candidate(hostile), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=600)
    assert outside.exists()
    assert control.ok, control.diagnostics


def test_a_build_that_cannot_be_confined_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _toolkit_or_skip()
    from kernelpilot.evaluation.sandbox import confine

    monkeypatch.setattr(confine, "detect", lambda: confine.Capabilities())  # no Landlock, no seccomp
    path = tmp_path / "model_new_inline.py"
    source = (DATA / "single_file" / "model_new_inline.py").read_text()
    path.write_text(source.replace("cpp_source = ", "raise ValueError('stop here')\ncpp_source = ", 1))
    report = build_candidate(load_candidate(path), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=120,
                             confine=True)
    notes = [d.message for d in report.diagnostics if d.severity == "note"]
    assert any(n.startswith("build step unconfined (no Landlock") for n in notes), notes


def test_build_env_is_scrubbed_and_points_at_the_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _toolkit_or_skip()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("CUDA_HOME", "/usr/local")  # the wrong guess a wrapper script leads to
    candidate = load_candidate(DATA / "vector_scale")
    env = build_env(candidate, build_dir=tmp_path, arch="sm_90a")
    assert "OPENAI_API_KEY" not in env
    assert env["CUDA_HOME"] == str(find_cuda_home())
    assert env["PATH"].split(os.pathsep)[0] == str(find_cuda_home() / "bin")
    assert env["KERNELPILOT_ARCH"] == "sm_90a" and env["TORCH_CUDA_ARCH_LIST"] == "9.0a"
    assert env["KERNELPILOT_BUILD_DIR"] == str(tmp_path)
    single = load_candidate(DATA / "single_file" / "model_new_inline.py")
    assert build_env(single, build_dir=tmp_path)["TORCH_EXTENSIONS_DIR"] == str(tmp_path)
    assert build_env(single, env={"TORCH_EXTENSIONS_DIR": "/x/ext"})["TORCH_EXTENSIONS_DIR"] == "/x/ext"


def test_a_waiting_builder_compiles_with_the_build_s_toolkit_not_the_one_torch_guessed(tmp_path: Path) -> None:
    """torch's builder reads CUDA_HOME once, at its import. A standby imported it in its own first environment (on
    a machine whose nvcc on PATH is a wrapper, torch guesses /usr/local there, and every single-file build it took
    failed to link: no nvcc, no libcudart there): the file it runs must see the build's toolkit."""
    from kernelpilot.evaluation.build.step import standby_env
    from kernelpilot.evaluation.build.standby import Standby

    _toolkit_or_skip()
    path = tmp_path / "model_new_inline.py"
    path.write_text("import torch.utils.cpp_extension as cpp\nprint('KP_CUDA_HOME', cpp.CUDA_HOME)\n"
                    "raise ValueError('stop before compiling')\n"
                    "ext = cpp.load_inline('kp_never', cpp_sources='', cuda_sources='')\n"
                    "class ModelNew:\n    def forward(self, x):\n        return ext.f(x)\n")
    standby = Standby(standby_env({"CUDA_HOME": str(tmp_path / "no-toolkit-here")}))
    try:
        waiting = standby.proc
        report = build_candidate(load_candidate(path), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=300,
                                 standby=standby)
        assert waiting is not None and waiting.poll() is not None  # the standby took it
        seen = [line.split()[1] for line in report.log_tail.splitlines() if line.startswith("KP_CUDA_HOME")]
        assert seen == [str(find_cuda_home())], report.log_tail
    finally:
        standby.close()


def test_a_waiting_builder_takes_the_build_and_a_dead_one_is_replaced(tmp_path: Path) -> None:
    """builder.Standby: the build runs in a process that imported torch before it was asked (the same
    report as a fresh process gives); one that died is passed over for a fresh process."""
    from kernelpilot.evaluation.build.step import standby_env
    from kernelpilot.evaluation.build.standby import Standby

    _toolkit_or_skip()
    source = (DATA / "single_file" / "model_new_inline.py").read_text()
    marker = "cpp_source = "
    broken = source.replace(marker, "raise ValueError('kernel config is wrong')\n" + marker, 1)
    path = tmp_path / "model_new_inline.py"
    path.write_text(broken)
    line = broken.splitlines().index("raise ValueError('kernel config is wrong')") + 1
    standby = Standby(standby_env())
    try:
        waiting = standby.proc
        assert waiting is not None
        report = build_candidate(load_candidate(path), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=120,
                                 standby=standby)
        assert waiting.poll() is not None and standby.proc is not None and standby.proc is not waiting
        errors = [d for d in report.diagnostics if d.severity == "error"]
        assert not report.ok and errors[0].file == "model_new_inline.py" and errors[0].line == line, report.log_tail
        assert "ValueError: kernel config is wrong" in errors[0].message
        standby.proc.kill()  # dies while it waits: the build starts a process of its own
        standby.proc.wait()
        again = build_candidate(load_candidate(path), build_dir=tmp_path / "ext", arch="sm_90", timeout_s=120,
                                standby=standby)
        assert [d.line for d in again.diagnostics if d.severity == "error"][:1] == [line]
    finally:
        standby.close()


def test_a_confined_single_file_build_may_fill_the_caches_the_worker_fills(tmp_path: Path) -> None:
    """A candidate whose forward fills Inductor's cache (a torch.compile there) is probed on the meta device at build
    time, confined: the build may write the caches its environment names, as the worker may, even before they
    exist (a fresh machine). Before, the probe stopped on a PermissionError and the compile moved to the worker."""
    from kernelpilot.evaluation.sandbox.confine import detect

    if not detect().landlock_abi:
        pytest.skip("no Landlock on this machine")
    problem, candidate = _doubling(tmp_path, "solutions", (
        "import os\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        if os.environ.get('KP_TEST_NEVER_SET'):  # a compile call: the file has a build\n"
        "            load_inline(name='never', cpp_sources='', functions=[])\n\n"
        "    def forward(self, x):\n"
        "        cache = os.environ['TORCHINDUCTOR_CACHE_DIR']\n"
        "        os.makedirs(os.path.join(cache, 'fxgraph'), exist_ok=True)  # as Inductor does\n"
        "        open(os.path.join(cache, 'fxgraph', 'entry'), 'w').write('compiled')\n"
        "        return x * 2\n"))
    caches = tmp_path / "user-cache"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
           "TRITON_CACHE_DIR": str(caches / "triton")}
    report = build_candidate(load_candidate(candidate), build_dir=tmp_path / "ext", timeout_s=300, env=env,
                             problem=problem, confine=True)
    assert report.ok, report.diagnostics
    assert '"forward_probe": "ran"' in report.log_tail, report.log_tail[-600:]
    assert (caches / "inductor" / "fxgraph" / "entry").read_text() == "compiled"


def test_a_file_whose_compile_calls_never_ran_in_the_build_says_nothing_was_compiled(tmp_path: Path) -> None:
    """CUDA-L1's programs often compile under ``if torch.cuda.is_available():``: on a machine without a GPU that
    build ran none of it, and its report read as an ordinary success."""
    problem, gated = _doubling(tmp_path, "gated", (
        "import os\nimport torch\nimport torch.nn as nn\n"
        "from torch.utils.cpp_extension import load_inline\n\nlib = None\n"
        "if os.environ.get('KP_TEST_NEVER_SET'):  # as torch.cuda.is_available() on a CPU\n"
        "    lib = load_inline(name='gated', cpp_sources='', functions=[])\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n"))
    report = build_candidate(load_candidate(gated), build_dir=tmp_path / "ext", timeout_s=300, problem=problem)
    assert report.ok, report.diagnostics
    [warning] = [d for d in report.diagnostics if d.severity == "warning"]
    assert warning.message.startswith("no extension was compiled") and "(line 8)" in warning.message
    assert (warning.file, warning.line) == ("model_new.py", 8)

    plain = tmp_path / "plain" / "model_new.py"  # no compile call: nothing to say
    plain.parent.mkdir()
    plain.write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                     "        return x * 2\n")
    report = build_candidate(load_candidate(plain), build_dir=tmp_path / "ext-plain", timeout_s=300, problem=problem)
    assert report.ok and not [d for d in report.diagnostics if d.severity == "warning"], report.diagnostics


def test_the_warning_goes_once_the_worker_compiled_what_the_build_step_did_not_run() -> None:
    from kernelpilot.evaluation.assembly import merge_response
    from kernelpilot.evaluation.build.builder_notes import NOTHING_COMPILED
    from kernelpilot.verdict import Diagnostic, Verdict

    def merged(phases: dict[str, float]) -> list[str]:
        warning = Diagnostic(severity="warning", tool="build", message=f"{NOTHING_COMPILED}: ...")
        note = Diagnostic(severity="note", tool="build", message="compiled in the build step by ...")
        v = Verdict(status="ok", problem="p", candidate="c", mode="test",
                    build=BuildReport(ok=True, seconds=3.4, diagnostics=[warning, note]))
        merge_response(v, {"verdict": {"status": "ok", "phases": phases}})
        return [d.message for d in v.build.diagnostics]

    assert merged({"verify": 0.5}) == [f"{NOTHING_COMPILED}: ...", "compiled in the build step by ..."]
    assert merged({"verify": 0.5, "build_in_worker": 21.0}) == ["compiled in the build step by ..."]
