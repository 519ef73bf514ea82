"""The sweep snapshot: the resolved sweep written back as YAML for the batch dir.

``sweep_snapshot(sweep)`` is what the driver stores as ``sweep.yaml`` beside the runs, so a
batch records exactly what it ran: every key, durations in seconds, discovered cases
listed, and no secret (see ``batch.sweep.secrets``). ``load_sweep`` reads it back unchanged.
``snapshot_data`` is the same as plain data and ``read_snapshot`` reads a snapshot's text
back to it, so a resume tells "same sweep" without writing 10,000 cases as YAML; a
snapshot's digest line lets ``same_snapshot`` tell it without reading them either.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.representer import SafeRepresenter
from ruamel.yaml.tag import Tag

from batch.policies.attempts import DEFAULT_MAX_ATTEMPTS
from batch.policies.halt import HaltConfig
from batch.sweep import secrets
from batch.sweep.features.notify import EVENTS
from batch.sweep.features.policies import (
    adaptive_snapshot,
    breaker_snapshot,
    budget_snapshot,
    halt_snapshot,
)
from batch.sweep.features.pools import pools_snapshot
from batch.sweep.yaml_fast import plain_data

if TYPE_CHECKING:
    # Only for annotations: batch.sweep re-exports sweep_snapshot, so a runtime import
    # would be circular.
    from batch.sweep.features.between_models import SideCommand
    from batch.sweep.features.containers import ContainerSpec
    from batch.sweep.features.executor import ExecutorSpec
    from batch.sweep.features.stop_when import StopWhen
    from batch.sweep.features.worker import WorkerSpec
    from batch.sweep.load import CaseSpec, ModelSpec, Sweep


def sweep_snapshot(sweep: Sweep) -> str:
    """The resolved sweep as YAML, for ``sweep.yaml`` in the batch dir: every key, durations
    in seconds, cases and models as objects, discovered cases listed. ``load_sweep`` reads it
    back. Env values written as ``${VAR}`` stay so; other secret-named values are redacted,
    so the snapshot never holds a secret.
    """
    return snapshot_text(snapshot_data(sweep))


def snapshot_data(sweep: Sweep) -> dict[str, Any]:
    """What ``sweep_snapshot`` writes, as plain data: what ``read_snapshot`` gives back for
    it. Cheap where the YAML text is not (10,000 cases take seconds to write as YAML), so
    "is this the sweep the batch last ran" compares data, not text."""
    data = {
        "name": sweep.name,
        "output": str(sweep.output),
        "cases": _cases_snapshot(sweep),
        "models": [_model_snapshot(model) for model in sweep.models],
        # One of three: a sweep has a command, steps or a worker (models may each have one).
        **_job_snapshot(sweep),
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
    if sweep.exit_codes:  # left out when unset: older snapshots stay as they were
        data["exit_codes"] = dict(sorted(sweep.exit_codes.items()))
    data.update(_queue_snapshot(sweep))
    data.update(_policy_snapshot(sweep))
    if sweep.executor.kind != "local":  # the default, left out: older snapshots stay as they were
        data["executor"] = _executor_snapshot(sweep.executor)
    if sweep.containers is not None:  # left out when unset: older snapshots stay as they were
        data["containers"] = _containers_snapshot(sweep.containers)
    return data


def snapshot_text(data: Mapping[str, Any]) -> str:
    """``snapshot_data``'s data as the snapshot's YAML text.

    Written by libyaml's emitter (``ruamel.yaml.clib``), several times faster than ruamel's
    pure-Python one before the first job starts (bench/sweep_load.py),
    and kept only when it reads back as ``data``; otherwise, or without libyaml, by the
    pure-Python emitter. The two differ only in how a few odd strings are quoted.
    """
    text = None
    with contextlib.suppress(ImportError, YAMLError, ValueError):
        text = _dump(data, pure=False)
        if read_snapshot(text) != data:
            text = None
    if text is None:
        text = _dump(data, pure=True)
    digest = _digest(data, text)
    return _HEADER + ("" if digest is None else f"# digest: sha256 {digest}\n") + text


_HEADER = "# Resolved sweep (batch-ledger): durations in seconds, secrets redacted.\n"
#: The second line of a snapshot this version writes: a hash of its data and its YAML.
_DIGEST_LINE = re.compile(r"# digest: sha256 ([0-9a-f]{64})\n")


def _digest(data: Mapping[str, Any], yaml_text: str) -> str | None:
    """A hash of ``data`` (as canonical JSON) and of the YAML written for it; None for data
    JSON cannot write (no digest line then: the snapshot is compared by reading it)."""
    try:
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    hashed = hashlib.sha256(canonical.encode("utf-8", "surrogatepass"))
    hashed.update(b"\0")
    hashed.update(yaml_text.encode("utf-8", "surrogatepass"))
    return hashed.hexdigest()


def same_snapshot(text: str, data: Mapping[str, Any]) -> bool:
    """True when the snapshot ``text`` provably records ``data``, without parsing its YAML.

    Its digest line hashes the data it was written for together with the YAML below the
    line, so it matches only when that YAML is still exactly as written (an edit anywhere
    below the line changes the hash) and ``data`` is, as canonical JSON, the data written.
    False says nothing: no digest (an older snapshot), an edited one, or different data
    (or equal data of other types, 1 for 1.0) — then compare ``read_snapshot(text)``.
    """
    header_end = text.find("\n") + 1
    match = _DIGEST_LINE.match(text, header_end)
    if not header_end or match is None:
        return False
    return _digest(data, text[match.end() :]) == match.group(1)


class _SharedTagRepresenter(SafeRepresenter):
    """The safe representer, with one ``Tag`` per tag for every node that has it.

    ruamel gives each node a ``Tag`` of its own, which works out its text character by
    character the first time it is asked: half the time of dumping a sweep's cases before
    the first job (bench/sweep_load.py). The text written is the same.
    """

    _tags: dict[str, Tag] = {}

    @classmethod
    def _shared(cls, tag: Any) -> Any:
        if type(tag) is not str:
            return tag
        shared = cls._tags.get(tag)
        if shared is None:
            shared = cls._tags[tag] = Tag(suffix=tag)
        return shared

    def represent_scalar(self, tag: Any, value: Any, style: Any = None, anchor: Any = None) -> Any:
        return super().represent_scalar(self._shared(tag), value, style, anchor)

    def represent_sequence(self, tag: Any, sequence: Any, flow_style: Any = None) -> Any:
        return super().represent_sequence(self._shared(tag), sequence, flow_style)

    def represent_mapping(self, tag: Any, mapping: Any, flow_style: Any = None) -> Any:
        return super().represent_mapping(self._shared(tag), mapping, flow_style)


def _dump(data: Mapping[str, Any], *, pure: bool) -> str:
    yaml = YAML(typ="safe", pure=pure)
    yaml.Representer = _SharedTagRepresenter
    yaml.default_flow_style = False
    # Keep the documented key order (ruamel declares the attribute None, hence the ignore).
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    yaml.width = 1 << 16  # never fold a long id across lines
    stream = io.StringIO()
    yaml.dump(data, stream)
    return stream.getvalue()


def read_snapshot(text: str) -> Any:
    """The data of a snapshot's text (``snapshot_data``'s, for one this version wrote); raises
    ``ValueError`` when it is no YAML. Its cases list is read in libyaml's parser as plain
    values (``batch.sweep.yaml_fast``), the rest as a safe load would read it."""
    try:
        return _plain(plain_data(text, plain_key="cases"))
    except ValueError:
        pass  # something the fast reader leaves to ruamel: a safe load (its values)
    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise ValueError(str(exc)) from None


_PLAIN_TYPES = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """Round-trip values as a safe load gives them: dicts, lists and plain scalars (ruamel's
    ``ScalarFloat`` would print as written in a change line, not as a number)."""
    if type(value) in _PLAIN_TYPES:
        return value
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def _job_snapshot(sweep: Sweep) -> dict[str, Any]:
    """``steps``, ``worker`` or ``command``: what runs a job (a sweep whose models each name
    their own worker has none of them)."""
    if sweep.steps:
        return _steps_snapshot(sweep)
    if sweep.worker is not None:
        return {"worker": _worker_snapshot(sweep.worker)}
    return {"command": list(sweep.command)} if sweep.command else {}


def _worker_snapshot(spec: WorkerSpec) -> dict[str, Any]:
    return {"command": list(spec.command), "concurrency": spec.concurrency}


def _model_snapshot(model: ModelSpec) -> dict[str, Any]:
    snapshot: dict[str, Any] = {
        "id": model.id,
        "max_concurrent": model.max_concurrent,
        "env": _env_snapshot(model.env, model.env_templates),
    }
    # Overrides appear only where given: the snapshot of a plain sweep stays as it was.
    if model.between_models:
        snapshot["between_models"] = _between_snapshot(model.between_models)
    if model.probe is not None:
        snapshot["probe"] = _side_command(model.probe)
    if model.breaker is not None:
        snapshot["breaker"] = breaker_snapshot(model.breaker)
    if model.worker is not None:
        snapshot["worker"] = _worker_snapshot(model.worker)
    snapshot.update(_model_policy_snapshot(model))
    return snapshot


def _model_policy_snapshot(model: ModelSpec) -> dict[str, Any]:
    """A model's ``adaptive``, ``max_attempts`` and ``budget``, only where set."""
    data: dict[str, Any] = {}
    if model.adaptive is not None:
        data["adaptive"] = adaptive_snapshot(model.adaptive)
    if model.max_attempts is not None:
        data["max_attempts"] = model.max_attempts
    if model.budget is not None:
        data["budget"] = budget_snapshot(model.budget)
    if model.repeats is not None:
        data["repeats"] = model.repeats
    if model.stop_when is not None:
        data["stop_when"] = (
            model.stop_when if isinstance(model.stop_when, str) else dict(model.stop_when)
        )
    if model.pool is not None:
        data["pool"] = model.pool
    return data


