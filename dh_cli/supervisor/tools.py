"""Tool processes that outlive the harness.

Every harness runs its shell tools in a process group of their own, so a killed harness
leaves its running command behind: orphaned, still able to finish its side effect. dh is a
child subreaper, so those orphans are re-parented to dh. While the harness runs, dh keeps a
picture of its descendants; when the harness dies, each tool still running gets a grace period
to finish on its own (dh reaps it and keeps its exit code), and is then ended — SIGTERM, then
SIGKILL to its group. The outcome of each decides how dh reports the cut-off call."""

from __future__ import annotations

import os
import select
import signal
import time
from dataclasses import asdict, dataclass
from typing import Callable

import psutil

from ..procs import signal_group


@dataclass
class ToolOutcome:
    pid: int
    command: str
    started: float  # epoch seconds
    finished: bool = False  # ran to the end on its own
    exit_code: int | None = None
    ended_by_dh: bool = False
    killed_by: int | None = None  # the command died of this signal with the harness, not from dh

    def to_dict(self) -> dict:
        return asdict(self)


COMMAND_CHARS = 300


def clip(command: str) -> str:
    """At most COMMAND_CHARS of a command line, its head and its tail: the user's command
    can sit at the end of a long wrapper (Claude Code 2.1.332 runs `bash -c source
    <snapshot> … && eval '<command>' …`, whose head alone was 300 characters of set-up)."""
    if len(command) <= COMMAND_CHARS:
        return command
    half = (COMMAND_CHARS - 3) // 2
    return f"{command[:half]} … {command[-half:]}"


def _describe(proc: psutil.Process) -> tuple[float, list[str]] | None:
    """(create time, argv); argv is [] once the process is a zombie."""
    try:
        created = proc.create_time()
    except psutil.Error:
        return None
    try:
        return created, proc.cmdline()
    except psutil.ZombieProcess:
        return created, []
    except psutil.Error:
        return None


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"


# Linux lists a process's children per thread in /proc (kernels with CONFIG_PROC_CHILDREN)
_PROC_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def child_pids(pid: int) -> list[int]:
    """The direct children of pid: a few small reads in /proc where the kernel offers them.
    psutil's way reads the status of every process on the machine, which, every two seconds,
    was most of an idle supervisor's CPU."""
    if not _PROC_CHILDREN:
        return _psutil_children(pid)
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # the harness is gone
    pids = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                pids += [int(p) for p in handle.read().split()]
        except OSError:
            continue  # a thread that just ended
    return pids


def child_processes(pid: int):
    """psutil handles on pid's direct children (those that still exist)."""
    for child in child_pids(pid):
        try:
            yield psutil.Process(child)
        except psutil.Error:
            continue


def _psutil_children(pid: int) -> list[int]:
    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.Error:
        return []


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return pid


