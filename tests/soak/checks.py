"""The invariants checked after each soak case; each check returns its violations as lines.

* nothing paid twice: a reply delivered more than once was lost at a kill (delivered, not in
  the state that kill left: state.py) as many times as it was asked for again;
* every `never` tool ran at most once: each shell step's line is in steps.log at most once,
  but for a model that asked for the step again after dh told it the command may already
  have run (checks.warned_deliveries);
* the final files are right: each written file holds what the write gave it, each shell
  step's line is there, and any that is missing had its result tell the model so (dh's
  "may already have taken effect", or the harness's own error or cut result);
* the log is byte-exact against the native files (OpenCode: every row at its latest
  version, no row version twice);
* every crash is marked: one crash mark per kill of a running harness in dh's timeline, each
  inside the one turn the session has in `dh log show`, and the turn finished with the final
  text."""

from __future__ import annotations

import json
import subprocess
import sys

from dh_cli.logviews.timeline import timeline
from tests.fakes.model_server import tool_results
from tests.helpers.real_runs import MAY_HAVE_RUN, check_log_holds_every_record_once, read

from .state import Snapshot


def session_id(rig) -> str:
    world = rig.world()
    try:
        (session,) = world.list_sessions()
        return session["id"]
    finally:
        world.close()


def check_all(rig, harness: str, snapshots: list[Snapshot], cuts: tuple[int, int],
              lines: list[str], written: dict[str, str], final: str) -> list[str]:
    """cuts: (kills that met a running harness, how many of them came after it had written
    the turn's final answer)."""
    found = check_paid_once(rig.server, snapshots)
    found += check_files(rig, lines, written, lost_replies(snapshots))
    found += _guarded(check_log_holds_every_record_once, rig, harness)
    found += check_crashes_marked(rig, cuts, final)
    return found


def _guarded(check, *args) -> list[str]:
    try:
        check(*args)
    except AssertionError as exc:
        return [f"{check.__name__}: {str(exc)[:400]}"]
    return []


def lost_replies(snapshots: list[Snapshot]) -> dict[int, int]:
    """reply index -> how many kills found it delivered and not in the harness's state."""
    lost: dict[int, int] = {}
    for snap in snapshots:
        for index in snap.lost():
            lost[index] = lost.get(index, 0) + 1
    return lost


def check_paid_once(server, snapshots: list[Snapshot]) -> list[str]:
    counts = server.completed_counts()
    lost = lost_replies(snapshots)
    return [f"reply {i} delivered {n} times, lost by the harness {lost.get(i, 0)} time(s)"
            for i, n in sorted(counts.items()) if n > 1 + lost.get(i, 0)]


# how a harness itself tells the model a step was cut, stopped by its parent's death signal:
# Codex 0.171.0 writes the first two as the call's output before it exits, OpenCode 1.18.33
# the third in the tool part's output
HARNESS_CUT = ("aborted by user", "aborted before dispatch", "User aborted the command")


def told_not_done(server) -> set[str]:
    """Call ids whose result, as the model saw it, said the step may not have taken effect:
    dh's 'may already have taken effect', or the harness's own error or cut result."""
    ids = set()
    for request in server.main_requests():
        for call_id, text, is_error in tool_results(request["api"], request["body"]):
            if is_error or MAY_HAVE_RUN in text or any(cut in text for cut in HARNESS_CUT):
                ids.add(call_id)
    return ids


def check_files(rig, lines: list[str], written: dict[str, str],
                lost: dict[int, int]) -> list[str]:
    found = []
    steps = read(rig.proj / "steps.log").split()
    for line in lines:
        index = int(line.removeprefix("soak"))
        allowed = 1 + warned_deliveries(rig.server, index)
        if steps.count(line) > allowed:
            unrecorded = (f", its first run unrecorded when the harness lost reply {index}, the"
                          " model not told") if steps.count(line) <= allowed + lost.get(index, 0) else ""
            found.append(f"the never tool writing {line} ran {steps.count(line)} times{unrecorded}")
    missing = [line for line in lines if line not in steps]
    missing += [name for name, text in written.items() if read(rig.proj / name) != text]
    told = told_not_done(rig.server)
    if len(missing) > len(told):
        found.append(f"missing {missing}, but the model was told only of {sorted(told)}")
    return found


