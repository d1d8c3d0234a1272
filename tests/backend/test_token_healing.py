"""Token healing beyond the space (quickcode/backend/fim.py `heal` with the tokenizer;
quickcode/backend/heal_mask.py, the mask the engine applies): what is given back, which tokens may write it
again, and the mask itself."""
from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer

from quickcode.backend.assets import models_dir
from quickcode.backend.fim import Healed, heal
from quickcode.backend.heal_mask import HealState, mask_logits, token_texts


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(str(models_dir() / "target" / "tokenizer.json"))


@pytest.mark.parametrize("prefix,given_back", [
    ("        super().", "()."),         # training had `().__` `init`: the prompt must not end in `().`
    ("    x = sel", " sel"),             # ` se` `l` as typed; ` self` in training
    ("    def __init__(", "__("),
    ("    return self._na", "na"),
    ("x = 1", " 1"),
    ("return ", " "),                    # the space rule, as before
    ("foo\t", ""), ("foo  \t", ""), ("", ""),        # whitespace other than a line end: nothing
    ("foo\n", "\n"), ("foo\n\n", "\n\n"),              # a line end: the model writes it with the indentation
    ("foo\u3000\n", "\n"),                          # ASCII whitespace only (a byte-level token may split the rest)
    ("x = é", ""),                       # non-ASCII: a byte-level token may hold part of it
    ("y = " + "a" * 300, ""),            # a piece longer than HEAL_MAX_CHARS, on any line length
])
def test_the_last_piece_is_given_back(tok, prefix, given_back):
    kept, healed = heal(prefix, True, tok)
    assert healed == given_back and kept + healed == prefix


@pytest.mark.parametrize("prefix,given_back", [
    ("        super().", "()."),         # `().__`: one token writes it and more
    ("    x = sel", " sel"),             # ` se` `l`, both given back: ` self` starts with ` sel`
    ("    x = controlCharP", "P"),       # `control` `Char` stay: no token starts with `CharP`
    ("    return None", ""),             # no token is longer than ` None`: it could only be written again
    ("return ", " "),                    # the space rule, as before
])
def test_with_the_vocabulary_only_what_one_token_can_write_is_given_back(tok, prefix, given_back):
    texts = token_texts(tok)
    kept, healed = heal(prefix, True, tok, texts)
    assert healed == given_back and kept + healed == prefix
    if healed.strip():
        assert any(len(texts.texts[i]) > len(healed) for i in texts.starting_with(healed))


@pytest.mark.parametrize("prefix", ["def f(xs):\n", "def f(xs):\n    y = 1\n\n", "x = 1\n    \n"])
def test_a_line_end_is_given_back_so_the_indentation_comes_with_it(tok, prefix):
    """The pre-tokenizer keeps a new line's indentation with its newline: a prompt ending in a lone newline
    token shows the model what training had only before column-0 code."""
    texts = token_texts(tok)
    kept, healed = heal(prefix, True, tok, texts)
    assert healed.endswith("\n") and healed.strip() == "" and kept + healed == prefix
    indented = [texts.texts[i] for i in texts.starting_with(healed) if texts.texts[i].endswith("    ")]
    assert indented                                          # tokens that write it with an indentation
    whole = tok.encode(prefix + "        for x in xs:", add_special_tokens=False)
    assert [t for t in whole.tokens if "\u010a" in t][-1] != "\u010a"   # training's tokens: newline + indent
    assert heal(prefix, True, tok, texts, line_end=False) == (prefix, "")
    assert heal(prefix) == (prefix, "")                      # without the tokenizer: only the space rule


def test_without_the_tokenizer_only_the_space_is_healed(tok):
    assert heal("        super().") == ("        super().", "")
    assert heal("return ") == ("return", " ")
    assert heal("return ", space=False) == ("return ", "")


def test_the_tokens_that_write_it_all_start_with_it(tok):
    texts = token_texts(tok)
    starting = {texts.texts[i] for i in texts.starting_with(" sel")}
    assert {" self", " select"} <= starting and all(t.startswith(" sel") for t in starting)
    assert {texts.texts[i] for i in texts.starting_with("().")} >= {"().__", "()."}
    special = set(tok.get_added_tokens_decoder())
    assert not special & set(texts.starting_with("<"))      # FIM tokens never agree with typed text


def test_the_state_allows_a_merge_or_the_typed_tokens_and_follows_what_was_written(tok):
    texts = token_texts(tok)
    ids = {t: i for i, t in enumerate(texts.texts)}
    typed = tok.encode(" sel", add_special_tokens=False).ids
    assert [texts.texts[i] for i in typed] == [" se", "l"]
    s = HealState(" sel", typed, texts)
    first = s.allowed([])
    assert set(first) == set(texts.starting_with(" sel")) | {ids[" se"]}
    assert ids[" s"] not in first and ids[" "] not in first           # never a run of single characters
    second = s.allowed([ids[" se"]])                                  # the typed token: the rest of it
    assert set(second) == set(texts.starting_with("l")) | {ids["l"]}
    assert s.allowed([ids[" se"], ids["lf"] if "lf" in ids else ids["l"]]) is None   # all of it written
    assert HealState(" sel", typed, texts).allowed([ids[" self"]]) is None


def test_the_mask_keeps_only_the_allowed_tokens_and_their_order():
    logits = torch.tensor([3.0, 1.0, 2.0, 0.5])
    out = mask_logits(logits.clone(), (1, 3))
    assert out[0] == float("-inf") and out[2] == float("-inf") and out[1] == 1.0 and out[3] == 0.5
    assert int(out.argmax()) == 1
    assert torch.equal(mask_logits(logits.clone(), ()), logits)    # never a row with nothing to sample


def test_the_service_takes_the_healed_text_off_the_stream():
    h = Healed("().")
    assert h.feed("().__") == "__" and h.feed("init") == "init"
    h = Healed(" sel")
    assert h.feed(" se") == "" and h.feed("lf") == "f"
