"""Confinement: the worker reaches the GPU and its own files, nothing else; the build step of single-file and
Triton candidates runs confined too."""
