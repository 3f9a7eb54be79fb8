"""What `dh log show` shows: a session's conversation (turns, prompts, answers, tool calls
with their result status, tokens per model call), dh's events and the state of each source.
Returned as plain data; the CLI renders it as text or JSON.

The items are read as a stream (one source at a time, a cursor over its records), so a
session of any size is shown in flat memory: only tool calls still waiting for their result
(and what came after them) are held back, so that each call is handed out with its outcome.

A turn the harness was cut off in and that was then resumed stays one turn: the crash and the
resume are marked inside it, where they happened."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Iterator

from ..models import Parsed, Session
from ..output import clip_words
from ..pricing import Pricer, calls_cost
from ..stores import store_of
from ..util import iso_time
from ..wrappers import get as get_wrapper
from ..wrappers.base import Wrapper
from .resumecost import resume_costs, resume_total
from .sessionlist import sum_totals
from .timeline import timeline

# The longest string of a record a view reads (wrappers/clip.py); a longer one is cut and
# marked before the record is parsed. A summary shows at most 400 columns of a text; an
# export shows texts whole, up to EXPORT_CLIP (a 200 MB tool result is 1 MiB and a note of
# the rest, which `dh log show --raw` has).
VIEW_CLIP = 64 * 1024
EXPORT_CLIP = 1 << 20
HOLD_MAX = 5000  # items held behind an unanswered tool call before they are let go anyway
TAIL = 500  # parsed records of the current turn kept to tell whether it finished


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
    return clip_words(text, limit)


def _before(at: str | None, ts) -> bool:
    """Whether dh's event time `at` (ISO 8601) comes before a record's time `ts` (ISO 8601,
    or epoch milliseconds as OpenCode keeps them); a time that does not parse orders nothing."""
    when = _epoch_ms(at)
    then = _epoch_ms(ts)
    return when is not None and then is not None and when <= then


def _epoch_ms(value) -> float | None:
    import datetime

    if isinstance(value, (int, float)) or (isinstance(value, str) and value.isdigit()):
        return float(value)
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000
    except (AttributeError, TypeError, ValueError):
        return None


def crash_marks(events: list[dict]) -> list[dict]:
    """dh's crash events in order (a kill, a hang, a crash outcome), each one a cut-off
    point that a later resume continues from."""
    return [m for m in timeline(events) if m["kind"] == "crash"]


class _Builder:
    def __init__(self, wrapper: Wrapper, label: str, full: bool = False, crashes=(), turn: int = 0,
                 pricer: Pricer | None = None):
        self.wrapper, self.label, self.turn, self.items = wrapper, label, turn, deque()
        self.pricer = pricer or Pricer()
        # what this turn's calls so far cost, what a restart would bill again: None once one
        # is of a model the price table does not know (0 would claim nothing was kept)
        self.spent: float | None = 0.0
        self.saved: float | None = 0.0  # what dh kept from being billed twice, over the crashes
        self.full = full  # keep whole texts and tool inputs (exports), not one-line summaries
        self.calls: dict[str, dict] = {}  # call id -> its item, until its result arrives
        self.roles: dict[str, str] = {}
        self.crashes = deque(crashes)
        self.current: deque[Parsed] = deque(maxlen=TAIL)  # the current turn's latest records
        self.resuming = False  # a harness's own resume marker came: the next prompt continues

    def add(self, p: Parsed) -> None:
        if p.msg_id and p.role:
            self.roles[p.msg_id] = p.role
        if p.flags:
            self.items.append({"type": "flagged", "flags": p.flags, "source": self.label,
                               "turn": self.turn})
        if p.synthetic and p.role == "assistant" and self.crashes and self._cut_off() \
                and (not self.resuming or self._has_due(p.ts)):
            self._mark_resume(p)  # the harness's own row on resuming (2.1.332's "No response
            self.resuming = True  # requested."): the crash came before it
        if p.kind == "user" or (p.kind == "text" and self.roles.get(p.parent_id) == "user"):
            self._prompt(p)
        elif p.kind in ("assistant", "text", "tool_call") and p.text:
            self._emit("assistant", p, text=self._short(p.text, 400))
        if p.usage:
            self._model_call(p, p.usage)
        for call in p.tool_calls:
            self._tool_call(call, p)
        for result in p.tool_results:
            call = self.calls.pop(result.call_id, None)
            if call is not None:
                call["status"] = "error" if result.is_error else "ok"
                call["result"] = self._short(result.text)
                call["ended_at"] = iso_time(p.ts)
        if p.kind == "compaction":
            self._emit("compaction", p, text=self._short(p.text))
        if not p.synthetic:  # a harness's own rows around a resume do not finish the cut turn
            self.current.append(p)

    def ready(self) -> Iterator[dict]:
        """Items whose content is final: everything before the oldest unanswered call."""
        while self.items and (len(self.items) > HOLD_MAX or not _waiting(self.items[0])):
            yield self.items.popleft()

    def rest(self) -> Iterator[dict]:
        """The held items, then any crash that came after the turn's final answer (a
        harness killed as it was done). A crash in a cut turn waits for its resume; a
        follower sees it as dh's event until then."""
        while self.crashes and self.turn and not self._cut_off():
            self._emit_crash(self.crashes.popleft())
        while self.items:
            yield self.items.popleft()

    def _short(self, value, limit: int = 160) -> str:
        if not self.full:
            return _short(value, limit)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)

    def _prompt(self, p: Parsed) -> None:
        if p.kind == "user" and not p.text:
            return  # OpenCode keeps the prompt text in a part
        cut_off = self._cut_off()
        if p.synthetic:
            if (cut_off and not self.resuming) or self._has_due(p.ts):
                self._mark_resume(p)  # a relaunch wrote this: each one after a crash
                self.resuming = True
        elif self.resuming or (cut_off and self.crashes):
            if not self.resuming or self._has_due(p.ts):
                self._mark_resume(p)
            self.resuming = False
            self._emit("prompt", p, text=self._short(p.text, 400), resumed=True)
            return
        else:
            due = self._due(p.ts)  # crashes since the last record: the last turn's end
            for crash in due if self.turn else ():
                self._emit_crash(crash)
            self.turn += 1
            self.current.clear()
            self.spent = 0.0
            self._emit("prompt", p, text=self._short(p.text, 400))
            for crash in () if self.turn > 1 else due:  # the first launch died before the
                self._emit_crash(crash)  # harness wrote the prompt down
            return
        self._emit("prompt", p, text=self._short(p.text, 400))

    def _cut_off(self) -> bool:
        return bool(self.turn) and not self.wrapper.is_complete(list(self.current))

    def _mark_resume(self, p: Parsed) -> None:
        """The turn stopped here: the crashes dh saw before this resume (one, unless the
        harness died again before it wrote anything), then the resume."""
        crashes = self._due(p.ts) or ([self.crashes.popleft()] if self.crashes else [])
        if not crashes:
            self._emit("crash", p, text="cut off (the harness stopped here)", at=None,
                       attempt=None, saved_usd=None)
        for crash in crashes:  # each relaunch kept the finished calls: none re-billed
            self._emit_crash(crash, relaunched=True)
        self._emit("resume", p, text="resumed", at=iso_time(p.ts))

    def _has_due(self, ts) -> bool:
        return bool(self.crashes) and _before(self.crashes[0]["at"], ts)

    def _due(self, ts: str | None) -> list[dict]:
        """The crashes dh saw before this record was written (by their times)."""
        due = []
        while self.crashes and _before(self.crashes[0]["at"], ts):
            due.append(self.crashes.popleft())
        return due

    def _emit_crash(self, crash: dict, relaunched: bool = False) -> None:
        """kept: what the relaunch after it did not bill again (None: nothing was relaunched,
        or a kept call has no price)."""
        kept = None
        if relaunched:
            kept = None if self.spent is None else round(self.spent, 6)
            self.saved = None if kept is None or self.saved is None else self.saved + kept
        self.items.append({"type": "crash", "turn": self.turn, "source": self.label,
                           "synthetic": False, "text": crash["label"], "at": crash["at"],
                           "attempt": crash["attempt"], "saved_usd": kept})

    def _emit(self, type_: str, p: Parsed, **extra) -> dict:
        item = {"type": type_, "turn": self.turn, "source": self.label, "synthetic": p.synthetic,
                **extra}
        if "at" not in item:
            item["at"] = iso_time(p.ts)
        self.items.append(item)
        return item

    def _model_call(self, p: Parsed, usage: dict | None) -> None:
        cost = self.pricer.cost(p.model, usage)
        if self.spent is not None:
            known = cost is not None or self.pricer.known(p.model)
            self.spent = self.spent + (cost or 0.0) if known else None
        self._emit("model_call", p, model=p.model, msg_id=p.msg_id,
                   stop_reason=p.stop_reason, tokens=usage, cost_usd=cost)

    def _tool_call(self, call, p: Parsed) -> None:
        if call.id in self.calls:
            return
        item = {"type": "tool_call", "turn": self.turn, "source": self.label, "tool": call.name,
                "call_id": call.id, "input": self._short(call.input), "status": "dangling",
                "at": iso_time(p.ts)}
        if self.full:
            item["args"] = call.input  # as the harness wrote it, for a readable rendering
        self.items.append(item)
        self.calls[call.id] = item


