"""The cost page of `dh serve`: what the log's model calls cost by day (drawn as an SVG
chart by the server: nothing fetched from elsewhere), by model, by harness and by session,
with what dh's resumes re-cached and saved beside each, from the same library function as
`dh log cost` (logviews/costs.py), between two days."""

from __future__ import annotations

import datetime as _dt

from ..errors import UsageError
from ..logviews.costs import reports, zone

SECOND = ("model", "harness", "session")
CHART = {"width": 720, "height": 180, "pad": 24}


def day_of(text: str | None, name: str) -> str | None:
    """A YYYY-MM-DD filter value, checked; None when absent."""
    if not text:
        return None
    try:
        return _dt.date.fromisoformat(text.strip()).isoformat()
    except ValueError:
        raise UsageError(f"{name} {text[:40]!r} is not a day", hint="YYYY-MM-DD") from None


def cost_page(world, since: str | None, until: str | None) -> dict:
    """{"days", "by": {model/harness/session: rows}, "totals", "chart", "since", "until"} of
    the calls whose day (this machine's zone) is within [since, until]."""
    kept = lambda row: (since is None or row["day"] >= since) and (until is None or row["day"] <= until)  # noqa: E731
    # one read of the log for the four tables: each read of it was a quarter of the page
    daily, *seconds = reports(world, [["day"], *(["day", name] for name in SECOND)], zone(None))
    days = [r for r in daily["rows"] if kept(r)]
    by = {name: _summed([r for r in report["rows"] if kept(r)], name) for name, report in zip(SECOND, seconds)}
    totals = {"calls": sum(r["calls"] for r in days), "usd": _usd(days),
              "tokens": sum(r["tokens"]["total"] for r in days),
              "unpriced_calls": sum(r["unpriced_calls"] for r in days), **_resumes(days)}
    return {"days": days, "by": by, "totals": totals, "chart": chart(days), "since": since or "",
            "until": until or ""}


def _usd(rows: list[dict]) -> float | None:
    priced = [r["usd"] for r in rows if r["usd"] is not None]
    return round(sum(priced), 6) if priced else None


def _resumes(rows: list[dict]) -> dict:
    """What the resumes of these rows re-cached and saved: unknown (None) when one of them is."""
    def summed(key):
        values = [r[key] for r in rows]
        return None if None in values else round(sum(values), 6)
    return {"recache_usd": summed("recache_usd"), "recached_tokens": sum(r["recached_tokens"] for r in rows),
            "saved_usd": summed("saved_usd")}


def _summed(rows: list[dict], name: str) -> list[dict]:
    """Rows of (day, name) summed over the days, most expensive first."""
    out: dict[str, dict] = {}
    for row in rows:
        into = out.setdefault(row[name], {name: row[name], "calls": 0, "tokens": 0, "rows": []})
        into["calls"] += row["calls"]
        into["tokens"] += row["tokens"]["total"]
        into["rows"].append(row)
    summed = [{**v, "usd": _usd(v["rows"]), **_resumes(v.pop("rows"))} for v in out.values()]
    return sorted(summed, key=lambda r: (-(r["usd"] or 0), str(r[name])))


def chart(days: list[dict]) -> dict:
    """The bars of the spend by day: {"bars": [{x, y, w, h, day, usd}], width, height}, in
    the SVG's own units (numbers only: no text of a record reaches an attribute)."""
    width, height, pad = CHART["width"], CHART["height"], CHART["pad"]
    top = max((r["usd"] or 0 for r in days), default=0) or 1
    step = (width - pad) / max(1, len(days))
    bars = []
    for i, row in enumerate(days):
        h = (row["usd"] or 0) / top * (height - pad)
        bars.append({"x": round(pad + i * step + step * 0.1, 2), "w": round(max(1.0, step * 0.8), 2),
                     "y": round(height - pad - h, 2), "h": round(h, 2), "day": row["day"], "usd": row["usd"]})
    return {"bars": bars, "width": width, "height": height, "pad": pad, "top": top}