def _steps_snapshot(sweep: Sweep) -> dict[str, Any]:
    steps = [
        {
            "name": step.name,
            "command": list(step.command),
            "timeout": _seconds(step.timeout),
            "expect": list(step.expect),
        }
        for step in sweep.steps
    ]
    return {"steps": steps}


def _queue_snapshot(sweep: Sweep) -> dict[str, Any]:
    """The overnight-queue keys (docs/queue.md), only where set."""
    data: dict[str, Any] = {}
    if sweep.between_models is not None:
        data["between_models"] = _between_snapshot(
            attrs.asdict(sweep.between_models, recurse=False)
        )
    if sweep.memfree is not None:
        data["memfree"] = sweep.memfree
    if sweep.probe is not None:
        data["probe"] = _side_command(sweep.probe)
    # The policies (docs/policies.md), only where not the defaults.
    if sweep.halt != HaltConfig():
        data["halt"] = halt_snapshot(sweep.halt)
    if sweep.breaker:
        data["breaker"] = breaker_snapshot(sweep.breaker)
    if sweep.notify is not None:
        data["notify"] = {
            "commands": [list(command) for command in sweep.notify.commands],
            "timeout": _seconds(sweep.notify.timeout),
            "events": [event for event in EVENTS if event in sweep.notify.events],
        }
    if sweep.stall is not None:
        data["stall"] = _seconds(sweep.stall)
    return data


