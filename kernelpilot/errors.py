"""The one exception type that reaches the user: a sentence on what is wrong and how to fix it.

Every class has a ``kind``: a short stable word that machine-readable output (``--json``,
``--jsonl``) prints next to the message, ``{"error": "<message>", "kind": "<kind>"}``, so scripts
can branch on the kind instead of matching the words of the message.
"""

from __future__ import annotations


class KernelpilotError(Exception):
    """An error the user can act on.

    ``str(err)`` is one sentence saying what is wrong and what to do. The CLI prints it as
    ``kernelpilot: <message>`` and exits with ``exit_code`` (never a traceback).
    """

    exit_code: int = 2
    kind: str = "error"

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(KernelpilotError):
    """The command line is wrong (an unknown flag, a bad value, a missing argument)."""

    kind = "usage"

    def __init__(self, message: str, *, parser: object = None) -> None:
        super().__init__(message)
        self.parser = parser  # the argparse parser that refused it, to print its usage line


class NotFoundError(KernelpilotError):
    """A file or directory named on the command line does not exist."""

    kind = "not_found"


class ProblemError(KernelpilotError):
    """The problem file is missing or not in KernelBench format."""

    kind = "bad_problem"


class ProblemNotFoundError(ProblemError, NotFoundError):
    """The problem file (or the project directory) does not exist."""

    kind = "not_found"


class CandidateNotFoundError(NotFoundError):
    """The candidate directory or file does not exist."""


class ConfigError(KernelpilotError):
    """The project configuration is invalid."""

    kind = "bad_config"


class WorkspaceError(KernelpilotError):
    """A git/worktree operation was refused (not a repo, dirty files, guard violation)."""

    kind = "workspace"


class GuardError(WorkspaceError):
    """A write outside the candidate files was refused."""

    kind = "guard"


class ExtensionBuildError(KernelpilotError):
    """The candidate's extension did not compile, link or load."""

    kind = "build_failed"


class ToolchainError(KernelpilotError):
    """The CUDA toolkit (nvcc, CUDA_HOME) could not be found or used."""

    kind = "toolchain"


class NoGPUError(KernelpilotError):
    """The command needs a CUDA GPU and none is visible."""

    kind = "no_gpu"


class ModelConfigError(KernelpilotError):
    """No LLM model is configured, or its configuration is invalid."""

    kind = "bad_config"


class InstallError(KernelpilotError):
    """A part of kernelpilot or a package it needs is not installed."""

    kind = "not_installed"


class ApprovalRefusedError(WorkspaceError):
    """A candidate's last verdict is not one that may be approved (kernelpilot.approval_rule)."""

    kind = "approval_refused"

    def __init__(self, message: str, *, status: str = "") -> None:
        super().__init__(message)
        self.status = status  # the verdict's shown status (build_error, superseded, unevaluated, ...)


class ApprovalConfirmationError(ApprovalRefusedError):
    """The candidate may be approved only with an explicit confirmation naming its status (incorrect, ...)."""

    kind = "needs_confirmation"


class BaselinesDeferred(KernelpilotError):
    """A pairing session's baselines gave way to a save (Evaluator.baselines(deferrable=True)): not a failure; they
    are measured again once the save's verdict is in."""

    kind = "deferred"


class ScriptError(KernelpilotError):
    """The user's own script (``hotspots SCRIPT``, ``apply SCRIPT``) raised an exception."""

    kind = "script_error"

    def __init__(self, message: str, *, summary: str = "") -> None:
        super().__init__(message)
        self.summary = summary or message  # what it raised and where, without the advice
