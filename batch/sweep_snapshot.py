"""The sweep snapshot: the resolved sweep written back as YAML for the batch dir.

``sweep_snapshot(sweep)`` is what the driver stores as ``sweep.yaml`` beside the runs, so a
batch records exactly what it ran: every key, durations in seconds, discovered cases
listed, and no secret (see ``batch.secrets``). ``load_sweep`` reads it back unchanged.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ruamel.yaml import YAML

from batch import secrets

if TYPE_CHECKING:
    # Only for annotations: batch.sweep re-exports sweep_snapshot, so a runtime import
    # would be circular.
    from batch.sweep import CaseSpec, Sweep


def sweep_snapshot(sweep: Sweep) -> str:
    """The resolved sweep as YAML, for ``sweep.yaml`` in the batch dir: every key, durations
    in seconds, cases and models as objects, discovered cases listed. ``load_sweep`` reads it
    back. Env values written as ``${VAR}`` stay so; other secret-named values are redacted,
    so the snapshot never holds a secret.
    """
    data = {
        "name": sweep.name,
        "output": str(sweep.output),
        "cases": [_case_snapshot(case) for case in sweep.cases],
        "models": [
            {
                "id": model.id,
                "max_concurrent": model.max_concurrent,
                "env": _env_snapshot(model.env, model.env_templates),
            }
            for model in sweep.models
        ],
        "command": list(sweep.command),
        "env": _env_snapshot(sweep.env, sweep.env_templates),
        "timeout": _seconds(sweep.timeout),
        "kill_grace": _seconds(sweep.kill_grace),
        "max_concurrent": sweep.max_concurrent,
        "stagger": _seconds(sweep.stagger),
        "order": sweep.order,
        "retries": sweep.retries,
        "retry_backoff": _seconds(sweep.retry_backoff),
        "non_model_categories": sorted(sweep.non_model_categories),
        "log_patterns": {category: list(p) for category, p in sweep.log_patterns.items()},
        "summary_interval": _seconds(sweep.summary_interval),
    }
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # keep the documented key order
    yaml.width = 1 << 16  # never fold a long id across lines
    stream = io.StringIO()
    yaml.dump(data, stream)
    return "# Resolved sweep (batch-ledger): durations in seconds, secrets redacted.\n" + (
        stream.getvalue()
    )


def _case_snapshot(case: CaseSpec) -> dict[str, Any]:
    snapshot: dict[str, Any] = {"id": case.id}
    if case.timeout is not None:  # absent: the sweep's timeout applies
        snapshot["timeout"] = _seconds(case.timeout)
    snapshot["params"] = dict(case.params)
    return snapshot


def _env_snapshot(env: Mapping[str, str], templates: Mapping[str, str]) -> dict[str, str]:
    snapshot = {}
    for name, value in env.items():
        template = templates.get(name)
        if template is not None and secrets.references(template):
            snapshot[name] = template
        elif secrets.is_secret_name(name):
            snapshot[name] = secrets.REDACTED
        else:
            snapshot[name] = secrets.escape_references(value)
    return snapshot


def _seconds(seconds: float | None) -> float | int | None:
    if seconds is None or not float(seconds).is_integer():
        return seconds
    return int(seconds)
