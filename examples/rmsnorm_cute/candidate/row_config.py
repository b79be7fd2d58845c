"""Launch shape of the CuTe RMSNorm (a helper the model imports: editing it recompiles the kernel)."""


def row_config(n: int, element_bytes: int) -> tuple[int, int, int, bool]:
    """(elements per 128-bit vector, threads per CTA, CTAs per row, reload) for rows of ``n`` elements.

    Each shape below was the fastest of those timed on the H100 (benchmarks/cute-2026-12-06/sweep/):
    - up to 2048 vectors a row (16K bf16 / 8K fp32 elements), QuACK's ladder: one CTA of 32-128 threads, at most
      16 vectors a thread, the row kept in registers (99-100% of the copy ceiling);
    - bf16 from 128K elements: 32 elements a thread, x read again from L2 in the epilogue (``reload``) rather
      than kept, ~42 registers, clusters of 16 CTAs of 256-512 threads (92%; kept in registers: 78-82%);
    - otherwise 256 threads of at most 64 elements kept in registers (two CTAs an SM) and a cluster of 2-8 CTAs
      per row (fp32 95-96%, bf16 64K 88%); past 8 CTAs, 16 CTAs of 512 threads of 32 elements (fp32 256K: 91%).
    One CTA an SM, holding 128 elements a thread, left the memory pipe idle while it reduced (70-84%); reading x
    again costs fp32 rows dearly (68-70%: their slices do not stay in L2).
    64-bit or narrower vectors when ``n`` is not a multiple of a 128-bit vector."""
    vec = 16 // element_bytes
    while vec > 1 and n % vec:
        vec //= 2
    vectors = n // vec
    if vectors <= 2048:
        return vec, (32 if vectors <= 96 else 64 if vectors <= 768 else 128), 1, False
    reload = element_bytes == 2 and n >= 131072
    elements, widest = (32, 16) if reload else (64, 8)
    threads, cluster = 256, 1
    while n > threads * cluster * elements and cluster < widest:
        cluster *= 2
    if n > threads * cluster * elements and not reload:
        threads, cluster, elements = 512, 16, 32
    while n > threads * cluster * elements and threads < 1024:
        threads *= 2
    return vec, threads, cluster, reload
