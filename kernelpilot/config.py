"""Project configuration: defaults < config file < ``KERNELPILOT_*`` environment < explicit overrides.

The config file is ``kernelpilot.toml`` (top-level keys) or the ``[tool.kernelpilot]`` table of
``pyproject.toml``. It is searched from the start directory upward, stopping at the git root (the
first directory holding ``.git``); in one directory ``kernelpilot.toml`` wins over pyproject.toml.
Paths in a file are relative to the directory holding that file (the project ``root``); paths from
the environment or from overrides (command-line flags) are relative to the current directory.

| key | type | default | meaning |
|---|---|---|---|
| ``problem`` | path | none | the operator to speed up, a KernelBench-format ``.py`` file |
| ``candidate_dir`` | path | ``kernels/<problem stem>`` (1) | where candidates live; the agent may write only there |
| ``model`` | string | none | litellm model string, e.g. ``anthropic/claude-sonnet-4-5``, ``openai/gpt-5`` (2) |
| ``api_base`` | string | none | base URL for self-hosted models (ollama, vLLM, any OpenAI-compatible server) |
| ``max_turns`` | int > 0 | 40 | agent turns per session |
| ``max_tokens`` | int > 0 | 2000000 | prompt + completion tokens per session |
| ``max_cost_usd`` | float >= 0 | 5.0 | spend limit per session in US dollars (litellm's price table) |
| ``max_wall_s`` | float > 0 | 3600 | wall-clock limit per session, seconds |
| ``compile_mode`` | ``"default"`` or ``"max-autotune"`` | ``"default"`` | torch.compile mode of the baseline |
| ``trials`` | int > 0 | 5 | correctness trials (fresh random inputs each) per evaluation |
| ``timeout_s`` | float > 0 | 300 | limit for one build or one evaluation step, seconds |
| ``cuda_graphs`` | bool | false | also time the candidate and baselines captured in CUDA graphs |
| ``tolerances`` | table dtype -> [atol, rtol] | (3) | element-wise check ``|out - ref| <= atol + rtol*|ref|`` |
| ``max_normalized_error`` | table dtype -> float | (4) | bound on ``||out - ref64|| / ||ref64||`` |
| ``extra_shapes`` | array of tables | [] | more input shapes to verify on, see below |
| ``allowed_libraries`` | list of strings | [] | libraries a candidate may call (5) |
| ``relaxed_policy`` | list of strings | [] | names of static-policy rules to downgrade from errors to warnings |
| ``keys`` | table action -> key | {} | TUI key bindings overriding the defaults, e.g. ``approve = "a"`` |

(1) ``<dir>/candidate`` for a ``<dir>/problem.py``. (2) Or ``ollama_chat/qwen3-coder``, ``hosted_vllm/<name>``.
(3) float32 [1e-4, 1e-4], float16 and bfloat16 [1e-2, 1e-2], float64 [1e-7, 1e-7].
(4) float32 1e-5, float16 2e-3, bfloat16 1e-2, float64 1e-12.
(5) E.g. ``"cublas"``, ``"cublaslt"``, ``"cudnn"``, ``"cutlass"``, ``"torch.matmul"``.

Dtype names in ``tolerances`` and ``max_normalized_error`` are torch names (``float32``,
``bfloat16`` ...); the aliases ``fp32``, ``float``, ``fp16``, ``half``, ``bf16``, ``fp64``, ``double``
are accepted. Tables given in a file are merged over the defaults, key by key.

``extra_shapes`` entries are ``{name = "...", inputs = ...}`` where ``inputs`` is either a list of
shapes, one per tensor returned by ``get_inputs()`` in order (same dtypes; non-tensor arguments are
kept), e.g. ``inputs = [[64, 8192]]``, or a string holding a Python expression evaluated in the
problem module's namespace that returns the forward arguments, e.g.
``inputs = "[torch.rand(3, 5000, dtype=torch.bfloat16)]"``.

Environment variables: ``KERNELPILOT_<KEY>`` for the scalar and list keys (``KERNELPILOT_MODEL``,
``KERNELPILOT_TRIALS``, ``KERNELPILOT_ALLOWED_LIBRARIES=cublas,cudnn`` ...; lists are
comma-separated, booleans are 1/0/true/false). Other ``KERNELPILOT_*`` variables (``_DATA_DIR``,
``_BUILD_DIR``, ``_ARCH``) belong to other parts and are ignored here.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.config_file import find_config_file, find_git_root
from kernelpilot.errors import ConfigError

COMPILE_MODES = ("default", "max-autotune")

DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32", "float32": "float32",
    "fp16": "float16", "half": "float16", "float16": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp64": "float64", "double": "float64", "float64": "float64",
}

DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
    "float64": (1e-7, 1e-7),
}
DEFAULT_MAX_NORMALIZED_ERROR: dict[str, float] = {
    "float32": 1e-5,
    "float16": 2e-3,
    "bfloat16": 1e-2,
    "float64": 1e-12,
}


@dataclass
class ProjectConfig:
    """The resolved configuration; see the module docstring for every key."""

    root: Path
    problem: Path | None = None
    candidate_dir: Path | None = None
    tolerances: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    max_normalized_error: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_MAX_NORMALIZED_ERROR)
    )
    extra_shapes: list[dict[str, Any]] = field(default_factory=list)
    allowed_libraries: list[str] = field(default_factory=list)
    relaxed_policy: list[str] = field(default_factory=list)
    model: str | None = None
    api_base: str | None = None
    max_turns: int = 40
    max_tokens: int = 2_000_000
    max_cost_usd: float = 5.0
    max_wall_s: float = 3600.0
    compile_mode: str = "default"
    trials: int = 5
    timeout_s: float = 300.0
    cuda_graphs: bool = False
    keys: dict[str, str] = field(default_factory=dict)
    config_file: Path | None = None  # the file the values came from, if any

    @property
    def budgets(self) -> dict[str, float | int]:
        return {
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "max_cost_usd": self.max_cost_usd,
            "max_wall_s": self.max_wall_s,
        }

    def tolerance(self, dtype: str) -> tuple[float, float]:
        """(atol, rtol) for a dtype name such as ``"bfloat16"`` or ``"torch.bfloat16"``."""
        name = dtype.removeprefix("torch.")
        return self.tolerances.get(DTYPE_ALIASES.get(name, name), self.tolerances.get("float32", (1e-4, 1e-4)))


# key -> kind used by the validator
_SCALARS: dict[str, str] = {
    "problem": "path", "candidate_dir": "path", "model": "str", "api_base": "str",
    "max_turns": "posint", "max_tokens": "posint", "max_cost_usd": "nonnegfloat",
    "max_wall_s": "posfloat", "compile_mode": "compile_mode", "trials": "posint",
    "timeout_s": "posfloat", "cuda_graphs": "bool",
    "allowed_libraries": "strlist", "relaxed_policy": "strlist",
}
_TABLES = ("tolerances", "max_normalized_error", "extra_shapes", "keys")
KEYS: tuple[str, ...] = (*_SCALARS, *_TABLES)
ENV_PREFIX = "KERNELPILOT_"


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


class _Checker:
    """Validates one source's raw values; ``where`` names the source in messages."""

    def __init__(self, where: str, base: Path) -> None:
        self.where = where
        self.base = base

    def fail(self, key: str, expected: str, value: Any) -> ConfigError:
        return ConfigError(f"{key} in {self.where} must be {expected}, got {_describe(value)}; fix it there.")

    def scalar(self, key: str, kind: str, value: Any) -> Any:
        if kind == "path":
            if not isinstance(value, str) or not value:
                raise self.fail(key, "a non-empty path string", value)
            path = Path(value).expanduser()
            return path if path.is_absolute() else (self.base / path).resolve()
        if kind == "str":
            if not isinstance(value, str) or not value:
                raise self.fail(key, "a non-empty string", value)
            return value
        if kind == "posint":
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise self.fail(key, "a positive integer", value)
            return value
        if kind in ("posfloat", "nonnegfloat"):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not ok or value < 0 or (kind == "posfloat" and value == 0):
                raise self.fail(key, "a positive number" if kind == "posfloat" else "a number >= 0", value)
            return float(value)
        if kind == "bool":
            if not isinstance(value, bool):
                raise self.fail(key, "true or false", value)
            return value
        if kind == "compile_mode":
            if value not in COMPILE_MODES:
                raise self.fail(key, " or ".join(f'"{m}"' for m in COMPILE_MODES), value)
            return value
        if kind == "strlist":
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise self.fail(key, "a list of non-empty strings", value)
            return list(value)
        raise AssertionError(kind)

    def dtype(self, key: str, name: Any) -> str:
        canonical = DTYPE_ALIASES.get(str(name).removeprefix("torch.").lower())
        if canonical is None:
            raise ConfigError(
                f"{key} in {self.where} names unknown dtype {name!r}; use one of "
                f"float32, float16, bfloat16, float64."
            )
        return canonical

    def tolerances(self, value: Any) -> dict[str, tuple[float, float]]:
        if not isinstance(value, dict):
            raise self.fail("tolerances", "a table of dtype = [atol, rtol]", value)
        out: dict[str, tuple[float, float]] = {}
        for name, pair in value.items():
            key = f"tolerances.{name}"
            ok = (
                isinstance(pair, (list, tuple)) and len(pair) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in pair)
            )
            if not ok:
                raise self.fail(key, "a pair [atol, rtol] of numbers >= 0", pair)
            out[self.dtype(key, name)] = (float(pair[0]), float(pair[1]))
        return out

    def max_normalized_error(self, value: Any) -> dict[str, float]:
        if not isinstance(value, dict):
            raise self.fail("max_normalized_error", "a table of dtype = number", value)
        out: dict[str, float] = {}
        for name, bound in value.items():
            key = f"max_normalized_error.{name}"
            if isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound <= 0:
                raise self.fail(key, "a positive number", bound)
            out[self.dtype(key, name)] = float(bound)
        return out

    def extra_shapes(self, value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            raise self.fail("extra_shapes", "an array of tables {name, inputs}", value)
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for i, entry in enumerate(value):
            key = f"extra_shapes[{i}]"
            if not isinstance(entry, dict) or set(entry) != {"name", "inputs"}:
                raise self.fail(key, "a table with exactly the keys name and inputs", entry)
            name, inputs = entry["name"], entry["inputs"]
            if not isinstance(name, str) or not name or name == "default" or name in seen:
                raise self.fail(f"{key}.name", "a unique non-empty string other than 'default'", name)
            seen.add(name)
            if isinstance(inputs, str):
                try:
                    compile(inputs, f"<{key}.inputs>", "eval")
                except SyntaxError as exc:
                    raise ConfigError(
                        f"{key}.inputs in {self.where} is not a valid Python expression ({exc.msg}); fix it there."
                    ) from None
            elif not (
                isinstance(inputs, list)
                and all(
                    isinstance(shape, list)
                    and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
                    for shape in inputs
                )
            ):
                raise self.fail(f"{key}.inputs", "a list of shapes (lists of ints >= 0) or a Python expression string",
                                inputs)
            out.append({"name": name, "inputs": inputs})
        return out

    def keys(self, value: Any) -> dict[str, str]:
        if (not isinstance(value, dict)
                or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in value.items())):
            raise self.fail("keys", "a table of action = \"key\" strings", value)
        return dict(value)


