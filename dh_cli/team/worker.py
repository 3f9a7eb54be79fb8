"""`dh worker`: takes over sessions whose machine died mid-turn (issue 15).

The worker sleeps on the world's lease changes (protocol.py LeaseChanges: woken by any lease
change: takeovers, new leases, releases) or until the next live lease would lapse, claims
orphaned sessions (takeover.claim: a compare-and-set, the epoch moves to this worker) and
resumes each in a child `dh resume S --world W --lease-epoch E` (the world's URL in the
child's environment, never in its argv): the very path of a manual resume (pull, the
native state rebuilt under this machine's harness home, the cut step repaired), whose
supervisor adopts the claimed lease and replicates live.

A session whose cwd does not exist here is resumed there once the session's last workspace
snapshot (issue 16) is restored into it, by the child's `--cwd CWD --workspace restore`, before
the harness is relaunched. It is refused, with the reason written on its lease row, when the
world holds no snapshot of it, or when the cwd (or, for a missing one, the folder it would be
created in) is not a folder this user owns: a world row must not choose where dh writes.

Stopping (Ctrl-C, SIGTERM) hands the sessions back: each child gets SIGUSR1, stops its
harness without marking the session ended, ships what it logged and lets its lease lapse at
once, so another worker can claim it. A child that does not stop in time is fenced off (its
lease moved to the worker) and killed."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HarnessNotFound, NotGranted, WorldError
from ..paths import dh_home
from ..procs import drain
from ..worlds.locks import SAFE_ID
from .live_world import HAND_BACK
from .protocol import TeamWorld
from .takeover import Claim, Pass, claim, orphans, steal
from .worker_place import RunAs, current_user, place_refusal

IDLE_WAIT = 300.0  # longest sleep with nothing to wait for (a lease change wakes it sooner)
# An orphan left unclaimed after a claim (its row locked for a moment by a write's fence
# check, so SKIP LOCKED passed it by) sends no NOTIFY later: look again this soon. Before
# this, such an orphan waited for IDLE_WAIT (a takeover test saw no claim in 33 s).
RETRY = 1.0


@dataclass
class WorkerOptions:
    world: str  # the team world's name (team/: the registry)
    url: str
    harnesses: list[str] | None = None
    max_sessions: int = 4
    ttl_s: float = 15.0
    notice: object = print
    extra_args: list[str] = field(default_factory=list)  # passed to each `dh resume`
    run_as: RunAs | None = None  # the user the children run as, the roots (worker_place.py)
    local_flags: dict = field(default_factory=dict)  # this machine's, as `dh resume` reads them


class Worker:
    def __init__(self, opts: WorkerOptions):
        self.opts = opts
        self.children: dict[str, tuple[subprocess.Popen, Claim]] = {}
        self.unadopted: dict[str, int] = {}  # claimed, the child has not taken the lease yet
        self.passed: set[str] = set()  # sessions this machine cannot run (no harness): others may
        self.stopping = False
        self.changes = None  # the world's LeaseChanges, on the current connection

    def run(self) -> int:
        world = self._connect()  # a first failure is the user's error: one Error: line
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old = signal.set_wakeup_fd(wake_w)
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        chld = signal.signal(signal.SIGCHLD, lambda *_: None)  # its byte on the pipe wakes us
        self.opts.notice(f"dh worker: waiting for orphaned sessions in {world.shown}")
        try:
            world = self._serve(world, wake_r)
            self._hand_back(world)
        finally:
            signal.set_wakeup_fd(old)
            for sig, handler in {**handlers, signal.SIGCHLD: chld}.items():
                signal.signal(sig, handler)
            os.close(wake_r)
            os.close(wake_w)
            self._close(world)
        return 0

    def _connect(self):
        from . import open_world

        world = open_world(self.opts.world, self.opts.url)
        try:
            self.changes = world.lease_changes()
        except BaseException:
            world.close()
            raise
        return world

    def _serve(self, world: TeamWorld, wake_r: int):
        """Claim and sleep until stopped; a lost server is waited for (with backoff), not
        fatal: the children keep their own connections and the local log."""
        failures = 0
        while not self.stopping:
            try:
                world = world or self._connect()
                self._reap()
                self._keep_unadopted(world)
                self._claim_all(world)
                self._sleep(world, wake_r)
                failures = 0
            except WorldError as exc:
                if not failures:
                    self.opts.notice(f"dh worker: lost the world ({exc}); trying again")
                failures += 1
                world = self._close(world)
                select.select([wake_r], [], [], min(30.0, 0.5 * 2 ** failures))
                drain(wake_r)
        return world or self._connect_quietly()

    def _connect_quietly(self):
        try:
            return self._connect()
        except WorldError:
            return None

    def _close(self, world: TeamWorld):
        if self.changes is not None:
            try:
                self.changes.close()
            except Exception:  # noqa: BLE001 - on a broken connection it is gone anyway
                pass
            self.changes = None
        return _close(world)

    def _on_signal(self, signum, frame) -> None:
        self.stopping = True

    # claiming -------------------------------------------------------------------------------
    def _claim_all(self, world: TeamWorld) -> None:
        while len(self.children) < self.opts.max_sessions and not self.stopping:
            got = claim(world, self.opts.ttl_s, self.opts.harnesses,
                        lambda candidate: self._verdict(world, candidate),
                        # sessions this machine cannot run (no harness), and those whose
                        # child let the lease go as it failed but is not reaped yet
                        skip=self.passed | set(self.children))
            if got is None:
                return
            self._start(got)

    def _verdict(self, world: TeamWorld, candidate: Claim) -> str | None:
        reason = refusal(world, candidate, self.opts.run_as, self.opts.local_flags)
        if isinstance(reason, Pass):
            self.passed.add(candidate.session_id)
            self.opts.notice(f"dh worker: left session {candidate.session_id} to other workers: {reason}")
        return reason

    def _start(self, got: Claim) -> None:
        folder = dh_home() / "worker"
        log = child_log(folder, got.session_id)
        argv = [sys.executable, "-m", "dh_cli", "resume", "--world", self.opts.world,
                "--lease-epoch", str(got.epoch), "--lease-ttl", str(self.opts.ttl_s),
                *self.opts.extra_args]
        if got.restore:  # the child creates the cwd with the snapshot's files, then resumes
            argv += ["--cwd", got.cwd, "--workspace", "restore"]
        argv += ["--", got.session_id]  # checked by refusal(); never read as an option
        who = self.opts.run_as
        child = subprocess.Popen(argv, cwd=folder if got.restore else got.cwd, env=self._child_env(),
                                 **(who.popen_args() if who is not None else {}),
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                 start_new_session=True)
        log.close()
        self.children[got.session_id] = (child, got)
        self.unadopted[got.session_id] = got.epoch
        self.opts.notice(f"dh worker: took over session {got.session_id} from {got.from_host} "
                         f"(epoch {got.from_epoch} -> {got.epoch}); "
                         + (f"restoring its workspace into {got.cwd}" if got.restore
                            else f"resuming it in {got.cwd}"))

    def _child_env(self) -> dict:
        """The world's URL goes by the environment: argv is readable by every user (ps), a
        process's environment only by its user. A child run as another user gets that
        user's own homes and log, not ours."""
        from . import world_class

        env = {**os.environ, world_class(self.opts.world).url_variable: self.opts.url}
        who = self.opts.run_as
        if who is not None and who.switching:
            env = {k: v for k, v in env.items() if not k.startswith(("DH_HOME", "XDG_"))}
            env.update(HOME=who.home, USER=who.name, LOGNAME=who.name)
        return env

    def _keep_unadopted(self, world: TeamWorld) -> None:
        """Renew the leases claimed for children that have not adopted them yet: a child
        slow to start (a loaded machine) must not lose its claim to another worker."""
        for sid, epoch in list(self.unadopted.items()):
            renewed = world.lease_renew(sid, epoch, os.getpid())
            if not renewed or sid not in self.children:
                del self.unadopted[sid]

    def _reap(self) -> None:
        for sid, (child, _) in list(self.children.items()):
            if child.poll() is not None:
                del self.children[sid]
                if child.returncode in (HarnessNotFound.exit_code, NotGranted.exit_code):
                    self.passed.add(sid)
                self.opts.notice(f"dh worker: session {sid} ended here (dh resume exited with "
                                 f"{child.returncode})")

    def _sleep(self, world: TeamWorld, wake_r: int) -> None:
        timeout = _next_lapse(world)
        if len(self.children) < self.opts.max_sessions and orphan_left(
                world, self.opts.harnesses, self.passed | set(self.children)):
            timeout = min(timeout, RETRY)
        if self.unadopted:
            timeout = min(timeout, self.opts.ttl_s / 3)
        ready, _, _ = select.select([self.changes.fileno(), wake_r], [], [], timeout)
        if wake_r in ready:
            drain(wake_r)
        if self.changes.fileno() in ready:
            self.changes.drain()

    # stopping -------------------------------------------------------------------------------
    def _hand_back(self, world: TeamWorld) -> None:
        """Take each child's lease back, wait for the children to stop, and let the leases
        lapse now: the sessions stay open (not ended by a user) for another worker."""
        if world is None:  # no server: the children stop when their leases cannot be renewed
            for child, _ in self.children.values():
                os.killpg(child.pid, signal.SIGTERM)
            return
        self._reap()
        for child, _ in self.children.values():  # each ships what it has, then lets go
            child.send_signal(HAND_BACK)
        taken = {}
        for sid, (child, _) in self.children.items():
            try:
                child.wait(timeout=self.opts.ttl_s + 15)
                continue
            except subprocess.TimeoutExpired:  # unresponsive: fenced off, then killed
                if (epoch := steal(world, sid, self.opts.ttl_s, only_held=True)) is not None:
                    taken[sid] = epoch
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        for sid, epoch in taken.items():
            world.lease_lapse(sid, epoch)
        self.opts.notice(f"dh worker: stopped; {len(self.children)} session(s) handed back to the world")


