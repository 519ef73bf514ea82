"""The driver's side of the warm-worker protocol (docs/worker.md): pure decisions."""

from __future__ import annotations

import json

import pytest

from batch.attempt.worker_protocol import (
    MAX_ANSWER_BYTES,
    MAX_LOGGED_CHARS,
    Answer,
    Stray,
    WrongId,
    answer_usage,
    answer_verdict,
    died_verdict,
    read_stdout_line,
    request_line,
    unanswered_verdict,
    wrong_id_verdict,
)
from run_support.results import NON_MODEL_FAILURE_CATEGORIES
from run_support.worker import requests


def test_a_request_is_one_line_the_harness_side_reads_back_whole() -> None:
    line = request_line(
        "7",
        case="add-1",
        model="m/x",
        repeat=2,
        attempt=1,
        run_dir="/r/m_x/add-1.a1",
        params={"n": 1},
        env={"KEY": "v\nw", "ODD": "\udcff"},  # a line break and an undecodable byte
    )
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    (read,) = requests(iter([line.decode()]), answers=open("/dev/null", "w"))  # noqa: SIM115
    assert read["id"] == "7" and read["repeat"] == 2 and read["env"]["KEY"] == "v\nw"
    assert set(read) == {"id", "case", "model", "repeat", "attempt", "run_dir", "params", "env"}


def test_an_answer_to_a_request_in_flight_is_taken_with_its_fields() -> None:
    line = json.dumps({"id": "3", "outcome": "passed", "score": 0.5}).encode()
    assert read_stdout_line(line, {"3"}) == Answer("3", {"outcome": "passed", "score": 0.5})


@pytest.mark.parametrize(
    "line",
    [b"progress: 50%", b"{not json", b"[1, 2]", b'{"id": "3"}', b'{"outcome": "passed"}', b"\xff{"],
)
def test_a_line_that_is_not_an_answer_is_stray(line: bytes) -> None:
    assert isinstance(read_stdout_line(line, {"3"}), Stray)


def test_an_answer_whose_id_is_not_in_flight_is_a_wrong_id() -> None:
    assert read_stdout_line(b'{"id": "9", "outcome": "passed"}', {"3"}) == WrongId(
        "9", '{"id": "9", "outcome": "passed"}'
    )
    assert isinstance(read_stdout_line(b'{"id": 4, "outcome": "passed"}', {"3"}), WrongId)
    verdict = wrong_id_verdict(WrongId("9", ""), ["3"])
    assert (verdict.outcome, verdict.failure_category) == ("error", "infra_failure")
    assert verdict.reason == "the worker answered request id '9', not one in flight ('3')"


def test_an_answer_is_classified_as_a_result_json_would_be() -> None:
    cats = NON_MODEL_FAILURE_CATEGORIES
    passed = answer_verdict(Answer("1", {"outcome": "passed", "score": 1.0}), cats)
    assert (passed.outcome, passed.stop_reason, passed.result) == (
        "passed",
        "answer",
        {"score": 1.0},
    )
    limited = answer_verdict(
        Answer("1", {"outcome": "failed", "failure_category": "api_or_credit", "reason": "429"}),
        cats,
    )
    assert (limited.outcome, limited.said) == ("error", "429")
    odd = answer_verdict(Answer("1", {"outcome": "maybe"}), cats)
    assert (odd.outcome, odd.failure_category) == ("error", "infra_failure")
    assert odd.reason.startswith("invalid the worker's answer: outcome 'maybe'")


def test_an_answers_usage_is_read_and_a_bad_one_is_a_problem_not_an_outcome() -> None:
    assert answer_usage(Answer("1", {"usage": {"input_tokens": 3}})).usage.to_json() == {
        "input_tokens": 3
    }
    assert answer_usage(Answer("1", {})).usage.to_json() == {}
    assert answer_usage(Answer("1", {"usage": {"input_tokens": -1}})).problems


def test_a_worker_that_ended_before_answering_is_a_non_model_error() -> None:
    assert died_verdict(3).reason == "the worker exited with status 3 before answering"
    killed = died_verdict(-9)
    assert (killed.stop_reason, killed.reason) == (
        "signal",
        "the worker was killed by signal 9 before answering",
    )
    assert died_verdict(None, why="stopped").reason == "stopped"
    assert {died_verdict(1).outcome, died_verdict(1).failure_category} == {"error", "infra_failure"}


def test_a_request_without_an_answer_is_timed_out_or_never_sent() -> None:
    timed_out = unanswered_verdict(timeout=60.0)
    assert (timed_out.outcome, timed_out.stop_reason) == ("error", "timeout")
    assert timed_out.reason == "timeout after 1m00s"
    unsent = unanswered_verdict(start_error="cannot start 'x': no such file")
    assert (unsent.stop_reason, unsent.result) == ("exit", {"start_error": unsent.reason})


def test_an_answer_may_be_as_long_as_the_limit_and_not_a_byte_longer() -> None:
    head = b'{"id": "3", "outcome": "passed", "pad": "'
    tail = b'"}'
    exact = head + b"x" * (MAX_ANSWER_BYTES - len(head) - len(tail)) + tail
    assert len(exact) == MAX_ANSWER_BYTES
    assert isinstance(read_stdout_line(exact, {"3"}), Answer)
    longer = head + b"x" * (MAX_ANSWER_BYTES - len(head) - len(tail) + 1) + tail
    stray = read_stdout_line(longer, {"3"})
    assert isinstance(stray, Stray)
    assert stray.text == longer.decode()[:MAX_LOGGED_CHARS]


def test_a_stray_line_is_logged_without_its_line_end_and_cut() -> None:
    assert read_stdout_line(b"progress 10%\r", {"3"}) == Stray("progress 10%")
    assert read_stdout_line(b"MAX", {"3"}) == Stray("MAX")  # only the line end goes
    assert read_stdout_line(b"y" * 5000, set()) == Stray("y" * MAX_LOGGED_CHARS)
    wrong = read_stdout_line(
        b'{"id": "9", "outcome": "passed", "x": "' + b"z" * 3000 + b'"}', set()
    )
    assert isinstance(wrong, WrongId) and len(wrong.text) == MAX_LOGGED_CHARS


def test_a_wrong_id_names_every_request_in_flight_or_none() -> None:
    several = wrong_id_verdict(WrongId("9", ""), ["4", "3"])
    assert several.reason.endswith("not one in flight ('3', '4')")
    assert wrong_id_verdict(WrongId("9", ""), []).reason.endswith("not one in flight (none)")


def test_a_worker_that_exited_0_or_by_a_signal_before_answering_says_which() -> None:
    clean = died_verdict(0)
    assert (clean.stop_reason, clean.reason) == (
        "exit",
        "the worker exited with status 0 before answering",
    )
    assert died_verdict(3).stop_reason == "exit"
    assert died_verdict(-15).stop_reason == "signal"


def test_classifying_an_answer_leaves_its_usage_to_be_read() -> None:
    answer = Answer("1", {"outcome": "passed", "usage": {"output_tokens": 2}})
    assert answer_verdict(answer, NON_MODEL_FAILURE_CATEGORIES).outcome == "passed"
    assert answer_usage(answer).usage.to_json() == {"output_tokens": 2}
