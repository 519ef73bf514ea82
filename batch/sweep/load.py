"""The sweep file: what to run (every case against every model) and how (limits, retries).

``load_sweep(path)`` reads the YAML, validates every key at load time and returns a frozen
:class:`Sweep`; any problem is a :class:`SweepError` located as
``sweep.yaml:LINE:COL: message``. Documented key by key in ``docs/sweep-file.md``.

Each top-level key is one row of the key table (``batch.sweep.keys.KEYS``: key ->
converter); this module applies it, gathers every key's problem into one error, and builds
the :class:`Sweep`. A new key is a new row there, a new ``Sweep`` field here and, when it
depends on other keys, a new check in ``batch.sweep.keys.CHECKS``.

Beside this module: ``batch.sweep.nodes`` (reading the file, located values, generic
converters), ``batch.sweep.specs`` (``cases``, ``models`` and ``env``: ``CaseSpec``,
``ModelSpec``), ``batch.sweep.features.executor`` (``executor``: ``ExecutorSpec``),
``batch.sweep.placeholders`` (``{case}`` ... in the command; ``expand_command``)
and ``batch.sweep.snapshot`` (``sweep_snapshot``, the resolved sweep as YAML).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from batch.errors import SweepError
from batch.policies.halt import HaltConfig
from batch.policies.spend import Budget
from batch.pools.config import PoolConfig
from batch.sweep.cases import CaseSpec, DatasetSource
from batch.sweep.features.between_models import BetweenModels, SideCommand
from batch.sweep.features.containers import ContainerSpec
from batch.sweep.features.executor import ExecutorSpec
from batch.sweep.features.notify import NotifySpec
from batch.sweep.features.steps import Step
from batch.sweep.features.stop_when import StopWhen
from batch.sweep.features.worker import WorkerSpec
from batch.sweep.keys import CHECKS, KEYS, ORDERS, REQUIRED_KEYS
from batch.sweep.nodes import NeedsPositions, Node, read_document, unknown_key
from batch.sweep.placeholders import PLACEHOLDERS, expand_command
from batch.sweep.secrets import literal_secrets, redactor, secret_values
from batch.sweep.specs import ModelSpec

__all__ = [
    "DEFAULT_LOG_PATTERNS",
    "ORDERS",
    "PLACEHOLDERS",
    "REQUIRED_KEYS",
    "CaseSpec",
    "DatasetSource",
    "ModelSpec",
    "Sweep",
    "expand_command",
    "load_sweep",
]

DEFAULT_LOG_PATTERNS: Mapping[str, tuple[str, ...]] = {
    "api_or_credit": ("429", "rate limit", "insufficient credit"),
}


@attrs.frozen
class Sweep:
    path: Path
    cases: tuple[CaseSpec, ...]
    models: tuple[ModelSpec, ...]
    command: tuple[str, ...]
    output: Path
    name: str | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    env_templates: Mapping[str, str] = attrs.field(factory=dict)
    timeout: float | None = None
    kill_grace: float = KEYS["kill_grace"].default
    max_concurrent: int = KEYS["max_concurrent"].default
    stagger: float = KEYS["stagger"].default
    order: str = KEYS["order"].default
    retries: int = KEYS["retries"].default
    retry_backoff: float = KEYS["retry_backoff"].default
    non_model_categories: frozenset[str] = KEYS["non_model_categories"].default
    log_patterns: Mapping[str, tuple[str, ...]] = attrs.field(
        factory=lambda: dict(DEFAULT_LOG_PATTERNS)
    )
    summary_interval: float = KEYS["summary_interval"].default
    executor: ExecutorSpec = attrs.field(factory=ExecutorSpec)
    #: ``steps`` replaces ``command`` (then empty): an eval → judge job (batch.attempt.steps).
    steps: tuple[Step, ...] = ()
    #: Reset, settle, cool down before each model's block (batch.execution.model_switch);
    #: None: nothing.
    between_models: BetweenModels | None = None
    #: Bytes of available memory a job needs before it may start (batch.execution.memgate).
    memfree: int | None = None
    #: The command ``batch check`` runs to see a model load.
    probe: SideCommand | None = None
    #: When the sweep stops early (docs/policies.md): by default the broken-setup rule only.
    halt: HaltConfig = attrs.field(factory=HaltConfig)
    #: The breaker fields the sweep sets for every model (batch.sweep.features.policies).
    breaker: Mapping[str, Any] = attrs.field(factory=dict)
    #: ``cases: {jsonl: ..., id: ...}``: the dataset the cases are the rows of.
    dataset: DatasetSource | None = None
    #: Attempts one job may spend in its batch dir, across invocations (a model's own
    #: ``max_attempts`` overrides it; docs/policies.md, "Attempt budget").
    max_attempts: int = KEYS["max_attempts"].default
    #: What the whole sweep may spend (docs/policies.md, "Budgets"); None: no limit.
    budget: Budget | None = None
    #: Commands run on batch events (docs/notify.md); None: none.
    notify: NotifySpec | None = None
    #: Seconds without a finished job, while jobs run, that make a ``stall`` event; None: off.
    stall: float | None = None
    #: Samples of every case x model (a model's own ``repeats`` overrides it; docs/stats.md).
    repeats: int = KEYS["repeats"].default
    #: ``exit_codes: {1: error, 2: failed}``: the outcome an exit code means, for harnesses
    #: whose convention is not 0 passed, 1 failed (docs/ledger.md); empty: that one.
    exit_codes: Mapping[int, str] = attrs.field(factory=dict)
    #: The engine whose containers an attempt started are removed when it ends (labelled
    #: ``{container_label}``; docs/sweep-file.md, "Containers"); None: none is run.
    containers: ContainerSpec | None = None
    #: ``worker`` replaces ``command`` (then empty): a program started once per slot serves
    #: the jobs (docs/worker.md); a model's own ``worker`` serves that model's jobs.
    worker: WorkerSpec | None = None
    #: ``pools``: limits shared with every sweep naming the pool (docs/policies.md, "Pools").
    pools: Mapping[str, PoolConfig] = attrs.field(factory=dict)
    #: ``pool``: the pool of every model that names none of its own; None: none.
    pool: str | None = None
    #: ``pools_store``: where the pools' state is shared; None: the user's state dir.
    pools_store: str | None = None
    #: Stop a model, or a pair, once its answer is known, the cases run in a random order
    #: (docs/sweep-file.md, "stop_when"); None: every job runs, in the file's order.
    stop_when: StopWhen | None = None

    def pool_of(self, model_id: str) -> str | None:
        """The pool ``model_id``'s jobs count against: the model's own, else the sweep's."""
        return self.model(model_id).pool or self.pool

    def model(self, model_id: str) -> ModelSpec:
        for spec in self.models:
            if spec.id == model_id:
                return spec
        raise KeyError(model_id)

    def worker_for(self, model_id: str) -> WorkerSpec | None:
        """The worker that serves ``model_id``'s jobs: the model's own, else the sweep's;
        None: each job runs ``command`` (or ``steps``) as a process of its own."""
        for spec in self.models:
            if spec.id == model_id and spec.worker is not None:
                return spec.worker
        return self.worker

    @property
    def uses_workers(self) -> bool:
        return self.worker is not None or any(m.worker is not None for m in self.models)


