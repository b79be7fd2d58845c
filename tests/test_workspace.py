"""The git worktree workspace, on real repositories in temporary directories (no mocks)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kernelpilot.errors import GuardError, WorkspaceError
from kernelpilot.landing import approve
from kernelpilot.workspace import Workspace


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(path))
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "user"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test User")
    git(root, "config", "user.email", "user@example.com")
    git(root, "config", "commit.gpgsign", "false")
    (root / "kernels").mkdir()
    (root / "kernels" / "softmax.cu").write_text("// original kernel\n")
    (root / "problem.py").write_text("# the reference\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_softmax.py").write_text("def test(): pass\n")
    (root / "README.md").write_text("readme\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


OK = {"status": "ok", "mode": "benchmark",  # a verdict that may be approved
      "summary": "correct; 2.0x vs torch.compile"}


def open_ws(repo: Path, session: str = "s1") -> Workspace:
    return Workspace.open(repo, session, candidate_dir="kernels", problem="problem.py")


def test_worktree_is_outside_the_tree_on_its_own_branch(repo: Path, data_dir: Path) -> None:
    ws = open_ws(repo)
    assert ws.path == data_dir / "worktrees" / "s1"
    assert not ws.path.is_relative_to(repo)
    assert git(ws.path, "rev-parse", "--abbrev-ref", "HEAD") == "kernelpilot/s1"
    assert ws.base_sha == git(repo, "rev-parse", "HEAD")
    assert (ws.path / "kernels" / "softmax.cu").read_text() == "// original kernel\n"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"  # the user's checkout is untouched


def test_not_a_repository_offers_git_init_and_does_not_run_it(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorkspaceError, match="not inside a git repository.*git init") as err:
        Workspace.open(plain)
    assert "never does this for you" in str(err.value)
    assert not (plain / ".git").exists()


def test_repository_without_commits(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(WorkspaceError, match="has no commits yet"):
        Workspace.open(empty)


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("../outside.cu", "climbs out with '..'"),
        ("kernels/../../outside.cu", "climbs out with '..'"),
        ("/etc/passwd", "is absolute"),
        ("~/x.cu", "is absolute"),
        ("problem.py", "is the problem file"),
        ("./problem.py", "is the problem file"),
        ("tests/test_softmax.py", "inside tests/"),
        ("kernels/test_softmax.py", "is a test or project configuration file"),
        ("kernels/conftest.py", "is a test or project configuration file"),
        ("pyproject.toml", "is a test or project configuration file"),
        (".git/config", "inside .git/"),
        ("kernels/notes.txt", "is not a candidate file"),
        ("README.md", "is not a candidate file"),
        ("other/kernel.cu", "is not a candidate file"),
        ("kernelpilot/evaluation/timing/interleaved.py", "part of the kernelpilot harness"),
        ("", "empty path"),
    ],
)
def test_guard_refuses(repo: Path, path: str, needle: str) -> None:
    ws = open_ws(repo)
    with pytest.raises(GuardError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        ws.write_file(path, "pwned\n")
    assert (repo / "problem.py").read_text() == "# the reference\n"


def test_guard_refuses_absolute_path_into_the_worktree(repo: Path) -> None:
    ws = open_ws(repo)
    with pytest.raises(GuardError, match="is absolute"):
        ws.guard(str(ws.path / "kernels" / "softmax.cu"))


def test_guard_allows_candidate_files(repo: Path) -> None:
    ws = open_ws(repo)
    assert ws.guard("kernels/softmax.cu") == ws.path / "kernels" / "softmax.cu"
    assert ws.write_file("kernels/sub/dir/helper.cuh", "x\n").read_text() == "x\n"
    assert ws.guard("kernels/./model_new.py") == ws.path / "kernels" / "model_new.py"


def test_symlink_file_pointing_out_is_refused(repo: Path, tmp_path: Path) -> None:
    ws = open_ws(repo)
    secret = tmp_path / "secret.cu"
    secret.write_text("secret\n")
    (ws.path / "kernels" / "evil.cu").symlink_to(secret)
    with pytest.raises(GuardError, match="symlink .*pointing outside the worktree"):
        ws.write_file("kernels/evil.cu", "pwned\n")
    assert secret.read_text() == "secret\n"


def test_symlinked_parent_directory_is_refused(repo: Path, tmp_path: Path) -> None:
    ws = open_ws(repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.path / "kernels" / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(GuardError, match="kernels/sub -> .*pointing outside"):
        ws.write_file("kernels/sub/a.cu", "pwned\n")
    with pytest.raises(GuardError, match="symlink"):
        ws.write_file("kernels/sub/new/deeper.cu", "pwned\n")
    assert list(outside.iterdir()) == []


def test_committed_symlink_in_the_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "target.cu").write_text("t\n")
    (repo / "kernels" / "link.cu").symlink_to(tmp_path / "target.cu")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add a link")
    ws = open_ws(repo)
    with pytest.raises(GuardError, match="symlink"):
        ws.write_file("kernels/link.cu", "pwned\n")
    assert (tmp_path / "target.cu").read_text() == "t\n"


def test_read_file_stays_inside(repo: Path, tmp_path: Path) -> None:
    ws = open_ws(repo)
    assert ws.read_file("problem.py") == "# the reference\n"
    (tmp_path / "secret").write_text("s")
    (ws.path / "kernels" / "peek").symlink_to(tmp_path / "secret")
    with pytest.raises(GuardError, match="resolves outside the worktree"):
        ws.read_file("kernels/peek")
    with pytest.raises(GuardError, match="climbs out"):
        ws.read_file("../user/problem.py")


def test_checkpoint_commits_candidate_files_only_and_names_the_verdict(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// v1\n")
    ws.write_file("kernels/model_new.py", "class ModelNew: pass\n")
    (ws.path / "README.md").write_text("edited by the engineer in the worktree\n")
    sha = ws.checkpoint("c1", "ok: 1.8x eager, 1.2x torch.compile")
    assert git(ws.path, "log", "-1", "--format=%s", sha) == "kernelpilot c1: ok: 1.8x eager, 1.2x torch.compile"
    assert git(ws.path, "rev-parse", "kernelpilot/s1") == sha
    files = git(ws.path, "diff-tree", "--no-commit-id", "--name-only", "-r", sha).splitlines()
    assert sorted(files) == ["kernels/model_new.py", "kernels/softmax.cu"]
    status = git(ws.path, "status", "--porcelain")
    assert status == "M README.md"  # candidate files are clean, the README edit is left alone
    assert git(repo, "log", "-1", "--format=%s", "main") == "initial"


def test_checkpoint_without_changes_still_records_the_candidate(repo: Path) -> None:
    ws = open_ws(repo)
    sha = ws.checkpoint("c0", "incorrect: max abs error 3.1")
    assert git(ws.path, "rev-parse", f"{sha}^") == ws.base_sha
    assert ws.resolve("c0") == sha


def test_diff_against_original_and_previous(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// v1\n")
    ws.checkpoint("c1", "ok", OK)
    ws.write_file("kernels/softmax.cu", "// v2\n")
    ws.checkpoint("c2", "ok")
    original = ws.diff("c2")
    assert "-// original kernel" in original and "+// v2" in original and "v1" not in original
    previous = ws.diff("c2", against="previous")
    assert "-// v1" in previous and "+// v2" in previous
    assert "-// v1" in ws.diff("c2", against="c1")
    with pytest.raises(WorkspaceError, match="unknown candidate 'c9'.*known candidates: c1, c2"):
        ws.diff("c9")


def test_candidate_map_survives_restart_and_lost_state(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// v1\n")
    sha = ws.checkpoint("c1", "ok", OK)
    again = open_ws(repo)
    assert again.path == ws.path and again.resolve("c1") == sha and again.base_sha == ws.base_sha
    state = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "kernelpilot" / "sessions" / "s1.json"
    assert state.is_file()
    state.unlink()
    assert open_ws(repo).resolve("c1") == sha  # found through the commit trailer


def test_approve_lands_one_commit_on_the_users_branch(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// fast\n")
    ws.write_file("kernels/binding.cpp", "// glue\n")
    ws.checkpoint("c1", "ok: 2.0x torch.compile", OK)
    before = git(repo, "rev-parse", "HEAD")
    new = approve(ws, "c1")
    assert git(repo, "rev-parse", "HEAD") == new and git(repo, "rev-parse", f"{new}^") == before
    assert git(repo, "log", "-1", "--format=%s|%an", new) == "kernelpilot: ok: 2.0x torch.compile|Test User"
    assert (repo / "kernels" / "softmax.cu").read_text() == "// fast\n"
    assert (repo / "kernels" / "binding.cpp").read_text() == "// glue\n"
    assert git(repo, "status", "--porcelain") == ""
    assert ws.candidates["c1"].status == "approved"


def test_approve_applies_deletions(repo: Path) -> None:
    (repo / "kernels" / "old.cuh").write_text("old\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "old header")
    ws = open_ws(repo)
    (ws.path / "kernels" / "old.cuh").unlink()
    ws.checkpoint("c1", "ok", OK)
    approve(ws, "c1")
    assert not (repo / "kernels" / "old.cuh").exists()
    assert git(repo, "status", "--porcelain") == ""
    assert "old.cuh" not in git(repo, "ls-files")


@pytest.mark.parametrize("how", ["modified", "staged", "untracked"])
def test_approve_onto_dirty_same_file_is_refused_and_loses_nothing(repo: Path, how: str) -> None:
    ws = open_ws(repo)
    target = "kernels/softmax.cu" if how != "untracked" else "kernels/new.cu"
    ws.write_file(target, "// candidate\n")
    ws.checkpoint("c1", "ok", OK)
    (repo / target).write_text("// my precious edit\n")
    if how == "staged":
        git(repo, "add", target)
    before = git(repo, "rev-parse", "HEAD")
    with pytest.raises(WorkspaceError,
                       match=f"uncommitted changes to {target}.*commit or stash them.*nothing was changed"):
        approve(ws, "c1")
    assert (repo / target).read_text() == "// my precious edit\n"
    assert git(repo, "rev-parse", "HEAD") == before
    if how == "staged":
        assert git(repo, "diff", "--cached", "--name-only") == target


def test_approve_with_unrelated_dirty_and_staged_files_keeps_them(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// fast\n")
    ws.checkpoint("c1", "ok", OK)
    (repo / "README.md").write_text("work in progress\n")
    (repo / "notes.txt").write_text("staged notes\n")
    git(repo, "add", "notes.txt")
    (repo / "scratch.txt").write_text("untracked\n")
    new = approve(ws, "c1")
    assert git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", new) == "kernels/softmax.cu"
    assert (repo / "README.md").read_text() == "work in progress\n"
    assert (repo / "scratch.txt").read_text() == "untracked\n"
    assert git(repo, "diff", "--cached", "--name-only") == "notes.txt"  # still staged, not committed
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True,
                            check=True).stdout
    assert sorted(status.splitlines()) == [" M README.md", "?? scratch.txt", "A  notes.txt"]


def test_approve_after_the_user_committed_meanwhile(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// fast\n")
    ws.checkpoint("c1", "ok", OK)
    (repo / "README.md").write_text("user kept working\n")
    git(repo, "commit", "-q", "-am", "user commit")
    user_head = git(repo, "rev-parse", "HEAD")
    new = approve(ws, "c1")
    assert git(repo, "rev-parse", f"{new}^") == user_head
    assert git(repo, "show", f"{new}:README.md") == "user kept working"
    assert git(repo, "show", f"{new}:kernels/softmax.cu") == "// fast"


def test_approve_refuses_to_overwrite_a_newer_commit_of_the_same_file(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// fast\n")
    ws.checkpoint("c1", "ok", OK)
    (repo / "kernels" / "softmax.cu").write_text("// user's own improvement\n")
    git(repo, "commit", "-q", "-am", "user improved the kernel")
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(WorkspaceError, match="kernels/softmax.cu changed on main since the session started"):
        approve(ws, "c1")
    assert git(repo, "rev-parse", "HEAD") == head
    new = approve(ws, "c1", overwrite_committed=True)
    assert git(repo, "show", f"{new}:kernels/softmax.cu") == "// fast"


def test_approve_on_detached_head_explains(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// fast\n")
    ws.checkpoint("c1", "ok", OK)
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(WorkspaceError, match="detached HEAD .*check out a branch"):
        approve(ws, "c1")
    assert (repo / "kernels" / "softmax.cu").read_text() == "// original kernel\n"


def test_approve_twice_says_nothing_to_do(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// fast\n")
    ws.checkpoint("c1", "ok", OK)
    approve(ws, "c1")
    with pytest.raises(WorkspaceError, match="already contains candidate c1"):
        approve(ws, "c1")


def test_dirty_tree_and_untracked_files(repo: Path) -> None:
    (repo / "README.md").write_text("uncommitted\n")
    (repo / "untracked.txt").write_text("u\n")
    ws = open_ws(repo)
    assert any("uncommitted changes" in n and "not in the worktree" in n for n in ws.notes)
    assert (ws.path / "README.md").read_text() == "readme\n"
    assert not (ws.path / "untracked.txt").exists()
    assert (repo / "untracked.txt").read_text() == "u\n" and (repo / "README.md").read_text() == "uncommitted\n"
    assert open_ws(repo, "clean-check").notes  # still dirty for a second session


def test_reject_keeps_the_candidate_on_the_branch(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// wrong\n")
    sha = ws.checkpoint("c1", "incorrect")
    ws.reject("c1", "reads past the end of the row")
    assert ws.candidates["c1"].status == "rejected"
    assert ws.candidates["c1"].reason == "reads past the end of the row"
    assert ws.note("c1") == "rejected: reads past the end of the row"
    assert git(repo, "merge-base", "--is-ancestor", sha, "kernelpilot/s1") == ""
    assert open_ws(repo).candidates["c1"].status == "rejected"


def test_restore_brings_back_a_candidate_exactly(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// v1\n")
    ws.write_file("kernels/helper.cuh", "// helper v1\n")
    ws.checkpoint("c1", "ok", OK)
    ws.write_file("kernels/softmax.cu", "// v2\n")
    (ws.path / "kernels" / "helper.cuh").unlink()
    ws.write_file("kernels/extra.cu", "// new in v2\n")
    ws.checkpoint("c2", "incorrect")
    ws.write_file("kernels/scratch.cu", "// never checkpointed\n")
    ws.restore("c1")
    assert (ws.path / "kernels" / "softmax.cu").read_text() == "// v1\n"
    assert (ws.path / "kernels" / "helper.cuh").read_text() == "// helper v1\n"
    assert not (ws.path / "kernels" / "extra.cu").exists()
    assert not (ws.path / "kernels" / "scratch.cu").exists()
    assert (ws.path / "problem.py").exists()  # non-candidate files are untouched
    assert git(ws.path, "rev-parse", "HEAD") == ws.resolve("c2")  # the branch does not move
    sha = ws.checkpoint("c3", "ok (restored c1)")
    assert git(ws.path, "rev-parse", f"{sha}^{{tree}}") == git(ws.path, "rev-parse", f"{ws.resolve('c1')}^{{tree}}")


def test_cleanup_keeps_the_branch_and_resume_recreates_the_worktree(repo: Path) -> None:
    ws = open_ws(repo)
    ws.write_file("kernels/softmax.cu", "// v1\n")
    sha = ws.checkpoint("c1", "ok", OK)
    ws.cleanup()
    assert not ws.path.exists()
    assert git(repo, "rev-parse", "kernelpilot/s1") == sha
    assert str(ws.path) not in git(repo, "worktree", "list")
    resumed = open_ws(repo)
    assert resumed.resolve("c1") == sha
    assert (resumed.path / "kernels" / "softmax.cu").read_text() == "// v1\n"
    resumed.cleanup(keep_branch=False)
    assert git(repo, "branch", "--list", "kernelpilot/s1") == ""


def test_project_in_a_subdirectory(repo: Path) -> None:
    sub = repo / "ops"
    (sub / "kernels").mkdir(parents=True)
    (sub / "problem.py").write_text("# ref\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ops")
    ws = Workspace.open(sub, "sub1", candidate_dir="kernels", problem=sub / "problem.py")
    assert ws.path == ws.worktree_root / "ops"
    with pytest.raises(GuardError, match="problem file"):
        ws.guard("problem.py")
    ws.write_file("kernels/k.cu", "// k\n")
    ws.checkpoint("c1", "ok", OK)
    new = approve(ws, "c1")
    assert git(repo, "show", f"{new}:ops/kernels/k.cu") == "// k"
    assert (sub / "kernels" / "k.cu").read_text() == "// k\n"


def test_bad_session_id(repo: Path) -> None:
    with pytest.raises(WorkspaceError, match="not usable as a branch name"):
        Workspace.open(repo, "../../evil")


def test_data_dir_inside_the_repository_is_refused(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(repo / ".kp"))
    with pytest.raises(WorkspaceError, match="would be inside your repository"):
        open_ws(repo)


def test_executable_bit_is_kept(repo: Path) -> None:
    ws = open_ws(repo)
    script = ws.write_file("kernels/gen.py", "print(1)\n")
    os.chmod(script, 0o755)
    sha = ws.checkpoint("c1", "ok", OK)
    assert git(ws.path, "ls-tree", sha, "kernels/gen.py").startswith("100755")


def test_writing_through_an_existing_file_is_a_clear_error(repo: Path) -> None:
    ws = open_ws(repo)
    with pytest.raises(WorkspaceError, match="cannot write kernels/softmax.cu/inner.cu"):
        ws.write_file("kernels/softmax.cu/inner.cu", "x\n")
    assert (ws.path / "kernels" / "softmax.cu").read_text() == "// original kernel\n"
