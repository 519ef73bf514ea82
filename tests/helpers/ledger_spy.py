"""Which records a ledger read parses, to prove what the ledger's cache served."""

from __future__ import annotations

from typing import Any

import pytest

from run_support import ledger_scan


def spy_on_parsing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The records parsed from now on (served from the cache: not listed)."""
    parsed: list[str] = []
    real = ledger_scan.read_record

    def counting(path: str) -> tuple[Any, str | None]:
        parsed.append(path)
        return real(path)

    monkeypatch.setattr(ledger_scan, "read_record", counting)
    return parsed
