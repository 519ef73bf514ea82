"""Warm workers (issue 32, docs/worker.md): programs started once per slot, each serving
many jobs, one request at a time (or ``concurrency`` at once), with a record per job.

:class:`WorkerPool` is what the local executor hands every attempt whose model has a
``worker``: :meth:`WorkerPool.serve` takes an idle worker (or starts one), writes the
request on its stdin, and waits for its answer, the job's timeout, or the worker's end.
What it returns is what running a command returns (``batch.attempt.runner`` classifies
and records it the same way):

- an answer: its outcome by the rules of a ``result.json`` (``stop_reason: answer``);
- no answer within the job's timeout: the worker's process group is stopped (TERM,
  ``kill_grace``, KILL), the job is timed out, the next job gets a fresh worker;
- the worker ended before answering: ``error`` / ``infra_failure``, its last line of
  stderr as the reason; an answer with an id no request has: the same, with a warning;
- the user's abort killed it (``ProcessRegistry.kill_all``): None, no record.

A worker is spawned and stopped as a job is (``batch.processes.spawn``: its own session,
a job token, tracked in the registry, so the watchdog and the next driver stop it should the
driver die). What it writes to stderr, and lines of stdout that are not answers, go to the
``output.log`` of the one request it is serving, else to ``batch-logs/workers.log``. The
protocol's decisions (what a line is, what an answer means) are
``batch.attempt.worker_protocol``.

One idea, past ~450 lines: the pool and its workers' lives (start, serve, time out, die,
retire) share one state, the workers by key and their pending requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from batch.attempt.classify import Classification, last_line
from batch.attempt.run_command import AttemptContext, Served, with_said
from batch.attempt.worker_protocol import (
    MAX_ANSWER_BYTES,
    Answer,
    WrongId,
    answer_usage,
    answer_verdict,
    died_verdict,
    read_stdout_line,
    request_line,
    unanswered_verdict,
    wrong_id_shown,
    wrong_id_verdict,
)
from batch.layout import LOGS_DIR, WORKERS_LOG
from batch.processes.registry import ProcessRegistry
from batch.processes.spawn import JobProcess, SpawnError, spawn_tracked, terminate_group
from batch.processes.watchdog import signal_group
from batch.sweep.features.worker import WorkerSpec
from batch.sweep.load import Sweep
from batch.sweep.placeholders import expand_command
from batch.sweep.secrets import KeptEnd, redactor
from run_support.safe_files import UnsafeFileError, append_text, open_append_fd
from run_support.usage import NOTHING_REPORTED

__all__ = ["Served", "WorkerPool"]

#: What serving one request gives the runner: (verdict, return code, usage), or None when
#: the user's abort killed the worker serving it.
#: After a worker exits, how long its stdout may stay open (a child holding it) before the
#: requests it did not answer are given up.
EOF_WAIT = 1.0
#: Of a worker's stderr, its last this many bytes are kept: a dead worker's reason is
#: their last line.
STDERR_TAIL = 4096


@attrs.define(eq=False)
class _Ended:
    """The worker ended (or was stopped) before answering."""

    returncode: int | None
    killed: bool
    #: Why the driver stopped it, when it did (another request's timeout, a wrong id).
    why: str | None
    said: str | None


@attrs.frozen
class _TimedOut:
    """No answer within the job's timeout: the worker was stopped (its status)."""

    returncode: int | None


#: What became of one request.
_Got = Answer | Classification | _Ended | _TimedOut


