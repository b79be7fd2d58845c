"""The agent's tools: JSON schemas plus handlers. Results are short structured text.

Every handler returns a :class:`ToolResult`; a tool error (bad arguments, guard refusal, missing
search text, failed build) is ``ok=False`` text for the model, never an exception for the UI.
There is no shell tool: the model acts only through the worktree's candidate files (through the
workspace guard) and the evaluation engine.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from kernelpilot import skills
from kernelpilot.agent import evaltools as ev
from kernelpilot.agent import fileops
from kernelpilot.agent.toolbase import Tool, ToolContext, ToolFailure, ToolResult
from kernelpilot.errors import KernelpilotError


def _obj(props: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props or {}, "required": required or [], "additionalProperties": False}


_STR = {"type": "string"}
_INT = {"type": "integer"}


# ----------------------------------------------------------------------------- file tools


async def list_files(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    rel = str(args.get("path") or ".")
    start = fileops.resolve_readable(ctx.root, rel)
    if not start.exists():
        raise ToolFailure(f"{rel} does not exist in the worktree")
    base = ctx.root.resolve()
    lines: list[str] = []
    total = 0
    for path in fileops.walk_files(base, start):
        total += 1
        if len(lines) >= 200:
            continue
        rp = path.relative_to(base)
        writable = _writable(ctx, str(rp))
        lines.append(f"{rp}  ({path.stat().st_size} B{', writable' if writable else ''})")
    more = f"\n… {total - len(lines)} more files not shown" if total > len(lines) else ""
    head = f"{total} file(s) under {rel}; candidate files (writable) live in {ctx.candidate_rel}/"
    return ToolResult(head + "\n" + "\n".join(lines) + more)


def _writable(ctx: ToolContext, rel: str) -> bool:
    try:
        ctx.workspace.guard(rel)
        return True
    except Exception:  # noqa: BLE001 - any refusal means "not writable"
        return False


async def read_file(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    rel = _required(args, "path")
    path = fileops.resolve_readable(ctx.root, rel)
    if not path.is_file():
        raise ToolFailure(f"{rel} is not a file in the worktree; use list_files to see what exists")
    try:
        text = fileops.read_text(path)
    except ValueError as exc:
        raise ToolFailure(str(exc)) from exc
    start = int(args.get("start_line") or 1)
    end = args.get("end_line")
    body, first, last, total = fileops.numbered(text, start, int(end) if end else None)
    if total == 0:
        return ToolResult(f"{rel}: empty file")
    more = f"; more: read_file with start_line={last + 1}" if last < total else ""
    return ToolResult(f"{rel} lines {first}-{last} of {total}{more}\n{body}")


async def grep(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    pattern = _required(args, "pattern")
    rel = str(args.get("path") or ".")
    start = fileops.resolve_readable(ctx.root, rel)
    max_results = max(1, min(int(args.get("max_results") or 50), 200))
    try:
        hits, count = fileops.grep(ctx.root.resolve(), start, pattern, args.get("glob"), max_results)
    except re.error as exc:
        raise ToolFailure(f"invalid regular expression {pattern!r}: {exc}") from exc
    if not hits:
        return ToolResult(f"no match for /{pattern}/ under {rel}")
    more = f"\n… {count - len(hits)} more matches (narrow path/glob)" if count > len(hits) else ""
    return ToolResult(f"{count} match(es) for /{pattern}/ under {rel}\n" + "\n".join(hits) + more)


def _guarded_path(ctx: ToolContext, rel: str) -> Path:
    try:
        return Path(ctx.workspace.guard(rel))
    except KernelpilotError as exc:
        raise ToolFailure(f"write refused: {exc} Candidate files live in {ctx.candidate_rel}/") from exc


async def write_file(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    rel = _required(args, "path")
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolFailure("content must be a string holding the whole file")
    path = _guarded_path(ctx, rel)
    existed = path.exists()
    fileops.atomic_write(path, content)
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return ToolResult(f"{'overwrote' if existed else 'created'} {rel}: {lines} lines, {len(content.encode())} bytes")


async def edit_file(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    rel = _required(args, "path")
    search = args.get("search")
    replace = args.get("replace")
    if not isinstance(search, str) or not isinstance(replace, str):
        raise ToolFailure("search and replace must both be strings")
    path = _guarded_path(ctx, rel)
    if not path.is_file():
        raise ToolFailure(f"{rel} does not exist; create it with write_file")
    text = fileops.read_text(path)
    try:
        new = fileops.edit_text(text, search, replace, rel)
    except ValueError as exc:
        raise ToolFailure(str(exc)) from exc
    fileops.atomic_write(path, new)
    line = text[: text.index(search)].count("\n") + 1
    delta = new.count("\n") - text.count("\n")
    return ToolResult(f"edited {rel} at line {line}: replaced {search.count(chr(10)) + 1} line(s), file is now "
                      f"{new.count(chr(10)) + 1} lines ({delta:+d})")


# ----------------------------------------------------------------------------- skills


async def list_skills(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    text = await asyncio.to_thread(skills.index_text, ctx.skills_dir)
    return ToolResult(text or "no skills installed")


async def read_skill(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    name = _required(args, "name")
    return ToolResult(await asyncio.to_thread(skills.read_skill, name, ctx.skills_dir))


def _required(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise ToolFailure(f"missing required argument {key!r} (a string)")
    return value


# ----------------------------------------------------------------------------- registry


def build_tools() -> dict[str, Tool]:
    tools = [
        Tool("list_files", "List files in the worktree (default: everything), marking the writable candidate files.",
             _obj({"path": {**_STR, "description": "directory relative to the worktree root"}}), list_files),
        Tool("read_file", "Read a worktree file with line numbers; optional 1-based inclusive line range.",
             _obj({"path": _STR, "start_line": _INT, "end_line": _INT}, ["path"]), read_file),
        Tool("grep", "Search worktree files with a Python regular expression; results are file:line: text.",
             _obj({"pattern": _STR, "path": _STR, "glob": {**_STR, "description": "e.g. *.cu"}, "max_results": _INT},
                  ["pattern"]), grep),
        Tool("write_file", "Create or overwrite a candidate file with the complete content.",
             _obj({"path": _STR, "content": _STR}, ["path", "content"]), write_file),
        Tool("edit_file",
             "Replace one exact occurrence of `search` with `replace` in a candidate file. The search text must match "
             "exactly once.",
             _obj({"path": _STR, "search": _STR, "replace": _STR}, ["path", "search", "replace"]), edit_file),
        Tool("build", "Compile the candidate; returns compiler diagnostics and per-kernel registers/spills only.",
             _obj(), ev.build),
        Tool("test", "Build and check correctness on fresh random inputs (no timing).", _obj(), ev.test),
        Tool("benchmark",
             "Full evaluation: build, verify, audit, time against eager and torch.compile, speed of light. Checkpoints "
             "the files as a new candidate id.",
             _obj(), ev.benchmark),
        Tool("profile",
             "Profile the current candidate (Nsight Compute summary when available, else the benchmark's timings and "
             "roofline).",
             _obj(), ev.profile),
        Tool("sanitize",
             "Run compute-sanitizer memcheck (and racecheck when shared memory is used) on the current candidate with "
             "a small input. Approval runs it too.",
             _obj(), ev.sanitize),
        Tool("list_skills", "List the skill documents (name — description).", _obj(), list_skills),
        Tool("read_skill", "Read one skill document by name.", _obj({"name": _STR}, ["name"]), read_skill),
        Tool("show_problem",
             "Show the problem source and its analysis: input/output shapes, dtypes, bytes moved, FLOPs.",
             _obj(), ev.show_problem),
        Tool("inductor_kernel",
             "Show the Triton code torch.compile generates for this problem: a starting point and the bar to beat.",
             _obj({"offset": _INT, "max_chars": _INT}), ev.inductor_kernel),
        Tool("inductor",
             "Replace the candidate with torch.compile's own kernels as a runnable Triton candidate (its kernels, "
             "a ModelNew launching them with Inductor's grid and configs) and benchmark it: the starting point c0.",
             _obj(), ev.inductor),
        Tool("propose",
             "Propose the current candidate to the engineer. Needs an ok benchmark of exactly the current files. Say "
             "what changed and why it is faster.",
             _obj({"summary": _STR}, ["summary"]), ev.propose),
        Tool("revert", "Restore the candidate files of an earlier candidate id (e.g. c2).",
             _obj({"candidate_id": _STR}, ["candidate_id"]), ev.revert),
    ]
    return {t.name: t for t in tools}


class Toolbox:
    def __init__(self, ctx: ToolContext, tools: dict[str, Tool] | None = None) -> None:
        self.ctx = ctx
        self.tools = tools if tools is not None else build_tools()

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    async def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(f"error: unknown tool {name!r}; available: {', '.join(self.tools)}", ok=False)
        try:
            return await tool.handler(self.ctx, args)
        except asyncio.CancelledError:
            raise
        except ToolFailure as exc:
            return ToolResult(f"error: {exc}", ok=False)
        except KernelpilotError as exc:
            return ToolResult(f"error: {exc}", ok=False)
        except Exception as exc:  # noqa: BLE001 - a tool bug must not kill the session
            return ToolResult(f"error: {name} failed: {type(exc).__name__}: {exc}", ok=False)
