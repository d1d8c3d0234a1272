"""Training FIM samples are cut where an editor's cursor is, and formatted as the backend prompts.

Here with quickcode/draft_model/: the training samples are the subject, quickcode/backend/fim.py the
reference."""
from __future__ import annotations

import random
import re
from collections import Counter

from quickcode.draft_model.fim import CURSOR_KINDS, _cursor_places, cursor_cut

CODE = '''import os


class Store:
    """Keeps values."""

    def __init__(self, path, mode="r"):
        self.path = os.path.join(path, "store.db")
        self.items = {}

    def get(self, key, default=None):
        if key in self.items:
            return self.items[key]
        return default


def main():
    store = Store("/tmp")
    print(store.get("a", 1))
'''


def _samples(n: int = 3000, seed: int = 0):
    rng = random.Random(seed)
    return [cursor_cut(CODE, rng, spm_rate=0.5) for _ in range(n)]


def test_a_cut_reassembles_the_text_and_the_prefix_is_healed_as_the_backend_heals():
    from quickcode.backend.fim import heal

    healed = 0
    for s in _samples():
        assert s.prefix + s.middle + s.suffix == CODE or (s.suffix == "" and CODE.startswith(s.prefix + s.middle))
        cursor_prefix = s.prefix + (" " if s.middle.startswith(" ") else "")
        assert heal(cursor_prefix)[0] == s.prefix      # the prompt's prefix is the one the backend sends
        healed += cursor_prefix != s.prefix
    assert healed > 100                                # after `= `, `, `, `return `... and indentation


def test_cursor_places_are_editor_places_not_random_characters():
    places = _cursor_places(CODE)
    assert set(places) == set(CURSOR_KINDS)
    lines = CODE.split("\n")
    starts = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    for a, i in places["line_start"]:                   # after the indentation of a non-blank line
        assert CODE[starts[i]:a].strip() == "" and CODE[a] not in " \n"
    for a, i in places["after_punct"]:                  # after ( . = , : [ { (or the space after them)
        assert re.search(r"[(.=,:\[{] ?$", CODE[starts[i]:a])
    for a, i in places["line_end"]:
        assert CODE[a] == "\n" and CODE[a - 1] != " "
    for a, i in places["mid_identifier"]:
        assert re.match(r"\w", CODE[a - 1]) and re.match(r"\w", CODE[a])
    for a, i in places["after_word"]:                   # after a word and one space, text following
        assert re.search(r"\w $", CODE[starts[i]:a]) and CODE[a] not in " \n"
    assert (CODE.index("return default") + len("return "), 13) in places["after_word"]
    for a, i in places["line_insert"]:                  # column 0 of a non-blank line, before its indentation
        assert a == starts[i] and CODE[a - 1] == "\n" and lines[i].strip()


def test_the_middle_is_mostly_the_rest_of_the_line_with_the_suffix_present():
    samples = _samples()
    in_line = [s for s in samples if "\n" not in s.middle]
    assert len(in_line) / len(samples) > 0.5            # what inline completion asks for most
    assert sum(s.suffix != "" for s in samples) / len(samples) > 0.8
    rest_of_line = [s for s in in_line if s.suffix.startswith("\n")]
    assert rest_of_line and all((s.prefix + s.middle).split("\n")[-1] in CODE.split("\n") for s in rest_of_line)
    # sometimes the editor closed the brackets: the middle stops before them, the suffix starts with them
    assert any(s.suffix[:1] in ")]}\"'" and "\n" not in s.middle for s in samples)
    # and short blocks: whole following lines of the cursor's block
    assert any(s.middle.count("\n") >= 2 for s in samples)


def test_every_kind_occurs_and_both_orders_are_kept():
    samples = _samples()
    assert Counter(s.order for s in samples).keys() == {"psm", "spm"}
    assert abs(sum(s.order == "spm" for s in samples) / len(samples) - 0.5) < 0.05
    # a middle inside a name (mid_identifier) and a middle that is a whole indented line (line_start, healed)
    assert any(re.search(r"\w$", s.prefix) and re.match(r"\w", s.middle) for s in samples)
    assert any(s.prefix.endswith("\n       ") and s.middle.startswith(" return") for s in samples)
    # after a word and its space (after_word, healed): the prompt ends with the word, the middle starts with the
    # space — the only way a prefix ending in a whole word is trained as FIM (`return` + ` default`)
    assert any(s.prefix.endswith("        return") and s.middle.startswith(" default") for s in samples)
    assert any(s.prefix.endswith("if key") and s.middle.startswith(" in self.items:") for s in samples)


def test_a_line_insert_puts_whole_lines_above_the_cursor_line_as_single_line_infilling_asks():
    """HumanEval single-line infilling's shape: the prefix ends with a line break, the middle is whole lines
    (indentation first, each with its line break), the suffix starts at the next line's indentation."""
    inserts = [s for s in _samples() if s.prefix.endswith("\n") and s.middle.endswith("\n")
               and s.middle[:1] in " \t" + "abcdefghijklmnopqrstuvwxyz" and s.suffix[:1] not in ("\n",)]
    assert len(inserts) > 100
    one_line = [s for s in inserts if s.middle.count("\n") == 1 and s.suffix]
    assert any(s.middle == "            return self.items[key]\n" and s.suffix.startswith("        return default")
               for s in one_line)
    assert any(s.middle.count("\n") >= 2 for s in inserts)
    for s in inserts:
        assert s.prefix + s.middle + s.suffix == CODE or s.suffix == ""


def test_spm_without_the_middle_token_trains_and_prompts_the_middle_as_the_prefix_continuation(tmp_path):
    """`spm_middle_token: false` (the FIM paper's and StarCoder's SPM: prefix and middle contiguous): the
    backend's prompt ends with the prefix, and a training sample is that prompt followed by the middle and
    end-of-text — with no middle token between them; PSM keeps its middle token. A template without the key
    (every model trained before) keeps the middle token."""
    import json
    import shutil

    from tokenizers import Tokenizer

    from quickcode.backend.fim import build_prompt
    from quickcode.backend.fim_templates import FimTemplate
    from quickcode.draft_model import fim
    from quickcode.draft_model.fim import FimSample
    from quickcode.draft_model.pack import fim_ids
    from tests.conftest import REPO

    for name in ("tokenizer.json", fim.TEMPLATE_FILE):
        shutil.copy(REPO / "models" / "target" / name, tmp_path / name)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    s = FimSample("def f(x):\n    return", "\n\nprint(f(1))\n", " x + 1", "spm")
    tid = tok.token_to_id
    for joined in (False, True):
        fim.write_template(tmp_path, "spm", {**fim.template_names(tmp_path), fim.SPM_MIDDLE: not joined})
        t = FimTemplate.load(tmp_path, tok)
        assert t.spm_middle is not joined
        prompt = build_prompt(tok, t, s.prefix, s.suffix, 512)
        sample = fim_ids(tok, s, fim.template_names(tmp_path))
        mid = tok.encode(s.middle).ids
        assert sample == [*prompt, *mid, tid("<|endoftext|>")]             # training sees what serving asks
        assert prompt[-len(tok.encode(s.prefix).ids):] == tok.encode(s.prefix).ids or not joined
        assert (tid("<fim_middle>") in prompt) is not joined
    assert json.loads((tmp_path / fim.TEMPLATE_FILE).read_text())[fim.SPM_MIDDLE] is False
    psm = fim_ids(tok, FimSample(s.prefix, s.suffix, s.middle, "psm"), fim.template_names(tmp_path))
    assert tid("<fim_middle>") in psm
