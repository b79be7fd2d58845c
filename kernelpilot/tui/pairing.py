"""Pairing: notice when the engineer saves a candidate file, and evaluate the edit.

``CandidateWatcher`` polls the candidate directory (content hashes, so a bare ``touch`` is not an
edit) and reports a change once it has been stable for one poll, so half-written saves are not
evaluated. The app pauses it while an agent tool call runs and re-baselines it afterwards, so the
agent's own writes are not mistaken for the engineer's.

``WorkspaceEditEvaluator`` turns an edit into a ``CandidateEvaluated`` event: checkpoint in the
worktree, diff against the original, evaluate with the engine. It blocks: run it in a thread worker.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

from kernelpilot.agent.evaltools import benchmark
from kernelpilot.agent.events import CandidateEvaluated
from kernelpilot.verdict import Verdict

CANDIDATE_PATTERNS = ("*.cu", "*.cuh", "*.cpp", "*.h", "*.hpp", "*.py")
_IGNORED_PARTS = {"__pycache__", ".git", "build", ".kp"}

State = dict[Path, str]


class CandidateWatcher:
    def __init__(self, root: Path, patterns: Iterable[str] = CANDIDATE_PATTERNS) -> None:
        self.root = Path(root)
        self.patterns = tuple(patterns)
        self._lock = threading.Lock()
        self._baseline: State = self.scan()
        self._pending: State | None = None
        self._paused = 0

    def scan(self) -> State:
        state: State = {}
        if not self.root.is_dir():
            return state
        for pattern in self.patterns:
            for path in self.root.rglob(pattern):
                if not path.is_file() or _IGNORED_PARTS.intersection(path.relative_to(self.root).parts):
                    continue
                try:
                    state[path] = hashlib.sha1(path.read_bytes()).hexdigest()
                except OSError:
                    continue
        return state

    def pause(self) -> None:
        with self._lock:
            self._paused += 1

    def resume(self, accept: Iterable[Path] = (), accept_all: bool = False) -> None:
        """Un-pause; the files in ``accept`` (or all, with ``accept_all``) are taken as the agent's
        writes, so only other changes are reported as the engineer's."""
        with self._lock:
            self._paused = max(0, self._paused - 1)
            current = self.scan()
            if accept_all:
                self._baseline = current
            for path in accept:
                path = Path(path)
                if path in current:
                    self._baseline[path] = current[path]
                else:
                    self._baseline.pop(path, None)
            self._pending = None

    def rebaseline(self) -> None:
        with self._lock:
            self._baseline = self.scan()
            self._pending = None

    def poll(self) -> list[Path]:
        """Files changed (added, modified, removed) since the baseline and stable since last poll."""
        with self._lock:
            if self._paused:
                return []
            current = self.scan()
            if current == self._baseline:
                self._pending = None
                return []
            if current != self._pending:
                self._pending = current  # changed: wait one more poll for the save to settle
                return []
            changed = sorted(
                p for p in set(current) | set(self._baseline) if current.get(p) != self._baseline.get(p)
            )
            self._baseline = current
            self._pending = None
            return changed

    @property
    def settling(self) -> bool:
        """A change was seen and waits for one more poll (the app polls again soon, not a whole interval later)."""
        return self._pending is not None


class EditEvaluator(Protocol):
    def evaluate_edit(self, paths: list[Path]) -> CandidateEvaluated:
        """Checkpoint and evaluate the engineer's edit (blocking)."""

    def close(self) -> None: ...


