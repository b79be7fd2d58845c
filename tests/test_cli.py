"""The command line: complete --help, one-line errors with non-zero exits, init, dispatch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelpilot import cli
from kernelpilot.argtypes import duration
from kernelpilot.config import load_config
from kernelpilot.problem import load_problem

DATA = Path(__file__).parent / "data" / "problems"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELPILOT_")}
    env.update(extra)
    return env


def kp(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelpilot", *args], cwd=cwd, env=clean_env(**env),
                          capture_output=True, text=True, timeout=120)


def one_line_error(result: subprocess.CompletedProcess[str], needle: str) -> str:
    assert result.returncode != 0, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kernelpilot: ") and needle in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def git_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    shutil.copy(DATA / "softmax_bf16.py", root / "softmax.py")
    (root / "cand").mkdir()
    return root


HELP_FLAGS = {
    "run": ["PROBLEM", "--model", "--api-base", "--max-turns", "--max-tokens", "--budget-usd", "--max-wall",
            "--auto-approve", "faster-than-compile", "--jsonl", "--replay", "--resume", "--watch", "--candidate"],
    "eval": ["PROBLEM", "CANDIDATE", "--json", "--mode", "benchmark", "--trials", "--compile-mode", "max-autotune",
             "--cuda-graphs", "--timeout"],
    "init": ["DIR", "--problem", "--force"],
    "skills": ["NAME"],
    "hotspots": ["SCRIPT", "ARGS", "--steps", "--top", "--extract", "--out"],
}


@pytest.mark.parametrize("command", sorted(HELP_FLAGS))
def test_subcommand_help_is_complete(command: str) -> None:
    result = kp(command, "--help")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith(f"usage: kernelpilot {command}")
    for flag in HELP_FLAGS[command]:
        assert flag in result.stdout, (command, flag)


def test_top_level_help_lists_every_command() -> None:
    result = kp("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: kernelpilot [PATH]")
    for command in ("run", "eval", "init", "skills", "hotspots"):
        assert f"kernelpilot {command}" in result.stdout
    assert "pair" not in result.stdout.split("positional arguments")[1]


def test_tui_help_and_version() -> None:
    result = kp("some/dir", "--help")
    assert result.returncode == 0
    for flag in ("PATH", "--model", "--replay", "--resume"):
        assert flag in result.stdout
    assert kp("--version").stdout.startswith("kernelpilot ")


def test_cli_does_not_import_heavy_libraries() -> None:
    code = "import sys, kernelpilot.cli; print(sorted(m for m in ('torch', 'textual', 'litellm') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


def test_missing_problem_files(tmp_path: Path) -> None:
    one_line_error(kp("eval", "nope.py", "cand", cwd=tmp_path), "nope.py does not exist")
    one_line_error(kp("run", "nope.py", cwd=tmp_path), "nope.py does not exist")
    one_line_error(kp("nope.py", cwd=tmp_path), "nope.py does not exist")


def test_malformed_problem_is_one_line(tmp_path: Path) -> None:
    result = kp("eval", str(DATA / "bad_syntax.py"), str(tmp_path), "--mode", "build")
    assert result.returncode == 2
    one_line_error(result, "has a syntax error at line 6")
    one_line_error(kp("run", str(DATA / "bad_no_model.py")), "defines no class Model")


def test_directory_without_a_problem(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    one_line_error(kp(cwd=tmp_path), "no problem found in")


def test_missing_candidate(git_project: Path) -> None:
    one_line_error(kp("eval", "softmax.py", "missing_dir", cwd=git_project), "candidate missing_dir does not exist")


def test_no_git_repository(tmp_path: Path) -> None:
    shutil.copy(DATA / "softmax_bf16.py", tmp_path / "softmax.py")
    line = one_line_error(kp("run", "softmax.py", "--model", "openai/x", cwd=tmp_path),
                          "is not inside a git repository")
    assert "git init" in line
    one_line_error(kp("softmax.py", cwd=tmp_path), "is not inside a git repository")
    assert not (tmp_path / ".git").exists()


def test_no_gpu(git_project: Path) -> None:
    line = one_line_error(kp("eval", "softmax.py", "cand", cwd=git_project, CUDA_VISIBLE_DEVICES=""),
                          "needs a CUDA GPU")
    assert "--mode build" in line
    one_line_error(kp("eval", "softmax.py", "cand", "--mode", "test", cwd=git_project, CUDA_VISIBLE_DEVICES=""),
                   "needs a CUDA GPU")
    one_line_error(kp("run", "softmax.py", "--model", "openai/x", cwd=git_project, CUDA_VISIBLE_DEVICES=""),
                   "needs a CUDA GPU")
    build = kp("eval", "softmax.py", "cand", "--mode", "build", cwd=git_project, CUDA_VISIBLE_DEVICES="")
    assert "needs a CUDA GPU" not in build.stderr
    one_line_error(kp("profile", "softmax.py", "cand", cwd=git_project, CUDA_VISIBLE_DEVICES=""), "needs a CUDA GPU")


def test_profile_bad_arguments(git_project: Path) -> None:
    one_line_error(kp("profile", "softmax.py", "missing_dir", cwd=git_project), "candidate missing_dir does not exist")
    (git_project / "cand").mkdir(exist_ok=True)
    line = one_line_error(kp("profile", "softmax.py", "cand", "--verdict", "v.json", cwd=git_project),
                          "verdict file v.json does not exist")
    assert "kernelpilot eval" in line


def test_no_model_configured(git_project: Path) -> None:
    line = one_line_error(kp("run", "softmax.py", cwd=git_project), "no model is configured")
    assert "--model" in line and "KERNELPILOT_MODEL" in line
    # --watch needs no model; the next check (GPU) speaks instead
    watch = kp("run", "softmax.py", "--watch", cwd=git_project, CUDA_VISIBLE_DEVICES="")
    assert "no model" not in watch.stderr and "needs a CUDA GPU" in watch.stderr
    # a model from the environment is enough
    env_model = kp("run", "softmax.py", cwd=git_project, CUDA_VISIBLE_DEVICES="", KERNELPILOT_MODEL="openai/x")
    assert "no model" not in env_model.stderr


def test_missing_replay_file(git_project: Path) -> None:
    one_line_error(kp("run", "softmax.py", "--replay", "gone.jsonl", cwd=git_project),
                   "replay file gone.jsonl does not exist")


def test_bad_flag_values_exit_2() -> None:
    result = kp("run", "--max-wall", "5x")
    assert result.returncode == 2 and "is not a duration" in result.stderr
    assert kp("eval", "a.py", "b", "--mode", "fast").returncode == 2


def test_hotspots_missing_script(tmp_path: Path) -> None:
    one_line_error(kp("hotspots", "--steps", "3", "train.py", "--lr", "1", cwd=tmp_path),
                   "script train.py does not exist")


IDENTITY = {"GIT_AUTHOR_NAME": "E", "GIT_AUTHOR_EMAIL": "e@example.com", "GIT_COMMITTER_NAME": "E",
            "GIT_COMMITTER_EMAIL": "e@example.com"}
STARTER_FILES = ("softmax.py", "kernelpilot.toml", "kernels/softmax/softmax.h", "kernels/softmax/softmax.cu",
                 "kernels/softmax/binding.cpp", "kernels/softmax/model_new.py")


def git_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    return root


def test_init_writes_a_loadable_problem_config_and_starter_candidate(tmp_path: Path) -> None:
    project = git_repo(tmp_path / "proj")
    result = kp("init", str(project))
    assert result.returncode == 0, result.stderr
    problem = project / "softmax.py"
    for rel in STARTER_FILES:
        assert f"wrote {project / rel}" in result.stdout
    assert "next: commit them (a session starts from your last commit): git add " in result.stdout
    config = load_config(project, env={})
    assert config.problem == problem and config.candidate_dir == project / "kernels" / "softmax"
    from kernelpilot.problem import analyse

    info = analyse(load_problem(problem))
    assert info.primary_dtype == "bfloat16" and info.bytes_moved == 2 * 4096 * 8192 * 2
    candidate = config.candidate_dir
    assert "load_extension(__file__)" in (candidate / "model_new.py").read_text()
    # the device-only layout: an edit of the kernel builds device code alone
    assert "template __global__ void softmax_rows<256>(" in (candidate / "softmax.cu").read_text()
    from kernelpilot.native.sources import host_launch_problem

    assert host_launch_problem(candidate / "binding.cpp", candidate) == ""
    from kernelpilot.evaluation.static.policy import check_candidate

    assert not check_candidate(candidate)  # the static policy passes it as written
    # `kernelpilot eval <problem> <candidate> --mode build` is accepted (building it needs nvcc: the slow test)
    args = cli.build_parser().parse_args(["eval", str(problem), str(candidate), "--mode", "build"])
    cli.prepare(args)
    assert args.candidate == candidate.resolve() and args.problem == problem.resolve()


def test_init_outside_a_git_repository_refuses_and_says_git_init(tmp_path: Path) -> None:
    line = one_line_error(kp("init", str(tmp_path / "proj")), "is not inside a git repository")
    assert "run `git init` there first" in line and "--git-init" in line and "nothing was written" in line
    assert not (tmp_path / "proj").exists()


def test_init_git_init_makes_a_repository_kernelpilot_can_work_in(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj"
    result = kp("init", str(project), "--git-init", **IDENTITY)
    assert result.returncode == 0, result.stderr
    assert f"made a git repository in {project.resolve()} and committed these files" in result.stdout
    committed = subprocess.run(["git", "ls-files"], cwd=project, capture_output=True, text=True, check=True).stdout
    assert sorted(committed.split()) == sorted(STARTER_FILES)
    assert subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True).stdout == ""
    # what `kernelpilot` then does first: a worktree on its own branch, with the starter candidate in it
    from kernelpilot.workspace import Workspace

    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))
    config = load_config(project, env={})
    ws = Workspace.open(project, "s1", candidate_dir=config.candidate_dir, problem=config.problem)
    assert (ws.path / "kernels" / "softmax" / "softmax.cu").read_text() == \
        (project / "kernels" / "softmax" / "softmax.cu").read_text()


@pytest.mark.slow
def test_init_starter_candidate_builds(tmp_path: Path) -> None:
    """The one build: `kernelpilot eval softmax.py kernels/softmax --mode build` on the starter (needs nvcc)."""
    from kernelpilot.errors import ToolchainError
    from kernelpilot.toolkit import find_cuda_home

    try:
        find_cuda_home()
    except ToolchainError:
        pytest.skip("no CUDA toolkit found (set CUDA_HOME)")
    project = git_repo(tmp_path / "proj")
    assert kp("init", str(project)).returncode == 0
    build = subprocess.run([sys.executable, "-m", "kernelpilot", "eval", "softmax.py", "kernels/softmax", "--mode",
                            "build",
                            "--json"], cwd=project, env=clean_env(KERNELPILOT_ARCH="sm_90"), capture_output=True,
                           text=True,
                           timeout=1200)
    verdict = __import__("json").loads(build.stdout)
    assert build.returncode == 0 and verdict["status"] == "ok" and verdict["mode"] == "build", \
        build.stdout[-2000:] + build.stderr[-2000:]
    assert any("softmax_rows" in k["kernel"] for k in verdict["build"]["kernels"])


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    git_repo(tmp_path)
    (tmp_path / "kernelpilot.toml").write_text("# mine\n")
    line = one_line_error(kp("init", str(tmp_path), "--problem", "rms"), "kernelpilot.toml already exists")
    assert "--force" in line
    assert (tmp_path / "kernelpilot.toml").read_text() == "# mine\n"
    assert not (tmp_path / "rms.py").exists() and not (tmp_path / "kernels").exists()
    assert kp("init", str(tmp_path), "--problem", "rms", "--force").returncode == 0
    assert 'problem = "rms.py"' in (tmp_path / "kernelpilot.toml").read_text()
    assert (tmp_path / "kernels" / "rms" / "softmax.cu").is_file()
    line = one_line_error(kp("init", str(tmp_path), "--problem", "rms"), "already exist")
    assert str(tmp_path / "kernels" / "rms") in line  # the candidate is kept too
    one_line_error(kp("init", str(tmp_path), "--problem", "bad-name"), "not a valid Python module name")


@pytest.fixture
def fake_impl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """A real module on sys.path standing in for a part that is not written yet."""
    (tmp_path / "kp_fake_impl.py").write_text(textwrap.dedent("""
        from kernelpilot.errors import KernelpilotError
        SEEN = []
        def record(args):
            SEEN.append(args)
            return 0
        def fail(args):
            raise KernelpilotError("the thing broke; fix it", exit_code=3)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import kp_fake_impl

    kp_fake_impl.SEEN.clear()
    return kp_fake_impl.SEEN


