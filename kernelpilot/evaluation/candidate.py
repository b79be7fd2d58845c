"""A candidate implementation of a problem: a directory (model_new.py + binding.cpp + *.cu) or one .py file.

Directory form: ``model_new.py`` defines ``class ModelNew`` and gets its kernels with
``load_extension(__file__)``; ``binding.cpp`` holds the torch glue and every ``*.cu`` file is compiled.
Single-file form: a KernelBench ``ModelNew`` module that compiles its kernels with ``load_inline`` or
``cpp_extension.load`` (however imported: compile_calls.py).
Triton form: ``model_new.py`` (a directory) or one .py file whose kernels are ``@triton.jit`` functions,
in that file or in .py files beside it (a KernelBench Triton-backend file is accepted unchanged); no
load_inline, no load_extension. Its kernels are compiled ahead of time by triton_build.py.
CuTe form: ``model_new.py`` (a directory) or one .py file (a KernelBench ``cute``-backend file, unchanged) whose
kernels are ``@cute.kernel`` / ``@cute.jit`` functions of CUTLASS's CuTe DSL (static/cute_names.py), in that file
or in .py files beside it; they compile in the worker's warm-up (build/cute_build.py, worker/cute_hook.py).
Loading is static (ast): nothing of the candidate runs here.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, Union

from kernelpilot.errors import KernelpilotError
from kernelpilot.problem import Problem
from kernelpilot.evaluation.static.compile_calls import compile_calls
from kernelpilot.evaluation.static.cute_names import cute_kernel_names, has_cute_kernels

MODEL_FILE = "model_new.py"
BINDING_FILE = "binding.cpp"
KERNEL_SUFFIXES = (".cu", ".cuh")
NATIVE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")
MODEL_CLASS = "ModelNew"

CandidateKind = Literal["directory", "single_file", "triton", "cute", "pytorch"]


class CandidateError(KernelpilotError):
    """The candidate is missing files or is not in a format kernelpilot can build."""

    kind = "bad_candidate"


@dataclass
class Candidate:
    """Where a candidate's files are and which of them are compiled."""

    path: Path  # the directory, or the .py file of a single-file candidate
    kind: CandidateKind
    model_file: Path  # the module that defines ModelNew
    sources: list[Path] = field(default_factory=list)  # compiled sources: binding.cpp first, then *.cu
    kernel_files: list[Path] = field(default_factory=list)  # *.cu/*.cuh, or the .py files with @triton.jit kernels
    files: list[Path] = field(default_factory=list)  # every candidate file (python + native), sorted

    @property
    def root(self) -> Path:
        """The directory diagnostics are relative to."""
        return self.path if self.path.is_dir() else self.path.parent

    @property
    def name(self) -> str:
        return self.path.name if self.path.is_dir() else self.path.stem

    def relative(self, file: Path) -> str:
        try:
            return str(file.resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(file)


def load_candidate(path: str | Path) -> Candidate:
    """Check a candidate's layout statically and describe it; CandidateError says what is missing."""
    p = Path(path).expanduser()
    if not p.exists():
        raise CandidateError(f"Candidate {p} does not exist: pass a candidate directory or a ModelNew .py file.")
    p = p.resolve()
    if p.is_dir():
        return _load_directory(p)
    if p.suffix != ".py":
        raise CandidateError(
            f"Candidate {p.name} is neither a directory nor a .py file: pass the directory that holds "
            f"{MODEL_FILE}, or a single-file ModelNew module."
        )
    if p.name == MODEL_FILE and (_has_directory_layout(p.parent) or _triton_siblings(p.parent, p)
                                 or _triton_siblings(p.parent, p, has_cute_kernels)):
        return _load_directory(p.parent)
    return _load_single_file(p)


def _has_directory_layout(directory: Path) -> bool:
    return (directory / BINDING_FILE).is_file() or any(directory.glob("*.cu"))


def _load_directory(directory: Path) -> Candidate:
    model = directory / MODEL_FILE
    if not model.is_file():
        raise CandidateError(
            f"Candidate directory {directory} has no {MODEL_FILE}: add one that defines class {MODEL_CLASS} "
            "and calls load_extension(__file__)."
        )
    tree = _parse(model)
    _require_model_class(tree, model)
    kernels = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix in KERNEL_SUFFIXES)
    cu_files = [p for p in kernels if p.suffix == ".cu"]
    binding = directory / BINDING_FILE
    if not cu_files:
        if compile_calls(tree):  # a KernelBench module that happens to be named model_new.py
            return _single_file(model, tree)
        cute_files = ([model] if has_cute_kernels(tree) else []) + _triton_siblings(directory, model, has_cute_kernels)
        if cute_files and not _calls(tree, "load_extension"):
            files = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix == ".py")
            return Candidate(path=directory, kind="cute", model_file=model, kernel_files=sorted(cute_files),
                             files=files)
        triton_files = ([model] if has_triton_kernels(tree) else []) + _triton_siblings(directory, model)
        if triton_files and not _calls(tree, "load_extension"):
            files = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix == ".py")
            return Candidate(path=directory, kind="triton", model_file=model, kernel_files=sorted(triton_files),
                             files=files)
        if _calls(tree, "load_extension"):
            raise CandidateError(
                f"Candidate directory {directory} has no .cu files, no @triton.jit kernels, and {MODEL_FILE} does "
                "not call load_inline: put the kernels (device code only, with an explicit instantiation of each "
                "instance launched) in kernel.cu next to binding.cpp, which launches them through "
                "kernelpilot/launch.h, or write them as @triton.jit functions."
            )
        # no kernel of its own (a PyTorch rewrite): judged and timed all the same, and said so (no-kernel)
        files = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix == ".py")
        return Candidate(path=directory, kind="pytorch", model_file=model, files=files)
    if not binding.is_file():
        raise CandidateError(
            f"Candidate directory {directory} has .cu files but no {BINDING_FILE}: add one that includes "
            "the torch headers it uses (torch/csrc/utils/pybind.h, ATen/core/Tensor.h, ...), launches the "
            "kernels through kernelpilot/launch.h and defines PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)."
        )
    if not _calls(tree, "load_extension"):
        raise CandidateError(
            f"{MODEL_FILE} in {directory} never calls load_extension: add "
            "`from kernelpilot.extension import load_extension; _ext = load_extension(__file__)`."
        )
    files = sorted(p for p in directory.iterdir() if p.is_file() and (p.suffix in NATIVE_SUFFIXES or p.suffix == ".py"))
    return Candidate(
        path=directory,
        kind="directory",
        model_file=model,
        sources=[binding, *cu_files],
        kernel_files=kernels,
        files=files,
    )


