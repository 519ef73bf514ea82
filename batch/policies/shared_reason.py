"""When most of a model's failures share one reason: a harness that crashed, not a model.

A Python harness that dies with an uncaught exception exits 1, the code for "the model
failed": every job of the model is then ``failed`` with the same traceback line, and the
pass rate says 0 % of a model that was never asked. When the failures are not all alike
the broken-setup halt (``batch.policies.halt``) does not fire, but the closing lines and
``batch stats`` still say it: :func:`shared_reasons` finds the models, :func:`warning_line`
says it. Pure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import TypeGuard

import attrs

__all__ = ["MIN_FAILURES", "SharedReason", "says_why", "shared_reasons", "warning_line"]

#: A model needs this many failures before one reason among them counts as shared.
MIN_FAILURES = 3


@attrs.frozen
class SharedReason:
    model: str
    count: int
    failures: int
    reason: str


_BARE_EXIT = re.compile(r"exit code -?[0-9]+")


def says_why(reason: str | None) -> TypeGuard[str]:
    """Whether ``reason`` says more than how the process ended.

    A bare ``exit code 1`` is what every job of a harness that follows the convention
    (exit 1: the model failed, nothing else said) or declares it in ``exit_codes`` ends
    with: many failures sharing it are many models failing, not one crash. A reason with a
    traceback line or a log pattern's match (``exit code 1: RuntimeError: ...``) does tell.
    """
    return reason is not None and reason != "" and _BARE_EXIT.fullmatch(reason) is None


def shared_reasons(rows: Iterable[tuple[str, str, str | None]]) -> list[SharedReason]:
    """Per model (in first-seen order), the reason more than half of its ``failed`` jobs
    share, when it has at least :data:`MIN_FAILURES`. ``rows``: ``(model, status, reason)``."""
    failures: dict[str, int] = {}
    reasons: dict[str, Counter[str]] = {}
    for model, status, reason in rows:
        if status != "failed":  # an error is already said not to be the model's
            continue
        failures[model] = failures.get(model, 0) + 1
        if says_why(reason):
            # Not setdefault(model, Counter()): that makes a Counter per failure (250,000
            # in a batch of 500,000 jobs), to throw all but one away.
            counter = reasons.get(model)
            if counter is None:
                counter = reasons[model] = Counter()
            counter[reason] += 1
    found = []
    for model, count in failures.items():
        if count < MIN_FAILURES or model not in reasons:
            continue
        reason, shared = reasons[model].most_common(1)[0]
        if shared * 2 > count:
            found.append(SharedReason(model, shared, count, reason))
    return found


def warning_line(shared: SharedReason) -> str:
    return (
        f"warning: {shared.model}: {shared.count} of {shared.failures} failures share one "
        f"reason ({shared.reason}): a crashed harness, not the model? (docs/ledger.md)"
    )
