"""What `kernelpilot apply` measures beyond step time (issue 52 items 1 and 3), on the CPU: peak memory (None with a
note off CUDA, NVML failing soft), the loss at every step judged within the band of the one-ulp sensitivity run (a
swap whose outputs are off is outside), the --summary JSON, and Dynamo's graph breaks and recompilations read from
its counters under torch.compile."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_dropin import SCRIPT, extract_mlp, with_candidate  # noqa: E402

# issue 52's Evidence names these per run
EVIDENCE = ("step_ms", "spread_ms", "peak_mem_bytes", "loss_max_diff", "yardstick", "graph_breaks", "recompiles",
            "change", "verdict")


def tiny_losses(steps: int) -> list[float]:
    """tiny_llama.py's own losses for its first ``steps`` steps, computed here as the script does."""
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import tiny_llama
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    model = tiny_llama.TinyLlama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 96, (2, 8))
    out = []
    for _ in range(steps):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(float(loss.detach()))
    return out


def test_apply_reports_memory_and_the_loss_band_and_writes_the_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.dropin.apply_command import apply_command
    from kernelpilot.dropin.apply_report import FIELDS
    from kernelpilot.dropin.apply_run import WARMUP
    from kernelpilot.dropin.registration import write_registration

    problem = extract_mlp(tmp_path / "extracted")
    problems = tmp_path / "problems"
    good = with_candidate(problem, problems)
    assert write_registration(good / "candidate", candidate_id="c1").training
    off = with_candidate(problem, tmp_path / "off")
    assert write_registration(off / "candidate", candidate_id="c2").training  # checked, then made 1% off
    model_new = off / "candidate" / "model_new.py"
    model_new.write_text(model_new.read_text().replace("SCALE = 1.0", "SCALE = 1.01"))
    off = off.rename(problems / ("9" + off.name[1:]))
    summary = tmp_path / "out" / "summary.json"
    steps = 3
    args = SimpleNamespace(script=str(SCRIPT), script_args=[], kernels=str(problems), steps=steps, compile=False,
                           write=False, yes=True, summary=str(summary))
    assert apply_command(args) == 0  # the good swap passes
    out = capsys.readouterr().out
    data = json.loads(summary.read_text())
    assert data["mode"] == "eager" and data["steps"] == steps and data["warmup"] == WARMUP
    assert data["resolves_ms"] >= 0 and data["commit"]
    base, *swaps = data["runs"]
    assert [r["kind"] for r in data["runs"]] == ["as it is", "swap", "swap"]
    assert [r["dropin"] for r in swaps] == [good.name, off.name]
    for rec in data["runs"]:
        assert set(EVIDENCE) <= set(FIELDS) <= set(rec), set(FIELDS) - set(rec)
        assert rec["step_ms"] > 0 and rec["spread_ms"] >= 0
        # no CUDA here: no memory number, and a note that says why (never a made-up 0)
        assert rec["peak_mem_bytes"] is None and rec["peak_reserved_bytes"] is None and rec["nvml_used_bytes"] is None
        assert "no CUDA device" in rec["memory_note"]
        assert rec["graph_breaks"] is None and rec["recompiles"] is None  # eager: nothing compiled
        assert len(rec["loss"]) == WARMUP + steps and all(math.isfinite(v) for v in rec["loss"])
    # the loss at every step is the script's own, and seeded alike in every run
    assert base["loss"] == pytest.approx(tiny_losses(WARMUP + steps), rel=1e-6)
    assert base["change"] is None and base["loss_max_diff"] is None and base["verdict"] == "the reference"
    for rec in swaps:
        assert rec["change"] in ("faster", "slower", "within") and rec["resolves_ms"] >= data["resolves_ms"]
        assert rec["mem_saved_bytes"] is None and len(rec["loss_band"]) == WARMUP + steps
        assert rec["yardstick"] == max(rec["loss_band"]) > 0
    good_rec, off_rec = swaps
    assert good_rec["verdict"] == "ok" and good_rec["loss_verdict"] == "inside"
    assert good_rec["loss_max_diff"] <= good_rec["yardstick"]
    # 1% off: outside the band (and its outputs differ, which the verdict says first)
    assert off_rec["loss_verdict"] == "outside" and off_rec["loss_max_diff"] > off_rec["yardstick"]
    assert off_rec["verdict"].startswith("outputs differ") and off_rec["loss_note"].startswith("loss outside the band")
    assert "peak MiB" in out and "mem saved" in out and "loss band up to" in out
    assert "memory: no CUDA device in use" in out and "resolution: a change of at most" in out
    rows = [line for line in out.splitlines() if line.startswith("model.layers.0.mlp (+1)")]
    assert " inside " in rows[0] and rows[0].rstrip().endswith("ok") and " outside " in rows[1]


