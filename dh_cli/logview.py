"""What `dh log show` shows: a session's conversation (turns, prompts, answers, tool calls
with their result status, tokens per model call), dh's events and the state of each source.
Returned as plain data; the CLI renders it as a table or JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .models import Parsed, Session
from .wrappers import get as get_wrapper


@dataclass
class SessionView:
    session: dict
    items: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)
    totals: dict = field(default_factory=dict)
    turn_complete: bool = False
    dangling: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _short(value, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Builder:
    def __init__(self, label: str, full: bool = False):
        self.label, self.turn, self.items = label, 0, []
        self.full = full  # keep whole texts and tool inputs (exports), not one-line summaries
        self.calls: dict[str, dict] = {}
        self.roles: dict[str, str] = {}

    def add(self, p: Parsed) -> None:
        if p.msg_id and p.role:
            self.roles[p.msg_id] = p.role
        if p.flags:
            self.items.append({"type": "flagged", "flags": p.flags, "source": self.label})
        if p.kind == "user" or (p.kind == "text" and self.roles.get(p.parent_id) == "user"):
            self._prompt(p)
        elif p.kind in ("assistant", "text", "tool_call") and p.text:
            self._emit("assistant", p, text=self._short(p.text, 400))
        if p.usage:
            self._model_call(p, p.usage)
        for call in p.tool_calls:
            self._tool_call(call)
        for result in p.tool_results:
            if result.call_id in self.calls:
                self.calls[result.call_id]["status"] = "error" if result.is_error else "ok"
                self.calls[result.call_id]["result"] = self._short(result.text)
        if p.kind == "compaction":
            self._emit("compaction", p, text=self._short(p.text))

    def _short(self, value, limit: int = 160) -> str:
        if not self.full:
            return _short(value, limit)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)

    def _prompt(self, p: Parsed) -> None:
        if p.kind == "user" and not p.text:
            return  # OpenCode keeps the prompt text in a part
        if not p.synthetic:
            self.turn += 1
        self._emit("prompt", p, text=self._short(p.text, 400))

    def _emit(self, type_: str, p: Parsed, **extra) -> dict:
        item = {"type": type_, "turn": self.turn, "source": self.label, "synthetic": p.synthetic, **extra}
        self.items.append(item)
        return item

    def _model_call(self, p: Parsed, usage: dict | None) -> None:
        self._emit("model_call", p, model=p.model, msg_id=p.msg_id,
                   stop_reason=p.stop_reason, tokens=usage)

    def _tool_call(self, call) -> None:
        if call.id in self.calls:
            return
        item = {"type": "tool_call", "turn": self.turn, "source": self.label, "tool": call.name,
                "call_id": call.id, "input": self._short(call.input), "status": "dangling"}
        self.items.append(item)
        self.calls[call.id] = item


def _use_logged_usage(records: list, parsed: list[Parsed]) -> None:
    """JSONL records map one-to-one to parsed ones; the log holds each call's usage once.
    (OpenCode's conversation is the latest version of each row, so its usage is final.)"""
    for record, p in zip(records, parsed):
        p.usage = None if record.tokens_in is None else {
            "input": record.tokens_in, "output": record.tokens_out,
            "cache_read": record.tokens_cache_read, "cache_write": record.tokens_cache_write}


def build_view(world, session: Session, full: bool = False) -> SessionView:
    """The session as data; `full` keeps whole texts instead of one-line summaries."""
    wrapper = get_wrapper(session.harness)
    view = SessionView(session=session.to_dict(), totals=world.token_totals(session.id))
    for index, source in enumerate(world.sources(session.id)):
        records = _latest(world, session.id, source)
        parsed = wrapper.conversation(records)
        builder = _Builder(source.relpath, full)
        if source.kind != "opencode":
            _use_logged_usage(records, parsed)
        for p in parsed:
            builder.add(p)
        view.items.extend(builder.items)
        if index == 0:
            state = wrapper.turn_state(records)
            view.turn_complete, view.dangling = state.complete, [c.id for c in state.dangling]
        view.sources.append(_source_info(world, source))
    view.events = [asdict(e) for e in world.events(session.id)]
    return view


def _latest(world, session_id: str, source) -> list:
    records = list(world.records(session_id, source.id))
    if source.kind == "opencode" or not records:
        return records
    top = max(r.generation for r in records)
    return [r for r in records if r.generation == top]


def _source_info(world, source) -> dict:
    gens = world.source_stats(source.id)
    return {"relpath": source.relpath, "kind": source.kind, "status": source.status,
            "generation": source.generation, "generations": gens[0], "records": gens[1],
            "offset": source.offset, "pending_bytes": source.pending}
