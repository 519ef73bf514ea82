"""Atomic replacement: readers see the old file or the new one, never a mix."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from run_support.atomic import atomic_write_bytes


def test_threads_writing_one_path_never_tear_it(tmp_path: Path) -> None:
    # With a temp name per process, two threads shared one temp file and could publish a
    # mix of both payloads (or fail on the other's rename).
    target = tmp_path / "batch-summary.json"
    payloads = [json.dumps({"writer": n, "pad": "x" * 50_000}).encode() for n in range(2)]
    errors: list[BaseException] = []

    def writer(data: bytes) -> None:
        try:
            for _ in range(150):
                atomic_write_bytes(target, data, fsync=False)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["batch-summary.json"]