# --- loading ---------------------------------------------------------------------------------


def load_sweep(path: Path | str, *, environ: Mapping[str, str] | None = None) -> Sweep:
    """Read and check the sweep file at ``path``; raise ``SweepError`` on the first problem.

    ``${VAR}`` in env values comes from ``environ`` (default ``os.environ``); relative paths
    (``output``, ``cases.dir``) are relative to the sweep file's directory.
    """
    try:
        # Cases read as plain values, no positions (``specs._plain_cases``): the fast path.
        return _load(read_document(path, environ=environ, plain_key="cases"), Path(path))
    except (SweepError, NeedsPositions):
        pass  # read again, located: every message comes from the located read below
    top = read_document(path, environ=environ)
    try:
        return _load(top, Path(path))
    except SweepError as exc:
        # An alias can carry a secret-named value anywhere, into a message that quotes it.
        secrets = literal_secrets(top.value) | secret_values(environ=top.doc.environ)
        redact = redactor(secrets)
        raise SweepError(*map(redact, exc.lines())) from None


#: How many of a sweep file's problems one run reports; the rest are counted.
MAX_REPORTED_ERRORS = 20


def _load(top: Node, path: Path) -> Sweep:
    """The sweep of ``top``, or one ``SweepError`` naming every independent problem: each
    top-level key is checked on its own (a key's first problem stands for it), unknown and
    missing keys too; the checks across keys run only when the keys they read are sound."""
    problems: list[SweepError] = []
    nodes = _known_keys(top, problems)
    if "command" in nodes and "steps" in nodes:
        problems.append(nodes["steps"].error("steps: replaces command; give one of them, not both"))
    if "command" in nodes and "worker" in nodes:
        problems.append(
            nodes["worker"].error("worker: replaces command; give one of them, not both")
        )
    if "steps" in nodes and ("worker" in nodes or _models_name_workers(nodes)):
        where = nodes["worker"] if "worker" in nodes else nodes["steps"]
        problems.append(
            where.error(
                "worker: cannot serve a multi-step job (steps:) yet; give each step a "
                "command, or run the job through one worker (docs/worker.md)"
            )
        )
    if not {"command", "steps", "worker"} & nodes.keys() and not _models_name_workers(
        nodes, every=True
    ):
        problems.append(
            top.error(
                "missing required key 'command' (or 'steps' for a multi-step job, or "
                "'worker' for a warm worker)"
            )
        )
    fields: dict[str, Any] = {"output": (path.parent / "runs").resolve(), "command": ()}
    for key, node in nodes.items():
        spec = KEYS[key]
        try:
            value = spec.convert(node)
        except SweepError as exc:
            problems.append(exc)
            continue
        if spec.fields:
            fields.update(zip(spec.fields, value, strict=True))
        else:
            fields[key] = value
    if not problems:
        for check in CHECKS:
            try:
                check(nodes, fields)
            except SweepError as exc:
                problems.append(exc)
    if problems:
        raise _all_of(problems)
    return Sweep(path=path, **fields)


