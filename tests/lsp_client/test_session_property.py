"""The session's invariant over random editing sessions (hypothesis, 10,000 sequences, virtual time).

A fake backend channel (pure logic: it only records requests and lets the test stream text into them)
plays a model that continues a hidden target text when the document agrees with it and writes junk
otherwise. Random sequences of typing, deleting, cursor moves, requests, streamed chunks, finished
requests, accepts and close/reopen run through the real Session. Checked:
  1. every suggestion returned is consistent with the document at that moment: the text before the
     request's cursor is the request's prefix plus typed text, and typed text + suggestion is a prefix of what the model
     generated for that request;
  2. no request is left running after its document moved on (checked after every step by a brute-force
     oracle independent of the session's own bookkeeping), and every running request is tracked;
  3. nothing hangs: at the end every request ends and every editor request is answered.
"""
from __future__ import annotations

import asyncio
import random
import re

from hypothesis import HealthCheck, given, settings, strategies as st

from quickcode.lsp_client.stream import Lost, Stream
from quickcode.lsp_client.clock import VirtualClock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.context import build
from quickcode.lsp_client.session import Session as LspSession
from quickcode.protocol import Complete, Done, FinishReason

URI = "file:///t.py"
TARGET = ("import os\n\n\ndef add(a, b):\n    total = a + b\n    return total\n\n\n"
          "for i in range(10):\n    print(add(i, i))\n")


def suffix_head(suffix: str) -> str:
    first = suffix.find("\n")
    if first < 0:
        return suffix
    second = suffix.find("\n", first + 1)
    return suffix if second < 0 else suffix[:second]


class FakeChannel:
    connected = True
    welcome = None

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.n = 0
        self.msgs: dict[str, Complete] = {}
        self.streams: dict[str, Stream] = {}
        self.planned: dict[str, str] = {}     # the whole text the "model" will generate for a request
        self.sent: dict[str, str] = {}        # what has been streamed so far

    def new_id(self) -> str:
        self.n += 1
        return f"r{self.n}"

    def submit(self, msg: Complete) -> Stream:
        s = Stream(msg.id)
        self.msgs[msg.id], self.streams[msg.id], self.sent[msg.id] = msg, s, ""
        i = TARGET.find(msg.prefix) if msg.prefix else 0
        if i >= 0 and self.rng.random() < 0.8:
            start = i + len(msg.prefix)
            self.planned[msg.id] = TARGET[start:start + self.rng.randrange(0, 40)]
        else:
            self.planned[msg.id] = "".join(self.rng.choice("ab(:)\n x=") for _ in range(self.rng.randrange(0, 30)))
        if msg.prefill_only:
            s._push(Done(id=msg.id, finish_reason=FinishReason.LENGTH))
        return s

    def cancel(self, rid: str) -> None:
        s = self.streams.get(rid)
        if s is not None:
            s._push(Lost("cancelled"))

    def telemetry(self, t) -> None:
        pass

    def running(self) -> list[str]:
        return [r for r, s in self.streams.items() if s.end is None]

    def feed(self, rid: str, n: int) -> None:
        rest = self.planned[rid][len(self.sent[rid]):]
        piece = rest[:n]
        if piece:
            self.sent[rid] += piece
            from quickcode.protocol import Chunk
            self.streams[rid]._push(Chunk(id=rid, text=piece))
        if len(self.sent[rid]) == len(self.planned[rid]):
            self.streams[rid]._push(Done(id=rid, finish_reason=FinishReason.STOP))


def oracle_fits(msg: Complete, start: int, streamed: str, finished: bool, text: str) -> bool:
    """Brute force: does `text` still hold the request's prefix at `start`, then typed text consistent
    with what was streamed, then the text that followed the cursor?"""
    q, head = msg.prefix, suffix_head(msg.suffix)
    if text[start:start + len(q)] != q:
        return False
    rest = text[start + len(q):]
    for m in range(len(rest) + 1):
        typed = rest[:m]
        consistent = streamed.startswith(typed) or (not finished and typed.startswith(streamed))
        if consistent and rest[m:].startswith(head):
            return True
    return False


