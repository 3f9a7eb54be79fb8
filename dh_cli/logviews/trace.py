"""A session as a trace: one span per turn of the main conversation, with its model calls and
tool calls as child spans (durations from the records' own times, tokens, cost), the crash and
the resume as events inside the turn where they happened, and a subagent's turns nested
under the tool call that started it. Each model call carries what it was given since the
call before it (the prompt, the tools' results) and the tool calls it asked for. dh's attempts
(launch to exit) are spans of their own, from dh's events. The HTML export and the
OpenTelemetry export both read this; turns are handed out one at a time (flat memory)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ..events import EXITED, LAUNCH, STATE
from .logview import stream_items, view_header
from .timeline import exit_mark
from ..models import Session
from ..wrappers import get as get_wrapper
from ..wrappers.base import epoch_ms


@dataclass
class Span:
    kind: str  # turn | model_call | tool_call | attempt
    name: str
    start: int | None = None  # epoch ms
    end: int | None = None
    attrs: dict = field(default_factory=dict)
    children: list["Span"] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)  # {"name", "at" (ms), "attrs"}

    @property
    def duration_ms(self) -> int | None:
        return self.end - self.start if self.start is not None and self.end is not None else None

    def close(self, at: int | None) -> None:
        if at is not None:
            self.start = at if self.start is None else min(self.start, at)
            self.end = at if self.end is None else max(self.end, at)


class _Turns:
    """Folds the items of one source into turn spans."""

    def __init__(self, subagents: dict[str, list[Span]]):
        self.turn: Span | None = None
        self.last: int | None = None  # time of the latest item
        # when the model got each input (a prompt, a tool result, its previous answer): a
        # call starts at the latest of these before it ends
        self.inputs: list[int] = []
        self.text = ""  # an answer waiting for its model call's span
        self.given: list[dict] = []  # messages since the last model call: its input
        self.call: Span | None = None  # the latest model call: the tool calls that follow are its
        self.subagents = subagents

    def add(self, item: dict) -> Span | None:
        """Returns a finished turn when this item opens the next one."""
        at = epoch_ms(item.get("at"))
        done = None
        if item["type"] == "prompt" and not item.get("synthetic") and not item.get("resumed"):
            done, self.turn = self.turn, Span("turn", f"turn {item['turn']}", at, at,
                                              {"turn": item["turn"], "prompt": item["text"]})
            self.last, self.inputs = at, [at] if at is not None else []
            self.given, self.call = [{"role": "user", "content": item["text"]}], None
        elif self.turn is None:  # records before the first prompt (a header, a resume)
            self.turn = Span("turn", "before the first prompt", at, at, {"turn": 0})
        getattr(self, "_" + item["type"], self._other)(item, at)
        self.turn.close(at)
        ended = epoch_ms(item.get("ended_at"))
        self.last = max((t for t in (self.last, at, ended) if t is not None), default=None)
        return done

    def _prompt(self, item: dict, at) -> None:
        if item.get("resumed") and at is not None:
            self.inputs.append(at)
        if item.get("resumed"):
            self.given.append({"role": "user", "content": item["text"]})
        if item.get("synthetic") or item.get("resumed"):
            self.turn.events.append({"name": "prompt", "at": at, "attrs": {
                "text": item["text"], "synthetic": bool(item.get("synthetic"))}})

    def _assistant(self, item: dict, at) -> None:
        if item.get("synthetic"):  # written by the harness on resume, not by a model
            self.turn.events.append({"name": "answer", "at": at, "attrs": {
                "text": item["text"], "synthetic": True}})
            return
        self.text = (self.text + "\n" + item["text"]).strip()

    def _model_call(self, item: dict, at) -> None:
        tokens = item.get("tokens") or {}
        start = max((t for t in self.inputs if at is None or t <= at), default=at)
        if at is not None:
            self.inputs.append(at)
        span = Span("model_call", item.get("model") or "model call", start, at, {
            "model": item.get("model"), "msg_id": item.get("msg_id"),
            "stop_reason": item.get("stop_reason"), "tokens": tokens, "cost_usd": item.get("cost_usd"),
            "output": self.text, "input_messages": self.given, "tool_calls": []})
        self.text, self.given, self.call = "", [], span
        self.turn.children.append(span)

    def _tool_call(self, item: dict, at) -> None:
        end = epoch_ms(item.get("ended_at"))
        span = Span("tool_call", item["tool"] or "tool", at, end if end is not None else at, {
            "tool": item["tool"], "call_id": item["call_id"], "status": item["status"],
            "input": item.get("args", item["input"]), "result": item.get("result")})
        span.children = self.subagents.pop(item["call_id"], [])
        self.turn.children.append(span)
        if self.call is not None:
            self.call.attrs["tool_calls"].append({"id": item["call_id"], "name": item["tool"],
                                                  "arguments": span.attrs["input"]})
        if item.get("result") is not None:
            self.given.append({"role": "tool", "content": item["result"], "tool_call_id": item["call_id"]})
        if end is not None:
            self.turn.close(end)
            self.inputs.append(end)

    def _crash(self, item: dict, at) -> None:
        # placed where the records stop (dh's own clock said when it saw the crash: dh_at)
        self.turn.events.append({"name": "crash", "at": self.last, "attrs": {
            "label": item["text"], "attempt": item.get("attempt"), "dh_at": item.get("at"),
            "saved_usd": item.get("saved_usd")}})

    def _resume(self, item: dict, at) -> None:
        self.turn.events.append({"name": "resume", "at": at or self.last,
                                 "attrs": {"label": item["text"]}})

    def _other(self, item: dict, at) -> None:
        self.turn.events.append({"name": item["type"], "at": at,
                                 "attrs": {"text": item.get("text") or ", ".join(item.get("flags", []))}})


def turn_spans(world, session: Session, events: list[dict] | None = None) -> Iterator[Span]:
    """The conversation's turns, each a finished span, in order. Subagents are read first,
    so that each one's turns hang under the tool call that started it."""
    links = _subagent_links(world, session, world.sources(session.id))
    subagents: dict[str, list[Span]] = {}
    for source, turn in _source_turns(world, session, events, {}, lambda r: r in links):
        subagents.setdefault(links[source], []).append(turn)
    for _, turn in _source_turns(world, session, events, subagents, lambda r: r not in links):
        yield turn


