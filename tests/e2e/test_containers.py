"""Containers a job starts never outlive it: real podman containers, the real ``batch``.

Each job is a shell script that runs ``podman run`` with its attempt's label
(``$BATCH_CONTAINER_LABEL``): the container runs under podman's conmon, in no process
group of the job. Whichever way the attempt ends — passed, timed out, a second Ctrl-C,
``halt now``, a SIGKILLed driver (then its watchdog, or, with the watchdog dead too, the
next ``--resume``) — no container of the batch is left. Each test's batch dirs, and so its
labels, begin with its own name (``helpers.podman_fixture``).
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
from helpers.fake_jobs import is_gone, wait_until

if TYPE_CHECKING:
    from conftest import BatchCli, Driver
    from helpers.podman_fixture import PodmanTest

pytest_plugins = ("helpers.podman_fixture",)

#: ``podman run`` as every job here writes it (``$ROOTFS`` and ``$MARK`` come from the
#: sweep's env).
RUN = 'podman run --label "$BATCH_CONTAINER_LABEL" --network none --rootfs "$ROOTFS" /bin/busybox'
#: The issue's shape: a container in the foreground of the job, which then waits on it.
#: The job says when its container is up (``$MARK/up``), so a test acts only then.
HOLD = (
    f"{RUN} sleep 300 & "
    'until podman ps -q --filter "label=$BATCH_CONTAINER_LABEL" | grep -q .; do sleep 0.1; done; '
    'touch "$MARK/up"; wait'
)


def write_sweep(cli: BatchCli, name: str, cases: dict[str, str], **keys: Any) -> Path:
    """A sweep whose case ``ID`` runs the shell script ``cases[ID]``."""
    sweep = {
        "name": name,
        "output": "runs",
        "cases": [{"id": case, "params": {"script": script}} for case, script in cases.items()],
        "models": ["m"],
        "command": ["sh", "-c", "{params.script}"],
        "containers": "podman",
        "kill_grace": "300ms",
        "max_concurrent": len(cases),
        **keys,
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep, indent=1))
    return path


def sweep_of(cli: BatchCli, podman: PodmanTest, cases: dict[str, str], **keys: Any) -> Path:
    """``write_sweep`` named for this test, with ``$ROOTFS`` and ``$MARK`` in its env."""
    env = {"ROOTFS": str(podman.local.rootfs), "MARK": str(cli.dir)}
    return write_sweep(cli, podman.name, cases, env=env, **keys)


def start_held(cli: BatchCli, podman: PodmanTest, sweep: Path) -> Driver:
    """Start ``batch SWEEP`` and return once its one job's container is up."""
    driver = cli.start(sweep)
    cli.wait_for(cli.dir / "up", timeout=30)
    assert len(podman.left()) == 1
    return driver


