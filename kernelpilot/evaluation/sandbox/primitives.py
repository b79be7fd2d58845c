"""Kernel confinement primitives used by confine.py: Landlock, a seccomp socket filter, prctl.

Landlock is driven through its three system calls (via ctypes) rather than the ``landlock`` PyPI
binding because the binding handles only filesystem rules; the worker also needs Landlock's TCP rules
(ABI 4) and its signal / abstract-socket scoping (ABI 6). Everything here is Linux-only and
degrades to "unavailable" elsewhere. Nothing in this module imports heavy libraries.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
from collections.abc import Iterable
from pathlib import Path

# ---- syscall numbers (identical on x86_64 and aarch64 for Landlock) ---------------------------
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

# ---- Landlock access rights, by ABI ----------------------------------------------------------
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV


def fs_rights(abi: int) -> int:
    """Every filesystem right the running kernel knows (all of them are denied unless allowed)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


READ_RIGHTS = FS_READ_FILE | FS_READ_DIR | FS_EXECUTE
WRITE_RIGHTS = (READ_RIGHTS | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG
                | FS_MAKE_SYM | FS_MAKE_FIFO | FS_MAKE_SOCK | FS_REFER | FS_TRUNCATE)
DEVICE_RIGHTS = FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV | FS_TRUNCATE


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if platform.system() != "Linux":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def prctl(option: int, arg2: int = 0) -> None:
    libc = _libc()
    if libc is None:
        raise OSError(errno.ENOSYS, "prctl is Linux-only")
    ctypes.set_errno(0)
    _check(libc.prctl(option, arg2, 0, 0, 0), f"prctl({option})")


def landlock_abi() -> tuple[int, str]:
    """(ABI version, reason when 0)."""
    libc = _libc()
    if libc is None:
        return 0, f"not Linux ({platform.system()})"
    ctypes.set_errno(0)
    abi = libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if abi < 0:
        err = ctypes.get_errno()
        reason = {errno.ENOSYS: "kernel built without Landlock",
                  errno.EOPNOTSUPP: "Landlock disabled at boot (add landlock to lsm=)"}.get(err, os.strerror(err))
        return 0, reason
    return int(abi), ""


def landlock_restrict(abi: int, read: Iterable[Path], write: Iterable[Path], devices: Iterable[Path], *,
                      deny_tcp: bool = True) -> dict[str, int]:
    """Restrict this process (and its future children) to the given paths; irreversible.

    ``read``: read + execute (toolchain, Python, sources); ``write``: full access below the
    directory; ``devices``: read/write/ioctl on device files. Returns counts for the description.
    """
    libc = _libc()
    if libc is None or abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is unavailable")
    handled_fs = fs_rights(abi)
    attr = _RulesetAttr(handled_fs, (NET_BIND_TCP | NET_CONNECT_TCP) if (abi >= 4 and deny_tcp) else 0,
                        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(ctypes.c_uint64) * (3 if abi >= 6 else 2 if abi >= 4 else 1)
    ctypes.set_errno(0)
    fd = _check(libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                             ctypes.c_size_t(size), ctypes.c_uint32(0)), "landlock_create_ruleset")
    counts = {"read": 0, "write": 0, "devices": 0}
    try:
        for kind, paths, rights in (("read", read, READ_RIGHTS), ("write", write, WRITE_RIGHTS),
                                    ("devices", devices, DEVICE_RIGHTS)):
            for path in paths:
                if _add_path_rule(libc, fd, Path(path), rights & handled_fs):
                    counts[kind] += 1
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        ctypes.set_errno(0)
        _check(libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(fd)
    return counts


def _add_path_rule(libc: ctypes.CDLL, ruleset_fd: int, path: Path, rights: int) -> bool:
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False  # missing paths are simply not allowed
    try:
        if not os.path.isdir(f"/proc/self/fd/{pfd}"):
            rights &= _FILE_ONLY  # directory rights on a file are invalid
        rule = _PathBeneathAttr(rights, pfd)
        ctypes.set_errno(0)
        _check(libc.syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset_fd),
                            ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)),
               f"landlock_add_rule({path})")
    finally:
        os.close(pfd)
    return True


# ---- seccomp: refuse new IP and UNIX sockets ---------------------------------------------------
# Landlock (ABI <= 7) does not cover connecting to a *named* UNIX socket (docker.sock, an SSH or GPG
# agent), and a network namespace does not either: those are reached through the filesystem. A
# seccomp filter refusing socket(AF_UNIX / AF_INET / AF_INET6 / AF_PACKET) closes that door.
# socketpair() (used by Python's multiprocessing and pipes between threads) stays allowed.

_AUDIT_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # (arch, __NR_socket)
_NR_SECCOMP = {"x86_64": 317, "aarch64": 277}
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_REFUSED_FAMILIES = (1, 2, 10, 17)  # AF_UNIX, AF_INET, AF_INET6, AF_PACKET


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_supported() -> bool:
    return _libc() is not None and platform.machine() in _AUDIT_ARCH


def seccomp_refuse_sockets() -> None:
    """Install a filter making socket() fail with EACCES for UNIX, IP and packet families."""
    libc = _libc()
    arch = _AUDIT_ARCH.get(platform.machine())
    if libc is None or arch is None:
        raise OSError(errno.ENOSYS, "seccomp filter unsupported on this machine")
    audit_arch, nr_socket = arch
    n = len(_REFUSED_FAMILIES)
    deny = _SECCOMP_RET_ERRNO | errno.EACCES
    # Layout: 0 ld arch; 1 jeq arch; 2 ret allow; 3 ld nr; 4 jge x32 -> deny; 5 jeq socket else allow;
    # 6 ld args[0]; 7..7+n-1 jeq family -> deny; 7+n ret allow; 8+n ret deny. Jump = target - idx - 1.
    prog: list[tuple[int, int, int, int]] = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, audit_arch),
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),  # another ABI (not expected): leave alone
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_BPF_JGE_K, n + 3, 0, 0x40000000),  # x32 system calls: deny
        (_BPF_JEQ_K, 0, n + 1, nr_socket),
        (_BPF_LD_W_ABS, 0, 0, 16),  # args[0], low 32 bits (little endian)
    ]
    prog += [(_BPF_JEQ_K, n - i, 0, family) for i, family in enumerate(_REFUSED_FAMILIES)]
    prog += [(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW), (_BPF_RET_K, 0, 0, deny)]
    filters = (_SockFilter * len(prog))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in prog])
    fprog = _SockFprog(len(prog), filters)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    # TSYNC: the filter (and no_new_privs) reaches every thread of the process, not only this one.
    ctypes.set_errno(0)
    _check(libc.syscall(ctypes.c_long(_NR_SECCOMP[platform.machine()]), ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
                        ctypes.c_uint(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog)), "seccomp")


def thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) for every process visible in /proc."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        table[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return table


def environ_has(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False

