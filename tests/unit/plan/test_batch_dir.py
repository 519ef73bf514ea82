"""Which batch dir ``--resume`` takes: this sweep's, exactly, and the newest by stamp and
then by its same-second counter as a number."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from batch.plan.batch_dir import batch_dir_order, create_batch_dir, newest_batch_dir

NOW = datetime(2026, 11, 30, 9, 18, 0, tzinfo=UTC)


def test_the_newest_of_a_dozen_batch_dirs_made_in_one_second_is_the_last_made(
    tmp_path: Path,
) -> None:
    made = [create_batch_dir(tmp_path, "big", NOW) for _ in range(12)]

    assert made[-1].name == "big-20261130T091800Z-12"
    assert newest_batch_dir(tmp_path, "big") == made[-1]


def test_a_later_second_is_newer_than_any_counter(tmp_path: Path) -> None:
    for _ in range(11):
        create_batch_dir(tmp_path, "big", NOW)
    later = create_batch_dir(tmp_path, "big", NOW.replace(second=1))

    assert newest_batch_dir(tmp_path, "big") == later


def test_a_batch_dir_name_matches_its_sweep_as_a_whole_name() -> None:
    stamp = "20261130T091800Z"

    assert batch_dir_order(f"big-{stamp}", "big") == (stamp, 1)
    assert batch_dir_order(f"big-{stamp}-11", "big") == (stamp, 11)
    assert batch_dir_order(f"big-v2-{stamp}", "big") is None
    assert batch_dir_order(f"big-2-{stamp}", "big") is None
    assert batch_dir_order(f"big-{stamp}-old", "big") is None
    assert batch_dir_order(f"big-{stamp}", "big-2") is None
    assert batch_dir_order(f"batch-{stamp}", None) == (stamp, 1)


def test_a_batch_dir_whose_snapshot_names_another_sweep_is_not_this_sweeps(
    tmp_path: Path,
) -> None:
    # "big v2" and "big-v2" share the safe name, so only the snapshot tells them apart.
    theirs = create_batch_dir(tmp_path, "big v2", NOW.replace(second=5))
    (theirs / "sweep.yaml").write_text("# Resolved sweep\nname: big v2\noutput: runs\n")
    ours = create_batch_dir(tmp_path, "big-v2", NOW)
    (ours / "sweep.yaml").write_text("name: big-v2\n")
    unnamed = create_batch_dir(tmp_path, None, NOW)
    (unnamed / "sweep.yaml").write_text("name: null\n")
    named_batch = create_batch_dir(tmp_path, "batch", NOW.replace(second=9))
    (named_batch / "sweep.yaml").write_text("name: batch\n")

    assert newest_batch_dir(tmp_path, "big-v2") == ours
    assert newest_batch_dir(tmp_path, "big v2") == theirs
    assert newest_batch_dir(tmp_path, None) == unnamed
    assert newest_batch_dir(tmp_path, "batch") == named_batch


def test_a_batch_dir_without_a_readable_snapshot_goes_by_its_name(tmp_path: Path) -> None:
    made = create_batch_dir(tmp_path, "big", NOW)
    (made / "sweep.yaml").write_text("name: [unclosed\n")

    assert newest_batch_dir(tmp_path, "big") == made


def test_a_fifo_in_place_of_the_snapshot_does_not_hang_the_lookup(tmp_path: Path) -> None:
    made = create_batch_dir(tmp_path, "big", NOW)
    os.mkfifo(made / "sweep.yaml")

    assert newest_batch_dir(tmp_path, "big") == made
