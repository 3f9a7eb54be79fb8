"""Starting and resuming supervised sessions: find the harness binary, plan the launch,
record the intent, take the session's lock, and hand over to the Supervisor."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import socket
import sys
from contextlib import ExitStack
from pathlib import Path

from ..confine import adopt, check_native_id, place, settle
from ..errors import SessionLocked
from ..models import Session
from ..util import is_secret_name, redact_args as _redact_args, scrub
from ..versions import note_version
from ..wrappers import get as get_wrapper
from ..worlds.locks import native_keys
from ..wrappers.base import Wrapper
from ..worlds.log import Log
from .procs import process_alive
from .live import Launch
from .runner import RunOptions, Supervisor, prepare_sync


def find_binary(wrapper: Wrapper, env: dict) -> list[str]:
    """DH_<HARNESS>_BIN (e.g. DH_CLAUDE_BIN, DH_CLAUDE_CODE_BIN), else the binary on PATH.
    Never one of dh's own shims (see shims.py): a shim runs dh, which must find the real
    binary behind it, not the shim again."""
    from ..shims import real_binary, refuse_shim

    names = {wrapper.name, *wrapper.aliases}
    for name in names:
        var = f"DH_{name.upper().replace('-', '_')}_BIN"
        if value := env.get(var):
            argv = value.split() if " " in value and not Path(value).exists() else [value]
            refuse_shim(shutil.which(argv[0], path=env.get("PATH")) or argv[0], var)
            return argv
    return [real_binary(wrapper.binary, env.get("PATH"), wrapper.name, _bin_variable(wrapper))]


def _bin_variable(wrapper: Wrapper) -> str:
    """The variable the README names for this harness's binary (DH_CLAUDE_BIN: the binary's
    name, which is also one of the names find_binary reads)."""
    return f"DH_{wrapper.binary.upper().replace('-', '_')}_BIN"


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


def start_run(world: Log, harness: str, args: list[str], opts: RunOptions) -> int:
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
    with held(world, wrapper, session, plan.native_id, plan.native_path):
        return _still_logged(world, Supervisor(world, wrapper, session, opts).run(plan.argv))


def _still_logged(world, code: int) -> int:
    """The harness's exit code, once the log is known to be the file dh opened."""
    getattr(world, "check_in_place", lambda: None)()
    return code


def held(world, wrapper: Wrapper, session: Session, native_id=None, native_path=None) -> ExitStack:
    """The locks one writer holds: the dh session's, and the native session's (by its id and
    by its file), so no second dh runs a harness on the same native session."""
    stack = ExitStack()
    try:
        stack.enter_context(world.lock_session(session.id))
        path = native_path or session.native_path
        for key in native_keys(native_id or session.harness_session_id, str(path) if path else None):
            stack.enter_context(world.lock_native(wrapper.name, key))
    except BaseException:
        stack.close()
        raise
    return stack


def _session_for(world, wrapper, plan, opts, home) -> Session:
    """The dh session this run continues when the harness's own flags resume one the log
    knows (by its id or its file), else a new one."""
    existing = None
    if plan.resuming and plan.native_id:
        existing = world.find_by_native(wrapper.name, plan.native_id)
    if plan.resuming and plan.native_path and existing is None:
        existing = world.find_by_path(wrapper.name, str(plan.native_path))
    if existing is not None:
        if existing and place(world, existing.id) is None:  # from a world: adopted as this run's
            return adopt(world, wrapper, existing, home, opts.cwd)
        if existing:
            return settle(world, wrapper, existing, opts.env)
    return world.create_session(
        wrapper.name, harness_session_id=plan.native_id, cwd=opts.cwd, home=str(home),
        native_path=str(plan.native_path) if plan.native_path else None,
        argv=json.dumps(redact_args(plan.argv)), host=socket.gethostname(), state="starting")


# A previous attempt may be on its way out (its supervisor, fenced by a takeover, is stopping
# it: SIGTERM, then SIGKILL after stop_wait, 5 s): wait that long before refusing.
PREVIOUS_PATIENCE = 8.0


def _alive_for(patience: float, pid, create_time) -> bool:
    import time

    deadline = time.monotonic() + patience
    while process_alive(pid, create_time):
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)
    return False


def check_previous_attempt(world, session: Session) -> None:
    """Never two harness processes on one session: refuse while the last attempt lives."""
    launched = [e for e in world.events(session.id) if e.type == "launched"]
    if launched:
        last = launched[-1].details
        if _alive_for(PREVIOUS_PATIENCE, last.get("pid"), last.get("create_time")):
            raise SessionLocked(
                f"the previous attempt of session {session.id} (pid {last['pid']}) is still running",
                hint="wait for it to exit, or stop it, then resume")


def resume_session(world: Log, session: Session, prompt: str | None, opts: RunOptions,
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
    if session.harness_session_id is not None:  # refused before anything is moved or run
        check_native_id(wrapper, session.harness_session_id)
    session = settle(world, wrapper, session, opts.env)
    if place(world, session.id) is not None:  # else: opts.cwd stays the user's (adoption)
        opts.cwd = session.cwd or opts.cwd
    with held(world, wrapper, session):
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
        if getattr(world, "masked_records", lambda _s: 0)(session.id):
            opts.notice(f"dh: session {session.id} came from a world that masks credentials: "
                        "the harness sees *** where the records held what looked like a secret")
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
            check_native_id(wrapper, session.harness_session_id)
            argv = wrapper.resume_args(original, session.harness_session_id, session.native_path,
                                       text, opts.headless)
        world.add_event(session.id, "resume", {"argv": redact_args(argv), "by": "dh resume",
                                               "repairs": prepared.repairs}, phase="intent")
        opts.notice(f"dh: resuming session {session.id} ({prepared.finished_calls} finished "
                    f"call(s) kept, {len(prepared.repairs)} repaired)")
        # asked only now: `--version` starts the harness, which a refused resume never does
        note_version(world, session, wrapper, opts.binary, opts.env, opts.notice)
        supervisor.session = world.get_session(session.id)
        return _still_logged(world, supervisor.run(argv))


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