def run_result(losses: list[float] | None, dtype: str = "float32", error: str = "") -> object:
    from kernelpilot.dropin.apply_run import RunResult

    return RunResult(step_ms=[1.0] * 4, losses=losses, loss_dtype=dtype, error=error)


def test_the_loss_band_grows_with_the_sensitivity_runs_divergence() -> None:
    from kernelpilot.dropin.apply_report import judge_loss, loss_band

    base = run_result([4.0, 3.0, 2.0, 1.0])
    sens = run_result([4.0, 3.1, 2.0, 1.05])  # one ulp moved: 0.1 apart at step 1, back at step 2
    band = loss_band(base, sens)
    assert band == pytest.approx([4e-5, 0.2, 0.2, 0.2])  # twice the widest gap so far; 1e-5 x the loss at least
    assert judge_loss(run_result([4.0, 3.15, 2.1, 0.9]), base, band)[:2] == ("inside", pytest.approx(0.15))
    judged, worst, why = judge_loss(run_result([4.001, 3.0, 2.0, 1.0]), base, band)  # off before any divergence
    assert judged == "outside" and worst == pytest.approx(1e-3) and "from step 0" in why
    assert judge_loss(run_result([4.0, 3.0, float("nan"), 1.0]), base, band)[0] == "outside"
    assert judge_loss(run_result(None), base, band)[0] == "outside"  # the swap's run lost its loss
    assert judge_loss(run_result(None), run_result(None), loss_band(run_result(None), sens))[0] is None
    assert loss_band(run_result([4.0, 3.0], "bfloat16"), None) == pytest.approx([4e-2, 3e-2])  # half: 1e-2
    assert loss_band(base, run_result(None, error="failed")) == pytest.approx([4e-5, 3e-5, 2e-5, 1e-5])
    gappy = run_result([4.0, None, 2.0, 1.0])  # an evaluation step between training steps: not judged
    assert loss_band(gappy, sens) == [pytest.approx(4e-5), None, pytest.approx(2e-5), pytest.approx(0.1)]
    assert judge_loss(run_result([4.0, 9.0, 2.0, 1.0]), gappy, loss_band(gappy, sens))[0] == "inside"
    assert judge_loss(run_result([4.0, 3.0, None, 1.0]), base, band)[0] == "outside"


