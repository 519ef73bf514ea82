"""Reading the sweep file's text as YAML, refusing what the sweep loader does not take.

``read_yaml(path, file)`` reads the bytes at ``path``, decodes them as UTF-8 and parses
them with ruamel.yaml in round-trip mode (which keeps the line and column of every key and
item), returning the data and the text's lines. ``_SweepComposer`` refuses nesting deeper
than ``MAX_NESTING``, tags beyond the standard ones, and lists or mappings as keys; every
problem, ruamel's own included, becomes one :class:`SweepError` line located as
``FILE:LINE:COL: message``, never quoting a value (it may be a secret).

``batch.sweep.nodes`` turns the data into located values.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionStartEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from batch.errors import SweepError
from batch.printable import one_line
from run_support.jsonio import is_text

#: Lists and mappings inside one another. A sweep needs about six levels; ruamel builds
#: the document recursively, so without a limit deep nesting ends in a RecursionError.
MAX_NESTING = 100
TOO_DEEP = f"nesting too deep (more than {MAX_NESTING} levels of lists and mappings)"


def read_yaml(path: Path, file: str) -> tuple[Any, list[str]]:
    """The YAML data at ``path`` (ruamel's round-trip values) and the text's lines.

    ``file`` is the path as the user gave it, for messages.
    """
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
        raise SweepError(f"{file}:{where}: {one_line(str(exc))}") from None
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
        if "'\\t'" in problem:
            problem += "; a tab: YAML indents with spaces only (replace the tabs with spaces)"
        raise SweepError(f"{file}:{where}: not valid YAML: {one_line(problem)}") from None
    except YAMLError as exc:
        raise SweepError(f"{file}: not valid YAML: {one_line(str(exc))}") from None
    return data, re.split(r"\r\n|\r|\n", text)


def _duplicate_key_problem(problem: str) -> str:
    """ruamel's duplicate-key message without the two values it quotes (secrets, maybe)."""
    match = re.match(r'found duplicate key "(.*?)" with value "', problem, re.DOTALL)
    if match is None:
        return "found duplicate key"
    return f'found duplicate key "{match.group(1)}"'


class _Refused(Exception):
    """Well-formed YAML the sweep loader does not take, at ``mark`` (a ruamel position)."""

    def __init__(self, mark: Any, message: str) -> None:
        super().__init__(message)
        self.mark = mark


_YAML_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT = (_YAML_TAG + name for name in ("str", "int", "float"))
#: The tags a sweep file may write, with the kind of node each applies to. ruamel would
#: build anything else (sets, bytes, dates, unknown tags) as values no key takes, or crash.
_TAG_KINDS: dict[str, type[Node]] = {
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
            if isinstance(node, ScalarNode) and not is_text(node.value):
                # "\ud800" is valid YAML but no text: it could not be written to the summary,
                # passed to a job or printed. No value in the message: it may be a secret.
                raise _Refused(
                    event.start_mark,
                    "not valid Unicode text (a lone surrogate such as \\ud800; write the "
                    "character itself, or \\U0001F600 for one outside the BMP)",
                )
        return node

    def _compose_collection(self, parent: Any, index: Any, event: Any) -> Any:
        if self._nesting >= MAX_NESTING:
            raise _Refused(event.start_mark, TOO_DEEP)
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