LETTERS = "abcdefghijklmnopqrstuvwxyz(): =\n,"
KINDS = ("type", "type_target", "backspace", "move", "ask", "feed", "finish", "accept", "reopen", "tick")


def op_of(code: int) -> tuple:
    """One editing step from one drawn integer (a flat strategy is ~3x cheaper for hypothesis to generate than
    a union of tuples, and the 10,000 sequences are what this test costs): the kind from its last digit, the
    argument from the rest; shrinking goes towards typing "a"."""
    kind, n = KINDS[code % 10], code // 10
    arg = {"type": LETTERS[n % len(LETTERS)], "type_target": 1 + n % 6, "backspace": 1 + n % 3,
           "move": (n % 1001) / 1000, "ask": bool(n % 2), "feed": 1 + n % 12, "finish": n % 4,
           "tick": 1 + n % 3}.get(kind, 0)
    return kind, arg


OPS = st.integers(0, 10**6).map(op_of)


class Session:
    def __init__(self, seed: int, cfg: ClientConfig):
        self.rng = random.Random(seed)
        self.chan = FakeChannel(self.rng)
        self.clock = VirtualClock()          # a debounce's sleep passes its own length at once
        self.cfg = cfg
        self.c = LspSession(cfg, self.chan, clock=self.clock, rng=self.rng.random)
        self.text = TARGET[: self.rng.randrange(0, 40)]
        self.cursor = len(self.text)
        self.tasks: list[asyncio.Task] = []
        self.last: tuple | None = None     # (suggestion, cursor, text) of the last shown suggestion
        self.shown = 0
        self.c.on_open(URI, "/t.py", "python", self.text)

    def edit(self, new_text: str, cursor: int, at: int) -> None:
        self.text, self.cursor = new_text, cursor
        self.clock.advance(0.05)
        self.c.on_change(URI, new_text, at)

    async def ask(self, explicit: bool) -> None:
        text, cursor = self.text, self.cursor
        s = await self.c.complete(URI, cursor, explicit=explicit)
        if s is None:
            return
        # invariant 1, checked at the moment of return (the server sees text, not the cursor: an editor
        # whose cursor moved cancels the request, see "move"): the suggestion applies to the document as it is
        # now — at the cursor asked, or further on by what was typed there since (never stale)
        assert s.on_text == self.text
        assert s.offset == cursor or (s.offset > cursor and self.text[:cursor] == text[:cursor]
                                      and self.text[s.offset:] == text[cursor:])
        rid = s.id.split("+")[0]
        if rid.startswith("doc"):        # the rest of a word from the document (docwords.py), nothing asked: the
            typed = re.search(r"[A-Za-z_]\w*$", self.text[:s.offset]).group(0)    # word it makes is one of the
            elsewhere = self.text[:s.offset - len(typed)] + " " + self.text[s.offset:]   # document's own
            assert s.offset == cursor and re.search(rf"(?<!\w){re.escape(typed + s.text)}(?!\w)", elsewhere), s
            self.shown += 1
            return
        msg = self.chan.msgs[rid]
        window = build(self.text, s.offset, "python", "/t.py", prefix_max_chars=self.cfg.prefix_max_chars,
                       suffix_max_chars=self.cfg.suffix_max_chars, quantum=self.cfg.window_quantum_lines).prefix
        assert window.startswith(msg.prefix), (window, msg.prefix)
        typed = window[len(msg.prefix):]
        assert self.chan.planned[rid].startswith(typed + s.text), (typed, s.text, self.chan.planned[rid])
        self.shown += 1
        self.last = (s, s.offset, self.text)

    def check_running(self) -> None:
        tracked = {f.rid: f for f in self.c.inflight.all()}
        for rid in self.chan.running():
            msg = self.chan.msgs[rid]
            if msg.prefill_only:
                continue
            assert rid in tracked, f"{rid} runs but the session forgot it"
            f = tracked[rid]
            assert oracle_fits(msg, f.start, self.chan.sent[rid], False, self.text), \
                f"{rid} still runs after the document moved on"

    async def step(self, op) -> None:
        kind, arg = op
        if kind == "type":
            self.edit(self.text[: self.cursor] + arg + self.text[self.cursor:], self.cursor + 1, self.cursor + 1)
        elif kind == "type_target":
            nxt = TARGET[self.cursor: self.cursor + arg] if TARGET.startswith(self.text[: self.cursor]) else "x"
            for ch in nxt:
                self.edit(self.text[: self.cursor] + ch + self.text[self.cursor:], self.cursor + 1, self.cursor + 1)
                self.check_running()
        elif kind == "backspace":
            k = min(arg, self.cursor)
            self.edit(self.text[: self.cursor - k] + self.text[self.cursor:], self.cursor - k, self.cursor - k)
        elif kind == "move":
            self.cursor = int(arg * len(self.text))
            for t in self.tasks:          # the editor cancels its pending requests ($/cancelRequest)
                t.cancel()
        elif kind == "ask":
            self.tasks.append(asyncio.ensure_future(self.ask(arg)))
        elif kind == "feed":
            running = self.chan.running()
            if running:
                self.chan.feed(self.rng.choice(running), arg)
        elif kind == "finish":
            for rid in self.chan.running()[:arg + 1]:
                self.chan.feed(rid, 10_000)
        elif kind == "accept" and self.last is not None:
            s, cursor, text = self.last
            if self.text == text and self.cursor == cursor:
                self.edit(text[:cursor] + s.text + text[cursor:], cursor + len(s.text), cursor + len(s.text))
                self.c.on_accepted(s.id, len(s.text))
            self.last = None
        elif kind == "reopen":
            self.c.on_close(URI)
            self.c.on_open(URI, "/t.py", "python", self.text)
        elif kind == "tick":
            self.clock.advance(0.2 * arg)
        for _ in range(4):
            await asyncio.sleep(0)
        self.check_running()

    async def settle(self) -> None:
        for _ in range(200):
            for rid in self.chan.running():
                self.chan.feed(rid, 10_000)
            await asyncio.sleep(0)
            if all(t.done() for t in self.tasks) and not self.chan.running():
                break
        for _ in range(40):   # a listener may still wait out its deadline: let virtual time pass it
            if all(t.done() for t in self.tasks):
                break
            self.clock.advance(0.1)
            for _ in range(4):
                await asyncio.sleep(0)
        for t in self.tasks:
            assert t.done(), "an editor request never got its answer"
            if not t.cancelled():
                t.result()
        assert not self.chan.running(), "a backend request never ended"
        assert not self.c.inflight.all()
        st = self.c.stats                  # every editor request ended in exactly one way
        assert sum(st.decisions().values()) == st.requests, (st.decisions(), st.requests)


