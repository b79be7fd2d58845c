"""Launch shape of the CuTe RMSNorm (a helper the model imports: editing it recompiles the kernel)."""

MAX_ELEMENTS = 64  # elements a thread of a clustered row loads before the reduction


def row_config(n: int, element_bytes: int) -> tuple[int, int, int]:
    """(elements per 128-bit vector, threads per CTA, CTAs per row) for rows of ``n`` elements.

    Up to 2048 vectors a row (16K bf16 / 8K fp32 elements), QuACK's ladder: one CTA of 32-128 threads, at most
    16 vectors a thread. Past that, CTAs of 256 threads, each thread at most MAX_ELEMENTS elements, and a
    cluster of 2-16 CTAs per row (one CTA an SM, holding the whole slice in registers, left the memory pipe idle
    while it reduced: 70-84% of the copy ceiling on the H100; see benchmarks/cute-2026-12-06/sweep/). 64-bit or
    narrower vectors when ``n`` is not a multiple of a 128-bit vector."""
    vec = 16 // element_bytes
    while vec > 1 and n % vec:
        vec //= 2
    vectors = n // vec
    if vectors <= 2048:
        return vec, (32 if vectors <= 96 else 64 if vectors <= 768 else 128), 1
    threads, cluster = 256, 1
    while n > threads * cluster * MAX_ELEMENTS:
        if cluster < 16:
            cluster *= 2
        elif threads < 1024:
            threads *= 2
        else:
            break
    return vec, threads, cluster
