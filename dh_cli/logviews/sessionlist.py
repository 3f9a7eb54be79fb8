"""`dh log list`: the sessions in the log as people look for them, by recency, with a title
(the first prompt) and the shortest id prefix that names each one. Plain data; render.py
lays it out."""

from __future__ import annotations

import bisect
import itertools
import datetime as _dt
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..errors import UsageError
from ..events import UNHIDDEN
from ..tokens import KINDS
from ..stores.lost import lost_sessions, native_mains, restore_command
from ..pricing import PRICE_FILE, Pricer, calls_cost
from ..worlds.rows import decode_raw
from .resumecost import continuations, resume_costs, resume_total

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
    rows = world.session_summaries(wanted.harness, wanted.state, *folder_match(wanted.cwd))
    if wanted.since:
        rows = [r for r in rows if r["last_activity"] >= wanted.since]
    rows = rows[:wanted.limit] if wanted.limit is not None else rows
    return describe(world, rows)


def _resume_cost(world, row: dict, pricer: Pricer) -> dict:
    """What the session's resumes re-cached (logviews/resumecost.py); read only for a session
    with more than one attempt."""
    resumes = resume_costs(world, row["id"], row["harness"], pricer) if (row.get("attempts") or 0) > 1 else []
    return {"usd": resume_total(resumes), "recached": sum(r["recached"] for r in resumes),
            "resumes": len(resumes)}


def folder_match(cwd: str | None) -> tuple[str | None, str | None]:
    """(the folder, a LIKE pattern for the folders below it) of a `--cwd` filter."""
    cwd = cwd.rstrip("/") or "/" if cwd else None
    return cwd, _like_escape(cwd.rstrip("/")) + "/%" if cwd else None


def describe(world, rows: list[dict], with_resumes: bool = True) -> list[dict]:
    """Each session row with its id prefix, title, tokens and cost (and with `with_resumes`,
    what its resumes re-cached): titles and per-model sums from the sessions' digests (one
    row a session), the calls themselves read only for a session that called a model priced
    in tiers."""
    prefixes = short_prefixes(world, [r["id"] for r in rows])
    pricer = Pricer(remember=Path(world.path).parent / PRICE_FILE)
    kept = digests(world, rows)
    each_call = _tiered_calls(world, kept, pricer)
    forks = getattr(world, "forks", dict)()  # a team world's list: the fork's event only
    turns = turn_counts(world, [r["id"] for r in rows])
    mains = native_mains(world, [r["id"] for r in rows])  # every session's: 37 ms of a 165 ms page of 10,001
    lost = lost_sessions(world, {r["id"] for r in rows}, mains)  # a stat a session (stores/lost.py)
    hidden = picker_hidden(world, mains)
    for row in rows:
        title, sums = kept[row["id"]]
        row["prefix"] = prefixes.get(row["id"], row["id"])
        row["title"] = title
        row["forked_from"] = forks.get(row["id"])
        row["turns"] = turns.get(row["id"], 0)
        row["lost"] = lost.get(row["id"])  # what its harness lost: "gone", "shorter"
        row["restore"] = restore_command(row["prefix"]) if row["lost"] else None
        row["hidden"] = None if row["lost"] else hidden.get(row["id"])  # from the harness's picker
        row["unhide"] = unhide_command(row) if row["hidden"] else None
        row["tokens"] = sum_totals(sums)
        calls = each_call.get(row["id"]) or [(model, *counts) for model, _, *counts in sums]
        row["cost"] = calls_cost(calls, pricer)["usd"]
        if with_resumes:
            row["resume_cost"] = _resume_cost(world, row, pricer)
    return rows


def turn_counts(world, session_ids: list[str]) -> dict[str, int]:
    """session id -> the turns of its main conversation, counted as `dh log show`, the trace
    and the log's `turns` view number them: a turn cut by a crash and resumed is one turn (the
    prompt dh's resume went on with opens none)."""
    starts, cuts = world.turn_marks(session_ids if len(session_ids) <= 500 else None)
    return {sid: len(starts.get(sid, ())) - len(continuations(starts.get(sid, []), cuts.get(sid, [])))
            for sid in session_ids}


def picker_hidden(world, mains: dict[str, tuple]) -> dict[str, str]:
    """session id -> why its harness's own picker does not list it (its wrapper says, from
    the args dh started it with here; one decision per distinct command line), unless
    `dh restore --unhide` made it listed."""
    said: dict[tuple, str | None] = {}
    out = {}
    for sid, (harness, *_, argv) in mains.items():
        if argv and (harness, argv) not in said:
            said[harness, argv] = _hides(harness, argv)
        if argv and said[harness, argv]:
            out[sid] = said[harness, argv]
    listed = getattr(world, "sessions_with_event", lambda *_: set())(UNHIDDEN, list(out))
    return {sid: why for sid, why in out.items() if sid not in listed}


