"""A Codex turn cut by an interruption is cut, whatever Codex wrote on its way out."""

from __future__ import annotations

import json

from dh_cli.models import Record
from dh_cli.wrappers import get


def line(kind: str, payload: dict) -> dict:
    return {"timestamp": "2026-12-04T20:05:43.235Z", "type": kind, "payload": payload}


ABORTED = ("<turn_aborted>\nThe user interrupted the previous turn on purpose. Any running "
           "unified exec processes may still be running in the background.\n</turn_aborted>")


def test_a_turn_codex_marked_aborted_as_dh_died_is_cut_and_goes_on():
    """Codex 0.171.0 under `codex exec`, its dh SIGKILLed, wrote a
    `<turn_aborted>` user message and a turn_aborted event, saying the user interrupted the
    turn on purpose: `dh resume` took the turn for finished and launched nothing (soak)."""
    rows = [line("event_msg", {"type": "task_started"}),
            line("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": "Create the files."}]}),
            line("response_item", {"type": "function_call", "name": "exec_command",
                                   "arguments": "{\"cmd\": \"echo soak0 >> steps.log\"}",
                                   "call_id": "call_000"}),
            line("response_item", {"type": "function_call_output", "call_id": "call_000",
                                   "output": "Process exited with code 0"}),
            line("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": ABORTED}]}),
            line("event_msg", {"type": "turn_aborted", "reason": "interrupted"})]
    codex = get("codex")
    records = [Record(1, 1, i, json.dumps(r).encode()) for i, r in enumerate(rows)]
    assert codex.turn_state(records).complete is False
    prompts = [p for p in codex.conversation(records) if p.kind == "user"]
    assert [p.text for p in prompts] == ["Create the files."]  # Codex's note is no prompt
