"""Relaunching offers to resume the last unfinished session of the project (modal yes/no)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from agent_support import make_project
from kernelpilot.agent.events import Done, SessionStarted
from kernelpilot.agent.transcript import Transcript
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.launch import find_resume
from kernelpilot.tui.review import ConfirmModal
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from tui_support import GPU, wait_for


def write_transcript(session_id: str, root: Path, problem: Path, done: str | None) -> None:
    """A session as a run leaves it: its worktree and branch (a real Workspace), and its transcript."""
    from kernelpilot.workspace import Workspace

    Workspace.open(root, session_id, problem=problem)
    t = Transcript.for_session(session_id)
    t.write_header(session_id=session_id, problem=str(problem), model="m", project_root=str(root))
    t.write_event(SessionStarted(session_id=session_id, problem=problem.stem, model="m"))
    if done:
        t.write_event(Done(reason=done))
    t.close()


def test_find_resume_offers_only_unfinished_sessions_of_this_project(tmp_path: Path) -> None:
    problem = make_project(tmp_path / "proj")
    root = problem.parent
    assert find_resume(root, problem) is None
    write_transcript("old-one", root, problem, done="cancelled")
    offer = find_resume(root, problem)
    assert offer is not None and offer[0] == "old-one" and "cancelled" in offer[1]
    assert find_resume(tmp_path / "elsewhere", problem) is None
    write_transcript("approved-one", root, problem, done="proposal_approved")
    assert find_resume(root, problem) is None  # the latest session finished: nothing to resume


def test_a_removed_session_is_not_offered(tmp_path: Path) -> None:
    """`kernelpilot sessions rm` keeps the transcript; the session is gone, so it is not offered again."""
    from kernelpilot.sessions import list_sessions, open_repository, remove_session

    problem = make_project(tmp_path / "proj")
    root = problem.parent
    write_transcript("old-one", root, problem, done="cancelled")
    assert find_resume(root, problem) is not None
    repo = open_repository(root)
    remove_session(repo, next(s for s in list_sessions(repo) if s.session_id == "old-one"))
    assert Transcript.for_session("old-one").exists and find_resume(root, problem) is None


async def _launch(tmp_path: Path, answer: str) -> list[str | None]:
    problem = make_project(tmp_path / "proj")
    write_transcript("old-one", problem.parent, problem, done=None)
    asked: list[str | None] = []

    def factory(resume_id: str | None) -> Startup:
        asked.append(resume_id)
        return Startup(session=EventStreamSession(), model="m")

    app = KernelpilotApp(factory, resume_finder=partial(find_resume, problem.parent, problem), gpu_source=GPU)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="resume question")
        assert "old-one" in app.screen.question and "interrupted" in app.screen.question
        await pilot.press(answer)
        await wait_for(pilot, lambda: app.startup is not None, what="session built")
    return asked


async def test_yes_resumes_the_last_session(tmp_path: Path) -> None:
    assert await _launch(tmp_path, "y") == ["old-one"]


async def test_no_starts_a_new_session(tmp_path: Path) -> None:
    assert await _launch(tmp_path, "n") == [None]
