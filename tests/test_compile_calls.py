"""Which calls compile a torch extension (kernelpilot/evaluation/static/compile_calls.py), however a published solution
imported the builders; and a single file that builds with ``cpp_extension.load`` is a candidate with kernels
of its own, not a PyTorch rewrite."""

from __future__ import annotations

import ast
from pathlib import Path

from kernelpilot.evaluation.candidate import load_candidate
from kernelpilot.evaluation.static.compile_calls import compile_calls
from kernelpilot.evaluation.build.load_inline import inline_names

MODEL = "\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def _found(code: str) -> list[tuple[str, str]]:
    tree = ast.parse(code)
    return [(ast.unparse(c.func), which) for c, which in compile_calls(tree)]


def test_every_way_of_reaching_the_builders() -> None:
    code = """
import json, torch
import torch.utils.cpp_extension as ext
from torch.utils import cpp_extension
from torch.utils import cpp_extension as cx
from torch.utils.cpp_extension import load_inline as li, load as build
a = li(name='a', cpp_sources='')
b = build(name='b', sources=['b.cpp'])
c = ext.load('c', sources=[])
d = cpp_extension.load('d', sources=[])
e = cx.load_inline('e', cpp_sources='')
f = torch.utils.cpp_extension.load('f', sources=[])
g = torch.utils.cpp_extension.load_inline('g', cpp_sources='')
w = torch.load('weights.pt'); j = json.load(open('x.json'))
def helper():
    from torch.utils.cpp_extension import load
    return load('h', sources=[])
"""
    assert _found(code) == [("li", "load_inline"), ("build", "load"), ("ext.load", "load"),
                            ("cpp_extension.load", "load"),
                            ("cx.load_inline", "load_inline"), ("torch.utils.cpp_extension.load", "load"),
                            ("torch.utils.cpp_extension.load_inline", "load_inline"), ("load", "load")]


def test_a_load_of_something_else_is_not_a_build() -> None:
    assert _found("from json import load\nx = load(open('a'))\nimport torch\ny = torch.load('w.pt')\n") == []
    assert _found("def load(p):\n    return p\nz = load('x')\n") == []
    assert _found("from torch.utils.cpp_extension import *\nm = load('m', sources=[])\n") == [("load", "load")]


def test_a_single_file_built_with_load_is_a_candidate_with_kernels(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\nfrom torch.utils.cpp_extension import load\n"
                                   "ext = load(name='files', sources=['k.cu'])\n" + MODEL)
    (tmp_path / "b.py").write_text("import torch\nfrom torch.utils.cpp_extension import load_inline as li\n"
                                   "ext = li('aliased', cpp_sources='', cuda_sources='')\n" + MODEL)
    (tmp_path / "c.py").write_text("import torch\nW = torch.load('w.pt')\n" + MODEL)
    assert load_candidate(tmp_path / "a.py").kind == "single_file"
    assert load_candidate(tmp_path / "b.py").kind == "single_file"
    assert load_candidate(tmp_path / "c.py").kind == "pytorch"
    assert inline_names(tmp_path / "a.py") == ["files"] and inline_names(tmp_path / "b.py") == ["aliased"]


