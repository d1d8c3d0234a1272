"""The simulated developer's Enter: the editor indents the new line (what VS Code, Neovim and JetBrains do)."""
import asyncio

from quickcode.benchmarks.editor_sim import _indent_at


def test_enter_brings_the_next_lines_indentation_and_nothing_on_a_blank_line():
    text = "def f(x):\n    if x:\n\t\treturn 1\n\n   \nend"
    after_each_newline = [_indent_at(text, i + 1) for i, ch in enumerate(text) if ch == "\n"]
    assert after_each_newline == ["    ", "\t\t", "", "", ""]


def test_a_segment_cut_off_in_the_indentation_is_indented_by_enter_not_typed_space_by_space():
    """The typed segment ends after a newline and some of the next line's indentation: Enter brings it (typing it
    key by key would teach the client that people type fast at line starts)."""
    assert _indent_at("        else:\n          ", len("        else:\n")) == "          "
    assert _indent_at("x\n", 2) == ""


def test_the_developers_pauses_and_coins_depend_only_on_the_seed_and_the_place():
    """Two language servers typing the same segment meet the same pauses at the same places (whatever each
    showed or had accepted before): the typing benchmark compares them place by place."""
    from quickcode.benchmarks.editor_sim import SimEditor, TypingModel

    a, b = SimEditor(["true"], seed=7), SimEditor(["true"], seed=7)
    b.rng_at(3).random()                                   # history does not move the stream of a place
    m = TypingModel()
    assert [m.gap_ms(a.rng_at(i), "x") for i in range(5)] == [m.gap_ms(b.rng_at(i), "x") for i in range(5)]
    assert m.gap_ms(SimEditor(["true"], seed=8).rng_at(0), "x") != m.gap_ms(a.rng_at(0), "x")


def test_a_sessions_counts_are_read_off_its_position_logs():
    """Requests, shows and acceptances are counted from the logs the benchmark attributes by place: the two
    can never disagree."""
    from quickcode.benchmarks.editor_sim import SessionResult

    res = SessionResult(asks=[{"at": 0}, {"at": 1}, {"at": 1}], shows=[{"at": 1, "text": "ab"}],
                        accepts=[{"at": 1, "text": "ab"}, {"at": 5, "text": "c\n"}])
    assert (res.requests, res.shown, res.accepted, res.accepted_chars) == (3, 1, 2, 4)
    assert res.accepted_texts == ["ab", "c\n"]