def unhide_command(row: dict) -> str | None:
    """The command that makes the harness's picker list the session, where dh can."""
    from ..wrappers import get

    return f"dh restore --unhide {row['prefix']}" if get(row["harness"]).unhides_picker else None


def _hides(harness: str, argv: str) -> str | None:
    from ..errors import DhError
    from ..wrappers import get

    try:
        args = json.loads(argv)
        return get(harness).picker_hides(args) if isinstance(args, list) else None
    except (DhError, ValueError, TypeError, IndexError):
        return None


DIGEST_RULES = f"{__version__}/1"  # a digest another dh (or other rules) made is made again


def digests(world, rows: list[dict]) -> dict[str, tuple[str, list]]:
    """session id -> (title, [model, calls, then their sums of tokens.KINDS] for each model
    it called), of each row's session: what the log keeps (worlds/migrations.py m045), the
    missing ones made from the records."""
    def make(ids: list[str]) -> dict[str, tuple[str, str]]:
        wanted = set(ids)
        every = len(ids) > 500  # past SQLite's bound values: read them all
        sums = world.call_sums(None if every else ids)
        titles = first_prompts(world, [r for r in rows if r["id"] in wanted], None if every else ids)
        return {sid: (titles[sid], json.dumps(sums.get(sid, []))) for sid in ids}

    kept = world.session_digests([r["id"] for r in rows], DIGEST_RULES, make)
    return {sid: (title, json.loads(calls)) for sid, (title, calls) in kept.items()}


def _tiered_calls(world, kept: dict, pricer: Pricer) -> dict[str, list[tuple]]:
    """Each call of the sessions that called a model priced in tiers (its cost is then not
    the cost of its sums)."""
    ids = [sid for sid, (_, sums) in kept.items()
           if any(pricer.known(model) and not pricer.flat(model) for model, *_ in sums)]
    return world.calls_by_session(ids) if ids else {}


def sum_totals(sums: list[list]) -> dict:
    """Token totals of per-model sums (model, calls, then the counts of tokens.KINDS), as
    token_totals has them."""
    totals = [sum(column) for column in zip(*(s[2:] for s in sums))] or [0] * len(KINDS)
    return {**dict(zip(KINDS, totals)), "model_calls": sum(s[1] for s in sums)}


def short_prefixes(world, wanted: list[str] | None = None) -> dict[str, str]:
    """For each dh id (or each of `wanted`), its shortest prefix (at least MIN_PREFIX
    characters) that is not also the start of another session's dh id or harness id
    (`dh log show` accepts both)."""
    rows = world.session_names()
    names = sorted({n for row in rows for n in row if n})
    if wanted is not None:
        keep = set(wanted)
        rows = [row for row in rows if row[0] in keep]
    out = {}
    for sid, native in rows:
        length = MIN_PREFIX
        for other in _neighbours(names, bisect.bisect_left(names, sid), (sid, native)):
            length = max(length, _common(sid, other) + 1)
        out[sid] = sid[:length]
    return out


def _neighbours(names: list[str], at: int, own: tuple) -> list[str]:
    """The names just before and just after `at` that are not the session's own: in sorted
    order, the two that share the longest start with it."""
    found = []
    for step, start in ((-1, at - 1), (1, at)):
        index = start
        while 0 <= index < len(names) and names[index] in own:
            index += step
        if 0 <= index < len(names):
            found.append(names[index])
    return found


def _common(a: str, b: str) -> int:
    """The length of the start a and b share (bisected on slices: 10,008 ids in a third of
    the time of a character loop)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def first_prompts(world, rows: list[dict], ids: list[str] | None) -> dict[str, str]:
    """`first_prompt` of each row's session: from one read of every first source, the
    sessions whose first source holds no prompt looked up one by one."""
    harness = {row["id"]: row["harness"] for row in rows}
    found = {}
    for session_id, group in itertools.groupby(world.first_source_prompts(ids), key=lambda r: r[0]):
        if session_id in harness:
            found[session_id] = _prompt_in(harness[session_id], (r[1:] for r in group))
    return {sid: found.get(sid) or first_prompt(world, sid, harness[sid]) for sid in harness}


def first_prompt(world, session_id: str, harness: str) -> str:
    """The session's first user prompt on one line, to recognise it by (read from the
    first records of its first source, as `dh log show` reads prompts)."""
    return _prompt_in(harness, world.first_prompt_rows(session_id))


def _prompt_in(harness: str, rows) -> str:
    from ..errors import UnknownHarness
    from ..wrappers import get

    try:
        wrapper, roles = get(harness), {}
    except UnknownHarness:  # a harness this dh does not know (a newer dh's log): no title
        return ""
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
