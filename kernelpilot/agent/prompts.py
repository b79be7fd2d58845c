"""Render the markdown prompt templates in ``prompts/`` (``str.format_map`` with a safe dict).

Templates live in the repository's top-level ``prompts/`` directory (``$KERNELPILOT_PROMPTS_DIR``
overrides). Unknown placeholders are left as written, so a template never fails to render.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError

MEMORY_FILES = ("KERNELPILOT.md", "AGENTS.md")
MEMORY_MAX_CHARS = 32_000


class _SafeDict(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def prompts_dir() -> Path:
    env = os.environ.get("KERNELPILOT_PROMPTS_DIR")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parent.parent  # the kernelpilot package
    candidates += [here.parent / "prompts", here / "prompts", Path(sys.prefix) / "share" / "kernelpilot" / "prompts"]
    for candidate in candidates:
        if (candidate / "system.md").is_file():
            return candidate
    raise KernelpilotError("the prompt templates (prompts/system.md) were not found; set KERNELPILOT_PROMPTS_DIR to "
                           "the repository's prompts/ folder.")


def render(name: str, values: dict[str, Any]) -> str:
    text = (prompts_dir() / name).read_text(encoding="utf-8")
    return text.format_map(_SafeDict({k: "" if v is None else v for k, v in values.items()}))


def project_memory(root: Path | None) -> str:
    """The project's KERNELPILOT.md (or else AGENTS.md), capped, as a prompt section."""
    if root is None:
        return ""
    for name in MEMORY_FILES:
        path = Path(root) / name
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            if len(text) > MEMORY_MAX_CHARS:
                text = text[:MEMORY_MAX_CHARS] + f"\n[… {len(text) - MEMORY_MAX_CHARS} chars of {name} elided …]"
            return f"\n# Project notes ({name})\n\n{text.strip()}\n"
    return ""


@dataclass
class GpuFacts:
    text: str
    available: bool


_CORES_PER_SM = {7: 64, 8: 128, 9: 128, 10: 128, 12: 128}


def gpu_facts() -> GpuFacts:
    """Facts about GPU 0 from NVML, plus the engine's measured ceilings when cached."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no driver / no NVML
        return GpuFacts(f"No NVIDIA GPU is visible to this process ({type(exc).__name__}); evaluation needs one.",
                        False)
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else name
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle).total
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        lines = [f"- {name}, compute capability {major}.{minor} (sm_{major}{minor}), {mem / 2**30:.0f} GiB memory"]
        try:
            cores = pynvml.nvmlDeviceGetNumGpuCores(handle)
            per_sm = _CORES_PER_SM.get(major)
            if cores and per_sm:
                lines.append(f"- {cores // per_sm} SMs ({cores} CUDA cores)")
        except Exception:  # noqa: BLE001 - older drivers
            pass
        try:
            sm_clock = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
            mem_clock = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
            bus = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
            lines.append(f"- max SM clock {sm_clock} MHz; memory clock {mem_clock} MHz, bus {bus} bit")
        except Exception:  # noqa: BLE001
            pass
        try:
            drv = pynvml.nvmlSystemGetDriverVersion()
            driver = drv.decode() if isinstance(drv, bytes) else str(drv)
        except Exception:  # noqa: BLE001
            driver = "unknown"
        lines.append(measured_ceilings(name, driver))
        return GpuFacts("\n".join(ln for ln in lines if ln), True)
    except Exception as exc:  # noqa: BLE001
        return GpuFacts(f"NVML could not describe GPU 0 ({exc}).", False)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def measured_ceilings(gpu: str = "", driver: str = "") -> str:
    """The engine's cached measured ceilings (bandwidth, FLOP/s) when present; else a note."""
    missing = "- measured ceilings: not measured yet on this GPU (the first benchmark measures them)"
    try:
        from kernelpilot.evaluation.timing import ceilings

        cached = ceilings.load_cached(gpu, driver) if gpu else None
    except Exception:  # noqa: BLE001 - engine part absent or cache unreadable
        return missing
    if cached is None:
        return missing
    rates = ", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in sorted(cached.tflops.items()))
    return (f"- measured ceilings ({cached.source()}): copy bandwidth {cached.copy_tbps:.2f} TB/s"
            + (f"; {rates}" if rates else ""))


def nvml_identity() -> tuple[str, str] | None:
    """(GPU 0 name, driver version) from NVML, without touching CUDA; None when there is no GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001
        return None
    try:
        raw = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        drv = pynvml.nvmlSystemGetDriverVersion()
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        return name, drv.decode() if isinstance(drv, bytes) else str(drv)
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def cached_ceilings() -> Any:
    """The engine's measured ceilings for GPU 0 when cached, else None."""
    ident = nvml_identity()
    if ident is None:
        return None
    try:
        from kernelpilot.evaluation.timing import ceilings

        return ceilings.load_cached(*ident)
    except Exception:  # noqa: BLE001
        return None


def budgets_text(budgets: Any) -> str:
    parts = []
    if getattr(budgets, "max_turns", None):
        parts.append(f"{budgets.max_turns} model turns")
    if getattr(budgets, "max_tokens", None):
        parts.append(f"{budgets.max_tokens:,} tokens")
    if getattr(budgets, "max_cost_usd", None):
        parts.append(f"${budgets.max_cost_usd:.2f}")
    if getattr(budgets, "max_wall_s", None):
        parts.append(f"{budgets.max_wall_s / 60:.0f} minutes of wall time")
    if not parts:
        return "No limits are set; still, aim to finish in few steps."
    return "This session stops at the first of: " + ", ".join(parts) + ". Propose a good candidate before then."


def rules_text(config: Any) -> str:
    allowed = list(getattr(config, "allowed_libraries", None) or [])
    extra = list(getattr(config, "extra_shapes", None) or [])
    return render("rules.md", {
        "allowed_libraries": (f" Allowed library calls in this project: {', '.join(allowed)}." if allowed
                              else " No library calls (cuBLAS, cuDNN, torch.matmul …) are allowed in this project."),
        "extra_shapes": (f" and on the extra shape sets {', '.join(str(s.get('name', '?')) for s in extra)}" if extra
                         else ""),
    }).strip()


def system_prompt(
    *, problem: Any, config: Any, budgets: Any, candidate_rel: Path, problem_info: str,
    skills_index: str, gpu: GpuFacts | None = None, project_root: Path | None = None,
) -> str:
    gpu = gpu or gpu_facts()
    tolerances = getattr(config, "tolerances", None) or {}
    tol_text = ", ".join(f"{k} {tuple(v)}" for k, v in tolerances.items()) or "engine defaults"
    return render("system.md", {
        "candidate_dir": str(candidate_rel),
        "rules": rules_text(config),
        "gpu_facts": gpu.text,
        "problem_name": problem.name,
        "problem_path": str(problem.path),
        "problem_source": problem.source.rstrip(),
        "problem_info": problem_info,
        "tolerances": tol_text,
        "compile_mode": getattr(config, "compile_mode", "default") or "default",
        "budgets": budgets_text(budgets),
        "skills": skills_index or "(no skills installed)",
        "project_memory": project_memory(project_root),
    }).strip() + "\n"
