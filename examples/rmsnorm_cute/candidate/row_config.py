"""Launch shape of the CuTe RMSNorm (a helper the model imports: editing it recompiles the kernel)."""

MAX_VECTORS = 16  # 128-bit vectors a thread keeps in registers (bf16: 128 elements; more spills)


def row_config(n: int, element_bytes: int) -> tuple[int, int, int]:
    """(elements per 128-bit vector, threads per CTA, CTAs per row) for rows of ``n`` elements: QuACK's ladder,
    one CTA per row while a thread holds at most MAX_VECTORS vectors, then a cluster of 2-8 CTAs per row;
    64-bit or narrower vectors when ``n`` is not a multiple of a 128-bit vector."""
    vec = 16 // element_bytes
    while vec > 1 and n % vec:
        vec //= 2
    vectors = n // vec
    threads = 32 if vectors <= 96 else 64 if vectors <= 768 else 128 if vectors <= 2048 else 256
    cluster = 1
    while vectors > threads * cluster * MAX_VECTORS:
        if cluster < 8:
            cluster *= 2
        elif threads < 1024:
            threads *= 2
        else:
            break
    return vec, threads, cluster
