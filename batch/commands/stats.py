"""``batch stats BATCH_DIR [B]``: one batch dir's statistics, or two compared.

The numbers come from :mod:`batch.stats.rates`, the renderings from
:mod:`batch.stats.render`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from batch.errors import ExitStatus, LocatedError
from batch.stats.rates import GROUPINGS, batch_stats, compare_stats
from batch.stats.render import (
    FORMATS,
    RENDERERS,
    is_styled,
    output_width,
    render_table,
)
from batch.stats.source import load_summary, records_summary


def argument_problem(batch_dirs: Sequence[Path], fmt: str, by: str) -> str | None:
    if fmt not in RENDERERS:
        return f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}"
    if by not in GROUPINGS:
        return f"cannot group by {by!r}; use one of {', '.join(GROUPINGS)}"
    if len(batch_dirs) not in (1, 2):
        return "give one batch dir, or two to compare"
    return None


def stats_main(
    batch_dirs: Sequence[Path],
    *,
    fmt: str = "table",
    by: str = "model",
    source: str = "summary",
    wide: bool = False,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str] | None = None,
    compare: tuple[str, str] | None = None,
    keep: list[object] | None = None,
) -> ExitStatus:
    """``batch stats``: one batch dir → its statistics; two → A and B compared.

    The table fits the terminal (or ``COLUMNS``) unless ``wide``; other formats are data
    and always hold everything. ``keep`` gets the summaries and the result, for a caller
    that ends the process right after and need not free them one by one (a summary of
    500,000 rows is 10 million objects: a quarter of a second).

    Raises a :class:`~batch.errors.LocatedError` (exit status 2): ``PATH: message`` when a
    summary is missing or unreadable, ``batch stats: message`` when an argument is wrong.
    """
    problem = argument_problem(batch_dirs, fmt, by)
    if problem:
        raise LocatedError(f"batch stats: {problem}")
    try:
        load = records_summary if source == "records" else load_summary
        summaries = [load(path) for path in batch_dirs]
    except ValueError as exc:
        raise LocatedError(str(exc)) from None
    names = [str(path) for path in batch_dirs]
    if compare is not None and len(summaries) != 1:
        raise LocatedError("batch stats: --compare A B compares two models of one batch dir")
    if len(summaries) == 1:
        try:
            result = batch_stats(summaries[0], by=by, batch_dir=names[0], compare=compare)
        except ValueError as exc:
            raise LocatedError(f"batch stats: {exc}") from None
    else:
        result = compare_stats(summaries[0], summaries[1], by=by, batch_dirs=(names[0], names[1]))
    if keep is not None:
        keep.extend((summaries, result))
    if fmt == "table":
        environ = os.environ if environ is None else environ
        width = None if wide else output_width(out, environ)
        render_table(result, out, width=width, styled=is_styled(out, environ))
    else:
        RENDERERS[fmt](result, out)
    return ExitStatus.OK
