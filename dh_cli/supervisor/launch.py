"""Starting and resuming supervised sessions: find the harness binary, plan the launch,
record the intent, take the session's lock, and hand over to the Supervisor."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import socket
import sys
from pathlib import Path

from ..errors import HarnessNotFound, SessionLocked
from ..models import Session
from ..util import is_secret_name, redact_args as _redact_args, scrub
from ..versions import note_version
from ..wrappers import get as get_wrapper
from ..wrappers.base import Wrapper
from .procs import process_alive
from .live import Launch
from .runner import RunOptions, Supervisor, prepare_sync


def find_binary(wrapper: Wrapper, env: dict) -> list[str]:
    """DH_<HARNESS>_BIN (e.g. DH_CLAUDE_BIN, DH_CLAUDE_CODE_BIN), else the binary on PATH."""
    names = {wrapper.name, *wrapper.aliases}
    for name in names:
        value = env.get(f"DH_{name.upper().replace('-', '_')}_BIN")
        if value:
            return value.split() if " " in value and not Path(value).exists() else [value]
    found = shutil.which(wrapper.binary, path=env.get("PATH"))
    if not found:
        raise HarnessNotFound(f"{wrapper.binary!r} not found on PATH for harness {wrapper.name}",
                              hint=f"install it, or set DH_{wrapper.name.upper().replace('-', '_')}_BIN")
    return [found]


def redact_args(args: list[str]) -> list[str]:
    """The argv as stored in the log: values of flags named like keys or tokens are hidden,
    and so are URL passwords and the values of secret environment variables."""
    return scrub(_redact_args(args))


def without_redacted(args: list[str]) -> tuple[list[str], list[str]]:
    """The stored argv without the secret flags whose values were never stored (passing
    `***` on would be wrong): (args, names of the flags left out)."""
    out, dropped, i = [], [], 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg.startswith("-") and is_secret_name(name):
            if eq and value == "***":
                dropped.append(name)
            elif not eq and i + 1 < len(args) and args[i + 1] == "***":
                dropped.append(name)
                i += 1
            else:
                out.append(arg)
        else:
            out.append(arg)
        i += 1
    return out, dropped


PATIENCE = 600.0  # how long dh run/resume waits for a log that other dh processes keep busy


def _patient(world, opts: RunOptions) -> None:
    """Many dh processes on one log queue for its write lock; a supervising dh waits its
    turn rather than fail (the harness it runs must not be lost for a busy log)."""
    if hasattr(world, "be_patient"):
        world.be_patient(PATIENCE, lambda: opts.notice(
            "dh: the log is busy (other dh processes are writing to it); waiting"))


def start_run(world, harness: str, args: list[str], opts: RunOptions) -> int:
    _patient(world, opts)
    wrapper = get_wrapper(harness)
    opts.binary = find_binary(wrapper, opts.env)
    home = wrapper.home(opts.env)
    opts.headless = wrapper.is_headless(args)
    opts.interactive = not opts.headless and sys.stdin.isatty()
    plan = wrapper.plan_launch(args, opts.cwd, home)
    session = _session_for(world, wrapper, plan, opts, home)
    note_version(world, session, wrapper, opts.binary, opts.env, opts.notice)
    world.add_event(session.id, "run", {"argv": redact_args(plan.argv), "prompt": scrub(plan.prompt),
                                        "headless": opts.headless}, phase="intent")
    opts.args = plan.argv
    with world.lock_session(session.id):
        return Supervisor(world, wrapper, session, opts).run(plan.argv)


def _session_for(world, wrapper, plan, opts, home) -> Session:
    if plan.resuming and plan.native_id:
        existing = world.find_by_native(wrapper.name, plan.native_id)
        if existing:
            return existing
    return world.create_session(
        wrapper.name, harness_session_id=plan.native_id, cwd=opts.cwd, home=str(home),
        native_path=str(plan.native_path) if plan.native_path else None,
        argv=json.dumps(redact_args(plan.argv)), host=socket.gethostname(), state="starting")


def check_previous_attempt(world, session: Session) -> None:
    """Never two harness processes on one session: refuse while the last attempt lives."""
    launched = [e for e in world.events(session.id) if e.type == "launched"]
    if launched:
        last = launched[-1].details
        if process_alive(last.get("pid"), last.get("create_time")):
            raise SessionLocked(
                f"the previous attempt of session {session.id} (pid {last['pid']}) is still running",
                hint="wait for it to exit, or stop it, then resume")


def resume_session(world, session: Session, prompt: str | None, opts: RunOptions,
                   move_to: str | None = None, rehome: bool = False) -> int:
    """move_to: resume in that checkout instead; rehome: the session was just pulled
    from another machine (see resume/relocate.py)."""
    _patient(world, opts)
    wrapper = get_wrapper(session.harness)
    opts.binary = find_binary(wrapper, opts.env)
    original, dropped = without_redacted(json.loads(session.argv or "[]"))
    if dropped:
        opts.notice(f"dh: {', '.join(dropped)} not stored in the log (secret); resuming without it "
                    "(give it through the harness's environment or config instead)")
    opts.args = [a for a in original]
    opts.headless = wrapper.is_headless(original) if original else True
    opts.interactive = not opts.headless and sys.stdin.isatty()
    opts.cwd = session.cwd or opts.cwd
    with world.lock_session(session.id):
        check_previous_attempt(world, session)
        from ..resume.relocate import relocate_for_resume

        session = relocate_for_resume(world, wrapper, session, opts, move_to, rehome)
        # What the harness wrote while no dh mirrored it (dh was killed), including files the
        # log does not know yet: found by the session's native id or path (or, when dh died
        # before it learnt either, by cwd and time since the session began), then logged.
        prepare_sync(world, wrapper, session, launch=_since_created(session))
        session = world.get_session(session.id)
        supervisor = Supervisor(world, wrapper, session, opts)
        from ..resume.prepare import prepare_resume

        prepared = prepare_resume(world, wrapper, session, opts.replay)
        session = world.get_session(session.id)
        if prepared.turn_complete and opts.headless and not prompt and not prepared.repairs:
            # e.g. dh was killed and the harness finished its turn on its own: a resume would
            # only pay for a fresh model call (as after a headless kill past the final answer)
            world.update_session(session.id, state="finished")
            world.add_event(session.id, "resume_skipped", {"by": "dh resume", "why": "turn complete"},
                            phase="outcome")
            opts.notice(f"dh: session {session.id} already finished its turn; nothing to resume "
                        "(pass --prompt to continue it)")
            return 0
        if not prepared.has_state:
            argv = original
        elif not opts.headless and not prompt:  # a TUI: its wrapper says how the turn goes on
            argv, _ = supervisor.interactive_resume(session, prepared)
        else:
            text = prompt or (opts.continue_prompt if opts.headless else None)
            argv = wrapper.resume_args(original, session.harness_session_id, session.native_path,
                                       text, opts.headless)
        world.add_event(session.id, "resume", {"argv": redact_args(argv), "by": "dh resume",
                                               "repairs": prepared.repairs}, phase="intent")
        opts.notice(f"dh: resuming session {session.id} ({prepared.finished_calls} finished "
                    f"call(s) kept, {len(prepared.repairs)} repaired)")
        # asked only now: `--version` starts the harness, which a refused resume never does
        note_version(world, session, wrapper, opts.binary, opts.env, opts.notice)
        supervisor.session = world.get_session(session.id)
        return supervisor.run(argv)


def _since_created(session: Session) -> Launch | None:
    """For a session whose native id dh never learnt: whatever the harness created for its
    cwd since the session began (sessions other dh sessions own are skipped)."""
    if session.harness_session_id or session.native_path or not session.created_at:
        return None
    try:
        since = datetime.datetime.fromisoformat(session.created_at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return Launch(since, session.cwd or os.getcwd(), {})


def default_env() -> dict[str, str]:
    return dict(os.environ)
