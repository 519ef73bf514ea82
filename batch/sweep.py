"""The sweep file: what to run (every case against every model) and how (limits, retries).

``load_sweep(path)`` reads the YAML with ruamel.yaml, validates every key at load time and
returns a frozen :class:`Sweep`; any problem is a :class:`SweepError` located as
``sweep.yaml:LINE:COL: message``. ``sweep_snapshot`` writes the resolved sweep back as YAML
for the batch dir (secrets left out). Documented key by key in ``docs/sweep-file.md``.

Each top-level key is one row of ``_KEYS`` (key -> converter); a converter gets the value
with its location and either returns the converted value or raises a located error. A new
key is a new row, a new ``Sweep`` field and, when it depends on other keys, a new check in
``_CHECKS``.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import re
import shlex
import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from batch import secrets
from batch.durations import parse_duration
from run_support.results import NON_MODEL_FAILURE_CATEGORIES

#: Placeholders a command may use besides ``{params.NAME}``.
PLACEHOLDERS = ("case", "model", "model_safe", "run_dir", "batch_dir", "attempt")
_PARAMS = "params."
ORDERS = ("interleave", "model-major")
DEFAULT_LOG_PATTERNS: Mapping[str, tuple[str, ...]] = {
    "api_or_credit": ("429", "rate limit", "insufficient credit"),
}


@attrs.frozen
class CaseSpec:
    id: str
    #: Seconds; None: the sweep's ``timeout`` applies.
    timeout: float | None = None
    params: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ModelSpec:
    id: str
    max_concurrent: int | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    #: ``env`` as written, before ``${VAR}`` expansion (what the snapshot records).
    env_templates: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Sweep:
    path: Path
    cases: tuple[CaseSpec, ...]
    models: tuple[ModelSpec, ...]
    command: tuple[str, ...]
    output: Path
    name: str | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    env_templates: Mapping[str, str] = attrs.field(factory=dict)
    timeout: float | None = None
    kill_grace: float = 10.0
    max_concurrent: int = 4
    stagger: float = 0.0
    order: str = "interleave"
    retries: int = 0
    retry_backoff: float = 30.0
    non_model_categories: frozenset[str] = NON_MODEL_FAILURE_CATEGORIES
    log_patterns: Mapping[str, tuple[str, ...]] = attrs.field(
        factory=lambda: dict(DEFAULT_LOG_PATTERNS)
    )
    summary_interval: float = 2.0

    def model(self, model_id: str) -> ModelSpec:
        for spec in self.models:
            if spec.id == model_id:
                return spec
        raise KeyError(model_id)


class SweepError(Exception):
    """A sweep file problem, already formatted as ``FILE:LINE:COL: message``."""


def expand_command(
    command: Sequence[str], values: Mapping[str, object], params: Mapping[str, Any]
) -> list[str]:
    """The argv for one job: placeholders filled from ``values`` (keys of ``PLACEHOLDERS``)
    and ``params`` (``{params.NAME}``); ``{{``/``}}`` become literal braces. Each argument
    stays one argument whatever the values contain: there is no shell.
    """
    argv = []
    for arg in command:
        pieces = []
        for literal, field, _, _ in string.Formatter().parse(arg):
            pieces.append(literal)
            if field is not None:
                value = (
                    params[field[len(_PARAMS) :]] if field.startswith(_PARAMS) else values[field]
                )
                pieces.append(_argv_text(value))
        argv.append("".join(pieces))
    return argv


def _argv_text(value: object) -> str:
    if isinstance(value, bool):  # as YAML spells it, not Python's True
        return "true" if value else "false"
    return str(value)


# --- located values -------------------------------------------------------------------------


@attrs.frozen
class _Document:
    file: str  # the path as the user gave it, for messages
    lines: list[str]
    base_dir: Path
    environ: Mapping[str, str]


@attrs.frozen
class _Node:
    """A YAML value with where it was written (0-based, as ruamel counts) and a label."""

    value: Any
    label: str
    line: int
    col: int
    doc: _Document

    def error(self, message: str) -> SweepError:
        return SweepError(f"{self.doc.file}:{self.line + 1}:{self.col + 1}: {message}")

    def type_error(self, expected: str) -> SweepError:
        return self.error(f"{self.label}: expected {expected}, got {_type_name(self.value)}")

    def entries(self) -> Iterator[tuple[_Node, _Node]]:
        """(key, value) nodes of a mapping."""
        for key, value in self.value.items():
            key_pos = _position(self, "key", key)
            value_pos = _position(self, "value", key)
            # An empty value ("timeout:") is placed at the next token; point at its key.
            if value is None and value_pos[0] != key_pos[0]:
                value_pos = key_pos
            label = f"{self.label}.{key}" if self.label else str(key)
            yield (
                _Node(key, label, *key_pos, self.doc),
                _Node(value, label, *value_pos, self.doc),
            )

    def elements(self) -> Iterator[_Node]:
        for index, value in enumerate(self.value):
            pos = _position(self, "item", index)
            yield _Node(value, f"{self.label}[{index}]", *pos, self.doc)

    def source_text(self) -> str:
        """A number exactly as written, so case ``007`` stays ``007`` rather than ``7``."""
        line = self.doc.lines[self.line] if self.line < len(self.doc.lines) else ""
        match = _PLAIN_TOKEN.match(line, self.col)
        token = match.group(0) if match else ""
        return token if _denotes(token, self.value) else str(self.value)


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


def _position(node: _Node, kind: str, key: object) -> tuple[int, int]:
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


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _keys(node: _Node, known: Sequence[str], required: Sequence[str] = ()) -> dict[str, _Node]:
    """The value nodes of a mapping, by key; unknown and missing keys are errors."""
    if not isinstance(node.value, Mapping):
        raise node.type_error("a mapping")
    found: dict[str, _Node] = {}
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


# --- converters: a located value in, a checked value out ----------------------------------


def _string(node: _Node) -> str:
    if not isinstance(node.value, str):
        raise node.type_error("a string")
    return str(node.value)  # ruamel may hand a str subclass carrying formatting


def _name(node: _Node, what: str) -> str:
    """An id or name: a string, or a number taken exactly as written."""
    if _is_number(node.value):
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


def _optional_name(node: _Node) -> str | None:
    return None if node.value is None else _name(node, "name")


def _duration(node: _Node) -> float:
    try:
        return parse_duration(node.value)
    except ValueError as exc:
        raise node.error(f"{node.label}: {exc}") from None


def _time_limit(node: _Node) -> float | None:
    """A timeout: a positive duration, or null for no limit."""
    return None if node.value is None else _positive_duration(node, " (null means no limit)")


def _positive_duration(node: _Node, hint: str = "") -> float:
    seconds = _duration(node)
    if seconds == 0:
        raise node.error(f"{node.label}: must be more than 0{hint}")
    return seconds


def _integer(minimum: int) -> Callable[[_Node], int]:
    def convert(node: _Node) -> int:
        if not isinstance(node.value, int) or isinstance(node.value, bool):
            raise node.type_error(f"an integer (at least {minimum})")
        if node.value < minimum:
            raise node.error(f"{node.label}: must be at least {minimum}, got {node.value}")
        return int(node.value)

    return convert


def _optional_limit(node: _Node) -> int | None:
    return None if node.value is None else _integer(1)(node)


def _order(node: _Node) -> str:
    order = _string(node)
    if order not in ORDERS:
        raise node.error(f"{node.label}: must be one of {', '.join(ORDERS)}, got {order!r}")
    return order


def _words(node: _Node) -> tuple[str, ...]:
    """A list of non-empty strings."""
    if not isinstance(node.value, list):
        raise node.type_error("a list of strings")
    words = []
    for item in node.elements():
        word = _string(item)
        if not word:
            raise item.error(f"{item.label}: empty string")
        words.append(word)
    return tuple(words)


def _categories(node: _Node) -> frozenset[str]:
    return frozenset(_words(node))


def _log_patterns(node: _Node) -> dict[str, tuple[str, ...]]:
    return {key.value: _words(value) for key, value in _string_keyed(node)}


def _string_keyed(node: _Node) -> Iterator[tuple[_Node, _Node]]:
    if not isinstance(node.value, Mapping):
        raise node.type_error("a mapping")
    for key, value in node.entries():
        if not isinstance(key.value, str) or not key.value:
            raise key.error(f"{node.label}: names must be non-empty strings, got {key.value!r}")
        yield key, value


def _env(node: _Node) -> tuple[dict[str, str], dict[str, str]]:
    """(expanded values, values as written); ``${VAR}`` comes from the driver's environment."""
    values: dict[str, str] = {}
    templates: dict[str, str] = {}
    for key, value in _string_keyed(node):
        if "=" in key.value or "\0" in key.value:
            raise key.error(f"{node.label}: {key.value!r} is not a valid variable name")
        if isinstance(value.value, str):
            template = value.value
        elif _is_number(value.value) or isinstance(value.value, bool):
            template = value.source_text()
        else:
            raise value.type_error('a string (write "" for an empty value)')
        try:
            values[key.value] = secrets.expand_references(template, value.doc.environ)
        except ValueError as exc:
            raise value.error(f"{value.label}: {exc}") from None
        templates[key.value] = template
    return values, templates


