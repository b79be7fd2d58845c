# Sourced by the GPU step scripts (kb_gpu.sh, gpu_pending.sh, gpu_checks.sh) after they set $root:
# the carried wheels (.whl/, made by benchmarks/make_wheels.sh) installed once into /tmp/site and put on the
# paths, and NVLink multicast left off (KINDS.md).
# sourced without $root (by hand, in a device call's command line), this file finds it: an empty PYTHONPATH entry
# made every native build of that call fail at binding.o on 2026-12-07
root=${root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export PYTHONPATH="/tmp/site:$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PATH="/tmp/site/bin:$PATH"
if [ -d "$root/.whl" ] && ! python3 -c "import textual, platformdirs, git" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$root"/.whl/*.whl
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
