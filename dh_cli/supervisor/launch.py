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

from ..confine import adopt, place, settle
from ..errors import HarnessNotFound, SessionLocked
from ..mirror.live import Launch
from .. import events
from ..models import Session
from ..util import is_secret_name, redact_args as _redact_args, scrub
from ..versions import note_version
from ..wrappers import get as get_wrapper
from ..worlds.locks import native_keys
from ..wrappers.base import Wrapper
from ..worlds.log import Log
from ..procs import process_alive
from .runner import Supervisor
from .spec import LaunchSpec, RunOptions


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
            found = shutil.which(argv[0], path=env.get("PATH"))
            if found is None:  # this machine's lack, not the session's (a worker passes it on)
                raise HarnessNotFound(f"{var}={value}: no such executable on this machine")
            refuse_shim(found, var)
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


def patient(world, opts: RunOptions) -> None:
    """Many dh processes on one log queue for its write lock; a supervising dh waits its
    turn rather than fail (the harness it runs must not be lost for a busy log)."""
    if hasattr(world, "be_patient"):
        world.be_patient(PATIENCE, lambda: opts.notice(
            "dh: the log is busy (other dh processes are writing to it); waiting"))


def start_run(world: Log, harness: str, args: list[str], opts: RunOptions, relauncher,
              forked: events.Event | None = None) -> int:
    """`dh run`: relauncher(world, wrapper, opts) makes the Supervisor's relaunch plan (see
    dh_cli/resume/plan.py: this package imports nothing from resume/). forked: the new
    session is a fork of another (resume/fork.py), journalled before its harness starts."""
    patient(world, opts)
    wrapper = get_wrapper(harness)
    binary = find_binary(wrapper, opts.env)
    home = wrapper.home(opts.env)
    headless = wrapper.is_headless(args)
    plan = wrapper.plan_launch(args, opts.cwd, home)
    spec = LaunchSpec(tuple(binary), tuple(plan.argv), opts.env, opts.cwd, headless,
                      not headless and sys.stdin.isatty())
    session = _session_for(world, wrapper, plan, opts, home)
    if forked is not None:
        _record_fork(world, session, forked)
    note_version(world, session, wrapper, binary, opts.env, opts.notice)
    event = events.run(redact_args(plan.argv), scrub(plan.prompt), headless)
    world.add_event(session.id, event.type, event.details, phase=event.phase)
    supervisor = Supervisor(world, wrapper, session, opts, spec, relauncher(world, wrapper, opts))
    with held(world, wrapper, session, plan.native_id, plan.native_path):
        return still_logged(world, supervisor.run(plan.argv))


def _record_fork(world, session: Session, forked: events.Event) -> None:
    events.add(world, session.id, forked)
    if hasattr(world, "remember_fork"):  # the local log's list shows it (a world: the event)
        world.remember_fork(session.id, forked.details["from"])


def still_logged(world, code: int) -> int:
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
    launched = [e for e in world.events(session.id) if e.type == events.LAUNCHED]
    if launched:
        last = launched[-1].details
        if _alive_for(PREVIOUS_PATIENCE, last.get("pid"), last.get("create_time")):
            raise SessionLocked(
                f"the previous attempt of session {session.id} (pid {last['pid']}) is still running",
                hint="wait for it to exit, or stop it, then resume")


def mark_unended_attempt(world, session: Session, turn_complete: bool) -> None:
    """An attempt with a launch and no end was cut by dh's own death (SIGKILL, a lost
    machine): no handler of dh's could write how it ended. Before anything goes on, the log
    says so, once: a crash where it happened, unless the log's turn was already complete
    when dh died (`turn_complete`, asked before what the harness wrote since is logged):
    then dh died while the harness was closing and nothing was cut (Codex's `exec` takes
    up to seconds to exit after its turn)."""
    attempt, last_state = None, "RUNNING"
    for event in world.events(session.id):
        if event.type == events.LAUNCHED:
            attempt = event.attempt
        elif event.type == events.STATE:
            last_state = event.details.get("to") or last_state
            if event.details.get("outcome"):
                attempt = None
        elif event.type == events.EXITED:
            attempt = None
    if attempt is None:
        return
    if turn_complete:
        event = events.state(last_state, "EXITED", "dh was killed after the harness finished "
                             "its turn; how the harness exited was never recorded",
                             outcome="finished", exit_unrecorded=True)
    else:
        event = events.state(last_state, "EXITED", "dh was killed while the harness ran; how "
                             "it ended was never recorded", outcome="crashed", dh_killed=True)
    events.add(world, session.id, event, attempt)


def since_created(session: Session) -> Launch | None:
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