class _Log:
    """A job's ``output.log``, opened for appending only once something is written to it:
    a worker that says nothing costs its jobs no open (the run dir made it already)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def fd(self) -> int:
        if self._fd is None:
            self._fd = open_append_fd(self.path)
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@attrs.define(eq=False)
class _Request:
    id: str
    log: _Log
    done: asyncio.Future[Answer | Classification | _Ended]


class _Output(asyncio.Protocol):
    """A worker's stdout or stderr, as chunks handed to ``on_data``; ``closed`` at EOF."""

    def __init__(self, on_data: Callable[[bytes], None]) -> None:
        self.on_data = on_data
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class _Worker:
    """One worker process and the requests it has in flight; ``ready`` once it runs."""

    def __init__(self, pool: WorkerPool, key: _Key) -> None:
        self.pool, self.key = pool, key
        self.process: JobProcess | None = None
        self.pid = 0
        self.pending: dict[str, _Request] = {}
        #: The pieces of a stdout line not yet ended, and their length: kept as pieces so
        #: that a long line is joined once, not copied again with every read.
        self.partial: list[bytes] = []
        self.partial_size = 0
        #: Its stderr's last :data:`STDERR_TAIL` bytes, with the margin that redacts them.
        self.last_stderr = KeptEnd(STDERR_TAIL, pool.redact)
        self.stopping: str | None = None
        self.dead = False
        self.stdin: asyncio.WriteTransport | None = None
        self.stdout: _Output | None = None
        self.stderr: _Output | None = None
        self.watch: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[None] | None = None

    async def launch(self, log: _Log) -> None:
        """Spawn it (a failed start's reason into ``log``) and connect its pipes."""
        pool = self.pool
        argv = expand_command(self.key.spec.command, {"batch_dir": pool.batch_dir_text}, {})
        try:
            process = await spawn_tracked(
                argv,
                cwd=pool.sweep.path.parent,
                env=pool.worker_env(self.key.model),
                fd=log.fd(),
                registry=pool.registry,
                model=self.key.model or "",
                pipes=True,
            )
        except BaseException:
            self.dead = True
            pool.forget(self)
            raise
        self.process, self.pid = process, process.pid
        loop = asyncio.get_running_loop()
        stdin, stdout, stderr = process.pipes
        self.stdin, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, stdin)
        _, self.stdout = await loop.connect_read_pipe(lambda: _Output(self._on_stdout), stdout)
        _, self.stderr = await loop.connect_read_pipe(lambda: _Output(self._on_stderr), stderr)
        self.watch = asyncio.create_task(self._watch())

    @property
    def free(self) -> bool:
        return (
            not self.dead
            and self.stopping is None
            and len(self.pending) < self.key.spec.concurrency
        )

    # --- output ---------------------------------------------------------------------------

    def _log_fd(self) -> int:
        """Where output goes now: the one request in flight's log, else the workers' log."""
        if len(self.pending) == 1:
            return next(iter(self.pending.values())).log.fd()
        return self.pool.shared_log()

    def _emit(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # a job that removed its own log loses its output
            os.write(self._log_fd(), data)

    def _on_stderr(self, data: bytes) -> None:
        self._emit(data)
        self.last_stderr.add(data)

    def _on_stdout(self, data: bytes) -> None:
        # One split per read, not one per line: a read of 8 MiB of empty lines is split
        # once (re-splitting the rest after each line copied it line after line).
        *ended, rest = data.split(b"\n")
        if ended:
            ended[0] = b"".join([*self.partial, ended[0]])
            self.partial, self.partial_size = [], 0
            # Blank lines are dropped in C: a flood of them costs no call each.
            for line in filter(bytes.strip, ended):
                self._on_line(line)
        if rest:
            self.partial.append(rest)
            self.partial_size += len(rest)
        if self.partial_size > MAX_ANSWER_BYTES:
            # A line longer than any answer may be: logged from its start, never kept whole.
            self._on_line(b"".join(self.partial))
            self.partial, self.partial_size = [], 0

    def _on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        read = read_stdout_line(line, self.pending)
        if isinstance(read, Answer):
            request = self.pending[read.id]
            if not request.done.done():
                request.done.set_result(read)
        elif isinstance(read, WrongId):
            # Its other answers cannot be matched to requests any more: every request in
            # flight is failed with it, and the worker is replaced.
            verdict = wrong_id_verdict(read, list(self.pending), self.pool.redact)
            for request in self.pending.values():
                if not request.done.done():
                    request.done.set_result(verdict)
            self.retire(f"it answered request id {wrong_id_shown(read, self.pool.redact)}")
        else:
            note = f"batch: worker stdout, not an answer: {read.text}\n"
            self._emit(note.encode(errors="replace"))

    def said(self) -> str | None:
        """The last line of its stderr, redacted (a secret the kept end cuts too)."""
        return last_line(self.last_stderr.text())

    # --- its end ----------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Wait for the worker to end; then fail the requests it did not answer."""
        assert self.process is not None
        returncode = await self.process.wait()
        registry = self.pool.registry
        if signal_group(self.pid, 0):  # the worker is gone but something it started is not
            await terminate_group(self.pid, self.pool.sweep.kill_grace)
        for output in (self.stdout, self.stderr):
            if output is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(EOF_WAIT):
                        await output.closed
        self.dead = True
        registry.discard(self.pid)
        self.pool.forget(self)
        ended = _Ended(returncode, registry.was_killed(self.pid), self.stopping, self.said())
        for request in self.pending.values():
            if not request.done.done():
                request.done.set_result(ended)
        if self.stdin is not None:
            self.stdin.close()

    def retire(self, why: str) -> None:
        """Stop this worker (TERM, grace, KILL to its group) in the background."""
        if self.stopping is None:
            self.stopping = why
            self.pool.track(asyncio.ensure_future(self.stop()))

    async def stop(self) -> None:
        """Stop the worker's group and wait until its end has been seen."""
        if self.process is None:
            return
        await terminate_group(self.pid, self.pool.sweep.kill_grace, leader=self.process)
        if self.watch is not None:
            await asyncio.shield(self.watch)

    async def finish(self, grace: float) -> None:
        """End of input: the worker exits by itself within ``grace``, or is stopped."""
        if self.ready is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.ready)
        if self.stdin is not None:
            self.stdin.close()
        if self.watch is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await asyncio.shield(self.watch)
                return
        self.stopping = self.stopping or "the sweep ended"
        await self.stop()


