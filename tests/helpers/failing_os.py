"""``os`` with one call failing on chosen paths: a full or unwritable disk, injected where
``run_support.atomic`` writes (shared by the disk-full and job-damage scenarios)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


class FailingOS:
    """``os`` for ``run_support.atomic``, but ``call`` fails with ``code`` when ``fails(path)``."""

    def __init__(self, call: str, code: int, fails: Callable[[str], bool]) -> None:
        self.call, self.code, self.fails = call, code, fails
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(os, name)
        if name != self.call:
            return real

        def failing(first: Any, *args: Any, **kwargs: Any) -> Any:
            path = os.readlink(f"/proc/self/fd/{first}") if isinstance(first, int) else first
            if self.fails(os.fspath(path)):
                self.failures += 1
                raise OSError(self.code, os.strerror(self.code))
            return real(first, *args, **kwargs)

        return failing