class ToolTracker:
    """One outcome per tool command, that is per process group the harness started: a shell
    tool is a group led by its shell (`bash -c …`). The leader decides: it exited on its own
    (finished, with its code), it died of a signal when the harness died (Codex's commands
    get SIGHUP from their terminal: the effect may be cut half-way even if a child such as
    `sleep` runs on), or dh had to end the group after the grace period."""

    def __init__(self, harness_pid: int, is_part: Callable[[str], bool] = lambda command: False,
                 tool_command: Callable[[list[str]], str] = " ".join,
                 on_part: Callable[[int, float], None] | None = None):
        self.harness_pid = harness_pid
        # What the user would call the command (the wrapper knows how its harness wraps
        # one: Claude Code's `bash -c source <snapshot> … eval '<command>' … pwd -P >| <file>`
        # held the command in its middle, which a clip of the whole line can cut out)
        self.tool_command = tool_command
        # Processes of the harness itself that run apart from it (the wrapper names them,
        # e.g. Codex's app-server daemon): never a tool, never reported to the model as one.
        # Their own children are the harness's tool commands.
        self.is_part = is_part
        self.on_part = on_part or (lambda pid, created: None)  # each part once, as found (guardian.py)
        self.parts: dict[int, tuple[float, str]] = {}
        self.seen: dict[int, tuple[float, str]] = {}  # pid -> (create time, command line)
        self.group: dict[int, int] = {}  # pid -> its process group
        self.name_only: set[int] = set()  # dead before dh read their command lines
        self.done: list[ToolOutcome] = []
        self.ended_parts: list[dict] = []  # harness helpers dh ended when the harness died

    def _remember(self, proc: psutil.Process) -> None:
        """Note the process, or refresh its command line: one first seen between fork and
        exec still shows its parent's (or none)."""
        if (info := _describe(proc)) and info[1]:
            if self._is_part(proc.pid, info):
                return
            self.seen[proc.pid] = (info[0], clip(self.tool_command(info[1])))
            self.group[proc.pid] = _pgid(proc.pid)

    def _is_part(self, pid: int, info: tuple[float, list[str]]) -> bool:
        """True for a part of the harness, noted as one."""
        command = clip(" ".join(info[1]))
        if not self.is_part(command):
            return False
        if pid not in self.parts:
            self.on_part(pid, info[0])
        self.parts[pid] = (info[0], command)
        return True

    def snapshot(self) -> None:
        """Remember the harness's direct children (its tool commands), whatever their group."""
        for child in child_processes(self.harness_pid):
            self._remember(child)
        for part in list(self.parts):
            for child in child_processes(part):
                self._remember(child)

    def _adopted(self) -> list[int]:
        """Processes re-parented to dh (dh is a subreaper), alive or already dead: every
        one of them was still running when the harness died."""
        pids = []
        for child in child_processes(os.getpid()):
            if child.pid == self.harness_pid or child.pid in self.parts:
                continue
            info = _describe(child)
            if info and info[1] and self._is_part(child.pid, info):
                continue
            if info and info[0] >= time.time() - 86400 and (info[1] or child.pid not in self.seen):
                # a zombie not seen alive (it died with the harness) is known by its name
                shown = clip(self.tool_command(info[1])) if info[1] else _name(child)
                self.seen[child.pid] = (info[0], shown)
                if not info[1]:
                    self.name_only.add(child.pid)
                self.group[child.pid] = _pgid(child.pid)
            if child.pid in self.seen:
                pids.append(child.pid)
        return pids

    def survivors(self) -> list[int]:
        """Tools still running after the harness died: remembered ones, plus any process
        re-parented to dh (started after the last snapshot)."""
        self._adopted()
        return [pid for pid in self.seen if _running(pid, self.seen[pid][0])]

    def seize(self) -> list[int]:
        """The harness just died: stop its parts and note what it left running, while their
        command lines can still be read (a command that ends first is known only by its
        name). Called at once, before dh drains the harness's pipes; again by settle."""
        self._freeze_parts()
        adopted = self._adopted()
        self._freeze_parts()  # and those just found among the re-parented
        self.snapshot()  # the commands the harness's parts are running
        return adopted

    def settle(self, grace: float, poll: float = 0.05) -> list[ToolOutcome]:
        """Wait up to `grace` seconds for survivors to finish, then end the rest; one
        outcome per process group that was cut off by the harness's death."""
        adopted = self.seize()
        pending = {pid: self.seen[pid][0] for pid in self.seen if _running(pid, self.seen[pid][0])}
        codes = {pid: _reap(pid) for pid in adopted if pid not in pending}  # died with the harness
        deadline = time.monotonic() + grace
        while pending and time.monotonic() < deadline:
            for pid in list(pending):
                if not _running(pid, pending[pid]):
                    del pending[pid]
                    codes[pid] = _exit_code(pid)
            time.sleep(poll)
        ended = set()
        for pid in pending:
            end_group(pid)
            ended.add(self.group.get(pid, pid))
            codes[pid] = _reap(pid)
        self._end_parts()
        for pid in codes:
            _reap(pid)  # a frozen part's finished command, re-parented to dh when the part died
        self.done.extend(self._outcomes(codes, ended))
        return self.done

    def _freeze_parts(self) -> None:
        """Stop the harness's own parts (SIGSTOP) the moment the harness is seen dead; their
        commands run on through the grace. A part is the harness: Codex's app-server daemon,
        left running, took a command's end as its cue to record the result, ask the model for
        the next reply and get it, and was then ended before it wrote that reply to the
        rollout, so the relaunched TUI asked for it again (reply #2 served twice, 1 run in 4,
        test_tui_kill_during_shell_tool_goes_on). Frozen, it does nothing after the kill; a
        command it started that ends is its zombie, whose exit code dh reads from /proc."""
        for pid, (created, _) in self.parts.items():
            if _running(pid, created):
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass

    def _end_parts(self) -> None:
        """The harness's own helper processes end with it, once the tool commands they ran
        were given their grace (they are the commands' parents: Codex's commands die with
        theirs). With no command running that is at once, not after a grace. SIGKILL, as its
        TUI got: a part is the harness, and SIGTERM first cost a second (Codex's daemon did
        not end on it within end_group's wait, seen in 2 of 3 bench runs). All are killed
        first, then awaited together on pidfds: end_group's 20 ms polls, one part after the
        other, were 45 ms of Codex's 70 ms from kill to relaunch (bench_tui, 0.171.0)."""
        live = {pid: info for pid, info in self.parts.items() if _running(pid, info[0])}
        for pid in live:
            signal_group(_pgid(pid), signal.SIGKILL)
            _kill(pid)
        _await_exits(list(live))
        for pid, (created, command) in self.parts.items():
            if pid in live:
                if _running(pid, created):
                    end_group(pid)
                self.ended_parts.append({"pid": pid, "command": command})
            _reap(pid)

    def _outcomes(self, codes: dict[int, int | None], ended: set[int]) -> list[ToolOutcome]:
        groups: dict[int, list[int]] = {}
        for pid in sorted(codes, key=lambda p: self.seen[p][0]):
            groups.setdefault(self.group.get(pid, pid), []).append(pid)
        outcomes = []
        for pgid, members in groups.items():
            # the group's leader is the command; the harness's own group has none of its own
            head = pgid if pgid in codes and pgid != self.harness_pid else members[0]
            created, command = self.seen[head]
            if head in self.name_only:  # e.g. "bash (sleep 3)": what ran on in its group
                command = self._with_members(command, [p for p in members if p != head])
            outcome, code = ToolOutcome(head, command, created), codes[head]
            if pgid in ended:
                outcome.ended_by_dh, outcome.exit_code = True, code
            elif code is not None and code < 0:
                outcome.killed_by = -code
            else:
                outcome.finished, outcome.exit_code = True, code
            outcomes.append(outcome)
        return outcomes

    def _with_members(self, head: str, members: list[int]) -> str:
        """A shell known by its name alone, named with the rest of its group: their command
        lines, or, when they too ended before dh looked, their names ("bash (sleep)")."""
        read = [self.seen[p][1] for p in members if p not in self.name_only]
        rest = read or [self.seen[p][1] for p in members]
        return clip(f"{head} ({'; '.join(rest)})") if rest else head


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _await_exits(pids: list[int], timeout: float = 1.0) -> None:
    """Sleep until each process has exited (a zombie counts), at most `timeout`; without
    pidfds (Linux < 5.3, others) return at once and the caller's end_group polls."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except (AttributeError, OSError):
            continue
    deadline = time.monotonic() + timeout
    try:
        waiting = list(fds)
        while waiting and (left := deadline - time.monotonic()) > 0:
            done, _, _ = select.select(waiting, [], [], left)
            waiting = [fd for fd in waiting if fd not in done]
    finally:
        for fd in fds:
            os.close(fd)


def _running(pid: int, create_time: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and abs(proc.create_time() - create_time) < 0.05
    except psutil.Error:
        return False


def _reap(pid: int) -> int | None:
    """Collect the exit status of a process re-parented to dh (None if it is not ours)."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if got == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def _exit_code(pid: int) -> int | None:
    """The exit code of a command that ended: reaped if it is dh's, else (a zombie child of
    a frozen part, which cannot reap it) read from field 52 of /proc/<pid>/stat, the raw
    wait status (Linux 3.5 and later)."""
    code = _reap(pid)
    if code is not None:
        return code
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
    except OSError:
        return None
    if len(fields) < 50 or fields[0] != b"Z":
        return None
    return os.waitstatus_to_exitcode(int(fields[49]))


def end_group(pid: int, wait: float = 1.0) -> None:
    """SIGTERM the process's group (and the process), then SIGKILL what is left."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        signal_group(pgid, sig)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _reap(pid) is not None or not psutil.pid_exists(pid):
                return
            time.sleep(0.02)


def end_descendants(exclude: set[int] = frozenset()) -> int:
    """End every process dh started that is still alive (used when dh itself stops)."""
    count = 0
    for child in psutil.Process().children(recursive=True):
        if child.pid in exclude:
            continue
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                end_group(child.pid, wait=0.5)
                count += 1
            _reap(child.pid)
        except psutil.Error:
            pass
    return count
