"""JSON from outside (import files, legacy records), decoded with bounds (SPEC §12.1).

Python's ``json`` turns hostile input into the wrong exceptions: deep nesting raises
RecursionError, a 5,000-digit number a ValueError, ``NaN``/``1e400`` pass as floats, and
``"\\ud800"`` yields a lone surrogate that no UTF-8 store can hold. Here every one of them is
a ``JSONInputError`` with a reason (and the offset where known), so a caller can name the
line and stop. Nesting is measured before parsing, without recursion.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_NUMBER_CHARS = 40  # the longest number literal accepted; range checks come later, per field

# A JSON string (with escapes; an unterminated one runs to the end, so a match never fails
# and the scan stays linear) or one bracket; anything between them is skipped.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.S)


JSON_SPACE = " \t\r\n"


class JSONInputError(ValueError):
    def __init__(self, why: str, pos: int | None = None) -> None:
        self.why = why
        self.pos = pos
        super().__init__(why)


def _number(literal: str) -> None:
    if len(literal) > MAX_NUMBER_CHARS:
        raise JSONInputError(f"a number of {len(literal)} characters (at most {MAX_NUMBER_CHARS})")


def _int(literal: str) -> int:
    _number(literal)
    return int(literal)


def _float(literal: str) -> float:
    _number(literal)
    value = float(literal)
    if not math.isfinite(value):
        raise JSONInputError(f"the number {literal} is out of range")
    return value


def _constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def check_depth(text: str, max_depth: int, start: int = 0, end: int | None = None) -> None:
    """Raise when arrays/objects nest deeper than ``max_depth`` in ``text[start:end]``."""
    depth = 0
    for m in _TOKEN.finditer(text, start, len(text) if end is None else end):
        ch = text[m.start()]
        if ch == '"':
            continue
        if ch in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONInputError(f"JSON nested deeper than {max_depth} levels", m.start())
        elif depth:
            depth -= 1


def raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    """``json.JSONDecoder.raw_decode`` with bounded numbers; nesting must be checked first."""
    try:
        return _DECODER.raw_decode(text, pos)
    except JSONInputError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONInputError(f"invalid JSON ({exc.msg})", exc.pos) from None
    except RecursionError:
        raise JSONInputError("JSON nested too deeply") from None
    except ValueError as exc:
        raise JSONInputError(f"invalid JSON ({exc})") from None


def loads(text: str, max_depth: int) -> Any:
    """One JSON document, nesting at most ``max_depth``, numbers bounded, no NaN/Infinity."""
    check_depth(text, max_depth)
    value, end = raw_decode(text, len(text) - len(text.lstrip(JSON_SPACE)))
    if text[end:].strip(JSON_SPACE):
        raise JSONInputError("invalid JSON (extra data after the value)", end)
    return value


_NAME = object()  # "the string is a field name" (its place is worded only when it is reported)
_TOP = object()


def lone_surrogate(value: Any) -> str | None:
    """Where a string inside ``value`` holds a lone surrogate (not valid Unicode), or None."""
    stack: list[tuple[Any, Any]] = [(_TOP, value)]  # (the field a value is under, the value)
    while stack:
        key, v = stack.pop()
        if isinstance(v, str):
            if not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError as exc:
                    where = "a string" if key is _TOP else "a field name" if key is _NAME else \
                        f"field {shown(key)}" if isinstance(key, str) else "a field"
                    return f"{where} holds a lone surrogate (U+{ord(v[exc.start]):04X})"
        elif isinstance(v, dict):
            for k, item in v.items():
                stack.append((_NAME, k))
                stack.append((k, item))
        elif isinstance(v, list):
            stack.extend((key, item) for item in v)
    return None


def shown(value: Any, limit: int = 60) -> str:
    """A hostile value as one short printable token for an error line (never a newline)."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + "…"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a {value.bit_length()}-bit integer"
    text = repr(value) if not isinstance(value, dict | list) else f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    return text if len(text) <= limit + 2 else text[:limit] + "…"
