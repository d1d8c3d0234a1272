"""What a killed `quickcode bench faults` run (quickcode/benchmarks/faults.py) leaves behind, and its removal by
the next run before that one starts: the network namespaces it made (and what runs in them), the tmpfs its
replicas logged to, its replicas, nginx, relays and language servers.

A run holds an exclusive lock for as long as it lives (the kernel drops it with the process, SIGKILL too), so
once the next run holds it, whatever a run's work folder (`<tmp>/qc-faults-*`) names is stale. A run writes
what it makes that carries no path of its folder (namespaces, links, relay processes) to `owned.json` there
before making it; the rest is found by its folder's path (replicas: their tokens file; nginx: its prefix;
language servers: their log file in the environment; the tmpfs: its mount point).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import IO

WORK_PREFIX = "qc-faults-"
LOCK_NAME = "qc-faults.lock"
OWNED = "owned.json"
RELAY_MODULE = "quickcode.benchmarks.regions"


def hold_lock(tmp: Path) -> IO | None:
    """The run lock (kept open for the run's life), or None when another live run holds it."""
    f = open(tmp / LOCK_NAME, "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def note_owned(work: Path, *, netns: list[str] = (), links: list[str] = (), pids: list[int] = ()) -> None:
    """Add to what this run's folder says it made."""
    path = work / OWNED
    owned = json.loads(path.read_text()) if path.exists() else {"netns": [], "links": [], "pids": []}
    owned["netns"] += list(netns)
    owned["links"] += list(links)
    owned["pids"] += list(pids)
    path.write_text(json.dumps(owned))


def work_dirs(tmp: Path) -> list[Path]:
    return sorted(p for p in tmp.glob(f"{WORK_PREFIX}*") if p.is_dir())


def stale_mounts(proc_mounts: str, tmp: Path) -> list[str]:
    """Mount points (from /proc/mounts' text) inside a run's folder under `tmp`."""
    root = f"{tmp.resolve()}/{WORK_PREFIX}"
    points = [line.split()[1].replace("\\040", " ") for line in proc_mounts.splitlines() if len(line.split()) > 1]
    return [p for p in points if p.startswith(root)]


def is_stale_process(cmdline: list[str], environ: dict[str, str], tmp: Path) -> bool:
    """A process a run of a folder under `tmp` started: quickcode (a replica: its tokens file in the folder) or
    nginx (its prefix there) with a path inside one on its command line, or a language server logging there.
    Anything else (someone reading a log there) is not ours."""
    root = f"{tmp.resolve()}/{WORK_PREFIX}"
    line = " ".join(cmdline)
    ours = "quickcode" in line or (bool(cmdline) and "nginx" in cmdline[0])
    return (ours and root in line) or str(environ.get("QUICKCODE_LSP_LOG", "")).startswith(root)


def _kill_tree(pid: int) -> None:
    import psutil

    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.Error:
        return
    for q in procs:
        with contextlib.suppress(psutil.Error):
            q.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=10)


def sweep(tmp: Path, lock: IO) -> dict[str, list]:
    """Remove what the runs of `tmp`'s folders left (call with the run lock held: `lock` is `hold_lock`'s).
    Returns what was removed, by kind."""
    import psutil

    assert lock is not None and not lock.closed
    removed: dict[str, list] = {"processes": [], "netns": [], "links": [], "mounts": []}
    owned = {"netns": [], "links": [], "pids": []}
    for d in work_dirs(tmp):
        with contextlib.suppress(OSError, ValueError):
            for k, v in json.loads((d / OWNED).read_text()).items():
                owned.setdefault(k, []).extend(v)
    mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    victims = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.pid in mine:
            continue
        cmd = p.info["cmdline"] or []
        try:
            env = p.environ() if cmd and "python" in cmd[0] else {}
        except psutil.Error:
            env = {}
        relay = p.pid in owned["pids"] and any(RELAY_MODULE in a for a in cmd)
        if relay or is_stale_process(cmd, env, tmp):
            victims.append((p.pid, " ".join(cmd)[:120]))
    live_ns = set(_netns_names())
    for ns in owned["netns"]:
        if ns in live_ns:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            victims += [(int(pid), f"in netns {ns}") for pid in pids]
    for pid, what in victims:
        _kill_tree(pid)
        removed["processes"].append(f"{pid} {what}")
    for ns in owned["netns"]:
        if ns in live_ns and subprocess.run(["ip", "netns", "del", ns], capture_output=True).returncode == 0:
            removed["netns"].append(ns)
    for link in owned["links"]:
        if subprocess.run(["ip", "link", "del", link], capture_output=True).returncode == 0:
            removed["links"].append(link)
    with open("/proc/mounts") as f:
        mounts = stale_mounts(f.read(), tmp)
    for point in sorted(mounts, key=len, reverse=True):
        if subprocess.run(["umount", "-l", point], capture_output=True).returncode == 0:
            removed["mounts"].append(point)
    for d in work_dirs(tmp):          # said once: the next sweep does not look for these again
        with contextlib.suppress(FileNotFoundError):
            (d / OWNED).unlink()
    return {k: v for k, v in removed.items() if v}


def _netns_names() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]
