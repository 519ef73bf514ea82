"""What changed between the sweep a batch last ran and the sweep resuming it.

A pure function over two sweep snapshots as plain data (what ``sweep.yaml`` holds, see
``batch.sweep.snapshot``): :func:`sweep_changes` lists, one line each, the models and cases
added or removed, a changed command or steps, and changed timeouts. A resume under a changed
sweep goes ahead (that is how a model is added to a batch); ``batch plan`` and the run
print these lines first so nobody mixes results of two sweeps without knowing.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: Past this many names a change is one counted line with the first few names.
MANY = 5
_SHOWN = 3


def sweep_changes(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    recorded_models: Mapping[str, int] | None = None,
    recorded_cases: Mapping[str, int] | None = None,
) -> list[str]:
    """One line per difference that matters to results, old → new; empty when none.

    ``recorded_models`` / ``recorded_cases`` count the (case, model) pairs with a record in
    the batch per model and per case, for what a removed model or case leaves behind.
    """
    old_cases, new_cases = _by_id(old.get("cases")), _by_id(new.get("cases"))
    old_models, new_models = _by_id(old.get("models")), _by_id(new.get("models"))
    cases = _case_count(new.get("cases"))
    lines = _added_removed(
        "model",
        old_models,
        new_models,
        # A new model runs every case, each as many times as it has repeats.
        jobs_each=lambda name: cases * _repeats_of(new, new_models[name]),
        recorded=recorded_models or {},
    )
    # A new case runs for every model, as many times as each has repeats.
    per_case = sum(_repeats_of(new, model) for model in new_models.values())
    if isinstance(old.get("cases"), Mapping) or isinstance(new.get("cases"), Mapping):
        # A dataset's snapshot records its file and row ids, not its rows: what changed is
        # the file, and which ids came or went.
        lines += _dataset_changes(
            old.get("cases"), new.get("cases"), per_case, recorded_cases or {}
        )
    else:
        lines += _case_changes(old_cases, new_cases, per_case, recorded_cases or {})
    lines += _command_changes(old, new)
    lines += _timeout_changes(old, new, old_cases, new_cases)
    lines += _repeats_changes(old, new, old_models, new_models)
    return lines


def _repeats_changes(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    old_models: Mapping[str, Mapping[str, Any]],
    new_models: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """The samples per case x model, the sweep's and each kept model's, old → new: raised,
    the new repeats run; lowered, the records past it are kept out of the summary."""
    lines = []
    was, now = old.get("repeats", 1), new.get("repeats", 1)
    if was != now:
        lines.append(f"repeats changed: {was} → {now}")
    for model, entry in new_models.items():
        if model not in old_models:
            continue
        was_own, now_own = old_models[model].get("repeats"), entry.get("repeats")
        if was_own != now_own and (was_own or was) != (now_own or now):
            lines.append(f"repeats changed for model {model}: {was_own or was} → {now_own or now}")
    return lines


def _case_changes(
    old_cases: Mapping[str, Mapping[str, Any]],
    new_cases: Mapping[str, Mapping[str, Any]],
    models: int,
    recorded: Mapping[str, int],
) -> list[str]:
    """Cases added or removed, and cases whose params changed."""
    lines = _added_removed(
        "case", old_cases, new_cases, jobs_each=lambda _: models, recorded=recorded
    )
    changed_params = [
        case
        for case in new_cases
        if case in old_cases and _params(old_cases[case]) != _params(new_cases[case])
    ]
    if changed_params:
        lines.append(f"params changed for {_names('case', changed_params)}")
    return lines


def _repeats_of(sweep: Mapping[str, Any], model: Mapping[str, Any]) -> int:
    """A model's samples per case in a snapshot: its own ``repeats``, else the sweep's."""
    own = model.get("repeats")
    return own if isinstance(own, int) else sweep.get("repeats", 1)


def _case_count(cases: object) -> int:
    if isinstance(cases, Mapping):  # a dataset: its row count
        rows = cases.get("rows")
        return rows if isinstance(rows, int) else 0
    return len(cases) if isinstance(cases, list) else 0


_DATASET_KEYS = ("jsonl", "id", "fingerprint")


def _dataset_changes(
    old: object, new: object, models: int, recorded: Mapping[str, int]
) -> list[str]:
    """``cases: {jsonl, id, rows, fingerprint, ids}`` on either side: the rows added and
    removed (by id, when both snapshots list them: older ones do not) and one line for what
    else differs."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        was, now = (_cases_source(cases) for cases in (old, new))
        return [f"cases changed from {was} to {now}: carried results came from the old cases"]
    if all(old.get(key) == new.get(key) for key in _DATASET_KEYS):
        return []
    old_ids, new_ids = _ids(old), _ids(new)
    lines = []
    if old_ids is not None and new_ids is not None:
        lines = _added_removed(
            "case", old_ids, new_ids, jobs_each=lambda _: models, recorded=recorded
        )
    parts = []
    if old.get("jsonl") != new.get("jsonl"):
        parts.append(f"file {old.get('jsonl')} → {new.get('jsonl')}")
    if old.get("id") != new.get("id"):
        parts.append(f"id field {old.get('id')} → {new.get('id')}")
    if old.get("fingerprint") != new.get("fingerprint"):
        parts.append(f"content changed ({old.get('rows')} → {new.get('rows')} rows)")
    lines.append(f"dataset changed: {'; '.join(parts)}: carried results came from the old rows")
    return lines