def test_temporary_paths_of_a_build_are_made_stable(tmp_path: Path, monkeypatch) -> None:
    """Sources written to a new temporary folder (and a temporary build directory) in each process become the
    same paths in the build step and in the worker, so the worker does not compile again."""
    import os
    import tempfile

    from kernelpilot.evaluation.build.load_inline import stable_load_args, watch_candidate_files

    root = tmp_path / "ext"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(root))
    watch_candidate_files()  # as the build step and the worker do before the candidate's code runs

    def written() -> str:
        folder = tempfile.mkdtemp(dir=tmp_path)
        Path(folder, "k.cu").write_text('#include "k.cuh"\n')
        Path(folder, "k.cuh").write_text("// helper\n")
        return os.path.join(folder, "k.cu")

    first, second = written(), written()
    a_args, a_kw = stable_load_args("load", ("files", [first]), {"build_directory": tempfile.mkdtemp(dir=tmp_path)})
    b_args, b_kw = stable_load_args("load", (), {"name": "files", "sources": second,
                                                 "build_directory": tempfile.mkdtemp(dir=tmp_path)})
    assert a_args[1] == b_kw["sources"] and a_args[1][0] != first  # one stable path for both processes
    stable = Path(a_args[1][0])
    assert stable.parent.parent == root / "kp-sources" and (stable.parent / "k.cuh").read_text() == "// helper\n"
    assert a_kw["build_directory"] == b_kw["build_directory"] == str(root / "kp-build" / "files")
    Path(second).write_text("// changed\n")  # other bytes: another folder
    c_args, _ = stable_load_args("load", ("files", [second]), {})
    assert c_args[1][0] != a_args[1][0]
    here = str(Path(__file__).resolve())  # not temporary: left as it is
    assert stable_load_args("load", ("mine", [here]), {})[0][1] == [here]
    inline = stable_load_args("load_inline", ("x",),
                              {"cpp_sources": "", "build_directory": tempfile.mkdtemp(dir=tmp_path)})
    assert inline[1]["build_directory"] == str(root / "kp-build" / "x")
    # relative (CUDA-L1 builds in 'cuda_extensions'): the build step's folder is the candidate's, the worker's
    # another; both build in one place, and nothing lands beside the user's files
    relative = stable_load_args("load_inline", ("y",), {"cpp_sources": "", "build_directory": "cuda_extensions"})
    assert relative[1]["build_directory"] == str(root / "kp-build" / "y")
    kept = str(Path(__file__).resolve().parent / "mine")  # an absolute folder, not temporary: left as it is
    assert stable_load_args("load_inline", ("z",), {"build_directory": kept})[1]["build_directory"] == kept
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    assert stable_load_args("load", ("files", [first]), {}) == (("files", [first]), {})  # not a kernelpilot build


def test_triton_kernels_however_triton_was_imported(tmp_path: Path) -> None:
    from kernelpilot.evaluation.candidate import triton_kernel_names

    code = ("import triton as tr\nimport triton.language as tl\nfrom triton import jit as tjit\nimport triton\n"
            "@tr.jit\ndef a(x_ptr, BLOCK: tl.constexpr):\n    pass\n"
            "@tjit\ndef b(x_ptr):\n    pass\n"
            "@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef c(x_ptr, n):\n    pass\n"
            "@triton.jit(do_not_specialize=['n'])\ndef d(x_ptr, n):\n    pass\n"
            "def e(x):\n    return x\n")
    assert triton_kernel_names(ast.parse(code)) == ["a", "b", "c", "d"]
    (tmp_path / "t.py").write_text(code + MODEL)
    assert load_candidate(tmp_path / "t.py").kind == "triton"


def test_only_the_candidates_own_calls_get_stable_paths(tmp_path: Path, monkeypatch) -> None:
    """In the worker, a load the candidate's code makes gets the build step's stable paths; kernelpilot's own
    build of a directory candidate (extension.build, sources in a folder that may be under /tmp) is left as it is
    (the edit loop rebuilt nothing when its sources were moved); a candidate's own files are never moved."""
    import tempfile

    from kernelpilot.evaluation.worker import compile_hook

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    seen: list[list[str]] = []
    wrapped = compile_hook._wrap(lambda name, sources, **kw: seen.append(list(sources)), "load")
    folder = tempfile.mkdtemp(dir=tmp_path)
    src = str(Path(folder) / "k.cu")
    Path(src).write_text("// k\n")
    exec("wrapped('a', [src])", {"__name__": "kp_candidate_x", "wrapped": wrapped, "src": src})
    exec("wrapped('b', [src])", {"__name__": "kernelpilot.extension", "wrapped": wrapped, "src": src})
    assert seen[0] != [src] and seen[1] == [src]
    monkeypatch.setenv("KERNELPILOT_CANDIDATE_DIR", folder)  # a file shipped beside the candidate: stays
    exec("wrapped('c', [src])", {"__name__": "kp_candidate_x", "wrapped": wrapped, "src": src})
    assert seen[2] == [src]
    below = tempfile.mkdtemp(dir=folder)  # written at run time to a new folder below the candidate's: moved
    Path(below, "k.cu").write_text("// k\n")
    exec("wrapped('d', [src])", {"__name__": "kp_candidate_x", "wrapped": wrapped, "src": str(Path(below) / "k.cu")})
    assert seen[3] == seen[0]  # the same bytes: the same stable copy