def events(batch_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    return [event for event in map(json.loads, lines) if event["event"] == kind]


def by_case(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {record["test_case"]: record for record in records}


def test_containers_of_timed_out_jobs_are_removed_and_the_record_counts_them(
    batch_cli: BatchCli, podman: PodmanTest
) -> None:
    cli = batch_cli
    sweep = sweep_of(
        cli,
        podman,
        {
            # Exits by itself and removes itself (--rm): nothing to remove, no warning.
            "passes": f"{RUN.replace('run ', 'run --rm ', 1)} true",
            # In the foreground until the timeout: the issue's `podman run ... sleep 300`.
            "one": f"exec {RUN.replace('run ', 'run --rm --cidfile $BATCH_RUN_DIR/c1 ', 1)} "
            "sleep 300",
            # Two containers, one detached: both carry the label, both go.
            "two": f"{RUN.replace('run ', 'run -d --cidfile $BATCH_RUN_DIR/c1 ', 1)} sleep 300 "
            f">/dev/null && exec {RUN.replace('run ', 'run --cidfile $BATCH_RUN_DIR/c2 ', 1)} "
            "sleep 300",
        },
        timeout="4s",
    )

    done = cli.run(sweep, timeout=90)

    assert done.returncode == 1, done.stdout + done.stderr
    batch_dir = cli.only_batch_dir()
    records = by_case(cli.records(batch_dir))
    assert {case: r["outcome"] for case, r in records.items()} == {
        "passes": "passed",
        "one": "error",
        "two": "error",
    }
    # Every container podman created for a job (its --cidfile) was removed, before the record.
    created = {
        case: len(list((batch_dir / r["run_dir"]).glob("c?"))) for case, r in records.items()
    }
    assert created == {"passes": 0, "one": 1, "two": 2}
    assert {case: r["containers_removed"] for case, r in records.items()} == created
    assert podman.left() == {}
    finished = {event["case"]: event["containers_removed"] for event in events(batch_dir, "finish")}
    assert finished == created
    assert "container cleanup" not in done.stdout + done.stderr


def test_a_second_ctrl_c_removes_the_containers_of_the_jobs_it_kills(
    batch_cli: BatchCli, podman: PodmanTest
) -> None:
    cli = batch_cli
    driver = start_held(cli, podman, sweep_of(cli, podman, {"held": HOLD}))

    driver.signal(signal.SIGINT)
    assert wait_until(lambda: "Interrupt again" in driver.stdout, 10), driver.stdout
    driver.signal(signal.SIGINT)

    assert driver.wait(60) == 130, driver.stdout + driver.stderr
    assert podman.left() == {}
    batch_dir = cli.only_batch_dir()
    assert cli.records(batch_dir) == []  # killed: no record, as before
    assert [event["containers_removed"] for event in events(batch_dir, "killed")] == [1]


def test_halt_now_removes_the_containers_of_the_jobs_it_stops(
    batch_cli: BatchCli, podman: PodmanTest
) -> None:
    cli = batch_cli
    fails_once_up = 'until [ -e "$MARK/up" ]; do sleep 0.05; done; exit 1'
    sweep = sweep_of(cli, podman, {"held": HOLD, "fails": fails_once_up}, halt="now,fail=1")

    done = cli.run(sweep, timeout=90)

    assert done.returncode == 4, done.stdout + done.stderr
    assert podman.left() == {}
    batch_dir = cli.only_batch_dir()
    assert [event["containers_removed"] for event in events(batch_dir, "killed")] == [1]
    assert [r["test_case"] for r in cli.records(batch_dir)] == ["fails"]


#: Held the first time; passes at once when run again (``--resume``).
HOLD_ONCE = f'[ -e "$MARK/up" ] && exit 0; {HOLD}'


def test_the_watchdog_removes_the_containers_of_a_sigkilled_drivers_jobs(
    batch_cli: BatchCli, podman: PodmanTest
) -> None:
    cli = batch_cli
    driver = start_held(cli, podman, sweep_of(cli, podman, {"held": HOLD_ONCE}))

    driver.signal(signal.SIGKILL)
    driver.wait()

    # The watchdog: the job's group (kill_grace 0.3 s), then the container.
    assert wait_until(lambda: podman.left() == {}, 30), podman.left()


def test_resume_removes_what_a_dead_driver_and_its_dead_watchdog_left(
    batch_cli: BatchCli, podman: PodmanTest
) -> None:
    cli = batch_cli
    sweep = sweep_of(cli, podman, {"held": HOLD_ONCE})
    driver = start_held(cli, podman, sweep)
    (watchdog,) = [
        child
        for child in psutil.Process(driver.pid).children()
        if "watchdog_main" in " ".join(child.cmdline())
    ]
    watchdog.kill()
    assert wait_until(lambda: is_gone(watchdog.pid), 5)
    driver.signal(signal.SIGKILL)
    driver.wait()
    left = podman.left()
    assert len(left) == 1  # nothing removed it: only the next driver can

    done = cli.run(sweep, "--resume", timeout=90)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "removed 1 leftover container(s) of a dead driver" in done.stdout
    assert podman.left() == {}
    assert [r["outcome"] for r in cli.records()] == ["passed"]


# --- an engine that hangs or fails ----------------------------------------------------------


def engine_script(cli: BatchCli, body: str) -> Path:
    """An executable ``engine`` in the test dir that records its pid, then runs ``body``."""
    path = cli.dir / "engine"
    path.write_text(f'#!/bin/sh\necho $$ >> "{cli.dir}/engine-pids"\n{body}\n')
    path.chmod(0o755)
    return path


def test_an_engine_that_hangs_is_killed_at_the_stop_timeout_and_is_a_warning(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    engine_script(cli, "exec sleep 300")
    sweep = write_sweep(
        cli, "hang", {"quick": "true"}, containers={"engine": "./engine", "stop_timeout": "1s"}
    )

    done = cli.run(sweep, timeout=60)

    # The job's outcome stands; the removal that could not be done is said, not waited for.
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = cli.records()
    assert (record["outcome"], record["containers_removed"]) == ("passed", 0)
    warning = (
        f"warning: quick \N{MULTIPLICATION SIGN} m: container cleanup: `{cli.dir}/engine ps` "
        "gave no answer within 1s; killed it"
    )
    assert warning in done.stdout
    log = (cli.only_batch_dir() / record["run_dir"] / "output.log").read_text()
    assert "batch: warning: container cleanup: " in log
    (finish,) = events(cli.only_batch_dir(), "finish")
    assert "gave no answer within 1s" in finish["container_warning"]
    # The engine command the attempt started is gone (a new batch dir has no leftovers to
    # look for: the start ran none). The watchdog, which sees the removal unconfirmed, may
    # try once more as the driver exits (on a loaded machine before this line is reached):
    # its command is bounded by the same stop_timeout, so every engine started is gone.
    pids = [int(line) for line in (cli.dir / "engine-pids").read_text().split()]
    assert 1 <= len(pids) <= 2
    assert wait_until(lambda: all(is_gone(pid) for pid in pids), 5)
    later = [int(line) for line in (cli.dir / "engine-pids").read_text().split()]
    assert len(later) <= 2 and wait_until(lambda: all(is_gone(pid) for pid in later), 5)


def test_an_engine_that_fails_is_a_warning_with_its_own_words(batch_cli: BatchCli) -> None:
    cli = batch_cli
    engine_script(cli, 'echo "Error: cannot connect to the engine socket" >&2; exit 125')
    sweep = write_sweep(cli, "fails", {"quick": "true"}, containers={"engine": "./engine"})

    done = cli.run(sweep, timeout=60)

    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"container cleanup: {cli.dir}/engine ps: Error: cannot connect to the engine socket"
        in done.stdout
    )
    assert cli.records()[0]["containers_removed"] == 0


# --- without the key, or without the engine ---------------------------------------------------

JOB_SAYS_ITS_LABEL = [
    sys.executable,
    "-c",
    "import os, sys; open(os.environ['BATCH_RUN_DIR'] + '/label', 'w')"
    ".write(sys.argv[1] + '|' + os.environ['BATCH_CONTAINER_LABEL'])",
    "{container_label}",
]


def test_without_the_key_nothing_about_containers_runs_or_is_imported(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, "plain", {"c1": ""}, containers=None, command=JOB_SAYS_ITS_LABEL)

    # No engine on PATH (nothing on it at all), and every module the driver imports listed.
    done = cli.run(sweep, env={"PATH": str(cli.dir / "no-bin"), "PYTHONPROFILEIMPORTTIME": "1"})

    assert done.returncode == 0, done.stdout + done.stderr
    assert "batch.attempt.runner" in done.stderr  # the list is there...
    assert "batch.processes.containers" not in done.stderr  # ...without the engine's module
    (record,) = cli.records()
    assert "containers_removed" not in record
    label = (cli.only_batch_dir() / record["run_dir"] / "label").read_text()
    expected = f"batch-ledger.run={cli.only_batch_dir().name}/{record['run_dir']}"
    assert label == f"{expected}|{expected}"  # every job gets it, as {container_label} too


def test_an_engine_not_on_path_is_one_line_and_exit_2_before_anything_is_written(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = write_sweep(cli, "noengine", {"c1": "true"})
    no_path = {"PATH": str(cli.dir / "no-bin")}

    for command in ((sweep,), ("check", sweep)):
        done = cli.run(*command, env=no_path)

        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr == (
            f"{sweep}: containers: podman is not on PATH (install it, or give its path: "
            "containers: {engine: /path/to/engine})\n"
        )
    assert not (cli.dir / "runs").exists()


# --- batch check ---------------------------------------------------------------------------

#: No RAM settle before the (absent) probe: ``batch check`` would wait for it.
NO_SETTLE = {"order": "model-major", "between_models": {"settle": None}}


def check_sweep(cli: BatchCli, podman: PodmanTest, check_run: list[str]) -> Path:
    """A sweep whose ``batch check`` runs ``podman run --detach --label ... CHECK_RUN``."""
    containers = {"engine": "podman", "check_run": check_run}
    return write_sweep(cli, podman.name, {"c1": "true"}, containers=containers, **NO_SETTLE)


def test_batch_check_reports_the_engine_its_version_and_a_test_container(
    batch_cli: BatchCli, podman: PodmanTest
) -> None:
    cli = batch_cli
    rootfs = str(podman.local.rootfs)
    sweep = check_sweep(
        cli, podman, ["--network", "none", "--rootfs", rootfs, "/bin/busybox", "sleep", "60"]
    )

    done = cli.run("check", sweep, timeout=90)

    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("containers:"))
    assert line.startswith("containers: podman (podman version ")
    assert line.endswith("/check started and removed")
    (report,) = (cli.dir / "runs" / "checks").glob("*/check.json")
    found = json.loads(report.read_text())["containers"]
    assert (found["ok"], found["test_container"]) == (True, True)
    assert podman.left() == {}


def test_batch_check_fails_when_the_test_container_does_not_start(
    batch_cli: BatchCli, podman: PodmanTest
) -> None:
    cli = batch_cli
    missing = str(cli.dir / "no-rootfs")
    sweep = check_sweep(cli, podman, ["--network", "none", "--rootfs", missing, "/bin/busybox"])

    done = cli.run("check", sweep, timeout=90)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "test container did not start: " in done.stdout
    assert podman.left() == {}


#: A job that starts a container whose label holds a newline, and after it a line naming
#: another container (``$VICTIM``, unlabelled: not the batch's) with this attempt's label
#: value, then passes; the container outlives the attempt (its label is not the attempt's).
NEWLINE_LABEL = (
    'value="${BATCH_CONTAINER_LABEL#batch-ledger.run=}"; '
    'label="$(printf "%s\\n%s %s" "$BATCH_CONTAINER_LABEL" "$VICTIM" "$value")"; '
    'podman run --detach --label "$label" --network none --rootfs "$ROOTFS" '
    "/bin/busybox sleep 300 > /dev/null"
)


def test_a_label_holding_a_newline_never_makes_a_resume_stop_another_container(
    batch_cli: BatchCli, podman: PodmanTest
) -> None:
    cli = batch_cli
    local = podman.local
    victim = local.podman(
        "run", "--detach", "--network", "none", "--rootfs", str(local.rootfs),
        "/bin/busybox", "sleep", "300",
    ).strip()  # fmt: skip
    try:
        sweep = sweep_of(cli, podman, {"evil": NEWLINE_LABEL})
        data = json.loads(sweep.read_text())
        data["env"]["VICTIM"] = victim
        sweep.write_text(json.dumps(data))
        assert cli.run(sweep, "--no-progress", timeout=90).returncode == 0
        (evil,) = podman.left()  # its label begins with the batch's: the batch's to remove

        done = cli.run(sweep, "--resume", "--no-progress", timeout=90)

        assert done.returncode == 0, done.stdout + done.stderr
        # Was: the victim stopped and removed as "a leftover container of a dead driver".
        running = local.podman("inspect", "--format", "{{.State.Running}}", victim)
        assert running.strip() == "true"
        assert "removed 1 leftover container(s) of a dead driver" in done.stdout
        assert podman.left() == {}
        gone = local.podman("ps", "--all", "--quiet", "--no-trunc", "--filter", f"id={evil}")
        assert gone.strip() == ""
    finally:
        local.podman("rm", "--force", "--time", "0", victim, check=False)
