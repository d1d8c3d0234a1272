"""`quickcode bench quality` in pieces: a run cut by the machine's time cap is run again with the same command
and reuses the finished pieces (each arm's served figures, each model set's offline figures) — only when what
they depend on (models, settings, tasks) is the same."""
from __future__ import annotations

from quickcode.benchmarks.quality import _load_piece, _piece_key, _save_piece


def test_a_piece_is_reused_only_under_the_same_key(tmp_path):
    key = _piece_key("b1dd78791f53", None, ["spec_method=off"], 32, ["HumanEval/0/L1"])
    piece = tmp_path / "served-current.json"
    assert _load_piece(piece, key) is None                      # nothing done yet
    _save_piece(piece, key, {"humaneval": [{"text": "x = 1", "ttfc_ms": 12.5, "total_ms": 40.0}]})
    assert _load_piece(piece, key) == {"humaneval": [{"text": "x = 1", "ttfc_ms": 12.5, "total_ms": 40.0}]}
    other_model = _piece_key("0123456789ab", None, ["spec_method=off"], 32, ["HumanEval/0/L1"])
    other_tasks = _piece_key("b1dd78791f53", None, ["spec_method=off"], 32, ["HumanEval/0/L2"])
    assert _load_piece(piece, other_model) is None and _load_piece(piece, other_tasks) is None
    piece.write_text("{not json")                               # a piece cut while written is not trusted
    assert _load_piece(piece, key) is None


def test_a_piece_measured_with_other_serving_code_is_not_reused(tmp_path):
    """The baseline arm serves the committed models with the working tree's backend: a piece saved before the
    backend changed (say, before line ends were healed) must not stand for the backend of now."""
    from quickcode.benchmarks.quality import code_digest

    (tmp_path / "backend").mkdir()
    (tmp_path / "backend" / "fim.py").write_text("HEAL = False\n")
    (tmp_path / "bench.py").write_text("ASK = 1\n")
    paths = ("backend", "bench.py")
    before = code_digest(paths, tmp_path)
    assert code_digest(paths, tmp_path) == before                       # stable
    (tmp_path / "backend" / "fim.py").write_text("HEAL = True\n")
    after_edit = code_digest(paths, tmp_path)
    (tmp_path / "backend" / "heal.py").write_text("\n")                 # a new module counts too
    assert len({before, after_edit, code_digest(paths, tmp_path)}) == 3
    piece = tmp_path / "served-baseline.json"
    _save_piece(piece, _piece_key("e8520faffef1", ["HumanEval/0/L1"], before), {"humaneval": []})
    assert _load_piece(piece, _piece_key("e8520faffef1", ["HumanEval/0/L1"], code_digest(paths, tmp_path))) is None
