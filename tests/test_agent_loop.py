"""The agent loop end to end on CPU: scripted model turns, a real git project and worktree, and an
evaluator that answers with fixture verdicts (the one accepted double: the GPU is out of reach)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_support import FixtureEvaluator, candidate_files, git, make_project, open_project
from kernelpilot.agent.events import Event
from kernelpilot.agent.loop import AgentSession, Budgets
from kernelpilot.agent.scripted import ScriptedClient
from kernelpilot.agent.transcript import Transcript

D = "kernels/vector_scale"


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def write_candidate_turn() -> dict[str, Any]:
    return {"text": "Writing a first candidate.",
            "tool_calls": [call("write_file", path=f"{D}/{n}", content=c) for n, c in candidate_files().items()]}


def session(tmp_path: Path, turns: list[dict[str, Any]], benchmarks: list[str] | None = None, *,
            budgets: Budgets | None = None, auto_approve: str | None = "faster-than-compile",
            evaluator: Any = None, transcript: Transcript | None = None, session_id: str = "s1",
            project: Any = None, delay_s: float = 0.0) -> AgentSession:
    p = project or open_project(tmp_path, session_id)
    client = ScriptedClient(turns, name="test-script", delay_s=delay_s)
    ev = evaluator or FixtureEvaluator(benchmarks or ["vector_scale_ok.json"])
    return AgentSession(p.problem, p.workspace, ev, client, budgets or Budgets(max_turns=20), p.config,
                        transcript=transcript, auto_approve=auto_approve)


async def collect(s: AgentSession) -> list[Event]:
    return [e async for e in s.run()]


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events if e.kind != "text_delta"]


def results(events: list[Event]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        if e.kind == "tool_call_finished":
            out.setdefault(e.name, []).append(("ok: " if e.ok else "ERR: ") + e.result)  # type: ignore[attr-defined]
    return out


async def test_end_to_end_write_benchmark_propose_approve(tmp_path: Path) -> None:
    turns = [
        {"text": "Looking around.",
         "tool_calls": [call("list_files"), call("read_file", path="vector_scale.py", start_line=5, end_line=6)]},
        write_candidate_turn(),
        {"text": "", "tool_calls": [call("build"), call("test"), call("benchmark")]},
        {"text": "512 threads per block.", "tool_calls": [
            call("edit_file", path=f"{D}/kernel.cu", search="const int threads = 256;",
                 replace="const int threads = 512;"),
            call("benchmark"), call("propose", summary="512-thread blocks; fewer blocks to schedule")]},
        {"text": "never reached", "tool_calls": [call("list_files")]},
    ]
    tr = Transcript(tmp_path / "t.jsonl")
    s = session(tmp_path, turns, ["vector_scale_slow.json", "vector_scale_ok.json"], transcript=tr)
    events = await collect(s)
    ks = kinds(events)
    assert ks[0] == "session_started" and ks[-1] == "done"
    assert events[0].replay is True and s.client.label == "replay: test-script"  # type: ignore[attr-defined]
    r = results(events)
    assert "ok: vector_scale.py lines 5-6 of" in r["read_file"][0] and "    6  " in r["read_file"][0]
    assert all(x.startswith("ok: created") for x in r["write_file"])
    assert r["build"][0].startswith("ok: status: ok")
    evaluated = [e for e in events if e.kind == "candidate_evaluated"]
    assert [e.candidate_id for e in evaluated] == ["c1", "c2"]  # type: ignore[attr-defined]
    assert evaluated[1].commit and "+    const int threads = 512;" in evaluated[1].diff  # type: ignore[attr-defined]
    assert evaluated[1].verdict["performance"]["tier"] == "faster_than_compile"  # type: ignore[attr-defined]
    assert ks.count("proposal_ready") == 1 and "proposal_approved" in ks
    done = events[-1]
    assert done.reason == "proposal_approved" and done.best_candidate == "c2"  # type: ignore[attr-defined]
    # the approved candidate is a commit on the engineer's branch, with the edited kernel
    root = s.ctx.workspace.user_repo.working_tree_dir
    assert git(Path(root), "log", "-1", "--format=%H").strip() == done.approved_commit  # type: ignore[attr-defined]
    assert "threads = 512" in (Path(root) / D / "kernel.cu").read_text()
    # the scripted fifth turn never ran: the session ended at approval
    assert s.client.position == 4  # type: ignore[attr-defined]
    # the transcript holds the events (verdict included) and the messages
    records = [json.loads(line) for line in tr.path.read_text().splitlines()]
    types = {r["type"] for r in records}
    assert {"header", "event", "message", "candidate"} <= types
    verdicts = [r["event"]["verdict"] for r in records if r["type"] == "event"
                and r["event"]["kind"] == "candidate_evaluated"]
    assert verdicts[-1]["status"] == "ok" and verdicts[-1]["performance"]["speedup_vs_compile"] == pytest.approx(1.311)
    assert not any(r["type"] == "event" and r["event"]["kind"] == "text_delta" for r in records)


async def test_guard_refusals_and_edit_errors_are_tool_results(tmp_path: Path) -> None:
    turns = [
        write_candidate_turn(),
        {"text": "", "tool_calls": [
            call("write_file", path="vector_scale.py", content="x = 1\n"),
            call("write_file", path="../escape.cu", content="//"),
            call("write_file", path="/tmp/abs.cu", content="//"),
            call("write_file", path="README.md", content="hacked"),
            call("edit_file", path=f"{D}/kernel.cu", search="no such text anywhere", replace="x"),
            call("edit_file", path=f"{D}/kernel.cu", search="threads", replace="t"),
            call("read_file", path="../../etc/passwd"),
            call("read_file", path=".git/config"),
            call("grep", pattern="(unclosed"),
            call("no_such_tool"),
        ]},
        {"text": "", "tool_calls": [{"name": "read_file", "arguments": "{not json"}]},
    ]
    s = session(tmp_path, turns)
    events = await collect(s)
    r = results(events)
    writes = r["write_file"][3:]
    assert all(w.startswith("ERR: error: write refused") for w in writes), writes
    assert "problem file" in writes[0]
    missing, ambiguous = r["edit_file"]
    assert missing.startswith("ERR:") and "not found" in missing
    assert ambiguous.startswith("ERR:") and "matches 4 times" in ambiguous
    assert r["read_file"][0].startswith("ERR:") and "outside the worktree" in r["read_file"][0]
    assert r["read_file"][1].startswith("ERR:") and ".git" in r["read_file"][1]
    assert r["read_file"][2].startswith("ERR:") and "not valid JSON" in r["read_file"][2]
    assert r["grep"][0].startswith("ERR:") and "invalid regular expression" in r["grep"][0]
    assert r["no_such_tool"][0].startswith("ERR:") and "unknown tool" in r["no_such_tool"][0]
    root = Path(s.ctx.workspace.path)
    assert (root / "vector_scale.py").read_text().startswith("import torch")
    assert (root / "README.md").read_text() == "a project\n"
    assert not (root.parent / "escape.cu").exists() and not Path("/tmp/abs.cu").exists()
    assert events[-1].reason == "finished"  # type: ignore[attr-defined]
    # every tool call has exactly one result message, in order
    calls = [tc["id"] for m in s.messages for tc in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in s.messages if m["role"] == "tool"]
    assert calls == answered


async def test_propose_needs_an_ok_benchmark_of_the_current_files(tmp_path: Path) -> None:
    turns = [
        write_candidate_turn(),
        {"text": "", "tool_calls": [call("propose", summary="too early")]},
        {"text": "", "tool_calls": [call("benchmark"),
                                    call("edit_file", path=f"{D}/kernel.cu", search="const int threads = 256;",
                                         replace="const int threads = 128;"),
                                    call("propose", summary="files changed since the benchmark")]},
        {"text": "",
         "tool_calls": [call("revert", candidate_id="c1"), call("propose", summary="back to c1"),
                        call("revert", candidate_id="c9")]},
    ]
    s = session(tmp_path, turns, ["vector_scale_slow.json"], auto_approve="never")
    events = await collect(s)
    r = results(events)
    assert "have not been benchmarked" in r["propose"][0] and r["propose"][0].startswith("ERR:")
    assert "have not been benchmarked" in r["propose"][1]
    assert r["propose"][2].startswith("ok: Proposal c1 is recorded")
    assert r["revert"][0].startswith("ok: restored the files of c1")
    assert "unknown candidate 'c9'" in r["revert"][1]
    assert "threads = 256" in (Path(s.ctx.workspace.path) / D / "kernel.cu").read_text()
    assert s.book.pending == "c1" and not s.book.approved
    assert events[-1].reason == "finished" and events[-1].best_candidate == "c1"  # type: ignore[attr-defined]


async def test_propose_refuses_a_candidate_identical_to_the_repository(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The project already holds these exact kernel files (e.g. a shipped example): nothing to land."""
    import agent_support

    def make_with_kernels(root: Path) -> Path:
        problem = make_project(root)
        for name, text in candidate_files().items():
            (root / D / name).parent.mkdir(parents=True, exist_ok=True)
            (root / D / name).write_text(text)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "kernels")
        return problem

    monkeypatch.setattr(agent_support, "make_project", make_with_kernels)
    turns = [write_candidate_turn(),
             {"text": "", "tool_calls": [call("benchmark"), call("propose", summary="same files")]}]
    s = session(tmp_path, turns, ["vector_scale_ok.json"])
    events = await collect(s)
    r = results(events)
    assert r["benchmark"][0].startswith("ok:")
    assert r["propose"][0].startswith("ERR:") and "identical to the files at the session start" in r["propose"][0]
    assert "proposal_ready" not in kinds(events) and not s.book.approved


