"""No orphans: a dead driver's jobs stop, through its watchdog or, failing that, on --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import psutil
import pytest
from helpers.fake_jobs import is_gone, wait_until, write_job_script
from helpers.paths import REPO_ROOT

KILL_GRACE = 0.3

# A job that registers its pid (and its grandchild's) under pids/, notes which earlier job
# processes were still running when it started, and, while the file "hang" exists, ignores
# SIGTERM and runs on for a minute as a runaway agent would.
JOB = """
    import json, os, signal, subprocess, sys, time

    root = sys.argv[1]
    pids = os.path.join(root, "pids")

    def running(pid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                return handle.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
        except FileNotFoundError:
            return False

    alive = [int(name.split("-")[1]) for name in os.listdir(pids)]
    alive = [pid for pid in alive if running(pid)]
    with open(os.path.join(os.environ["BATCH_RUN_DIR"], "alive-at-start.json"), "w") as f:
        json.dump(alive, f)
    if os.path.exists(os.path.join(root, "hang")):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(os.path.join(pids, f"gc-{child.pid}"), "w").close()
        open(os.path.join(pids, f"job-{os.getpid()}"), "w").close()
        time.sleep(60)
"""


def make_sweep(tmp_path: Path) -> Path:
    script = write_job_script(tmp_path, JOB)
    (tmp_path / "pids").mkdir()
    (tmp_path / "hang").touch()
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "cases: [c01, c02]\n"
        "models: [m/one]\n"
        f"command: [{json.dumps(sys.executable)}, {json.dumps(str(script))}, "
        f"{json.dumps(str(tmp_path))}]\n"
        f"kill_grace: {KILL_GRACE}\n"
    )
    return sweep


def batch(*args: str) -> list[str]:
    return [sys.executable, "-m", "batch.cli", *args, "--no-progress"]


def cli_env() -> dict[str, str]:
    """This tree first on the driver's path, wherever pytest was started from."""
    root = str(REPO_ROOT)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }


def start_driver(sweep: Path) -> subprocess.Popen[bytes]:
    """A driver whose jobs (two, each with a grandchild) are all running."""
    driver = subprocess.Popen(batch(str(sweep)), stdout=subprocess.DEVNULL, env=cli_env())
    pids = sweep.parent / "pids"
    assert wait_until(lambda: len(list(pids.iterdir())) == 4, 10)
    return driver


def job_pids(sweep: Path) -> list[int]:
    return [int(path.name.split("-")[1]) for path in (sweep.parent / "pids").iterdir()]


def recorded_groups(tmp_path: Path) -> list[object]:
    """What the driver wrote to batch-logs/pgids.json for --resume to find."""
    for path in (tmp_path / "runs").glob("batch-*/batch-logs/pgids.json"):
        return json.loads(path.read_text())["groups"]
    return []


def kill_driver_and_watchdog(driver: subprocess.Popen[bytes], leaving: Iterable[int]) -> None:
    """SIGKILL the watchdog, then the driver; the processes ``leaving`` must outlive both."""
    watchdog = watchdog_of(driver)
    watchdog.kill()
    assert wait_until(lambda: is_gone(watchdog.pid), 5)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    time.sleep(KILL_GRACE + 0.2)
    assert not any(is_gone(pid) for pid in leaving), "nothing was left for --resume to stop"


def resume_unhung(sweep: Path) -> subprocess.CompletedProcess[str]:
    """``batch SWEEP --resume`` once the jobs no longer hang (its ``hang`` file is gone)."""
    (sweep.parent / "hang").unlink()
    return subprocess.run(
        batch(str(sweep), "--resume"), capture_output=True, text=True, timeout=60, env=cli_env()
    )


def watchdog_of(driver: subprocess.Popen[bytes]) -> psutil.Process:
    (watchdog,) = [
        child
        for child in psutil.Process(driver.pid).children()
        if "watchdog_main" in " ".join(child.cmdline())
    ]
    return watchdog


