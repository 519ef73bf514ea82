"""``docs/schemas/run-meta.schema.json``, made from :class:`~run_support.run_meta.RunMeta`.

    python -m run_support.schema > docs/schemas/run-meta.schema.json

Each property is its attribute's ``metadata["schema"]``, its ``type`` made from the
annotation when the fragment names none (``str | None``: ``["string", "null"]``; a key the
writer writes only when it has a value drops the null). The keys every record holds are
required, in the writer's order (``KEY_ORDER``), the others follow as the writer adds them.
``tests/unit/run_support/test_schema.py`` holds the committed file equal to this output.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import attrs

from run_support.run_meta import KEY_ORDER, OPTIONAL_KEYS, SCHEMA_VERSION, RunMeta, kinds_of
from run_support.usage import USAGE_SCHEMA

_JSON_TYPES = {str: "string", int: "integer", float: "number", dict: "object", list: "array"}
#: Written only when set (``run_meta_to_dict``): never null in a record the writer made.
_WHEN_SET = frozenset({*OPTIONAL_KEYS, "steps", "repeat"})


def _property(field: attrs.Attribute[Any]) -> dict[str, Any]:
    fragment = dict(field.metadata["schema"])
    if {"type", "enum", "const", "$ref"} & fragment.keys():
        return fragment
    kinds = [kind for kind in kinds_of(field.type) if kind is not type(None)]
    names = [_JSON_TYPES[kind] for kind in kinds]
    if len(names) != len(kinds_of(field.type)) and field.name not in _WHEN_SET:
        names.append("null")
    return {"type": names[0] if len(names) == 1 else names, **fragment}


def schema() -> dict[str, Any]:
    """The JSON Schema of a record as this version writes it."""
    fields = {field.name: field for field in attrs.fields(RunMeta)}
    order = [*KEY_ORDER, "steps", *OPTIONAL_KEYS, "repeat"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:batch-ledger:run-meta:{SCHEMA_VERSION}",
        "title": f"run-meta.json, schema {SCHEMA_VERSION}",
        "description": "One run's recorded outcome, as batch-ledger writes it (docs/ledger.md). "
        "The reader accepts more than this (other harnesses' shapes); the writer never writes "
        "less. Keys not listed here are allowed and kept.",
        "type": "object",
        "required": list(KEY_ORDER),
        "properties": {name: _property(fields[name]) for name in order},
        "if": {"properties": {"outcome": {"const": "passed"}}},
        "then": {"properties": {"failure_category": {"type": "null"}}},
        "else": {"properties": {"failure_category": {"type": "string"}}},
        "additionalProperties": True,
        "$defs": {"usage": USAGE_SCHEMA},
    }


def text() -> str:
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if argv:
        sys.stderr.write(
            "usage: python -m run_support.schema > docs/schemas/run-meta.schema.json\n"
        )
        return 2
    sys.stdout.write(text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
