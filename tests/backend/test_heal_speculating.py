"""Token healing on a speculating engine (quickcode/backend/vllm_engine.py `_heal_steps`): vLLM runs no custom
logits processor there, so the healed text is written again by one-token requests that vLLM itself holds to the
agreeing tokens (`allowed_token_ids`), and the rest of the request speculates. A backend speculating with the
draft and healing (the session's heals nothing); tests/backend/test_logits_engine.py shows the model alone
disagrees on some of these prompts."""
from __future__ import annotations

import pytest

from quickcode.backend.settings import Settings
from tests.backend.test_logits_engine import HEALED, heal_disagreed, metric_total
from tests.conftest import ARTIFACTS, start_backend, stop_backend
from tests.support.ws_helpers import complete, open_session

pytestmark = [pytest.mark.engine]


@pytest.fixture(scope="module")
def healing_backend():
    b = start_backend(ARTIFACTS / "logs" / "backend-heal-spec.log", "spec_method=draft", "heal_token=true",
                      timeout_s=400)
    yield b
    stop_backend(b)


def test_speculation_keeps_token_healing_and_drops_only_the_copy_model():
    s = Settings(spec_method="ngram")
    assert s.heal_token and s.copy_lambdas == ""
    assert Settings(spec_method="draft", heal_token=True).heal_token
    with pytest.raises(ValueError, match="copy_lambdas needs"):
        Settings(spec_method="ngram", copy_lambdas="0.1,0.2")
    assert not Settings(engine="openai", engine_url="http://x:1/v1").heal_token


def _heal_steps(http_url: str) -> float:
    return metric_total(http_url, "quickcode_heal_steps_total")


def test_a_speculating_engine_writes_the_healed_text_again(healing_backend):
    backend = healing_backend
    before, steps_before = heal_disagreed(backend.http_url), _heal_steps(backend.http_url)
    ws, _ = open_session(backend.ws_url)
    with ws:
        got = [complete(ws, f"sh{i}", prefix, suffix="", max_tokens=8) for i, prefix in enumerate(HEALED)]
    assert all(r.kind == "done" and r.terminal["finish_reason"] in ("stop", "length") for r in got), \
        [r.terminal for r in got]
    assert heal_disagreed(backend.http_url) == before
    assert _heal_steps(backend.http_url) - steps_before >= len(HEALED), "the prefixes were not healed"
    assert sum(bool(r.text) for r in got) >= len(HEALED) - 2, [r.text for r in got]
    assert sum(r.terminal["timing"].get("spec_proposed", 0) for r in got) > 0, "nothing was speculated"
