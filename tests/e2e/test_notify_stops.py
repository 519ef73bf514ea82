"""A notifier is heard however the batch stops, and never holds it (docs/notify.md).

The moments a person asleep needs to hear of — a second Ctrl-C, a ``halt now``, a deadline
that stops running jobs — are the ones where the driver kills jobs. The ``halt`` and
``end`` notifiers are not jobs: they run after the jobs are stopped, to their end or their
own timeout. And a notifier that exits at once but leaves a daemon ignoring SIGTERM holds
the driver's exit no longer than a second, whatever the sweep's ``kill_grace``.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import TYPE_CHECKING, Any

from helpers.fake_jobs import is_gone, read_pid, wait_until

if TYPE_CHECKING:
    from conftest import BatchCli

#: Takes a while (as a webhook does), then records the event it was given in argv[1]; with
#: argv[2], first leaves a daemon in a session of its own that ignores SIGTERM (its pid in
#: argv[2]) and exits once the daemon stands.
NOTIFIER = """
import json, os, signal, sys, time
event = json.loads(sys.stdin.read())
time.sleep(0.3)
if len(sys.argv) > 2:
    ready, told = os.pipe()
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(sys.argv[2] + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.rename(sys.argv[2] + ".tmp", sys.argv[2])
        os.write(told, b"x")
        time.sleep(120)
        os._exit(0)
    os.read(ready, 1)
with open(sys.argv[1], "a") as out:
    out.write(json.dumps(event) + "\\n")
"""


def notifier(cli: BatchCli, *daemon: str) -> list[str]:
    script = cli.dir / "notifier.py"
    script.write_text(NOTIFIER)
    return [sys.executable, str(script), str(cli.dir / "heard.jsonl"), *daemon]


def heard(cli: BatchCli) -> list[dict[str, Any]]:
    path = cli.dir / "heard.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def notify_log(cli: BatchCli) -> str:
    return (cli.only_batch_dir() / "batch-logs" / "notify.log").read_text()


def test_halt_now_is_heard_halt_and_end_after_the_jobs_are_stopped(batch_cli: BatchCli) -> None:
    cli = batch_cli
    cli.write_sweep(
        {"slow": ["sleep=30"], "broken": ["sleep=0.2", "exit=3"]},
        max_concurrent=2,
        retries=0,
        kill_grace="1s",
        notify={"commands": [notifier(cli)], "timeout": "20s"},
    )

    done = cli.run("sweep.yaml", "--no-progress", "--halt", "now,error=1")

    assert done.returncode == 4, done.stdout + done.stderr
    assert [event["event"] for event in heard(cli)] == ["halt", "end"]
    assert heard(cli)[0]["mode"] == "now"
    log = notify_log(cli)
    assert log.count("--- ok: exit code 0") == 2, log
    assert "killed by signal" not in log


def test_a_deadline_that_stops_running_jobs_is_heard(batch_cli: BatchCli) -> None:
    cli = batch_cli
    cli.write_sweep(
        {"slow": ["sleep=30"]},
        kill_grace="1s",
        notify={"commands": [notifier(cli)], "events": ["halt", "end"], "timeout": "20s"},
    )

    done = cli.run("sweep.yaml", "--no-progress", "--deadline", "1s")

    assert done.returncode == 4, done.stdout + done.stderr
    events = heard(cli)
    assert [event["event"] for event in events] == ["halt", "end"]
    assert (events[0]["rule"], events[0]["mode"]) == ("deadline", "now")
    assert "killed by signal" not in notify_log(cli)


def test_a_second_ctrl_c_is_heard_once_the_jobs_are_killed(batch_cli: BatchCli) -> None:
    cli = batch_cli
    cli.write_sweep(
        {"held": [f"touch={cli.dir}/started", "sleep=30"]},
        kill_grace="1s",
        notify={"commands": [notifier(cli)], "events": ["end"], "timeout": "20s"},
    )
    driver = cli.start("sweep.yaml", "--no-progress")
    cli.wait_for(cli.dir / "started")

    driver.signal(signal.SIGINT)
    assert wait_until(lambda: "Interrupt again" in driver.stdout, timeout=15)
    driver.signal(signal.SIGINT)

    assert driver.wait() == 130
    (end,) = heard(cli)
    assert (end["event"], end["state"], end["exit_status"]) == ("end", "interrupted", 130)
    assert "--- ok: exit code 0" in notify_log(cli)


def test_a_notifiers_daemon_does_not_hold_the_exit_for_the_kill_grace(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    pidfile = cli.dir / "daemon.pid"
    cli.write_sweep(
        ["c1"],
        # A job's daemon gets all of it: a notifier's must not (it held the exit an hour).
        kill_grace="1h",
        notify={"commands": [notifier(cli, str(pidfile))], "events": ["end"]},
    )

    # Ends long before the hour; a driver that waited the kill grace fails on the timeout.
    done = cli.run("sweep.yaml", "--no-progress", timeout=60)

    assert done.returncode == 0, done.stdout + done.stderr
    assert [event["event"] for event in heard(cli)] == ["end"]
    daemon = read_pid(pidfile)
    # Stopped before the driver exited (SIGKILL, after its SIGTERM was ignored).
    assert wait_until(lambda: is_gone(daemon), timeout=5)
