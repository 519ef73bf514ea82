"""Secrets: ${VAR} expansion, which names count as secret, and redaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batch.sweep.secrets import (
    REDACTED,
    KeptEnd,
    escape_references,
    expand_references,
    is_secret_name,
    read_end,
    redact_env,
    redact_text,
    redactor,
    references,
    secret_values,
)


@pytest.mark.parametrize(
    "name",
    [
        "API_KEY",
        "OPENAI_API_KEY",
        "openai_api_key",
        "apiKey",
        "APIKey",
        "openaiApiKey",
        "x-api-key",
        "APIKEY",
        "AWS_ACCESS_KEY_ID",
        "HF_TOKEN",
        "GITHUBTOKEN",
        "CLIENT_SECRET",
        "DB_PASSWORD",
        "PGPASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "PROXY_AUTHORIZATION",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "MONKEY",
        "monkey",
        "WHISKEY_BRAND",
        "KEYBOARD_LAYOUT",
        "TOKENIZERS_PARALLELISM",
        "MAX_TOKENS",
        "PATH",
        "HOME",
        "BASE_URL",
        "PASSAGE",
    ],
)
def test_names_that_only_look_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_redact_env_hides_secret_named_values_only() -> None:
    env = {"OPENAI_API_KEY": "sk-123", "BASE_URL": "http://x", "MONKEY": "banana"}
    assert redact_env(env) == {
        "OPENAI_API_KEY": REDACTED,
        "BASE_URL": "http://x",
        "MONKEY": "banana",
    }


def test_redact_text_hides_every_occurrence_of_every_secret() -> None:
    text = "auth sk-abcdef failed; retry with sk-abcdef and tok-999"
    assert redact_text(text, ["sk-abcdef", "tok-999"]) == (
        f"auth {REDACTED} failed; retry with {REDACTED} and {REDACTED}"
    )


def test_redact_text_hides_a_secret_that_contains_another_whole() -> None:
    assert redact_text("key=abcd1234", ["abcd", "abcd1234"]) == f"key={REDACTED}"


def test_redact_text_leaves_values_shorter_than_four_characters() -> None:
    assert redact_text("yes it is 1", ["yes", "1", ""]) == "yes it is 1"


def test_redact_text_treats_secrets_as_literal_text_not_patterns() -> None:
    assert redact_text("a.b*c and axbbc", ["a.b*c"]) == f"{REDACTED} and axbbc"


def test_secret_values_come_from_environ_and_each_mapping() -> None:
    environ = {"HF_TOKEN": "hf_environ", "HOME": "/root", "EMPTY_TOKEN": ""}
    sweep_env = {"DB_PASSWORD": "hunter22", "MODE": "fast"}
    model_env = {"apiKey": "model-key"}
    assert secret_values(sweep_env, model_env, environ=environ) == {
        "hf_environ",
        "hunter22",
        "model-key",
    }


def test_secret_values_read_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCH_LEDGER_TEST_TOKEN", "from-the-environment")
    assert "from-the-environment" in secret_values()


def test_expand_whole_and_embedded_references() -> None:
    environ = {"TOKEN": "t0k3n", "HOST": "example.org"}
    assert expand_references("${TOKEN}", environ) == "t0k3n"
    assert expand_references("Bearer ${TOKEN}", environ) == "Bearer t0k3n"
    assert expand_references("https://${HOST}/${TOKEN}", environ) == "https://example.org/t0k3n"


def test_expand_leaves_text_without_references_alone() -> None:
    assert expand_references("pa$$word $HOME {x}", {}) == "pa$$word $HOME {x}"


def test_double_dollar_brace_is_a_literal() -> None:
    assert expand_references("$${TOKEN}", {"TOKEN": "t"}) == "${TOKEN}"
    assert references("$${TOKEN} ${OTHER}") == ["OTHER"]


def test_escape_references_round_trips_literal_text() -> None:
    literal = "cost: ${PRICE} and $${X}"
    assert expand_references(escape_references(literal), {}) == literal


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("${NOT_SET}", "environment variable NOT_SET is not set"),
        ("x ${OPEN", "unterminated"),
        ("${VAR:-default}", "not a variable reference"),
        ("${}", "not a variable reference"),
        ("${1ABC}", "not a variable reference"),
    ],
)
def test_expand_rejects_bad_references(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand_references(template, {})


# --- cuts (issue 27) ---------------------------------------------------------------------------

_SECRET_CHARS = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=4, max_size=40)
_FILLER = st.text("xyz .\n", max_size=60)


@given(_SECRET_CHARS, _SECRET_CHARS, _FILLER, _FILLER, st.data())
def test_no_cut_of_a_text_leaves_a_piece_of_a_secret(
    first: str, second: str, before: str, after: str, data: st.DataObject
) -> None:
    # The secrets' characters never occur in the filler: whatever of them is left after
    # redaction (but the marker) is a piece of a secret, and every character of filler in
    # the window is kept, in order.
    text = before + first + after + second + before
    raw = text.encode()
    redact = redactor([first, second])
    start = data.draw(st.integers(0, len(raw)))
    begin = max(0, start - redact.margin)  # what a reader of the window reads before it
    shown = redact.tail(raw[begin:], start - begin)
    filler = "".join(ch for ch in raw[start:].decode() if ch in "xyz .\n")
    assert shown.replace(REDACTED, "") == filler
    limit = data.draw(st.integers(1, 80))
    cut = redact.cut(text, limit)
    assert len(cut) <= limit
    assert set(cut.replace(REDACTED, "").rstrip("\N{HORIZONTAL ELLIPSIS}")) <= set(
        "xyz .\n" + REDACTED
    )


KEY = "sk-proj-ABCDEF"


def test_a_window_hides_whole_the_secret_its_cut_falls_in() -> None:
    redact = redactor([KEY])
    text = ("before " + KEY + " sent; " + KEY).encode()
    cut = text.index(b"ABCDEF")  # the window starts inside the first key
    assert redact.tail(text, cut) == "[REDACTED] sent; [REDACTED]"
    margin = text[cut - redact.margin :] if cut > redact.margin else text
    assert redact.tail(margin, len(margin) - len(text) + cut) == "[REDACTED] sent; [REDACTED]"
    assert redact.tail(b"ABCDEF ok", 0) == "ABCDEF ok"  # nothing before it: not a cut
    # A character cut in two at the window's start is kept whole, and found in its secret.
    accented = "\u00e9t\u00e9-secret"
    assert redactor([accented]).tail(f"x{accented}!".encode(), 2) == "[REDACTED]!"
    assert redact.cut("x" * 10 + KEY, 15) == "xxxxxxxxxx[RED\N{HORIZONTAL ELLIPSIS}"


def test_the_kept_end_of_a_stream_hides_a_secret_its_cut_falls_in() -> None:
    redact = redactor([KEY])
    kept = KeptEnd(8, redact)
    for chunk in (b"noise " * 20, KEY.encode()[:5], KEY.encode()[5:], b" done"):
        kept.add(chunk)
    assert kept.text() == "[REDACTED] done"
    assert len(kept.data) == 8 + redact.margin


def test_read_end_reads_the_margin_before_the_window(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a" * 100 + KEY.encode() + b" tail\n")
    size = path.stat().st_size
    with path.open("rb") as handle:
        assert read_end(handle, 10, redactor([KEY])) == ("[REDACTED] tail\n", size - 10)
    with path.open("rb") as handle:  # nothing before the offset is read: not the key's
        assert read_end(handle, 10, redactor([KEY]), offset=size - 6) == (" tail\n", 0)


@pytest.mark.parametrize("start", range(9))
def test_a_window_cut_inside_a_run_of_one_secret_shows_no_piece_of_it(start: int) -> None:
    """Found by the property above: "0000" twice is "00000000"; a window cut at 5 was
    searched from 1, matched "0000" at 1-5 and showed "000"."""
    redact = redactor(["0000"])
    raw = b"00000000"
    begin = max(0, start - redact.margin)
    assert redact.tail(raw[begin:], start - begin).replace(REDACTED, "") == ""


def test_overlapping_secrets_leave_no_piece_of_either() -> None:
    """Two secrets that overlap in a text: hidden as one span, neither's end left out."""
    redact = redactor(["AAAB0", "B0BBB"])
    assert redact("x AAAB0BBB y") == f"x {REDACTED} y"
    assert redact("x AAAB0 y") == f"x {REDACTED} y"
