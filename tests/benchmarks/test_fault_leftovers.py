"""What a killed `quickcode bench faults` leaves (quickcode/benchmarks/fault_leftovers.py): one run at a time by a
lock, and the next run's sweep removes a dead run's namespace (with what runs in it), veth, tmpfs and processes
— real ones, made here as the bench makes them — and leaves alone a process that only names its folder."""
from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from quickcode.benchmarks import fault_leftovers as fl


def test_the_lock_admits_one_run_at_a_time(tmp_path):
    first = fl.hold_lock(tmp_path)
    assert first is not None and fl.hold_lock(tmp_path) is None
    first.close()                      # the process gone (SIGKILL too) drops it the same way
    again = fl.hold_lock(tmp_path)
    assert again is not None
    again.close()


def test_what_counts_as_a_runs_mount_and_process(tmp_path):
    root = f"{tmp_path.resolve()}/qc-faults-ab12"
    mounts = f"tmpfs {root}/logdisk tmpfs rw 0 0\ntmpfs /tmp/other tmpfs rw 0 0\nproc /proc proc rw 0 0\n"
    assert fl.stale_mounts(mounts, tmp_path) == [f"{root}/logdisk"]
    assert fl.is_stale_process(["python", "-m", "quickcode", "serve", "--set", f"auth_tokens_file={root}/tokens"],
                               {}, tmp_path)
    assert fl.is_stale_process(["nginx: master process /usr/sbin/nginx", "-p", f"{root}/nginx"], {}, tmp_path)
    assert fl.is_stale_process(["python", "-m", "quickcode", "lsp"], {"QUICKCODE_LSP_LOG": f"{root}/lsp-0.log"},
                               tmp_path)
    assert not fl.is_stale_process(["less", f"{root}/lsp-0.log"], {}, tmp_path)          # someone reading it
    assert not fl.is_stale_process(["python", "-m", "quickcode", "serve"], {"OLDPWD": root}, tmp_path)


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and mounts need root (CI runs as root)")
def test_the_sweep_removes_a_dead_runs_namespace_tmpfs_and_processes(tmp_path):
    work = tmp_path / "qc-faults-dead"
    (work / "logdisk").mkdir(parents=True)
    tag = f"f9{os.getpid() % 100}x"
    ns, host_if, ns_if = f"qc{tag}r0", f"qc{tag}h0", f"qc{tag}n0"
    fl.note_owned(work, netns=[ns], links=[host_if])
    procs = []
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(work / "logdisk")], check=True)
        subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if], check=True)
        subprocess.run(["ip", "link", "set", ns_if, "netns", ns], check=True)
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        in_ns = subprocess.Popen(["ip", "netns", "exec", ns, *sleeper])
        replica = subprocess.Popen([*sleeper, "quickcode", f"auth_tokens_file={work}/tokens"])
        relay = subprocess.Popen([*sleeper, fl.RELAY_MODULE])
        reader = subprocess.Popen([*sleeper, f"{work}/lsp-0.log"])      # names the folder, not the run's
        procs = [in_ns, replica, relay, reader]
        fl.note_owned(work, pids=[relay.pid])
        lock = fl.hold_lock(tmp_path)
        removed = fl.sweep(tmp_path, lock)
        lock.close()
        for p in (replica, relay, in_ns):  # each would sleep 600 s: ended means killed (the sweep reaps them, so
            p.wait(10)                     # no exit status is left to read; `ip netns exec` ends with its child)
        assert reader.poll() is None and psutil.pid_exists(reader.pid)
        assert removed["netns"] == [ns] and ns not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                                     text=True).stdout
        assert subprocess.run(["ip", "link", "show", host_if], capture_output=True).returncode != 0
        assert str(work / "logdisk") not in open("/proc/mounts").read()
        assert removed["mounts"] == [str((work / "logdisk").resolve())]
        assert not (work / fl.OWNED).exists() and fl.sweep(tmp_path, fl.hold_lock(tmp_path)) == {}
    finally:
        for p in procs:
            p.kill()
        subprocess.run(["umount", "-l", str(work / "logdisk")], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
