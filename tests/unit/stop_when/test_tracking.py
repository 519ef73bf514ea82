"""The stop_when tracker: the stop is a function of the finished jobs, not of the order
they finished in; a case enters whole, in the random order, after every case before it."""

from __future__ import annotations

import random

from batch.stop_when.rules import (
    A_BETTER,
    B_BETTER,
    REACHED_HALF_WIDTH,
    first_stop,
    half_width_reached,
)
from batch.stop_when.tracking import StopTracker
from batch.sweep.features.stop_when import StopWhen

ORDER = [f"c{i}" for i in range(600)]
RULE = StopWhen(half_width=0.1)


def _passes(case: str, rate: float) -> bool:
    return random.Random(case).random() < rate


def test_the_stop_is_the_first_prefix_of_the_order_that_meets_the_rule() -> None:
    tracker = StopTracker(RULE, ORDER, ["m"], {"m": 1})
    stopped_at = None
    for case in ORDER:
        if tracker.record(case, "m", 1, "passed" if _passes(case, 0.8) else "failed"):
            stopped_at = case
    stop = tracker.stop_of("m")
    assert stop is not None and stop.reason == REACHED_HALF_WIDTH
    values = [float(_passes(case, 0.8)) for case in ORDER]
    expected, _ = first_stop(values, lambda b: half_width_reached(b, 0.1), 0.95, 600, target=0.1)
    assert expected is not None and stop.bounds == expected.bounds
    assert stopped_at == ORDER[expected.bounds.n - 1]


def test_finishing_out_of_order_reaches_the_same_stop() -> None:
    jobs = [(case, "m", 1, "passed" if _passes(case, 0.8) else "failed") for case in ORDER]
    in_order = StopTracker(RULE, ORDER, ["m"], {"m": 1})
    in_order.record_all(jobs)
    shuffled = jobs[:]
    random.Random(3).shuffle(shuffled)
    out_of_order = StopTracker(RULE, ORDER, ["m"], {"m": 1})
    out_of_order.record_all(shuffled)
    assert out_of_order.stop_of("m") == in_order.stop_of("m") is not None


def test_a_case_enters_only_once_every_case_before_it_has_finished() -> None:
    tracker = StopTracker(RULE, ORDER, ["m"], {"m": 1})
    for case in ORDER[1:]:
        tracker.record(case, "m", 1, "passed")
    assert tracker.standing("m").bounds.n == 0  # c0 still runs: nothing read
    assert tracker.record("c0", "m", 1, "passed") == ["m"]
    assert tracker.standing("m").bounds.n == 600


def test_a_case_is_one_unit_of_its_repeats_and_waits_for_all_of_them() -> None:
    tracker = StopTracker(RULE, ["a", "b"], ["m"], {"m": 3})
    tracker.record("a", "m", 1, "passed")
    tracker.record("a", "m", 2, "failed")
    assert tracker.standing("m").bounds.n == 0
    tracker.record("a", "m", 3, "error")  # left out: the case is 1 of 2 model outcomes
    standing = tracker.standing("m")
    assert standing.bounds.n == 1 and standing.bounds.estimate == 0.5


def test_a_case_with_only_errors_is_passed_over() -> None:
    tracker = StopTracker(RULE, ["a", "b"], ["m"], {"m": 1})
    tracker.record("a", "m", 1, "error")
    tracker.record("b", "m", 1, "passed")
    assert tracker.standing("m").bounds.n == 1
    tracker.record("c", "m", 1, "skipped")  # not final, not a case of the order: ignored


def test_a_compare_stops_both_models_on_the_sign_of_b_minus_a() -> None:
    rule = StopWhen(compare=("a", "b"), margin=0.01)
    tracker = StopTracker(rule, ORDER, ["a", "b", "c"], {"a": 1, "b": 1, "c": 1})
    stopped: list[str] = []
    for case in ORDER:
        stopped += tracker.record(case, "a", 1, "passed" if _passes(case, 0.5) else "failed")
        stopped += tracker.record(case, "b", 1, "passed" if _passes(case + "b", 0.9) else "failed")
        stopped += tracker.record(case, "c", 1, "failed")
    assert stopped == ["a", "b"]
    stop = tracker.stop_of("b")
    assert stop is not None and stop.reason == B_BETTER and stop.bounds.low > 0
    assert tracker.stop_of("a") == stop
    assert not tracker.governs("c") and tracker.stop_of("c") is None


def test_only_a_final_status_of_a_repeat_the_model_has_counts() -> None:
    tracker = StopTracker(RULE, ["a"], ["m"], {"m": 1})
    assert tracker.record("a", "m", 1, "skipped") == []
    assert tracker.record("a", "m", 0, "passed") == []  # no repeat 0
    assert tracker.record("a", "m", 2, "passed") == []  # past the model's repeats
    assert tracker.record("a", "other", 1, "passed") == []  # not a model of the sweep
    assert tracker.standing("m").bounds.n == 0


def test_record_all_says_which_models_stopped() -> None:
    tracker = StopTracker(StopWhen(half_width=0.3), ORDER[:60], ["m", "n"], {"m": 1, "n": 1})
    jobs = [(case, model, 1, "passed") for case in ORDER[:60] for model in ("m", "n")]
    assert sorted(tracker.record_all(jobs)) == ["m", "n"]


def test_a_compare_where_a_is_better_is_read_on_the_difference() -> None:
    rule = StopWhen(compare=("a", "b"))
    tracker = StopTracker(rule, ORDER, ["a", "b"], {"a": 1, "b": 1})
    assert tracker.governs("a") and tracker.governs("b") and tracker.rule_of("b") == rule
    for case in ORDER[:200]:
        tracker.record(case, "a", 1, "passed")
        tracker.record(case, "b", 1, "passed" if _passes(case, 0.3) else "failed")
    stop = tracker.stop_of("a")
    assert stop is not None and stop.reason == A_BETTER and stop.bounds.high < 0
    assert tracker.standing("b").bounds.estimate < 0  # B - A, not a rate


def test_a_pair_passes_over_a_case_either_side_has_no_outcome_for() -> None:
    tracker = StopTracker(StopWhen(compare=("a", "b")), ["x", "y"], ["a", "b"], {"a": 1, "b": 1})
    tracker.record("x", "a", 1, "error")
    tracker.record("x", "b", 1, "passed")
    tracker.record("y", "a", 1, "failed")
    tracker.record("y", "b", 1, "error")
    assert tracker.standing("a").bounds.n == 0


def test_a_models_own_rule_and_a_model_left_out() -> None:
    own = {"n": StopWhen(half_width=0.2), "o": None}
    tracker = StopTracker(RULE, ORDER, ["m", "n", "o"], {"m": 1, "n": 1, "o": 1}, own)
    assert tracker.rule_of("m") == RULE and tracker.rule_of("n") == own["n"]
    assert not tracker.governs("o") and tracker.stop_of("o") is None


def test_every_model_a_half_width_rule_stops_is_governed() -> None:
    tracker = StopTracker(RULE, ORDER, ["m", "n"], {"m": 1, "n": 1})
    assert tracker.governs("m") and tracker.governs("n") and not tracker.governs("x")
