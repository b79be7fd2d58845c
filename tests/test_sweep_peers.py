"""The example sweep's peers and report, on the CPU: a peer that cannot run says why, and the table
puts each peer's time (or its reason) beside ours, with the geomeans over torch.compile and the
fastest peer computed by hand below."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))

from peers import PACKAGES, PEERS, peer  # noqa: E402
from sweep_report import Row, summary, table  # noqa: E402


def test_a_peer_that_cannot_run_says_why() -> None:
    for name in PEERS:
        got = peer(name, "gemm_bias_gelu", model=None)
        if importlib.util.find_spec(PACKAGES[name]) is None:
            assert got.fn is None and got.note.startswith("unavailable: ModuleNotFoundError"), got
        else:
            assert got.fn is None and got.note == f"{name} has no gemm_bias_gelu forward"
    with pytest.raises(ValueError, match="unknown peer 'apex'"):
        peer("apex", "softmax", None)


def test_table_and_geomeans_with_peers() -> None:
    rows = [
        # ours 0.5 ms; liger 0.6, quack 0.55 -> fastest peer 0.55: x 1.1; compile 1.0: x 2.0
        Row(op="softmax", shape="8192x65536", dtype="bf16", eager_ms=2.0, compile_ms=1.0, cand_ms=0.5,
            vs_compile=2.0, vs_eager=4.0, vs_peer=1.1, correct=True, peer_ms={"liger": 0.6, "quack": 0.55},
            peer_notes={"liger": "", "quack": ""}),
        # ours 1.0 ms; liger ran (with an adaptation), quack did not: x vs fastest peer 0.8 / 1.0 = 0.8
        Row(op="cross_entropy", shape="4096x65536", dtype="bf16", compile_ms=1.25, cand_ms=1.0, vs_compile=1.25,
            vs_peer=0.8, correct=True, peer_ms={"liger": 0.8, "quack": None},
            peer_notes={"liger": "loss returned in the logits' dtype, compared as float32",
                        "quack": "unavailable: ModuleNotFoundError: No module named 'quack'"}),
        # fp32: our kernel does not run; the peers' and the baselines' times are still listed
        Row(op="softmax", shape="4096x65536", dtype="fp32", compile_ms=2.0, note="our example kernel takes bf16 only",
            peer_ms={"liger": 1.1, "quack": None},
            peer_notes={"liger": "", "quack": "incorrect: it changed its inputs"}),
    ]
    text = table(rows, ["liger", "quack"])
    lines = text.splitlines()
    assert lines[0].startswith("| op | dtype | shape | eager ms | compile ms | liger ms | quack ms | candidate ms")
    assert "| 0.600 | 0.550 | 0.500 (-) |" in lines[2] and "| 2.00 | 1.10 | 4.00 | yes |" in lines[2]
    assert "| 0.800 | unavailable: ModuleNotFoundError: No module named 'quack' |" in lines[3]
    assert "liger: loss returned in the logits' dtype, compared as float32" in lines[3]
    assert "| fp32 |" in lines[4] and "| 1.100 | incorrect: it changed its inputs | - (-) |" in lines[4]
    out = "\n".join(summary(rows, ["softmax", "cross_entropy"], ["liger", "quack"], [], ("softmax", "cross_entropy")))
    # geomeans: vs compile sqrt(2.0 * 1.25) = 1.58; vs fastest peer sqrt(1.1 * 0.8) = 0.94
    assert "over the memory-bound sweep (2 cases): 1.58" in out
    assert "geomean x vs the fastest peer over the memory-bound sweep (2 cases): 0.94" in out
    assert "softmax: geomean x vs compile 2.00, x vs fastest peer 1.10" in out
    assert "incorrect or failed: none" in out


def test_saved_rows_are_reported_and_a_remeasured_case_replaces_the_first(tmp_path: Path) -> None:
    import json
    from dataclasses import asdict

    from sweep_report import load_rows, main

    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    old = Row(op="softmax", shape="8192x65536", dtype="bf16", cand_ms=0.9, compile_ms=1.0, vs_compile=1.0 / 0.9,
              correct=True)
    other = Row(op="rmsnorm", shape="8192x65536", dtype="fp32", cand_ms=1.0, compile_ms=1.5, vs_compile=1.5,
                correct=True, peer_ms={"quack": 1.2}, peer_notes={"quack": ""})
    new = Row(op="softmax", shape="8192x65536", dtype="bf16", cand_ms=0.5, compile_ms=1.0, vs_compile=2.0,
              correct=True)
    first.write_text(json.dumps(asdict(old)) + "\n" + json.dumps(asdict(other)) + "\n")
    second.write_text("\n" + json.dumps(asdict(new)) + "\n")
    rows = load_rows([first, second])
    assert [(r.op, r.cand_ms) for r in rows] == [("softmax", 0.5), ("rmsnorm", 1.0)]
    assert main([str(first), str(second)]) == 0
    assert main([]) == 2


def test_variant_timer_refuses_a_directory_without_a_candidate(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from bench_variants import main

    assert main(["softmax", str(tmp_path)]) == 2
    assert f"no model_new.py in {tmp_path}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["gelu", str(EXAMPLES / "softmax" / "candidate")])
