"""The process's heap policy for the ledger's big reads and the driver's long runs: the
cyclic garbage collector paused while many small acyclic objects are built, and what lives
for the whole run left out of its collections.

In one place (issue 44): a ledger read, a plan and a driver each build hundreds of thousands
of records, cases and jobs, none of them in a reference cycle. Every allocation burst
triggers collections that walk them and find nothing (a fifth to a third of a 100,000-job
plan, ``bench/resume_scale.py``), and a driver's later full collections walk the plan again
and again. Reference counting still frees everything as usual.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while building many small acyclic objects; nested uses
    leave it as the outermost found it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def built_then_frozen() -> Iterator[None]:
    """Build what the process keeps until it exits with the collector paused, then freeze
    it (``gc.freeze``, O(1)): left out of every later collection, yet still freed by
    reference counting. Otherwise the first collections after the pause walk all of it."""
    with gc_paused():
        yield
        gc.freeze()


@contextlib.contextmanager
def thawed_after() -> Iterator[None]:
    """Unfreeze what :func:`built_then_frozen` froze once this is over, however it ended,
    so that a process running several sweeps (the tests) still collects what each left."""
    try:
        yield
    finally:
        gc.unfreeze()
