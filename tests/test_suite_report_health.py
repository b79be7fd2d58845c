"""The report's torch.compile-baseline figures, its engine health (retries, flaky verdicts, engine crashes,
out-of-memory and problem_too_large verdicts) and the KernelBench commit, on verdicts stored in a real
SQLite run (expectations worked out by hand in the comments)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot.cli import main
from kernelpilot.suite.discovery import Job, ProblemRef, kernelbench_sources
from kernelpilot.suite.report import build_report, write_report
from kernelpilot.suite.store import Store
from kernelpilot.verdict import Attempt, MemoryReport, Performance, Timing, Verdict

DATA = Path(__file__).parent / "data" / "suite"
GIB = 2**30
HASH = "89abcdef0123456789abcdef0123456789abcdef"


def _job(key: str, level: int) -> Job:
    return Job(ProblemRef(f"level{level}/{key}", Path(f"/p/{key}.py"), level, 1), Path(f"/s/{key}.py"), 0)


def _t(ms: float) -> Timing:
    return Timing(median_ms=ms, q1_ms=ms, q3_ms=ms, min_ms=ms, samples=10)


def _bench(eager_ms: float, cand_ms: float, compiled_ms: float | None, missing: str = "",
           stale_speedup: float | None = None) -> Verdict:
    """An ok benchmark verdict; ``compiled_ms`` None: no torch.compile time (``missing`` says why)."""
    perf = Performance(candidate=_t(cand_ms), eager=_t(eager_ms), compiled=_t(compiled_ms) if compiled_ms else None,
                       speedup_vs_eager=eager_ms / cand_ms, compiled_missing=missing,
                       speedup_vs_compile=compiled_ms / cand_ms if compiled_ms else stale_speedup)
    return Verdict(status="ok", mode="benchmark", performance=perf)


@pytest.fixture()
def baseline_run(tmp_path: Path) -> Store:
    store = Store(tmp_path / "run")
    store.set_meta(rules="kernelbench", mode="benchmark", source="fixture")
    rows = [
        (_job("A", 1), _bench(2.0, 1.0, 1.5)),  # 1.5x torch.compile: faster
        (_job("B", 1), _bench(2.0, 1.0, None, missing="torch.compile raised InductorError: no kernel")),  # no baseline
        (_job("C", 1), _bench(2.0, 1.0, None)),  # no compiled time and no speedup vs compile: no baseline
        (_job("D", 1), _bench(2.0, 1.0, 0.8)),  # 0.8x torch.compile: slower
        (_job("E", 2), Verdict(status="incorrect", mode="benchmark")),
        (_job("F", 2), _bench(3.0, 1.0, 1.2)),  # 1.2x: faster
        # a baseline said missing, yet a speedup vs compile stored: still counted as not faster
        (_job("H", 2), _bench(3.0, 1.0, None, missing="compile_baseline = false", stale_speedup=5.0)),
    ]
    store.plan([job for job, _ in rows] + [_job("G", 2)])  # G: planned, never run
    store.begin(["kernelpilot", "suite"])
    for job, verdict in rows:
        assert store.add(job, verdict)
    yield store
    store.close()


def test_no_baseline_counts_and_both_fast_1_rates(baseline_run: Store) -> None:
    r = build_report(baseline_run)
    l1, l2, overall = (r["views"]["sample0"][k] for k in ("level1", "level2", "overall"))
    # level 1: A faster; B and C have no baseline; D slower: 1 of 4 over all, 1 of the 2 with a baseline
    assert (l1["problems"], l1["no_compile_baseline"], l1["with_compile_baseline"]) == (4, 2, 2)
    assert l1["fast_1_vs_compile"] == pytest.approx(1 / 4)
    assert l1["fast_1_vs_compile_with_baseline"] == pytest.approx(1 / 2)
    assert l1["geomean_vs_compile"] == pytest.approx((1.5 * 0.8) ** 0.5)  # over the passing ones with a baseline
    # level 2: E incorrect, F faster, H no baseline (its stale 5x not counted), G not run yet
    assert (l2["problems"], l2["no_compile_baseline"], l2["with_compile_baseline"], l2["not_run_yet"]) == (4, 1, 3, 1)
    assert l2["fast_1_vs_compile"] == pytest.approx(1 / 4)
    assert l2["fast_1_vs_compile_with_baseline"] == pytest.approx(1 / 3)
    assert l2["geomean_vs_compile"] == pytest.approx(1.2)
    assert (overall["problems"], overall["no_compile_baseline"], overall["passed"], overall["failed"]) == (8, 3, 6, 1)
    assert overall["fast_1_vs_compile"] == pytest.approx(2 / 8)
    assert overall["faster_than_compile_rate"] == pytest.approx(2 / 8)
    assert overall["fast_1_vs_compile_with_baseline"] == pytest.approx(2 / 5)
    assert overall["fast_p_vs_eager"]["1"] == pytest.approx(6 / 8)  # vs eager every passing one is 2-3x
    flags = {p["problem"]: p["no_compile_baseline"] for p in r["per_problem"]}
    assert [k for k, v in flags.items() if v] == ["level1/B", "level1/C", "level2/H"]


def test_the_written_report_shows_the_baseline_table_and_zero_engine_crashes(baseline_run: Store) -> None:
    report, text = write_report(baseline_run.run_dir)
    assert "| level1 | 4 | 2 | 0 | 25.0% | 2 | 50.0% |" in text
    assert "| level2 | 4 | 1 | 0 | 25.0% | 3 | 33.3% |" in text
    assert "| overall | 8 | 3 | 0 | 25.0% | 5 | 40.0% |" in text
    assert "a crash of kernelpilot's, expected 0): **0**." in text
    assert "| overall | 7 | 0 | 0 | 0 | 0 | 0 |" in text  # engine health: 7 verdicts, nothing retried
    on_disk = json.loads((baseline_run.run_dir / "report.json").read_text())
    assert on_disk["views"]["sample0"]["level1"]["no_compile_baseline"] == 2
    assert on_disk["engine"]["levels"]["overall"]["engine_crashes"] == 0
    assert report["not_run_yet"] == 1 and "**Incomplete run:** 1 of 8 planned jobs not run yet" in text


def _died(phase: str = "import") -> Attempt:
    return Attempt(status="runtime_error", error="the worker was killed by signal SIGSEGV while importing", phase=phase)


def test_retries_flaky_engine_crashes_oom_and_problem_too_large(tmp_path: Path) -> None:
    store = Store(tmp_path / "run")
    store.set_meta(rules="kernelpilot", mode="benchmark", source="fixture")
    oom = MemoryReport(engine_held_bytes=2 * GIB, requested_bytes=4 * GIB, device_total_bytes=140 * GIB,
                       device_free_bytes=1 * GIB, phase="verify")
    rows = [
        # died once, then ran: flaky, and the first death was ours
        (_job("flaky", 1), Verdict(status="ok", mode="benchmark", attempts=[_died()], flaky=True)),
        # died in both attempts: the candidate's own crash (retried, not flaky, not ours)
        (_job("dies", 1), Verdict(status="runtime_error", mode="benchmark", attempts=[_died()],
                                  error="the worker was killed by signal SIGSEGV (first call)")),
        (_job("oom", 1), Verdict(status="runtime_error", mode="benchmark", memory=oom, error="CUDA out of memory.")),
        (_job("fine", 2), Verdict(status="incorrect", mode="benchmark")),
        (_job("huge", 2), Verdict(status="problem_too_large", mode="benchmark",
                                  error="one eager call of the problem's Model does not fit in this GPU's memory\nmore",
                                  memory=MemoryReport(requested_bytes=300 * GIB))),
    ]
    store.plan([job for job, _ in rows])
    for job, verdict in rows:
        store.add(job, verdict)
    engine = build_report(store)["engine"]
    store.close()
    assert engine["levels"]["level1"] == {"verdicts": 3, "retried": 2, "flaky": 1, "engine_crashes": 1,
                                          "out_of_memory": 1, "problem_too_large": 0}
    assert engine["levels"]["level2"] == {"verdicts": 2, "retried": 0, "flaky": 0, "engine_crashes": 0,
                                          "out_of_memory": 0, "problem_too_large": 1}
    assert engine["levels"]["overall"]["retried"] == 2 and engine["levels"]["overall"]["engine_crashes"] == 1
    assert engine["engine_crashes"] == ["level1/flaky#0"]
    assert [(d["job"], d["flaky"], d["engine_crash"], d["attempts"][0]["phase"]) for d in engine["retried"]] == [
        ("level1/flaky#0", True, True, "import"), ("level1/dies#0", False, False, "import")]
    assert engine["out_of_memory"] == [{"job": "level1/oom#0", "status": "runtime_error", "engine_held_bytes": 2 * GIB,
                                        "requested_bytes": 4 * GIB, "device_total_bytes": 140 * GIB,
                                        "device_free_bytes": GIB, "phase": "verify"}]
    assert [(d["job"], d["error"]) for d in engine["problem_too_large"]] == [
        ("level2/huge#0", "one eager call of the problem's Model does not fit in this GPU's memory")]
    report, text = write_report(tmp_path / "run")
    assert "a crash of kernelpilot's, expected 0): **1** (level1/flaky#0)." in text
    assert "- retried level1/flaky#0 (ok, flaky): the first worker died during import" in text
    assert ("- level1/oom#0 (runtime_error): the harness held 2.00 GiB when it called the candidate, the failing "
            "allocation asked for 4.00 GiB; 1.00 GiB of 140.00 GiB free afterwards; in verify") in text
    assert "## Problems too large for this GPU" in text and "- level2/huge#0: one eager call" in text
    assert "| level2 | 2 | 0 | 0 | 0 | 0 | 1 |" in text
    # problem_too_large is a failure of its level in the rates, and counted beside them
    assert report["views"]["sample0"]["level2"]["problem_too_large"] == 1
    assert report["views"]["sample0"]["level2"]["pass_rate"] == 0.0


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args], cwd=cwd,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _kernelbench(root: Path) -> Path:
    """KernelBench's own layout: ROOT/KernelBench/level1/<problem>.py."""
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    shutil.copy(DATA / "problems" / "1_scaled_add.py", level / "1_scaled_add.py")
    return level


