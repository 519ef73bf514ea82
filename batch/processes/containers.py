"""Removing the containers a job started: they run under the engine, in no process group
of the job, so stopping the job's group leaves them running.

Every attempt's environment names its label (``BATCH_CONTAINER_LABEL``, the
``{container_label}`` placeholder: ``batch.layout.container_label``). With the sweep's
``containers`` key the driver removes every container carrying it:

- :func:`remove_labelled` when the attempt ends, however it ended, before its record is
  written (``batch.attempt.container_removal``; on a Dask or Slurm worker, on the worker's host);
- :func:`remove_labels` in the watchdog of a driver that died, for the attempts it was
  told of (``batch.processes.watchdog``);
- :func:`remove_orphans` when the next driver of the batch starts: every container of the
  batch whose attempt has no live process on this host.

One removal is ``ENGINE ps`` (by label), ``ENGINE stop -t 0`` and ``ENGINE rm --force``
of what is still there, then ``ps`` again to count what is gone: the commands docker and
podman share (``-t``: docker's ``stop`` spells it ``--timeout`` now, podman ``--time``).
``stop -t 0`` first because ``rm --force`` waits the container's own stop
timeout (10 s) for a process that ignores SIGTERM, and podman's ``rm --force`` of several
ids removes none when one has already gone (a ``--rm`` container removing itself). Each
command runs in its own session and the whole removal within ``stop_timeout``: an engine
that hangs is killed, and the removal is a warning with the engine's own words, never a
hang. This module is imported only where a sweep sets ``containers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import psutil

from batch.errors import LocatedError
from batch.layout import CONTAINER_LABEL_KEY
from batch.printable import one_line
from batch.processes.groups import carried, signal_group
from batch.sweep.features.containers import ContainerSpec

__all__ = [
    "EngineCheck",
    "EngineUnavailable",
    "Removal",
    "alive_labels",
    "check_engine",
    "engine_check",
    "engine_env",
    "listed_labels",
    "orphan_ids",
    "remove_labelled",
    "remove_labels",
    "remove_orphans",
    "run_now",
]

#: The most of an engine's message a warning quotes.
MESSAGE_CHARS = 300
#: How long ``batch check`` gives the test container to start (an image may be pulled).
CHECK_START_TIMEOUT = 60.0
#: The label value's ``<batch id>/<run dir>``, after ``batch-ledger.run=``.
_PREFIX = CONTAINER_LABEL_KEY + "="
#: The variable that gives every job its label (``batch.attempt.runner.job_env``).
LABEL_VAR = "BATCH_CONTAINER_LABEL"


class EngineUnavailable(LocatedError):
    """The sweep's container engine is not on PATH (or its path is not a program): the
    message names the sweep file."""


@attrs.frozen
class Removal:
    """What a removal did: how many containers are gone, and why not all, if not."""

    removed: int = 0
    warning: str | None = None


class _OutOfTime(Exception):
    pass


class _Engine:
    """Runs the engine's commands, each in its own session, all before ``deadline``, with
    ``env`` (None: this process's environment)."""

    def __init__(
        self,
        spec: ContainerSpec,
        deadline: float,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.deadline = deadline
        self.cwd = cwd
        self.env = env

    async def run(self, *args: str, limit: float | None = None) -> tuple[int, str, str]:
        """(exit status, stdout, stderr) of ``ENGINE ARGS``; :class:`_OutOfTime` when it did
        not end before the deadline (or ``limit``), its group then killed. ``OSError``
        when it cannot be started."""
        remaining = self.deadline - time.monotonic() if limit is None else limit
        if remaining <= 0:
            raise _OutOfTime(args[0])
        process = await asyncio.create_subprocess_exec(
            self.spec.engine,
            *args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.cwd,
            env=self.env,
            # Its own group: an engine (or a wrapper script) that hangs is killed with
            # everything it started, and nothing holds its pipes open after.
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(remaining):
                out, err = await process.communicate()
        except BaseException as exc:
            signal_group(process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                await process.wait()
            if isinstance(exc, TimeoutError):
                raise _OutOfTime(args[0]) from None
            raise
        assert process.returncode is not None
        return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    async def ids(self, label_filter: str) -> list[str]:
        """The ids of every container (running or not) matching ``label=label_filter``."""
        code, out, err = await self.run(
            "ps", "--all", "--quiet", "--no-trunc", "--filter", f"label={label_filter}"
        )
        if code != 0:
            raise _Failed(f"{self.spec.engine} ps: {_said(err, code)}")
        return out.split()

    async def labels(self, ids: Sequence[str]) -> dict[str, str]:
        """Each id's ``batch-ledger.run`` label value (``inspect``: docker's ``ps`` formats
        labels as one string, podman's as a map; their ``inspect`` agree), of ``ids`` only
        (:func:`listed_labels`)."""
        if not ids:
            return {}
        _, out, _ = await self.run("inspect", "--type", "container", *ids)
        return listed_labels(out, ids)


class _Failed(Exception):
    pass


async def remove_labelled(
    spec: ContainerSpec, label: str, env: Mapping[str, str] | None = None
) -> Removal:
    """Remove every container carrying ``label`` (``batch-ledger.run=...``), within
    ``spec.stop_timeout``; the engine runs with ``env`` (the job's: the same engine the
    job's client talked to)."""
    return await _bounded(spec, env, lambda engine: _remove_by_filter(engine, label))


async def remove_labels(
    spec: ContainerSpec, labels: Collection[str], env: Mapping[str, str] | None = None
) -> Removal:
    """Remove every container carrying one of ``labels``: the watchdog's attempts."""
    wanted = {label.removeprefix(_PREFIX) for label in labels}
    return await _bounded(spec, env, lambda engine: _remove_chosen(engine, wanted.__contains__))


async def remove_orphans(
    spec: ContainerSpec,
    batch_id: str,
    alive: Collection[str] = (),
    env: Mapping[str, str] | None = None,
) -> Removal:
    """Remove every container of batch ``batch_id`` but those whose label is in ``alive``
    (an attempt with a live process on this host)."""
    return await _bounded(
        spec,
        env,
        lambda engine: _remove_chosen(engine, lambda value: _orphan(value, batch_id, alive)),
    )


def alive_labels() -> set[str]:
    """The labels in the environment of a live process on this host: attempts that still
    run (their own job's, or another invocation's on this host, a Dask worker's)."""
    item = LABEL_VAR.encode() + b"="
    me = os.getpid()
    return {label for pid in psutil.pids() if pid != me and (label := carried(pid, item))}


def listed_labels(inspected: str, listed: Collection[str]) -> dict[str, str]:
    """id → ``batch-ledger.run`` value of the containers in ``inspected`` (what ``ENGINE
    inspect`` printed: a JSON array of objects) that ``listed`` holds: the ids the engine
    listed under the label. Parsed as JSON, not as lines, so a label value holding a
    newline cannot speak for another container, and an id the engine did not list (an
    unlabelled container, named in such a value) is never one of them."""
    try:
        objects = json.loads(inspected)
    except ValueError:
        return {}
    wanted = set(listed)
    found: dict[str, str] = {}
    for item in objects if isinstance(objects, list) else ():
        if not isinstance(item, dict):
            continue
        cid, config = item.get("Id"), item.get("Config")
        labels = config.get("Labels") if isinstance(config, dict) else None
        value = labels.get(CONTAINER_LABEL_KEY) if isinstance(labels, dict) else None
        if isinstance(cid, str) and cid in wanted and isinstance(value, str):
            found[cid] = value
    return found


def orphan_ids(labels: Mapping[str, str], batch_id: str, alive: Collection[str]) -> list[str]:
    """The ids, of ``labels`` (id → ``batch-ledger.run`` value), that are batch
    ``batch_id``'s and whose attempt is not ``alive`` (full labels)."""
    return sorted(cid for cid, value in labels.items() if _orphan(value, batch_id, alive))


def _orphan(value: str, batch_id: str, alive: Collection[str]) -> bool:
    # The batch id is a directory name: it holds no "/", so the prefix is exact.
    return value.startswith(batch_id + "/") and _PREFIX + value not in alive


async def _bounded(
    spec: ContainerSpec,
    env: Mapping[str, str] | None,
    removal: Callable[[_Engine], Coroutine[Any, Any, Removal]],
) -> Removal:
    engine = _Engine(spec, time.monotonic() + spec.stop_timeout, env=env)
    try:
        return await removal(engine)
    except _OutOfTime as exc:
        return Removal(
            0,
            f"container cleanup: `{spec.engine} {exc}` gave no answer within "
            f"{spec.stop_timeout:g}s; killed it",
        )
    except _Failed as exc:
        return Removal(0, f"container cleanup: {exc}")
    except OSError as exc:
        return Removal(0, f"container cleanup: cannot run {spec.engine}: {exc.strerror or exc}")


async def _remove_by_filter(engine: _Engine, label: str) -> Removal:
    ids = await engine.ids(label)
    if not ids:
        return Removal()
    return await _remove_ids(engine, set(ids), lambda: engine.ids(label))


async def _remove_chosen(engine: _Engine, chosen: Callable[[str], bool]) -> Removal:
    labels = await engine.labels(await engine.ids(CONTAINER_LABEL_KEY))
    ids = {cid for cid, value in labels.items() if chosen(value)}
    if not ids:
        return Removal()
    return await _remove_ids(engine, ids, lambda: engine.ids(CONTAINER_LABEL_KEY))


async def _remove_ids(
    engine: _Engine, ids: set[str], listed: Callable[[], Coroutine[Any, Any, list[str]]]
) -> Removal:
    """Stop and remove ``ids``; ``listed()`` lists what is still there (a superset)."""
    code, _, err = await engine.run("stop", "-t", "0", *sorted(ids))
    said = None if code == 0 else _said(err, code)
    left = ids & set(await listed())
    if left:
        code, _, err = await engine.run("rm", "--force", *sorted(left))
        said = None if code == 0 else _said(err, code)
        left &= set(await listed())
    if not left:
        return Removal(len(ids))
    why = f": {said}" if said else ""
    return Removal(
        len(ids) - len(left),
        f"container cleanup: {len(left)} container(s) still there after "
        f"`{engine.spec.engine} rm --force`{why}",
    )


def _said(err: str, code: int) -> str:
    """The engine's last words on stderr, one line, or its exit status."""
    lines = [line for line in err.splitlines() if line.strip()]
    text = lines[-1].strip() if lines else f"exit status {code}"
    return one_line(text[:MESSAGE_CHARS])


# --- the engine itself -----------------------------------------------------------------------


def engine_env(sweep_env: Mapping[str, str]) -> dict[str, str]:
    """The environment the engine runs in outside an attempt (the watchdog, the next
    driver's start, ``batch check``): the driver's, with the sweep's ``env`` on top, as a
    job gets them (``DOCKER_HOST``, ``CONTAINERS_CONF``...)."""
    return {**os.environ, **sweep_env}


def check_engine(spec: ContainerSpec, sweep_path: os.PathLike[str] | str) -> None:
    """Raise :class:`EngineUnavailable` when ``spec.engine`` is no program here."""
    if shutil.which(spec.engine) is not None:
        return
    if os.sep in spec.engine:
        raise EngineUnavailable(
            f"{sweep_path}: containers: the engine {spec.engine} is not an executable file"
        )
    raise EngineUnavailable(
        f"{sweep_path}: containers: {spec.engine} is not on PATH (install it, or give its "
        "path: containers: {engine: /path/to/engine})"
    )


@attrs.frozen
class EngineCheck:
    """What ``batch check`` found: the engine's version line, and whether a container
    labelled as a job's would be could be started and removed (None: not tried)."""

    version: str | None
    container: bool | None
    detail: str

    @property
    def ok(self) -> bool:
        return self.version is not None and self.container is not False


async def engine_check(
    spec: ContainerSpec, label: str, cwd: str, env: Mapping[str, str] | None = None
) -> EngineCheck:
    """``ENGINE --version``, then, with ``spec.check_run``, ``ENGINE run --detach --label
    LABEL CHECK_RUN...`` and the removal of what carries ``label``, as after a job."""
    engine = _Engine(spec, time.monotonic() + spec.stop_timeout, cwd=cwd, env=env)
    try:
        code, out, err = await engine.run("--version")
    except _OutOfTime:
        return EngineCheck(None, None, f"`{spec.engine} --version` gave no answer")
    except OSError as exc:
        return EngineCheck(None, None, f"cannot run {spec.engine}: {exc.strerror or exc}")
    if code != 0:
        return EngineCheck(None, None, f"`{spec.engine} --version`: {_said(err, code)}")
    version = one_line(out.strip()[:MESSAGE_CHARS]) or spec.engine
    if not spec.check_run:
        return EngineCheck(version, None, "test container not tried (no containers.check_run)")
    started = None
    try:
        code, _, err = await engine.run(
            "run", "--detach", "--label", label, *spec.check_run, limit=CHECK_START_TIMEOUT
        )
        started = _said(err, code) if code != 0 else None
    except _OutOfTime:
        started = f"`{spec.engine} run` gave no answer within {CHECK_START_TIMEOUT:g}s"
    removal = await remove_labelled(spec, label, env)
    if started is not None:
        return EngineCheck(version, False, f"test container did not start: {started}")
    if removal.warning is not None or removal.removed != 1:
        said = removal.warning or f"{removal.removed} removed, not 1"
        return EngineCheck(version, False, f"test container started but not removed: {said}")
    return EngineCheck(version, True, f"test container {label} started and removed")


_T = TypeVar("_T")


def run_now(coro: Coroutine[Any, Any, _T]) -> _T:
    """``coro`` run to its end from code without an event loop (the watchdog, the next
    driver's start, ``batch check``)."""
    return asyncio.run(coro)
