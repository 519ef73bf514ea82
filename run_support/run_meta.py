"""One record of the ledger, ``run-meta.json`` schema 1: its fields, declared once.

:class:`RunMeta` is the single declaration of a record's fields: their types, defaults and
what each means in the JSON Schema (each attribute's ``metadata["schema"]``). What the
reader accepts (:func:`run_meta_from_dict`), what the writer writes
(:func:`run_meta_to_dict`), the ledger cache's columns and the check of a cached row
(:data:`FIELDS`, ``ledger_scan.rows_are_records``) and ``docs/schemas/run-meta.schema.json``
(``python -m run_support.schema``) are all made from it. Renaming or removing a key is a
breaking change that needs ``SCHEMA_VERSION`` to go up (docs/ledger.md).
"""

from __future__ import annotations

import functools
import math
import operator
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from run_support import jsonio

SCHEMA_VERSION = 1

Outcome = Literal["passed", "failed", "error"]
OUTCOMES: frozenset[str] = frozenset({"passed", "failed", "error"})
MODEL_FAILURE = "model_failure"
INFRA_FAILURE = "infra_failure"


def _schema(**schema: Any) -> dict[str, Any]:
    """An attribute's metadata: its JSON Schema fragment (``run_support.schema`` makes the
    ``type`` from the annotation when the fragment names none)."""
    return {"schema": schema}


@attrs.define
class RunMeta:
    """One run's recorded outcome (``run-meta.json``, schema 1)."""

    test_case: str = attrs.field(
        metadata=_schema(
            minLength=1,
            description="The case id, as in the sweep file. Identity: never taken from the path.",
        )
    )
    model: str = attrs.field(
        metadata=_schema(
            minLength=1,
            description="The model id, as in the sweep file (may contain / and :). Identity: "
            "never taken from the path.",
        )
    )
    outcome: str = attrs.field(
        metadata=_schema(
            enum=["passed", "failed", "error"],
            description="failed: the model's failure; error: one that says nothing about the "
            "model. A job's status follows failure_category (docs/ledger.md); records written "
            "before the outcome followed a log pattern's category may say failed with a non-model "
            "category (api_or_credit), which is still an error job.",
        )
    )
    timestamp: str = attrs.field(
        default="",
        metadata=_schema(
            description="When the attempt started: ISO 8601 UTC with microseconds and Z, by the "
            "clock of the host that ran it. Orders records of one (test_case, model) and one "
            "attempt: the newest wins.",
        ),
    )
    finished_at: str | None = attrs.field(
        default=None, metadata=_schema(description="When the attempt ended, same format.")
    )
    duration_seconds: float = attrs.field(
        default=0.0, metadata=_schema(minimum=0, description="Wall time of the attempt.")
    )
    failure_category: str | None = attrs.field(
        default=None,
        metadata=_schema(
            minLength=1,
            description="null when passed; else model_failure, infra_failure, api_or_credit, "
            "task_data, build_instruction or a category the job reported.",
        ),
    )
    stop_reason: str | None = attrs.field(
        default=None,
        metadata=_schema(
            enum=["exit", "timeout", "signal", "answer", None],
            description="How the process ended; answer (added, additive): a warm worker answered "
            "the job's request (docs/worker.md), exit_code null; null only in a record carried "
            "over from another harness.",
        ),
    )
    exit_code: int | None = attrs.field(
        default=None,
        metadata=_schema(
            description="What the process returned: its exit status; -N when signal N ended it. "
            "After a timeout (stop_reason timeout) too: -15 (SIGTERM), -9 (SIGKILL after "
            "kill_grace), or the job's own status if it caught SIGTERM and exited (143 from a "
            "shell). null only when it never started.",
        ),
    )
    #: The attempt number the driver gave the run; None when the record names none (another
    #: harness's), which orders it below every record that does (``record_order``).
    attempt: int | None = attrs.field(
        default=1,
        metadata=_schema(
            type="integer",
            minimum=1,
            description="The driver's attempt number; orders records of one (test_case, model, "
            "repeat) before the timestamp does.",
        ),
    )
    batch_id: str | None = attrs.field(
        default=None, metadata=_schema(description="The batch dir's name.")
    )
    run_dir: str | None = attrs.field(
        default=None,
        metadata=_schema(
            description="The run dir, relative to the batch dir, as written. Readers use where "
            "the file was found instead.",
        ),
    )
    result: dict[str, Any] = attrs.field(
        factory=dict,
        metadata=_schema(
            description="What the job reported in result.json besides outcome and "
            "failure_category (score, ...).",
        ),
    )
    steps: list[Any] | None = attrs.field(
        default=None,
        metadata=_schema(
            description="Optional per-step details (eval, judge, ...); written only when present. "
            "A step that reported usage has its own usage object (same shape as usage).",
        ),
    )
    schema: int = attrs.field(default=SCHEMA_VERSION, metadata=_schema(const=SCHEMA_VERSION))
    #: One line: why a run that did not pass ended as it did (absent on a pass and in
    #: records written before reasons were kept).
    reason: str | None = attrs.field(
        default=None,
        metadata=_schema(
            minLength=1,
            description="Added in schema 1 (additive): one line, control characters escaped, "
            "secrets redacted, saying why a run that did not pass ended so: the cause the driver "
            "knows (cannot start, timeout after, killed by signal N, exit code N, step NAME: ...) "
            "and what the job said (its result.json reason, or else the last non-empty line of "
            "its output). Written on every non-passing run; absent on a pass and in records "
            "written before it was added.",
        ),
    )
    #: What this attempt spent, steps summed, and what the job has spent in this batch dir
    #: across its attempts, this one included (``run_support.usage``, docs/usage.md): a
    #: usage object as written, None when nothing was reported. Read back with
    #: ``run_support.usage.usage_of``, which keeps only the valid fields.
    usage: dict[str, Any] | None = attrs.field(
        default=None,
        metadata=_schema(
            **{"$ref": "#/$defs/usage"},
            description="Added in schema 1 (additive): what this attempt spent, its steps summed "
            "(docs/usage.md). Written only when the job reported usage.",
        ),
    )
    usage_total: dict[str, Any] | None = attrs.field(
        default=None,
        metadata=_schema(
            **{"$ref": "#/$defs/usage"},
            description="Added in schema 1 (additive): what the job has spent in this batch dir, "
            "this attempt included: the previous newest record's usage_total (or usage) plus this "
            "attempt's usage. Written only when some attempt reported usage.",
        ),
    )
    #: How many containers labelled as this attempt's the driver removed when it ended
    #: (the sweep's ``containers`` key; docs/ledger.md); None: the sweep sets no engine.
    containers_removed: int | None = attrs.field(
        default=None,
        metadata=_schema(
            minimum=0,
            description="Added in schema 1 (additive): how many containers carrying this "
            "attempt's label (BATCH_CONTAINER_LABEL) the driver removed when the attempt ended, "
            "before writing this record. Written only when the sweep sets containers "
            "(docs/sweep-file.md).",
        ),
    )
    #: Which of the sweep's ``repeats`` samples of (case, model) this run is, from 1; a
    #: record that names none is repeat 1 (every record before repeats existed).
    repeat: int = attrs.field(
        default=1,
        metadata=_schema(
            minimum=1,
            description="Added in schema 1 (additive): which of the sweep's repeats samples of "
            "(test_case, model) this run is. Written only when it is not 1; a record without it "
            "is repeat 1. The ledger keys by (test_case, model, repeat).",
        ),
    )
    #: Keys this version does not know, kept so rewriting a foreign record loses nothing.
    extra: dict[str, Any] = attrs.field(factory=dict)

    @property
    def key(self) -> tuple[str, str, int]:
        """The job this run belongs to: (case, model, repeat)."""
        return (self.test_case, self.model, self.repeat)

    @property
    def attempt_number(self) -> int:
        """The attempt as a count: a record that names none counts as the first."""
        return self.attempt or 1


