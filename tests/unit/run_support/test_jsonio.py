"""run_support.jsonio.indented: the standard library's indented JSON, byte for byte."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from run_support.jsonio import indented

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    # Text that looks like the separators: "}", ",", "{", quotes, line breaks, non-ASCII.
    | st.text(alphabet=st.sampled_from(list('}{,: "\\\n\tæ\u2028\x00a')) | st.characters())
)
ROW = st.dictionaries(st.text(max_size=5), SCALARS, max_size=4)
JSON = st.recursive(
    SCALARS | ROW,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.lists(ROW, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON, st.booleans())
def test_indented_is_json_dumps_indent_2(document: Any, ensure_ascii: bool) -> None:
    assert indented(document, ensure_ascii=ensure_ascii) == json.dumps(
        document, indent=2, ensure_ascii=ensure_ascii
    )


def test_a_summary_shape() -> None:
    rows = [{"case": f"c}},\n{i}", "model": "m", "status": None, "t": 1.5} for i in range(3)]
    document = {"schema": 1, "jobs": rows, "totals": {"passed": 2}, "steps": [[], {}]}
    for ensure_ascii in (True, False):
        assert indented(document, ensure_ascii=ensure_ascii) == json.dumps(
            document, indent=2, ensure_ascii=ensure_ascii
        )


def test_a_record_shape_with_empty_containers_among_scalars() -> None:
    # run-meta.json: scalars beside an empty ``result`` (written by one C encoder call).
    record = {"schema": 1, "test_case": "c\n}", "result": {}, "steps": [], "exit_code": 0}
    nested = {"jobs": [record, {"a": [], "b": {}}], "empty": {}, "list": [1, [], {}, "x"]}
    for document in (record, nested, [[], {}], {}, []):
        for ensure_ascii in (True, False):
            assert indented(document, ensure_ascii=ensure_ascii) == json.dumps(
                document, indent=2, ensure_ascii=ensure_ascii
            )
