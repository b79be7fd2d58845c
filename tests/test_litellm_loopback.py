"""The real litellm path against a real OpenAI-compatible server on 127.0.0.1 (no patching)."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from kernelpilot.agent.litellm_client import EXCEPTIONS, LiteLLMClient, classify, import_litellm
from kernelpilot.agent.llm import LLMError, TextChunk, Turn
from kernelpilot.agent.toolcalls import ToolCallAccumulator
from loopback_server import LoopbackServer, error, raw_stream, text_turn, tool_turn

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "read a file",
                                           "parameters": {"type": "object",
                                                          "properties": {"path": {"type": "string"}}}}}]
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


@pytest.fixture
def server() -> Any:
    with LoopbackServer() as s:
        yield s


def client(server: LoopbackServer, **kw: Any) -> LiteLLMClient:
    return LiteLLMClient("openai/test-model", api_base=server.api_base, api_key="sk-test",
                         backoff_base_s=0.01, **kw)


async def run(c: LiteLLMClient, tools: list[dict[str, Any]] = TOOLS) -> tuple[str, Turn]:
    deltas: list[str] = []
    turn: Turn | None = None
    async for chunk in c.stream(MESSAGES, tools):
        if isinstance(chunk, TextChunk):
            deltas.append(chunk.text)
        else:
            turn = chunk
    assert turn is not None
    return "".join(deltas), turn


async def test_streaming_text_and_usage(server: LoopbackServer) -> None:
    server.queue(text_turn("Hello from the loopback server."))
    c = client(server)
    streamed, turn = await run(c)
    assert streamed == turn.text == "Hello from the loopback server."
    assert turn.tool_calls == [] and turn.finish_reason == "stop"
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (11, 7)
    assert turn.usage.cost_usd == 0.0  # unknown local model: price 0
    body = server.requests[0]["body"]
    assert body["stream"] is True and body["model"] == "test-model"
    assert body["tools"][0]["function"]["name"] == "read_file"
    assert server.requests[0]["auth"] == "Bearer sk-test"
    assert c.session_usage.total_tokens == 18


async def test_streaming_tool_calls_in_fragments(server: LoopbackServer) -> None:
    server.queue(tool_turn([{"id": "call_a", "name": "read_file", "arguments": {"path": "kernels/x/kernel.cu"}},
                            {"id": "call_b", "name": "read_file", "arguments": {"path": "binding.cpp"}}],
                           text="Reading both."))
    _, turn = await run(client(server))
    assert [(t.id, t.name, t.arguments) for t in turn.tool_calls] == [
        ("call_a", "read_file", {"path": "kernels/x/kernel.cu"}), ("call_b", "read_file", {"path": "binding.cpp"})]
    assert turn.text == "Reading both." and turn.finish_reason == "tool_calls"


async def test_non_streaming_with_tool_calls(server: LoopbackServer) -> None:
    server.queue(tool_turn([{"id": "call_n", "name": "read_file", "arguments": {"path": "a.cu"}}], text="One call."))
    streamed, turn = await run(client(server, stream=False))
    assert server.requests[0]["body"].get("stream") in (False, None)
    assert streamed == "One call." and turn.tool_calls[0].arguments == {"path": "a.cu"}
    assert turn.usage.total_tokens == 18


async def test_rate_limit_is_retried_by_us(server: LoopbackServer) -> None:
    server.queue(error(429, "rate limited, slow down"), text_turn("after the retry"))
    retries: list[tuple[int, float, str]] = []
    _, turn = await run(client(server, on_retry=lambda n, d, k: retries.append((n, d, k))))
    assert turn.text == "after the retry" and turn.retries == 1
    assert len(server.requests) == 2  # litellm's and openai's own retries are off: one retry, ours
    assert retries[0][0] == 1 and retries[0][2] == "RateLimitError"


async def test_server_errors_exhaust_retries_with_a_clear_message(server: LoopbackServer) -> None:
    server.queue(*[error(503, "overloaded")] * 3)
    with pytest.raises(LLMError) as info:
        await run(client(server, max_retries=2))
    assert len(server.requests) == 3 and info.value.retryable
    assert "after 3 attempts" in str(info.value) and "ServiceUnavailableError" in str(info.value)


async def test_auth_error_is_not_retried(server: LoopbackServer) -> None:
    server.queue(error(401, "invalid api key"), text_turn("never"))
    with pytest.raises(LLMError) as info:
        await run(client(server))
    assert len(server.requests) == 1 and not info.value.retryable
    assert "AuthenticationError" in str(info.value) and "API key" in str(info.value)


async def test_malformed_tool_call_stream(server: LoopbackServer) -> None:
    server.queue(raw_stream([
        # Ollama-style: no ids, whole calls with dict arguments, all at index 0
        {"tool_calls": [{"index": 0, "function": {"name": "read_file", "arguments": {"path": "a.cu"}}}]},
        {"tool_calls": [{"index": 0, "function": {"name": "list_files", "arguments": {}}}]},
        # a new id at the same index starts a new call; its arguments come in fragments
        {"tool_calls": [{"index": 0, "id": "call_x", "function": {"name": "grep", "arguments": "{\"pat"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "tern\": \"__global__\"}"}}]},
        # invalid JSON arguments: kept, with an error the loop returns to the model
        {"tool_calls": [{"index": 0, "id": "call_y", "function": {"name": "read_file", "arguments": "{path: b.cu"}}]},
    ]))
    _, turn = await run(client(server))
    calls = turn.tool_calls
    assert [c.name for c in calls] == ["read_file", "list_files", "grep", "read_file"]
    assert calls[0].arguments == {"path": "a.cu"} and calls[1].arguments == {}
    assert calls[2].id == "call_x" and calls[2].arguments == {"pattern": "__global__"}
    assert calls[0].id and calls[1].id and calls[0].id != calls[1].id  # synthesised
    assert calls[3].error.startswith("the arguments are not valid JSON") and calls[3].raw_arguments == "{path: b.cu"
    assert not any(c.error for c in calls[:3])


def test_accumulator_edge_cases() -> None:
    acc = ToolCallAccumulator()
    acc.add(0, "a", "f", '{"x": ')
    acc.add(0, "a", "f", "1}")  # id and name repeated on every chunk: same call
    acc.add(1, None, "g", "[1, 2]")  # not an object
    acc.add(None, None, None, "")  # noise
    calls = acc.finish()
    assert [(c.id, c.name, c.arguments) for c in calls[:1]] == [("a", "f", {"x": 1})]
    assert calls[1].name == "g" and "must be a JSON object" in calls[1].error


def test_every_litellm_exception_is_classified() -> None:
    litellm = import_litellm()
    names = sorted(n for n in dir(litellm) if inspect.isclass(getattr(litellm, n))
                   and issubclass(getattr(litellm, n), BaseException))
    missing = [n for n in names if n not in EXCEPTIONS]
    assert not missing, f"classify these litellm exceptions in EXCEPTIONS: {missing}"
    for name in ("RateLimitError", "Timeout", "APIConnectionError", "ServiceUnavailableError",
                 "InternalServerError", "BadGatewayError"):
        assert EXCEPTIONS[name][0] is True
    for name in ("AuthenticationError", "NotFoundError", "BadRequestError", "ContextWindowExceededError",
                 "ContentPolicyViolationError"):
        assert EXCEPTIONS[name][0] is False
    exc = litellm.ContextWindowExceededError(message="too long", model="m", llm_provider="openai")
    retry, kind, advice = classify(exc)
    assert (retry, kind) == (False, "ContextWindowExceededError") and "context window" in advice


async def test_agent_loop_over_real_litellm(server: LoopbackServer, tmp_path: Any, monkeypatch: Any) -> None:
    """One loop turn through litellm: a tool call, its result sent back in OpenAI format."""
    from agent_support import FixtureEvaluator, open_project
    from kernelpilot.agent.loop import AgentSession, Budgets

    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))
    p = open_project(tmp_path)
    server.queue(tool_turn([{"id": "call_1", "name": "read_file", "arguments": {"path": "vector_scale.py"}}],
                           text="Reading."),
                 text_turn("I have read the problem."))
    s = AgentSession(p.problem, p.workspace, FixtureEvaluator(["vector_scale_ok.json"]), client(server),
                     Budgets(max_turns=5), p.config, auto_approve="never")
    events = [e async for e in s.run()]
    assert events[0].model == "openai/test-model" and events[0].replay is False  # type: ignore[attr-defined]
    finished = [e for e in events if e.kind == "tool_call_finished"]
    assert finished[0].ok and "class Model" in finished[0].result  # type: ignore[attr-defined]
    second = server.requests[1]["body"]["messages"]
    assert second[0]["role"] == "system" and "class Model" in second[0]["content"]
    tool_msg = [m for m in second if m["role"] == "tool"][0]
    assert tool_msg["tool_call_id"] == "call_1" and "get_inputs" in tool_msg["content"]
    assistant = [m for m in second if m["role"] == "assistant"][0]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"path": "vector_scale.py"}
    assert events[-1].reason == "finished"  # type: ignore[attr-defined]
    assert [e.total_tokens for e in events if e.kind == "usage"] == [18, 36]  # type: ignore[attr-defined]
