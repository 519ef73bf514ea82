"""The cells of the repeats figures for ``batch stats``'s table and Markdown: pass@1,
pass@k and pass^k with their clustered intervals, flaky cases, scores, and the paired
comparisons (docs/stats.md, "Repeats"). Pure: the document in, ``Section``s out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from batch.stats.cells import DASH, Section, methods_note, percent, signed_cell

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
    at the largest k every case allows, flaky cases, the mean score. With one sample a case
    only the score: pass@1 is then the pass rate, already in the first table with the same
    interval, and pass@k and pass^k of one sample are nothing more."""
    repeated = sampled_repeatedly(overall)
    headers = [by.capitalize(), "Samples/case", "pass@1 (95% CI)", "k", "pass@k (95% CI)",
               "pass^k (95% CI)", "Flaky", "Score (95% CI)"]  # fmt: skip
    rows, notes = [], []
    methods: dict[str, list[str | None]] = {"pass@k and pass^k": [], "score": []}
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
        figures = [stats["pass_at_k"].get("1"), stats["pass_at_k"].get(str(k)),
                   stats["pass_hat_k"].get(str(k))]  # fmt: skip
        rows.append([
            label,
            per_case,
            estimate_cell(figures[0]),
            str(k) if k else DASH,
            estimate_cell(figures[1]),
            estimate_cell(figures[2]),
            str(len(stats["flaky_cases"])),
            estimate_cell(stats.get("score"), rate=False),
        ])  # fmt: skip
        if repeated:
            methods["pass@k and pass^k"] += [figure.get("method") for figure in figures if figure]
        methods["score"].append((stats.get("score") or {}).get("method"))
        flaky = stats.get("flaky") or []
        if flaky and label != "all jobs":
            named = ", ".join(
                f"{f['case']} ({f['passed']}/{f['samples']})" for f in flaky[:SHOWN_FLAKY]
            )
            more = f" and {len(flaky) - SHOWN_FLAKY} more" if len(flaky) > SHOWN_FLAKY else ""
            notes.append(f"{label}: flaky {named}{more}.")
    if repeated:
        notes.append(
            "pass@k: at least one of k samples passes (unbiased estimator); pass^k: all k "
            "pass; k is at most the fewest samples a case has. A case's samples are one "
            "cluster; error samples are left out."
        )
        droppable: tuple[str, ...] = ("Score (95% CI)",)
    else:
        notes.append("The mean over cases of each case's score.")
        droppable = tuple(headers[1:7])
        rows = [[*row[:1], *(DASH,) * 6, row[7]] for row in rows]
    notes.append(methods_note(list(methods.items())))
    headers, rows = _without_empty(headers, rows, droppable)
    return Section(
        headers,
        rows,
        title=["Repeats" if repeated else "Scores"],
        notes=notes,
        footer_from=len(groups),
        numeric=frozenset(range(1, len(headers))),
        wrap=frozenset({0}),
        # To fit the terminal, in this order: the score of pass/fail samples is pass@1 again.
        optional=("Score (95% CI)", "Samples/case", "Flaky", "k", "pass^k (95% CI)"),
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


def paired_section(
    pairs: Sequence[Mapping[str, Any]], scheme: Mapping[str, Any] | None = None
) -> Section:
    """B - A for every pair compared, over the cases both have, paired; ``scheme``: the
    document's ``paired_scheme`` (which pairs, how p-values are adjusted)."""
    headers = ["A", "B", "Cases", "B - A pass rate (95% CI)", "McNemar p", "Holm p",
               "B - A score"]  # fmt: skip
    rows = []
    methods: dict[str, list[str | None]] = {"pass rate": [], "score": []}
    for pair in pairs:
        diff = pair.get("pass_rate_diff")
        mcnemar = pair.get("mcnemar")
        rows.append([
            pair["a"],
            pair["b"],
            str(diff["cases"]) if diff else "0",
            signed_cell(diff),
            DASH if not mcnemar else f"{mcnemar['p']:.3g}",
            DASH if not mcnemar or "p_holm" not in mcnemar else f"{mcnemar['p_holm']:.3g}",
            signed_cell(pair.get("score_diff"), rate=False),
        ])  # fmt: skip
        methods["pass rate"].append((pair.get("pass_rate_diff") or {}).get("method"))
        methods["score"].append((pair.get("score_diff") or {}).get("method"))
    headers, rows = _without_empty(headers, rows, ("McNemar p", "Holm p", "B - A score"))
    return Section(
        headers,
        rows,
        title=["Paired comparisons"],
        notes=[*pairs_notes(pairs, scheme), methods_note(list(methods.items()))],
        numeric=frozenset(range(2, len(headers))),
        wrap=frozenset({0, 1}),
        optional=("B - A score", "Cases", "McNemar p"),
    )


def pairs_notes(pairs: Sequence[Mapping[str, Any]], scheme: Mapping[str, Any] | None) -> list[str]:
    """What the pairs table holds: the per-case differences, which pairs, the tests."""
    notes = ["B - A: the mean of the per-case differences of the case means (pass share)."]
    if scheme and scheme.get("pairs") == "best":
        notes.append(
            f"More than 8 models: each model against the best, {scheme['best']} (A); "
            "batch stats DIR --compare A B compares any pair."
        )
    if any(pair.get("mcnemar") for pair in pairs):
        notes.append(
            "McNemar p: exact test on the cases only one model passed, when each case has one "
            "sample a side; Holm p: adjusted for multiplicity over every pair compared "
            "(Holm 1979)."
        )
    return notes
