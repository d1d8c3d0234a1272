"""Write requirements/lock-gpu.txt: every package `pip install '.[gpu]'` puts into the CUDA image, at the
versions pip resolves for CPython 3.11 on manylinux x86_64 (glibc <= 2.36, Debian 12: the image's base), from
wheels only, without installing anything (`pip install --dry-run --report` with a target platform). Run it on
any machine with network access to the index, after changing a pin of the gpu or server extras:
  .venv/bin/python scripts/lock_gpu.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock-gpu.txt"
GLIBC_MINORS = range(36, 4, -1)   # manylinux_2_36 (Debian 12) down to manylinux_2_5
HEADER = """\
# The CUDA image's environment (deploy/docker/Dockerfile.gpu: pip install -c requirements/lock-gpu.txt '.[gpu]'):
# every package pip resolves for '.[gpu]' on CPython 3.11, manylinux x86_64 (glibc <= 2.36), wheels only, before
# the image removes torchvision, torchaudio and torchcodec. Written by scripts/lock_gpu.py (do not edit by hand).
"""


def requirements() -> list[str]:
    """The project's own pins for the gpu extra (its base dependencies and the server extra included)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    reqs = list(project["dependencies"])
    for extra in ("gpu", "server"):
        reqs += [r for r in extras[extra] if not r.startswith("quickcode[")]
    return reqs


def resolve(reqs: list[str]) -> dict[str, str]:
    platforms = [f"manylinux_2_{m}_x86_64" for m in GLIBC_MINORS] + [
        "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]   # no linux_x86_64: a local build
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--report", str(report), "--target", str(Path(tmp) / "t"), "--only-binary=:all:",
               "--python-version", "3.11", "--implementation", "cp",
               "--abi", "cp311", "--abi", "abi3", "--abi", "none",
               *[a for p in platforms for a in ("--platform", p)], *reqs]
        # the index only: no pip config file and no local wheel folders (a machine's torch +cpu build would
        # satisfy torch==X); the environment's index and certificate settings still apply
        env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_NO_INDEX")}
        subprocess.run(cmd, check=True, env={**env, "PIP_CONFIG_FILE": os.devnull})
        installed = json.loads(report.read_text())["install"]
    pins = {i["metadata"]["name"]: i["metadata"]["version"] for i in installed}
    local = {n: v for n, v in pins.items() if "+" in v}
    if local:
        raise SystemExit(f"local builds in the resolution, not the index's wheels: {local}")
    return pins


def main() -> None:
    pins = resolve(requirements())
    lines = [f"{name}=={version}" for name, version in sorted(pins.items(), key=lambda kv: kv[0].lower())]
    LOCK.write_text(HEADER + "\n".join(lines) + "\n")
    print(f"{LOCK.relative_to(REPO)}: {len(lines)} packages", file=sys.stderr)


if __name__ == "__main__":
    main()
