"""Steering a running sweep: the requests ``batch steer`` and ``batch view`` leave for
the driver, as files in ``batch-logs/control/`` (docs/view.md, "Controls").

A request is one small JSON file, written atomically under a name that sorts by when it
was made; the driver takes each within a second, in name order, acts on it, says so, writes
a ``control`` event to ``events.jsonl`` and deletes the file. Files, not a socket: the
driver needs no listening port, a request survives the requester's exit, and whoever can
write the batch dir (the only one who could stop the sweep anyway) is whoever may steer it.

Pure but for :func:`write_request` and :func:`take_requests`, which touch only that dir,
and :func:`answer_after` and :func:`look_for_answer`, which read it and the events. Whoever
leaves a request waits for its answer in a loop of its own (``batch steer``'s, the
view's), each look decided by :func:`answer_state`.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import json
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from batch.event_segments import Mark, lines_after
from run_support.atomic import atomic_write_bytes
from run_support.names import LOGS_DIR
from run_support.safe_files import UnsafeFileError, open_dir, read_in

#: Under the batch dir's ``batch-logs/``.
CONTROL_DIR = "control"
#: What a request may ask; ``skip``/``unskip`` name a model, ``concurrency`` a number and
#: perhaps a model.
ACTIONS = ("pause", "continue", "stop", "skip", "unskip", "concurrency")
#: The largest concurrency a request may set (as the sweep's ``max_concurrent``).
MAX_CONCURRENCY = 100_000
#: A request file larger than this is not one (the driver reads no more of it).
MAX_REQUEST_BYTES = 4096
#: How long a requester waits for the driver to take its request (docs/view.md), and how
#: often it looks meanwhile.
ANSWER_TIMEOUT = 5.0
ANSWER_POLL = 0.05


class ControlError(ValueError):
    """A request that cannot be taken: its one-line reason, and the id of the request file
    it refuses (:func:`request_id`) when there is one."""

    def __init__(self, message: str, *, request: str | None = None) -> None:
        super().__init__(message)
        self.request = request


@attrs.frozen
class Control:
    """One request: what to do, to which model (``skip``, ``unskip``, ``concurrency``), the
    number (``concurrency``), and who asked (``batch steer``, recorded as ``batch control``;
    ``batch view``)."""

    action: str
    model: str | None = None
    number: int | None = None
    source: str = "batch control"
    #: The id of the request file it came in (:func:`request_id`), which the driver's
    #: answer names: a requester reads only the answer to its own request.
    request: str | None = attrs.field(default=None, eq=False)

    def describe(self) -> str:
        """``skip m/alpha``, ``concurrency m/alpha 2``, ``pause``."""
        parts = [self.action, self.model, None if self.number is None else str(self.number)]
        return " ".join(part for part in parts if part)


def parse_control(raw: Any) -> Control:
    """A request as JSON data, checked: :class:`ControlError` says what is wrong."""
    if not isinstance(raw, dict):
        raise ControlError("a control request is a JSON object")
    unknown = set(raw) - {"action", "model", "number", "source"}
    if unknown:
        raise ControlError(f"unknown key {sorted(unknown)[0]!r} in a control request")
    action, model, number = raw.get("action"), raw.get("model"), raw.get("number")
    source = raw.get("source", "batch control")
    if action not in ACTIONS:
        raise ControlError(f"unknown control {action!r}; one of: {', '.join(ACTIONS)}")
    if model is not None and (not isinstance(model, str) or not model or len(model) > 1000):
        raise ControlError("model: a model id (non-empty text)")
    if action in ("skip", "unskip") and model is None:
        raise ControlError(f"{action} needs a model")
    if action in ("pause", "continue", "stop") and (model is not None or number is not None):
        raise ControlError(f"{action} takes no model and no number")
    if action == "concurrency":
        if type(number) is not int or not 1 <= number <= MAX_CONCURRENCY:
            raise ControlError(f"concurrency: a whole number from 1 to {MAX_CONCURRENCY:,}")
    elif number is not None:
        raise ControlError(f"{action} takes no number")
    if not isinstance(source, str) or not source or len(source) > 100:
        raise ControlError("source: short text")
    return Control(action, model, number, source)


def control_dir(batch_dir: Path) -> Path:
    return Path(batch_dir) / LOGS_DIR / CONTROL_DIR


def request_id(path: Path | str) -> str:
    """The id of a request, its file's name without ``.json``: unique, and what the
    driver's ``control`` event for it carries as ``request``."""
    return os.path.basename(path).removesuffix(".json")


def write_request(batch_dir: Path, control: Control) -> Path:
    """Leave ``control`` for the driver of ``batch_dir``; the request file's path. Raises
    ``OSError`` where ``batch-logs/`` or its ``control/`` is not a real directory (a
    symlink to another one is not written through)."""
    directory = control_dir(batch_dir)
    logs = open_dir(directory.parent)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(CONTROL_DIR, dir_fd=logs)
    finally:
        os.close(logs)
    # Sorts by time; the random part keeps two requests of one nanosecond apart.
    name = f"{time.time_ns():020d}-{secrets.token_hex(4)}.json"
    data: dict[str, str | int] = {"action": control.action, "source": control.source}
    if control.model is not None:
        data["model"] = control.model
    if control.number is not None:
        data["number"] = control.number
    path = directory / name
    atomic_write_bytes(path, json.dumps(data).encode(), fsync=False, real_dirs=2)
    return path