def test_jobs_and_their_children_stop_when_the_driver_is_sigkilled(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    driver = start_driver(sweep)
    pids = job_pids(sweep)
    assert not any(is_gone(pid) for pid in pids)

    driver.send_signal(signal.SIGKILL)
    driver.wait()
    killed_at = time.monotonic()

    # SIGTERM is ignored by these jobs, so they go at SIGKILL, one grace period later.
    assert wait_until(lambda: all(is_gone(pid) for pid in pids), KILL_GRACE + 5)
    assert time.monotonic() - killed_at < KILL_GRACE + 3


def test_resume_stops_what_a_dead_driver_and_watchdog_left_before_starting_jobs(
    tmp_path: Path,
) -> None:
    sweep = make_sweep(tmp_path)
    driver = start_driver(sweep)
    pids = job_pids(sweep)
    assert wait_until(lambda: len(recorded_groups(tmp_path)) == 2, 5)
    kill_driver_and_watchdog(driver, leaving=pids)

    resumed = resume_unhung(sweep)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "stopped 2 leftover job process group(s) of a dead driver" in resumed.stdout
    assert all(is_gone(pid) for pid in pids)
    resumed_runs = [meta.parent for meta in (tmp_path / "runs").glob("batch-*/*/*/run-meta.json")]
    assert len(resumed_runs) == 2
    for run_dir in resumed_runs:
        # What the resumed job saw running when it started: none of the leftovers.
        assert json.loads((run_dir / "alive-at-start.json").read_text()) == []
    summary = json.loads(next((tmp_path / "runs").glob("batch-*/batch-summary.json")).read_text())
    assert [row["status"] for row in summary["jobs"]] == ["passed", "passed"]


# --- escaped daemons ----------------------------------------------------------------------

# A job that leaves a daemon behind the classic way (fork, setsid, fork), the daemon
# ignoring SIGTERM and writing its pid to daemons/; the job itself then exits 0, or, while
# the file "hang" exists, runs on.
DAEMONIZING_JOB = """
    import os, signal, sys, time

    root = sys.argv[1]
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            open(os.path.join(root, "daemons", str(os.getpid())), "w").close()
            time.sleep(60)
        os._exit(0)
    while not os.listdir(os.path.join(root, "daemons")):
        time.sleep(0.01)
    open(os.path.join(root, "pids", f"job-{os.getpid()}"), "w").close()
    while os.path.exists(os.path.join(root, "hang")):
        time.sleep(0.05)
"""


def make_daemonizing_sweep(tmp_path: Path, *, hang: bool) -> Path:
    script = write_job_script(tmp_path, DAEMONIZING_JOB)
    for name in ("pids", "daemons"):
        (tmp_path / name).mkdir()
    if hang:
        (tmp_path / "hang").touch()
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "cases: [c01]\n"
        "models: [m/one]\n"
        f"command: [{json.dumps(sys.executable)}, {json.dumps(str(script))}, "
        f"{json.dumps(str(tmp_path))}]\n"
        f"kill_grace: {KILL_GRACE}\n"
    )
    return sweep


def daemon_pids(tmp_path: Path) -> list[int]:
    return [int(path.name) for path in (tmp_path / "daemons").iterdir()]


def kill_all_of(pids: list[int]) -> None:
    """Clean up after a failing test: these are processes the test's jobs started."""
    for pid in pids:
        if not is_gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_daemon_a_job_left_behind_is_gone_when_the_sweep_ends(tmp_path: Path) -> None:
    sweep = make_daemonizing_sweep(tmp_path, hang=False)
    ran = subprocess.run(batch(str(sweep)), capture_output=True, timeout=60, env=cli_env())
    daemons = daemon_pids(tmp_path)
    try:
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert len(daemons) == 1
        assert all(is_gone(pid) for pid in daemons)
    finally:
        kill_all_of(daemons)