@attrs.frozen
class _Key:
    """Workers are shared by the jobs of one spec (and one model, when it is the model's)."""

    spec: WorkerSpec
    model: str | None


class WorkerPool:
    """The warm workers of one driver: started on demand, at most ``slots`` of them."""

    def __init__(
        self,
        sweep: Sweep,
        registry: ProcessRegistry,
        batch_dir: Path,
        slots: int,
        secrets: frozenset[str] = frozenset(),
    ) -> None:
        self.sweep, self.registry, self.batch_dir, self.slots = sweep, registry, batch_dir, slots
        #: What a worker's stderr is redacted with before its last line is a reason.
        self.redact = redactor(secrets)
        self._workers: list[_Worker] = []
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Future[None]] = set()
        self._shared_log: int | None = None
        self._env: dict[str | None, dict[str, str]] = {}
        self.batch_dir_text = os.path.abspath(batch_dir)

    # --- serving a request ---------------------------------------------------------------------

    async def serve(self, attempt: AttemptContext, spec: WorkerSpec) -> Served:
        """Serve ``attempt`` on a worker of ``spec`` (see the module docstring)."""
        own = attempt.sweep.model(attempt.job.model).worker is not None
        key = _Key(spec, attempt.job.model if own else None)
        log = _Log(attempt.log_path)
        try:
            got = await self._request(key, attempt, log)
            if isinstance(got, _Ended) and got.returncode == 0 and got.why is None:
                # It exited by itself, as a worker may between requests: the request may
                # never have been read. A fresh worker gets it, once.
                got = await self._request(key, attempt, log)
            return self._outcome(attempt, got)
        finally:
            log.close()

    def _worker(self, key: _Key, log: _Log) -> _Worker:
        """A worker of ``key`` with room for one more request, started if need be."""
        for worker in self._workers:
            if worker.key == key and worker.free:
                return worker
        live = [w for w in self._workers if w.stopping is None and not w.dead]
        if len(live) >= self.slots:  # a slot's worker of another kind, idle, makes room
            idle = next((w for w in live if not w.pending and w.key != key), None)
            if idle is not None:
                idle.stopping = "its slot went to another worker"
                self.track(asyncio.ensure_future(idle.finish(self.sweep.kill_grace)))
        worker = _Worker(self, key)
        # Listed before it runs: the next job finds it and waits for it, not for one more.
        self._workers.append(worker)
        worker.ready = asyncio.ensure_future(worker.launch(log))
        return worker

    async def _request(self, key: _Key, attempt: AttemptContext, log: _Log) -> _Got:
        job = attempt.job
        worker = self._worker(key, log)
        ident = str(next(self._ids))
        request = _Request(ident, log, asyncio.get_running_loop().create_future())
        worker.pending[ident] = request
        try:
            async with asyncio.timeout(job.timeout):
                assert worker.ready is not None
                try:
                    await asyncio.shield(worker.ready)
                except SpawnError as exc:
                    return unanswered_verdict(start_error=str(exc))
                except UnsafeFileError as exc:
                    return unanswered_verdict(
                        start_error=f"cannot write output.log: {exc.strerror}"
                    )
                assert worker.stdin is not None
                worker.stdin.write(
                    request_line(
                        ident,
                        case=job.case,
                        model=job.model,
                        repeat=job.repeat,
                        attempt=attempt.number,
                        run_dir=str(attempt.values["run_dir"]),
                        params=job.params,
                        env=attempt.env,
                    )
                )
                return await asyncio.shield(request.done)
        except TimeoutError:
            del worker.pending[ident]  # its output from now on is not this job's
            worker.stopping = worker.stopping or f"another request ({job.case}) timed out"
            await worker.stop()
            if self.registry.was_killed(worker.pid):
                return _Ended(None, killed=True, why=None, said=None)
            return _TimedOut(None if worker.process is None else worker.process.returncode)
        except asyncio.CancelledError:
            worker.pending.pop(ident, None)
            worker.stopping = worker.stopping or "its request was cancelled"
            await worker.stop()
            raise
        finally:
            worker.pending.pop(ident, None)

    def _outcome(self, attempt: AttemptContext, got: _Got) -> Served:
        if isinstance(got, Answer):
            verdict = answer_verdict(got, attempt.sweep.non_model_categories, attempt.redact)
            if "classification_error" in verdict.result:
                _warn(attempt, verdict.reason)
            return self._said(verdict, attempt), None, answer_usage(got)
        if isinstance(got, Classification):  # a wrong id, or a start that failed
            if "classification_error" in got.result:
                _warn(attempt, got.reason)
            return self._said(got, attempt), None, NOTHING_REPORTED
        if isinstance(got, _TimedOut):
            verdict = unanswered_verdict(timeout=attempt.job.timeout)
            return self._said(verdict, attempt), got.returncode, NOTHING_REPORTED
        if got.killed:
            return None
        verdict = attrs.evolve(died_verdict(got.returncode, why=_stopped(got.why)), said=got.said)
        return self._said(verdict, attempt), got.returncode, NOTHING_REPORTED

    @staticmethod
    def _said(verdict: Classification, attempt: AttemptContext) -> Classification:
        if verdict.outcome == "passed":
            return verdict
        return with_said(verdict, attempt.log_path, 0, attempt.redact)

    # --- the workers ----------------------------------------------------------------------------

    def worker_env(self, model: str | None) -> Mapping[str, str]:
        """The driver's environment, the sweep's ``env`` and, for a model's own worker, the
        model's: a job's own values come with each request."""
        env = self._env.get(model)
        if env is None:
            env = {**os.environ, **self.sweep.env}
            if model is not None:
                env.update(self.sweep.model(model).env)
            env["BATCH_DIR"] = self.batch_dir_text
            self._env[model] = env
        return env

    def forget(self, worker: _Worker) -> None:
        with contextlib.suppress(ValueError):
            self._workers.remove(worker)

    def track(self, task: asyncio.Future[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def shared_log(self) -> int:
        """``batch-logs/workers.log``, opened on first use."""
        if self._shared_log is None:
            path = self.batch_dir / LOGS_DIR / WORKERS_LOG
            path.parent.mkdir(parents=True, exist_ok=True)
            self._shared_log = open_append_fd(path)
        return self._shared_log

    async def close(self, grace: float) -> None:
        """End of input for every worker: each exits by itself within ``grace``, or is
        stopped. Called once no request is in flight (the sweep is over)."""
        await asyncio.gather(*(w.finish(grace) for w in list(self._workers)), *self._tasks)
        if self._shared_log is not None:
            os.close(self._shared_log)
            self._shared_log = None


def _warn(attempt: AttemptContext, message: str) -> None:
    with contextlib.suppress(OSError):
        append_text(attempt.log_path, f"batch: warning: {message}\n")


def _stopped(why: str | None) -> str | None:
    return None if why is None else f"the worker was stopped before answering: {why}"
