"""Fixtures shared by the ledger's tests."""

from __future__ import annotations

from typing import Any

import pytest

from run_support import ledger_scan
from run_support.ledger_index import Digest


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every record a reader parses from its file (not served by the index or
    the journal), in order."""
    seen: list[str] = []
    real = ledger_scan._read

    def counting(path: str, digest: Digest) -> tuple[Any, str | None]:
        seen.append(path)
        return real(path, digest)

    monkeypatch.setattr(ledger_scan, "_read", counting)
    return seen
