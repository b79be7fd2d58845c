"""The skill library: short markdown documents about H100/H200 kernel work that the agent reads.

Each document in a skills directory is ``<name>.md`` and starts with front matter between two
``---`` lines, one ``key: value`` per line::

    ---
    name: memory-bound-kernels
    description: One line the model sees in its index.
    when: The situations the document is for.
    applies_to: [sm_90, sm_90a]
    ---

Values are plain strings, except ``[a, b]`` which is a list of strings; surrounding quotes are
removed. ``name`` must equal the file stem and be kebab-case. Documents link to each other with
ordinary relative markdown links, ``[text](other-name.md)``.

Where the documents come from, in order (a later directory's skill replaces an earlier one with the
same name):

1. ``$KERNELPILOT_SKILLS_DIR`` when set, else the repository's top-level ``skills/`` found next to
   the package (editable install), else ``<sys.prefix>/share/kernelpilot/skills``;
2. the project's ``.kernelpilot/skills/`` (searched upwards from the working directory).

This module imports nothing heavy; pygments is imported only to highlight a document on a terminal.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError

REQUIRED_KEYS: tuple[str, ...] = ("name", "description", "when", "applies_to")
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")
_FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s#]+\.md)(?:#[^)]*)?\)")


class SkillError(KernelpilotError):
    """A skill document is missing or malformed."""

    kind = "bad_skill"


@dataclass(frozen=True)
class Skill:
    """One entry of the skill index."""

    name: str
    description: str
    when: str
    applies_to: tuple[str, ...]
    path: Path
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block of a skill document."""

    index: int  # 1-based position among the document's fenced blocks
    line: int  # 1-based line of the opening fence
    language: str  # first word of the info string ("cuda", "cpp", "python", "" ...)
    tags: tuple[str, ...]  # the remaining words of the info string
    code: str


# ----------------------------------------------------------------------------- parsing


