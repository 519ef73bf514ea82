"""The way out of a ``cases: {dir, glob}`` that finds nothing: the directory its name was
likely meant as, or what the directory holds and the glob that would match it."""

from __future__ import annotations

import collections
from pathlib import Path

from batch.suggest import closest


def near_dir(directory: Path) -> str:
    """A hint naming the directory beside ``directory`` that its name was likely meant as
    (`` (did you mean '/x/cases'?)``), or ``""``."""
    try:
        siblings = [p.name for p in directory.parent.iterdir() if p.is_dir()]
    except OSError:
        return ""
    close = closest(directory.name, siblings)
    return f" (did you mean {str(directory.parent / close)!r}?)" if close else ""


def what_dir_holds(directory: Path) -> str:
    """A hint for a glob that matched nothing: the commonest kind of file in ``directory``
    as a glob that would match, or that it is empty."""
    try:
        names = [p.name for p in directory.iterdir() if not p.name.startswith(".")]
    except OSError:
        return ""
    if not names:
        return " (the directory is empty)"
    suffixes = collections.Counter(Path(name).suffix for name in names if Path(name).suffix)
    held = f"{len(names):,} {'entry' if len(names) == 1 else 'entries'}"
    if suffixes:
        suffix, count = suffixes.most_common(1)[0]
        return f' (it holds {held}; {count:,} would match glob: "*{suffix}")'
    return f' (it holds {held}, none with a suffix; glob: "*" matches them)'
