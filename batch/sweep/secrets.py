"""Secrets in a sweep: how they get in (``${VAR}`` in env values) and how they are kept out.

A sweep file should never have to hold an API key: an env value may say ``${OPENAI_API_KEY}``
(or ``Bearer ${TOKEN}``) and ``expand_references`` fills it in from the driver's environment
at load time. Whether a value is secret is decided by its variable's *name*
(``is_secret_name``); ``redact_env`` hides such values in anything shown or written, and
``redact_text`` hides the values themselves wherever they appear in free text (logs,
events, error messages), ``redact_value`` in every string of a JSON value (records,
``check.json``); ``redactor`` makes one such function for many texts, which also redacts
before it cuts (``Redactor.cut``). A window of a longer text (a log's tail, the end of a
worker's stderr) is redacted with the text before its cut (``Redactor.tail``, ``read_end``,
``KeptEnd``), then cut: a secret the cut falls in is hidden whole. The rules are
documented in ``docs/sweep-file.md``.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

REDACTED = "[REDACTED]"
#: Shorter values are not redacted from text: "1", "yes" or "dev" would blank out
#: ordinary words everywhere while protecting nothing.
MIN_SECRET_LENGTH = 4

# A name is split into word parts at "_", "-", ".", digits and camelCase boundaries
# ("OPENAI_API_KEY" -> OPENAI API KEY, "apiKey" -> api Key, "APIKey" -> API Key).
_WORD_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# KEY counts only as a whole part: too many words merely end in it (MONKEY, HOCKEY,
# WHISKEY); the run-together spellings people really use are listed instead.
_KEY_PARTS = frozenset({"KEY", "KEYS", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY"})
# These also count at the end of a part (GITHUBTOKEN, CLIENTSECRET, DBPASSWORD). TOKENS is
# left out on purpose: MAX_TOKENS and NUM_TOKENS hold counts, and redacting "4096" from
# every log would hide real information.
_SECRET_SUFFIXES = (
    "TOKEN",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTHORIZATION",
)

_REFERENCE = re.compile(r"\$\$\{|\$\{([^}]*)(\})?")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_secret_name(name: str) -> bool:
    """True when an environment variable called ``name`` presumably holds a secret.

    Case-insensitive, by word part: ``API_KEY``, ``OPENAI_API_KEY``, ``apiKey``,
    ``HF_TOKEN``, ``GITHUBTOKEN``, ``DB_PASSWORD``, ``GOOGLE_APPLICATION_CREDENTIALS`` are
    secret; ``MONKEY``, ``KEYBOARD_LAYOUT``, ``TOKENIZERS_PARALLELISM``, ``MAX_TOKENS`` are not.
    """
    for part in _WORD_PART.findall(name):
        word = part.upper()
        if word in _KEY_PARTS or word.endswith(_SECRET_SUFFIXES):
            return True
    return False


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with the value of every secret-named variable replaced."""
    return {name: REDACTED if is_secret_name(name) else value for name, value in env.items()}


