"""On the GPU machine: a replayed session writes a real kernel for the diag_matmul example, builds,
tests, benchmarks it with the real evaluation engine, and proposes it; the verdict lands in the
transcript. Run: .venv/bin/pytest -m gpu tests/gpu/test_agent_gpu.py -s"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "data" / "transcripts" / "diag_matmul.jsonl"
PROBLEM = ROOT / "examples" / "diag_matmul" / "problem.py"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.gpu
async def test_replayed_session_benchmarks_and_proposes_a_real_kernel(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.agent.loop import AgentSession, Budgets
    from kernelpilot.agent.scripted import ScriptedClient
    from kernelpilot.agent.transcript import Transcript
    from kernelpilot.config import load_config
    from kernelpilot.evaluation import EvalSettings, Evaluator
    from kernelpilot.problem import load_problem
    from kernelpilot.workspace import Workspace

    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copy(PROBLEM, project / "diag_matmul.py")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "problem")
    _git(project, "config", "user.name", "Engineer")
    _git(project, "config", "user.email", "engineer@example.com")
    config = load_config(project, overrides={"problem": str(project / "diag_matmul.py")})
    problem = load_problem(project / "diag_matmul.py")
    workspace = Workspace.open(project, "gpu-demo", candidate_dir=config.candidate_dir, problem=problem.path)
    transcript = Transcript(tmp_path / "data" / "sessions" / "gpu-demo.jsonl")
    evaluator = Evaluator(EvalSettings.from_config(config))
    session = AgentSession(problem, workspace, evaluator, ScriptedClient(SCRIPT), Budgets(max_turns=10), config,
                           transcript=transcript, auto_approve="faster-than-compile")
    events = []
    try:
        async for ev in session.run():
            if ev.kind != "text_delta":
                print(json.dumps(ev.to_dict(), default=str)[:600])
            events.append(ev)
    finally:
        evaluator.close()
    finished = {e.name: e for e in events if e.kind == "tool_call_finished"}
    assert finished["build"].ok, finished["build"].result
    assert finished["test"].ok, finished["test"].result
    assert finished["benchmark"].ok, finished["benchmark"].result
    print("inductor_kernel:", finished["inductor_kernel"].result[:2000])
    evaluated = [e for e in events if e.kind == "candidate_evaluated"]
    assert len(evaluated) == 1 and evaluated[0].verdict["status"] == "ok"
    assert evaluated[0].verdict["performance"]["candidate"]["median_ms"] > 0
    assert "row_scale_vec4" in evaluated[0].diff and "row_scale.cu" in evaluated[0].diff
    assert any(e.kind == "proposal_ready" for e in events)
    done = events[-1]
    assert done.kind == "done" and done.reason == "proposal_approved", done
    records = [json.loads(line) for line in transcript.path.read_text().splitlines()]
    verdicts = [r["event"]["verdict"] for r in records if r["type"] == "event"
                and r["event"]["kind"] == "candidate_evaluated"]
    assert verdicts and verdicts[0]["status"] == "ok" and verdicts[0]["performance"]["speedup_vs_compile"] > 1.05