def _ids(cases: Mapping[str, Any]) -> dict[str, None] | None:
    ids = cases.get("ids")
    if not isinstance(ids, list):
        return None
    return dict.fromkeys(str(case) for case in ids)


def _cases_source(cases: object) -> str:
    if isinstance(cases, Mapping):
        return f"dataset {cases.get('jsonl')}"
    return f"a list of {_count(_case_count(cases), 'case')}"


def _by_id(items: object) -> dict[str, Mapping[str, Any]]:
    """Cases or models by id, in their order; a bare id counts as ``{id: ...}``."""
    found: dict[str, Mapping[str, Any]] = {}
    for item in items if isinstance(items, list) else ():
        entry = item if isinstance(item, Mapping) else {"id": item}
        found[str(entry.get("id"))] = entry
    return found


def _params(case: Mapping[str, Any]) -> object:
    return case.get("params") or {}


def _added_removed(
    kind: str,
    old: Mapping[str, object],
    new: Mapping[str, object],
    *,
    jobs_each: Callable[[str], int],
    recorded: Mapping[str, int],
) -> list[str]:
    added = [name for name in new if name not in old]
    removed = [name for name in old if name not in new]
    lines = []
    if len(added) > MANY:
        total = sum(map(jobs_each, added))
        lines.append(f"+ {_names(kind, added)} ({_count(total, 'job')})")
    else:
        lines += [f"+ {kind} {name} ({_count(jobs_each(name), 'job')})" for name in added]
    kept = "kept, left out of the summary"
    if len(removed) > MANY:
        runs = sum(recorded.get(name, 0) for name in removed)
        lines.append(f"- {_names(kind, removed)}: {_count(runs, 'recorded run')} {kept}")
    else:
        lines += [
            f"- {kind} {name}: {_count(recorded.get(name, 0), 'recorded run')} {kept}"
            for name in removed
        ]
    return lines


def _command_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    old_steps, new_steps = old.get("steps"), new.get("steps")
    if not old_steps and not new_steps:
        if old.get("command") == new.get("command"):
            return []
        return [
            "command changed: carried results came from the old command",
            f"  was: {_argv(old.get('command'))}",
            f"  now: {_argv(new.get('command'))}",
        ]
    if not old_steps:
        names = _step_names(new_steps)
        return [f"command changed to steps {names}: carried results came from the old command"]
    if not new_steps:
        return ["steps changed to a command: carried results came from the old steps"]
    parts = _step_parts(_by_name(old_steps), _by_name(new_steps))
    if not parts:
        return []
    return [f"steps changed: {'; '.join(parts)}: carried results came from the old steps"]


def _by_name(steps: object) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for step in steps if isinstance(steps, list) else ():
        if isinstance(step, Mapping):
            found[str(step.get("name"))] = step
    return found


def _step_parts(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    parts = [f"+ step {name}" for name in new if name not in old]
    parts += [f"- step {name}" for name in old if name not in new]
    for name, step in new.items():
        before = old.get(name)
        if before is None:
            continue
        if before.get("command") != step.get("command"):
            parts.append(f"{name} command")
        if before.get("timeout") != step.get("timeout"):
            was, now = _seconds(before.get("timeout")), _seconds(step.get("timeout"))
            parts.append(f"{name} timeout {was} → {now}")
        if before.get("expect") != step.get("expect"):
            parts.append(f"{name} expect")
    common_old = [name for name in old if name in new]
    common_new = [name for name in new if name in old]
    if common_old != common_new:
        parts.append(f"order {', '.join(common_old)} → {', '.join(common_new)}")
    return parts


def _timeout_changes(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    old_cases: Mapping[str, Mapping[str, Any]],
    new_cases: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    lines = []
    if old.get("timeout") != new.get("timeout"):
        was, now = _seconds(old.get("timeout")), _seconds(new.get("timeout"))
        lines.append(f"timeout changed: {was} → {now}")
    cases = [
        case
        for case in new_cases
        if case in old_cases and old_cases[case].get("timeout") != new_cases[case].get("timeout")
    ]
    if len(cases) == 1:
        was, now = (_case_timeout(c[cases[0]]) for c in (old_cases, new_cases))
        lines.append(f"timeout changed for case {cases[0]}: {was} → {now}")
    elif cases:
        lines.append(f"timeout changed for {_names('case', cases)}")
    return lines


def _case_timeout(case: Mapping[str, Any]) -> str:
    timeout = case.get("timeout")
    return "the sweep's" if timeout is None else _seconds(timeout)


def _names(kind: str, names: Sequence[str]) -> str:
    """``case a`` or ``3 cases: a, b, c`` or ``40 cases: a, b, c, … and 37 more``."""
    if len(names) == 1:
        return f"{kind} {names[0]}"
    shown = ", ".join(names[:_SHOWN])
    rest = len(names) - _SHOWN
    more = f", … and {rest} more" if rest > 0 else ""
    return f"{len(names)} {kind}s: {shown}{more}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _seconds(value: object) -> str:
    return "none" if value is None else f"{value} s"


def _argv(argv: object) -> str:
    if not isinstance(argv, list):
        return str(argv)
    return shlex.join(str(arg) for arg in argv)


def _step_names(steps: object) -> str:
    return "(" + ", ".join(_by_name(steps)) + ")"
