"""The suite's cores: each GPU slot's worker on cores of its own, the builds on the rest (suite/cores.py), and a
worker started with KERNELPILOT_WORKER_CPUS lives on those cores, every thread and child of it (a thread or
process starts on its parent's cores)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelpilot.suite import cores


def test_the_split_gives_each_slot_its_cores_and_the_builds_the_rest() -> None:
    split = cores.split(list(range(16)), 1)  # a quarter of 16 cores for the one slot's worker
    assert split.workers == [[12, 13, 14, 15]] and split.build == list(range(12))
    assert split.worker_env(0) == {cores.ENV: "12,13,14,15"} and "builds on 12 others" in split.note
    assert cores.split(list(range(8)), 1).workers == [[6, 7]]  # at least two
    assert [len(w) for w in cores.split(list(range(128)), 8).workers] == [4] * 8
    two = cores.split(list(range(16)), 2, per_slot=3)
    assert two.workers == [[10, 11, 12], [13, 14, 15]] and two.build == list(range(10))
    # too few cores for a split: everything shared, and the note says why
    for split, why in ((cores.split([0, 1], 1), "2 cores (a split needs 8)"),
                       (cores.split(list(range(8)), 4), "cannot give 4 worker(s) 2 each"),
                       (cores.split(list(range(16)), 1, per_slot=0), "turned off")):
        assert split.workers == [] and split.worker_env(0) == {} and why in split.note
        assert split.build == sorted(split.build) and len(split.build) in (2, 8, 16)


@pytest.mark.skipif(len(cores.available()) < 2, reason="needs two cores to keep one apart")
def test_apply_and_restore_move_the_calling_thread_only_while_the_pool_lives() -> None:
    before = cores.available()
    split = cores.CoreSplit(before[:-1], [[before[-1]]])
    split.apply()
    try:
        assert cores.available() == before[:-1]
    finally:
        split.restore()
    assert cores.available() == before


def _tasks(pid: int) -> list[Path]:
    out: list[Path] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out.append(task)
        for child in (task / "children").read_text().split():
            out += _tasks(int(child))
    return out


@pytest.mark.skipif(len(cores.available()) < 2, reason="needs two cores to keep one apart")
def test_a_worker_started_on_its_cores_keeps_every_thread_there(tmp_path: Path) -> None:
    from kernelpilot.evaluation.client.process import WorkerClient

    mine = cores.available()[-1]
    client = WorkerClient(tmp_path, device="cpu", extra_env={cores.ENV: str(mine)})
    client.start()
    try:
        assert client.proc is not None
        tasks = _tasks(client.proc.pid)  # the sandbox's launcher and the worker under it, every thread
        commands = [(task / "cmdline").read_bytes() for task in tasks]
        assert any(b"kernelpilot.evaluation.worker" in c for c in commands)  # the worker itself is among them
        for task in tasks:
            status = (task / "status").read_text()
            allowed = next(line.split(":")[1].strip() for line in status.splitlines()
                           if line.startswith("Cpus_allowed_list"))
            assert allowed == str(mine), (task.name, allowed)
    finally:
        client.stop()
    assert os.sched_getaffinity(0) == set(cores.available())  # the caller's own cores are untouched
