"""Where test data lives, for tests at any depth under tests/."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS.parent
TEST_DATA = TESTS / "data"
