"""`dh resume S` and the team worlds: one decision, then one hold around the local resume.

The decision (`route`): `--world local` of a session this machine replicated to a world forks
it as a new session (resume/fork.py; one writer everywhere); a plain `dh resume S` asks the
configured world, else the one S replicated to, and refuses when S went on elsewhere
(returning.py); `--world W` pulls S from W; anything else is the local log's resume.

The hold (`holding`): with a world, the lease is claimed (waited for or stolen when asked),
S pulled under it and a takeover recorded in its timeline; whatever happens after the claim,
the hold ends (takeover.end_hold decides how: released, lapsed or refused)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import ContextManager

from ..config import load as load_config
from ..errors import UsageError
from ..resume.fork import fork_session
from ..resume.plan import wait_for_reset
from ..supervisor.spec import RunOptions
from ..worlds.local import LocalWorld
from .lease import hold_and_pull
from .live_world import wanted_world
from .returning import check_not_gone_on, returning_world, session_here
from .takeover import before_resume, end_hold, record_takeover

FORK, RETURNING, PULL, PLAIN = "fork", "returning", "pull", "plain"

# the RunOptions of the resume, from the keywords of its live link (world, url, ttl, lease)
Options = Callable[..., RunOptions]
# the local resume of a session that is in the local log now: (ref, options, rehome) -> exit code
Run = Callable[[str, RunOptions, bool], int]


@dataclass(frozen=True)
class ResumeAsk:
    """What `dh resume` was asked, as far as the team worlds are concerned."""

    ref: str
    world: str | None = None  # --world as given: None (not given), "local", or a team world
    url: str | None = None
    prompt: str | None = None
    cwd: str | None = None
    steal: bool = False
    wait: float | None = None
    lease_ttl: float | None = None
    lease_epoch: int | None = None  # claimed for this process by a dh worker of this machine
    at_reset: bool = False


@dataclass(frozen=True)
class Route:
    kind: str  # FORK | RETURNING | PULL | PLAIN
    world: str | None = None  # the team world the session is held in during the resume
    url: str | None = None
    went_to: str | None = None  # FORK: the world the session replicated to


@dataclass
class Held:
    session_id: str
    link: dict = field(default_factory=dict)  # the keywords of its live link, for Options


def consulted_world(flag: str | None) -> str | None:
    """The world `dh resume` consults before anything else: --world, else the configured one
    (a plain `dh resume S` on a machine whose config names a team world must find out that another
    machine took S over, and refuse naming it). None: the local world only."""
    name = wanted_world(flag, load_config().settings)
    return None if name == "local" else name


def route(local: LocalWorld, ask: ResumeAsk) -> Route:
    """Fork, returning world, pull or plain; refuses a returning machine's resume of a session
    that went on elsewhere."""
    world = consulted_world(ask.world)
    if ask.world is None:
        world, url = returning_world(local, ask.ref, world, ask.url)
        if world is None:
            return Route(PLAIN)
        check_not_gone_on(local, world, url, ask.ref)
        return Route(RETURNING, world, url)
    if ask.world == "local":
        went_to = remembered_world(local, ask.ref)
        return Route(FORK, went_to=went_to) if went_to else Route(PLAIN)
    return Route(PULL, world, ask.url)


def remembered_world(local: LocalWorld, ref: str) -> str | None:
    """The world the session replicated to from here (None: it never did)."""
    session = session_here(local, ref)
    remembered = local.remembered_world(session.id) if session else None
    return remembered[0] if remembered else None


def holding(local: LocalWorld, ask: ResumeAsk, chosen: Route, notice) -> ContextManager[Held]:
    """The session as the resume holds it: in its team world under a lease, else only here."""
    if chosen.world is not None:
        return _held_in_world(local, ask, chosen, notice)
    return nullcontext(Held(ask.ref, {"world": "local"} if ask.world == "local" else {}))


@contextmanager
def _held_in_world(local: LocalWorld, ask: ResumeAsk, chosen: Route, notice) -> Iterator[Held]:
    claimed = before_resume(chosen.world, ask.ref, chosen.url, ask.steal, ask.wait,
                            ask.lease_epoch, notice)
    # hold_and_pull lets its own lease go when the pull fails: from here on the hold is ours
    session_id, added, shown, lease = hold_and_pull(local, chosen.world, ask.ref, chosen.url,
                                                    ask.lease_ttl, claimed)
    failure = None
    try:
        if added is not None:
            notice(f"dh: pulled session {session_id} from {shown} ({added} record(s) added)")
        if claimed is not None:
            record_takeover(local, session_id, lease, "dh resume --steal" if ask.steal else "dh worker")
        yield Held(session_id, dict(world=chosen.world, url=chosen.url, ttl=ask.lease_ttl, lease=lease))
    except BaseException as exc:  # failed before its supervisor ran: the session is not ended
        failure = exc
        raise
    finally:
        end_hold(local, lease, session_id, failure, claimed=ask.lease_epoch is not None)


def resume_with_worlds(local: LocalWorld, ask: ResumeAsk, options: Options, run: Run,
                       notice) -> int:
    """`dh resume`: decide, hold, then `run` the local resume inside the hold; its exit code."""
    chosen = route(local, ask)
    if chosen.kind == FORK:
        return _fork(local, ask, chosen.went_to, options(world="local"))
    with holding(local, ask, chosen, notice) as held:
        if ask.at_reset and not _waited_for_reset(local, held.session_id, notice):
            return 130
        return run(held.session_id, options(**held.link), chosen.world is not None)


def _fork(local: LocalWorld, ask: ResumeAsk, went_to: str, opts: RunOptions) -> int:
    if ask.cwd:
        raise UsageError("--cwd does not apply to a fork: it starts in the session's own checkout")
    return fork_session(local, local.find_session(ask.ref), ask.prompt, opts, went_to)


def _waited_for_reset(local: LocalWorld, ref: str, notice) -> bool:
    """Whether the wait for the limit's reset ran out (False: Ctrl-C stopped it)."""
    try:
        wait_for_reset(local, local.find_session(ref).id, notice)
    except KeyboardInterrupt:
        notice("dh: stopped waiting; nothing was resumed")
        return False
    return True
