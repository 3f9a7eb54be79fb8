"""`dh serve` over HTTP: the guard (Host header, token on loopback too, one-time codes,
read-only, CSP), pages drawn from autoescaping templates with records inert and masked,
errors and static files through Starlette, the list's filters and search, and the session
stream's catch-up by `Last-Event-ID`. In process through Starlette's test client over a log
built from the real fixtures (tests/helpers/serve.py); one test starts the real CLI; the
browser tests are in test_serve_browser.py."""

from __future__ import annotations

import json
import os
import re

import httpx
import pytest

from dh_cli.worlds.local import LocalWorld

from .helpers.serve import API_KEY, HOSTILE, Served, fixed_log, in_process


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    dh_home = tmp / "dh-home"
    ids = fixed_log(dh_home, tmp)
    with in_process(dh_home, stream_seconds=1.0) as client:
        yield client, ids, dh_home


def test_a_request_naming_another_host_is_refused(served):
    client = served[0]
    assert client.get("/", headers={"Host": "attacker.example"}).status_code == 421
    assert client.get("/", headers={"Host": "attacker.example:8765"}).status_code == 421
    assert client.get("/", headers={"Host": "127.0.0.1:8766"}).status_code == 421
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200


def test_no_route_changes_anything(served):
    client, ids, dh_home = served
    before = _log_bytes(dh_home)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert client.request(method, "/").status_code == 405
    for path in ("/", "/?q=files", "/team", f"/s/{ids['crashed']}"):
        assert client.get(path).status_code == 200
    assert _log_bytes(dh_home) == before


def _log_bytes(dh_home) -> dict[str, bytes]:
    """The log's content: the database and its WAL, an absent WAL read as an empty one (the
    first reader of a WAL-mode log creates it). The -shm index is left out: SQLite's readers
    write their read marks into it by design."""
    return {name: (dh_home / name).read_bytes() if (dh_home / name).exists() else b""
            for name in ("dh.db", "dh.db-wal")}


def test_pages_carry_a_strict_policy_and_no_inline_script_or_style(served):
    client, ids = served[0], served[1]
    for path in ("/", f"/s/{ids['crashed']}", f"/s/{ids['hostile']}", "/team", "/nowhere"):
        page = client.get(path)
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'none'" in policy
        assert "unsafe-inline" not in policy.replace("style-src-attr 'unsafe-inline'", "")
        assert not re.search(r"<script(?![^>]*\ssrc=\"/static/)", page.text), path
        assert "<style" not in page.text, path


@pytest.mark.parametrize("path", ["/", "/s/{hostile}", "/s/{hostile}/trace", "/?q=owned"])
def test_a_hostile_record_is_drawn_as_text(served, path):
    client, ids = served[0], served[1]
    page = client.get(path.format(**ids)).text
    assert "&lt;script&gt;document.title" in page  # it is there, as text
    lowered = page.lower()
    assert "<script>document.title" not in lowered
    assert 'href="javascript:' not in lowered and "href='javascript:" not in lowered
    assert "</style><style>" not in lowered and "<img src=x" not in lowered


def test_every_template_escapes_what_it_is_given():
    """Autoescape on: any value a template shows, hostile text in every field, comes out as
    text (the trace alone is markup, marked so by pages.session_page)."""
    from types import SimpleNamespace

    from dh_cli.serve import pages

    row = {k: HOSTILE for k in ("id", "prefix", "title", "snippet", "harness", "harness_version",
                                "shown_state", "why", "holder", "cwd", "last_activity")}
    page = {"rows": [row], "total": 1, "page": 1, "pages": 1, "searched": True}
    filters = SimpleNamespace(harness=HOSTILE, state=None, folder=HOSTILE, since=HOSTILE, q=HOSTILE, page=1)
    team = {"machines": [{"host": HOSTILE, "held": 1, "running": 0, "orphaned": 0, "freshest_lease_s": 1.0,
                          "takeovers": 0, "lag_s": None}],
            "sessions": [{"id": HOSTILE, "harness": HOSTILE, "holder": HOSTILE, "epoch": 1, "lease_age": 2.0,
                          "state": HOSTILE}],
            "takeovers": [{"at": HOSTILE, "session_id": HOSTILE, "from_host": HOSTILE, "host": HOSTILE}]}
    session = {"session": {"id": HOSTILE}, "trace": "<p>the renderer's</p>", "snapshots": [],
               "attempts": [{"attempt": 1, "started_at": HOSTILE, "outcome": HOSTILE}]}
    for html in (pages.list_page(page, filters, [HOSTILE], "postgres", "/events/list"),
                 pages.team_page(team), pages.session_page(session, HOSTILE), pages.error_page(400, HOSTILE)):
        assert "<script>" not in html and "<img src=x" not in html and "&lt;script&gt;" in html
    assert "<p>the renderer's</p>" in pages.session_page(session, "/x")


