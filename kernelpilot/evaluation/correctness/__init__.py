"""Correctness, inside the worker: the candidate's outputs against float64 references on fresh inputs, in bounded
memory, with references kept per seed and reused outputs detected."""
