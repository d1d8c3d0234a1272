"""The language server's latency report: every hop of recent requests (p50/p95 and share of the total),
plus what the client-side intelligence saved. Shown by the editors' "latency report" command."""
from __future__ import annotations

from quickcode.protocol.stats import percentile

COMPONENTS = [("queue", "queue_ms"), ("tokenize", "tokenize_ms"), ("prefill (engine TTFT)", "ttft_ms"),
              ("first decode step", "first_decode_ms"), ("generation", "generate_ms"), ("network", "network_ms")]


def latency_report(session) -> str:
    rows = [r for r in session.stats.waterfalls if "server_total_ms" in r]
    st = session.stats
    lines = ["| component | p50 ms | p95 ms | share |", "|---|---|---|---|"]
    total = sum(sum(r.get(k, 0.0) for _, k in COMPONENTS) for r in rows) or 1.0
    for name, key in COMPONENTS:
        xs = [r.get(key, 0.0) for r in rows]
        p50, p95 = percentile(xs, 50, 0.0), percentile(xs, 95, 0.0)
        lines.append(f"| {name} | {p50:.1f} | {p95:.1f} | {100 * sum(xs) / total:.0f} % |")
    first = [r["client_first_chunk_ms"] for r in rows if r.get("client_first_chunk_ms")]
    p50, p95 = percentile(first, 50, 0.0), percentile(first, 95, 0.0)
    lines.append(f"| **first chunk at the client** | {p50:.1f} | {p95:.1f} | |")
    served = st.served_cache + st.served_inflight + st.served_network
    lines += ["", f"{len(rows)} backend requests measured; editor requests {st.requests}, suggestions {served} "
              f"(cache {st.served_cache}, in-flight reuse {st.served_inflight}, network {st.served_network}); "
              f"skipped by the predictor {st.skipped_predictor}; cancelled {st.cancelled}; stopped early {st.stopped_early}; "
              f"acceptance rate {session.outcomes.acceptance_rate:.0%}"]
    return "\n".join(lines)
