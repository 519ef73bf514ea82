"""The result ledger: what one run records in ``run-meta.json`` and how records are read back.

Writers: the batch runner (``write_run_meta``) and Python jobs reporting their own outcome
(``write_result`` → ``result.json``). Readers: ``load_recorded_runs`` (resume, plan, status,
stats). The on-disk format is ``run-meta.json`` schema 1, documented in ``docs/ledger.md``;
renaming or removing a key is a breaking change that needs ``SCHEMA_VERSION`` to go up.

This module needs nothing beyond the runtime dependencies: no container engine, no network.

Why one module of ~560 lines: a record's format, its writer and its reader are tied
together by the ledger index's digest of this module's reading rules (a changed reader
retires every cached read, ``docs/ledger.md``), so the rules a record is written and read
by must change together. The scan, the index, the journal and the forked stat children are
their own modules (``ledger_scan``, ``ledger_index``, ``ledger_journal``, ``ledger_stats``).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import itertools
import math
import operator
import os
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from itertools import repeat
from pathlib import Path
from typing import Any, Literal

import attrs

from run_support import jsonio
from run_support.atomic import atomic_write_bytes
from run_support.ledger_fstat import StatsInChildren
from run_support.ledger_index import Digest, gc_paused
from run_support.ledger_journal import journal_record
from run_support.ledger_scan import ModelDirRecords, read_ledger_files
from run_support.names import RESULT_JSON, RUN_META

SCHEMA_VERSION = 1

Outcome = Literal["passed", "failed", "error"]
Status = Literal["passed", "failed", "error"]
OUTCOMES: frozenset[str] = frozenset({"passed", "failed", "error"})

#: Failure categories that say nothing about the model: the run carries no signal, so
#: ``--retry-failed`` reruns them and adjusted pass rates leave them out.
NON_MODEL_FAILURE_CATEGORIES: frozenset[str] = frozenset(
    {"infra_failure", "api_or_credit", "task_data", "build_instruction"}
)
MODEL_FAILURE = "model_failure"
INFRA_FAILURE = "infra_failure"


@attrs.define
class RunMeta:
    """One run's recorded outcome (``run-meta.json``, schema 1)."""

    test_case: str
    model: str
    outcome: str
    timestamp: str = ""
    finished_at: str | None = None
    duration_seconds: float = 0.0
    failure_category: str | None = None
    stop_reason: str | None = None
    exit_code: int | None = None
    #: The attempt number the driver gave the run; None when the record names none (another
    #: harness's), which orders it below every record that does (``record_order``).
    attempt: int | None = 1
    batch_id: str | None = None
    run_dir: str | None = None
    result: dict[str, Any] = attrs.Factory(dict)
    steps: list[Any] | None = None
    schema: int = SCHEMA_VERSION
    #: One line: why a run that did not pass ended as it did (absent on a pass and in
    #: records written before reasons were kept).
    reason: str | None = None
    #: What this attempt spent, steps summed, and what the job has spent in this batch dir
    #: across its attempts, this one included (``run_support.usage``, docs/usage.md): a
    #: usage object as written, None when nothing was reported. Read back with
    #: ``run_support.usage.usage_of``, which keeps only the valid fields.
    usage: dict[str, Any] | None = None
    usage_total: dict[str, Any] | None = None
    #: How many containers labelled as this attempt's the driver removed when it ended
    #: (the sweep's ``containers`` key; docs/ledger.md); None: the sweep sets no engine.
    containers_removed: int | None = None
    #: Which of the sweep's ``repeats`` samples of (case, model) this run is, from 1; a
    #: record that names none is repeat 1 (every record before repeats existed).
    repeat: int = 1
    #: Keys this version does not know, kept so rewriting a foreign record loses nothing.
    extra: dict[str, Any] = attrs.Factory(dict)

    @property
    def key(self) -> tuple[str, str, int]:
        """The job this run belongs to: (case, model, repeat)."""
        return (self.test_case, self.model, self.repeat)

    @property
    def attempt_number(self) -> int:
        """The attempt as a count: a record that names none counts as the first."""
        return self.attempt or 1


