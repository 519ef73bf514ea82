"""``batch report BATCH_DIR [B]``: write the HTML report that :mod:`batch.report.page`
renders, for one batch or two side by side."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from batch.errors import ExitStatus, LocatedError
from batch.layout import REPORT, safe_name
from batch.report.compare import render_comparison
from batch.report.fold import failures_path, failures_tsv, folds
from batch.report.page import render_report
from batch.stats.source import load_summary, read_invocations
from batch.summary.read import summary_rows
from run_support.atomic import atomic_write_bytes


def _warn(text: str, err: TextIO) -> None:
    print(f"warning: {text}", file=err)


def comparison_path(batch_dirs: Sequence[Path]) -> Path:
    """Where ``batch report A B`` writes by default: in B, named after A."""
    return Path(batch_dirs[1]) / f"report-vs-{safe_name(Path(batch_dirs[0]).resolve().name)}.html"


def report_main(
    batch_dir: Path | Sequence[Path],
    *,
    output: Path | None = None,
    out: TextIO,
    err: TextIO,
) -> ExitStatus:
    """``batch report``: write the HTML report (default ``BATCH_DIR/report.html``; for two
    batch dirs ``B/report-vs-<A>.html``) and print its path on ``out``.

    Raises a :class:`~batch.errors.LocatedError` (exit status 2), ``PATH: message``, when a
    summary is missing or unreadable or the report cannot be written.
    """
    batch_dirs = [Path(batch_dir)] if isinstance(batch_dir, str | Path) else list(batch_dir)
    if len(batch_dirs) not in (1, 2):
        raise LocatedError("batch report: give one batch dir, or two to compare")
    try:
        summaries = [load_summary(path) for path in batch_dirs]
    except ValueError as exc:
        raise LocatedError(str(exc)) from None
    runs = [read_invocations(path, on_skip=lambda why: _warn(why, err)) for path in batch_dirs]
    if len(batch_dirs) == 1:
        output = Path(output) if output is not None else batch_dirs[0] / REPORT
        page = render_report(
            summaries[0], batch_dir=batch_dirs[0], report_path=output, runs=runs[0]
        )
    else:
        output = Path(output) if output is not None else comparison_path(batch_dirs)
        page = render_comparison(
            (summaries[0], summaries[1]),
            batch_dirs=(batch_dirs[0], batch_dirs[1]),
            runs=(runs[0], runs[1]),
        )
    files = [(output, page)]
    if len(batch_dirs) == 1 and folds(summary_rows(summaries[0])):
        # The page lists the first failures and links to this file for all of them.
        tsv = failures_tsv(summary_rows(summaries[0]))
        files.insert(0, (failures_path(output), tsv))
    for path, text in files:
        try:
            atomic_write_bytes(path, text.encode())
        except OSError as exc:
            raise LocatedError(f"{path}: {exc.strerror or exc}") from None
    print(output, file=out)
    return ExitStatus.OK
