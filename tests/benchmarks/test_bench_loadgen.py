"""The benchmarks' WebSocket client (quickcode/benchmarks/loadgen.py) against the real server over the fake
engine: it speaks the wire through quickcode/protocol/'s codec, and what it records per request is what the
server
sent."""
from __future__ import annotations

import asyncio

from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.launch import backend_at
from quickcode.backend.settings import Settings
from quickcode.benchmarks.loadgen import Session, histogram, histogram_quantile, scrape


def test_a_bench_session_records_chunks_done_timing_and_cancel(fake_backend):
    b = fake_backend(FakeEngine(Settings(spec_method="off"), script=lambda p: [" a", " b", " c"]))
    assert backend_at(b.ws_url).http_url == b.http_url and backend_at(b.http_url).ws_url == b.ws_url

    async def run():
        s = await Session(b.ws_url, "bench-user").open()
        assert s.session_id
        done = await s.wait(s.complete("x = ", max_tokens=8, stop=["@"], rid="one").id, 10)
        bad = await s.wait(s.complete("x = ", max_tokens=10**6, rid="big").id, 10)
        await s.cancel("never-sent")        # ignored by the server: no frame
        await s.close()
        return done, bad, s.other_frames

    done, bad, other = asyncio.run(run())
    assert done.finish == "stop" and done.text == "a b c" and done.chunks == 3
    assert done.timing["output_tokens"] == 3 and done.timing["prompt_tokens"] > 0
    assert done.ttft_s is not None and done.total_s >= done.ttft_s
    assert bad.finish == "error:max_tokens_too_large" and bad.timing == {}
    assert other == []


def test_the_bench_reads_the_servers_metrics_as_samples_and_histograms(fake_backend):
    b = fake_backend(FakeEngine(Settings(spec_method="off"), script=lambda p: [" a", " b"]))
    before = scrape(b.http_url)

    async def one():
        s = await Session(b.ws_url, "bench-user").open()
        await s.wait(s.complete("x = ", max_tokens=4, rid="one").id, 10)
        await s.close()

    asyncio.run(one())
    after = scrape(b.http_url)
    stop = 'quickcode_requests_total{finish_reason="stop"}'
    assert after[stop] - before.get(stop, 0.0) == 1.0
    e2e = histogram(after, "quickcode_e2e_seconds", before)
    assert e2e[-1] == (float("inf"), 1.0) and [le for le, _ in e2e] == sorted({le for le, _ in e2e})
    assert 0.0 < histogram_quantile(e2e, 0.5) < e2e[-2][0]