def _parse_value(raw: str) -> str | list[str]:
    value = raw.strip()
    if value.startswith("[") and value.endswith("]"):
        inner = value[1:-1].strip()
        if not inner:
            return []
        return [_unquote(item.strip()) for item in inner.split(",") if item.strip()]
    return _unquote(value)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def parse_front_matter(text: str, source: str = "<text>") -> tuple[dict[str, Any], str]:
    """Split ``text`` into (front-matter mapping, body); SkillError when malformed."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{source} does not start with a '---' front-matter line; add front matter with "
                         f"{', '.join(REQUIRED_KEYS)}.")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillError(f"{source} opens front matter with '---' but never closes it; add a closing '---' "
                         "line.") from None
    meta: dict[str, Any] = {}
    for number, line in enumerate(lines[1:end], start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY_RE.match(line)
        if match is None:
            raise SkillError(f"{source} line {number} is not 'key: value' ({line.strip()!r}); write each front-matter "
                             "entry on one line.")
        key, raw = match.groups()
        if key in meta:
            raise SkillError(f"{source} line {number} repeats the key {key!r}; keep one entry per key.")
        meta[key] = _parse_value(raw)
    body = "\n".join(lines[end + 1 :])
    return meta, body


def skill_from_file(path: Path) -> Skill:
    """Read and validate one skill document."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SkillError(f"cannot read skill file {path} ({exc.strerror}); check that it exists and is "
                         "readable.") from exc
    meta, _ = parse_front_matter(text, str(path))
    missing = [key for key in REQUIRED_KEYS if key not in meta or meta[key] in ("", [])]
    if missing:
        raise SkillError(f"{path} front matter lacks {', '.join(missing)}; add every one of "
                         f"{', '.join(REQUIRED_KEYS)}.")
    for key in ("name", "description", "when"):
        if not isinstance(meta[key], str):
            raise SkillError(f"{path} front matter key {key!r} must be one line of text, not a list; write it as plain "
                             "text.")
    name = meta["name"]
    if name != path.stem:
        raise SkillError(f"{path} declares name {name!r} but its file stem is {path.stem!r}; make the name equal the "
                         "file name without .md.")
    if not NAME_RE.match(name):
        raise SkillError(f"{path} name {name!r} is not kebab-case; use lower-case words joined by '-'.")
    applies = meta["applies_to"]
    applies_to = tuple(applies) if isinstance(applies, list) else (applies,)
    extra = {k: v for k, v in meta.items() if k not in REQUIRED_KEYS}
    return Skill(name=name, description=meta["description"], when=meta["when"], applies_to=applies_to, path=path,
                 extra=extra)


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced code block of a markdown text, in order."""
    blocks: list[CodeBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE_RE.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, info = match.group(2), match.group(3).strip()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            close = _FENCE_RE.match(lines[i])
            if (close and close.group(2).startswith(fence[0]) and len(close.group(2)) >= len(fence)
                    and not close.group(3).strip()):
                break
            body.append(lines[i])
            i += 1
        words = info.split()
        blocks.append(
            CodeBlock(
                index=len(blocks) + 1,
                line=start + 1,
                language=words[0].lower() if words else "",
                tags=tuple(words[1:]),
                code="\n".join(body) + "\n",
            )
        )
        i += 1
    return blocks


def skill_links(text: str) -> list[str]:
    """Names of the skills a document links to with ``[text](name.md)``."""
    names = []
    for target in _LINK_RE.findall(text):
        if "/" in target or ":" in target:
            continue  # links outside the skill directory are not skill links
        names.append(target[: -len(".md")])
    return names


# ----------------------------------------------------------------------------- discovery


def _builtin_dir() -> Path | None:
    env = os.environ.get("KERNELPILOT_SKILLS_DIR")
    if env:
        return Path(env).expanduser()
    package_root = Path(__file__).resolve().parent
    candidates = [
        package_root.parent / "skills",  # repository checkout / editable install
        package_root / "skills",  # packaged inside the wheel
        Path(sys.prefix) / "share" / "kernelpilot" / "skills",
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def _project_dir(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / ".kernelpilot" / "skills"
        if candidate.is_dir():
            return candidate
        if (directory / ".git").exists():
            break
    return None


def skill_dirs(project_root: Path | None = None) -> list[Path]:
    """The directories searched for skills, lowest priority first."""
    dirs = [d for d in (_builtin_dir(), _project_dir(project_root)) if d is not None]
    unique: list[Path] = []
    for d in dirs:
        if d.resolve() not in [u.resolve() for u in unique]:
            unique.append(d)
    return unique


def load_index(skills_dir: Path | str | None = None) -> list[Skill]:
    """All skills, sorted by name; with ``skills_dir`` only that directory is read."""
    if skills_dir is not None:
        directory = Path(skills_dir)
        if not directory.is_dir():
            raise SkillError(f"skills directory {directory} does not exist; pass an existing directory or unset "
                             "KERNELPILOT_SKILLS_DIR.")
        dirs: Iterable[Path] = [directory]
    else:
        dirs = skill_dirs()
        if not dirs:
            raise SkillError("no skills directory found; set KERNELPILOT_SKILLS_DIR to the repository's skills/ "
                             "folder.")
    by_name: dict[str, Skill] = {}
    for directory in dirs:
        if not directory.is_dir():
            raise SkillError(f"skills directory {directory} does not exist; point KERNELPILOT_SKILLS_DIR at an "
                             "existing directory or unset it.")
        for path in sorted(directory.glob("*.md")):
            if path.name.lower() == "readme.md":
                continue
            skill = skill_from_file(path)
            by_name[skill.name] = skill
    return sorted(by_name.values(), key=lambda s: s.name)


def find_skill(name: str, skills_dir: Path | str | None = None) -> Skill:
    """The skill called ``name``; SkillError naming close matches when there is none."""
    index = load_index(skills_dir)
    wanted = name.strip().removesuffix(".md")
    for skill in index:
        if skill.name == wanted:
            return skill
    names = [s.name for s in index]
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.4)
    if not close:
        close = [n for n in names if any(part in n for part in wanted.split("-") if len(part) > 2)][:3]
    hint = f"did you mean {', '.join(close)}?" if close else "run 'kernelpilot skills' to list them."
    raise SkillError(f"no skill named {wanted!r}; {hint}")


def read_skill(name: str, skills_dir: Path | str | None = None) -> str:
    """The full text of the skill called ``name`` (front matter included)."""
    return find_skill(name, skills_dir).path.read_text(encoding="utf-8")


def index_text(skills_dir: Path | str | None = None) -> str:
    """One line per skill, ``name — description``, for the agent's system prompt."""
    return "\n".join(f"{s.name} — {s.description}" for s in load_index(skills_dir))


# ----------------------------------------------------------------------------- CLI


def _table(skills: list[Skill]) -> str:
    width = max((len(s.name) for s in skills), default=4)
    lines = [f"{'NAME'.ljust(width)}  DESCRIPTION", f"{'-' * width}  {'-' * 11}"]
    lines += [f"{s.name.ljust(width)}  {s.description}" for s in skills]
    return "\n".join(lines)


def _highlight(text: str) -> str:
    try:
        from pygments import highlight
        from pygments.formatters import TerminalFormatter
        from pygments.lexers import MarkdownLexer
    except ImportError:
        return text
    return highlight(text, MarkdownLexer(), TerminalFormatter())


def skills_command(args: Any) -> int:
    """``kernelpilot skills [NAME]``: list the skills, or print one (highlighted on a terminal)."""
    name = getattr(args, "name", None) or getattr(args, "skill", None)
    directory = getattr(args, "skills_dir", None)
    out = sys.stdout
    if not name:
        out.write(_table(load_index(directory)) + "\n")
        return 0
    text = read_skill(name, directory)
    out.write(_highlight(text) if out.isatty() else text)
    if not text.endswith("\n"):
        out.write("\n")
    return 0
