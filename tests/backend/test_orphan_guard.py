"""The orphan guard's view of the backend's processes (quickcode/backend/orphan_guard.py), on real processes:
a backend that dies while the guard scans leaves the guard the view it took while the backend lived, and the
guard kills those processes (a kill -9 test once saw the engine outlive its backend: the scan after the death
saw no children — they had been reparented — and replaced the view with nothing)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

from quickcode.backend import orphan_guard
from tests.support.waits import until

CHILDREN = ("import subprocess, sys, time; "
            "[subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']) for _ in range(2)]; "
            "time.sleep(120)")


def _backend_with_two_children() -> tuple[subprocess.Popen, list[psutil.Process]]:
    backend = subprocess.Popen([sys.executable, "-c", CHILDREN], start_new_session=True)
    until(lambda: len(psutil.Process(backend.pid).children()) == 2, "the two children to start")
    return backend, psutil.Process(backend.pid).children()


def test_a_backend_that_dies_during_the_scan_keeps_the_last_view_and_its_processes_are_killed():
    backend, kids = _backend_with_two_children()
    try:
        seen = orphan_guard.scan(backend.pid, os.getpid(), lambda: True)
        assert set(seen) == {k.pid for k in kids}
        calls = []

        def still_ours() -> bool:     # the backend dies between the first check and the scan
            calls.append(1)
            if len(calls) == 1:
                os.kill(backend.pid, signal.SIGKILL)
                until(lambda: all(k.ppid() != backend.pid for k in kids), "the children to be reparented")
                return True
            return False              # the guard has been reparented too

        assert orphan_guard.scan(backend.pid, os.getpid(), still_ours) is None     # gone, not "no children"
        orphan_guard.kill(seen)
        until(lambda: not any(_alive(k) for k in kids), "the backend's children to be killed")
    finally:
        for p in [backend.pid] + [k.pid for k in kids]:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        backend.wait()


def test_a_recycled_pid_is_never_killed():
    backend, kids = _backend_with_two_children()
    try:
        seen = {k.pid: k.create_time() + 1.0 for k in kids}        # same pids, other processes
        orphan_guard.kill(seen)
        assert all(_alive(k) for k in kids)
    finally:
        os.killpg(backend.pid, signal.SIGKILL)
        backend.wait()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