def test_errors_and_unknown_paths_answer_with_the_page_of_dh(served):
    client, ids = served[0], served[1]
    for path, status in (("/nowhere", 404), ("/s/no-such-session", 404), ("/static/nothing.css", 404),
                         ("/?since=yesterdayish", 400)):
        answer = client.get(path)
        assert answer.status_code == status, path
        assert f"<h1>{status}</h1>" in answer.text and '<a href="/">all sessions</a>' in answer.text, path


def test_static_files_are_served_with_validators(served):
    client = served[0]
    first = client.get("/static/serve.js")
    assert first.status_code == 200 and "javascript" in first.headers["content-type"]
    again = client.get("/static/serve.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/trace.css").headers["content-type"].startswith("text/css")


@pytest.mark.parametrize("path", ["/", "/s/{hostile}", "/s/{hostile}/trace", "/?q=owned"])
def test_an_api_key_in_a_record_shows_as_stars(served, path):
    client, ids = served[0], served[1]
    page = client.get(path.format(**ids)).text
    assert API_KEY not in page and API_KEY[20:40] not in page
    assert re.search(r"(API_KEY=|sk-ant-api03-)\*\*\*", page)  # as `dh log show` masks it


def test_the_stream_masks_what_it_sends(served):
    client, ids = served[0], served[1]
    events = read_events(client, f"/s/{ids['hostile']}/events?after=0.0")
    text = json.dumps(events)
    assert events and API_KEY not in text and "sk-ant-api03-***" in text


def test_a_session_page_marks_each_attempt_crash_repair_resume_and_takeover(served):
    client, ids = served[0], served[1]
    page = client.get(f"/s/{ids['crashed']}").text
    kinds = re.findall(r'<li class="mark (\w+)" data-kind', page)
    assert kinds == ["attempt", "crash", "resume", "repair", "attempt", "exit", "takeover"]
    assert '<table class="attempts"' in page and "<td class=\"num\">3</td>" in page  # calls kept


def test_the_list_filters_by_harness_state_folder_and_time(served):
    client = served[0]

    def text(path):
        return client.get(path).text

    harnesses = set(re.findall(r'<td class="harness">([\w-]+)', text("/")))
    assert {"claude-code", "codex", "pi"} <= harnesses
    assert set(re.findall(r'<td class="harness">([\w-]+)', text("/?harness=pi"))) == {"pi"}
    assert set(re.findall(r'data-state="([^"]+)"', text("/?state=imported"))) == {"imported"}
    assert 'data-id="' not in text("/?folder=/nowhere/at/all")
    assert 'data-id="' not in text("/?since=2000-01-01&folder=/nowhere")
    everything = text("/?since=2000-01-01").count('data-id="')
    assert everything == text("/").count('data-id="') > 0
    assert text("/?since=1m").count('data-id="') == 0  # the fixtures are older


def test_the_search_lists_the_sessions_whose_records_hold_the_words(served):
    client, ids = served[0], served[1]
    assert re.findall(r'<tr data-id="([^"]+)"', client.get("/?q=owned").text) == [ids["hostile"]]
    assert re.findall(r'<tr data-id="([^"]+)"', client.get("/?q=zzqqxxnothing").text) == []


def read_events(client, path: str, headers: dict | None = None) -> list[dict]:
    """The record and mark events a session stream sends in its lifetime."""
    response = client.get(path, headers=headers or {})
    assert response.status_code == 200
    out, event = [], {}
    for line in response.text.splitlines():
        if not line:
            if event.get("event") in ("record", "mark"):
                out.append(event)
            event = {}
            continue
        name, _, value = line.partition(":")
        event[name] = value[1:] if value.startswith(" ") else value
    return out


