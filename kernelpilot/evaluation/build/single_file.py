"""The script the build step runs for a single-file candidate (``python -c``, or exec'd by a standing builder,
builder.py): it imports the file, so ``load_inline`` / ``cpp_extension.load`` at module level compile under the
build limit, then builds ``ModelNew`` and calls it on the meta device so that compiles in ``__init__``, a first
forward, an autograd Function or a helper happen here too; it prints one ``KERNELPILOT_BUILD_RESULT`` JSON line.
Kept as text: it runs in the candidate's process, never imported by kernelpilot's own."""

SINGLE_FILE_BUILDER = """
import importlib.util, json, os, signal, sys, traceback
path = sys.argv[1]
result = {"ok": False, "directory": path}
probing = [False]  # while ModelNew is built and called on the meta device: compile, then hand back a stub

class _Probe(Exception):
    pass

class _Unrunnable:
    # what load_inline returns during the probe: the library is compiled and loaded, but none of its
    # functions runs here (no kernel of the candidate's may touch the GPU of the build step); a call on a
    # meta tensor gives an empty meta tensor like it, so that the forward goes on to later compiles
    def __init__(self, name):
        self._name = name
    def __getattr__(self, attr):
        def stand_in(*args, **kwargs):
            import torch
            for x in list(args) + list(kwargs.values()):
                if isinstance(x, torch.Tensor) and x.is_meta:
                    return torch.empty_like(x)
            raise _Probe(self._name + "." + attr)
        return stand_in

def _alarm(signum, frame):
    raise _Probe("the meta-device forward ran out of its time")

def _on_meta():
    # the probe stays off the GPU (the build step runs beside a candidate being timed): a tensor asked for
    # on a CUDA device explicitly (device="cuda", .cuda(), .to("cuda")) is made on the meta device instead,
    # and anything else that would start CUDA stops the probe
    import torch
    from torch.overrides import TorchFunctionMode

    def cuda(d):
        if isinstance(d, int) and not isinstance(d, bool):
            return True
        try:
            return isinstance(d, (str, torch.device)) and torch.device(d).type == "cuda"
        except (RuntimeError, TypeError):
            return False

    class OnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if cuda(kwargs.get("device")):
                kwargs["device"] = "meta"
            name = getattr(func, "__name__", "")
            if name == "cuda" and args and isinstance(args[0], torch.Tensor):
                return args[0].to("meta")
            if name == "to" and args and isinstance(args[0], torch.Tensor):
                args = tuple("meta" if i and cuda(a) else a for i, a in enumerate(args))
            return func(*args, **kwargs)

    def no_cuda():
        raise _Probe("the forward would start CUDA (the build step's probe stays off the GPU)")

    return OnMeta(), no_cuda

try:
    from kernelpilot.evaluation.sandbox import build_step as build_sandbox
    try:  # before any of the candidate's code runs (build_sandbox.py)
        confined = build_sandbox.apply(os.environ)
        if confined:
            result["confined"] = confined
    except Exception as exc:
        result["unconfined"] = f"the builder could not confine itself: {type(exc).__name__}: {exc}"[:300]
    import torch.utils.cpp_extension as cpp
    for fname in ("load_inline", "load"):
        original = getattr(cpp, fname)
        def verbose(*args, _original=original, _kind=fname, **kwargs):
            import tempfile
            from kernelpilot.evaluation.build.load_inline import (compiler_errors, failure_key, record_failure,
                                                                  stable_load_args)
            from kernelpilot.extension import TORCH_BUILD_FAILURE
            args, kwargs = stable_load_args(_kind, args, kwargs)  # temporary paths made stable (the worker's too)
            kwargs["verbose"] = True  # print ninja and compiler output; does not change the build
            sys.stdout.flush()
            saved, seen = os.dup(1), tempfile.TemporaryFile()
            os.dup2(seen.fileno(), 1)  # the compiler's output, kept to read its errors, then printed as it was
            try:
                built = _original(*args, **kwargs)
            except RuntimeError as exc:  # sources that do not compile: the worker raises the same at once
                sys.stdout.flush()
                seen.seek(0)
                errors = compiler_errors(seen.read().decode("utf-8", "replace"))
                if TORCH_BUILD_FAILURE in str(exc) and errors:
                    record_failure(failure_key(_kind, args, kwargs), str(exc) + ": " + errors)
                raise
            finally:
                sys.stdout.flush()
                os.dup2(saved, 1)
                os.close(saved)
                seen.seek(0)
                os.write(1, seen.read())
                seen.close()
            name = str(kwargs.get("name") or (args[0] if args else "?"))
            result.setdefault("extensions", []).append(name)  # built or loaded here, at import or in the probe
            if probing[0]:
                result.setdefault("probe_compiled", []).append(name)
                return _Unrunnable(name)
            return built
        setattr(cpp, fname, verbose)
    from kernelpilot.evaluation.build.load_inline import watch_candidate_files
    watch_candidate_files()  # from here on the candidate's code runs: what it makes in temporary folders is its own
    arch_before = os.environ.get("TORCH_CUDA_ARCH_LIST")
    spec = importlib.util.spec_from_file_location("kernelpilot_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result["ok"] = True
    if os.environ.get("TORCH_CUDA_ARCH_LIST") != arch_before:  # the candidate set its own architectures
        result["arch_list"] = os.environ.get("TORCH_CUDA_ARCH_LIST") or ""
    problem = sys.argv[2] if len(sys.argv) > 2 else ""
    if problem and hasattr(module, "ModelNew"):
        # load_inline in ModelNew.__init__, in its first forward, in an autograd Function or a helper it calls
        # compiles here too, under the build limit: ModelNew is built and called as the worker will, on the
        # meta device (no memory, no GPU), every library it compiles handed back as a stand-in (_Unrunnable)
        # that runs none of its functions. What this cannot reach compiles in the worker (compile_hook.py),
        # its call's deadline paused.
        import torch
        from kernelpilot.problem import load_problem
        problem_module = load_problem(problem).load_module()
        probing[0] = True
        on_meta, no_cuda = _on_meta()
        lazy_init = torch.cuda._lazy_init
        if not torch.cuda.is_initialized():  # the candidate's import did not start CUDA: neither may the probe
            torch.cuda._lazy_init = no_cuda
        on_meta.__enter__()
        try:
            torch.manual_seed(42)
            init = list(problem_module.get_init_inputs())
            with torch.device("meta"):
                model = module.ModelNew(*init)
            result["model_built"] = True
        except BaseException as exc:
            model = None
            result["model_built"] = False
            result["model_note"] = f"{type(exc).__name__}: {exc}".strip()[:300]
        if model is not None:
            try:
                with torch.device("meta"):
                    inputs = list(problem_module.get_inputs())
                if all(not isinstance(x, torch.Tensor) or x.is_meta for x in inputs):
                    signal.signal(signal.SIGALRM, _alarm)
                    signal.alarm(int(float(os.environ.get("KERNELPILOT_FORWARD_PROBE_S", "240"))))
                    try:
                        with torch.no_grad(), torch.device("meta"):
                            model(*inputs)
                    finally:
                        signal.alarm(0)
                    result["forward_probe"] = "ran"
                else:
                    result["forward_probe"] = "skipped: get_inputs() made tensors off the meta device"
            except BaseException as exc:
                result["forward_probe"] = f"stopped: {type(exc).__name__}: {exc}".strip()[:200]
        on_meta.__exit__(None, None, None)
        torch.cuda._lazy_init = lazy_init
        probing[0] = False
except BaseException as exc:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    result["error"] = f"{type(exc).__name__}: {exc}".strip()[:4000]
    if frames:
        result["line"] = frames[-1].lineno
    elif isinstance(exc, SyntaxError) and exc.filename == path:
        result["line"] = exc.lineno
sys.stdout.flush()
print("KERNELPILOT_BUILD_RESULT " + json.dumps(result), flush=True)
try:  # no interpreter teardown where no child process needs it (kernelpilot/process_exit.py)
    from kernelpilot.process_exit import leave
except Exception:
    leave = sys.exit
leave(0 if result["ok"] else 1)
"""
