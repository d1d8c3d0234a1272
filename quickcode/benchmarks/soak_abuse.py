"""The abusive clients of `quickcode bench soak`: raw WebSocket sessions that do what no editor should.

Each episode is one kind of abuse, run to its end; `Abuser.run` cycles through them until told to stop:
  * `bad_frames`: junk text and binary frames, truncated JSON, unknown kinds, fields of the wrong type;
  * `burst`: a hundred requests at once on one session, then a close before they are all answered;
  * `huge`: a prompt past max_prompt_chars, one just under it, a frame past max_frame_bytes;
  * `telemetry_flood`: thousands of telemetry frames with made-up languages and counts;
  * `churn`: sockets opened and dropped (before the hello, after it, in the middle of a request);
  * `caps`: more sessions of one user than max_sessions_per_user (a server with tokens refuses them; an open
    one names no users), each asking more than per_user_inflight at once;
and every session says hello as a user name never seen before (the metrics' label bounds are under test).
What the server answered is counted (`Abuser.counts`), never judged here: the soak's verdict is the backend's
health, and what the well-behaved editors saw meanwhile.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import random

import websockets

from quickcode.benchmarks.loadgen import Session
from quickcode.protocol import PROTOCOL_VERSION, Hello, encode

KINDS = ("bad_frames", "burst", "huge", "telemetry_flood", "churn", "caps")
_users = itertools.count()


def _user(kind: str) -> str:
    return f"abuse-{kind}-{next(_users)}"


class Abuser:
    def __init__(self, ws_url: str, seed: int, *, max_prompt_chars: int = 64_000, max_frame_bytes: int = 1 << 20,
                 sessions_per_user: int = 16, pause_s: float = 2.0):
        self.url = ws_url
        self.rng = random.Random(seed)
        self.max_prompt_chars = max_prompt_chars
        self.max_frame_bytes = max_frame_bytes
        self.sessions_per_user = sessions_per_user
        self.pause_s = pause_s
        self.counts: dict[str, int] = {}     # "<kind>.<what>" → n
        self.cycled_at: float | None = None  # the loop's time when every kind had run once

    def _count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    async def run(self, stop: asyncio.Event, kinds: tuple[str, ...] = KINDS) -> None:
        """Episodes in a shuffled cycle until `stop` is set; an episode that fails is counted, not raised."""
        order = list(kinds)
        self.rng.shuffle(order)
        loop = asyncio.get_running_loop()
        for n, kind in enumerate(itertools.cycle(order)):
            if n == len(order):
                self.cycled_at = loop.time()
            if stop.is_set():
                return
            try:
                await asyncio.wait_for(getattr(self, kind)(), 120)
                self._count(f"{kind}.episodes")
            except Exception as e:   # the server may drop an abuser at any point: that is its right
                self._count(f"{kind}.client_side_{type(e).__name__}")
            try:
                await asyncio.wait_for(stop.wait(), self.pause_s)
            except asyncio.TimeoutError:
                pass

    async def _open(self, kind: str, user: str | None = None) -> Session:
        return await Session(self.url, user or _user(kind)).open(open_timeout_s=30)

    async def _settle(self, s: Session, kind: str, wait_s: float = 5.0) -> None:
        """Give the server `wait_s` to answer, count the terminal frames it sent, close."""
        deadline = asyncio.get_running_loop().time() + wait_s
        while s.pending and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        for o in s.outcomes.values():
            self._count(f"{kind}.{o.finish or 'unanswered'}")
        self._count(f"{kind}.other_frames", len(s.other_frames))
        await s.close()

    async def bad_frames(self, n: int = 200) -> None:
        s = await self._open("bad_frames")
        junk = [lambda: bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 64))),
                lambda: '{"kind": "complete", "id": "x", "prefix": ' + '"a' * self.rng.randrange(1, 20),
                lambda: json.dumps({"kind": self.rng.choice(["welcome", "chunk", "done", "nope", 7]), "id": "j"}),
                lambda: json.dumps({"kind": "complete", "id": self.rng.randrange(10**6), "prefix": 5,
                                    "max_tokens": "many"}),
                lambda: json.dumps({"kind": "complete", "id": "neg", "prefix": "x", "max_tokens": -3}),
                lambda: json.dumps([1, 2, 3]),
                lambda: "\x00" * self.rng.randrange(1, 100),
                lambda: json.dumps({"kind": "cancel", "id": "never-sent"}),
                lambda: json.dumps({"kind": "hello", "protocol_version": PROTOCOL_VERSION, "user": "again"})]
        for _ in range(n):
            await s.ws.send(self.rng.choice(junk)())
            self._count("bad_frames.sent")
        s.complete("def f(x):\n    return ", max_tokens=4)    # the session still serves afterwards
        await self._settle(s, "bad_frames", 30)

    async def burst(self, n: int = 100) -> None:
        s = await self._open("burst")
        for i in range(n):
            s.complete(f"def burst_{i}(x):\n    return ", max_tokens=8)
        self._count("burst.sent", n)
        await asyncio.sleep(self.rng.uniform(0.0, 1.0))
        if self.rng.random() < 0.5:
            await s.close()                               # gone with requests live
            self._count("burst.closed_early")
        else:
            await self._settle(s, "burst", 30)

    async def huge(self) -> None:
        s = await self._open("huge")
        line = "    value = compute(value, other_value)  # padding\n"
        over = (line * (self.max_prompt_chars // len(line) + 2))[: self.max_prompt_chars + 1]
        under = over[: self.max_prompt_chars - 64]
        s.complete(over, max_tokens=4)
        s.complete(under, max_tokens=4)
        self._count("huge.sent", 2)
        await self._settle(s, "huge", 60)
        s = await self._open("huge")
        try:                                              # past the frame limit: refused (and maybe closed)
            await s.ws.send(json.dumps({"kind": "complete", "id": "too-big",
                                        "prefix": "x" * (self.max_frame_bytes + 1024)}))
            self._count("huge.oversized_frames")
            await asyncio.sleep(0.5)
        finally:
            await s.close()

    async def telemetry_flood(self, n: int = 3000) -> None:
        s = await self._open("telemetry_flood")
        langs = ["python", "rust", "", "x" * 40, "pyth0n", "../etc", "Python"]
        for i in range(n):
            frame = {"kind": "telemetry", "event": self.rng.choice(["shown", "accepted", "dismissed"]),
                     "id": f"t{i}", "language": self.rng.choice(langs) + ("" if i % 3 else str(i)),
                     "shown_chars": self.rng.choice([0, 5, 10**15, -1]), "accepted_chars": self.rng.randrange(100)}
            await s.ws.send(json.dumps(frame))
            if i % 500 == 0:
                await asyncio.sleep(0)
        self._count("telemetry_flood.sent", n)
        await s.close()

    async def churn(self, n: int = 40) -> None:
        for i in range(n):
            how = i % 3
            try:
                if how == 0:                              # a socket that never says hello
                    ws = await websockets.connect(self.url, open_timeout=30, ping_interval=None)
                    await ws.close()
                elif how == 1:                            # hello, welcome, gone
                    await (await self._open("churn")).close()
                else:                                     # gone in the middle of a request
                    s = await self._open("churn")
                    s.complete("import os\nimport sys\n", max_tokens=16)
                    await asyncio.sleep(self.rng.uniform(0, 0.2))
                    await s.close()
                self._count("churn.cycles")
            except Exception as e:
                self._count(f"churn.client_side_{type(e).__name__}")

    async def caps(self) -> None:
        user = _user("caps")
        sessions = []
        for _ in range(self.sessions_per_user + 4):
            try:
                sessions.append(await self._open("caps", user))
                self._count("caps.sessions_opened")
            except Exception:                             # over max_sessions_per_user: refused
                self._count("caps.sessions_refused")
        for s in sessions:
            for i in range(5):
                s.complete(f"class Cap{i}:\n    ", max_tokens=4)
        self._count("caps.sent", 5 * len(sessions))
        await asyncio.gather(*(self._settle(s, "caps", 20) for s in sessions))
