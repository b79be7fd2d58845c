"""KernelBench's own score reproduced inside our worker: its input sets, drawn per seed, and its harness."""
