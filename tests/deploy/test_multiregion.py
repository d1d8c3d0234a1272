"""Multi-region: the language server measures every endpoint's RTT (WebSocket ping), uses the nearest
healthy one, fails over when it becomes unreachable and fails back when it returns.

Three "regions" are test hosts in their own network namespaces (quickcode/benchmarks/regions.py) with one-way
delays of 5, 25 and 60 ms, all in front of the session's real backend; the endpoints are listed far-first so
that the choice is visibly by measured RTT, not by order.

Here with deploy/: its subject is a multi-region deployment (the client side is lsp_client's).
"""
from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from quickcode.benchmarks import regions as R
from tests.support.waits import until
from tests.lsp_client.test_lsp_e2e import quiet_status, CONTEXTS, capabilities, command, inline_params, open_doc

pytestmark = [pytest.mark.netns, pytest.mark.engine, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")]
DELAYS_MS = [5.0, 25.0, 60.0]


@pytest.fixture(scope="module")
def regions(backend):
    rs = R.create(DELAYS_MS, backend.port, tag=str(os.getpid() % 1000))
    until(lambda: all(R.listening(r.host_ip, r.relay_port) and R.listening(r.ns_ip, r.port) for r in rs),
          "the regions' relays and forwarding hosts to listen", hang_s=60, poll_s=0.05)
    yield rs
    R.destroy(rs)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def client(lsp_client: LanguageClient, regions):
    quiet_status(lsp_client)
    near, mid, far = regions
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=capabilities(), root_uri="file:///tmp",
        initialization_options={"endpoints": [far.url, mid.url, near.url], "probeIntervalS": 1.0,
                                "predictor": False, "warmup": False, "stateDir": ""}))
    yield
    await lsp_client.shutdown_session()


async def wait_for(client, pred, timeout_s: float):
    t0 = time.perf_counter()
    st = {}
    while time.perf_counter() - t0 < timeout_s:
        st = await command(client, "quickcode.status")
        if pred(st):
            return time.perf_counter() - t0, st
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not met in {timeout_s} s: {st}")


async def some_completion(client) -> bool:
    for ctx in CONTEXTS:
        open_doc(client, ctx)
        if (await client.text_document_inline_completion_async(inline_params(ctx))).items:
            return True
    return False


async def test_nearest_endpoint_failover_and_failback(client: LanguageClient, regions):
    near, mid, far = regions
    _, st = await wait_for(client, lambda s: s.get("connected"), 30)
    rtt = {e["url"]: e["rtt_ms"] for e in st["endpoints"]}
    print("\nmeasured RTTs (ms):", {f"region {r.index} ({r.delay_ms:g} ms one way)": rtt[r.url] for r in regions})
    assert st["endpoint"] == near.url, st
    assert rtt[near.url] < rtt[mid.url] < rtt[far.url]
    for r in regions:                                 # each RTT includes the region's delay both ways
        assert rtt[r.url] >= 2 * r.delay_ms * 0.9
    assert await some_completion(client)

    near.link(False)                                  # the nearest region's network goes away
    t_down = time.perf_counter()
    open_doc(client, CONTEXTS[0], version=50)
    res = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(CONTEXTS[0])), 10)
    answered_s = time.perf_counter() - t_down
    failover_s, st = await wait_for(client, lambda s: s.get("connected") and s.get("endpoint") == mid.url, 20)
    print(f"link down: pending request answered in {answered_s * 1000:.0f} ms "
          f"({'empty' if not res.items else 'served'}), failed over to region {mid.index} "
          f"{(time.perf_counter() - t_down):.2f} s after the link went down")
    assert await some_completion(client)

    near.link(True)                                   # it comes back: the language server returns to it
    t_up = time.perf_counter()
    _, st = await wait_for(client, lambda s: s.get("connected") and s.get("endpoint") == near.url, 20)
    print(f"link up: failed back to region {near.index} {time.perf_counter() - t_up:.2f} s later")
    assert await some_completion(client)