def _models_name_workers(nodes: Mapping[str, Node], *, every: bool = False) -> bool:
    """Whether some model (``every``: each one) has a ``worker`` of its own, read from the
    file as written: the key checks cannot wait for the models' conversion."""
    node = nodes.get("models")
    if node is None or not isinstance(node.value, list) or not node.value:
        return False
    named = [isinstance(m, Mapping) and m.get("worker") is not None for m in node.value]
    return all(named) if every else any(named)


def _known_keys(top: Node, problems: list[SweepError]) -> dict[str, Node]:
    """The top-level keys the loader knows, by key; each unknown or missing key is a
    problem of its own (``mapping_keys`` stops at the first)."""
    if not isinstance(top.value, Mapping):
        raise top.type_error("a mapping")
    nodes: dict[str, Node] = {}
    listed = False  # the known keys, once: not again on every unknown key's line
    for key_node, value_node in top.entries():
        if key_node.value in KEYS:
            nodes[key_node.value] = value_node
        else:
            problem = unknown_key(top, key_node, list(KEYS), listed_above=listed)
            listed = listed or "known keys: " in str(problem)
            problems.append(problem)
    for key in REQUIRED_KEYS:
        if key not in nodes and not _misspelt(key, top):
            problems.append(top.error(f"missing required key '{key}'"))
    return nodes


def _misspelt(key: str, top: Node) -> bool:
    """A required key that an unknown key already stands for (``modles:``): its "did you
    mean" says it, a "missing" line beside it would say it twice."""
    import difflib

    unknown = [str(k) for k in top.value if k not in KEYS]
    return bool(difflib.get_close_matches(key, unknown, n=1))


def _all_of(problems: list[SweepError]) -> SweepError:
    """One error whose lines are every problem, in file order, at most
    ``MAX_REPORTED_ERRORS`` of them and a count of the rest."""
    found = dict.fromkeys(line for problem in problems for line in problem.lines())
    lines = sorted(found, key=_position_key)  # stable: found order within a place
    shown = lines[:MAX_REPORTED_ERRORS]
    if len(lines) > len(shown):
        shown.append(f"... and {len(lines) - len(shown)} more problems in the sweep file")
    return SweepError(*shown)


def _position_key(line: str) -> tuple[int, int]:
    """``FILE:LINE:COL: ...`` sorted by line and column; an unlocated line goes first."""
    match = _LOCATION.match(line)
    return (int(match[1]), int(match[2])) if match else (0, 0)


_LOCATION = re.compile(r".*?:(\d+):(\d+): ")