def child_log(folder: Path, session_id: str):
    """The child's log, opened for appending: it holds the harness's raw output, so only
    this user reads it (0600 in a 0700 folder, also when either was made wider before)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    fd = os.open(folder / f"{session_id}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def refusal(world: TeamWorld, candidate: Claim, who: RunAs | None = None,
            local_flags: dict | None = None) -> str | None:
    """Why this worker must not resume the candidate here (None: it may; `candidate.restore`
    then says whether its cwd is to be restored first). What every machine would refuse is
    a str; what is this machine's own limit (its folders, its flags) a Pass."""
    if not SAFE_ID.fullmatch(candidate.session_id or ""):  # it names a file and an argv word here
        return f"its session id ({_shown(candidate.session_id)}) is not a dh session id"
    cwd = candidate.cwd
    if not cwd:
        return "it names no working directory"
    if not os.path.isabs(cwd) or os.path.normpath(cwd) != cwd:
        return f"its working directory ({_shown(cwd)}) is not a plain absolute path"
    who = who or current_user()
    if reason := place_refusal(cwd, who, _started_here(candidate.session_id, cwd)):
        return reason
    if reason := withheld_here(world, candidate, local_flags or {}):
        return Pass(reason)
    if os.path.isdir(cwd):
        return _not_mine(cwd, "its working directory", who.uid)
    parent = _nearest_existing(cwd)
    if not os.path.isdir(parent) or os.path.realpath(parent) != parent:
        return Pass(f"its working directory {cwd} does not exist on this machine (nor a folder "
                    "to create it in)")
    if reason := _not_mine(parent, f"the folder {cwd} would be restored in,", who.uid):
        return reason
    if not world.ws_snapshot_rows(candidate.session_id):
        return Pass(f"its working directory {cwd} does not exist on this machine, and the world "
                    "holds no workspace snapshot to restore it from")
    candidate.restore = True
    return None


