"""Next-edit suggestions in the language server (quickcode/lsp_client/next_edit.py, edit_region.py, fresh.py): the region
around the cursor and the request made of it, the answer placed only inside the region, never stale, dropped
when the user types something else, and off by default — over a fake channel (pure logic: it records the
requests and lets the test answer them)."""
from __future__ import annotations

import asyncio

from quickcode.lsp_client import fresh
from quickcode.lsp_client.clock import VirtualClock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.documents import Doc
from quickcode.lsp_client.edit_region import NextEdit, placed
from quickcode.lsp_client.next_edit import NextEdits
from quickcode.lsp_client.stream import Lost, Stream
from quickcode.protocol import Done, Edit, FinishReason, Replace
from quickcode.protocol.edit_window import Region, edit_request, region_around

URI = "file:///m.py"
DOC = "import os\n\n\ndef add(a, b):\n    total = a + b\n    return total\n\n\nprint(add(1, 2))\n"


class EditChannel:
    """Records `edit` requests; the test answers them (`answer`) or the session cancels them."""
    connected, welcome = True, None

    def __init__(self):
        self.sent: list[Edit] = []
        self.streams: dict[str, Stream] = {}
        self.cancelled: list[str] = []

    def new_id(self) -> str:
        return f"e{len(self.sent) + 1}"

    def submit(self, msg: Edit) -> Stream:
        self.sent.append(msg)
        self.streams[msg.id] = s = Stream(msg.id)
        return s

    def cancel(self, rid: str) -> None:
        self.cancelled.append(rid)
        self.streams[rid]._push(Lost("cancelled"))

    def answer(self, rid: str, start: int, end: int, text: str) -> None:
        self.streams[rid]._push(Replace(id=rid, start_chars=start, end_chars=end, text=text))
        self.streams[rid]._push(Done(id=rid, finish_reason=FinishReason.STOP))


def setup(**cfg):
    channel, docs = EditChannel(), {URI: Doc(URI, "/m.py", "python", DOC)}
    config = ClientConfig(**{"next_edit": True, "next_edit_lines": 1, "deadline_ms": 1000.0, "debounce_ms": 0.0,
                             **cfg})
    return NextEdits(config, channel, VirtualClock(sleeps_advance=False), docs), channel, docs


async def no_wait():
    pass


def test_the_region_is_whole_lines_around_the_cursor_fewer_when_too_long():
    cursor = DOC.index("a + b")
    r = region_around(DOC, cursor, 1, 1000)
    assert DOC[r.start:r.end] == "def add(a, b):\n    total = a + b\n    return total\n" and r.cursor == cursor
    r = region_around(DOC, cursor, 1, 20)
    assert DOC[r.start:r.end] == "    total = a + b\n"
    assert region_around(DOC, cursor, 1, 5) is None
    end = region_around("a\nb", 99, 0, 100)                    # a position past the text: at its end
    assert (end.start, end.end, end.cursor) == (2, 3, 3)


def test_the_request_holds_the_region_the_cursor_and_the_text_around_it_cut_at_lines():
    cursor = DOC.index("a + b")
    r = region_around(DOC, cursor, 0, 1000)
    msg = edit_request("e1", DOC, r, ["@@ -1 +1 @@\n"], "python", "/m.py", 20, 64)
    assert msg.region == "    total = a + b\n" and msg.region[msg.cursor_chars:].startswith("a + b")
    assert msg.before == "\n\ndef add(a, b):\n" and msg.after == "    return total\n\n\n"
    assert msg.events == ["@@ -1 +1 @@\n"] and msg.max_tokens == 64
    small = edit_request("e2", DOC, r, [], "python", "/m.py", 1000, 64, max_prompt_chars=40)
    assert len(small.region) + len(small.before) + len(small.after) <= 40


def test_an_answer_is_placed_in_the_region_or_dropped():
    r = Region(DOC.index("    total"), DOC.index("    return"), DOC.index("a + b"))
    e = placed(r, Replace(id="e", start_chars=14, end_chars=15, text="*"), DOC, "e")
    assert e == NextEdit(r.start + 14, r.start + 15, "*", "e", DOC) and DOC[e.start:e.end] == "+"
    assert placed(r, Replace(id="e", start_chars=14, end_chars=99, text="*"), DOC, "e") is None
    assert placed(r, Replace(id="e", start_chars=14, end_chars=15, text="+"), DOC, "e") is None


def test_never_stale_the_same_text_an_insertion_typed_into_or_nothing():
    at = DOC.index(" + b")
    ins = NextEdit(at, at, " + c", "e", DOC)
    typed = DOC[:at] + " +" + DOC[at:]
    assert fresh.settled_edit(ins, DOC) is ins
    assert fresh.settled_edit(ins, typed) == NextEdit(at + 2, at + 2, " c", "e", typed)
    other = DOC.replace("import os", "import sys")
    assert fresh.settled_edit(ins, other) is None
    rep = NextEdit(at + 1, at + 2, "*", "e", DOC)
    assert fresh.settled_edit(rep, typed) is None


