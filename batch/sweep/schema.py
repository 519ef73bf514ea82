"""The sweep file's JSON Schema for editors, ``docs/schemas/sweep.schema.json``, made from
the key table (``batch.sweep.keys.KEYS``) and each kind's declaration beside its converter:
nothing in it is written twice.

Run ``python -m batch.sweep.schema > docs/schemas/sweep.schema.json`` to rewrite the
committed file; a test holds it equal to what this makes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from batch.sweep import cases, declare, keys, sizes, specs
from batch.sweep.features import between_models, policies, steps, worker

_HEADER = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": (
        "https://github.com/batch-ledger/batch-ledger/blob/main/docs/schemas/sweep.schema.json"
    ),
    "title": "batch-ledger sweep file",
    "description": (
        "A sweep: every case against every model (docs/sweep-file.md). For editors: put "
        "'# yaml-language-server: $schema=<path to this file>' at the top of a sweep file. "
        "batch itself checks more than this schema can (placeholders, duplicate ids, files "
        "that exist) and reports every problem located."
    ),
}

#: Exactly one of ``command``, ``steps`` and ``worker``, or none when every model names its
#: own worker (the loader's rule, ``batch.sweep.load``).
_ONE_WAY_TO_RUN = ("command", "steps", "worker")


def _exactly_one() -> list[dict[str, Any]]:
    def required(key: str) -> dict[str, Any]:
        return {"required": [key]}

    ways: list[dict[str, Any]] = [
        {
            "required": [key],
            "not": {"anyOf": [required(other) for other in _ONE_WAY_TO_RUN if other != key]},
        }
        for key in _ONE_WAY_TO_RUN
    ]
    ways.append(
        {
            "not": {"anyOf": [required(key) for key in _ONE_WAY_TO_RUN]},
            "properties": {
                "models": {
                    "items": {"type": "object", "required": ["worker"]},
                    "description": (
                        "without command, steps or worker at the top, every model names its own "
                        "worker"
                    ),
                }
            },
        }
    )
    return ways


def sweep_schema() -> dict[str, Any]:
    """The schema document, as ``docs/schemas/sweep.schema.json`` holds it."""
    definitions: dict[str, Any] = {}
    for module in (declare, sizes, keys, specs, between_models, policies, cases, steps, worker):
        for name, definition in module.SCHEMA_DEFS.items():
            assert name not in definitions, f"$defs/{name} declared twice"
            definitions[name] = definition
    return {
        **_HEADER,
        "type": "object",
        "additionalProperties": False,
        "required": list(keys.REQUIRED_KEYS),
        "oneOf": _exactly_one(),
        "properties": declare.property_table(keys.KEYS),
        "$defs": definitions,
    }


def schema_text() -> str:
    return json.dumps(sweep_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if argv:
        print("usage: python -m batch.sweep.schema > FILE (it prints the schema)", file=sys.stderr)
        return 2
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