def _unknown_key(key: str, where: str) -> ConfigError:
    close = difflib.get_close_matches(key, KEYS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown key {key!r} in {where}{hint}; rename or remove it (known keys: {', '.join(KEYS)}).")


def _apply(values: dict[str, Any], raw: Mapping[str, Any], checker: _Checker) -> None:
    for key, value in raw.items():
        if value is None:
            continue
        if key in _SCALARS:
            values[key] = checker.scalar(key, _SCALARS[key], value)
        elif key == "tolerances":
            values["tolerances"] = {**values["tolerances"], **checker.tolerances(value)}
        elif key == "max_normalized_error":
            values["max_normalized_error"] = {**values["max_normalized_error"], **checker.max_normalized_error(value)}
        elif key == "extra_shapes":
            values["extra_shapes"] = checker.extra_shapes(value)
        elif key == "keys":
            values["keys"] = {**values["keys"], **checker.keys(value)}
        else:
            raise _unknown_key(key, checker.where)


def _parse_env_value(key: str, kind: str, text: str, name: str) -> Any:
    if kind in ("path", "str", "compile_mode"):
        return text
    if kind == "strlist":
        return [item.strip() for item in text.split(",") if item.strip()]
    if kind == "bool":
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"environment variable {name} must be 1/0/true/false, got {text!r}; fix or unset it.")
    try:
        return int(text) if kind == "posint" else float(text)
    except ValueError:
        expected = "an integer" if kind == "posint" else "a number"
        raise ConfigError(f"environment variable {name} must be {expected}, got {text!r}; fix or unset it.") from None


