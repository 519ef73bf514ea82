"""Summary rows as samples, paired: which rows are samples, the per-case clusters, paired
comparisons of two models and of one model in two batches, and the document keys
``batch stats`` adds for them, checked against direct counts and scipy."""

from __future__ import annotations

import random
from typing import Any

import pytest
from helpers.interval_reference import effective_interval, paired_newcombe
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from batch.stats.intervals import NEWCOMBE_CLUSTERED
from batch.stats.rates import batch_stats, compare_stats, group_stats
from batch.stats.repeats_rows import (
    case_samples,
    cluster_samples,
    has_repeats,
    model_pairs,
    paired,
)


def row(case: str, model: str, status: str, repeat: int = 1, **keys: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"case": case, "model": model, "status": status, **keys}
    if repeat != 1:
        found["repeat"] = repeat
    return found


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    jobs = [
        {"duration_seconds": 1.0, "resumed": False, "failure_category": None, "attempts": 1,
         "run_dir": None, **r}
        for r in rows
    ]  # fmt: skip
    return {"schema": 1, "batch_id": "b", "state": "complete", "jobs": jobs}


def test_only_a_row_past_repeat_1_makes_a_batch_sampled() -> None:
    assert not has_repeats([row("c", "m", "passed"), row("c", "m", "failed")])  # a duplicate
    assert has_repeats([row("c", "m", "passed"), row("c", "m", "failed", 2)])


def test_a_cluster_counts_model_outcomes_and_errors_apart() -> None:
    rows = [
        row("c1", "m", "passed"), row("c1", "m", "failed", 2), row("c1", "m", "error", 3),
        row("c1", "m", "pending", 4), row("c2", "m", "skipped"),
        row("c2", "m", "passed", 2, score=0.25),
    ]  # fmt: skip
    assert [(c.case, c.finished, c.passed, c.errors, c.scores) for c in case_samples(rows)] == [
        ("c1", 2, 1, 1, ()),
        ("c2", 1, 1, 0, (0.25,)),
    ]


