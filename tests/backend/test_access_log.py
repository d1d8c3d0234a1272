"""The access line of a completion in both log formats (quickcode/backend/logs.py): every field, and a client's request id
that holds a line end, quotes or spaces stays one quoted value of one line in text form, one JSON value in JSON
form (the serving process's JSON logs: tests/backend/test_token_reload.py)."""
from __future__ import annotations

import json
import logging

from quickcode.backend import logs
from quickcode.protocol import Timing

TIMING = Timing(queue_ms=0.25, tokenize_ms=0.1, ttft_ms=12.5, first_decode_ms=3.0, generate_ms=20.0, total_ms=40.0,
                prompt_tokens=120, cached_tokens=96, output_tokens=7, tokens_per_s=300.0)


def access_record(caplog, request_id: str) -> logging.LogRecord:
    with caplog.at_level(logging.INFO, logger="quickcode.access"):
        logs.access(request_id, "alice", "/v1/completions", "stop", TIMING, 31.5)
    (record,) = [r for r in caplog.records if r.name == "quickcode.access"]
    return record


def test_text_form_names_every_field_on_one_line_and_quotes_a_hostile_id(caplog):
    hostile = 'abc:q1\n2026-01-01 00:00:00 INFO quickcode.access: completion user=root "x"'
    line = logs.TextFormatter(logs.TEXT_FORMAT).format(access_record(caplog, hostile))
    assert "\n" not in line
    rest = line.split(": completion request_id=", 1)[1]
    value, end = json.JSONDecoder().raw_decode(rest)          # the id is one JSON string, then the next field
    assert value == hostile and rest[end:].startswith(" user=alice route=")
    for part in ("route=/v1/completions", "status=stop", "queue_ms=0.25", "ttft_ms=12.5", "first_chunk_ms=31.5",
                 "total_ms=40.0", "prompt_tokens=120", "cached_tokens=96", "output_tokens=7"):
        assert f" {part}" in line
    plain = logs.TextFormatter(logs.TEXT_FORMAT).format(logging.makeLogRecord({"msg": "hello", "levelname": "INFO"}))
    assert plain.endswith(": hello")                       # other records are as before


def test_json_form_is_one_object_with_the_fields_as_keys(caplog):
    out = json.loads(logs.json_formatter().format(access_record(caplog, "s1:q\n1")))
    assert out["logger"] == "quickcode.access" and out["level"] == "INFO" and out["message"] == "completion"
    assert out["request_id"] == "s1:q\n1" and out["user"] == "alice" and out["route"] == "/v1/completions"
    assert {k: out[k] for k in logs.ACCESS_FIELDS[4:]} == {
        "queue_ms": 0.25, "ttft_ms": 12.5, "first_chunk_ms": 31.5, "total_ms": 40.0, "prompt_tokens": 120,
        "cached_tokens": 96, "output_tokens": 7}
    assert "time" in out and "color_message" not in out
