"""`quickcode bench sizes`' pure decisions: the steps an equal-compute budget buys, the size it ranks first."""
from quickcode.benchmarks.sizes import best_at_equal_compute, steps_for


def test_an_equal_compute_budget_gives_a_larger_model_proportionally_fewer_steps():
    small, large = 118.4e9, 463.9e9                      # cpu-target and cpu-17m, GFLOP per step at 8 × 512
    assert steps_for(small, 60, 0.08) == 676
    assert steps_for(large, 60, 0.08) == 172
    assert abs(steps_for(small, 60, 0.08) * small - steps_for(large, 60, 0.08) * large) < large


def test_without_a_budget_every_size_takes_the_same_steps_and_at_least_one():
    assert steps_for(118.4e9, 60, 0.0) == steps_for(463.9e9, 60, 0.0) == 60
    assert steps_for(463.9e9, 60, 1e-9) == 1


def test_the_best_size_is_the_lowest_final_loss_not_the_lowest_anywhere_on_its_curve():
    train = {"a": {"curve": [{"loss": 3.0}, {"loss": 3.5}]}, "b": {"curve": [{"loss": 4.0}, {"loss": 3.2}]}}
    assert best_at_equal_compute(train) == "b"
    assert best_at_equal_compute({}) is None
