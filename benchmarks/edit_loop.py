"""The pairing edit loop, measured on every shipped example (issue 27 item 6).

    python benchmarks/edit_loop.py --out OUT                 # GPU: all eight examples, about 9 minutes
    python benchmarks/edit_loop.py --out OUT --resume        # a call cut short: the examples left
    python benchmarks/edit_loop.py --out OUT --screens-only --results R.json   # only the first screens, into R's rows
    python benchmarks/edit_loop.py --out OUT --device cpu --small --examples softmax   # CPU smoke
    python benchmarks/edit_loop.py --out OUT --triton --examples softmax,rmsnorm     # the Triton candidates' edits

Per example, with one Evaluator and its standby builder as the pairing UI makes them (the example's
kernelpilot.toml, ``standby_builder=True``), on a copy of the example never built before:

- ``cold_test_s``: the first test-mode verdict (build from nothing; the worker starts beside it);
- warm edits that change the compiled code, round robin: a kernel constant of the ``.cu`` (a ``#pragma
  unroll`` count, else a ``__device__`` constant), a line of an included header where the example has one,
  and ``model_new.py`` (a module constant), each written ``--pause-s`` (1 s) after the last verdict, as a person
  reads a verdict before saving again; ``warm_kernel_s``, ``warm_header_s`` and ``warm_model_s`` are each
  kind's median, never mixed (at least one of each kind, up to ``--edits`` of each while the example's share of
  ``--budget-s`` lasts);
- ``session_baselines_s``: the session's eager and torch.compile baselines after the cold verdict, as the UI
  measures them at launch (the worker compiles torch.compile then);
- ``warm_benchmark_s``: a kernel edit (else a ``model_new.py`` edit) benchmarked as the UI does after a save, its
  test verdict handed on before the timing (``warm_benchmark_tested_s``); ``benchmark_worker_starts`` says
  whether it needed a new worker;
- ``card_s`` and ``baselines_s``: the first screen of the real app in fresh processes (edit_loop_screen.py,
  headless): a first launch measures the baselines (``baselines_s``), a second shows the card (``card_s``,
  from process start) and the machine's cached baselines (``baselines_cached_s``);
- with ``--triton``, the same loop on the Triton candidate ``kernelpilot init --from-inductor`` makes for the
  example's problem (torch.compile recorded on this GPU; without one, the committed H200 recording in
  tests/data/inductor/ converted, ``triton_source`` says which), on the problem's own shape only (the kernels
  are specialised to it; ``shapes_dropped`` names the config's extra shapes left out): its edits are a line added
  to the first ``@triton.jit`` kernel's body (``warm_triton_s``: a kernel source Triton never compiled here), then
  a benchmark;
- ``phases``: each verdict's phases and build figures; with ``--profile``, ``nvcc --time`` per ``.cu``
  with the exact command of the build's build.ninja (``nvcc``).

Writes OUT/edit-loop-<date>/results.json (a list, one object per example, written after each) and
results.md, and prints the table last. Files are restored after the edits.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from edit_loop_report import nvcc_profile, table, write_markdown  # noqa: E402

EXAMPLES = ("softmax", "rmsnorm", "layernorm", "cross_entropy", "residual_rmsnorm_gate", "gemm_bias_gelu",
            "diag_matmul", "linear_sum_scale")
KINDS = ("kernel", "header", "model", "triton")
_PRAGMA = re.compile(r"^(\s*)#pragma unroll(\s+\d+)?\s*$")


def copy_example(name: str, work: Path, small: bool) -> Path:
    """The example in a git repository of its own (the UI pairs in a worktree of one), never built."""
    dest = work / f"{name}-{os.urandom(3).hex()}"
    shutil.copytree(ROOT / "examples" / name, dest, ignore=shutil.ignore_patterns("replay.jsonl", "__pycache__"))
    if small:  # CPU smoke: module-level sizes cut down, no extra shapes (the kernels need a GPU anyway)
        problem = dest / "problem.py"
        problem.write_text(re.sub(r"^(\w+) = (\d{4,})\b", lambda m: f"{m[1]} = 256", problem.read_text(), flags=re.M))
        drop_extra_shapes(dest)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.email=bench@example.com", "-c", "user.name=bench", "commit", "-q", "-m", "example"]):
        subprocess.run(["git", *args], cwd=dest, check=True, capture_output=True)
    return dest


class Editor:
    """One file edited in place, a new compiled-code change each time; ``restore`` puts it back."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        self.original = path.read_text()
        self.count = 0

    def edit(self) -> str:
        self.count += 1
        n = self.count
        if self.kind == "model":
            self.path.write_text(self.original + f"\n_KP_EDIT = {n}  # edit_loop.py\n")
            return f"{self.path.name}: module constant {n}"
        lines = self.original.splitlines()
        if self.kind == "triton":  # a statement in the kernel's body: new source, the same computation
            at = triton_body(lines)
            indent = re.match(r"\s*", lines[at])[0]  # type: ignore[index]
            lines.insert(at, f"{indent}kp_edit_marker = {n}  # edit_loop.py")
            self.path.write_text("\n".join(lines) + "\n")
            return f"{self.path.name}:{at + 1}: a statement in a @triton.jit kernel ({n})"
        at = next((i for i, line in enumerate(lines) if _PRAGMA.match(line)), None)
        if at is not None:  # same result, other unrolling: the compiled code changes
            indent = _PRAGMA.match(lines[at])[1]  # type: ignore[index]
            lines[at] = f"{indent}#pragma unroll {(1, 2, 4)[n % 3]}"
            what = f"{self.path.name}:{at + 1}: #pragma unroll {(1, 2, 4)[n % 3]}"
        else:
            lines.append(f"static __device__ const int kp_edit_marker = {n};  // edit_loop.py")
            what = f"{self.path.name}: __device__ constant {n}"
        self.path.write_text("\n".join(lines) + "\n")
        return what

    def restore(self) -> None:
        self.path.write_text(self.original)


