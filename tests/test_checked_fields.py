"""The type check every parsed record goes through before it becomes log columns: clean
records pass untouched on the fast path; anything the log cannot store as it is goes the
slow way and comes out cleaned (and flagged when a value had to be dropped)."""

import pytest

from dh_cli.models import Parsed, ToolCall, ToolResult
from dh_cli.tokens import counts
from dh_cli.wrappers.base import checked

CLEAN_USAGE = counts(input=10, output=5, cache_write=2)


def test_a_clean_record_with_calls_results_and_usage_is_kept_as_it_is():
    parsed = Parsed(kind="tool_call", native_id="u1", role="assistant", model="m", msg_id="msg",
                    tool_calls=[ToolCall("toolu_1", "Bash", {"command": "ls"})],
                    tool_results=[ToolResult("toolu_0", False, "ok")], usage=dict(CLEAN_USAGE))
    usage = parsed.usage
    out = checked(parsed)
    assert out.flags == [] and out.usage is usage and out.usage == CLEAN_USAGE


@pytest.mark.parametrize("usage,expected,flagged", [
    ({**CLEAN_USAGE, "input": 1 << 63}, {**CLEAN_USAGE, "input": 0}, True),  # beyond int64
    ({**CLEAN_USAGE, "output": "5"}, {**CLEAN_USAGE, "output": 0}, True),
    ({**CLEAN_USAGE, "output": 5.0}, CLEAN_USAGE, False),  # a whole float is the same count
    ({**CLEAN_USAGE, "output": None}, {**CLEAN_USAGE, "output": 0}, False),
    ({"input": 10, "output": 5}, {**CLEAN_USAGE, "cache_write": 0}, False),  # missing: 0, not NULL
    ({**CLEAN_USAGE, "extra": 1}, CLEAN_USAGE, False),
    ([1, 2], counts(), True),
])
def test_usage_the_log_cannot_store_as_it_is_is_cleaned(usage, expected, flagged):
    out = checked(Parsed(kind="assistant", usage=usage))
    assert out.usage == expected and type(out.usage["output"]) is int
    assert ("bad_field" in out.flags) is flagged


def test_a_call_or_result_id_that_is_not_text_is_dropped_and_flagged():
    out = checked(Parsed(kind="tool_call", tool_calls=[ToolCall(7, "Bash")],
                         tool_results=[ToolResult(["x"], False, "ok")]))
    assert out.tool_calls[0].id == "" and out.tool_results[0].call_id == ""
    assert out.flags == ["bad_field"]
