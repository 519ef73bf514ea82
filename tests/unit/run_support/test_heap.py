"""The heap policy (run_support/heap.py)."""

from __future__ import annotations

import gc

from run_support.heap import built_then_frozen, gc_paused, thawed_after


def test_gc_paused_restores_the_collector_as_it_was() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_is_built_for_the_run_is_frozen_until_it_is_over() -> None:
    with thawed_after():
        with built_then_frozen():
            kept = [[n] for n in range(1000)]
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() >= len(kept)
    assert gc.get_freeze_count() == 0
