"""The supervisor-side snapshot thread: it follows the records the live mirror commits and
takes a workspace snapshot after each completed tool call that may write (the replay class
says which tools only read: wrappers/replay.py) and at each turn's end. It has its own
connection and never touches the harness: a slow snapshot only delays the next one."""

from __future__ import annotations

import os
import sqlite3
import sys
import threading

from ..errors import DhError
from ..osthread import name_os_thread
from ..wrappers.replay import replay_class
from ..worlds.local import STORED_RAW, LocalWorld, decode_raw
from ..wrappers.record_row import epoch_ms
from .restore import diff, flat_dir, flat_tree
from .scan import Rules
from .snapshot import Snapshotter
from .store import store_for

# the records of one source generation after an offset (raw as stored, whichever column
# holds it: local.py), in native order
NEW_RECORDS = (f'SELECT id, "offset", {STORED_RAW}, codec FROM records WHERE source_id = ?'
               ' AND generation = ? AND "offset" > ? AND id > ? ORDER BY "offset"')
# a snapshot taken once the harness has exited: it holds whatever the harness did last,
# recorded or not, so it is never the "last recorded step" a relaunch compares against
ATTEMPT_END = "attempt_end"
START = "start"  # the folder when dh first watched it: as a session's first launch starts
# seconds at most between two looks at the log for newly committed records: a step's
# snapshot should hold the folder as that step left it, before the harness's next command
# (a model round trip later: 0.1 s at the least in the fault soak) can change it. The
# shared mirror tells a client of its commits at most once a second (shared_server.py
# PROGRESS_EVERY): waiting for its word alone, a step's snapshot came 0.2-0.3 s late
# (median; half the steps had none of their own: bench/bench_snapshot_lag.py), up to a
# second. A look with nothing committed costs one `PRAGMA data_version` and a wake-up
# (130 us of CPU: 0.3% of a core while the harness runs)
POLL = 0.05
STOP_WAIT = 120.0  # how long the final snapshot may take when the attempt ends


class RecordFollower:
    """New records of a session, parsed by its wrapper, and what they mean for snapshots."""

    def __init__(self, world, wrapper, session_id: str, replay: dict):
        self.world, self.wrapper, self.session_id, self.replay = world, wrapper, session_id, replay
        self.last_id, self.turn, self.names = 0, 0, {}
        self.turns: dict[str, int] = {}  # call id -> the turn its result came in
        self.turn_at: int | None = None  # when the last turn's prompt was written (epoch ms)
        self.prompts: set = set()  # ids of the prompts counted (an OpenCode row is logged per update)
        self.version = None  # PRAGMA data_version at the last look
        self.place: tuple = (None, None, -1)  # (source id, generation, offset) last read

    def committed(self) -> bool:
        """Whether another connection committed since the last look: `PRAGMA data_version`
        costs microseconds, the records query a read of the session's index (the shipper
        asks the same way), so an idle session costs no query every POLL."""
        version = self.world.conn.execute("PRAGMA data_version").fetchone()[0]
        changed, self.version = version != self.version, version
        return changed

    def new(self) -> list:
        """The main source's records committed since the last look, in native order. Asked
        by offset, which the log's unique index seeks to: asked by id, SQLite read every
        record of the source at each look (a 2,000-record session: 370 us a look)."""
        if not self.committed():
            return []
        main = self.world.conn.execute("SELECT id, generation FROM sources WHERE session_id = ?"
                                       " ORDER BY rowid LIMIT 1", [self.session_id]).fetchone()
        if main is None:
            return []
        if tuple(main) != self.place[:2]:  # a new generation is read from its start
            self.place = (*main, -1)
        rows = self.world.conn.execute(NEW_RECORDS, [*self.place, self.last_id]).fetchall()
        if rows:
            self.last_id = max(self.last_id, max(row[0] for row in rows))
            self.place = (*main, rows[-1][1])
        return [self.wrapper.parse(decode_raw(raw, codec)) for _, _, raw, codec in rows]

    def steps(self) -> list[tuple[str, str | None]]:
        """(reason, call id) of each snapshot the new records call for, in order."""
        out: list[tuple[str, str | None]] = []
        parsed_records = self.new()
        cuts = self._cuts() if any(p.turn_start for p in parsed_records) else []
        for parsed in parsed_records:
            prompt = parsed.native_id or parsed.msg_id
            if parsed.turn_start and (prompt is None or prompt not in self.prompts):
                self.prompts.add(prompt)
                at = epoch_ms(parsed.ts)
                self.turn += not self.turn or not _continues(cuts, self.turn_at, at)
                self.turn_at = at
            for call in parsed.tool_calls:
                self.names[call.id] = call.name
            for result in parsed.tool_results:
                name = self.names.get(result.call_id, "")
                self.turns[result.call_id] = self.turn
                if replay_class(name, self.replay) != "safe":  # unknown tools may write too
                    out.append(("tool", result.call_id))
            if parsed.turn_end or parsed.kind == "assistant" and self.wrapper.is_complete([parsed]):
                out.append(("turn_end", None))
        return out


    def _cuts(self) -> list[int]:
        """When dh resumed a turn that was cut (its journal's resume_plan with `cut`): the
        first prompt after one goes on with that turn, as the log's `turns` view counts."""
        rows = self.world.conn.execute(
            "SELECT at FROM events WHERE session_id = ? AND type = 'resume_plan'"
            " AND json_extract(details, '$.cut') = 1", [self.session_id]).fetchall()
        return [t for t in (epoch_ms(row[0]) for row in rows) if t is not None]


