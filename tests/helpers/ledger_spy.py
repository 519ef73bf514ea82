"""Which records a ledger read parses, to prove what the index and journal served."""

from __future__ import annotations

from typing import Any

import pytest

from run_support import ledger_index, ledger_scan


def spy_on_parsing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The records parsed from now on (served from the index or journal: not listed)."""
    parsed: list[str] = []
    real = ledger_scan._read

    def counting(path: str, digest: ledger_index.Digest) -> tuple[Any, str | None]:
        parsed.append(path)
        return real(path, digest)

    monkeypatch.setattr(ledger_scan, "_read", counting)
    return parsed
