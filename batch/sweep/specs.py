"""The sweep's cases and models: :class:`CaseSpec`, :class:`ModelSpec` and their keys.

``cases_key`` reads ``cases`` (a list of ids or ``{id, timeout, params}`` objects,
``{dir, glob}`` to discover one case per matching file or directory, or ``{jsonl, id}``:
one case per row of a JSON Lines dataset, ``batch.sweep.dataset``); ``models_key`` reads
``models`` (ids or ``{id, max_concurrent, env, between_models, probe, adaptive, max_attempts,
budget}`` objects). Either
list must be non-empty with unique ids, so every (case, model) pair names one job.
``env_key`` reads an ``env`` mapping, the sweep's or a model's, expanding ``${VAR}``.

A ``cases`` list read without positions (``yaml_fast.PlainSeq``: 10,000 located case objects
cost seconds to build) is converted by ``_plain_cases``, which takes only what converts
without a message or a source token; for anything else it raises ``NeedsPositions`` and the
loader reads the file again, located, so every message stays the located converters' own.

Converters take a located value (``batch.sweep.nodes.Node``) and raise located errors, as
every sweep key does; ``batch.sweep`` puts them in its key table and re-exports the specs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, TypeVar

import attrs

from batch.durations import parse_duration
from batch.policies.aimd import AimdConfig
from batch.policies.spend import Budget
from batch.sweep import secrets
from batch.sweep.dataset import load_dataset
from batch.sweep.dir_hints import near_dir, what_dir_holds
from batch.sweep.features.between_models import SideCommand, model_between_models_key, probe_key
from batch.sweep.features.policies import (
    AdaptiveSpec,
    adaptive_key,
    aimd_config,
    breaker_key,
    budget_key,
)
from batch.sweep.features.pools import pool_name
from batch.sweep.features.worker import WorkerSpec, worker_key
from batch.sweep.nodes import (
    NeedsPositions,
    Node,
    as_integer,
    as_name,
    as_path,
    as_positive_duration,
    as_string,
    checked,
    is_number,
    mapping_keys,
    string_keyed,
)
from batch.sweep.yaml_fast import PlainSeq
from run_support.jsonio import is_text


@attrs.frozen
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


@attrs.frozen
class ModelSpec:
    id: str
    max_concurrent: int | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    #: ``env`` as written, before ``${VAR}`` expansion (what the snapshot records).
    env_templates: Mapping[str, str] = attrs.field(factory=dict)
    #: The ``between_models`` keys this model overrides
    #: (batch.sweep.features.between_models.resolve_between_models).
    between_models: Mapping[str, Any] | None = None
    probe: SideCommand | None = None
    #: The breaker fields this model overrides (batch.sweep.features.policies.resolve_breaker).
    breaker: Mapping[str, Any] | None = None
    #: ``adaptive``: AIMD concurrency under ``max_concurrent`` (docs/policies.md); None: off.
    adaptive: AdaptiveSpec | None = None
    #: ``max_attempts`` of this model's jobs; None: the sweep's.
    max_attempts: int | None = None
    #: ``repeats``: samples of each case for this model; None: the sweep's.
    repeats: int | None = None
    #: ``budget``: what this model's jobs may spend (docs/policies.md, "Budgets"); None: no
    #: limit of its own.
    budget: Budget | None = None
    #: ``worker``: the warm worker serving this model's jobs (docs/worker.md); None: the
    #: sweep's ``worker`` or ``command``.
    worker: WorkerSpec | None = None
    #: ``pool``: the pool this model's jobs count against (docs/policies.md, "Pools");
    #: None: the sweep's ``pool``.
    pool: str | None = None

    def aimd(self, sweep_max_concurrent: int) -> AimdConfig | None:
        """The model's AIMD config, its ceiling its own ``max_concurrent`` or the sweep's."""
        if self.adaptive is None:
            return None
        return aimd_config(self.adaptive, self.max_concurrent or sweep_max_concurrent)


def env_key(node: Node) -> tuple[dict[str, str], dict[str, str]]:
    """(expanded values, values as written); ``${VAR}`` comes from the driver's environment."""
    values: dict[str, str] = {}
    templates: dict[str, str] = {}
    for key, value in string_keyed(node):
        if "=" in key.value or "\0" in key.value:
            raise key.error(f"{node.label}: {key.value!r} is not a valid variable name")
        if isinstance(value.value, str):
            template = value.value
        elif is_number(value.value) or isinstance(value.value, bool):
            template = value.source_text()
        else:
            raise value.type_error('a string (write "" for an empty value)')
        secret = secrets.is_secret_name(key.value)
        try:
            values[key.value] = secrets.expand_references(
                template, value.doc.environ, secret=secret
            )
        except ValueError as exc:
            raise value.error(f"{value.label}: {exc}") from None
        templates[key.value] = template
    return values, templates


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
    specs = _unique_specs(
        node,
        _case,
        "case",
        "a list of case ids or objects, or {dir: ..., glob: ...}",
    )
    return specs, None


