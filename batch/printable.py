"""Text from outside the driver, made safe to print on a terminal: :func:`one_line`.

Case and model ids, failure categories, reasons, a job's ``result.json`` and the names in a
hand-edited summary or record are written by someone other than the driver. Printed raw, a
newline in one starts a line the driver never wrote (a job could print a fake
``DONE ... PASSED``), an ESC sequence moves the cursor or clears the screen, a bidi override
reverses what follows. Every place that prints such text to a terminal or log line passes it
through :func:`one_line` first: the plain and live displays, ``batch status``, the stats
table and Markdown, ``batch plan`` and error lines. JSON and CSV output stay data, escaped
by their own encoders; :func:`json_text` makes sure such JSON can be written as UTF-8.
"""

from __future__ import annotations

from typing import Any, TextIO

from run_support.jsonio import indented, is_text


def one_line(text: str) -> str:
    r"""``text`` with every character a terminal would not show as itself escaped.

    Control characters (C0, C1 such as ``\x85``, ESC), line and paragraph separators
    (``\u2028``), format characters (bidi overrides such as ``\u202e``), lone surrogates and
    unassigned code points become their Python escape (``a\nb``, ``\x1b[2J``, ``\u202e``);
    everything printable, non-ASCII letters included, is kept. The result is one line that
    can be encoded as UTF-8.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def json_text(document: Any) -> str:
    """``document`` as JSON indented by 2, for a command's ``--format json``.

    Non-ASCII text is kept as is, unless some text is not valid Unicode (a run dir whose name
    is not UTF-8 reads as lone surrogates): then all of it is written as ``\\u`` escapes, so
    the output is valid UTF-8 JSON in any locale instead of a crash on a strict stdout.
    """
    text = indented(document, ensure_ascii=False)
    return text if is_text(text) else indented(document)


#: Rows a ``write_json`` encodes at once.
JSON_ROWS_AT_ONCE = 10_000


def write_json(document: dict[str, Any], out: TextIO, *, rows: str) -> None:
    """Write ``json_text(document)`` to ``out``, the same text, with ``document[rows]`` (a
    list of flat rows, at the top level) encoded ``JSON_ROWS_AT_ONCE`` rows at a time.

    100,000 plan rows as one text were three copies of about 25 MB alive at once (encoded,
    re-indented, joined); a chunk at a time they are a few hundred kB.
    """
    items = document[rows]
    if len(items) <= JSON_ROWS_AT_ONCE:
        out.write(json_text(document))
        return
    chunks = [items[i : i + JSON_ROWS_AT_ONCE] for i in range(0, len(items), JSON_ROWS_AT_ONCE)]
    # One row stands in for all: the text around it is the document's, the rows go between.
    marker = "\ue000rows\ue000"
    outline = {**document, rows: [{"marker": marker}]}
    ensure_ascii = not (
        is_text(indented(outline, ensure_ascii=False)) and all(map(_rows_are_text, chunks))
    )
    text = indented(outline, ensure_ascii=ensure_ascii)
    # Only the key itself is `"rows": [` after a line break: in a string, a quote is `\"`.
    key = f'\n  "{rows}": ['
    at = text.index(key) + len(key)
    out.write(text[:at])
    separator = ""
    for chunk in chunks:
        # At the top level of the document, a row list is indented one level deeper than
        # alone (a raw line break only ever occurs between items in JSON text).
        inner = indented(chunk, ensure_ascii=ensure_ascii).replace("\n", "\n  ")
        out.write(separator + inner[1:-4])
        separator = ","
    out.write(text[text.index("\n  ]", at) :])


def _rows_are_text(chunk: list[dict[str, Any]]) -> bool:
    return is_text("".join(v for row in chunk for v in row.values() if type(v) is str))