class Redactor:
    """Hides every occurrence of a secret value (``min_length`` or longer) in a text.

    Call it on a whole text. A window of a longer one (the tail of a file) is
    :meth:`tail`'s, read with a :attr:`margin` before its cut, so that a secret the cut
    falls in is seen whole; :meth:`cut` shortens a text only after redacting it. So no cut
    leaves a secret's first or last characters behind.
    """

    def __init__(self, secrets: Iterable[str], *, min_length: int = MIN_SECRET_LENGTH) -> None:
        self._values = sorted({s for s in secrets if len(s) >= min_length}, key=len, reverse=True)
        # Longest first, so a secret that contains another is hidden whole.
        alternatives = "|".join(re.escape(v) for v in self._values)
        self._pattern = re.compile(alternatives) if self._values else None
        # Every place a secret starts, overlapping ones too: a lookahead matches empty.
        self._starts = re.compile(f"(?=({alternatives}))") if self._values else None

    def __call__(self, text: str) -> str:
        if self._pattern is None or self._pattern.search(text) is None:
            return text
        return self.after(text, 0)

    def _spans(self, text: str, start: int = 0) -> list[tuple[int, int]]:
        """Where ``text`` holds a secret, from ``start`` on (a search is one secret's
        length before it): every occurrence, overlapping ones joined into one span. Two
        secrets that overlap ("ABCD" and "CDEF" in "ABCDEF", or a run of one secret's
        characters) leave no piece of either outside, whatever the order they are found in."""
        assert self._starts is not None
        spans: list[tuple[int, int]] = []
        for match in self._starts.finditer(text, max(0, start - len(self._values[0]))):
            begin, end = match.start(), match.start() + len(match.group(1))
            if spans and begin < spans[-1][1]:
                spans[-1] = (spans[-1][0], max(spans[-1][1], end))
            else:
                spans.append((begin, end))
        return spans

    def cut(self, text: str, limit: int, mark: str = "\N{HORIZONTAL ELLIPSIS}") -> str:
        """``text`` redacted, then at most ``limit`` characters: its start and ``mark``."""
        text = self(text)
        return text if len(text) <= limit else text[: max(0, limit - len(mark))] + mark

    def shown(self, value: Any) -> str:
        """``repr`` of a value a job or a worker gave (a JSON value), its secrets hidden
        first: escaped, a secret holding a backslash, a quote or a control character is no
        longer the secret, and no redaction after would find it."""
        return repr(_redact_json(value, self))

    @property
    def margin(self) -> int:
        """Bytes of a text to read before a window of it (:meth:`tail`), so that a secret
        the window's cut falls in lies whole in what was read: the longest secret's
        length in UTF-8 at most (4 bytes a character)."""
        return 4 * len(self._values[0]) if self._values else 0

    def tail(self, data: bytes, start: int) -> str:
        """The text of ``data[start:]``, a window of a longer text, redacted with what
        ``data[:start]`` holds of the text before it: at least :attr:`margin` bytes, or all
        there was. A secret that the window's start cuts is found whole in the two and
        hidden as such, its marker opening the window: redacted first, then cut, as
        :meth:`cut` does at a text's end. A character cut in two at ``start`` is kept whole.
        """
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        before = decoder.decode(data[:start])  # an unfinished character waits for the rest
        return self.after(before + decoder.decode(data[start:], final=True), len(before))

    def after(self, text: str, start: int) -> str:
        """``text[start:]`` redacted as a part of ``text``: a secret that begins before
        ``start`` and ends after it becomes the marker at the start."""
        if self._pattern is None:
            return text[start:]
        pieces, kept = [], start
        for begin, end in self._spans(text, start):
            if end <= start:
                continue
            pieces += [text[kept:begin] if begin > kept else "", REDACTED]
            kept = end
        pieces.append(text[kept:])
        return "".join(pieces)


def read_end(
    handle: IO[bytes], limit: int, redact: Redactor, *, offset: int = 0
) -> tuple[str, int]:
    """The last ``limit`` bytes of an open file from ``offset`` on, as text redacted with
    the :attr:`Redactor.margin` before them (:meth:`Redactor.tail`), and how many bytes
    from ``offset`` were left out before them (0: the text is whole). Reads at most
    ``limit`` plus the margin, whatever the file holds or grows to meanwhile."""
    size = handle.seek(0, os.SEEK_END)
    start = max(offset, size - limit)
    begin = max(offset, start - redact.margin)
    handle.seek(begin)
    data = handle.read(size - begin)
    return redact.tail(data, start - begin), start - offset


class KeptEnd:
    """The end of a stream (a worker's stderr): its last ``limit`` bytes and the margin
    before them that :meth:`Redactor.tail` needs, so that :meth:`text` hides a secret
    the window's start cuts as a whole."""

    def __init__(self, limit: int, redact: Redactor) -> None:
        self._limit, self._redact = limit, redact
        self._keep = limit + redact.margin
        self.data = b""

    def add(self, chunk: bytes) -> None:
        data = self.data + chunk
        self.data = data[-self._keep :] if len(data) > self._keep else data

    def text(self) -> str:
        """The last ``limit`` bytes, redacted, as text."""
        return self._redact.tail(self.data, max(0, len(self.data) - self._limit))


