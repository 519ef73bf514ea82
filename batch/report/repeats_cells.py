"""The cells of a batch with repeats, where a (case, model) is several samples: the grid's
c/n cell of ``batch report`` (``samples_cell``, coloured by the share that passed, in tenths),
the changed cell of ``batch report A B`` (``changed_cell``, A's c/n → B's), and their key
and style. Counts of the cell's own rows' statuses, as the grid's passed/(passed + failed)
is; no statistics (``batch.report.repeats`` lays out ``batch stats``'s).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from batch.report.charts import text_colour
from batch.report.environment import macro
from batch.report.grid import GridCell, legend, output_log_href
from batch.stats.repeats_rows import row_repeat
from batch.summary.row import SummaryRow

#: Sample lines in one cell's tooltip.
TOOLTIP_SAMPLES = 10
UNFINISHED = ("pending", "running", "skipped")


def samples_by_pair(jobs: Sequence[SummaryRow]) -> dict[tuple[str, str], list[SummaryRow]]:
    """Each (case, model)'s rows, by repeat."""
    pairs: dict[tuple[str, str], list[SummaryRow]] = {}
    for job in jobs:
        pairs.setdefault((job["case"], job["model"]), []).append(job)
    return {pair: sorted(rows, key=row_repeat) for pair, rows in pairs.items()}


def has_run(job: SummaryRow) -> bool:
    """Whether the sample ran: only then is there an ``output.log`` to link to."""
    run_dir = job.get("run_dir")
    return isinstance(run_dir, str) and bool(run_dir)


def share_class(passed: int, judged: int) -> str:
    """``q0`` … ``q10``: the share that passed, in tenths."""
    return f"q{round(passed / judged * 10)}"


def samples_cell(samples: Sequence[SummaryRow], batch_dir: Path, report_dir: Path) -> GridCell:
    """A grid cell of one (case, model)'s samples: ``c/n`` (passes out of samples with a
    model outcome) on the share's colour, ``…`` when some sample has no outcome yet, ``!``
    when some ended in error (left out of c/n); hover lists the samples, a click opens the
    first failed one's ``output.log`` (else the first that ran)."""
    samples = sorted(samples, key=row_repeat)
    counts = Counter(job["status"] for job in samples)
    passed, judged = counts["passed"], counts["passed"] + counts["failed"]
    waiting, errors = sum(counts[s] for s in UNFINISHED), counts["error"]
    marks = ("…" if waiting else "") + ("!" if errors else "")
    text = (f"{passed}/{judged}" if judged else "\u2013") + marks  # en dash: no outcome
    css = share_class(passed, judged) if judged else ("error" if errors else "pending")
    rank = 2 * passed / judged if judged else 1
    first = samples[0]
    lines = [f"case: {first['case']}", f"model: {first['model']}"]
    lines.append(f"{passed} of {judged} samples with a model outcome passed")
    lines += [f"{waiting} not finished yet"] if waiting else []
    lines += [f"{errors} ended in error (left out)"] if errors else []
    lines += [f"repeat {row_repeat(job)}: {sample_text(job)}" for job in samples[:TOOLTIP_SAMPLES]]
    lines += (
        [f"and {len(samples) - TOOLTIP_SAMPLES} more"] if len(samples) > TOOLTIP_SAMPLES else []
    )
    opened = next((job for job in samples if has_run(job) and job["status"] != "passed"), None)
    opened = opened or next((job for job in samples if has_run(job)), None)
    if opened is not None:
        lines.append(f"click: open output.log of repeat {row_repeat(opened)}")
    href = (
        None if opened is None else output_log_href(batch_dir, str(opened["run_dir"]), report_dir)
    )
    return GridCell(f"{css} share", text, "\n".join(lines), href, f"{rank:g}")