def test_the_paired_difference_is_newcombes_interval_over_the_shared_cases() -> None:
    rng = random.Random(7)
    rows_a, rows_b = [], []
    for case in range(30):
        for repeat in range(1, 4):
            rows_a.append(row(f"c{case}", "a", rng.choice(["passed", "failed"]), repeat))
            rows_b.append(row(f"c{case}", "b", rng.choice(["passed", "failed", "failed"]), repeat))
    rows_b.append(row("only-b", "b", "passed"))  # not shared: in no difference

    got = paired(rows_a, rows_b)["pass_rate_diff"]

    def counts(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
        found: dict[str, list[int]] = {}
        for r in rows:
            found.setdefault(r["case"], []).append(r["status"] == "passed")
        return {case: (sum(v), len(v)) for case, v in found.items()}

    a, b = counts(rows_a), counts(rows_b)
    shared = [case for case in a if case in b]
    d, low, high = paired_newcombe([a[c] for c in shared], [b[c] for c in shared])
    assert got["cases"] == 30 and got["method"] == NEWCOMBE_CLUSTERED
    assert got["estimate"] == pytest.approx(d, abs=1e-6)
    assert (got["low"], got["high"]) == (
        pytest.approx(low, abs=1e-6),
        pytest.approx(high, abs=1e-6),
    )
    assert "mcnemar" not in paired(rows_a, rows_b)  # repeats: no McNemar


def test_one_sample_a_side_adds_mcnemar_on_the_discordant_cases() -> None:
    a = [row(f"c{i}", "a", s) for i, s in enumerate(["passed"] * 6 + ["failed"] * 4)]
    b = [row(f"c{i}", "b", s) for i, s in enumerate(["passed", "failed"] * 5)]
    # Discordant: A passed and B failed in c1, c3, c5; B passed and A failed in c6, c8.
    got = paired(a, b)["mcnemar"]
    assert (got["a_only"], got["b_only"]) == (3, 2)
    assert got["p"] == pytest.approx(scipy_stats.binomtest(3, 5).pvalue)


def test_scores_are_paired_when_both_sides_report_them() -> None:
    a = [row("c1", "a", "passed", score=0.5), row("c2", "a", "failed", score=0.0)]
    b = [row("c1", "b", "passed", score=1.0), row("c2", "b", "passed", score=0.5)]
    assert paired(a, b)["score_diff"]["estimate"] == 0.5
    assert "score_diff" not in paired([row("c1", "a", "passed")], b)


def test_every_pair_of_models_once_in_sweep_order() -> None:
    groups = {m: cluster_samples([row("c1", m, "passed")]).values() for m in ("x", "y", "z")}
    assert [(p["a"], p["b"]) for p in model_pairs(groups)] == [("x", "y"), ("x", "z"), ("y", "z")]
    assert [(p["a"], p["b"]) for p in model_pairs(groups, ("z", "x"))] == [("z", "x")]


def test_stats_of_a_batch_with_repeats_carry_the_figures_per_group_and_overall() -> None:
    rows = [row(c, m, "passed" if (c, r) != ("c2", 2) else "failed", r)
            for c in ("c1", "c2") for m in ("a", "b") for r in (1, 2)]  # fmt: skip
    document = batch_stats(summary(rows))
    for group in [*document["models"], document["overall"]]:
        assert {"pass_at_k", "pass_hat_k", "flaky_cases", "k_max", "samples_per_case"} <= set(group)
        assert list(group["pass_at_k"]) == ["1", "2"]
    assert document["models"][0]["flaky_cases"] == ["c2"]
    assert [(p["a"], p["b"]) for p in document["paired"]] == [("a", "b")]
    asked = batch_stats(summary(rows), compare=("b", "a"))
    assert asked["compare"] == ["b", "a"] and len(asked["paired"]) == 1
    with pytest.raises(ValueError, match="--compare: no model 'q'"):
        batch_stats(summary(rows), compare=("a", "q"))


def test_a_batch_without_repeats_or_scores_gains_only_the_paired_list() -> None:
    rows = [row(c, m, "passed") for c in ("c1", "c2") for m in ("a", "b")]
    document = batch_stats(summary(rows))
    assert "pass_at_k" not in document["overall"] and "pass_at_k" not in document["models"][0]
    assert document["paired"][0]["mcnemar"] == {"a_only": 0, "b_only": 0, "p": 1.0, "p_holm": 1.0}


def test_one_model_across_two_batches_is_paired_over_the_cases_both_have() -> None:
    before = summary([row(f"c{i}", "m", "failed") for i in range(4)])
    after = summary([row(f"c{i}", "m", "passed" if i < 3 else "failed") for i in range(5)])
    got = compare_stats(before, after)["models"][0]["paired"]
    assert got["pass_rate_diff"]["cases"] == 4
    assert got["pass_rate_diff"]["estimate"] == 0.75
    assert got["mcnemar"] == {"a_only": 0, "b_only": 3, "p": 0.25, "p_holm": 0.25}


# --- the pass rates with repeats ------------------------------------------------------------

repeats_strategy = st.lists(
    st.tuples(
        st.sampled_from(["c1", "c2", "c3", "c4"]),
        st.sampled_from(["m1", "m2"]),
        st.integers(1, 4),
        st.sampled_from(["passed", "failed", "error", "skipped"]),
    ),
    max_size=40,
)


@given(repeats_strategy)
def test_the_rates_intervals_are_the_same_from_rows_or_from_clusters(
    drawn: list[tuple[str, str, int, str]],
) -> None:
    # batch_stats hands group_stats the clusters it has; compare_stats and the report let
    # it count them from the rows: both must give the same intervals. (One row per case,
    # model and repeat, as a driver writes them.)
    unique = {(c, m, r): s for c, m, r, s in drawn}
    rows = [row(c, m, s, r) for (c, m, r), s in unique.items()]
    clusters = list(cluster_samples(rows).values())
    assert group_stats(rows, clusters) == group_stats(rows)


def test_with_repeats_the_pass_rates_are_wilson_on_the_effective_sample_size() -> None:
    rng = random.Random(4)
    rows, counts, with_errors = [], [], []
    for case in range(15):
        p = rng.random()
        statuses = [
            "error" if rng.random() < 0.1 else "passed" if rng.random() < p else "failed"
            for _ in range(4)
        ]
        rows += [row(f"c{case}", "m", s, r + 1) for r, s in enumerate(statuses)]
        passed = statuses.count("passed")
        counts.append((passed, passed + statuses.count("failed")))
        with_errors.append((passed, 4))  # an error is a sample that did not pass
    got = batch_stats(summary(rows))["models"][0]
    for name, per_case in (("adjusted_pass_rate", counts), ("pass_rate", with_errors)):
        estimate, low, high = effective_interval(per_case)
        assert got[name] == pytest.approx(estimate, abs=1e-6)
        assert (got[f"{name}_low"], got[f"{name}_high"]) == (
            pytest.approx(low, abs=1e-6),
            pytest.approx(high, abs=1e-6),
        )
        assert got[f"{name}_method"] == "wilson-effective-n"
