"""Native frames in a worker's crash report: a small signal handler, compiled once per machine.

Python's faulthandler prints the Python stack of a crash in native code (a candidate's extension, a
library it calls), but not which library and function the fault was in. The worker loads this
handler at start (``install``, before any candidate code): on SIGSEGV, SIGBUS, SIGILL, SIGFPE or
SIGABRT it writes the native frames to stderr (the worker log, hence the verdict's error), each as
library + offset and the nearest exported symbol, then hands the signal on to faulthandler, which
prints the Python stack and lets the process die as before.

The engine side (:func:`library`) compiles the handler with the C compiler into the cache directory,
keyed on its source, and passes the path to the worker (``KERNELPILOT_NATIVE_TRACE``). No compiler,
or a failed compile: no native frames, nothing else changes. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ENV = "KERNELPILOT_NATIVE_TRACE"
MARKER = "kernelpilot-native-trace:"

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct sigaction previous[65];
static const int watched[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

static void put(const char *s) { ssize_t r = write(2, s, strlen(s)); (void)r; }

static void put_hex(unsigned long v) {
    char b[19]; b[0] = '0'; b[1] = 'x';
    for (int i = 0; i < 16; i++) {
        int d = (int)((v >> (60 - 4 * i)) & 15); b[2 + i] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    }
    b[18] = 0; put(b);
}

static void put_int(int v) {
    char b[12]; int n = 0; char t[12];
    if (v < 0) { put("-"); v = -v; }
    do { t[n++] = (char)('0' + v % 10); v /= 10; } while (v && n < 11);
    for (int i = 0; i < n; i++) b[i] = t[n - 1 - i];
    b[n] = 0; put(b);
}

static void handler(int sig, siginfo_t *info, void *context) {
    (void)context;
    void *frames[24];
    int n = backtrace(frames, 24);
    put("KPMARK signal "); put_int(sig); put(" at address "); put_hex((unsigned long)info->si_addr); put("\n");
    for (int i = 0; i < n; i++) {
        Dl_info d;
        put("KPMARK   #"); put_int(i); put(" ");
        if (dladdr(frames[i], &d) && d.dli_fname) {
            put(d.dli_fname); put(" +"); put_hex((unsigned long)((char *)frames[i] - (char *)d.dli_fbase));
            if (d.dli_sname) { put(" ("); put(d.dli_sname); put(")"); }
        } else {
            put_hex((unsigned long)frames[i]);
        }
        put("\n");
    }
    sigaction(sig, &previous[sig], NULL);  /* faulthandler's, which prints the Python stack */
    raise(sig);                              /* delivered once this handler returns */
}

int kp_native_trace_install(void) {
    void *warm[2];
    backtrace(warm, 2);  /* loads the unwinder now: nothing is loaded inside the handler */
    stack_t ss;
    ss.ss_sp = malloc(1 << 16); ss.ss_size = 1 << 16; ss.ss_flags = 0;
    if (ss.ss_sp) sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (unsigned i = 0; i < sizeof watched / sizeof watched[0]; i++)
        if (sigaction(watched[i], &sa, &previous[watched[i]]) != 0) return -1;
    return 0;
}
""".replace("KPMARK", MARKER)


def library(cache: Path) -> Path | None:
    """The compiled handler in ``cache`` (built on first use); None without a working C compiler."""
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    target = cache / f"native-trace-{digest}.so"
    if target.is_file():
        return target
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None
    try:
        cache.mkdir(parents=True, exist_ok=True)
        source = cache / f"native-trace-{digest}.{os.getpid()}.c"
        source.write_text(SOURCE)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        done = subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(tmp), str(source), "-ldl"],
                              capture_output=True, timeout=60)
        source.unlink(missing_ok=True)
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            return None
        tmp.replace(target)  # atomic: a worker never loads a half-written file
    except (OSError, subprocess.SubprocessError):
        return None
    return target


def install(path: str | None = None) -> bool:
    """In the worker, after faulthandler.enable(): load the handler named by $KERNELPILOT_NATIVE_TRACE."""
    path = path or os.environ.get(ENV)
    if not path:
        return False
    try:
        import ctypes

        lib = ctypes.CDLL(path)
        return int(lib.kp_native_trace_install()) == 0
    except (OSError, AttributeError):
        return False
