"""Asking the warm worker to judge a candidate: one request, retried once when the worker was unusable or died
(the Evaluator's side of the worker protocol; the verdict's status, error and flags say what happened)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelpilot.evaluation.client.pool import WorkerOwner
from kernelpilot.evaluation.client.process import WorkerClient
from kernelpilot.verdict import Environment, Verdict, worker_death


GRACE_FLOOR_S, GRACE_CEILING_S = 1.0, 10.0


def cancel_grace(configured: float | None, worker_start_s: float) -> float:
    """How long a superseded request may take to stop before its worker is killed: ``configured`` when set, else
    what a kill costs, the worker's measured start (within 1-10 s). Waiting that long is never worse than twice
    the best choice made knowing the future: a forward of 2 s no longer costs a worker start of 7 s (H100)."""
    if configured is not None:
        return configured
    return min(max(GRACE_FLOOR_S, worker_start_s), GRACE_CEILING_S)


class WorkerRequests(WorkerOwner):
    """Request handling for an owner of warm workers (Evaluator): cancels, timeouts, deaths and the retry."""

    cancel_grace_s: float | None
    last_worker_start_s: float
    _death_phase: str

    def _ask(self, message: dict[str, Any], timeout: float, v: Verdict, writable: list[Path] | None = None,
             token: Any = None, interim: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any] | None:
        """Send the request (retrying once on a fresh worker if the old one was unusable). ``token``: a
        cancel stops the request (supersede.py); a worker killed for not stopping is replaced, no crash."""
        from kernelpilot.evaluation.client.failures import WorkerDied, WorkerTimeout

        for attempt in range(2):
            client = None
            grace = cancel_grace(self.cancel_grace_s, self.last_worker_start_s)
            try:
                client = self._worker([Path(message["problem"]).parent, Path(message["candidate_model"]).parent],
                                      writable, phases=v.phases)
                self._environment(v, client)
                if token is not None and token.cancelled:
                    v.status = "superseded"
                    return None
                grace = cancel_grace(self.cancel_grace_s, self.last_worker_start_s)  # its start measured above
                response = client.request(message, timeout, cancel=token, grace_s=grace, interim=interim)
            # (only while this evaluation is cancelled: a worker killed because it did not stop in time)
            except (WorkerTimeout, WorkerDied) if token is not None and token.cancelled else () as exc:
                v.status, v.error = "superseded", ""  # killed because it did not stop in time: not the candidate's
                v.flags.append(f"superseded: the worker did not stop within {grace:g} s of the cancel "
                               f"({type(exc).__name__}); it was replaced, not counted as a crash")
                if self.keep_warm:
                    self._prestart(Path(message["problem"]), Path(message["candidate_model"]), writable or [])
                return None
            except WorkerTimeout as exc:
                v.error = f"{exc}" + (f"\n--- worker log ---\n{exc.log_tail}" if exc.log_tail else "")
                v.status = "timeout"
                for phase, seconds in exc.phases.items():
                    v.phases[phase] = round(v.phases.get(phase, 0.0) + seconds, 3)
                # the worker was executing the request (its own watch frames) until it was killed
                v.phases["worker_busy"] = round(sum(t for p, t in exc.phases.items() if p != "request"), 3)
                if exc.call:
                    v.flags.append(f"watchdog: {exc.call} (phase {exc.phase}) did not return within "
                                   f"{exc.allow_s:.1f} s; the worker was killed and replaced")
                if self.keep_warm:  # the next evaluation finds a healthy worker already starting
                    self._prestart(Path(message["problem"]), Path(message["candidate_model"]), writable or [])
                return None
            except WorkerDied as exc:
                v.error = f"{exc}" + (f"\n--- worker log ---\n{exc.log_tail}" if exc.log_tail else "")
                v.status = "runtime_error"
                self._death_phase = exc.phase + (f" ({exc.call})" if exc.call and exc.call != "harness" else "")
                if self.keep_warm and client is not None and client.served:  # it died serving: start its successor
                    self._prestart()
                return None
            if response.get("ok"):
                return response
            if attempt == 0 and response.get("exit"):
                continue  # the previous candidate left the worker unusable: start a fresh one
            v.error, v.status = str(response.get("error", "the worker refused the request")), "runtime_error"
            return None
        return None

    def _ask_once_more_if_it_died(self, message: dict[str, Any], timeout: float, v: Verdict,
                                  writable: list[Path] | None = None, token: Any = None,
                                  interim: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any] | None:
        """``_ask``; when the worker died while judging this candidate, judge it once more in a fresh
        worker (the spare, or a new one). A death in both is the candidate's (``runtime_error``, both attempts
        listed); a candidate that ran without dying the second time is ``flaky``, and the first death is counted as
        a crash of ours (``Verdict.engine_crash``)."""
        from kernelpilot.verdict import Attempt

        self._death_phase = ""
        response = self._ask(message, timeout, v, writable, token, interim)
        if response is not None or not worker_death(v.error) or (token is not None and token.cancelled):
            return response
        first = Attempt(status=v.status, error=v.error[:6000], phase=self._death_phase or "unknown")
        # the dead worker is never asked again: the next request goes to its successor (the spare, or a new one)
        v.status, v.error = "ok", ""
        response = self._ask(message, timeout, v, writable, token, interim)
        v.attempts.append(first)
        second = "died again" if response is None and worker_death(v.error) else (
            "ran without dying" if response is not None else f"ended {v.status}")
        v.flaky = second != "died again"
        v.flags.append(f"retried in a fresh worker: the first worker died during {first.phase} "
                       f"({first.error.splitlines()[0] if first.error else 'no message'}); the second attempt {second}")
        return response

    def _environment(self, v: Verdict, client: WorkerClient) -> None:
        env = dict(client.environment)
        confinement = list(client.confinement) + [c for c in env.get("confinement", []) if c not in client.confinement]
        relaxed = v.environment.relaxed_rules
        v.environment = Environment(**{k: env.get(k, "") for k in ("gpu", "sm", "driver", "torch", "cuda", "python",
                                                                   "hostname_hash")})
        v.environment.confinement, v.environment.relaxed_rules = confinement, relaxed

    def _reload_failed(self, response: dict[str, Any]) -> bool:
        """The candidate failed to load in a worker that served others before: ask once more on a fresh one."""
        part = response.get("verdict") or {}
        if part.get("status") != "runtime_error" or self._client is None or self._client.served < 2:
            return False
        error = str(part.get("error", ""))
        return any(m in error for m in ("ExtensionBuildError", "ImportError", "undefined symbol",
                                         "already registered", "generic_type"))