def _shown(text: str | None) -> str:
    """A world's text in a reason people read: words for none, control characters visible,
    cut at 80 characters (never Python's repr: None, quotes, backslashes)."""
    from ..redact import neutralise

    if not text:
        return "empty"
    shown = neutralise(text[:80]).replace("\n", "\\x0a").replace("\t", "\\x09")  # one line
    return shown + ("…" if len(text) > 80 else "")


def _not_mine(path: str, what: str, uid: int) -> str | None:
    if Path(path).stat().st_uid != uid:
        return Pass(f"{what} {path} is not this user's on this machine")
    return None


def withheld_here(world: TeamWorld, candidate: Claim, local_flags: dict) -> str | None:
    """Why this machine's flags must not run the candidate (resume/grants.py): it had more
    permissions than they grant its harness. None for a session started here (its own
    flags come back with it) and for a harness this dh does not know (refused later)."""
    from ..errors import DhError
    from ..resume.grants import local_flags as flags_of, withheld
    from ..wrappers import get as get_wrapper

    if _started_here(candidate.session_id, candidate.cwd):
        return None
    try:
        wrapper = get_wrapper(candidate.harness)
        mine = flags_of(local_flags, wrapper)
        return withheld(world, wrapper, candidate.session_id, mine, dict(os.environ))
    except DhError:
        return None


def _started_here(session_id: str, cwd: str) -> bool:
    """The session was started (or adopted) in cwd on this machine, by this user's dh."""
    from ..worlds.local import LocalWorld

    try:
        world = LocalWorld(create=False)
    except Exception:  # noqa: BLE001 - no log here (or unreadable): not started here
        return False
    try:
        place = world.place(session_id)
        return place is not None and place[1] == cwd
    finally:
        world.close()


def _nearest_existing(path: str) -> str:
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return path


def orphan_left(world: TeamWorld, harnesses: list[str] | None, passed=()) -> bool:
    """An orphan this worker may claim (not one it passed on: its harness is missing here)."""
    return bool(orphans(world, harnesses, limit=1, skip=passed))


def _next_lapse(world: TeamWorld) -> float:
    """Seconds until the next held, open lease would lapse (then it may be claimable)."""
    lefts = [l.left for l in world.leases().values() if l.left > 0 and not l.released and not l.refused]
    return min(IDLE_WAIT, max(0.05, min(lefts) + 0.05)) if lefts else IDLE_WAIT


def _close(world: TeamWorld) -> None:
    if world is not None:
        try:
            world.close()
        except Exception:  # noqa: BLE001 - a broken connection closes as well as it can
            pass
    return None


