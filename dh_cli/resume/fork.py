"""`dh resume S --world local` of a session that replicated to a world: one writer everywhere
means this machine's older copy never goes on as S (the world's S may have gone on without
it). It goes on as a NEW session S': a new dh id, a new native session the harness itself
forks from S's conversation (Wrapper.fork_args), or, for a harness whose fork cannot be told
where to write, the copy that fork would write, resumed (Wrapper.fork_copy); journalled as
forked from S (`forked` event; the list reads the local `forks` table). S is left as it is, here and in its world: its native
file is only put back from the log (as a resume would, journalled as a rebuild) for the harness
to read, and nothing is repaired or appended to S's conversation.

A cut turn is not repaired first: the repair would write into S. The harness carries the
conversation into the fork the way its own resume does (Claude Code drops a tool call that
has no result), and dh's repairs apply to S' from its first crash on."""

from __future__ import annotations

from dataclasses import replace

from .. import events
from ..pathrule import check_native_id
from ..errors import NativeStateError, UsageError
from ..models import Session
from ..supervisor import launch
from ..supervisor.spec import RunOptions
from ..supervisor.watchers import prepare_sync
from ..wrappers import get as get_wrapper
from .plan import Relauncher, resumed_headless, stored_args
from .prepare import Prepared, current_turn, restore_files


def fork_session(world, session: Session, prompt: str | None, opts: RunOptions,
                 world_name: str | None) -> int:
    """Start S' from S's conversation under supervision; the harness's exit code."""
    wrapper = get_wrapper(session.harness)
    original, _ = stored_args(world, wrapper, session, opts)
    headless = resumed_headless(wrapper, session, original)
    session, cut = _ready_on_disk(world, wrapper, session)
    native = session.harness_session_id
    if native is None:
        raise NativeStateError(f"session {session.id} holds no conversation yet: there is "
                               "nothing to fork", hint="start a new session with `dh run`")
    check_native_id(wrapper, native)  # it goes on the harness's command line
    text = prompt or (opts.continue_prompt if headless or cut else None)
    args = _fork_args(wrapper, session, original, text, headless, opts)
    if args is None:
        raise UsageError(f"dh cannot fork a {wrapper.name} session: {wrapper.name} has no way "
                         "dh drives to copy a session under a new id",
                         hint=f"`dh world pull` then `dh resume {session.id}` goes on with the "
                              "world's copy")
    opts.notice(f"dh: session {session.id} replicated to the world {world_name}; forking this "
                "machine's copy as a new session (the world's stays as it is)")
    forked = events.forked(session.id, native, world_name)
    return launch.start_run(world, wrapper.name, args, replace(opts, cwd=session.cwd or opts.cwd),
                            Relauncher, forked=forked)


def _fork_args(wrapper, session: Session, original: list[str], text, headless: bool,
               opts: RunOptions) -> list[str] | None:
    """The harness's own fork (fork_args), else a resume of the copy its fork would write
    (fork_copy), else None."""
    cwd = session.cwd or opts.cwd
    copy = wrapper.fork_copy(session.native_path, wrapper.home(opts.env), cwd)
    if copy is not None:
        return wrapper.resume_args(original, copy.stem, str(copy), text, headless)
    return wrapper.fork_args(original, session.harness_session_id, session.native_path, text, headless)


def _ready_on_disk(world, wrapper, session: Session) -> tuple[Session, bool]:
    """S's native state as its log holds it (what the harness wrote here since is logged
    first), under S's locks; (S as the log has it now, whether its last turn was cut)."""
    with launch.held(world, wrapper, session):
        launch.check_previous_attempt(world, session)
        launch.mark_unended_attempt(world, session, _complete(world, wrapper, session))
        session = prepare_sync(world, wrapper, session, launch=launch.since_created(session))
        sources = world.sources(session.id)
        if not sources or world.record_count(session.id) == 0:
            return session, False
        restore_files(world, session, Prepared())
        state = wrapper.turn_state(current_turn(world, session, sources[0]))
        return world.get_session(session.id), not state.complete


def _complete(world, wrapper, session: Session) -> bool:
    """Whether the log's current turn is complete (False with no source yet): asked before
    what the harness wrote after dh's death is logged, it says whether dh's death cut it."""
    sources = world.sources(session.id)
    return bool(sources) and wrapper.turn_state(current_turn(world, session, sources[0])).complete