class WorkspaceEditEvaluator:
    """The real thing: Workspace checkpoint + diff, then the evaluation engine.

    ``evaluate`` is ``(candidate_dir: Path) -> Verdict`` (by default the engine's Evaluator, built
    lazily on first use so torch is never imported on the UI path).
    """

    def __init__(
        self,
        workspace: Any,
        candidate_dir: Path,
        evaluate: Callable[[Path], Any],
        *,
        close: Callable[[], None] | None = None,
        prefix: str = "e",
        cancel: Callable[[], bool] | None = None,
        then: Callable[[Path], Any] | None = None,
        before: Callable[[], None] | None = None,
        staged: Callable[[Path, Callable[[Any], None]], Any] | None = None,
        defer: Callable[[], bool] | None = None,
    ) -> None:
        """``then``: a second evaluation of a save whose first verdict is ok (the benchmark after the test:
        the test verdict is drawn first, in about a second, the benchmark's replaces it). ``staged``, in place of
        both: one benchmark that hands its test verdict to the callback it is given as soon as the candidate is
        verified (Evaluator.evaluate's ``on_tested``), so the candidate is verified once. ``before``: called
        before each evaluation (waits for the session's first full build, started at launch). ``defer``: called
        once ``before`` has returned, right before the evaluation (Evaluator.defer_baselines: the session's
        baselines give way to the save then, not while it waits for that build; their torch.compile goes on
        meanwhile, and the save's benchmark needs it too)."""
        self.workspace = workspace
        self.candidate_dir = Path(candidate_dir)
        self._evaluate = evaluate
        self._then = then
        self._staged = staged
        self._before = before
        self._defer = defer
        self._close = close
        self._cancel = cancel
        self._prefix = prefix
        self._count = 0

    def _next_id(self) -> str:
        self._count += 1
        known = getattr(self.workspace, "candidates", {})  # a resumed session goes on after its own saves
        while f"{self._prefix}{self._count}" in known:
            self._count += 1
        return f"{self._prefix}{self._count}"

    def cancel(self) -> bool:
        """From any thread: the evaluation in flight ends as superseded (a newer save replaces it)."""
        return bool(self._cancel()) if self._cancel is not None else False

    def _record(self, paths: list[Path]) -> tuple[str, str, str]:
        candidate_id = self._next_id()
        names = ", ".join(_rel(p, Path(self.workspace.path)) for p in paths)
        commit = self.workspace.checkpoint(candidate_id, f"engineer edit: {names}")
        return candidate_id, commit, self.workspace.diff(candidate_id, against="original")

    def superseded_edit(self, paths: list[Path]) -> CandidateEvaluated:
        """An edit a newer save replaced before its evaluation began: recorded, listed as superseded."""
        from kernelpilot.evaluation.render import summary_line

        candidate_id, commit, diff = self._record(paths)
        verdict = Verdict(status="superseded", candidate=str(self.candidate_dir))
        verdict.summary = summary_line(verdict)
        self.workspace.record_verdict(candidate_id, verdict)  # approval goes by it: a superseded save is refused
        return CandidateEvaluated(candidate_id=candidate_id, verdict=verdict.to_dict(), diff=diff, commit=commit,
                                  source="engineer")

    def evaluate_edit(self, paths: list[Path],
                      on_first: Callable[[CandidateEvaluated], None] | None = None) -> CandidateEvaluated:
        """Checkpoint and evaluate the save; with ``then``, the first verdict goes to ``on_first`` as soon as it
        is known and, when ok, the second evaluation's verdict is returned (both under the same candidate)."""
        if self._before is not None:
            self._before()
        if self._defer is not None:  # the worker is the save's from here: the session's baselines give way
            self._defer()
        # the checkpoint (a commit in the worktree, and its diff: a few git processes) is made beside the
        # evaluation, not before it: the verdict is drawn as soon as the engine has judged the save
        recorded: Future[tuple[str, str, str]] = Future()
        threading.Thread(target=_into, args=(recorded, self._record, paths), name="kp-checkpoint",
                         daemon=True).start()
        staged = self._staged
        if staged is not None:
            def tested(verdict: Any) -> None:  # the benchmark's test verdict, before its timing
                first = self._event(*recorded.result(), verdict)
                if on_first is not None:
                    on_first(first)

            verdict = self._verdict(lambda d: staged(d, tested))
            return self._event(*recorded.result(), verdict)
        verdict = self._verdict(self._evaluate)
        candidate_id, commit, diff = recorded.result()
        event = self._event(candidate_id, commit, diff, verdict)
        if self._then is not None and event.verdict.get("status") == "ok":
            if on_first is not None:
                on_first(event)
            event = self._judge(candidate_id, commit, diff, self._then)
        return event

    def _judge(self, candidate_id: str, commit: str, diff: str, evaluate: Callable[[Path], Any]) -> CandidateEvaluated:
        return self._event(candidate_id, commit, diff, self._verdict(evaluate))

    def _verdict(self, evaluate: Callable[[Path], Any]) -> Any:
        try:
            return evaluate(self.candidate_dir)
        except Exception as err:  # the edit is recorded either way; say why it was not measured
            return Verdict(status="runtime_error", candidate=str(self.candidate_dir),
                           error=f"{type(err).__name__}: {err}", summary=f"evaluation failed: {err}")

    def _event(self, candidate_id: str, commit: str, diff: str, verdict: Any) -> CandidateEvaluated:
        data = verdict.to_dict() if hasattr(verdict, "to_dict") else dict(verdict)
        self.workspace.record_verdict(candidate_id, data)  # approval goes by the last verdict (approval_rule)
        return CandidateEvaluated(candidate_id=candidate_id, verdict=data, diff=diff, commit=commit,
                                  source="engineer")

    def close(self) -> None:
        if self._close is not None:
            self._close()


class AgentEditEvaluator:
    """Agent mode: the edit becomes one of the session's own candidates (same ids, same book).

    ``evaluate_edit_async`` must run on the session's loop (``SessionRunner.submit``): it uses the
    agent's benchmark tool, so the agent can later propose or revert to the engineer's version.
    """

    def __init__(self, session: Any) -> None:
        self.session = session

    async def evaluate_edit_async(self, paths: list[Path]) -> CandidateEvaluated:
        result = await benchmark(self.session.ctx, {})
        event = next(e for e in result.events if isinstance(e, CandidateEvaluated))
        event.source = "engineer"
        transcript = getattr(self.session, "transcript", None)
        if transcript is not None:
            transcript.write_event(event)
            record = self.session.book.get(event.candidate_id)
            if record is not None:
                transcript.write_candidate(record)
        return event

    def close(self) -> None:
        """On quit: stop the session's evaluation worker (an evaluation in flight is killed)."""
        closer = getattr(getattr(self.session, "evaluator", None), "close", None)
        if callable(closer):
            closer()


def _into(future: Future[Any], fn: Callable[..., Any], *args: Any) -> None:
    try:
        future.set_result(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - raised again where the result is taken
        future.set_exception(exc)


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def edit_message(paths: list[Path], root: Path, diff_summary: str, verdict_summary: str) -> str:
    """What the agent is told after the engineer's edit was evaluated."""
    files = ", ".join(_rel(p, root) for p in paths)
    return (
        f"The engineer edited {files}: {diff_summary}; verdict: {verdict_summary}. "
        "Build on this version from now on."
    )