@functools.cache
def _structure() -> Callable[[Mapping[str, Any], type[RunMeta]], RunMeta]:
    """cattrs' structuring of a RunMeta, made on the first record parsed: a read served by
    the ledger index parses none and need not import cattrs."""
    import cattrs

    converter = cattrs.Converter(forbid_extra_keys=True)
    # Free-form values (a job's result, step entries, foreign keys) pass through untouched.
    converter.register_structure_hook_func(
        lambda type_: type_ in (Any, dict[str, Any], list[dict[str, Any]] | None),
        lambda value, _: value,
    )
    return converter.structure


class InvalidRecord(ValueError):
    """A ``run-meta.json`` that cannot be read as an outcome; it is skipped, never guessed."""


_FIELDS = tuple(a.name for a in attrs.fields(RunMeta) if a.name != "extra")
_FIELD_SET = frozenset(_FIELDS)


def _number_or_zero(value: Any) -> float:
    # Other harnesses write "", null or "n/a" here; a duration is informative, not identity,
    # so an unreadable one is 0 rather than a reason to throw the outcome away.
    if type(value) is float:
        return value if math.isfinite(value) else 0.0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 0.0
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _object_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _outcome_of(raw: Mapping[str, Any]) -> tuple[str, str | None]:
    """The (outcome, failure_category) a raw record states, in this project's or a foreign shape."""
    outcome = raw.get("outcome")
    category = raw.get("failure_category")
    if category is not None and not isinstance(category, str):
        raise InvalidRecord(f"failure_category is {type(category).__name__}, not a string")
    if category is not None and not jsonio.is_text(category):
        raise InvalidRecord("failure_category is not valid Unicode text (a lone surrogate)")
    if isinstance(outcome, str) and outcome.lower() in OUTCOMES:
        outcome = outcome.lower()
    elif outcome is not None:
        raise InvalidRecord(f"unknown outcome {outcome!r}")
    # Shapes written by other harnesses: each flag is explicit about what happened.
    elif raw.get("infra_failure") is True:
        outcome, category = "error", category or INFRA_FAILURE
    elif raw.get("model_not_intercepted") is True or raw.get("intercepted") is False:
        outcome, category = "failed", category or MODEL_FAILURE
    elif raw.get("intercepted") is True:
        outcome = "passed"
    else:
        raise InvalidRecord("no outcome")
    if outcome == "passed":
        return outcome, None
    if category is None:
        category = MODEL_FAILURE if outcome == "failed" else INFRA_FAILURE
    return outcome, category


