"""deploy/grafana/quickcode.json: every query parses as PromQL (a real parser), and every metric and label
value it selects is exported by a live backend's /metrics — so a renamed metric breaks this test, not the
operator's dashboard. (`instance` is added by Prometheus at scrape time, so it is not checked.)
"""
from __future__ import annotations

import json

import promql_parser
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO
from tests.support.ws_helpers import complete, http_get, open_session, recv

DASHBOARD = REPO / "deploy" / "grafana" / "quickcode.json"
GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "1m", "$instance": ".*"}


def _exprs(dash: dict) -> list[tuple[str, str]]:
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]["query"]
            assert q.startswith("label_values(") and q.endswith(")")
            out.append((f"variable {var['name']}", q[len("label_values("):-1].split(",")[0].strip()))
    return out


def _selectors(expr: str) -> list[promql_parser.VectorSelector]:
    for k, v in GRAFANA_VARS.items():
        expr = expr.replace(k, v)
    found = []

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True
    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_dashboard_is_well_formed():
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['title']!r} overlaps another"
                cells.add((x, y))
        if p["type"] != "row":
            assert p["targets"] and p["datasource"]["uid"] == "${datasource}"
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for must in ("time to first token", "goodput", "shed", "acceptance", "sessions", "prefix-cache"):
        assert must in titles, must
    exprs = [e for _, e in _exprs(dash)]
    assert any("histogram_quantile(0.5," in e and "quickcode_ttft_seconds_bucket" in e for e in exprs)
    assert any("histogram_quantile(0.95," in e and "quickcode_ttft_seconds_bucket" in e for e in exprs)


def test_a_wrong_query_is_caught():
    with pytest.raises(Exception):
        _selectors("sum(rate(quickcode_requests_total[1m])")   # unbalanced
    assert [s.name for s in _selectors('rate(quickcode_x_total{a="b"}[1m]) / on() vector(1)')] == ["quickcode_x_total"]


@pytest.mark.engine
def test_every_metric_the_dashboard_uses_is_exported(backend):
    # make the labelled series exist: a served request, an error, the client's telemetry
    ws, _ = open_session(backend.ws_url)
    with ws:
        assert complete(ws, "dash", max_tokens=2).kind == "done"
        ws.send("{not json")
        assert recv(ws)["code"] == "bad_json"
        for event in ("shown", "accepted", "partial", "dismissed"):
            ws.send(json.dumps({"kind": "telemetry", "event": event, "id": "dash", "language": "python",
                                "shown_chars": 10, "accepted_chars": 4}))
        assert complete(ws, "dash2", max_tokens=1).kind == "done"   # frames are handled in order: telemetry is in
    status, body = http_get(f"{backend.http_url}/metrics")
    assert status == 200
    series: dict[str, list[dict]] = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            series.setdefault(s.name, []).append(s.labels)

    dash = json.loads(DASHBOARD.read_text())
    checked = set()
    for title, expr in _exprs(dash):
        for sel in _selectors(expr):
            assert sel.name in series, f"panel {title!r}: {sel.name} is not exported by the backend"
            checked.add(sel.name)
            for m in sel.matchers.matchers:
                if m.name == "instance":
                    continue
                values = {labels.get(m.name) for labels in series[sel.name]}
                assert values - {None}, f"panel {title!r}: {sel.name} has no label {m.name!r}"
                if m.op == promql_parser.MatchOp.Equal:
                    assert m.value in values, f"panel {title!r}: no {sel.name}{{{m.name}={m.value!r}}} (have {values})"
                elif m.op == promql_parser.MatchOp.Re:
                    for alt in m.value.split("|"):
                        assert alt in values, f"panel {title!r}: no {sel.name}{{{m.name}={alt!r}}} (have {values})"
    print(f"\ndashboard: {len(checked)} metrics checked against a live /metrics: {sorted(checked)}")
    assert len(checked) >= 15
