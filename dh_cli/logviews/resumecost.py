"""What each resume cost: the first model call of every attempt after the first, its input
split into uncached, cache written (5-minute and 1-hour) and cache read, priced. A resume
after the provider's prompt cache expired writes the whole conversation to the cache again;
this says how much that was. Built from the log alone (the `launched` events and the
records' own usage)."""

from __future__ import annotations

import datetime as _dt

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