def redactor(secrets: Iterable[str], *, min_length: int = MIN_SECRET_LENGTH) -> Redactor:
    """A :class:`Redactor` of ``secrets``: the pattern is built once here, so a caller
    redacting every line or event pays only for the substitution."""
    return Redactor(secrets, min_length=min_length)


#: Hides nothing: for texts shown where no secret is known.
NO_SECRETS = Redactor(())


def redact_text(text: str, secrets: Iterable[str], *, min_length: int = MIN_SECRET_LENGTH) -> str:
    """``text`` with every occurrence of a secret value (``min_length`` or longer) replaced."""
    return redactor(secrets, min_length=min_length)(text)


def redact_value(value: Any, secrets: Iterable[str]) -> Any:
    """A JSON value with every secret in its strings, keys included, replaced (``redact_text``)."""
    return _redact_json(value, redactor(secrets))


def _redact_json(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {_redact_json(k, redact): _redact_json(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(item, redact) for item in value]
    return value


def literal_secrets(data: Any) -> set[str]:
    """The string values of secret-named keys anywhere in a parsed YAML document.

    A value holding a ``${VAR}`` reference is left out: the reference is not the secret,
    and its message names it on purpose. Containers are visited once each, so an alias bomb
    costs no more than its text.
    """
    found: set[str] = set()
    seen: set[int] = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if not isinstance(item, Mapping | list) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Mapping):
            for name, value in item.items():
                if isinstance(value, str) and "${" not in value and is_secret_name(str(name)):
                    found.add(str(value))
            stack.extend(item.values())
        else:
            stack.extend(item)
    return found


def secret_values(
    *env_mappings: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> set[str]:
    """The values of secret-named variables in ``environ`` (default ``os.environ``) and in
    each of ``env_mappings`` (the sweep's env, each model's env) — what ``redact_text`` hides.
    """
    found: set[str] = set()
    for mapping in (os.environ if environ is None else environ, *env_mappings):
        found.update(value for name, value in mapping.items() if value and is_secret_name(name))
    return found


def references(template: str) -> list[str]:
    """The variable names ``template`` refers to as ``${NAME}`` (``$${`` is not a reference)."""
    return [m.group(1) for m in _REFERENCE.finditer(template) if m.group(0) != "$${"]


def expand_references(template: str, environ: Mapping[str, str], *, secret: bool = False) -> str:
    """``template`` with each ``${NAME}`` replaced by ``environ[NAME]`` and ``$${`` by ``${``.

    Raises ``ValueError`` for an unset variable, a reference that is not ``${NAME}``
    (``${VAR:-default}`` is not supported) and an unterminated ``${``. When ``secret`` (the
    template is the value of a secret-named variable, as written), the message shows none
    of the template's text, only the name of an unset variable it refers to.
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, closed = match.groups()
        if closed is None:
            where = "the value (not shown: secret)" if secret else repr(template)
            raise ValueError(f"unterminated '${{' in {where} (write $${{ for a literal ${{)")
        if not _VARIABLE_NAME.fullmatch(name):
            what = "a '${' in the value (not shown: secret)" if secret else f"'${{{name}}}'"
            raise ValueError(
                f"{what} is not a variable reference: write ${{NAME}} with NAME made "
                "of letters, digits and _ (no defaults); write $${ for a literal ${"
            )
        if name not in environ:
            raise ValueError(f"environment variable {name} is not set (referenced as ${{{name}}})")
        return environ[name]

    return _REFERENCE.sub(replace, template)


def escape_references(value: str) -> str:
    """``value`` written so that ``expand_references`` gives it back unchanged."""
    return value.replace("${", "$${")
