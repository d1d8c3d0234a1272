"""Metrics for PromQL and for a Prometheus that scrapes a server with auth on.

Only counters (and present-time gauges) leave the backend: a lifetime ratio gauge (`*_rate`) cannot be
windowed, the dashboard divides counter rates instead. /metrics opens to a user's token or to the scrape-only
token (`metrics_token_sha256`), which opens nothing else; `metrics_bind` serves /metrics on its own listener.
"""
from __future__ import annotations

import urllib.error
import urllib.request

from fastapi.testclient import TestClient
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from quickcode.backend import metrics
from quickcode.backend.app import create_app
from quickcode.backend.auth import hash_token
from quickcode.backend.engine import EngineStats
from quickcode.backend.launch import free_port
from quickcode.backend.settings import Settings


def _families(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def test_engine_figures_are_counters_not_lifetime_ratios():
    stats = EngineStats(prefix_queries=400, prefix_hits=96, spec_draft_tokens=50, spec_accepted_tokens=20)
    fams = {f.name: f for f in metrics.EngineCollector(lambda: stats).collect()}
    assert not [n for n in fams if n.endswith("_rate")], fams.keys()
    assert fams["quickcode_prefix_cache_hits_tokens"].type == "counter"
    assert fams["quickcode_prefix_cache_hits_tokens"].samples[0].value == 96
    assert fams["quickcode_prefix_cache_queries_tokens"].samples[0].value == 400
    assert fams["quickcode_spec_accepted_tokens"].samples[0].value == 20
    assert fams["quickcode_spec_draft_tokens"].samples[0].value == 50


def test_nothing_in_the_registry_is_a_ratio_gauge():
    metrics.watch_engine(lambda: EngineStats(prefix_queries=10, prefix_hits=5))
    fams = _families(generate_latest(REGISTRY).decode())
    ours = {n: t for n, t in fams.items() if n.startswith("quickcode_")}
    assert "quickcode_prefix_cache_hits_tokens" in ours
    assert not [n for n in ours if n.endswith("_rate") or n.endswith("_ratio")], ours


def test_the_scrape_token_opens_metrics_and_nothing_else():
    alice, scraper = "qc_alice-token", "qc_scrape-only-token"
    app = create_app(Settings(auth_tokens=f"alice:{hash_token(alice)}", metrics_token_sha256=hash_token(scraper),
                              spec_method="off"))
    client = TestClient(app)     # without the context manager the lifespan (the engine) never starts
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer qc_wrong"}).status_code == 401
    r = client.get("/metrics", headers={"Authorization": f"Bearer {scraper}"})
    assert r.status_code == 200 and "quickcode_requests_total" in r.text
    assert client.get("/metrics", headers={"Authorization": f"Bearer {alice}"}).status_code == 200
    assert client.get(f"/metrics?token={scraper}").status_code == 200
    r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 1},
                    headers={"Authorization": f"Bearer {scraper}"})
    assert r.status_code == 401


def test_without_a_scrape_token_only_users_scrape():
    app = create_app(Settings(auth_tokens=f"alice:{hash_token('qc_a')}", spec_method="off"))
    client = TestClient(app)
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer qc_a"}).status_code == 200


def test_metrics_bind_serves_the_registry_without_auth():
    port = free_port()
    server = metrics.serve_separately(f"127.0.0.1:{port}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert r.status == 200
            assert _families(r.read().decode())["quickcode_requests"] == "counter"
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_bind_is_validated():
    for bad in ("9464x", "localhost", "host:port"):
        try:
            metrics.serve_separately(bad)
        except ValueError as e:
            assert "host:port" in str(e)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_a_served_backend_with_auth_on_scrapes_on_metrics_bind(fake_backend):
    """The lifespan starts the metrics-only listener: Prometheus scrapes it without a token while the API port
    still wants one (the k8s scrape annotations point at it)."""
    port = free_port()
    b = fake_backend(auth_tokens=f"alice:{hash_token('qc_alice')}", metrics_bind=f"127.0.0.1:{port}")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.status == 200 and "quickcode_engine_ready" in _families(r.read().decode())
    try:
        urllib.request.urlopen(f"{b.http_url}/metrics", timeout=5)
        raise AssertionError("the API port served /metrics without a token")
    except urllib.error.HTTPError as e:
        assert e.code == 401


def test_the_lag_probe_counts_the_loops_tasks():
    import asyncio

    async def main():
        idle = [asyncio.create_task(asyncio.sleep(60)) for _ in range(40)]
        probe = asyncio.create_task(metrics.probe_loop_lag(interval_s=0.001, tasks_every=5))
        await asyncio.sleep(0.05)
        with_idle = metrics.LOOP_TASKS._value.get()
        for t in idle:
            t.cancel()
        await asyncio.gather(*idle, return_exceptions=True)
        await asyncio.sleep(0.05)
        probe.cancel()
        return with_idle, metrics.LOOP_TASKS._value.get()

    with_idle, after = asyncio.run(main())
    assert with_idle >= 42 and after <= 3     # the 40 sleepers, the probe and main; then the probe and main
