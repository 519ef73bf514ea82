"""Where test data lives, for tests at any depth under tests/."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS.parent
TEST_DATA = TESTS / "data"

#: How the tests' subprocesses run batch (``python -m batch.cli``), as the hints in its
#: output repeat it: shell-quoted, ready to paste (batch.display.next_steps.invoked_program).
PROGRAM = shlex.join([sys.executable, "-m", "batch.cli"])
