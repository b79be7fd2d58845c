"""The evaluation worker process (``python -m kernelpilot.evaluation.worker``): its request loop, the pipeline of
one candidate (verify -> audit -> time), the problem it holds, the hang watchdog, compiles a candidate starts."""