def run_meta_from_dict(raw: Any) -> RunMeta:
    """Structure a parsed ``run-meta.json``; raises :class:`InvalidRecord` when it has no outcome.

    Tolerant of other harnesses' shapes: ``intercepted``, ``infra_failure`` and
    ``model_not_intercepted`` flags, a missing or non-numeric ``duration_seconds`` (read as
    0), other keys of the wrong type (read as their default), unknown keys (kept in
    ``extra``). Never guesses identity: ``test_case`` and ``model`` must be non-empty strings.
    """
    # The tolerance rules (foreign flags, unreadable durations) are plain code; cattrs then
    # builds the RunMeta from the normalised fields and checks their types. This runs only
    # for records the ledger index does not already hold (see bench/ledger_scan.py).
    if not isinstance(raw, dict):
        raise InvalidRecord(f"record is a JSON {type(raw).__name__}, not an object")
    get = raw.get
    test_case, model = get("test_case"), get("model")
    if not isinstance(test_case, str) or not test_case:
        raise InvalidRecord("missing or non-string 'test_case'")
    if not isinstance(model, str) or not model:
        raise InvalidRecord("missing or non-string 'model'")
    if not (jsonio.is_text(test_case) and jsonio.is_text(model)):
        # No sweep can name such a job (the sweep loader refuses lone surrogates).
        raise InvalidRecord("'test_case' or 'model' is not valid Unicode text (a lone surrogate)")
    repeat = get("repeat", 1)
    if type(repeat) is not int or repeat < 1:
        # Part of the record's identity: never guessed.
        raise InvalidRecord(f"'repeat' is {repeat!r}, not a whole number of at least 1")
    outcome, category = _outcome_of(raw)
    timestamp, result, steps = get("timestamp"), get("result"), get("steps")
    attempt = _int_or_none(get("attempt"))
    unknown = raw.keys() - _FIELD_SET
    fields = dict(
        test_case=test_case,
        model=model,
        outcome=outcome,
        failure_category=category,
        timestamp=timestamp if isinstance(timestamp, str) else "",
        finished_at=_str_or_none(get("finished_at")),
        duration_seconds=_number_or_zero(get("duration_seconds")),
        stop_reason=_str_or_none(get("stop_reason")),
        exit_code=_int_or_none(get("exit_code")),
        attempt=attempt if attempt is not None and attempt >= 1 else None,
        batch_id=_str_or_none(get("batch_id")),
        run_dir=_str_or_none(get("run_dir")),
        result=result if isinstance(result, dict) else {},
        steps=steps if isinstance(steps, list) else None,
        schema=_int_or_none(get("schema")) or SCHEMA_VERSION,
        reason=_str_or_none(get("reason")),
        usage=_object_or_none(get("usage")),
        usage_total=_object_or_none(get("usage_total")),
        containers_removed=_int_or_none(get("containers_removed")),
        repeat=repeat,
        extra={k: v for k, v in raw.items() if k in unknown} if unknown else {},
    )
    return _structure()(fields, RunMeta)


def run_meta_to_dict(meta: RunMeta) -> dict[str, Any]:
    """The JSON object for ``meta``: schema-1 keys in a stable order, unknown keys after them."""
    ordered = {key: getattr(meta, key) for key in _KEY_ORDER}
    # Additive keys (docs/ledger.md): written only when set, so a passing record without
    # usage reads exactly as it did before they existed.
    for key in _OPTIONAL_KEYS:
        value = getattr(meta, key)
        if value is not None:
            ordered[key] = value
    if meta.repeat != 1:  # absent means 1: a sweep without repeats writes what it did
        ordered["repeat"] = meta.repeat
    if meta.steps is not None:
        ordered["steps"] = meta.steps
    for key, value in meta.extra.items():
        ordered.setdefault(key, value)
    return ordered


# The order docs/ledger.md shows, so a human diffing two records reads them side by side.
_KEY_ORDER = (
    "schema", "test_case", "model", "timestamp", "finished_at", "duration_seconds",
    "outcome", "failure_category", "stop_reason", "exit_code", "attempt", "batch_id",
    "run_dir", "result",
)  # fmt: skip
_OPTIONAL_KEYS = ("reason", "usage", "usage_total", "containers_removed")


# --- status -------------------------------------------------------------------------------


def is_infra_class_failure(
    meta: RunMeta, categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES
) -> bool:
    """True when the run failed for a reason that says nothing about the model.

    Such a run is excluded from adjusted scoring and rerun by ``--retry-failed``: asking the
    model again is the only way to learn anything about it.
    """
    return meta.outcome != "passed" and meta.failure_category in categories


def job_status(meta: RunMeta, categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES) -> Status:
    """``passed`` | ``error`` (a non-model failure) | ``failed`` (the model's own failure)."""
    if meta.outcome == "passed":
        return "passed"
    if is_infra_class_failure(meta, categories):
        return "error"
    return "failed"


def record_status(
    meta: RunMeta, categories: Collection[str] = NON_MODEL_FAILURE_CATEGORIES
) -> tuple[Status, str | None]:
    """What a record makes of its job: :func:`job_status` and the failure category, which is
    None for a passed job (a category on a pass says nothing about a failure)."""
    status = job_status(meta, categories)
    return status, None if status == "passed" else meta.failure_category