def test_a_stream_reopened_with_last_event_id_goes_on_where_it_stopped(served):
    client, ids, dh_home = served
    path = f"/s/{ids['crashed']}/events?after=0.0"
    world = LocalWorld(dh_home / "dh.db", read_only=True)
    total = world.record_count(ids["crashed"]) + len(world.events(ids["crashed"]))
    world.close()
    everything = read_events(client, path)
    assert len(everything) == total
    cut = total // 2
    rest = read_events(client, path, headers={"Last-Event-ID": everything[cut - 1]["id"]})
    assert [e["data"] for e in rest] == [e["data"] for e in everything[cut:]]
    records = [json.loads(e["data"])["id"] for e in everything if e["event"] == "record"]
    assert records == sorted(set(records))


def test_every_request_needs_the_token_even_on_loopback(served):
    client = served[0]
    bare = {"Authorization": ""}
    assert client.get("/", headers=bare).status_code == 401
    assert client.get("/static/serve.js", headers=bare).status_code == 401
    assert client.get("/?token=wrong", headers=bare).status_code == 401
    moved = client.get(f"/?harness=pi&token={client.guard.token}", headers=bare, follow_redirects=False)
    assert moved.status_code == 303 and moved.headers["location"] == "/?harness=pi"
    cookie = moved.headers["set-cookie"]
    assert cookie.startswith("dh_serve_token_8765=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    client.cookies.clear()  # the test client keeps cookies as a browser does
    elsewhere = client.get(f"http://127.0.0.1:8765//attacker.example/?token={client.guard.token}", headers=bare,
                           follow_redirects=False)
    assert elsewhere.headers["location"] == "/attacker.example/"  # a path here, not a host
    client.cookies.clear()
    assert client.get("/", headers={**bare, "Cookie": cookie.split(";")[0]}).status_code == 200
    assert client.get("/", headers={**bare, "Cookie": "dh_serve_token_9999=" + client.guard.token}).status_code == 401


def test_a_one_time_code_is_good_once(served):
    client, bare = served[0], {"Authorization": ""}
    code = client.guard.one_time_code()
    first = client.get(f"/?code={code}", headers=bare, follow_redirects=False)
    assert first.status_code == 303 and client.guard.token in first.headers["set-cookie"]
    client.cookies.clear()
    assert client.get(f"/?code={code}", headers=bare, follow_redirects=False).status_code == 401


def test_the_real_server_starts_on_a_free_port_and_serves_the_page(served):
    """One smoke test of the CLI itself: the URL it prints logs the browser in."""
    server = Served({**os.environ, "DH_HOME": str(served[2])}, "--host", "0.0.0.0")
    try:
        assert httpx.get(f"http://127.0.0.1:{server.port}/", timeout=30).status_code == 401
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as browser:
            page = browser.get(server.url.replace(server.base, "").replace("0.0.0.0", "127.0.0.1"),
                               follow_redirects=True)
            assert page.status_code == 200 and 'id="rows"' in page.text
    finally:
        server.stop()


def test_a_cursor_or_an_age_past_any_range_is_a_400(served):
    client, ids = served[0], served[1]
    path = f"/s/{ids['crashed']}/events"
    assert client.get(path, headers={"Last-Event-ID": "9" * 5000 + ".1"}).status_code == 400
    assert client.get(path + "?after=99999999999999999999.0").status_code == 400
    assert client.get(path, headers={"Last-Event-ID": "x.y"}).status_code == 400
    assert client.get("/?since=99999999d").status_code == 400
    assert client.get("/rows?since=99999999999w").status_code == 400


def test_event_streams_past_the_cap_are_refused(served):
    client, ids, dh_home = served
    with in_process(dh_home, max_streams=0) as full:
        assert full.get("/events/list").status_code == 503
        assert full.get(f"/s/{ids['crashed']}/events?after=0.0").status_code == 503
    assert client.get(f"/s/{ids['crashed']}/events?after=0.0").status_code == 200  # closes after 1 s


def test_a_connection_whose_headers_are_slow_is_closed(served):
    """uvicorn has no deadline for a request's headers: server.py adds one (a client that
    trickles a byte now and then held its connection for ever); the cap on connections and
    the idle timeout are uvicorn's own."""
    import socket
    import threading
    import time

    import uvicorn

    from dh_cli.serve.app import Options, create_app
    from dh_cli.serve.guard import Guard
    from dh_cli.serve.server import MAX_CONNECTIONS, bound_socket, config

    sock = bound_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    settings = config(create_app(Options(served[2] / "dh.db", Guard("127.0.0.1", port, "tok"))), 0.5)
    assert settings.limit_concurrency == MAX_CONNECTIONS and settings.timeout_keep_alive > 0
    server = uvicorn.Server(settings)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        slow = socket.create_connection(("127.0.0.1", port), timeout=10)
        slow.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")
        time.sleep(0.3)
        slow.sendall(b":")  # still trickling
        assert slow.recv(100) == b""  # closed by the server (a timeout here: never closed)
        whole = socket.create_connection(("127.0.0.1", port), timeout=10)
        whole.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer tok\r\n\r\n".encode())
        assert whole.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        server.should_exit = True
        thread.join(10)


def test_the_documents_column_is_fetched_apart(tmp_path):
    """It reads every record of the session: the page is drawn without it and fetches it."""
    import subprocess
    import sys

    from .helpers.serve import ROOT
    from .fakes.many_sessions import FIXTURES

    dh_home = tmp_path / "dh-home"
    subprocess.run([sys.executable, "-m", "dh_cli", "import", "claude", "--all", "--home",
                    str(FIXTURES / "claude-code" / "todowrite" / "claude-config")],
                   env={**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(ROOT)}, check=True,
                   stdout=subprocess.DEVNULL)
    world = LocalWorld(dh_home / "dh.db", read_only=True)
    (session,) = world.sessions()
    world.close()
    with in_process(dh_home) as client:
        page = client.get(f"/s/{session.id}").text
        assert 'id="documents"' not in page and f'data-src="/s/{session.id}/documents"' in page
        column = client.get(f"/s/{session.id}/documents").text
        assert column.startswith('<aside class="docs" id="documents">') and 'data-kind="todos"' in column


def test_a_session_is_searched_within_and_a_hit_opens_its_turn(served):
    client, ids = served[0], served[1]
    page = client.get(f"/s/{ids['hostile']}?q=owned").text
    hits = re.findall(r'<li><a href="/s/[^"?]+\?turn=(\d+)#turn-\d+">turn \d+</a>', page)
    assert hits == ["1"] and "&lt;script&gt;document.title" in page.split('id="hits"')[1]
    assert 'id="hits"' not in client.get(f"/s/{ids['hostile']}").text
    assert "0 record(s)" in client.get(f"/s/{ids['crashed']}?q=owned").text  # another session's words
    opened = client.get(f"/s/{ids['crashed']}?turn=1").text
    assert 'id="turn-1"' in opened


def test_the_page_of_a_turn_is_the_one_that_draws_it():
    from dh_cli.logviews.trace import Span
    from dh_cli.serve.reads import TURNS_PER_PAGE, _page_with

    def spans(n):
        return (Span("turn", f"turn {i}", attrs={"turn": i}) for i in range(n))  # turn 0 first

    for turn, total in ((0, 120), (TURNS_PER_PAGE - 1, 120), (TURNS_PER_PAGE, 120), (119, 120), (500, 120)):
        page, batch = _page_with(spans(total), turn)
        shown = [s.attrs["turn"] for s in batch[:TURNS_PER_PAGE]]
        assert shown == list(range((page - 1) * TURNS_PER_PAGE, min(total, page * TURNS_PER_PAGE)))
        assert turn in shown or (turn >= total and page == -(-total // TURNS_PER_PAGE))


def test_the_cost_page_sums_what_dh_log_cost_sums_and_filters_by_day(served):
    import subprocess
    import sys

    from dh_cli.logviews.render import money

    from .helpers.serve import ROOT

    client, dh_home = served[0], served[2]
    cli = json.loads(subprocess.run([sys.executable, "-m", "dh_cli", "log", "cost", "--json", "--by", "day"],
                                    env={**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(ROOT)},
                                    capture_output=True, text=True, check=True).stdout)
    page = client.get("/cost").text
    assert cli["totals"]["calls"] > 0
    assert re.search(r'id="total-calls">(\d+)<', page).group(1) == str(cli["totals"]["calls"])
    assert re.search(r'id="total-usd">([^<]+)<', page).group(1) == money(cli["totals"]["usd"])
    days = [r["day"] for r in cli["rows"]]
    assert re.findall(r'<rect class="bar"[^>]* data-day="([^"]+)"', page) == days
    one = client.get(f"/cost?since={days[-1]}&until={days[-1]}").text
    assert re.search(r'id="total-calls">(\d+)<', one).group(1) == str(cli["rows"][-1]["calls"])
    assert client.get("/cost?since=tomorrowish").status_code == 400
    assert '<a href="/cost"' in client.get("/").text


def test_the_cost_page_shows_what_resumes_re_cached_and_saved_as_dh_log_cost_does(tmp_path):
    """Beside each table's cost, on a log of a session killed mid-turn and resumed by dh."""
    from dh_cli.logviews.render import money

    from .helpers.resumed_logs import PRICED, resumed_home
    from .rig import dh

    dh_home = resumed_home(PRICED, tmp_path / "dh-home")
    client = in_process(dh_home)
    page = client.get("/cost").text
    for name in ("day", "model", "harness", "session"):
        cli = json.loads(dh("log", "cost", "--by", name, "--json", env={"DH_HOME": str(dh_home)}).stdout)
        table = re.search(rf'<table class="cost" id="by-{name}">.*?</table>', page, re.S).group(0)
        for kind in ("recache", "saved"):
            cells = re.findall(rf'<td class="num {kind}">([^<]+)<', table)
            assert cells == [money(r[f"{kind}_usd"]) for r in cli["rows"]], (name, kind)
    assert cli["totals"]["saved_usd"] > 0 and cli["totals"]["recache_usd"] > 0
    assert re.search(r'id="total-saved">([^<]+)<', page).group(1) == money(cli["totals"]["saved_usd"])
    assert re.search(r'id="total-recache">([^<]+)<', page).group(1) == money(cli["totals"]["recache_usd"])


def test_a_waiting_session_shows_its_limit_in_the_list_and_its_page(tmp_path):
    """Its limit, its harness and provider (the fixture's model is Claude's), when it goes on (for the page's countdown) and how many
    relaunches so far, as the log's limit event and the session's row say."""
    import fcntl
    import socket
    import subprocess
    import sys
    import time

    from .helpers.serve import CLAUDE_BASIC, ROOT

    dh_home = tmp_path / "dh-home"
    subprocess.run([sys.executable, "-m", "dh_cli", "import", "claude", "--all", "--home", str(CLAUDE_BASIC)],
                   env={**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(ROOT)}, check=True,
                   stdout=subprocess.DEVNULL)
    world = LocalWorld(dh_home / "dh.db")
    (session,) = world.sessions()
    reset = time.time() + 3600
    world.add_event(session.id, "limit", {"which": "five_hour", "label": "5-hour", "reset_at": reset,
                                          "where": "record", "text": "limit reached"}, 3, "info")
    world.conn.execute("UPDATE sessions SET state = 'waiting', attempts = 3, host = ? WHERE id = ?",
                       [socket.gethostname(), session.id])
    world.conn.commit()
    world.close()
    (dh_home / "locks").mkdir(exist_ok=True)
    lock = os.open(dh_home / "locks" / f"{session.id}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # as the supervising dh holds it
    try:
        with in_process(dh_home) as client:
            for page in (client.get("/").text, client.get(f"/s/{session.id}").text):
                block = re.search(r'<div class="sub limit" data-reset="(\d+)">(.*?)</div>', page, re.S)
                assert block, re.findall(r'<td class="state">.*?</td>', page, re.S) or page[:3000]
                assert block and int(block.group(1)) == int(reset * 1000)
                assert "waiting on the 5-hour limit of claude-code · Anthropic" in block.group(2)
                assert "relaunched 2 time(s)" in block.group(2) and '<span class="countdown">' in block.group(2)
    finally:
        os.close(lock)
