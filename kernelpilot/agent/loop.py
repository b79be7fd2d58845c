"""The agent loop: a ReAct session as an async generator of Events.

model turn (streamed) -> tool calls executed -> results appended -> repeat, until the engineer
approves a proposal, a budget is reached, the model stops (headless) or the session is cancelled.
The engineer talks to a running session with ``send``, ``approve``, ``reject`` and ``cancel``
(plain methods: call them on the loop that runs ``run()``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

from kernelpilot import skills
from kernelpilot.agent import context, prompts
from kernelpilot.agent.approval import ProposalMixin
from kernelpilot.agent.budgets import Budgets, candidate_rel
from kernelpilot.agent.candidates import CandidateBook
from kernelpilot.agent.evaltools import problem_info
from kernelpilot.agent.events import (
    AssistantMessage, BudgetReached, Done, EngineerMessage, ErrorEvent, Event, SessionStarted,
    TextDelta, ToolCallFinished, ToolCallStarted, Usage,
)
from kernelpilot.agent.llm import LLMClient, LLMError, TextChunk, Turn, is_replay
from kernelpilot.agent.tools import ToolContext, Toolbox, ToolResult
from kernelpilot.agent.transcript import Transcript
from kernelpilot.agent.verdict_text import one_line

T = TypeVar("T")
DEFAULT_CONTEXT_TOKENS = 100_000
AUTO_APPROVE = ("faster-than-compile", "never")


class _Stop(Exception):
    def __init__(self, reason: str) -> None:  # "cancelled" | "wall_time"
        super().__init__(reason)
        self.reason = reason


class AgentSession(ProposalMixin):
    def __init__(
        self,
        problem: Any,
        workspace: Any,
        evaluator: Any,
        client: LLMClient,
        budgets: Budgets | None = None,
        config: Any = None,
        transcript: Transcript | None = None,
        skills: Path | str | None = None,
        *,
        auto_approve: str | None = None,
        session_id: str | None = None,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        system_prompt: str | None = None,
        gpu: prompts.GpuFacts | None = None,
    ) -> None:
        if auto_approve is not None and auto_approve not in AUTO_APPROVE:
            raise ValueError(f"auto_approve must be one of {AUTO_APPROVE} or None")
        self.problem = problem
        self.workspace = workspace
        self.evaluator = evaluator
        self.client = client
        self.budgets = budgets or Budgets.from_config(config)
        self.config = config
        self.transcript = transcript
        self.skills_dir = Path(skills) if skills else None
        self.auto_approve = auto_approve
        self.session_id = session_id or str(getattr(workspace, "session_id", "session"))
        self.context_tokens = context_tokens
        self.system_prompt = system_prompt
        self.gpu = gpu
        self.book = CandidateBook()
        self.ctx = ToolContext(problem=problem, workspace=workspace, evaluator=evaluator, config=config,
                               candidate_rel=candidate_rel(problem, workspace, config), book=self.book,
                               skills_dir=self.skills_dir)
        self.toolbox = Toolbox(self.ctx)
        variables = getattr(client, "variables", None)
        if isinstance(variables, dict):  # replays written for any project layout
            variables.setdefault("candidate_dir", self.ctx.candidate_rel.as_posix())
        self.messages: list[dict[str, Any]] = []
        self.turns = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.resumed = False
        self.done: Done | None = None
        self._inbox: list[str] = []
        self._decisions: dict[str, tuple[bool, str]] = {}  # (approved, reason of a rejection | status confirmed)
        self._pending = ""
        self._wake = asyncio.Event()
        self._cancel = asyncio.Event()
        self._deadline: float | None = None
        self._running = False
        if transcript is not None and transcript.exists:
            self._restore()
        self._base = (self.turns, self.total_tokens, self.cost_usd)  # budgets count from here

    # ---- the engineer's side -----------------------------------------------------------------
    def send(self, text: str) -> None:
        if text.strip():
            self._inbox.append(text)
            self._wake.set()

    def _record(self, event: Event) -> None:
        if self.transcript is not None:
            self.transcript.write_event(event)
            self.transcript.close()

    def cancel(self) -> None:
        self._cancel.set()
        self._wake.set()

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    # ---- bookkeeping ---------------------------------------------------------------------------
    def _emit(self, event: Event) -> Event:
        if self.transcript is not None:
            self.transcript.write_event(event)
        return event

    def _append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        if self.transcript is not None:
            self.transcript.write_message(message)

    def _restore(self) -> None:
        assert self.transcript is not None
        state = self.transcript.load()
        self.resumed = True
        self.messages = list(state.messages)
        for record in state.candidates:
            self.book.add(record)
        for ev in state.events:
            if ev.kind == "assistant_message":
                self.turns += 1
            elif ev.kind == "usage":
                self.prompt_tokens += ev.prompt_tokens  # type: ignore[attr-defined]
                self.completion_tokens += ev.completion_tokens  # type: ignore[attr-defined]
                self.cost_usd = ev.total_cost_usd  # type: ignore[attr-defined]
            elif ev.kind == "proposal_approved":
                self.book.approved, self.book.approved_commit = ev.candidate_id, ev.commit  # type: ignore[attr-defined]
        if hasattr(self.client, "skip") and is_replay(self.client):
            self.client.skip(self.turns)
        # tool calls left without a result (the session stopped mid-turn) get one, so the
        # conversation stays valid for the provider
        answered = {m.get("tool_call_id") for m in self.messages if m.get("role") == "tool"}
        for m in list(self.messages):
            for tc in m.get("tool_calls") or []:
                if tc.get("id") not in answered:
                    self._append({"role": "tool", "tool_call_id": tc["id"],
                                  "content": "not run: the session stopped before this tool ran"})

    def _best_note(self) -> str:
        best = self.book.best()
        if best is None:
            return ""
        return f"\n# Best candidate so far\n\n{best.id}: {one_line(best.verdict)}\n"

    def request_messages(self) -> list[dict[str, Any]]:
        system = (self.system_prompt or "") + self._best_note()
        return [{"role": "system", "content": system}, *context.compact(self.messages, self.context_tokens)]

    async def _build_system_prompt(self) -> str:
        info = await problem_info(self.ctx)
        gpu = self.gpu or await asyncio.to_thread(prompts.gpu_facts)
        try:
            index = await asyncio.to_thread(skills.index_text, self.skills_dir)
        except Exception as exc:  # noqa: BLE001 - the session works without skills
            index = f"(skills unavailable: {exc})"
        return prompts.system_prompt(
            problem=self.problem, config=self.config, budgets=self.budgets, candidate_rel=self.ctx.candidate_rel,
            problem_info=info, skills_index=index, gpu=gpu, project_root=getattr(self.config, "root", None),
        )

    def _budget_hit(self) -> BudgetReached | None:
        b = self.budgets
        turns = self.turns - self._base[0]
        tokens = self.total_tokens - self._base[1]
        cost = self.cost_usd - self._base[2]
        if b.max_turns and turns >= b.max_turns:
            return BudgetReached(budget="turns", limit=b.max_turns, used=turns)
        if b.max_tokens and tokens >= b.max_tokens:
            return BudgetReached(budget="tokens", limit=b.max_tokens, used=tokens)
        if b.max_cost_usd and cost >= b.max_cost_usd:
            return BudgetReached(budget="cost", limit=b.max_cost_usd, used=round(cost, 6))
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return self._wall_event()
        return None

    def _wall_event(self) -> BudgetReached:
        limit = float(self.budgets.max_wall_s or 0)
        return BudgetReached(budget="wall_time", limit=limit, used=round(time.monotonic() - self._started, 3))

    async def _race(self, aw: Awaitable[T], *, deadline: bool = True) -> T:
        """Await ``aw`` unless the session is cancelled or (with ``deadline``) runs out of wall time."""
        task = asyncio.ensure_future(aw)
        stop = asyncio.ensure_future(self._cancel.wait())
        timeout = None
        if deadline and self._deadline is not None:
            timeout = max(0.0, self._deadline - time.monotonic())
        try:
            done, _ = await asyncio.wait({task, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task in done:
            return task.result()
        task.cancel()
        try:
            await task
        except BaseException:  # noqa: BLE001 - we are abandoning it
            pass
        raise _Stop("cancelled" if self._cancel.is_set() else "wall_time")

    def _finish(self, reason: str) -> Done:
        best = self.book.best()
        self.done = Done(reason=reason, best_candidate=self.book.approved or (best.id if best else ""),
                         approved_commit=self.book.approved_commit)
        return self.done

    # ---- the loop ----------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[Event]:
        self._running = True
        self._started = time.monotonic()
        if self.budgets.max_wall_s:
            self._deadline = self._started + float(self.budgets.max_wall_s)
        try:
            async for event in self._run():
                yield event
        finally:
            self._running = False
            if self.transcript is not None:
                self.transcript.close()

    async def _run(self) -> AsyncIterator[Event]:
        if self.transcript is not None and not self.resumed:
            self.transcript.write_header(
                session_id=self.session_id, problem=str(self.problem.path), model=self.client.label,
                project_root=str(getattr(self.config, "root", "") or ""), candidate_dir=str(self.ctx.candidate_rel),
                worktree=str(getattr(self.workspace, "path", "")), branch=str(getattr(self.workspace, "branch", "")),
                auto_approve=self.auto_approve,
            )
        yield self._emit(SessionStarted(
            session_id=self.session_id, problem=self.problem.name, model=self.client.label,
            replay=is_replay(self.client), worktree=str(getattr(self.workspace, "path", "")),
            branch=str(getattr(self.workspace, "branch", "")),
        ))
        try:
            window_of = getattr(self.client, "context_window", None)
            if callable(window_of):
                window = await self._race(asyncio.to_thread(window_of))
                if window:
                    self.context_tokens = min(self.context_tokens, int(window * 0.75))
            if self.system_prompt is None:
                self.system_prompt = await self._race(self._build_system_prompt())
            values = {"problem_name": self.problem.name, "candidate_dir": str(self.ctx.candidate_rel)}
            if not self.messages:
                self._append({"role": "user", "content": prompts.render("first_message.md", values).strip()})
            else:
                self._append({"role": "user", "content": prompts.render("resumed.md", values).strip()})
            async for event in self._steps():
                yield event
        except _Stop as stop:
            if stop.reason == "wall_time":
                yield self._emit(self._wall_event())
                yield self._emit(self._finish("budget"))
            else:
                yield self._emit(self._finish("cancelled"))
        except LLMError as exc:
            yield self._emit(ErrorEvent(message=str(exc), recoverable=False))
            yield self._emit(self._finish("error"))
        except Exception as exc:  # noqa: BLE001 - a bug must end the session cleanly, not the UI
            yield self._emit(ErrorEvent(message=f"internal error: {type(exc).__name__}: {exc}", recoverable=False))
            yield self._emit(self._finish("error"))

    async def _steps(self) -> AsyncIterator[Event]:
        while True:
            async for event in self._take_engineer_input():
                yield event
            if self.done is not None:
                return
            if self._cancel.is_set():
                raise _Stop("cancelled")
            hit = self._budget_hit()
            if hit is not None:
                yield self._emit(hit)
                yield self._emit(self._finish("budget"))
                return
            turn: Turn | None = None
            stream = self.client.stream(self.request_messages(), self.toolbox.schemas())
            try:
                while True:
                    try:
                        chunk = await self._race(stream.__anext__())
                    except StopAsyncIteration:
                        break
                    if isinstance(chunk, TextChunk):
                        yield TextDelta(text=chunk.text)
                    else:
                        turn = chunk
            finally:
                await _aclose(stream)
            if turn is None or turn.end_of_script:
                yield self._emit(self._finish("finished"))
                return
            self.turns += 1
            self._append(turn.to_message())
            yield self._emit(AssistantMessage(text=turn.text, turn=self.turns))
            self.prompt_tokens += turn.usage.prompt_tokens
            self.completion_tokens += turn.usage.completion_tokens
            self.cost_usd += turn.usage.cost_usd
            yield self._emit(Usage(prompt_tokens=turn.usage.prompt_tokens,
                                   completion_tokens=turn.usage.completion_tokens,
                                   cost_usd=turn.usage.cost_usd, total_tokens=self.total_tokens,
                                   total_cost_usd=round(self.cost_usd, 8)))
            if not turn.tool_calls:
                if self.auto_approve is not None and not self._inbox:
                    yield self._emit(self._finish("finished"))
                    return
                while not self._inbox and not self._decisions and self.done is None:
                    self._wake.clear()
                    await self._race(self._wake.wait(), deadline=False)
                continue
            for index, call in enumerate(turn.tool_calls):
                try:
                    async for event in self._run_tool(call):
                        yield event
                except _Stop as stop:
                    for later in turn.tool_calls[index:]:
                        self._append({"role": "tool", "tool_call_id": later.id,
                                      "content": f"not run: the session stopped ({stop.reason})"})
                    raise
                if self.done is not None:
                    for later in turn.tool_calls[index + 1:]:
                        self._append({"role": "tool", "tool_call_id": later.id,
                                      "content": "not run: the session ended"})
                    yield self._emit(self.done)
                    return

    async def _run_tool(self, call: Any) -> AsyncIterator[Event]:
        yield self._emit(ToolCallStarted(call_id=call.id, name=call.name, arguments=call.arguments))
        started = time.monotonic()
        if call.error:
            result = ToolResult(f"error: {call.error}", ok=False)
        else:
            result = await self._race(self.toolbox.call(call.name, call.arguments))
        for event in result.events:
            yield self._emit(event)
            record = self.book.get(getattr(event, "candidate_id", ""))
            if record is not None and self.transcript is not None and event.kind == "candidate_evaluated":
                self.transcript.write_candidate(record)
        if result.proposal:
            async for event in self._proposal(result):
                yield event
        yield self._emit(ToolCallFinished(call_id=call.id, name=call.name, result=result.text, ok=result.ok,
                                          seconds=round(time.monotonic() - started, 3)))
        self._append({"role": "tool", "tool_call_id": call.id, "content": result.text})

    async def _take_engineer_input(self) -> AsyncIterator[Event]:
        while self._inbox:
            text = self._inbox.pop(0)
            self._append({"role": "user", "content": text})
            yield self._emit(EngineerMessage(text=text))
        for cid in list(self._decisions):
            if cid == self._pending:
                continue
            async for event in self._decide_unproposed(cid):
                yield event


async def _aclose(stream: Any) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except Exception:  # noqa: BLE001
            pass
