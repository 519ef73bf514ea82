"""``batch report BATCH_DIR``: write the HTML report that :mod:`batch.results.report` renders."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from batch.errors import ExitStatus, LocatedError
from batch.layout import REPORT
from batch.results.report import render_report
from batch.results.stats_input import load_summary
from run_support.atomic import atomic_write_bytes


def report_main(
    batch_dir: Path, *, output: Path | None = None, out: TextIO, err: TextIO
) -> ExitStatus:
    """``batch report``: write the HTML report (default ``BATCH_DIR/report.html``) and print
    its path on ``out``.

    Raises a :class:`~batch.errors.LocatedError` (exit status 2), ``PATH: message``, when the
    summary is missing or unreadable or the report cannot be written.
    """
    output = Path(output) if output is not None else Path(batch_dir) / REPORT
    try:
        summary = load_summary(batch_dir)
    except ValueError as exc:
        raise LocatedError(str(exc)) from None
    page = render_report(summary, batch_dir=Path(batch_dir), report_path=output)
    try:
        atomic_write_bytes(output, page.encode())
    except OSError as exc:
        raise LocatedError(f"{output}: {exc.strerror or exc}") from None
    print(output, file=out)
    return ExitStatus.OK
