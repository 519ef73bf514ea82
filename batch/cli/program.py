"""How the ``batch`` program ends, and how it was run: what differs between the program
(:func:`batch.cli.entry`) and the same commands inside another program (a test's click
runner).

Run as the program, the commands of :data:`ENDS_AT_ONCE` end the process themselves once
their status is known (:func:`exit_at_once`), and the hints a run prints repeat the
program as the user typed it (:func:`invoked`).
"""

from __future__ import annotations

import os
import sys

#: True when the commands run as the program (:func:`become_the_program`), not inside
#: another.
_PROGRAM = False
#: The read-only commands, and ``run``, whose records, summary, events and lock are all
#: written and closed when it returns. (``check`` exits as usual.)
ENDS_AT_ONCE = frozenset({"run", "plan", "status", "stats", "report"})
#: What a command keeps alive until its process ends at once (a plan's jobs): freeing it
#: as the command returns would cost what ending at once saves.
KEPT: list[object] = []


def become_the_program() -> None:
    """From now on the commands run as the program (:func:`batch.cli.entry`)."""
    global _PROGRAM
    _PROGRAM = True


def exit_at_once(status: int) -> None:
    """End the process with ``status`` now, if it is the program's and its output is out.

    What a normal exit would do next is free every object one by one (a plan of 100,000
    jobs, kept for this: a noticeable share of the command's time; bench/scale.py) and run
    atexit handlers, of which the read-only
    commands and a local run register only ``logging``'s, with no handler to flush. When
    flushing fails (a closed pipe), it returns, and the normal exit reports it as before.
    """
    if not _PROGRAM:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(status)


def invoked() -> tuple[str, ...]:
    """How the user ran the program, repeated in the hints they paste; ``batch`` inside
    another program (a test's click runner)."""
    if not _PROGRAM:
        return ("batch",)
    import shutil

    from batch.display.next_steps import invoked_program

    def found_by_name(path: str) -> bool:
        found = shutil.which(os.path.basename(path))
        try:
            return found is not None and os.path.samefile(found, path)
        except OSError:
            return False

    return invoked_program(sys.argv, sys.orig_argv, found_by_name)
