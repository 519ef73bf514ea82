"""The pool's pure decisions, against reference computations on generated demands."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from batch.pools.bucket import BURST
from batch.pools.config import PoolConfig, strictest
from batch.pools.decide import ask, finish, join, leave
from batch.pools.share import fair_shares
from batch.pools.state import Member, PoolState, dumps, loads


def _max_min_fair(capacity: int, demands: dict[str, int]) -> list[int]:
    """Reference: of every integer allocation within the capacity and the demands, the one
    whose sorted shares are lexicographically largest (max-min fairness), as a sorted
    list (which member gets a remainder slot is a tie the reference does not decide)."""
    names = sorted(demands)
    best: tuple[int, ...] | None = None
    for shares in itertools.product(*(range(demands[n] + 1) for n in names)):
        if sum(shares) > capacity:
            continue
        key = tuple(sorted(shares))
        total = sum(shares)
        if best is None or (total, key) > (sum(best), best):
            best = key
    assert best is not None
    return sorted(best)


@given(
    st.integers(0, 9),
    st.dictionaries(st.sampled_from("abcd"), st.integers(0, 5), min_size=1),
)
def test_fair_shares_are_max_min_fair(capacity: int, demands: dict[str, int]) -> None:
    shares = fair_shares(capacity, demands, {})
    assert sorted(shares.values()) == _max_min_fair(capacity, demands)
    assert all(shares[m] <= demands[m] for m in demands)


def test_the_slot_left_over_goes_to_the_member_with_fewest_starts() -> None:
    shares = fair_shares(4, {"a": 9, "b": 9, "c": 9}, {"a": 10, "b": 3, "c": 7})
    assert shares == {"a": 1, "b": 2, "c": 1}


def test_the_strictest_declaration_holds() -> None:
    held = strictest(
        [PoolConfig(8, 6.0, False), PoolConfig(4, None, True), PoolConfig(None, 2.5, False)]
    )
    assert held == PoolConfig(4, 2.5, True)


def _member(sweep: str, config: PoolConfig, cap: int = 8) -> Member:
    return Member(sweep=sweep, declared=config, cap=cap)


def _pool(config: PoolConfig, *names: str) -> PoolState:
    state = None
    for name in names:
        state, _ = join(state, "key", name, _member(name, config), 0.0)
    assert state is not None
    return state


def test_starts_follow_the_rate_even_below_one_job_at_a_time() -> None:
    state = _pool(PoolConfig(4, 0.5, False), "a")
    granted = []
    t = 0.0
    while t < 20.0:
        if ask(state, "a", t).granted:
            granted.append(t)
            finish(state, "a", rate_limited=False, counts=True, started=t, now=t)
        t += 0.01
    # 0.5 a second: the first at once, then one every 2 s (a start made 10 ms late by the
    # steps is made up by the next, so the count is exact).
    assert len(granted) == 10
    # Never more in any window than the rate allows, with what the bucket saves up.
    for i, j in itertools.combinations(range(len(granted)), 2):
        assert j - i + 1 <= BURST + 0.5 * (granted[j] - granted[i]) + 1e-9


def _starts_every_10ms(names: str, seconds: float) -> dict[str, int]:
    state = _pool(PoolConfig(8, 6.0, False), *names)
    starts = dict.fromkeys(names, 0)
    for step in range(int(seconds * 100)):
        for name in names:
            if ask(state, name, step / 100).granted:
                starts[name] += 1
                finish(state, name, rate_limited=False, counts=True, started=0, now=0)
    return starts


def test_equal_demand_gets_equal_starts_when_the_rate_binds() -> None:
    # "bca": the member that asks first each time is not the one that joined first.
    starts = _starts_every_10ms("bca", 30.0)
    # As many starts as one member alone gets at the same steps: the rate, shared.
    assert sum(starts.values()) == sum(_starts_every_10ms("a", 30.0).values())
    assert max(starts.values()) - min(starts.values()) <= 1


def test_a_refusal_lowers_concurrency_and_rate_for_every_member_once_per_burst() -> None:
    state = _pool(PoolConfig(8, 6.0, True), "a", "b")
    assert ask(state, "a", 0.0).granted
    change = finish(state, "a", rate_limited=True, counts=False, started=0.0, now=1.0)
    assert change is not None
    assert (change.old_concurrency, change.concurrency) == (8, 4)
    assert change.rate is not None and abs(change.rate - 6.0 * 0.7) < 1e-9
    # b's attempt started before the lowering: the same burst, no second lowering.
    state.members["b"].running = 1
    assert finish(state, "b", rate_limited=True, counts=False, started=0.5, now=1.1) is None
    assert state.concurrency == 4


def test_good_finishes_raise_both_limits_up_to_the_declaration() -> None:
    state = _pool(PoolConfig(2, 4.0, True), "a")
    state.members["a"].running = 1
    finish(state, "a", rate_limited=True, counts=False, started=0.0, now=0.0)
    assert state.concurrency == 1
    for _ in range(500):
        state.members["a"].running = 1
        finish(state, "a", rate_limited=False, counts=True, started=1.0, now=1.0)
    assert (state.concurrency, state.rate) == (2, 4.0)


def test_a_pool_with_no_rate_gets_one_below_what_it_ran_at() -> None:
    state = _pool(PoolConfig(8, None, True), "a")
    for n in range(10):  # ten starts a second
        assert ask(state, "a", n * 0.1).granted
        finish(state, "a", rate_limited=False, counts=False, started=n * 0.1, now=n * 0.1)
    assert ask(state, "a", 1.0).granted
    change = finish(state, "a", rate_limited=True, counts=False, started=1.0, now=1.0)
    assert change is not None and change.rate is not None
    assert change.rate < 10.0


def test_a_member_that_leaves_gives_back_its_slots() -> None:
    state = _pool(PoolConfig(2, None, False), "a", "b")
    assert ask(state, "a", 0.0).granted
    assert ask(state, "b", 0.0).granted
    assert not ask(state, "a", 0.0).granted
    leave(state, "b")
    assert ask(state, "a", 0.0).granted


def test_a_different_declaration_is_told_what_holds() -> None:
    state, notes = join(None, "key", "a", _member("sweep-a", PoolConfig(8, 6.0, True)), 0.0)
    assert notes == []
    state, notes = join(state, "key", "b", _member("sweep-b", PoolConfig(8, 3.0, True)), 0.0)
    assert notes == []  # b's is the stricter: it holds
    assert state.rate == 3.0
    state, notes = join(state, "key", "c", _member("sweep-c", PoolConfig(4, 6.0, True)), 0.0)
    (note,) = notes
    assert "rate 3/s" in note and "sweep-b" in note and "max_concurrent 4" in note


def test_the_state_round_trips_through_json() -> None:
    state = _pool(PoolConfig(8, 6.0, True), "a", "b")
    ask(state, "a", 0.3)
    assert loads(dumps(state)) == state
