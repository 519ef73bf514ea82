"""The repeats sections of ``batch report``, for a batch whose case x model pairs were
sampled more than once or whose jobs reported a ``score`` (docs/stats.md, "Repeats"):

- a table per model of samples per case, pass@1, pass@k and pass^k at the largest k, flaky
  cases and the mean score (the cells of ``batch stats``'s Repeats table), and the pass@k
  curves (``batch.results.report_curves``);
- the pairwise comparison table: every pair of models, B - A over the cases both have;
- the flaky cases: case, model, c/n and a link to every sample's ``output.log``.

The grid's c/n cells are ``batch.results.report_samples``. Every figure here is ``batch
stats``'s (``batch.results.stats.batch_stats``): this module only lays them out. Tables are
capped (:data:`MAX_FLAKY_ROWS`, :data:`MAX_PAIR_ROWS`, :data:`MAX_SAMPLE_LINKS`) so the page
stays small on a big batch; the page says what it left out and where the whole list is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from batch.results.repeats_cells import (
    paired_section,
    repeats_section,
    sampled_repeatedly,
    signed_cell,
)
from batch.results.report_charts import esc
from batch.results.report_curves import STYLE as CURVES_STYLE
from batch.results.report_curves import curves
from batch.results.report_grid import (
    STATUS_LOOK,
    breakable,
    cell_tooltip,
    output_log_href,
    tooltip_attr,
)
from batch.results.report_samples import has_run, samples_by_pair, share_style
from batch.results.sample_stats import row_repeat
from batch.results.summary import SummaryRow

#: Flaky-table rows in all; a model gets at least :data:`MIN_FLAKY_PER_MODEL` of them.
MAX_FLAKY_ROWS = 500
MIN_FLAKY_PER_MODEL = 10
#: Pairs of models shown: ``batch stats`` compares every pair of up to 8 models and past
#: that each model against the best, so this cuts only a batch of more than 500 models.
MAX_PAIR_ROWS = 500
#: Sample links in one flaky row.
MAX_SAMPLE_LINKS = 20


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: frozenset[int],
    footer_from: int | None = None,
) -> str:
    """A table in the report's style; ``headers`` are text, ``rows`` hold HTML already."""
    head = "".join(f"<th>{esc(name)}</th>" for name in headers)

    def row(cells: Sequence[str], tag: str) -> str:
        return (
            "<tr>"
            + "".join(
                f'<{tag} class="{"num" if i in numeric else "name"}">{cell}</{tag}>'
                for i, cell in enumerate(cells)
            )
            + "</tr>"
        )

    split = len(rows) if footer_from is None else footer_from
    body = "".join(row(cells, "td") for cells in rows[:split])
    foot = "".join(row(cells, "th") for cells in rows[split:])
    return (
        f'<table class="spend repeats"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        + (f"<tfoot>{foot}</tfoot>" if foot else "")
        + "</table>"
    )


# -- per model -------------------------------------------------------------------------------


def repeats_table(models: Sequence[Mapping[str, Any]], overall: Mapping[str, Any]) -> str:
    """``batch stats``'s Repeats table, cell for cell."""
    section = repeats_section(models, overall, "model")
    rows = [[breakable(row[0]), *map(esc, row[1:])] for row in section.rows]
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


def mcnemar_cell(mcnemar: Mapping[str, Any] | None, text: str) -> str:
    """``0.25 (1 / 5)``: the p-value and the cases only A passed, only B passed."""
    if not mcnemar:
        return esc(text)
    return esc(f"{text} ({mcnemar['a_only']} / {mcnemar['b_only']})")


def pair_cell(pair: Mapping[str, Any], header: str, text: str) -> str:
    """One cell of the pair table as HTML: names may wrap, the difference is coloured when
    its interval leaves out 0, McNemar's p has its discordant cases."""
    if header in ("A", "B"):
        return breakable(text)
    if header.startswith("B - A pass rate"):
        css = verdict(pair.get("pass_rate_diff"))
        return f'<span class="{css}">{esc(text)}</span>' if css else esc(text)
    if header == "McNemar p":
        return mcnemar_cell(pair.get("mcnemar"), text)
    return esc(text)


def pairs_section(
    pairs: Sequence[Mapping[str, Any]], scheme: Mapping[str, Any] | None = None
) -> str:
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
    more = (
        f" Showing the first {len(shown):,} of {len(pairs):,} pairs; "
        "<code>batch stats DIR --format json</code> has them all (<code>paired</code>)."
        if len(pairs) > len(shown)
        else ""
    )
    against = (
        f" With more than 8 models, each model against the best, {esc(scheme['best'])} (A); "
        "<code>batch stats DIR --compare A B</code> compares any pair."
        if scheme and scheme.get("pairs") == "best"
        else ""
    )
    return (
        '<section><h2>Model against model</h2><p class="note">B &minus; A over the cases both '
        "models have a model outcome for: the mean of the per-case differences of the share "
        "of samples that passed, with its paired 95% interval (green or red only when the "
        "interval leaves out 0); McNemar's exact p when every shared case has one sample a "
        "side (on the cases only one of them passed) and its Holm adjustment for the number of "
        "pairs compared; the score's paired difference when the jobs report scores."
        f"{against}{more}</p>"
        f"{html_table(headers, rows, section.numeric)}</section>"
    )


