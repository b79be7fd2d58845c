"""The adversarial corpus on a real GPU: every cheat gets the right status and rule, honest kernels
pass, and a crash / hang / OOM never breaks the next evaluation. Run on the H200:

    .venv/bin/pytest -m gpu tests/gpu/test_adversarial.py -v
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adversarial_corpus import CASES, CUTE_CASES, HONEST, PROBLEMS, Case, check_verdict, materialize  # noqa: E402

from kernelpilot.evaluation import EvalSettings, Evaluator  # noqa: E402
from kernelpilot.verdict import Verdict  # noqa: E402

pytestmark = pytest.mark.gpu

BASE = EvalSettings(rounds=3, samples_per_round=10, test_timeout_s=180, benchmark_timeout_s=600)


@pytest.fixture(scope="module")
def candidate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("adversarial") / "candidate"


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    ev = Evaluator(BASE, workdir=tmp_path_factory.mktemp("eval-work"))
    yield ev
    ev.close()


def evaluate(ev: Evaluator, case: Case, directory: Path, *, relaxed: bool) -> Verdict:
    directory = materialize(case, directory)
    ev.settings = dataclasses.replace(
        BASE, relaxed_policy=list(case.relax) if relaxed else [], allowed_libraries=list(case.allowed),
        test_timeout_s=60 if case.expect == {"timeout"} else BASE.test_timeout_s)
    return ev.evaluate(PROBLEMS[case.problem], directory, mode=case.mode)


@pytest.mark.parametrize("case", [*CASES, *(pytest.param(c, marks=pytest.mark.cute) for c in CUTE_CASES)],
                         ids=[c.name for c in [*CASES, *CUTE_CASES]])
def test_corpus_case(evaluator: Evaluator, candidate_dir: Path, case: Case) -> None:
    if case in CUTE_CASES and importlib.util.find_spec("cutlass") is None:
        pytest.skip("the CuTe DSL ([cute] extra) is not installed: benchmarks/cute_gpu.sh runs these with it")
    verdict = evaluate(evaluator, case, candidate_dir, relaxed=True)
    assert check_verdict(case, verdict, relaxed=True) == [], verdict.to_json(indent=1)[:6000]
    if case.static_rule:  # the same cheat as written: refused before anything runs
        static = evaluate(evaluator, case, candidate_dir, relaxed=False)
        assert check_verdict(case, static, relaxed=False) == [], static.summary
        assert static.build is None
    if case.breaks_worker or verdict.status in ("runtime_error", "timeout"):
        after = evaluate(evaluator, HONEST[0], candidate_dir, relaxed=False)
        assert after.status == "ok", f"the evaluation after {case.name} failed: {after.summary}\n{after.error}"


def test_honest_verdict_details(evaluator: Evaluator, candidate_dir: Path) -> None:
    case = HONEST[0]
    v = evaluate(evaluator, case, candidate_dir, relaxed=False)
    assert v.status == "ok", v.error
    c = v.correctness
    assert c is not None and c.passed and c.discriminates and c.inputs_unmodified and c.fully_written
    assert {t.order for t in c.trials} == {"candidate_first", "reference_first"}
    p = v.performance
    assert p is not None and p.candidate and p.eager and p.compiled
    # device-timed samples (behind the spin) only; the other half are launch-inclusive (host cross-check)
    total = BASE.rounds * BASE.samples_per_round
    assert total // 2 <= p.candidate.samples < total and p.candidate.launch_median_ms is not None
    assert p.speedup_vs_eager is not None and p.tier != "incorrect"
    s = v.speed_of_light
    assert s is not None and s.bound == "memory" and s.floor_ms and s.pct_of_ceiling is not None
    assert 0 < s.pct_of_ceiling < 105, s
    assert v.environment.gpu and v.environment.sm.startswith("sm_") and v.environment.confinement
    assert not [f for f in v.findings if f.severity == "reject"]


def test_extra_shapes_are_verified(evaluator: Evaluator, candidate_dir: Path) -> None:
    case = next(c for c in HONEST if c.problem == "softmax")
    materialize(case, candidate_dir)
    evaluator.settings = dataclasses.replace(BASE, extra_shapes=[{"name": "odd", "inputs": [[7, 1000]]}])
    v = evaluator.evaluate(PROBLEMS["softmax"], candidate_dir, mode="test")
    assert v.status == "ok", v.summary
    assert v.correctness is not None and {t.shape_set for t in v.correctness.trials} == {"default", "odd"}


def test_cli_eval_json(candidate_dir: Path) -> None:
    materialize(HONEST[0], candidate_dir)
    out = subprocess.run([sys.executable, "-m", "kernelpilot", "eval", str(PROBLEMS["scale_add"]), str(candidate_dir),
                          "--mode", "test", "--json"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    assert json.loads(out.stdout)["status"] == "ok"
    bad = next(c for c in CASES if c.name == "precision_downgrade")
    materialize(bad, candidate_dir)
    text = subprocess.run([sys.executable, "-m", "kernelpilot", "eval", str(PROBLEMS["scale_add"]), str(candidate_dir),
                           "--mode", "test"], capture_output=True, text=True, timeout=900)
    assert text.returncode == 1 and "verdict: INCORRECT" in text.stdout


def test_warm_worker_picks_up_an_edited_kernel(evaluator: Evaluator, candidate_dir: Path) -> None:
    """Edit -> verdict on a warm worker must judge the new kernel, never the one already loaded."""
    case = HONEST[0]
    materialize(case, candidate_dir)
    evaluator.settings = BASE
    assert evaluator.evaluate(PROBLEMS["scale_add"], candidate_dir, mode="test").status == "ok"
    kernel = candidate_dir / "kernels.cu"
    good = "out[i] = alpha * x[i] + y[i];"
    kernel.write_text(kernel.read_text().replace(good, "out[i] = alpha * x[i] - y[i];", 1))
    try:
        broken = evaluator.evaluate(PROBLEMS["scale_add"], candidate_dir, mode="test")
        assert broken.status == "incorrect", broken.summary
        assert broken.build is not None and "kernels.cu" in " ".join(broken.build.rebuilt)
    finally:
        kernel.write_text(kernel.read_text().replace("out[i] = alpha * x[i] - y[i];", good, 1))
    assert evaluator.evaluate(PROBLEMS["scale_add"], candidate_dir, mode="test").status == "ok"