def test_a_daemon_of_a_running_job_goes_with_a_sigkilled_driver(tmp_path: Path) -> None:
    sweep = make_daemonizing_sweep(tmp_path, hang=True)
    driver = subprocess.Popen(batch(str(sweep)), stdout=subprocess.DEVNULL, env=cli_env())
    assert wait_until(lambda: len(list((tmp_path / "pids").iterdir())) == 1, 10)
    daemons = daemon_pids(tmp_path)
    try:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        # The watchdog finds the daemon outside the job's group by its token.
        assert wait_until(lambda: all(is_gone(pid) for pid in daemons), KILL_GRACE + 5)
    finally:
        kill_all_of(daemons)


def test_resume_stops_a_daemon_a_dead_driver_and_watchdog_left(tmp_path: Path) -> None:
    sweep = make_daemonizing_sweep(tmp_path, hang=True)
    driver = subprocess.Popen(batch(str(sweep)), stdout=subprocess.DEVNULL, env=cli_env())
    assert wait_until(lambda: len(list((tmp_path / "pids").iterdir())) == 1, 10)
    daemons = daemon_pids(tmp_path)
    try:
        kill_driver_and_watchdog(driver, leaving=daemons)

        resumed = resume_unhung(sweep)

        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "outside their job's group" in resumed.stdout
        assert all(is_gone(pid) for pid in daemon_pids(tmp_path))
    finally:
        kill_all_of(daemon_pids(tmp_path))


# --- a driver killed as it starts its first jobs ----------------------------------------------

# A shell job (quick to start, so 40 of them start at once): it notes which earlier job
# processes are still running and, while "hang" exists, registers its pid, ignores SIGTERM
# and sleeps.
EARLY_JOB = """\
root=$1
alive=
for f in "$root"/pids/job-*; do
    [ -e "$f" ] || continue
    name=${f##*/job-}; pid=${name%%-*}; start=${name#*-}
    # The pid and its start time: under a busy test run a dead job's pid is soon another's.
    now=$(cut -d' ' -f22 /proc/"$pid"/stat 2>/dev/null) || continue
    if [ "$now" = "$start" ] && ! grep -q '^State:.*Z' /proc/"$pid"/status 2>/dev/null
    then alive="$alive,$pid"; fi
done
echo "[${alive#,}]" > "$BATCH_RUN_DIR/alive-at-start.json"
if [ -e "$root/hang" ]; then
    : > "$root/pids/job-$$-$(cut -d' ' -f22 /proc/$$/stat)"; trap '' TERM; exec sleep 60
fi
"""
WIDE = 40


def make_wide_sweep(tmp_path: Path) -> Path:
    script = tmp_path / "job.sh"
    script.write_text(EARLY_JOB)
    (tmp_path / "pids").mkdir()
    (tmp_path / "hang").touch()
    cases = ", ".join(f"c{n:02d}" for n in range(WIDE))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"cases: [{cases}]\n"
        "models: [m/one]\n"
        f"command: [sh, {json.dumps(str(script))}, {json.dumps(str(tmp_path))}]\n"
        f"max_concurrent: {WIDE}\n"
        f"kill_grace: {KILL_GRACE}\n"
    )
    return sweep


def kill_at_first_job(sweep: Path, *, with_watchdog: bool) -> None:
    """Start a driver and SIGKILL it (and its watchdog) the moment its first job runs."""
    driver = subprocess.Popen(batch(str(sweep)), stdout=subprocess.DEVNULL, env=cli_env())
    me = psutil.Process(driver.pid)

    def first_job() -> bool:
        try:
            return any(child.name() == "sh" for child in me.children())
        except psutil.Error:
            return False

    assert wait_until(first_job, 10, interval=0.001)
    if with_watchdog:
        for child in me.children():
            if "watchdog_main" in " ".join(child.cmdline()):
                child.kill()
    driver.send_signal(signal.SIGKILL)
    driver.wait()