def request_problem(exc: OSError) -> str:
    """What kept a request from being left (:func:`write_request` raised ``exc``)."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"


def take_requests(batch_dir: Path) -> list[Control | ControlError]:
    """The requests waiting, oldest first, each removed as it is read and carrying its
    :func:`request_id`; a file that is no request is removed too and comes back as its
    :class:`ControlError`. A directory named ``x.json`` is no request and is left alone: it
    stops none of the requests after it.

    The dir is opened once, without following a symlink in it or in ``batch-logs/``, and
    listed, read and emptied through that descriptor: a ``control/`` swapped for a symlink
    to another directory raises ``OSError`` (``safe_files.UnsafeFileError``) and nothing
    there is read or deleted."""
    try:
        dir_fd = open_dir(control_dir(batch_dir), real_dirs=2)
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        return _take_in(dir_fd)
    finally:
        os.close(dir_fd)


def _take_in(dir_fd: int) -> list[Control | ControlError]:
    with os.scandir(dir_fd) as entries:
        names = sorted(
            entry.name
            for entry in entries
            if entry.name.endswith(".json") and not entry.name.startswith(".")
        )
    taken: list[Control | ControlError] = []
    for name in names:
        ident = request_id(name)
        error: ControlError | None = None
        try:
            data = read_in(dir_fd, name, MAX_REQUEST_BYTES)
        except FileNotFoundError:
            continue  # gone already
        except UnsafeFileError as exc:  # a symlink, a FIFO, past the bound: never read
            why = f"larger than {MAX_REQUEST_BYTES} bytes" if exc.errno == errno.EFBIG else None
            data, error = b"", ControlError(f"{name}: {why or exc.strerror}", request=ident)
        except OSError as exc:
            data, error = b"", ControlError(f"{name}: {exc.strerror}", request=ident)
        try:
            os.unlink(name, dir_fd=dir_fd)  # the name only: a symlink's target stays
        except OSError:
            continue  # another reader took it, or a directory: not ours to remove
        if error is not None:
            taken.append(error)
        else:
            try:
                taken.append(attrs.evolve(parse_control(json.loads(data)), request=ident))
            except (ValueError, RecursionError) as exc:
                reason = exc if isinstance(exc, ControlError) else "not JSON"
                taken.append(ControlError(f"{name}: {reason}", request=ident))
    return taken


def answer_after(
    logs_dir: Path, start: Mark, control: Control, request: str | None = None
) -> dict[str, Any] | None:
    """The first ``control`` event after ``start`` (:func:`batch.event_segments.mark`, taken
    before the request was left) that answers ``control``, the request of id ``request``
    (:func:`request_id`), across a rotation.

    An answer names the request it answers (``request``); one that names another is not
    this one's, whatever it says (a refusal of a junk file, someone else's same request).
    An answer that names none (a driver from before ids) counts when it names this
    request's action and model.
    """
    for line in lines_after(logs_dir, start):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("event") != "control":
            continue
        named = event.get("request")
        if request is not None and named is not None:
            if named == request:
                return event
        elif event.get("action") == control.action and event.get("model") == control.model:
            return event
    return None


class Answer(enum.Enum):
    """Where a request left for the driver stands (:func:`answer_state`)."""

    TAKEN = "taken"
    REFUSED = "refused"
    WAITING = "waiting"
    TIMED_OUT = "timed out"


def answer_state(
    *, taken: bool, said: Mapping[str, Any] | None, now: float, deadline: float
) -> Answer:
    """Where a request stands: ``taken`` when its file is gone (the driver has read it),
    ``said`` the driver's ``control`` event that answers it (:func:`answer_after`), at
    ``now`` of a wait that ends at ``deadline``.

    An answer counts only once the file is gone: while it is there, a matching event is
    the driver's answer to someone else's same request. The driver writes its answer just
    after it takes the file, so a file gone without an answer is still waited for. An
    answer found at the deadline is still the answer.
    """
    if taken and said is not None:
        return Answer.REFUSED if said.get("outcome") == "refused" else Answer.TAKEN
    if now >= deadline:
        return Answer.TIMED_OUT
    return Answer.WAITING


def look_for_answer(
    request: Path, logs_dir: Path, start: Mark, control: Control, *, now: float, deadline: float
) -> tuple[Answer, dict[str, Any] | None]:
    """One look of a requester's wait: whether ``request`` (the file :func:`write_request`
    left) is gone, and if so the driver's answer in the events after ``start``; how the
    request stands (:func:`answer_state`) and that answer."""
    taken = not request.exists()
    said = answer_after(logs_dir, start, control, request_id(request)) if taken else None
    return answer_state(taken=taken, said=said, now=now, deadline=deadline), said