def _waiting(item: dict) -> bool:
    return item["type"] == "tool_call" and item["status"] == "dangling"


def _conversation(world, session_id: str, source, wrapper: Wrapper,
                  full: bool) -> Iterator[Parsed]:
    """The source's conversation as its store keeps it (stores/), usage as logged."""
    clip = EXPORT_CLIP if full else VIEW_CLIP
    return store_of(wrapper).conversation(world, session_id, source, wrapper, clip=clip)


def stream_items(world, session: Session, full: bool = False,
                 events: list[dict] | None = None, savings: dict | None = None,
                 only=None) -> Iterator[dict]:
    """The session's items in order, source by source, in flat memory. `savings`, when
    given, receives what dh's resumes kept from being billed again (once all is read);
    `only(relpath)`, when given, picks the sources to read."""
    wrapper, pricer = get_wrapper(session.harness), Pricer()
    events = events if events is not None else [asdict(e) for e in world.events(session.id)]
    crashes = crash_marks(events)
    saved: float | None = 0.0
    for index, source in enumerate(world.sources(session.id)):
        if only is not None and not only(source.relpath):
            continue
        builder = _Builder(wrapper, source.relpath, full, crashes if index == 0 else (), 0, pricer)
        for p in _conversation(world, session.id, source, wrapper, full):
            builder.add(p)
            yield from builder.ready()
        yield from builder.rest()
        saved = None if saved is None or builder.saved is None else saved + builder.saved
    if savings is not None:
        savings["saved_usd"] = None if saved is None else round(saved, 6)
        savings["crashes"] = len(crashes)


