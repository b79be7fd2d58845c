"""A CUDA error: the candidate broke the GPU context (an illegal address, a device-side assert, a failed launch)
or ran it out of memory. The worker never goes on after one (main.Worker.classify); the pipeline's steps that
catch a candidate's exception re-raise these."""

from __future__ import annotations

# what a CUDA error (the candidate broke the GPU context) says
CUDA_MARKERS = ("CUDA error", "illegal memory access", "device-side assert", "AcceleratorError",
                "unspecified launch failure", "misaligned address", "illegal instruction", "CUBLAS_STATUS",
                "cudaErrorLaunch", "an illegal memory")


def is_cuda_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return "out of memory" in text.lower() or any(m in text for m in CUDA_MARKERS)
