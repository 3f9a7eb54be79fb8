"""`dh serve` at size (issue 31), each figure next to a baseline measured in the same run:

- first paint of the session list of a log of --sessions sessions (copies of the real
  fixtures, tests/fakes/many_sessions.py) in the system Chromium: time from navigation to
  first contentful paint, and to the server's response; baseline: the same page's HTML, CSS
  and JS saved and served as static files by Python's http.server (what is left is dh's
  own work). Goal: under a second.
- the cost page of a log of --relaunched sessions killed mid-turn and resumed by dh (copies of
  a captured real one), in process: with what the resumes re-cached and saved, against the
  same page with the resumes' journals hidden; and what reading each session's records (as
  `dh log show` prices them) would add.
- peak RSS of the dh serve process while one browser-less client reads the SSE stream of a
  session of --records records from its start (the catch-up a reconnecting page does);
  baselines: the same process idle before it, and `dh log show --json` of that session
  (already flat). Goal: flat (a few MB above idle whatever the size).
- the first trace screen of that session: time to the whole response of /s/ID and the
  server's peak RSS meanwhile (goal: <= 1 s, <= 100 MB); baseline: the same page saved and
  fetched from http.server. Then the documents column, which the page fetches apart.
- `dh log export ID --format html -o FILE` of that session (every page): time and peak RSS;
  baseline: `cat` of the native transcript (reading the bytes once).

Measured 2026-12-02 on a shared 2-core machine (load 6-8): the list of 10,001 sessions
painted in 1,404 ms (response 1,128 ms) against 272 ms (51 ms) for its static copy; the
server's own CPU for that page is 0.1-0.5 s. The stream of a 200,832-record session: 22.7 s,
peak RSS 50 MB against 42 MB idle (50 MB at 20,132 records too) and 66 MB for
`dh log show --json`; its first trace page: 26.7 s, 84 MB (the documents column parses
every record).

Measured 2026-12-06 on this 2-core machine quiet (load 1.0-1.3, same run): the list of
10,001 sessions painted in 432 ms (response 183 ms, the server's part 124 ms) against 244 ms
(9 ms) for its static copy; the stream of the 200,832-record session 8.4 s, peak RSS 61 MB
against 47 MB idle and 54 MB for `dh log show --json`; its first trace screen 0.60 s, 68 MB
(static copy: 30 ms), its documents column 1.0 s, 66 MB; its HTML export 28.6 s, 61 MB, 503
pages (cat: 0.07 s, 34 MB). The trace screen reads the session's calls once, summed per model
through the records' index (worlds/local_views.py model_call_sums); the view read it three
times, 13-16 s each under load.

Run: python bench/bench_serve.py [--sessions 10000] [--relaunched 2000] [--records 200000]
     [--only list|cost|stream|export]"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))

from bench_logshow import measured, session_of  # noqa: E402
from tests.fakes.many_sessions import copy_sessions, import_fixtures  # noqa: E402
from tests.helpers.serve import CHROMIUM, CHROMIUM_ARGS, Served  # noqa: E402


# the paint entry comes a little after `load`: wait for it (buffered), 10 s at most
FIRST_PAINT = """new Promise(done => {
  new PerformanceObserver(list => { for (const e of list.getEntries())
    if (e.name === 'first-contentful-paint') done(e.startTime); }).observe({type: 'paint', buffered: true});
  setTimeout(() => done(NaN), 10000); })"""


def paint(url: str, runs: int = 3, served: Served | None = None) -> tuple[float, float]:
    """(median ms to first contentful paint, median ms to the response's end) of `url`,
    with the token's cookie of `served` set beforehand."""
    from playwright.sync_api import sync_playwright

    paints, responses = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for _ in range(runs):
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            if served is not None:
                context.add_cookies([{"name": f"dh_serve_token_{served.port}", "value": served.token,
                                      "url": served.base}])
            page = context.new_page()
            page.goto(url, wait_until="load")
            paints.append(page.evaluate(FIRST_PAINT))
            responses.append(page.evaluate("performance.getEntriesByType('navigation')[0].responseEnd"))
            context.close()
        browser.close()
    return sorted(paints)[len(paints) // 2], sorted(responses)[len(responses) // 2]


def static_copy(served: Served, folder: Path, path: str = "/") -> str:
    """The page at `path` and its files saved under folder and served by http.server: its URL."""
    (folder / "static").mkdir(parents=True)
    (folder / "index.html").write_bytes(httpx.get(served.base + path, headers=served.headers, timeout=600).content)
    for name in ("serve.css", "serve.js", "trace.css"):
        (folder / "static" / name).write_bytes(
            httpx.get(f"{served.base}/static/{name}", headers=served.headers, timeout=60).content)
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/index.html"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def bench_list(work: Path, sessions: int) -> None:
    home = work / "list-home"
    import_fixtures(home)
    count = copy_sessions(home / "dh.db", sessions)
    served = Served({**os.environ, "DH_HOME": str(home)})
    try:
        httpx.get(served.base + "/", headers=served.headers, timeout=120)  # the log in the OS cache
        base_paint, base_response = paint(static_copy(served, work / "static-list"))
        dh_paint, dh_response = paint(served.base + "/", served=served)
    finally:
        served.stop()
    print(f"list of {count:,} sessions: first paint {dh_paint:.0f} ms (response {dh_response:.0f} ms);"
          f" baseline, the same page as static files: {base_paint:.0f} ms (response {base_response:.0f} ms);"
          f" goal < 1000 ms; the server's part: {list_in_process(home):.0f} ms", flush=True)


def list_in_process(home: Path, runs: int = 7) -> float:
    """Median ms of the list page's read and drawing in this process (no browser, no HTTP):
    the figure that load on a shared machine moves least."""
    from dh_cli.serve import pages, reads

    world, filters = reads.open_log(home / "dh.db"), reads.Filters()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        pages.list_page(reads.list_page(world, filters), filters, world.harness_names(), None, "/events/list")
        times.append(time.perf_counter() - started)
    world.close()
    return sorted(times)[runs // 2] * 1000


def bench_cost(work: Path, relaunched: int) -> None:
    """The cost page of a log of `relaunched` sessions each killed mid-turn and resumed by dh
    (copies of a captured real one), in process: with what the resumes re-cached and saved
    against the same page with the resumes' journals hidden (their columns then $0), and for
    scale, what reading each session's records (as `dh log show` prices its resumes) takes."""
    from dh_cli.logviews.logview import stream_items
    from dh_cli.logviews.resumecost import resume_costs
    from dh_cli.worlds.local import LocalWorld
    from tests.helpers.resumed_logs import PRICED, resumed_home
    from tests.helpers.serve import in_process

    home = resumed_home(PRICED, work / "cost-home")
    with sqlite3.connect(home / "dh.db") as db:  # copies are named ID-cN; its UUID may look like one
        db.execute("UPDATE sessions SET harness_session_id = 'captured'")
    count = copy_sessions(home / "dh.db", relaunched)
    client, journals = in_process(home), LocalWorld.resumed_journals
    assert client.get("/cost").status_code == 200  # the log in the OS cache
    timed: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(5):
        for name in timed:
            LocalWorld.resumed_journals = journals if name == "with" else (lambda self: {})
            started = time.perf_counter()
            assert client.get("/cost").status_code == 200
            timed[name].append(time.perf_counter() - started)
    LocalWorld.resumed_journals = journals
    world = LocalWorld(home / "dh.db", read_only=True)
    started = time.perf_counter()
    for session in world.list_sessions():
        found = world.get_session(session["id"])
        resume_costs(world, found.id, found.harness)
        for _ in stream_items(world, found, savings={}):
            pass
    records = time.perf_counter() - started
    with_, without = (sorted(v)[len(v) // 2] * 1000 for v in timed.values())
    print(f"cost page of {count:,} relaunched sessions: {with_:.0f} ms with re-cache and saved, {without:.0f} ms"
          f" without ({with_ / without:.2f}x); each session's records read instead: {records * 1000:.0f} ms more",
          flush=True)


def big_session(work: Path, records: int) -> tuple[Path, dict, str]:
    """(the native transcript, the env of a log holding it, its id), made once."""
    home = work / "stream-home"
    env = {**os.environ, "DH_HOME": str(home), "PYTHONPATH": str(ROOT)}
    native = next((work / "claude").glob("projects/*/*.jsonl"), None) if (work / "claude").exists() else None
    if native is None:
        native = session_of(records, work)
        subprocess.run([sys.executable, "-m", "dh_cli", "import", "claude", "--all", "--home",
                        str(work / "claude")], env=env, check=True, stdout=subprocess.DEVNULL)
    return native, env, native.stem


def bench_stream(work: Path, records: int) -> None:
    native, env, sid = big_session(work, records)
    home = Path(env["DH_HOME"])
    _, show_rss, _ = measured([sys.executable, "-m", "dh_cli", "log", "show", sid, "--json"], env)
    served = Served(env)
    try:
        process = psutil.Process(served.proc.pid)
        idle = process.memory_info().rss / 2**20
        peak, got, started = _stream(served, sid, process, _records(home, sid))
        wall = time.perf_counter() - started
        print(f"stream of a {got:,}-record session from its start: {wall:.1f} s, dh serve peak RSS"
              f" {peak:.0f} MB; baselines: the same server idle {idle:.0f} MB, `dh log show --json`"
              f" peak {show_rss:.0f} MB", flush=True)
        bench_trace(served, sid, process, work)
    finally:
        served.stop()


def bench_trace(served: Served, sid: str, process: psutil.Process, work: Path) -> None:
    """The first trace screen, its documents column, and the same page as a static file."""
    timings = {}
    for name, path in (("page", f"/s/{sid}"), ("documents", f"/s/{sid}/documents")):
        started = time.perf_counter()
        with _peak_rss(process) as peak:
            status = httpx.get(served.base + path, headers=served.headers, timeout=900).status_code
        timings[name] = (status, time.perf_counter() - started, peak[0])
    static = static_copy(served, work / "static-trace", f"/s/{sid}")
    started = time.perf_counter()
    httpx.get(static, timeout=60)
    base = time.perf_counter() - started
    (status, wall, rss), (_, docs_wall, docs_rss) = timings["page"], timings["documents"]
    print(f"its first trace screen: HTTP {status} in {wall:.2f} s, dh serve peak RSS {rss:.0f} MB"
          f" (goal <= 1 s, <= 100 MB); baseline, the same page as a static file: {base * 1000:.0f} ms;"
          f" its documents column, fetched apart: {docs_wall:.1f} s, {docs_rss:.0f} MB", flush=True)


def bench_export(work: Path, records: int) -> None:
    native, env, sid = big_session(work, records)
    base_wall, base_rss, _ = measured(["cat", str(native)])
    out = work / "export" / "trace.html"
    wall, rss, code = measured([sys.executable, "-m", "dh_cli", "log", "export", sid, "--format", "html",
                                "-o", str(out)], env)
    pages = len(list(out.parent.glob("*.html")))
    size = sum(p.stat().st_size for p in out.parent.glob("*.html")) / 1e6
    print(f"dh log export --format html of it: exit {code}, {wall:.1f} s, peak RSS {rss:.0f} MB,"
          f" {pages} page(s), {size:.0f} MB; baseline, cat of the native file: {base_wall:.2f} s,"
          f" {base_rss:.0f} MB", flush=True)


class _peak_rss:
    """The process's peak RSS in MB while the block runs (as [value]), sampled every 0.2 s."""

    def __init__(self, process: psutil.Process):
        self.process, self.peak, self.stop = process, [0.0], threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self.stop.is_set():
            self.peak[0] = max(self.peak[0], self.process.memory_info().rss / 2**20)
            time.sleep(0.2)

    def __enter__(self):
        self.thread.start()
        return self.peak

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def _records(home: Path, ref: str) -> int:
    from dh_cli.worlds.local import LocalWorld

    world = LocalWorld(home / "dh.db", read_only=True)
    try:
        return world.record_count(world.find_session(ref).id)
    finally:
        world.close()


def _stream(served: Served, sid: str, process: psutil.Process, total: int) -> tuple[float, int, float]:
    """Read the stream from the start until it has sent all `total` records: (peak RSS MB,
    records, start time)."""
    got, started = 0, time.perf_counter()
    with _peak_rss(process) as peak, \
            httpx.stream("GET", f"{served.base}/s/{sid}/events?after=0.0", headers=served.headers,
                         timeout=60) as response:
        for line in response.iter_lines():
            got += line == "event: record"
            if got == total:
                break
    return peak[0], got, started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--relaunched", type=int, default=2_000)
    parser.add_argument("--only", choices=["list", "cost", "stream", "export"])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dh-bench-serve-"))
    try:
        if args.only in (None, "list"):
            bench_list(work, args.sessions)
        if args.only in (None, "cost"):
            bench_cost(work, args.relaunched)
        if args.only in (None, "stream"):
            bench_stream(work, args.records)
        if args.only in (None, "export"):
            bench_export(work, args.records)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
