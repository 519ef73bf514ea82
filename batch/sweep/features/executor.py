"""The sweep's ``executor`` key: where jobs run (``local``, ``dask``, ``slurm``) and, for
Slurm, how its worker jobs are submitted (docs/scaling.md). Its converter,
:func:`executor_key`, is one row of the key table (``batch.sweep.keys.KEYS``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from batch.sweep.nodes import (
    Node,
    as_choice,
    as_integer,
    as_path,
    as_positive_duration,
    as_string,
    as_words,
    checked,
    mapping_keys,
)
from batch.sweep.sizes import parse_size

__all__ = ["EXECUTORS", "ExecutorSpec", "SlurmSpec", "executor_key"]

EXECUTORS = ("local", "dask", "slurm")


@attrs.frozen
class ExecutorSpec:
    """Where jobs run: ``local`` subprocesses, ``dask`` tasks, or ``slurm``: Dask tasks on
    worker jobs the driver submits to Slurm (docs/scaling.md)."""

    kind: str = "local"
    #: The Dask scheduler's address (``tcp://host:8786``); None: a local cluster.
    scheduler: str | None = None
    #: A running cluster's scheduler file (``dask scheduler --scheduler-file``), absolute.
    scheduler_file: str | None = None
    #: Slurm only (``batch.executors.slurm``): where and how the worker jobs are submitted.
    slurm: SlurmSpec | None = None


@attrs.frozen
class SlurmSpec:
    """The worker jobs of ``executor: {kind: slurm}``, each one Dask worker process."""

    queue: str | None = None
    account: str | None = None
    #: Slurm's own format (``HH:MM:SS``, ``D-HH:MM:SS``), as ``#SBATCH --time`` takes it.
    walltime: str = "01:00:00"
    #: CPUs of one worker job, and as many job slots (worker threads).
    cores: int = 1
    #: Bytes of memory of one worker job.
    memory: int = 2 * 2**30
    #: Extra ``#SBATCH`` lines, e.g. ``--gres=gpu:1`` or ``--constraint=skylake``.
    job_directives: tuple[str, ...] = ()
    #: Shell lines run before the worker starts (``source /shared/venv/bin/activate``).
    prologue: tuple[str, ...] = ()
    #: The Python of the worker jobs; None: the driver's own interpreter.
    python: str | None = None
    #: The address the scheduler listens on (the driver's host); None: dask-jobqueue's.
    host: str | None = None
    #: At most this many worker jobs at once; None: enough for ``max_concurrent`` slots.
    workers: int | None = None
    #: ``(minimum, maximum)`` worker jobs, scaled by Dask's adaptive; replaces ``workers``.
    adaptive: tuple[int, int] | None = None


_EXECUTOR_HINT = "local, dask, slurm or {kind: KIND, ...}"
_SLURM_KEYS = (
    "queue",
    "partition",
    "account",
    "walltime",
    "cores",
    "memory",
    "job_directives",
    "prologue",
    "python",
    "host",
    "workers",
    "adaptive",
)
_WALLTIME = re.compile(r"\d+-\d+(:\d{1,2}){0,2}|\d+(:\d{1,2}){1,2}")


def executor_key(node: Node) -> ExecutorSpec:
    """``local``, ``dask``, ``slurm``, or a mapping: ``kind`` and that kind's keys."""
    if isinstance(node.value, str):
        return ExecutorSpec(kind=as_choice(node, EXECUTORS))
    if not isinstance(node.value, Mapping):
        raise node.type_error(_EXECUTOR_HINT)
    keys = mapping_keys(
        node, ("kind", "scheduler", "scheduler_file", *_SLURM_KEYS), required=("kind",)
    )
    kind = as_choice(keys["kind"], EXECUTORS)
    for key, what, needs in (
        ("scheduler", "a scheduler", ("dask",)),
        ("scheduler_file", "a scheduler file", ("dask", "slurm")),
    ):
        if key in keys and kind not in needs:
            found = keys[key]
            raise found.error(f"{found.label}: {what} needs kind: {' or '.join(needs)}")
    slurm_keys = {key: value for key, value in keys.items() if key in _SLURM_KEYS}
    if slurm_keys and kind != "slurm":
        found = next(iter(slurm_keys.values()))
        raise found.error(f"{found.label}: needs kind: slurm")
    if "scheduler" in keys and "scheduler_file" in keys:
        found = keys["scheduler_file"]
        raise found.error(f"{found.label}: give scheduler or scheduler_file, not both")
    scheduler = scheduler_file = None
    if "scheduler" in keys:
        found = keys["scheduler"]
        scheduler = as_string(found)
        if not scheduler:
            raise found.error(f"{found.label}: empty address (leave it out for a local cluster)")
    if "scheduler_file" in keys:
        scheduler_file = str(as_path(keys["scheduler_file"]))
        if slurm_keys:  # they would be silently ignored: the cluster is someone else's
            found = next(iter(slurm_keys.values()))
            raise found.error(
                f"{found.label}: not used with scheduler_file (the cluster is already running)"
            )
    slurm = _slurm_spec(node, slurm_keys) if kind == "slurm" and not scheduler_file else None
    return ExecutorSpec(kind=kind, scheduler=scheduler, scheduler_file=scheduler_file, slurm=slurm)


