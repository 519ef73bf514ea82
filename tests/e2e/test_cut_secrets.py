"""A key that straddles a cut never survives it (issue 27, item 1), through the real CLI.

Every text the driver keeps of a job, a probe or a notifier is cut to a limit somewhere:
the 200-character quote in a reason, the 8 KiB read for a log's last line, the last 1 MiB
of a probe's output, the last 16 KiB of a notifier's, the last 4 KiB of a worker's stderr,
the 64 KiB of a log the view shows. Each is redacted before it is cut, a window of a longer
text with what comes before its cut (issue 40, item 3): no file or line the driver writes,
nor the view's page, holds even the key's first or last dozen characters.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from conftest import BatchCli
from helpers.fake_jobs import write_job_script
from helpers.paths import REPO_ROOT

KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghij"
#: What would let a reader rebuild the key: its first or its last 12 characters.
PIECES = (KEY[:12], KEY[-12:])
ENV = {"MY_KEY": KEY}

#: argv: HOW. ``straddle``: 156 characters, then the key, on the last line (the 200-
#: character quote cuts it); ``long-line``: the key then 8,172 characters on one line (the
#: 8 KiB read of the log's end cuts it); both exit 2, an error of the setup's kind.
JOB = """
    import os, sys
    key = os.environ["OPENAI_API_KEY"]
    if sys.argv[1] == "straddle":
        print("x" * 156 + key, flush=True)
    else:
        print(key + "y" * (8192 - 20), flush=True)
    sys.exit(2)
"""
#: A probe or notifier printing the key, then more than what is kept of its output.
NOISY = """
    import os, sys
    key = os.environ.get("OPENAI_API_KEY") or os.environ["MY_KEY"]  # a notifier: the driver's env
    sys.stdout.write(key + "z" * int(sys.argv[1]) + "\\n")
    sys.exit(int(sys.argv[2]))
"""
#: A notifier that keeps what it was given: stdin and BATCH_MESSAGE.
KEEPER = """
    import os, sys
    with open(sys.argv[1], "a") as out:
        out.write(sys.stdin.read() + os.environ["BATCH_MESSAGE"] + "\\n")
"""


def _leaks(text: str) -> list[str]:
    return [piece for piece in PIECES if piece in text]


def _files_leaking(root: Path, *, own: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Every file under ``root`` holding a piece of the key, but those named ``own`` (a
    job's own output, the key's to hold)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name not in own:
            leaked = _leaks(path.read_text(errors="replace"))
            if leaked:
                found[str(path.relative_to(root))] = leaked
    return found


def _sweep(cli: BatchCli, cases: list[str], **keys: object) -> Path:
    job = write_job_script(cli.dir, JOB)
    sweep = {
        "name": "cut",
        "output": "runs",
        "cases": [{"id": case, "params": {"how": case}} for case in cases],
        "models": ["m"],
        "command": [sys.executable, str(job), "{params.how}"],
        "env": {"OPENAI_API_KEY": "${MY_KEY}"},
        "summary_interval": "0s",
        **keys,
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep))
    return path


def test_a_key_straddling_a_reasons_cut_leaves_no_piece_in_any_file_or_line(
    batch_cli: BatchCli,
) -> None:
    keeper = write_job_script(batch_cli.dir, KEEPER, name="keeper.py")
    given = batch_cli.dir / "given.txt"
    sweep = _sweep(
        batch_cli,
        ["straddle", "long-line"],
        max_concurrent=1,
        halt={"broken_setup": True, "broken_setup_window": 2},
        notify={"commands": [[sys.executable, str(keeper), str(given)]], "events": ["halt"]},
    )
    done = batch_cli.run(sweep, "--no-progress", env=ENV)
    assert done.returncode == 4, done.stderr  # the broken-setup halt
    records = {r["test_case"]: r for r in batch_cli.records()}
    assert records["straddle"]["reason"].startswith("exit code 2: " + "x" * 156)
    assert "[REDACTED]" in records["straddle"]["reason"]
    # The key the 8 KiB read cut is hidden whole: its marker opens the quote.
    assert records["long-line"]["reason"].startswith("exit code 2: [REDACTED]yyy")
    assert _leaks(done.stdout + done.stderr) == []
    assert _files_leaking(batch_cli.only_batch_dir(), own=("output.log",)) == {}
    # The notifier heard of the halt, and was given no piece of the key either.
    heard = given.read_text()
    assert "halted" in heard and "[REDACTED]" in heard
    assert _leaks(heard) == []


def test_a_key_at_the_cut_of_a_probes_output_leaves_no_piece_in_the_log_or_check(
    batch_cli: BatchCli,
) -> None:
    noisy = write_job_script(batch_cli.dir, NOISY, name="noisy.py")
    sweep = _sweep(
        batch_cli,
        ["straddle"],
        order="model-major",
        between_models={"settle": None},
        # 1 MiB of filler after the key: the kept tail starts inside it; the probe fails.
        probe=[sys.executable, str(noisy), str((1 << 20) - 20), "1"],
    )
    done = batch_cli.run("check", sweep, env=ENV)
    assert done.returncode == 1, done.stderr
    assert "probe failed (exit code 1)" in done.stdout
    assert _leaks(done.stdout + done.stderr) == []
    (check_dir,) = (batch_cli.dir / "runs" / "checks").iterdir()
    assert "earlier bytes not kept" in (check_dir / "batch-logs" / "between-models.log").read_text()
    assert _files_leaking(check_dir) == {}


def test_a_key_at_the_cut_of_a_notifiers_output_leaves_no_piece_in_notify_log(
    batch_cli: BatchCli,
) -> None:
    noisy = write_job_script(batch_cli.dir, NOISY, name="noisy.py")
    sweep = _sweep(
        batch_cli,
        ["straddle"],
        # 16 KiB of filler after the key: the kept tail starts inside it, or just after.
        notify={"commands": [[sys.executable, str(noisy), str(16 * 1024 - 20), "0"]]},
        halt="off",
    )
    done = batch_cli.run(sweep, "--no-progress", env=ENV)
    assert done.returncode == 1, done.stderr
    log = (batch_cli.only_batch_dir() / "batch-logs" / "notify.log").read_text()
    assert "notify end" in log and "zzzz" in log
    assert _leaks(log) == []
    assert _files_leaking(batch_cli.only_batch_dir(), own=("output.log",)) == {}


#: A warm worker that, given a request, writes the key then 4,076 characters on one line
#: to its stderr and dies: the 4 KiB of stderr it keeps start inside the key.
DYING_WORKER = """
    import os, sys
    sys.stdin.readline()
    key = os.environ["OPENAI_API_KEY"]
    sys.stderr.write(key + "y" * (4096 - 20) + "\\n")
    sys.stderr.flush()
    os._exit(3)