def _load_single_file(file: Path) -> Candidate:
    return _single_file(file, _parse(file))


def _single_file(file: Path, tree: ast.Module) -> Candidate:
    _require_model_class(tree, file)
    if not compile_calls(tree):  # load_inline / cpp_extension.load, however imported
        if has_cute_kernels(tree):  # a KernelBench cute-backend file
            return Candidate(path=file, kind="cute", model_file=file, kernel_files=[file], files=[file])
        if has_triton_kernels(tree):
            return Candidate(path=file, kind="triton", model_file=file, kernel_files=[file], files=[file])
        return Candidate(path=file, kind="pytorch", model_file=file, files=[file])  # a PyTorch rewrite
    return Candidate(path=file, kind="single_file", model_file=file, sources=[], kernel_files=[], files=[file])


def has_triton_kernels(tree: ast.Module) -> bool:
    """Whether the module defines a function decorated with ``triton.jit`` (or ``jit`` imported from triton)."""
    return bool(triton_kernel_names(tree))


def triton_kernel_names(tree: ast.Module) -> list[str]:
    """Names of the module-level ``@triton.jit`` functions (``@triton.jit(...)`` and ``from triton import jit`` too)."""
    from_triton = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "triton"
                   for a in n.names if a.name == "jit"}
    modules = {"triton"} | {a.asname for n in tree.body if isinstance(n, ast.Import) for a in n.names
                            if a.name == "triton" and a.asname}  # import triton as tr: @tr.jit
    names = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            if (isinstance(target, ast.Attribute) and target.attr == "jit" and isinstance(target.value, ast.Name)
                    and target.value.id in modules) or (isinstance(target, ast.Name) and target.id in from_triton):
                names.append(node.name)
                break
    return names


def triton_kernels(candidate: Candidate) -> list[str]:
    """Every @triton.jit function name in a Triton candidate's files (its own kernels, for the audit)."""
    names: list[str] = []
    for file in candidate.kernel_files if candidate.kind == "triton" else []:
        names += triton_kernel_names(_parse(file))
    return names


def cute_kernels(candidate: Candidate) -> list[str]:
    """Every ``@cute.kernel`` function name in a CuTe candidate's files (its own kernels, for the audit)."""
    names: list[str] = []
    for file in candidate.kernel_files if candidate.kind == "cute" else []:
        names += [n for n in cute_kernel_names(_parse(file)) if n not in names]
    return names


