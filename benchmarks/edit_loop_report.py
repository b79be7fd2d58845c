"""edit_loop.py's table (markdown and terminal) and its ``--profile`` part: ``nvcc --time`` on each
``.cu`` of a built example, with the exact command its build.ninja holds."""

from __future__ import annotations

import csv
import shlex
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

COLUMNS = (("example", "example"), ("cold_test_s", "cold test s"), ("warm_kernel_s", ".cu edit s"),
           ("warm_header_s", "header edit s"), ("warm_model_s", "model_new edit s"), ("warm_triton_s", "triton edit s"),
           ("warm_benchmark_s", "warm benchmark s"), ("first_verdict_s", "first verdict s"), ("card_s", "card s"),
           ("baselines_s", "baselines s"), ("baselines_cached_s", "cached baselines s"))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def table(rows: list[dict[str, Any]]) -> str:
    heads = [h for _, h in COLUMNS]
    cells = [[_cell(r.get(k)) for k, _ in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(heads, widths)))]
    for c in cells:
        lines.append("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(c, widths))))
    return "\n".join(lines)


def write_markdown(rows: list[dict[str, Any]], path: Path) -> None:
    heads = [h for _, h in COLUMNS]
    out = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in rows:
        out.append("| " + " | ".join(_cell(r.get(k)) for k, _ in COLUMNS) + " |")
    out.append("")
    out.append("Warm test s: the median of the warm test-mode edits (each kind's median beside it). Warm benchmark s: "
               "the next edit in benchmark mode after the tests. Card s: the second launch, process start to the "
               "card with the problem's facts; baselines s: the first launch, to this session's eager and "
               "torch.compile times; cached baselines s: the second launch, to the machine's cached ones.")
    for r in rows:
        warm = r.get("phases", {}).get("warm_test", {})
        if warm:
            out.append(f"- {r['example']}: warm edit phases (median s) "
                       + ", ".join(f"{k} {v}" for k, v in warm.items() if v))
        if r.get("nvcc"):
            for name, prof in r["nvcc"].items():
                phases = ", ".join(f"{k} {v}" for k, v in sorted(prof.get("phases_s", {}).items(), key=lambda kv: -kv[1])[:6])
                out.append(f"  - nvcc {name}: wall {prof.get('wall_s')} s; {phases}")
    path.write_text("\n".join(out) + "\n")


def _ninja_vars(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        if " = " in line and not line.startswith((" ", "build ", "rule ")):
            key, value = line.split(" = ", 1)
            found[key.strip()] = value.strip()
    return found


def read_nvcc_time(csv_path: Path, returncode: int = 0) -> dict[str, float]:
    """Seconds per nvcc phase from ``nvcc --time``'s CSV. A compile that failed leaves the phases it never ran
    with a garbage figure (a clock reading, not a duration): only phases that end before a failure count."""
    phases: dict[str, float] = {}
    if not csv_path.is_file():
        return phases
    with open(csv_path) as f:
        for row in csv.reader(f):
            if len(row) >= 8 and row[7].strip() == "ms":
                name = row[1].strip()
                seconds = float(row[6]) / 1000
                if returncode and seconds > 3600:
                    continue
                phases[name] = round(phases.get(name, 0.0) + seconds, 3)
    return phases


# nvcc options weighed for the warm edit, timed beside the build's own command (issue 27 item 1)
NVCC_VARIANTS = {"split-compile": ["--split-compile=0"]}
_CODE = (".text", ".nv.")  # SASS and its metadata (.nv.info: registers, .nv.constant0, .nv.shared)


def code_digest(keep_dir: Path) -> str:
    """A digest of the SASS and kernel metadata of the cubins nvcc kept in ``keep_dir`` (the ``.text`` and ``.nv.``
    ELF sections, each kernel's ``.nv.info.<kernel>`` included; not the global ``.nv.info``, the debug sections
    or the notes that record the command line), so two builds can be compared for their code."""
    import hashlib

    h = hashlib.sha256()
    for cubin in sorted(keep_dir.glob("*.cubin")):
        b = cubin.read_bytes()
        shoff = struct.unpack_from("<Q", b, 0x28)[0]
        entsize, count, names_at = struct.unpack_from("<HHH", b, 0x3A)
        heads = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * entsize) for i in range(count)]
        names = heads[names_at][4]
        for head in heads:
            name = b[names + head[0]: b.index(b"\0", names + head[0])].decode()
            if not name.startswith(_CODE) or name == ".nv.info":  # the global attribute table names functions
                continue  # by symbol index, and split compilation orders the symbols otherwise
            h.update(name.encode() + b"\0")
            if head[1] != 8:  # SHT_NOBITS has no bytes in the file
                h.update(b[head[4]: head[4] + head[5]])
    return h.hexdigest()[:16]


def _timed_nvcc(cmd: list[str], keep: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str], str]:
    keep.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    r = subprocess.run([*cmd, "--keep", "--keep-dir", str(keep)], capture_output=True, text=True, env=env)
    wall = round(time.monotonic() - t0, 3)
    try:
        digest = code_digest(keep)
    except (OSError, ValueError, struct.error):
        digest = ""
    return wall, r, digest


def _build_env(cuda_cflags: str) -> dict[str, str]:
    """The environment the build ran nvcc in (kernelpilot.toolkit: CUDA_HOME, PATH, the CUDA wheels' CPATH)."""
    import os

    from kernelpilot.toolkit import toolchain_env

    arch = next((f.split("code=sm_")[1] for f in shlex.split(cuda_cflags) if "code=sm_" in f), None)
    try:
        return {**os.environ, **toolchain_env(f"sm_{arch}" if arch else None)}
    except Exception:  # noqa: BLE001 - no toolkit found: nvcc's own failure says so
        return dict(os.environ)


def nvcc_profile(build_dir: Path, out: Path) -> dict[str, Any]:
    """``nvcc --time`` on every ``.cu`` the build compiled, with build.ninja's own flags; then each of
    NVCC_VARIANTS added to them: its wall time and whether its code is the same as the build's own."""
    ninja = build_dir / "build.ninja"
    if not ninja.is_file():
        return {"error": {"phases_s": {}, "note": f"no build.ninja in {build_dir}"}}
    text = ninja.read_text()
    v = _ninja_vars(text)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    env = _build_env(v.get("cuda_cflags", ""))
    for line in text.splitlines():
        if not line.startswith("build ") or ": cuda_compile " not in line:
            continue
        src = Path(line.split(": cuda_compile ", 1)[1].strip())
        csv_path = out / f"{src.stem}.csv"
        cmd = [v.get("nvcc", "nvcc"), *shlex.split(v.get("cuda_cflags", "")), "-c", str(src), "-o",
               str(out / f"{src.stem}.o"), *shlex.split(v.get("cuda_post_cflags", ""))]
        wall, r, digest = _timed_nvcc([*cmd, "--time", str(csv_path)], out / f"{src.stem}-keep", env)
        row: dict[str, Any] = {"wall_s": wall, "returncode": r.returncode,
                               "phases_s": read_nvcc_time(csv_path, r.returncode),
                               "stderr": r.stderr[-800:], "variants": {}}
        for name, extra in NVCC_VARIANTS.items():
            v_wall, v_r, v_digest = _timed_nvcc([*cmd, *extra], out / f"{src.stem}-{name}", env)
            row["variants"][name] = {"flags": extra, "wall_s": v_wall, "returncode": v_r.returncode,
                                     "same_code": bool(digest) and v_digest == digest}
        result[src.name] = row
    return result
