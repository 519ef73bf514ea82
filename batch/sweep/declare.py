"""How a sweep file's key is declared: once, with its converter, its JSON Schema, a one-line
description and its default, so that the loader's checks and the published schema
(``docs/schemas/sweep.schema.json``, made by :mod:`batch.sweep.schema`) come from the same
row.

A :class:`Typed` is a converter with the schema of the values it takes: the common kinds
are made here (:func:`integer`, :data:`DURATION`, :func:`choice`, :func:`or_null`, ...), a
feature's own (``cases``, ``executor``, ``notify``, ...) beside its converter. A
:class:`Key` is one row of a key table: a ``Typed``, what it means, and its default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from batch.sweep.nodes import (
    MAX_COUNT,
    Node,
    as_choice,
    as_duration,
    as_integer,
    as_path,
    as_positive_duration,
    mapping_keys,
)

#: The schema's shared definitions the kinds here refer to (``#/$defs/NAME``).
DURATION_REF = {"$ref": "#/$defs/duration"}
SIZE_REF = {"$ref": "#/$defs/size"}


def ref(name: str) -> dict[str, str]:
    """A reference to the schema's shared definition ``name`` (``$defs``)."""
    return {"$ref": f"#/$defs/{name}"}


@attrs.frozen
class Typed:
    """A converter (a located value in, the value for the ``Sweep`` out, or a located
    error) and the JSON Schema of the values it takes."""

    convert: Callable[[Node], Any]
    schema: Mapping[str, Any]


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: No default: the key is required, or its absence means something of its own.
NO_DEFAULT: Any = _NoDefault()


@attrs.frozen
class Key:
    """One row of a key table: the key's ``Typed``, its one-line description, and its
    default as the ``Sweep`` holds it (``shown``: as a sweep file writes it, when that
    differs, e.g. ``"10s"`` for 10.0)."""

    typed: Typed
    doc: str
    default: Any = NO_DEFAULT
    shown: Any = NO_DEFAULT
    #: The ``Sweep`` fields a tuple result is spread over; empty: the field named as the key.
    fields: tuple[str, ...] = ()

    @property
    def convert(self) -> Callable[[Node], Any]:
        return self.typed.convert

    def schema(self) -> dict[str, Any]:
        """The key's property in the published schema: its description, its values, and
        its default as written in a sweep file."""
        schema = {"description": self.doc, **self.typed.schema}
        written = self.default if self.shown is NO_DEFAULT else self.shown
        if written is not NO_DEFAULT:
            schema["default"] = written
        return schema


# --- the common kinds ------------------------------------------------------------------------


def integer(minimum: int, maximum: int | None = None) -> Typed:
    """An integer of at least ``minimum`` (and at most ``maximum``: a check of its own)."""
    schema: dict[str, Any] = {"type": "integer", "minimum": minimum}
    if maximum is not None:
        schema["maximum"] = maximum
    assert maximum is None or maximum <= MAX_COUNT
    return Typed(as_integer(minimum), schema)


DURATION = Typed(as_duration, DURATION_REF)
PATH = Typed(as_path, {"type": "string", "minLength": 1})


def choice(choices: Sequence[str]) -> Typed:
    return Typed(lambda node: as_choice(node, choices), {"enum": list(choices)})


def or_null(typed: Typed, hint: str = "") -> Typed:
    """``typed`` or null (None): a positive duration when ``typed`` is :data:`DURATION`
    (``hint`` ends its message: what null means)."""
    if typed is DURATION:

        def convert(node: Node) -> Any:
            return None if node.value is None else as_positive_duration(node, hint)

    else:

        def convert(node: Node) -> Any:
            return None if node.value is None else typed.convert(node)

    return Typed(convert, {"anyOf": [dict(typed.schema), {"type": "null"}]})


def property_table(keys: Mapping[str, Key]) -> dict[str, Any]:
    """The ``properties`` of an object schema made of a key table."""
    return {name: key.schema() for name, key in keys.items()}


#: The schema's shared definitions of this module's kinds.
SCHEMA_DEFS: dict[str, Any] = {
    "duration": {
        "description": (
            "Seconds (a number ≥ 0) or a string of units from largest to "
            "smallest: 90s, 5m, 2h, 1h30m, 250ms."
        ),
        "anyOf": [
            {"type": "number", "minimum": 0},
            {
                "type": "string",
                "pattern": (
                    "^\\s*\\d*\\.?\\d+\\s*(ms|s|m|h)?(\\s*\\d*\\.?\\d+\\s*(ms|s|m|h))*\\s*$"
                ),
            },
        ],
    },
    "name": {
        "description": "A case or model id.",
        "anyOf": [{"type": "string", "minLength": 1}, {"type": "number"}],
    },
}


def mapping_of(node: Node, schema: Mapping[str, Any]) -> dict[str, Node]:
    """The value nodes of the mapping at ``node``, by key, checked against the keys and
    required keys of the object ``schema`` declares (unknown and missing keys are errors):
    the keys a converter takes are the ones its schema publishes."""
    return mapping_keys(node, list(schema["properties"]), schema.get("required", ()))
