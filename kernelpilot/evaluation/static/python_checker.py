"""The static policy's reading of Python source: one pass over a candidate's syntax tree (never imported) that finds
refused or unlisted imports, dynamic code, introspection, escapes to files and processes, side streams, timers,
patches and tensor subclasses. policy.py runs it and applies the rules a project relaxed."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from kernelpilot.evaluation.static.policy_tables import (
    ALLOWED_MODULES,
    CUDA_DRIVER_MODULE,
    CUDA_DRIVER_NAMES,
    CUTE_REFUSED_NAMES,
    DENIED_SUBMODULES,
    MODULE_REASONS,
    TRITON_NAMES,
)
from kernelpilot.verdict import Finding

_DYNAMIC_CODE = frozenset({"exec", "eval", "compile"})


_INTROSPECTION_CALLS = frozenset({"globals", "vars", "locals", "breakpoint"})


_ESCAPE_ATTRS = frozenset({
    "__globals__", "__builtins__", "__subclasses__", "__code__", "__closure__", "__dict__",
    "__bases__", "__base__", "__mro__", "__loader__", "__spec__", "__import__", "__getattribute__",
    "f_globals", "f_locals", "f_back", "f_builtins", "gi_frame", "tb_frame", "cr_frame", "__self__",
})


_STREAM_ATTRS = frozenset({"Stream", "stream", "ExternalStream", "set_stream", "wait_stream", "record_stream"})


_TORCH_ESCAPES = frozenset({"load", "save", "load_library", "hub", "from_file"})


_PATH_WRITES = frozenset({
    "write_text", "write_bytes", "unlink", "rmdir", "mkdir", "touch", "rename", "replace",
    "symlink_to", "hardlink_to", "chmod", "lchmod", "link_to",
})


_PATH_READS = frozenset({"read_text", "read_bytes", "open", "iterdir", "glob", "rglob"})


_PROCESS_CALLS = frozenset({"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "startfile",
                            "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
                            "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe"})


NOT_ALLOWED = "is not on the allow-list of candidate imports"  # no reason of its own beyond that



def top_module(module: str) -> str:
    return module.split(".")[0]



def module_verdict(module: str) -> str | None:
    """None when the module may be imported, else the reason."""
    if module == "triton" or CUDA_DRIVER_MODULE == module or CUDA_DRIVER_MODULE.startswith(module + "."):
        return None  # the names used from it are checked one by one (TRITON_NAMES, CUDA_DRIVER_NAMES)
    for denied in DENIED_SUBMODULES:
        if module == denied or module.startswith(denied + "."):
            if top_module(denied) == "cutlass":
                return "is the CuTe DSL's compiler, runtime or benchmarking, not its kernel language"
            return "reaches processes, the network or pickled code"
    for allowed in ALLOWED_MODULES:
        if module == allowed or module.startswith(allowed + "."):
            return None
    return MODULE_REASONS.get(top_module(module), NOT_ALLOWED)


def dotted_name(node: ast.AST) -> str:
    """``a.b.c`` for a chain of attributes on a name ("" where the chain does not start at a name)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


