"""`kernelpilot run --replay` through the real CLI, the readable log, and manual pairing (--watch)."""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path

import pytest

from agent_support import FixtureEvaluator, candidate_files, make_project
from kernelpilot.agent.events import (
    CandidateEvaluated, Done, ProposalReady, SessionStarted, TextDelta, AssistantMessage,
)
from kernelpilot.agent.headless import LogPrinter
from kernelpilot.agent.watch import watch, watch_loop


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))


def test_cli_run_replay_prints_jsonl_and_saves_a_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.cli import main

    problem = make_project(tmp_path / "proj")
    script = tmp_path / "demo.jsonl"
    script.write_text("\n".join(json.dumps(t) for t in [
        {"text": "Let me read the problem.",
         "tool_calls": [{"name": "read_file", "arguments": {"path": "vector_scale.py"}}]},
        {"text": "That is all for this demo.", "tool_calls": []},
    ]) + "\n")
    code = main(["run", str(problem), "--replay", str(script), "--jsonl", "--max-turns", "5"])
    assert code == 0  # a replay played to its end (it proposes nothing: nothing to approve)
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0]["kind"] == "session_started" and events[0]["replay"] is True
    assert events[0]["model"] == "replay: demo.jsonl"
    finished = [e for e in events if e["kind"] == "tool_call_finished"]
    assert finished[0]["ok"] and "def get_inputs" in finished[0]["result"]
    assert events[-1] == {**events[-1], "kind": "done", "reason": "finished"}
    sessions = list((tmp_path / "data" / "sessions").glob("*.jsonl"))
    assert len(sessions) == 1 and sessions[0].stem == events[0]["session_id"]


def test_readable_log_labels_a_replay() -> None:
    out = io.StringIO()
    log = LogPrinter(out)
    verdict = json.loads((Path(__file__).parent / "data" / "verdicts" / "vector_scale_ok.json").read_text())
    for ev in [SessionStarted(session_id="s", problem="p", model="replay: demo.jsonl", replay=True),
               TextDelta(text="Hello "), TextDelta(text="there."), AssistantMessage(text="Hello there.", turn=1),
               CandidateEvaluated(candidate_id="c1", verdict=verdict),
               ProposalReady(candidate_id="c1", summary="vectorised", verdict=verdict),
               Done(reason="finished", best_candidate="c1")]:
        log(ev)
    text = out.getvalue()
    assert "REPLAY: the assistant turns below are replayed from a file" in text
    assert "replay> Hello there.\n" in text
    assert "candidate c1: ok, 0.0331 ms, 1.31x vs torch.compile, 88% of speed of light" in text
    assert "PROPOSAL c1: vectorised" in text and text.rstrip().endswith("[replay]")


async def test_watch_reports_content_changes_not_touches(tmp_path: Path) -> None:
    d = tmp_path / "cand"
    d.mkdir()
    (d / "kernel.cu").write_text("// v1\n")
    (d / "notes.txt").write_text("ignored suffix\n")
    changes = watch([d], interval_s=0.05, settle_s=0.05)

    async def next_change() -> set[Path]:
        return await asyncio.wait_for(changes.__anext__(), timeout=3)

    task = asyncio.ensure_future(next_change())
    await asyncio.sleep(0.2)
    os.utime(d / "kernel.cu")  # same content: not a change
    (d / "notes.txt").write_text("changed, but not a candidate file\n")
    await asyncio.sleep(0.3)
    assert not task.done()
    (d / "kernel.cu").write_text("// v2\n")
    assert await task == {d / "kernel.cu"}
    (d / "binding.cpp").write_text("// new\n")
    assert await next_change() == {d / "binding.cpp"}
    await changes.aclose()


async def test_watch_loop_re_evaluates_on_save(tmp_path: Path) -> None:
    d = tmp_path / "cand"
    d.mkdir()
    for name, text in candidate_files().items():
        (d / name).write_text(text)
    evaluator = FixtureEvaluator(["vector_scale_slow.json", "vector_scale_ok.json"])
    out = io.StringIO()

    async def edit_later() -> None:
        while not evaluator.calls:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        (d / "kernel.cu").write_text((d / "kernel.cu").read_text().replace("256", "512"))

    editor = asyncio.ensure_future(edit_later())
    code = await asyncio.wait_for(watch_loop(None, d, evaluator, out, jsonl=True, interval_s=0.05, max_evaluations=2),
                                  10)
    await editor
    assert code == 0 and [c[0] for c in evaluator.calls] == ["benchmark", "benchmark"]
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["source"] for x in lines] == ["engineer", "engineer"]
    assert [x["verdict"]["performance"]["tier"] for x in lines] == ["faster_than_eager", "faster_than_compile"]


