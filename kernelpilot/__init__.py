"""kernelpilot: pair with an agent on a slow PyTorch operator and get an honest verdict per kernel.

Importing this package (or the core modules: problem, workspace, evaluation, agent) must not import
torch, textual or litellm; heavy imports happen inside the functions that need them.
"""

__version__ = "0.1.0"