def test_the_loss_recorder_sums_accumulated_backwards_and_falls_back_to_the_outputs_loss(tmp_path: Path) -> None:
    from kernelpilot.dropin.apply_run import measure

    import torch

    script = tmp_path / "accumulate.py"
    script.write_text(
        "import torch\n\nmodel = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "x = torch.ones(2, 4)\nfor step in range(5):\n    out = model(x)\n"
        "    (out.mean() / 2).backward(retain_graph=True)\n    (out.pow(2).mean() / 2).backward()  # summed\n"
        "    opt.step()\n    opt.zero_grad()\n    if step == 1:\n        with torch.no_grad():\n"
        "            model(x)  # an evaluation between training steps: a step without a loss\n")
    res = measure(script, [], steps=3, warmup=1, dropins=[])
    assert not res.error and res.losses is not None and len(res.losses) == 4  # a step is a call of the model
    torch.manual_seed(0)  # as measure seeds the script
    model = torch.nn.Linear(4, 1)
    out = model(torch.ones(2, 4)).detach()
    assert res.losses[0] == pytest.approx(float(out.mean() / 2 + out.pow(2).mean() / 2), rel=1e-6)
    assert res.losses[2] is None and res.losses[1] is not None and res.losses[3] is not None
    assert res.loss_dtype == "float32"
    infer = tmp_path / "infer.py"
    infer.write_text(
        "import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return {'logits': x, 'loss': x.sum()}\n\n\nm = M()\nwith torch.no_grad():\n"
        "    for i in range(4):\n        m(torch.full((2,), float(i)))\n")
    res = measure(infer, [], steps=2, warmup=1, dropins=[])
    assert res.losses == [0.0, 2.0, 4.0] and res.memory.peak_mem_bytes is None and res.compiled is None


def test_memory_and_nvml_fail_soft_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelpilot.dropin.apply_measure import MemoryWatch, nvml_used

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: the GPU run measures it")
    watch = MemoryWatch()
    watch.start()
    watch.reset()
    mem = watch.read()
    assert (mem.peak_mem_bytes, mem.peak_reserved_bytes, mem.nvml_used_bytes) == (None, None, None)
    assert mem.note.startswith("no CUDA device in use")
    used, what, note = nvml_used(0)  # nvidia-ml-py is installed; no driver here
    assert used is None and what == "" and note.startswith("NVML not read")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert nvml_used(0) == (None, "", "NVML not read: nvidia-ml-py (import pynvml) is not installed")


def test_dynamo_counters_give_graph_breaks_and_recompilations() -> None:
    import torch

    from kernelpilot.dropin.apply_measure import DynamoWatch

    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    torch._dynamo.reset()
    watch = DynamoWatch()
    g = torch.compile(f, backend="eager")
    g(torch.randn(3))
    g(torch.randn(3))  # cached: nothing new
    g(torch.randn(3, 2))  # another rank: f and its resume function recompile
    counts = watch.counts()
    assert counts.graph_breaks == 2 and counts.recompiles == 2 and counts.graphs == 4, counts
    assert counts.break_reasons and counts.recompile_reasons and "rank" in counts.recompile_reasons[0]
    assert DynamoWatch().counts().graph_breaks == 0  # what a run adds, not what came before it


def test_apply_compile_runs_read_the_counters(tmp_path: Path) -> None:
    from kernelpilot.dropin.apply_run import measure

    script = tmp_path / "breaks.py"
    script.write_text(
        "import torch\n\n\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.a = torch.nn.Linear(8, 8)\n        self.b = torch.nn.Linear(8, 1)\n\n"
        "    def forward(self, x):\n        h = self.a(x).relu()\n        if BREAK:\n"
        "            torch._dynamo.graph_break()\n        return self.b(h).mean()\n\n\n"
        "import sys\nBREAK = 'break' in sys.argv\nm = M()\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(6):\n    loss = m(torch.ones(2 + (i >= 4), 8))  # another batch size from step 4\n"
        "    loss.backward()\n    opt.step()\n    opt.zero_grad()\n")
    clean = measure(script, [], steps=3, warmup=2, dropins=[], compile_root=True)
    broken = measure(script, ["break"], steps=3, warmup=2, dropins=[], compile_root=True)
    assert not clean.error and not broken.error and clean.compiled is not None and broken.compiled is not None
    assert clean.compiled.graph_breaks == 0 and broken.compiled.graph_breaks >= 1
    assert clean.compiled.recompiles >= 1 and clean.compiled.recompile_reasons  # the new batch size at step 4
    assert clean.losses is not None and len(clean.losses) == 5