def env_values(env: Mapping[str, str]) -> dict[str, Any]:
    """The config values set by ``KERNELPILOT_<KEY>`` variables (tables cannot be set this way)."""
    out: dict[str, Any] = {}
    for key, kind in _SCALARS.items():
        name = ENV_PREFIX + key.upper()
        if name in env:
            out[key] = _parse_env_value(key, kind, env[name], name)
    return out


def default_candidate_dir(problem: Path, root: Path) -> Path:
    """``<root>/kernels/<problem stem>``; ``<op>/candidate`` for one directory per operator (``<op>/problem.py``)."""
    if problem.name == "problem.py":
        return problem.parent / "candidate"
    return root / "kernels" / problem.stem


def load_config(
    start: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> ProjectConfig:
    """Resolve the project configuration, lowest to highest: defaults, file, environment, overrides.

    ``overrides`` holds already-parsed values (e.g. from command-line flags); ``None`` values are
    skipped so flags that were not given leave lower sources in place.
    """
    start = (start or Path.cwd()).resolve()
    env = os.environ if env is None else env
    cwd = Path.cwd()
    values: dict[str, Any] = {
        "tolerances": dict(DEFAULT_TOLERANCES),
        "max_normalized_error": dict(DEFAULT_MAX_NORMALIZED_ERROR),
        "keys": {},
    }
    found = find_config_file(start)
    start_dir = start.parent if start.is_file() else start
    root = start_dir
    config_file: Path | None = None
    if found is not None:
        config_file, table = found
        root = config_file.parent
        where = str(config_file) if config_file.name == "kernelpilot.toml" else f"[tool.kernelpilot] of {config_file}"
        _apply(values, table, _Checker(where, root))
    else:
        root = find_git_root(start_dir) or start_dir

    env_checker = _Checker("the environment", cwd)
    for key, value in env_values(env).items():
        env_checker.where = f"environment variable {ENV_PREFIX}{key.upper()}"
        _apply(values, {key: value}, env_checker)

    if overrides:
        _apply(values, dict(overrides), _Checker("the command line", cwd))

    config = ProjectConfig(root=root, config_file=config_file, **values)
    if config.candidate_dir is None and config.problem is not None:
        config.candidate_dir = default_candidate_dir(config.problem, root)
    return config
