"""Fuzzing the real WebSocket endpoint with hypothesis (>= 10,000 frames on one session, deterministic).
Languages (known ids, near misses, junk), telemetry counts, priorities and the hello's user name vary too.

Frames: random JSON objects with valid and invalid kinds and fields of the wrong types, mutated valid
requests, truncated JSON, random bytes and text, strings at and past the size limits, other JSON values,
mixed with valid `complete`, `cancel` and `telemetry` frames. After each frame we read what the server said:
  * a frame the codec refuses → exactly one `error` frame with that typed code (and the request id if known);
  * a valid `complete` → its chunks and exactly one terminal frame (`done`, or a typed request error);
  * a valid `cancel`/`telemetry` → nothing (a `sentinel` frame that must come back as `unknown_kind` proves it);
  * never an `internal` error (that is our catch-all for a bug), never a closed connection.
Afterwards the same session still completes, and a second phase fuzzes the handshake (frames before hello).
The server is the real one (uvicorn, WebSockets) in this process over the fake engine: the session, codec and
service are what is fuzzed, not vLLM.
"""
from __future__ import annotations

import collections
import json
import string
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from quickcode.protocol import Complete, ErrorCode, Hello, ProtocolError, decode
from quickcode.protocol.languages import KNOWN_LANGUAGE_IDS
from tests.conftest import fake_server
from tests.support.ws_helpers import complete, http_get, open_session, recv

pytestmark = [pytest.mark.slow]

N_FRAMES = 10_000
N_HANDSHAKES = 400
CODES = {c.value for c in ErrorCode}
REQUEST_CODES = {"prompt_too_long", "max_tokens_too_large", "bad_value", "rate_limited", "duplicate_id",
                 "engine_unavailable", "shutting_down"}
KINDS = ["hello", "welcome", "complete", "cancel", "chunk", "done", "error", "telemetry"]
FIELDS = ["id", "prefix", "suffix", "language", "path", "max_tokens", "stop", "temperature", "priority",
          "prefill_only", "snippets", "event", "shown_chars", "accepted_chars", "protocol_version", "text", "code"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=5)
ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=24)
# language ids: the known ones, near misses and junk (only a bounded set may reach /metrics)
languages = st.sampled_from(["python", "", "c", "rust", "typescriptreact", "Python", "other"]) | st.text(max_size=40)
priorities = st.sampled_from(["normal", "prefetch"])
user_names = st.text(st.characters(codec="utf-8"), max_size=60)


@pytest.fixture(scope="module")
def backend():
    with fake_server(replica_id="fuzz") as b:
        yield b


def valid_complete(rid: str, **over) -> dict:
    return {"kind": "complete", "id": rid, "prefix": "def add(a, b):\n    ", "max_tokens": 2, **over}


@st.composite
def random_object(draw):
    """A JSON object with a (maybe) valid kind and fields of random types."""
    obj = draw(st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), json_values, max_size=5))
    kind = draw(st.sampled_from(KINDS) | st.text(max_size=12) | json_values)
    if draw(st.booleans()):
        obj["kind"] = kind
    return obj


@st.composite
def mutated_complete(draw):
    """A valid complete with one field replaced by a random value, or removed."""
    obj = valid_complete(draw(ids), suffix=draw(st.text(max_size=30)), language=draw(languages),
                         stop=draw(st.lists(st.text(max_size=8), max_size=3)), temperature=draw(st.floats(0, 2)),
                         priority=draw(priorities | st.text(max_size=10) | json_values))
    name = draw(st.sampled_from(sorted(obj)))
    if draw(st.booleans()):
        del obj[name]
    else:
        obj[name] = draw(json_values)
    return obj


@st.composite
def good_complete(draw):
    return valid_complete(
        draw(ids), prefix=draw(st.text(max_size=200)), suffix=draw(st.text(max_size=60)),
        max_tokens=draw(st.integers(1, 2)), stop=draw(st.lists(st.text(min_size=1, max_size=6), max_size=2)),
        temperature=draw(st.sampled_from([0.0, 0.7])), priority=draw(priorities), language=draw(languages),
        prefill_only=draw(st.booleans()),
        snippets=draw(st.lists(st.fixed_dictionaries({"path": st.text(max_size=10), "text": st.text(max_size=80)}),
                               max_size=2)))


@st.composite
def huge(draw, max_frame_bytes: int, max_prompt_chars: int):
    """Strings at and just past the prompt and frame limits."""
    which = draw(st.sampled_from(["prompt", "frame", "field"]))
    delta = draw(st.integers(-3, 3))
    if which == "prompt":
        return valid_complete(draw(ids), prefix="p" * (max_prompt_chars + delta), max_tokens=1)
    if which == "frame":
        head = json.dumps(valid_complete("big", max_tokens=1))[:-1] + ', "pad": "'
        return head + "f" * (max_frame_bytes - len(head) - 2 + delta) + '"}'
    return {"kind": draw(st.sampled_from(KINDS)), "id": "i" * draw(st.integers(120, 140)), "text": "t" * 5000}


