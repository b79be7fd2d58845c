"""Every shipped example in the device-only layout: its kernel edits can build device code alone, and the parts
they are split into compile to the same machine code as a full build's compile of the file (real nvcc).

The full build's side is nvcc's own ``-c`` compile with the build's flags (torch's common nvcc flags, the
example's options), its embedded cubin kept; the device-only side is the same command with ``-cubin`` on
each part (native/device_build.py), split into three. Each kernel is compared whole: instructions,
relocations, attributes, registers, shared and constant sizes (native/elf.py), what ``cuobjdump -sass``
would disassemble.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kernelpilot.errors import ToolchainError
from kernelpilot.extension import make_spec, options_from_source
from kernelpilot.native import elf, identity, sources
from kernelpilot.native.device_build import parts_of
from kernelpilot.toolkit import find_cuda_home

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TORCH_NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"]


def _with_kernels() -> list[Path]:
    """The examples with kernels of their own (gemm_bias_gelu is one cuBLASLt call: host code, no kernel)."""
    return sorted(p.parent for p in EXAMPLES.glob("*/candidate/binding.cpp")
                  if any("__global__" in cu.read_text() for cu in p.parent.glob("*.cu")))


def _device_layout_examples() -> list[Path]:
    return [c for c in _with_kernels() if sources.host_launch_problem(c / "binding.cpp", c) == ""]


def test_every_shipped_example_launches_through_kernelpilot_s_header() -> None:
    examples = _with_kernels()
    assert len(examples) >= 7 and _device_layout_examples() == examples
    for candidate in examples:
        assert sources.host_launch_problem(candidate / "binding.cpp", candidate) == "", candidate
        for cu in candidate.glob("*.cu"):
            assert sources.instances(cu.read_text()).spans, f"{cu}: no explicit instantiation"


@pytest.mark.slow
@pytest.mark.parametrize("candidate", _device_layout_examples(), ids=lambda p: p.parent.name)
def test_the_parts_of_every_kernel_file_are_the_full_build_s_machine_code(candidate: Path, tmp_path: Path) -> None:
    try:
        home = find_cuda_home()
    except ToolchainError:
        pytest.skip("needs the CUDA toolkit (nvcc)")
    spec = make_spec(candidate, arch="sm_90", build_dir=tmp_path / "build",
                     **options_from_source(candidate / "model_new.py"))
    for cu in [s for s in spec.sources if s.suffix == ".cu"]:
        full_argv = [str(home / "bin" / "nvcc"), "-DTORCH_EXTENSION_NAME=kp_example", *TORCH_NVCC_FLAGS,
                     "--compiler-options", "-fPIC", *spec.cuda_cflags, "-c", str(cu), "-o", str(tmp_path / "full.o")]
        parts = parts_of(cu, sources.local_includes(cu, candidate), full_argv, tmp_path / "parts", 3)
        assert len(parts) == min(3, len(sources.instances(cu.read_text()).spans)) \
            or not sources.instances(cu.read_text()).splittable
        for part in parts:
            done = subprocess.run(part.argv, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-2000:]
        result = identity.check_source(str(cu), full_argv, [str(p.cubin) for p in parts], dict(os.environ))
        assert result.status == identity.SAME and result.kernels > 0, (cu.name, result)
        assert sum(len(elf.kernels(p.cubin)) for p in parts) >= result.kernels
