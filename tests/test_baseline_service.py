"""Baselines measured once per problem and GPU: the GPU lock's shared/exclusive rule between processes,
the run store of baselines, and which stored baseline may be reused on --resume."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpilot.evaluation import EvalSettings
from kernelpilot.evaluation.timing import gpu_lock
from kernelpilot.evaluation.baselines.service import BaselineService, identity_mismatch, request_key
from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.suite.baseline_store import BaselineStore
from kernelpilot.suite.pool import shared_baseline, when_all
from kernelpilot.verdict import Timing

HOLD = """
import sys, time
from pathlib import Path
from kernelpilot.evaluation.timing.gpu_lock import GpuLock
lock = GpuLock(Path(sys.argv[1]))
with getattr(lock, sys.argv[2])():
    Path(sys.argv[3]).write_text("held")
    time.sleep(float(sys.argv[4]))
"""


def _hold(path: Path, mode: str, flag: Path, seconds: float) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), mode, str(flag), str(seconds)])
    deadline = time.monotonic() + 30
    while not flag.exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the holder never took the lock"
        time.sleep(0.02)
    return proc


def test_a_timing_waits_for_untimed_work_and_untimed_work_overlaps(tmp_path: Path) -> None:
    path = gpu_lock.lock_path(tmp_path, "GPU-1234")
    holder = _hold(path, "shared", tmp_path / "a", 1.5)
    mine = gpu_lock.GpuLock(path)
    t0 = time.monotonic()
    with mine.shared():  # two untimed jobs at once: no wait
        assert time.monotonic() - t0 < 0.5
    t0 = time.monotonic()
    with mine.exclusive():  # a timing waits until the other process's untimed work ends
        assert time.monotonic() - t0 > 0.8 and mine.waited_s > 0.8
    holder.wait()
    timer = _hold(path, "exclusive", tmp_path / "b", 1.0)
    t0 = time.monotonic()
    with mine.shared():  # and untimed work waits for a timing
        assert time.monotonic() - t0 > 0.5
    timer.wait()
    mine.close()


def test_exclusive_inside_shared_and_nesting(tmp_path: Path) -> None:
    path = gpu_lock.lock_path(tmp_path, "0")
    lock = gpu_lock.GpuLock(path)
    with lock.shared():
        with lock.shared():
            with lock.exclusive():  # the timing inside an evaluation's shared hold
                probe = subprocess.run([sys.executable, "-c", (
                    "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
                    "sys.exit(0 if fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB) is None else 1)"), str(path)],
                    capture_output=True)
                assert probe.returncode != 0  # nobody else may even share it during the timing
            probe = subprocess.run([sys.executable, "-c", (
                "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_SH | "
                "fcntl.LOCK_NB)"),
                str(path)], capture_output=True)
            assert probe.returncode == 0  # back to shared after the timing
    assert gpu_lock.GpuLock(None).waited_s == 0.0  # no lock file: every use is a no-op
    with gpu_lock.GpuLock(None).exclusive():
        pass


def _stored(uuid: str = "abc", driver: str = "580.1", torch: str = "2.11.0+cu130") -> Baselines:
    t = Timing(median_ms=2.0, q1_ms=1.9, q3_ms=2.1, min_ms=1.8, samples=100)
    return Baselines(eager=t, compiled=Timing(1.0, 0.9, 1.1, 0.8, 100), gpu="NVIDIA H200", gpu_uuid=uuid,
                     driver=driver, torch=torch, clocks={"sm_max_mhz": 1980, "mem_max_mhz": 3201})


def test_stored_baselines_are_reused_only_on_the_same_setting() -> None:
    now = {"gpu_uuid": "GPU-abc", "driver": "580.1", "torch": "2.11.0",
           "clocks": {"sm_max_mhz": 1980, "mem_max_mhz": 3201}}
    assert identity_mismatch(_stored().identity(), now) == ""
    assert "another GPU" in identity_mismatch(_stored(uuid="xyz").identity(), now)
    assert "driver 570.0 -> 580.1" in identity_mismatch(_stored(driver="570.0").identity(), now)
    assert "torch 2.10.0 -> 2.11.0" in identity_mismatch(_stored(torch="2.10.0").identity(), now)
    slower = dict(now, clocks={"sm_max_mhz": 1755, "mem_max_mhz": 3201})
    assert "sm_max_mhz 1980 -> 1755" in identity_mismatch(_stored().identity(), slower)


def test_run_store_and_service_reuse(tmp_path: Path) -> None:
    problem = tmp_path / "p.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"
                       "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")
    settings = EvalSettings(device="cpu", confine=False)
    key = request_key(problem, settings)
    assert key == request_key(problem, EvalSettings(device="cpu", trials=9))  # trials do not change a baseline
    assert key != request_key(problem, EvalSettings(device="cpu", rounds=9))  # timing settings do
    store = BaselineStore(tmp_path)
    service = BaselineService(settings, tmp_path / "work", processes=1, cache=store, estimate=lambda p: 0)
    try:
        service.identity = {"gpu_uuid": "abc", "driver": "580.1", "torch": "2.11.0", "clocks": {}}
        store.put(key, str(problem), _stored().to_dict())
        reused = service.request(problem)
        assert reused.done() and reused.result().compiled.median_ms == 1.0
        assert service.request(problem) is reused  # every sample of the problem shares it
        service.identity = dict(service.identity, driver="999.0")
        service._requests.clear()
        again = service.request(problem)  # another driver: measured again (a CPU worker cannot: it says why)
        base = shared_baseline(again)
        assert base.compiled is None and "baseline service could not measure" in base.compiled_missing
        assert "CUDA GPU" in base.compiled_missing
    finally:
        service.close()
        store.close()
    reopened = BaselineStore(tmp_path)
    assert [row["problem"] for row in reopened.all()] == [str(problem)]
    reopened.close()


def test_a_run_borrows_another_runs_baselines(tmp_path: Path) -> None:
    """--baselines-from: a row of an earlier run of the same problem serves this run (copied into its file, so
    a resume finds it), under the service's identity rule; a folder with no run is a clear error."""
    from kernelpilot.errors import KernelpilotError

    problem = tmp_path / "p.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
                       "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")
    settings = EvalSettings(device="cpu", confine=False)
    key = request_key(problem, settings)
    earlier, run = tmp_path / "earlier", tmp_path / "run"
    earlier.mkdir()
    run.mkdir()
    first = BaselineStore(earlier)
    first.put(key, str(problem), _stored().to_dict(), at=1000.0)
    first.close()
    with pytest.raises(KernelpilotError, match="no run there"):
        BaselineStore(run, [tmp_path / "nothing"])
    store = BaselineStore(run, [earlier])
    service = BaselineService(settings, run / "work", processes=1, cache=store, estimate=lambda p: 0)
    try:
        service.identity = {"gpu_uuid": "abc", "driver": "580.1", "torch": "2.11.0", "clocks": {}}
        borrowed = service.request(problem)
        assert borrowed.done() and borrowed.result().compiled.median_ms == 1.0 and store.borrowed == 1
        assert store.get("another key") is None
    finally:
        service.close()
        store.close()
    mine = BaselineStore(run)  # copied with its problem and time: a resume needs no --baselines-from
    assert mine.get(key) is not None and mine.row(key) == (str(problem), 1000.0)
    mine.close()


def test_when_all_runs_once_after_the_last_future() -> None:
    from concurrent.futures import Future

    calls: list[int] = []
    futures = [Future(), Future()]
    when_all(futures, lambda: calls.append(1))
    futures[0].set_result(1)
    assert calls == []
    futures[1].set_exception(RuntimeError("no GPU"))
    assert calls == [1]
    when_all([], lambda: calls.append(2))
    assert calls == [1, 2]
