"""Reading a big sweep file fast: libyaml's parser, the round-trip reader's values.

``read_yaml_fast(path, file)`` returns what ``batch.sweep.yaml_reader.read_yaml`` returns (the data
as ruamel's round-trip values, ``CommentedMap``/``CommentedSeq`` carrying the line and
column of every key, value and item, and the text's lines) or raises the very same
``SweepError``. It takes the parse events from ``ruamel.yaml.clib``'s C parser (libyaml)
and builds the values in one lean loop; ruamel's pure-Python scanner, parser and composer
are what make 10,000 case objects take seconds.

It handles only the plain shape a sweep file (or its snapshot) has: no directive, tag,
anchor, alias, merge key, duplicate key, non-scalar key, lone surrogate or nesting past
``MAX_NESTING``. For anything else, any parse error included, it hands the whole file to
``read_yaml``, so every value, message and location stays the round-trip reader's own.
Without ``ruamel.yaml.clib`` it is ``read_yaml``.

``read_yaml_fast(path, file, plain_key="cases")`` builds the items of that top-level list
as plain ``dict``/``list`` values without lines or columns (a :class:`PlainSeq`): building
10,000 located case objects costs more than parsing them. A loader that takes this must
read the file again without ``plain_key`` before it reports any problem there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from ruamel.yaml.main import DocInfo, version
from ruamel.yaml.nodes import ScalarNode

from batch.errors import SweepError
from batch.sweep.yaml_reader import MAX_NESTING, TOO_DEEP, read_yaml
from run_support.jsonio import is_text

try:  # ruamel.yaml.clib's (or clibz's) libyaml parser
    from ruamel.yaml.cyaml import CParser
except ImportError:  # neither installed: only the round-trip reader
    CParser = None

_YAML_TAG = "tag:yaml.org,2002:"
_STR = _YAML_TAG + "str"
#: Resolved tags built here; date-like, "=" and "<<" plain scalars are read as text, as
#: ``batch.sweep.yaml_reader`` does (a "<<" key is a merge: the round-trip reader's business).
_AS_TEXT = frozenset(_YAML_TAG + name for name in ("str", "timestamp", "value", "merge"))
_INT = _YAML_TAG + "int"
_DECIMAL = re.compile(r"-?[1-9][0-9]*")  # not 0: ruamel makes that a ScalarInt
_OTHER_SCALARS = frozenset(_YAML_TAG + name for name in ("int", "float", "bool", "null"))


class PlainSeq(list[Any]):
    """A list whose items carry no line or column (``read_yaml_fast``'s ``plain_key``)."""


class _Unhandled(Exception):
    """Something the fast path leaves to the round-trip reader."""


class _TooDeep(Exception):
    """A collection opened past ``MAX_NESTING``, at ``mark`` (libyaml's position)."""

    def __init__(self, mark: Any) -> None:
        super().__init__()
        self.mark = mark


def read_yaml_fast(path: Path, file: str, plain_key: str | None = None) -> tuple[Any, list[str]]:
    """``batch.sweep.yaml_reader.read_yaml(path, file)``, faster for a plain sweep file.

    ``plain_key``: the items of the top-level list under that key are plain values.
    """
    if CParser is None:
        return read_yaml(path, file)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return read_yaml(path, file)  # its message
    if text.startswith("%") or "\n%" in text:  # a directive (%YAML 1.1 changes resolution)
        return read_yaml(path, file)
    try:
        data = _Builder(text, plain_key).document()
    except (_Unhandled, YAMLError, RecursionError):
        return read_yaml(path, file)
    except _TooDeep as exc:
        # The round-trip reader refuses it at the same mark with the same words, but only
        # after ruamel's scanner, looking ahead over every pending flow key, has spent
        # seconds on a few thousand brackets (quadratic there, a hostile file's easy win).
        where = f"{exc.mark.line + 1}:{exc.mark.column + 1}"
        raise SweepError(f"{file}:{where}: {TOO_DEEP}") from None
    return data, re.split(r"\r\n|\r|\n", text)


def plain_data(text: str, plain_key: str | None = None) -> Any:
    """The YAML ``text``'s data as ``read_yaml_fast`` builds it (no file, no message): raises
    ``ValueError`` for anything the fast path leaves to the round-trip reader."""
    if CParser is None or text.startswith("%") or "\n%" in text:
        raise ValueError("not for the fast reader")
    try:
        return _Builder(text, plain_key).document()
    except (_Unhandled, _TooDeep, YAMLError, RecursionError) as exc:
        raise ValueError("not for the fast reader") from exc


class _Builder:
    """Round-trip values from libyaml's events, for the plain shape only."""

    def __init__(self, text: str, plain_key: str | None = None) -> None:
        self._parser = CParser(text)
        self._plain_key = plain_key
        # ruamel's own resolver and constructor, set up as a round-trip load sets them up,
        # decide every non-text scalar: the values are theirs, not a re-implementation.
        yaml = YAML(typ="rt")
        yaml.doc_infos.append(DocInfo(requested_version=version(yaml.version)))
        resolver = yaml.resolver
        if resolver.yaml_path_resolvers or None in resolver.versioned_resolver:
            raise _Unhandled  # not the resolver table the lookup below was written for
        #: First character -> [(tag, match)]: the implicit types of the YAML version in
        #: force, looked up as ruamel's VersionedResolver.resolve does, without its
        #: per-call property lookups (most of the cost of a big file).
        self._implicit: dict[str, list[tuple[str, Any]]] = {
            # The patterns are ruamel's lazily compiled ones; their bound ``match`` skips
            # the lazy wrapper's attribute lookup on every scalar.
            first: [(tag, pattern.match) for tag, pattern in entries]
            for first, entries in resolver.versioned_resolver.items()
        }
        self._construct = yaml.constructor.construct_object
        self._scalars: dict[tuple[str, str, Any], Any] = {}

    def document(self) -> Any:
        get = self._parser.get_event
        try:
            if type(get()) is not StreamStartEvent:
                raise _Unhandled
            event = get()
            if type(event) is StreamEndEvent:
                return None  # an empty file, as the round-trip reader gives it
            if type(event) is not DocumentStartEvent or event.explicit:
                raise _Unhandled  # "---": leave its corner cases to ruamel
            data = self._root(get)
            if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent:
                raise _Unhandled  # a second document: the round-trip reader's error
            return data
        finally:
            self._parser.dispose()

    def _root(self, get: Any) -> Any:
        """The document's value: an iterative walk, so depth costs no recursion."""
        event = get()
        if type(event) is ScalarEvent:
            return self._scalar(event)
        root = self._collection(event)
        # Each entry: [collection, pending key or _NO_KEY, key event, its lc.data]
        stack: list[list[Any]] = [[root, _NO_KEY, None, root.lc.data]]
        while stack:
            top = stack[-1]
            container = top[0]
            event = get()
            kind = type(event)
            if kind is MappingEndEvent or kind is SequenceEndEvent:
                stack.pop()
                continue
            is_map = type(container) is CommentedMap
            if is_map and top[1] is _NO_KEY:  # a key
                if kind is not ScalarEvent:
                    raise _Unhandled  # a list or mapping as a key: refused there
                key = self._scalar(event)
                if key in container or event.value == "<<":
                    raise _Unhandled  # a duplicate (an error) or a merge
                top[1], top[2] = key, event
                continue
            opened = kind is not ScalarEvent
            if not opened:
                value = self._scalar(event)
            elif kind is SequenceStartEvent and top[1] == self._plain_key and len(stack) == 1:
                value = self._plain_items(get, event)
                opened = False  # read to its end already
            else:
                if len(stack) >= MAX_NESTING:
                    raise _TooDeep(event.start_mark)
                value = self._collection(event)
            mark = event.start_mark
            # What _yaml_set_kv_line_col / _yaml_set_idx_line_col store, stored directly.
            if is_map:
                key_mark = top[2].start_mark
                container[top[1]] = value
                top[3][top[1]] = [key_mark.line, key_mark.column, mark.line, mark.column]
                top[1] = _NO_KEY
            else:
                top[3][len(container)] = [mark.line, mark.column]
                container.append(value)
            if opened:
                stack.append([value, _NO_KEY, None, value.lc.data])
        return root

    def _plain_items(self, get: Any, start: Any) -> PlainSeq:
        """The list opened by ``start``, its items built as plain values, no positions."""
        if start.anchor is not None or start.tag is not None:
            raise _Unhandled
        scalar = self._scalar
        items = PlainSeq()
        # Each entry: [container, pending key or _NO_KEY]; the root is at depth 1.
        stack: list[list[Any]] = [[items, _NO_KEY]]
        while stack:
            top = stack[-1]
            container = top[0]
            event = get()
            kind = type(event)
            if kind is ScalarEvent:
                value = scalar(event)
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                stack.pop()
                continue
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.anchor is not None or event.ctag is not None:
                    raise _Unhandled
                if type(container) is dict and top[1] is _NO_KEY:
                    raise _Unhandled  # a list or mapping as a key
                if len(stack) + 1 >= MAX_NESTING:  # the top-level mapping is a level too
                    raise _TooDeep(event.start_mark)
                value = {} if kind is MappingStartEvent else []
            else:
                raise _Unhandled  # an alias
            if type(container) is dict:
                key = top[1]
                if key is _NO_KEY:
                    if value in container or event.value == "<<":
                        raise _Unhandled  # a duplicate (an error) or a merge
                    top[1] = value
                    continue
                container[key] = value
                top[1] = _NO_KEY
            else:
                container.append(value)
            if kind is not ScalarEvent:
                stack.append([value, _NO_KEY])
        return items

    def _collection(self, event: Any) -> Any:
        if event.anchor is not None or event.tag is not None:
            raise _Unhandled
        if type(event) is MappingStartEvent:
            value: Any = CommentedMap()
        elif type(event) is SequenceStartEvent:
            value = CommentedSeq()
        else:
            raise _Unhandled  # an alias
        value._yaml_set_line_col(event.start_mark.line, event.start_mark.column)
        value.lc.data = {}  # as add_kv_line_col / add_idx_line_col would make it
        return value

    def _scalar(self, event: Any) -> Any:
        if event.anchor is not None or event.ctag is not None:  # ctag: tag, without a property
            raise _Unhandled
        text = event.value
        if not text.isascii() and not is_text(text):
            raise _Unhandled  # a lone surrogate: refused there
        style = event.style
        plain = event.implicit[0]
        if (style is None and not plain) or (plain and not text):
            # An empty value ("timeout:"): libyaml places it after its key, ruamel at the
            # next token, and sweep_yaml.Node relies on ruamel's place.
            raise _Unhandled
        if not plain:  # quoted or block: text whatever it reads as
            if style in ("|", ">"):  # ruamel keeps the block style in a str subclass
                return self._constructed(_STR, text, style, event)
            return text
        tag = _STR
        for implicit_tag, match in self._implicit.get(text[0], ()):
            if match(text):
                tag = implicit_tag
                break
        if tag in _AS_TEXT:
            return text
        if tag not in _OTHER_SCALARS:
            raise _Unhandled
        if tag == _INT and _DECIMAL.fullmatch(text):
            return int(text)  # what the round-trip constructor makes of a plain decimal
        return self._constructed(tag, text, style, event)

    def _constructed(self, tag: str, text: str, style: Any, event: Any) -> Any:
        """The round-trip constructor's value; numbers, booleans and nulls are immutable,
        so one built value serves every equal scalar."""
        key = (tag, text, style)
        if key not in self._scalars:
            node = ScalarNode(tag, text, event.start_mark, event.end_mark, style=style)
            self._scalars[key] = self._construct(node)
        return self._scalars[key]


_NO_KEY = object()
