"""Machine-readable errors: with --json / --jsonl every failure that is not a verdict is one JSON
object on stdout, ``{"error": ..., "kind": ...}``, with the exit code the plain error has; without
those flags nothing changes (argparse's usage lines included)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot import cli
from kernelpilot import errors as E

DATA = Path(__file__).parent / "data" / "problems"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    shutil.copy(DATA / "softmax_bf16.py", root / "softmax.py")
    (root / "cand").mkdir()
    for key in ("KERNELPILOT_MODEL", "KERNELPILOT_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(root)
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_object(stdout: str, kind: str) -> dict[str, str]:
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, stdout
    data = json.loads(lines[0])
    assert set(data) == {"error", "kind"} and data["kind"] == kind, data
    assert data["error"] and not data["error"].startswith("kernelpilot:"), data
    return data


def test_every_error_class_has_its_own_kind() -> None:
    kinds = {cls.__name__: cls.kind for cls in vars(E).values()
             if isinstance(cls, type) and issubclass(cls, E.KernelpilotError)}
    assert kinds["NoGPUError"] == "no_gpu" and kinds["ProblemError"] == "bad_problem"
    assert kinds["ProblemNotFoundError"] == kinds["CandidateNotFoundError"] == "not_found"
    assert kinds["ConfigError"] == "bad_config" and kinds["UsageError"] == "usage"
    from kernelpilot.evaluation.candidate import CandidateError

    assert CandidateError.kind == "bad_candidate"
    assert isinstance(E.ProblemNotFoundError("x"), E.ProblemError)  # old `except ProblemError` still catches it


@pytest.mark.parametrize("argv", [
    ("eval", "softmax.py", "cand", "--json", "--mode", "fast"),  # a bad choice
    ("eval", "softmax.py", "--json"),  # a missing positional
    ("eval", "softmax.py", "cand", "--json", "--trials", "zero"),  # a type error
    ("eval", "softmax.py", "cand", "--json", "--no-such-flag"),  # unrecognized
    ("run", "softmax.py", "--jsonl", "--max-wall", "soon"),
])
def test_argument_errors_are_json(project: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    one_object(out, "usage")
    assert err == ""


def test_argument_errors_without_json_are_argparse_unchanged(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "eval", "softmax.py", "cand", "--mode", "fast")
    assert code == 2 and out == ""
    assert err.startswith("usage: kernelpilot eval")
    assert "kernelpilot eval: error: argument --mode: invalid choice" in err


def test_no_gpu(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code, out, err = run(capsys, "eval", "softmax.py", "cand", "--json")
    assert code == 2 and err == ""
    assert "needs a CUDA GPU" in one_object(out, "no_gpu")["error"]
    code, out, err = run(capsys, "eval", "softmax.py", "cand")  # the plain form is unchanged
    assert code == 2 and out == ""
    assert err.startswith("kernelpilot: `kernelpilot eval --mode benchmark` needs a CUDA GPU")


def test_not_found(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "eval", "gone.py", "cand", "--json", "--mode", "build")
    assert code == 2 and "gone.py does not exist" in one_object(out, "not_found")["error"]
    code, out, _ = run(capsys, "eval", "softmax.py", "nocand", "--json", "--mode", "build")
    assert code == 2 and "nocand does not exist" in one_object(out, "not_found")["error"]
    code, out, _ = run(capsys, "run", "softmax.py", "--jsonl", "--replay", "gone.jsonl")
    assert code == 2 and "replay file gone.jsonl" in one_object(out, "not_found")["error"]


def test_bad_problem(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "broken.py").write_text("import torch\nclass Model:\n    pass\n")
    code, out, _ = run(capsys, "eval", "broken.py", "cand", "--json", "--mode", "build")
    assert code == 2 and "get_inputs" in one_object(out, "bad_problem")["error"]


def test_bad_config(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "kernelpilot.toml").write_text("problem = [unclosed\n")
    code, out, _ = run(capsys, "eval", "softmax.py", "cand", "--json", "--mode", "build")
    assert code == 2 and "not valid TOML" in one_object(out, "bad_config")["error"]


def test_no_model_is_bad_config(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "run", "softmax.py", "--jsonl")
    assert code == 2 and "no model is configured" in one_object(out, "bad_config")["error"]


def test_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(DATA / "softmax_bf16.py", tmp_path / "softmax.py")  # no git repository here
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNELPILOT_MODEL", raising=False)
    code, out, _ = run(capsys, "run", "softmax.py", "--jsonl", "--watch")
    assert code == 2 and "not inside a git repository" in one_object(out, "workspace")["error"]


def test_bad_candidate_from_the_implementation(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A candidate the engine cannot take at all (a .py without ModelNew) is a verdict (build_error),
    not an error object; an error raised by the implementation itself carries its own kind."""
    (project / "cand.py").write_text("x = 1\n")
    code, out, _ = run(capsys, "eval", "softmax.py", "cand.py", "--json", "--mode", "build")
    data = json.loads(out)
    assert code == 1 and data["status"] == "build_error" and "error" in data and "kind" not in data


def test_implementation_errors_keep_their_kind(project: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "kp_json_impl.py").write_text(
        "from kernelpilot.evaluation.candidate import CandidateError\n"
        "def fail(args):\n    raise CandidateError('ModelNew is missing; define it.')\n"
        "def crash(args):\n    raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.IMPLEMENTATIONS, "eval", "kp_json_impl:fail")
    code, out, _ = run(capsys, "eval", "softmax.py", "cand", "--json", "--mode", "build")
    assert code == 2 and one_object(out, "bad_candidate")["error"] == "ModelNew is missing; define it."
    monkeypatch.setitem(cli.IMPLEMENTATIONS, "eval", "kp_json_impl:crash")
    code, out, err = run(capsys, "eval", "softmax.py", "cand", "--json", "--mode", "build")
    assert code == 1 and "RuntimeError: boom" in one_object(out, "internal")["error"] and "Traceback" in err
    with pytest.raises(RuntimeError):  # without --json a bug still shows its traceback as before
        cli.main(["eval", "softmax.py", "cand", "--mode", "build"])


def test_missing_implementation_is_not_installed(project: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.IMPLEMENTATIONS, "eval", "kernelpilot.not_written_yet:run_eval")
    code, out, _ = run(capsys, "eval", "softmax.py", "cand", "--json", "--mode", "build")
    assert code == 2 and one_object(out, "not_installed")


def test_script_arguments_are_not_ours() -> None:
    assert cli.wants_json(["eval", "p", "c", "--json"]) and cli.wants_json(["run", "--jsonl"])
    assert not cli.wants_json(["hotspots", "train.py", "--json"])
    assert not cli.wants_json(["eval", "p", "c", "--", "--json"])
