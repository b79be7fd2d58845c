"""Does a converted c0 hold together without a GPU? Import it, build ModelNew, resolve every name.

``check_candidate_dir(directory, problem)`` imports ``model_new.py`` (with ``triton_helpers.py`` beside
it), constructs ``ModelNew(*get_init_inputs())`` on the meta device, checks that its parameters and
buffers are the problem Model's (names and shapes: what the harness copies into it), and resolves, without
compiling anything, every global name the code would look up when it runs:

- in each ``@triton.jit`` function of the candidate and of its ``triton_helpers.py``, every free name
  (not a parameter, not assigned in it) is a global of its module or a builtin, and every
  ``triton_helpers.<name>`` it calls exists there: Triton resolves these only when it compiles the
  kernel on the GPU, where a missing one is a ``NameError`` of the first call;
- in every Python function of ModelNew (forward, the graph methods), every global it loads.

It raises ``ConversionError`` naming what is missing. Nothing here needs a GPU.
"""

from __future__ import annotations

import ast
import builtins
import dis
import importlib.util
import inspect
import sys
import textwrap
import types
import uuid
from pathlib import Path
from typing import Any

from kernelpilot.inductor.helpers import ConversionError
from kernelpilot.problem import load_problem


def _load(directory: Path) -> types.ModuleType:
    name = f"kp_c0_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, directory / "model_new.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.pop("triton_helpers", None)
    sys.path.insert(0, str(directory))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ConversionError(f"model_new.py does not import: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(directory))
        sys.modules.pop("triton_helpers", None)
        if saved is not None:
            sys.modules["triton_helpers"] = saved
    return module


def _free_names(fn: ast.FunctionDef) -> set[str]:
    """Names ``fn`` loads that it neither takes nor assigns (nor binds in a comprehension)."""
    bound = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    bound |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
    loaded: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not fn:
            bound |= {a.arg for a in node.args.args}
    return loaded - bound


def _jit_functions(module: types.ModuleType) -> dict[str, Any]:
    """Name -> JITFunction for every @triton.jit function defined in ``module`` (through autotune wrappers)."""
    out = {}
    for name, value in vars(module).items():
        inner = value
        while type(inner).__name__ in ("Autotuner", "Heuristics") and hasattr(inner, "fn"):
            inner = inner.fn
        if type(inner).__name__ == "JITFunction" and getattr(inner.fn, "__module__", None) == module.__name__:
            out[name] = inner
    return out


def _jit_source(value: Any) -> tuple[ast.FunctionDef, dict[str, Any]]:
    fn = value.fn
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    return node, fn.__globals__


def check_jit_names(module: types.ModuleType, where: str) -> None:
    """Every free name of every @triton.jit function of ``module`` resolves (see the module docstring)."""
    for name, value in _jit_functions(module).items():
        node, scope = _jit_source(value)
        missing = sorted(n for n in _free_names(node) if n not in scope and not hasattr(builtins, n))
        if missing:
            raise ConversionError(f"the Triton function {name} of {where} uses {', '.join(missing)}, which "
                                  f"{where} does not define: Triton would fail compiling it (NameError).")
        for call in ast.walk(node):
            if isinstance(call, ast.Attribute) and isinstance(call.value, ast.Name) and call.value.id in scope:
                owner = scope[call.value.id]
                if isinstance(owner, types.ModuleType) and owner.__name__ == "triton_helpers" and \
                        not hasattr(owner, call.attr):
                    raise ConversionError(f"the Triton function {name} of {where} calls triton_helpers.{call.attr}, "
                                          "which triton_helpers.py beside it does not define.")


def _globals_loaded(fn: Any) -> set[str]:
    names: set[str] = set()
    codes = [fn.__code__]
    while codes:
        code = codes.pop()
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                names.add(str(ins.argval))
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return names


def check_candidate_dir(directory: str | Path, problem: str | Path) -> None:
    """Import, construct on the meta device, resolve names (see the module docstring)."""
    import torch

    directory = Path(directory)
    module = _load(directory)
    if not hasattr(module, "ModelNew"):
        raise ConversionError("model_new.py defines no ModelNew")
    check_jit_names(module, "model_new.py")
    helpers = getattr(module, "triton_helpers", None)
    if isinstance(helpers, types.ModuleType):
        check_jit_names(helpers, "triton_helpers.py")
    for name, fn in vars(module.ModelNew).items():
        if inspect.isfunction(fn):
            missing = sorted(n for n in _globals_loaded(fn) if n not in vars(module) and not hasattr(builtins, n))
            if missing:
                raise ConversionError(f"ModelNew.{name} uses {', '.join(missing)}, which model_new.py does not define.")
    problem_module = load_problem(problem).load_module()
    init = problem_module.get_init_inputs()
    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            new = module.ModelNew(*init)
            torch.manual_seed(0)
            try:
                ref = problem_module.Model(*init)
            except Exception:  # noqa: BLE001 - a constructor that needs values: the CPU, then meta
                ref = None
    except Exception as exc:
        raise ConversionError(f"ModelNew(*get_init_inputs()) fails: {type(exc).__name__}: {exc}") from exc
    if ref is None:
        torch.manual_seed(0)
        ref = problem_module.Model(*init).to("meta")
    want = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    have = {k: tuple(v.shape) for k, v in new.state_dict().items()}
    wrong = sorted(k for k, shape in want.items() if have.get(k) != shape)
    if wrong:
        raise ConversionError(f"ModelNew's state does not match Model's at {', '.join(wrong[:5])}: the harness "
                              "could not copy Model's weights into it by name.")
