"""The build step, in a subprocess: nvcc/ninja (full and device-only), load_inline and single-file scripts,
Triton ahead of time, the standby builder, precompiled headers, and build output made into diagnostics."""
