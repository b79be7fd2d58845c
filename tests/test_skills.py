"""The skill library: front matter, size, links, index, lookup and the `kernelpilot skills` command."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from kernelpilot import skills
from kernelpilot.skill_blocks import is_compiled, pattern_name
from kernelpilot.skills import SkillError, code_blocks, index_text, load_index, read_skill, skill_links

SKILLS_DIR = Path(__file__).resolve().parent.parent / "skills"
DOCS = sorted(SKILLS_DIR.glob("*.md"))
KNOWN_ARCHS = {"sm_90", "sm_90a", "sm_100", "sm_100a", "sm_80", "sm_89"}
KNOWN_TAGS = {"fragment", "fragment-body", "sm_90a", "torch"}
REQUIRED_PATTERNS = {"vec-scale", "row-sum", "softmax-row"}


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KERNELPILOT_SKILLS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # no project .kernelpilot/skills unless a test makes one


def _write(path: Path, name: str, body: str = "# Title\n", **overrides: str) -> Path:
    meta = {"name": name, "description": "One line.", "when": "Always.", "applies_to": "[sm_90]", **overrides}
    front = "\n".join(f"{k}: {v}" for k, v in meta.items() if v is not None)
    path.write_text(f"---\n{front}\n---\n{body}", encoding="utf-8")
    return path


def test_library_has_enough_valid_documents() -> None:
    index = load_index(SKILLS_DIR)
    assert len(index) >= 14
    assert len(index) == len(DOCS), "every .md in skills/ must be a skill"
    for skill in index:
        assert skill.name == skill.path.stem
        assert "\n" not in skill.description and 20 <= len(skill.description) <= 200, skill.name
        assert skill.when.strip(), skill.name
        assert set(skill.applies_to) <= KNOWN_ARCHS, (skill.name, skill.applies_to)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.stem)
def test_document_is_short_enough(doc: Path) -> None:
    lines = doc.read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"{doc.name} has {lines} lines; split it or trim it to at most 250"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.stem)
def test_links_resolve_to_skills(doc: Path) -> None:
    names = {p.stem for p in DOCS}
    links = skill_links(doc.read_text(encoding="utf-8"))
    assert links, f"{doc.name} links to no other skill"
    broken = [name for name in links if name not in names]
    assert not broken, f"{doc.name} links to unknown skills: {broken}"
    assert doc.stem not in links, f"{doc.name} links to itself"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.stem)
def test_code_blocks_are_labelled(doc: Path) -> None:
    for block in code_blocks(doc.read_text(encoding="utf-8")):
        assert block.language, f"{doc.name} block {block.index} (line {block.line}) has no language"
        if is_compiled(block):
            unknown = [t for t in block.tags if t not in KNOWN_TAGS and not t.startswith(("pattern=", "file="))]
            assert not unknown, f"{doc.name} block {block.index}: unknown info-string tags {unknown}"


def test_gpu_patterns_are_present() -> None:
    found = {pattern_name(b) for doc in DOCS for b in code_blocks(doc.read_text(encoding="utf-8"))}
    assert REQUIRED_PATTERNS <= found


def test_every_document_is_reachable_by_links() -> None:
    linked = {name for doc in DOCS for name in skill_links(doc.read_text(encoding="utf-8"))}
    orphans = {p.stem for p in DOCS} - linked
    assert not orphans, f"no document links to {sorted(orphans)}"


def test_measured_figures_are_attributed() -> None:
    # The copy ceiling is ours: wherever it appears it must say it was measured by us.
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            if "4.25 TB/s" in line:
                context = "\n".join(doc.read_text(encoding="utf-8").splitlines()[max(0, number - 2) : number + 2])
                assert "measured by us" in context, f"{doc.name}:{number} quotes 4.25 TB/s without attribution"


def test_index_text_one_line_per_skill() -> None:
    index = load_index(SKILLS_DIR)
    text = index_text(SKILLS_DIR)
    lines = text.splitlines()
    assert len(lines) == len(index)
    for skill, line in zip(index, lines):
        assert line == f"{skill.name} — {skill.description}"


def test_read_skill_returns_the_document() -> None:
    text = read_skill("memory-bound-kernels", SKILLS_DIR)
    assert text.startswith("---\nname: memory-bound-kernels\n")
    assert read_skill("memory-bound-kernels.md", SKILLS_DIR) == text


def test_read_skill_unknown_name_suggests_close_matches() -> None:
    with pytest.raises(SkillError) as info:
        read_skill("gemm-hopper", SKILLS_DIR)
    message = str(info.value)
    assert "no skill named 'gemm-hopper'" in message and "gemm-on-hopper" in message
    with pytest.raises(SkillError, match="kernelpilot skills"):
        read_skill("zzzz", SKILLS_DIR)


def test_front_matter_errors_are_precise(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    lib = tmp_path / "lib"
    _write(lib / "good-one.md", "good-one")
    bad = _write(lib / "bad-name.md", "other-name")
    with pytest.raises(SkillError, match="declares name 'other-name' but its file stem is 'bad-name'"):
        load_index(lib)
    bad.unlink()
    _write(lib / "no-when.md", "no-when", when=None)  # type: ignore[arg-type]
    with pytest.raises(SkillError, match="lacks when"):
        load_index(lib)
    (lib / "no-when.md").write_text("---\nname: no-when\n", encoding="utf-8")
    with pytest.raises(SkillError, match="never closes"):
        load_index(lib)
    (lib / "no-when.md").write_text("# no front matter\n", encoding="utf-8")
    with pytest.raises(SkillError, match="does not start with a '---'"):
        load_index(lib)
    (lib / "no-when.md").unlink()
    _write(lib / "Bad_Case.md", "Bad_Case")
    with pytest.raises(SkillError, match="not kebab-case"):
        load_index(lib)


def test_parser_handles_lists_and_quotes() -> None:
    meta, body = skills.parse_front_matter('---\nname: x\ndescription: "a: b"\napplies_to: [sm_90, '
                                           '\'sm_90a\']\n---\nbody\n')
    assert meta == {"name": "x", "description": "a: b", "applies_to": ["sm_90", "sm_90a"]}
    assert body == "body"


def test_environment_and_project_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = tmp_path / "builtin"
    builtin.mkdir()
    _write(builtin / "alpha.md", "alpha", description="Builtin alpha.")
    _write(builtin / "beta.md", "beta")
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / ".kernelpilot" / "skills").mkdir(parents=True)
    _write(project / ".kernelpilot" / "skills" / "alpha.md", "alpha", description="Project alpha.")
    _write(project / ".kernelpilot" / "skills" / "gamma.md", "gamma")
    (project / "sub").mkdir()
    monkeypatch.setenv("KERNELPILOT_SKILLS_DIR", str(builtin))
    monkeypatch.chdir(project / "sub")
    index = {s.name: s for s in load_index()}
    assert set(index) == {"alpha", "beta", "gamma"}
    assert index["alpha"].description == "Project alpha."  # the project's copy wins
    assert "gamma — One line." in index_text()


def test_default_directory_is_the_repository_skills() -> None:
    names = {s.name for s in load_index()}
    assert {p.stem for p in DOCS} <= names


def test_skills_command_lists_and_prints(capsys: pytest.CaptureFixture[str]) -> None:
    assert skills.skills_command(argparse.Namespace(name=None)) == 0
    listing = capsys.readouterr().out
    assert listing.startswith("NAME")
    for doc in DOCS:
        assert re.search(rf"^{re.escape(doc.stem)}\s+\S", listing, re.M), doc.stem
    assert skills.skills_command(argparse.Namespace(name="attention")) == 0
    printed = capsys.readouterr().out
    assert printed == (SKILLS_DIR / "attention.md").read_text(encoding="utf-8")  # not a tty: plain
    with pytest.raises(SkillError, match="did you mean"):
        skills.skills_command(argparse.Namespace(name="attentoin"))


def test_highlighting_keeps_the_text() -> None:
    text = (SKILLS_DIR / "attention.md").read_text(encoding="utf-8")
    coloured = skills._highlight(text)
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured).strip() == text.strip()


def test_missing_skills_dir_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_SKILLS_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(SkillError, match="does not exist"):
        load_index()
    with pytest.raises(SkillError, match="does not exist"):
        load_index(tmp_path / "also-nowhere")
