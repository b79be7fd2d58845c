"""Remove secrets from text before it is written anywhere (transcripts, verdicts, logs).

Two sources of secrets are recognised:

* the values of environment variables whose *names* look secret (``*_API_KEY``, ``*TOKEN*``,
  ``*SECRET*``, ``*PASSWORD*``, cloud credential variables) in the current process environment;
* well-known token shapes (OpenAI/Anthropic ``sk-`` keys, GitHub tokens, AWS access key ids, Slack
  tokens, ``Bearer`` headers, PEM private-key blocks), wherever they appear.

Both are replaced with ``[REDACTED]``. The pass is conservative: it prefers hiding a harmless
string that looks like a key over leaking a real one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

# Environment variable names whose values are secrets.
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|COOKIE|^AUTH_|_AUTH$|AUTHORIZATION)", re.IGNORECASE
)
# Names that match the pattern above but are never secrets (their values are paths or flags).
_NOT_SECRET_NAMES = frozenset({"SSH_AUTH_SOCK"})

# Values shorter than this are not redacted by value (a variable set to "1" or "true" must not
# turn every "1" in a transcript into [REDACTED]).
_MIN_VALUE_LEN = 8

_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        re.DOTALL,
    ),
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[^\n]*(?:\n[A-Za-z0-9+/=\n]*)?"),
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{10,}"),
    re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),
    re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9_\-\.=+/]{12,}"),
    re.compile(
        r"(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)"
        r"(?!\[REDACTED\])([^\s\"',;}]{8,})"
    ),
)


def secret_env_names(env: Mapping[str, str] | None = None) -> list[str]:
    """Names of variables in ``env`` (default ``os.environ``) whose values are treated as secrets."""
    env = os.environ if env is None else env
    return sorted(n for n in env if is_secret_name(n))


def is_secret_name(name: str) -> bool:
    """True when an environment variable with this name holds a secret by convention."""
    return name not in _NOT_SECRET_NAMES and bool(_SECRET_NAME.search(name))


def _secret_values(env: Mapping[str, str] | None) -> list[str]:
    env = os.environ if env is None else env
    values = {env[n] for n in env if is_secret_name(n) and len(env[n]) >= _MIN_VALUE_LEN}
    return sorted(values, key=len, reverse=True)  # longest first: a key containing another


def redact(text: str, env: Mapping[str, str] | None = None) -> str:
    """Return ``text`` with secret env values and token-shaped strings replaced by ``[REDACTED]``."""
    if not text:
        return text
    for value in _secret_values(env):
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern in _PATTERNS:
        if pattern.groups == 2:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def redact_obj(obj: Any, env: Mapping[str, str] | None = None) -> Any:
    """Redact every string in a JSON-like structure (dicts, lists, tuples); keys too.

    Values stored under a secret-looking key (``{"api_key": "..."}``) are replaced whole.
    """
    if isinstance(obj, str):
        return redact(obj, env)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            key = redact(k, env) if isinstance(k, str) else k
            if isinstance(k, str) and isinstance(v, str) and v and _is_secret_key(k):
                out[key] = REDACTED
            else:
                out[key] = redact_obj(v, env)
        return out
    if isinstance(obj, list):
        return [redact_obj(v, env) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(v, env) for v in obj)
    return obj


def _is_secret_key(key: str) -> bool:
    normalised = key.upper().replace("-", "_")
    return normalised not in {"TOKENS", "MAX_TOKENS", "INPUT_TOKENS", "OUTPUT_TOKENS", "TOTAL_TOKENS"} and (
        bool(re.search(r"(API_?KEY|SECRET|PASSWORD|PASSWD|^TOKEN$|_TOKEN$|ACCESS_TOKEN|AUTHORIZATION)", normalised))
    )
