"""``write_json`` writes a big document's rows a chunk at a time, the text unchanged."""

from __future__ import annotations

import io

import pytest

from batch import printable


def document(rows: int, last_case: str) -> dict[str, object]:
    jobs = [
        {"case": f"c{n}", "model": "m", "decision": "carry", "reason": f"recorded in r{n}"}
        for n in range(rows)
    ]
    jobs[-1]["case"] = last_case
    # A string that holds the rows key as JSON text: only the real key is cut at.
    return {"batch_dir": '/b/"jobs": [', "counts": {"carry": rows}, "jobs": jobs, "changes": []}


@pytest.mark.parametrize("rows", [1, 7, 8, 9, 23])
@pytest.mark.parametrize("last_case", ["plain", "é 日本", "not utf-8 \udcff"])
def test_rows_written_in_chunks_are_the_documents_json_text(
    rows: int, last_case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(printable, "JSON_ROWS_AT_ONCE", 4)
    doc = document(rows, last_case)
    out = io.StringIO()

    printable.write_json(doc, out, rows="jobs")

    # A lone surrogate in the last chunk makes every part \u-escaped, as json_text does.
    assert out.getvalue() == printable.json_text(doc)
    assert ("\\u" in out.getvalue()) == last_case.startswith("not")
