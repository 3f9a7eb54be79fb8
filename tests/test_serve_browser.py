"""`dh serve` in a real browser (the system Chromium through Playwright; never a downloaded
one): the list's filters, search and keys, 400 px without sideways scrolling, a hostile record
inert, and live: a session running under `dh run` over a fake harness whose harness is killed
while the page is open shows the crash and the resume without a reload, and a stream closed
and reopened misses no record."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.require import skip_if_missing

from .fakes.model_server import FakeModelServer
from .helpers.serve import CHROMIUM, Served, serve_fixed_log
from .rig import SCRIPT, Rig
from .helpers.kill import HarnessWatch, spawn_run
from .helpers.wait import wait_until

pytestmark = [pytest.mark.browser,
              skip_if_missing(not Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (apt-get install chromium)")]

WAIT_MS = 60_000  # what a page may take to show a change (the log is polled every 0.5 s)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from serve_fixed_log(tmp_path_factory)


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_list_reads_at_1400_and_400_px(served, page):
    server, ids = served[0], served[1]
    page.goto(server.url)  # the printed URL: its token becomes the page's cookie
    for width in (1400, 400):
        page.set_viewport_size({"width": width, "height": 900})
        for path in ("/", f"/s/{ids['crashed']}", f"/s/{ids['hostile']}", "/team", "/cost"):
            page.goto(server.base + path)
            assert no_sideways_scroll(page), f"{path} scrolls sideways at {width} px"
        page.goto(server.base + "/")
        assert page.locator("#rows tr[data-id]").count() >= 10


def test_filters_search_and_keys(served, page):
    server, ids = served[0], served[1]
    page.goto(server.url)
    page.select_option("#f-harness", "pi")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"harness=pi"))
    harnesses = page.locator("#rows td.harness").all_inner_texts()
    assert harnesses and {h.split()[0] for h in harnesses} == {"pi"}
    page.goto(server.base + "/")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "f-q"
    page.keyboard.type("owned")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"q=owned"))
    assert page.locator("#rows tr[data-id]").evaluate_all("rows => rows.map(r => r.dataset.id)") == [ids["hostile"]]
    page.goto(server.base + "/")
    page.keyboard.press("j")
    page.keyboard.press("j")
    second = page.locator("#rows tr[data-id]").nth(1).get_attribute("data-id")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(f"/s/{second}$"))


def test_a_hostile_record_runs_nothing(served, page):
    server, ids = served[0], served[1]
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(server.url)
    page.goto(server.base + f"/s/{ids['hostile']}")
    page.goto(server.base + "/?q=owned")
    assert page.title() != "owned" and dialogs == []
    assert page.evaluate("[...document.scripts].map(s => s.getAttribute('src'))") == ["/static/serve.js"]
    assert page.evaluate("getComputedStyle(document.body).display") != "none"
    assert page.locator("text=<script>document.title").count() >= 1  # shown as text


def test_the_list_shows_a_new_session_without_a_reload(tmp_path, page):
    from .helpers.serve import ROOT, fixed_log
    from .fakes.many_sessions import FIXTURES

    import os
    import subprocess
    import sys

    dh_home = tmp_path / "dh-home"
    fixed_log(dh_home, tmp_path)
    env = {**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(ROOT)}
    server = Served(env)
    try:
        page.goto(server.url)
        page.wait_for_selector("body[data-live=open]", timeout=WAIT_MS)
        before = page.locator("#rows tr[data-id]").count()
        page.evaluate("window.sameDocument = true")
        subprocess.run([sys.executable, "-m", "dh_cli", "import", "claude", "--all", "--home",
                        str(FIXTURES / "claude-code" / "todowrite" / "claude-config")], env=env, check=True)
        # (no wait_for_function: its polling evaluates strings, which the page's policy forbids)
        expect(page.locator("#rows tr[data-id]")).to_have_count(before + 1, timeout=WAIT_MS)
        assert page.evaluate("window.sameDocument") is True
        assert page.locator("#count").inner_text().startswith(str(before + 1))
    finally:
        server.stop()


# live, under `dh run` ------------------------------------------------------------------------------
# reply #1 stalls until the harness is killed (once): the test decides when the crash happens
STALLED = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=600, delay_times=1),
                       *SCRIPT["replies"][2:]]}


@pytest.fixture
def running(tmp_path):
    """A `dh run pi` whose second model call stalls, and `dh serve` over its log."""
    server = FakeModelServer(STALLED).start()
    rig = Rig(tmp_path, server)
    watch = HarnessWatch(str(rig.bin_dir))
    run = spawn_run(rig, "pi")
    server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=60)
    served = Served(rig.env)
    from dh_cli.worlds.local import LocalWorld

    world = LocalWorld(Path(rig.env["DH_HOME"]) / "dh.db", read_only=True)
    (session,) = world.sessions()
    world.close()
    yield served, session.id, watch, run, rig
    served.stop()
    if run.poll() is None:
        run.kill()
    run.wait(30)
    watch.stop()
    server.stop()


def kill_harness(watch: HarnessWatch) -> None:
    (harness,) = watch.running()
    harness.kill()


def test_a_crash_and_its_resume_appear_on_the_open_page(running, page):
    served, sid, watch, run, _ = running
    page.goto(f"{served.base}/s/{sid}?token={served.token}")
    page.wait_for_selector("body[data-live=open]", timeout=WAIT_MS)
    page.evaluate("window.sameDocument = true")
    assert page.locator(".trace-page #timeline .mark.crash").count() == 0
    kill_harness(watch)
    page.wait_for_selector(".trace-page #timeline .mark.crash", timeout=WAIT_MS)
    page.wait_for_selector(".trace-page #timeline .mark.resume", timeout=WAIT_MS)
    page.wait_for_selector("#feed li.mark.exited", timeout=WAIT_MS)
    assert run.wait(120) == 0
    expect(page.locator(".trace-page #timeline .mark.attempt")).to_have_count(2, timeout=WAIT_MS)
    assert page.evaluate("window.sameDocument") is True  # no reload happened


def test_a_stream_closed_and_reopened_misses_nothing(running, page):
    served, sid, watch, run, rig = running
    page.goto(f"{served.base}/s/{sid}?token={served.token}")
    page.wait_for_selector("body[data-live=open]", timeout=WAIT_MS)
    after = int(page.locator("body").get_attribute("data-stream").split("after=")[1].split(".")[0])
    page.click("#live-toggle")
    page.wait_for_selector("body[data-live=closed]")
    kill_harness(watch)
    assert run.wait(120) == 0  # the crash, the resume and the rest of the turn, all unseen
    page.click("#live-toggle")
    world = rig.world()
    wanted = [str(i) for (i,) in world.conn.execute(
        "SELECT id FROM records WHERE session_id = ? AND id > ? ORDER BY id", [sid, after])]
    events = [f"e{e.seq}" for e in world.events(sid)]
    world.close()
    def all_records() -> list[str] | None:
        shown = page.locator("#feed li").evaluate_all("items => items.map(i => i.dataset.id)")
        return shown if len([i for i in shown if not i.startswith("e")]) >= len(wanted) else None

    shown = wait_until(all_records, "every record in the feed", WAIT_MS / 1000, 0.2)
    records = [i for i in shown if not i.startswith("e")]
    assert records == wanted
    assert set(events) - set(shown) <= {e for e in events if int(e[1:]) <= _seq_at_load(page)}


def _seq_at_load(page) -> int:
    return int(page.locator("body").get_attribute("data-stream").split(".")[-1])


def test_the_readme_pictures_are_made_by_their_command(tmp_path):
    import struct
    import subprocess
    import sys

    from .helpers.screenshot import SHOTS
    from .helpers.serve import ROOT

    done = subprocess.run([sys.executable, "-m", "tests.helpers.screenshot", str(tmp_path / "docs")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    for name, (_, width, _) in SHOTS.items():
        data = (tmp_path / "docs" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">I", data[16:20])[0] == width
        assert (ROOT / "docs" / name).exists()  # the README's copy


def test_the_trace_goes_on_as_the_reader_scrolls(tmp_path, page):
    """A session of more turns than a page holds: scrolling to the end appends the next
    page's turns, without a reload."""
    import os
    import subprocess
    import sys

    from .fakes.transcripts import write_claude_transcript
    from dh_cli.serve.reads import TURNS_PER_PAGE

    from .helpers.serve import ROOT

    native = tmp_path / "claude" / "projects" / "-p" / "7d0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15.jsonl"
    write_claude_transcript(native, 2_500_000)
    env = {**os.environ, "DH_HOME": str(tmp_path / "dh-home"), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "dh_cli", "import", "claude", "--all", "--home", str(tmp_path / "claude")],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    server = Served(env)
    try:
        page.goto(f"{server.base}/s/{native.stem}?token={server.token}")
        turns = page.locator("#trace > section.turn")
        assert turns.count() == TURNS_PER_PAGE
        page.evaluate("window.sameDocument = true")
        page.locator(".trace-page nav.pages").last.scroll_into_view_if_needed()
        expect(turns).to_have_count(2 * TURNS_PER_PAGE, timeout=WAIT_MS)
        assert page.evaluate("window.sameDocument") is True
        numbers = turns.evaluate_all("s => s.map(t => t.id)")
        assert len(set(numbers)) == len(numbers)  # each turn once
    finally:
        server.stop()


