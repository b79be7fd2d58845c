"""LLMClient over litellm: any litellm model string (``anthropic/…``, ``openai/…`` with ``api_base``,
``ollama_chat/…``, ``hosted_vllm/…``), native tool calling, our own retry policy.

litellm is imported lazily inside methods (it costs seconds and must not load with the core), after
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so the import never reaches the network.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

from kernelpilot.agent.llm import Chunk, LLMError, TextChunk, Turn, TurnUsage
from kernelpilot.agent.toolcalls import ToolCallAccumulator

# litellm exception class name -> (retry?, what to tell the engineer). Looked up along the MRO, most
# specific class first. tests/test_litellm_loopback.py fails when litellm grows an unclassified one.
EXCEPTIONS: dict[str, tuple[bool, str]] = {
    "RateLimitError": (True, "the provider is rate limiting requests; wait or lower the request rate"),
    "RouterRateLimitError": (True, "the router is rate limiting requests; wait and retry"),
    "RouterRateLimitErrorBasic": (True, "the router is rate limiting requests; wait and retry"),
    "CallerCredentialRateLimitError": (True, "the provider is rate limiting this key; wait and retry"),
    "Timeout": (True, "the model request timed out; check the network or raise the timeout"),
    "APIConnectionError": (True, "could not connect to the model API; check api_base and the network"),
    "ServiceUnavailableError": (True, "the model service is unavailable (503); retry later"),
    "InternalServerError": (True, "the model service had an internal error (500); retry later"),
    "BadGatewayError": (True, "the model service returned a bad gateway (502); retry later"),
    "APIError": (True, "the model API returned an error; retry later"),
    "AuthenticationError": (False,
                            "the provider rejected the API key; set the provider's key (for example ANTHROPIC_API_KEY "
                            "or OPENAI_API_KEY)"),
    "CallerCredentialAuthenticationError": (False, "the provider rejected the caller's credentials; fix the API key"),
    "PermissionDeniedError": (False, "the API key may not use this model; use a key with access or another model"),
    "PaymentRequiredError": (False, "the provider account has no credit left; add credit or use another model"),
    "BudgetExceededError": (False, "the litellm budget is exhausted; raise it or use another model"),
    "NotFoundError": (False, "the model or endpoint was not found; check the model name and api_base"),
    "BadRequestError": (False, "the provider rejected the request; check the model supports tool calling"),
    "InvalidRequestError": (False, "the provider rejected the request; check the model name and parameters"),
    "UnprocessableEntityError": (False,
                                 "the provider could not process the request (422); check the model and parameters"),
    "UnsupportedParamsError": (False, "the model does not accept a parameter we sent; try another model"),
    "MalformedRequestFieldError": (False, "a request field was malformed; report this as a kernelpilot bug"),
    "ContextWindowExceededError": (False,
                                   "the conversation no longer fits the model's context window; start a new session or "
                                   "use a model with a larger context"),
    "ContentPolicyViolationError": (False,
                                    "the provider refused the request under its content policy; rephrase or use "
                                    "another model"),
    "JSONSchemaValidationError": (False, "the response did not match the expected schema; retry with another model"),
    "APIResponseValidationError": (False, "the provider's response could not be parsed; try another model or provider"),
    "LiteLLMUnknownProvider": (False,
                               "litellm does not know this provider; use a model string like anthropic/<model> or "
                               "openai/<model>"),
    "ModelNotMappedError": (False, "litellm has no entry for this model; check the model string"),
    "UnsupportedEndpointError": (False,
                                 "the provider does not support chat completions for this model; use another model"),
    "ImageFetchError": (False, "the provider could not fetch an image; remove images from the request"),
    "ToolLoopMaxRoundsExceeded": (False, "litellm's internal tool loop gave up; report this as a kernelpilot bug"),
    "VectorStoreSearchError": (False, "a vector store search failed; not used by kernelpilot"),
    "ZoneInfoNotFoundError": (False, "a time zone was not found; check the TZ setting"),
    "ValidationError": (False, "a request failed validation; check the model configuration"),
    "OpenAIError": (False, "the OpenAI-compatible API returned an error; check the model and api_base"),
    "MockException": (False, "a mock error was raised"),
}

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}


def classify(exc: BaseException) -> tuple[bool, str, str]:
    """Return (retry, kind, advice) for an exception raised by litellm."""
    for cls in type(exc).__mro__:
        if cls.__name__ in EXCEPTIONS:
            retry, advice = EXCEPTIONS[cls.__name__]
            return retry, cls.__name__, advice
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status in RETRY_STATUS:
        return True, type(exc).__name__, f"the model API returned HTTP {status}; retry later"
    if isinstance(exc, (asyncio.TimeoutError, ConnectionError)):
        return True, type(exc).__name__, "the model request failed on the network; check the connection"
    return False, type(exc).__name__, "the model call failed"


def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import warnings

    # Providers that send tool arguments as a dict make litellm's pydantic models warn on every
    # chunk; the accumulator handles dicts, so the warning is noise for the engineer.
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    import litellm

    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    return litellm


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


class LiteLLMClient:
    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        stream: bool = True,
        max_retries: int = 5,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        timeout_s: float = 600.0,
        extra: dict[str, Any] | None = None,
        on_retry: Callable[[int, float, str], None] | None = None,
    ) -> None:
        self.model = model
        self.label = model
        self.api_base = api_base
        self.api_key = api_key
        self.temperature = temperature
        self.streaming = stream
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.timeout_s = timeout_s
        self.extra = dict(extra or {})
        self.on_retry = on_retry
        self.session_usage = TurnUsage()
        self.retries = 0  # total retries this session

    def _kwargs(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": self.streaming,
            "timeout": self.timeout_s,
            "num_retries": 0,  # retries are ours (see EXCEPTIONS)
            "max_retries": 0,
            "drop_params": True,
        }
        if tools:
            kw["tools"] = tools
        if self.streaming:
            kw["stream_options"] = {"include_usage": True}
        if self.api_base:
            kw["api_base"] = self.api_base
        if self.api_key:
            kw["api_key"] = self.api_key
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        if self.model.startswith(("ollama/", "ollama_chat/")):
            kw["num_ctx"] = 32768  # Ollama's default context (2048) would silently truncate the prompt
        if "max_tokens" not in self.extra and "anthropic" in self.model:
            out = self._max_output_tokens()
            if out:  # litellm's default (4096) is too small for a whole kernel file in one write_file
                kw["max_tokens"] = min(out, 32000)
        kw.update(self.extra)
        return kw

    def context_window(self) -> int | None:
        """The model's input window from litellm's table (None when unknown)."""
        if self.model.startswith(("ollama/", "ollama_chat/")):
            return 32768
        try:
            info = import_litellm().get_model_info(self.model)
        except Exception:  # noqa: BLE001 - unknown model
            return None
        value = info.get("max_input_tokens") if isinstance(info, dict) else None
        return int(value) if isinstance(value, int) and value > 0 else None

    def _max_output_tokens(self) -> int | None:
        try:
            info = import_litellm().get_model_info(self.model)
        except Exception:  # noqa: BLE001 - unknown model
            return None
        value = info.get("max_output_tokens") if isinstance(info, dict) else None
        return int(value) if isinstance(value, int) and value > 0 else None

    def _delay(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        return delay * (0.5 + random.random() * 0.5)

    async def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[Chunk]:
        litellm = import_litellm()
        attempt = 0
        while True:
            yielded = False
            try:
                state = _StreamState()
                if self.streaming:
                    response = await litellm.acompletion(**self._kwargs(messages, tools))
                    async for chunk in response:
                        text = state.add_chunk(chunk)
                        if text:
                            yielded = True
                            yield TextChunk(text)
                else:
                    response = await litellm.acompletion(**self._kwargs(messages, tools))
                    state.add_response(response)
                    if state.text:
                        yielded = True
                        yield TextChunk(state.text)
                break
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                retry, kind, advice = classify(exc)
                detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else kind
                if not retry or yielded or attempt >= self.max_retries:
                    why = ""
                    if retry and attempt >= self.max_retries:
                        why = f" after {attempt + 1} attempts"
                    raise LLMError(
                        f"Model {self.model} failed{why}: {advice} ({kind}: {detail}).",
                        retryable=retry,
                        kind=kind,
                    ) from exc
                delay = self._delay(attempt)
                attempt += 1
                self.retries += 1
                if self.on_retry is not None:
                    self.on_retry(attempt, delay, kind)
                await asyncio.sleep(delay)
        turn = state.turn()
        turn.retries = attempt
        turn.usage = self._usage(state, messages)
        self.session_usage.prompt_tokens += turn.usage.prompt_tokens
        self.session_usage.completion_tokens += turn.usage.completion_tokens
        self.session_usage.cost_usd += turn.usage.cost_usd
        yield turn

    def _usage(self, state: _StreamState, messages: list[dict[str, Any]]) -> TurnUsage:
        litellm = import_litellm()
        prompt, completion = state.prompt_tokens, state.completion_tokens
        if prompt is None:
            try:
                prompt = int(litellm.token_counter(model=self.model, messages=messages))
            except Exception:  # noqa: BLE001 - unknown tokenizer: estimate
                prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4
        if completion is None:
            completion = max(1, len(state.text) // 4) if state.text or state.acc_used else 0
        cost = 0.0
        try:
            p_cost, c_cost = litellm.cost_per_token(
                model=self.model, prompt_tokens=prompt, completion_tokens=completion
            )
            cost = float(p_cost) + float(c_cost)
        except Exception:  # noqa: BLE001 - unknown or local model: price 0
            cost = 0.0
        return TurnUsage(prompt_tokens=int(prompt), completion_tokens=int(completion), cost_usd=cost)


class _StreamState:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.acc = ToolCallAccumulator()
        self.acc_used = False
        self.finish_reason = ""
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        p, c = _get(usage, "prompt_tokens"), _get(usage, "completion_tokens")
        if isinstance(p, int) and (p or c):
            self.prompt_tokens = p
        if isinstance(c, int) and (p or c):
            self.completion_tokens = c

    def _tool_calls(self, calls: Any, *, positional: bool = False) -> None:
        for pos, tc in enumerate(calls or []):
            fn = _get(tc, "function")
            index = _get(tc, "index")
            if not isinstance(index, int):
                index = pos if positional else None
            self.acc.add(
                index,
                _get(tc, "id"),
                _get(fn, "name"),
                _get(fn, "arguments"),
            )
            self.acc_used = True

    def add_chunk(self, chunk: Any) -> str:
        self._usage(_get(chunk, "usage"))
        choices = _get(chunk, "choices") or []
        if not choices:
            return ""
        choice = choices[0]
        if _get(choice, "finish_reason"):
            self.finish_reason = str(_get(choice, "finish_reason"))
        delta = _get(choice, "delta")
        self._tool_calls(_get(delta, "tool_calls"))
        text = _get(delta, "content") or ""
        if text:
            self.parts.append(text)
        return text

    def add_response(self, response: Any) -> None:
        self._usage(_get(response, "usage"))
        choices = _get(response, "choices") or []
        if not choices:
            return
        choice = choices[0]
        self.finish_reason = str(_get(choice, "finish_reason") or "")
        message = _get(choice, "message")
        text = _get(message, "content") or ""
        if text:
            self.parts.append(text)
        self._tool_calls(_get(message, "tool_calls"), positional=True)

    def turn(self) -> Turn:
        calls = self.acc.finish()
        if self.finish_reason == "length":
            for call in calls:
                if call.error:
                    call.error += " (the reply hit the output token limit: write smaller pieces, or use edit_file)"
        return Turn(text=self.text, tool_calls=calls, finish_reason=self.finish_reason)
