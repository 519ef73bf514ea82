"""The repeats sections of ``batch report``, for a batch whose case x model pairs were
sampled more than once or whose jobs reported a ``score`` (docs/stats.md, "Repeats"):

- a table per model of samples per case, pass@1, pass@k and pass^k at the largest k, flaky
  cases and the mean score (the cells of ``batch stats``'s Repeats table), and the pass@k
  curves (``batch.report.curves``);
- the pairwise comparison table: every pair of models, B - A over the cases both have;
- the flaky cases: case, model, c/n and a link to every sample's ``output.log``.

The grid's c/n cells are ``batch.report.repeats_cells``. Every figure here is ``batch
stats``'s (``batch.stats.rates.batch_stats``): this module only lays them out. Tables are
capped (:data:`MAX_FLAKY_ROWS`, :data:`MAX_PAIR_ROWS`, :data:`MAX_SAMPLE_LINKS`) so the page
stays small on a big batch; the page says what it left out and where the whole list is.
The tables are rows of :class:`Cell` values, laid out by ``templates/repeats.html.j2``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from markupsafe import Markup

from batch.report.curves import curves
from batch.report.curves import style as curves_style
from batch.report.environment import macro
from batch.report.grid import STATUS_LOOK, cell_tooltip, output_log_href
from batch.report.repeats_cells import has_run, samples_by_pair, share_style
from batch.stats.repeats_cells import (
    paired_section,
    repeats_section,
    sampled_repeatedly,
    signed_cell,
)
from batch.stats.repeats_rows import row_repeat
from batch.summary.row import SummaryRow

#: Flaky-table rows in all; a model gets at least :data:`MIN_FLAKY_PER_MODEL` of them.
MAX_FLAKY_ROWS = 500
MIN_FLAKY_PER_MODEL = 10
#: Pairs of models shown: ``batch stats`` compares every pair of up to 8 models and past
#: that each model against the best, so this cuts only a batch of more than 500 models.
MAX_PAIR_ROWS = 500
#: Sample links in one flaky row.
MAX_SAMPLE_LINKS = 20


@attrs.frozen
class Sample:
    """One sample's mark in a flaky row: a link to its ``output.log`` when it ran."""

    text: str
    css: str
    tip: str
    href: str | None


@attrs.frozen
class Cell:
    """A table cell: ``text`` (``kind`` ``name``: a name that may wrap; ``css``: a coloured
    difference) or, for ``kind`` ``samples``, sample marks and how many more there are."""

    text: str = ""
    kind: str = "text"
    css: str = ""
    samples: tuple[Sample, ...] = ()
    more: int = 0


def name_cell(name: str) -> Cell:
    return Cell(name, "name")


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    numeric: frozenset[int],
    footer_from: int | None = None,
) -> Markup:
    """A table in the report's style; the rows from ``footer_from`` on are its footer."""
    split = len(rows) if footer_from is None else footer_from
    return macro("repeats.html.j2", "table", headers, rows, numeric, split)


# -- per model -------------------------------------------------------------------------------


def repeats_table(models: Sequence[Mapping[str, Any]], overall: Mapping[str, Any]) -> Markup:
    """``batch stats``'s Repeats table, cell for cell."""
    section = repeats_section(models, overall, "model")
    rows = [[name_cell(row[0]), *map(Cell, row[1:])] for row in section.rows]
    return html_table(section.headers, rows, section.numeric, section.footer_from)


# -- model against model ---------------------------------------------------------------------


def verdict(figure: Mapping[str, Any] | None) -> str:
    """``better`` / ``worse`` when the interval of B - A leaves out 0, else nothing: a
    difference whose interval holds 0 is not coloured as if it were one."""
    if not figure or figure["low"] is None or figure["high"] is None:
        return ""
    return "better" if figure["low"] > 0 else "worse" if figure["high"] < 0 else ""


#: The McNemar column, with the discordant cases the test is on.
MCNEMAR_HEADER = "McNemar p (A only / B only)"


def mcnemar_cell(mcnemar: Mapping[str, Any] | None, text: str) -> Cell:
    """``0.25 (1 / 5)``: the p-value and the cases only A passed, only B passed."""
    if not mcnemar:
        return Cell(text)
    return Cell(f"{text} ({mcnemar['a_only']} / {mcnemar['b_only']})")


def pair_cell(pair: Mapping[str, Any], header: str, text: str) -> Cell:
    """One cell of the pair table: names may wrap, the difference is coloured when its
    interval leaves out 0, McNemar's p has its discordant cases."""
    if header in ("A", "B"):
        return name_cell(text)
    if header.startswith("B - A pass rate"):
        return Cell(text, css=verdict(pair.get("pass_rate_diff")))
    if header == "McNemar p":
        return mcnemar_cell(pair.get("mcnemar"), text)
    return Cell(text)


