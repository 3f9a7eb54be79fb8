"""The live mirror alone, in this process, over one Pi session that a separate writer process
appends to at a fixed rate: dh CPU per record and lag, next to the floor (bench/floor.py, a
bare loop committing the same records one by one to SQLite) measured in the same run.
`--profile` also prints where the mirror's threads spend their CPU (cProfile, per thread).

Run: python bench/bench_mirror.py [--rate 200 --seconds 10 --profile]"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from floor import commit_floor, pi_load_lines  # noqa: E402

from dh_cli import wrappers  # noqa: E402
from dh_cli.mirror import live as live_module  # noqa: E402
from dh_cli.worlds import checkpoint as checkpoint_module  # noqa: E402
from dh_cli.worlds.local import LocalWorld, decode_raw  # noqa: E402

WRITER = ROOT / "tests" / "fakes" / "pi_writer.py"
PROFILES: list[cProfile.Profile] = []


def profiled(function):
    """Run a thread's body under a cProfile of its own (cProfile sees one thread only)."""
    def body(*args, **kwargs):
        profile = cProfile.Profile()
        PROFILES.append(profile)
        profile.enable()
        try:
            return function(*args, **kwargs)
        finally:
            profile.disable()
    return body


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sys_now() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


COMMITS: list[tuple[float, list]] = []


def instrument_commits() -> None:
    """Note when each batch was committed (cheaply: the lags are worked out after the run,
    so the mirror's CPU is not charged for measuring them)."""
    original = LocalWorld.commit

    def commit(self, source, records, events=()):
        added = original(self, source, records, events)
        COMMITS.append((time.time(), records))
        return added

    LocalWorld.commit = commit


def lags() -> list[float]:
    out = []
    for at, records in COMMITS:
        for row in records:
            raw = decode_raw(row[3], row[4] or None)
            if b'"customType":"load"' in raw:
                out.append(at - json.loads(raw)["data"]["t"])
    return sorted(out)


def run(rate: float, seconds: float, profile: bool) -> dict:
    work = Path(tempfile.mkdtemp(prefix="dh-mirror-"))
    native = work / "sessions" / "s.jsonl"
    native.parent.mkdir(parents=True)
    world = LocalWorld(work / "dh.db")
    session = world.create_session("pi", harness_session_id="s1", home=str(work),
                                   native_path=str(native), cwd="/")
    world.close()
    instrument_commits()
    if profile:
        live_module.LiveMirror._run = profiled(live_module.LiveMirror._run)
        checkpoint_module.Checkpointer._run = profiled(checkpoint_module.Checkpointer._run)
    mirror = live_module.LiveMirror(work / "dh.db", wrappers.get("pi"), session.id, native.parent,
                                    notice=lambda text: None).start()
    time.sleep(0.5)
    env = {"DH_WRITER_RATE": str(rate), "DH_WRITER_RECORDS": str(int(rate * seconds)),
           "PATH": "/usr/bin:/bin"}
    cpu, wall, kernel = cpu_now(), time.perf_counter(), sys_now()
    subprocess.run([sys.executable, str(WRITER), "--session", str(native)], env=env, check=True)
    time.sleep(0.3)
    cpu, wall, kernel = cpu_now() - cpu, time.perf_counter() - wall, sys_now() - kernel
    mirror.stop()
    records = int(rate * seconds)
    delays = lags()
    shutil.rmtree(work)
    return {"records": records, "committed": len(delays), "cpu_s": cpu, "wall_s": wall,
            "cpu_us": cpu / records * 1e6, "kernel_share": kernel / cpu if cpu else 0.0, "core_pct": cpu / wall * 100,
            "lag_p50_ms": pct(delays, .5) * 1000, "lag_p99_ms": pct(delays, .99) * 1000}


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def print_profile(top: int = 35) -> None:
    stats = None
    for profile in PROFILES:
        stats = pstats.Stats(profile, stream=io.StringIO()) if stats is None else stats.add(profile)
    if stats is None:
        return
    out = io.StringIO()
    stats.stream = out
    stats.sort_stats("tottime").print_stats(top)
    print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    result = run(args.rate, args.seconds, args.profile)
    floor = commit_floor(pi_load_lines(min(result["records"], 5000)))
    print(f"live mirror, one session at {args.rate:g} records/s for {args.seconds:g} s: "
          f"{result['committed']}/{result['records']} committed; dh CPU {result['cpu_us']:.0f} us per "
          f"record ({result['core_pct']:.1f} % of a core, {result['kernel_share'] * 100:.0f} % of it in the kernel); lag p50 {result['lag_p50_ms']:.1f} ms, "
          f"p99 {result['lag_p99_ms']:.1f} ms")
    print(f"floor (bare loop, one SQLite commit per record, same run): {floor['cpu_us']:.0f} us CPU "
          f"per record ({floor['wall_us']:.0f} us wall); dh/floor: {result['cpu_us'] / floor['cpu_us']:.1f}x")
    if args.profile:
        print_profile()


if __name__ == "__main__":
    main()
