"""Orphan guard: when the backend process dies without cleaning up (kill -9, the OOM killer), kill the vLLM
engine processes it leaves behind.

vLLM's EngineCore does not watch its parent: after a kill -9 of the backend it lives on, holding its memory
(on a GPU machine: the GPU) until someone kills it, and a restarted backend then fails to get the memory.
Under Kubernetes or systemd the whole container / cgroup dies with the main process; run bare (a shell,
supervisord, a test), nothing does that. So `quickcode serve` forks this small guard first: it polls the
backend's descendants twice a second and, when the backend is gone (its end of a pipe closes, or the guard
is reparented), kills the descendants it last saw — checked by creation time, so a recycled pid is never hit.
"""
from __future__ import annotations

import os
import select
import signal

POLL_S = 0.5


def start(poll_s: float = POLL_S) -> int:
    """Fork the guard (call before any thread starts: the child only uses os/select/psutil). Returns its
    pid."""
    parent = os.getpid()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(read_end)
        os.set_inheritable(write_end, False)   # only this process holds it: EOF means the backend is gone
        return pid
    try:
        os.close(write_end)
        _guard(parent, read_end, poll_s)
    finally:
        os._exit(0)   # never run the parent's atexit handlers or finalizers in the fork


def _guard(parent: int, read_end: int, poll_s: float) -> None:
    import ctypes

    try:  # name it in ps/top (comm, 15 bytes): PR_SET_NAME
        ctypes.CDLL(None).prctl(15, b"qc-orphan-guard", 0, 0, 0)
    except (OSError, AttributeError):
        pass
    # the backend's shutdown (and a Ctrl-C to the process group) must not end the guard before the backend
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me = os.getpid()
    still_ours = lambda: os.getppid() == parent      # noqa: E731 — reparented: the backend is gone
    seen: dict[int, float] = {}        # pid → create_time of the backend's descendants at the last poll
    while True:
        ready, _, _ = select.select([read_end], [], [], poll_s)
        if ready and not os.read(read_end, 1):
            break                       # EOF: the backend process exited, cleanly or not
        now = scan(parent, me, still_ours)
        if now is None:
            break
        if now is not KEEP:
            seen = now
    kill(seen)


KEEP: dict[int, float] = {}            # scan's "no view this time" (a psutil error): keep the last one


def scan(parent: int, me: int, still_ours) -> dict[int, float] | None:
    """The backend's descendants (pid → creation time); None when the backend is gone. Reparenting
    (`still_ours()` false) also says it is gone when a process the backend forked without exec still holds
    the pipe's write end, so no EOF came. Checked before and after the scan: a backend that dies during it has
    already lost its children to the reparenting, and a scan that sees none must not replace the last view
    taken while it lived (a kill -9 test's engine outlived the backend that way)."""
    import psutil

    if not still_ours():
        return None
    try:
        children = psutil.Process(parent).children(recursive=True)
    except psutil.NoSuchProcess:
        return None                     # the backend is gone (before its pipe end closed)
    except psutil.Error:
        return KEEP
    now: dict[int, float] = {}
    for p in children:
        try:
            if p.pid != me:
                now[p.pid] = p.create_time()
        except psutil.Error:
            pass                        # a short-lived child exited meanwhile: only the backend's exit counts
    return now if still_ours() else None


def kill(seen: dict[int, float]) -> None:
    """Kill the processes of `seen` that are still the same processes (a recycled pid is never hit)."""
    import psutil

    for pid, created in seen.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created:
                p.kill()
        except psutil.Error:
            pass                        # already gone: the clean shutdown case
