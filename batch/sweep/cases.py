"""The sweep's cases: :class:`CaseSpec` and the ``cases`` key, declared once
(:data:`CASES`: its converter and its schema).

``cases`` is a list of ids or ``{id, timeout, params}`` objects, ``{dir, glob}`` to discover
one case per matching file or directory, or ``{jsonl, id}``: one case per row of a JSON Lines
dataset (``batch.sweep.dataset``). The list must be non-empty with unique ids, so every
(case, model) pair names one job.

A ``cases`` list read without positions (``yaml_fast.PlainSeq``: 10,000 located case objects
cost seconds to build) is converted by ``_plain_cases``, which takes only what converts
without a message or a source token; for anything else it raises ``NeedsPositions`` and the
loader reads the file again, located, so every message stays the located converters' own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, Protocol, TypeVar

import attrs

from batch.durations import parse_duration
from batch.sweep.dataset import load_dataset
from batch.sweep.declare import Typed, mapping_of
from batch.sweep.dir_hints import near_dir, what_dir_holds
from batch.sweep.nodes import (
    NeedsPositions,
    Node,
    as_integer,
    as_name,
    as_path,
    as_positive_duration,
    as_string,
    string_keyed,
)
from batch.sweep.yaml_fast import PlainSeq
from run_support.jsonio import is_text


@attrs.frozen(weakref_slot=False)  # one per case, a dataset's 500,000: as Job
class CaseSpec:
    id: str
    #: Seconds; None: the sweep's ``timeout`` applies.
    timeout: float | None = None
    params: Mapping[str, Any] = attrs.field(factory=dict)
    #: A dataset row (``cases: {jsonl: ...}``) as written: the run dir's ``case.json``.
    row: bytes | None = None


@attrs.frozen
class DatasetSource:
    """Where ``cases: {jsonl: ..., id: ...}`` came from: what the snapshot records, so a
    later ``plan`` can tell that the file changed under the batch."""

    path: Path
    id_field: str
    rows: int
    #: ``batch.sweep.dataset.Dataset.fingerprint``.
    fingerprint: str


# --- cases -----------------------------------------------------------------------------------


def cases_key(node: Node) -> tuple[tuple[CaseSpec, ...], DatasetSource | None]:
    """The cases, and the dataset they came from (``cases: {jsonl: ..., id: ...}``)."""
    if type(node.value) is PlainSeq:
        specs = _plain_cases(node.value)
        if specs is None:
            raise NeedsPositions
        return specs, None
    if isinstance(node.value, Mapping):
        if "jsonl" in node.value:
            return _dataset_cases(node)
        return _discovered_cases(node), None
    specs = unique_specs(
        node,
        _case,
        "case",
        "a list of case ids or objects, or {dir: ..., glob: ...}",
    )
    return specs, None


def _dataset_cases(node: Node) -> tuple[tuple[CaseSpec, ...], DatasetSource]:
    """One case per row of a JSON Lines file (``batch.sweep.dataset``). ``rows`` and
    ``fingerprint`` are what a snapshot recorded; the file as it is now decides."""
    keys = mapping_of(node, _DATASET_OBJECT)
    path = as_path(keys["jsonl"])
    id_field = as_string(keys["id"])
    if not id_field:
        raise keys["id"].error(f"{keys['id'].label}: empty field name")
    if "rows" in keys:
        as_integer(0)(keys["rows"])
    if "fingerprint" in keys:
        as_string(keys["fingerprint"])
    # Messages name the file as the sweep file's directory and the path make it.
    written = str(Path(node.doc.file).parent / as_string(keys["jsonl"]))
    dataset = load_dataset(path, id_field, written)
    specs = tuple(map(CaseSpec, dataset.ids, repeat(None), dataset.params, dataset.rows))
    return specs, DatasetSource(path, id_field, len(specs), dataset.fingerprint)


def _case(node: Node) -> CaseSpec:
    if not isinstance(node.value, Mapping):
        return CaseSpec(id=as_name(node, "case id"))
    keys = mapping_of(node, _CASE_OBJECT)
    timeout = _case_timeout(keys["timeout"]) if "timeout" in keys else None
    params = _params(keys["params"]) if "params" in keys else {}
    return CaseSpec(id=as_name(keys["id"], "case id"), timeout=timeout, params=params)


_CASE_KEYS = frozenset(("id", "timeout", "params"))  # _CASE_OBJECT's, checked at import


def _plain_cases(items: Sequence[Any]) -> tuple[CaseSpec, ...] | None:
    """What ``_unique_specs(node, _case, ...)`` returns for these position-less items, or
    None where it might raise or needs a source token (a number as id): a plain loop over
    plain values, for big case lists."""
    specs: list[CaseSpec] = []
    seen: set[str] = set()
    for item in items:
        if type(item) is dict:
            if not item.keys() <= _CASE_KEYS:
                return None
            ident = _plain_name(item.get("id"))
            timeout: float | None = None
            params: dict[str, Any] | None = None
            if "timeout" in item:
                timeout = _plain_timeout(item["timeout"])
                if timeout is None:
                    return None
            if "params" in item:
                params = _plain_params(item["params"])
                if params is None:
                    return None
            spec = CaseSpec(id=ident, timeout=timeout, params=params or {}) if ident else None
        else:
            ident = _plain_name(item)
            spec = CaseSpec(id=ident) if ident else None
        if spec is None or spec.id in seen:
            return None
        seen.add(spec.id)
        specs.append(spec)
    return tuple(specs) if specs else None


def _plain_name(value: object) -> str | None:
    """``as_name``'s id for a string; None for anything else (a number's id is its source
    text) or an id it refuses."""
    if not isinstance(value, str):
        return None
    text = str(value)
    if not text or "\0" in text or "\n" in text or "\r" in text:
        return None
    return text


def _plain_timeout(value: object) -> float | None:
    try:
        seconds = parse_duration(value)
    except ValueError:
        return None
    return seconds or None  # 0 is refused


def _plain_params(value: object) -> dict[str, Any] | None:
    if type(value) is not dict:
        return None
    params: dict[str, Any] = {}
    for key, field in value.items():
        if type(key) is not str or not key:
            return None
        kind = type(field)
        if kind is str or kind is int or kind is float or kind is bool:
            params[key] = field
            continue
        for plain in (bool, int, float, str):  # as _params: ruamel's subclasses made plain
            if isinstance(field, plain):
                params[key] = plain(field)
                break
        else:
            return None
    return params


def _case_timeout(node: Node) -> float:
    # null cannot mean "no limit" here: None already means "the sweep's timeout" everywhere
    # a job's timeout is worked out, and a second spelling of "none" invites mistakes.
    if node.value is None:
        raise node.error(
            f"{node.label}: expected a duration; a case cannot lift the sweep's timeout "
            "(give it a long one, e.g. 24h)"
        )
    return as_positive_duration(node)


def _params(node: Node) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, value in string_keyed(node):
        # bool before int (bool is an int); plain types, not ruamel's formatted subclasses.
        for plain in (bool, int, float, str):
            if isinstance(value.value, plain):
                params[key.value] = plain(value.value)
                break
        else:
            raise value.type_error("a string, number or boolean")
    return params


def _discovered_cases(node: Node) -> tuple[CaseSpec, ...]:
    keys = mapping_of(node, _DIR_OBJECT)
    directory = as_path(keys["dir"])
    pattern = as_string(keys["glob"])
    if not directory.is_dir():
        raise keys["dir"].error(f"cases.dir: {directory} is not a directory{near_dir(directory)}")
    try:
        # Hidden entries (.DS_Store, .git) are never meant as cases.
        entries = [p for p in directory.glob(pattern) if not p.name.startswith(".")]
    except (ValueError, NotImplementedError) as exc:
        raise keys["glob"].error(f"cases.glob: {exc}") from None
    if not entries:
        raise keys["glob"].error(
            f"cases.glob: nothing in {directory} matches {pattern!r}{what_dir_holds(directory)}"
        )
    found: dict[str, Path] = {}
    for entry in sorted(entries):
        ident = entry.name if entry.is_dir() else entry.stem
        if not is_text(entry.name):
            # Its undecodable bytes would reach the summary and every printout as surrogates.
            shown = os.fsencode(entry.name).decode("utf-8", "backslashreplace")
            raise keys["glob"].error(
                f"cases.glob: {directory / shown}: the file name is not UTF-8, so it cannot "
                "be a case id (rename it, or narrow the glob)"
            )
        if any(c in ident for c in "\0\n\r"):
            raise keys["glob"].error(f"cases.glob: case id {ident!r} contains a line break")
        if ident in found:
            raise keys["glob"].error(
                f"cases.glob: {found[ident].name} and {entry.name} both give case id {ident!r}"
            )
        found[ident] = entry
    ids = sorted(found)
    return tuple(CaseSpec(id=ident) for ident in ids)


#: ``cases``: its values (the converter's) and their schema.
CASES = Typed(
    cases_key,
    {
        "anyOf": [
            {
                "type": "array",
                "minItems": 1,
                "items": {"$ref": "#/$defs/case"},
            },
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["dir", "glob"],
                "properties": {
                    "dir": {
                        "type": "string",
                        "description": "a directory, relative to the sweep file",
                    },
                    "glob": {
                        "type": "string",
                        "description": (
                            "the files of it that are cases; the case id is the file's stem"
                        ),
                    },
                },
            },
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["jsonl", "id"],
                "properties": {
                    "jsonl": {
                        "type": "string",
                        "description": (
                            "a JSON Lines file (or .jsonl.gz), relative to the sweep file"
                        ),
                    },
                    "id": {
                        "type": "string",
                        "description": "the field of each row that is its case id",
                    },
                    "rows": {
                        "type": "integer",
                        "description": "written by the snapshot; ignored when read",
                    },
                    "fingerprint": {
                        "type": "string",
                        "description": "written by the snapshot; ignored when read",
                    },
                },
            },
        ],
    },
)

#: The schema's shared definitions of this module's kinds.
SCHEMA_DEFS: dict[str, Any] = {
    "case": {
        "description": "A case: an id, or {id, timeout, params}.",
        "anyOf": [
            {"$ref": "#/$defs/name"},
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["id"],
                "properties": {
                    "id": {"$ref": "#/$defs/name"},
                    "timeout": {
                        "description": (
                            "this case's job timeout (a case cannot lift the "
                            "sweep's limit: null is an error)"
                        ),
                        "$ref": "#/$defs/duration",
                    },
                    "params": {
                        "description": "values for {params.NAME} in the command",
                        "type": "object",
                        "additionalProperties": {"type": ["string", "number", "boolean"]},
                        "default": {},
                    },
                },
            },
        ],
    },
}


# --- a list of cases or models ------------------------------------------------------------


class _Spec(Protocol):
    @property
    def id(self) -> str: ...


_S = TypeVar("_S", bound=_Spec)


def unique_specs(
    node: Node, convert: Callable[[Node], _S], what: str, expected: str
) -> tuple[_S, ...]:
    """The non-empty list of cases or models at ``node``, each converted, ids unique."""
    if not isinstance(node.value, list):
        raise node.type_error(expected)
    if not node.value:
        raise node.error(f"{node.label}: is empty (a sweep needs at least one {what})")
    items = list(node.elements())
    specs = [convert(item) for item in items]
    _check_unique(items, [spec.id for spec in specs], what)
    return tuple(specs)


def _check_unique(nodes: Sequence[Node], ids: Sequence[str], what: str) -> None:
    """A repeated case or model id would make two jobs with the same (case, model) pair."""
    first: dict[str, Node] = {}
    for node, ident in zip(nodes, ids, strict=True):
        if ident in first:
            raise node.error(
                f"{node.label}: duplicate {what} id {ident!r} (first at line "
                f"{first[ident].line + 1}); every (case, model) pair must be unique"
            )
        first[ident] = node


#: The object forms of ``cases`` and of a case: the keys their converters take.
_DIR_OBJECT = CASES.schema["anyOf"][1]
_DATASET_OBJECT = CASES.schema["anyOf"][2]
_CASE_OBJECT = SCHEMA_DEFS["case"]["anyOf"][1]
assert frozenset(_CASE_OBJECT["properties"]) == _CASE_KEYS