attrs.resolve_types(RunMeta)


class InvalidRecord(ValueError):
    """A ``run-meta.json`` that cannot be read as an outcome; it is skipped, never guessed."""


# --- the fields, as every user of them sees them --------------------------------------------


def kinds_of(annotation: Any) -> tuple[type, ...]:
    """The Python types an annotation admits: ``str | None`` is (str, NoneType)."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    parts = typing.get_args(annotation) if union else (annotation,)
    return tuple(typing.get_origin(part) or part for part in parts)


@attrs.frozen
class Field:
    """One field of :class:`RunMeta` as the ledger cache checks it."""

    name: str
    #: The types ``run_meta_from_dict`` gives it (``bool`` is not ``int`` there).
    kinds: frozenset[type]


#: Every field of :class:`RunMeta`, in declaration order (its positional order).
FIELDS: tuple[Field, ...] = tuple(
    Field(a.name, frozenset(kinds_of(a.type))) for a in attrs.fields(RunMeta)
)
FIELD_NAMES = tuple(field.name for field in FIELDS)
_FIELD_SET = frozenset(FIELD_NAMES) - {"extra"}
fields_of: Callable[[RunMeta], tuple[Any, ...]] = operator.attrgetter(*FIELD_NAMES)


# --- reading --------------------------------------------------------------------------------


@functools.cache
def _structure() -> Callable[[Mapping[str, Any], type[RunMeta]], RunMeta]:
    """cattrs' structuring of a RunMeta, made on the first record parsed: a read served by
    the ledger cache parses none and need not import cattrs."""
    import cattrs

    converter = cattrs.Converter(forbid_extra_keys=True)
    # Free-form values (a job's result, step entries, foreign keys) pass through untouched.
    converter.register_structure_hook_func(
        lambda type_: type_ in (Any, dict[str, Any], list[Any] | None, dict[str, Any] | None),
        lambda value, _: value,
    )
    return converter.structure


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
    # for records the ledger cache does not already hold (see bench/ledger_scan.py).
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


# --- writing --------------------------------------------------------------------------------

#: The keys every record holds, in the order docs/ledger.md shows them, so that a human
#: diffing two records reads them side by side.
KEY_ORDER = (
    "schema", "test_case", "model", "timestamp", "finished_at", "duration_seconds",
    "outcome", "failure_category", "stop_reason", "exit_code", "attempt", "batch_id",
    "run_dir", "result",
)  # fmt: skip
#: Additive keys, written after them only when set.
OPTIONAL_KEYS = ("reason", "usage", "usage_total", "containers_removed")


def run_meta_to_dict(meta: RunMeta) -> dict[str, Any]:
    """The JSON object for ``meta``: schema-1 keys in a stable order, unknown keys after them."""
    ordered = {key: getattr(meta, key) for key in KEY_ORDER}
    # Additive keys (docs/ledger.md): written only when set, so a passing record without
    # usage reads exactly as it did before they existed.
    for key in OPTIONAL_KEYS:
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


__all__ = [
    "FIELDS",
    "FIELD_NAMES",
    "INFRA_FAILURE",
    "KEY_ORDER",
    "MODEL_FAILURE",
    "OPTIONAL_KEYS",
    "OUTCOMES",
    "SCHEMA_VERSION",
    "Field",
    "InvalidRecord",
    "Outcome",
    "RunMeta",
    "fields_of",
    "kinds_of",
    "run_meta_from_dict",
    "run_meta_to_dict",
]
