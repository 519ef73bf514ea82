"""A summary row, declared once: :class:`SummaryRow`'s fields, with their types, what each
means and the schema's constraints, are what the writer fills (``batch.summary.write``,
type-checked against it), what the reader checks (:data:`ROW_TYPES`,
``batch.summary.read``) and what the published JSON Schema says
(``docs/schemas/batch-summary.schema.json``, made by ``batch.summary.schema``).

docs/summary.md, "A job row". Adding a field is additive (schema 1 stays); renaming or
removing one needs ``SUMMARY_SCHEMA`` to go up.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, NotRequired, TypedDict, Union

import attrs

from batch.plan.jobs import STATUSES


@attrs.frozen
class Field:
    """What a field means (its schema ``description``), its schema constraints beyond its
    type, whether every row has it (``always``: the writer writes it) and whether the writer
    may write it as null (``null``; a reader takes null for any field but the three keys)."""

    doc: str = ""
    schema: dict[str, Any] = attrs.field(factory=dict)
    always: bool = True
    null: bool = False


_STEP = {
    "type": "object",
    "required": ["name", "status", "duration_seconds"],
    "properties": {
        "name": {"type": ["string", "null"]},
        "status": {"type": ["string", "null"]},
        "duration_seconds": {"type": ["number", "null"]},
    },
}


class SummaryRow(TypedDict):
    """One job of a summary, keys in the file's order.

    The writer writes every key whose :class:`Field` says ``always`` (``steps`` for
    multi-step jobs only, the others when they hold something). A row read back
    (``batch.summary.read.summary_rows``) is only sure to have string ``case``, ``model`` and
    ``status``; ``check_summary`` makes every other key absent, null or of its type.
    """

    case: Annotated[str, Field(schema={"minLength": 1})]
    model: Annotated[str, Field(schema={"minLength": 1})]
    status: Annotated[str, Field(schema={"enum": list(STATUSES)})]
    duration_seconds: NotRequired[
        Annotated[
            float | None,
            Field(
                "The real duration of the run that decided the status (carried over or this "
                "invocation's); null while pending or running.",
                {"minimum": 0},
                null=True,
            ),
        ]
    ]
    resumed: NotRequired[
        Annotated[
            bool | None,
            Field("true when the status was carried over from an earlier invocation's record."),
        ]
    ]
    failure_category: NotRequired[
        Annotated[str | None, Field("null unless the status is failed or error.", null=True)]
    ]
    attempts: NotRequired[
        Annotated[
            int | None,
            Field(
                "Attempts recorded for this job so far (the attempt number of its newest run).",
                {"minimum": 0},
            ),
        ]
    ]
    run_dir: NotRequired[
        Annotated[
            str | None,
            Field(
                "The run dir of the run that decided the status, relative to the batch dir.",
                null=True,
            ),
        ]
    ]
    steps: NotRequired[
        Annotated[
            list[dict[str, Any]] | None,
            Field("Multi-step jobs only: each step of that run.", {"items": _STEP}, always=False),
        ]
    ]
    skip_reason: NotRequired[
        Annotated[
            str | None,
            Field(
                "Present only when a policy (halt, breaker, deadline, budget) did not start the "
                "job in this invocation; the job is skipped and has no record, so --resume runs "
                "it.",
                always=False,
            ),
        ]
    ]
    usage: NotRequired[
        Annotated[
            dict[str, int | float] | None,
            Field(
                "Added in schema 1 (additive): what the job has spent in this batch dir across "
                "all its attempts (its newest record's usage_total); present only when some "
                "attempt reported usage.",
                {"$ref": "#/$defs/usage"},
                always=False,
            ),
        ]
    ]
    reason: NotRequired[
        Annotated[
            str | None,
            Field(
                "Added in schema 1 (additive): one line saying why a failed or error job ended "
                "so (its record's reason); present only for those statuses, when known.",
                always=False,
            ),
        ]
    ]
    repeat: NotRequired[
        Annotated[
            int | None,
            Field(
                "Added in schema 1 (additive): which of the sweep's repeats samples of (case, "
                "model) this row is; absent for repeat 1 (every row of a sweep without "
                "repeats).",
                {"minimum": 2},
                always=False,
            ),
        ]
    ]
    score: NotRequired[
        Annotated[
            float | None,
            Field(
                "Added in schema 1 (additive): the finite numeric score (within \u00b11e15) the "
                "deciding run reported in result.json; absent when none.",
                always=False,
            ),
        ]
    ]


def _fields() -> dict[str, tuple[tuple[type, ...], bool, Field]]:
    """Each field's Python types (None left out), whether a row read must have it, and its
    Field. (Read from the hints: under ``from __future__ import annotations`` the class's
    ``__required_keys__`` cannot see ``NotRequired``.)"""
    hints = typing.get_type_hints(SummaryRow, include_extras=True)
    fields = {}
    for name, hint in hints.items():
        required = typing.get_origin(hint) is not NotRequired
        if not required:
            hint = typing.get_args(hint)[0]
        assert typing.get_origin(hint) is Annotated, name
        inner, field = typing.get_args(hint)[:2]
        members = (
            typing.get_args(inner)
            if typing.get_origin(inner) in (Union, types.UnionType)
            else (inner,)
        )
        kinds = tuple(typing.get_origin(m) or m for m in members if m is not type(None))
        fields[name] = (kinds, required, field)
    return fields


FIELDS = _fields()

#: The keys every row read must have, as strings.
REQUIRED_ROW_KEYS = tuple(name for name, (_, required, _) in FIELDS.items() if required)

#: The Python types a reader accepts for each key (besides null): a float field takes an
#: int (JSON does not tell 1.0 from 1), a bool is not a number.
ROW_TYPES: dict[str, tuple[type, ...]] = {
    name: (int, float) if float in kinds else kinds for name, (kinds, _, _) in FIELDS.items()
}

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array"}


def row_schema() -> dict[str, Any]:
    """The JSON Schema of a row (``$defs/job`` of the summary's schema)."""
    properties: dict[str, Any] = {}
    for name, (kinds, _, field) in FIELDS.items():
        prop: dict[str, Any] = {}
        if "$ref" not in field.schema and "enum" not in field.schema:
            [kind] = kinds
            if kind is not dict:
                json_type = _JSON_TYPES[kind]
                prop["type"] = [json_type, "null"] if field.null else json_type
        prop.update(field.schema)
        if field.doc:
            prop["description"] = field.doc
        properties[name] = prop
    return {
        "type": "object",
        "required": [name for name, (_, _, field) in FIELDS.items() if field.always],
        "properties": properties,
        "additionalProperties": True,
    }