def view_header(world, session: Session) -> SessionView:
    """Everything but the items: events, sources, token totals and the last turn's state."""
    view = SessionView(session=session.to_dict(), totals=call_totals(world, session.id))
    view.totals["resumes"] = resume_costs(world, session.id, session.harness)
    view.totals["cost"]["resume_usd"] = resume_total(view.totals["resumes"])
    view.events = [asdict(e) for e in world.events(session.id)]
    sources = world.sources(session.id)
    view.sources = [_source_info(world, s) for s in sources]
    if sources:
        state = get_wrapper(session.harness).turn_state(_last_turn(world, session, sources[0]))
        view.turn_complete, view.dangling = state.complete, [c.id for c in state.dangling]
    return view


def call_totals(world, session_id: str) -> dict:
    """The session's token totals (in the kinds of tokens.py, with the number of calls) and
    their `cost`, from its calls summed per model (each call read only for a model priced in
    tiers or not priced): through the log's `model_calls` view, once for the totals and again
    for the cost, they took 2.9 s of a 200,832-record session's trace screen; this, 0.43 s."""
    sums, pricer = world.model_call_sums(session_id), Pricer()
    if not all(pricer.known(model) and pricer.flat(model) for model, *_ in sums):
        calls = world.model_call_tokens(session_id)  # tiers, or calls to count unpriced
    else:
        calls = [(model, *counted) for model, _, *counted in sums]
    return {**sum_totals(sums), "cost": calls_cost(calls, pricer)}


def _last_turn(world, session: Session, source) -> list:
    """The records of the source's last turn, as its store finds them."""
    store = store_of(get_wrapper(session.harness))
    return store.last_turn(world, session.id, source, clip=VIEW_CLIP)


def select_turns(items: Iterator[dict], turn: int | None = None,
                 last: int | None = None) -> Iterator[dict]:
    """The items of one turn, or of the last N turns, of the main conversation (the first
    source); everything when neither is given. --last holds at most N turns in memory."""
    if turn is None and last is None:
        yield from items
        return
    main = None
    kept: deque[list[dict]] = deque(maxlen=last or 1)
    for item in items:
        main = main or item["source"]
        if item["source"] != main:
            continue
        if turn is not None:
            if item["turn"] == turn:
                yield item
            continue
        if not kept or kept[-1][0]["turn"] != item["turn"]:
            kept.append([])
        kept[-1].append(item)
    for group in kept:
        yield from group


def build_view(world, session: Session, full: bool = False) -> SessionView:
    """The session as data, items included; `full` keeps whole texts instead of one-line
    summaries."""
    view = view_header(world, session)
    view.items = list(stream_items(world, session, full, view.events, view.totals["cost"]))
    return view


def _source_info(world, source) -> dict:
    gens = world.source_stats(source.id)
    return {"relpath": source.relpath, "kind": source.kind, "status": source.status,
            "generation": source.generation, "generations": gens[0], "records": gens[1],
            "offset": source.offset, "pending_bytes": source.pending}
