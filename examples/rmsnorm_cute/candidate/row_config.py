"""Launch shape of the CuTe RMSNorm (a helper the model imports: editing it recompiles the kernel)."""

MAX_ELEMENTS = 64  # elements a thread of a clustered row keeps in registers: ~128 registers, two CTAs an SM


def row_config(n: int, element_bytes: int) -> tuple[int, int, int]:
    """(elements per 128-bit vector, threads per CTA, CTAs per row) for rows of ``n`` elements.

    Up to 2048 vectors a row (16K bf16 / 8K fp32 elements), QuACK's ladder: one CTA of 32-128 threads, at most
    16 vectors a thread. Past that, CTAs of 256 threads, each thread at most MAX_ELEMENTS elements, so that two
    CTAs fit an SM's registers (one CTA an SM left the memory pipe idle while it reduced: 70-84% of the copy
    ceiling on the H100), and a cluster of 2-8 CTAs per row; past 8, clusters of 16 CTAs of 512 threads (32
    elements a thread: 91% against 86% at fp32 256K, 80% against 78% at bf16). 64-bit or narrower vectors when
    ``n`` is not a multiple of a 128-bit vector."""
    vec = 16 // element_bytes
    while vec > 1 and n % vec:
        vec //= 2
    vectors = n // vec
    if vectors <= 2048:
        return vec, (32 if vectors <= 96 else 64 if vectors <= 768 else 128), 1
    threads, cluster = 256, 1
    while n > threads * cluster * MAX_ELEMENTS and cluster < 8:
        cluster *= 2
    if n > threads * cluster * MAX_ELEMENTS:
        threads, cluster = 512, 16
        while n > threads * cluster * MAX_ELEMENTS and threads < 1024:
            threads *= 2
    return vec, threads, cluster
