"""`dh log cost`: what the model calls of every session cost, grouped by day (in a time zone),
session, model or harness, across every harness in one table. Each call is counted once (the
`model_calls` view), its tokens in the kinds of tokens.py, priced by pricing.Pricer. Beside
the cost, what dh's relaunches re-cached (the input of each resume's first call) and what
they saved (the calls of a cut turn a resume kept from being billed again), counted in the
group of the call concerned (logviews/resumecost.py ResumedCalls)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from ..errors import UsageError
from ..pricing import Pricer
from ..tokens import KINDS, Usage
from .resumecost import ResumedCalls

GROUPS = ("day", "session", "harness", "model")


@dataclass
class CostRow:
    key: dict  # the group's values, e.g. {"day": "2026-12-01", "model": "claude-opus-4-8"}
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    usd: float = 0.0
    unpriced_calls: int = 0
    recache_usd: float | None = 0.0  # None: a resume's first call of a model without a price
    recached: int = 0  # the tokens those calls wrote to the cache
    saved_usd: float | None = 0.0  # None: a kept call of a model without a price

    def add(self, usage: Usage, usd: float | None) -> None:
        self.calls += 1
        self.usage = self.usage + usage
        if usd is None:
            self.unpriced_calls += 1
        else:
            self.usd += usd

    def recache(self, usd: float | None, tokens: int) -> None:
        self.recache_usd = None if usd is None or self.recache_usd is None else self.recache_usd + usd
        self.recached += tokens

    def keep(self, usd: float | None) -> None:
        self.saved_usd = None if usd is None or self.saved_usd is None else self.saved_usd + usd

    def to_dict(self) -> dict:
        priced = self.calls > self.unpriced_calls
        return {**self.key, "calls": self.calls, "tokens": {**self.usage.as_dict(), "total": self.usage.total},
                "usd": round(self.usd, 6) if priced else None, "unpriced_calls": self.unpriced_calls,
                "recache_usd": _rounded(self.recache_usd), "recached_tokens": self.recached,
                "saved_usd": _rounded(self.saved_usd)}


def _rounded(usd: float | None) -> float | None:
    return None if usd is None else round(usd, 6)


def zone(name: str | None) -> _dt.tzinfo:
    """The named IANA time zone, or this machine's local one."""
    if not name:
        return _dt.datetime.now().astimezone().tzinfo
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"unknown time zone: {name!r}", hint="give an IANA name, e.g. Europe/Paris or UTC") from None


def costs(world, by: list[str], tz: _dt.tzinfo, pricer: Pricer | None = None) -> dict:
    """{"by", "rows": [...], "totals": {...}}: the model calls of the log grouped by `by` (in
    GROUPS order of the caller's choosing), rows sorted by their keys."""
    return reports(world, [by], tz, pricer)[0]


def reports(world, groupings: list[list[str]], tz: _dt.tzinfo, pricer: Pricer | None = None) -> list[dict]:
    """costs() of each grouping, from one read of the log's calls (and of the resumes' journals)."""
    for by in groupings:
        unknown = [g for g in by if g not in GROUPS]
        if unknown or not by:
            raise UsageError(f"cannot group by {', '.join(unknown) or 'nothing'}",
                             hint=f"group by {', '.join(GROUPS)}")
    pricer = pricer or Pricer()
    tables: list[dict[tuple, CostRow]] = [{} for _ in groupings]
    total = CostRow({})
    resumed = ResumedCalls(world, pricer)
    for call in world.model_call_usage():
        usage = Usage.of(dict(zip(KINDS, call[4:10])))
        usd = pricer.cost(call[3], usage)
        values = {"day": _day(call[2], tz), "session": call[0], "harness": call[1], "model": call[3] or "unknown"}
        rows = (*(_row(table, by, values, call) for table, by in zip(tables, groupings)), total)
        for row in rows:
            row.add(usage, usd)
        resumed.see(call, usage, usd, rows)
    resumed.settle()
    return [{"by": list(by), "rows": [rows[k].to_dict() for k in sorted(rows, key=lambda k: tuple(map(str, k)))],
             "totals": total.to_dict()} for by, rows in zip(groupings, tables)]


def _row(rows: dict[tuple, CostRow], by: list[str], values: dict, call: tuple) -> CostRow:
    """The row of the call's group, made when it is the group's first call."""
    key = tuple(values[g] for g in by)
    if key not in rows:
        named = {"native_id": call[10]} if "session" in by else {}
        rows[key] = CostRow({**{g: values[g] for g in by}, **named})
    return rows[key]


def _day(at: str | None, tz: _dt.tzinfo) -> str:
    """The call's date in the zone (records keep ISO 8601 UTC); "-" for a call with no time."""
    if not at:
        return "-"
    moment = _dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
    return moment.astimezone(tz).date().isoformat()
