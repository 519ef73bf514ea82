"""The commands on a running batch: ``view`` (its live page, with controls) and
``steer`` (one request from the shell that steers a running sweep); docs/view.md."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # imported when a command runs, so that --help stays fast
    from batch.errors import ExitStatus


@click.command()
@click.argument(
    "batch_dirs",
    nargs=-1,
    required=True,
    metavar="BATCH_DIR|SWEEP...",
    type=click.Path(path_type=Path),
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on (0: a free one).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; anything but loopback lets other machines in, with the token.",
)
@click.option("--read-only", is_flag=True, help="Serve no controls: the page only watches.")
# batch SWEEP --view: the view ends when its driver does, however that ends.
@click.option("--beside", type=int, default=None, hidden=True)
@click.option("--secrets-stdin", is_flag=True, hidden=True)
def view(
    batch_dirs: tuple[Path, ...],
    port: int,
    host: str,
    read_only: bool,
    beside: int | None,
    secrets_stdin: bool,
) -> ExitStatus:
    """Serve a live page of BATCH_DIR (several: side by side) with its controls. A sweep
    file instead: its newest batch dir, and the sweep's secrets are redacted from what the
    page shows. The first line printed is the URL, with the token only its holder gets in
    with (docs/view.md)."""
    from batch.commands.view import view_main

    return view_main(
        batch_dirs,
        host=host,
        port=port,
        read_only=read_only,
        out=sys.stdout,
        beside=beside,
        secrets_stdin=secrets_stdin,
    )


def _steer(batch_dir: Path, words: tuple[str, ...]) -> ExitStatus:
    """Steer the driver running BATCH_DIR: pause | continue | stop | skip MODEL |
    unskip MODEL | concurrency [MODEL] N. Waits until the driver has taken it (within a
    second) and prints what it said (docs/view.md, "Steering")."""
    from batch.commands.steer import control_main

    return control_main(batch_dir, words, out=sys.stdout)


def _steer_command(name: str, *, hidden: bool = False) -> click.Command:
    command = click.command(name, context_settings={"ignore_unknown_options": True}, hidden=hidden)
    argument = click.argument("batch_dir", type=click.Path(path_type=Path))
    words = click.argument("words", nargs=-1, required=True, metavar="ACTION [ARGS]")
    return command(argument(words(_steer)))


steer = _steer_command("steer")
#: The command's name before it was ``steer``: scripts that say ``batch control`` still work.
control = _steer_command("control", hidden=True)
