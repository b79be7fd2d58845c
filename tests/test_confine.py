"""Confinement of the evaluation worker, with real processes: env, files, network, daemons."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelpilot.evaluation.sandbox import confine
from kernelpilot.evaluation.static import policy
from kernelpilot.evaluation.sandbox.confine import (ResourceLimits, WorkerSandbox, detect, kill_process_group,
                                                    scrubbed_env)

CAPS = detect()
needs_landlock = pytest.mark.skipif(CAPS.landlock_abi == 0, reason=f"kernel lacks Landlock: {CAPS.landlock_reason}")
needs_netns = pytest.mark.skipif(not CAPS.netns, reason=f"user+network namespaces unavailable: {CAPS.netns_reason}")
needs_pidns = pytest.mark.skipif(not CAPS.pidns, reason="unshare --pid --mount-proc unavailable")

SECRETS = {
    "OPENAI_API_KEY": "sk-test-0123456789abcdefghijklmnop",
    "ANTHROPIC_API_KEY": "sk-ant-test-0123456789abcdefghij",
    "GITHUB_TOKEN": "ghp_0123456789abcdefghijklmnopqrstuvwx",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-0123456789abcdef",
}


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    wt = tmp_path / "worktree"
    wt.mkdir()
    return wt


@pytest.fixture
def sandbox(worktree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    sb = WorkerSandbox([worktree], readable=[], limits=ResourceLimits(cpu_s=600))
    yield sb
    sb.cleanup()


# The worker starts CUDA, then confines itself: CUDA cannot initialise under Landlock or the seccomp
# socket filter (error 304 on our H200, 2026-11-30), so GPU payloads follow the same order.
CUDA_FIRST = "import torch\ntorch.cuda.init()\ntorch.ones(1, device='cuda')\n"


def run_confined(sb: WorkerSandbox, payload: str, cwd: Path, timeout: float = 180,
                 cuda_first: bool = False) -> subprocess.CompletedProcess[str]:
    code = ((CUDA_FIRST if cuda_first else "") + "from kernelpilot.evaluation.sandbox.confine import apply_from_env\n"
            "apply_from_env()\n" + textwrap.dedent(payload))
    return subprocess.run(sb.command_prefix() + [sys.executable, "-c", code], env=sb.env(), preexec_fn=sb.preexec(),
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_scrubbed_env_keeps_toolchain_and_drops_secrets() -> None:
    base = {"PATH": "/usr/bin", "CUDA_HOME": "/usr/local/cuda", "TORCH_CUDA_ARCH_LIST": "9.0", "LC_ALL": "C",
            "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1", "KERNELPILOT_API_KEY": "abcdefghijkl", "MY_TOKEN_FILE": "/x",
            "EDITOR": "vim", "AWS_REGION": "us-east-1", **SECRETS}
    env = scrubbed_env(base, home="/tmp/h", tmp="/tmp/t")
    assert env["PATH"] == "/usr/bin" and env["CUDA_HOME"] == "/usr/local/cuda" and env["LC_ALL"] == "C"
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0" and env["HOME"] == "/tmp/h" and env["TMPDIR"] == "/tmp/t"
    for name in ("SSH_AUTH_SOCK", "KERNELPILOT_API_KEY", "MY_TOKEN_FILE", "EDITOR", "AWS_REGION", *SECRETS):
        assert name not in env
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        scrubbed_env(base, extra={"OPENAI_API_KEY": "x"})


def test_description_names_every_layer(sandbox: WorkerSandbox) -> None:
    desc = sandbox.description()
    assert desc[0] == "env-scrubbed"
    assert any(d.startswith(("landlock-abi", "landlock: unavailable")) for d in desc)
    assert any(d.startswith("netns") for d in desc) and any(d.startswith("rlimits:") for d in desc)


def test_worker_sees_no_secret_anywhere(sandbox: WorkerSandbox, worktree: Path) -> None:
    r = run_confined(sandbox, """
        import os
        print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""))
        print("HOME=" + os.environ["HOME"])
        print("OWN", "\\n".join(f"{k}={v}" for k, v in os.environ.items()))
        blob = ""
        for pid in os.listdir("/proc"):  # every process the worker can see, the parent included
            try:
                blob += open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
            except OSError:
                pass
        print("PROC", blob)
    """, worktree)
    assert r.returncode == 0, r.stderr
    own, _, procs = r.stdout.partition("PROC ")
    assert "CUDA_VISIBLE_DEVICES=0" in own
    assert "HOME=" + str(sandbox.home) in own
    for value in SECRETS.values():
        assert value not in own
    if not CAPS.pidns:
        pytest.skip("other processes' /proc/<pid>/environ stay visible without a PID namespace")
    for value in SECRETS.values():
        assert value not in procs


@needs_landlock
def test_home_outside_sandbox_is_unreadable(sandbox: WorkerSandbox, worktree: Path, tmp_path: Path) -> None:
    fake_home = tmp_path / "home" / ".ssh"
    fake_home.mkdir(parents=True)
    (fake_home / "id_ed25519").write_text("PRIVATE")
    assert (fake_home / "id_ed25519").read_text() == "PRIVATE"  # readable outside the sandbox
    r = run_confined(sandbox, f"""
        try:
            print(open({str(fake_home / "id_ed25519")!r}).read())
        except PermissionError:
            print("refused")
    """, worktree)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "refused"


@needs_landlock
def test_writes_only_inside_worktree_and_private_tmp(sandbox: WorkerSandbox, worktree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    r = run_confined(sandbox, f"""
        import tempfile
        open({str(worktree / "kernel.cu")!r}, "w").write("ok")
        with tempfile.NamedTemporaryFile() as f:  # TMPDIR is private and writable
            f.write(b"x")
        try:
            open({str(outside)!r}, "w").write("escaped")
            print("wrote outside")
        except PermissionError:
            print("refused")
    """, worktree)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "refused"
    assert (worktree / "kernel.cu").read_text() == "ok"
    assert not outside.exists()


def test_tcp_to_localhost_fails(sandbox: WorkerSandbox, worktree: Path) -> None:
    if not (CAPS.netns or CAPS.seccomp or CAPS.landlock_abi >= 4):
        pytest.skip("no network confinement available on this kernel")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # reachable from outside
        r = run_confined(sandbox, f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=5)
                print("connected")
            except OSError as err:
                print("blocked", type(err).__name__)
        """, worktree)
    finally:
        server.close()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("blocked"), r.stdout


