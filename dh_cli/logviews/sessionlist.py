"""`dh log list`: the sessions in the log as people look for them, by recency, with a title
(the first prompt) and the shortest id prefix that names each one. Plain data; render.py
lays it out."""

from __future__ import annotations

import bisect
import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from .pricing import Pricer, session_cost
from ..worlds.rows import decode_raw

MIN_PREFIX = 4  # shorter prefixes than this would read as typos, not ids
TITLE_CHARS = 200


@dataclass
class ListFilter:
    harness: str | None = None
    since: str | None = None  # ISO 8601 UTC: sessions active at or after it
    cwd: str | None = None  # sessions started in this folder or below it
    state: str | None = None
    limit: int | None = None


def list_sessions(world, wanted: ListFilter) -> list[dict]:
    """Sessions, most recently active first, as plain dicts."""
    cwd = wanted.cwd.rstrip("/") or "/" if wanted.cwd else None
    under = _like_escape(cwd.rstrip("/")) + "/%" if cwd else None
    rows = world.session_summaries(wanted.harness, wanted.state, cwd, under)
    if wanted.since:
        rows = [r for r in rows if r["last_activity"] >= wanted.since]
    rows = rows[:wanted.limit] if wanted.limit is not None else rows
    prefixes, pricer = short_prefixes(world), Pricer()
    for row in rows:
        row["prefix"] = prefixes.get(row["id"], row["id"])
        row["title"] = first_prompt(world, row["id"], row["harness"])
        row["tokens"] = world.token_totals(row["id"])
        row["cost"] = session_cost(world, row["id"], pricer)["usd"]
    return rows


def short_prefixes(world) -> dict[str, str]:
    """For each dh id, its shortest prefix (at least MIN_PREFIX characters) that is not also
    the start of another session's dh id or harness id (`dh log show` accepts both)."""
    rows = world.session_names()
    names = sorted({n for row in rows for n in row if n})
    out = {}
    for sid, native in rows:
        length = MIN_PREFIX
        at = bisect.bisect_left(names, sid)
        for other in names[max(0, at - 2):at + 3]:
            if other not in (sid, native):
                length = max(length, _common(sid, other) + 1)
        out[sid] = sid[:length]
    return out


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def first_prompt(world, session_id: str, harness: str) -> str:
    """The session's first user prompt on one line, to recognise it by (read from the
    first records of its first source, as `dh log show` reads prompts)."""
    from ..errors import UnknownHarness
    from ..wrappers import get

    try:
        wrapper, roles = get(harness), {}
    except UnknownHarness:  # a harness this dh does not know (a newer dh's log): no title
        return ""
    rows = world.first_prompt_rows(session_id)
    for stored, codec in rows:
        p = wrapper.parse(decode_raw(stored, codec))
        if p.msg_id and p.role:
            roles[p.msg_id] = p.role
        prompt = p.kind == "user" or (p.kind == "text" and roles.get(p.parent_id) == "user")
        if prompt and p.text and not p.synthetic:
            return " ".join(p.text.split())[:TITLE_CHARS]
    return ""


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_AGO = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, now: _dt.datetime | None = None) -> str:
    """`--since`: an age (30m, 12h, 3d, 2w) or an ISO 8601 date or time, as ISO UTC text."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    match = _AGO.match(value.strip())
    if match:
        moment = now - _dt.timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    else:
        try:
            moment = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--since {value!r} is neither an age nor a date",
                             hint="give e.g. 30m, 12h, 3d, 2w or 2026-11-29") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=_dt.timezone.utc)
    return iso_utc(moment)


def iso_utc(moment: _dt.datetime) -> str:
    return moment.astimezone(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def relative(iso: str | None, now: _dt.datetime | None = None) -> str:
    """An ISO time as people say it: just now, 5m ago, 3h ago, 2d ago; a date past 8 weeks."""
    if not iso:
        return "-"
    now = now or _dt.datetime.now(_dt.timezone.utc)
    try:
        then = _dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    seconds = (now - then).total_seconds()
    for limit, unit, size in ((60, "", 0), (3600, "m", 60), (86400, "h", 3600),
                              (86400 * 14, "d", 86400), (86400 * 56, "w", 86400 * 7)):
        if seconds < limit:
            return "just now" if not size else f"{int(seconds // size)}{unit} ago"
    return then.date().isoformat()


def here() -> str:
    return str(Path.cwd())