#: A score past this is no grade, partial credit or BLEU: read as none (docs/stats.md).
MAX_SCORE = 1e15


def record_score(meta: RunMeta) -> float | None:
    """The numeric ``score`` the job reported in ``result.json`` (partial credit, a judge's
    grade): a finite number within ``±MAX_SCORE``; None when absent or not such a number."""
    value = meta.result.get("score")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and abs(number) <= MAX_SCORE else None


def record_reason(meta: RunMeta) -> str | None:
    """One line: why a run that did not pass ended as it did; None for a pass.

    The record's ``reason``; for a record written before reasons were kept (or by another
    harness), what its other keys tell: the driver's note in ``result``, the timeout, the
    signal or the exit code. None when it tells nothing.
    """
    if meta.outcome == "passed":
        return None
    if meta.reason:
        return meta.reason
    for key in ("record_error", "classification_error", "start_error"):
        note = meta.result.get(key)
        if isinstance(note, str) and note:
            return note
    code = meta.exit_code
    if meta.stop_reason == "timeout":
        return "timeout"
    if code is not None and code < 0:
        return f"killed by signal {-code}"
    return None if code is None else f"exit code {code}"


# --- time ---------------------------------------------------------------------------------


def utc_stamp(moment: datetime | None = None) -> str:
    """ISO 8601 UTC with microseconds and ``Z``, the ledger's timestamp format."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_OLDEST = datetime.min.replace(tzinfo=UTC)


def timestamp_order(stamp: str) -> datetime:
    """Sort key for a record's timestamp; unparsable or missing ones sort oldest."""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return _OLDEST
    if moment.tzinfo is None:
        # Naive stamps from other harnesses are taken as UTC, as ours are.
        return moment.replace(tzinfo=UTC)
    return moment


# --- writing ------------------------------------------------------------------------------


def write_run_meta(run_dir: Path | str, meta: RunMeta, *, fsync: bool = True) -> Path:
    """Write ``run_dir/run-meta.json`` atomically; the previous file survives any failure.

    A run dir laid out as the driver lays it out (``meta.run_dir`` is its model dir and
    name) also gets a line in its batch dir's ledger journal, so the ledger index is
    current even if the driver dies next (``run_support.ledger_scan``).
    """
    path = Path(run_dir) / RUN_META
    data = jsonio.dumps(run_meta_to_dict(meta), indent=True)
    written = atomic_write_bytes(path, data, fsync=fsync)
    model_dir, name = path.parent.parent.name, path.parent.name
    if meta.run_dir == f"{model_dir}/{name}":
        _journal(path.parent.parent.parent, model_dir, name, data, written)
    return path


def _journal(
    batch_dir: Path, model_dir: str, name: str, data: bytes, written: os.stat_result
) -> None:
    # Digested from the bytes written, exactly as a reader would digest the file.
    try:
        value = _RUN_META_DIGEST.make(jsonio.loads(data))
    except ValueError:
        return
    journal_record(batch_dir, model_dir, name, written, _RUN_META_DIGEST, value)


