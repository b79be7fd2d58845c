"""The engine uses the worker only through the protocols of worker/interface.py, and the worker has all of it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Protocol

import pytest

from kernelpilot.evaluation.worker import interface

EVALUATION = Path(__file__).resolve().parents[1] / "kernelpilot" / "evaluation"
# each engine module, and the protocol it is handed the worker as
USERS = {
    "worker/pipeline.py": interface.CandidateWorker,
    "timing/candidate.py": interface.TimingWorker,
    "baselines/measure.py": interface.BaselineWorker,
}
PROTOCOLS = (interface.TimingWorker, interface.ProblemWorker, interface.CandidateWorker, interface.BaselineWorker)


def members(proto: type) -> set[str]:
    names: set[str] = set()
    for klass in proto.__mro__:
        if klass is Protocol or not getattr(klass, "_is_protocol", False):
            continue
        names |= set(vars(klass).get("__annotations__", {}))
        names |= {n for n, v in vars(klass).items() if callable(v) and not n.startswith("_")}
    return names


def worker_attributes(source: str) -> set[str]:
    """Every ``worker.X`` and ``<anything>.worker.X`` the module reads."""
    used: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        if (isinstance(value, ast.Name) and value.id == "worker") or (
                isinstance(value, ast.Attribute) and value.attr == "worker"):
            used.add(node.attr)
    return used


@pytest.mark.parametrize("path", sorted(USERS))
def test_the_engine_reads_only_what_its_protocol_lists(path: str) -> None:
    used = worker_attributes((EVALUATION / path).read_text())
    assert used, path  # the scan sees the module's uses at all
    assert used <= members(USERS[path]), f"{path} reads {sorted(used - members(USERS[path]))} beyond its protocol"


def test_the_worker_satisfies_every_protocol() -> None:
    from kernelpilot.evaluation.worker.main import Worker

    worker = Worker("cpu")
    for proto in PROTOCOLS:
        assert isinstance(worker, proto), proto.__name__
    assert members(interface.CandidateWorker) >= {"device", "pristine", "problem_state", "compiled",
                                                  "import_candidate", "build_model", "identities"}
