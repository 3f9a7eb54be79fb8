"""One readable line for each of dh's own journal events (crashes, resumes, repairs …), used
by `dh log show` and `--follow`. The JSON output keeps the raw details."""

from __future__ import annotations

import json
import signal

from .output import clip_words
from .util import readable_epoch


def _signal_name(number) -> str:
    try:
        return signal.Signals(number).name
    except (ValueError, TypeError):
        return f"signal {number}"


def _exited(d: dict) -> str:
    if d.get("stalled"):
        how = "stopped by dh: no progress (hung)"
    elif d.get("user_signal"):
        how = f"stopped by the user ({_signal_name(d['user_signal'])})"
    elif d.get("signal"):
        how = f"killed by {_signal_name(d['signal'])}"
    else:
        how = f"exited with code {d.get('code')}"
    line = f"harness {how} after {d.get('ran_for', 0):.1f} s"
    for tool in d.get("tools") or []:
        if tool.get("finished"):
            code = tool.get("exit_code")  # None: reaped by its parent before dh read its status
            fate = "finished on its own" + (f" (exit {code})" if code is not None else "")
        elif tool.get("killed_by"):
            fate = f"stopped with the harness ({_signal_name(tool['killed_by'])})"
        else:
            fate = "ended by dh"
        line += f"; tool command `{clip_words(str(tool.get('command', '')), 80)}` {fate}"
    return line


def _state(d: dict) -> str:
    """A transition: `RUNNING -> BACKOFF (crashed, next start in 1 s)`; events written
    before the state machine had a real `from` carry the outcome instead."""
    line = f"{d.get('from') or d.get('outcome')} -> {d.get('to')}"
    why = [str(d[k]) for k in ("reason",) if d.get(k)]
    if d.get("delay") and d.get("to") == "WAITING":
        why.append(f"going on in {d['delay']:.0f} s")
    elif d.get("delay"):
        why.append(f"next start in {d['delay']:g} s")
    return line + (f" ({', '.join(why)})" if why else "")


def _limit(d: dict) -> str:
    import time

    line = f"the service refused the turn: {d.get('label')} limit ({d.get('which')})"
    if reset := readable_epoch(d.get("reset_at")):  # a world's event may hold anything
        line += f", resets {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(reset))}"
    elif d.get("reset_at") is not None:
        line += ", at a reset time dh cannot read"
    return line + f"; read from {d.get('where')}"


def _short_argv(argv) -> str:
    return clip_words(" ".join(str(a) for a in (argv or [])), 120)


SUMMARIES = {
    "run": lambda d: f"run requested: {_short_argv(d.get('argv'))}",
    "launch": lambda d: f"launching: {_short_argv(d.get('argv'))}",
    "launched": lambda d: f"harness started (pid {d.get('pid')})",
    "exited": _exited,
    "state": _state,
    "resume": lambda d: "resume requested" + (f" by {d['by']}" if d.get("by") else ""),
    "resume_skipped": lambda d: f"nothing to resume ({d.get('why')}), by {d.get('by')}",
    "linger": lambda d: f"the turn is complete but the harness did not exit within {d.get('after')} s: ending it",
    "log_write_failed": lambda d: f"a record could not be written to the log: {d.get('error', d)}",
    "documents_restored": lambda d: f"documents restored beside the session: {len(d.get('files') or [])} file(s)",
    "untried_version": lambda d: f"{d.get('harness')} {d.get('version')} is a version dh was not tested with",
    "workspace": lambda d: f"workspace restored to {d.get('to')}",
    "resume_plan": lambda d: (f"resuming with: {_short_argv(d.get('argv'))} ({d.get('kept', 0)} finished "
                              f"call(s) kept)") if d.get("mode") == "resume"
                             else f"relaunching the original command ({d.get('why')})",
    "repair": lambda d: f"closing cut-off call {d.get('call_id')} ({_joined(d.get('tool'), d.get('replay') and 'replay ' + str(d['replay']))})",
    "repaired": lambda d: (f"told the model about {d.get('call_id')}: "
                           f"{clip_words(str(d.get('text', '')), 100)}"),
    "repair_skipped": lambda d: f"left {d.get('call_id')} as it is ({d.get('why')})",
    "unlogged_tool": lambda d: ("a command ran with no call in the session: "
                                f"{clip_words(str(d.get('command', '')), 80)}"),
    "rebuilt": lambda d: f"native file {d.get('path')} rebuilt from the log ({d.get('bytes')} bytes)",
    "unhidden": lambda d: (f"{d.get('path')} line {d.get('line')}: {d.get('field')} {d.get('from')} -> "
                           f"{d.get('to')}, so the harness's picker lists it (original kept as {d.get('kept')})"),
    "takeover": lambda d: (f"took over from {d.get('from_host')} (epoch {d.get('from_epoch')}) -> "
                           f"{d.get('host')} (epoch {d.get('epoch')}), by {d.get('by')}"),
    "limit": _limit,
    "forked": lambda d: (f"forked from session {d.get('from')}" + (f", which stays as it was in the world "
                                                                   f"{d['world']}" if d.get("world") else "")),
    "lease_lost": lambda d: f"lease in the world lost: {d.get('reason')}; not relaunching here",
    "stall": lambda d: f"no progress for {d.get('timeout')} s during a turn: stopping the harness",
    "source_rewritten": lambda d: f"{d.get('path')} was rewritten ({d.get('reason')}): new generation kept",
    "source_deleted": lambda d: f"{d.get('path')} was deleted (the log keeps its records)",
    "source_back": lambda d: f"{d.get('path')} is back",
    "source_unreadable": lambda d: f"{d.get('path', 'a source')} cannot be read: {d.get('error')}",
    "moved": lambda d: (f"moved from {d.get('from')} to {d.get('to')} ({d.get('records')} records "
                        f"rewritten), harness home {d.get('home_to')}" if d.get("from") != d.get("to")
                        else f"rebuilt under the harness home {d.get('home_to')}"),
    "source_moved": lambda d: f"{d.get('from')} -> {d.get('to')} ({d.get('records')} records rewritten,"
                              f" generation {d.get('generation')})",
}


def _joined(*facts) -> str:
    return ", ".join(str(f) for f in facts if f) or "-"


def summary(event_type: str, details: dict) -> str:
    make = SUMMARIES.get(event_type)
    try:
        return make(details) if make else _plain(event_type, details)
    except (KeyError, TypeError, ValueError):
        return _plain(event_type, details)


def _plain(event_type: str, details: dict) -> str:
    """An event no summary knows, as `type key=value ...` (JSON values, never a Python repr)."""
    facts = " ".join(f"{key}={json.dumps(value, ensure_ascii=False, default=str)}"
                     for key, value in (details or {}).items())
    return f"{event_type} {facts}".rstrip()
