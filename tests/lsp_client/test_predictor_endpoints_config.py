"""Acceptance predictor, endpoint choice and the client settings: pure logic; and endpoint probing, against a
real WebSocket server on loopback."""
import random
import socket

from websockets.asyncio.server import serve

from quickcode.lsp_client.clock import REAL
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.endpoints import EndpointChooser, probe_all
from quickcode.lsp_client.predictor import AcceptancePredictor, features


def test_predictor_starts_neutral_and_learns_to_skip_what_is_always_dismissed():
    p = AcceptancePredictor(min_ratio=0.5, exploration=0.0)
    bad = features(None, 100.0, "x = foo(a, b", ") + 1", "python")      # mid-line, after a letter
    good = features(None, 100.0, "def f(x):", "", "python")            # after a block opener
    assert p.should_request(bad) and p.should_request(good)
    for t in range(300):
        p.learn(bad, False, t)
        p.learn(good, True, t)
    assert abs(p.rate() - 0.5) < 0.01                # the bar: 0.5 × this user's rate
    assert p.probability(good) > 0.6 > 0.25 > p.probability(bad)
    assert not p.should_request(bad) and p.should_request(good)
    assert p.skipped == 1


def test_a_weak_model_keeps_its_best_places_and_loses_the_worst():
    """Suggestions rarely taken anywhere (a tiny model): the bar follows the user's own rate, so the places
    where a suggestion is taken now and then are still asked; the ones where it never is are skipped."""
    p = AcceptancePredictor(min_ratio=0.5, exploration=0.0)
    rng = random.Random(1)
    line_start = features(None, 100.0, "    ", "", "python")
    mid_word = features(None, 100.0, "x = fo", "", "python")
    for t in range(400):
        p.learn(line_start, rng.random() < 0.12, t)
        p.learn(mid_word, False, t)
    assert p.rate() < 0.1 and p.probability(line_start) < 0.2      # an absolute bar of 0.2 would skip both
    assert p.should_request(line_start) and not p.should_request(mid_word)


def test_predictor_explores():
    p = AcceptancePredictor(min_ratio=2.0, exploration=0.2)      # a bar no prediction reaches
    x = features(None, 1.0, "x", "", "python")
    rng = random.Random(0)
    asked = sum(p.should_request(x, rng.random) for _ in range(1000))
    assert 150 < asked < 250


def test_nearest_healthy_endpoint_failover_and_failback():
    c = EndpointChooser(["ws://far", "ws://near", "ws://mid"])
    c.record_rtt("ws://far", 80)
    c.record_rtt("ws://near", 5)
    c.record_rtt("ws://mid", 30)
    assert c.best(0) == "ws://near"
    c.record_failure("ws://near", now_s=10)
    assert c.best(10.1) == "ws://mid"               # failover
    assert c.best(11) == "ws://near"                # cooled down (0.5 s after one failure)
    c.record_rtt("ws://near", 5)
    assert c.better_than("ws://mid", 11) == "ws://near"   # failback: clearly nearer
    assert c.better_than("ws://near", 11) is None


def test_unmeasured_endpoints_come_after_measured_ones_and_all_down_picks_the_soonest_back():
    c = EndpointChooser(["ws://a", "ws://b"])
    c.record_rtt("ws://b", 50)
    assert c.best(0) == "ws://b"
    c.record_failure("ws://a", 0)
    c.record_failure("ws://b", 0)
    c.record_failure("ws://b", 0)
    assert c.best(0.1) == "ws://a"


async def test_probing_measures_a_live_endpoint_and_counts_a_dead_one_down():
    with socket.socket() as s:                     # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"ws://127.0.0.1:{s.getsockname()[1]}/"
    async with serve(lambda ws: ws.wait_closed(), "127.0.0.1", 0) as server:
        live = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
        c = EndpointChooser([dead, live])
        assert await probe_all(c, {}, REAL) == [dead]
    assert c.endpoints[live].rtt_ms is not None and c.endpoints[live].failures == 0
    assert c.endpoints[dead].rtt_ms is None and c.endpoints[dead].failures == 1
    assert c.best(REAL.now()) == live


def test_settings_accept_camel_case_and_refuse_wrong_types():
    cfg = ClientConfig()
    ignored = cfg.update({"quickcode": {"debounceMs": 75, "maxTokens": 32, "endpoints": "ws://x/v1/ws",
                                        "languages": {"markdown": False}, "enabled": "yes", "nope": 1}})
    assert cfg.debounce_ms == 75.0 and cfg.max_tokens == 32 and cfg.endpoints == ["ws://x/v1/ws"]
    assert not cfg.language_enabled("markdown") and cfg.language_enabled("python")
    assert cfg.enabled is True and set(ignored) == {"enabled", "nope"}


def test_predictor_weights_persist_across_sessions(tmp_path):
    p = AcceptancePredictor()
    x = features(1, 2.0, "def f():", "", "python")
    for t in range(50):
        p.learn(x, True, t)
    p.save(tmp_path / "predictor.json")
    q = AcceptancePredictor()
    assert q.load(tmp_path / "predictor.json") and q.weights == p.weights and q.updates == 50
    (tmp_path / "bad.json").write_text('{"version": 1, "weights": [1, 2]}')
    assert not AcceptancePredictor().load(tmp_path / "bad.json")
    assert not AcceptancePredictor().load(tmp_path / "missing.json")
