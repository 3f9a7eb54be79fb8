"""From a parsed native record to its row in the log: every field checked to be of the
type the log stores (a damaged or foreign line is flagged `bad_field`, never fatal), the
columns dh queries on laid out, and the text `dh log search` finds it by. base.py re-exports
these names."""

from __future__ import annotations

import datetime as _dt
import json

from ..models import Parsed
from ..tokens import KINDS, plausible


def epoch_ms(ts) -> int | None:
    """A harness timestamp (ISO 8601 text or epoch milliseconds) as epoch milliseconds;
    None for anything else, or a number SQLite cannot hold."""
    if ts is None or isinstance(ts, int):
        return _int64(ts)
    try:
        return int(_dt.datetime.fromisoformat(ts).timestamp() * 1000)
    except (TypeError, ValueError, OverflowError, OSError):
        return _int64(int(ts)) if str(ts).isdigit() else None


_STR_FIELDS = ("native_id", "parent_id", "role", "model", "msg_id", "stop_reason")
_USAGE_KEYS = KINDS
OUTPUT_EXCERPT = 300  # characters of a tool's output kept beside its record, for queries


def _int64(value) -> int | None:
    return value if value is None or -(1 << 63) <= value < (1 << 63) else None


_TEXT = (str, type(None))


def checked(parsed: Parsed) -> Parsed:
    """The parsed record with every field of the type the log stores: ids and names as
    text, token counts as 64-bit integers. Anything else (from a damaged or foreign line)
    is dropped and the record flagged `bad_field`."""
    if (type(parsed.native_id) in _TEXT and type(parsed.parent_id) in _TEXT
            and type(parsed.role) in _TEXT and type(parsed.model) in _TEXT
            and type(parsed.msg_id) in _TEXT and type(parsed.stop_reason) in _TEXT
            and type(parsed.text) is str and type(parsed.ts) in _TIME
            and _plain_calls(parsed) and _plain_usage(parsed.usage)):
        return parsed  # the common case, cheaply: _checked would change nothing
    return _checked(parsed)


def _plain_calls(parsed: Parsed) -> bool:
    return (all(type(c.id) is str and type(c.name) is str for c in parsed.tool_calls)
            and all(type(r.call_id) is str and type(r.text) is str for r in parsed.tool_results))


def _plain_usage(usage) -> bool:
    """Usage that _checked keeps as it is: exactly the counts of tokens.KINDS, each one a
    call can have (tokens.plausible)."""
    if usage is None:
        return True
    if type(usage) is not dict or len(usage) != len(_USAGE_KEYS):
        return False
    for key in _USAGE_KEYS:
        if not plausible(usage.get(key)):
            return False
    return True


_TIME = (str, int, type(None))


def _checked(parsed: Parsed) -> Parsed:
    bad = False
    for name in _STR_FIELDS:
        value = getattr(parsed, name)
        if value is not None and type(value) is not str:
            setattr(parsed, name, None)
            bad = True
    if type(parsed.text) is not str:
        parsed.text, bad = "", True
    if parsed.ts is not None and type(parsed.ts) not in (str, int):
        parsed.ts, bad = None, True
    for call in parsed.tool_calls:
        if type(call.id) is not str or type(call.name) is not str:
            call.id = call.id if type(call.id) is str else ""
            call.name = call.name if type(call.name) is str else ""
            bad = True
    for result in parsed.tool_results:
        if type(result.call_id) is not str or type(result.text) is not str:
            result.call_id = result.call_id if type(result.call_id) is str else ""
            result.text = result.text if type(result.text) is str else ""
            bad = True
    if parsed.usage is not None:
        usage = parsed.usage if type(parsed.usage) is dict else {}
        clean = {k: _count(usage.get(k)) for k in _USAGE_KEYS}
        if type(parsed.usage) is not dict or any(
                clean[k] != usage.get(k) for k in _USAGE_KEYS if usage.get(k) is not None):
            bad = True
        parsed.usage = clean
    if bad:
        parsed.flags.append("bad_field")
    return parsed


def _count(value) -> int:
    if type(value) is float and value.is_integer():
        value = int(value)
    return value if plausible(value) else 0  # a negative or absurd count: 0, the record flagged


def to_record(parsed: Parsed, source_id: int, generation: int, offset: int, raw: bytes) -> tuple:
    """The log row for one native record (in `Record` field order, raw not yet encoded):
    raw bytes plus the columns dh queries on. Model and message id are kept on the row that
    carries the call's usage; the other rows of the same message leave them empty. The first
    tool call's input as JSON and the first result's opening words ride along, so that SQL
    over the log reads them without knowing each harness's layout."""
    usage = parsed.usage
    call = parsed.tool_calls[0] if parsed.tool_calls else None
    result = parsed.tool_results[0] if parsed.tool_results else None
    return (source_id, generation, offset, raw, None, parsed.kind, parsed.native_id,
            parsed.parent_id, parsed.role, call.name if call else None,
            call.id if call else (result.call_id if result else None),
            parsed.model if usage else None, parsed.msg_id if usage else None,
            *((usage.get("input"), usage.get("output"), usage.get("cache_read"),
               usage.get("cache_write")) if usage else (None, None, None, None)),
            epoch_ms(parsed.ts), ",".join(parsed.flags) or None,
            ("error" if result.is_error else "ok") if result else None,
            1 if parsed.turn_start else None,
            *((usage.get("cache_write_1h"), usage.get("reasoning")) if usage else (None, None)),
            _input_json(call.input) if call else None,
            result.text[:OUTPUT_EXCERPT] if result else None, search_text(parsed))


def _input_json(value) -> str | None:
    """A tool call's input as JSON text (a harness that writes it as a JSON string, Codex,
    gets the JSON it holds)."""
    if isinstance(value, str):
        try:
            json.loads(value)
            return value
        except ValueError:
            pass
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def search_text(parsed: Parsed) -> str | None:
    """What `dh log search` finds a record by: its prose, tool inputs and tool outputs. Rides
    after the row's columns, and the log indexes it with the record (see worlds/local.py)."""
    parts = [parsed.text] if parsed.text else []
    for call in parsed.tool_calls:
        parts.append(call.name)
        parts.append(call.input if isinstance(call.input, str) else json.dumps(call.input, ensure_ascii=False))
    parts.extend(result.text for result in parsed.tool_results if result.text)
    return "\n".join(parts) or None
