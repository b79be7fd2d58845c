"""Agent mode of the suite: one replayed (scripted) session per problem in its own git repository, the
fastest correct candidate kept, and the suite-wide budget (problems not started count as failures)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from agent_support import FixtureEvaluator, candidate_files
from kernelpilot.suite.agent_mode import run_agent_suite
from kernelpilot.suite.discovery import discover_problems
from kernelpilot.suite.report import build_report
from kernelpilot.suite.store import Store

DATA = Path(__file__).parent / "data" / "suite"


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))


def _replay(tmp_path: Path, cost: float) -> Path:
    write = [{"name": "write_file", "arguments": {"path": "${candidate_dir}/" + n, "content": c}}
             for n, c in candidate_files().items()]
    turns = [{"text": "A first candidate.", "tool_calls": write, "usage": {"prompt_tokens": 10, "cost_usd": cost}},
             {"text": "", "tool_calls": [{"name": "benchmark", "arguments": {}}]},
             {"text": "", "tool_calls": [{"name": "benchmark", "arguments": {}}]},
             {"text": "Done.", "tool_calls": []}]
    path = tmp_path / "script.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    return path


def _args(replay: Path, budget: float | None = None) -> argparse.Namespace:
    return argparse.Namespace(model=None, replay=str(replay), api_base=None, max_turns=10, max_tokens=None,
                              budget_usd=None, max_wall=None, suite_budget_usd=budget)


async def test_agent_sessions_keep_the_fastest_correct_candidate(tmp_path: Path) -> None:
    problems = discover_problems([DATA / "problems" / "1_scaled_add.py", DATA / "problems" / "2_tiny_softmax.py"])
    store = Store(tmp_path / "run")
    from kernelpilot.suite.discovery import Job

    store.plan([Job(r, None, 0) for r in problems])
    ev = FixtureEvaluator(["vector_scale_slow.json", "vector_scale_ok.json"])
    seen: list[tuple[str, str]] = []
    stored = await run_agent_suite(problems, store, tmp_path / "run", _args(_replay(tmp_path, 0.0)), ev,
                                   on_result=lambda job, status, v: seen.append((job.problem.key, status)),
                                   concurrency=1)
    assert stored == 2 and sorted(seen) == [("1_scaled_add", "ok"), ("2_tiny_softmax", "ok")]
    assert [m for m, _ in ev.calls] == ["benchmark"] * 4  # two benchmarks per session, all through the one evaluator
    rows = {r.problem: r for r in store.rows()}
    # the first session saw slow (0.0472 ms) then ok (0.0331 ms): the faster one is its result
    assert rows["1_scaled_add"].candidate_ms == pytest.approx(0.0331)
    assert rows["1_scaled_add"].speedup_vs_compile == pytest.approx(1.311)
    assert (tmp_path / "run" / "agent" / "1_scaled_add" / ".git").is_dir()  # each problem got its own repository
    assert [p.name for _, p in ev.calls] == ["1_scaled_add", "1_scaled_add", "2_tiny_softmax", "2_tiny_softmax"]
    store.close()


async def test_suite_budget_stops_starting_sessions(tmp_path: Path) -> None:
    problems = discover_problems([DATA / "problems"])
    store = Store(tmp_path / "run")
    from kernelpilot.suite.discovery import Job

    store.plan([Job(r, None, 0) for r in problems])
    ev = FixtureEvaluator(["vector_scale_ok.json"])
    await run_agent_suite(problems, store, tmp_path / "run", _args(_replay(tmp_path, 0.75), budget=0.5), ev,
                          concurrency=1)
    statuses = {r.problem: r.status for r in store.rows()}
    assert statuses == {"1_scaled_add": "ok", "2_tiny_softmax": "not_started", "3_no_solution": "not_started"}
    overall = build_report(store)["views"]["sample0"]["overall"]
    assert overall["problems"] == 3 and overall["pass_rate"] == pytest.approx(1 / 3)  # unstarted ones are failures
    store.close()