def _path(node: _Node) -> Path:
    """A path as written, made absolute relative to the sweep file's directory."""
    text = _string(node)
    if not text:
        raise node.error(f"{node.label}: empty path")
    try:
        return (node.doc.base_dir / Path(text).expanduser()).resolve()
    except RuntimeError as exc:  # "~nobody/x": no such user
        raise node.error(f"{node.label}: {exc}") from None


def _command(node: _Node) -> tuple[str, ...]:
    if isinstance(node.value, str):
        try:
            words = shlex.split(node.value)
        except ValueError:
            words = node.value.split()
        as_list = "[" + ", ".join(map(_flow_item, words)) + "]"
        raise node.error(
            f"command: must be a list of arguments (it runs without a shell), e.g. {as_list}"
        )
    if not isinstance(node.value, list):
        raise node.type_error("a list of strings")
    if not node.value:
        raise node.error("command: is empty")
    argv = []
    for item in node.elements():
        if isinstance(item.value, str):
            _check_placeholders(item)
            argv.append(str(item.value))
        elif _is_number(item.value):
            argv.append(item.source_text())
        else:
            raise item.type_error("a string")
    if not argv[0]:
        raise node.error("command[0]: the program is empty")
    return tuple(argv)


def _flow_item(word: str) -> str:
    """``word`` as an item of a YAML flow list, quoted only when it has to be."""
    return word if _PLAIN_WORD.fullmatch(word) else json.dumps(word, ensure_ascii=False)


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./=+@][A-Za-z0-9_./=+@-]*|--?[A-Za-z0-9][A-Za-z0-9_.=-]*")


