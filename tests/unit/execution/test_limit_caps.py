"""How many jobs the driver's own limits leave room for (batch.execution.driver_limits)."""

from __future__ import annotations

from batch.execution.driver_limits import FD_RESERVE, FDS_PER_JOB, Limits, cap_lines, jobs_allowed


def test_the_open_file_limit_caps_the_jobs_at_once_with_both_numbers_said() -> None:
    cap, lines = cap_lines(1000, Limits(files=256, files_open=10))
    assert cap == (256 - 10 - FD_RESERVE) // FDS_PER_JOB
    assert lines == [
        "warning: max_concurrent 1000 is more than the open-file limit allows "
        f"(256 files: ulimit -n); running at most {cap} jobs at once"
    ]


def test_a_limit_with_room_enough_changes_nothing() -> None:
    assert cap_lines(4, Limits(files=1024, files_open=10)) == (4, [])
    assert cap_lines(4, Limits(files=None, files_open=10, processes=None)) == (4, [])


def test_the_process_limit_counts_the_users_processes_already_running() -> None:
    cap, lines = cap_lines(500, Limits(files=None, files_open=0, processes=300, processes_used=200))
    assert cap == 300 - 200 - 16
    assert len(lines) == 1 and "(300 processes, 200 in use: ulimit -u)" in lines[0]


def test_at_least_one_job_runs_however_low_the_limit() -> None:
    assert jobs_allowed(Limits(files=20, files_open=30, processes=5, processes_used=50)) == (1, 1)
