"""The caller's side of the worker (no torch, no CUDA here): one worker process, the warm worker and its spare,
and a request retried once when the worker died."""