async def test_engineer_rejects_with_reason_then_approves(tmp_path: Path) -> None:
    turns = [
        write_candidate_turn(),
        {"text": "", "tool_calls": [call("benchmark"), call("propose", summary="first try")]},
        {"text": "Trying again.", "tool_calls": [call("benchmark"), call("propose", summary="second try")]},
    ]
    s = session(tmp_path, turns, ["vector_scale_slow.json", "vector_scale_ok.json"], auto_approve=None)
    events: list[Event] = []
    async for e in s.run():
        events.append(e)
        if e.kind == "proposal_ready":
            if e.candidate_id == "c1":  # type: ignore[attr-defined]
                s.send("Also keep the launcher signature.")
                await s.reject("c1", "slower than torch.compile, use vector loads")
            else:
                assert await s.approve(e.candidate_id) == ""  # type: ignore[attr-defined]
    r = results(events)
    assert "rejected c1: slower than torch.compile, use vector loads" in r["propose"][0]
    assert "approved c2" in r["propose"][1]
    assert [e.kind for e in events if e.kind.startswith("proposal")] == [
        "proposal_ready", "proposal_rejected", "proposal_ready", "proposal_approved"]
    # the reason and the engineer's message were in the model's next request
    third = json.dumps(s.client.requests[2])  # type: ignore[attr-defined]
    assert "use vector loads" in third and "Also keep the launcher signature." in third
    assert "engineer_message" in kinds(events)
    assert s.ctx.workspace.note("c1").startswith("rejected: slower")
    assert events[-1].reason == "proposal_approved"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("budget", "budgets", "usage"),
    [
        ("turns", Budgets(max_turns=2), {}),
        ("tokens", Budgets(max_tokens=1500), {"prompt_tokens": 1000, "completion_tokens": 200}),
        ("cost", Budgets(max_cost_usd=0.05), {"prompt_tokens": 10, "completion_tokens": 10, "cost_usd": 0.03}),
    ],
)
async def test_budgets_stop_the_session(tmp_path: Path, budget: str, budgets: Budgets, usage: dict[str, Any]) -> None:
    turns = [{"text": f"turn {i}", "tool_calls": [call("list_files")], "usage": usage} for i in range(6)]
    s = session(tmp_path, turns, budgets=budgets)
    events = await collect(s)
    reached = [e for e in events if e.kind == "budget_reached"]
    assert len(reached) == 1 and reached[0].budget == budget  # type: ignore[attr-defined]
    assert events[-1].kind == "done" and events[-1].reason == "budget"  # type: ignore[attr-defined]
    assert s.turns == 2
    usages = [e for e in events if e.kind == "usage"]
    assert usages[-1].total_tokens == 2 * (usage.get("prompt_tokens", 0)  # type: ignore[attr-defined]
                                           + usage.get("completion_tokens", 0))


