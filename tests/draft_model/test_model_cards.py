"""Every committed model folder has a model card that says what its own files record
(quickcode/draft_model/card.py): a retrained or re-quantized model whose card was not regenerated fails here
(`quickcode model card` fixes it)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from quickcode.draft_model.card import render, write

REPO = Path(__file__).resolve().parents[2]
FOLDERS = sorted(p for p in (REPO / "models").iterdir() if (p / "model.safetensors").is_file())


def test_every_model_folder_has_an_up_to_date_card():
    assert [p.name for p in FOLDERS] == ["draft", "target", "target-int8"]
    stale = write(FOLDERS, REPO, check=True)
    assert not stale, f"out of date: {[str(p) for p in stale]} — run `quickcode model card`"


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_a_card_has_licence_data_command_and_figures(folder):
    card = (folder / "README.md").read_text()
    for heading in ("## Data", "## Figures", "## Limits"):
        assert heading in card
    assert "| license | Apache-2.0" in card
    record = json.loads((folder / ("quickcode_quant.json" if folder.name.endswith("int8") else "quickcode_train.json")).read_text())
    assert f"```bash\n{record['command']}\n```" in card


def test_a_card_follows_its_folder(tmp_path):
    """Change what the folder records and the card changes with it; figures of other weights are not claimed."""
    for f in (REPO / "models" / "target").iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    train = json.loads((tmp_path / "quickcode_train.json").read_text())
    train["result"]["loss"] = 2.5
    train["data_licences"], train["data_refused_licences"] = {"MIT": 40, "PSF-2.0": 700}, {"GPL-3.0-only": 3}
    (tmp_path / "quickcode_train.json").write_text(json.dumps(train))
    original = render(REPO / "models" / "target", REPO)
    assert "HumanEval single-line infilling: exact first line" in original   # the report measured these weights
    (tmp_path / "model.safetensors").write_bytes(b"other weights")
    card = render(tmp_path, REPO)
    assert "held out: loss 2.500" in card and "licences of the kept files: MIT 40, PSF-2.0 700" in card
    assert "refused: GPL-3.0-only 3" in card
    assert "HumanEval" not in card and "has no report of these weights yet" in card
    # a cooldown branch's export: the run's command, then the branch's
    train.update(cooldown_from="runs/long", run_command="quickcode model train --run runs/long")
    (tmp_path / "quickcode_train.json").write_text(json.dumps(train))
    card = render(tmp_path, REPO)
    assert card.index("```bash\nquickcode model train --run runs/long\n```") < card.index(
        "cooldown branch (from the latest checkpoint of `runs/long`)") < card.index(f"```bash\n{train['command']}\n```")


def test_a_draft_card_says_when_its_teacher_was_retrained(tmp_path):
    """A draft distilled on `models/target` says so; once the folder holds a target trained after the draft,
    its card says the teacher it learnt from is not the one there now."""
    (tmp_path / "models" / "target").mkdir(parents=True)
    draft = tmp_path / "models" / "draft"
    draft.mkdir()
    for f in (REPO / "models" / "draft").iterdir():
        (draft / f.name).write_bytes(f.read_bytes())
    train = json.loads((draft / "quickcode_train.json").read_text())
    assert train["teacher"] == "models/target"
    teacher = tmp_path / "models" / "target" / "quickcode_train.json"
    teacher.write_text(json.dumps({"trained_at": train["trained_at"]}))       # its own teacher: nothing said
    assert "was not distilled on it" not in render(draft, tmp_path)
    teacher.write_text(json.dumps({"trained_at": "2099-01-01 00:00:00"}))     # retrained since
    assert "trained later (2099-01-01 00:00:00), so this draft was not distilled on it" in render(draft, tmp_path)
