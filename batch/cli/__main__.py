"""``python -m batch.cli``: the ``batch`` program (as the tests and benchmarks run it)."""

from __future__ import annotations

from batch.cli import entry

entry()
