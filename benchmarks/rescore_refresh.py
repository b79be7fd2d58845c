"""Keep a re-scoring work folder (benchmarks/rescore_gpu.py --work) true to today's files: the generation
folders and the corpus copy are rewritten where their sources changed, and the verdicts of every file whose
bytes changed are taken out of the runs that judged it (kept whole in the run's ``redone.jsonl``), so that the
next ``--resume`` judges the file as it is now. Without this a resumed run keeps verdicts of files that no
longer exist in that form (the fp16_compute pattern of 2026-12-05, fixed after the H100 run, changed 60 files).

A folder written by benchmarks/kb_generations.py carries a stamp (``.generator``: the generator's and the
checkout's hashes and the arguments); a folder whose stamp matches is left alone (writing one takes about a
minute of sizing problems on the meta device), any other is written afresh beside it and compared file by file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from kb_generations import write_corpus  # beside this file: rescore_gpu.py and the tests put benchmarks/ on the path

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "benchmarks" / "kb_generations.py"
STAMP = ".generator"


def stamp(checkout: Path, args: list[str]) -> str:
    """What a generated folder depends on: the generator's source, the checkout's commit and the arguments."""
    commit = (checkout / "COMMIT").read_text().strip() if (checkout / "COMMIT").is_file() else str(checkout)
    return json.dumps({"generator": hashlib.sha256(GENERATOR.read_bytes()).hexdigest()[:16], "checkout": commit,
                       "args": args}, sort_keys=True)


def _sync(fresh: Path, folder: Path) -> list[str]:
    """Make ``folder`` hold exactly ``fresh``'s files; the names whose bytes changed, appeared or went away."""
    changed = []
    new = {f.name: f for f in fresh.iterdir() if f.is_file()}
    for name, f in sorted(new.items()):
        old = folder / name
        if not old.is_file() or old.read_bytes() != f.read_bytes():
            shutil.copyfile(f, old)
            changed.append(name)
    for old in sorted(folder.iterdir()):
        if old.is_file() and old.name not in new and old.name != STAMP:
            old.unlink()
            changed.append(old.name)
    return [n for n in changed if n != "expected.json"]


def refresh_folder(folder: Path, checkout: Path, args: list[str]) -> list[str] | None:
    """Rewrite a kb_generations.py folder whose stamp differs (None when it matches, else the changed names)."""
    want = stamp(checkout, args)
    if (folder / STAMP).is_file() and (folder / STAMP).read_text() == want:
        return None
    fresh = folder.with_name(folder.name + ".fresh")
    shutil.rmtree(fresh, ignore_errors=True)
    subprocess.run([sys.executable, str(GENERATOR), "--kernelbench", str(checkout), "--out", str(fresh), *args],
                   check=True, stdout=subprocess.DEVNULL)
    folder.mkdir(parents=True, exist_ok=True)
    changed = _sync(fresh, folder)
    shutil.rmtree(fresh)
    (folder / STAMP).write_text(want)
    return changed


def refresh_corpus(folder: Path) -> list[str]:
    """Copy the hand-written corpus (tests/data/generations) into ``folder`` in KernelBench's layout; the
    generation names whose bytes changed or are new."""
    fresh = folder.with_name(folder.name + ".fresh")
    shutil.rmtree(fresh, ignore_errors=True)
    write_corpus(fresh)
    folder.mkdir(parents=True, exist_ok=True)
    changed = _sync(fresh, folder)
    shutil.rmtree(fresh)
    return changed


def take_out(run: Path, names: set[str], why: str) -> list[dict]:
    """Delete the verdicts of ``run`` whose candidate file is one of ``names`` (kept whole in ``redone.jsonl``
    with ``why``), so that ``--resume`` judges them again; what was taken out."""
    if not names or not (run / "results.sqlite").is_file():
        return []
    con = sqlite3.connect(run / "results.sqlite")
    taken = []
    try:
        rows = con.execute("SELECT job_key, candidate, status, verdict FROM verdicts").fetchall()
        with con, (run / "redone.jsonl").open("a") as kept:
            for job, candidate, status, verdict in rows:
                if candidate and Path(candidate).name in names:
                    kept.write(json.dumps({"job": job, "status": status, "verdict": verdict, "why": why,
                                           "redone_at": time.time()}) + "\n")
                    con.execute("DELETE FROM verdicts WHERE job_key = ?", (job,))
                    taken.append({"job": job, "earlier_status": status, "why": why})
    finally:
        con.close()
    return taken
