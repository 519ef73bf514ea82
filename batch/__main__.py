"""``python -m batch``: the same command line as ``batch``, when no console script is on PATH."""

from __future__ import annotations

from batch.cli import entry

entry(prog_name="batch")
