"""A tokens file is operator input that can be wrong in every way (issue 48, item 4): each bad line is named by
its number and what is wrong with it — never its text, which could be a token pasted by mistake — a binary,
huge or unreadable file is said as such, `quickcode serve` refuses to start on one with a message and no
traceback, and the per-user metric labels stay bounded however many users the file names."""
from __future__ import annotations

import pytest

from quickcode.backend import metrics
from quickcode.backend.auth import (MAX_PROBLEMS_SHOWN, MAX_TOKENS_FILE_BYTES, Identity, TokensFileError,
                                    TokenStore, hash_token, issue, parse_entries, read_tokens_file)
from quickcode.backend.serve import check_files
from quickcode.backend.settings import Settings

H1, H2 = hash_token("qc_one"), hash_token("qc_two")


def test_good_lines_comments_teams_and_inline_entries_parse():
    text = f"# the team's tokens\n\nalice:{H1}:blue\n  bob : {H2.upper()}  \n"
    assert parse_entries(text) == {H1: Identity("alice", "blue"), H2: Identity("bob", "bob")}
    assert parse_entries(f"alice:{H1},bob:{H2}:red") == {H1: Identity("alice", "alice"), H2: Identity("bob", "red")}
    assert parse_entries(f"alice:{H1}\nalice:{H1}\n") == {H1: Identity("alice", "alice")}   # a repeat is harmless


def test_each_bad_line_is_named_by_number_and_reason_never_by_its_text():
    pasted = "qc_" + "s3cret" * 8
    text = "\n".join([f"alice:{H1}", "garbage without a colon", f"bob:{H1[:40]}", f"carol:{pasted}",
                      f"dave smith:{H2}", f"a:b:c:d:{H2}", f"erin:{H1}", "\x00\x01:" + H2])
    with pytest.raises(TokensFileError) as e:
        parse_entries(text, "tokens")
    said = str(e.value)
    assert said.startswith("tokens: 7 bad line(s):")
    assert "line 2: not user:sha256hex[:team] (1 fields)" in said
    assert "line 3: the hash is not 64 hex digits" in said
    assert "line 4: this looks like a token itself, not its hash" in said
    assert "line 5: a user (or team) name is empty or holds spaces" in said
    assert "line 6: not user:sha256hex[:team] (5 fields)" in said
    assert "line 7: the same hash as line 1, another user or team" in said
    assert "line 8: a user (or team) name" in said
    assert pasted not in said and "garbage" not in said and "smith" not in said


def test_a_file_of_garbage_is_summed_up_not_listed_whole():
    with pytest.raises(TokensFileError) as e:
        parse_entries("\n".join(f"junk {i}" for i in range(500)))
    lines = str(e.value).splitlines()
    assert "500 bad line(s)" in lines[0] and len(lines) == 1 + MAX_PROBLEMS_SHOWN + 1
    assert lines[-1].strip() == f"... and {500 - MAX_PROBLEMS_SHOWN} more"


def test_binary_huge_and_unreadable_files_are_said_as_such(tmp_path):
    binary = tmp_path / "binary"
    binary.write_bytes(b"alice:\xff\xfe\x00")
    huge = tmp_path / "huge"
    huge.write_bytes(b"#" * (MAX_TOKENS_FILE_BYTES + 1))
    for path, said in ((binary, "not UTF-8 text"), (huge, "larger than 16 MiB"),
                       (tmp_path / "gone", "cannot read it"), (tmp_path, "cannot read it")):
        with pytest.raises(TokensFileError, match=said):
            read_tokens_file(path)


def test_serve_refuses_to_start_on_bad_tokens_with_the_lines_and_no_traceback(tmp_path):
    bad = tmp_path / "tokens"
    bad.write_text(f"alice:{H1}\nnot a line\n")
    for settings in (Settings(auth_tokens_file=bad), Settings(auth_tokens=f"alice:{H1},bob:zz")):
        with pytest.raises(SystemExit) as e:
            check_files(settings)
        assert e.value.code.startswith("quickcode serve: the API tokens do not load: ")
        assert "line 2: not user:sha256hex" in e.value.code or "line 1: the hash is not 64" in e.value.code
        assert "Traceback" not in e.value.code


def test_a_reload_installs_a_new_version_whole_and_refuses_one_that_would_lock_everyone_out(tmp_path):
    f = tmp_path / "tokens"
    alice = issue(f, "alice", "blue")
    store = TokenStore(f)
    team_of = store.team_of                  # the tenancy holds this very dict
    bob = issue(f, "bob")
    done = store.install(store.read())
    assert (done.tokens, done.added, done.removed) == (2, 1, frozenset())
    assert store.user_for(bob) == "bob" and team_of == {"alice": "blue", "bob": "bob"}
    f.write_text(f"bob:{hash_token(bob)}\n")
    done = store.install(store.read())
    assert done.removed == {hash_token(alice)} and store.user_for(alice) is None and team_of == {"bob": "bob"}
    f.write_text("# nobody\n")
    with pytest.raises(TokensFileError, match="no tokens in it"):
        store.read()
    assert store.user_for(bob) == "bob"


def test_per_user_labels_are_the_tokens_users_and_bounded(monkeypatch):
    monkeypatch.setattr(metrics, "MAX_USER_LABELS", 3)
    known = {"u0", "u1", "u2", "u3", "u4"}
    labels = metrics.UserLabels(known.__contains__, enabled=True)
    assert [labels(u) for u in ("u0", "u1", "anon:x", "u2", "u3", "u0")] == ["u0", "u1", "other", "u2", "other",
                                                                           "u0"]
    assert metrics.UserLabels(known.__contains__, enabled=False)("u0") == "open"
