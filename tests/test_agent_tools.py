"""Units under the agent's tools: exact edits, context elision, prompt rendering, transcripts,
the Inductor tool on a machine without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cuda_available
from kernelpilot.agent import context, fileops, prompts
from kernelpilot.agent.events import EngineerMessage
from kernelpilot.agent.transcript import Transcript, find_transcript, TranscriptError


def test_edit_text_exact_once() -> None:
    text = "a = 1\nb = 2\nb = 2\n"
    assert fileops.edit_text(text, "a = 1", "a = 3", "f") == "a = 3\nb = 2\nb = 2\n"
    with pytest.raises(ValueError, match="matches 2 times in f"):
        fileops.edit_text(text, "b = 2", "b = 4", "f")
    with pytest.raises(ValueError, match="not found in f.*closest line is 1: 'a = 1'"):
        fileops.edit_text(text, "a = 11", "x", "f")
    with pytest.raises(ValueError, match="search is empty"):
        fileops.edit_text(text, "", "x", "f")


def test_atomic_write_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "d" / "k.cu"
    fileops.atomic_write(target, "one\n")
    fileops.atomic_write(target, "two\n")
    assert target.read_text() == "two\n" and [p.name for p in target.parent.iterdir()] == ["k.cu"]


def test_numbered_read_is_capped() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 1001))
    body, first, last, total = fileops.numbered(text, 10, None)
    assert (first, last, total) == (10, 409, 1000)
    assert body.splitlines()[0] == "   10  line 10"


def test_compact_elides_old_tool_output_and_keeps_recent() -> None:
    big = "x" * 8000
    messages = [{"role": "user", "content": "go"}]
    for i in range(5):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "write_file", "arguments": json.dumps({"path": "k.cu", "content": big})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": big})
    out = context.compact(messages, limit_tokens=6000, keep_recent=4)
    assert messages[2]["content"] == big  # the stored conversation is untouched
    assert "[… 7600 chars of old tool output elided …]" in out[2]["content"]
    assert json.loads(out[1]["tool_calls"][0]["function"]["arguments"])["path"] == "k.cu"
    assert out[-1]["content"] == big and out[-2] == messages[-2]
    assert context.estimate_tokens(out) < context.estimate_tokens(messages)
    assert context.compact(messages, limit_tokens=10**9) is messages


def test_render_leaves_unknown_placeholders_and_reads_memory(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Use bf16 accumulators only when told.\n")
    assert "Use bf16 accumulators" in prompts.project_memory(tmp_path)
    (tmp_path / "KERNELPILOT.md").write_text("KERNELPILOT.md wins.\n")
    assert "KERNELPILOT.md wins." in prompts.project_memory(tmp_path)
    assert "AGENTS" not in prompts.project_memory(tmp_path)
    text = prompts.render("first_message.md", {"problem_name": "softmax"})
    assert "Speed up `softmax`" in text and "{candidate_dir}" in text


def test_gpu_facts_without_a_gpu_say_so() -> None:
    facts = prompts.gpu_facts()
    if not cuda_available():
        assert not facts.available and "No NVIDIA GPU" in facts.text
    else:
        assert facts.available and "compute capability" in facts.text


def test_transcript_is_redacted_and_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path))
    secret = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    tr = Transcript.for_session("r1")
    tr.write_header(session_id="r1", problem="p.py")
    tr.write_message({"role": "user", "content": f"my key is {secret}"})
    tr.write_event(EngineerMessage(text=f"key {secret}"))
    tr.close()
    raw = tr.path.read_text()
    assert secret not in raw and "[REDACTED]" in raw
    assert find_transcript("r1") == tr.path and find_transcript(str(tr.path)) == tr.path
    state = Transcript(tr.path).load()
    assert state.header["session_id"] == "r1" and state.messages[0]["role"] == "user"
    assert state.events[0].kind == "engineer_message"
    with pytest.raises(TranscriptError, match="no transcript for session 'nope'"):
        find_transcript("nope")


@pytest.mark.skipif(cuda_available(), reason="checks the CPU-only answer")
def test_inductor_tool_says_unavailable_without_a_gpu(tmp_path: Path) -> None:
    from agent_support import PROBLEM
    from kernelpilot.agent.evaltools import inductor_code

    problem = tmp_path / "p.py"
    problem.write_text(PROBLEM)
    available, text = inductor_code(problem, timeout_s=300)
    assert not available and "no CUDA GPU" in text
