"""The Textual pairing app (``kernelpilot`` with no subcommand).

Importing this package imports nothing heavy: the app module imports textual, and torch, litellm
and the agent are imported later, off the UI thread, once the first screen has been painted.
"""
