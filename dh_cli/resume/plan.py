"""One relaunch plan, for `dh resume` and for the supervisor's automatic restart alike: get
the native state ready (prepare.py), then decide the argv, environment and typed text of
the next attempt from the session's wrapper. The Supervisor is handed a `Relauncher` (its
`plan` and `turn_complete`), so dh_cli/supervisor/ imports nothing from this package."""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import dataclass, field, replace

from .. import events
from ..confine import place, settle
from ..pathrule import check_native_id
from ..errors import DhError, NativeStateError, UsageError
from ..models import Session
from ..util import readable_epoch, scrub
from ..supervisor import launch
from ..supervisor.spec import LaunchSpec, RunOptions
from ..supervisor.runner import Supervisor
from ..supervisor.waiting import clock_time, span
from ..supervisor.watchers import prepare_sync
from ..versions import note_version
from ..wrappers import get as get_wrapper
from ..wrappers.base import Wrapper
from ..wrappers.common import with_flags
from ..wrappers.travel import travelling_args
from . import grants
from .prepare import Prepared, current_turn, prepare_resume
from ..wrappers.replay import changed_files_text, restored_behind_text, steps_named, unlogged_text
from ..workspace import steps_not_restored, unrecorded_changes


@dataclass(frozen=True)
class RelaunchPlan:
    mode: str  # "resume" (the harness's own resume flags), "relaunch" (the original command), "skip"
    session: Session  # as the log has it once the native state is ready
    argv: tuple[str, ...] = ()  # the harness's args for the next attempt
    env: dict = field(default_factory=dict)  # name -> value (None: unset) for that attempt
    typed: str | None = None  # text to type into its TUI once `ready` is drawn
    ready: bytes | None = None
    continues: str = ""  # how a cut turn goes on (see Wrapper.interactive_resume)
    kept: int = 0  # finished calls the resumed harness sees
    repairs: tuple = ()
    note: str | None = None  # the wrapper's one line for the user, under dh's relaunch notice


def plan_relaunch(world, wrapper: Wrapper, session: Session, spec: LaunchSpec, opts: RunOptions,
                  *, by: str, attempt: int | None = None, tools=(), prompt: str | None = None,
                  skip_finished: bool = False) -> RelaunchPlan:
    """tools: the outcomes of the tool commands of the attempt that ended (they decide how a
    cut-off call is reported); prompt: the user's, for `dh resume --prompt`; skip_finished:
    a headless turn already complete with nothing repaired is not resumed (it would only pay
    for a fresh model call)."""
    _write(world, session, events.resume(by, attempt), attempt)
    # every caller has just drained the native files (supervisor/watchers.py prepare_sync)
    prepared = prepare_resume(world, wrapper, session, opts.replay, list(tools), synced=True)
    session = world.get_session(session.id)
    behind = _not_restored(world, wrapper, session, opts)
    if (skip_finished and prepared.turn_complete and spec.headless and not prompt and not prepared.repairs
            and _limit_of(world, wrapper, session) is None):
        _write(world, session, events.resume_skipped(by, "turn complete"), attempt)
        return RelaunchPlan("skip", session, kept=prepared.finished_calls)
    if not prepared.has_state or not session.harness_session_id and not session.native_path:
        if spec.foreign:
            raise NativeStateError(
                f"session {session.id} came from elsewhere and holds no conversation yet: dh "
                "does not run its original command here", hint="start it anew with `dh run`")
        plan = _relaunch(wrapper, session, spec)
        plan, changed = _told_of_changes(world, wrapper, plan, spec, opts)
        _write(world, session, events.resume_plan("relaunch", why="no native state yet",
                                                  argv=launch.redact_args(list(plan.argv)),
                                                  changed=changed), attempt)
        return plan
    plan = _resume(world, wrapper, session, spec, opts, prepared, prompt, behind)
    _write(world, session, events.resume_plan(
        "resume", argv=launch.redact_args(list(plan.argv)), repairs=prepared.repairs,
        rebuilt=prepared.rebuilt, kept=prepared.finished_calls, continues=plan.continues,
        cut=not prepared.turn_complete, by=by, not_restored=[s.call_id for s in behind]), attempt)
    return plan


def _limit_of(world, wrapper: Wrapper, session: Session):
    """The provider's limit that cut the log's current turn (a harness may write it as the
    turn's last answer: Claude Code's rate_limit row), or None."""
    import time

    sources = world.sources(session.id)
    return wrapper.limit_from(current_turn(world, session, sources[0]), time.time()) if sources else None