def write_result(
    run_dir: Path | str | None,
    outcome: Outcome,
    failure_category: str | None = None,
    **fields: Any,
) -> Path:
    """Report a job's outcome from inside the job, as ``run_dir/result.json``.

    ``run_dir`` ``None`` means the run dir the driver gave the job (``$BATCH_RUN_DIR``).
    Other keyword arguments (``score=0.8``, ...) end up in ``run-meta.json``'s ``result``.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {sorted(OUTCOMES)}, not {outcome!r}")
    if failure_category is not None and not isinstance(failure_category, str):
        raise TypeError("failure_category must be a string or None")
    if run_dir is None:
        run_dir = os.environ.get("BATCH_RUN_DIR")
        if not run_dir:
            raise ValueError("no run_dir given and $BATCH_RUN_DIR is not set")
    path = Path(run_dir) / RESULT_JSON
    payload = {"outcome": outcome, "failure_category": failure_category, **fields}
    atomic_write_bytes(path, jsonio.dumps(payload, indent=True))
    return path


# --- reading ------------------------------------------------------------------------------


class RecordedRuns(dict[tuple[str, str, int], RunMeta]):
    """``{(test_case, model, repeat): newest RunMeta}`` plus what the scan could not use.

    ``unreadable`` lists ``(run-meta path relative to the batch dir, reason)`` for every
    record that was skipped; ``incomplete`` lists run dirs that have no record at all (a run
    that was killed, or is still running).
    """

    def __init__(self) -> None:
        super().__init__()
        self.unreadable: list[tuple[str, str]] = []
        self.incomplete: list[str] = []
        #: With ``defer_index``: writes the ledger index this read found out of date (see
        #: ``run_support.ledger_scan.read_ledger_files``); None when it is current.
        self.save_index: Callable[[], None] | None = None


def record_order(meta: RunMeta) -> tuple[bool, int, datetime, str]:
    """Sort key of one pair's records: the greatest is the newest.

    The attempt number comes first because the driver assigns it (each attempt one more
    than the newest record's), while a timestamp is the clock of whichever host ran the
    job and may run fast. A record naming no attempt sorts below every record that names
    one; the timestamp, then the run dir path, only order records of the same attempt.
    """
    attempt = meta.attempt
    return (
        attempt is not None,
        attempt or 0,
        timestamp_order(meta.timestamp),
        meta.run_dir or "",
    )


def _is_newer(candidate: RunMeta, current: RunMeta) -> bool:
    return record_order(candidate) > record_order(current)


def _source_fingerprint() -> str:
    # The index caches records as this module reads them, so any change to this module
    # (a new foreign shape, a changed default) must retire indexes an older version built.
    try:
        source = Path(__file__).read_bytes()
    except OSError:
        return os.urandom(8).hex()  # no source to hash: never reuse an index
    return hashlib.sha256(source).hexdigest()[:16]


_ALL_FIELDS = tuple(a.name for a in attrs.fields(RunMeta))
_fields_of = operator.attrgetter(*_ALL_FIELDS)
_RUN_DIR = _ALL_FIELDS.index("run_dir")


#: Fields whose few distinct values repeat across 100,000 records (a model, an outcome, the
#: batch id): ``load_recorded_runs`` makes them one object each in memory, whether a record
#: was parsed or read from the cache.
_SHARED = tuple(
    _ALL_FIELDS.index(name)
    for name in ("test_case", "model", "outcome", "failure_category", "stop_reason", "batch_id")
)


def _share_strings(values: list[Any], seen: dict[Any, Any]) -> None:
    """Make each :data:`_SHARED` field of ``values`` (digests, or None for an unreadable
    record) the one object ``seen`` holds for its value, a column at a time in C: a loop
    over 100,000 records in Python cost more than reading them."""
    records = [value for value in values if value is not None] if None in values else values
    for i in _SHARED:
        column = list(map(operator.itemgetter(i), records))
        shared = map(seen.setdefault, column, column)
        collections.deque(map(operator.setitem, records, repeat(i), shared), maxlen=0)


def _digest_record(raw: Any) -> list[Any]:
    fields = list(_fields_of(run_meta_from_dict(raw)))
    # Where a record was found is its run_dir; what it says is not worth caching.
    fields[_RUN_DIR] = None
    return fields


_NONE = type(None)
#: The types ``run_meta_from_dict`` gives each field (``bool`` is not ``int`` here: it
#: makes none). A cached digest must have them: the cache is no more trusted than the
#: record it stands for, so nothing in it may be what no record reads as.


def _kinds(*kinds: type) -> frozenset[type]:
    return frozenset(kinds)


_TEXT, _MAYBE_TEXT = _kinds(str), _kinds(str, _NONE)
_KINDS: dict[str, frozenset[type]] = {
    "test_case": _TEXT, "model": _TEXT, "outcome": _TEXT, "timestamp": _TEXT,
    "finished_at": _MAYBE_TEXT, "duration_seconds": _kinds(float),
    "failure_category": _MAYBE_TEXT, "stop_reason": _MAYBE_TEXT,
    "exit_code": _kinds(int, _NONE), "attempt": _kinds(int, _NONE),
    "batch_id": _MAYBE_TEXT, "run_dir": _kinds(_NONE), "result": _kinds(dict),
    "steps": _kinds(list, _NONE), "schema": _kinds(int), "reason": _MAYBE_TEXT,
    "usage": _kinds(dict, _NONE), "usage_total": _kinds(dict, _NONE),
    "containers_removed": _kinds(int, _NONE),
    "repeat": _kinds(int),
    "extra": _kinds(dict),
}  # fmt: skip
_DIGEST_TYPES = tuple(_KINDS[name] for name in _ALL_FIELDS)
_IDENTITY = (_ALL_FIELDS.index("test_case"), _ALL_FIELDS.index("model"))
_OUTCOME = _ALL_FIELDS.index("outcome")
_ATTEMPT = _ALL_FIELDS.index("attempt")
_REPEAT = _ALL_FIELDS.index("repeat")


def _is_digest(value: Any) -> bool:
    return _are_digests([value])


def _are_digests(values: list[Any]) -> bool:
    """Whether every value is what :func:`_digest_record` makes of some record: the field
    count, each field's type, a known outcome, an identity of non-empty text, an attempt
    of at least 1. In a few C passes over a block of 10,000 entries: the distinct rows of
    field types (a handful) are what is checked, not each entry."""
    if set(map(type, values)) - {list}:
        return False
    for kinds in set(map(tuple, map(map, repeat(type), values))):
        if len(kinds) != len(_DIGEST_TYPES) or not all(
            map(operator.contains, _DIGEST_TYPES, kinds)
        ):
            return False
    attempts = set(map(operator.itemgetter(_ATTEMPT), values)) - {None}
    identities = list(itertools.chain.from_iterable(map(operator.itemgetter(*_IDENTITY), values)))
    return (
        set(map(operator.itemgetter(_OUTCOME), values)) <= OUTCOMES
        and all(identities)
        # Text, checked at once for the usual all-ASCII block, one by one otherwise.
        and ("".join(identities).isascii() or all(map(jsonio.is_text, identities)))
        and (not attempts or min(attempts) >= 1)
        and min(map(operator.itemgetter(_REPEAT), values), default=1) >= 1
    )


#: How the ledger index caches a record: its RunMeta fields, in declaration order.
_RUN_META_DIGEST = Digest(
    id=f"run-meta/{SCHEMA_VERSION}/{_source_fingerprint()}",
    make=_digest_record,
    check=_is_digest,
    check_all=_are_digests,
)


#: A model dir's newest records, as :func:`read_recorded_blocks` hands them on.
BlockRecords = dict[tuple[str, str, int], RunMeta]


def _keep_newest(records: dict[tuple[str, str, int], RunMeta], key: Any, meta: RunMeta) -> None:
    """``meta`` as ``records``' record of ``key`` unless it holds a newer one."""
    current = records.setdefault(key, meta)
    if current is not meta and _is_newer(meta, current):
        records[key] = meta


def load_recorded_runs(
    batch_dir: Path | str,
    *,
    use_index: bool = True,
    update_index: bool = True,
    defer_index: bool = False,
    children: StatsInChildren | None = None,
) -> RecordedRuns:
    """The newest recorded outcome per (test_case, model, repeat) under ``batch_dir``.

    Newest is the greatest :func:`record_order`: highest attempt number, then latest
    ``timestamp``, then greatest run dir path. Pairs are keyed by the
    record's own ``test_case``, ``model`` and ``repeat`` (1 when it names none), never by
    the directory name. Records that are
    truncated, unparsable, not an object or lack an identity or outcome are skipped and
    listed in ``unreadable``; run dirs without a record are listed in ``incomplete``. An
    absent or empty ``batch_dir`` gives an empty mapping. ``run_dir`` of each returned record
    is where it was found, relative to ``batch_dir``.

    ``use_index=False`` reads every record afresh; ``update_index=False`` uses the ledger
    index but never writes it; ``defer_index=True`` leaves writing it to the caller
    (``save_index``). None of them changes the result (see ``run_support.ledger_scan``),
    nor do ``children`` started ahead for this batch dir (``ledger_scan.stats_ahead``).
    """
    recorded = RecordedRuns()

    def merge(model_dir: str, newest: BlockRecords) -> None:
        if not recorded:
            recorded.update(newest)
            return
        for key, meta in newest.items():
            _keep_newest(recorded, key, meta)

    found = read_recorded_blocks(
        batch_dir,
        merge,
        use_index=use_index,
        update_index=update_index,
        defer_index=defer_index,
        children=children,
    )
    recorded.unreadable, recorded.incomplete = found.unreadable, found.incomplete
    recorded.save_index = found.save_index
    return recorded


def read_recorded_blocks(
    batch_dir: Path | str,
    each: Callable[[str, BlockRecords], None],
    *,
    use_index: bool = True,
    update_index: bool = True,
    defer_index: bool = False,
    children: StatsInChildren | None = None,
) -> RecordedRuns:
    """:func:`load_recorded_runs` a model dir at a time: ``each(model_dir, newest)`` is
    called as each model dir is read, with the newest record per (test_case, model,
    repeat) among that dir's own records. The ``RecordedRuns`` returned holds no records,
    only ``unreadable``, ``incomplete`` and ``save_index``.

    A caller that keeps less of a record than its ``RunMeta`` (a resume's decisions) holds
    no more than one model dir's records at once. A pair's records are normally all in
    its model's own dir (``batch.layout``), but nothing here relies on it: merging the
    blocks by :func:`record_order` is the caller's.
    """
    found = RecordedRuns()
    # One object per distinct model, outcome, batch id, case... across the whole ledger,
    # whether a value was parsed now or read from the cache (memory: 100,000 records
    # name ten models).
    seen: dict[Any, Any] = {}

    def take(block: ModelDirRecords) -> None:
        # Called as the scan reads each dir: its digests are dropped once made records,
        # so the ledger is never held twice over (digests and records).
        model_dir = block.model_dir
        prefix = f"{model_dir}/"
        _share_strings(block.values, seen)
        newest: BlockRecords = {}
        for run_dir, fields, error in zip(block.run_dirs, block.values, block.errors, strict=True):
            if error is not None:
                found.unreadable.append((f"{prefix}{run_dir}/{RUN_META}", error))
                continue
            meta = RunMeta(*fields)
            meta.run_dir = prefix + run_dir
            _keep_newest(newest, (meta.test_case, meta.model, meta.repeat), meta)
        del block
        each(model_dir, newest)

    with gc_paused():
        scan = read_ledger_files(
            Path(batch_dir),
            digest=_RUN_META_DIGEST,
            use_index=use_index,
            update_index=update_index,
            defer_index=defer_index,
            children=children,
            each=take,
        )
        found.incomplete = scan.incomplete
        found.save_index = scan.save_index
        # Freed while the collector is paused, so it never walks objects already gone.
        del scan
    return found


__all__ = [
    "INFRA_FAILURE",
    "MODEL_FAILURE",
    "NON_MODEL_FAILURE_CATEGORIES",
    "OUTCOMES",
    "RESULT_JSON",
    "RUN_META",
    "SCHEMA_VERSION",
    "BlockRecords",
    "InvalidRecord",
    "RecordedRuns",
    "RunMeta",
    "is_infra_class_failure",
    "job_status",
    "load_recorded_runs",
    "read_recorded_blocks",
    "record_order",
    "record_reason",
    "record_score",
    "record_status",
    "run_meta_from_dict",
    "run_meta_to_dict",
    "timestamp_order",
    "utc_stamp",
    "write_result",
    "write_run_meta",
]
