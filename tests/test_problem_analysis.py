"""The problem's analysis (bytes moved, flops: what the speed of light needs) is made once per problem in the
worker, on first use, and taken from the shared baselines when they carry it: loading a problem no longer
pays for it (a recurrent problem's took seconds of every first verdict on the H100, timed or not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.evaluation.baselines.values import Baselines

PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 32)

    def forward(self, x):
        return self.lin(x)

def get_inputs():
    return [torch.rand(16, 64)]

def get_init_inputs():
    return []
'''


def test_analysis_is_made_on_first_use_once_or_taken_from_the_baselines(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelpilot.problem as problem
    from kernelpilot.evaluation.worker.main import Worker

    (tmp_path / "lin.py").write_text(PROBLEM)
    calls: list[str] = []
    real = problem.analyse

    def counted(*args, **kwargs):
        calls.append("analyse")
        return real(*args, **kwargs)

    monkeypatch.setattr(problem, "analyse", counted)
    worker = Worker("cpu")
    state = worker.problem_state(str(tmp_path / "lin.py"), 42)
    assert state.info is None and calls == []  # loading the problem does not analyse it
    info = state.analysis()
    assert info["flops"] == pytest.approx(2 * 16 * 64 * 32, rel=0.05) and info["bytes_moved"] > 0
    assert state.analysis() is info and calls == ["analyse"]  # made once

    # a baseline record carries it: the next problem (here: another seed) takes it without analysing
    carried = {"bytes_moved": 123, "flops": 456, "flops_by_op": {"aten.addmm": 456}}
    record = Baselines(problem_info=carried).to_dict()
    other = worker.problem_state(str(tmp_path / "lin.py"), 7)
    assert other.analysis(Baselines.from_dict(record).problem_info) == carried and calls == ["analyse"]
    # a record from before the analysis was kept: it is made here
    old = {k: v for k, v in record.items() if k != "problem_info"}
    third = worker.problem_state(str(tmp_path / "lin.py"), 8)
    assert third.analysis(Baselines.from_dict(old).problem_info)["flops"] == info["flops"]
    assert calls == ["analyse", "analyse"]


def test_a_failed_analysis_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelpilot.problem as problem
    from kernelpilot.evaluation.worker.main import Worker

    (tmp_path / "lin.py").write_text(PROBLEM)

    def fails(*args, **kwargs):
        raise RuntimeError("no meta kernel")

    monkeypatch.setattr(problem, "analyse", fails)
    state = Worker("cpu").problem_state(str(tmp_path / "lin.py"), 42)
    assert state.analysis() == {"note": "problem analysis failed (RuntimeError: no meta kernel)"}