CFG = dict(debounce_ms=50.0, deadline_ms=300.0, predictor=False, warmup=True, snippets=False, prefetch=True,
           state_dir="")


@settings(max_examples=int(__import__("os").environ.get("QC_PROPERTY_EXAMPLES", "10000")), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), ops=st.lists(OPS, min_size=1, max_size=30))
def test_no_inconsistent_suggestion_and_no_request_left_behind(seed, ops):
    async def run():
        s = Session(seed, ClientConfig(**CFG))
        for op in ops:
            await s.step(op)
        await s.settle()
    asyncio.run(run())


def test_the_sessions_exercise_every_path():
    """The random sessions must really reach cache hits, in-flight reuse, network answers and cancels."""
    totals = {"served_cache": 0, "served_inflight": 0, "served_network": 0, "cancelled": 0, "prefetches": 0}
    rng = random.Random(7)
    ops_pool = [("type_target", 1), ("type_target", 3), ("ask", False), ("feed", 5), ("finish", 0),
                ("accept", 0), ("type", "x"), ("backspace", 1), ("tick", 1)]

    async def run(seed):
        s = Session(seed, ClientConfig(**CFG))
        for _ in range(60):
            await s.step(rng.choice(ops_pool))
        await s.settle()
        for k in totals:
            totals[k] += getattr(s.c.stats, k)
    for seed in range(40):
        asyncio.run(run(seed))
    assert all(v > 0 for v in totals.values()), totals
