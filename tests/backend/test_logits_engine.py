"""Our vLLM logits processor on the real engine (quickcode/backend/vllm_logits.py): the copy model (`copy_lambdas`) mixes
the prompt's own tokens into the greedy choice, and token healing (`heal_token`) keeps the model to tokens that
agree with the text given back. One backend with both: the copy model only on 4-token matches.

Each test shows the engine doing what the model alone (the same weights in PyTorch, the prompt built as the
backend builds it) does not, so a processor that was not loaded or not applied fails here.
"""
from __future__ import annotations

import random
import string
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ARTIFACTS, REPO, start_backend, stop_backend
from tests.support.ws_helpers import complete, open_session

pytestmark = [pytest.mark.engine, pytest.mark.slow]

MODEL = REPO / "models" / "target"
CASES = 8
# prefixes that end inside a pre-tokenizer piece: given back, the model must write them again
HEALED = ["        super().", "    x = sel", "    return self._na", "import o", "for i in ra", "    def __in",
          "        if isinst", "print(le", "    raise ValueEr", "    with op", "from collections import Ord",
          "    result.app", "    if not os.path.ex", "    parser.add_arg", "    logger.deb", "    self.assertEq"]


@pytest.fixture(scope="module")
def logits_backend():
    b = start_backend(ARTIFACTS / "logs" / "backend-logits.log", "spec_method=off", "copy_lambdas=0,0,0,0.95",
                      "heal_token=true")
    yield b
    stop_backend(b)


@pytest.fixture(scope="module")
def alone():
    """Greedy continuation by the model alone: (prompt ids → generated ids), and the tokenizer."""
    import torch

    from quickcode.benchmarks.copy_mix import first_line
    from quickcode.draft_model import evaluate as ev
    from quickcode.draft_model import tokenizer as tokmod

    tok, model, names = tokmod.load(MODEL), ev.load(MODEL), ev.template_names(MODEL)
    special = frozenset(tok.token_to_id(names[k]) for k in ("prefix_token", "suffix_token", "middle_token", "eot_token"))
    stop = special | {i for i in range(tok.get_vocab_size()) if "\n" in tok.decode([i], skip_special_tokens=False)}
    torch.set_num_threads(1)
    return (lambda ids, max_new=24: first_line(model, ids, None, stop, special, 4, max_new)), tok


def served_prompts(prefixes: list[str], tok=None, healed: bool = True) -> list[list[int]]:
    from quickcode.backend.fim import build_prompt
    from quickcode.backend.fim_templates import FimTemplate
    from quickcode.draft_model import tokenizer as tokmod

    tok = tok or tokmod.load(MODEL)
    template = FimTemplate.load(Path(MODEL), tok)
    return [build_prompt(tok, template, given_back(p, tok)[0] if healed else p, "", 960, fim_policy="mid_line")
            for p in prefixes]


def given_back(prefix: str, tok) -> tuple[str, str]:
    """`heal` as the service calls it (with the vocabulary)."""
    from quickcode.backend.fim import heal
    from quickcode.backend.heal_mask import token_texts
    return heal(prefix, True, tok, token_texts(tok))


def made_up_lines(seed: int) -> tuple[str, str]:
    """(prefix, the rest of its last line as written earlier in it): eight `a = f(b, N)` lines of unique random
    names, then one of them again up to its `(`."""
    rng = random.Random(seed)
    pool: set[str] = set()
    while len(pool) < 24:
        pool.add("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(4, 9))))
    names = sorted(pool)
    rng.shuffle(names)
    lines = [f"    {names[3 * i]} = {names[3 * i + 1]}({names[3 * i + 2]}, {rng.randrange(100)})" for i in range(8)]
    k = rng.randrange(len(lines))
    cut = lines[k].index("(") + 1
    return "def setup():\n" + "\n".join(lines) + "\n" + lines[k][:cut], lines[k][cut:]


def test_the_engine_copies_the_earlier_line(logits_backend, alone):
    cases = [made_up_lines(seed) for seed in range(CASES)]
    ws, _ = open_session(logits_backend.ws_url)
    with ws:
        got = [complete(ws, f"c{i}", prefix, suffix="", max_tokens=24) for i, (prefix, _) in enumerate(cases)]
    assert all(r.kind == "done" for r in got), [r.terminal for r in got]
    assert [r.text.split("\n")[0] for r in got] == [rest for _, rest in cases]

    # the model alone does not write most of these lines: the engine's did copy
    generate, tok = alone
    from quickcode.draft_model.evaluate import unheal
    prompts = served_prompts([p for p, _ in cases], tok)
    own = [unheal(p, tok.decode(generate(ids), skip_special_tokens=True)).split("\n")[0]
           for ids, (p, _) in zip(prompts, cases)]
    assert sum(a == rest for a, (_, rest) in zip(own, cases)) <= CASES // 2, own


def metric_total(http_url: str, name: str) -> float:
    """The sum of a Prometheus counter's samples on the backend's /metrics."""
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=10) as r:
        lines = r.read().decode().splitlines()
    return sum(float(line.rpartition(" ")[2]) for line in lines if line.startswith(name))


