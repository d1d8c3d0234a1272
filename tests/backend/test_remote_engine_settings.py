"""`engine = "openai"` in the settings and in what each request carries (quickcode/backend/remote_engine.py `_args`): a URL
is required, our logits processors give way (refused when set), speculation is the server's, and the tenant's salt
travels with a routing key derived from it. The requests themselves run against a real vLLM server:
tests/backend/test_remote_engine.py."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from tokenizers import Tokenizer

from quickcode.backend.app import build_engine
from quickcode.backend.engine import load_tokenizer
from quickcode.backend.fim import complete_prompt
from quickcode.backend.remote_engine import RemoteEngine, route_key
from quickcode.backend.settings import MODELS, Settings
from quickcode.protocol import Complete

URL = "http://vllm.internal:8000/v1"


def test_the_remote_engine_needs_a_url():
    with pytest.raises(ValidationError, match="engine_url"):
        Settings(engine="openai")
    with pytest.raises(ValidationError, match="engine_url"):
        Settings(engine="openai", engine_url="vllm:8000")


def test_logits_processors_give_way_to_the_remote_engine_and_are_refused_when_asked_for():
    s = Settings(engine="openai", engine_url=URL)
    assert (s.heal_token, s.copy_lambdas) == (False, "")
    embedded = Settings()
    assert embedded.heal_token and embedded.copy_lambdas           # the embedded default keeps both
    for asked in ({"heal_token": True}, {"copy_lambdas": "0.1,0.2"}):
        with pytest.raises(ValidationError, match='needs engine = "embedded"'):
            Settings(engine="openai", engine_url=URL, **asked)


def test_speculation_is_the_remote_servers_own():
    with pytest.raises(ValidationError, match="speculative-config"):
        Settings(engine="openai", engine_url=URL, spec_method="draft")


def test_the_api_key_is_kept_out_of_the_settings_repr():
    s = Settings(engine="openai", engine_url=URL, engine_api_key="sk-secret-value")
    assert "sk-secret-value" not in repr(s) and s.engine_api_key.get_secret_value() == "sk-secret-value"


def test_the_engine_setting_picks_the_remote_engine():
    assert isinstance(build_engine(Settings(engine="openai", engine_url=URL)), RemoteEngine)


def test_a_request_carries_the_tenants_salt_and_a_routing_key_but_no_client_text():
    engine = RemoteEngine(Settings(engine="openai", engine_url=URL, engine_model="m"))
    a = engine._args("sess:my secret id", [5, 6], "salt-a", priority=1)
    assert a["model"] == "m" and a["prompt"] == [5, 6] and a["extra_body"]["cache_salt"] == "salt-a"
    assert "priority" not in a["extra_body"]                          # fcfs servers refuse priority != 0
    assert a["extra_headers"] == {"x-user-id": route_key("salt-a")}
    assert "salt-a" not in route_key("salt-a") and route_key("salt-a") != route_key("salt-b")
    assert "secret" not in a["extra_body"]["request_id"] and a["extra_body"]["request_id"].startswith("qc-")
    shared = engine._args("sess:2", [5], None, priority=0)                 # cache_isolation shared: no salt, no pin
    assert "cache_salt" not in shared["extra_body"] and shared["extra_headers"] == {}
    prio = RemoteEngine(Settings(engine="openai", engine_url=URL, engine_priority=True, engine_route_header=""))
    b = prio._args("sess:3", [5], "salt-a", priority=1)
    assert b["extra_body"]["priority"] == 1 and b["extra_headers"] == {}


def test_a_text_prompt_is_the_ids_spelled_out_and_tokenizes_back_to_them_on_the_server():
    """`engine_prompt = "text"`: the server's tokenizer (the model folder's tokenizer.json as it is, which reads
    FIM markers as the special tokens they are) turns the text back into the very ids we built."""
    s = Settings(engine="openai", engine_url=URL, engine_prompt="text", fim_policy="always",
                 model=MODELS / "target")
    engine = RemoteEngine(s)
    engine.tokenizer, engine.template = load_tokenizer(s)
    msg = Complete(id="x", prefix="def add(a, b):\n    return a", suffix="\n\nprint(add(1, 2))\n")
    ids, _ = complete_prompt(msg, s, engine.tokenizer, engine.template, 400)
    assert engine.template.prefix_id in ids                           # a FIM prompt: special tokens in it
    args = engine._args("sess:1", ids, "salt", priority=0)
    assert isinstance(args["prompt"], str) and args["extra_body"]["add_special_tokens"] is False
    server_side = Tokenizer.from_file(str(s.target_path / "tokenizer.json"))
    assert server_side.encode(args["prompt"], add_special_tokens=False).ids == ids