def pairs_section(
    pairs: Sequence[Mapping[str, Any]], scheme: Mapping[str, Any] | None = None
) -> Markup:
    """The pairs ``batch stats`` compares (at most :data:`MAX_PAIR_ROWS`), B - A, paired over
    shared cases; ``scheme``: its ``paired_scheme``."""
    shown = pairs[:MAX_PAIR_ROWS]
    section = paired_section(shown, scheme)
    headers = [MCNEMAR_HEADER if name == "McNemar p" else name for name in section.headers]
    rows = []
    for pair, cells in zip(shown, section.rows, strict=True):
        # By header: ``batch stats`` leaves out a column no pair has a value in.
        rows.append(
            [pair_cell(pair, name, cell) for name, cell in zip(section.headers, cells, strict=True)]
        )
    best = scheme["best"] if scheme and scheme.get("pairs") == "best" else None
    table = html_table(headers, rows, section.numeric)
    return macro("repeats.html.j2", "pairs_section", len(shown), len(pairs), best, table)


def compare_pairs_table(result: Mapping[str, Any]) -> Markup:
    """``batch report A B``: per model, B - A over the cases both batches have, paired."""
    headers = ["model", "cases", "B - A pass rate (paired 95% CI)", MCNEMAR_HEADER, "Holm p",
               "B - A score"]  # fmt: skip
    rows = []
    for row in result["models"]:
        paired = row.get("paired")
        if paired is None:
            continue
        diff, mcnemar = paired.get("pass_rate_diff"), paired.get("mcnemar")
        rows.append([
            name_cell(row["model"]),
            Cell(str(diff["cases"]) if diff else "0"),
            Cell(signed_cell(diff), css=verdict(diff)),
            mcnemar_cell(mcnemar, "—" if not mcnemar else f"{mcnemar['p']:.3g}"),
            Cell("—" if not mcnemar or "p_holm" not in mcnemar else f"{mcnemar['p_holm']:.3g}"),
            Cell(signed_cell(paired.get("score_diff"), rate=False)),
        ])  # fmt: skip
    if not rows:
        return macro("parts.html.j2", "muted", "No model is in both batches.")
    return html_table(headers, rows, frozenset({1, 2, 3, 4, 5}))


# -- flaky cases -----------------------------------------------------------------------------


def sample_links(samples: Sequence[SummaryRow], batch_dir: Path, report_dir: Path) -> Cell:
    """A mark per sample, its repeat and status; a link to its ``output.log`` when it ran."""
    links = []
    for job in samples[:MAX_SAMPLE_LINKS]:
        status = job["status"]
        href = output_log_href(batch_dir, str(job["run_dir"]), report_dir) if has_run(job) else None
        links.append(
            Sample(
                text=f"{row_repeat(job)}{STATUS_LOOK.get(status, ('?', ''))[0]}",
                css=status if status in STATUS_LOOK else "unknown",
                tip=f"repeat {row_repeat(job)}\n{cell_tooltip(job)}",
                href=href,
            )
        )
    return Cell(kind="samples", samples=tuple(links), more=len(samples) - MAX_SAMPLE_LINKS)


def flaky_section(
    models: Sequence[Mapping[str, Any]],
    jobs: Sequence[SummaryRow],
    batch_dir: Path,
    report_dir: Path,
) -> Markup:
    """The cases a model passed in some samples but not all, with c/n and every sample."""
    total = sum(len(group["flaky"]) for group in models)
    quota = max(MIN_FLAKY_PER_MODEL, MAX_FLAKY_ROWS // max(1, len(models)))
    pairs = samples_by_pair(jobs)
    rows = [
        [
            Cell(flaky["case"]),
            name_cell(group["model"]),
            Cell(f"{flaky['passed']}/{flaky['samples']}"),
            sample_links(pairs.get((flaky["case"], group["model"]), []), batch_dir, report_dir),
        ]
        for group in models
        for flaky in group["flaky"][:quota]
    ]
    table = html_table(["case", "model", "passed", "samples"], rows, frozenset({2}))
    return macro("repeats.html.j2", "flaky_section", total, quota, len(rows), table)


# -- the sections ----------------------------------------------------------------------------


def repeats_sections(
    stats: Mapping[str, Any],
    jobs: Sequence[SummaryRow],
    batch_dir: Path,
    report_dir: Path,
    *,
    repeated: bool,
) -> tuple[Markup, Markup]:
    """The sections above the failures (per model, model against model) and the one above
    the grid (flaky cases); the curves and the flaky cases only when ``repeated``."""
    models, overall = stats["models"], stats["overall"]
    if sampled_repeatedly(overall):
        title = "Samples, pass@k and pass^k by model"
        what = (
            "samples per case, pass@1 (the mean over cases of the share of samples that "
            "passed), pass@k and pass^k at the largest k, flaky cases (passed some samples, "
            "not all) and the mean score, each with a 95% interval over cases; error samples "
            "are left out of every rate."
        )
    else:  # one sample a case: pass@1 is the pass rate above, pass@k nothing more
        title, what = "Scores by model", "the mean over cases of each case's score."
    table = repeats_table(models, overall)
    upper = macro(
        "repeats.html.j2", "upper", title, what, table, curves(models) if repeated else ""
    )
    if stats.get("paired"):
        upper += pairs_section(stats["paired"], stats.get("paired_scheme"))
    lower = flaky_section(models, jobs, batch_dir, report_dir) if repeated else Markup()
    return upper, lower


def repeats_style() -> Markup:
    """The styles of the repeats sections and of the grid's c/n cells."""
    return share_style() + curves_style()
