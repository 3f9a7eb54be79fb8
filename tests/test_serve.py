"""`dh serve` over HTTP (issue 31): the guard (Host header, token, read-only, CSP), records
drawn inert and masked, the list's filters and search, and the session stream's catch-up by
`Last-Event-ID`. Against the real CLI in a child process, over a log built from the real
fixtures (tests/helpers/serve.py); the browser tests are in test_serve_browser.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import httpx
import pytest

from dh_cli.worlds.local import LocalWorld

from .helpers.serve import API_KEY, ROOT, Served, serve_fixed_log


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from serve_fixed_log(tmp_path_factory)


def get(server, path: str, **kw) -> httpx.Response:
    return httpx.get(server.base + path, timeout=30, **kw)


def test_a_request_naming_another_host_is_refused(served):
    server = served[0]
    assert get(server, "/", headers={"Host": "attacker.example"}).status_code == 421
    assert get(server, "/", headers={"Host": f"attacker.example:{server.port}"}).status_code == 421
    assert get(server, "/", headers={"Host": f"127.0.0.1:{server.port + 1}"}).status_code == 421
    assert get(server, "/", headers={"Host": f"localhost:{server.port}"}).status_code == 200


def test_no_route_changes_anything(served):
    server, _, dh_home = served
    before = _log_bytes(dh_home)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert httpx.request(method, server.base + "/", timeout=30).status_code == 405
    for path in ("/", "/?q=files", "/team", f"/s/{served[1]['crashed']}"):
        assert get(server, path).status_code == 200
    assert _log_bytes(dh_home) == before


def _log_bytes(dh_home) -> dict[str, bytes]:
    """The log's content: the database and its WAL, an absent WAL read as an empty one (the
    first reader of a WAL-mode log creates it). The -shm index is left out: SQLite's readers
    write their read marks into it by design."""
    return {name: (dh_home / name).read_bytes() if (dh_home / name).exists() else b""
            for name in ("dh.db", "dh.db-wal")}


def test_pages_carry_a_strict_policy_and_no_inline_script_or_style(served):
    server, ids = served[0], served[1]
    for path in ("/", f"/s/{ids['crashed']}", f"/s/{ids['hostile']}", "/team"):
        page = get(server, path)
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'none'" in policy
        assert "unsafe-inline" not in policy.replace("style-src-attr 'unsafe-inline'", "")
        assert not re.search(r"<script(?![^>]*\ssrc=\"/static/)", page.text), path
        assert "<style" not in page.text, path


@pytest.mark.parametrize("path", ["/", "/s/{hostile}", "/s/{hostile}/trace", "/?q=owned"])
def test_a_hostile_record_is_drawn_as_text(served, path):
    server, ids = served[0], served[1]
    page = get(server, path.format(**ids)).text
    assert "&lt;script&gt;document.title" in page  # it is there, as text
    lowered = page.lower()
    assert "<script>document.title" not in lowered
    assert 'href="javascript:' not in lowered and "href='javascript:" not in lowered
    assert "</style><style>" not in lowered and "<img src=x" not in lowered


@pytest.mark.parametrize("path", ["/", "/s/{hostile}", "/s/{hostile}/trace", "/?q=owned"])
def test_an_api_key_in_a_record_shows_as_stars(served, path):
    server, ids = served[0], served[1]
    page = get(server, path.format(**ids)).text
    assert API_KEY not in page and API_KEY[20:40] not in page
    assert re.search(r"(API_KEY=|sk-ant-api03-)\*\*\*", page)  # as `dh log show` masks it


def test_the_stream_masks_what_it_sends(served):
    server, ids = served[0], served[1]
    events = read_events(server, f"/s/{ids['hostile']}/events?after=0.0", want=3)
    text = json.dumps(events)
    assert API_KEY not in text and "sk-ant-api03-***" in text


def test_a_session_page_marks_each_attempt_crash_repair_resume_and_takeover(served):
    server, ids = served[0], served[1]
    page = get(server, f"/s/{ids['crashed']}").text
    kinds = re.findall(r'<li class="mark (\w+)" data-kind', page)
    assert kinds == ["attempt", "crash", "resume", "repair", "attempt", "exit", "takeover"]
    assert '<table class="attempts"' in page and "<td class=\"num\">3</td>" in page  # calls kept


def test_the_list_filters_by_harness_state_folder_and_time(served):
    server = served[0]
    harnesses = set(re.findall(r'<td class="harness">([\w-]+)', get(server, "/").text))
    assert {"claude-code", "codex", "pi"} <= harnesses
    only_pi = get(server, "/?harness=pi").text
    assert set(re.findall(r'<td class="harness">([\w-]+)', only_pi)) == {"pi"}
    states = set(re.findall(r'data-state="([^"]+)"', get(server, "/?state=imported").text))
    assert states == {"imported"}
    assert 'data-id="' not in get(server, "/?folder=/nowhere/at/all").text
    assert 'data-id="' not in get(server, "/?since=2000-01-01&folder=/nowhere").text
    everything = get(server, "/?since=2000-01-01").text.count('data-id="')
    assert everything == get(server, "/").text.count('data-id="') > 0
    assert get(server, "/?since=1m").text.count('data-id="') == 0  # the fixtures are older


def test_the_search_lists_the_sessions_whose_records_hold_the_words(served):
    server, ids = served[0], served[1]
    found = re.findall(r'<tr data-id="([^"]+)"', get(server, "/?q=owned").text)
    assert found == [ids["hostile"]]
    assert re.findall(r'<tr data-id="([^"]+)"', get(server, "/?q=zzqqxxnothing").text) == []


def read_events(server, path: str, want: int, headers: dict | None = None) -> list[dict]:
    """The first `want` record and mark events of a session stream."""
    out, event = [], {}
    with httpx.stream("GET", server.base + path, headers=headers or {}, timeout=30) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line:
                if event.get("event") in ("record", "mark"):
                    out.append(event)
                    if len(out) == want:
                        return out
                event = {}
                continue
            name, _, value = line.partition(":")
            event[name] = value[1:] if value.startswith(" ") else value
    return out


def test_a_stream_reopened_with_last_event_id_goes_on_where_it_stopped(served):
    server, ids = served[0], served[1]
    path = f"/s/{ids['crashed']}/events?after=0.0"
    world = LocalWorld(served[2] / "dh.db", read_only=True)
    total = world.record_count(ids["crashed"]) + len(world.events(ids["crashed"]))
    world.close()
    everything = read_events(server, path, want=total)
    assert len(everything) == total
    cut = total // 2
    rest = read_events(server, path, want=total - cut,
                       headers={"Last-Event-ID": everything[cut - 1]["id"]})
    assert [e["data"] for e in rest] == [e["data"] for e in everything[cut:]]
    records = [json.loads(e["data"])["id"] for e in everything if e["event"] == "record"]
    assert records == sorted(set(records))


def test_a_bind_past_loopback_without_a_token_refuses_to_start(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "dh_cli", "serve", "--host", "0.0.0.0", "--port", "0"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("Error:") and "token" in done.stderr
    assert "http://" not in done.stdout


def test_with_a_token_every_request_must_carry_it(served):
    env = {**os.environ, "DH_HOME": str(served[2])}
    server = Served(env, "--host", "0.0.0.0", "--token")
    try:
        token = server.url.split("token=")[1]
        base = f"http://127.0.0.1:{server.port}"
        assert httpx.get(base + "/", timeout=30).status_code == 401
        assert httpx.get(base + "/?token=wrong", timeout=30).status_code == 401
        moved = httpx.get(f"{base}/?harness=pi&token={token}", timeout=30)
        assert moved.status_code == 303 and moved.headers["location"] == "/?harness=pi"
        assert "HttpOnly" in moved.headers["set-cookie"] and "SameSite=Strict" in moved.headers["set-cookie"]
        elsewhere = httpx.get(f"{base}//attacker.example/?token={token}", timeout=30)
        assert elsewhere.headers["location"] == "/attacker.example/"  # a path here, not a host
        cookie = moved.headers["set-cookie"].split(";")[0]
        assert httpx.get(base + "/", headers={"Cookie": cookie}, timeout=30).status_code == 200
        assert httpx.get(base + "/", headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code == 200
    finally:
        server.stop()