async def test_wall_time_budget_interrupts_a_slow_evaluation(tmp_path: Path) -> None:
    turns = [write_candidate_turn(), {"text": "", "tool_calls": [call("benchmark")]}]
    s = session(tmp_path, turns, evaluator=FixtureEvaluator(["vector_scale_ok.json"], delay_s=30),
                budgets=Budgets(max_wall_s=1.0))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    events = await collect(s)
    assert loop.time() - t0 < 10
    reached = [e for e in events if e.kind == "budget_reached"]
    assert reached and reached[0].budget == "wall_time"  # type: ignore[attr-defined]
    assert events[-1].reason == "budget"  # type: ignore[attr-defined]
    assert s.messages[-1]["role"] == "tool" and "not run: the session stopped (wall_time)" in s.messages[-1]["content"]


async def test_cancel_mid_evaluation_leaves_the_worktree_consistent(tmp_path: Path) -> None:
    turns = [write_candidate_turn(), {"text": "", "tool_calls": [call("benchmark"), call("list_files")]}]
    ev = FixtureEvaluator(["vector_scale_ok.json"], delay_s=30)
    s = session(tmp_path, turns, evaluator=ev, transcript=Transcript(tmp_path / "t.jsonl"))

    async def cancel_when_evaluating() -> None:
        await ev.started.wait()
        s.cancel()

    canceller = asyncio.create_task(cancel_when_evaluating())
    events = await asyncio.wait_for(collect(s), timeout=15)
    await canceller
    assert events[-1].kind == "done" and events[-1].reason == "cancelled"  # type: ignore[attr-defined]
    wt = Path(s.ctx.workspace.path)
    files = candidate_files()
    for name, text in files.items():
        assert (wt / D / name).read_text() == text
    assert not list(wt.rglob("*.kp-tmp"))
    gitdir = Path(git(wt, "rev-parse", "--absolute-git-dir").strip())
    assert not (gitdir / "index.lock").exists()
    status = git(wt, "status", "--porcelain")
    assert set(status.split()) == {"??", "kernels/"}
    assert not s.book.records  # no half-done checkpoint
    # both tool calls of the interrupted turn were answered, so a resume is valid
    assert [m["content"] for m in s.messages[-2:]] == ["not run: the session stopped (cancelled)"] * 2


