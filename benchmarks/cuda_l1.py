"""Turn CUDA-L1's published KernelBench solutions (github.com/deepreinforce-ai/CUDA-L1, "optimized_cuda_code/<gpu>.json":
one JSON object per line, one RL-optimised program per KernelBench problem and GPU, with the speedups it claims over
the reference in eager mode and under torch.compile) into what ``kernelpilot suite --solutions ... --claims ...``
and ``benchmarks/rescore_gpu.py --published cudal1=OUT`` read (the layout is in benchmarks/published.py).

- The problem files are the solutions' own ``ref_code`` (what they were timed against), named as in the KernelBench
  checkout given with ``--kernelbench``; the manifest says, per problem, whether ``ref_code`` is that checkout's file
  byte for byte (at the time of writing all 250 are KernelBench's files at 6500bbc, the sizes of v0.1: score them
  with ``--rules kernelbench-v0.1``; its tolerance, 1e-2, is also the one CUDA-L1's own evaluator uses).
- One sample per problem and GPU: ``--gpus h100,h20`` writes the H100 program as sample 0 and the H20 one as sample 1
  of each problem (each claim names its GPU). A problem whose ``custom_code`` is empty (CUDA-L1: nothing faster than
  the reference was found) has no generation; the manifest lists it as skipped.
- Claims: ``score_default`` (reference / custom time, eager) and ``score_torch_compile_default`` (the reference under
  torch.compile's default mode / custom time).

CUDA-L1's authors say their RL run found reward hacks (timing, cached results) and ask for more to be reported: the
set is a test of the verdict, not only of speed. Never committed; fetch it and point ``--cuda-l1`` at its git
directory or a work tree:

  python benchmarks/cuda_l1.py --cuda-l1 /work/.mirror/deepreinforce-ai+CUDA-L1/repo --kernelbench .kb-original --out /tmp/cl1
  kernelpilot suite /tmp/cl1/KernelBench --solutions /tmp/cl1/generations --rules kernelbench-v0.1 \\
      --claims /tmp/cl1/claims.csv --out runs/cuda-l1
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from published import Source, describe, figure, finish, write_generation, write_problem  # noqa: E402

RELEASE = "optimized_cuda_code/{gpu}.json"
# the release files' names and the GPUs their README names for them (its H100 is an SXM part, written "XSM" there)
GPUS = {"h100": "NVIDIA H100 SXM", "h20": "NVIDIA H20", "a100": "NVIDIA A100 PCIe", "l40": "NVIDIA L40",
        "3090": "NVIDIA GeForce RTX 3090"}


def kernelbench_stems(checkout: Path) -> dict[tuple[int, int], Path]:
    """(level, problem number) -> the problem file of a KernelBench checkout (its root or its KernelBench/ folder)."""
    root = checkout / "KernelBench" if (checkout / "KernelBench" / "level1").is_dir() else checkout
    found: dict[tuple[int, int], Path] = {}
    for f in root.glob("level*/*.py"):
        head = f.name.split("_", 1)[0]
        if f.parent.name[5:].isdigit() and head.isdigit():
            found[(int(f.parent.name[5:]), int(head))] = f
    if not found:
        sys.exit(f"{checkout} holds no KernelBench problem files (level<N>/<id>_<name>.py)")
    return found


def release(src: Source, gpu: str) -> list[dict]:
    raw = src.read(RELEASE.format(gpu=gpu))
    if raw is None:
        sys.exit(f"CUDA-L1 has no {RELEASE.format(gpu=gpu)} (known: {', '.join(GPUS)})")
    rows = []
    for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{RELEASE.format(gpu=gpu)} line {n} is not JSON ({e}); expected one object per line")
    return rows


def write(src: Source, stems: dict[tuple[int, int], Path], out: Path, gpus: list[str], levels: list[int]) -> dict:
    entries: list[dict] = []
    claims: list[dict] = []
    skipped: list[dict] = []
    problems: dict[tuple[int, int], bytes] = {}
    samples: dict[tuple[int, int], int] = {}  # problem -> how many generations it has
    for gpu in gpus:
        for r in release(src, gpu):
            level, pid = int(r["level_id"]), int(r["task_id"])
            if level not in levels:
                continue
            where = f"{gpu} level {level} task {pid}"
            if (level, pid) not in stems:
                skipped.append({"solution": where, "why": "no such problem in the KernelBench checkout"})
                continue
            if str(r.get("custom_code") or "").strip() in ("", "None"):  # JSON null, or the string "None" (two in h100.json)
                skipped.append({"solution": where, "why": "no custom_code (CUDA-L1 found nothing faster)"})
                continue
            ref = str(r.get("ref_code") or "").encode("utf-8")
            if problems.setdefault((level, pid), ref) != ref:
                skipped.append({"solution": where, "why": "its ref_code differs from another GPU's for the same problem"})
                continue
            stem = stems[(level, pid)].stem
            sample = samples.get((level, pid), 0)
            samples[(level, pid)] = sample + 1
            name = write_generation(out, level, pid, sample, r["custom_code"])
            eager, compiled = figure(r.get("score_default")), figure(r.get("score_torch_compile_default"))
            entries.append({"generation": name, "problem": f"level{level}/{stem}", "sample": sample, "gpu": GPUS.get(gpu, gpu),
                            "model": f"CUDA-L1 ({gpu})", "claimed_x_eager": eager or None, "claimed_x_compile": compiled or None})
            if eager or compiled:
                claims.append({"problem": f"level{level}/{stem}", "sample": sample, "claimed_x_eager": eager,
                               "claimed_x_compile": compiled, "gpu": GPUS.get(gpu, gpu)})
    same = {}
    for (level, pid), ref in sorted(problems.items()):
        if (level, pid) not in samples:
            continue
        write_problem(out, level, stems[(level, pid)].stem, ref)
        same[f"level{level}/{stems[(level, pid)].stem}"] = stems[(level, pid)].read_bytes() == ref
    doc = {"about": "CUDA-L1's RL-optimised KernelBench programs, written by benchmarks/cuda_l1.py; claims measured "
                    "there on " + ", ".join(GPUS.get(g, g) for g in gpus),
           "source": "https://github.com/deepreinforce-ai/CUDA-L1", "commit": src.commit(), "gpus": gpus,
           "ref_code_is_checkout_file": same, "generations": entries, "skipped": skipped}
    return finish(out, claims, doc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cuda-l1", required=True, help="CUDA-L1's git directory or a work tree")
    p.add_argument("--kernelbench", required=True, help="a KernelBench checkout, for the problems' file names "
                   "(6500bbc: the files CUDA-L1's ref_code matches)")
    p.add_argument("--out", required=True, help="folder to write KernelBench/, generations/, claims.csv, manifest.json")
    p.add_argument("--gpus", default="h100", help=f"comma-separated release files, one sample each, in this order "
                   f"(default h100, the nearest to an H200; known: {','.join(GPUS)})")
    p.add_argument("--levels", default="1,2,3", help="comma-separated levels to keep (default 1,2,3)")
    args = p.parse_args(argv)
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    if not gpus:
        p.error("--gpus: name at least one release file")
    src = Source(Path(args.cuda_l1).expanduser().resolve(), RELEASE.format(gpu=gpus[0]))
    out = Path(args.out).expanduser()
    doc = write(src, kernelbench_stems(Path(args.kernelbench).expanduser().resolve()), out, gpus,
                [int(x) for x in args.levels.split(",") if x.strip()])
    differ = [k for k, same in doc["ref_code_is_checkout_file"].items() if not same]
    print(describe(doc, out) + (f"; {len(differ)} problems' ref_code differs from the checkout's file" if differ else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