def _slurm_spec(node: Node, keys: Mapping[str, Node]) -> SlurmSpec:
    if "queue" in keys and "partition" in keys:
        found = keys["partition"]
        raise found.error(f"{found.label}: give queue or partition, not both (the same thing)")
    if "workers" in keys and "adaptive" in keys:
        found = keys["adaptive"]
        raise found.error(f"{found.label}: give workers or adaptive, not both")
    fields: dict[str, Any] = {}
    queue = keys.get("queue") or keys.get("partition")
    if queue is not None:
        fields["queue"] = _nonempty(queue, "leave it out for Slurm's default partition")
    for key in ("account", "python", "host"):
        if key in keys:
            fields[key] = _nonempty(keys[key], "leave it out for the default")
    if "walltime" in keys:
        fields["walltime"] = _walltime(keys["walltime"])
    if "cores" in keys:
        fields["cores"] = as_integer(1)(keys["cores"])
    if "memory" in keys:
        fields["memory"] = checked(keys["memory"], parse_size)
        if fields["memory"] == 0:
            raise keys["memory"].error(f"{keys['memory'].label}: must be more than 0")
    for key in ("job_directives", "prologue"):
        if key in keys:
            fields[key] = as_words(keys[key], "line")
    if "workers" in keys:
        fields["workers"] = as_integer(1)(keys["workers"])
    if "adaptive" in keys:
        fields["adaptive"] = _adaptive(keys["adaptive"])
    return SlurmSpec(**fields)


def _nonempty(node: Node, hint: str) -> str:
    text = as_string(node)
    if not text:
        raise node.error(f"{node.label}: empty ({hint})")
    return text


def _walltime(node: Node) -> str:
    """Slurm's ``HH:MM:SS`` (``D-HH:MM:SS``, minutes alone...) as written, or a duration
    (``4h``, ``90m``) turned into it."""
    if isinstance(node.value, str) and _WALLTIME.fullmatch(node.value):
        return str(node.value)
    seconds = int(as_positive_duration(node, " (or write Slurm's HH:MM:SS)"))
    minutes, secs = divmod(max(seconds, 1), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def _adaptive(node: Node) -> tuple[int, int]:
    keys = mapping_keys(node, ("minimum", "maximum"), required=("maximum",))
    maximum = as_integer(1)(keys["maximum"])
    minimum = as_integer(0)(keys["minimum"]) if "minimum" in keys else 0
    if minimum > maximum:
        found = keys["minimum"]
        raise found.error(f"{found.label}: more than maximum ({maximum})")
    return minimum, maximum


#: ``executor``: its schema.
EXECUTOR_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"enum": ["local", "dask", "slurm"]},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["kind"],
            "properties": {
                "kind": {
                    "enum": ["local", "dask", "slurm"],
                    "description": "local, dask or slurm",
                },
                "scheduler": {
                    "type": "string",
                    "description": ("dask: the scheduler's address, e.g. tcp://10.0.0.5:8786"),
                },
                "scheduler_file": {
                    "type": "string",
                    "description": ("dask or slurm: a scheduler file of a cluster already running"),
                },
                "queue": {
                    "type": "string",
                    "description": "slurm: the partition",
                },
                "partition": {
                    "type": "string",
                    "description": "slurm: the partition (same as queue)",
                },
                "account": {
                    "type": "string",
                    "description": "slurm: the account",
                },
                "walltime": {
                    "anyOf": [
                        {"$ref": "#/$defs/duration"},
                        {"type": "string"},
                    ],
                    "description": ("slurm: a worker job's time limit (4h or 04:00:00)"),
                },
                "cores": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "slurm: cores per worker job",
                },
                "memory": {
                    "type": "string",
                    "description": "slurm: memory per worker job (16GB)",
                },
                "job_directives": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "slurm: extra #SBATCH lines",
                },
                "prologue": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "slurm: shell lines run before the worker starts",
                },
                "python": {
                    "type": "string",
                    "description": "slurm: the python the worker jobs run",
                },
                "host": {
                    "type": "string",
                    "description": "slurm: the driver's address the nodes connect to",
                },
                "workers": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "slurm: how many worker jobs",
                },
                "adaptive": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["maximum"],
                    "description": "slurm: scale the worker jobs between these",
                    "properties": {
                        "minimum": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "worker jobs at least",
                        },
                        "maximum": {
                            "type": "integer",
                            "minimum": 1,
                            "description": "worker jobs at most",
                        },
                    },
                },
            },
        },
    ],
}