async def test_resume_continues_from_the_transcript(tmp_path: Path) -> None:
    turns = [
        write_candidate_turn(),
        {"text": "", "tool_calls": [call("benchmark")]},
        {"text": "Proposing.", "tool_calls": [call("propose", summary="scale kernel")]},
    ]
    tr_path = tmp_path / "data" / "sessions" / "s1.jsonl"
    first = session(tmp_path, turns, budgets=Budgets(max_turns=2), transcript=Transcript(tr_path))
    events = await collect(first)
    assert events[-1].reason == "budget" and "c1" in first.book.records  # type: ignore[attr-defined]

    from kernelpilot.agent.factory import build_session

    class Args:
        resume = "s1"
        problem = None
        config = None
        auto_approve = "faster-than-compile"
        replay = None

    second = build_session(Args(), evaluator=FixtureEvaluator(["vector_scale_ok.json"]),
                           client=ScriptedClient(turns, name="test-script"))
    assert second.budgets.max_turns == 40  # the config's default: a resumed run gets its budgets afresh
    second.budgets = Budgets(max_turns=1)
    assert second.resumed and second.turns == 2 and "c1" in second.book.records
    assert second.client.position == 2  # type: ignore[attr-defined]
    events2 = await collect(second)
    assert events2[-1].reason == "proposal_approved"  # type: ignore[attr-defined]
    assert events2[-1].best_candidate == "c1"  # type: ignore[attr-defined]
    request = second.client.requests[0]  # type: ignore[attr-defined]
    assert any("resumed" in str(m.get("content")) for m in request)
    assert sum(1 for m in request if m.get("tool_calls")) == 2  # the first session's turns are in context
    header = Transcript(tr_path).load().header
    assert header["session_id"] == "s1"


