"""Where a control request stands while its requester waits (``batch control``'s loop and
the view's): one decision over what the request file and the events say."""

from __future__ import annotations

import pytest

from batch.steering import Answer, answer_state

TAKEN = {"event": "control", "action": "pause", "outcome": "taken", "message": "paused"}
REFUSED = {"event": "control", "action": "skip", "outcome": "refused", "message": "no model x"}


def test_a_request_taken_and_answered_is_taken() -> None:
    assert answer_state(taken=True, said=TAKEN, now=1.0, deadline=5.0) is Answer.TAKEN


def test_an_answer_without_an_outcome_is_taken() -> None:
    said = {"event": "control", "action": "pause", "message": "paused"}
    assert answer_state(taken=True, said=said, now=1.0, deadline=5.0) is Answer.TAKEN


def test_a_request_the_driver_refused_is_refused() -> None:
    assert answer_state(taken=True, said=REFUSED, now=1.0, deadline=5.0) is Answer.REFUSED


def test_a_request_still_in_its_file_is_waited_for() -> None:
    assert answer_state(taken=False, said=None, now=1.0, deadline=5.0) is Answer.WAITING


def test_a_request_taken_but_not_yet_answered_is_waited_for() -> None:
    # The driver removes the file, then acts and writes its event: a moment between.
    assert answer_state(taken=True, said=None, now=1.0, deadline=5.0) is Answer.WAITING


def test_an_answer_while_the_file_is_still_there_is_someone_elses() -> None:
    # Another requester's same control answered; this one has not been read yet.
    assert answer_state(taken=False, said=TAKEN, now=1.0, deadline=5.0) is Answer.WAITING
    assert answer_state(taken=False, said=TAKEN, now=5.0, deadline=5.0) is Answer.TIMED_OUT


@pytest.mark.parametrize("taken", [False, True])
def test_no_answer_by_the_deadline_is_timed_out(taken: bool) -> None:
    assert answer_state(taken=taken, said=None, now=5.0, deadline=5.0) is Answer.TIMED_OUT
    assert answer_state(taken=taken, said=None, now=7.5, deadline=5.0) is Answer.TIMED_OUT
    assert answer_state(taken=taken, said=None, now=4.999, deadline=5.0) is Answer.WAITING


def test_an_answer_found_at_the_deadline_is_the_answer() -> None:
    assert answer_state(taken=True, said=TAKEN, now=6.0, deadline=5.0) is Answer.TAKEN
    assert answer_state(taken=True, said=REFUSED, now=6.0, deadline=5.0) is Answer.REFUSED