def _relaunch(wrapper: Wrapper, session: Session, spec: LaunchSpec) -> RelaunchPlan:
    """No conversation in the native state yet: the original command, or for a TUI killed
    before its state held the prompt, what its wrapper says (Wrapper.restart_unstarted)."""
    tui = None if spec.headless else wrapper.restart_unstarted(
        list(spec.args), session.harness_session_id, session.native_path)
    if tui is None:
        return RelaunchPlan("relaunch", session, tuple(spec.args))
    return _from_wrapper("relaunch", tui, session=session)


def _told_of_changes(world, wrapper, plan: RelaunchPlan, spec, opts) -> tuple[RelaunchPlan, int]:
    """A session whose harness recorded nothing may still have run a step (Claude Code can
    run a command before it writes the prompt's row): when the folder differs from the
    session's last snapshot (its start), the prompt sent again carries dh's word, and the
    user is told in any case. (the plan, how many changes were found)"""
    changed = _unrecorded(world, plan.session, spec.cwd, opts)
    if not changed:
        return plan, 0
    note = changed_files_text(changed)
    argv = wrapper.with_note(list(plan.argv), note)
    opts.notice(f"dh: {note}" + ("" if argv is not None else
                " (no prompt goes with this relaunch: the model is not told; tell it yourself)"))
    return (replace(plan, argv=tuple(argv)) if argv is not None else plan), len(changed)


def _resume(world, wrapper, session, spec, opts, prepared: Prepared, prompt, behind=()) -> RelaunchPlan:
    """The harness's own resume: headless (or with the user's prompt) through its resume
    flags; a TUI the way its wrapper carries a cut turn on (argv, environment, typed text)."""
    native_id = session.harness_session_id
    if native_id is not None:  # it goes on the harness's command line: a world may have chosen it
        check_native_id(wrapper, native_id)
    done = dict(session=session, kept=prepared.finished_calls, repairs=tuple(prepared.repairs))
    cut = not prepared.turn_complete or _limit_of(world, wrapper, session) is not None
    changed = _unrecorded(world, session, spec.cwd, opts) if cut else []
    text = prompt or _continue_prompt(opts, spec, prepared.unlogged, cut=cut, changed=changed,
                                      behind=behind)
    if spec.headless or prompt:
        argv = wrapper.resume_args(list(spec.args), native_id, session.native_path, text, spec.headless)
        return RelaunchPlan("resume", argv=tuple(argv), continues="prompt", **done)
    records = current_turn(world, session, world.sources(session.id)[0])
    tui = wrapper.interactive_resume(list(spec.args), native_id, session.native_path, text, records,
                                     notes=bool(prepared.unlogged or changed or behind))
    return _from_wrapper("resume", tui, **done)


def _from_wrapper(mode: str, tui, **plan) -> RelaunchPlan:
    """The plan for a TUI from its wrapper's Relaunch (wrappers/relaunch.py)."""
    return RelaunchPlan(mode, argv=tuple(tui.argv), env=dict(tui.env), typed=tui.typed,
                        ready=tui.ready, continues=tui.continues, note=tui.note, **plan)


def _continue_prompt(opts: RunOptions, spec: LaunchSpec, unlogged: list[dict], cut: bool,
                     changed: list[dict] = (), behind=()) -> str | None:
    """The continuation prompt, with a word on each tool command that ran without a call in
    the session, on files changed since the last recorded step, and on recorded steps whose
    files a restore could not bring (the model decides what to check); in a terminal the
    user is told too (of the last already: _not_restored), and a TUI whose turn was not cut
    gets no prompt at all."""
    if not spec.headless and not cut:
        return None
    notes = [unlogged_text(outcome) for outcome in unlogged]
    if changed:
        notes.append(changed_files_text(list(changed)))
    if not spec.headless:
        for note in notes:
            opts.notice(f"dh: {note}")
    if behind:
        notes.append(restored_behind_text(list(behind)))
    return "\n\n".join([opts.continue_prompt, *notes])


def _unrecorded(world, session: Session, cwd: str, opts: RunOptions) -> list[dict]:
    """The folder's changes since the last recorded step; a folder or snapshot that cannot
    be read is said in one line and the turn goes on without the word."""
    try:
        return unrecorded_changes(world, session.id, cwd)
    except (DhError, OSError, sqlite3.Error) as exc:
        opts.notice(f"dh: could not compare {cwd} with the last recorded step's snapshot: {exc}")
        return []


