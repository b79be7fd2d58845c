"""How long a recording process takes to start: a child of the preloading fork server (request -> the
child's first statement) against a fresh interpreter importing what a recording needs.

    python benchmarks/forkserver_startup.py [--children 10] [--fresh 3]

Prints one JSON object: the server's own import time, the request -> running latency of ``--children``
children asked one after the other and of as many asked at once (threads, as record_all's workers do),
and the wall time of ``python -c 'import torch, torch._inductor.compile_fx, triton'`` run ``--fresh``
times. The children run a script that only notes the time (no GPU needed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelpilot.inductor.forkclient import ForkServer, run_forked  # noqa: E402
from kernelpilot.inductor.generate import recording_env  # noqa: E402

SCRIPT = "import sys, time\nprint(repr(time.time()), 'torch' in sys.modules)\n"


def summary(values: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3),
            "max_s": round(max(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=10)
    parser.add_argument("--fresh", type=int, default=3)
    args = parser.parse_args()
    env = dict(recording_env(), TORCHINDUCTOR_COMPILE_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "note_time.py"
        script.write_text(SCRIPT)
        t0 = time.monotonic()
        server = ForkServer.start(env)
        up = time.monotonic() - t0

        def one(results: list[float]) -> None:
            asked = time.time()
            stdout, stderr, rc, _ = run_forked(server, [str(script)], env, timeout=60)
            started, had_torch = stdout.split()
            assert rc == 0 and had_torch == "True", stderr
            results.append(float(started) - asked)

        sequential: list[float] = []
        for _ in range(args.children):
            one(sequential)
        concurrent: list[float] = []
        threads = [threading.Thread(target=one, args=(concurrent,)) for _ in range(args.children)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        server.close()
    fresh = []
    for _ in range(args.fresh):
        t1 = time.monotonic()
        subprocess.run([sys.executable, "-c", "import torch, torch._inductor.compile_fx, triton"], env=env, check=True)
        fresh.append(time.monotonic() - t1)
    print(json.dumps({"cores": os.cpu_count(), "server_up_s": round(up, 3), "server_import_s": server.info["import_s"],
                      "fork_sequential": summary(sequential), "fork_concurrent": summary(concurrent),
                      "subprocess_import": summary(fresh)}, indent=1))


if __name__ == "__main__":
    main()
