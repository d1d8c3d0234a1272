"""`quickcode bench nes`: the scoring rule both arms share, and the bench run tiny through the real language
servers and a real in-process backend whose fake engine writes the real next edit (every next edit exact, inline
completion supplying none of it) or keeps the region as it is (no next edit): the figures follow the model."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from quickcode.backend.edit_prompt import CURSOR, REGION_END, REGION_START
from quickcode.backend.fake_engine import FakeEngine
from quickcode.benchmarks import nes
from quickcode.draft_model import edit_pairs as ep
from tests.conftest import fake_settings

DOC = ("def area(width, height):\n    total = width * height\n    scale = 1\n    return total * scale\n\n\n"
       "print(area(1, 2))\n")
NEW = DOC.replace("total", "product")


def test_the_rule_counts_right_leading_words_at_the_right_place_only():
    before, after = "x = f(a)\ny = 1\n", "x = f(a, b=2)\ny = 1\n"
    assert nes.score(before, after, (7, 7, ", b=2")) == {"exact": True, "supplied": 5, "target_chars": 5}
    assert nes.score(before, after, (7, 7, ", b"))["supplied"] == 3                    # a right start
    assert nes.score(before, after, (7, 7, ", c=2"))["supplied"] == 2                  # its right words: ", "
    assert nes.score(before, after, (0, 0, ", b=2"))["supplied"] == 0                  # elsewhere
    assert nes.score(before, after, (7, 9, ", b=2)"))["supplied"] == 0                 # deletes what stays
    assert nes.score(before, after, None) == {"exact": False, "supplied": 0, "target_chars": 5}
    # the same edit written as a larger replacement is the same edit
    assert nes.score(before, after, (0, 8, "x = f(a, b=2)"))["exact"]
    assert nes.keys_of("a\n    b\n") == ["a", "\n    ", "b", "\n"]


def _records(n: int) -> list[dict]:
    run = ep.sequences(ep.hunks(DOC, NEW))[0]
    return [{"id": f"geom@1.0..1.1:geom/shapes.py#{k}", "package": "geom", "path": "geom/shapes.py",
             **ep.record_of(DOC, run)} for k in range(n)]


def _bench(fake_backend, tmp_path, script) -> dict:
    data = tmp_path / "edits"
    data.mkdir(exist_ok=True)
    (data / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _records(2)))
    b = fake_backend(FakeEngine(fake_settings(), script=script))
    args = argparse.Namespace(data=data, url=b.ws_url, sequences=2, speed=20.0, deadline_ms=5000.0, seed=0,
                              rows=tmp_path / "rows.jsonl", out=tmp_path / "report")
    return nes.run(args)


def _region(prompt: str) -> str:
    return prompt.split(REGION_START + "\n")[1].split(REGION_END)[0].replace(CURSOR, "")


def test_a_model_writing_the_real_next_edit_is_exact_and_inline_supplies_none_of_it(fake_backend, tmp_path):
    def oracle(prompt: str) -> list[str]:
        if prompt.endswith(REGION_START + "\n"):           # an edit prompt: the region with the next edit made
            return [_region(prompt).replace("return total", "return product"), REGION_END, "\n"]
        return [" # area"]                                  # a completion: text that is not the next edit
    h = _bench(fake_backend, tmp_path, oracle)
    assert h["sequences"] == 2 and h["reachable_share"] == 1.0
    assert h["nes"]["exact_rate"] == 1.0 and h["nes"]["supplied_share"] == 1.0
    assert h["inline"]["answered_share"] == 1.0 and h["inline"]["supplied_share"] == 0.0
    assert h["supplied_ratio_nes_vs_inline"] is None and not h["targets_met"]["supplied_ge_1_5x_inline"]
    rows = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert {(r["arm"], r["target_chars"]) for r in rows} == {("nes", 7), ("inline", 7)}
    assert (tmp_path / "report" / "nes.md").read_text().count("geom@1.0..1.1") == 2


def test_a_model_keeping_the_region_suggests_no_next_edit(fake_backend, tmp_path):
    def keeps(prompt: str) -> list[str]:
        return [_region(prompt), REGION_END] if prompt.endswith(REGION_START + "\n") else []
    h = _bench(fake_backend, tmp_path, keeps)
    assert h["next_edit_outcomes"]["asked"] == 2 and h["next_edit_outcomes"]["none"] == 2
    assert h["nes"]["answered_share"] == 0.0 and h["nes"]["exact_rate"] == 0.0 and h["nes"]["supplied_share"] == 0


def test_the_report_names_checkout_paths_relative_to_it():
    from quickcode.benchmarks.nes import _portable

    root = Path(__file__).resolve().parents[2]
    assert _portable(f"model={root}/runs/models-edits/smollm2-fim") == "model=runs/models-edits/smollm2-fim"
    assert _portable("profile=default") == "profile=default"
    assert _portable("model=/elsewhere/m") == "model=/elsewhere/m"
