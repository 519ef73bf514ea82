"""``batch view BATCH_DIR [BATCH_DIR...]``: serve a live page of the batches (docs/view.md).

Binds 127.0.0.1 unless told otherwise, prints the URL with its token as the first line of
output, and serves until Ctrl-C. It only reads the batch dirs (and leaves control requests
in them unless ``--read-only``), so stopping or killing it never touches a sweep.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from batch.errors import ExitStatus, UsageError
from batch.layout import MAX_SNAPSHOT_BYTES, SNAPSHOT
from batch.plan.batch_dir import is_sweep_file, newest_of_sweep, not_a_batch_dir


def snapshot_secrets(batch_dir: Path) -> set[str]:
    """The literal secret values of a batch's sweep snapshot (a key named like a secret)."""
    from batch.sweep.secrets import literal_secrets
    from batch.sweep.snapshot import read_snapshot
    from run_support.safe_files import read_bytes

    try:
        text = read_bytes(batch_dir / SNAPSHOT, MAX_SNAPSHOT_BYTES).decode("utf-8")
        return literal_secrets(read_snapshot(text))
    except (OSError, ValueError, UnicodeDecodeError):
        return set()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def view_main(
    batch_dirs: Sequence[Path],
    *,
    host: str,
    port: int,
    read_only: bool,
    out: TextIO,
    beside: int | None = None,
    secrets_stdin: bool = False,
) -> ExitStatus:
    """Serve until Ctrl-C, or (``beside``, as ``batch SWEEP --view`` starts it) until the
    driver with that pid is gone, however it ended. A sweep file given for a batch dir is
    its newest batch dir, and its secrets are redacted too; ``secrets_stdin``: the driver
    that started the view writes its secrets, one JSON list, on the view's stdin."""
    from batch.view.server import environ_secrets

    secrets = set(environ_secrets())
    if secrets_stdin:
        secrets |= _read_secrets(sys.stdin)
    found = []
    for given in batch_dirs:
        batch_dir, known = _batch_dir_of(given)
        secrets |= known | snapshot_secrets(batch_dir)
        found.append(batch_dir)
    import uvicorn

    from batch.view.limits import server_config
    from batch.view.server import allowed_hosts, make_app, new_token

    server: uvicorn.Server | None = None

    def tick() -> None:
        if beside is not None and server is not None and not _alive(beside):
            server.should_exit = True

    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    token = new_token()
    app = make_app(
        found,
        token,
        allowed_hosts=allowed_hosts(host, bound_port),
        secrets_=frozenset(secrets),
        read_only=read_only,
        on_tick=tick,
    )
    shown = f"[{host}]" if ":" in host else host
    out.write(f"http://{shown}:{bound_port}/?token={token}\n")
    out.write(
        f"serving {len(batch_dirs)} batch dir(s){' read-only' if read_only else ''}; "
        "Ctrl-C stops the view (never the sweep)\n"
    )
    out.flush()
    # Bounded connections, idle time and request size (batch.view.limits).
    server = uvicorn.Server(server_config(app))
    try:
        asyncio.run(server.serve(sockets=[sock]))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return ExitStatus.OK


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _batch_dir_of(given: Path) -> tuple[Path, set[str]]:
    """The batch dir ``given`` names, and the secrets its sweep file holds (a sweep file:
    its newest batch dir, as ``batch status`` takes it)."""
    if is_sweep_file(given):
        from batch.sweep.load import load_sweep
        from batch.sweep.secrets import secret_values

        sweep = load_sweep(given)
        newest = newest_of_sweep(given, sweep.output, sweep.name)
        known = secret_values(sweep.env, *(model.env for model in sweep.models))
        return newest, known
    problem = not_a_batch_dir(given)
    if problem:
        raise UsageError(problem)
    return given, set()


def _read_secrets(stream: TextIO) -> set[str]:
    import json

    try:
        values = json.loads(stream.read(1 << 20))
    except ValueError:
        return set()
    return {v for v in values if isinstance(v, str)} if isinstance(values, list) else set()