_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                     r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(")


_SCOPE = re.compile(r"\bnamespace\s+([A-Za-z_][\w:]*)?\s*\{|[{}]")


def _qualified_globals(text: str) -> list[str]:
    """The ``__global__`` names of a text, each with the named namespaces around it (``at::native::k``):
    braces are followed from the start of the text (an anonymous namespace adds nothing, as the demangled
    names the profiler records say ``(anonymous namespace)``, which the audit ignores)."""
    marks = [(m.start(), m.group(0) if m.group(0) in ("{", "}") else "ns", m.group(1) or "")
             for m in _SCOPE.finditer(text)]
    marks += [(m.start(), "global", m.group(1)) for m in _GLOBAL.finditer(text)]
    stack: list[str] = []
    names: list[str] = []
    for _, what, name in sorted(marks):
        if what == "ns":
            stack.append(name)
        elif what == "{":
            stack.append("")
        elif what == "}":
            if stack:
                stack.pop()
        else:
            names.append("::".join([n for n in stack if n] + [name]))
    return names


def cuda_kernel_names(candidate: Candidate) -> list[str]:
    """The name of every ``__global__`` function in a candidate's files (its .cu sources, or the CUDA text a
    single-file candidate hands ``load_inline``): its own kernels, for the audit, also when the build did
    not list them (a library loaded from the cache, a compile in the first forward) or when a name looks
    like a library's (``gelu_cudnn_kernel``). A kernel declared inside named namespaces comes qualified
    (``mine::gelu``), so that the audit can tell an own kernel from torch's of the same name."""
    names: list[str] = []
    for file in candidate.files or [candidate.model_file]:
        if file.suffix not in (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp"):
            continue
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        names += [n for n in _qualified_globals(text) if n not in names]
    return names


LIBRARY_DECLARATION = "KERNELPILOT_LIBRARIES"  # e.g. ("cublas",): library calls this candidate keeps
ORIGIN_DECLARATION = "KERNELPILOT_ORIGIN"  # "inductor": torch.compile's own kernels (kernelpilot.inductor)


def declarations(candidate: Candidate) -> dict[str, object]:
    """Module-level ``KERNELPILOT_*`` constants of the model file, read statically (literals only)."""
    out: dict[str, object] = {}
    for node in _parse(candidate.model_file).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.startswith("KERNELPILOT_"):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def _triton_siblings(directory: Path, model: Path, defines: Callable[[ast.Module], bool] | None = None) -> list[Path]:
    """The .py files beside ``model`` that define @triton.jit kernels (``defines``: other kernels, CuTe's);
    unparsable ones are left to the policy."""
    found = []
    for p in sorted(directory.glob("*.py")):
        if p.resolve() == model.resolve():
            continue
        try:
            tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        except (SyntaxError, UnicodeDecodeError):
            continue
        if (defines or has_triton_kernels)(tree):
            found.append(p)
    return found


def _parse(file: Path) -> ast.Module:
    try:
        return ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    except SyntaxError as exc:
        raise CandidateError(
            f"{file.name} line {exc.lineno}: Python syntax error ({exc.msg}): fix the source."
        ) from exc
    except UnicodeDecodeError as exc:
        raise CandidateError(f"{file.name} is not UTF-8 text: save it as UTF-8.") from exc


def _require_model_class(tree: ast.Module, file: Path) -> None:
    """``ModelNew`` is bound at module level: a class (with a forward of its own, or bases it may inherit one
    from: ``class ModelNew(Model)``), or a name bound to another class (``ModelNew = FusedModel``, ``from x
    import Y as ModelNew``), as KernelBench takes whatever the module calls ModelNew."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == MODEL_CLASS:
            own_forward = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "forward"
                              for n in node.body)
            bases = [ast.unparse(b) for b in node.bases]
            if own_forward or any(b not in ("nn.Module", "torch.nn.Module", "Module") for b in bases):
                return
            raise CandidateError(
                f"{file.name} line {node.lineno}: class {MODEL_CLASS} has no forward method: define "
                "forward(self, *inputs) returning the output tensor."
            )
        if _binds_model_name(node):
            return
    raise CandidateError(
        f"{file.name} defines no class {MODEL_CLASS}: add `class {MODEL_CLASS}(nn.Module)` with the same "
        "constructor arguments as the problem's Model."
    )


def _binds_model_name(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == MODEL_CLASS for t in targets)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name) == MODEL_CLASS for a in node.names)
    return False


def _calls(tree: ast.Module, function: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == function) or (isinstance(f, ast.Attribute) and f.attr == function):
                return True
    return False


class Located(Protocol):
    """Anything with the path of a problem or a candidate (``Problem``, ``Candidate``, a suite's ``ProblemRef``)."""

    @property
    def path(self) -> str | os.PathLike[str]: ...


# a problem or a candidate: its path, or an object with a ``path`` (``root``, ``directory``) attribute
ProblemRef = Union[str, "os.PathLike[str]", Problem, Located]
CandidateRef = Union[str, "os.PathLike[str]", Candidate, Located]


def path_of(obj: ProblemRef | CandidateRef) -> Path:
    if isinstance(obj, (str, os.PathLike)):
        return Path(obj)
    for attr in ("path", "root", "directory"):
        value = getattr(obj, attr, None)
        if value is not None:
            return Path(value)
    return Path(obj)
