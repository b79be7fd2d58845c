"""The re-scoring report: KernelBench's score beside ours, the difference table by reason (from synthetic
verdicts stored in a real SQLite run), KernelBench's static checker as a column, and the CLI's flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpilot.cli import main
from kernelpilot.suite.differences import classify
from kernelpilot.suite.discovery import Job, ProblemRef
from kernelpilot.suite.kb_static import detect_backend, find_checker, run_checker
from kernelpilot.suite.report import build_report, write_report
from kernelpilot.suite.store import Store
from kernelpilot.verdict import Correctness, Finding, KernelBenchScore, Performance, Timing, Verdict


def _t(ms: float, spread: float = 0.0) -> Timing:
    return Timing(median_ms=ms, q1_ms=ms * (1 - spread), q3_ms=ms * (1 + spread), min_ms=ms, samples=10)


def kb(status: str = "correct", speedup: float | None = 1.5, preset: str = "current") -> KernelBenchScore:
    return KernelBenchScore(preset=preset, status=status, compiled=status != "compile_error",
                            correctness=status == "correct", trials="(5 / 5)" if status == "correct" else "(0 / 5)",
                            speedup=speedup if status == "correct" else None, tolerance=1e-4,
                            max_difference=[] if status == "correct" else ["0.0301"])


def verdict(status: str, score: KernelBenchScore | None, *rules: str, speedup: float | None = 1.4,
            weights: str = "by seed", severity: str = "reject") -> Verdict:
    findings = [Finding(rule=r, message=f"{r} message",  # type: ignore[arg-type]
                        severity=severity if r != "global-state" else "warn",
                        evidence="cudnn_benchmark: False -> True" if r == "global-state" else r) for r in rules]
    perf = Performance(candidate=_t(1.0, 0.05), eager=_t(speedup or 1.0, 0.05), compiled=_t(1.2),
                       speedup_vs_eager=speedup, speedup_vs_compile=1.2) if speedup else None
    return Verdict(status=status, mode="benchmark", kernelbench=score, findings=findings,  # type: ignore[arg-type]
                   performance=perf,
                   correctness=Correctness(passed=status == "ok", atol=1e-4, rtol=1e-4, weights=weights))


@pytest.mark.parametrize("v,reason", [
    (verdict("rejected", kb(), "no-custom-kernel"), "fallback"),
    (verdict("rejected", kb(), "no-kernel", "library-kernel"), "no_kernel"),
    (verdict("rejected", kb(), "result-replay", "no-custom-kernel"), "caching"),  # caching first
    (verdict("rejected", kb(), "side-stream"), "stream"),
    (verdict("rejected", kb(), "background-thread"), "stream"),
    (verdict("rejected", kb(), "timer-patch"), "timing"),
    (verdict("incorrect", kb(), "global-state", "precision-lowered", severity="warn"), "global_state"),
    (verdict("incorrect", kb()), "precision"),  # our fp64 reference and tolerances
    (verdict("ok", kb("incorrect")), "precision"),  # KernelBench's allclose in its precision
    (verdict("ok", kb("incorrect"), weights="by name"), "weights"),
    (verdict("ok", kb(speedup=0.8), speedup=1.3), "timing"),  # both pass, fast_1 disagrees
    (verdict("timeout", kb(), speedup=None), "other"),
    (verdict("rejected", kb("not_run"), "process-creation"), "other"),
    (verdict("rejected", kb(), "lazy-tensor"), "other"),
    (verdict("ok", kb("runtime_error")), "other"),
])
def test_difference_reasons_from_typed_fields(v: Verdict, reason: str) -> None:
    d = classify(v)
    assert d is not None and d.reason == reason, d


def test_inputs_written_say_how_they_were_seen() -> None:
    """Values changed, or an output that is the input's storage (values the same: ReLU on non-negative
    inputs): both *other*, each with its own explanation."""
    changed = verdict("incorrect", kb())
    assert changed.correctness is not None
    changed.correctness.inputs_unmodified = False
    d = classify(changed)
    assert d is not None and d.reason == "other" and "checks the inputs after every call" in d.detail
    aliased = verdict("incorrect", kb())
    assert aliased.correctness is not None
    aliased.correctness.inputs_unmodified = aliased.correctness.outputs_own_storage = False
    d = classify(aliased)
    assert d is not None and d.reason == "other" and "which storage an output is" in d.detail


@pytest.mark.parametrize("v", [
    verdict("ok", kb(speedup=1.5), speedup=1.3),  # both pass and both faster
    verdict("incorrect", kb("incorrect")),  # both fail
    verdict("rejected", kb("incorrect"), "no-kernel"),
    verdict("ok", None),  # no KernelBench score (default rules): nothing to compare
])
def test_agreeing_scores_are_no_difference(v: Verdict) -> None:
    assert classify(v) is None


def _job(key: str, number: int, sample: int = 0, level: int = 1, candidate: Path | None = None) -> Job:
    return Job(ProblemRef(f"level{level}/{number}_{key}", Path(f"/p/{number}_{key}.py"), level, number),
               candidate or Path(f"/s/level_{level}_problem_{number}_sample_{sample}_kernel.py"), sample)


@pytest.fixture()
def rescored(tmp_path: Path) -> Path:
    store = Store(tmp_path / "run")
    store.set_meta(rules="kernelbench", mode="benchmark", source="fixture", overrides={"rules": "kernelbench"})
    rows = [
        (_job("Relu", 19), verdict("ok", kb(speedup=2.0), speedup=1.8)),  # both pass, both faster
        (_job("Relu", 19, 1), verdict("rejected", kb(speedup=3.0), "no-custom-kernel")),  # fallback ran
        (_job("Tanh", 22), verdict("rejected", kb(speedup=1.1), "no-kernel")),  # a PyTorch rewrite
        (_job("Tanh", 22, 1), verdict("ok", kb(speedup=1.2), speedup=1.25)),  # best-of-k: both take sample 1
        (_job("Gelu", 26), verdict("incorrect", kb(speedup=1.4), "global-state", severity="warn")),
        (_job("Mlp", 1, level=3), verdict("ok", kb("incorrect"), weights="by name", speedup=0.9)),
    ]
    store.plan([j for j, _ in rows] + [_job("Softmax", 23)])  # planned, never run: a failure in every rate
    store.begin(["kernelpilot", "suite"])
    for job, v in rows:
        store.add(job, v)
    store.close()
    return tmp_path / "run"


def test_scores_side_by_side_and_difference_table(rescored: Path) -> None:
    store = Store(rescored)
    report = build_report(store)
    store.close()
    section = report["rescore"]
    s0 = section["views"]["sample0"]["overall"]
    # 5 problems: sample 0 KernelBench passes Relu, Tanh, Gelu (3 of 5); ours passes Relu and Mlp (2 of 5)
    assert s0["kernelbench"]["problems"] == 5 and s0["kernelbench"]["pass_rate"] == pytest.approx(3 / 5)
    assert s0["ours"]["pass_rate"] == pytest.approx(2 / 5)
    assert s0["kernelbench"]["fast_p_vs_eager"]["1"] == pytest.approx(3 / 5)  # 2.0, 1.1, 1.4
    assert s0["kernelbench"]["fast_p_vs_eager"]["1.5"] == pytest.approx(1 / 5)
    assert s0["kernelbench"]["geomean_vs_eager"] == pytest.approx((2.0 * 1.1 * 1.4) ** (1 / 3))
    assert s0["ours"]["fast_p_vs_eager"]["1"] == pytest.approx(1 / 5)  # Mlp is 0.9x
    assert s0["kernelbench"]["pass_without_own_kernel"] == 1  # Tanh sample 0
    best = section["views"]["best_of_k"]["overall"]
    assert best["kernelbench"]["fast_p_vs_eager"]["2"] == pytest.approx(1 / 5)  # Relu sample 1: 3.0x
    assert best["ours"]["pass_rate"] == pytest.approx(3 / 5)  # Tanh sample 1 passes
    diffs = {reason: [d["job"] for d in items] for reason, items in section["differences"].items()}
    assert diffs == {"fallback": ["level1/19_Relu#1"], "no_kernel": ["level1/22_Tanh#0"],
                     "global_state": ["level1/26_Gelu#0"], "weights": ["level3/1_Mlp#0"]}
    assert section["static_checker"]["path"] is None
    assert "no KernelBench checkout" in section["static_checker"]["not_run"]


def test_markdown_and_json_carry_the_section(rescored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(rescored)]) == 0
    text = (rescored / "report.md").read_text()
    assert "## Re-scoring: KernelBench's score and ours" in text
    assert "fallback ran (no-custom-kernel" in text and "level1/19_Relu#1" in text
    assert "| overall | KernelBench | 5 |" in text and "| overall | kernelpilot | 5 |" in text
    assert "static checker" in text and "not run" in text
    data = json.loads((rescored / "report.json").read_text())
    assert set(data["rescore"]["differences"]) == {"fallback", "no_kernel", "global_state", "weights"}


FAKE_CHECKER = '''
def validate_kernel_static(code, backend="cuda", precision="fp16", forbidden=None, warnings=None):
    errors = []
    if backend == "cuda" and "load_inline" not in code:
        errors.append("Missing cuda_impl: no load_inline")
    if "try:" in code:
        errors.append("code_bypass: try/except")
    return not errors, errors, ["precision " + precision + " backend " + backend]
'''


def test_static_checker_runs_from_the_checkout_per_file(tmp_path: Path) -> None:
    checker = tmp_path / "kb" / "src" / "kernelbench" / "kernel_static_checker.py"
    checker.parent.mkdir(parents=True)
    checker.write_text(FAKE_CHECKER)
    found, why = find_checker([tmp_path / "kb" / "KernelBench"])  # the folder of levels: its parent is the root
    assert found == checker.resolve() and not why
    files = {"cuda": "load_inline(name='x')\n", "pure": "import torch\n",
             "triton": "import triton\n@triton.jit\ndef k(): pass\n",
             "fallback": "load_inline(name='x')\ntry:\n    pass\nexcept Exception:\n    pass\n"}
    paths = []
    for name, code in files.items():
        (tmp_path / f"{name}.py").write_text(code)
        paths.append(tmp_path / f"{name}.py")
    out = run_checker(found, paths + [tmp_path / "missing.py"], precision="fp32")
    assert out[str(tmp_path / "cuda.py")].valid is True
    assert out[str(tmp_path / "pure.py")].valid is False
    assert out[str(tmp_path / "triton.py")].valid is True and out[str(tmp_path / "triton.py")].backend == "triton"
    assert out[str(tmp_path / "triton.py")].warnings == ["precision fp32 backend triton"]
    assert "code_bypass" in out[str(tmp_path / "fallback.py")].label()
    assert out[str(tmp_path / "missing.py")].valid is None
    assert "cannot read" in out[str(tmp_path / "missing.py")].not_run
    none, why = find_checker([tmp_path / "elsewhere"])
    assert none is None and "no kernel_static_checker.py" in why
    assert run_checker(None, paths[:1], why=why)[str(paths[0])].label().startswith("not run (no kernel_static_checker")


def test_backend_detection() -> None:
    assert detect_backend("import triton\nimport triton.language as tl\n") == "triton"
    assert detect_backend("from torch.utils.cpp_extension import load_inline\n") == "cuda"
    assert detect_backend('src = "#include <kittens.cuh>\\n using namespace kittens::warp;"') == "thunderkittens"


KB_CHECKOUT = Path(__file__).resolve().parents[1] / ".kb"


@pytest.mark.skipif(not (KB_CHECKOUT / "src/kernelbench/kernel_static_checker.py").is_file(),
                    reason="no fetched KernelBench checkout in .kb")
def test_kernelbench_own_checker_on_the_corpus() -> None:
    corpus = Path(__file__).parent / "data" / "generations"
    manifest = json.loads((corpus / "expected.json").read_text())
    checker, _ = find_checker([KB_CHECKOUT])
    files = [corpus / e["file"] for e in manifest["files"]]
    out = run_checker(checker, files)
    assert all(r.valid is not None for r in out.values()), [r.not_run for r in out.values() if r.valid is None]
    for e in manifest["files"]:
        if "kernelbench_static" in e:
            assert out[str(corpus / e["file"])].valid == e["kernelbench_static"], e["file"]


def test_report_run_with_checkout_and_claims(rescored: Path, tmp_path: Path) -> None:
    checker = tmp_path / "kb" / "src" / "kernelbench" / "kernel_static_checker.py"
    checker.parent.mkdir(parents=True)
    checker.write_text(FAKE_CHECKER)
    claims = tmp_path / "claims.csv"
    claims.write_text("problem,sample,claimed_x_eager,gpu\nlevel1/19_Relu,0,1.9,H100\n\"1,22\",0,1.1,\n")
    report, text = write_report(rescored, claims=claims, checkout=tmp_path / "kb")
    # the solution files do not exist: the checker column says so per file
    assert all(j["static"]["valid"] is None for j in report["rescore"]["per_job"])
    rows = report["rescore"]["claims"]["rows"]
    assert rows[0]["figures"][0]["verdict"] == "holds" and rows[0]["claimed_gpu"] == "H100"
    assert rows[1]["key"] == "level1/22_Tanh" and rows[1]["figures"][0]["verdict"] == "no honest verdict"
    assert "### Claimed speedups" in text
    again, _ = write_report(rescored)  # kept in the run
    assert again["rescore"]["claims"]["file"] == str(claims.resolve())
