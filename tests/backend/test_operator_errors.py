"""An operator's typo is said as such: `quickcode serve` with a bad setting names it and what it takes, a line
each, and exits (a `--set`, a QUICKCODE_* variable or a config file); a model path that holds no model says which
setting and folder (it was Rust's "No such file or directory (os error 2)")."""
from __future__ import annotations

import argparse
import os

import pytest

from quickcode.backend.cli import settings_from_args


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.setenv("QUICKCODE_CONFIG", "")   # recorded: `--config` sets it, and it is undone after the test
    for name in [n for n in os.environ if n.startswith("QUICKCODE_")]:
        monkeypatch.delenv(name)


def serve_args(*sets: str, config: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(config=config, set=list(sets), host=None, port=None)


def refusal(args: argparse.Namespace) -> str:
    with pytest.raises(SystemExit) as e:
        settings_from_args(args)
    assert isinstance(e.value.code, str) and "Traceback" not in e.value.code
    return e.value.code


def test_each_bad_setting_is_named_with_what_it_takes():
    said = refusal(serve_args("dtype=bf16", "max_num_seqs=abc", "nosuch=1"))
    lines = said.splitlines()
    assert lines[0].startswith("quickcode serve: bad settings")
    assert "  dtype: Input should be 'auto', 'bfloat16', 'float16' or 'float32' (got 'bf16')" in lines
    assert any(x.startswith("  max_num_seqs: ") and "'abc'" in x for x in lines)
    assert "  nosuch: no such setting" in lines


def test_an_environment_variable_and_a_config_file_are_checked_the_same(monkeypatch, tmp_path):
    monkeypatch.setenv("QUICKCODE_DTYPE", "fp8")
    assert "  dtype: " in refusal(serve_args())
    monkeypatch.delenv("QUICKCODE_DTYPE")
    typo = tmp_path / "typo.toml"
    typo.write_text('dtyp = "float32"\n')
    assert "  dtyp: no such setting" in refusal(serve_args(config=str(typo)))
    broken = tmp_path / "broken.toml"
    broken.write_text("port = [\n")
    assert f"the config {broken} is not TOML" in refusal(serve_args(config=str(broken)))


def test_good_settings_still_come_through():
    s = settings_from_args(serve_args("dtype=float32", "max_num_seqs=4"))
    assert (s.dtype, s.max_num_seqs) == ("float32", 4)


def test_a_model_folder_that_holds_no_model_names_the_setting_and_the_folder(tmp_path):
    from quickcode.backend.engine import load_tokenizer
    from quickcode.backend.settings import Settings

    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match=f"the model folder {missing} \\(setting model\\) has no "
                                                "config.json: no such folder"):
        load_tokenizer(Settings(model=missing))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="setting model_int8\\) has no tokenizer.json$"):
        load_tokenizer(Settings(model_int8=tmp_path, precision="int8"))


def test_a_tls_or_token_file_that_is_not_there_is_named_before_anything_starts(tmp_path):
    from quickcode.backend.serve import check_files
    from quickcode.backend.settings import Settings

    cert = tmp_path / "cert.pem"
    for setting in ({"ssl_certfile": cert, "ssl_keyfile": tmp_path / "key.pem"},
                    {"auth_tokens_file": tmp_path / "tokens.json"}):
        first, path = next(iter(setting.items()))
        with pytest.raises(SystemExit, match=f"^quickcode serve: {first} {path}: no such file$"):
            check_files(Settings(**setting))
    cert.write_text("x")
    with pytest.raises(SystemExit, match="ssl_keyfile"):
        check_files(Settings(ssl_certfile=cert, ssl_keyfile=tmp_path / "key.pem"))
    check_files(Settings())   # none named: nothing to check