def test_a_partial_accept_is_reported_as_editors_report_it_the_item_and_the_length_accepted_so_far():
    """textDocument/didPartiallyAcceptCompletion with the item as the server sent it (its accept command names
    the suggestion) and acceptedLength: what our VS Code extension and Neovim plugin send."""
    from lsprotocol import types as T

    from quickcode.benchmarks.editor_sim import SimEditor

    ed = SimEditor(["true"])
    sent = []
    ed.client.protocol.notify = lambda method, params=None: sent.append((method, params))
    args = [{"id": "r7+2", "chars": 19}]
    item = T.InlineCompletionItem(insert_text="return self.height\n",
                                  command=T.Command(title="t", command="quickcode.accept", arguments=args))
    ed.partially_accepted(item, 12)
    assert sent == [("textDocument/didPartiallyAcceptCompletion", {
        "item": {"insertText": "return self.height\n",
                 "command": {"title": "t", "command": "quickcode.accept", "arguments": args}},
        "acceptedLength": 12})]


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time: waiting for the next timer moves the clock on, not the machine (the
    simulated developer's pauses cost nothing and no outcome depends on how fast the machine is)."""

    def __init__(self):
        super().__init__()
        self.now_s = 0.0
        select = self._selector.select

        def virtual_select(timeout=None):
            self.now_s += timeout or 0.0
            return select(0)

        self._selector.select = virtual_select

    def time(self) -> float:
        return self.now_s


def _scripted_editor(suggest, style: str = "vscode"):
    """A SimEditor whose language server answers `suggest(document text)` at once (None: nothing), recording
    what the editor sends: (kind, what) for accept commands and partial-accept reports."""
    from lsprotocol import types as T

    from quickcode.benchmarks.editor_sim import SimEditor

    ed = SimEditor(["true"], seed=3, style=style)
    ed.uri, ed.version, sent = "file:///x.py", 1, []
    ed.client.text_document_did_change = lambda params: None

    def ask(invoked=False):
        fut = asyncio.get_running_loop().create_future()
        text = suggest(ed.text)
        fut.set_result(T.InlineCompletionList(items=[T.InlineCompletionItem(
            insert_text=text, command=T.Command(title="t", command="quickcode.accept",
                                                arguments=[{"id": f"r{len(ed.text)}"}]))] if text else []))
        ed._msg_id += 1
        return ed._msg_id, fut

    async def command(name, *args):
        sent.append(("command", args[0]["id"]))

    ed.ask, ed.cancel, ed.command = ask, lambda msg_id: None, command
    ed.partially_accepted = lambda item, n: sent.append(("partial", n))
    return ed, sent


def _type(developer: str, suggest, target: str, style: str = "vscode", accept_prob: float = 1.0):
    from quickcode.benchmarks.editor_sim import TypingModel

    ed, sent = _scripted_editor(suggest, style)
    loop = _VirtualTimeLoop()
    ed.now_ms = lambda: loop.time() * 1000
    try:
        res = loop.run_until_complete(ed.type_text(target, TypingModel(accept_prob=accept_prob, typo_rate=0.0,
                                                                       developer=developer)))
    finally:
        loop.close()
    return res, sent, ed.text


TARGET = "x = compute(a)\ny = 2\n"


def _suggest(doc: str) -> str | None:
    """Right words then a wrong one after 'x = ', all right after 'y'."""
    return {"x = ": "compute(b)\n", "x = compute(a)\ny": " = 2\n"}.get(doc)


def test_the_word_developer_takes_the_right_words_reports_each_press_and_types_on_from_there():
    res, sent, text = _type("word", _suggest, TARGET)
    assert text == TARGET
    assert [(a["at"], a["text"], a["partial"]) for a in res.accepts] == [(4, "compute(", True),
                                                                          (16, " = 2\n", False)]
    assert sent == [("partial", len("compute")), ("partial", len("compute(")), ("command", "r16")]
    assert res.accepted_chars == len("compute(") + len(" = 2\n")


def test_the_whole_developer_takes_only_what_is_right_to_its_end():
    res, sent, text = _type("whole", _suggest, TARGET)
    assert text == TARGET
    assert [(a["at"], a["text"], a["partial"]) for a in res.accepts] == [(16, " = 2\n", False)]
    assert sent == [("command", "r16")]


def test_neovim_keeps_showing_the_rest_of_an_item_typed_into_until_an_answer_replaces_it():
    """Neovim re-shows the item a key typed into (its rest) at once, and asks by itself only 200 ms after the
    last key (style "neovim-pause"). VS Code drops the ghost text at every key and asks again."""
    import pytest

    from quickcode.benchmarks.editor_sim import SimEditor

    def suggest(doc):
        return " compute(a)" if doc == "x =" else None

    res, _, _ = _type("whole", suggest, TARGET, style="neovim-pause", accept_prob=0.0)
    reshow = [s for s in res.shows if s["text"] == "compute(a)"]
    assert reshow and reshow[0]["at"] == 4, res.shows
    asked_there = [a for a in res.asks if a["at"] == 4]
    assert not asked_there or reshow[0]["t_ms"] < asked_there[0]["t_ms"]    # shown before Neovim asks there
    rests = [s["text"] for s in res.shows if s["at"] >= 4]
    assert rests[:2] == ["compute(a)", "ompute(a)"]            # and on, key by key, while no answer comes

    res, _, _ = _type("whole", suggest, TARGET, style="vscode", accept_prob=0.0)
    assert [s["text"] for s in res.shows] == [" compute(a)"]
    with pytest.raises(ValueError):
        SimEditor(["true"], style="emacs")


def test_vscode_1_100_asks_50_ms_after_the_last_key_and_keeps_an_item_typed_into():
    """VS Code 1.100 debounces automatic inline-completion requests by 50 ms (`quickcode bench vscode`) and
    keeps showing an item typed into; the "vscode" style asks on the key itself. Same developer, same virtual
    clock: every ask comes 50 ms later than the key's own ask."""
    def suggest(doc):
        return " compute(a)" if doc == "x =" else None

    at_key, _, _ = _type("whole", suggest, TARGET, style="vscode", accept_prob=0.0)
    later, _, _ = _type("whole", suggest, TARGET, style="vscode-1.100", accept_prob=0.0)
    first = {}
    for a in at_key.asks:
        first.setdefault(a["at"], a["t_ms"])
    delays = [round(a["t_ms"] - first[a["at"]], 3) for a in later.asks if a["at"] in first]
    assert delays and all(50.0 <= d <= 55.0 for d in delays), delays    # wake-ups shift keys by 1–2 ms
    reshow = [s for s in later.shows if s["text"] == "compute(a)"]      # the key typed into it: its rest at once
    assert reshow and reshow[0]["at"] == 4 and reshow[0]["t_ms"] < min(a["t_ms"] for a in later.asks if a["at"] == 4)