def child_path() -> str:
    """PYTHONPATH for a child process: this checkout first, then what the caller had (the GPU machine's carried
    wheels in /tmp/site)."""
    return os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])


def triton_body(lines: list[str]) -> int:
    """The index of the first body line of the first ``@triton.jit`` function in ``lines``."""
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("@triton.jit"))
    while not lines[at].startswith("def "):
        at += 1
    while not lines[at].rstrip().endswith(":"):  # a signature over several lines
        at += 1
    return at + 1


def triton_candidate(name: str, example: Path, timeout: float) -> tuple[Path, str]:
    """The Triton candidate ``kernelpilot init --from-inductor`` makes for the example's problem, recorded on this
    GPU ("recorded"); where that gives no kernel (no GPU), the committed recording converted ("fixture")."""
    out = example / "triton"
    r = subprocess.run([sys.executable, "-m", "kernelpilot", "init", "--from-inductor", str(example / "problem.py"),
                        "--out", str(out)], cwd=example, env={**os.environ, "PYTHONPATH": child_path()},
                       capture_output=True, text=True, timeout=timeout)
    model = out / "model_new.py"
    if r.returncode == 0 and model.is_file() and "@triton.jit" in model.read_text():
        return out, "recorded"
    from kernelpilot.inductor.c0 import candidate_from_code, write_candidate

    data = ROOT / "tests" / "data" / "inductor"
    shutil.rmtree(out, ignore_errors=True)
    meta = json.loads((data / f"{name}.json").read_text())  # recorded on the shipped problem's sizes (not --small's)
    conversion = candidate_from_code(ROOT / meta["problem"], (data / f"{name}.py").read_text(),
                                     helpers_source=(data / "triton_helpers_2_11.py").read_text(),
                                     torch_version=meta["torch"])
    write_candidate(out, conversion)
    return out, "fixture"


def drop_extra_shapes(example: Path) -> list[str]:
    """The example's ``[[extra_shapes]]`` taken out of its config, their names returned: torch.compile's kernels,
    and so the c0 candidate, are specialised to the shape it recorded (constant sizes in the kernels' bodies) and
    read past the end of any smaller input (2026-12-07, H100: every verdict an illegal memory access)."""
    toml = example / "kernelpilot.toml"
    text = toml.read_text() if toml.is_file() else ""
    if "[[extra_shapes]]" not in text:
        return []
    names = re.findall(r'^name\s*=\s*"([^"]+)"', text.split("[[extra_shapes]]", 1)[1], flags=re.M)
    toml.write_text(text.split("[[extra_shapes]]")[0])
    return names


