"""`quickcode bench soak`: the verdict rules on synthetic series (a leak fails, flat noise passes), the abusive
clients against a real in-process server, and a short soak of the real machinery on the session's backend."""
from __future__ import annotations

import asyncio
import math
import random

import pytest

from quickcode.benchmarks import soak_verdict as sv
from quickcode.benchmarks.soak_abuse import KINDS, Abuser


def _series(f, n: int = 720, step_s: float = 5.0, seed: int = 0) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(i * step_s, f(i, rng)) for i in range(n)]


def _flat(level: float, noise: float):
    return lambda i, rng: level * (1 + rng.uniform(-noise, noise))


def test_a_slow_memory_leak_fails_and_flat_noise_passes():
    leak = _series(lambda i, rng: 500e6 + 60e3 * i + rng.uniform(-5e6, 5e6))    # ~43 MB over the hour
    flat = _series(_flat(500e6, 0.02))
    spiky = [(t, v * (1.5 if i % 97 == 0 else 1)) for i, (t, v) in enumerate(flat)]   # GC and burst spikes
    assert not sv.grows_at_most("rss", leak, 300, 300, 0.05).passed
    assert sv.grows_at_most("rss", flat, 300, 300, 0.05).passed
    assert sv.grows_at_most("rss", spiky, 300, 300, 0.05).passed
    r = sv.grows_at_most("rss", leak, 300, 300, 0.05)
    assert r.last > r.limit > r.first


def test_growth_during_the_warm_up_only_passes():
    warm = _series(lambda i, rng: min(400e6 + 2e6 * i, 520e6) + rng.uniform(-3e6, 3e6))  # fills, then flat
    assert sv.grows_at_most("rss", warm, 300, 300, 0.05).passed
    assert not sv.grows_at_most("rss", warm, 0, 300, 0.05).passed


