"""``batch report`` on a batch run twice by the real driver: the header's start and run time
are the whole batch's, not the last invocation's."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import BatchCli


def test_header_covers_both_invocations(batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep({"c1": ["sleep=1.0"], "c2": []})
    assert cli.run(sweep, "--no-progress", "--cases", "c1").returncode == 0
    assert cli.run(sweep, "--no-progress", "--resume").returncode == 0
    batch_dir = cli.only_batch_dir()
    last_elapsed = cli.summary(batch_dir)["elapsed_seconds"]
    assert last_elapsed < 1.0  # the resume ran c2 only

    result = cli.run("report", batch_dir)
    assert result.returncode == 0, result.stderr
    page = (batch_dir / "report.html").read_text(encoding="utf-8")
    meta = re.search(r'<p class="meta">(.*?)</p>', page)
    assert meta is not None
    first = json.loads((batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()[0])
    started = datetime.fromisoformat(first["t"].replace("Z", "+00:00"))
    assert f"started {started:%Y-%m-%d %H:%M} UTC" in meta.group(1)
    ran = re.search(r"ran (\d+\.\d) s over 2 invocations", meta.group(1))
    assert ran is not None, meta.group(1)
    assert float(ran.group(1)) >= 1.0 + last_elapsed - 0.1
