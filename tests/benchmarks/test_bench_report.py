"""The benchmarks' one plotting helper (quickcode/benchmarks/report.py): a headless figure, saved beside the
report, shown in it, and closed."""
from __future__ import annotations

from quickcode.benchmarks.report import Report, figure


def test_a_figure_is_saved_beside_the_report_shown_in_it_and_closed(tmp_path):
    import matplotlib.pyplot as plt

    rep = Report("demo", "Demo", out=tmp_path)
    fig, axes = figure(1, 2, figsize=(4, 2))
    axes[0].plot([0, 1], [1, 0])
    assert plt.fignum_exists(fig.number)
    path = rep.add_figure(fig, "lines", "two lines")
    assert path == tmp_path / "demo_lines.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert rep.sections == ["![two lines](demo_lines.png)\n"]
    assert not plt.fignum_exists(fig.number)
