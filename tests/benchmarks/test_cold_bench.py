"""`quickcode bench cold`'s prompts: distinct windows of exactly the asked length in the served model's tokens
(the timing itself needs a backend: `quickcode bench cold`)."""
from __future__ import annotations

from tokenizers import Tokenizer

from quickcode.benchmarks.cold import prompts
from tests.conftest import REPO


def test_the_cold_prompts_are_distinct_windows_of_exactly_the_asked_tokens():
    model = REPO / "models" / "target"
    texts = prompts(model, 13, 1000)
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    assert len(texts) == len(set(texts)) == 13
    # decoded and encoded again a window may merge differently at its ends: within a few tokens of the length
    assert all(abs(len(tok.encode(t, add_special_tokens=False).ids) - 1000) <= 3 for t in texts)