def changed_cell(
    a_samples: Sequence[SummaryRow],
    b_samples: Sequence[SummaryRow],
    changes: Sequence[Mapping[str, Any]],
) -> GridCell:
    """A changed cell of ``batch report A B`` when a batch has repeats: A's c/n → B's, on
    green when B's share is higher, red when lower, grey otherwise; hover lists the
    repeats whose status changed."""
    first = (a_samples or b_samples)[0]
    lines = [f"case: {first['case']}", f"model: {first['model']}"]
    shares, texts = [], []
    for side, samples in (("A", a_samples), ("B", b_samples)):
        passed = sum(job["status"] == "passed" for job in samples)
        judged = passed + sum(job["status"] == "failed" for job in samples)
        shares.append(passed / judged if judged else None)
        texts.append(f"{passed}/{judged}" if samples else "∅")
        outcome = f"{passed} of {judged} samples with a model outcome passed"
        lines.append(f"{side}: {outcome if samples else 'absent'}")
    shown = changes[:TOOLTIP_SAMPLES]
    lines += [f"repeat {c.get('repeat', 1)}: A {c['a'] or 'absent'}, B {c['b'] or 'absent'}"
              for c in shown]  # fmt: skip
    lines += [f"and {len(changes) - len(shown)} more"] if len(changes) > len(shown) else []
    a, b = shares
    kind = "changed" if a is None or b is None or a == b else "better" if b > a else "worse"
    return GridCell(kind, "→".join(texts), "\n".join(lines))


def sample_text(job: SummaryRow) -> str:
    category = job.get("failure_category")
    reason = job.get("reason")
    text = job["status"] + (f" ({category})" if job["status"] != "passed" and category else "")
    return text + (f": {reason}" if job["status"] != "passed" and reason else "")


def share_colours(steps: int = 10) -> list[str]:
    """Red (none passed) through yellow (half) to green (all), in ``steps`` + 1 colours."""
    ends = ((0xE0, 0x31, 0x31), (0xFC, 0xC4, 0x19), (0x2F, 0x9E, 0x44))
    colours = []
    for i in range(steps + 1):
        share = i / steps
        low, high, t = (
            (ends[0], ends[1], share * 2) if share <= 0.5 else (ends[1], ends[2], share * 2 - 1)
        )
        rgb = (round(a + (b - a) * t) for a, b in zip(low, high, strict=True))
        colours.append("#" + "".join(f"{c:02x}" for c in rgb))
    return colours


def share_legend() -> Markup:
    return legend(
        [
            ("q0", "0/n", "none of the samples passed"),
            ("q5", "1/2", "half"),
            ("q10", "n/n", "all"),
            ("pending", "…", "some samples not finished yet"),
            ("error", "!", "some ended in error (not in c/n)"),
        ]
    )


#: The grid's note in a batch with repeats.
REPEATS_GRID_NOTE = """A cell shows c/n: of its n samples with a model outcome, c
passed (error samples are left out and marked !, samples not finished yet …), coloured by that
share. Hover a cell for every sample's status and reason; click it to open the output.log of
its first sample that did not pass. “passed” counts passed / (passed + failed) over
samples."""


def repeats_grid(
    batch_dir: Path, report_dir: Path
) -> tuple[Markup, Callable[[Sequence[SummaryRow]], GridCell]]:
    """The grid's note and key, and its cells, for a batch with repeats."""
    note = macro("parts.html.j2", "note", REPEATS_GRID_NOTE) + share_legend()
    return note, lambda samples: samples_cell(samples, batch_dir, report_dir)


def share_style() -> Markup:
    rules = []
    for i, colour in enumerate(share_colours()):
        rules.append((f".grid td.q{i}", colour, text_colour(colour)))
        rules.append((f"ul.legend span.q{i}", colour, text_colour(colour)))
    return macro("grid.html.j2", "style", rules) + Markup(SHARE_STYLE)


SHARE_STYLE = (
    ".grid td.share{min-width:3.6em;padding:0 3px;font-size:12px}"
    "ul.legend span.q0,ul.legend span.q5,ul.legend span.q10{width:auto;padding:0 4px}"
    "a.sample,span.sample{display:inline-block;min-width:2.4em;margin:1px;padding:0 3px;"
    "border-radius:3px;text-align:center;text-decoration:none;font-weight:600;"
    "font-size:12px}"
)