def test_off_by_default_nothing_is_asked_and_no_history_kept():
    n, channel, docs = setup(next_edit=False)
    assert ClientConfig().next_edit is False
    n.changed(URI, DOC, DOC.replace("a + b", "a - b"), 0)
    assert asyncio.run(n.suggest(URI, DOC, DOC.index("a + b"), no_wait)) is None
    assert channel.sent == [] and n.history.events(URI) == []


def test_an_edit_is_asked_with_the_history_and_answered_at_its_place_in_the_document():
    n, channel, docs = setup()
    old = DOC.replace("total", "sum_", 1)
    n.changed(URI, old, DOC, DOC.index("total") + 5)        # the user renamed sum_ to total on its first use

    async def run():
        task = asyncio.create_task(n.suggest(URI, DOC, DOC.index("a + b"), no_wait))
        await asyncio.sleep(0)
        (msg,) = channel.sent
        assert msg.region.startswith("def add") and "-    sum_ = a + b" in msg.events[0]
        channel.answer(msg.id, msg.region.index("+"), msg.region.index("+") + 1, "*")
        return await task
    e = asyncio.run(run())
    assert DOC[e.start:e.end] == "+" and e.text == "*" and e.on_text is DOC
    assert n.counts["answered"] == 1


def test_typing_while_it_is_asked_cancels_it_and_answers_nothing():
    n, channel, docs = setup()

    async def run():
        task = asyncio.create_task(n.suggest(URI, DOC, DOC.index("a + b"), no_wait))
        await asyncio.sleep(0)
        new = DOC.replace("a + b", "a + bb")
        docs[URI].text = new
        n.changed(URI, DOC, new, DOC.index("a + b") + 6)
        return await task
    assert asyncio.run(run()) is None
    assert channel.cancelled == ["e1"] and n.counts["typed_away"] == 1


def test_an_answer_made_stale_by_edits_read_before_it_is_sent_is_dropped():
    n, channel, docs = setup()

    async def edits_read():                          # caught_up: the edits the editor sent meanwhile are read
        docs[URI].text = DOC.replace("print", "pprint")

    async def run():
        task = asyncio.create_task(n.suggest(URI, DOC, DOC.index("a + b"), edits_read))
        await asyncio.sleep(0)
        msg = channel.sent[0]
        channel.answer(msg.id, 0, 3, "fed")
        return await task
    assert asyncio.run(run()) is None and n.counts["stale"] == 1


def test_a_request_on_an_older_text_than_the_document_asks_nothing():
    n, channel, docs = setup()
    docs[URI].text = DOC + "x"
    assert asyncio.run(n.suggest(URI, DOC, 3, no_wait)) is None and channel.sent == []


def test_a_key_typed_during_the_pause_before_asking_asks_nothing():
    n, channel, docs = setup(debounce_ms=50.0)

    async def run():
        task = asyncio.create_task(n.suggest(URI, DOC, DOC.index("a + b"), no_wait))
        await asyncio.sleep(0)
        assert channel.sent == []                        # still in the pause
        docs[URI].text = DOC + "#"
        n.clock.advance(0.05)
        return await task
    assert asyncio.run(run()) is None and channel.sent == []


def test_callers_at_the_same_place_share_one_request_cancelled_when_none_waits():
    """An editor's copilotInlineEdit and its inline completion ask at one pause: one backend request (two would
    supersede each other at the backend), both answered; a caller that gives up leaves the other its answer,
    and when every caller gave up the request is cancelled."""
    n, channel, docs = setup()
    at = DOC.index("a + b")

    async def shared():
        first = asyncio.create_task(n.suggest(URI, DOC, at, no_wait))
        second = asyncio.create_task(n.suggest(URI, DOC, at, no_wait))
        await asyncio.sleep(0)
        (msg,) = channel.sent
        first.cancel()                                   # one caller gives up: the request stays
        await asyncio.sleep(0)
        assert channel.cancelled == []
        channel.answer(msg.id, msg.region.index("+"), msg.region.index("+") + 1, "*")
        return first, await second
    first, e = asyncio.run(shared())
    assert first.cancelled() and e is not None and e.text == "*" and n.asking == {}

    async def abandoned():
        tasks = [asyncio.create_task(n.suggest(URI, DOC, at, no_wait)) for _ in range(2)]
        await asyncio.sleep(0)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0)
    asyncio.run(abandoned())
    assert len(channel.sent) == 2 and channel.cancelled == [channel.sent[1].id] and n.asking == {}
