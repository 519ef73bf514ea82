"""The sweep file's YAML layer: values that know where they were written.

``read_document(path)`` reads the file (with ``batch.sweep.yaml_fast.read_yaml_fast``:
libyaml's parser building the same values, lines and columns as
``batch.sweep.yaml_reader.read_yaml``, ruamel.yaml's round-trip mode, which reads whatever
the fast path leaves to it and gives every error; deep nesting, non-standard tags and
non-scalar keys are refused) and returns the top-level :class:`Node`. A ``Node``
is a value with its location and a label (``models[1].env``); its ``error`` makes a
:class:`SweepError` located as ``FILE:LINE:COL: message``. The generic converters here
(``as_string``, ``as_name``, ``as_integer``, ``as_duration``, ``as_path``, ``as_words``, ...)
take a node and return a checked plain value or raise such an error; ``checked`` locates
the ``ValueError`` of any other check. The sweep's own keys are converted in
``batch.sweep``. ``MAX_NESTING`` is re-exported from ``batch.sweep.yaml_reader``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import attrs
from ruamel.yaml.comments import CommentedMap

from batch.durations import parse_duration
from batch.errors import SweepError
from batch.printable import one_line
from batch.sweep.yaml_fast import read_yaml_fast
from batch.sweep.yaml_reader import MAX_NESTING

__all__ = [
    "MAX_NESTING",
    "Document",
    "NeedsPositions",
    "Node",
    "as_choice",
    "as_duration",
    "as_integer",
    "as_name",
    "as_path",
    "as_positive_duration",
    "as_string",
    "as_words",
    "checked",
    "is_number",
    "mapping_keys",
    "read_document",
    "string_keyed",
]

_T = TypeVar("_T")


class NeedsPositions(Exception):
    """A value read without lines and columns (``read_document``'s ``plain_key``) is not
    one the quick conversion takes: read the file again with them and convert it there."""


@attrs.frozen
class Document:
    file: str  # the path as the user gave it, for messages
    lines: list[str]
    base_dir: Path
    environ: Mapping[str, str]


@attrs.frozen
class Node:
    """A YAML value with where it was written (0-based, as ruamel counts) and a label."""

    value: Any
    label: str
    line: int
    col: int
    doc: Document

    def error(self, message: str) -> SweepError:
        where = f"{self.doc.file}:{self.line + 1}:{self.col + 1}"
        return SweepError(f"{where}: {one_line(message)}")

    def type_error(self, expected: str) -> SweepError:
        return self.error(f"{self.label}: expected {expected}, got {_type_name(self.value)}")

    def entries(self) -> Iterator[tuple[Node, Node]]:
        """(key, value) nodes of a mapping."""
        for key, value in self.value.items():
            key_pos = _position(self, "key", key)
            value_pos = _position(self, "value", key)
            # An empty value ("timeout:") is placed at the next token; point at its key.
            if value is None and value_pos[0] != key_pos[0]:
                value_pos = key_pos
            label = f"{self.label}.{key}" if self.label else str(key)
            yield (
                Node(key, label, *key_pos, self.doc),
                Node(value, label, *value_pos, self.doc),
            )

    def elements(self) -> Iterator[Node]:
        for index, value in enumerate(self.value):
            pos = _position(self, "item", index)
            yield Node(value, f"{self.label}[{index}]", *pos, self.doc)

    def source_text(self) -> str:
        """A number or boolean exactly as written, so case ``007`` stays ``007`` rather than
        ``7``, and ``FLAG: true`` stays ``true`` rather than Python's ``True``."""
        line = self.doc.lines[self.line] if self.line < len(self.doc.lines) else ""
        match = _PLAIN_TOKEN.match(line, self.col)
        token = match.group(0) if match else ""
        if _denotes(token, self.value):
            return token
        if isinstance(self.value, bool):  # written with a tag (!!bool): YAML's own spelling
            return "true" if self.value else "false"
        return str(self.value)


_PLAIN_TOKEN = re.compile(r"[^\s,\[\]{}#]+")


def _denotes(token: str, number: object) -> bool:
    """Whether the source token is the number or boolean (not an anchor, a tag or a
    misplaced column)."""
    if isinstance(number, bool):
        return token.lower() == str(number).lower()
    digits = token.replace("_", "")
    for parse in (float, lambda text: int(text, 0)):
        try:
            return parse(digits) == number
        except ValueError:
            continue
    return False


def _position(node: Node, kind: str, key: object) -> tuple[int, int]:
    try:
        return getattr(node.value.lc, kind)(key)
    except (AttributeError, KeyError, IndexError, TypeError):  # e.g. merged via "<<"
        return node.line, node.col


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    for kinds, name in (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (Mapping, "a mapping"),
        (list, "a list"),
    ):
        if isinstance(value, kinds):
            return f"{name} ({_short(value)})" if isinstance(value, int | float | str) else name
    return type(value).__name__


def _short(value: object) -> str:
    text = repr(str(value)) if isinstance(value, str) else str(value)
    if len(text) <= 40:
        return text
    # Not its first characters: a message is redacted once made, and a cut secret (an
    # alias of an API key) would no longer match it.
    return f"{len(str(value)):,} characters" if isinstance(value, str) else text[:37] + "..."


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def unknown_key(
    node: Node, key_node: Node, known: Sequence[str], *, listed_above: bool = False
) -> SweepError:
    """The error for a key of mapping ``node`` that is not one of ``known``; with
    ``listed_above``, an earlier line already lists the known keys and this one says so."""
    close = difflib.get_close_matches(str(key_node.value), known, n=1)
    if close:
        hint = f"did you mean '{close[0]}'?"
    elif listed_above:
        hint = "the known keys are listed above"
    else:
        hint = "known keys: " + ", ".join(known)
    where = f" in {node.label}" if node.label else ""
    return key_node.error(f"unknown key '{key_node.value}'{where} ({hint})")


def mapping_keys(node: Node, known: Sequence[str], required: Sequence[str] = ()) -> dict[str, Node]:
    """The value nodes of a mapping, by key; unknown and missing keys are errors."""
    if not isinstance(node.value, Mapping):
        raise node.type_error("a mapping")
    found: dict[str, Node] = {}
    for key_node, value_node in node.entries():
        key = key_node.value
        if key not in known:
            raise unknown_key(node, key_node, known)
        found[key] = value_node
    for key in required:
        if key not in found:
            where = f"{node.label}: " if node.label else ""
            raise node.error(f"{where}missing required key '{key}'")
    return found


# --- reading the file ------------------------------------------------------------------------


def read_document(
    path: Path | str, *, environ: Mapping[str, str] | None = None, plain_key: str | None = None
) -> Node:
    """The top-level mapping of the sweep file at ``path``.

    ``environ`` (default ``os.environ``) is where env values' ``${VAR}`` come from; relative
    paths in the file are relative to its directory. ``plain_key``: the items of that
    top-level list are plain values without positions (``yaml_fast.PlainSeq``).
    """
    file = str(path)  # as the user gave it, for messages
    path = Path(path)
    data, lines = read_yaml_fast(path, file, plain_key)
    doc = Document(file, lines, path.parent, os.environ if environ is None else environ)
    if not isinstance(data, Mapping):
        got = "empty" if data is None else _type_name(data)
        lc = getattr(data, "lc", None)  # a scalar document has no position of its own
        line, col = (lc.line + 1, lc.col + 1) if lc is not None else (1, 1)
        raise SweepError(
            f"{file}:{line}:{col}: the sweep file must be a mapping of keys "
            f"(cases, models, command, ...); it is {got}"
        )
    position = cast(CommentedMap, data).lc  # ruamel's round-trip loader made it
    return Node(data, "", position.line, position.col, doc)


# --- generic converters: a located value in, a checked value out ----------------------------


def as_string(node: Node) -> str:
    if not isinstance(node.value, str):
        raise node.type_error("a string")
    return str(node.value)  # ruamel may hand a str subclass carrying formatting


def as_choice(node: Node, choices: Sequence[str]) -> str:
    """One of ``choices``; a near miss is told the choice it was probably meant to be."""
    value = as_string(node)
    if value not in choices:
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise node.error(f"{node.label}: must be one of {', '.join(choices)}, got {value!r}{hint}")
    return value


def as_name(node: Node, what: str) -> str:
    """An id or name: a string, or a number taken exactly as written."""
    if is_number(node.value):
        text = node.source_text()
    elif isinstance(node.value, str):
        text = str(node.value)
    else:
        raise node.type_error(f"a {what} (a string or number)")
    if not text:
        raise node.error(f"{node.label}: the {what} is empty")
    if any(c in text for c in "\0\n\r"):
        raise node.error(f"{node.label}: the {what} contains a NUL or line break: {text!r}")
    return text


def checked(node: Node, check: Callable[[Any], _T]) -> _T:
    """``check(node.value)``, its ``ValueError`` (a message for the user) located at ``node``."""
    try:
        return check(node.value)
    except ValueError as exc:
        raise node.error(f"{node.label}: {exc}") from None


def as_duration(node: Node) -> float:
    return checked(node, parse_duration)


def as_path(node: Node) -> Path:
    """A path as written, made absolute relative to the sweep file's directory."""
    text = as_string(node)
    if not text:
        raise node.error(f"{node.label}: empty path")
    try:
        return (node.doc.base_dir / Path(text).expanduser()).resolve()
    except RuntimeError as exc:  # "~nobody/x": no such user
        raise node.error(f"{node.label}: {exc}") from None


def as_positive_duration(node: Node, hint: str = "") -> float:
    seconds = as_duration(node)
    if seconds == 0:
        raise node.error(f"{node.label}: must be more than 0{hint}")
    return seconds


#: The largest count a key takes (jobs at once, retries, attempts, cores...): a C int's.
#: Past it a value is a typo or an attack, and the libraries it goes to overflow on it.
MAX_COUNT = 2**31 - 1


def as_integer(minimum: int) -> Callable[[Node], int]:
    """A converter for integers of at least ``minimum`` and at most :data:`MAX_COUNT`."""

    def convert(node: Node) -> int:
        if not isinstance(node.value, int) or isinstance(node.value, bool):
            raise node.type_error(f"an integer (at least {minimum})")
        if node.value < minimum:
            raise node.error(f"{node.label}: must be at least {minimum}, got {node.value}")
        if node.value > MAX_COUNT:
            raise node.error(f"{node.label}: must be at most {MAX_COUNT}, got a larger number")
        return int(node.value)

    return convert


def argv_elements(node: Node, check: Callable[[Node], object] | None = None) -> tuple[str, ...]:
    """The items of the non-empty list ``node`` as an argv: strings as written (each given
    to ``check`` first), numbers as their source text; the program must not be empty."""
    argv = []
    problems: list[SweepError] = []  # every element's, so one run names them all
    for item in node.elements():
        try:
            if isinstance(item.value, str):
                if check is not None:
                    check(item)
                argv.append(str(item.value))
            elif is_number(item.value):
                argv.append(item.source_text())
            else:
                raise item.type_error("a string")
        except SweepError as exc:
            problems.append(exc)
    if problems:
        raise SweepError(*(line for problem in problems for line in problem.lines()))
    if not argv[0]:
        raise node.error(f"{node.label}[0]: the program is empty")
    return tuple(argv)


def as_words(
    node: Node, what: str = "string", check: Callable[[str], object] | None = None
) -> tuple[str, ...]:
    """A list of non-empty strings (each a ``what``, for messages), each passed by ``check``."""
    if not isinstance(node.value, list):
        raise node.type_error(f"a list of {what}s")
    words = []
    for item in node.elements():
        word = as_string(item)
        if not word:
            raise item.error(f"{item.label}: empty {what}")
        if check is not None:
            checked(item, check)
        words.append(word)
    return tuple(words)


def string_keyed(node: Node) -> Iterator[tuple[Node, Node]]:
    """(key, value) nodes of a mapping whose keys must be non-empty strings."""
    if not isinstance(node.value, Mapping):
        raise node.type_error("a mapping")
    for key, value in node.entries():
        if not isinstance(key.value, str) or not key.value:
            raise key.error(f"{node.label}: names must be non-empty strings, got {key.value!r}")
        yield key, value
