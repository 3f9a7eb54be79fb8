"""`dh log cost`: what the model calls of every session cost, grouped by day (in a time zone),
session, model or harness, across every harness in one table. Each call is counted once (the
`model_calls` view), its tokens in the kinds of tokens.py, priced by pricing.Pricer."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from ..errors import UsageError
from ..pricing import Pricer
from ..tokens import KINDS, Usage

GROUPS = ("day", "session", "harness", "model")


@dataclass
class CostRow:
    key: dict  # the group's values, e.g. {"day": "2026-12-01", "model": "claude-opus-4-8"}
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    usd: float = 0.0
    unpriced_calls: int = 0

    def add(self, usage: Usage, usd: float | None) -> None:
        self.calls += 1
        self.usage = self.usage + usage
        if usd is None:
            self.unpriced_calls += 1
        else:
            self.usd += usd

    def to_dict(self) -> dict:
        priced = self.calls > self.unpriced_calls
        return {**self.key, "calls": self.calls, "tokens": {**self.usage.as_dict(), "total": self.usage.total},
                "usd": round(self.usd, 6) if priced else None, "unpriced_calls": self.unpriced_calls}


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
    """{"rows": [...], "totals": {...}}: the model calls of the log grouped by `by` (in
    GROUPS order of the caller's choosing), rows sorted by their keys."""
    unknown = [g for g in by if g not in GROUPS]
    if unknown or not by:
        raise UsageError(f"cannot group by {', '.join(unknown) or 'nothing'}",
                         hint=f"group by {', '.join(GROUPS)}")
    pricer = pricer or Pricer()
    rows: dict[tuple, CostRow] = {}
    total = CostRow({})
    for call in world.model_call_usage():
        usage = Usage.of(dict(zip(KINDS, call[4:10])))
        usd = pricer.cost(call[3], usage)
        values = {"day": _day(call[2], tz), "session": call[0], "harness": call[1], "model": call[3] or "unknown"}
        key = tuple(values[g] for g in by)
        if key not in rows:
            named = {"native_id": call[10]} if "session" in by else {}
            rows[key] = CostRow({**{g: values[g] for g in by}, **named})
        row = rows[key]
        row.add(usage, usd)
        total.add(usage, usd)
    return {"by": list(by), "rows": [rows[k].to_dict() for k in sorted(rows, key=lambda k: tuple(map(str, k)))],
            "totals": total.to_dict()}


def _day(at: str | None, tz: _dt.tzinfo) -> str:
    """The call's date in the zone (records keep ISO 8601 UTC); "-" for a call with no time."""
    if not at:
        return "-"
    moment = _dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
    return moment.astimezone(tz).date().isoformat()