def _source_turns(world, session, events, subagents, only) -> Iterator[tuple[str, Span]]:
    current, folder = None, None
    for item in stream_items(world, session, full=True, events=events, only=only):
        if item["source"] != current:
            if folder is not None and folder.turn is not None:
                yield current, folder.turn
            current, folder = item["source"], _Turns(subagents)
        done = folder.add(item)
        if done is not None:
            yield current, done
    if folder is not None and folder.turn is not None:
        yield current, folder.turn


def _subagent_links(world, session: Session, sources) -> dict[str, str]:
    files = {s.relpath: b"".join(r.raw for r in world.records(session.id, s.id, s.generation))
             for s in sources if s.kind == "file"}
    return get_wrapper(session.harness).subagent_calls(files)


def attempt_spans(events: list[dict]) -> list[Span]:
    """dh's attempts, each a span from its launch to its exit (or to the last event it has),
    with how it ended: `outcome` crashed, hung, finished or exited, and its exit label."""
    spans: dict[int, Span] = {}
    for event in events:
        number, at = event.get("attempt"), epoch_ms(event.get("at"))
        if number is None:
            continue
        if event["type"] == LAUNCH and number not in spans:
            spans[number] = Span("attempt", f"attempt {number}", at, at, {"attempt": number})
        span = spans.get(number)
        if span is None:
            continue
        span.close(at)
        if event["type"] == EXITED:
            span.attrs["exit"] = _exit_label(event["details"])
        elif event["type"] == STATE and event["details"].get("outcome"):
            span.attrs["outcome"] = event["details"]["outcome"]
    return [spans[n] for n in sorted(spans)]


def _exit_label(details: dict) -> str:
    return exit_mark(details)["label"]


def session_trace(world, session: Session):
    """(the header view, an iterator of turn spans)."""
    view = view_header(world, session)
    return view, turn_spans(world, session, view.events)
