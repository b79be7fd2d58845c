"""Nothing approved by mistake: the approval rule (kernelpilot.approval_rule) as the landing and the agent
apply it, on real git repositories (no mocks; the agent's evaluator answers with fixture verdicts)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_support import VERDICTS, FixtureEvaluator, candidate_files, open_project
from kernelpilot.approval_rule import check_approval, shown_status
from kernelpilot.errors import ApprovalConfirmationError, ApprovalRefusedError
from kernelpilot.landing import approve
from kernelpilot.workspace import Workspace

D = "kernels/vector_scale"


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def fixture(name: str) -> dict[str, Any]:
    return json.loads((VERDICTS / name).read_text())


@pytest.mark.parametrize(("verdict", "status", "allowed", "confirm"), [
    ({"status": "ok", "mode": "benchmark"}, "ok", True, False),
    ({"status": "ok", "mode": "test"}, "ok", True, False),
    ({"status": "ok", "mode": "build"}, "built", True, True),
    ({"status": "incorrect"}, "incorrect", True, True),
    ({"status": "rejected"}, "rejected", True, True),
    ({"status": "build_error"}, "build_error", False, False),
    ({"status": "runtime_error"}, "runtime_error", False, False),
    ({"status": "timeout"}, "timeout", False, False),
    ({"status": "problem_too_large"}, "problem_too_large", False, False),
    ({"status": "superseded"}, "superseded", False, False),
    (None, "unevaluated", False, False),
])
def test_the_rule_by_status(verdict: dict[str, Any] | None, status: str, allowed: bool, confirm: bool) -> None:
    check = check_approval("c1", verdict)
    assert (check.status, check.allowed, check.needs_confirmation) == (status, allowed, confirm)
    assert shown_status(verdict) == status
    if not allowed:
        assert check.refusal().startswith(f"candidate c1 cannot be approved: its verdict is {status}")
    if confirm:
        assert status.upper() in check.question() and "Approve it anyway?" in check.question()


def project(tmp_path: Path) -> tuple[Path, Workspace]:
    p = open_project(tmp_path)
    for name, text in candidate_files().items():
        p.workspace.write_file(f"{D}/{name}", text)
    return p.root, p.workspace


@pytest.mark.parametrize(("verdict", "said"), [
    (None, "its verdict is unevaluated, and it has no verdict yet; wait for its verdict"),
    (fixture("build_error.json"),
     "its verdict is build_error (build failed: 1 error in kernel.cu), and it does not build"),
    ({"status": "runtime_error", "summary": "runtime error: illegal memory access"},
     "it crashed or failed at run time"),
    ({"status": "superseded"}, "a newer save replaced it before it was evaluated; approve the newer save instead"),
])
def test_a_verdict_that_cannot_be_approved_is_refused_and_nothing_changes(
        tmp_path: Path, verdict: dict[str, Any] | None, said: str) -> None:
    root, ws = project(tmp_path)
    ws.checkpoint("e1", "engineer edit: kernel.cu", verdict)
    head = git(root, "rev-parse", "HEAD")
    for confirmed in ("", verdict["status"] if verdict else "unevaluated"):  # a confirmation does not help
        with pytest.raises(ApprovalRefusedError, match="cannot be approved") as refused:
            approve(ws, "e1", confirmed=confirmed)
        assert said in str(refused.value) and "nothing was changed" in str(refused.value)
        assert refused.value.kind == "approval_refused"
    assert git(root, "rev-parse", "HEAD") == head and git(root, "status", "--porcelain") == ""
    assert not (root / D).exists()
    assert ws.candidates["e1"].status == "checkpoint"


@pytest.mark.parametrize(("verdict", "status"), [
    ({"status": "incorrect", "summary": "incorrect: 812 of 8192 mismatched"}, "incorrect"),
    ({"status": "rejected", "summary": "rejected [side-stream]: launches work on a side stream"}, "rejected"),
    (fixture("build_only.json"), "built"),
])
def test_a_verdict_that_needs_confirmation_lands_only_confirmed_and_says_so(
        tmp_path: Path, verdict: dict[str, Any], status: str) -> None:
    root, ws = project(tmp_path)
    ws.checkpoint("c1", f"{verdict['status']}: {verdict['summary']}", verdict)
    head = git(root, "rev-parse", "HEAD")
    for wrong in ("", "ok", "incorrect" if status != "incorrect" else "built"):
        with pytest.raises(ApprovalConfirmationError, match=f"verdict is {status} .*explicit confirmation") as asked:
            approve(ws, "c1", confirmed=wrong)
        assert asked.value.status == status and asked.value.kind == "needs_confirmation"
    assert git(root, "rev-parse", "HEAD") == head
    new = approve(ws, "c1", confirmed=status)
    message = git(root, "log", "-1", "--format=%B", new)
    assert message.startswith(f"kernelpilot: [{status.upper()}] ")
    assert f"Its verdict: {status}" in message and "Approved by the engineer although" in message
    assert f"Kernelpilot-Verdict: {status}" in message
    assert (root / D / "kernel.cu").read_text() == candidate_files()["kernel.cu"]


def test_an_ok_verdict_lands_without_confirmation_and_the_commit_names_it(tmp_path: Path) -> None:
    root, ws = project(tmp_path)
    ws.checkpoint("c1", "ok: 1.31x vs torch.compile", fixture("vector_scale_ok.json"))
    new = approve(ws, "c1")
    message = git(root, "log", "-1", "--format=%B", new)
    assert message.startswith("kernelpilot: ok: 1.31x vs torch.compile\n") and "Kernelpilot-Verdict: ok" in message


def test_the_last_verdict_counts_and_survives_a_restart(tmp_path: Path) -> None:
    root, ws = project(tmp_path)
    ws.checkpoint("c1", "ok", {"status": "ok"})
    ws.record_verdict("c1", {"status": "timeout", "summary": "timeout in verify"})  # evaluated again: timed out
    again = Workspace.open(root, ws.session_id, candidate_dir=D, problem=root / "vector_scale.py")
    assert again.candidates["c1"].verdict == "timeout"
    with pytest.raises(ApprovalRefusedError, match="its verdict is timeout"):
        approve(again, "c1")
    ws.checkpoint("c1", "ok")  # a new commit under the same id is unevaluated until its verdict comes
    with pytest.raises(ApprovalRefusedError, match="unevaluated"):
        approve(ws, "c1")


# ---- the agent's approval path --------------------------------------------------------------------


def _session(tmp_path: Path, benchmarks: list[str], turns: list[dict[str, Any]]) -> Any:
    from kernelpilot.agent.loop import AgentSession, Budgets
    from kernelpilot.agent.scripted import ScriptedClient

    p = open_project(tmp_path)
    client = ScriptedClient(turns, name="approval-test")
    return AgentSession(p.problem, p.workspace, FixtureEvaluator(benchmarks), client, Budgets(max_turns=10), p.config,
                        auto_approve=None)


def _write_and_benchmark() -> list[dict[str, Any]]:
    writes = [{"name": "write_file", "arguments": {"path": f"{D}/{n}", "content": c}}
              for n, c in candidate_files().items()]
    return [{"text": "Writing.", "tool_calls": writes},
            {"text": "Timing.", "tool_calls": [{"name": "benchmark", "arguments": {}}]},
            {"text": "Waiting for you."}, {"text": "Noted."}]


async def test_the_agent_session_refuses_a_build_error_after_run(tmp_path: Path) -> None:
    s = _session(tmp_path, ["build_error.json"], _write_and_benchmark()[:2])
    events = [e async for e in s.run()]
    assert any(e.kind == "candidate_evaluated" for e in events)
    root = Path(s.workspace.user_repo.working_tree_dir)
    head = git(root, "rev-parse", "HEAD")
    with pytest.raises(ApprovalRefusedError, match="c1 cannot be approved: its verdict is build_error"):
        await s.approve("c1")
    assert git(root, "rev-parse", "HEAD") == head and not s.book.approved


async def test_the_agent_loop_refuses_an_unconfirmed_incorrect_approval_and_tells_the_model(tmp_path: Path) -> None:
    bad = VERDICTS / "vector_scale_ok.json"
    data = json.loads(bad.read_text())
    data.update(status="incorrect", summary="incorrect: 812 of 8192 mismatched", performance=None)
    (tmp_path / "incorrect.json").write_text(json.dumps(data))
    s = _session(tmp_path, [str(tmp_path / "incorrect.json")], _write_and_benchmark())
    root = Path(s.workspace.user_repo.working_tree_dir)
    head = git(root, "rev-parse", "HEAD")
    events = []
    async for e in s.run():
        events.append(e)
        if e.kind == "assistant_message" and "Waiting" in e.text:  # type: ignore[attr-defined]
            assert await s.approve("c1") == ""  # not confirmed: refused by the loop
        if e.kind == "error":
            assert await s.approve("c1", "incorrect") == ""  # confirmed: lands
    errors = [e.message for e in events if e.kind == "error"]  # type: ignore[attr-defined]
    assert errors and "Approving c1 failed: candidate c1's verdict is incorrect" in errors[0]
    told = json.dumps(s.client.requests[-1])  # type: ignore[attr-defined]
    assert "it was not landed" in told and "explicit confirmation" in told
    assert events[-1].kind == "done" and events[-1].reason == "proposal_approved"  # type: ignore[attr-defined]
    assert git(root, "rev-parse", "HEAD^") == head
    assert "Kernelpilot-Verdict: incorrect" in git(root, "log", "-1", "--format=%B")