def test_leaking_files_and_tasks_fail_bounded_churn_passes():
    fd_leak = _series(lambda i, rng: 80 + i // 10 + rng.randrange(10))              # one socket a minute
    churn = _series(lambda i, rng: 80 + rng.randrange(25))                           # sessions come and go
    episodes = _series(lambda i, rng: 80 + (60 if rng.random() < 0.1 else 0))       # 20 sockets at once
    assert not sv.stays_bounded("fds", fd_leak, 300, 32, 0.1).passed
    assert sv.stays_bounded("fds", churn, 300, 32, 0.1).passed
    assert sv.stays_bounded("fds", episodes, 300, 32, 0.1).passed
    task_leak = _series(lambda i, rng: 40 + i // 2 + rng.randrange(30))
    assert not sv.stays_bounded("tasks", task_leak, 300, 64, 0.2).passed
    assert sv.stays_bounded("tasks", _series(lambda i, rng: 40 + rng.randrange(60)), 300, 64, 0.2).passed


def test_series_may_not_grow_with_every_user():
    per_user = _series(lambda i, rng: 900 + i)        # a new label value per sample: unbounded
    bounded = _series(lambda i, rng: 900 + min(i, 80) // 2)   # the bounded label set fills, then stays
    assert not sv.stays_bounded("series", per_user, 300, 40, 0, "max").passed
    assert sv.stays_bounded("series", bounded, 300, 40, 0, "max").passed


def test_a_queue_that_falls_behind_fails_one_that_drains_passes():
    behind = _series(lambda i, rng: i // 20 + rng.randrange(5))
    bursts = _series(lambda i, rng: rng.choice([0, 0, 0, 3, 12]))
    assert not sv.drains("queue", behind, 300, 4).passed
    assert sv.drains("queue", bursts, 300, 4).passed


def test_too_few_samples_fail_and_the_counts_must_be_zero():
    assert not sv.grows_at_most("rss", [(400.0, 1.0)], 300, 300, 0.05).passed
    assert not sv.stays_bounded("fds", [(0.0, 1.0), (1.0, 1.0)], 300, 1, 0).passed
    assert not sv.is_zero("hung", 1).passed and sv.is_zero("hung", 0).passed


def test_the_verdict_judges_every_series_and_both_counts():
    flat = {k: _series(_flat(100.0, 0.01), seed=j) for j, k in enumerate(
        ("rss_backend", "rss_engine", "fds_backend", "fds_engine", "tasks", "series", "queued", "live"))}
    rules = sv.verdict(flat, 300, hung=0, editor_errors=0)
    assert len(rules) == 11 and all(r.passed for r in rules)
    leaky = {**flat, "fds_engine": _series(lambda i, rng: 80 + i // 5)}
    failed = [r.name for r in sv.verdict(leaky, 300, hung=0, editor_errors=2, failed_samples=1) if not r.passed]
    assert failed == ["engine open files", "errors shown to editors", "samples not taken"]


def test_every_abuse_leaves_the_server_serving(fake_backend):
    """Each episode against a real in-process server (fake engine): it runs to its end, the server answers
    the abuse with typed errors, and a well-behaved session is still served afterwards."""
    from quickcode.benchmarks.loadgen import Session

    b = fake_backend(max_sessions_per_user=4, per_user_inflight=2, telemetry_rate_per_s=20.0)

    async def main():
        ab = Abuser(b.ws_url, 0, max_prompt_chars=b.settings.max_prompt_chars,
                    max_frame_bytes=b.settings.max_frame_bytes, sessions_per_user=4, pause_s=0)
        for kind in KINDS:
            await asyncio.wait_for(getattr(ab, kind)(), 60)
        s = await Session(b.ws_url, "after-abuse").open()
        out = await s.wait(s.complete("def f(x):\n    return ", max_tokens=4).id, 30)
        await s.close()
        return ab.counts, out

    counts, out = asyncio.run(main())
    assert out.finish in ("stop", "length")
    assert counts["bad_frames.sent"] == 200 and counts["bad_frames.other_frames"] > 0
    assert counts.get("bad_frames.stop", 0) + counts.get("bad_frames.length", 0) == 1   # served after the junk
    assert counts["huge.error:prompt_too_long"] == 1 and counts["huge.oversized_frames"] == 1
    assert counts["telemetry_flood.sent"] == 3000 and counts["churn.cycles"] == 40
    # an open server caps no user's sessions (it names no users), only each hello user's live requests
    assert counts["caps.sessions_opened"] == 8 and "caps.sessions_refused" not in counts
    assert counts["caps.superseded"] > 0                  # one live request per user: the older ones go
    assert counts["caps.superseded"] + counts.get("caps.stop", 0) + counts.get("caps.length", 0) == counts["caps.sent"]


@pytest.mark.slow
@pytest.mark.engine
def test_a_short_soak_hangs_nothing_and_shows_editors_no_error(backend, tmp_path):
    """The soak's machinery for about a minute and a half on the session's backend: two editors (one restarts
    its language server midway), one abusive client; nothing hung, no error shown, every series sampled and
    judged, and the verdict passes."""
    import psutil

    from quickcode.benchmarks.soak import SERIES, SoakConfig, soak

    pid = backend.pid or next(p.pid for p in psutil.process_iter() if any(
        c.laddr.port == backend.port and c.status == psutil.CONN_LISTEN for c in _connections(p)))
    cfg = SoakConfig(ws_url=backend.ws_url, http_url=backend.http_url, pid=pid, duration_s=90, warmup_s=25,
                     sample_s=2, editors=2, abusers=1, reconnect_s=40, hang_timeout_s=30, speed=3, chars=150,
                     abuse_pause_s=1)
    res = asyncio.run(soak(cfg, sv.Bounds(window_s=15), say=lambda msg: None))
    e = res.editors
    assert e.hung == 0 and e.errors == 0, e.problems
    assert e.segments >= 2 and e.requests > 0 and e.lsp_starts >= 3
    assert sum(v for k, v in e.outcomes.items() if k in ("items", "empty", "late")) > 0
    assert sum(v for k, v in res.abuse.items() if k.endswith(".episodes")) >= 2
    for k in SERIES:
        assert len(res.samples[k]) >= 20, k
    assert all(not math.isnan(v) for _, v in res.samples["tasks"]) and res.samples["tasks"][-1][1] > 0
    assert res.warmup_s >= cfg.warmup_s and res.warmup_s < cfg.duration_s / 2
    assert res.rules == sv.verdict(res.samples, res.warmup_s, 0, 0, sv.Bounds(window_s=15))
    assert res.passed, [r.row() for r in res.rules if not r.passed]


def _connections(p):
    try:
        return p.net_connections(kind="tcp")
    except Exception:   # another user's process: not the backend
        return []