async def test_send_reaches_the_model_and_invalid_arguments_do_not_crash(tmp_path: Path) -> None:
    turns = [{"text": "Waiting for you.", "tool_calls": []}, {"text": "Thanks.", "tool_calls": []}]
    s = session(tmp_path, turns, auto_approve=None)
    events: list[Event] = []
    async for e in s.run():
        events.append(e)
        if e.kind == "assistant_message" and e.turn == 1:  # type: ignore[attr-defined]
            s.send("Try shared memory tiling.")
        if e.kind == "assistant_message" and e.turn == 2:  # type: ignore[attr-defined]
            s.cancel()
    assert "Try shared memory tiling." in json.dumps(s.client.requests[1])  # type: ignore[attr-defined]
    assert events[-1].reason == "cancelled"  # type: ignore[attr-defined]


async def test_system_prompt_keeps_problem_rules_memory_and_best_verdict(tmp_path: Path) -> None:
    from agent_support import open_project

    p = open_project(tmp_path)
    (p.root / "KERNELPILOT.md").write_text("Our kernels must use cudaStream_t from the binding.\n")
    turns = [write_candidate_turn(), {"text": "", "tool_calls": [call("benchmark")]},
             {"text": "", "tool_calls": [call("read_file", path=f"{D}/kernel.cu")]},
             {"text": "done", "tool_calls": []}]
    s = session(tmp_path, turns, project=p)
    s.context_tokens = 600  # force elision of old tool output
    await collect(s)
    system = s.client.requests[-1][0]["content"]  # type: ignore[attr-defined]
    assert "class Model(nn.Module)" in system and "Output buffers are poisoned" in system
    assert "cudaStream_t from the binding" in system and "kernels/vector_scale/" in system
    assert "# Best candidate so far" in system and "c1: ok, 0.0331 ms, 1.31x vs torch.compile" in system
    last = s.client.requests[-1]  # type: ignore[attr-defined]
    assert any("chars of old tool output elided" in str(m.get("content"))
               or "elided" in json.dumps(m.get("tool_calls") or [])
               for m in last[1:])
    assert "    1  // y = alpha * x" in str(last[-1]["content"])  # the most recent result is kept whole


async def test_build_errors_and_profile_fallback_reach_the_model(tmp_path: Path) -> None:
    turns = [write_candidate_turn(),
             {"text": "", "tool_calls": [call("build"), call("benchmark"), call("profile"), call("list_skills")]}]
    ev = FixtureEvaluator(["vector_scale_ok.json"], build="build_error.json")
    s = session(tmp_path, turns, evaluator=ev)
    events = await collect(s)
    r = results(events)
    assert r["build"][0].startswith("ERR:") and 'kernel.cu:5' in r["build"][0] and "blockIdx_x" in r["build"][0]
    assert r["profile"][0].startswith("ok: source: the benchmark verdict's timings and roofline")
    assert "speed of light" in r["profile"][0]
    assert [c[0] for c in ev.calls] == ["build", "benchmark"]  # profile reused the benchmark of these files
    assert len(r["list_skills"]) == 1


async def test_approve_after_the_session_ended_lands_the_commit(tmp_path: Path) -> None:
    turns = [write_candidate_turn(), {"text": "", "tool_calls": [call("benchmark")]}]
    tr = Transcript(tmp_path / "t.jsonl")
    s = session(tmp_path, turns, transcript=tr)
    events = await collect(s)
    assert events[-1].reason == "finished" and not s.book.approved  # type: ignore[attr-defined]
    commit = await s.approve("c1")
    root = Path(s.ctx.workspace.user_repo.working_tree_dir)
    assert commit and git(root, "rev-parse", "HEAD").strip() == commit
    assert (root / D / "kernel.cu").read_text() == candidate_files()["kernel.cu"]
    assert Transcript(tr.path).load().events[-1].kind == "proposal_approved"
