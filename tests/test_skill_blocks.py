"""Every ``cuda``/``cpp`` code block in skills/*.md compiles with nvcc (CPU only, no GPU needed)."""

from __future__ import annotations

import ast
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelpilot.skill_blocks import BuildResult, compile_block, cuda_home, is_compiled, needs_torch
from kernelpilot.skills import CodeBlock, code_blocks

SKILLS_DIR = Path(__file__).resolve().parent.parent / "skills"
WORKERS = int(os.environ.get("KP_SKILL_BLOCK_WORKERS", "2"))


def _blocks(predicate) -> list[tuple[str, CodeBlock]]:
    found = []
    for path in sorted(SKILLS_DIR.glob("*.md")):
        for block in code_blocks(path.read_text(encoding="utf-8")):
            if predicate(block):
                found.append((path.stem, block))
    return found


QUICK = _blocks(lambda b: is_compiled(b) and not needs_torch(b))
TORCH = _blocks(lambda b: is_compiled(b) and needs_torch(b))
PYTHON = _blocks(lambda b: b.language == "python")


def _id(item: tuple[str, CodeBlock]) -> str:
    doc, block = item
    return f"{doc}#block{block.index}"


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BuildResult]:
    if not (cuda_home() / "bin" / "nvcc").exists():
        pytest.skip(f"nvcc not found under {cuda_home()}")
    root = tmp_path_factory.mktemp("skill-blocks")

    def build(item: tuple[str, CodeBlock]) -> tuple[str, BuildResult]:
        workdir = root / _id(item).replace("#", "_")
        workdir.mkdir()
        return _id(item), compile_block(item[1], workdir)

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = dict(pool.map(build, QUICK))
    print(f"\ncompiled {len(results)} skill code blocks in {time.monotonic() - start:.1f} s with {WORKERS} workers")
    return results


def test_there_are_compiled_blocks() -> None:
    assert len(QUICK) >= 14, f"only {len(QUICK)} cuda/cpp blocks found in {SKILLS_DIR}"


@pytest.mark.parametrize("item", QUICK, ids=_id)
def test_block_compiles(item: tuple[str, CodeBlock], quick_results: dict[str, BuildResult]) -> None:
    doc, block = item
    result = quick_results[_id(item)]
    if not result.ok:
        pytest.fail(
            f"skills/{doc}.md block {block.index} (line {block.line}, "
            f"```{block.language} {' '.join(block.tags)}) does not compile:\n{result.command}\n{result.output}",
            pytrace=False,
        )


@pytest.mark.slow
@pytest.mark.parametrize("item", TORCH, ids=_id)
def test_torch_block_compiles(item: tuple[str, CodeBlock], tmp_path: Path) -> None:
    pytest.importorskip("torch")
    doc, block = item
    result = compile_block(block, tmp_path, timeout_s=600)
    if not result.ok:
        pytest.fail(f"skills/{doc}.md block {block.index} (line {block.line}) does not "
                    f"compile:\n{result.output[-4000:]}", pytrace=False)


@pytest.mark.parametrize("item", PYTHON, ids=_id)
def test_python_block_parses(item: tuple[str, CodeBlock]) -> None:
    doc, block = item
    if "fragment" in block.tags or "console" in block.tags:
        pytest.skip("fragment")
    try:
        ast.parse(block.code)
    except SyntaxError as exc:
        pytest.fail(f"skills/{doc}.md block {block.index} (line {block.line}) is not valid Python: {exc}",
                    pytrace=False)


def test_compile_errors_name_the_block(tmp_path: Path) -> None:
    broken = CodeBlock(index=3, line=10, language="cuda", tags=("fragment",),
                       code="__global__ void k() { undefined_thing(); }\n")
    if not (cuda_home() / "bin" / "nvcc").exists():
        pytest.skip("nvcc not found")
    result = compile_block(broken, tmp_path)
    assert not result.ok
    assert "undefined_thing" in result.output