async def test_the_gpu_demo_transcript_replays_on_cpu(tmp_path: Path) -> None:
    """The replay used on the H200 (tests/gpu/test_agent_gpu.py) parses, writes only candidate files
    through ${candidate_dir}, and reaches benchmark and propose (with a fixture verdict here)."""
    import shutil
    import subprocess

    from kernelpilot.agent.loop import AgentSession, Budgets
    from kernelpilot.agent.scripted import ScriptedClient
    from kernelpilot.config import load_config
    from kernelpilot.problem import load_problem
    from kernelpilot.workspace import Workspace

    root = Path(__file__).resolve().parents[1]
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copy(root / "examples" / "diag_matmul" / "problem.py", project / "diag_matmul.py")
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "E"], ["config", "user.email", "e@example.com"],
                 ["add", "-A"], ["commit", "-q", "-m", "problem"]):
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)
    config = load_config(project, overrides={"problem": str(project / "diag_matmul.py")}, env={})
    problem = load_problem(project / "diag_matmul.py")
    ws = Workspace.open(project, "demo", candidate_dir=config.candidate_dir, problem=problem.path)
    client = ScriptedClient(root / "tests" / "data" / "transcripts" / "diag_matmul.jsonl")
    s = AgentSession(problem, ws, FixtureEvaluator(["vector_scale_ok.json"]), client, Budgets(max_turns=10), config,
                     auto_approve="faster-than-compile")
    events = [e async for e in s.run()]
    finished = [e for e in events if e.kind == "tool_call_finished"]
    writes = [e for e in finished if e.name == "write_file"]  # type: ignore[attr-defined]
    assert len(writes) == 3 and all(e.ok for e in writes), [e.result for e in writes]  # type: ignore[attr-defined]
    assert sorted(p.name for p in (ws.path / "kernels" / "diag_matmul").iterdir()) == \
        ["binding.cpp", "model_new.py", "row_scale.cu"]
    assert [e.name for e in finished][-4:] == ["build", "test", "benchmark", "propose"]  # type: ignore[attr-defined]
    assert events[-1].reason == "proposal_approved"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_shipped_softmax_replay_without_a_gpu_gives_build_only_verdicts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`kernelpilot run --replay examples/softmax/replay.jsonl` needs no GPU: every test and benchmark is a build
    (labelled so), the naive kernel defines every symbol its binding calls, the replay ends and exits 0."""
    import shutil
    import subprocess

    from kernelpilot.cli import main
    from kernelpilot.errors import ToolchainError
    from kernelpilot.toolkit import find_cuda_home

    try:
        find_cuda_home()
    except ToolchainError:
        pytest.skip("no CUDA toolkit found (set CUDA_HOME)")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, whatever this machine has
    example = Path(__file__).resolve().parents[1] / "examples" / "softmax"
    project = tmp_path / "proj"
    shutil.copytree(example, project / "softmax", ignore=shutil.ignore_patterns("candidate", "replay.jsonl"))
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "E"], ["config", "user.email", "e@example.com"],
                 ["add", "-A"], ["commit", "-q", "-m", "problem"]):
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)
    code = main(["run", str(project / "softmax"), "--replay", str(example / "replay.jsonl"), "--jsonl"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    results = [(e["name"], e["ok"], e["result"]) for e in events if e["kind"] == "tool_call_finished"]
    evaluations = [(name, ok, text) for name, ok, text in results if name in ("build", "test", "benchmark")]
    assert [ok for _, ok, _ in evaluations] == [False, True, True, True, True], evaluations
    assert "no suitable conversion function" in evaluations[0][2]  # the first build fails as the replay says
    assert not any("undefined symbol" in text or "Traceback" in text for _, _, text in results)
    verdicts = [e["verdict"] for e in events if e["kind"] == "candidate_evaluated"]
    assert len(verdicts) == 2 and all(v["mode"] == "build" and v["status"] == "ok" for v in verdicts)
    assert all("no GPU here, so it was neither run nor timed" in v["summary"] for v in verdicts)
    assert [e["kind"] for e in events if e["kind"].startswith("proposal")] == ["proposal_ready"]
    assert events[-1]["kind"] == "done" and events[-1]["reason"] == "finished"
    assert code == 0
