"""What a terminal shows after some output: enough of a VT100 for rich's live view.

rich redraws its ``Live`` view by moving the cursor up (``ESC[nA``) and erasing lines
(``ESC[2K``); lines printed above it scroll into the scrollback. :func:`screen` replays
output through those moves and returns every line the terminal holds, scrollback included,
so a test reads what a user would see rather than the escape codes that drew it. Colours,
cursor hiding and any other sequence are dropped. :class:`TerminalDriver` runs a process on
a pseudo-terminal of a given size and keeps what it wrote.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

_TOKEN = re.compile(r"(\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r|\n)")


def screen(output: str) -> list[str]:
    """The terminal's lines (scrollback, then the screen) after ``output``; trailing blank
    lines and spaces removed."""
    lines = [""]
    row = col = 0
    for token in _TOKEN.split(output):
        if not token:
            continue
        if token == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            col = 0
        elif token.startswith("\x1b["):
            arg, command = token[2:-1], token[-1]
            if command == "A":
                row = max(0, row - int(arg or 1))
            elif command == "K" and arg == "2":
                lines[row] = ""
        elif not token.startswith("\x1b"):
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class TerminalDriver:
    """A process whose stdout and stderr are a pseudo-terminal of ``columns`` by ``lines``,
    as ``batch`` run by hand in a terminal window; :meth:`screen` is what that window shows.
    """

    def __init__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], columns: int, lines: int
    ) -> None:
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        try:
            self.process = subprocess.Popen(
                argv,
                cwd=cwd,
                env={**env, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(lines)},
                stdin=subprocess.DEVNULL,
                stdout=follower,
                stderr=follower,
                start_new_session=True,
            )
        finally:
            os.close(follower)
        self.pid = self.process.pid
        self._leader = leader
        self._output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._leader, 65536)
            except OSError:  # EIO: every writer closed its end
                break
            if not chunk:
                break
            self._output += chunk
        os.close(self._leader)

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float = 30.0) -> int:
        status = self.process.wait(timeout)
        self._reader.join(timeout)
        return status

    def screen(self) -> list[str]:
        return screen(bytes(self._output).decode(errors="replace"))
