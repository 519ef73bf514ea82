"""What ``batch stats`` says of a model ``stop_when`` stopped: the interval it stopped on,
the cases it used, and that it stopped early (docs/stats.md, "Stopped early").

The driver keeps, in the summary's ``stop_when`` (docs/summary.md), every model's standing
against the rule. A model stopped by ``half_width`` is read on the interval it stopped on:
its ``adjusted_pass_rate_low``/``_high`` are that confidence sequence's (the method
:data:`~batch.stop_when.confidence_sequence.METHOD`), which holds at a stop chosen by looking,
where the fixed-n interval of the same cases would not. A compare's interval is of B - A:
it goes with the pair, in each model's ``stop_when`` object and the document's. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from batch.stop_when.confidence_sequence import METHOD

_FIELDS = ("stopped", "reason", "cases_used", "cases", "estimate", "low", "high")


def apply_stops(
    document: MutableMapping[str, Any], groups: Sequence[MutableMapping[str, Any]], by: str
) -> None:
    """Mark the model groups of ``document`` with the summary's ``stop_when`` (read from
    ``document["stop_when"]``, put there by the caller)."""
    rule = document.get("stop_when")
    if not isinstance(rule, Mapping) or by != "model":
        return
    models = rule.get("models")
    if not isinstance(models, Mapping):
        return
    pair = rule.get("compare")
    for group in groups:
        standing = models.get(group.get("model"))
        if not isinstance(standing, Mapping) or not _valid(standing):
            continue
        group["stop_when"] = {key: standing[key] for key in _FIELDS}
        if standing["stopped"] and pair is None:
            group["adjusted_pass_rate_low"] = standing["low"]
            group["adjusted_pass_rate_high"] = standing["high"]
            group["adjusted_pass_rate_method"] = METHOD


def _valid(standing: Mapping[str, Any]) -> bool:
    """A hand-edited summary's object is left out rather than trusted."""
    numbers = all(
        isinstance(standing.get(key), int | float) and not isinstance(standing.get(key), bool)
        for key in ("cases_used", "cases", "estimate", "low", "high")
    )
    return numbers and isinstance(standing.get("stopped"), bool)


def stop_notes(document: Mapping[str, Any], groups: Sequence[Mapping[str, Any]]) -> list[str]:
    """A line under the table per model ``stop_when`` stopped (or did not)."""
    rule = document.get("stop_when")
    if not isinstance(rule, Mapping):
        return []
    notes = []
    pair = rule.get("compare")
    for group in groups:
        standing = group.get("stop_when")
        if not isinstance(standing, Mapping):
            continue
        used = f"{standing['cases_used']:,} of {standing['cases']:,} cases"
        interval = f"{_share(standing['low'], pair)} to {_share(standing['high'], pair)}"
        what = f"{pair[1]} - {pair[0]}" if pair else "adjusted pass rate"
        if standing["stopped"]:
            notes.append(
                f"{group['model']}: stopped early by stop_when ({standing['reason']}) after "
                f"{used}: {what} {interval} (anytime-valid confidence sequence)."
            )
        else:
            notes.append(
                f"{group['model']}: not stopped by stop_when: {what} {interval} after {used}."
            )
    return notes


def _share(value: float, signed: object) -> str:
    return f"{value * 100:+.1f} pp" if signed else f"{value * 100:.1f}%"