def _continues(cuts: list[int], previous: int | None, at: int | None) -> bool:
    return previous is not None and at is not None and any(previous < cut <= at for cut in cuts)


class WorkspaceWatcher:
    def __init__(self, world_path, wrapper, session_id: str, cwd: str, replay: dict | None = None,
                 rules: Rules | None = None, notice=None, committed: threading.Event | None = None):
        self.world_path, self.wrapper, self.session_id, self.cwd = world_path, wrapper, session_id, cwd
        self.replay, self.rules = replay or {}, rules or load_rules()
        self.notice = notice or (lambda text: print(text, file=sys.stderr))
        self.stop_event = threading.Event()
        self.committed = committed  # the live mirror sets it after each commit of records
        self.thread = threading.Thread(target=self._run, name="dh-workspace", daemon=True)
        self.taken = 0
        self.error: BaseException | None = None
        self.started = threading.Event()  # the session's first snapshot is taken (or not needed)

    def start(self) -> "WorkspaceWatcher":
        self.thread.start()
        return self

    def wait_for_start(self, timeout: float) -> None:
        self.started.wait(timeout)

    def stop(self) -> None:
        """After the attempt: one last look at the records, a snapshot if they call for one."""
        self.stop_event.set()
        if self.committed is not None:
            self.committed.set()
        self.thread.join(timeout=STOP_WAIT)

    def _run(self) -> None:
        name_os_thread("dh-workspace")
        world = None
        try:
            world = LocalWorld(self.world_path, create=False)
            world.be_patient(600.0)
            follower = RecordFollower(world, self.wrapper, self.session_id, self.replay)
            follower.steps()  # records from before this attempt were snapshotted then
            snapper = Snapshotter(world, self.session_id, self.cwd, self.rules)
            if snapper.store.last(self.session_id) is None:
                # the folder as dh found it; the launch waits for it a bounded while
                # (supervisor/watchers.py START_WAIT). A session from before snapshots, or
                # with none pulled, gets it at the turn it is in.
                snapper.take(START, follower.turn or None)
            self.started.set()
            while not self._next_look():
                self._take(snapper, follower)
            self._take(snapper, follower, last=True)
        except (sqlite3.Error, DhError, OSError) as exc:
            # The snapshot is a convenience beside the log: a failure is reported, never fatal
            self.error = exc
            self.notice(f"dh: workspace snapshots stopped for session {self.session_id}: {exc}")
        finally:
            self.started.set()
            if world is not None:
                world.close()

    def _next_look(self) -> bool:
        """Wait for the next look at the records; True once the attempt ends. The mirror's
        word on a commit (`committed`) wakes the thread at once; else it looks every POLL."""
        if self.committed is None:
            return self.stop_event.wait(POLL)
        self.committed.wait(POLL)
        self.committed.clear()
        return self.stop_event.is_set()

    def _take(self, snapper: Snapshotter, follower: RecordFollower, last: bool = False) -> None:
        """One snapshot covers every step committed since the last look (the files cannot be
        had as they were between two of them); at the attempt's end, one more if they moved."""
        steps = follower.steps()
        if steps:
            reason = steps[-1][0]
            step = next((call for _, call in reversed(steps) if call), None)  # the last tool call
            # a tool step's row is kept even when its files equal the last snapshot's (it says
            # which step they are from); a turn's end only when something changed
            if snapper.take(ATTEMPT_END if last and reason == "tool" else reason,
                            follower.turn or None, step, always=reason == "tool"):
                self.taken += 1
        elif last and snapper.take(ATTEMPT_END, follower.turn or None):
            self.taken += 1


def unrecorded(world, session_id: str, cwd: str) -> list[dict]:
    """The folder against the session's last snapshot taken while its harness ran (a tool
    step, a turn's end, or START), as restore.diff sees it: "deleted" is a file the folder
    has and that snapshot lacks. Files changed by the last recorded step, when its snapshot
    came after the harness stopped, are listed too: the model is told to check, never
    to trust. The folder is read afresh (bench_workspace's 10,000 files: 0.2 s, against
    0.07 s for the tree of the snapshot the attempt's end took, which `dh resume` after a
    killed dh does not have)."""
    recorded = [s for s in store_for(world).snapshots(session_id) if s.reason != ATTEMPT_END]
    if not recorded or not os.path.isdir(cwd):
        return []
    changes = diff(flat_dir(cwd, load_rules()), flat_tree(world, recorded[-1].root))
    return [change.__dict__ for change in changes]


def load_rules() -> Rules:
    """The size limit and secret patterns of config.toml ([workspace])."""
    from ..config import load

    ws = load().settings.workspace
    return Rules(max_size=ws.max_file_size, secrets=tuple(ws.secret_patterns),
                 max_files=ws.max_files)