def test_the_report_flags_what_a_swap_adds_under_compile(capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.dropin.apply_measure import CompileCounts, Memory
    from kernelpilot.dropin.apply_report import print_notes, record
    from kernelpilot.dropin.apply_run import RunResult

    base = RunResult(step_ms=[10.0] * 6, losses=[2.0] * 6, loss_dtype="float32",
                     memory=Memory(1000, 2000, 3000, "process"), compiled=CompileCounts(graphs=1, frames=1))
    swap = RunResult(step_ms=[8.0] * 6, losses=[2.0] * 6, loss_dtype="float32",
                     memory=Memory(600, 1500, 2500, "process"),
                     compiled=CompileCounts(graph_breaks=2, recompiles=1, graphs=3, frames=3,
                                            break_reasons=["Call to `torch._dynamo.graph_break()`"]))
    rec = record("model.norm", swap, base, 10.0, 0.5, kind="swap", verdict="ok", band=[1e-5] * 6)
    assert rec["change"] == "faster" and rec["change_ms"] == pytest.approx(-2.0) and rec["resolves_ms"] == 0.5
    assert rec["mem_saved_bytes"] == 400 and rec["mem_saved_pct"] == pytest.approx(40.0)
    assert rec["loss_verdict"] == "inside" and rec["loss_max_diff"] == 0.0
    assert rec["introduced"] == ["2 graph break(s)", "1 recompilation(s)"]
    print_notes([rec], 10.0, 0.5)
    out = capsys.readouterr().out
    assert "model.norm introduced 2 graph break(s) and 1 recompilation(s)" in out and "graph_break()" in out
    assert "at most 0.500 ms (5.0% of the step)" in out
    same = record("model.mlp", base, base, 10.0, 0.5, kind="swap", verdict="ok", band=[1e-5] * 6)
    assert same["introduced"] is None and same["change"] == "within"


def test_apply_compile_compares_against_the_faster_compile_mode(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--compile runs the script compiled in each mode (default and max-autotune-no-cudagraphs): the faster is
    the baseline and the swap is compiled in it; the summary gives every mode's run and names what was compiled."""
    import torch

    from kernelpilot.dropin.apply_command import COMPILE_MODES, apply_command, compile_modes
    from kernelpilot.dropin.registration import write_registration
    from kernelpilot.errors import KernelpilotError

    assert compile_modes(None) == list(COMPILE_MODES) == ["default", "max-autotune-no-cudagraphs"]
    assert compile_modes("max-autotune, default,max-autotune") == ["max-autotune", "default"]
    with pytest.raises(KernelpilotError, match="not a torch.compile mode"):
        compile_modes("fastest")
    problems = tmp_path / "problems"
    good = with_candidate(extract_mlp(tmp_path / "extracted"), problems)
    assert write_registration(good / "candidate", candidate_id="c1").training
    summary = tmp_path / "summary.json"
    torch._dynamo.reset()
    args = SimpleNamespace(script=str(SCRIPT), script_args=[], kernels=str(problems), steps=2, compile=True,
                           compile_modes="default,max-autotune-no-cudagraphs", write=False, yes=True,
                           summary=str(summary))
    assert apply_command(args) == 0
    out = capsys.readouterr().out
    data = json.loads(summary.read_text())
    seen = data["compile_baselines"]
    assert set(seen) == set(COMPILE_MODES) and all(v["step_ms"] > 0 and not v["error"] for v in seen.values())
    assert data["compile_mode"] == min(seen, key=lambda m: seen[m]["step_ms"])
    assert data["mode"] == "compile" and "model.forward" in data["compiled"]
    assert "torch.compile mode default: step" in out and "torch.compile mode max-autotune-no-cudagraphs" in out
    assert f"baseline: mode {data['compile_mode']}, the faster" in out
    base, swap = data["runs"]
    assert swap["verdict"] == "ok" and swap["graph_breaks"] == 0


def test_a_second_run_as_it_is_widens_the_band_where_the_script_is_not_deterministic() -> None:
    from kernelpilot.dropin.apply_report import judge_loss, loss_band, max_gap

    base = run_result([4.0, 3.0, 2.0, 1.0])
    sens = run_result([4.0, 3.0001, 2.0, 1.0])  # the one-ulp run: one sample of the run-to-run noise, a small one
    noise = run_result([4.0, 3.001, 2.002, 1.0])  # the script as it is again: its own runs differ more
    swap = run_result([4.0, 2.999, 2.0015, 1.0])
    assert judge_loss(swap, base, loss_band(base, sens))[0] == "outside"  # judged against one sample only
    band = loss_band(base, sens, noise)
    assert band == pytest.approx([4e-5, 2e-3, 4e-3, 4e-3])
    assert judge_loss(swap, base, band)[0] == "inside"
    assert max_gap(noise, base) == pytest.approx(2e-3)
    assert loss_band(base, sens, run_result(None, error="failed")) == loss_band(base, sens)
    assert loss_band(base, sens, run_result([4.0, 3.0])) == loss_band(base, sens)  # a run of other steps: not used


def test_apply_runs_the_script_once_more_when_two_seeded_runs_differ(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A script whose runs differ from each other (on a GPU, atomics in a backward; here a weight scaled by one of
    three values, the next at each run, so two runs differ by one or two steps of 1e-5): one more run as it is over
    every step, whose loss widens the band; a deterministic one gets none. Its first three runs are the script as
    it is, the yardstick's run and that extra run, so the extra run differs from the first by two steps."""
    from kernelpilot.dropin.apply_command import apply_command
    from kernelpilot.dropin.registration import write_registration

    problems = tmp_path / "problems"
    good = with_candidate(extract_mlp(tmp_path / "extracted"), problems)
    assert write_registration(good / "candidate", candidate_id="c1").training
    noisy = tmp_path / "noisy" / SCRIPT.name
    noisy.parent.mkdir()
    text = SCRIPT.read_text()
    assert "    model = TinyLlama()\n" in text
    noisy.write_text("from pathlib import Path\n" + text.replace("    model = TinyLlama()\n", (
        "    model = TinyLlama()\n    runs = Path(__file__).with_suffix('.runs')\n"
        "    n = int(runs.read_text()) + 1 if runs.exists() else 1\n    runs.write_text(str(n))\n"
        "    with torch.no_grad():\n        model.embed.weight.mul_(1 + 1e-5 * (n % 3))\n"), 1))
    for script, differ in ((SCRIPT, False), (noisy, True)):
        summary = tmp_path / f"{differ}.json"
        args = SimpleNamespace(script=str(script), script_args=[], kernels=str(problems), steps=2, compile=False,
                               write=False, yes=True, summary=str(summary))
        assert apply_command(args) == 0
        out = capsys.readouterr().out
        assert ("two seeded runs as they are differ: one more run as it is over every step" in out) is differ, out
        runs = json.loads(summary.read_text())["runs"]
        swap = runs[1]
        assert swap["loss_verdict"] == "inside"
        # the baseline pools the timed steps of every run as it is: the first, the closing one, and the extra one
        assert runs[0]["timed_steps"] == (3 if differ else 2) * swap["timed_steps"], runs[0]
        assert f"the baseline below pools {'the three runs as it is' if differ else 'both runs'}" in out
        if differ:
            said = next(line for line in out.splitlines() if line.startswith("two seeded runs as they are differ"))
            found = re.search(r"loss differs by up to (\S+), its outputs by (\S+), gradients by (\S+); bound (\S+)$",
                              said)
            assert found, said
            moved, outs, bound = float(found[1]), float(found[2]), float(found[4])
            assert bound >= 4 * outs * 0.95  # the second run's outputs count in the bound as the yardstick's do
            # the band holds twice the second run's gap (printed to two digits: up to 5% off by rounding)
            assert swap["yardstick"] >= 2 * moved * 0.95
