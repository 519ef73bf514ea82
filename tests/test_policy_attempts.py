"""The attempt budget: a job that has spent ``max_attempts`` is not run again."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batch.policy_attempts import DEFAULT_MAX_ATTEMPTS, AttemptBudget, may_attempt, retry_refusal


class TestBudget:
    def test_default_is_three_attempts(self) -> None:
        budget = AttemptBudget()
        assert DEFAULT_MAX_ATTEMPTS == 3
        assert retry_refusal(budget, "m", 2) is None
        assert retry_refusal(budget, "m", 3) == "attempt budget spent (3/3)"

    def test_per_model_override(self) -> None:
        budget = AttemptBudget(default=3, per_model={"slow": 1, "flaky": 6})
        assert retry_refusal(budget, "slow", 1) == "attempt budget spent (1/1)"
        assert retry_refusal(budget, "flaky", 5) is None
        assert retry_refusal(budget, "other", 3) == "attempt budget spent (3/3)"

    def test_cli_override_replaces_every_value_for_one_invocation(self) -> None:
        budget = AttemptBudget(default=3, per_model={"slow": 1}, override=5)
        assert retry_refusal(budget, "slow", 4) is None
        assert retry_refusal(budget, "other", 5) == "attempt budget spent (5/5)"

    def test_more_spent_than_allowed_says_so(self) -> None:
        # A budget lowered after the attempts were made: the reason shows both numbers.
        assert retry_refusal(AttemptBudget(default=2), "m", 4) == "attempt budget spent (4/2)"


@settings(max_examples=100, deadline=None)
@given(spent=st.integers(0, 50), fewer=st.integers(0, 50), limit=st.integers(1, 50),
       more=st.integers(0, 50))  # fmt: skip
def test_budget_is_monotone(spent: int, fewer: int, limit: int, more: int) -> None:
    """Fewer spent attempts or a larger budget never turn an allowed retry into a refusal."""
    if may_attempt(spent, limit):
        assert may_attempt(min(fewer, spent), limit)
        assert may_attempt(spent, limit + more)
    # The budget is exact: the number of attempts allowed from nothing is the limit.
    assert sum(may_attempt(n, limit) for n in range(limit + 10)) == limit
