"""`quickcode bench quality`'s own logic: the HumanEval single-line tasks, scoring, test execution, intervals."""
from __future__ import annotations

import pytest

from quickcode.benchmarks.quality import (TestsRunner, cluster_bootstrap, exact_line, load_problems,
                                          session_bootstrap, single_line_tasks, subset, typing_share, wilson)


@pytest.fixture(scope="module")
def problems():
    return load_problems()


@pytest.fixture(scope="module")
def tasks(problems):
    return single_line_tasks(problems)


def test_every_non_blank_solution_line_is_one_task(problems, tasks):
    assert len(problems) == 164 and len(tasks) == 1033          # the papers' count
    assert len({t.task_id for t in tasks}) == len(tasks)
    for t in tasks:
        p = problems[t.problem]
        assert t.line.strip() and "\n" not in t.line
        # prefix + the removed line + the rest is the original program, character for character
        assert t.prefix + t.line + "\n" + t.suffix == p["prompt"] + p["canonical_solution"]
        assert t.prefix.endswith("\n")


def test_exact_match_compares_the_first_generated_line_stripped():
    assert exact_line("    return x + 1\n    y = 2", "        return x + 1")
    assert exact_line("return x + 1  ", "    return x + 1")
    assert not exact_line("\n    return x + 1", "    return x + 1")     # an empty first line is not the line
    assert not exact_line("    return x+1", "    return x + 1")


def test_tests_pass_for_the_canonical_line_and_fail_for_a_wrong_one(problems, tasks):
    runner = TestsRunner(problems)
    t = next(t for t in tasks if t.line.strip().startswith("return"))
    assert runner.verdict(t.problem, t.solution_with(t.line)) == "passed"
    assert runner.verdict(t.problem, t.solution_with(t.line.replace("return", "return None and"))) != "passed"
    assert runner.executed == 2
    # the same program again is not executed again; one that does not compile is never executed
    assert runner.passed_all([(t.problem, t.solution_with(t.line)), (t.problem, t.solution_with("    return ("))]) \
        == [True, False]
    assert runner.executed == 2


def test_a_program_that_loops_forever_times_out(problems, tasks):
    runner = TestsRunner(problems, timeout_s=0.5)
    t = [t for t in tasks if t.problem == "HumanEval/0"][-1]      # `    return False`, the last line
    assert not t.suffix.strip()
    indent = t.line[: len(t.line) - len(t.line.lstrip())]
    assert runner.verdict(t.problem, t.solution_with(f"{indent}while True: pass")) == "timed out"


def test_subset_is_fixed_by_the_seed_and_keeps_benchmark_order(tasks):
    a, b = subset(tasks, 200, 0), subset(tasks, 200, 0)
    assert a == b and len(a) == 200 and subset(tasks, 200, 1) != a
    order = {t.task_id: i for i, t in enumerate(tasks)}
    assert [order[t.task_id] for t in a] == sorted(order[t.task_id] for t in a)
    assert subset(tasks, 0, 0) == tasks


def test_wilson_interval():
    lo, hi = wilson(3, 200)
    assert 0.005 < lo < 0.0052 and 0.043 < hi < 0.0433
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0


def test_cluster_bootstrap_pairs_arms_on_the_same_problems():
    groups = ["a", "a", "b", "b", "c", "c"]
    same = cluster_bootstrap(groups, {"x": [1, 0, 1, 0, 0, 0], "y": [1, 0, 1, 0, 0, 0]})
    assert same["minus_first"]["y"] == [0.0, 0.0]                 # identical arms: no difference in any draw
    better = cluster_bootstrap(groups, {"x": [0] * 6, "y": [1] * 6})
    assert better["minus_first"]["y"] == [1.0, 1.0] and better["mean"]["x"] == [0.0, 0.0]


def test_typing_share_and_its_interval():
    rows = [{"chars": 100, "accepted_chars": 10}, {"chars": 100, "accepted_chars": 30}]
    assert typing_share(rows) == 0.2
    lo, hi = session_bootstrap(rows)
    assert 0.1 <= lo <= 0.2 <= hi <= 0.3


