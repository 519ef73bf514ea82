"""The sweep file's YAML layer: values that know where they were written.

``read_document(path)`` reads the file with ruamel.yaml (round-trip mode, which keeps line
and column of every key and item; ``_SweepComposer`` refuses deep nesting, non-standard
tags and non-scalar keys) and returns the top-level :class:`Node`. A ``Node`` is a value
with its location and a label (``models[1].env``); its ``error`` makes a
:class:`SweepError` located as ``FILE:LINE:COL: message``. The generic converters here
(``as_string``, ``as_name``, ``as_integer``, ``as_duration``, ``as_path``, ``as_words``, ...)
take a node and return a checked plain value or raise such an error; ``checked`` locates
the ``ValueError`` of any other check. The sweep's own keys are converted in
``batch.sweep``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionStartEvent
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from batch.durations import parse_duration

_T = TypeVar("_T")

#: Lists and mappings inside one another. A sweep needs about six levels; ruamel builds
#: the document recursively, so without a limit deep nesting ends in a RecursionError.
MAX_NESTING = 100


class SweepError(Exception):
    """A sweep file problem, already formatted as ``FILE:LINE:COL: message``.

    Defined here, where located errors are made, so this module need not import
    ``batch.sweep`` (which imports it); callers import it from ``batch.sweep``.
    """


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
        return SweepError(f"{where}: {_one_line(message)}")

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
        """A number exactly as written, so case ``007`` stays ``007`` rather than ``7``."""
        line = self.doc.lines[self.line] if self.line < len(self.doc.lines) else ""
        match = _PLAIN_TOKEN.match(line, self.col)
        token = match.group(0) if match else ""
        return token if _denotes(token, self.value) else str(self.value)


def _one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``a\\nb``), so that
    a message quoting a key or value from the file stays one line on a terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


_PLAIN_TOKEN = re.compile(r"[^\s,\[\]{}#]+")


def _denotes(token: str, number: object) -> bool:
    """Whether the source token is the number (not an anchor, a tag or a misplaced column)."""
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
    return text if len(text) <= 40 else text[:37] + "..."


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def mapping_keys(node: Node, known: Sequence[str], required: Sequence[str] = ()) -> dict[str, Node]:
    """The value nodes of a mapping, by key; unknown and missing keys are errors."""
    if not isinstance(node.value, Mapping):
        raise node.type_error("a mapping")
    found: dict[str, Node] = {}
    for key_node, value_node in node.entries():
        key = key_node.value
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else "known keys: " + ", ".join(known)
            where = f" in {node.label}" if node.label else ""
            raise key_node.error(f"unknown key '{key}'{where} ({hint})")
        found[key] = value_node
    for key in required:
        if key not in found:
            where = f"{node.label}: " if node.label else ""
            raise node.error(f"{where}missing required key '{key}'")
    return found


# --- reading the file ------------------------------------------------------------------------


def read_document(path: Path | str, *, environ: Mapping[str, str] | None = None) -> Node:
    """The top-level mapping of the sweep file at ``path``.

    ``environ`` (default ``os.environ``) is where env values' ``${VAR}`` come from; relative
    paths in the file are relative to its directory.
    """
    file = str(path)  # as the user gave it, for messages
    path = Path(path)
    data, lines = _read_yaml(path, file)
    doc = Document(file, lines, path.parent, os.environ if environ is None else environ)
    if not isinstance(data, Mapping):
        got = "empty" if data is None else _type_name(data)
        lc = getattr(data, "lc", None)  # a scalar document has no position of its own
        line, col = (lc.line + 1, lc.col + 1) if lc is not None else (1, 1)
        raise SweepError(
            f"{file}:{line}:{col}: the sweep file must be a mapping of keys "
            f"(cases, models, command, ...); it is {got}"
        )
    return Node(data, "", data.lc.line, data.lc.col, doc)


class _Refused(Exception):
    """Well-formed YAML the sweep loader does not take, at ``mark`` (a ruamel position)."""

    def __init__(self, mark: Any, message: str) -> None:
        super().__init__(message)
        self.mark = mark


_YAML_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT = (_YAML_TAG + name for name in ("str", "int", "float"))
#: The tags a sweep file may write, with the kind of node each applies to. ruamel would
#: build anything else (sets, bytes, dates, unknown tags) as values no key takes, or crash.
_TAG_KINDS: dict[str, type] = {
    **{_YAML_TAG + name: ScalarNode for name in ("str", "int", "float", "bool", "null")},
    _YAML_TAG + "seq": SequenceNode,
    _YAML_TAG + "map": MappingNode,
}
#: Plain scalars ruamel would read as something else: dates (no type in the YAML 1.2 core
#: schema), "=" (the 1.1 value key) and "<<" where it is not a merge key.
_READ_AS_TEXT = frozenset(_YAML_TAG + name for name in ("timestamp", "value", "merge"))
_KIND_NAMES = {ScalarNode: "plain value", SequenceNode: "list", MappingNode: "mapping"}


class _SweepComposer(Composer):
    """ruamel's composer, refusing what the sweep loader does not take.

    That is: nesting deeper than ``MAX_NESTING``; a tag not in ``_TAG_KINDS`` or on the wrong
    kind of node; a scalar that is not what its tag says; a list or mapping as a mapping
    key. Each node is checked once, where it is written: an alias is never expanded, so an
    alias bomb costs no more than its text.
    """

    _nesting = 0

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        # A reused anchor name is valid YAML (an alias means the latest); ruamel's warning
        # about it prints the source lines, which may hold a secret.
        self.warn_double_anchors = False

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, CollectionStartEvent):
            node = self._compose_collection(parent, index, event)
        else:
            node = super().compose_node(parent, index)
        is_key = isinstance(parent, MappingNode) and index is None
        if is_key and not isinstance(node, ScalarNode):
            raise _Refused(
                event.start_mark,
                f"a mapping key must be a string or number, not a {_KIND_NAMES[type(node)]}",
            )
        if not isinstance(event, AliasEvent):
            self._check_tag(node, event, is_key)
        return node

    def _compose_collection(self, parent: Any, index: Any, event: Any) -> Any:
        if self._nesting >= MAX_NESTING:
            raise _Refused(
                event.start_mark,
                f"nesting too deep (more than {MAX_NESTING} levels of lists and mappings)",
            )
        self._nesting += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._nesting -= 1

    def _check_tag(self, node: Any, event: Any, is_key: bool) -> None:
        tag = node.tag
        if event.tag in (None, "!"):  # resolved from how the value is written
            if tag in _READ_AS_TEXT and not (is_key and tag == _YAML_TAG + "merge"):
                node.tag = _STR
            return
        shown = _shown_tag(tag)
        kind = _TAG_KINDS.get(tag)
        if kind is None:
            raise _Refused(
                event.start_mark,
                f"unsupported YAML tag {shown} "
                "(allowed: !!str, !!int, !!float, !!bool, !!null, !!seq, !!map)",
            )
        if not isinstance(node, kind):
            raise _Refused(event.start_mark, f"{shown} cannot tag a {_KIND_NAMES[type(node)]}")
        if kind is ScalarNode:
            # No value in the message: it may be a secret.
            implied = str(self.resolver.resolve(ScalarNode, node.value, (True, False)))
            if tag not in (_STR, implied) and (tag, implied) != (_FLOAT, _INT):
                raise _Refused(event.start_mark, f"the value is not a valid {shown}")
        node.tag = tag  # as a plain tag: ruamel keeps an explicit !!str as a TaggedScalar


def _shown_tag(tag: str) -> str:
    """A tag as it would be written, not too long."""
    if tag.startswith(_YAML_TAG):
        shown = "!!" + tag.removeprefix(_YAML_TAG)
    else:
        shown = tag if tag.startswith("!") else f"!<{tag}>"
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _read_yaml(path: Path, file: str) -> tuple[Any, list[str]]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SweepError(f"{file}: cannot read the sweep file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - raw.rfind(b"\n", 0, exc.start)
        byte = raw[exc.start]
        raise SweepError(f"{file}:{line}:{col}: not UTF-8 text (byte 0x{byte:02x})") from None
    yaml = YAML(typ="rt")
    yaml.Composer = _SweepComposer
    try:
        data = yaml.load(text)
    except _Refused as exc:
        where = f"{exc.mark.line + 1}:{exc.mark.column + 1}"
        raise SweepError(f"{file}:{where}: {_one_line(str(exc))}") from None
    except ReaderError as exc:  # a control character in the text, found at an offset
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - text.rfind("\n", 0, exc.position)
        raise SweepError(
            f"{file}:{line}:{col}: not valid YAML: control character #x{exc.character:04x} "
            "(write it as an escape in a double-quoted string)"
        ) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "cannot parse"
        if isinstance(exc, DuplicateKeyError):
            problem = _duplicate_key_problem(problem)
        if exc.problem and exc.context and exc.context_mark:
            problem += f" ({exc.context} at line {exc.context_mark.line + 1})"
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "1:1"
        raise SweepError(f"{file}:{where}: not valid YAML: {_one_line(problem)}") from None
    except YAMLError as exc:
        raise SweepError(f"{file}: not valid YAML: {_one_line(str(exc))}") from None
    return data, re.split(r"\r\n|\r|\n", text)


def _duplicate_key_problem(problem: str) -> str:
    """ruamel's duplicate-key message without the two values it quotes (secrets, maybe)."""
    match = re.match(r'found duplicate key "(.*?)" with value "', problem, re.DOTALL)
    if match is None:
        return "found duplicate key"
    return f'found duplicate key "{match.group(1)}"'


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


def as_integer(minimum: int) -> Callable[[Node], int]:
    """A converter for integers of at least ``minimum``."""

    def convert(node: Node) -> int:
        if not isinstance(node.value, int) or isinstance(node.value, bool):
            raise node.type_error(f"an integer (at least {minimum})")
        if node.value < minimum:
            raise node.error(f"{node.label}: must be at least {minimum}, got {node.value}")
        return int(node.value)

    return convert


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