_DAEMON = """
    import os, subprocess, time
    if os.fork() == 0:  # double fork + setsid: escapes the process group
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "{tag}"])
        os._exit(0)
    time.sleep(0.5)
    print("spawned", flush=True)
    {tail}
"""


def _alive_with_tag(tag: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if tag.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                out.append(int(pid))
        except (OSError, ValueError):
            continue
    return out


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
@pytest.mark.parametrize("ending", ["killed", "exits"])
def test_background_process_does_not_survive(worktree: Path, namespaces: bool, ending: str) -> None:
    if namespaces and not CAPS.pidns:
        pytest.skip("unshare --pid unavailable")
    tag = f"{time.time() % 1000:.6f}"
    sb = WorkerSandbox([worktree], namespaces=namespaces)
    try:
        tail = "time.sleep(600)" if ending == "killed" else "pass"
        code = ("from kernelpilot.evaluation.sandbox.confine import apply_from_env\napply_from_env()\n"
                + textwrap.dedent(_DAEMON.format(tag=tag, tail=tail)))
        proc = subprocess.Popen(sb.command_prefix() + [sys.executable, "-c", code], env=sb.env(),
                                preexec_fn=sb.preexec(), cwd=worktree, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "spawned"
        if ending == "exits":
            proc.wait(timeout=60)
        if not namespaces or ending == "killed":
            assert _alive_with_tag(tag), "the daemon should be running before clean-up"
        kill_process_group(proc, grace_s=1.0, marker=sb.id)
        deadline = time.monotonic() + 5
        while _alive_with_tag(tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with_tag(tag) == []
    finally:
        for pid in _alive_with_tag(tag):
            os.kill(pid, 9)
        sb.cleanup()


def test_candidate_using_dunder_import_is_refused(tmp_path: Path) -> None:
    cand = tmp_path / "model_new.py"
    cand.write_text("import torch\n\nos = __import__('os')\nos.system('curl http://x')\n")
    findings = policy.check_candidate(cand)
    assert [(f.rule, f.line) for f in policy.blocking(findings)] == [("dunder-import", 3)]


@needs_landlock
def test_honest_payload_runs_torch_under_confinement(sandbox: WorkerSandbox, worktree: Path) -> None:
    r = run_confined(sandbox, """
        import torch
        import torch.nn.functional as F
        x = torch.randn(64, 64)
        y = F.relu(x @ x.T)
        print("ok", bool((y >= 0).all()), torch.__version__)
    """, worktree)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok True"), r.stdout


@needs_landlock
def test_wrap_confines_any_command(sandbox: WorkerSandbox, worktree: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    ok = subprocess.run(sandbox.wrap(["cat", str(secret)]), env=sandbox.env(), preexec_fn=sandbox.preexec(),
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode != 0 and "s3cret" not in ok.stdout
    assert "Permission denied" in ok.stderr
    echo = subprocess.run(sandbox.wrap(["sh", "-c", f"echo hi > {worktree}/f && cat {worktree}/f"]),
                          env=sandbox.env(), preexec_fn=sandbox.preexec(), capture_output=True, text=True, timeout=60)
    assert echo.returncode == 0 and echo.stdout.strip() == "hi", echo.stderr


@pytest.mark.slow
@needs_landlock
def test_extension_builds_and_loads_under_confinement(sandbox: WorkerSandbox, worktree: Path) -> None:
    cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    if not Path(cuda_home, "bin", "nvcc").exists():
        pytest.skip("nvcc not found")
    sandbox.extra_env.update({"CUDA_HOME": cuda_home, "MAX_JOBS": "2", "TORCH_CUDA_ARCH_LIST": "9.0"})
    r = run_confined(sandbox, """
        import torch
        from torch.utils.cpp_extension import load_inline
        # nvcc and the host compiler without torch's headers (20-50 s of parsing a compile on 2 cores): the
        # toolchain, its temporary files and the link under confinement are what is tested
        cuda = r'''
        __global__ void add_one(float* x, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.f; }
        void launch_add_one(float* x, int n) { add_one<<<(n + 255) / 256, 256>>>(x, n); }
        '''
        binding = r'''
        #include <Python.h>
        void launch_add_one(float* x, int n);
        static long long ask(PyObject* t, const char* method) {
            PyObject* r = PyObject_CallMethod(t, method, nullptr);
            long long v = r ? PyLong_AsLongLong(r) : 0;
            Py_XDECREF(r);
            return v; }
        static PyObject* launch(PyObject*, PyObject* x) {
            launch_add_one((float*)ask(x, "data_ptr"), (int)ask(x, "numel"));
            Py_RETURN_NONE; }
        static PyMethodDef methods[] = {{"launch", launch, METH_O, nullptr}, {nullptr, nullptr, 0, nullptr}};
        static PyModuleDef module = {PyModuleDef_HEAD_INIT, "kp_confined_ext", nullptr, -1, methods};
        PyMODINIT_FUNC PyInit_kp_confined_ext(void) { return PyModule_Create(&module); }
        '''
        ext = load_inline("kp_confined_ext", cpp_sources=binding, cuda_sources=cuda, no_implicit_headers=True,
                          verbose=False)
        print("loaded", callable(ext.launch))
        if torch.cuda.is_available():
            x = torch.zeros(1000, device="cuda"); ext.launch(x); torch.cuda.synchronize()
            print("ran", float(x.sum()))
    """, worktree, timeout=560)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "loaded" in r.stdout
    if "ran" in r.stdout or os.path.exists("/dev/nvidiactl"):
        assert "ran 1000.0" in r.stdout, r.stdout


@pytest.mark.gpu
@needs_landlock
def test_gpu_works_under_confinement_and_costs_little(sandbox: WorkerSandbox, worktree: Path) -> None:
    """/dev/nvidia* stay usable inside the namespaces + Landlock; worker start costs < 5% more."""
    payload = """
        import torch
        x = torch.randn(4096, 4096, device="cuda")
        y = (x @ x).sum().item()
        torch.cuda.synchronize()
        print("gpu", torch.cuda.get_device_name())
    """
    code = CUDA_FIRST + textwrap.dedent(payload)
    plain_env = {**os.environ, "PYTHONPATH": str(Path(confine.__file__).parents[2])}
    confined, plain = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        r = run_confined(sandbox, payload, worktree, cuda_first=True)
        confined.append(time.perf_counter() - t0)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("gpu"), r.stdout
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=plain_env)
        plain.append(time.perf_counter() - t0)
        assert p.returncode == 0, p.stderr
    print(f"worker start + first CUDA op: confined {min(confined):.2f}s, plain {min(plain):.2f}s")
    assert min(confined) <= 1.05 * min(plain) + 0.25


@pytest.mark.gpu
@needs_landlock
def test_torch_compile_on_gpu_works_under_confinement(sandbox: WorkerSandbox, worktree: Path) -> None:
    """Inductor + Triton (ldconfig, gcc launcher, ptxas, caches) inside the sandbox: the compile baseline."""
    r = run_confined(sandbox, """
        import torch
        f = torch.compile(lambda x: torch.relu(x) * 2 + 1)
        x = torch.randn(1 << 20, device="cuda")
        print("compiled", bool(torch.allclose(f(x), torch.relu(x) * 2 + 1)))
    """, worktree, timeout=560, cuda_first=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.strip() == "compiled True", r.stdout

@needs_landlock
def test_threads_started_before_confinement_are_reported_and_socket_filter_reaches_them(
        sandbox: WorkerSandbox, worktree: Path) -> None:
    code = textwrap.dedent("""
        import socket, threading
        from kernelpilot.evaluation.sandbox.confine import apply_from_env
        go, done, result = threading.Event(), threading.Event(), []
        def early():
            go.wait()
            try:
                socket.socket(socket.AF_INET)
                result.append("socket created")
            except OSError:
                result.append("socket refused")
            done.set()
        t = threading.Thread(target=early)
        t.start()
        applied = apply_from_env()
        go.set(); done.wait()
        print(result[0])
        print("\\n".join(applied))
    """)
    r = subprocess.run(sandbox.command_prefix() + [sys.executable, "-c", code], env=sandbox.env(),
                       preexec_fn=sandbox.preexec(), cwd=worktree, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    if CAPS.seccomp:
        assert lines[0] == "socket refused"
    assert any(line.startswith("warning: 1 thread(s) started before confinement") for line in lines)
