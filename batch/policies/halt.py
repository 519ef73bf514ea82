"""When a sweep stops early: the ``halt`` policy and the default broken-setup rule.

Pure decisions over the finishes seen so far (docs/policies.md, "Stop early"):

- an explicit rule in the spirit of GNU parallel's ``--halt`` — ``soon,fail=3``,
  ``now,fail=10%``, ``soon,error=5`` — stops starting jobs (``soon``) or also stops the
  running ones (``now``) once a count or a percentage of finished jobs ended in ``error``
  (``error=``) or in ``error`` or ``failed`` (``fail=``). It counts jobs, so it sees only
  final finishes (an attempt that will be retried in-run is not a finished job);
- the default broken-setup rule: when the first ``window`` attempts (by default
  ``max(8, 2 * max_concurrent)``) all ended in ``error`` of one and the same category, the
  sweep measures its setup, not its models, and stops soon. It sees every attempt, retried
  ones included, so that a typo'd command is caught before retry backoffs spread it over the
  whole night.

``halt: off`` turns both off. The driver feeds :class:`Finish` entries in the order jobs
finished and acts on the :class:`Halt` that :func:`decide_halt` returns.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal, cast

import attrs

from batch.policies.shared_reason import says_why

HaltMode = Literal["soon", "now"]

#: A percentage threshold says nothing until this many jobs have finished: one error as
#: the first finish is 100 %, and stopping a night's sweep on it would be absurd.
PERCENT_MIN_FINISHED = 10
#: The broken-setup rule looks at no fewer first attempts than this.
SETUP_WINDOW_MIN = 8

_RULE = re.compile(r"(soon|now),(fail|error)=(\d+(?:\.\d+)?)(%?)")
_HINT = "write off, or e.g. soon,fail=3, now,fail=10% or soon,error=5"


@attrs.frozen
class Finish:
    """One finished attempt, as the halt policy sees it."""

    status: str
    category: str | None
    #: The classification's one line (``cannot start 'nonexistent-binary'``).
    reason: str = ""
    #: False for an attempt that is retried in-run: the job has not finished yet.
    final: bool = True
    #: The job's model: a crash shared across models is the harness's, not theirs.
    model: str = ""


@attrs.define
class FinalTally:
    """The jobs finished so far (final finishes only) and how many ended in each status:
    all a threshold rule needs, kept as finishes come rather than recounted on each one
    (a recount made a 100,000-job sweep with a ``halt`` rule quadratic)."""

    finished: int = 0
    by_status: Counter[str] = attrs.Factory(Counter)

    def add(self, finish: Finish) -> None:
        if finish.final:
            self.finished += 1
            self.by_status[finish.status] += 1

    @classmethod
    def of(cls, finishes: Iterable[Finish]) -> FinalTally:
        tally = cls()
        for finish in finishes:
            tally.add(finish)
        return tally


@attrs.frozen
class HaltRule:
    """An explicit threshold: ``when``, then ``count`` finishes or ``percent`` of them."""

    when: HaltMode
    #: ``{"error"}`` (``error=``) or ``{"error", "failed"}`` (``fail=``).
    statuses: frozenset[str]
    count: int | None = None
    percent: float | None = None

    @property
    def text(self) -> str:
        kind = "fail" if "failed" in self.statuses else "error"
        amount = f"{self.count}" if self.count is not None else f"{self.percent:g}%"
        return f"{self.when},{kind}={amount}"


@attrs.frozen
class HaltConfig:
    """The sweep's ``halt`` (or ``--halt``): an optional rule and the broken-setup rule."""

    rule: HaltRule | None = None
    setup_rule: bool = True
    #: First attempts the broken-setup rule looks at; None: ``max(8, 2 * max_concurrent)``.
    setup_window: int | None = None

    def window(self, max_concurrent: int) -> int:
        if self.setup_window is not None:
            return self.setup_window
        return max(SETUP_WINDOW_MIN, 2 * max_concurrent)


#: Off: no rule stops the sweep early.
HALT_OFF = HaltConfig(rule=None, setup_rule=False)


@attrs.frozen
class Halt:
    """Stop: ``soon`` starts nothing new, ``now`` also stops the running jobs."""

    mode: HaltMode
    #: One line for the display, ``events.jsonl`` and the summary.
    message: str
    #: Which rule fired: ``threshold`` or ``setup``.
    rule: str


def parse_halt(text: str) -> HaltConfig:
    """``off`` or ``soon|now,fail|error=N[%]``; ``ValueError`` with a one-line message.

    An explicit rule keeps the broken-setup rule on: a threshold of 10 % would otherwise let
    a typo'd command run ten jobs before saying so.
    """
    value = text.strip().lower().replace(" ", "")
    if value == "off":
        return HALT_OFF
    match = _RULE.fullmatch(value)
    if match is None:
        raise ValueError(f"cannot read halt {text!r} ({_HINT})")
    when_text, kind, number, percent = match.groups()
    when = cast(HaltMode, when_text)
    statuses = frozenset({"error", "failed"} if kind == "fail" else {"error"})
    if percent:
        share = float(number)
        if not 0 < share <= 100:
            raise ValueError(f"halt {text!r}: a percentage must be above 0 and at most 100")
        rule = HaltRule(when=when, statuses=statuses, percent=share)
    else:
        if "." in number or int(number) < 1:
            raise ValueError(f"halt {text!r}: a count must be a whole number of at least 1")
        rule = HaltRule(when=when, statuses=statuses, count=int(number))
    return HaltConfig(rule=rule)


