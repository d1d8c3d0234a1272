"""`quickcode bench faults` in short: two editors typing through a network namespace's veth into nginx in front of
one light-profile replica of its own (real vLLM), the link taken down and brought back. Both editors are shown
suggestions again, none sees an error, nothing hangs, no answer crosses users, and what it made is cleaned up
(namespace, tmpfs, processes). The whole bench, every fault: `quickcode bench faults`."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.netns, pytest.mark.nginx, pytest.mark.engine, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")]


def _ours() -> tuple[str, str]:
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    mounts = "".join(line for line in open("/proc/mounts") if "qc-faults-" in line)
    return netns, mounts


@pytest.mark.timeout(1800)       # a replica's engine start and the bench's own phases, on a loaded machine
def test_the_link_down_and_up_while_two_editors_type(tmp_path):
    before = _ours()
    r = subprocess.run([sys.executable, "-m", "quickcode", "bench", "faults", "--editors", "2", "--replicas", "1",
                        "--faults", "link_down", "--baseline-s", "5", "--link-down-s", "4", "--recover-s", "10",
                        "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-4000:]
    head = json.loads(r.stdout.strip().splitlines()[-1])
    link = head["faults"]["link_down"]
    assert head["passed"] and head["failed"] == {}
    assert link["affected"] == 2 and link["not_recovered"] == 0 and link["recovery_max_s"] is not None
    assert (link["errors_shown"], link["error_messages"], link["hung"], link["cross_user"]) == (0, 0, 0, 0)
    assert head["shown"] > 0
    report = (tmp_path / "faults.md").read_text()
    assert "## link_down" in report and (tmp_path / "faults_timeline.png").is_file()
    assert _ours() == before      # its namespace and its tmpfs are gone