def _dataset_cases(node: Node) -> tuple[tuple[CaseSpec, ...], DatasetSource]:
    """One case per row of a JSON Lines file (``batch.sweep.dataset``). ``rows`` and
    ``fingerprint`` are what a snapshot recorded; the file as it is now decides."""
    keys = mapping_keys(node, ("jsonl", "id", "rows", "fingerprint"), required=("jsonl", "id"))
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
    keys = mapping_keys(node, ("id", "timeout", "params"), required=("id",))
    timeout = _case_timeout(keys["timeout"]) if "timeout" in keys else None
    params = _params(keys["params"]) if "params" in keys else {}
    return CaseSpec(id=as_name(keys["id"], "case id"), timeout=timeout, params=params)


_CASE_KEYS = frozenset(("id", "timeout", "params"))


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
    keys = mapping_keys(node, ("dir", "glob"), required=("dir", "glob"))
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


# --- models ----------------------------------------------------------------------------------


def models_key(node: Node) -> tuple[ModelSpec, ...]:
    return _unique_specs(node, _model, "model", "a list of model ids or objects")


def _model(node: Node) -> ModelSpec:
    if not isinstance(node.value, Mapping):
        return ModelSpec(id=as_name(node, "model id"))
    keys = mapping_keys(
        node,
        (
            "id",
            "max_concurrent",
            "env",
            "between_models",
            "probe",
            "breaker",
            "adaptive",
            "max_attempts",
            "budget",
            "repeats",
            "worker",
            "pool",
        ),
        required=("id",),
    )
    env, templates = env_key(keys["env"]) if "env" in keys else ({}, {})
    limit = _optional_limit(keys["max_concurrent"]) if "max_concurrent" in keys else None
    between = keys.get("between_models")
    return ModelSpec(
        id=as_name(keys["id"], "model id"),
        max_concurrent=limit,
        env=env,
        env_templates=templates,
        between_models=None if between is None else model_between_models_key(between),
        probe=probe_key(keys["probe"]) if "probe" in keys else None,
        breaker=breaker_key(keys["breaker"]) if "breaker" in keys else None,
        adaptive=_adaptive(keys["adaptive"], limit) if "adaptive" in keys else None,
        max_attempts=as_integer(1)(keys["max_attempts"]) if "max_attempts" in keys else None,
        budget=budget_key(keys["budget"]) if "budget" in keys else None,
        repeats=as_repeats(keys["repeats"]) if "repeats" in keys else None,
        worker=worker_key(keys["worker"]) if "worker" in keys else None,
        pool=pool_name(keys["pool"]) if "pool" in keys else None,
    )


#: The most samples of one case a sweep may ask for: past it, a typo, not an evaluation.
MAX_REPEATS = 10_000


def as_repeats(node: Node) -> int:
    """``repeats``: a whole number from 1 to :data:`MAX_REPEATS`."""
    value = node.value
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_REPEATS:
        # A number of 400 digits is not worth printing whole.
        got = f"{value:,}" if value.bit_length() <= 64 else "a larger number"
        raise node.error(f"{node.label}: must be at most {MAX_REPEATS:,}, got {got}")
    return as_integer(1)(node)


def _adaptive(node: Node, max_concurrent: int | None) -> AdaptiveSpec | None:
    """``adaptive``; an ``initial`` above the model's own ``max_concurrent`` is refused here
    (one above the sweep's is cut to it when the sweep runs, as ``-j`` may lower it)."""
    spec = adaptive_key(node)
    if spec is not None and spec.initial is not None and max_concurrent is not None:
        checked(node, lambda _: aimd_config(spec, max_concurrent))
    return spec


def _optional_limit(node: Node) -> int | None:
    return None if node.value is None else as_integer(1)(node)


# --- either list -----------------------------------------------------------------------------

_Spec = TypeVar("_Spec", CaseSpec, ModelSpec)


def _unique_specs(
    node: Node, convert: Callable[[Node], _Spec], what: str, expected: str
) -> tuple[_Spec, ...]:
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
