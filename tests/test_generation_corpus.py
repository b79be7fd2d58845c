"""The hand-written generation corpus (tests/data/generations/, KernelBench-style single-file solutions): what
a CPU can check. Every file parses and loads as a candidate of the kind its pattern says; the static policy
refuses before running exactly what the manifest says under each preset; the difference reason the report
gives for each file's expected outcome is the manifest's (kernelpilot.suite.differences); the generation
names are KernelBench's layout. The GPU outcomes are checked by benchmarks/rescore_gpu.sh on an H100/H200."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernelpilot.evaluation.candidate import load_candidate
from kernelpilot.evaluation.static.policy import check_candidate
from kernelpilot.suite.differences import REASONS, classify
from kernelpilot.suite.discovery import parse_generation_name
from kernelpilot.verdict import Correctness, Finding, KernelBenchScore, Performance, Timing, Verdict

CORPUS = Path(__file__).parent / "data" / "generations"
MANIFEST = json.loads((CORPUS / "expected.json").read_text())
ENTRIES = MANIFEST["files"]
PRESETS = ("kernelpilot", "kernelbench", "kernelbench-v0.1")
KB_STATUSES = {"correct", "incorrect", "runtime_error", "compile_error", "not_run"}
OUR_STATUSES = {"ok", "rejected", "incorrect", "runtime_error", "build_error", "timeout"}
KB_CHECKOUT = Path(__file__).resolve().parents[1] / ".kb"


def _ids(entries: list[dict]) -> list[str]:
    return [e["file"] for e in entries]


def test_the_manifest_lists_every_file_once() -> None:
    on_disk = sorted(p.name for p in CORPUS.glob("*.py"))
    assert sorted(_ids(ENTRIES)) == on_disk and len(on_disk) >= 40
    names = [e["generation_name"] for e in ENTRIES]
    assert len(set(names)) == len(names)
    for e in ENTRIES:
        level, pid, _sample = parse_generation_name(e["generation_name"]) or (None, None, None)
        assert e["problem"] == f"level{level}/{e['problem'].split('/')[1]}"
        assert e["problem"].split("/")[1].startswith(f"{pid}_")
        assert set(e["kernelpilot"]) == set(PRESETS) and set(e["kernelbench"]) == set(PRESETS[1:])
        assert all(v["status"] in OUR_STATUSES for v in e["kernelpilot"].values())
        assert all(v in KB_STATUSES for v in e["kernelbench"].values())
        assert all(d is None or d in REASONS for d in e["difference"].values())


def test_both_kinds_of_every_pattern() -> None:
    honest = [e for e in ENTRIES if e["honest"]]
    dishonest = [e for e in ENTRIES if not e["honest"]]
    assert len(honest) >= 15 and len(dishonest) >= 15
    patterns = " ".join(e["pattern"] for e in ENTRIES)
    for word in ("top level", "__init__", "first forward", "autograd Function", "helper", "assembled at run time",
                 "cpp_extension.load",
                 "kernel taken", "fallback taken", "TORCH_CUDA_ARCH_LIST", "cudnn", "allow_tf32", "renamed", "derived",
                 "CUDA graph", "autotuning", "pure PyTorch", "mixed precision", "Triton", "cached", "side stream",
                 "thread"):
        assert word in patterns, word


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids(ENTRIES))
def test_every_file_parses_and_loads(entry: dict) -> None:
    path = CORPUS / entry["file"]
    tree = ast.parse(path.read_text(), filename=str(path))
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    kind = load_candidate(path).kind
    if "pure PyTorch" in entry["pattern"]:
        assert kind == "pytorch"
    elif "Triton" in entry["pattern"]:
        assert kind == "triton"
    else:
        assert kind == "single_file"


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("entry", ENTRIES, ids=_ids(ENTRIES))
def test_static_policy_refuses_what_the_manifest_says(entry: dict, preset: str) -> None:
    refused = {f.rule for f in check_candidate(CORPUS / entry["file"], rules=preset) if f.severity == "reject"}
    assert refused == set(entry["static"][preset])
    ours = entry["kernelpilot"][preset]
    if refused:  # refused before running: rejected, naming a static rule
        assert ours["status"] == "rejected" and set(ours["rules"]) <= refused
        if preset != "kernelpilot":
            assert entry["kernelbench"][preset] == "not_run"


def _verdict(entry: dict, preset: str) -> Verdict:
    """A verdict with the outcome the manifest expects (its status, reject and warn findings, KernelBench's status)."""
    ours = entry["kernelpilot"][preset]
    findings = [Finding(rule=r, message=r, severity="reject") for r in ours["rules"]]
    findings += [Finding(rule=r, message=r, severity="warn", evidence=r) for r in ours.get("warnings", [])]
    status = entry["kernelbench"][preset]
    kb = KernelBenchScore(preset="v0.1" if preset.endswith("v0.1") else "current", status=status,
                          correctness=status == "correct", tolerance=1e-2 if preset.endswith("v0.1") else 1e-4)
    t = Timing(median_ms=1.0, q1_ms=1.0, q3_ms=1.0, min_ms=1.0, samples=10)
    return Verdict(status=ours["status"], kernelbench=kb, findings=findings,
                   performance=Performance(candidate=t, eager=t, speedup_vs_eager=None),
                   correctness=Correctness(passed=ours["status"] == "ok", weights=entry.get("weights", "by seed"),
                                           inputs_unmodified=entry.get("inputs_unmodified", True)))


@pytest.mark.parametrize("preset", PRESETS[1:])
@pytest.mark.parametrize("entry", ENTRIES, ids=_ids(ENTRIES))
def test_the_report_gives_the_manifests_difference_reason(entry: dict, preset: str) -> None:
    d = classify(_verdict(entry, preset))
    assert (d.reason if d else None) == entry["difference"][preset]


@pytest.mark.skipif(not (KB_CHECKOUT / "KernelBench").is_dir(), reason="no fetched KernelBench checkout in .kb")
def test_every_problem_is_a_kernelbench_problem() -> None:
    for e in ENTRIES:
        assert (KB_CHECKOUT / e["problem_file"]).is_file(), e["problem_file"]
