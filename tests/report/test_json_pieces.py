"""Large JSON reports in pieces (issue 26): the same document as ``json.dumps``, ASCII only."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.report.json import iter_json

LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
DOCS = st.recursive(
    LEAVES,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=5), kids, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(DOCS, st.integers(0, 3))
def test_same_document_as_json_dumps(doc: object, depth: int) -> None:
    text = "".join(iter_json(doc, depth=depth))
    assert json.loads(text) == json.loads(json.dumps(doc))
    assert text.isascii() and text.endswith("\n")


def test_outer_levels_one_member_a_line() -> None:
    text = "".join(iter_json({"gpus": [{"gpu": 0, "ecc": {"sbe": 1}}, {"gpu": 1}], "n": 2, 3: (1, 2)}))
    assert text.splitlines() == [
        "{",
        '  "gpus": [',
        '    {"gpu": 0, "ecc": {"sbe": 1}},',
        '    {"gpu": 1}',
        "  ],",
        '  "n": 2,',
        '  "3": [',
        "    1,",
        "    2",
        "  ]",
        "}",
    ]
