"""Eager and torch.compile baselines of a problem: measured in the worker, shared by a suite's problems, and kept
on this machine for the problem card."""