def warned_deliveries(server, index: int) -> int:
    """Deliveries of reply `index` to a request whose last user message carried dh's word
    that a step may already have taken effect (a resume's continuation prompt: a command
    that ran with no call recorded, or the folder changed since the last recorded step).
    The scripted model asks for its step again whatever it is told, where a real one would
    check first: that run is the model's, not dh's. The word may be in the system prompt
    instead (a Pi TUI relaunched without the prompt the user typed: wrappers/pi.py)."""
    log = server.log
    warned = {e["seq"] for e in log if e["event"] == "request" and e["kind"] == "main"
              and e["reply_index"] == index
              and MAY_HAVE_RUN in last_user_text(e["body"]) + system_text(e["body"])}
    done = {e["seq"] for e in log if e["event"] == "response_done"}
    return len(warned & done)


def last_user_text(body) -> str:
    """The text of the request's last user turn: every user message after the last other
    one (Anthropic Messages, OpenAI Responses and Chat Completions shapes). Claude Code
    2.1.332 may send its own user message after the prompt ("The date has changed…", seen
    when a soak crossed midnight), so the prompt is not always the last message."""
    items = (body or {}).get("messages") or (body or {}).get("input") or []
    trailing: list[dict] = []
    for item in reversed(items if isinstance(items, list) else []):
        if not isinstance(item, dict) or item.get("role") != "user":
            break
        trailing.insert(0, item)
    return "\n".join(_text(item.get("content")) for item in trailing)


def system_text(body) -> str:
    """The request's system prompt: Anthropic's `system`, the Responses API's
    `instructions`, or system/developer messages (Responses and Chat Completions shapes)."""
    body = body if isinstance(body, dict) else {}
    items = body.get("messages") or body.get("input") or []
    parts = [_text(body.get("system")), _text(body.get("instructions"))]
    parts += [_text(item.get("content")) for item in (items if isinstance(items, list) else [])
              if isinstance(item, dict) and item.get("role") in ("system", "developer")]
    return "\n".join(parts)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content or []
                     if isinstance(part, dict) and part.get("type") in ("text", "input_text"))


def check_crashes_marked(rig, cuts: tuple[int, int], final: str) -> list[str]:
    """cuts: as check_all has them; a kill after the final answer was written cut no turn,
    and dh marks it only if its log did not yet hold the whole turn when it died."""
    found = []
    shown = _log_show(rig, session_id(rig))
    marks = [m for m in timeline(shown["events"]) if m["kind"] == "crash"]
    kills, late = cuts
    if not kills - late <= len(marks) <= kills:
        found.append(f"{kills} kill(s) ({late} after the final answer) but {len(marks)} crash "
                     f"mark(s): {[m['label'] for m in marks]}")
    shown_at = sorted(i["at"] for i in shown["items"] if i["type"] == "crash" and i.get("at"))
    if shown_at != sorted(m["at"] for m in marks):
        found.append(f"crashes at {sorted(m['at'] for m in marks)}, dh log show has {shown_at}")
    prompts = {i["turn"] for i in shown["items"] if i["type"] == "prompt" and not i.get("resumed")}
    turns = {i["turn"] for i in shown["items"]}
    if len(prompts) != 1 or len(turns) != 1:
        found.append(f"one turn expected in dh log show, got turns {sorted(turns)}")
    if not shown.get("turn_complete") or final not in json.dumps(shown["items"][-3:]):
        found.append("dh log show: the turn did not finish with the final text")
    return found


def _log_show(rig, session: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "dh_cli", "log", "show", session, "--json"],
                         env=rig.env, cwd=rig.proj, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-500:]
    return json.loads(out.stdout)
