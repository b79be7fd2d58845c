"""The one exception type that reaches the user: a sentence on what is wrong and how to fix it."""

from __future__ import annotations


class KernelpilotError(Exception):
    """An error the user can act on.

    ``str(err)`` is one sentence saying what is wrong and what to do. The CLI prints it as
    ``kernelpilot: <message>`` and exits with ``exit_code`` (never a traceback).
    """

    exit_code: int = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ProblemError(KernelpilotError):
    """The problem file is missing or not in KernelBench format."""


class ConfigError(KernelpilotError):
    """The project configuration is invalid."""


class WorkspaceError(KernelpilotError):
    """A git/worktree operation was refused (not a repo, dirty files, guard violation)."""


class GuardError(WorkspaceError):
    """A write outside the candidate files was refused."""


class ToolchainError(KernelpilotError):
    """The CUDA toolkit (nvcc, CUDA_HOME) could not be found or used."""


class NoGPUError(KernelpilotError):
    """The command needs a CUDA GPU and none is visible."""


class ModelConfigError(KernelpilotError):
    """No LLM model is configured, or its configuration is invalid."""