# Relative weights: mostly frames the server must refuse (cheap), a few that reach the engine (each costs a
# real completion, ~0.1-0.3 s on this CPU) — so 10,000 frames take a couple of minutes.
WEIGHTS = {"object": 24, "mutated": 2, "truncated": 16, "bytes": 12, "text": 12, "json_value": 13, "huge": 1,
           "valid_complete": 1, "valid_cancel": 10, "valid_telemetry": 9}


def frames(max_frame_bytes: int, max_prompt_chars: int):
    """(label, frame) where frame is str (text frame) or bytes (binary frame)."""
    as_json = lambda s: s.map(json.dumps)  # noqa: E731
    by_label = {
        "object": as_json(random_object()),
        "mutated": as_json(mutated_complete()),
        "truncated": st.builds(lambda f, k: f[:k], as_json(mutated_complete() | random_object()), st.integers(0, 60)),
        "bytes": st.binary(max_size=64),
        "text": st.text(string.printable + "{}[]\":,\\é€😀", max_size=64),
        "json_value": as_json(json_values),
        "huge": huge(max_frame_bytes, max_prompt_chars).map(lambda f: f if isinstance(f, str) else json.dumps(f)),
        "valid_complete": as_json(good_complete()),
        "valid_cancel": as_json(st.builds(lambda i: {"kind": "cancel", "id": i}, ids)),
        "valid_telemetry": as_json(st.builds(
            lambda e, lang, n, m: {"kind": "telemetry", "event": e, "id": "t", "language": lang, "shown_chars": n,
                                   "accepted_chars": m}, st.sampled_from(["shown", "accepted", "partial", "dismissed"]),
            languages, st.integers(-2**31, 2**53), st.integers(-2**31, 2**53))),
    }
    # hypothesis' own choices favour "simple" elements (the first of a list, small integers); a multiplicative
    # hash of its integer spreads them, so the weights hold
    slots = [label for label, w in WEIGHTS.items() for _ in range(w)]
    pick = st.integers(0, 2**64 - 1).map(lambda n: slots[((n * 0x9E3779B97F4A7C15) % 2**64) * len(slots) >> 64])
    return pick.flatmap(lambda label: st.tuples(st.just(label), by_label[label]))


class Checker:
    """Sends one fuzz frame, reads back everything it caused, and checks it against the wire contract."""

    def __init__(self, ws, max_frame_bytes: int):
        self.ws, self.max_frame_bytes = ws, max_frame_bytes
        self.sentinels = 0
        self.last_sentinel = ""
        self.labels: collections.Counter = collections.Counter()
        self.codes: collections.Counter = collections.Counter()
        self.finishes: collections.Counter = collections.Counter()

    def sentinel(self) -> None:
        self.sentinels += 1
        self.last_sentinel = f"sentinel-{self.sentinels}"
        self.ws.send(json.dumps({"kind": self.last_sentinel}))

    def drained(self) -> None:
        """Nothing is left unread: the next frame the server sends is the sentinel's error."""
        self.sentinel()
        m = recv(self.ws, 30)
        assert m["kind"] == "error" and repr(self.last_sentinel) in m["message"], m

    def expect(self, frame: str | bytes):
        """('error', code, id) | ('request', id) | ('nothing',) — what the server must answer."""
        try:
            msg = decode(frame, self.max_frame_bytes)
        except ProtocolError as e:
            return ("error", e.code.value, e.id)
        if isinstance(msg, Complete):
            return ("request", msg.id)
        if isinstance(msg, Hello):
            return ("error", "bad_value", None)
        if msg.kind in ("welcome", "chunk", "done", "error"):
            return ("error", "unknown_kind", getattr(msg, "id", None))
        return ("nothing",)

    def run(self, label: str, frame: str | bytes) -> None:
        self.labels[label] += 1
        want = self.expect(frame)
        self.ws.send(frame)
        # a frame that must get no answer is followed by a sentinel whose error proves nothing came first;
        # for the others their own answer does (anything extra would be read as the next frame's answer)
        got_sentinel, terminal, seen = want[0] != "nothing", None, []
        if not got_sentinel:
            self.sentinel()
        while not got_sentinel or (want[0] == "request" and terminal is None) or (want[0] == "error" and not seen):
            m = recv(self.ws, 60)
            assert m["kind"] in ("chunk", "done", "error"), m
            if m["kind"] == "error":
                assert m["code"] in CODES and m["code"] != "internal" and isinstance(m["message"], str), (frame, m)
                self.codes[m["code"]] += 1
            if (not got_sentinel and m["kind"] == "error" and m["code"] == "unknown_kind"
                    and repr(self.last_sentinel) in m["message"]):
                got_sentinel = True
                continue
            seen.append(m)
            if want[0] == "request" and m["kind"] in ("done", "error") and m.get("id") == want[1]:
                terminal = m
        if want[0] == "error":
            assert len(seen) == 1, (label, frame[:300], want, seen)
            m = seen[0]
            assert m["kind"] == "error" and m["code"] == want[1] and m.get("id") == want[2], (label, frame[:300], want, m)
        elif want[0] == "request":
            assert all(m["id"] == want[1] for m in seen), (label, frame[:300], seen)
            assert [m["kind"] for m in seen].count("done") + [m["kind"] for m in seen].count("error") == 1, seen
            assert all(m["kind"] == "chunk" for m in seen[:-1]) and seen[-1] is terminal, seen
            if terminal["kind"] == "error":
                assert terminal["code"] in REQUEST_CODES, (frame[:300], terminal)
            else:
                self.finishes[terminal["finish_reason"]] += 1
        else:
            assert seen == [], (label, frame[:300], seen)