def _not_restored(world, wrapper, session: Session, opts: RunOptions) -> list:
    """The recorded steps whose files the restore before this relaunch could not bring (its
    snapshot is older than them), told to the user here; [] when nothing was restored."""
    try:
        behind = steps_not_restored(world, wrapper, session.id, opts.replay)
    except (DhError, OSError, sqlite3.Error) as exc:
        opts.notice(f"dh: could not tell which steps the restored workspace holds: {exc}")
        return []
    if behind:
        opts.notice(f"dh: the workspace of session {session.id} was restored from a snapshot taken "
                    f"before {len(behind)} recorded step(s), whose files may be missing: "
                    f"{steps_named(behind)}")
    return behind


def _write(world, session: Session, event: events.Event, attempt: int | None) -> None:
    # a resume argv or a repair may hold a token: never in the log
    world.add_event(session.id, event.type, scrub(event.details), attempt, event.phase)


@dataclass(frozen=True)
class Relauncher:
    """What the Supervisor asks between attempts (bound to one world, wrapper and settings)."""

    world: object
    wrapper: Wrapper
    opts: RunOptions

    def turn_complete(self, session: Session) -> bool:
        mark = self.turn_mark(session)
        return mark is not None and mark[1]

    def turn_mark(self, session: Session) -> tuple[str | None, bool] | None:
        """(the record that opened the log's current turn, whether that turn is complete);
        None while the session has no source."""
        sources = self.world.sources(session.id)
        if not sources:
            return None
        state = self.wrapper.turn_state(current_turn(self.world, session, sources[0]))
        return state.opener, state.complete

    def limit(self, session: Session, now: float):
        """The provider's limit that ended the log's current turn (Wrapper.limit_from)."""
        sources = self.world.sources(session.id)
        if not sources:
            return None
        return self.wrapper.limit_from(current_turn(self.world, session, sources[0]), now)

    def plan(self, session: Session, spec: LaunchSpec, attempt: int, tools) -> RelaunchPlan:
        return plan_relaunch(self.world, self.wrapper, session, spec, self.opts, by="dh run",
                             attempt=attempt, tools=tools)


def start_run(world, harness: str, args: list[str], opts: RunOptions) -> int:
    """`dh run`: launch.start_run with this module's relaunch plan."""
    return launch.start_run(world, harness, args, opts, Relauncher)


def resume_session(world, session: Session, prompt: str | None, opts: RunOptions,
                   move_to: str | None = None, rehome: bool = False) -> int:
    """`dh resume`. move_to: resume in that checkout instead; rehome: the session was just
    pulled from another machine (see resume/relocate.py)."""
    launch.patient(world, opts)
    wrapper = get_wrapper(session.harness)
    original, foreign = stored_args(world, wrapper, session, opts)
    if session.harness_session_id is not None:  # refused before anything is moved or run
        check_native_id(wrapper, session.harness_session_id)
    session = settle(world, wrapper, session, opts.env)
    cwd = (session.cwd or opts.cwd) if place(world, session.id) is not None else opts.cwd  # else: adoption
    headless = resumed_headless(wrapper, session, original)
    spec = LaunchSpec(tuple(launch.find_binary(wrapper, opts.env)), tuple(original), opts.env, cwd,
                      headless, not headless and sys.stdin.isatty(), foreign=foreign)
    with launch.held(world, wrapper, session):
        launch.check_previous_attempt(world, session)
        launch.mark_unended_attempt(world, session,
                                    Relauncher(world, wrapper, opts).turn_complete(session))
        session, spec = _relocated(world, wrapper, session, opts, spec, move_to, rehome)
        # What the harness wrote while no dh mirrored it (dh was killed), including files the
        # log does not know yet: found by the session's native id or path (or, when dh died
        # before it learnt either, by cwd and time since the session began), then logged.
        session = prepare_sync(world, wrapper, session, launch=launch.since_created(session))
        return _resume_now(world, wrapper, session, prompt, opts, spec)


# The longest `--at-reset` waits: a week is the longest limit a provider has (Anthropic's
# and OpenAI's weekly ones), and a day more covers time zones and rounding.
MOST_AT_RESET = 8 * 24 * 3600


def limit_reset(world, session_id: str) -> float | None:
    """When the provider's limit the session last met goes away (epoch seconds): the time
    its supervisor was waiting for, else the reset the harness told; None if neither, or
    when what the log holds is no time (a world's event may say anything)."""
    for event in reversed(world.events(session_id)):
        if event.type == events.STATE and event.details.get("to") == "WAITING":
            return readable_epoch(event.details.get("until"))
        if event.type == events.LIMIT:
            return readable_epoch(event.details.get("reset_at"))
    return None