def test_the_cost_page_shows_the_totals_of_dh_log_cost(served, page):
    import json
    import os
    import subprocess
    import sys

    from dh_cli.logviews.render import money

    from .helpers.serve import ROOT

    server, _, dh_home = served
    cli = json.loads(subprocess.run([sys.executable, "-m", "dh_cli", "log", "cost", "--json"],
                                    env={**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(ROOT)},
                                    capture_output=True, text=True, check=True).stdout)
    page.goto(server.url)
    page.click("header.top nav a[href='/cost']")
    page.wait_for_url(re.compile(r"/cost$"))
    assert page.locator("#total-usd").inner_text() == money(cli["totals"]["usd"])
    assert page.locator("#total-calls").inner_text() == str(cli["totals"]["calls"])
    assert page.locator("svg#cost-chart rect.bar").count() == len(cli["rows"])


def test_the_cost_page_shows_the_re_cache_and_savings_of_dh_log_cost(tmp_path, page):
    """A log of a real Claude Code session killed mid-turn and resumed by dh."""
    import json
    import os

    from dh_cli.logviews.render import money

    from .helpers.resumed_logs import PRICED, resumed_home
    from .rig import dh

    dh_home = resumed_home(PRICED, tmp_path / "dh-home")
    cli = json.loads(dh("log", "cost", "--by", "session", "--json", env={"DH_HOME": str(dh_home)}).stdout)
    server = Served({**os.environ, "DH_HOME": str(dh_home), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    try:
        page.goto(server.url)
        page.click("header.top nav a[href='/cost']")
        page.wait_for_url(re.compile(r"/cost$"))
        assert cli["totals"]["saved_usd"] > 0 and cli["totals"]["recache_usd"] > 0
        assert page.locator("#total-saved").inner_text() == money(cli["totals"]["saved_usd"])
        assert page.locator("#total-recache").inner_text() == money(cli["totals"]["recache_usd"])
        row = page.locator("#by-session tbody tr")
        assert row.count() == len(cli["rows"]) == 1
        assert row.locator("td.saved").inner_text() == money(cli["rows"][0]["saved_usd"])
        assert row.locator("td.recache").inner_text() == money(cli["rows"][0]["recache_usd"])
    finally:
        server.stop()


# the page's calls of the Notification API, recorded (headless Chromium shows none itself)
RECORD_NOTIFICATIONS = """window.__shown = [];
window.Notification = class { constructor(title, options) { window.__shown.push(title); }
  static get permission() { return window.__allowed ? "granted" : "default"; }
  static requestPermission() { window.__allowed = true; return Promise.resolve("granted"); } };"""


def test_a_crash_is_notified_once_allowed(tmp_path, page):
    import os
    import sqlite3

    from .helpers.serve import fixed_log

    dh_home = tmp_path / "dh-home"
    ids = fixed_log(dh_home, tmp_path)
    server = Served({**os.environ, "DH_HOME": str(dh_home)})
    try:
        page.add_init_script(RECORD_NOTIFICATIONS)
        page.goto(server.url)
        page.wait_for_selector("body[data-live=open]", timeout=WAIT_MS)
        page.click("#notify-toggle")
        expect(page.locator("#notify-toggle")).to_have_attribute("aria-pressed", "true")
        log = sqlite3.connect(dh_home / "dh.db")
        log.execute("UPDATE sessions SET state = 'crashed', updated_at = '2999-01-01T00:00:00Z' WHERE id = ?",
                    [ids["hostile"]])
        log.commit()
        log.close()
        expect(page.locator(f'#rows tr[data-id="{ids["hostile"]}"]')).to_have_attribute(
            "data-state", "crashed", timeout=WAIT_MS)
        assert page.evaluate("window.__shown") == [f"dh: session {ids['hostile']} crashed"]
    finally:
        server.stop()


def test_a_waiting_sessions_countdown_reaches_its_reset_and_the_page_turns_to_running(tmp_path, page):
    import fcntl
    import os
    import socket
    import sqlite3
    import time

    from .helpers.serve import fixed_log

    dh_home = tmp_path / "dh-home"
    sid = fixed_log(dh_home, tmp_path)["hostile"]
    log = sqlite3.connect(dh_home / "dh.db")
    log.execute("INSERT INTO events (session_id, seq, at, type, details, attempt, phase) VALUES"
                " (?, 99, '2026-12-06T00:00:00Z', 'limit', ?, 2, 'info')",
                [sid, '{"which": "five_hour", "label": "5-hour", "reset_at": %f}' % (time.time() + 8)])
    log.execute("UPDATE sessions SET state = 'waiting', attempts = 2, host = ? WHERE id = ?",
                [socket.gethostname(), sid])
    log.commit()
    (dh_home / "locks").mkdir(exist_ok=True)
    lock = os.open(dh_home / "locks" / f"{sid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # as the supervising dh holds it
    server = Served({**os.environ, "DH_HOME": str(dh_home)})
    try:
        page.goto(server.url)
        page.wait_for_selector("body[data-live=open]", timeout=WAIT_MS)
        page.evaluate("window.sameDocument = true")
        row = page.locator(f'#rows tr[data-id="{sid}"]')
        assert row.get_attribute("data-state") == "waiting"
        assert row.locator(".countdown").inner_text().startswith("in 0h 00m 0")
        expect(row.locator(".countdown")).to_have_text("now", timeout=WAIT_MS)
        log.execute("UPDATE sessions SET state = 'running', updated_at = '2999-01-01T00:00:00Z' WHERE id = ?", [sid])
        log.commit()  # the supervisor relaunched it at the reset
        expect(page.locator(f'#rows tr[data-id="{sid}"]')).to_have_attribute("data-state", "running here",
                                                                            timeout=WAIT_MS)
        assert page.evaluate("window.sameDocument") is True
    finally:
        server.stop()
        log.close()
        os.close(lock)
