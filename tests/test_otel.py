"""Sessions as OpenTelemetry traces: `dh log export --format otlp` (OTLP/JSON lines) and
`dh log trace --endpoint` (the SDK's OTLP/HTTP exporter), checked against a real Arize Phoenix
server started on loopback, whose UI is then opened in headless Chromium."""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.require import skip_if_missing, skip_or_fail

from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .helpers.browser import ARTIFACTS, CHROMIUM
from .helpers.crashed import CRASH_EVENTS, crashed  # noqa: F401 (a fixture)
from .helpers.processes import stop_group

PHOENIX = next(iter(p for p in [os.environ.get("DH_PHOENIX"),
                                Path.home() / ".cache/dh-e2e/phoenix/bin/phoenix"]
                    if p and Path(p).exists()), None)


def _spans(lines: str) -> list[dict]:
    out = []
    for line in lines.splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                out += scope["spans"]
    return out


def _attrs(span: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def test_otlp_export_has_the_trace_with_genai_attributes_and_crash_events(crashed, run_dh):
    spans = _spans(run_dh("log", "export", crashed[0], "--format", "otlp").stdout)
    by_id = {s["spanId"]: s for s in spans}
    names = sorted(s["name"] for s in spans)
    assert names == sorted([f"dh session {crashed[0]}", "invoke_agent claude-code turn 1"]
                           + ["chat claude-opus-4-8"] * 4
                           + ["execute_tool Bash", "execute_tool Write", "execute_tool Read"]
                           + ["dh attempt 1", "dh attempt 2", "dh crash: SIGKILL", "dh resumed"])
    assert len({s["traceId"] for s in spans}) == 1 and len(spans[0]["traceId"]) == 32
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    (turn,) = [s for s in spans if s["name"].startswith("invoke_agent")]
    assert turn["parentSpanId"] == root["spanId"]
    attempts = [s for s in spans if s["name"].startswith("dh attempt")]
    assert all(s["parentSpanId"] == root["spanId"] for s in attempts)
    assert all(by_id[s["parentSpanId"]] is turn for s in spans if s not in [root, turn] + attempts)
    chat = next(s for s in spans if s["name"].startswith("chat"))
    a = _attrs(chat)
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "claude-opus-4-8"
    assert a["gen_ai.usage.input_tokens"] == "10" and a["gen_ai.usage.output_tokens"] == "5"
    bash = _attrs(next(s for s in spans if s["name"] == "execute_tool Bash"))
    assert bash["gen_ai.tool.name"] == "Bash" and "echo step0" in bash["gen_ai.tool.call.arguments"]
    events = [e["name"] for e in turn["events"]]
    assert events[:2] == ["dh.crash", "dh.resume"]
    crash = _attrs(turn["events"][0])
    assert crash["label"] == "crash: SIGKILL" and crash["attempt"] == "1"
    # the crash sits where the records stop: after the Bash result, before the next call
    bash_end = int(next(s for s in spans if s["name"] == "execute_tool Bash")["endTimeUnixNano"])
    assert int(turn["events"][0]["timeUnixNano"]) == bash_end
    assert int(turn["startTimeUnixNano"]) <= bash_end <= int(turn["endTimeUnixNano"])


def test_a_dead_endpoint_is_one_error_line(crashed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    done = subprocess.run(["python", "-m", "dh_cli", "log", "trace", crashed[0], "--endpoint",
                           "http://127.0.0.1:9/v1/traces"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 5
    assert done.stderr.strip().splitlines() == [
        "Error: the OTLP endpoint http://127.0.0.1:9/v1/traces did not take the spans (hint: check"
        " the URL (e.g. http://127.0.0.1:6006/v1/traces) and that the collector runs)"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def phoenix(tmp_path):
    """A real Phoenix server on loopback, in a folder of its own (about 20 s to start here)."""
    assert PHOENIX, "arize-phoenix is not installed: .ci/run installs it into ~/.cache/dh-e2e/phoenix"
    port, grpc = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc)}
    log = open(tmp_path / "phoenix.log", "wb")
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(url + "/v1/projects", timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "phoenix.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "phoenix did not start in 180 s"
                time.sleep(0.5)
        yield url
    finally:
        stop_group(proc)
        log.close()


@skip_if_missing(PHOENIX is None,  # required (CI): fail, never skip
                 "arize-phoenix is not installed (python -m venv"
                    " ~/.cache/dh-e2e/phoenix && ~/.cache/dh-e2e/phoenix/bin/pip install arize-phoenix)")
def test_the_trace_arrives_in_a_real_phoenix_and_its_ui_shows_it(crashed, run_dh, phoenix, tmp_path):
    sent = run_dh("log", "trace", crashed[0], "--endpoint", phoenix + "/v1/traces", "--json")
    assert sent.exit_code == 0, sent.output
    assert json.loads(sent.stdout)["spans"] == 13
    deadline = time.monotonic() + 60
    while True:  # Phoenix writes what it receives in the background
        got = json.loads(urllib.request.urlopen(phoenix + "/v1/projects/default/spans?limit=100",
                                                timeout=10).read())["data"]
        if len(got) >= 13 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    by_name = {s["name"]: s for s in got}
    assert len(got) == 13
    root, turn = by_name[f"dh session {crashed[0]}"], by_name["invoke_agent claude-code turn 1"]
    assert root["parent_id"] is None and turn["parent_id"] == root["context"]["span_id"]
    assert by_name["execute_tool Bash"]["parent_id"] == turn["context"]["span_id"]
    assert by_name["execute_tool Bash"]["span_kind"] == "TOOL" and turn["span_kind"] == "AGENT"
    chat = by_name["chat claude-opus-4-8"]
    assert chat["span_kind"] == "LLM" and chat["attributes"]["gen_ai.request.model"] == "claude-opus-4-8"
    assert [e["name"] for e in turn["events"]][:2] == ["dh.crash", "dh.resume"]
    if not CHROMIUM:
        skip_or_fail("chromium is not installed: the spans arrived, the UI was not looked at")
    project = json.loads(urllib.request.urlopen(phoenix + "/v1/projects", timeout=10).read())["data"][0]["id"]
    page = f"{phoenix}/projects/{project}/traces/{root['context']['trace_id']}"
    shot = tmp_path / "phoenix.png"
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=20000",
            "--window-size=1400,1000"]
    dom = subprocess.run(argv + ["--dump-dom", page], capture_output=True, text=True, timeout=180).stdout
    for name in ("invoke_agent claude-code turn 1", "execute_tool Bash", "chat claude-opus-4-8"):
        assert name in dom, name
    subprocess.run(argv + [f"--screenshot={shot}", page], capture_output=True, timeout=180)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "phoenix-trace.png")


# What Phoenix reads ----------------------------------------------------------------------------
CACHE_READ, CACHE_WRITE = 13_000, 544  # per call, as a long cached conversation has


@pytest.fixture
def cached(tmp_path, run_dh):
    """The crashed session with a prompt cache: each call read 13,000 tokens from it and
    wrote 544 (the fixture's usage rows, with those counts put in)."""
    home = fixture_home("claude-code", "killed-resumed", tmp_path)
    for path in home.glob("projects/*/*.jsonl"):
        text = path.read_text().replace('"cache_read_input_tokens":0', f'"cache_read_input_tokens":{CACHE_READ}')
        path.write_text(text.replace('"cache_creation_input_tokens":0',
                                     f'"cache_creation_input_tokens":{CACHE_WRITE}'))
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    world = LocalWorld()
    (session,) = world.list_sessions()
    for type_, details, attempt, phase in CRASH_EVENTS:
        world.add_event(session["id"], type_, details, attempt, phase)
    return session["id"]


def test_llm_spans_count_the_cached_prompt_and_carry_messages_and_tool_calls(cached, run_dh):
    spans = _spans(run_dh("log", "export", cached, "--format", "otlp").stdout)
    chats = [_attrs(s) for s in spans if s["name"].startswith("chat")]
    first = chats[0]
    assert first["llm.token_count.prompt"] == str(10 + CACHE_READ + CACHE_WRITE)
    assert first["llm.token_count.prompt_details.cache_read"] == str(CACHE_READ)
    assert first["llm.token_count.prompt_details.cache_write"] == str(CACHE_WRITE)
    assert first["llm.token_count.total"] == str(10 + CACHE_READ + CACHE_WRITE + 5)
    assert first["llm.provider"] == "anthropic" and first["llm.model_name"] == "claude-opus-4-8"
    assert first["llm.input_messages.0.message.role"] == "user"
    assert first["llm.input_messages.0.message.content"] == "Create the files."
    assert first["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "Bash"
    assert "echo step0" in first["llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments"]
    second = chats[1]  # after the resume: the Bash result, then the user's "continue"
    assert [second[f"llm.input_messages.{n}.message.role"] for n in (0, 1)] == ["tool", "user"]
    assert all(s["status"]["code"] == "STATUS_CODE_OK" for s in spans if s["name"].startswith("chat"))


def _graphql(url: str, query: str) -> dict:
    request = urllib.request.Request(url + "/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"content-type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=30).read())["data"]


def _phoenix_spans(url: str, count: int) -> list[dict]:
    deadline = time.monotonic() + 60
    while True:  # Phoenix writes what it receives in the background
        got = json.loads(urllib.request.urlopen(url + "/v1/projects/default/spans?limit=100",
                                                timeout=10).read())["data"]
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


@skip_if_missing(PHOENIX is None,  # required (CI): fail, never skip
                 "arize-phoenix is not installed (python -m venv"
                    " ~/.cache/dh-e2e/phoenix && ~/.cache/dh-e2e/phoenix/bin/pip install arize-phoenix)")
def test_phoenix_reads_the_tokens_messages_attempts_and_crash(cached, run_dh, phoenix):
    sent = json.loads(run_dh("log", "trace", cached, "--endpoint", phoenix + "/v1/traces", "--json").stdout)
    got = _phoenix_spans(phoenix, sent["spans"])
    by_name = {s["name"]: s for s in got}
    root, turn = by_name[f"dh session {cached}"], by_name["invoke_agent claude-code turn 1"]
    for span in (root, turn):  # Phoenix's trace list shows these two, not "--"
        assert span["attributes"]["input.value"] == "Create the files."
        assert span["attributes"]["output.value"] == "All done."
    chat = min((s for s in got if s["name"].startswith("chat")), key=lambda s: s["start_time"])
    assert chat["attributes"]["llm.token_count.prompt"] == 10 + CACHE_READ + CACHE_WRITE
    assert chat["status_code"] == "OK" and chat["attributes"]["llm.input_messages.0.message.role"] == "user"
    # the timeline: each attempt under the session, the crash and the resume inside the turn
    ids = {name: by_name[name]["context"]["span_id"] for name in by_name}
    assert by_name["dh attempt 1"]["parent_id"] == by_name["dh attempt 2"]["parent_id"] == ids[root["name"]]
    assert by_name["dh attempt 1"]["status_code"] == "ERROR" and by_name["dh attempt 2"]["status_code"] == "OK"
    assert by_name["dh crash: SIGKILL"]["parent_id"] == by_name["dh resumed"]["parent_id"] == ids[turn["name"]]
    assert by_name["dh crash: SIGKILL"]["status_code"] == "ERROR"
    # the project's tokens: what dh counted (cache included) is what Phoenix sums and prices
    totals = json.loads(run_dh("log", "show", cached, "--json").stdout)["totals"]
    dh_total = sum(totals[k] for k in ("input", "cache_read", "cache_write", "cache_write_1h", "output"))
    (project,) = _graphql(phoenix, "{ projects { edges { node { tokenCountTotal tokenCountPrompt"
                                   " costSummary { total { tokens } prompt { tokens } } } } } }"
                          )["projects"]["edges"]
    node = project["node"]
    assert node["tokenCountTotal"] == node["costSummary"]["total"]["tokens"] == dh_total
    assert node["tokenCountPrompt"] == node["costSummary"]["prompt"]["tokens"] == dh_total - totals["output"]
