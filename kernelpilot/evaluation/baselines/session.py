"""This session's baselines on the evaluator's warm worker, and how a save makes them wait (a mixin of Evaluator).

A pairing session measures its problem's eager and torch.compile times once, at launch, on the worker that then
judges the engineer's saves. A save is worth more than the card's numbers, so the baselines give way to it, but
only when the save can use the worker: a save made right after a cold launch first waits for the session's first
full build of the candidate (seconds of host compile), and the baselines' own cold torch.compile, which that save's
benchmark needs too, goes on meanwhile. ``defer_baselines`` (called by the save once it is about to be evaluated)
stops baselines in flight at the worker's next announcement (never killed: the worker stays warm), or makes the
next deferrable baselines call give way at its start when none is in flight yet and no evaluation has begun since.
Either way the call raises :class:`~kernelpilot.errors.BaselinesDeferred`; the session measures them again after
the save's verdict. ``Evaluator.cancel`` (a newer save superseding an evaluation) leaves the baselines alone.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kernelpilot.errors import BaselinesDeferred, KernelpilotError
from kernelpilot.evaluation.baselines.identity import request_key
from kernelpilot.evaluation.baselines.machine_cache import record
from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.evaluation.candidate import ProblemRef, path_of
from kernelpilot.evaluation.client.failures import WorkerFailure
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.supersede import CancelToken
from kernelpilot.problem import load_problem


class SessionBaselines:
    """``baselines`` and ``defer_baselines`` for Evaluator (its attributes are set in Evaluator.__init__)."""

    settings: EvalSettings
    gpu: int | None
    _lock: threading.Lock
    _baselines: dict[str, Baselines]

    def _init_baselines(self) -> None:
        self._baselines = {}  # measured this session: problem bytes + timing settings -> Baselines
        self._defer_guard = threading.Lock()
        self._deferrable: CancelToken | None = None  # of deferrable baselines in flight
        self._defer_next = False  # a save deferred baselines not yet begun: they give way at their start

    def defer_baselines(self) -> bool:
        """From any thread, by a save about to be evaluated: deferrable baselines in flight stop at the worker's
        next announcement and raise BaselinesDeferred; with none in flight, the next deferrable call gives way at
        its start unless an evaluation begins first. True when baselines were in flight."""
        with self._defer_guard:
            token = self._deferrable
            if token is None:
                self._defer_next = True
                return False
        token.cancel()
        return True

    def _evaluation_begins(self) -> None:
        """An evaluation holds the worker now: a deferral asked for before it has been served."""
        with self._defer_guard:
            self._defer_next = False

    def _deferrable_token(self) -> CancelToken:
        with self._defer_guard:
            if self._defer_next:
                self._defer_next = False
                raise BaselinesDeferred("the baselines gave way to a save about to be evaluated")
            self._deferrable = token = CancelToken()
            return token

    def baselines(self, problem: ProblemRef, *, readable: list[Path] | None = None,
                  settings: EvalSettings | None = None, forget: bool = False, exclusive: bool = False,
                  fresh: bool = False, deferrable: bool = False) -> Baselines:
        """Eager and torch.compile times of ``problem`` on this GPU and its floor at the measured ceilings
        (worker op ``baselines``, see baselines/measure.py); a ``Baselines``. ``readable``: directories later
        evaluations read (e.g. the worktree), so that warm worker serves them too. Raises KernelpilotError
        when the worker cannot measure them (no GPU, the problem fails on the GPU, no answer in time).
        Measured once per session: the same problem bytes and timing settings again return the first answer
        (``fresh`` measures again), and kept on this machine for the next session's card (baselines/machine_cache.py).
        ``deferrable`` (a pairing session's): :meth:`defer_baselines` makes them give way (BaselinesDeferred), the
        worker kept warm. A benchmark verdict never uses these: it times eager and torch.compile beside the
        candidate."""
        path = Path(load_problem(path_of(problem)).path).resolve()
        key = request_key(path, settings or self.settings)
        if key in self._baselines and not fresh and not forget:
            return self._baselines[key]
        # a pairing session's card does not wait for torch.compile's own check: check_compiled makes it next
        message = {"op": "baselines", "problem": str(path), "settings": (settings or self.settings).to_dict(),
                   "forget": forget, "exclusive": exclusive, "check_later": deferrable}
        response = self._deferrable_request(message, path, readable, deferrable, "the baselines were not measured")
        measured = Baselines.from_dict(response["baselines"])
        if not forget:
            self._baselines[key] = measured
        return record(path, settings or self.settings, self.gpu, measured)  # for the next session's card

    def check_compiled(self, problem: ProblemRef, *, readable: list[Path] | None = None,
                       settings: EvalSettings | None = None) -> str:
        """torch.compile's own check of ``problem`` (worker op ``compiled_check``: ``passed``, ``failed: why``, or ""
        when torch.compile built nothing), made after a pairing session's baselines, which were answered without
        it. Deferrable like them: a save about to be evaluated makes it give way (BaselinesDeferred), and that
        save's benchmark verdict makes the check itself. The session's baselines and the machine's record of them
        get the answer."""
        path = Path(load_problem(path_of(problem)).path).resolve()
        message = {"op": "compiled_check", "problem": str(path), "settings": (settings or self.settings).to_dict()}
        response = self._deferrable_request(message, path, readable, True, "torch.compile's own check was not made")
        result = str(response.get("compiled_check") or "")
        measured = self._baselines.get(request_key(path, settings or self.settings))
        if measured is not None and result and not measured.compiled_check:
            measured.compiled_check = result
            record(path, settings or self.settings, self.gpu, measured)
        return result

    def _deferrable_request(self, message: dict[str, object], path: Path, readable: list[Path] | None,
                            deferrable: bool, failed: str) -> dict[str, object]:
        """One request to the warm worker, deferrable by a save (BaselinesDeferred); ``failed`` begins the error."""
        with self._lock:
            token = self._deferrable_token() if deferrable else None
            try:
                client = self._worker([path.parent, *(readable or [])])  # type: ignore[attr-defined]
                # no kill at a grace: a compile between announcements is worth more than the save's wait for it
                response = client.request(message, self.settings.benchmark_timeout_s, cancel=token, grace_s=None)
            except WorkerFailure as exc:
                if token is not None and token.cancelled:
                    raise BaselinesDeferred("the baselines gave way to a save") from None
                raise KernelpilotError(f"{failed}: {exc}") from None
            finally:
                if token is not None:
                    with self._defer_guard:
                        self._deferrable = None
        if response.get("superseded") or (token is not None and token.cancelled and not response.get("ok")):
            raise BaselinesDeferred("the baselines gave way to a save; they are measured after its verdict")
        if not response.get("ok"):
            raise KernelpilotError(f"{failed}: {response.get('error', 'the worker refused')}")
        return response
