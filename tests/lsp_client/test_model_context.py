"""The prompt never exceeds the context the served model was trained on: the folder's metadata → the engine's
context and prompt budget → the welcome → the language server's windows.

Here with quickcode/lsp_client/: the windows are the client's; the backend only reports the context."""
from __future__ import annotations

import asyncio
import json
import random

from quickcode.backend.model_info import context_chars, model_info, prompt_budget_tokens, served_max_model_len
from quickcode.backend.settings import Settings
from quickcode.lsp_client.clock import VirtualClock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.context import window_chars
from quickcode.lsp_client.session import Session as LspSession
from quickcode.protocol import Welcome
from tests.lsp_client.test_session_property import FakeChannel


def _folder(tmp_path, train: dict | None, positions: int | None):
    if train is not None:
        (tmp_path / "quickcode_train.json").write_text(json.dumps(train))
    if positions is not None:
        (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": positions}))
    return tmp_path


def test_the_trained_context_bounds_the_served_context(tmp_path):
    info = model_info(_folder(tmp_path, {"trained_context_tokens": 512, "data_summary": {"chars_per_token": 3.5}}, 2048))
    assert (info.context_tokens, info.trained_context_tokens, info.chars_per_token) == (512, 512, 3.5)
    assert served_max_model_len(Settings(model=tmp_path)) == 512
    assert served_max_model_len(Settings(model=tmp_path, max_model_len=1024)) == 1024   # an operator's choice wins


def test_a_folder_without_metadata_keeps_its_positions(tmp_path):
    assert model_info(_folder(tmp_path, None, 2048)).context_tokens == 2048
    assert model_info(tmp_path / "missing").context_tokens is None
    (tmp_path / "bad").mkdir()
    bad = model_info(_folder(tmp_path / "bad", {"trained_context_tokens": "512"}, None))
    assert bad.context_tokens is None and bad.chars_per_token > 0


def test_the_committed_models_record_their_training_window():
    s = Settings()
    for folder in (s.model, s.model_int8):             # the target continued on 1,024-token windows
        assert model_info(folder).trained_context_tokens == 1024, folder
    assert model_info(s.draft_model).trained_context_tokens == 512
    assert served_max_model_len(s) == 1024


def test_the_prompt_budget_leaves_room_for_the_completion_whatever_max_tokens():
    assert prompt_budget_tokens(1536, 512, 64) == 448
    assert prompt_budget_tokens(300, 512, 64) == 300
    assert prompt_budget_tokens(1536, 2048, 64) == 1536
    assert context_chars(448, 3.77) == int(448 * 3.77 * 0.85)


def _welcome(context_chars: int) -> Welcome:
    return Welcome(protocol_version=1, session_id="s", context_chars=context_chars)


def test_windows_fit_the_welcomes_context():
    cfg = ClientConfig(prefix_max_chars=3000, suffix_max_chars=800)
    assert window_chars(cfg, None) == (3000, 800)                     # not connected: the settings
    assert window_chars(cfg, _welcome(0)) == (3000, 800)              # an older server: the settings
    assert window_chars(cfg, _welcome(1400)) == (1050, 350)
    assert window_chars(ClientConfig(prefix_max_chars=500, suffix_max_chars=100), _welcome(1400)) == (500, 100)
    assert window_chars(cfg, _welcome(2)) == (2, 0)


def _first_prefill(context: int) -> str:
    chan = FakeChannel(random.Random(0))
    if context:
        chan.welcome = _welcome(context)
    c = LspSession(ClientConfig(), chan, clock=VirtualClock(), rng=random.Random(0).random)
    text = "".join(f"value_{i} = compute(value_{i - 1}, {i})\n" for i in range(1, 400))

    async def run():
        c.on_open("file:///t.py", "/t.py", "python", text)
        await asyncio.sleep(0)
    asyncio.run(run())
    (msg,) = [m for m in chan.msgs.values() if m.prefill_only]
    return msg.prefix


def test_the_language_server_sends_no_more_than_the_model_reads():
    assert 2500 < len(_first_prefill(0)) <= 3000
    prefix = _first_prefill(1600)
    assert 0 < len(prefix) <= 1200
