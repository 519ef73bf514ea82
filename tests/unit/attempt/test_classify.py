"""An attempt's outcome follows the rules of docs/ledger.md ("How the driver classifies a run"):
the first rule that applies wins."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from batch.attempt.classify import (
    MAX_REASON_CHARS,
    MAX_SAID_CHARS,
    Classification,
    classify,
    finish_reason,
    last_line,
)
from batch.sweep.load import DEFAULT_LOG_PATTERNS
from batch.sweep.secrets import redactor


def run(
    *,
    timed_out: bool = False,
    exit_code: int | None = 0,
    signal: int | None = None,
    result: Any = None,
    log: str | Callable[[], str] = "",
    **kwargs: Any,
) -> Classification:
    if result is not None and not isinstance(result, bytes | OSError):
        result = json.dumps(result).encode()
    return classify(
        timed_out=timed_out,
        exit_code=exit_code,
        signal=signal,
        result_json=result,
        log_text_tail=log,
        log_patterns=kwargs.pop("log_patterns", DEFAULT_LOG_PATTERNS),
        **kwargs,
    )


def unread_log() -> str:
    raise AssertionError("the log was read")


def summary(c: Classification) -> tuple[str, str | None, str]:
    return (c.outcome, c.failure_category, c.stop_reason)


def test_a_timeout_is_an_infra_error_whatever_the_job_reported() -> None:
    c = run(timed_out=True, exit_code=None, signal=15, result={"outcome": "passed"}, log="429")
    assert summary(c) == ("error", "infra_failure", "timeout")


@pytest.mark.parametrize(
    ("exit_code", "signal", "expected"),
    [
        (0, None, ("passed", None, "exit")),
        (1, None, ("failed", "model_failure", "exit")),
        (2, None, ("error", "infra_failure", "exit")),
        (137, None, ("error", "infra_failure", "exit")),
        (None, 9, ("error", "infra_failure", "signal")),
    ],
)
def test_exit_status_decides_without_a_result_file(
    exit_code: int | None, signal: int | None, expected: tuple[str, str | None, str]
) -> None:
    assert summary(run(exit_code=exit_code, signal=signal)) == expected


@pytest.mark.parametrize(
    ("exit_code", "signal", "log", "reason"),
    [
        (0, None, "", "exit code 0"),
        (1, None, "", "exit code 1"),
        (2, None, "", "exit code 2"),
        (None, 9, "", "killed by signal 9"),
        (1, None, "HTTP 429\n", "exit code 1; output.log matches '429'"),
    ],
)
def test_the_reason_names_the_rule_and_its_evidence(
    exit_code: int | None, signal: int | None, log: str, reason: str
) -> None:
    assert run(exit_code=exit_code, signal=signal, log=log).reason == reason


def test_result_file_outcome_wins_over_the_exit_code() -> None:
    c = run(exit_code=3, result={"outcome": "passed", "failure_category": None, "score": 0.9})
    assert summary(c) == ("passed", None, "exit")
    assert c.result == {"score": 0.9}


def test_a_pass_in_result_file_has_no_category_even_when_it_names_one() -> None:
    # A category says why a run failed; on a pass it would count the run as a failure.
    c = run(exit_code=0, result={"outcome": "passed", "failure_category": "api_or_credit"})
    assert (c.outcome, c.failure_category) == ("passed", None)
    assert c.reason == "result.json says passed"


def test_result_file_category_is_kept() -> None:
    c = run(exit_code=0, result={"outcome": "failed", "failure_category": "wrong_format"})
    assert (c.outcome, c.failure_category) == ("failed", "wrong_format")


@pytest.mark.parametrize("category", ["task_data", "api_or_credit"])
def test_a_job_reporting_failed_for_a_non_model_reason_is_recorded_as_error(
    category: str,
) -> None:
    # The record alone says the model is not to blame; the job's own word is kept.
    c = run(exit_code=1, result={"outcome": "failed", "failure_category": category, "n": 1})
    assert (c.outcome, c.failure_category) == ("error", category)
    assert c.result == {"n": 1, "reported_outcome": "failed"}


def test_a_category_the_sweep_counts_as_the_models_keeps_failed() -> None:
    c = run(
        result={"outcome": "failed", "failure_category": "task_data"},
        non_model_categories=("api_or_credit",),
    )
    assert (c.outcome, c.failure_category) == ("failed", "task_data")


@pytest.mark.parametrize(
    ("outcome", "category"), [("failed", "model_failure"), ("error", "infra_failure")]
)
def test_result_file_without_category_gets_the_default_one(outcome: str, category: str) -> None:
    c = run(result={"outcome": outcome}, log="429 rate limit")
    assert (c.outcome, c.failure_category) == (outcome, category)


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[1, 2]",
        b'{"outcome": "great"}',
        b'{"outcome": "failed", "failure_category": 3}',
    ],
)
def test_an_invalid_result_file_is_an_infra_error_with_the_reason(content: bytes) -> None:
    c = run(exit_code=0, result=content)
    assert (c.outcome, c.failure_category) == ("error", "infra_failure")
    assert "result.json" in c.result["classification_error"]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"[1, 2]", "a JSON list, not an object"),
        (b'{"outcome": "great"}', "outcome 'great' is not one of error, failed, passed"),
        (b'{"outcome": 1}', "outcome 1 is not one of error, failed, passed"),
        (
            b'{"outcome": "failed", "failure_category": 3}',
            "failure_category is a int, not a string",
        ),
        (
            b'{"outcome": "failed", "failure_category": "\\ud800"}',
            "failure_category is not valid Unicode text (a lone surrogate)",
        ),
        (PermissionError(13, "Permission denied"), "cannot read it: Permission denied"),
        (OSError("disk gone"), "cannot read it: disk gone"),
    ],
)
def test_an_invalid_result_file_says_what_is_wrong_with_it(
    content: bytes | OSError, why: str
) -> None:
    c = run(exit_code=0, result=content)
    assert c.reason == c.result["classification_error"] == f"invalid result.json: {why}"


def test_a_result_file_that_is_not_json_quotes_the_parser() -> None:
    reason = run(exit_code=0, result=b"{not json").reason
    assert reason.startswith("invalid result.json: not JSON (") and reason.endswith(")")
    assert len(reason) > len("invalid result.json: not JSON ()")


def test_a_result_file_outcome_is_read_in_any_case() -> None:
    c = run(exit_code=0, result={"outcome": "FAILED", "failure_category": "wrong_format"})
    assert (c.outcome, c.failure_category, c.reason) == (
        "failed", "wrong_format", "result.json says failed"
    )  # fmt: skip


def test_an_unreadable_result_file_is_an_infra_error() -> None:
    c = run(exit_code=0, result=PermissionError(13, "Permission denied"))
    assert (c.outcome, c.failure_category) == ("error", "infra_failure")
    assert "Permission denied" in c.result["classification_error"]


def test_rate_limit_in_the_log_makes_a_failure_an_api_error() -> None:
    # The record alone must say the model is not to blame: outcome error, not failed.
    c = run(exit_code=1, log="...\nError: 429 Too Many Requests (Rate Limit)\n")
    assert (c.outcome, c.failure_category) == ("error", "api_or_credit")
    assert "429" in c.reason


def test_a_log_pattern_outcome_follows_the_sweeps_non_model_categories() -> None:
    patterns = {"judge_rejected": ["rejected"]}
    crash = run(exit_code=2, log="judge: rejected", log_patterns=patterns)
    assert (crash.outcome, crash.failure_category) == ("failed", "judge_rejected")
    counted = run(
        exit_code=1,
        log="judge: rejected",
        log_patterns=patterns,
        non_model_categories={"judge_rejected"},
    )
    assert (counted.outcome, counted.failure_category) == ("error", "judge_rejected")


def test_a_category_without_patterns_leaves_the_others_in_force() -> None:
    patterns = {"task_data": [], "api_or_credit": ["quota"]}
    c = run(exit_code=1, log="quota exceeded", log_patterns=patterns)
    assert (c.outcome, c.failure_category) == ("error", "api_or_credit")


def test_without_patterns_a_failing_job_never_reads_its_log() -> None:
    for patterns in ({}, {"api_or_credit": []}):
        c = run(exit_code=1, log=unread_log, log_patterns=patterns)
        assert (c.outcome, c.failure_category) == ("failed", "model_failure")


def test_log_patterns_are_case_insensitive_and_first_category_wins() -> None:
    patterns = {"task_data": ["MISSING FIXTURE"], "api_or_credit": ["quota"]}
    c = run(exit_code=2, log="quota exceeded; missing fixture", log_patterns=patterns)
    assert c.failure_category == "task_data"


def test_a_passing_job_never_reads_its_log() -> None:
    assert run(exit_code=0, log=unread_log).outcome == "passed"


def test_a_job_that_could_not_start_is_an_infra_error_with_the_reason() -> None:
    c = run(exit_code=None, start_error="cannot start 'agent': No such file")
    assert summary(c) == ("error", "infra_failure", "exit")
    assert c.result == {"start_error": "cannot start 'agent': No such file"}


@pytest.mark.parametrize(
    "log",
    [
        "took 14290 ms\n",
        "request id 7fa429be\n",
        "retrying in 4290s\n",
        "HTTP4291\n",
        "payment 402000 tokens, 5030 bytes\n",
        # A digit before the pattern too: a model's wrong row count is the model's failure.
        "expected 1429 rows, got 12\n",
        "at offset 9402\n",
    ],
)
def test_a_number_pattern_never_matches_inside_a_longer_number_or_id(log: str) -> None:
    patterns = {"api_or_credit": ["429", "402"], "infra_failure": ["503"]}
    c = run(exit_code=1, log=log, log_patterns=patterns)
    assert (c.outcome, c.failure_category) == ("failed", "model_failure")


def test_a_pattern_with_words_and_a_number_at_one_end_matches_only_that_whole_number() -> None:
    patterns = {"api_or_credit": ["code 5", "5 retries"]}
    for log in ("code 50\n", "15 retries left\n"):
        assert run(exit_code=1, log=log, log_patterns=patterns).failure_category == "model_failure"
    for log in ("code 5.\n", "after 5 retries\n"):
        assert run(exit_code=1, log=log, log_patterns=patterns).failure_category == "api_or_credit"


@pytest.mark.parametrize(
    ("log", "category"),
    [
        ("HTTP 429\n", "api_or_credit"),
        ("status=429, retry\n", "api_or_credit"),
        ("error code: 402\n", "api_or_credit"),
        ("(503) Service Unavailable\n", "infra_failure"),
        ("Rate limited by upstream\n", "api_or_credit"),
    ],
)
def test_a_pattern_matches_a_whole_number_and_a_word_prefix(log: str, category: str) -> None:
    patterns = {"api_or_credit": ["429", "402", "rate limit"], "infra_failure": ["503"]}
    c = run(exit_code=1, log=log, log_patterns=patterns)
    assert c.failure_category == category


# --- reasons and usage ----------------------------------------------------------------------


def test_a_timeout_names_the_limit_that_ran_out() -> None:
    assert run(timed_out=True).reason == "timeout"  # no limit given: nothing to name
    assert run(timed_out=True, timeout=60).reason == "timeout after 1m00s"
    assert run(timed_out=True, timeout=0.5).reason == "timeout after 0.5s"


def test_the_jobs_own_reason_in_result_json_is_what_it_said() -> None:
    said = run(exit_code=1, result={"outcome": "failed", "reason": "score 0.2 below 0.5"})
    assert said.said == "score 0.2 below 0.5"
    assert said.result == {"reason": "score 0.2 below 0.5"}  # kept where it always was
    assert run(exit_code=1, result={"outcome": "failed", "reason": 3}).said is None


def test_usage_in_result_json_is_not_one_of_the_jobs_result_keys() -> None:
    c = run(result={"outcome": "passed", "score": 1, "usage": {"requests": 1}})
    assert c.result == {"score": 1}


def test_a_finish_reason_is_the_cause_then_what_the_job_said_on_one_short_line() -> None:
    assert finish_reason("exit code 1", None) == "exit code 1"
    assert (
        finish_reason("exit code 1", "  KeyError:\t'answer'  ") == "exit code 1: KeyError: 'answer'"
    )
    long = finish_reason("exit code 1", "x" * 10_000)
    assert len(long) == len("exit code 1: ") + MAX_SAID_CHARS
    assert long.endswith("x\N{HORIZONTAL ELLIPSIS}")
    assert len(finish_reason("y" * 10_000, None)) == MAX_REASON_CHARS


def test_the_limits_are_the_documented_ones() -> None:
    # docs/ledger.md: the job's part is cut to 200 characters and the whole reason to 400.
    assert (MAX_SAID_CHARS, MAX_REASON_CHARS) == (200, 400)


def test_a_reason_exactly_at_its_limit_is_kept_whole() -> None:
    said = "x" * MAX_SAID_CHARS
    assert finish_reason("exit code 1", said) == f"exit code 1: {said}"
    cause = "y" * MAX_REASON_CHARS
    assert finish_reason(cause, None) == cause


def test_the_last_line_is_the_last_with_something_on_it() -> None:
    assert last_line("first\nsecond\n\n  \n\r\n") == "second"
    assert last_line("only, no newline") == "only, no newline"
    assert last_line("\n \n") is None
    assert last_line("") is None


def test_a_reason_is_redacted_before_it_is_cut() -> None:
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    redact = redactor([key, "two\nlines-secret"])
    reason = finish_reason("exit code 1", "x" * 156 + key, redact)
    assert reason == "exit code 1: " + "x" * 156 + "[REDACTED]"
    # Before the cut of the quote (200) and of the whole reason: nothing of the key is left.
    assert key[:8] not in finish_reason("exit code 1", "y" * 195 + key, redact)
    # A secret holding a line break is hidden before the white space is folded.
    assert "lines-secret" not in finish_reason("exit code 1", "the two\nlines-secret", redact)


def test_parsing_a_reported_result_leaves_the_object_as_it_was() -> None:
    from batch.attempt.classify import parse_result_object

    raw = {"outcome": "failed", "failure_category": "model_failure", "usage": {"input_tokens": 1}}
    assert parse_result_object(raw) == ("failed", "model_failure", {})
    assert raw == {
        "outcome": "failed",
        "failure_category": "model_failure",
        "usage": {"input_tokens": 1},
    }