def test_dispatch_passes_resolved_arguments(fake_impl: list[object], git_project: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.IMPLEMENTATIONS, "eval", "kp_fake_impl:record")
    monkeypatch.chdir(git_project)
    assert cli.main(["eval", "softmax.py", "cand", "--mode", "build", "--trials", "3", "--compile-mode",
                     "max-autotune"]) == 0
    (args,) = fake_impl
    assert args.problem == git_project / "softmax.py" and args.candidate == git_project / "cand"
    assert args.config.trials == 3 and args.config.compile_mode == "max-autotune" and args.mode == "build"


def test_implementation_errors_become_one_line(fake_impl: list[object], git_project: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(cli.IMPLEMENTATIONS, "skills", "kp_fake_impl:fail")
    assert cli.main(["skills"]) == 3
    assert capsys.readouterr().err == "kernelpilot: the thing broke; fix it\n"


def test_missing_implementation_module(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(cli.IMPLEMENTATIONS, "skills", "kernelpilot.not_written_yet:skills_command")
    assert cli.main(["skills"]) == 2
    assert capsys.readouterr().err == (
        "kernelpilot: `kernelpilot skills` is not available in this installation (kernelpilot.not_written_yet is "
        "missing); reinstall kernelpilot.\n"
    )


def test_duration_parsing() -> None:
    assert duration("90") == 90 and duration("30m") == 1800 and duration("2h") == 7200
