"""The fake claude, pi and codex executables against the scripted fake model server.

Each fake must write native session files shaped like the real captures, crash where
DH_FAKE_CRASH says, and resume with the real programs' quirks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.fakes.install import install_fake_harnesses
from tests.fakes.model_server import FakeModelServer

# The project holds its own copy of the real captures: a test never reads outside the checkout.
REAL_DIR = Path(__file__).parent / "fixtures" / "real"
SCRIPT = {"replies": [{"text": "Running it.", "shell": "echo step0 >> steps.log"},
                      {"write": {"path": "a.txt", "content": "alpha\n"}},
                      {"read": {"path": "a.txt"}},
                      {"text": "All done."}]}
# reply #1 stalls once after its first event, so a kill lands mid-stream (as in the captures)
KILL_SCRIPT = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=10, delay_times=1),
                           *SCRIPT["replies"][2:]]}
TOOL_SCRIPT = {"replies": [{"text": "Sleeping.", "shell": "echo $$ > tool.pid; exec sleep 30"},
                           {"text": "done"}]}


# ---------------------------------------------------------------- set-up helpers

@pytest.fixture
def server():
    srv = FakeModelServer(SCRIPT).start()
    yield srv
    srv.stop()


@pytest.fixture
def world(tmp_path, server):
    """Private homes, a project dir and the installed fakes."""
    bins = install_fake_harnesses(tmp_path / "bin")
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_PROXY", "_proxy"))}
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path), NO_PROXY="*", IS_SANDBOX="1",
               CLAUDE_CONFIG_DIR=str(tmp_path / ".claude"), ANTHROPIC_BASE_URL=server.url,
               ANTHROPIC_API_KEY="test-key", PI_CODING_AGENT_DIR=str(tmp_path / "pi-agent"),
               CODEX_HOME=str(tmp_path / ".codex"), MOCK_API_KEY="dummy")
    for var in ("DH_FAKE_CRASH", "DH_FAKE_CRASH_ONCE", "CLAUDE_CODE_PROJECT_DIR_NAME"):
        env.pop(var, None)
    write_pi_models(tmp_path / "pi-agent", server.url)
    write_codex_config(tmp_path / ".codex", server.url)
    return {"tmp": tmp_path, "proj": proj, "env": env, "bin": bins, "server": server}


def write_pi_models(agent_dir: Path, url: str) -> None:
    agent_dir.mkdir(parents=True)
    models = {"providers": {"mock": {"baseUrl": url, "api": "anthropic-messages", "apiKey": "x",
                                     "models": [{"id": "mock-claude", "maxTokens": 8192}]}}}
    (agent_dir / "models.json").write_text(json.dumps(models))


def write_codex_config(home: Path, url: str) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        'model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n'
        f'[model_providers.mock]\nname = "Mock"\nbase_url = "{url}/v1"\n'
        'env_key = "MOCK_API_KEY"\nwire_api = "responses"\n')


def run(world, name: str, args: list[str], crash: str | None = None) -> subprocess.CompletedProcess:
    env = dict(world["env"])
    if crash:
        env["DH_FAKE_CRASH"] = crash
    return subprocess.run([str(world["bin"][name]), *args], cwd=world["proj"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                          start_new_session=True)


def claude_args(sid: str, prompt: str, resume: bool = False) -> list[str]:
    ids = ["--resume", sid] if resume else ["--session-id", sid]
    return ["-p", *ids, prompt, "--output-format", "stream-json", "--verbose",
            "--dangerously-skip-permissions"]


def pi_args(session: Path, prompt: str, new: bool = True) -> list[str]:
    model = ["--provider", "mock", "--model", "mock-claude"] if new else []
    return ["-p", "--mode", "json", *model, "--session", str(session), prompt]


CODEX_EXEC = ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def claude_file(world, sid: str) -> Path:
    return next((world["tmp"] / ".claude" / "projects").glob(f"*/{sid}.jsonl"))


def codex_file(world) -> Path:
    return next((world["tmp"] / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))


# ---------------------------------------------------------------- record shapes

def claude_shape(rec: dict) -> tuple:
    msg = rec.get("message") if isinstance(rec.get("message"), dict) else {}
    blocks = msg.get("content") if isinstance(msg.get("content"), list) else []
    if rec.get("type") == "user":
        sub = "meta" if rec.get("isMeta") else "tool_result" if any(
            b.get("type") == "tool_result" for b in blocks) else "prompt"
    elif rec.get("type") == "assistant":
        sub = "synthetic" if msg.get("model") == "<synthetic>" else blocks[0].get("type")
    else:
        sub = rec.get("operation") or (rec.get("attachment") or {}).get("type")
    return (rec["type"], sub), frozenset(rec) | {"message." + k for k in msg}


def pi_shape(rec: dict) -> tuple:
    msg = rec.get("message") or {}
    return (rec["type"], msg.get("role")), frozenset(rec) | {"message." + k for k in msg}


def codex_shape(rec: dict) -> tuple:
    payload = rec.get("payload") or {}
    keys = set(rec) | {"payload." + k for k in payload}
    keys |= {"metadata." + k for k in rec.get("metadata") or {}}
    return (rec["type"], payload.get("type"), payload.get("role")), frozenset(keys)


def shapes(records: list[dict], shape) -> dict:
    out: dict = {}
    for rec in records:
        kind, keys = shape(rec)
        out.setdefault(kind, set()).add(keys)
    return out


def real_records(harness: str, scenario: str, pattern: str) -> list[dict]:
    hits = sorted((REAL_DIR / harness / scenario).glob(pattern))
    assert hits, f"real fixture {harness}/{scenario}/{pattern} missing from {REAL_DIR}"
    return read_jsonl(hits[0])


def assert_shapes_match(fake: list[dict], harness: str, scenario: str, pattern: str, shape) -> None:
    real = real_records(harness, scenario, pattern)
    assert shapes(fake, shape) == shapes(real, shape)


# ---------------------------------------------------------------- full turns

def test_claude_full_turn_matches_real_records(world):
    sid = str(uuid.uuid4())
    proc = run(world, "claude", claude_args(sid, "Create the files."))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert (lines[0]["type"], lines[0]["subtype"], lines[0]["session_id"]) == ("system", "init", sid)
    assert lines[-1]["type"] == "result" and lines[-1]["result"] == "All done."
    path = claude_file(world, sid)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    records = read_jsonl(path)
    assert_shapes_match(records, "claude-code", "basic", "claude-config/projects/*/*.jsonl",
                        claude_shape)
    chain = [r for r in records if r.get("uuid")]
    assert all(b["parentUuid"] == a["uuid"] for a, b in zip(chain, chain[1:]))
    assert (world["proj"] / "a.txt").read_text() == "alpha\n"
    assert not list((world["tmp"] / ".claude" / "sessions").iterdir())


def test_pi_full_turn_matches_real_records(world):
    session = world["tmp"] / "s.jsonl"
    proc = run(world, "pi", pi_args(session, "Create the files."))
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["type"] == "session" and events[-1]["type"] == "agent_end"
    records = read_jsonl(session)
    assert_shapes_match(records, "pi", "basic", "pi-agent/sessions/*/*.jsonl", pi_shape)
    assert records[0]["id"] == events[0]["id"]
    assert [r["parentId"] for r in records[2:]] == [r["id"] for r in records[1:-1]]
    assert all(len(r["id"]) == 8 for r in records[1:])


def test_codex_full_turn_matches_real_records(world):
    proc = run(world, "codex", [*CODEX_EXEC, "Create the files."])
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["type"] == "thread.started" and events[-1]["type"] == "turn.completed"
    path = codex_file(world)
    assert path.name.endswith(f"-{events[0]['thread_id']}.jsonl")
    records = read_jsonl(path)
    assert_shapes_match(records, "codex", "basic", "codex-home/sessions/*/*/*/*.jsonl", codex_shape)
    assert [r["ordinal"] for r in records] == list(range(len(records)))
    seqs = [r["metadata"]["history_sequence"] for r in records if "metadata" in r]
    assert seqs == list(range(1, len(seqs) + 1))


# ---------------------------------------------------------------- crash in a model call, resume

def test_claude_killed_in_model_call_resumes_without_rebilling(world):
    world["server"].set_script(KILL_SCRIPT)
    sid = str(uuid.uuid4())
    assert run(world, "claude", claude_args(sid, "Create the files."),
               crash="during-model=2").returncode == -signal.SIGKILL
    assert list((world["tmp"] / ".claude" / "sessions").glob("*.json"))  # stale pid file
    proc = run(world, "claude", claude_args(sid, "continue", resume=True))
    assert proc.returncode == 0, proc.stderr
    records = read_jsonl(claude_file(world, sid))
    assert_shapes_match(records, "claude-code", "killed-resumed",
                        "claude-config/projects/*/*.jsonl", claude_shape)
    kinds = [claude_shape(r)[0][1] for r in records if r.get("uuid")]
    i = kinds.index("meta")
    assert kinds[i - 1:i + 3] == ["tool_result", "meta", "synthetic", "prompt"]
    assert world["server"].rebilled() == 0


def test_pi_killed_in_model_call_resumes_without_rebilling(world):
    world["server"].set_script(KILL_SCRIPT)
    session = world["tmp"] / "s.jsonl"
    assert run(world, "pi", pi_args(session, "Create the files."),
               crash="during-model=2").returncode == -signal.SIGKILL
    assert read_jsonl(session)[-1]["message"]["role"] == "toolResult"
    proc = run(world, "pi", pi_args(session, "continue", new=False))
    assert proc.returncode == 0, proc.stderr
    records = read_jsonl(session)
    assert_shapes_match(records, "pi", "killed-resumed", "pi-agent/sessions/*/*.jsonl", pi_shape)
    assert sum(r["type"] == "session" for r in records) == 1
    assert world["server"].rebilled() == 0


def test_codex_killed_in_model_call_resumes_without_rebilling(world):
    world["server"].set_script(KILL_SCRIPT)
    first = run(world, "codex", [*CODEX_EXEC, "Create the files."], crash="during-model=2")
    assert first.returncode == -signal.SIGKILL
    thread_id = json.loads(first.stdout.splitlines()[0])["thread_id"]
    killed = read_jsonl(codex_file(world))
    assert [r["payload"].get("type") for r in killed[-2:]] == ["function_call_output", "token_count"]
    proc = run(world, "codex", [*CODEX_EXEC, "resume", thread_id, "continue"])
    assert proc.returncode == 0, proc.stderr
    records = read_jsonl(codex_file(world))
    assert records[:len(killed)] == killed
    assert_shapes_match(records, "codex", "killed-resumed", "codex-home/sessions/*/*/*/*.jsonl",
                        codex_shape)
    assert sum(r["type"] == "session_meta" for r in records) == 1
    assert world["server"].rebilled() == 0


def test_codex_resume_of_unknown_thread_fails(world):
    proc = run(world, "codex", [*CODEX_EXEC, "resume", str(uuid.uuid4()), "continue"])
    assert proc.returncode == 1 and "no rollout found" in proc.stderr


# ---------------------------------------------------------------- crash during a tool

@pytest.mark.parametrize("name", ["claude", "pi", "codex"])
def test_kill_during_tool_leaves_tool_running_in_its_own_group(world, name):
    world["server"].set_script(TOOL_SCRIPT)
    args = {"claude": claude_args(str(uuid.uuid4()), "go"),
            "pi": pi_args(world["tmp"] / "s.jsonl", "go"),
            "codex": [*CODEX_EXEC, "go"]}[name]
    proc = run(world, name, args, crash="during-tool=1")
    assert proc.returncode == -signal.SIGKILL
    pid_file = world["proj"] / "tool.pid"
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "tool never started"
        time.sleep(0.02)
    tool_pid = int(pid_file.read_text())
    try:
        assert os.getpgid(tool_pid) == tool_pid  # alive, leader of its own group
    finally:
        os.killpg(tool_pid, signal.SIGKILL)


# ---------------------------------------------------------------- resume quirks

def test_claude_drops_a_dangling_tool_use_and_asks_again(world):
    sid = str(uuid.uuid4())
    # rows: enqueue, dequeue, prompt, 2 attachments, text, tool_use -> killed after row 7
    assert run(world, "claude", claude_args(sid, "Create the files."),
               crash="after-record=7").returncode == -signal.SIGKILL
    before = read_jsonl(claude_file(world, sid))
    text_row, tool_row = before[-2], before[-1]
    assert tool_row["message"]["content"][0]["type"] == "tool_use"
    assert run(world, "claude", claude_args(sid, "continue", resume=True)).returncode == 0
    resumed = world["server"].main_requests()[1]["body"]["messages"]
    assert resumed[-2] == {"role": "assistant", "content": text_row["message"]["content"]}
    assert "Continue from where you left off." not in json.dumps(resumed)
    after = read_jsonl(claude_file(world, sid))
    prompt_row = next(r for r in after[len(before):] if claude_shape(r)[0] == ("user", "prompt"))
    assert prompt_row["parentUuid"] == text_row["uuid"]
    assert world["server"].rebilled() == 1  # the faithful bad behaviour dh must repair


def test_claude_accepts_a_tool_result_appended_by_dh(world):
    sid = str(uuid.uuid4())
    run(world, "claude", claude_args(sid, "Create the files."), crash="after-record=7")
    path = claude_file(world, sid)
    tool_row = read_jsonl(path)[-1]
    repair = {"parentUuid": tool_row["uuid"], "isSidechain": False, "type": "user",
              "message": {"role": "user", "content": [{
                  "type": "tool_result", "tool_use_id": tool_row["message"]["content"][0]["id"],
                  "content": "interrupted; may have run", "is_error": True}]},
              "uuid": str(uuid.uuid4()), "timestamp": "2026-01-01T00:00:00.000Z",
              "toolUseResult": "Error: interrupted", "sourceToolAssistantUUID": tool_row["uuid"],
              "cwd": str(world["proj"]), "sessionId": sid}
    with path.open("a") as fh:
        fh.write(json.dumps(repair) + "\n")
    assert run(world, "claude", claude_args(sid, "continue", resume=True)).returncode == 0
    assert world["server"].main_requests()[1]["n_tool_results"] == 1
    assert world["server"].rebilled() == 0


def test_claude_resume_needs_same_cwd_and_a_prompt(world):
    sid = str(uuid.uuid4())
    assert run(world, "claude", claude_args(sid, "Create the files.")).returncode == 0
    no_prompt = run(world, "claude", ["-p", "--resume", sid, "--output-format", "text"])
    assert no_prompt.returncode == 1 and "Provide a prompt" in no_prompt.stderr
    world["proj"] = world["tmp"]
    elsewhere = run(world, "claude", claude_args(sid, "continue", resume=True))
    assert elsewhere.returncode == 1
    assert f"No conversation found with session ID: {sid}" in elsewhere.stderr


def test_pi_pairs_a_dangling_tool_call_only_in_the_request(world):
    session = world["tmp"] / "s.jsonl"
    # lines: header, model_change, thinking_level_change, user, assistant -> killed after line 5
    assert run(world, "pi", pi_args(session, "Create the files."),
               crash="after-record=5").returncode == -signal.SIGKILL
    assert read_jsonl(session)[-1]["message"]["content"][-1]["type"] == "toolCall"
    assert run(world, "pi", pi_args(session, "continue", new=False)).returncode == 0
    resumed = world["server"].main_requests()[1]["body"]["messages"]
    synthetic = resumed[2]["content"][0]
    assert (synthetic["content"], synthetic["is_error"]) == ("No result provided", True)
    assert "No result provided" not in session.read_text()
    assert world["server"].rebilled() == 0


def test_pi_without_prompt_does_nothing(world):
    session = world["tmp"] / "s.jsonl"
    proc = run(world, "pi", ["-p", "--provider", "mock", "--session", str(session)])
    assert proc.returncode == 0 and not session.exists() and not world["server"].main_requests()


def test_pi_bad_header_truncates_the_file(world):
    session = world["tmp"] / "s.jsonl"
    session.write_text('not json\n{"type":"message","id":"abcd1234"}\n')
    assert run(world, "pi", pi_args(session, "hi", new=False)).returncode == 0
    records = read_jsonl(session)
    assert records[0]["type"] == "session" and "abcd1234" not in session.read_text()


def test_codex_sends_aborted_for_a_dangling_function_call(world):
    # rollout records 1-8 are written at the prompt; 9-10 item_completed, 11 message, 12 call
    first = run(world, "codex", [*CODEX_EXEC, "Create the files."], crash="after-record=12")
    assert first.returncode == -signal.SIGKILL
    thread_id = json.loads(first.stdout.splitlines()[0])["thread_id"]
    assert read_jsonl(codex_file(world))[-1]["payload"]["type"] == "function_call"
    assert run(world, "codex", [*CODEX_EXEC, "resume", thread_id, "continue"]).returncode == 0
    inputs = world["server"].main_requests()[1]["body"]["input"]
    outputs = [i for i in inputs if i["type"] == "function_call_output"]
    assert [o["output"] for o in outputs] == ["aborted"]


def test_crash_once_marker_lets_the_resume_run_clean(world):
    world["server"].set_script(KILL_SCRIPT)
    world["env"]["DH_FAKE_CRASH_ONCE"] = str(world["tmp"] / "crashed")
    session = world["tmp"] / "s.jsonl"
    assert run(world, "pi", pi_args(session, "go"), crash="during-model=2").returncode == -9
    assert run(world, "pi", pi_args(session, "continue", new=False),
               crash="during-model=1").returncode == 0


def test_at_start_and_mid_record_crashes(world):
    sid = str(uuid.uuid4())
    early = run(world, "claude", claude_args(sid, "go"), crash="at-start")
    assert early.returncode == 1 and not (world["tmp"] / ".claude" / "projects").exists()
    run(world, "claude", claude_args(sid, "go"), crash="mid-record=3")
    assert not claude_file(world, sid).read_bytes().endswith(b"\n")


def test_versions(world):
    assert run(world, "claude", ["--version"]).stdout == "2.1.197 (Claude Code)\n"
    assert run(world, "pi", ["--version"]).stdout == "0.73.1\n"
    assert run(world, "codex", ["--version"]).stdout == "codex-cli 0.171.0\n"
    assert run(world, "claude", ["--no-such-flag"]).returncode == 1


def test_claude_resume_after_a_later_turns_prompt_row_adds_only_no_response(world):
    sid = str(uuid.uuid4())
    assert run(world, "claude", claude_args(sid, "Create the files.")).returncode == 0
    world["server"].arm_stall(10)
    assert run(world, "claude", claude_args(sid, "second", resume=True),
               crash="during-model=1").returncode == -signal.SIGKILL
    assert run(world, "claude", claude_args(sid, "third", resume=True)).returncode == 0
    tail = world["server"].main_requests()[-1]["body"]["messages"][-3:]
    assert tail == [{"role": "user", "content": "second"},
                    {"role": "assistant", "content": [{"type": "text",
                                                       "text": "No response requested."}]},
                    {"role": "user", "content": "third"}]
    assert "Continue from where you left off." not in claude_file(world, sid).read_text()
