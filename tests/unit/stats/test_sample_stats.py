"""Summary rows as repeated samples (``batch.stats.repeats_rows``): what each (case, model)
counts as samples, how groups are named and split, and paired comparisons, each checked
against a direct count over the rows."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from batch.stats.repeats import CaseSamples
from batch.stats.repeats_rows import (
    CaseMeans,
    best_model,
    case_samples,
    cluster_samples,
    clusters_by,
    figure_samples,
    group_repeats,
    has_repeats,
    model_pairs,
    pair_plan,
    paired,
    row_repeat,
    row_score,
)


def row(case: str, model: str, status: str, **keys: Any) -> dict[str, Any]:
    return {"case": case, "model": model, "status": status, **keys}


def test_a_case_counts_model_outcomes_errors_and_the_scores_of_its_outcomes_only() -> None:
    rows = [
        row("c1", "m", "error", score=0.9),  # an error's score is no sample's
        row("c1", "m", "passed", score=0.5, repeat=2),
        row("c1", "m", "failed", score=1, repeat=3),  # an int score is a number too
        row("c1", "m", "passed", repeat=4),  # no score: a sample all the same
        row("c1", "m", "skipped", repeat=5),
        row("c1", "m", "pending", score=0.3, repeat=6),
        row("c2", "m", "failed", score=True),  # a boolean is not a score
        row("c2", "m", "passed", score=float("nan"), repeat=2),
    ]
    assert case_samples(rows) == [
        CaseSamples("c1", finished=3, passed=2, errors=1, scores=(0.5, 1.0)),
        CaseSamples("c2", finished=2, passed=1, errors=0, scores=()),
    ]
    assert all(type(s) is float for s in case_samples(rows)[0].scores)


def test_clusters_are_in_first_seen_order_and_named_with_their_model_when_there_are_several() -> (
    None
):
    rows = [row("b", "m2", "passed"), row("a", "m1", "failed"), row("b", "m1", "passed")]
    clusters = cluster_samples(rows)
    assert list(clusters) == [("b", "m2"), ("a", "m1"), ("b", "m1")]
    assert [c.case for c in case_samples(rows)] == ["b x m2", "a x m1", "b x m1"]
    one_model = [row("b", "m", "passed"), row("a", "m", "failed")]
    assert [c.case for c in case_samples(one_model)] == ["b", "a"]


def test_for_the_figures_only_a_flaky_case_is_named_with_its_model() -> None:
    rows = [
        *(row("a", "m1", status, repeat=r) for r, status in ((1, "passed"), (2, "failed"))),
        *(row("a", "m2", "passed", repeat=r) for r in (1, 2)),
        *(row("b", "m1", "failed", repeat=r) for r in (1, 2)),
    ]
    named = figure_samples(cluster_samples(rows))
    assert [c.case for c in named] == ["a x m1", "a", "b"]
    assert named[0] == CaseSamples("a x m1", 2, 1)
    assert [c.case for c in figure_samples(cluster_samples(rows[:2]))] == ["a"]
    assert figure_samples({}) == []


def test_clusters_split_by_model_or_by_case() -> None:
    rows = [row(c, m, "passed") for c in ("c1", "c2") for m in ("m1", "m2")]
    clusters = cluster_samples(rows)
    by_model = clusters_by(clusters, "model")
    assert list(by_model) == ["m1", "m2"]
    assert list(by_model["m2"]) == [("c1", "m2"), ("c2", "m2")]
    by_case = clusters_by(clusters, "case")
    assert list(by_case) == ["c1", "c2"]
    assert list(by_case["c2"]) == [("c2", "m1"), ("c2", "m2")]


def test_repeats_are_more_than_one_row_of_a_case_and_model() -> None:
    assert not has_repeats([row("c1", "m", "passed"), row("c1", "n", "passed")])
    assert has_repeats([row("c1", "m", "passed"), row("c1", "m", "failed", repeat=2)])
    assert not has_repeats([])


@pytest.mark.parametrize(
    ("value", "repeat"), [(None, 1), (3, 3), (1, 1), (0, 1), (-2, 1), (True, 1), (2.0, 1)]
)
def test_a_row_without_a_whole_repeat_is_repeat_1(value: Any, repeat: int) -> None:
    assert row_repeat(row("c", "m", "passed", repeat=value)) == repeat


@pytest.mark.parametrize(
    ("value", "score"),
    [(0.25, 0.25), (3, 3.0), (None, None), (False, None), ("1", None), (math.inf, None)],
)
def test_a_rows_score_is_a_finite_number(value: Any, score: float | None) -> None:
    assert row_score(row("c", "m", "passed", score=value)) == score


def test_a_group_of_rows_gets_the_repeats_figures_of_its_clusters() -> None:
    rows = [row("c1", "m", "passed", repeat=r) for r in (1, 2)] + [
        row("c2", "m", "failed"),
        row("c2", "m", "passed", repeat=2),
    ]
    figures = group_repeats(rows)
    assert figures["samples"] == 4 and figures["k_max"] == 2
    assert figures["flaky_cases"] == ["c2"]
    assert figures["pass_at_k"]["1"]["estimate"] == 0.75


# --- paired comparisons ---------------------------------------------------------------------


def single_samples(outcomes: str, model: str) -> list[dict[str, Any]]:
    """One row per case ``c<i>``: ``P`` passed, ``F`` failed, ``E`` error, ``-`` no row."""
    status = {"P": "passed", "F": "failed", "E": "error"}
    return [row(f"c{i}", model, status[o]) for i, o in enumerate(outcomes) if o != "-"]


def test_one_sample_a_side_is_compared_by_mcnemar_over_the_shared_cases() -> None:
    a = single_samples("PPPFFPE-P", "A")
    b = single_samples("PFFPFP-PP", "B")
    got = paired(a, b)
    # Shared, with a model outcome on both sides: c0..c5 and c8 (c6 is A's error, c7 B's).
    assert got["pass_rate_diff"]["cases"] == 7
    assert got["pass_rate_diff"]["estimate"] == pytest.approx((0 - 1 - 1 + 1 + 0 + 0 + 0) / 7)
    assert got["mcnemar"]["a_only"] == 2 and got["mcnemar"]["b_only"] == 1
    assert got["mcnemar"]["p"] == pytest.approx(1.0)
    assert "score_diff" not in got


def test_repeats_on_either_side_leave_mcnemar_out_and_compare_case_means() -> None:
    a = single_samples("PF", "A")
    b = [*single_samples("PF", "B"), row("c1", "B", "passed", repeat=2)]
    got = paired(a, b)
    assert "mcnemar" not in got
    assert got["pass_rate_diff"]["estimate"] == pytest.approx((0 + 0.5) / 2)


def test_scores_are_compared_over_the_cases_both_scored() -> None:
    a = [row("c1", "A", "passed", score=0.2), row("c2", "A", "failed", score=0.4)]
    b = [row("c1", "B", "passed", score=0.5), row("c2", "B", "failed"), row("c3", "B", "passed")]
    got = paired(a, b)
    assert got["score_diff"]["cases"] == 1
    assert got["score_diff"]["estimate"] == pytest.approx(0.3)
    assert got["pass_rate_diff"]["cases"] == 2


def test_nothing_shared_is_no_difference_and_no_test() -> None:
    got = paired(single_samples("P", "A"), single_samples("-P", "B"))
    assert got == {"pass_rate_diff": None}


def test_every_pair_of_models_in_order_or_just_the_pair_asked_for() -> None:
    rows = single_samples("PF", "m1") + single_samples("FF", "m2") + single_samples("PP", "m3")
    models = {
        m: clusters_by(cluster_samples(rows), "model")[m].values() for m in ("m1", "m2", "m3")
    }
    pairs = model_pairs(models)
    assert [(p["a"], p["b"]) for p in pairs] == [("m1", "m2"), ("m1", "m3"), ("m2", "m3")]
    assert pairs[0]["pass_rate_diff"]["estimate"] == pytest.approx(-0.5)
    (only,) = model_pairs(models, ("m3", "m1"))
    assert (only["a"], only["b"]) == ("m3", "m1")
    assert only["pass_rate_diff"]["estimate"] == pytest.approx(-0.5)
    assert only["mcnemar"] == {"a_only": 1, "b_only": 0, "p": 1.0, "p_holm": 1.0}


def test_case_means_of_clusters() -> None:
    means = CaseMeans.of(
        [
            CaseSamples("a", 4, 1, scores=(1.0, 0.0)),
            CaseSamples("b", 1, 1),
            CaseSamples("c", 0, 0, errors=2, scores=()),
        ]
    )
    assert means.rates == {"a": 0.25, "b": 1.0}
    assert means.scores == {"a": 0.5}
    assert means.single == frozenset({"b"})


# --- against a direct count over the rows ---------------------------------------------------

STATUSES = ["passed", "failed", "error", "skipped", "pending"]
rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["c1", "c2", "c3"]),
        st.sampled_from(["m1", "m2"]),
        st.sampled_from(STATUSES),
        st.one_of(st.none(), st.floats(0, 1), st.integers(0, 3), st.booleans()),
    ),
    max_size=40,
)


@given(rows_strategy)
def test_the_clusters_are_a_direct_count_of_the_rows(drawn: list[tuple[Any, ...]]) -> None:
    rows = [row(c, m, s, score=v) for c, m, s, v in drawn]
    expected: dict[tuple[str, str], list[Any]] = {}
    for c, m, s, v in drawn:
        tally = expected.setdefault((c, m), [0, 0, 0, []])
        if s in ("passed", "failed"):
            tally[0] += 1
            tally[1] += s == "passed"
            if v is not None and not isinstance(v, bool):
                tally[3].append(float(v))
        tally[2] += s == "error"
    got = cluster_samples(rows)
    assert list(got) == list(expected)
    for key, (finished, passed, errors, scores) in expected.items():
        assert got[key] == CaseSamples(key[0], finished, passed, errors, tuple(scores))
    for model in ("m1", "m2"):
        means = CaseMeans.of(clusters_by(got, "model").get(model, {}).values())
        mine = {c: t for (c, m), t in expected.items() if m == model}
        assert means.rates == {c: t[1] / t[0] for c, t in mine.items() if t[0]}
        assert means.single == {c for c, t in mine.items() if t[0] == 1}


def test_a_score_that_is_not_a_finite_number_is_no_score() -> None:
    rows = [
        row("c1", "m", "passed", score=0.5),
        row("c1", "m", "passed", score=math.inf, repeat=2),
        row("c1", "m", "failed", score=10**400, repeat=3),  # past a float
    ]
    assert case_samples(rows) == [CaseSamples("c1", 3, 2, 0, (0.5,))]
    assert row_score(rows[2]) is None


def test_case_means_of_clusters_given_once_as_an_iterator() -> None:
    clusters = iter([CaseSamples("a", 1, 1, scores=(0.5,)), CaseSamples("b", 2, 1)])
    means = CaseMeans.of(clusters)
    assert means == CaseMeans(
        {"a": 1.0, "b": 0.5}, {"a": 0.5}, frozenset({"a"}), {"a": 1, "b": 2}, {"a": 1}
    )


def test_a_paired_score_difference_is_not_cut_to_minus_1_and_1() -> None:
    a = [row(f"c{i}", "A", "passed", score=0.0) for i in range(3)]
    b = [row(f"c{i}", "B", "passed", score=s) for i, s in enumerate((4.0, 6.0, 5.0))]
    got = paired(a, b)["score_diff"]
    assert got["estimate"] == 5.0 and got["low"] > 1.0 and got["high"] > 6.0


def test_an_integer_score_past_a_floats_range_is_no_score() -> None:
    rows = [row("c1", "m", "passed", score=0.5), row("c1", "m", "failed", score=-(10**400))]
    assert case_samples(rows) == [CaseSamples("c1", 2, 1, 0, (0.5,))]


# --- which pairs ----------------------------------------------------------------------------


def model_rows(rates: dict[str, int], cases: int = 4) -> list[dict[str, Any]]:
    """One sample a case per model, the first ``rates[model]`` cases passed."""
    return [
        row(f"c{i}", model, "passed" if i < passed else "failed")
        for model, passed in rates.items()
        for i in range(cases)
    ]


def test_up_to_8_models_every_pair_is_compared() -> None:
    names = [f"m{i}" for i in range(8)]
    rows = model_rows(dict.fromkeys(names, 2))
    pairs, scheme = pair_plan(names, rows, None)
    assert len(pairs) == 28 and pairs[0] == ("m0", "m1") and pairs[-1] == ("m6", "m7")
    assert scheme == {"pairs": "all", "best": None, "p_adjust": "holm"}


def test_past_8_models_each_is_compared_with_the_best_the_first_on_a_tie() -> None:
    rates = {f"m{i}": 1 for i in range(9)} | {"m3": 3, "m5": 3}
    names = list(rates)
    pairs, scheme = pair_plan(names, model_rows(rates), None)
    assert pairs == [("m3", name) for name in names if name != "m3"]
    assert scheme == {"pairs": "best", "best": "m3", "p_adjust": "holm"}
    assert best_model(model_rows(rates)) == "m3"
    assert best_model([row("c1", "m", "error")]) is None


def test_compare_asks_for_one_pair_whatever_the_number_of_models() -> None:
    names = [f"m{i}" for i in range(12)]
    pairs, scheme = pair_plan(names, model_rows(dict.fromkeys(names, 1)), ("m11", "m0"))
    assert pairs == [("m11", "m0")] and scheme["pairs"] == "compare"


def test_holm_adjusts_mcnemar_over_the_pairs_compared() -> None:
    # Three pairs, McNemar's p 1/8, 1 and 1/8: Holm multiplies the smallest by 3, the
    # next by 2 (kept at least as large), the largest by 1 (statsmodels' multipletests).
    rows = (
        single_samples("PPPPFFFF", "a")
        + single_samples("FFFFFFFF", "b")  # a - b: 4 discordant cases, p = 1/8
        + single_samples("PPPPFFFF", "c")
    )
    models = {m: clusters_by(cluster_samples(rows), "model")[m].values() for m in "abc"}
    pairs = model_pairs(models)
    ps = [pair["mcnemar"]["p"] for pair in pairs]
    expected = multipletests(ps, method="holm")[1]
    assert [pair["mcnemar"]["p_holm"] for pair in pairs] == pytest.approx(list(expected))
    assert ps == pytest.approx([0.125, 1.0, 0.125])