def _policy_snapshot(sweep: Sweep) -> dict[str, Any]:
    """The policy keys (docs/policies.md), only where they differ from the default."""
    data: dict[str, Any] = {}
    if sweep.max_attempts != DEFAULT_MAX_ATTEMPTS:
        data["max_attempts"] = sweep.max_attempts
    if sweep.repeats != 1:
        data["repeats"] = sweep.repeats
    if sweep.budget is not None:
        data["budget"] = budget_snapshot(sweep.budget)
    if sweep.stop_when is not None:  # left out when unset: older snapshots stay as they were
        data["stop_when"] = _stop_when_snapshot(sweep.stop_when)
    if sweep.pools:
        data["pools"] = pools_snapshot(sweep.pools)
    if sweep.pool is not None:
        data["pool"] = sweep.pool
    if sweep.pools_store is not None:
        data["pools_store"] = sweep.pools_store
    return data


def _stop_when_snapshot(rule: StopWhen) -> dict[str, Any]:
    """The rule with shares as fractions and the batch's seed (docs/sweep-file.md)."""
    data: dict[str, Any] = {}
    if rule.half_width is not None:
        data["half_width"] = rule.half_width
    else:
        assert rule.compare is not None
        data["compare"] = list(rule.compare)
        data["margin"] = rule.margin
    data["confidence"] = rule.confidence
    if rule.seed is not None:
        data["seed"] = rule.seed
    return data


def _executor_snapshot(executor: ExecutorSpec) -> str | dict[str, Any]:
    snapshot: dict[str, Any] = {"kind": executor.kind}
    if executor.scheduler is not None:
        snapshot["scheduler"] = executor.scheduler
    if executor.scheduler_file is not None:
        snapshot["scheduler_file"] = executor.scheduler_file
    if executor.slurm is not None:
        slurm = attrs.asdict(executor.slurm)
        if slurm["adaptive"] is not None:
            slurm["adaptive"] = dict(zip(("minimum", "maximum"), slurm["adaptive"], strict=True))
        snapshot.update((key, value) for key, value in slurm.items() if value is not None)
    return executor.kind if len(snapshot) == 1 else snapshot


def _containers_snapshot(spec: ContainerSpec) -> dict[str, Any]:
    snapshot: dict[str, Any] = {"engine": spec.engine, "stop_timeout": spec.stop_timeout}
    if spec.check_run:
        snapshot["check_run"] = list(spec.check_run)
    return snapshot


def _between_snapshot(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``between_models`` (the sweep's, or a model's overrides) as the sweep file has it."""
    snapshot: dict[str, Any] = {}
    if "reset" in fields:
        reset = fields["reset"]
        snapshot["reset"] = None if reset is None else _side_command(reset)
    if "settle" in fields:
        settle = fields["settle"]
        if settle is not None and not isinstance(settle, Mapping):
            settle = attrs.asdict(settle)
        snapshot["settle"] = None if settle is None else {k: _seconds(v) for k, v in settle.items()}
    if "cooldown" in fields:
        snapshot["cooldown"] = _seconds(fields["cooldown"])
    return snapshot


def _side_command(command: SideCommand) -> dict[str, Any]:
    return {"command": list(command.argv), "timeout": _seconds(command.timeout)}


def _cases_snapshot(sweep: Sweep) -> list[dict[str, Any]] | dict[str, Any]:
    """The cases as objects; a dataset as what a resume needs to read the same rows."""
    source = sweep.dataset
    if source is None:
        return [_case_snapshot(case) for case in sweep.cases]
    return {
        "jsonl": str(source.path),
        "id": source.id_field,
        "rows": source.rows,
        "fingerprint": source.fingerprint,
        # So a resume can name the rows added and removed, not only "content changed".
        "ids": [case.id for case in sweep.cases],
    }


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