"""


def test_a_key_at_the_cut_of_a_dead_workers_stderr_leaves_no_piece_anywhere(
    batch_cli: BatchCli,
) -> None:
    worker = write_job_script(batch_cli.dir, DYING_WORKER, name="worker.py")
    sweep = _sweep(batch_cli, ["straddle"], worker=[sys.executable, str(worker)], halt="off")
    data = json.loads(sweep.read_text())
    del data["command"]
    sweep.write_text(json.dumps(data))

    done = batch_cli.run(sweep, "--no-progress", env=ENV)

    assert done.returncode == 1, done.stdout + done.stderr
    (record,) = batch_cli.records()
    # Was: "...: MNOPQRSTUVWXYZ0123456789abcdefghijyyyy...", the key's last characters.
    assert record["reason"].startswith("the worker exited with status 3 before answering: ")
    assert "[REDACTED]yyy" in record["reason"], record["reason"]
    assert _leaks(done.stdout + done.stderr) == []
    # Its own output (the job's log, the workers' log) is the worker's; nothing else.
    own = ("output.log", "workers.log")
    assert _files_leaking(batch_cli.only_batch_dir(), own=own) == {}


def test_a_key_at_the_cut_of_the_views_log_tail_is_hidden_whole(batch_cli: BatchCli) -> None:
    job = write_job_script(batch_cli.dir, VIEWED, name="viewed.py")
    sweep = _sweep(batch_cli, ["viewed"], halt="off")
    data = json.loads(sweep.read_text())
    data["command"] = [sys.executable, str(job)]
    sweep.write_text(json.dumps(data))
    assert batch_cli.run(sweep, "--no-progress", env=ENV).returncode == 0
    batch_dir = batch_cli.only_batch_dir()
    (record,) = batch_cli.records()
    log = (batch_dir / record["run_dir"] / "output.log").read_bytes()
    key_at = log.index(KEY.encode())
    # The tail's 64 KiB start inside the key: its last characters are in the tail.
    assert key_at < len(log) - 64 * 1024 < key_at + len(KEY) - 12

    shown = _view_job(batch_cli, batch_dir, "viewed")

    assert shown["log_truncated"] is True
    # Was: "...abcdefghij" + "y" * ...: what the cut left of the key.
    assert shown["log"].startswith("[REDACTED]yyy"), shown["log"][:80]
    assert _leaks(json.dumps(shown)) == []


#: A job that prints the key then 64 KiB less 20 characters: the view's tail of its log
#: starts inside the key.
VIEWED = """
    import os
    print(os.environ["OPENAI_API_KEY"] + "y" * (64 * 1024 - 20), flush=True)
"""


def _view_job(cli: BatchCli, batch_dir: Path, case: str) -> dict[str, Any]:
    """What ``batch view`` serves of the job ``case`` of model m (/api/job), the view run with the
    key in its environment, as a user who exported it would."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **ENV}
    process = subprocess.Popen(
        [sys.executable, "-m", "batch.cli", "view", str(batch_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 20)
        assert ready, "batch view printed no URL"
        url = process.stdout.readline().decode().strip()
        base, token = url.split("/?token=")
        request = urllib.request.Request(
            f"{base}/api/job?batch=0&case={case}&model=m", headers={"X-Batch-Token": token}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return dict(json.loads(response.read()))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)
