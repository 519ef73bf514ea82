"""Where each model stands against its ``stop_when``: the finished jobs in, the stops out.

:class:`StopTracker` is fed every job's final status (the carried records of a resume
first, then each finish) and keeps, per model (per pair for a compare), the confidence
sequence of :mod:`batch.stop_when.rules` over the unbroken prefix of the random case order:
a case enters once all its repeats have a final status, and only after every case before
it. So the stop is a function of the ledger alone — the same records give the same stop,
whatever order they finished in, through a crash and a resume — and the first prefix that
meets the rule is the stop (later cases change nothing of it).

A case's value is the share of its samples with a model outcome that passed; an ``error``
(a failure that says nothing about the model) is left out as the adjusted pass rate leaves
it out, and a case with no model outcome at all is passed over. Pure: plain data in and out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from batch.stop_when.confidence_sequence import Bounds, ConfidenceSequence, to_unit
from batch.stop_when.rules import Stop, compare_decided, half_width_reached
from batch.sweep.features.stop_when import StopWhen

_FINAL = frozenset({"passed", "failed", "error"})


@attrs.frozen
class Standing:
    """One model's (or the pair's) place: the interval now, the cases it is over, and the
    stop if the rule held."""

    bounds: Bounds
    stop: Stop | None
    #: The cases of the set (the sequence covers their rate too).
    cases: int
    #: The variance of the values read (on the sequence's [0, 1] scale).
    variance: float


class _Sequence:
    """The prefix of the order one sequence has read, and the sequence itself."""

    def __init__(self, rule: StopWhen, cases: int) -> None:
        self.sequence = ConfidenceSequence(rule.confidence, cases, rule.half_width)
        self.at = 0
        self.stop: Stop | None = None


class StopTracker:
    """The ``stop_when`` standing of every model of a sweep (the module's docstring)."""

    def __init__(
        self,
        rule: StopWhen,
        order: Sequence[str],
        models: Sequence[str],
        repeats: Mapping[str, int],
        own: Mapping[str, StopWhen | None] | None = None,
    ) -> None:
        """``own``: a model's rule in place of ``rule`` (a ``half_width`` rule's; None: the
        model is not stopped)."""
        self.rule = rule
        self._order = list(order)
        self._repeats = dict(repeats)
        #: (case, model) -> {repeat: final status}
        self._finished: dict[tuple[str, str], dict[int, str]] = {}
        self._groups: dict[str, tuple[str, ...]] = {}
        self._rules: dict[str, StopWhen] = {}
        if rule.compare is not None:
            self._groups["pair"], self._rules["pair"] = rule.compare, rule
        else:
            for model in models:
                mine = rule if own is None else own.get(model, rule)
                if mine is not None:
                    self._groups[model], self._rules[model] = (model,), mine
        self._sequences = {
            name: _Sequence(self._rules[name], len(self._order)) for name in self._groups
        }

    def record(self, case: str, model: str, repeat: int, status: str) -> list[str]:
        """A job's final status (``passed``, ``failed``, ``error``; anything else is not
        final and ignored); returns the models that stopped on it, newly."""
        if status not in _FINAL or not 1 <= repeat <= self._repeats.get(model, 0):
            return []
        self._finished.setdefault((case, model), {})[repeat] = status
        stopped: list[str] = []
        for name, members in self._groups.items():
            if model in members:
                stopped += self._advance(name, members)
        return stopped

    def record_all(self, jobs: Iterable[tuple[str, str, int, str]]) -> list[str]:
        """:meth:`record` for many ``(case, model, repeat, status)``."""
        stopped: list[str] = []
        for job in jobs:
            stopped += self.record(*job)
        return stopped

    def stop_of(self, model: str) -> Stop | None:
        """The stop ``model`` is under, or None while it runs on."""
        return self._sequences[self._group_of(model)].stop if self.governs(model) else None

    def governs(self, model: str) -> bool:
        """Whether the rule stops ``model`` at all (a compare stops only its pair)."""
        return any(model in members for members in self._groups.values())

    def standing(self, model: str) -> Standing:
        """Where ``model`` stands (for a compare, the pair's interval of B - A)."""
        held = self._sequences[self._group_of(model)]
        bounds = held.sequence.bounds()
        if self.rule.compare is not None:
            bounds = bounds.as_difference()
        return Standing(bounds, held.stop, len(self._order), held.sequence.variance)

    def rule_of(self, model: str) -> StopWhen:
        """The rule ``model`` is stopped by (its own, or the sweep's)."""
        return self._rules[self._group_of(model)]

    def _group_of(self, model: str) -> str:
        return next(name for name, members in self._groups.items() if model in members)

    def _advance(self, name: str, members: tuple[str, ...]) -> list[str]:
        held = self._sequences[name]
        before = held.stop
        while held.at < len(self._order):
            case = self._order[held.at]
            if not all(self._finished_case(case, model) for model in members):
                break
            held.at += 1
            first, last = self._unit(case, members[0]), self._unit(case, members[-1])
            if first is None or last is None:
                continue  # no model outcome (errors only): passed over, as the rates do
            held.sequence.add(first if len(members) == 1 else to_unit(last - first))
            if held.stop is None:
                held.stop = self._decide(self._rules[name], held.sequence.bounds())
        return list(members) if before is None and held.stop is not None else []

    @staticmethod
    def _decide(rule: StopWhen, bounds: Bounds) -> Stop | None:
        if rule.half_width is not None:
            reason = half_width_reached(bounds, rule.half_width)
        else:
            bounds = bounds.as_difference()
            reason = compare_decided(bounds, rule.margin)
        return None if reason is None else Stop(reason, bounds)

    def _finished_case(self, case: str, model: str) -> bool:
        """Whether every repeat of ``case`` x ``model`` has a final status."""
        return len(self._finished.get((case, model), ())) >= self._repeats[model]

    def _unit(self, case: str, model: str) -> float | None:
        """The case's value for ``model`` (a finished case); None: no model outcome."""
        done = self._finished[(case, model)].values()
        outcomes = [status == "passed" for status in done if status != "error"]
        return sum(outcomes) / len(outcomes) if outcomes else None
