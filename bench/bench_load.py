"""Load: many `dh run` sessions at once on one dh.db, each over a fake harness that appends
Pi-format records at a fixed rate (tests/fakes/pi_writer.py, launched as `pi` via DH_PI_BIN).

Measures
  lost      native lines that are not in the log once every dh has exited (and whether the
            logged bytes equal the native file, session by session)
  locked    "database is locked" failures: dh processes that failed, or said the log was locked
  lag       time from a record's append (its `t`, written by the writer) to the moment a poller
            reading dh.db every --poll seconds first sees it committed: p50 / p90 / p99 / max
            (resolution: the poll interval)
  dh CPU    CPU seconds of the dh processes (their rusage from wait4, minus what each writer
            reports for itself, plus the shared mirror's process, read from /proc once the
            last `dh run` has exited, while the server lingers), total and as cores busy over
            the run; and the same after
            taking off each process's fixed cost (start-up, launch, final checks), measured
            in the same run as the median of 3 `dh run`s over a writer of no records
  floor     the per-record CPU of a bare Python loop committing the same records to SQLite
            one by one (bench/floor.py), measured in the same run
  WAL       the largest size of dh.db-wal seen by the poller
  split     dh's CPU read from /proc thread by thread (bench/proc_cpu.py) at two marks: once
            every session has a record committed (plus a second), and a second before the
            first writer ends. Between the marks is the steady state: its us per record, per
            thread (mirror, checkpoint, main, ...), next to the floor; before the first mark
            is each session's start-up (interpreter, imports, launch, first sync), with the
            steady cost of the seconds it already mirrored taken off. With --single, one
            session at the same rate, in the same run: what the other writers add per record
            (lock waits, page caches that every other process's commit invalidates).
Modes: `dh run` hands its session to the shared mirror (dh_cli/mirror/shared_server.py,
DH_SHARED_MIRROR=1, set by the bench); --in-process runs with DH_SHARED_MIRROR=0 (each `dh run` mirrors in its own
process); --baseline runs both, the same load, in the same run.
A benchmark, not a test: it prints the figures (the pytest version, tests/test_load.py, only
checks that nothing is lost and nothing fails on a lock).
Run: python bench/bench_load.py [--sessions 32 --rate 200 --seconds 60]"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))

from floor import commit_floor, pi_load_lines  # noqa: E402
from load_report import report  # noqa: E402
from proc_cpu import process_cpu, thread_cpu, total_cpu  # noqa: E402

from dh_cli.mirror.shared_wire import server_pid  # noqa: E402
from dh_cli.resume.rebuild import source_bytes  # noqa: E402
from dh_cli.worlds.local import LocalWorld, decode_raw  # noqa: E402

WRITER = ROOT / "tests" / "fakes" / "pi_writer.py"


@dataclass
class LoadResult:
    sessions: int
    native_records: int = 0
    logged_records: int = 0
    lost: int = 0
    mismatched_sessions: int = 0
    locked_failures: int = 0
    failed_runs: list = field(default_factory=list)
    lags: list = field(default_factory=list)
    dh_cpu: float = 0.0
    writer_cpu: float = 0.0
    wall: float = 0.0
    db_bytes: int = 0
    wal_peak: int = 0
    split: dict | None = None  # SteadySplit.figures()
    server_cpu: float = 0.0  # the shared mirror's CPU seconds (part of dh_cpu)
    steady_lags: list = field(default_factory=list)  # lags of the records appended in the steady window
    rate: float = 0.0

    def lag(self, q: float) -> float:
        if not self.lags:
            return float("nan")
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def to_dict(self) -> dict:
        return {"sessions": self.sessions, "native_records": self.native_records,
                "logged_records": self.logged_records, "lost": self.lost,
                "mismatched_sessions": self.mismatched_sessions,
                "locked_failures": self.locked_failures, "failed_runs": self.failed_runs,
                "lag_ms": {"p50": self.lag(0.5) * 1000, "p90": self.lag(0.9) * 1000,
                           "p99": self.lag(0.99) * 1000, "max": max(self.lags, default=0) * 1000,
                           "mean": statistics.fmean(self.lags) * 1000 if self.lags else None,
                           "samples": len(self.lags)},
                "dh_cpu_s": round(self.dh_cpu, 2), "writer_cpu_s": round(self.writer_cpu, 2),
                "wall_s": round(self.wall, 1), "db_bytes": self.db_bytes,
                "wal_peak_bytes": self.wal_peak}


class LagPoller:
    """Reads new records from dh.db every `interval` s (read-only) and notes, for each load
    record, how long after its append it was first seen committed."""

    def __init__(self, db: Path, interval: float):
        self.db, self.interval = db, interval
        self.lags: list[float] = []
        self.appended: list[float] = []  # each lag's append time (epoch seconds)
        self.seen = 0
        self.last_id = 0
        self.wal_peak = 0
        self.wal = Path(f"{db}-wal")
        self.first_seen: dict[str, float] = {}  # session id -> when its first load record was seen
        self.load_seen = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "LagPoller":
        self.thread.start()
        return self

    def _run(self) -> None:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
        try:
            while not self.stop.is_set():
                self._poll(conn)
                self.stop.wait(self.interval)
            self._poll(conn)
        finally:
            conn.close()

    def _poll(self, conn) -> None:
        rows = conn.execute("SELECT id, COALESCE(raw, packed), codec, session_id FROM records"
                            " WHERE id > ? ORDER BY id", [self.last_id]).fetchall()
        now = time.time()
        try:
            self.wal_peak = max(self.wal_peak, self.wal.stat().st_size)
        except FileNotFoundError:
            pass
        for row_id, raw, codec, session_id in rows:
            self.last_id = row_id
            raw = decode_raw(raw, codec)
            if b'"customType":"load"' not in raw:
                continue
            appended = json.loads(raw)["data"]["t"]
            self.lags.append(now - appended)
            self.appended.append(appended)
            self.first_seen.setdefault(session_id, now)
            self.load_seen += 1
        self.seen += len(rows)

    def finish(self) -> list[float]:
        self.stop.set()
        self.thread.join(60)
        return self.lags


class SteadySplit:
    """Reads the dh processes' CPU (thread by thread, from /proc) at the warm-up mark and at
    the end mark (see the module's docstring), in a thread of its own."""

    WARM = 1.0  # seconds after every session's first record
    END = 1.0  # seconds before the first writer ends

    def __init__(self, poller: LagPoller, pids: list[int], sessions: int, seconds: float,
                 server=lambda: None):
        self.poller, self.pids, self.sessions, self.seconds = poller, pids, sessions, seconds
        self.server = server  # the shared mirror's pid once it runs (its threads: "server ...")
        self.marks: list[tuple[float, int, object, list]] = []  # (time, load rows, threads, per pid)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "SteadySplit":
        self.thread.start()
        return self

    def _run(self) -> None:
        while len(self.poller.first_seen) < self.sessions:
            if self.stop.wait(0.05):
                return
        if self.stop.wait(self.WARM):
            return
        self._mark()
        end = min(self.poller.first_seen.values()) + self.seconds - self.END
        if end - time.time() > 2 and not self.stop.wait(end - time.time()):
            self._mark()

    def _mark(self) -> None:
        per_pid = [sum(thread_cpu(pid).values()) for pid in self.pids]
        threads = total_cpu(self.pids)
        if (server := self.server()) is not None:
            threads.update({f"server {k}": v for k, v in thread_cpu(server).items()})
        self.marks.append((time.time(), self.poller.load_seen, threads, per_pid))

    def figures(self) -> dict | None:
        self.stop.set()
        self.thread.join(10)
        if len(self.marks) < 2:
            return None
        (t0, n0, cpu0, pids0), (t1, n1, cpu1, _) = self.marks
        records = max(1, n1 - n0)
        threads = {k: (cpu1[k] - cpu0.get(k, 0)) / records * 1e6 for k in cpu1}
        steady_per_s = sum(cpu1.values()) - sum(cpu0.values())
        steady_per_s /= (t1 - t0) * self.sessions  # CPU seconds per second, one session
        mirrored = statistics.fmean(t0 - at for at in self.poller.first_seen.values())
        return {"records": records, "seconds": t1 - t0, "window": (t0, t1), "us_per_record": sum(threads.values()),
                "threads_us": threads, "cores": steady_per_s * self.sessions,
                "startup_s": statistics.fmean(pids0) - steady_per_s * mirrored}


def run_load(sessions: int = 32, rate: float = 200, seconds: float = 60, pad: int = 100,
             poll: float = 0.02, workdir: Path | None = None, quiet: bool = False,
             page_size: int | None = None, shared: bool = True) -> LoadResult:
    workdir = Path(workdir or tempfile.mkdtemp(prefix="dh-load-"))
    workdir.mkdir(parents=True, exist_ok=True)
    dh_home = workdir / "dh-home"
    db = dh_home / "dh.db"
    cpu_file = workdir / "writer-cpu.txt"
    env = {**os.environ, "DH_HOME": str(dh_home), "PI_CODING_AGENT_DIR": str(workdir / "pi-agent"),
           "XDG_CONFIG_HOME": str(workdir / "config"), "DH_PI_BIN": f"{sys.executable} {WRITER}",
           "DH_WRITER_RATE": str(rate), "DH_WRITER_RECORDS": str(int(rate * seconds)),
           "DH_WRITER_PAD": str(pad), "DH_WRITER_CPU_FILE": str(cpu_file), "DH_RAISE_ERRORS": "",
           "DH_SHARED_MIRROR": "1" if shared else "0"}
    if page_size:  # an experiment: the page size of the new log (dh's own: local.PAGE_SIZE)
        db.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(db) as conn:
            conn.execute(f"PRAGMA page_size={page_size}")
            conn.execute("CREATE TABLE page_size_set (x)")  # the first write fixes it
            conn.execute("DROP TABLE page_size_set")
    LocalWorld(db).close()
    poller = LagPoller(db, poll).start()
    procs = []
    started = time.monotonic()
    for n in range(sessions):
        cwd = workdir / f"proj-{n:02d}"
        cwd.mkdir()
        err = open(workdir / f"dh-{n:02d}.stderr", "w+")
        proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "run", "pi", "--", "-p", "go"],
                                cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
        procs.append((proc, err))
    split = SteadySplit(poller, [proc.pid for proc, _ in procs], sessions, seconds,
                        server=lambda: server_pid(db)).start()
    result = LoadResult(sessions)
    total_cpu = 0.0
    for proc, err in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        total_cpu += usage.ru_utime + usage.ru_stime
        err.seek(0)
        text = err.read()
        err.close()
        if proc.returncode != 0:
            result.failed_runs.append({"pid": proc.pid, "code": proc.returncode, "stderr": text[-400:]})
        if "locked" in text:
            result.locked_failures += 1
    result.wall = time.monotonic() - started
    result.server_cpu = process_cpu(server_pid(db)) if shared else 0.0  # it lingers IDLE_EXIT s
    total_cpu += result.server_cpu
    result.split = split.figures()
    result.lags = poller.finish()
    if result.split is not None:  # the lags of the records appended between the two marks
        t0, t1 = result.split["window"]
        result.steady_lags = [lag for lag, at in zip(poller.lags, poller.appended) if t0 <= at <= t1]
    result.wal_peak = poller.wal_peak
    result.writer_cpu = sum(float(x) for x in cpu_file.read_text().split()) if cpu_file.exists() else 0.0
    result.dh_cpu = total_cpu - result.writer_cpu
    world = LocalWorld(db)
    for item in world.list_sessions():
        for source in world.sources(item["id"]):
            native = Path(source.path).read_bytes()
            lines = native.count(b"\n")
            logged = world.source_stats(source.id)[1]
            result.native_records += lines
            result.logged_records += logged
            result.lost += max(0, lines - logged)
            result.mismatched_sessions += source_bytes(world, source) != native
    if len(world.list_sessions()) != sessions:
        result.lost += 1  # a session missing from the log altogether
    world.close()
    result.db_bytes = sum(p.stat().st_size for p in dh_home.glob("dh.db*"))
    if not quiet:
        print(json.dumps(result.to_dict(), indent=2))
    return result


