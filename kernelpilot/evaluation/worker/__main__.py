"""``python -m kernelpilot.evaluation.worker --in-fd R --out-fd W``: the worker's stable entry point."""

from kernelpilot.evaluation.worker.main import main

if __name__ == "__main__":
    raise SystemExit(main())