def _format_fields(node: _Node) -> list[tuple[str, str | None, str | None]]:
    """(field, format spec, conversion) of each placeholder in a command argument."""
    try:
        parsed = list(string.Formatter().parse(node.value))
    except ValueError as exc:
        raise node.error(f"{node.label}: {exc} (write {{{{ or }}}} for a literal brace)") from None
    return [(field, spec, conv) for _, field, spec, conv in parsed if field is not None]


def _check_placeholders(node: _Node) -> None:
    for field, spec, conversion in _format_fields(node):
        if spec or conversion:
            raise node.error(f"{node.label}: format specs and conversions are not supported")
        if field in PLACEHOLDERS or (field.startswith(_PARAMS) and len(field) > len(_PARAMS)):
            continue
        close = difflib.get_close_matches(field, PLACEHOLDERS, n=1)
        hint = f"did you mean {{{close[0]}}}? " if close else ""
        allowed = " ".join(f"{{{p}}}" for p in PLACEHOLDERS)
        raise node.error(
            f"{node.label}: unknown placeholder {{{field}}} ({hint}allowed: {allowed} "
            "{params.NAME}; write {{ or }} for a literal brace)"
        )


def _cases(node: _Node) -> tuple[CaseSpec, ...]:
    if isinstance(node.value, Mapping):
        return _discovered_cases(node)
    if not isinstance(node.value, list):
        raise node.type_error("a list of case ids or objects, or {dir: ..., glob: ...}")
    if not node.value:
        raise node.error("cases: is empty (a sweep needs at least one case)")
    items = list(node.elements())
    specs = [_case(item) for item in items]
    _check_unique(items, [spec.id for spec in specs], "case")
    return tuple(specs)


def _case(node: _Node) -> CaseSpec:
    if not isinstance(node.value, Mapping):
        return CaseSpec(id=_name(node, "case id"))
    keys = _keys(node, ("id", "timeout", "params"), required=("id",))
    timeout = _case_timeout(keys["timeout"]) if "timeout" in keys else None
    params = _params(keys["params"]) if "params" in keys else {}
    return CaseSpec(id=_name(keys["id"], "case id"), timeout=timeout, params=params)


def _case_timeout(node: _Node) -> float:
    # null cannot mean "no limit" here: None already means "the sweep's timeout" everywhere
    # a job's timeout is worked out, and a second spelling of "none" invites mistakes.
    if node.value is None:
        raise node.error(
            f"{node.label}: expected a duration; a case cannot lift the sweep's timeout "
            "(give it a long one, e.g. 24h)"
        )
    return _positive_duration(node)


def _params(node: _Node) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, value in _string_keyed(node):
        # bool before int (bool is an int); plain types, not ruamel's formatted subclasses.
        for plain in (bool, int, float, str):
            if isinstance(value.value, plain):
                params[key.value] = plain(value.value)
                break
        else:
            raise value.type_error("a string, number or boolean")
    return params