def fixed_cost(workdir: Path, runs: int = 3, shared: bool = True) -> float:
    """Median CPU seconds of one `dh run` whose harness writes no load record: what a session
    costs whatever its rate (interpreter start-up, imports, launch, the final checks); the
    `dh run` process only (a shared mirror started for it is shared by every session)."""
    costs = []
    for n in range(runs):
        result = run_load(1, 1, 0, workdir=workdir / f"fixed-{n}", quiet=True, shared=shared)
        costs.append(result.dh_cpu - result.server_cpu)
    return statistics.median(costs)


def cache_bytecode(workdir: Path) -> None:
    """Run dh with its bytecode cached, as an installed dh is (pip compiles at install): a
    shell with PYTHONDONTWRITEBYTECODE=1 (this machine's) compiles every module dh imports at
    each start, 35-50 ms of a `dh run`'s 0.35-0.38 s CPU start-up (median of 7, same run). The
    cache lives in the workdir; one `dh run` of no records fills it before anything is timed."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    run_load(1, 1, 0, workdir=workdir / "warm-up", quiet=True)


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--rate", type=float, default=200, help="records per second per session")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--pad", type=int, default=100, help="filler bytes per record")
    parser.add_argument("--poll", type=float, default=0.02, help="seconds between lag polls")
    parser.add_argument("--single", action="store_true",
                        help="also run one session at the same rate (the multi-writer baseline)")
    parser.add_argument("--baseline", action="store_true",
                        help="also run the same load with each dh run mirroring in-process "
                             "(DH_SHARED_MIRROR=0), in the same run")
    parser.add_argument("--in-process", action="store_true",
                        help="only the in-process mirror (DH_SHARED_MIRROR=0)")
    parser.add_argument("--page-size", type=int, help="an experiment: the new log's page size")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="keep the shell's PYTHONDONTWRITEBYTECODE: dh compiles its modules at each start")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="dh-load-"))
    if not args.no_bytecode_cache:
        cache_bytecode(workdir)
    print(f"dh load: {args.sessions} sessions x {args.rate:g} records/s x {args.seconds:g} s "
          f"on one dh.db ({os.cpu_count()} CPUs); bytecode "
          f"{'not written (PYTHONDONTWRITEBYTECODE)' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'cached'}; "
          f"load average {load_average()}", flush=True)
    modes = [not args.in_process] + ([False] if args.baseline and not args.in_process else [])
    lines = pi_load_lines(5000, args.pad)
    floors = {"tight": commit_floor(lines, workdir),
              "paced": commit_floor(lines[:int(min(400, args.rate * 4))], workdir, rate=args.rate)}
    for shared in modes:
        name = "shared mirror" if shared else "in-process mirror (DH_SHARED_MIRROR=0)"
        print(f"--- {name}", flush=True)
        result = run_load(args.sessions, args.rate, args.seconds, args.pad, args.poll,
                          workdir / f"load-{int(shared)}", quiet=True, page_size=args.page_size, shared=shared)
        result.rate = args.rate
        after = load_average()
        single = run_load(1, args.rate, args.seconds, args.pad, args.poll, workdir / f"single-{int(shared)}",
                          quiet=True, page_size=args.page_size, shared=shared) if args.single else None
        report(result, fixed_cost(workdir / f"fixed-{int(shared)}", shared=shared), floors, single, args.poll)
        print(f"load average: {after} at the end of the load run, {load_average()} at the end", flush=True)


if __name__ == "__main__":
    main()
