"""Property tests of the cosmetic decision (SPEC §6.3a; issue 23 acceptance 2).

Real functions in the five languages are re-laid out at random — spaces between tokens,
line breaks after a comma inside brackets (legal in all five, Python included), end-of-line
comments there — and must keep their token-sequence hash: ``decisions.change_kind`` calls
the change cosmetic. A random edit of one token (an identifier, a number, an operator, the
inside of a string) must never be cosmetic, with or without a reformatting around it.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegraph.indexer.extract import parse
from citegraph.indexer.tokens import token_hash, token_hashes
from citegraph.validator import decisions
from citegraph.validator.model import Observation, Observed, Receipt

# Adapted from pallets/click (termui/utils: echo, should_strip_ansi), Go's strings package,
# zod, the Rust standard library and Apache Commons Lang: real shapes, no lifetimes.
FUNCTIONS = {
    "python": b'''def echo(message=None, file=None, nl=True, err=False, color=None):
    if file is None:
        file = _default_text_stderr() if err else _default_text_stdout()
    if message is not None and not isinstance(message, (str, bytes, bytearray)):
        out = str(message)
    else:
        out = message
    if nl:
        out = out or ""
        out += "\\n"
    if should_strip_ansi(file, color):
        out = strip_ansi(out)
    file.write(out, flush=True)
    return {"written": len(out), "stream": file.name}
''',
    "go": b'''package strings

func Repeat(s string, count int) string {
	if count == 0 {
		return ""
	}
	if count < 0 {
		panic("strings: negative Repeat count")
	}
	n := len(s) * count
	var b Builder
	b.Grow(n)
	b.WriteString(s)
	for b.Len() < n {
		chunk := min(n-b.Len(), b.Len(), 8192)
		b.WriteString(b.String()[:chunk])
	}
	return b.String()
}
''',
    "typescript": b'''export function processCreateParams(params: RawCreateParams, fallback: string): ProcessedCreateParams {
  if (!params) return {};
  const { errorMap, invalid_type_error, required_error, description } = params;
  if (errorMap && (invalid_type_error || required_error)) {
    throw new Error(`Can't use "invalid_type_error" in conjunction with custom error map.`);
  }
  const customMap: ZodErrorMap = (iss, ctx) => {
    if (iss.code !== "invalid_type") return { message: ctx.defaultError };
    return { message: required_error ?? ctx.defaultError, path: [fallback, 1, 2] };
  };
  return { errorMap: customMap, description };
}
''',
    "rust": b'''pub fn split_at_checked(v: &[u8], mid: usize, limit: u32) -> Option<(usize, usize)> {
    if mid <= v.len() && limit > 0 {
        let rest = v.len() - mid;
        let total = checked_add(mid, rest, 0x10).expect("split: length overflows");
        Some((mid, total))
    } else {
        None
    }
}
''',
    "java": b'''public class StringUtils {
    public static String abbreviate(final String str, final String marker, int offset, final int maxWidth) {
        if (isNotEmpty(str) && "".equals(marker) && maxWidth > 0) {
            return substring(str, 0, maxWidth);
        }
        final int len = str.length();
        if (offset > len) {
            offset = len;
        }
        return marker + str.substring(Math.max(offset, len - (maxWidth - 3)), len);
    }
}
''',
}
COMMENT = {"python": b"# note", "go": b"// note", "typescript": b"/* note */", "rust": b"// note",
           "java": b"/* note */"}
OPEN, CLOSE = frozenset(b"([{"), frozenset(b")]}")


def leaves(language: str, data: bytes) -> list[tuple[int, int, str]]:
    """The code tokens of ``data`` in order (start, end, type); comments out; a string,
    template or character literal is one token, as indexer/tokens.py reads it."""
    out: list[tuple[int, int, str]] = []

    def walk(n) -> None:
        if n.is_extra and "comment" in n.type:
            return
        if n.child_count == 0 or "string" in n.type or "template" in n.type or n.type.endswith("char_literal"):
            out.append((n.start_byte, n.end_byte, n.type))
            return
        for c in n.children:
            walk(c)

    tree = parse(language, data, 5.0)
    assert not tree.root_node.has_error, language
    walk(tree.root_node)
    return out


def relayout(language: str, data: bytes, draw) -> bytes:
    """``data`` with its tokens kept and the layout between them drawn at random."""
    toks = leaves(language, data)
    out = bytearray(data[:toks[0][0]])
    depth = 0
    for i, (s, e, _t) in enumerate(toks):
        text = data[s:e]
        out += text
        if text in (b"(", b"[", b"{"):
            depth += 1
        elif text in (b")", b"]", b"}"):
            depth -= 1
        if i + 1 == len(toks):
            out += data[e:]
            break
        sep = data[e:toks[i + 1][0]]
        if b"\n" in sep:
            out += sep  # the line structure (and Python's indentation) stays
        elif text == b"," and depth > 0 and draw(st.booleans()):
            comment = COMMENT[language] if draw(st.booleans()) else b""
            out += (b" " + comment if comment else b"") + b"\n" + b" " * draw(st.integers(8, 20))
        elif sep:
            out += b" " * draw(st.integers(1, 3))
        else:
            out += b" " if draw(st.booleans()) else b""  # legal between any two tokens of these samples
    return bytes(out)


def edit_one(language: str, data: bytes, draw) -> bytes:
    """``data`` with one token replaced by a different, still well-formed one."""
    toks = [t for t in leaves(language, data)
            if t[2] in ("identifier", "field_identifier", "property_identifier", "type_identifier",
                        "integer", "int_literal", "integer_literal", "decimal_integer_literal", "number",
                        "+", "-", "<", ">", "==", "!=", "&&", "||", "and", "or")
            or "string" in t[2]]
    s, e, t = draw(st.sampled_from(toks))
    old = data[s:e]
    swap = {b"+": b"-", b"-": b"+", b"<": b">", b">": b"<", b"==": b"!=", b"!=": b"==", b"&&": b"||",
            b"||": b"&&", b"and": b"or", b"or": b"and"}
    if old in swap:
        new = swap[old]
    elif "string" in t:
        # a space inside the literal, after its opening quote (after a prefix too, e.g. r"")
        q = next((i for i, c in enumerate(old) if c in b"\"'`"), 0)
        new = old[:q + 1] + b" " + old[q + 1:]
    elif old.isdigit():
        new = str(int(old) + draw(st.integers(1, 9))).encode()
    else:
        new = old + draw(st.sampled_from([b"x", b"2", b"_y"]))
    return data[:s] + new + data[e:]


def cosmetic(language: str, before: bytes, after: bytes) -> bool:
    """What validation concludes for a cited fragment ``before`` now reading ``after``."""
    r = Receipt("cgc_x", "f", "symbol", "r" * 32, "local", "cgsnap_x", "a" * 40, False, "cgx", "f",
                "b" * 40, handle="cgs_h", token_hash=token_hash(language, before, 0, len(before)))
    o = Observation(r.id, "changed", None, Observed("f", 1, 2, "cgs_h"))
    return decisions.change_kind(r, o, token_hash(language, after, 0, len(after))) == decisions.COSMETIC


@pytest.mark.parametrize("language", sorted(FUNCTIONS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_token_preserving_reformatting_is_cosmetic(language, data):
    src = FUNCTIONS[language]
    new = relayout(language, src, data.draw)
    assert token_hash(language, src, 0, len(src)) is not None
    assert cosmetic(language, src, new), new.decode()


@pytest.mark.parametrize("language", sorted(FUNCTIONS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_single_token_edit_is_never_cosmetic(language, data):
    src = FUNCTIONS[language]
    if data.draw(st.booleans()):
        src = relayout(language, src, data.draw)  # an edit inside a reformatting too
    new = edit_one(language, src, data.draw)
    assert new != src
    assert not cosmetic(language, src, new), new.decode()
    assert not cosmetic(language, new, src)


def test_the_samples_have_what_the_strategies_vary():
    for language, src in FUNCTIONS.items():
        toks = leaves(language, src)
        assert sum(src[s:e] == b"," for s, e, _t in toks) >= 3, language
        assert any("string" in t for _s, _e, t in toks), language


@pytest.mark.parametrize("language", sorted(FUNCTIONS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_hashes_of_several_spans_of_one_parse_equal_each_hashed_alone(language, data):
    src = FUNCTIONS[language]
    toks = leaves(language, src)
    if data.draw(st.booleans()):
        src = edit_one(language, src, data.draw)  # may not parse: every hash None then
    # token edges (hashable spans), a byte inside a token (a span cutting it cannot be judged)
    # and past the end (out of range)
    edges = sorted({0, len(src), len(src) + 3} | {s for s, _e, _t in toks} | {e for _s, e, _t in toks}
                   | {s + 1 for s, e, _t in toks if e - s > 1})
    spans = data.draw(st.lists(st.tuples(st.sampled_from(edges), st.sampled_from(edges)), max_size=8))
    got = token_hashes(language, src, spans)
    assert got == [token_hash(language, src, s, e) for s, e in spans]
    assert len(spans) < 3 or token_hashes(language, src, spans[::-1]) == got[::-1]

