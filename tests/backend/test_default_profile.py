"""The embedded default end to end: a bare `quickcode serve` (the default profile: SmolLM2-135M with our FIM
adapter, INT8, built by scripts/setup.sh) says what it serves, a real LSP client gets a whole line of ghost text
from it where the code around the cursor decides the line, and `quickcode probe`'s requests time its answers.

Here with quickcode/backend/: the subject is the profile `quickcode serve` picks; the LSP client drives it."""
from __future__ import annotations

import asyncio
import json
import sys
import urllib.request

import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from quickcode.backend.launch import start_backend, stop_backend
from tests.conftest import ARTIFACTS
from tests.lsp_client.test_lsp_e2e import URI, capabilities, open_doc, quiet_status, wait_connected

pytestmark = pytest.mark.engine

# the cursor at ║: a body that the signature, the docstring and the suffix decide
BEFORE = 'def average(values):\n    """The mean of a list of numbers."""\n    total = sum(values)\n    return '
AFTER = "\n\n\nprint(average([1, 2, 3]))\n"


@pytest.fixture(scope="module")
def default_backend():
    b = start_backend(ARTIFACTS / "logs" / "backend-default-profile.log", env={"QUICKCODE_PROFILE": "default"},
                      timeout_s=600)
    yield b
    stop_backend(b)


def readyz(backend) -> dict:
    with urllib.request.urlopen(f"{backend.http_url}/readyz", timeout=5) as r:
        return json.loads(r.read())


def test_a_bare_serve_says_it_serves_the_default_profile_and_why(default_backend):
    r = readyz(default_backend)
    assert (r["profile"], r["precision"], r["target"], r["spec_method"]) == (
        "default", "int8", "smollm2-fim-int8", "off")
    assert r["profile_why"] == "profile = 'default' was set"
    assert "serving profile default" in default_backend.log_tail(400)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def client(lsp_client: LanguageClient, default_backend):
    quiet_status(lsp_client)
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=capabilities(), root_uri="file:///tmp/quickcode_e2e",
        initialization_options={"endpoints": [default_backend.ws_url], "predictor": False, "warmup": False,
                                "suggestion_unit": "line", "deadline_ms": 60_000}))   # what, not how fast
    await wait_connected(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_the_default_writes_the_line_the_code_around_it_decides(client: LanguageClient):
    text = BEFORE + AFTER
    open_doc(client, text)
    pos = T.Position(line=BEFORE.count("\n"), character=len(BEFORE) - BEFORE.rfind("\n") - 1)
    params = T.InlineCompletionParams(
        text_document=T.TextDocumentIdentifier(uri=URI), position=pos,
        context=T.InlineCompletionContext(trigger_kind=T.InlineCompletionTriggerKind.Invoked))
    # a line still being written shows its settled words first; the editor asks again (as on
    # $/quickcode/moreText) and is served from the same generation until the line is whole
    line, seen = "", []
    for _ in range(60):
        result = await client.text_document_inline_completion_async(params)
        assert result.items, "no ghost text from the default profile"
        line = result.items[0].insert_text
        seen.append(line)
        if len(seen) > 3 and seen[-1] == seen[-4]:
            break
        await asyncio.sleep(0.25)
    assert line.replace(" ", "") in ("total/len(values)", "total/float(len(values))"), seen


def test_the_probe_times_typing_size_answers_of_the_default(default_backend):
    """quickcode/backend/speed_probe.py's requests on the real engine: each answered (an error status raises) and
    timed, and the record made of them (the verdict on it is pure: tests/backend/test_profiles.py)."""
    from datetime import datetime, timezone

    from quickcode.backend import speed_probe

    times = speed_probe.measure(default_backend.http_url, 4, warmup=1)
    assert len(times) == 4 and all(0 < t < 60_000 for t in times), times
    record = speed_probe.make_record(times, speed_probe.this_machine(), "1:1", datetime.now(timezone.utc))
    assert record["requests"] == 4 and 0 < record["answer_p50_ms"] <= record["answer_p95_ms"] <= max(times)