def live_jobs(tmp_path: Path) -> list[int]:
    return [pid for pid in job_pids_of(tmp_path) if not is_gone(pid)]


def job_pids_of(tmp_path: Path) -> list[int]:
    """The jobs' pids, those named with their start time (``job-PID-START``) only while that
    process still is the job: a pid the kernel gave to another process since is not ours."""
    pids = []
    for path in (tmp_path / "pids").iterdir():
        _, pid, *start = path.name.split("-")
        if not start or _start_time(int(pid)) == start[0]:
            pids.append(int(pid))
    return pids


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def test_no_job_outlives_a_driver_sigkilled_as_it_starts_forty(tmp_path: Path) -> None:
    sweep = make_wide_sweep(tmp_path)
    kill_at_first_job(sweep, with_watchdog=False)
    try:
        # Jobs still starting when the driver died register themselves a little later:
        # look until well past the grace, when every one of them must be gone.
        assert wait_until(lambda: not live_jobs(tmp_path), KILL_GRACE + 5)
        time.sleep(KILL_GRACE + 0.5)
        assert live_jobs(tmp_path) == []
    finally:
        kill_all_of(job_pids_of(tmp_path))


def test_resume_never_runs_a_job_beside_its_orphan_after_an_early_kill(tmp_path: Path) -> None:
    sweep = make_wide_sweep(tmp_path)
    kill_at_first_job(sweep, with_watchdog=True)
    try:
        time.sleep(KILL_GRACE + 0.5)
        assert live_jobs(tmp_path), "nothing was left for --resume to stop"

        (tmp_path / "hang").unlink()
        resumed = subprocess.run(
            batch(str(sweep), "--resume"), capture_output=True, text=True, timeout=60,
            env=cli_env(),
        )  # fmt: skip

        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert live_jobs(tmp_path) == []
        seen = [
            json.loads(meta.with_name("alive-at-start.json").read_text())
            for meta in (tmp_path / "runs").glob("batch-*/*/*/run-meta.json")
        ]
        assert len(seen) == WIDE
        # What each resumed job saw running when it started: no orphan of the dead driver.
        assert all(alive == [] for alive in seen), seen
    finally:
        kill_all_of(job_pids_of(tmp_path))


# --- only our own processes -------------------------------------------------------------------


UNRELATED_TOKEN = "0123456789abcdef"


@pytest.mark.parametrize("shape", ["tokens", "bare list"])
def test_resume_leaves_an_unrelated_process_named_in_pgids_json_alone(
    tmp_path: Path, shape: str
) -> None:
    sweep = make_daemonizing_sweep(tmp_path, hang=False)
    logs = tmp_path / "runs" / "batch-20261130T000000Z" / "batch-logs"
    logs.mkdir(parents=True)
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        # As a stale file after a reboot, or a job, could leave it: pid, group and start
        # time all those of a live process, which is not one of this batch's jobs.
        entry = {
            "pgid": other.pid,
            "pid": other.pid,
            "start_time": psutil.Process(other.pid).create_time(),
        }
        if shape == "tokens":
            state: object = {
                "token": UNRELATED_TOKEN,
                "groups": [{**entry, "token": f"{UNRELATED_TOKEN}.1"}],
            }
            why = f"pid {other.pid} does not carry the job's token"
        else:  # the format before tokens, which named groups by pid and start time alone
            state, why = [entry], "no job token recorded"
        (logs / "pgids.json").write_text(json.dumps(state))

        resumed = subprocess.run(
            batch(str(sweep), "--resume"), capture_output=True, text=True, timeout=60,
            env=cli_env(),
        )  # fmt: skip

        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert other.poll() is None
        assert (
            f"left process group {other.pid} of pgids.json alone: not this batch's job ({why})"
        ) in resumed.stdout
    finally:
        other.kill()
        other.wait()
        kill_all_of(daemon_pids(tmp_path))
