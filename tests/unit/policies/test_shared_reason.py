"""A crashed harness seen in the finishes (batch.policies.halt.broken_setup,
batch.policies.shared_reason)."""

from __future__ import annotations

from batch.policies.halt import Finish, broken_setup
from batch.policies.shared_reason import SharedReason, shared_reasons

CRASH = "exit code 1: RuntimeError: inspect refused task path"


def crash(model: str, status: str = "failed", category: str = "model_failure") -> Finish:
    return Finish(status, category, CRASH, model=model)


def test_the_same_failure_across_models_is_a_broken_setup_whatever_the_category() -> None:
    finishes = [crash("a"), crash("b", "error", "task_data"), crash("c")] * 3
    assert broken_setup(finishes, 8) == finishes[0]


def test_one_models_alike_failures_or_different_reasons_are_the_models_own() -> None:
    assert broken_setup([crash("a")] * 8, 8) is None
    differing = [
        Finish("failed", "model_failure", f"wrong on c{n}", model=m) for n in range(4) for m in "ab"
    ]
    assert broken_setup(differing, 8) is None
    with_a_pass = [crash("a"), crash("b")] * 3 + [Finish("passed", None, "", model="a"), crash("b")]
    assert broken_setup(with_a_pass, 8) is None


def test_most_failures_sharing_a_reason_are_found_per_model() -> None:
    rows = [("m", "failed", CRASH)] * 3 + [("m", "failed", "wrong"), ("m", "passed", None)]
    rows += [("n", "failed", CRASH), ("n", "failed", "x"), ("n", "failed", "y")]
    rows += [("e", "error", CRASH)] * 5  # an error is already said not to be the model's
    assert shared_reasons(rows) == [SharedReason("m", 3, 4, CRASH)]
    assert shared_reasons([("m", "failed", CRASH)] * 2) == []  # too few to tell