def threshold_reached(rule: HaltRule, tally: FinalTally) -> tuple[int, int] | None:
    """``(matching, finished)`` when ``rule`` is reached by the jobs' final finishes."""
    matching = sum(tally.by_status[status] for status in rule.statuses)
    finished = tally.finished
    if rule.count is not None:
        return (matching, finished) if matching >= rule.count else None
    assert rule.percent is not None
    if finished < PERCENT_MIN_FINISHED:
        return None
    # Compared in whole jobs, so 10 % of 30 is exactly 3, not a float that misses it.
    needed = math.ceil(rule.percent * finished / 100 - 1e-9)
    return (matching, finished) if matching >= max(needed, 1) else None


def broken_setup(finishes: Sequence[Finish], window: int) -> Finish | None:
    """The first attempt, when the first ``window`` attempts show a broken setup; else None.

    Either all ended in ``error`` of its category (no pass, no model failure, no other
    category), or all failed — ``failed`` or ``error``, whatever the category — with one
    and the same reason across more than one model (:func:`shared_crash`)."""
    if len(finishes) < window or window < 1:
        return None
    first = finishes[0]
    seen = finishes[:window]
    one_category = first.status == "error" and first.category is not None
    if one_category and all(f.status == "error" and f.category == first.category for f in seen):
        return first
    return first if shared_crash(seen) else None


def shared_crash(finishes: Sequence[Finish]) -> bool:
    """Whether ``finishes`` all failed with one reason, across more than one model.

    A harness that dies before the model is asked (an uncaught exception, exit 1: "the
    model failed") fails every model alike; a model's own failures differ from case to
    case and from model to model. A traceback alone cannot tell them apart — a model's
    code raising is a genuine model failure — but the same line for every first job of
    several models can only be the setup's.
    """
    if not finishes:
        return False
    reason = finishes[0].reason
    return (
        says_why(reason)
        and all(f.status in ("failed", "error") and f.reason == reason for f in finishes)
        and len({f.model for f in finishes}) > 1
    )


@attrs.define
class KeptFinishes:
    """The finishes :func:`decide_halt` can still read, in order, and how many there were.

    The setup rule reads the first ``window`` finishes, or every one once every breaker is
    open, and then finds a broken setup only if all of them share one ``error`` category or
    one failing reason (:func:`broken_setup`). So past the first ``window``, a finish is
    kept only while every one kept so far still shares one or the other; once neither
    holds, no longer prefix can show a broken setup, and a finish is only counted. A
    sweep of 200,000 passing jobs kept 200,000 finishes (88 bytes each) for a rule that
    stopped reading them after the first few.
    """

    window: int
    kept: list[Finish] = attrs.Factory(list)
    count: int = 0
    _one_category: bool = True
    _one_reason: bool = True

    def add(self, finish: Finish) -> None:
        self.count += 1
        first = self.kept[0] if self.kept else finish
        self._one_category = (
            self._one_category
            and finish.status == "error"
            and finish.category is not None
            and finish.category == first.category
        )
        self._one_reason = (
            self._one_reason
            and finish.status in _FAILING
            and says_why(finish.reason)
            and finish.reason == first.reason
        )
        if self._one_category or self._one_reason or len(self.kept) < self.window:
            self.kept.append(finish)


_FAILING = frozenset({"failed", "error"})


def decide_halt(
    config: HaltConfig,
    finishes: Sequence[Finish],
    *,
    max_concurrent: int,
    resume_command: str = "batch SWEEP --resume",
    tally: FinalTally | None = None,
) -> Halt | None:
    """Whether the sweep stops now, given every attempt finished so far, in order.

    ``resume_command`` is what the message tells the user to run once the setup is fixed.
    ``tally``: ``FinalTally.of(finishes)``, kept by the caller as finishes come (counted
    here when not given).
    """
    if config.setup_rule:
        window = config.window(max_concurrent)
        sample = broken_setup(finishes, window)
        if sample is not None:
            cause = f" ({sample.reason})" if sample.reason else ""
            seen = finishes[:window]
            if all(f.status == "error" and f.category == sample.category for f in seen):
                what = f"ended in {sample.category}{cause}"
            else:  # failed, or of other categories: one reason across models (shared_crash)
                models = len({f.model for f in seen})
                what = f"failed with the same reason across {models} models{cause}"
            return Halt(
                "soon",
                f"first {window} jobs all {what}: stopping; fix the setup, then {resume_command}",
                "setup",
            )
    if config.rule is not None:
        reached = threshold_reached(
            config.rule, FinalTally.of(finishes) if tally is None else tally
        )
        if reached is not None:
            matching, finished = reached
            what = " or ".join(sorted(config.rule.statuses))
            stop = "starting no new jobs" if config.rule.when == "soon" else "stopping all jobs"
            return Halt(
                config.rule.when,
                f"halt {config.rule.text}: {matching} of {finished} finished jobs ended in "
                f"{what}; {stop} ({resume_command} continues)",
                "threshold",
            )
    return None