def heal_disagreed(http_url: str) -> float:
    return metric_total(http_url, "quickcode_heal_disagreed_total")


def test_a_healed_prefix_is_written_again_by_agreeing_tokens(logits_backend, alone):
    """Every healed request's output writes the given-back text again (none ended empty for disagreeing: the
    counter stays), and the text after it is what the user sees; the model alone would have disagreed on some
    of these prompts (its first token neither starting with the given-back text nor a start of it)."""
    before = heal_disagreed(logits_backend.http_url)
    ws, _ = open_session(logits_backend.ws_url)
    with ws:
        got = [complete(ws, f"h{i}", prefix, suffix="", max_tokens=4) for i, prefix in enumerate(HEALED)]
    assert all(r.kind == "done" and r.terminal["finish_reason"] in ("stop", "length") for r in got), \
        [r.terminal for r in got]
    assert heal_disagreed(logits_backend.http_url) == before
    assert sum(bool(r.text) for r in got) >= len(HEALED) - 2, [r.text for r in got]

    generate, tok = alone
    gave = [given_back(p, tok)[1] for p in HEALED]
    assert all(gave), gave
    firsts = [tok.decode(generate(ids, 1), skip_special_tokens=False) for ids in served_prompts(HEALED, tok)]
    disagree = [(p, f) for p, f, g in zip(HEALED, firsts, gave) if not (f.startswith(g) or g.startswith(f))]
    assert disagree, "the model alone agreed everywhere: these prompts do not show the mask"


# prefixes that end in a line end after a block opener: the new line belongs inside the block
BLOCK_OPENED = ["import os\n\n\ndef area(width, height):\n", "class Point:\n",
                "class Point:\n    def __init__(self, x, y):\n", "def load(names):\n    for name in names:\n",
                "def main():\n    args = parse_args()\n    if args.verbose:\n",
                "def read(path):\n    with open(path) as f:\n", "def parse(text):\n    try:\n",
                "def f(xs):\n    total = 0\n    for x in xs:\n"]


def _indented_deeper(prefix: str, completion: str) -> bool:
    opener = prefix.rstrip("\n").rsplit("\n", 1)[-1]
    line = completion.split("\n")[0]
    return bool(line.strip()) and len(line) - len(line.lstrip()) > len(opener) - len(opener.lstrip())


def test_a_line_end_is_given_back_so_the_new_line_comes_indented(logits_backend, alone):
    """At column 0 after a block opener the served completion is the block's first line, indented: the newline
    is given back (`heal_line_end`) and the model writes it with its indentation. The model alone, shown the lone
    newline token that training had only before column-0 code, writes column-0 text or stays at the opener's
    depth on several of the same prompts."""
    ws, _ = open_session(logits_backend.ws_url)
    with ws:
        got = [complete(ws, f"n{i}", p, suffix="", max_tokens=12) for i, p in enumerate(BLOCK_OPENED)]
    assert all(r.kind == "done" for r in got), [r.terminal for r in got]
    assert all(_indented_deeper(p, r.text) for p, r in zip(BLOCK_OPENED, got)), [r.text for r in got]

    generate, tok = alone
    own = [tok.decode(generate(ids, 12), skip_special_tokens=True)
           for ids in served_prompts(BLOCK_OPENED, tok, healed=False)]
    assert sum(not _indented_deeper(p, o) for p, o in zip(BLOCK_OPENED, own)) >= 3, own
