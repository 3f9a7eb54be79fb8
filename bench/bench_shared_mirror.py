"""A prototype, for a decision only (issue 17): what one shared mirror process would cost
against one mirror per `dh run`. N Pi-format writers (tests/fakes/pi_writer.py, each in a
folder of its own) append at a fixed rate; ONE process tails all of them into one dh.db with
dh's own Tailer (one inotify descriptor, one thread, one connection, a commit per session
with records, as the per-process mirror does), and the bench reads its CPU from /proc in the
steady state (between the same marks as bench_load.py) and the lag with bench_load's poller.
The real one, with the handover that makes it safe, is dh_cli/mirror/shared_server.py, and
bench_load.py measures it under `dh run`; this stays as the cost of tailing alone (one
commit per session per wake-up, no socket, no handover).

Run: python bench/bench_shared_mirror.py [--sessions 32 --rate 20 --seconds 30]"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_load import LagPoller, SteadySplit, load_average  # noqa: E402
from floor import commit_floor, pi_load_lines  # noqa: E402

from dh_cli import wrappers  # noqa: E402
from dh_cli.mirror.inotify import EVENT, Inotify  # noqa: E402
from dh_cli.mirror.pacing import Pacer  # noqa: E402
from dh_cli.stores.tailer import Tailer  # noqa: E402
from dh_cli.worlds.checkpoint import Checkpointer  # noqa: E402
from dh_cli.worlds.local import LocalWorld  # noqa: E402

WRITER = ROOT / "tests" / "fakes" / "pi_writer.py"


def serve(db: Path, folders: list[Path], seconds: float) -> None:
    """The shared mirror: sync the sessions whose folder an inotify event names."""
    world = LocalWorld(db)
    checkpointer = Checkpointer(db).start()
    world.be_patient(600)
    world.checkpoint_elsewhere(checkpointer)
    watcher, wrapper, tailers = Inotify(str(folders[0])), wrappers.get("pi"), {}
    for folder in folders:
        watcher.add(str(folder))
    by_wd = {wd: os.fsdecode(path) for wd, path in watcher.folders.items()}
    pacer, deadline = Pacer(), time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not select.select([watcher.fd], [], [], 0.5)[0]:
            continue
        changed = _changed(watcher, by_wd)
        window = pacer.window()
        if window > 0:
            time.sleep(window)
            changed |= _changed(watcher, by_wd)
        started = time.monotonic()
        added = sum(_tailer(world, wrapper, tailers, folder).sync().added for folder in changed)
        if added:
            pacer.synced(time.monotonic() - started)
    checkpointer.stop()
    world.close()


def _changed(watcher: Inotify, by_wd: dict) -> set[str]:
    folders = set()
    try:
        while data := os.read(watcher.fd, 65536):
            at = 0
            while at + EVENT.size <= len(data):
                wd, _, _, length = EVENT.unpack_from(data, at)
                at += EVENT.size + length
                folders.add(by_wd[wd])
    except BlockingIOError:
        pass
    return folders


def _tailer(world, wrapper, tailers: dict, folder: str) -> Tailer:
    if folder not in tailers:
        native = Path(folder) / "session.jsonl"
        session = world.create_session("pi", home=folder, cwd=folder, native_path=str(native))
        source = world.add_source(session.id, "main", native.name, str(native))
        tailers[folder] = Tailer(world, wrapper, source)
    return tailers[folder]


def run(sessions: int, rate: float, seconds: float, workdir: Path) -> dict:
    db = workdir / "dh.db"
    LocalWorld(db).close()
    folders = [workdir / f"s{n:03d}" for n in range(sessions)]
    for folder in folders:
        folder.mkdir()
    mirror = subprocess.Popen([sys.executable, __file__, "--serve", str(db), str(seconds + 15)]
                              + [str(f) for f in folders])
    time.sleep(1.0)  # its imports and watches
    poller = LagPoller(db, 0.02).start()
    split = SteadySplit(poller, [mirror.pid], sessions, seconds)
    env = {**os.environ, "DH_WRITER_RATE": str(rate), "DH_WRITER_RECORDS": str(int(rate * seconds))}
    writers = [subprocess.Popen([sys.executable, str(WRITER), "--session", str(f / "session.jsonl")],
                                env=env) for f in folders]
    split.start()
    for writer in writers:
        writer.wait()
    time.sleep(0.5)
    figures = split.figures()
    lags = sorted(poller.finish())
    mirror.kill()
    mirror.wait()
    return {"split": figures, "lags": lags, "wal_peak": poller.wal_peak}


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(Path(sys.argv[2]), [Path(p) for p in sys.argv[4:]], float(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    print(f"shared mirror prototype: {args.sessions} sessions x {args.rate:g}/s x {args.seconds:g} s, "
          f"one process; load average {load_average()}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="dh-shared-"))
    result = run(args.sessions, args.rate, args.seconds, workdir)
    split, lags = result["split"], result["lags"]
    paced = commit_floor(pi_load_lines(200), workdir, rate=args.sessions * args.rate)
    if split is None:
        print("no steady window (give --seconds 20 or more)")
        return
    p99 = lags[int(0.99 * (len(lags) - 1))] * 1000 if lags else float("nan")
    print(f"steady state: {split['us_per_record']:.0f} us per record, {split['cores']:.3f} cores "
          f"({split['records']:,} records over {split['seconds']:.1f} s); lag p99 {p99:.0f} ms; "
          f"largest WAL {result['wal_peak'] / 1e6:.1f} MB")
    print(f"floor paced at the aggregate rate ({args.sessions * args.rate:g}/s), same run: "
          f"{paced['cpu_us']:.0f} us per commit; load average {load_average()}")


if __name__ == "__main__":
    main()