def wait_for_reset(world, session_id: str, notice, clock=None) -> None:
    """`dh resume --at-reset`: sleep until the session's limit resets (at once when it has
    passed or is unknown, with a line saying so), never longer than MOST_AT_RESET: a reset
    further away is no provider's and is refused. Ctrl-C ends the wait and dh with it."""
    import time

    reset = limit_reset(world, session_id)
    now = (clock or time).time()
    if reset is None or reset <= now:
        notice(f"dh: session {session_id} has no limit to wait for" if reset is None
               else f"dh: session {session_id}'s limit has reset; resuming now")
        return
    if reset - now > MOST_AT_RESET:
        raise UsageError(f"session {session_id}'s recorded limit resets at {clock_time(reset)}, more than "
                         f"{MOST_AT_RESET // 86400} days away: no provider's limit lasts that long",
                         hint="resume without --at-reset, or wait and resume later")
    notice(f"dh: waiting for session {session_id}'s limit to reset: going on at {clock_time(reset)}, "
           f"in {span(reset - now)} · Ctrl-C stops")
    (clock or time).sleep(reset - now)


def resumed_headless(wrapper, session: Session, original: list[str]) -> bool:
    """As the session was launched: `dh run codex` with no arguments is Codex's TUI (resumed
    headless, `codex exec resume`, it failed at once outside a git checkout, and at a
    terminal the user got no TUI). A session dh did not launch (imported) has no arguments
    stored: headless."""
    return wrapper.is_headless(original) if session.argv is not None else True


def stored_args(world, wrapper: Wrapper, session: Session, opts: RunOptions) -> tuple[list[str], bool]:
    """(the args the session resumes with, whether they came from elsewhere). Only a
    session dh started on this machine keeps its own command line; any other's argv is
    data (wrappers/travel.py): what travels, plus this user's `local_flags`."""
    own = getattr(world, "own_argv", lambda _sid: None)(session.id)
    original, dropped = launch.without_redacted(json.loads(own or session.argv or "[]"))
    if dropped:
        opts.notice(f"dh: {', '.join(dropped)} not stored in the log (secret); resuming without it "
                    "(give it through the harness's environment or config instead)")
    if own is not None:
        return original, False
    kept, left = travelling_args(wrapper, original)
    mine = grants.local_flags(opts.local_flags, wrapper)
    grants.check(world, wrapper, session.id, mine, opts.env)  # never with fewer permissions than it had
    if left:
        opts.notice(f"dh: session {session.id} came from elsewhere: its {', '.join(left)} "
                    f"stay{'s' if len(left) == 1 else ''} behind; it runs with this machine's "
                    f"local_flags for {wrapper.name} ({' '.join(mine) or 'none'})")
    return with_flags(kept, mine), True


def _relocated(world, wrapper, session, opts, spec, move_to, rehome) -> tuple[Session, LaunchSpec]:
    """relocate.py moves the session when asked (or adopts one from a world) and names the
    cwd the launch then runs in, on the object it is given (opts is frozen: a copy of its
    own)."""
    from .relocate import relocate_for_resume

    where = _Where(spec.cwd, opts.env, opts.notice)
    session = relocate_for_resume(world, wrapper, session, where, move_to, rehome)
    return session, replace(spec, cwd=where.cwd)


@dataclass
class _Where:
    cwd: str
    env: dict
    notice: object


def _resume_now(world, wrapper, session, prompt, opts, spec) -> int:
    if getattr(world, "masked_records", lambda _s: 0)(session.id):
        opts.notice(f"dh: session {session.id} came from a world that masks credentials: "
                    "the harness sees *** where the records held what looked like a secret")
    plan = plan_relaunch(world, wrapper, session, spec, opts, by="dh resume", prompt=prompt,
                         skip_finished=True)
    if plan.mode == "skip":
        world.update_session(session.id, state="finished")
        opts.notice(f"dh: session {session.id} already finished its turn; nothing to resume "
                    "(pass --prompt to continue it)")
        return 0
    opts.notice(f"dh: resuming session {session.id} ({plan.kept} finished "
                f"call(s) kept, {len(plan.repairs)} repaired)")
    if plan.note:
        opts.notice(f"dh: {plan.note}")
    # asked only now: `--version` starts the harness, which a refused resume never does
    note_version(world, plan.session, wrapper, list(spec.binary), opts.env, opts.notice)
    supervisor = Supervisor(world, wrapper, plan.session, opts, spec, Relauncher(world, wrapper, opts))
    supervisor.attempt_env, supervisor.attempt_typed = dict(plan.env), (plan.typed, plan.ready)
    return launch.still_logged(world, supervisor.run(list(plan.argv)))