def editors(candidate: Path) -> dict[str, Editor]:
    from kernelpilot.native.sources import local_includes

    cu = sorted(candidate.glob("*.cu"))
    # a header of the kernels' (device code: a kernel edit's build), not one binding.cpp includes (host code: its
    # edit takes the full build, and is no kernel edit; cross_entropy's and diag_matmul's one header is such)
    host = set(local_includes(candidate / "binding.cpp", candidate)) if (candidate / "binding.cpp").is_file() else set()
    headers = [h for h in sorted(candidate.glob("*.cuh")) + sorted(candidate.glob("*.h")) if h.resolve() not in host]
    found = {"kernel": Editor(cu[0], "kernel") if cu else None,
             "header": Editor(headers[0], "header") if headers else None,
             "model": Editor(candidate / "model_new.py", "model")}
    return {k: e for k, e in found.items() if e is not None}


def verdict_record(v: Any, wall: float, what: str) -> dict[str, Any]:
    b = v.build
    return {"edit": what, "status": v.status, "wall_s": round(wall, 3), "phases": dict(v.phases),
            "build_s": b.seconds if b else None, "rebuilt": list(b.rebuilt) if b else [],
            "build_dir": b.build_dir if b else "", "summary": v.summary[:200], "flags": v.flags[:4],
            "references_cached": v.correctness.references_cached if v.correctness else None,
            # a failed build keeps its compiler's last lines: on 2026-12-07 every build of a device call failed with
            # "build step failed: binding.o" alone, and what the compiler said was lost
            "build_log_tail": b.log_tail[-1500:] if b and not b.ok else ""}


def timed(ev: Any, problem: Path, candidate: Path, mode: str, what: str) -> dict[str, Any]:
    t0 = time.monotonic()
    v = ev.evaluate(problem, candidate, mode)
    return verdict_record(v, time.monotonic() - t0, what)


def staged(ev: Any, problem: Path, candidate: Path, what: str) -> dict[str, Any]:
    """A benchmark as the pairing UI runs one after a save: its test verdict handed on before the timing
    (``tested_s``, from the call), the benchmark verdict at the end (``wall_s``)."""
    t0 = time.monotonic()
    tested: list[float] = []
    v = ev.evaluate(problem, candidate, "benchmark", on_tested=lambda _t: tested.append(time.monotonic() - t0))
    rec = verdict_record(v, time.monotonic() - t0, what)
    rec["tested_s"] = round(tested[0], 3) if tested else None
    return rec


def starts(ev: Any) -> int:
    return int(getattr(ev._client, "starts", 0) or 0)


def first_screens(example: Path, work: Path, timeout: float) -> dict[str, Any]:
    """Two launches of the real app, each a fresh process: the first measures the baselines (and stores
    them on this machine), the second shows the card and the cached baselines."""
    env = {**os.environ, "KERNELPILOT_DATA_DIR": str(work / "data"), "PYTHONPATH": child_path()}
    out: dict[str, Any] = {}
    for launch, until in (("first", "baselines"), ("second", "cached")):
        stamp = work / f"screen-{example.name}-{launch}.json"
        spawned = time.time()
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "edit_loop_screen.py"), str(example / "problem.py"),
                            str(stamp), str(timeout), "--until", until], env=env, cwd=example,
                           capture_output=True, text=True, timeout=timeout + 60)
        if not stamp.is_file():
            out[launch] = {"error": (r.stderr or r.stdout)[-1500:]}
            continue
        s = json.loads(stamp.read_text())
        out[launch] = {k: round(s[k] - spawned, 3) for k in ("started", "card_mounted", "card", "cached", "baselines")
                       if isinstance(s.get(k), (int, float))}
        out[launch].update({k: s[k] for k in ("cached_date", "baselines_error", "card_text") if s.get(k)})
    return out


