"""A cooldown branch's learning-rate schedule (quickcode/draft_model/train.py `cooldown_state`, `lr_at`): pure
logic."""
from dataclasses import asdict
from pathlib import Path

import pytest

from quickcode.draft_model.configs import profile
from quickcode.draft_model.train import cooldown_state, lr_at


def _run_state(step: int, total: int, p) -> dict:
    return {"model": {}, "opt": {}, "step": step, "total": total, "history": [], "elapsed_s": 0.0, "rng": None,
            "profile": asdict(p), "hf_config": {}}


def test_a_cooldown_decays_linearly_from_where_the_run_was_to_its_minimum():
    run = profile("cpu", lr=1.5e-3, warmup_steps=300)
    state = cooldown_state(_run_state(1000, 24000, run), Path("runs/x"), 200)
    cd = state["cooldown"]
    assert state["total"] == 1200 and state["step"] == 1000
    assert cd["lr0"] == pytest.approx(lr_at(1000, 24000, run)) and cd["lr0"] > 0.99 * 1.5e-3
    assert cd["lr_end"] == pytest.approx(1.5e-3 * run.min_lr_ratio)
    # the branch trains with another profile object (its own command line): the schedule is the recorded one
    other = profile("cpu", lr=9.9, warmup_steps=0)
    rates = [lr_at(s, state["total"], other, cd) for s in range(1000, 1200)]
    assert all(a > b for a, b in zip(rates, rates[1:]))
    assert rates[0] == pytest.approx(cd["lr0"] + (cd["lr_end"] - cd["lr0"]) / 200)
    assert rates[-1] == pytest.approx(cd["lr_end"])
    # the run's own schedule is unchanged without a cooldown
    assert lr_at(1000, 24000, run, None) == pytest.approx(cd["lr0"])


def test_a_branch_of_a_branch_and_an_empty_cooldown_are_refused():
    run = profile("cpu", lr=1e-3)
    branch = cooldown_state(_run_state(500, 6000, run), Path("runs/a"), 100)
    with pytest.raises(ValueError, match="itself a cooldown"):
        cooldown_state(branch, Path("runs/a-cool"), 100)
    with pytest.raises(ValueError, match="steps"):
        cooldown_state(_run_state(500, 6000, run), Path("runs/a"), 0)