@pytest.mark.timeout(1200)   # a couple of minutes on an idle machine; far longer while engines train beside it
def test_fuzz_websocket_frames(backend):
    # no client keepalive: its pings draw from the global `random`, which hypothesis watches (the server pings)
    ws, welcome = open_session(backend.ws_url, user="fuzzer", ping_interval=None)
    checker = Checker(ws, welcome["max_frame_bytes"])
    t0 = time.perf_counter()

    @settings(max_examples=N_FRAMES, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(frames(welcome["max_frame_bytes"], welcome["max_prompt_chars"]))
    def one_frame(case):
        checker.run(*case)

    with ws:
        one_frame()
        elapsed = time.perf_counter() - t0
        total = sum(checker.labels.values())
        print(f"\nfuzz: {total} frames in {elapsed:.1f} s ({total / elapsed:.0f}/s); by kind {dict(checker.labels)}")
        print(f"fuzz: error codes {dict(checker.codes)}; valid requests ended {dict(checker.finishes)}")
        assert total >= N_FRAMES
        checker.drained()
        assert checker.labels["valid_complete"] > 40 and sum(checker.finishes.values()) > 80
        assert checker.codes["frame_too_large"] > 0 and checker.codes["prompt_too_long"] > 0
        # whatever languages the frames named, /metrics has labels from the fixed set only
        status, body = http_get(f"{backend.http_url}/metrics")
        assert status == 200
        langs = {line.split('language="')[1].split('"')[0] for line in body.decode().splitlines()
                 if line.startswith("quickcode_completion_events_total{")}
        assert langs and langs <= KNOWN_LANGUAGE_IDS | {"other", "unknown"}, langs
        # the session is still usable
        r = complete(ws, "after-fuzz", max_tokens=4)
        assert r.kind == "done" and r.finish_reason in ("length", "stop"), r.terminal
    ws2, _ = open_session(backend.ws_url)
    with ws2:
        assert complete(ws2, "fresh", max_tokens=2).kind == "done"


def _is_hello(frame) -> bool:
    try:
        return isinstance(decode(frame), Hello)
    except ProtocolError:
        return False


def test_fuzz_handshake(backend):
    """Junk before `hello` gets typed errors (`hello_required` or the codec's), then a hello still opens."""
    count = collections.Counter()

    @settings(max_examples=N_HANDSHAKES, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.lists(frames(1 << 20, 64_000).filter(lambda c: c[0] != "huge" and not _is_hello(c[1])),
                    min_size=1, max_size=3), user_names)
    def handshake(cases, user):
        from websockets.sync.client import connect

        with connect(backend.ws_url, max_size=1 << 24, ping_interval=None) as ws:
            for label, frame in cases:
                ws.send(frame)
                m = recv(ws, 10)
                assert m["kind"] == "error" and m["code"] in CODES and m["code"] != "internal", (frame, m)
                try:
                    decode(frame)
                except ProtocolError as e:
                    assert m["code"] == e.code.value, (frame, m)
                else:
                    assert m["code"] == "hello_required", (frame, m)
                count[m["code"]] += 1
            # any user name a client claims: an open server ignores it (each session is its own anonymous user)
            ws.send(json.dumps({"kind": "hello", "protocol_version": 1, "user": user}))
            assert recv(ws, 10)["kind"] == "welcome"

    handshake()
    print(f"\nhandshake fuzz: {N_HANDSHAKES} connections, error codes {dict(count)}")
    assert count["hello_required"] > 0
