"""The recording fork server (kernelpilot.inductor.forkserver, forkclient) with real processes on the CPU:
children forked from a preloaded server, a timeout killing the child's process group, a crash reported
with its signal, results written as they finish, CUDA never initialised in the server, the subprocess
fallback, and torch imported once (a child runs well under a second after its request)."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from kernelpilot.inductor import forkclient, recorder
from kernelpilot.inductor.batch import Item, discover
from kernelpilot.inductor.forkclient import ForkServer, ForkServerError, run_forked

LIGHT = ("kernelpilot.inductor.generate",)
PROBLEM = ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
           "def get_inputs():\n    return [torch.randn(4)]\n\n\ndef get_init_inputs():\n    return []\n")

FAKE = textwrap.dedent('''
    import json, os, sys, time
    started = time.time()
    had_torch = "torch" in sys.modules
    from kernelpilot.inductor.generate import MARKER
    problem = sys.argv[1]
    name = os.path.basename(problem)[:-3]
    if name == "crash":
        os.abort()
    if name == "hang":
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(problem + ".grandchild", "w") as f:
            f.write(str(child.pid))
        time.sleep(120)
    if name == "slow":
        time.sleep(2.5)
    if name == "refuse":
        raise SystemExit(3)
    print("noise on stdout")
    print("noise on stderr", file=sys.stderr)
    facts = {"started": started, "had_torch": had_torch, "pid": os.getpid(), "pgid": os.getpgid(0),
             "sid": os.getsid(0), "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(),
             "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")), "env": os.environ.get("FAKE_SETTING")}
    if had_torch:
        import random
        import torch
        facts.update(cuda=torch.cuda.is_initialized(), seed=torch.initial_seed(), rand=torch.rand(1).item(),
                     py_random=random.random())
    print(MARKER + json.dumps({"graphs": [], "torch": "fake", "facts": facts}))
''')


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1", **extra}


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    path = tmp_path / "fake_generate.py"
    path.write_text(FAKE)
    return path


@pytest.fixture()
def light() -> Iterator[ForkServer]:
    server = ForkServer.start(env(), LIGHT, timeout=60)
    yield server
    server.close()


@pytest.fixture(scope="module")
def preloaded() -> Iterator[ForkServer]:
    """A server that imported torch, Inductor and Triton (forkserver.PRELOAD)."""
    server = ForkServer.start(env(), timeout=120)
    yield server
    server.close()


def facts(stdout: str) -> dict[str, Any]:
    from kernelpilot.inductor.generate import parse_output

    data = parse_output(stdout)
    assert data is not None, stdout
    return dict(data["facts"])


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_timed_out_child_is_killed_with_its_process_group(light: ForkServer, script: Path, tmp_path: Path) -> None:
    problem = tmp_path / "hang.py"
    t0 = time.monotonic()
    stdout, stderr, rc, timed_out = run_forked(light, [str(script), str(problem), "default"], env(), timeout=2.0)
    assert timed_out and rc == -9 and time.monotonic() - t0 < 10
    grandchild = int((tmp_path / "hang.py.grandchild").read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)  # the grandchild shared the child's session and group: killed with it


def test_a_crash_is_reported_with_its_signal_and_a_child_is_a_fresh_session(light: ForkServer, script: Path,
                                                                            tmp_path: Path) -> None:
    _, _, rc, timed_out = run_forked(light, [str(script), str(tmp_path / "crash.py"), "default"], env(), timeout=20)
    assert rc == -signal.SIGABRT and not timed_out
    _, _, rc, _ = run_forked(light, [str(script), str(tmp_path / "refuse.py"), "default"], env(), timeout=20)
    assert rc == 3
    stdout, stderr, rc, _ = run_forked(light, [str(script), str(tmp_path / "ok.py"), "max-autotune"],
                                       env(FAKE_SETTING="per child"), timeout=20)
    seen = facts(stdout)
    assert rc == 0 and "noise on stderr" in stderr and "noise on stdout" in stdout
    assert seen["pid"] == seen["pgid"] == seen["sid"] != light.proc.pid  # os.setsid: killpg(pid) reaches it all
    assert seen["argv"] == [str(script), str(tmp_path / "ok.py"), "max-autotune"]
    assert seen["path0"] == str(script.parent) and seen["cwd"] == os.getcwd() and seen["env"] == "per child"
    assert seen["fds"] == [0, 1, 2, 3]  # the server's socket, selector and pidfds are closed (3: listdir's own)
    with pytest.raises(ForkServerError, match="TORCHINDUCTOR_COMPILE_THREADS"):  # read at import: refused
        light.spawn([str(script), "x.py"], env(TORCHINDUCTOR_COMPILE_THREADS="4"), tmp_path / "o", tmp_path / "e")


def test_generate_runs_as_main_in_a_child(light: ForkServer, tmp_path: Path) -> None:
    # the real recording module, as ``python -m kernelpilot.inductor.generate`` (no GPU: it reports so)
    problem = tmp_path / "p.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    stdout, stderr, rc, _ = run_forked(light, ["-m", "kernelpilot.inductor.generate", str(problem), "default"],
                                       env(), timeout=60)
    from kernelpilot.inductor.generate import parse_output

    data = parse_output(stdout)
    assert rc == 0 and data is not None, stderr
    assert "CUDA" in data["error"] or "cuda" in data["error"]


def test_torch_is_imported_once_children_start_fast_and_cuda_stays_uninitialised(preloaded: ForkServer,
                                                                                 script: Path, tmp_path: Path) -> None:
    seen = []
    for i in range(4):
        asked = time.time()
        stdout, stderr, rc, _ = run_forked(preloaded, [str(script), str(tmp_path / f"p{i}.py"), "default"], env(),
                                           timeout=30)
        assert rc == 0, stderr
        seen.append(facts(stdout))
        assert seen[-1]["started"] - asked < 1.0  # a fresh interpreter importing torch takes seconds
    assert all(s["had_torch"] and s["cuda"] is False for s in seen)  # the server's state at each fork
    # reseeded in each child, as a new process (torch 2.14 seeds its generator at random too)
    assert len({s["seed"] for s in seen}) == len({s["rand"] for s in seen}) == len({s["py_random"] for s in seen}) == 4
    assert seen[0]["fds"] == [0, 1, 2, 3]


def test_a_server_with_a_thread_refuses_and_record_all_falls_back(tmp_path: Path, script: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "threaded_module.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    with pytest.raises(ForkServerError, match="Python threads running"):
        ForkServer.start(env(PYTHONPATH=str(tmp_path)), ("threaded_module",), timeout=60)
    with pytest.raises(ForkServerError, match="preloading no_such_module"):
        ForkServer.start(env(), ("no_such_module",), timeout=60)
    items = problems(tmp_path, ["a", "b"])
    command = [sys.executable, str(script)]
    rows = recorder.record_all(items, tmp_path / "rec", jobs=2, timeout=20, command=command, report=lambda r: None,
                               sizes={i.key: 1 for i in items}, preload=("no_such_module",))
    assert {r["launch"] for r in rows} == {"subprocess"} and {r["status"] for r in rows} == {"eager"}
    assert json.loads((tmp_path / "rec" / "a.json").read_text())["launch"] == "subprocess"
    monkeypatch.setenv(forkclient.DISABLE, "0")  # chosen: no server at all
    assert forkclient.start_server(env(), command, LIGHT) is None


def problems(root: Path, names: list[str]) -> list[Item]:
    (root / "problems").mkdir()
    for name in names:
        (root / "problems" / f"{name}.py").write_text(PROBLEM)
    return discover([root / "problems"])


def facts_of(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text())["facts"])


def test_record_all_through_the_server_writes_each_result_as_it_finishes(tmp_path: Path, script: Path) -> None:
    items = problems(tmp_path, ["ok", "slow", "crash", "hang"])
    out = tmp_path / "rec"
    order: list[tuple[str, set[str]]] = []

    def report(row: dict[str, Any]) -> None:
        order.append((row["problem"], {p.stem for p in out.glob("*.json") if p.name != "index.json"}))

    t0 = time.monotonic()
    rows = {r["problem"]: r for r in recorder.record_all(items, out, jobs=4, timeout=4, report=report,
                                                          command=[sys.executable, str(script)], preload=LIGHT,
                                                          sizes={i.key: 1 for i in items})}
    assert time.monotonic() - t0 < 20
    assert {r["launch"] for r in rows.values()} == {"fork"}
    assert rows["ok"]["status"] == rows["slow"]["status"] == "eager"
    assert rows["crash"]["status"] == "failed" and f"exit {-signal.SIGABRT}" in rows["crash"]["error"]
    assert rows["hang"]["status"] == "failed" and "timed out after 4 s" in rows["hang"]["error"]
    finished = [name for name, _ in order]
    assert finished.index("ok") < finished.index("slow") < finished.index("hang")
    written_when_ok = dict(order)["ok"]
    assert "ok" in written_when_ok and "slow" not in written_when_ok and "hang" not in written_when_ok
    assert facts_of(out / "ok.json")["had_torch"] is False  # LIGHT preload: torch was never imported
