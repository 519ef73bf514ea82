"""``batch view BATCH_DIR [BATCH_DIR...]``: serve a live page of the batches (docs/view.md).

Binds 127.0.0.1 unless told otherwise, prints the URL with its token as the first line of
output, and serves until Ctrl-C. It only reads the batch dirs (and leaves control requests
in them unless ``--read-only``), so stopping or killing it never touches a sweep.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from batch.errors import ExitStatus, UsageError
from batch.layout import SNAPSHOT
from batch.plan.batch_dir import not_a_batch_dir


def snapshot_secrets(batch_dir: Path) -> set[str]:
    """The literal secret values of a batch's sweep snapshot (a key named like a secret)."""
    from batch.sweep.secrets import literal_secrets
    from batch.sweep.snapshot import read_snapshot

    try:
        return literal_secrets(read_snapshot((batch_dir / SNAPSHOT).read_text(encoding="utf-8")))
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
) -> ExitStatus:
    """Serve until Ctrl-C, or (``beside``, as ``batch SWEEP --view`` starts it) until the
    driver with that pid is gone, however it ended."""
    for batch_dir in batch_dirs:
        problem = not_a_batch_dir(batch_dir)
        if problem:
            raise UsageError(problem)
    import uvicorn

    from batch.view.server import allowed_hosts, environ_secrets, make_app, new_token

    secrets = set(environ_secrets())
    for batch_dir in batch_dirs:
        secrets |= snapshot_secrets(batch_dir)
    server: uvicorn.Server | None = None

    def tick() -> None:
        if beside is not None and server is not None and not _alive(beside):
            server.should_exit = True

    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    token = new_token()
    app = make_app(
        [Path(d) for d in batch_dirs],
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
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
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