def _discovered_cases(node: _Node) -> tuple[CaseSpec, ...]:
    keys = _keys(node, ("dir", "glob"), required=("dir", "glob"))
    directory = _path(keys["dir"])
    pattern = _string(keys["glob"])
    if not directory.is_dir():
        raise keys["dir"].error(f"cases.dir: {directory} is not a directory")
    try:
        # Hidden entries (.DS_Store, .git) are never meant as cases.
        entries = [p for p in directory.glob(pattern) if not p.name.startswith(".")]
    except (ValueError, NotImplementedError) as exc:
        raise keys["glob"].error(f"cases.glob: {exc}") from None
    if not entries:
        raise keys["glob"].error(f"cases.glob: nothing in {directory} matches {pattern!r}")
    found: dict[str, Path] = {}
    for entry in sorted(entries):
        ident = entry.name if entry.is_dir() else entry.stem
        if any(c in ident for c in "\0\n\r"):
            raise keys["glob"].error(f"cases.glob: case id {ident!r} contains a line break")
        if ident in found:
            raise keys["glob"].error(
                f"cases.glob: {found[ident].name} and {entry.name} both give case id {ident!r}"
            )
        found[ident] = entry
    ids = sorted(found)
    return tuple(CaseSpec(id=ident) for ident in ids)


def _models(node: _Node) -> tuple[ModelSpec, ...]:
    if not isinstance(node.value, list):
        raise node.type_error("a list of model ids or objects")
    if not node.value:
        raise node.error("models: is empty (a sweep needs at least one model)")
    items = list(node.elements())
    specs = [_model(item) for item in items]
    _check_unique(items, [spec.id for spec in specs], "model")
    return tuple(specs)


def _model(node: _Node) -> ModelSpec:
    if not isinstance(node.value, Mapping):
        return ModelSpec(id=_name(node, "model id"))
    keys = _keys(node, ("id", "max_concurrent", "env"), required=("id",))
    env, templates = _env(keys["env"]) if "env" in keys else ({}, {})
    limit = _optional_limit(keys["max_concurrent"]) if "max_concurrent" in keys else None
    return ModelSpec(
        id=_name(keys["id"], "model id"), max_concurrent=limit, env=env, env_templates=templates
    )


def _check_unique(nodes: Sequence[_Node], ids: Sequence[str], what: str) -> None:
    """A repeated case or model id would make two jobs with the same (case, model) pair."""
    first: dict[str, _Node] = {}
    for node, ident in zip(nodes, ids, strict=True):
        if ident in first:
            raise node.error(
                f"{node.label}: duplicate {what} id {ident!r} (first at line "
                f"{first[ident].line + 1}); every (case, model) pair must be unique"
            )
        first[ident] = node


# --- the key table ---------------------------------------------------------------------------


@attrs.frozen
class _Key:
    convert: Callable[[_Node], Any]
    #: The ``Sweep`` fields a tuple result is spread over; empty: the field named as the key.
    fields: tuple[str, ...] = ()


_KEYS: dict[str, _Key] = {
    "name": _Key(_optional_name),
    "output": _Key(_path),
    "cases": _Key(_cases),
    "models": _Key(_models),
    "command": _Key(_command),
    "env": _Key(_env, fields=("env", "env_templates")),
    "timeout": _Key(_time_limit),
    "kill_grace": _Key(_duration),
    "max_concurrent": _Key(_integer(1)),
    "stagger": _Key(_duration),
    "order": _Key(_order),
    "retries": _Key(_integer(0)),
    "retry_backoff": _Key(_duration),
    "non_model_categories": _Key(_categories),
    "log_patterns": _Key(_log_patterns),
    "summary_interval": _Key(_duration),
}
REQUIRED_KEYS = ("cases", "models", "command")


def _check_case_params(nodes: Mapping[str, _Node], fields: Mapping[str, Any]) -> None:
    """Every ``{params.NAME}`` in the command must be set by every case."""
    for item in nodes["command"].elements():
        if not isinstance(item.value, str):
            continue
        for field, _, _ in _format_fields(item):
            if not field.startswith(_PARAMS):
                continue
            name = field[len(_PARAMS) :]
            missing = [case.id for case in fields["cases"] if name not in case.params]
            if missing:
                more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
                raise item.error(
                    f"{item.label}: {{{field}}} is not set for case {missing[0]!r}{more} "
                    f"(every case needs params: {{{name}: ...}})"
                )


#: Checks that need more than one key, run after every key converted.
_CHECKS: tuple[Callable[[Mapping[str, _Node], Mapping[str, Any]], None], ...] = (
    _check_case_params,
)


