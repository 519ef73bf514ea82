"""The random case order of a ``stop_when`` sweep: drawn from a seed kept in the batch, the
same on every resume and for every model (docs/sweep-file.md, "stop_when").

A stop is valid only if the cases run before it are a uniform sample of the case set, and
a compare only if both models ran the same ones: so the cases run in the order of
``sha256(seed, case id)``, a uniformly random permutation that keeps every other case's
place when a case is added or removed. The seed is the sweep's ``stop_when.seed``, else
drawn when the batch is made and kept in ``batch-logs/case-order.json``; a resume reads it
back there, so a resumed batch runs, and stops on, the very order the first run began.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import attrs

from batch.layout import CASE_ORDER, LOGS_DIR
from batch.sweep.load import Sweep
from run_support.atomic import atomic_write_bytes
from run_support.jsonio import dumps, loads
from run_support.safe_files import read_bytes

_T = TypeVar("_T")
#: The most a seed file may hold (it holds a dozen bytes).
_MAX_BYTES = 4096


def order_key(seed: int, case_id: str) -> bytes:
    """Where ``case_id`` falls in the order of ``seed``."""
    return hashlib.sha256(f"{seed}\0{case_id}".encode()).digest()


def shuffled(items: Iterable[_T], seed: int, case_id: Callable[[_T], str]) -> list[_T]:
    """``items`` in the order of ``seed``, each placed by its ``case_id``."""
    return sorted(items, key=lambda item: order_key(seed, case_id(item)))


def seed_path(batch_dir: Path) -> Path:
    return batch_dir / LOGS_DIR / CASE_ORDER


def read_seed(batch_dir: Path) -> int | None:
    """The seed kept in ``batch_dir``, or None when there is none (or it is unreadable: a
    batch made before ``stop_when`` was set draws one)."""
    try:
        data = loads(read_bytes(seed_path(batch_dir), _MAX_BYTES))
    except (OSError, ValueError):
        return None
    seed = data.get("seed") if isinstance(data, dict) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else None


def write_seed(batch_dir: Path, seed: int) -> None:
    """Keep ``seed`` in ``batch_dir`` (atomically, fsynced) unless it is there already."""
    if read_seed(batch_dir) == seed:
        return
    path = seed_path(batch_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, dumps({"seed": seed}) + b"\n", real_dirs=1)


@attrs.frozen
class ResolvedOrder:
    sweep: Sweep
    #: The seed was drawn now (a new batch, or one that kept none): to be written.
    drawn: bool


def resolve_seed(sweep: Sweep, batch_dir: Path | None) -> ResolvedOrder:
    """``sweep`` with its ``stop_when.seed`` set: the sweep's own, the batch's kept one, or
    a new one drawn now."""
    rule = sweep.stop_when
    if rule is None or rule.seed is not None:
        return ResolvedOrder(sweep, drawn=False)
    kept = None if batch_dir is None else read_seed(batch_dir)
    seed = kept if kept is not None else secrets.randbelow(2**31)
    evolved = attrs.evolve(sweep, stop_when=attrs.evolve(rule, seed=seed))
    return ResolvedOrder(evolved, drawn=kept is None)
