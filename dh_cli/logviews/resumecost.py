"""What each resume cost: the first model call of every attempt after the first, its input
split into uncached, cache written (5-minute and 1-hour) and cache read, priced. A resume
after the provider's prompt cache expired writes the whole conversation to the cache again;
this says how much that was. Built from the log alone (the `launched` events and the
records' own usage)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from .. import events
from ..errors import UnknownHarness
from ..tokens import Usage
from ..wrappers import get as get_wrapper
from ..pricing import Pricer

TTL_5M, TTL_1H = 300.0, 3600.0  # the providers' prompt-cache lifetimes, in seconds


def _ms(at: str) -> int:
    when = _dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
    return int((when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)).timestamp() * 1000)


def _split(wrapper, raw: bytes) -> dict | None:
    """A call's input by its parts, from its record's usage (tokens.py's kinds)."""
    usage = wrapper.parse(raw).usage
    if not usage:
        return None
    u = Usage.of(usage)
    return {"uncached": u.input, "cache_write_5m": u.cache_write, "cache_write_1h": u.cache_write_1h,
            "cache_read": u.cache_read}


def _input_cost(pricer: Pricer, model, split: dict) -> float | None:
    return pricer.cost(model, Usage(input=split["uncached"], cache_read=split["cache_read"],
                                    cache_write=split["cache_write_5m"], cache_write_1h=split["cache_write_1h"]))


def _calls(world, session_id: str) -> list:
    """The main source's records that carry a model call's usage, in time order."""
    sources = world.sources(session_id)
    if not sources:
        return []
    calls = [r for r in world.records(session_id, sources[0].id) if r.tokens_in is not None and r.ts]
    return sorted(calls, key=lambda r: r.ts)


def resume_costs(world, session_id: str, harness: str, pricer: Pricer | None = None) -> list[dict]:
    """One dict per attempt after the first that made a model call: attempt, model, the
    input split of its first call (uncached, cache_write_5m, cache_write_1h, cache_read),
    `recached` (the tokens written to the cache) and `usd` (its input's price, None when the
    table does not know the model)."""
    try:
        wrapper = get_wrapper(harness)
    except UnknownHarness:
        return []
    launched = {e.attempt: _ms(e.at) for e in world.events(session_id) if e.type == events.LAUNCHED and e.attempt}
    starts = sorted((ms, attempt) for attempt, ms in launched.items() if attempt > 1)
    if not starts:
        return []
    calls, pricer, out = _calls(world, session_id), pricer or Pricer(), []
    for i, (start, attempt) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else None
        first = next((r for r in calls if r.ts >= start and (end is None or r.ts < end)), None)
        split = _split(wrapper, first.raw) if first is not None else None
        if split is None:
            continue
        usd = _input_cost(pricer, first.model, split)
        out.append({"attempt": attempt, "model": first.model, **split,
                    "recached": split["cache_write_5m"] + split["cache_write_1h"],
                    "usd": round(usd, 6) if usd is not None else None})
    return out


def resume_total(resumes: list[dict]) -> float | None:
    priced = [r["usd"] for r in resumes if r["usd"] is not None]
    return round(sum(priced), 6) if priced else None


def likely_recache(world, session_id: str, harness: str, now_ms: int) -> dict | None:
    """Before a resume: when the session's last model call is older than the cache it wrote
    lives (5 minutes; 1 hour for 1-hour writes), the tokens the next call is likely to write
    again (that call's whole input) and their price as 5-minute writes; None otherwise."""
    calls = _calls(world, session_id)
    if not calls:
        return None
    last = calls[-1]
    try:
        split = _split(get_wrapper(harness), last.raw)
    except UnknownHarness:
        return None
    if not split:
        return None
    ttl = TTL_1H if split["cache_write_1h"] else TTL_5M
    age = (now_ms - last.ts) / 1000
    if age <= ttl:
        return None
    tokens = sum(split[k] for k in ("uncached", "cache_write_5m", "cache_write_1h", "cache_read"))
    usd = Pricer().cost(last.model, Usage(cache_write=tokens))
    return {"tokens": tokens, "usd": usd, "age": age, "ttl": ttl}


def continuations(starts: list[str], cuts: list[str]) -> set[int]:
    """Which of a conversation's turn starts (their times, in the source's order) went on
    with a cut turn: after each resume of a cut turn, the first start written at or after it,
    when one came before the cut."""
    found = set()
    for cut in cuts:
        first = next((i for i, at in enumerate(starts) if at >= cut), None)
        if first:  # neither None nor 0: a turn was open when the resume was planned
            found.add(first)
    return found


# the priced calls of the log, as `dh log cost` reads them -----------------------------------
@dataclass
class _Resumed:
    """What a relaunched session's journal says about its main conversation: when each
    launch after the first began, and each resume of a cut turn with the crashes it resumed
    from (times in ms)."""
    main: int | None
    launches: list[int]
    cuts: list[tuple[str, int, list[int]]]  # (when the resume was planned, in ms, the crashes before it)
    calls: list = field(default_factory=list)  # (ms, usage, usd, known, model, rows) of its calls


class ResumedCalls:
    """The re-cache and saved-by-resume amounts of the log's calls, from the calls `dh log
    cost` reads anyway and the journals of the relaunched sessions: no record is read or
    parsed again (resume_costs and `dh log show` read every record of a session). `see` each
    call with the cost rows it counts in; `settle` adds to those rows."""

    def __init__(self, world, pricer: Pricer):
        self.pricer = pricer
        self.sessions = {sid: _resumed(main, journal) for sid, (main, journal) in world.resumed_journals().items()}
        self.starts = _turn_starts(world, self.sessions)

    def see(self, call: tuple, usage: Usage, usd: float | None, rows: tuple) -> None:
        """call: a row of world.model_call_usage(); rows: the cost rows it counts in."""
        resumed = self.sessions.get(call[0])
        if resumed is not None and call[11] == resumed.main and call[2]:
            known = usd is not None or self.pricer.known(call[3])
            resumed.calls.append((_ms(call[2]), usage, usd, known, call[3], rows))

    def settle(self) -> None:
        for sid, resumed in self.sessions.items():
            resumed.calls.sort(key=lambda c: c[0])
            self._recached(resumed)
            self._kept(resumed, self.starts.get(sid, []))

    def _recached(self, resumed: _Resumed) -> None:
        """Each launch after the first: its first call's input, priced as resume_costs does."""
        for i, start in enumerate(resumed.launches):
            end = resumed.launches[i + 1] if i + 1 < len(resumed.launches) else None
            first = next((c for c in resumed.calls if c[0] >= start and (end is None or c[0] < end)), None)
            if first is None:
                continue
            u = first[1]
            usd = _input_cost(self.pricer, first[4], {"uncached": u.input, "cache_write_5m": u.cache_write,
                                                      "cache_write_1h": u.cache_write_1h, "cache_read": u.cache_read})
            for row in first[5]:
                row.recache(usd, u.cache_write + u.cache_write_1h)

    def _kept(self, resumed: _Resumed, starts: list[str]) -> None:
        """Each crash a cut turn was resumed from kept the turn's calls so far from being
        billed again, as logview.py's _Builder counts it: each call's price once a crash."""
        skipped = continuations(starts, [at for at, _, _ in resumed.cuts])  # as `dh log list` counts turns
        opened = [_ms(at) for i, at in enumerate(starts) if i not in skipped]
        for _, cut, crashes in resumed.cuts:
            began = max((ms for ms in opened if ms <= cut), default=None)
            times = sum(1 for ms in crashes if began is not None and ms >= began)
            for ms, _usage, usd, known, _model, rows in resumed.calls if times else ():
                if began <= ms < cut:
                    for row in rows:
                        row.keep(None if not known else (usd or 0.0) * times)


def _resumed(main: int | None, journal: list) -> _Resumed:
    from .timeline import crash_times

    launched = {e.attempt: _ms(e.at) for e in journal if e.type == events.LAUNCHED and e.attempt}
    # vars(), not asdict(): its deep copies of each event's details were 9.7 s of 2,000 journals
    crashes = [_ms(at) for at in crash_times([vars(e) for e in journal])]
    cuts, since = [], -1
    for e in journal:
        if e.type == events.RESUME_PLAN and _cut(e.details):
            at = _ms(e.at)
            cuts.append((e.at, at, [ms for ms in crashes if since < ms <= at]))
            since = at
    return _Resumed(main, sorted(ms for attempt, ms in launched.items() if attempt > 1), cuts)


def _cut(details: dict) -> bool:
    """A resume that went on with a cut turn, as the log's `turns` view reads the plan."""
    if details.get("cut") is not None:
        return bool(details["cut"])
    return details.get("continues") is not None and details["continues"] != ""


def _turn_starts(world, sessions: dict) -> dict[str, list[str]]:
    """session id -> when each record opening a turn of its main conversation was written."""
    cut = [sid for sid, r in sessions.items() if r.cuts]
    if not cut:
        return {}
    return world.turn_marks(cut if len(cut) <= 500 else None)[0]  # SQLite's bound values