def test_kernelbench_commit_from_git_or_a_commit_file(tmp_path: Path) -> None:
    repo = tmp_path / "KernelBench"
    level = _kernelbench(repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "problems")
    head = _git(repo, "rev-parse", "HEAD")
    for given in (repo, repo / "KernelBench", level, level / "1_scaled_add.py"):
        assert kernelbench_sources([given]) == [{"root": str(repo.resolve()), "commit": head, "from": "git",
                                                 "dirty": False}]
    (level / "1_scaled_add.py").write_text((level / "1_scaled_add.py").read_text() + "# edited\n")
    assert kernelbench_sources([repo])[0]["dirty"] is True
    copy = tmp_path / "copy"  # a copy without .git: its COMMIT file
    _kernelbench(copy)
    (copy / "COMMIT").write_text(HASH.upper() + "\n")
    assert kernelbench_sources([copy, copy / "KernelBench"]) == [
        {"root": str(copy.resolve()), "commit": HASH, "from": "COMMIT file"}]
    bare = tmp_path / "bare"  # neither: unknown, and why
    _kernelbench(bare)
    [entry] = kernelbench_sources([bare])
    assert entry["commit"] is None and "neither a git work tree nor a COMMIT file" in entry["why"]
    nested = repo / "vendored"  # inside another repository: not taken for that repository's commit
    _kernelbench(nested)
    assert kernelbench_sources([nested])[0]["commit"] is None
    assert kernelbench_sources([DATA / "problems"]) == []  # not a KernelBench checkout


