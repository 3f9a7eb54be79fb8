"""Human renderings of library results (tables and timelines). JSON output bypasses this."""

from __future__ import annotations

import json
import sys

from .. import output
from ..output import cells, clip_words, cut_cells, fitted
from ..tokens import Usage, call_text, totals_text
from ..events_text import summary
from .logview import SessionView


def state_label(session: dict) -> str:
    """The state a listing shows for a session (the one place to refine it, e.g. a session
    whose last turn was interrupted)."""
    return session.get("state") or "-"


def _count(n: int) -> str:
    """A count in at most five characters: 999, 12.3k, 4.5M."""
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}" if n < size * 100 else f"{n // size}{unit}"
    return str(n)


def _list_cells(s: dict, relative_times: bool, wide: bool) -> list[str]:
    from .sessionlist import relative

    when = relative(s["last_activity"]) if relative_times else (s["last_activity"] or "-")[:10]
    t = s.get("tokens") or {}
    cells = [s["prefix"], s["harness"], state_label(s), when, _count(s.get("turns") or 0),
             _count(Usage.of(t).total)]
    if "cost" in s:
        cells.append(money(s["cost"]))
    if wide:
        cells.append(_home_short(s.get("cwd") or "-"))
    return cells


def _home_short(path: str) -> str:
    import os

    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home != "/" and path.startswith(home) else path


def session_list(sessions: list[dict], relative_times: bool, width: int) -> None:
    """One line per session, fitted to `width` columns: the title takes what is left (a cwd
    column joins on terminals of 120 columns or more)."""
    wide = width >= 120
    header = ["ID", "HARNESS", "STATE", "ACTIVE", "TURNS", "TOKENS"]
    if any("cost" in s for s in sessions):
        header.append("COST")
    header += ["CWD"] if wide else []
    rows = [_list_cells(s, relative_times, wide) for s in sessions]
    if wide:  # the cwd column gets at most a third of the line
        limit = max(10, width // 3)
        rows = [r[:-1] + [clip_path(r[-1], limit)] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    used = sum(widths) + 2 * len(widths)
    room = width - used - 1
    lines = [_row(header, widths) + ("TITLE" if room >= 5 else "")]
    for cells, s in zip(rows, sessions):
        title = clip_words(_titled(s), room) if room >= 5 else ""
        lines.append((_row(cells, widths) + title).rstrip())
    output.print_text("\n".join(line.rstrip() for line in lines))
    for s in sessions:  # a session whose dh is gone (liveness.py): how to go on with it
        if s.get("hint"):
            output.print_text(f"{s['id']} was interrupted ({s.get('why')}): {s['hint']}")
    for s in sessions:  # its harness lost it (stores/lost.py): dh puts it back
        if s.get("lost"):
            output.print_text(f"{s['prefix']}: {s['harness']} lost this session (its native state "
                              f"is {s['lost']}); bring it back: {s['restore']}")
        elif s.get("hidden"):
            output.print_text(f"{s['prefix']}: not in {s['harness']}'s own picker ({s['hidden']}); "
                              "resuming it by id works" + (f"; listed there after: {s['unhide']}"
                                                           if s.get("unhide") else ""))


def _titled(session: dict) -> str:
    """The list's title, after the session it was forked from (resume/fork.py)."""
    title = session.get("title") or ""
    return f"(fork of {session['forked_from']}) {title}" if session.get("forked_from") else title


def _row(cells: list[str], widths: list[int]) -> str:
    return "".join(c.ljust(w) + "  " for c, w in zip(cells, widths))


def clip_path(path: str, room: int) -> str:
    """A path in at most `room` columns, its end kept: the folders that name it."""
    if cells(path) <= room:
        return path
    tail = cut_cells(path[::-1], room - 1)[::-1]
    cut = tail.find("/")
    return "…" + (tail[cut:] if 0 <= cut < len(tail) - 1 else tail)


def search_hits(hits, prefixes: dict, width: int) -> None:
    """One line per hit: which session, which turn, when, and the text around the words."""
    if not hits:
        output.note("no matches")
        return
    for hit in hits:
        head = f"{prefixes.get(hit.session_id, hit.session_id)}  {hit.harness}  turn {hit.turn}  "
        line(head + clip_words(hit.snippet, max(20, width - len(head) - 1)))


def write_raw(records) -> None:
    for record in records:
        sys.stdout.buffer.write(record.raw)
        del record  # a record may be huge: let it go before the next one is read
    sys.stdout.buffer.flush()


def _item_line(item: dict) -> str:
    kind = item["type"]
    mark = " (synthetic)" if item.get("synthetic") else ""
    if kind == "prompt":
        if item.get("synthetic"):
            return f"  user (synthetic): {item['text']}"
        if item.get("resumed"):
            return f"  user (resuming turn {item['turn']}){mark}: {item['text']}"
        return f"[turn {item['turn']}] user{mark}: {item['text']}"
    if kind == "assistant":
        return f"  assistant{mark}: {item['text']}"
    if kind == "model_call":
        cost = f" ({money(item['cost_usd'])})" if item.get("cost_usd") is not None else ""
        return "  model call " + _model_call(item) + cost
    if kind == "tool_call":
        return f"  tool {item['tool']} [{item['status']}] {item['input']}"
    if kind == "flagged":
        return f"  ! flagged record ({', '.join(item['flags'])}) in {item['source']}"
    if kind == "crash":
        kept = f"; {money(item['saved_usd'])} of finished calls kept" if item.get("saved_usd") else ""
        return f"  ✗ {item['text']}" + (f" (attempt {item['attempt']}{kept})" if item.get("attempt") else "")
    if kind == "resume":
        return f"  ↻ {item['text']}" + (f" at {item['at']}" if item.get("at") else "")
    if kind == "workspace":  # dh_cli/workspace/views.py: with_snapshots
        return f"  ⧉ workspace {item['text']}"
    return f"  {kind}: {item.get('text', '')}"


def _model_call(item: dict) -> str:
    """A model call's line: only what is known (no "None" for a missing field)."""
    facts = [f for f in (item.get("model"), item.get("stop_reason")) if f]
    text = item.get("msg_id") or ""
    if facts:
        text += f" ({', '.join(facts)})"
    tokens = call_text(item.get("tokens"))
    return f"{text}: {tokens}" if tokens else text


def event_line(event: dict) -> str:
    attempt = f" [attempt {event['attempt']}]" if event.get("attempt") else ""
    return f"dh {event['at'][11:23]}{attempt} {summary(event['type'], event.get('details') or {})}"


def line(text: str, width: int | None = None) -> None:
    """Every line of `dh log show` is printed here (plain text: written straight out, as
    Rich's rendering of each line cost half the time of a 100 MB session's show), its control
    characters made visible and wrapped at words to `width` when it goes to a terminal: a
    pager would cut it mid-word."""
    sys.stdout.write(fitted(output.visible(text), width) + "\n")


def session_head(view: SessionView, width: int | None = None) -> None:
    s = view.session
    line(f"session {s['id']}  {s['harness']} {s['harness_session_id'] or ''}".rstrip(), width)
    facts = [f"cwd {s['cwd']}" if s.get("cwd") else None, f"state {s['state']}",
             f"attempts {s['attempts']}"]
    line("  ".join(f for f in facts if f), width)
    if s.get("hint"):
        line(f"{s.get('why')}; resume it with: {s['hint']}", width)


def session_items(items, width: int | None = None) -> None:
    current = None
    for item in items:
        if item["source"] != current:
            current = item["source"]
            line(f"-- {current}", width)
        line(_item_line(item), width)


def session_tail(view: SessionView, width: int | None = None) -> None:
    for event in view.events:
        line(event_line(event), width)
    for src in view.sources:
        extra = f", {src['pending_bytes']} byte(s) of a torn last line pending" if src["pending_bytes"] else ""
        gens = f", {src['generations']} generations (rewritten)" if src["generations"] > 1 else ""
        line(f"source {src['relpath']}: {src['records']} records, {src['status']}{gens}{extra}", width)
    t = view.totals
    line(f"tokens: {totals_text(t)} over {t['model_calls']} model call(s)", width)
    for resume in t.get("resumes") or []:
        line(resume_line(resume), width)
    line(cost_line(t.get("cost") or {}), width)
    state = "complete" if view.turn_complete else "open"
    dangling = f"; dangling tool calls: {', '.join(view.dangling)}" if view.dangling else ""
    line(f"last turn: {state}{dangling}", width)


def money(usd: float | None) -> str:
    if usd is None:
        return "-"
    return f"${usd:.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.4f}"


def tokens_k(n: int) -> str:
    return f"{n / 1000:.0f}k" if n >= 10_000 else str(n)


def resume_line(r: dict) -> str:
    """attempt 2: resume re-cached 412k tokens, $1.54 (…)."""
    return (f"attempt {r['attempt']}: resume re-cached {tokens_k(r['recached'])} tokens, {money(r['usd'])} "
            f"(first call: {r['uncached']} uncached, {r['cache_write_5m']} cache write 5m, "
            f"{r['cache_write_1h']} cache write 1h, {r['cache_read']} cache read)")


def cost_line(cost: dict) -> str:
    text = f"cost: {money(cost.get('usd'))}"
    if cost.get("resume_usd") is not None:
        text += f" (of it, resumes' first calls: {money(cost['resume_usd'])})"
    if cost.get("unpriced_calls"):
        text += (f" ({cost['unpriced_calls']} call(s) of a model the price table does not know:"
                 f" {', '.join(cost['unpriced_models'])})")
    if cost.get("crashes"):
        text += f"; saved by resuming instead of re-billing after {cost['crashes']} crash(es): " \
                f"{money(cost.get('saved_usd'))}"
    return text


def session_view(view: SessionView, width: int | None = None) -> None:
    session_head(view, width)
    session_items(view.items, width)
    session_tail(view, width)


def follow_update(update: dict, as_json: bool = False) -> None:
    """One line per update of `dh log show --follow`, flushed at once so a pipe sees it live
    (with --json: one JSON object a line)."""
    if as_json:
        sys.stdout.write(json.dumps(update, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()
        return
    kind = update["kind"]
    if kind == "item":
        line = _item_line(update)
    elif kind == "result":
        line = f"  tool {update['tool']} [{update['status']}] {update.get('result', '')}"
    else:
        line = event_line(update)
    output.out.print(fitted(output.visible(line), output.terminal_width()), markup=False)
    output.out.file.flush()


def cost_table(report: dict) -> None:
    """`dh log cost`: one line per group, token counts in at most five characters, then the
    total. IN is the uncached input; OUT includes the reasoning tokens shown beside it."""
    groups = [g.upper() for g in report["by"]]
    header = [*groups, "CALLS", "IN", "CACHE READ", "CACHE WRITE", "OUT", "REASONING", "COST"]
    lines = [_cost_cells([row[g] for g in report["by"]], row) for row in report["rows"]]
    lines.append(_cost_cells(["total"] + [""] * (len(groups) - 1), report["totals"]))
    if report["totals"].get("recache_usd") != 0 or report["totals"].get("saved_usd") != 0:  # a relaunch
        header += ["RE-CACHE", "SAVED"]
        rows = [*report["rows"], report["totals"]]
        lines = [[*cells, money(row["recache_usd"]), money(row["saved_usd"])] for cells, row in zip(lines, rows)]
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    text = [_row(header, widths).rstrip()] + [_row(cells, widths).rstrip() for cells in lines]
    output.out.print("\n".join(text), markup=False, highlight=False, soft_wrap=True)


def _cost_cells(keys: list[str], row: dict) -> list[str]:
    t = row["tokens"]
    cost = money(row["usd"]) + (f" ({row['unpriced_calls']} unpriced)" if row["unpriced_calls"] else "")
    return [*map(str, keys), str(row["calls"]), _count(t["input"]), _count(t["cache_read"]),
            _count(t["cache_write"] + t["cache_write_1h"]), _count(t["output"]), _count(t["reasoning"]),
            cost]
