"""The report checker: parses a ``batch report`` page, failing on any unbalanced or
misnested tag, and collects what a reader sees (texts, grid cells, links, tables).

Used by ``tests/unit/report/test_report.py`` and ``tests/e2e/test_report_repeats_e2e.py``.
"""

from __future__ import annotations

from html.parser import HTMLParser

import attrs

VOID = {"meta", "br", "wbr", "img", "input", "link", "hr", "col", "source"}


@attrs.define
class Cell:
    """One ``<td>`` or ``<th>`` of a table: its attributes, its text, the links in it."""

    tag: str
    attrs: dict[str, str | None]
    raw: str = ""
    hrefs: list[str] = attrs.Factory(list)

    @property
    def text(self) -> str:
        """What the cell reads as: its text with white space runs as one space (a ``<wbr>``
        inside a name joins its parts, as a browser shows them)."""
        return " ".join(self.raw.split())


@attrs.define
class Row:
    #: ``thead``, ``tbody`` or ``tfoot``.
    part: str
    cells: list[Cell] = attrs.Factory(list)

    @property
    def texts(self) -> list[str]:
        return [cell.text for cell in self.cells]


class Page(HTMLParser):
    """Parses the report, failing on any unbalanced or misnested tag, and collects parts."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.cells: list[dict[str, str | None]] = []  # grid <td> attributes
        self.links: list[dict[str, str | None]] = []  # <a> attributes inside grid cells
        self.texts: list[str] = []
        self.cell_texts: list[str] = []  # what grid cells show
        #: Every table, with the heading (``<h2>``) of the section it is in.
        self.tables: list[tuple[str, list[Row]]] = []
        self._heading = ""
        self.feed(text)
        self.close()
        assert self.stack == [], f"unclosed tags: {self.stack}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "td" and "table" in self.stack:
            self.cells.append(attributes)
        if tag == "a" and "td" in self.stack:
            self.links.append(attributes)
        if tag == "h2":
            self._heading = ""
        if tag == "table":
            self.tables.append((self._heading, []))
        if tag == "tr" and self.tables:
            part = next((t for t in reversed(self.stack) if t in ("thead", "tbody", "tfoot")), "")
            self.tables[-1][1].append(Row(part))
        if tag in ("td", "th") and self.tables and self.tables[-1][1]:
            self.tables[-1][1][-1].cells.append(Cell(tag, attributes))
        cell = self._cell() if tag == "a" else None
        if cell is not None:
            cell.hrefs.append(attributes.get("href") or "")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if "h2" in self.stack:
            self._heading += data
        cell = self._cell()
        if cell is not None:
            cell.raw += data
        if data.strip():
            self.texts.append(data.strip())
            if "td" in self.stack and "table" in self.stack:
                self.cell_texts.append(data.strip())

    def _cell(self) -> Cell | None:
        inside = "td" in self.stack or "th" in self.stack
        if not inside or not self.tables or not self.tables[-1][1]:
            return None
        row = self.tables[-1][1][-1]
        return row.cells[-1] if row.cells else None

    def all(self, tag: str, css: str | None = None) -> list[dict[str, str | None]]:
        return [
            attrs
            for name, attrs in self.tags
            if name == tag and (css is None or css in (attrs.get("class") or "").split())
        ]

    def table(self, heading: str) -> list[Row]:
        """The one table in the section headed ``heading``."""
        found = [rows for title, rows in self.tables if title == heading]
        assert len(found) == 1, (heading, [title for title, _ in self.tables])
        return found[0]
