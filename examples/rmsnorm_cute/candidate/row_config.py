"""Launch shape of the CuTe RMSNorm (a helper the model imports: editing it recompiles the kernel)."""


def row_config(n: int, element_bytes: int) -> tuple[int, int]:
    """(elements per 128-bit vector, threads per CTA) for rows of ``n`` elements: QuACK's ladder, one CTA per
    row; 64-bit or narrower vectors when ``n`` is not a multiple of a 128-bit vector."""
    vec = 16 // element_bytes
    while vec > 1 and n % vec:
        vec //= 2
    vectors = n // vec
    threads = 32 if vectors <= 96 else 64 if vectors <= 768 else 128 if vectors <= 2048 else 256
    if vectors > 8192:
        threads = 512 if vectors <= 16384 else 1024
    return vec, threads
