"""The README and docs/ stay short, readable and connected: line limits, links that resolve, every CLI command in
the README's table, the screenshot a snapshot test keeps current, and CI's test command as the README gives it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from kernelpilot.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
SCREENSHOT = "tests/tui/__snapshots__/test_tui_snapshots/test_readme_screenshot.svg"

INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+(\S+)", re.MULTILINE)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans (a link-like string there is not a link)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def _links(text: str) -> list[str]:
    prose = _prose(text)
    return INLINE_LINK.findall(prose) + REFERENCE_DEF.findall(prose)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (but - and _), spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return {_slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.MULTILINE)}


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_readme_is_at_most_250_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move reference text to docs/ (at most 250)"


def test_there_are_docs_pages() -> None:
    names = {p.name for p in DOCS}
    for needed in ("configuration.md", "suite-and-rescoring.md", "model-to-faster-model.md", "verification.md",
                   "measured-results.md"):
        assert needed in names, f"docs/{needed} is missing"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_line_is_longer_than_120_characters(page: Path) -> None:
    long = [(n, len(line)) for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > 120]
    assert not long, f"{_name(page)}: lines over 120 characters (line, length): {long}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_points_to_an_existing_file(page: Path) -> None:
    broken = []
    for target in _links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.IGNORECASE):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading with that anchor)")
    assert not broken, f"{_name(page)}: broken links: {broken}"


def test_the_readme_links_every_docs_page() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in _links(README.read_text(encoding="utf-8"))}
    missing = [_name(p) for p in DOCS if p.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


def _subcommands() -> list[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert actions, "kernelpilot.cli.build_parser() has no subcommands"
    return sorted(name for action in actions for name in action.choices)


def test_every_subcommand_is_in_the_readmes_command_table() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Commands\n", 1)
    assert len(section) == 2, "README.md has no '## Commands' section"
    rows = [line for line in section[1].split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    first_cells = [row.split("|")[1] for row in rows]
    missing = [name for name in _subcommands()
               if not any(re.search(rf"`kernelpilot {re.escape(name)}\b", cell) or
                          (name == "pair" and re.search(r"`kernelpilot pair\b", row))
                          for cell, row in zip(first_cells, rows))]
    assert not missing, f"the README's command table lacks: {missing}"


def test_the_readme_shows_the_screenshot_a_snapshot_test_keeps_current() -> None:
    assert SCREENSHOT in _links(README.read_text(encoding="utf-8")), f"README.md does not embed {SCREENSHOT}"
    assert (ROOT / SCREENSHOT).is_file()
    source = (ROOT / "tests" / "tui" / "test_tui_snapshots.py").read_text(encoding="utf-8")
    test = source.split("def test_readme_screenshot(", 1)
    assert len(test) == 2, "tests/tui/test_tui_snapshots.py has no test_readme_screenshot"
    assert "terminal_size=(120, 40)" in test[1].split("\ndef ", 1)[0]


def test_ci_runs_the_readmes_test_command() -> None:
    command = "pip install -e '.[test]' && pytest"
    readme = README.read_text(encoding="utf-8")
    assert f"```bash\n{command}\n```" in readme, "the README's test command changed: keep .ci/run in step"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert any(line.strip() == command for line in ci.splitlines()), ".ci/run no longer runs the README's command"
