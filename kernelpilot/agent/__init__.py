"""The agent: a ReAct loop over one LLM seam, with tools that act only through the workspace and the
evaluation engine. Importing this package loads neither litellm, textual nor torch."""
