"""``--claims FILE``: the CSV's forms, its error cases, matching rows to the run's problems (unmatched and
duplicate rows kept), and each claim judged against the measured speedup and its spread."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.cli import main
from kernelpilot.suite.claims import ClaimsError, check_claims, judge, parse_claims
from kernelpilot.suite.discovery import ProblemRef

REFS = [ProblemRef("level1/23_Softmax", Path("/p/23_Softmax.py"), 1, 23),
        ProblemRef("level2/23_Conv3d_GroupNorm_Mean", Path("/p/23_Conv3d.py"), 2, 23),
        ProblemRef("level1/19_ReLU", Path("/p/19_ReLU.py"), 1, 19)]


def _csv(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "claims.csv"
    p.write_text(text)
    return p


def test_every_problem_form(tmp_path: Path) -> None:
    claims = parse_claims(_csv(tmp_path, (
        "Problem,sample,claimed_x_eager,claimed_x_compile,gpu\n"
        "level1/23_Softmax,0,1.5,,H100\n"
        "\"1,19\",2,2x,1.1,\n"
        "2/23,,,0.9,A100\n"
        "\n"
        "23_Softmax,1,3.0,,\n")))
    assert [c.line for c in claims] == [2, 3, 4, 6]
    assert claims[0].x_eager == 1.5 and claims[0].x_compile is None and claims[0].gpu == "H100"
    assert claims[1].problem == "1,19" and claims[1].sample == 2 and claims[1].x_eager == 2.0
    assert claims[1].x_compile == 1.1
    assert claims[2].sample == 0 and claims[2].x_compile == 0.9
    results = check_claims(claims, REFS, {}, {})
    assert [r.key for r in results] == ["level1/23_Softmax", "level1/19_ReLU", "level2/23_Conv3d_GroupNorm_Mean",
                                        "level1/23_Softmax"]


def test_level_and_problem_id_columns(tmp_path: Path) -> None:
    claims = parse_claims(_csv(tmp_path, "level,problem_id,claimed_x_eager\n1,23,1.2\nlevel2,23,1.3\n"))
    assert [c.problem for c in claims] == ["1/23", "2/23"]
    assert [r.key for r in check_claims(claims, REFS, {}, {})] == ["level1/23_Softmax",
                                                                   "level2/23_Conv3d_GroupNorm_Mean"]


def test_unmatched_and_duplicate_rows_are_kept(tmp_path: Path) -> None:
    claims = parse_claims(_csv(tmp_path, "problem,claimed_x_eager\n23,1.1\n9/9,1.1\nlevel1/19_ReLU,1.2\n1/19,1.3\n"))
    results = check_claims(claims, REFS, {}, {})
    assert len(results) == 4
    assert results[0].key is None and "names 2 problems" in results[0].why_unmatched  # id 23 in two levels
    assert results[1].key is None and "names no problem" in results[1].why_unmatched
    assert results[2].duplicate_of is None and results[3].duplicate_of == 4  # same problem and sample as line 4
    assert results[3].figures[0]["verdict"] == "no honest verdict" and results[3].status == "not run yet"


@pytest.mark.parametrize("text,message", [
    ("", "is empty"),
    ("sample,claimed_x_eager\n0,1.5\n", "no `problem` column"),
    ("problem,gpu\nlevel1/19_ReLU,H100\n", "no `claimed_x_eager` or `claimed_x_compile`"),
    ("problem,speedup\nlevel1/19_ReLU,1.5\n", "unknown column(s) 'speedup'"),
    ("problem,claimed_x_eager\nlevel1/19_ReLU,150%\n",
     "line 2: claimed_x_eager is '150%': write the speedup as a ratio"),
    ("problem,claimed_x_eager\nlevel1/19_ReLU,fast\n", "line 2: claimed_x_eager is 'fast', not a number"),
    ("problem,claimed_x_eager\nlevel1/19_ReLU,-2\n", "positive ratio"),
    ("problem,claimed_x_eager\n1,19,1.5\n", "line 2: 3 fields for a header of 2"),
    ("problem,sample,claimed_x_eager\nlevel1/19_ReLU,first,1.5\n", "sample 'first' is not a sample number"),
    ("problem,claimed_x_eager,claimed_x_compile\nlevel1/19_ReLU,,\n", "line 2: no claimed figure"),
    ("level,problem_id,claimed_x_eager\none,19,1.5\n", "must be integers"),
])
def test_malformed_files_say_what_to_fix(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ClaimsError) as err:
        parse_claims(_csv(tmp_path, text))
    assert message in str(err.value)


def test_every_error_is_listed_at_once(tmp_path: Path) -> None:
    with pytest.raises(ClaimsError) as err:
        parse_claims(_csv(tmp_path, "problem,claimed_x_eager\na,1%\nb,x\nc,0\n"))
    assert all(f"line {n}" in str(err.value) for n in (2, 3, 4))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ClaimsError, match="cannot read the claims file"):
        parse_claims(tmp_path / "nope.csv")


def test_judgements() -> None:
    assert judge(2.0, 1.85, None, True, "")[0] == "holds"  # 1.85 >= 0.9 x 2.0
    assert judge(2.0, 1.7, None, True, "")[0] == "does not hold"
    assert judge(2.0, 1.7, (1.5, 2.1), True, "")[0] == "holds"  # within the measured spread
    assert judge(2.0, 1.7, (1.5, 1.9), True, "")[0] == "does not hold"
    assert judge(2.0, 5.0, None, False, "our status is rejected") == ("no honest verdict", "our status is rejected")
    assert judge(2.0, None, None, True, "no torch.compile time")[0] == "no honest verdict"


def test_measured_figures_and_spread() -> None:
    perf = {"speedup_vs_eager": 1.7, "speedup_vs_compile": None, "compiled_missing": "torch.compile failed",
            "candidate": {"q1_ms": 0.95, "q3_ms": 1.05}, "eager": {"q1_ms": 1.6, "q3_ms": 2.0}}
    verdicts = {("level1/19_ReLU", 0): {"performance": perf, "kernelbench": {"speedup": 1.9}}}
    claims = [c for c in [__import__("kernelpilot.suite.claims", fromlist=["Claim"]).Claim(2, "1/19", 0, 2.0, 1.5)]]
    res = check_claims(claims, REFS, verdicts, {("level1/19_ReLU", 0): "ok"})[0]
    eager, compiled = res.figures
    assert eager["verdict"] == "holds" and eager["spread"] == pytest.approx((1.6 / 1.05, 2.0 / 0.95))
    assert eager["kernelbench_measured"] == 1.9
    assert compiled["verdict"] == "no honest verdict" and compiled["why"] == "torch.compile failed"


def test_cli_refuses_a_malformed_file_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _csv(tmp_path, "problem,claimed_x_eager\nlevel1/19_ReLU,150%\n")
    problems = tmp_path / "problems"
    problems.mkdir()
    assert main(["suite", str(problems), "--solutions", str(tmp_path), "--claims", str(bad), "--out",
                 str(tmp_path / "run")]) == 2
    assert "not a percent" in capsys.readouterr().err and not (tmp_path / "run").exists()