def test_idiom_lines_by_kind_count_each_arm_and_model_set():
    from pathlib import Path

    from quickcode.benchmarks.quality import Arm, _idiom_kinds

    cases = [{"kind": "return None"}, {"kind": "return None"}, {"kind": "main guard"}]
    arms = [Arm(n, Path("t"), None, [], m, "", "") for n, m in (("baseline (main)", "baseline"), ("current", "current"))]
    arms[0].results["idiom_exact"] = [True, False, False]
    arms[1].results["idiom_exact"] = [True, True, True]
    offline = {"current": {"idioms_plain": [{"kind": "return None", "exact": True}, {"kind": "return None", "exact": True},
                                            {"kind": "main guard", "exact": False}],
                           "idioms_fim": [{"kind": "return None", "exact": False}, {"kind": "return None", "exact": True},
                                          {"kind": "main guard", "exact": True}]}}
    header, rows = _idiom_kinds(arms, cases, offline)
    assert header == ["kind", "lines", "served: baseline (main)", "served: current", "plain / FIM: current"]
    assert rows == [["return None", 2, 1, 2, "2 / 1"], ["main guard", 1, 0, 1, "0 / 1"]]


def test_an_arm_with_its_own_model_folder_is_served_alone_with_no_offline_figures(tmp_path):
    """`--arm NAME:model=PATH,...` (e.g. a registry import, quickcode/draft_model/registry_model.py): that
    folder is the arm's target (named and hashed in the report), its draft only if it shares the vocabulary,
    and it shares no model set's offline figures (it has no held-out provenance of ours)."""
    import argparse
    import shutil

    from quickcode.benchmarks.quality import REPO, build_arms

    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(REPO / "models" / "target" / "tokenizer.json", other / "tokenizer.json")
    args = argparse.Namespace(baseline_rev="none", target=REPO / "models" / "target", draft=tmp_path / "no-draft",
                              set=["max_tokens_limit=64"], arm=[f"imp:model={other},spec_method=off", "copy:copy_lambdas=0.1,0.2"])
    arms, _ = build_arms(args, tmp_path)
    assert [a.name for a in arms] == ["current", "imp", "copy"]
    cur, imp, copy = arms
    assert imp.target == other and imp.model_set == "" and imp.draft is None
    assert imp.settings == ["max_tokens_limit=64", "spec_method=off"]
    assert imp.serve_settings()[0] == f"model={other}"
    assert copy.target == cur.target and copy.model_set == "current" and copy.settings[-1] == "copy_lambdas=0.1,0.2"
    # the report's speculation column: what the server does, not whether a draft folder was passed
    assert [a.speculation() for a in arms] == ["off", "off", "off"]
    cur.draft = REPO / "models" / "draft"
    assert cur.speculation() == "off"                     # the server's default: plain decoding
    cur.settings = ["spec_method=draft"]
    assert cur.speculation() == "draft"
    imp.settings = ["spec_method=ngram"]
    assert imp.speculation() == "ngram"


def test_idiom_lines_can_come_from_files_no_model_trained_on(tmp_path):
    """`--idiom-files`: each file is a document of its own, cut at the same idiom places as held-out modules."""
    from quickcode.benchmarks.quality import files_docs
    from quickcode.draft_model.evaluate import idiom_cases

    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("import os\n\n\ndef f(xs):\n    for x in xs:\n        print(x)\n    return len(xs)\n")
    b.write_text("class C:\n    def __init__(self, n):\n        self.n = n\n")
    docs, modules = files_docs([a, b])
    assert [(d.module, d.path) for d in docs] == [(f"file:{a}", str(a)), (f"file:{b}", str(b))]
    assert modules == [f"file:{a}", f"file:{b}"]
    cases = idiom_cases(docs, per_kind=5)
    assert cases and {c["path"] for c in cases} <= {str(a), str(b)}
    for c in cases:                      # each case is its document cut at the cursor, the rest of the line expected
        text = (a if c["path"] == str(a) else b).read_text()
        assert text.startswith(c["prefix"] + c["expected"]) and text.endswith(c["suffix"])
        assert "\n" not in c["expected"] and c["expected"]