# --- loading ---------------------------------------------------------------------------------


def load_sweep(path: Path | str, *, environ: Mapping[str, str] | None = None) -> Sweep:
    """Read and check the sweep file at ``path``; raise ``SweepError`` on the first problem.

    ``${VAR}`` in env values comes from ``environ`` (default ``os.environ``); relative paths
    (``output``, ``cases.dir``) are relative to the sweep file's directory.
    """
    file = str(path)
    path = Path(path)
    data, lines = _read_yaml(path, file)
    doc = _Document(file, lines, path.parent, os.environ if environ is None else environ)
    if not isinstance(data, Mapping):
        got = "empty" if data is None else _type_name(data)
        lc = getattr(data, "lc", None)  # a scalar document has no position of its own
        line, col = (lc.line + 1, lc.col + 1) if lc is not None else (1, 1)
        raise SweepError(
            f"{file}:{line}:{col}: the sweep file must be a mapping of keys "
            f"(cases, models, command, ...); it is {got}"
        )
    top = _Node(data, "", data.lc.line, data.lc.col, doc)
    nodes = _keys(top, list(_KEYS), REQUIRED_KEYS)
    fields: dict[str, Any] = {"output": (path.parent / "runs").resolve()}
    for key, node in nodes.items():
        spec = _KEYS[key]
        value = spec.convert(node)
        if spec.fields:
            fields.update(zip(spec.fields, value, strict=True))
        else:
            fields[key] = value
    for check in _CHECKS:
        check(nodes, fields)
    return Sweep(path=path, **fields)


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
    try:
        data = YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "cannot parse"
        if exc.problem and exc.context and exc.context_mark:
            problem += f" ({exc.context} at line {exc.context_mark.line + 1})"
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "1:1"
        raise SweepError(f"{file}:{where}: not valid YAML: {problem}") from None
    except YAMLError as exc:
        raise SweepError(f"{file}: not valid YAML: {exc}") from None
    return data, re.split(r"\r\n|\r|\n", text)


# --- the snapshot ----------------------------------------------------------------------------


def sweep_snapshot(sweep: Sweep) -> str:
    """The resolved sweep as YAML, for ``sweep.yaml`` in the batch dir: every key, durations
    in seconds, cases and models as objects, discovered cases listed. ``load_sweep`` reads it
    back. Env values written as ``${VAR}`` stay so; other secret-named values are redacted,
    so the snapshot never holds a secret.
    """
    data = {
        "name": sweep.name,
        "output": str(sweep.output),
        "cases": [_case_snapshot(case) for case in sweep.cases],
        "models": [
            {
                "id": model.id,
                "max_concurrent": model.max_concurrent,
                "env": _env_snapshot(model.env, model.env_templates),
            }
            for model in sweep.models
        ],
        "command": list(sweep.command),
        "env": _env_snapshot(sweep.env, sweep.env_templates),
        "timeout": _seconds(sweep.timeout),
        "kill_grace": _seconds(sweep.kill_grace),
        "max_concurrent": sweep.max_concurrent,
        "stagger": _seconds(sweep.stagger),
        "order": sweep.order,
        "retries": sweep.retries,
        "retry_backoff": _seconds(sweep.retry_backoff),
        "non_model_categories": sorted(sweep.non_model_categories),
        "log_patterns": {category: list(p) for category, p in sweep.log_patterns.items()},
        "summary_interval": _seconds(sweep.summary_interval),
    }
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # keep the documented key order
    yaml.width = 1 << 16  # never fold a long id across lines
    stream = io.StringIO()
    yaml.dump(data, stream)
    return "# Resolved sweep (batch-ledger): durations in seconds, secrets redacted.\n" + (
        stream.getvalue()
    )


def _case_snapshot(case: CaseSpec) -> dict[str, Any]:
    snapshot: dict[str, Any] = {"id": case.id}
    if case.timeout is not None:  # absent: the sweep's timeout applies
        snapshot["timeout"] = _seconds(case.timeout)
    snapshot["params"] = dict(case.params)
    return snapshot


def _env_snapshot(env: Mapping[str, str], templates: Mapping[str, str]) -> dict[str, str]:
    snapshot = {}
    for name, value in env.items():
        template = templates.get(name)
        if template is not None and secrets.references(template):
            snapshot[name] = template
        elif secrets.is_secret_name(name):
            snapshot[name] = secrets.REDACTED
        else:
            snapshot[name] = secrets.escape_references(value)
    return snapshot


def _seconds(seconds: float | None) -> float | int | None:
    if seconds is None or not float(seconds).is_integer():
        return seconds
    return int(seconds)
