"""deploy/k8s validated offline: every built-in resource against the Kubernetes OpenAPI schemas bundled in
`kubernetes-validate` (strict: unknown fields fail), plus the cross-references no schema checks — selectors
match pod labels, probes hit routes the app really serves, the ConfigMap's TOML is a valid Settings file,
the grace period covers the drain, the Ingress hashes on the same user key as deploy/nginx.
"""
from __future__ import annotations

import importlib.util
import tomllib

import kubernetes_validate
import pytest
import yaml

from tests.conftest import REPO

K8S = REPO / "deploy" / "k8s"
# the oldest still-common and the newest schema versions the package bundles
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def _docs() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return out


DOCS = _docs()


def _one(kind: str, name: str | None = None) -> dict:
    found = [d for _, d in DOCS if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def test_kustomization_lists_every_manifest():
    kz = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kz["resources"]) == sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


# CRDs (the ServiceMonitor) have their schema in the operator, not in Kubernetes: their references are
# checked in test_selectors_and_references_line_up
BUILTIN = [(n, d) for n, d in DOCS if (d["apiVersion"], d["kind"]) not in CRDS]


def test_every_kind_is_checked():
    assert {d["kind"] for _, d in BUILTIN} == {"ConfigMap", "StatefulSet", "Service", "Ingress", "PodDisruptionBudget"}
    assert [d["kind"] for _, d in DOCS if (d["apiVersion"], d["kind"]) in CRDS] == ["ServiceMonitor"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name,doc", BUILTIN, ids=[f"{n}:{d['kind']}/{d['metadata']['name']}" for n, d in BUILTIN])
def test_manifest_matches_the_kubernetes_schema(name, doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


def test_a_broken_manifest_is_rejected():
    """The validator really validates: a typo'd field and a wrong type both fail."""
    sts = yaml.safe_load(yaml.safe_dump(_one("StatefulSet")))
    sts["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/readyz"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, VERSIONS[-1], strict=True)
    sts = yaml.safe_load(yaml.safe_dump(_one("StatefulSet")))
    sts["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, VERSIONS[-1], strict=True)


def test_configmap_is_a_valid_settings_file():
    from backend.settings import Settings

    data = tomllib.loads(_one("ConfigMap", "quickcode-config")["data"]["config.toml"])
    s = Settings(**data)   # extra="forbid": an unknown or mistyped key fails here
    assert s.host == "0.0.0.0" and s.precision == "int8" and s.auth_tokens_file is not None
    sts = _one("StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert env["QUICKCODE_CONFIG"] == mounts["config"]["mountPath"]
    assert str(s.auth_tokens_file).startswith(mounts["tokens"]["mountPath"] + "/")
    assert str(s.model_int8).startswith(mounts["models"]["mountPath"] + "/")
    gpus = int(c["resources"]["limits"]["nvidia.com/gpu"])
    assert gpus == s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size
    pre_stop_s = float(c["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] >= pre_stop_s + s.shutdown_drain_s + 15  # + engine shutdown
    assert any(p["containerPort"] == s.port for p in c["ports"])


def test_probes_hit_the_apps_real_routes():
    from backend.app import create_app
    from backend.settings import Settings

    routes = {r.path for r in create_app(Settings(spec_method="off")).routes}
    c = _one("StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"] for p in c["ports"]}
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz" and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] in routes and c[probe]["httpGet"]["port"] in ports
    ann = _one("StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/path"] in routes
    # the annotations scrape the metrics-only listener (no token), which the config binds on that port
    by_name = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert int(ann["prometheus.io/port"]) == by_name["metrics"]
    cfg = tomllib.loads(_one("ConfigMap")["data"]["config.toml"])
    assert cfg["metrics_bind"].rpartition(":")[2] == str(by_name["metrics"])
    assert Settings(**cfg).metrics_bind == cfg["metrics_bind"]


def test_selectors_and_references_line_up():
    sts = _one("StatefulSet")
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    services = {d["metadata"]["name"]: d for _, d in DOCS if d["kind"] == "Service"}
    assert sts["spec"]["serviceName"] in services and services[sts["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    for svc in services.values():
        assert svc["spec"]["selector"].items() <= pod_labels.items()
    ing = _one("Ingress")
    be = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert be["port"]["name"] in {p["name"] for p in services[be["name"]]["spec"]["ports"]}
    pdb = _one("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    sm = _one("ServiceMonitor")
    scraped = [s for s in services.values() if sm["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in scraped] == ["quickcode-backend"]   # once, not via the headless one too
    assert sm["spec"]["endpoints"][0]["port"] in {p["name"] for p in scraped[0]["spec"]["ports"]}
    assert sm["spec"]["endpoints"][0]["authorization"]["type"] == "Bearer"


def test_ingress_hashes_on_the_same_user_key_as_the_nginx_config():
    spec = importlib.util.spec_from_file_location("qc_nginx_render", REPO / "deploy" / "nginx" / "render.py")
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    key = _one("Ingress")["metadata"]["annotations"]["nginx.ingress.kubernetes.io/upstream-hash-by"]
    assert f'map "{key}" $quickcode_user_key' in render.render(render.EXAMPLE_BACKENDS)
