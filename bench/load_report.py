"""The printed report of bench_load.py (one block per mode: shared mirror, in-process)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench_load import LoadResult

def report(result: LoadResult, fixed: float, floors: dict, single: LoadResult | None, poll: float) -> None:
    figures = result.to_dict()
    lag = figures["lag_ms"]
    print(f"records: {result.native_records:,} native, {result.logged_records:,} logged, "
          f"lost {result.lost}, sessions whose log differs from the native file: "
          f"{result.mismatched_sessions}")
    print(f"'database is locked' failures: {result.locked_failures}; failed dh runs: "
          f"{len(result.failed_runs)}")
    print(f"mirror lag (append -> committed, poll {poll * 1000:g} ms): p50 {lag['p50']:.0f} ms, "
          f"p90 {lag['p90']:.0f} ms, p99 {lag['p99']:.0f} ms, max {lag['max']:.0f} ms "
          f"({lag['samples']:,} samples)")
    if result.steady_lags:
        ordered = sorted(result.steady_lags)
        print(f"mirror lag of the records appended in the steady window (after every session's start-up): "
              f"p50 {ordered[len(ordered) // 2] * 1000:.0f} ms, p99 {ordered[int(0.99 * (len(ordered) - 1))] * 1000:.0f} ms, "
              f"max {ordered[-1] * 1000:.0f} ms ({len(ordered):,} samples)")
    per_record = result.dh_cpu / max(1, result.logged_records) * 1e6
    print(f"dh CPU, all in: {result.dh_cpu:.1f} s over {result.wall:.1f} s wall = "
          f"{result.dh_cpu / result.wall:.2f} cores ({result.dh_cpu / result.sessions:.2f} s per "
          f"session, {per_record:.0f} us per record; the shared mirror's process: "
          f"{result.server_cpu:.1f} s); writers: {result.writer_cpu:.1f} s")
    steady = result.dh_cpu - fixed * result.sessions
    steady_per_record = steady / max(1, result.logged_records) * 1e6
    print(f"fixed cost of one dh run (no records, median of 3, same run, its own process): {fixed:.2f} s CPU; "
          f"without it: {steady:.1f} s = {steady / result.wall:.2f} cores, {steady_per_record:.0f} us per record")
    print_split(result, floors, single)
    print(f"dh/floor (back to back): {per_record / floors['tight']['cpu_us']:.1f}x all in")
    print(f"log size: {result.db_bytes / 1e6:.1f} MB; largest WAL seen: {result.wal_peak / 1e6:.1f} MB"
          f"{f' (one session alone: {single.wal_peak / 1e6:.1f} MB)' if single else ''}")
    for failure in result.failed_runs[:5]:
        print("failed:", failure)


def print_split(result: LoadResult, floors: dict, single: LoadResult | None) -> None:
    split = result.split
    if split is None:
        print("steady state: no window (the run is too short for its start-up; give --seconds 20 or more)")
        return
    threads = ", ".join(f"{name} {us:.0f}" for name, us in
                        sorted(split["threads_us"].items(), key=lambda item: -item[1]))
    print(f"start-up per session (launch, imports, first sync; before the warm-up mark): "
          f"{split['startup_s']:.2f} s CPU")
    print(f"steady state ({split['records']:,} records over {split['seconds']:.1f} s after warm-up): "
          f"{split['us_per_record']:.0f} us per record ({split['cores']:.2f} cores); by thread: {threads}")
    print(f"floor, same run: {floors['tight']['cpu_us']:.0f} us per commit back to back, "
          f"{floors['paced']['cpu_us']:.0f} us per commit paced at {result.rate:g}/s (cold caches); "
          f"dh steady / paced floor: {split['us_per_record'] / floors['paced']['cpu_us']:.1f}x")
    if single is not None and single.split is not None:
        alone = single.split["us_per_record"]
        print(f"one session alone at the same rate, same run: {alone:.0f} us per record steady; "
              f"what the other {result.sessions - 1} writers add: {split['us_per_record'] - alone:.0f} us per record")
