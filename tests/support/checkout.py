"""A copy of the checkout's files (tracked, and new ones git does not ignore), for tests that build from it."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def copy_checkout(repo: Path, dest: Path, skip: tuple[str, ...] = ()) -> Path:
    """Copy the files `git ls-files` names under `repo` to `dest`, but those under the `skip` prefixes."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        if (repo / rel).is_file() and not rel.startswith(skip):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / rel, dest / rel)
    return dest
