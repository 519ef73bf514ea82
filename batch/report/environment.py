"""The report's one Jinja2 environment: the templates in ``batch/report/templates``,
autoescape on (every name from a summary is untrusted text: a case may be called
``<script>``), ``StrictUndefined`` (a misspelt name is an error, not an empty string),
compiled once per process. Imported only by the report modules, so ``batch --help`` and
``batch plan`` never load Jinja2.

A part of the page is a macro of a template, called with plain values (rows, cells, points,
labels) and returning ``Markup``; a part that holds parts receives them as ``Markup`` and
never escapes them twice.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jinja2
from markupsafe import Markup, escape

#: After these a long name may wrap (``<wbr>``) in a narrow header or cell.
BREAK_AFTER = re.compile(r"(?<=[/:_-])")


def break_points(name: Any) -> list[str]:
    """``name`` in parts, each ending at a ``/``, ``:``, ``_`` or ``-`` after which it may
    wrap (``templates/names.html.j2`` puts a ``<wbr>`` between them)."""
    return BREAK_AFTER.split(str(name))


def tip(text: Any) -> Markup:
    """A ``title`` attribute's value: escaped, its line breaks as ``&#10;`` so a tooltip
    keeps its lines in every browser."""
    return Markup("&#10;").join(escape(line) for line in str(text).split("\n"))


def fixed(value: float, digits: int = 1) -> str:
    """A coordinate as SVG wants it: ``12.5``."""
    return f"{value:.{digits}f}"


def thousands(value: int) -> str:
    """``12,345``."""
    return f"{value:,}"


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("batch.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(break_points=break_points, tip=tip, fixed=fixed, thousands=thousands)
    env.globals["breakable"] = env.get_template("names.html.j2").module.breakable  # type: ignore[attr-defined]
    return env


def macro(template: str, name: str, /, *args: Any, **kwargs: Any) -> Markup:
    """Call macro ``name`` of ``template`` with plain values; the HTML it renders."""
    module = environment().get_template(template).module
    return Markup(getattr(module, name)(*args, **kwargs))


def render(template: str, /, **context: Any) -> str:
    """A whole page from ``template``."""
    return environment().get_template(template).render(**context)
