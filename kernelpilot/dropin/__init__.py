"""Approved kernels as drop-in operators (``registration``), swapped into the user's model
(``swap``, ``apply``). Imports neither the agent nor the UI."""
