"""The static policy's tables: the modules a candidate may import, the Triton names it may use, the
submodules refused anyway, why each refused module is refused, and every rule id with its meaning.
The checks that apply them are in policy.py."""

from __future__ import annotations

ALLOWED_MODULES: frozenset[str] = frozenset({
    "torch", "math", "typing", "typing_extensions", "functools", "dataclasses", "pathlib",
    "kernelpilot.extension", "__future__", "numbers", "itertools", "operator", "enum",
    "collections", "abc", "contextlib", "triton.language", "cutlass",
})
# ``import triton`` itself: only the names a kernel author needs (TRITON_NAMES); its runtime, compiler,
# driver, knobs and testing modules reach the launcher, the cache and the timers.
TRITON_NAMES: frozenset[str] = frozenset({
    "jit", "language", "cdiv", "next_power_of_2", "autotune", "heuristics", "Config", "constexpr", "must_use_result",
})
# CUTLASS's CuTe DSL (``cutlass``, ``cutlass.cute``, ``cutlass.utils``, ``cutlass.pipeline``, ...) is allowed but
# for its internals (below) and for the names in CUTE_REFUSED_NAMES. From its CUDA driver bindings a candidate
# may name only CUDA_DRIVER_NAMES (the stream torch gives it): the rest creates streams, loads modules, copies.
CUDA_DRIVER_MODULE = "cuda.bindings.driver"
CUDA_DRIVER_NAMES: frozenset[str] = frozenset({"CUstream"})
# exporting and loading compiled binaries, and the DSL's own benchmarking (timers): refused wherever named
CUTE_REFUSED_NAMES: frozenset[str] = frozenset({
    "export", "export_to_c", "dump_to_object", "load_module", "load_from_binary", "testing", "benchmark",
})
# Submodules of allowed packages that are refused anyway (processes, network, pickles).
DENIED_SUBMODULES: frozenset[str] = frozenset({
    "torch.multiprocessing", "torch.hub", "torch.distributed", "torch.utils.data",
    "torch.utils.benchmark", "torch._C", "torch.package", "torch.serialization", "torch._inductor", "torch._dynamo",
    "cutlass.base_dsl", "cutlass._mlir", "cutlass.cutlass_dsl", "cutlass.testing", "cutlass.cute.testing",
    "cutlass.cute.export", "cutlass.runtime",
})
# Modules with a specific reason; anything else outside ALLOWED_MODULES is "not on the allow-list".
MODULE_REASONS: dict[str, str] = {
    "os": "gives access to processes, files and the environment",
    "sys": "lets code change the interpreter (modules, hooks, paths)",
    "subprocess": "runs other programs", "pty": "runs other programs",
    "socket": "opens network connections", "ssl": "opens network connections",
    "http": "opens network connections", "urllib": "opens network connections",
    "requests": "opens network connections",
    "ctypes": "calls arbitrary native code", "cffi": "calls arbitrary native code",
    "importlib": "imports code dynamically", "builtins": "replaces built-in functions",
    "threading": "runs work in background threads the timer cannot see",
    "_thread": "runs work in background threads the timer cannot see",
    "multiprocessing": "runs work in other processes the timer cannot see",
    "concurrent": "runs work in background threads the timer cannot see",
    "asyncio": "runs work outside the timed call", "signal": "changes signal handling",
    "shutil": "copies and deletes files", "pickle": "runs code while loading data",
    "marshal": "loads code objects", "inspect": "reaches into frames and other modules",
    "gc": "reaches objects of other modules", "time": "can patch or read the timers",
    "tempfile": "creates files outside the candidate directory", "io": "opens files",
}

RULES: dict[str, str] = {
    "import-<module>": "import of a module that is refused or not on the allow-list",
    "reference-model": "imports, subclasses or calls the reference Model",
    "dunder-import": "calls __import__",
    "dynamic-code": "exec / eval / compile of code built at run time",
    "introspection": "globals() / vars() / locals() / dunder attributes that reach other modules",
    "dynamic-attr": "getattr / setattr / delattr with a computed name on a module",
    "module-patch": "assigns to or deletes an attribute of a module (timer or torch patching)",
    "open-outside": "opens or reads a path not built from __file__ (outside the candidate)",
    "path-write": "writes, deletes or renames files from Python",
    "lazy-tensor": "a torch.Tensor subclass or _make_subclass (outputs computed on inspection)",
    "try-fallback": "try/except in ModelNew.forward (silent fallback to PyTorch)",
    "bare-except": "a bare `except:` that hides every error",
    "side-stream": "work on a non-default CUDA stream the timer does not see",
    "torch-escape": "torch.load / torch.save / load_library / hub (files, pickles, native code)",
    "syntax-error": "the file does not parse",
    "cute-internals": "uses a part of the CuTe DSL that exports or loads binaries or times code "
                      "(export, load_module, testing/benchmark) or a CUDA driver call other than CUstream",
    "binary-file": "a prebuilt binary or bytecode file in the candidate directory",
    "triton-internals": "uses a part of triton other than jit/autotune/heuristics/Config/cdiv/language "
                        "(its runtime, compiler, driver, knobs, testing)",
    "process-creation": "Python code starts programs or processes (os.system, os.popen, os.exec*, os.spawn*, os.fork)",
    "native-process": "native code runs programs (system, popen, fork, exec*)",
    "native-dlopen": "native code loads libraries at run time",
    "native-network": "native code opens sockets",
    "native-env": "native code reads the environment",
    "native-thread": "native code starts threads",
    "native-file": "native code opens files",
    "native-side-stream": "native code creates or binds its own CUDA stream",
    "native-include-outside": "native code includes or embeds a file outside the candidate "
                              "(#include \"/...\", .incbin)",
}
