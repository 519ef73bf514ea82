"""The cells of the repeats figures for ``batch stats``'s table and Markdown: pass@1,
pass@k and pass^k with their clustered intervals, flaky cases, scores, and the paired
comparisons (docs/stats.md, "Repeats"). Pure: the document in, ``Section``s out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from batch.results.stats_cells import DASH, Section, percent

#: Flaky cases named per group in the notes; the JSON lists them all.
SHOWN_FLAKY = 10


def estimate_cell(figure: Mapping[str, Any] | None, *, rate: bool = True) -> str:
    """``80.0% (61.2-98.8)``; a score as a number; "—" when there is none."""
    if not figure:
        return DASH
    show = percent if rate else (lambda value: f"{value:.3f}")
    value, low, high = figure["estimate"], figure["low"], figure["high"]
    if low is None or high is None:
        return show(value)
    if rate:
        return f"{percent(value)} ({low * 100:.1f}-{high * 100:.1f})"
    return f"{value:.3f} ({low:.3f} to {high:.3f})"


def signed_cell(figure: Mapping[str, Any] | None, *, rate: bool = True) -> str:
    """``-20.0 pp (-41.3 to 1.3)``: a paired difference B - A."""
    if not figure:
        return DASH
    scale, unit, digits = (100, " pp", 1) if rate else (1, "", 3)

    def signed(value: float) -> str:
        # + 0.0: a mean of zero differences may be -0.0, which is no difference at all.
        return f"{round(value * scale, digits) + 0.0:+.{digits}f}"

    value, low, high = figure["estimate"], figure["low"], figure["high"]
    text = signed(value) + unit
    if low is None or high is None:
        return text
    return f"{text} ({signed(low)} to {signed(high)})"


def sampled_repeatedly(overall: Mapping[str, Any]) -> bool:
    """Whether some case x model of the batch has more than one sample with a model
    outcome. A batch without repeats has these figures too when its jobs report a
    ``score``: one sample per case, and its section is titled for what it shows."""
    sizes = overall.get("samples_per_case")
    return sizes is not None and bool(sizes["max"] > 1)


def repeats_section(
    groups: Sequence[Mapping[str, Any]], overall: Mapping[str, Any], by: str
) -> Section:
    """One row per group and the whole batch: samples per case, pass@1, pass@k and pass^k
    at the largest k every case allows, flaky cases, the mean score."""
    headers = [by.capitalize(), "Samples/case", "pass@1 (95% CI)", "k", "pass@k (95% CI)",
               "pass^k (95% CI)", "Flaky", "Score (95% CI)"]  # fmt: skip
    rows, notes = [], []
    for label, stats in [(g[by], g) for g in groups] + [("all jobs", overall)]:
        k = stats.get("k_max") or 0
        sizes = stats.get("samples_per_case")
        per_case = (
            DASH
            if not sizes
            else (
                str(sizes["min"])
                if sizes["min"] == sizes["max"]
                else f"{sizes['min']}-{sizes['max']}"
            )
        )
        rows.append([
            label,
            per_case,
            estimate_cell(stats["pass_at_k"].get("1")),
            str(k) if k else DASH,
            estimate_cell(stats["pass_at_k"].get(str(k))),
            estimate_cell(stats["pass_hat_k"].get(str(k))),
            str(len(stats["flaky_cases"])),
            estimate_cell(stats.get("score"), rate=False),
        ])  # fmt: skip
        flaky = stats.get("flaky") or []
        if flaky and label != "all jobs":
            named = ", ".join(
                f"{f['case']} ({f['passed']}/{f['samples']})" for f in flaky[:SHOWN_FLAKY]
            )
            more = f" and {len(flaky) - SHOWN_FLAKY} more" if len(flaky) > SHOWN_FLAKY else ""
            notes.append(f"{label}: flaky {named}{more}.")
    notes.append(
        "pass@k: at least one of k samples passes (unbiased estimator); pass^k: all k pass; "
        "k is at most the fewest samples a case has. Intervals treat a case's samples as one "
        "cluster; error samples are left out (docs/stats.md)."
    )
    headers, rows = _without_empty(headers, rows, ("Score (95% CI)",))
    return Section(
        headers,
        rows,
        title=["Repeats" if sampled_repeatedly(overall) else "Samples and scores"],
        notes=notes,
        footer_from=len(groups),
        numeric=frozenset(range(1, len(headers))),
        wrap=frozenset({0}),
    )


def _without_empty(
    headers: list[str], rows: list[list[str]], droppable: Sequence[str]
) -> tuple[list[str], list[list[str]]]:
    """The columns of ``droppable`` that are "—" in every row left out: a score column in
    a batch that reported none says nothing."""
    keep = [
        index
        for index, header in enumerate(headers)
        if header not in droppable or any(row[index] != DASH for row in rows)
    ]
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows]


def paired_section(pairs: Sequence[Mapping[str, Any]]) -> Section:
    """B - A for every pair compared, over the cases both have, paired."""
    headers = ["A", "B", "Cases", "B - A pass rate (95% CI)", "McNemar p", "B - A score"]
    rows = []
    for pair in pairs:
        diff = pair.get("pass_rate_diff")
        mcnemar = pair.get("mcnemar")
        rows.append([
            pair["a"],
            pair["b"],
            str(diff["cases"]) if diff else "0",
            signed_cell(diff),
            DASH if not mcnemar else f"{mcnemar['p']:.3g}",
            signed_cell(pair.get("score_diff"), rate=False),
        ])  # fmt: skip
    headers, rows = _without_empty(headers, rows, ("McNemar p", "B - A score"))
    return Section(
        headers,
        rows,
        title=["Paired comparisons"],
        notes=[
            "Per-case differences of the case means (pass share), their mean and paired t "
            "interval; McNemar's exact test when each case has one sample a side."
        ],
        numeric=frozenset(range(2, len(headers))),
        wrap=frozenset({0, 1}),
    )
