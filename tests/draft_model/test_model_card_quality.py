"""A model card quotes the served figures of `benchmarks/reports/quality.md` for its own weights
(quickcode/draft_model/card.py quality_figures), whether that report ran with the offline PyTorch figures or
with `--skip-offline` (no `idiom_exact_plain`: it raised KeyError before)."""
from __future__ import annotations

import json
from pathlib import Path

from quickcode.draft_model.card import QUALITY_REPORT, quality_figures

SHA = "ab12cd34ef56" + "0" * 52


def _report(repo: Path, current: dict) -> None:
    path = repo / QUALITY_REPORT
    path.parent.mkdir(parents=True)
    path.write_text("# Quality\n\n_`quickcode bench quality` — 2026-11-26 22:00:00_\n\n"
                    "| arm | models | target sha256 | draft (speculation) | settings | server ready s "
                    "| note |\n|---|---|---|---|---|---|---|\n"
                    f"| current | `models/target` | {SHA[:12]} | yes | defaults | 30.0 |  |\n\n"
                    "```json\n" + json.dumps({"arms": {"current": current}}, indent=1) + "\n```\n")


SERVED = {"humaneval_exact": 0.02, "humaneval_exact_ci95": [0.0, 0.04], "humaneval_pass1": 0.01,
          "humaneval_pass1_ci95": [0.0, 0.02], "ttfc_ms_p50": 200.0, "ttfc_ms_p95": 400.0,
          "idiom_exact_served": 0.236, "idiom_exact_served_ci95": [0.16, 0.334], "idiom_cases": 89}


def test_a_skip_offline_report_gives_the_served_idiom_figure_alone(tmp_path):
    _report(tmp_path, SERVED)
    lines = quality_figures(tmp_path, SHA)
    idioms = [x for x in lines if x.startswith("- idiom lines")]
    assert idioms == ["- idiom lines of held-out modules (89 cases): served 23.6% [16.0, 33.4]"]
    assert any("HumanEval single-line infilling: exact first line 2.0%" in x for x in lines)


def test_a_report_with_offline_figures_adds_the_plain_prefix_figure(tmp_path):
    _report(tmp_path, {**SERVED, "idiom_exact_plain": 0.28, "idiom_exact_plain_ci95": [0.213, 0.358]})
    idioms = [x for x in quality_figures(tmp_path, SHA) if x.startswith("- idiom lines")]
    assert idioms == ["- idiom lines of held-out modules (89 cases): served 23.6% [16.0, 33.4], "
                      "plain prefix in PyTorch 28.0% [21.3, 35.8]"]


def test_figures_of_other_weights_are_not_quoted(tmp_path):
    _report(tmp_path, SERVED)
    assert quality_figures(tmp_path, "ff" * 32) == []