def compare_pairs_table(result: Mapping[str, Any]) -> str:
    """``batch report A B``: per model, B - A over the cases both batches have, paired."""
    headers = ["model", "cases", "B - A pass rate (paired 95% CI)", MCNEMAR_HEADER, "Holm p",
               "B - A score"]  # fmt: skip
    rows = []
    for row in result["models"]:
        paired = row.get("paired")
        if paired is None:
            continue
        diff, mcnemar = paired.get("pass_rate_diff"), paired.get("mcnemar")
        css = verdict(diff)
        text = esc(signed_cell(diff))
        rows.append([
            breakable(row["model"]),
            str(diff["cases"]) if diff else "0",
            f'<span class="{css}">{text}</span>' if css else text,
            mcnemar_cell(mcnemar, "—" if not mcnemar else f"{mcnemar['p']:.3g}"),
            "—" if not mcnemar or "p_holm" not in mcnemar else f"{mcnemar['p_holm']:.3g}",
            esc(signed_cell(paired.get("score_diff"), rate=False)),
        ])  # fmt: skip
    if not rows:
        return '<p class="muted">No model is in both batches.</p>'
    return html_table(headers, rows, frozenset({1, 2, 3, 4, 5}))


# -- flaky cases -----------------------------------------------------------------------------


def sample_links(samples: Sequence[SummaryRow], batch_dir: Path, report_dir: Path) -> str:
    """A mark per sample, its repeat and status; a link to its ``output.log`` when it ran."""
    links = []
    for job in samples[:MAX_SAMPLE_LINKS]:
        status = job["status"]
        css = status if status in STATUS_LOOK else "unknown"
        text = f"{row_repeat(job)}{STATUS_LOOK.get(status, ('?', ''))[0]}"
        tip = tooltip_attr(f"repeat {row_repeat(job)}\n{cell_tooltip(job)}")
        if has_run(job):
            href = esc(output_log_href(batch_dir, str(job["run_dir"]), report_dir))
            links.append(f'<a class="sample {css}" href="{href}" title="{tip}">{esc(text)}</a>')
        else:
            links.append(f'<span class="sample {css}" title="{tip}">{esc(text)}</span>')
    more = len(samples) - MAX_SAMPLE_LINKS
    return " ".join(links) + (f' <span class="muted">and {more} more</span>' if more > 0 else "")


def flaky_section(
    models: Sequence[Mapping[str, Any]],
    jobs: Sequence[SummaryRow],
    batch_dir: Path,
    report_dir: Path,
) -> str:
    """The cases a model passed in some samples but not all, with c/n and every sample."""
    total = sum(len(group["flaky"]) for group in models)
    if not total:
        return (
            '<section><h2>Flaky cases</h2><p class="muted">No case passed some of its '
            "samples but not all.</p></section>"
        )
    quota = max(MIN_FLAKY_PER_MODEL, MAX_FLAKY_ROWS // max(1, len(models)))
    pairs = samples_by_pair(jobs)
    rows = [
        [
            esc(flaky["case"]),
            breakable(group["model"]),
            f"{flaky['passed']}/{flaky['samples']}",
            sample_links(pairs.get((flaky["case"], group["model"]), []), batch_dir, report_dir),
        ]
        for group in models
        for flaky in group["flaky"][:quota]
    ]
    cut = (
        f" Showing at most {quota:,} per model, in sweep order ({len(rows):,} of {total:,}); "
        "<code>batch stats DIR --format json</code> lists every one (<code>flaky</code> per "
        "model)."
        if len(rows) < total
        else ""
    )
    return (
        f'<section><h2>Flaky cases</h2><p class="note">{total:,} case &times; model pairs passed '
        "some of their samples but not all. Passed: passes / samples with a model outcome "
        "(error samples left out). Click a sample for its output.log, hover for its status "
        f"and reason.{cut}</p>"
        f"{html_table(['case', 'model', 'passed', 'samples'], rows, frozenset({2}))}</section>"
    )


# -- the sections ----------------------------------------------------------------------------


def repeats_sections(
    stats: Mapping[str, Any],
    jobs: Sequence[SummaryRow],
    batch_dir: Path,
    report_dir: Path,
    *,
    repeated: bool,
) -> tuple[str, str]:
    """The sections above the failures (per model, model against model) and the one above
    the grid (flaky cases); the curves and the flaky cases only when ``repeated``."""
    models, overall = stats["models"], stats["overall"]
    curve = (
        '<p class="note">pass@k: the chance that at least one of k samples of a case passes '
        "(the unbiased estimator), pass^k: that all k pass, averaged over cases; k runs to the "
        "fewest samples a case of the model has. Band: 95% interval that treats a case's "
        f"samples as one cluster (docs/stats.md).</p>{curves(models)}"
        if repeated
        else ""
    )
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
    upper = (
        f'<section><h2>{title}</h2><p class="note">Per model: {what}</p>'
        f"{repeats_table(models, overall)}{curve}</section>"
    )
    if stats.get("paired"):
        upper += pairs_section(stats["paired"], stats.get("paired_scheme"))
    lower = flaky_section(models, jobs, batch_dir, report_dir) if repeated else ""
    return upper, lower


REPEATS_STYLE = share_style() + CURVES_STYLE
