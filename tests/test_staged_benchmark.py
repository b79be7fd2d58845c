"""A benchmark's test verdict, staged (protocol.TESTED): the worker sends what a test request would answer once the
candidate is verified and audited, before its timing; the caller hands it on as a test verdict and the benchmark
does not verify the candidate twice. The end to end run on the GPU: tests/gpu/test_staged_gpu.py."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from kernelpilot.evaluation import protocol
from kernelpilot.evaluation.assembly import Evaluation
from kernelpilot.evaluation.client.process import WorkerClient
from kernelpilot.evaluation.evaluator import Evaluator
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.worker import pipeline, watchdog
from kernelpilot.verdict import BuildReport, Correctness, Finding, Verdict


def _client_reading(frames: list[dict[str, Any]], tmp_path: Path) -> WorkerClient:
    read, write = os.pipe()
    for frame in frames:
        protocol.send(write, frame)
    os.close(write)
    client = WorkerClient(tmp_path, device="cpu", confine=False)
    client._from_worker = read  # the frames the worker would have sent
    return client


def test_the_client_hands_a_tested_frame_on_and_returns_the_answer(tmp_path: Path) -> None:
    tested = {"op": protocol.TESTED, "ok": True, "verdict": {"status": "ok"}}
    answer = {"ok": True, "verdict": {"status": "ok"}, "exit": False}
    watch = {"op": protocol.WATCH, "phase": "timing", "call": "timed calls", "allow_s": 5.0}
    seen: list[dict[str, Any]] = []
    client = _client_reading([tested, watch, answer], tmp_path)
    assert client._follow(5.0, time.monotonic(), seen.append) == answer
    assert seen == [tested]
    # without a taker the frame is skipped, never taken for the answer
    client = _client_reading([tested, answer], tmp_path)
    assert client._follow(5.0, time.monotonic()) == answer


class _Frames(watchdog.Watchdog):
    def __init__(self) -> None:
        super().__init__(self.collect, None)
        self.frames: list[dict[str, Any]] = []

    def collect(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)


def test_the_worker_stages_the_verdict_a_test_request_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = _Frames()
    watchdog.install(sent)
    try:
        job = pipeline._Job(worker=None, msg={"mode": "benchmark"}, s=EvalSettings(device="cpu"),  # type: ignore[arg-type]
                            state=None, tol=None, phases={"import": 0.01, "verify": 0.5})  # type: ignore[arg-type]
        corr = Correctness(passed=True, discriminates=False, deterministic=False)
        warn = Finding(rule="torch-op", severity="warn", evidence="aten::add", message="a PyTorch op ran")
        out = {"status": "ok", "findings": [], "flags": ["a flag of the run"], "error": "",
               "correctness": {"passed": True}}
        pipeline._stage_test(job, corr, [warn], out)
    finally:
        watchdog.install(None)
    assert len(sent.frames) == 1
    frame = sent.frames[0]
    assert frame["op"] == protocol.TESTED and frame["verdict"]["status"] == "ok"
    part = frame["verdict"]
    assert part["correctness"] == {"passed": True} and part["findings"][0]["rule"] == "torch-op"
    assert part["flags"][0] == "a flag of the run"  # and the check's own flags, as the answer carries them
    assert any("cannot discriminate" in f for f in part["flags"])
    assert any("non-deterministic" in f for f in part["flags"])
    assert part["phases"] == {"import": 0.01, "verify": 0.5}
    assert out["flags"] == ["a flag of the run"]  # the benchmark's own answer is left as it was


def _evaluation(tmp_path: Path) -> Evaluation:
    v = Verdict(status="ok", problem=str(tmp_path / "problem.py"), candidate=str(tmp_path / "c"), mode="benchmark")
    v.build = BuildReport(ok=True, seconds=0.6)
    v.phases["build"] = 0.6
    return Evaluation(v=v, settings=EvalSettings(device="cpu"), mode="benchmark", problem_path=tmp_path,
                      cand_path=tmp_path, problem_arg=None, candidate_arg=None, own_kernels=None, kernels=[])


def test_a_staged_frame_becomes_a_test_verdict_and_leaves_the_benchmark_alone(tmp_path: Path) -> None:
    run = _evaluation(tmp_path)
    frame = {"op": protocol.TESTED, "ok": True, "verdict": {
        "status": "ok", "error": "", "flags": ["staged"], "phases": {"verify": 0.4},
        "correctness": {"passed": True, "trials": [], "atol": 0.01, "rtol": 0.01}, "findings": []}}
    tested = run.tested(frame)
    assert tested.mode == "test" and tested.status == "ok" and tested.correctness is not None
    assert tested.phases["verify"] == 0.4 and tested.phases["build"] == 0.6 and "staged" in tested.flags
    assert tested.summary
    assert run.v.mode == "benchmark" and run.v.correctness is None and not run.v.flags  # untouched


def test_a_failing_taker_does_not_end_the_benchmark(tmp_path: Path) -> None:
    run = _evaluation(tmp_path)
    assert Evaluator._interim(run) is None  # nothing staged without a taker

    def broken(_verdict: Verdict) -> None:
        raise RuntimeError("the screen is gone")

    run.on_tested = broken
    handler = Evaluator._interim(run)
    assert handler is not None
    handler({"op": protocol.TESTED, "ok": True, "verdict": {"status": "ok"}})
    assert any("could not be shown" in f for f in run.v.flags)


def test_only_a_timed_benchmark_waits_for_the_sass_check() -> None:
    from kernelpilot.evaluation.build.device_only import sass_wait

    assert sass_wait("benchmark", timed=True) is None  # its times stand once the kernels are the plain build's
    # an incorrect save's staged benchmark timed nothing: drawn as soon as known, as its test verdict would be
    assert sass_wait("benchmark", timed=False) == 0.0 and sass_wait("test", timed=False) == 0.0
