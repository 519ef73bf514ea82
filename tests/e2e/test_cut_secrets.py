"""A key that straddles a cut never survives it (issue 27, item 1), through the real CLI.

Every text the driver keeps of a job, a probe or a notifier is cut to a limit somewhere:
the 200-character quote in a reason, the 8 KiB read for a log's last line, the last 1 MiB
of a probe's output, the last 16 KiB of a notifier's. Each is redacted before it is cut,
and what a cut leaves of a key at its edge goes too: no file or line the driver writes
holds even the key's first or last dozen characters.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import BatchCli
from helpers.fake_jobs import write_job_script

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
    assert records["long-line"]["reason"].startswith("exit code 2: yyy")
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