class PythonChecker(ast.NodeVisitor):
    def __init__(self, source: str, filename: str, local_modules: Iterable[str] = ()) -> None:
        self.lines = source.splitlines()
        self.filename = filename
        self.local_modules = frozenset(local_modules)  # the candidate's own .py files beside this one
        self.triton_aliases: set[str] = set()
        self.findings: list[Finding] = []
        self.imported: set[str] = set()  # names bound by imports (modules, classes, functions)
        self.file_names: set[str] = {"__file__"}  # names whose value derives from __file__
        self.path_names: set[str] = set()  # names holding other paths
        self.class_stack: list[str] = []
        self.func_stack: list[str] = []
        self.os_aliases: set[str] = set()  # names bound to the os module
        self.os_functions: set[str] = set()  # process-creating functions imported from os by name
        self.cuda_aliases: dict[str, str] = {}  # names bound to cuda, cuda.bindings or its driver module
        self.cutlass_aliases: set[str] = set()  # names bound to cutlass or one of its modules

    # ---- helpers ------------------------------------------------------------------------------
    def add(self, rule: str, message: str, node: ast.AST) -> None:
        line = getattr(node, "lineno", None)
        evidence = self.lines[line - 1].strip() if line and 0 < line <= len(self.lines) else ""
        self.findings.append(Finding(rule=rule, message=message, file=self.filename, line=line, evidence=evidence))

    def _from_file(self, node: ast.AST | None) -> bool:
        """True for a path expression built from __file__ that stays in the candidate's directory."""
        if node is None:
            return False
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        escapes = any(isinstance(n, ast.Constant) and isinstance(n.value, str) and
                      (".." in n.value or n.value.startswith(("/", "~"))) or
                      isinstance(n, ast.Attribute) and n.attr in ("parents", "home", "expanduser") or
                      isinstance(n, ast.Attribute) and n.attr == "parent" and isinstance(n.value, ast.Attribute)
                      and n.value.attr == "parent" for n in ast.walk(node))
        return bool(names & self.file_names) and not escapes

    def _track(self, name: str, value: ast.AST) -> None:
        if self._from_file(value):
            self.file_names.add(name)
        elif self._is_pathlike(value):
            self.path_names.add(name)

    def _root_name(self, node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    def _check_module(self, module: str, node: ast.AST) -> None:
        if module in self.local_modules:
            return  # another file of the candidate, checked by the same policy
        reason = module_verdict(module)
        if reason is not None:
            self.add(f"import-{top_module(module)}", f"Importing {module} is refused: it {reason}.", node)

    # ---- imports ------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            self.imported.add(alias.asname or top_module(alias.name))
            if alias.name == "os":
                self.os_aliases.add(alias.asname or "os")
            if alias.name == "triton" or not alias.asname and top_module(alias.name) == "triton":
                self.triton_aliases.add(alias.asname or "triton")
            if top_module(alias.name) == "cuda":
                self.cuda_aliases[alias.asname or "cuda"] = alias.name if alias.asname else "cuda"
            if top_module(alias.name) == "cutlass":
                self.cutlass_aliases.add(alias.asname or "cutlass")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add("import-relative", "Relative imports are refused: a candidate imports only allowed modules.", node)
            return
        module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if module == "os" and alias.name in _PROCESS_CALLS:
                self.os_functions.add(alias.asname or alias.name)
            if alias.name == "Model":
                self.add("reference-model", "Importing the reference Model is refused: write the kernel instead.", node)
                continue
            if module in self.local_modules:
                self.imported.add(alias.asname or alias.name)
                continue
            if module_verdict(full) is not None and (full in DENIED_SUBMODULES or module_verdict(module) is not None):
                self._check_module(full if full in DENIED_SUBMODULES else module, node)
                continue
            if self._cute_import(module, alias, node):
                continue
            if module == "triton" and alias.name not in TRITON_NAMES:
                self.add("triton-internals", f"triton.{alias.name} is refused: a candidate uses triton.jit, "
                         "autotune, heuristics, Config, cdiv and triton.language only.", node)
                continue
            if module == "torch" and alias.name in _TORCH_ESCAPES:
                self.add("torch-escape", f"torch.{alias.name} reads or writes files or loads native code: refused.",
                         node)
            if alias.name != "*":
                self.imported.add(alias.asname or alias.name)

    def _cute_import(self, module: str, alias: ast.alias, node: ast.ImportFrom) -> bool:
        """``from cutlass... import X`` and ``from cuda... import X``: the DSL's refused names and the driver calls
        other than CUstream are findings (True: nothing more to check)."""
        full = f"{module}.{alias.name}"
        if top_module(module) == "cutlass":
            self.cutlass_aliases.add(alias.asname or alias.name)
            if alias.name in CUTE_REFUSED_NAMES:
                self.add("cute-internals", f"{full} is refused: a CuTe candidate compiles with cute.compile and "
                         "launches on torch's stream; it neither exports, loads nor times binaries.", node)
                return True
        elif top_module(module) == "cuda":
            if not self._cuda_allowed(full):
                self.add("cute-internals", f"{full} is refused: from the CUDA driver bindings a candidate uses "
                         "CUstream only (torch's current stream).", node)
                return True
            self.cuda_aliases[alias.asname or alias.name] = full
        return False

    @staticmethod
    def _cuda_allowed(full: str) -> bool:
        """``cuda``, ``cuda.bindings``, ``cuda.bindings.driver`` and ``cuda.bindings.driver.CUstream...``."""
        if CUDA_DRIVER_MODULE == full or CUDA_DRIVER_MODULE.startswith(full + "."):
            return True
        rest = full[len(CUDA_DRIVER_MODULE) + 1:].split(".") if full.startswith(CUDA_DRIVER_MODULE + ".") else []
        return bool(rest) and rest[0] in CUDA_DRIVER_NAMES

    def _check_dsl_attribute(self, node: ast.Attribute, root: str | None, dotted: str) -> None:
        if root in self.cuda_aliases and dotted.startswith(root + "."):
            full = self.cuda_aliases[root] + dotted[len(root):]
            if not self._cuda_allowed(full):
                self.add("cute-internals", f"{full} is refused: from the CUDA driver bindings a candidate uses "
                         "CUstream only (torch's current stream).", node)
        if self.cutlass_aliases and node.attr in CUTE_REFUSED_NAMES and (
                root in self.cutlass_aliases or node.attr not in ("export", "testing", "benchmark")):
            self.add("cute-internals", f"{dotted or node.attr} is refused: a CuTe candidate compiles with cute.compile "
                     "and launches on torch's stream; it neither exports, loads nor times binaries.", node)

    # ---- classes and functions ------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            dotted = dotted_name(base)
            if dotted.split(".")[-1] == "Tensor":
                self.add("lazy-tensor", f"Class {node.name} subclasses torch.Tensor: outputs must be plain tensors.",
                         node)
            if dotted.split(".")[-1] == "Model":
                self.add("reference-model",
                         f"Class {node.name} subclasses the reference Model: write the kernel instead.", node)
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    def _visit_func(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add("lazy-tensor", f"Defining {node.name} intercepts torch operations: refused.", node)
        self.func_stack.append(node.name)
        self.generic_visit(node)
        self.func_stack.pop()

    visit_FunctionDef = _visit_func
    visit_AsyncFunctionDef = _visit_func

    def _in_forward(self) -> bool:
        return "ModelNew" in self.class_stack and "forward" in self.func_stack

    def visit_Try(self, node: ast.Try) -> None:
        if node.handlers:
            where = "in ModelNew.forward " if self._in_forward() else ""
            self.add("try-fallback", f"try/except {where}is refused: a failing kernel must fail, not fall back "
                     "to PyTorch.", node)
        for handler in node.handlers:
            if handler.type is None:
                self.add("bare-except", "A bare `except:` hides every error: name the exception you expect.", handler)
        self.generic_visit(node)

    visit_TryStar = visit_Try

    # ---- assignments (taint for __file__, module patching) -------------------------------------
    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt, node)
        elif isinstance(target, ast.Name) and target.id == "__file__":
            self.add("open-outside", "Reassigning __file__ is refused: paths must stay inside the candidate.", node)
        elif isinstance(target, ast.Attribute):
            root = self._root_name(target)
            if root in self.imported:
                self.add("module-patch", f"Assigning to {dotted_name(target) or 'a module attribute'} patches a "
                         "module (timers, torch functions): refused.", node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, node)
            if isinstance(target, ast.Name):
                self._track(target.id, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        if isinstance(node.target, ast.Name) and node.value is not None:
            self._track(node.target.id, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target, node)
        self.generic_visit(node)

    # ---- names and attributes -----------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__import__":
            self.add("dunder-import", "__import__ is refused: import only allowed modules, at the top of the file.",
                     node)
        elif node.id in _DYNAMIC_CODE:
            self.add("dynamic-code", f"{node.id}() runs code built at run time: refused.", node)
        elif node.id in _INTROSPECTION_CALLS or node.id == "__builtins__":
            self.add("introspection", f"{node.id} reaches other modules' namespaces: refused.", node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _ESCAPE_ATTRS:
            self.add("introspection", f"Attribute {node.attr} reaches into other modules or frames: refused.", node)
        elif node.attr == "_make_subclass":
            self.add("lazy-tensor", "_make_subclass builds tensor subclasses: outputs must be plain tensors.", node)
        root = self._root_name(node)
        dotted = dotted_name(node)
        self._check_dsl_attribute(node, root, dotted)
        if (isinstance(node.value, ast.Name) and node.value.id in self.triton_aliases
                and node.attr not in TRITON_NAMES):
            self.add("triton-internals", f"{dotted} is refused: a candidate uses triton.jit, autotune, heuristics, "
                     "Config, cdiv and triton.language only.", node)
        if node.attr in _STREAM_ATTRS and root in self.imported | {"torch"} or node.attr in (
                "wait_stream", "record_stream"):
            self.add("side-stream", f"{dotted or node.attr} puts work on another CUDA stream, which the timer "
                     "does not see: use the current stream.", node)
        if (root == "torch" and dotted.split(".")[1:2] and dotted.split(".")[-1] in _TORCH_ESCAPES
                and not dotted.startswith("torch.utils.cpp_extension")):
            self.add("torch-escape", f"{dotted} reads or writes files or loads native code: refused.", node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        if name in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
            target, attr = node.args[0], node.args[1]
            constant = isinstance(attr, ast.Constant) and isinstance(attr.value, str)
            on_module = self._root_name(target) in self.imported
            if constant and attr.value in _ESCAPE_ATTRS | {"__import__"}:
                self.add("introspection", f"{name}(..., {attr.value!r}) reaches into other modules: refused.", node)
            elif name in ("setattr", "delattr") and on_module:
                self.add("module-patch", f"{name} on a module patches it (timers, torch functions): refused.", node)
            elif not constant and on_module:
                self.add("dynamic-attr", f"{name} with a computed name on a module hides what is called: refused.",
                         node)
        elif name == "open":
            if not self._from_file(node.args[0] if node.args else None):
                self.add("open-outside", "open() of a path not built from __file__ is refused: a candidate reads "
                         "only its own files.", node)
        elif name in self.os_functions:
            self.add("process-creation", f"{name}() from os starts another program or process: refused.", node)
        elif (isinstance(func, ast.Attribute) and func.attr in _PROCESS_CALLS
              and self._root_name(func) in self.os_aliases):
            self.add("process-creation", f"{dotted_name(func)}() starts another program or process: refused.", node)
        elif isinstance(func, ast.Attribute):
            path_specific = func.attr not in ("replace", "rename")
            if func.attr in _PATH_WRITES and (path_specific or self._is_pathlike(func.value)) and \
                    self._root_name(func) not in ("self", "torch"):
                self.add("path-write", f".{func.attr}() changes files from Python: refused.", node)
            elif func.attr in _PATH_READS and self._is_pathlike(func.value) and not self._from_file(func.value):
                self.add("open-outside", f".{func.attr}() of a path not built from __file__ is refused: a candidate "
                         "reads only its own files.", node)
        self.generic_visit(node)

    def _is_pathlike(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in ("Path", "PurePath", "PosixPath") or
                   isinstance(n, ast.Attribute) and n.attr in ("Path", "PosixPath") or
                   isinstance(n, ast.Name) and n.id in self.file_names | self.path_names for n in ast.walk(node))
