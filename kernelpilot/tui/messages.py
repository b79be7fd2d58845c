"""Messages workers post to the app: the only way work off the UI path changes the screen."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from kernelpilot.agent.events import CandidateEvaluated, Event
    from kernelpilot.tui.gpu import GpuReading
    from kernelpilot.tui.startup import Startup


class AgentEvent(Message):
    """One Event from the session (agent loop, replay, or manual pairing)."""

    def __init__(self, event: Event) -> None:
        super().__init__()
        self.event = event


class StartupReady(Message):
    """The session was built off the UI thread and can be started."""

    def __init__(self, startup: Startup) -> None:
        super().__init__()
        self.startup = startup


class ResumeOffered(Message):
    """A previous session of this project can be resumed: ask the engineer."""

    def __init__(self, session_id: str, description: str) -> None:
        super().__init__()
        self.session_id = session_id
        self.description = description


class GpuUpdated(Message):
    def __init__(self, reading: GpuReading | None) -> None:
        super().__init__()
        self.reading = reading

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuUpdated)


class FilesEdited(Message):
    """The engineer saved candidate files (seen by the pairing watcher)."""

    def __init__(self, paths: list[Path]) -> None:
        super().__init__()
        self.paths = paths


class EditEvaluated(Message):
    """The engineer's edit was checkpointed and evaluated."""

    def __init__(self, event: CandidateEvaluated, paths: list[Path]) -> None:
        super().__init__()
        self.event = event
        self.paths = paths


class ProblemAnalysed(Message):
    """The problem's shapes, bytes and FLOPs (``info``, a ProblemInfo) and any cached ceilings of this GPU."""

    def __init__(self, info: Any = None, ceilings: dict[str, Any] | None = None, error: str = "") -> None:
        super().__init__()
        self.info = info
        self.ceilings = ceilings
        self.error = error


class CeilingsFound(Message):
    """This GPU's measured ceilings, from the engine's cache (the card's floor before the baselines come)."""

    def __init__(self, ceilings: dict[str, Any]) -> None:
        super().__init__()
        self.ceilings = ceilings


class BaselinesMeasured(Message):
    """Eager and torch.compile times from the evaluation worker (``baselines``), or why there are none, or
    ``deferred``: a save came first (they are measured again after its verdict)."""

    def __init__(self, baselines: Any = None, error: str = "", deferred: bool = False) -> None:
        super().__init__()
        self.baselines = baselines
        self.error = error
        self.deferred = deferred


class CachedBaselinesFound(Message):
    """Baselines of this problem from an earlier session on this machine (``cached``, a
    machine_baselines.CachedBaselines), or why the machine's cache could not be read (``error``)."""

    def __init__(self, cached: Any = None, error: str = "") -> None:
        super().__init__()
        self.cached = cached
        self.error = error