def screen_fields(example: Path, work: Path, timeout: float) -> dict[str, Any]:
    """``first_screen`` (both launches) and the figures taken from it: ``card_s``, ``baselines_s``, ``baselines_cached_s``."""
    screens = first_screens(example, work, timeout)
    first, second = screens.get("first", {}), screens.get("second", {})
    return {"first_screen": screens, "card_s": second.get("card"),
            "baselines_s": None if first.get("baselines_error") else first.get("baselines"),
            "baselines_cached_s": second.get("cached")}


def screens_only(names: list[str], rows: list[dict[str, Any]], args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """The first screens alone, for every example named: written into its row (a row of its own when the
    results have none yet); the edit figures already there are kept."""
    by_name = {r["example"]: r for r in rows}
    for name in names:
        t0 = time.monotonic()
        row = by_name.get(name)
        if row is None:
            row = by_name[name] = {"example": name, "device": args.device, "edits": [], "phases": {}}
            rows.append(row)
        row.update(screen_fields(copy_example(name, work, args.small), work, args.screen_timeout))
        print(f"{name}: card {row['card_s']} s, baselines {row['baselines_s']} s, cached baselines "
              f"{row['baselines_cached_s']} s ({time.monotonic() - t0:.1f} s)", flush=True)
    return rows


def machine() -> dict[str, str]:
    """The code version (the commit, and whether kernelpilot/ differs from it) and the GPU a row was measured on."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines() if shutil.which("nvidia-smi") else []
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--", "kernelpilot")),
            "gpu": gpu[0] if gpu else "none"}


def measure(name: str, args: argparse.Namespace, work: Path, share_s: float) -> dict[str, Any]:
    from kernelpilot.config import load_config
    from kernelpilot.evaluation import EvalSettings, Evaluator

    t_example = time.monotonic()
    example = copy_example(name, work, args.small)
    problem, candidate = example / "problem.py", example / "candidate"
    row: dict[str, Any] = {"example": name, "device": args.device, "edits": [], "phases": {}, "pause_s": args.pause_s,
                           **machine()}
    if args.triton:  # before the config is read (2026-12-07, H100: read first, every verdict met an extra shape)
        candidate, row["triton_source"] = triton_candidate(name, example, args.screen_timeout * 2)
        row["shapes_dropped"] = drop_extra_shapes(example)
    config = load_config(example, overrides={"problem": str(problem)}, env={})
    settings = EvalSettings.from_config(config, device=args.device, build_timeout_s=600.0)
    row["shapes_checked"] = ["problem", *(str(s.get("name", "?")) for s in settings.extra_shapes)]
    with Evaluator(settings, workdir=work / f"eval-{name}", standby_builder=True) as ev:
        cold = timed(ev, problem, candidate, "test", "cold")
        row["cold_test_s"], row["phases"]["cold_test"], row["status"] = cold["wall_s"], cold["phases"], cold["status"]
        row["cold"] = cold
        t0 = time.monotonic()
        try:  # the session's baselines, as the pairing UI measures them at launch (torch.compile compiled here)
            ev.baselines(problem)
            row["session_baselines_s"] = round(time.monotonic() - t0, 3)
        except Exception as exc:  # noqa: BLE001 - no GPU: said, not measured
            row["session_baselines_s"], row["session_baselines_error"] = None, str(exc)[:300]
        eds = {"triton": Editor(candidate / "model_new.py", "triton")} if args.triton else editors(candidate)
        for round_no in range(args.edits):
            if round_no and time.monotonic() - t_example > share_s * 0.6:
                break  # at least one edit of each kind; more while the example's share lasts
            for kind, editor in eds.items():
                time.sleep(args.pause_s)
                what = editor.edit()
                rec = timed(ev, problem, candidate, "test", what)
                rec["kind"] = kind
                row["edits"].append(rec)
        for editor in eds.values():
            editor.restore()
        before = starts(ev)
        editor = eds.get("kernel") or eds.get("triton") or eds["model"]
        time.sleep(args.pause_s)
        what = editor.edit()
        bench = staged(ev, problem, candidate, what)  # the pairing UI's way: one benchmark, its test staged
        editor.restore()
        row["warm_benchmark_s"], row["phases"]["warm_benchmark"] = bench["wall_s"], bench["phases"]
        row["warm_benchmark_tested_s"] = bench["tested_s"]
        row["benchmark_status"], row["benchmark_worker_starts"] = bench["status"], starts(ev) - before
        row["benchmark"] = bench
    for kind in KINDS:
        mine = [e["wall_s"] for e in row["edits"] if e["kind"] == kind]
        row[f"warm_{kind}_s"] = round(statistics.median(mine), 3) if mine else None
    for kind in KINDS:  # each kind's phases on their own (a kernel edit's build is not a model_new edit's)
        mine = [e for e in row["edits"] if e["kind"] == kind]
        if mine:
            row["phases"][f"warm_{kind}"] = {k: round(statistics.median(e["phases"].get(k, 0.0) for e in mine), 3)
                                             for k in sorted({k for e in mine for k in e["phases"]})}
    if args.profile:
        row["nvcc"] = nvcc_profile(Path(cold["build_dir"]), work / f"nvcc-{name}")
    if not args.no_screen:
        row.update(screen_fields(example, work, args.screen_timeout))
    row["example_s"] = round(time.monotonic() - t_example, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--examples", default=",".join(EXAMPLES))
    p.add_argument("--device", default="cuda")
    p.add_argument("--edits", type=int, default=3, help="edits of each kind, at most (default 3)")
    p.add_argument("--budget-s", type=float, default=540.0, help="the whole run's time; examples share it")
    p.add_argument("--profile", action="store_true", help="nvcc --time on each example's .cu files")
    p.add_argument("--small", action="store_true", help="cut the problems' sizes (CPU smoke)")
    p.add_argument("--pause-s", type=float, default=1.0,
                   help="between a verdict and the next edit's write, as a person reads the verdict before saving "
                        "again (default 1 s; the worker tidies up and a kernel edit's SASS check goes on meanwhile)")
    p.add_argument("--no-screen", action="store_true", help="skip the first-screen launches")
    p.add_argument("--triton", action="store_true", help="edit the Triton candidate `kernelpilot init "
                   "--from-inductor` makes for each example (examples with a recording in tests/data/inductor)")
    p.add_argument("--screen-timeout", type=float, default=90.0)
    p.add_argument("--resume", action="store_true", help="keep the examples results.json already has")
    p.add_argument("--screens-only", action="store_true", help="only the first-screen launches of every example "
                   "named, written into the rows of results.json (or of --results), the edit figures kept")
    p.add_argument("--results", type=Path, help="with --screens-only: the results.json to complete (default: today's)")
    args = p.parse_args(argv)
    folder = args.out / f"edit-loop-{dt.date.today().isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.json"
    if args.screens_only:
        source = args.results or path
        rows = json.loads(source.read_text()) if source.is_file() else []
        work = Path(tempfile.mkdtemp(prefix="kp-edit-loop-"))
        rows = screens_only([n for n in args.examples.split(",") if n], rows, args, work)
        path.write_text(json.dumps(rows, indent=1))
        write_markdown(rows, folder / "results.md")
        print(table(rows))
        return 0
    rows: list[dict[str, Any]] = json.loads(path.read_text()) if args.resume and path.is_file() else []
    done = {r["example"] for r in rows}
    names = [n for n in args.examples.split(",") if n and n not in done]
    work = Path(tempfile.mkdtemp(prefix="kp-edit-loop-"))
    started = time.monotonic()
    for i, name in enumerate(names):
        left = args.budget_s - (time.monotonic() - started)
        if left <= 0:
            print(f"budget spent: {', '.join(names[i:])} not run (run again with --resume)", flush=True)
            break
        row = measure(name, args, work, left / (len(names) - i))
        rows.append(row)
        path.write_text(json.dumps(rows, indent=1))
        write_markdown(rows, folder / "results.md")
        print(f"{name}: cold {row['cold_test_s']} s, .cu edit {row['warm_kernel_s']} s, header edit "
              f"{row['warm_header_s']} s, model_new edit {row['warm_model_s']} s, Triton edit "
              f"{row['warm_triton_s']} s, warm benchmark "
              f"{row['warm_benchmark_s']} s, card {row.get('card_s')} s ({row['example_s']} s)", flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
