"""The span search (validator/spans.py ``find_span``): the start lines where a cited span's
exact bytes occur, found through the per-file line index, equal a brute-force search over
every start line — for files with repeated lines, CRLF, no final newline and empty lines."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from citegraph.validator import spans

# few distinct lines, so spans repeat and first lines collide
LINE = st.sampled_from([b"", b"x = 1", b"x = 1\r", b"}", b"  return x", b"def f():", b"\t# c"])


def brute(data: bytes, start: int, end: int) -> list[int]:
    """Every 1-based start line whose n lines are the bytes of lines start..end."""
    want = spans.span_bytes(data, start, end)
    n = end - start + 1
    total = spans.line_count(data)
    return [i for i in range(1, total - n + 2) if spans.span_bytes(data, i, i + n - 1) == want]


@given(st.lists(LINE, min_size=1, max_size=40), st.booleans(), st.data())
@example([b"a", b"b", b"a", b"b"], True, None)
def test_find_span_equals_a_brute_force_search(lines, final_newline, data):
    content = b"\n".join(lines) + (b"\n" if final_newline else b"")
    total = spans.line_count(content)
    if total == 0:
        assert spans.find_span(content, "x", "y", 1) == []
        return
    if data is None:  # the explicit example: the span "a\nb" at line 1
        start, end = 1, 2
    else:
        start = data.draw(st.integers(1, total))
        end = data.draw(st.integers(start, min(total, start + 3)))
    first = spans.hash_bytes(spans.span_bytes(content, start, start))
    whole = spans.hash_bytes(spans.span_bytes(content, start, end))
    try:
        got = spans.find_span(content, first, whole, end - start + 1)
    finally:
        spans.clear_caches()
    assert got == brute(content, start, end)
    assert start in got


def test_a_span_absent_from_the_file_is_not_found():
    content = b"a\nb\nc\n"
    first = spans.hash_bytes(b"b")
    assert spans.find_span(content, first, spans.hash_bytes(b"b\nd"), 2) == []
    assert spans.find_span(content, first, spans.hash_bytes(b"b"), 1) == [2]