def test_the_report_names_the_kernelbench_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "KernelBench"
    _kernelbench(repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "problems")
    head = _git(repo, "rev-parse", "HEAD")
    (tmp_path / "solutions").mkdir()
    run = tmp_path / "run"
    assert main(["suite", str(repo), "--solutions", str(tmp_path / "solutions"), "--out", str(run), "--device", "cpu",
                 "--mode", "test"]) == 0
    assert f"KernelBench commit `{head}` ({repo.resolve()}, from its git work tree)." in capsys.readouterr().out
    _git(repo, "commit", "-q", "--allow-empty", "-m", "later")  # stored at plan time: a later HEAD changes nothing
    assert main(["report", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kernelbench"][0]["commit"] == head
    assert f"KernelBench commit `{head}`" in (run / "report.md").read_text()


def test_a_problem_without_a_sample_0_is_missing_in_the_sample_0_view(tmp_path: Path) -> None:
    """A published set numbers samples by model: a problem the first model did not solve has no sample 0. In the
    sample-0 view (what KernelBench scores) it is missing, a failure as KernelBench counts it, not a job left for
    later; best-of-k takes the samples it has. A planned sample 0 without a verdict is still not run yet."""
    store = Store(tmp_path / "run")
    store.set_meta(rules="kernelbench", mode="benchmark", source="fixture")
    ref = ProblemRef("level1/A", Path("/p/A.py"), 1, 1)
    later = [Job(ref, Path(f"/s/A_{s}.py"), s) for s in (2, 5)]
    pending = Job(ProblemRef("level1/B", Path("/p/B.py"), 1, 2), Path("/s/B_0.py"), 0)
    store.plan([*later, pending])
    store.begin(["kernelpilot", "suite"])
    assert store.add(later[0], _bench(2.0, 1.0, 1.5))
    report = build_report(store)
    sample0, best = report["views"]["sample0"]["overall"], report["views"]["best_of_k"]["overall"]
    assert (sample0["passed"], sample0["failed"], sample0["not_run_yet"]) == (0, 1, 1)
    assert sample0["statuses"] == {"missing": 1}
    assert (best["passed"], best["failed"], best["not_run_yet"]) == (1, 0, 1)
    assert not report["complete"] and report["not_run_yet_jobs"] == [later[1].key, pending.key]
    store.close()
