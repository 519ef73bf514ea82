"""``docs/schemas/batch-summary.schema.json``, made from the declarations: a row is
``batch.summary.row``'s (the one the writer fills and the reader checks), the rest of the
document is declared here.

Run ``python -m batch.summary.schema > docs/schemas/batch-summary.schema.json`` to rewrite the
committed file; a test holds it equal to what this makes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from batch.summary.row import row_schema
from run_support.usage import USAGE_SCHEMA

_DOCUMENT: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:batch-ledger:batch-summary:1",
    "title": "batch-summary.json, schema 1",
    "description": (
        "Every job of a batch with its true status and duration, rewritten "
        "atomically while the batch runs (docs/summary.md). Adding keys is "
        "allowed; renaming or removing one needs schema to go up. That "
        "totals equals the count of jobs per status cannot be said in JSON "
        "Schema; it is still always true."
    ),
    "type": "object",
    "required": [
        "schema",
        "batch_id",
        "state",
        "started_at",
        "finished_at",
        "elapsed_seconds",
        "max_concurrent",
        "jobs",
        "totals",
    ],
    "properties": {
        "schema": {"const": 1},
        "batch_id": {
            "type": "string",
            "minLength": 1,
            "description": "The batch dir's name, e.g. batch-20261130T031500Z.",
        },
        "state": {
            "enum": ["running", "complete", "interrupted", "halted"],
            "description": (
                "halted: a policy stopped the sweep early (docs/policies.md); then halt says which."
            ),
        },
        "started_at": {
            "type": "string",
            "description": "When this invocation started: ISO 8601 UTC with Z.",
        },
        "finished_at": {
            "type": ["string", "null"],
            "description": "When it ended; null while running.",
        },
        "elapsed_seconds": {
            "type": "number",
            "minimum": 0,
            "description": "Wall time of this invocation so far.",
        },
        "max_concurrent": {"type": "integer", "minimum": 1},
        "halt": {
            "type": "object",
            "description": (
                "Present once a policy halted the sweep (docs/policies.md):"
                " which rule, soon (start nothing new) or now (running jobs"
                " stopped too), and the line the display showed."
            ),
            "required": ["rule", "mode", "message"],
            "properties": {
                "rule": {
                    "enum": ["setup", "threshold", "deadline", "budget"],
                },
                "mode": {"enum": ["soon", "now"]},
                "message": {"type": "string"},
            },
        },
        "stop_when": {
            "type": "object",
            "description": (
                "Present for a sweep with stop_when (docs/sweep-file.md#stop_when): the rule"
                " and where each model it stops stands against it — the interval it stopped"
                " on, or the interval so far."
            ),
            "required": ["confidence", "method", "models"],
            "properties": {
                "confidence": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                "seed": {"type": ["integer", "null"], "minimum": 0},
                "half_width": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                "compare": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 2,
                    "maxItems": 2,
                },
                "margin": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                "method": {"type": "string"},
                "models": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "required": [
                            "stopped",
                            "reason",
                            "cases_used",
                            "cases",
                            "estimate",
                            "low",
                            "high",
                        ],
                        "properties": {
                            "half_width": {"type": ["number", "null"]},
                            "confidence": {"type": "number"},
                            "stopped": {"type": "boolean"},
                            "reason": {
                                "enum": [
                                    "half_width",
                                    "b_better",
                                    "a_better",
                                    "within_margin",
                                    None,
                                ]
                            },
                            "cases_used": {"type": "integer", "minimum": 0},
                            "cases": {"type": "integer", "minimum": 0},
                            "estimate": {"type": "number"},
                            "low": {"type": "number"},
                            "high": {"type": "number"},
                        },
                    },
                },
            },
        },
        "jobs": {
            "type": "array",
            "description": ("One row per (case, model) of the sweep, in the sweep's order."),
            "items": {"$ref": "#/$defs/job"},
        },
        "totals": {
            "type": "object",
            "description": ("Jobs per status. Every key is always present, 0 where none."),
            "required": [
                "passed",
                "failed",
                "error",
                "skipped",
                "pending",
                "running",
            ],
            "properties": {
                "passed": {"$ref": "#/$defs/count"},
                "failed": {"$ref": "#/$defs/count"},
                "error": {"$ref": "#/$defs/count"},
                "skipped": {"$ref": "#/$defs/count"},
                "pending": {"$ref": "#/$defs/count"},
                "running": {"$ref": "#/$defs/count"},
            },
            "additionalProperties": {"$ref": "#/$defs/count"},
        },
    },
    "additionalProperties": True,
}

_DEFS: dict[str, Any] = {
    "count": {"type": "integer", "minimum": 0},
}


def summary_schema() -> dict[str, Any]:
    """The schema document, as ``docs/schemas/batch-summary.schema.json`` holds it."""
    return {**_DOCUMENT, "$defs": {**_DEFS, "job": row_schema(), "usage": USAGE_SCHEMA}}


def schema_text() -> str:
    return json.dumps(summary_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if argv:
        print(
            "usage: python -m batch.summary.schema > FILE (it prints the schema)", file=sys.stderr
        )
        return 2
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
