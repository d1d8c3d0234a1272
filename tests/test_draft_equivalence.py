"""Greedy completions with the draft model are token-identical to completions without it, for the committed models.

The session's backend (`quickcode serve` with the defaults: models/target + models/draft speculating) answers
held-out fill-in-the-middle prompts over the WebSocket; one extra engine in a subprocess (the backend's own
engine arguments with `spec_method="off"`) answers the same prompts, built exactly as the backend builds them.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import websockets

from protocol import PROTOCOL_VERSION, Chunk, Complete, Done, Error, Hello, Welcome, decode, encode

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parent.parent
N_PROMPTS = 24
MAX_TOKENS = 32


async def _complete_all(url: str, cases: list[dict]) -> list[tuple[str, Done]]:
    """One session; the requests one after another (an idle engine never sheds), each to its done frame."""
    out = []
    async with websockets.connect(url, max_size=1 << 24, ping_interval=None, open_timeout=30) as ws:
        await ws.send(encode(Hello(protocol_version=PROTOCOL_VERSION, client="test-draft-equivalence")))
        assert isinstance(decode(await asyncio.wait_for(ws.recv(), 30)), Welcome)
        for i, c in enumerate(cases):
            await ws.send(encode(Complete(id=f"eq{i}", prefix=c["prefix"], suffix=c["suffix"], max_tokens=MAX_TOKENS,
                                          language="python", path=c["path"])))
            text = []
            while True:
                m = decode(await asyncio.wait_for(ws.recv(), 300))
                if isinstance(m, Chunk) and m.id == f"eq{i}":
                    text.append(m.text)
                elif isinstance(m, Done) and m.id == f"eq{i}":
                    out.append(("".join(text), m))
                    break
                elif isinstance(m, Error):
                    raise AssertionError(f"request eq{i}: {m}")
    return out


def test_draft_speculation_is_token_identical_to_plain_greedy(backend, tmp_path):
    from tokenizers import Tokenizer

    from backend.fim import FimTemplate, build_prompt
    from backend.settings import Settings
    from benchmarks.draft_vllm import run_subprocesses
    from draft_model.evaluate import fim_cases

    s = Settings()  # what the session's backend runs (same environment)
    assert s.spec_method == "draft", "the session backend should speculate with the draft model"
    data = REPO / "runs" / "data"
    cases = fim_cases(s.target_path, data if data.exists() else None, N_PROMPTS)
    assert len(cases) >= 20

    served = asyncio.run(_complete_all(backend.ws_url, cases))
    for text, done in served:
        assert done.finish_reason in ("stop", "length"), done
    assert sum(d.timing.spec_proposed for _, d in served) > 0, "the backend proposed no draft tokens"

    # the same prompts as the service builds them (backend/service.py: budget, template, tokenizer)
    tok = Tokenizer.from_file(str(s.target_path / "tokenizer.json"))
    template = FimTemplate.load(s.target_path, tok, s.fim_order)
    max_model_len = s.max_model_len or json.loads((s.target_path / "config.json").read_text())["max_position_embeddings"]
    budget = min(s.max_prompt_tokens, max_model_len - MAX_TOKENS - 1)
    prompts = [build_prompt(tok, template, c["prefix"], c["suffix"], budget, fim_policy=s.fim_policy) for c in cases]
    plain = run_subprocesses({"prompts": prompts, "max_tokens": MAX_TOKENS, "warmup": 1,
                              "runs": [{"name": "plain", "settings": {"spec_method": "off"}}]}, tmp_path)["plain"]

    mismatches = [(i, a, b["text"]) for i, ((a, _), b) in enumerate(zip(served, plain["requests"])) if a != b["text"]]
    assert not mismatches, f"{len(mismatches)}/{len(cases)} completions differ, first: {mismatches[0]}"
    for (_, done), ref in zip(served, plain["requests"]):
        assert done.timing.output_tokens == len(ref["token_ids"])
