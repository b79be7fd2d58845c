"""What the app needs from a session, and the runner that keeps it off the UI thread.

``SessionLike`` is the agent's ``AgentSession`` interface (run/send/approve/reject/cancel); methods
may be plain or async. ``SessionRunner`` runs the session in its own thread with its own event
loop, so a slow or blocking step in the agent can never freeze the screen: events come back as
messages, and calls go in with ``run_coroutine_threadsafe``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from kernelpilot.agent.events import Done, Event, EngineerMessage, ProposalApproved, ProposalRejected


@runtime_checkable
class SessionLike(Protocol):
    def run(self) -> AsyncIterator[Event]: ...

    def send(self, text: str) -> Any: ...

    def approve(self, candidate_id: str, confirmed: str = "") -> Any: ...

    def reject(self, candidate_id: str, reason: str) -> Any: ...

    def cancel(self) -> Any: ...


async def _resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    return await _resolve(fn(*args))


class SessionRunner:
    """Owns the session's thread and loop; ``run_blocking`` is the body of a thread worker."""

    def __init__(self, session: SessionLike, post: Callable[[Event], None]) -> None:
        self.session = session
        self._post = post
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._iter_task: asyncio.Task[None] | None = None
        self.finished = threading.Event()  # run() has ended (normally, by cancel, or by error)

    # ---- the session thread --------------------------------------------------------------
    def run_blocking(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._iter_task = asyncio.create_task(self._consume())
        self._ready.set()
        try:
            await self._iter_task
        except asyncio.CancelledError:
            pass
        finally:
            self.finished.set()
        await self._stop.wait()  # keep the loop for approve/reject/send after run() ends

    async def _consume(self) -> None:
        agen = self.session.run()
        try:
            async for event in agen:
                self._post(event)
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                await aclose()

    # ---- calls from the UI ---------------------------------------------------------------
    async def call(self, method: str, *args: Any) -> Any:
        """Call ``session.<method>(*args)`` on the session's loop and await its result here."""
        loop = await self._wait_loop()
        fut = asyncio.run_coroutine_threadsafe(self._invoke(method, *args), loop)
        return await asyncio.wrap_future(fut)

    async def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` (plain or async) on the session's loop, e.g. work that touches its state."""
        loop = await self._wait_loop()
        fut = asyncio.run_coroutine_threadsafe(_call(fn, *args), loop)
        return await asyncio.wrap_future(fut)

    async def _invoke(self, method: str, *args: Any) -> Any:
        return await _resolve(getattr(self.session, method)(*args))

    async def _wait_loop(self) -> asyncio.AbstractEventLoop:
        while not self._ready.is_set():
            await asyncio.sleep(0.01)
        assert self._loop is not None
        return self._loop

    async def shutdown(self, timeout: float = 10.0) -> bool:
        """Cancel the session, give run() ``timeout`` seconds to finish, then stop the loop.

        Returns True when run() ended by itself (worktree and transcript left consistent).
        """
        if not self._ready.is_set() or self._loop is None or self._loop.is_closed():
            return True
        clean = True
        try:
            if not self.finished.is_set():
                await self.call("cancel")
                waited = 0.0
                while not self.finished.is_set() and waited < timeout:
                    await asyncio.sleep(0.05)
                    waited += 0.05
                if not self.finished.is_set():
                    clean = False
                    self._loop.call_soon_threadsafe(self._cancel_iteration)
        finally:
            if self._stop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._stop.set)
        return clean

    def stop_nowait(self, grace_s: float = 5.0) -> None:
        """From any thread (app teardown): cancel the session, let run() end, then stop the loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        async def stop() -> None:
            try:
                await _resolve(self.session.cancel())
            except Exception:
                pass
            if self._iter_task is not None and not self._iter_task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(self._iter_task), timeout=grace_s)
                except BaseException:
                    self._iter_task.cancel()
            if self._stop is not None:
                self._stop.set()

        try:
            asyncio.run_coroutine_threadsafe(stop(), loop)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _cancel_iteration(self) -> None:
        if self._iter_task is not None:
            self._iter_task.cancel()


class EventStreamSession:
    """A session that plays a fixed list of Events, then waits until cancelled.

    Used for tests and as the base of manual mode. ``approve``/``reject`` delegate to the given
    callables (for example a real Workspace) and emit the matching events; every call is recorded.
    """

    def __init__(
        self,
        events: Iterable[Event] = (),
        *,
        delay: float = 0.0,
        on_approve: Callable[..., str] | None = None,  # (candidate_id, confirmed=STATUS): landing.approve
        on_reject: Callable[[str, str], Any] | None = None,
        model: str = "",
        replay: bool = False,
    ) -> None:
        self._events = list(events)
        self._delay = delay
        self._on_approve = on_approve
        self._on_reject = on_reject
        self.model = model
        self.replay = replay
        self.sent: list[str] = []
        self.approved: list[str] = []
        self.rejected: list[tuple[str, str]] = []
        self.cancelled = False
        self._queue: asyncio.Queue[Event | None] | None = None

    def _q(self) -> asyncio.Queue[Event | None]:
        if self._queue is None:
            self._queue = asyncio.Queue()
        return self._queue

    async def run(self) -> AsyncIterator[Event]:
        queue = self._q()
        for event in self._events:
            if self.cancelled:
                break
            if self._delay:
                await asyncio.sleep(self._delay)
            yield event
        while not self.cancelled:
            item = await queue.get()
            if item is None:
                break
            yield item
        yield Done(reason="cancelled" if self.cancelled else "finished")

    def emit(self, event: Event) -> None:
        """Queue an event (call on the session's loop)."""
        self._q().put_nowait(event)

    async def send(self, text: str) -> None:
        self.sent.append(text)
        self.emit(EngineerMessage(text=text))

    async def approve(self, candidate_id: str, confirmed: str = "") -> str:
        self.approved.append(candidate_id)
        commit = self._on_approve(candidate_id, confirmed=confirmed) if self._on_approve else ""
        self.emit(ProposalApproved(candidate_id=candidate_id, commit=commit))
        return commit

    async def reject(self, candidate_id: str, reason: str) -> None:
        self.rejected.append((candidate_id, reason))
        if self._on_reject:
            self._on_reject(candidate_id, reason)
        self.emit(ProposalRejected(candidate_id=candidate_id, reason=reason))

    async def cancel(self) -> None:
        self.cancelled = True
        self._q().put_nowait(None)
