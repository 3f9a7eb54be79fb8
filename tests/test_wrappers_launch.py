"""Launch plans, session ids from stdout, resume argv and dangling-call repair, per harness.

Argv tests compare with the argv the real harnesses were run with (fixtures' meta.json).
Repair tests check the records against the real rows they stand in for, then prove them end
to end: a fake harness is killed while a tool runs, dh's repair lines are appended, and the
resumed fake must send dh's text as that call's result without paying for a step twice.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest

from dh_cli.models import Record, ToolCall
from dh_cli.wrappers import get
from dh_cli.wrappers.claude import project_slug
from dh_cli.wrappers.common import parse_argv
from dh_cli.wrappers.opencode_rows import drop_empty_assistant, repair_export
from dh_cli.wrappers.pi import pi_session_dir_name
from tests.fakes.install import install_fake_harnesses
from tests.fakes.model_server import FakeModelServer

FIXTURES = Path(__file__).parent / "fixtures" / "real"
CLAUDE, CODEX, OPENCODE, PI = get("claude-code"), get("codex"), get("opencode"), get("pi")
WRAPPERS = {"claude-code": CLAUDE, "codex": CODEX, "opencode": OPENCODE, "pi": PI}
TEXT = "[dh] interrupted; the command may already have run"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
PI_NAME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_[0-9a-f-]{36}\.jsonl$")
SID = "aeaa3716-c8d8-49be-a730-61d2ebf71362"
CODEX_EXEC = ["exec", "--json", "--skip-git-repo-check",
              "--dangerously-bypass-approvals-and-sandbox"]


# ---------------------------------------------------------------- helpers

def meta(harness: str, scenario: str) -> dict:
    return json.loads((FIXTURES / harness / scenario / "meta.json").read_text())


def argvs(harness: str, scenario: str) -> list[list[str]]:
    """Each launch's argv without the binary."""
    return [run["argv"][1:] for run in meta(harness, scenario)["runs"]]


def native_id(harness: str, scenario: str) -> str:
    info = meta(harness, scenario)
    return info.get("session_id") or info["thread_id"]


def as_records(lines: list[bytes]) -> list[Record]:
    out, offset = [], 0
    for line in lines:
        out.append(Record(1, 0, offset, line))
        offset += len(line)
    return out


def file_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def fixture_lines(harness: str, scenario: str, pattern: str) -> list[bytes]:
    return file_lines(next((FIXTURES / harness / scenario).glob(pattern)))


def shape(argv: list[str], wrapper) -> tuple:
    """Flag groups as a sorted list plus the positional words: argv up to flag order."""
    split = [part for arg in argv for part in
             (arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg])]
    groups, words = parse_argv(split, wrapper.value_flags)
    return sorted(map(tuple, groups)), words


def one_word(argv: list[str], flag: str) -> list[str]:
    """The real argv with `flag VALUE` written `flag=VALUE`, as dh passes a session id."""
    out = list(argv)
    while flag in out:
        at = out.index(flag)
        out[at:at + 2] = [f"{flag}={out[at + 1]}"]
    return out


def dangling(wrapper, records: list[Record]) -> list[str]:
    return [c.id for c in wrapper.turn_state(records).dangling]


# ---------------------------------------------------------------- headless and prompt

@pytest.mark.parametrize("wrapper, args, expected", [
    (CLAUDE, ["-p", "x"], True), (CLAUDE, ["--print"], True), (CLAUDE, ["x"], False),
    (CODEX, ["exec", "x"], True), (CODEX, ["e", "x"], True), (CODEX, ["x"], False),
    (CODEX, ["-m", "exec", "x"], False), (CODEX, ["resume", "t1"], False),
    (OPENCODE, ["run", "x"], True), (OPENCODE, ["--log-level", "DEBUG", "run", "x"], True),
    (OPENCODE, ["/proj"], False), (OPENCODE, ["--prompt", "run"], False),
    (PI, ["-p", "x"], True), (PI, ["--print", "x"], True), (PI, ["--mode", "json", "x"], False),
])
def test_is_headless(wrapper, args, expected):
    assert wrapper.is_headless(args) is expected


@pytest.mark.parametrize("wrapper", [CLAUDE, CODEX, OPENCODE, PI])
def test_a_tui_launched_with_no_arguments_is_resumed_as_a_tui(wrapper):
    """`dh run codex` stores no arguments: `dh resume` relaunched it as `codex exec resume`,
    which refused to run outside a git checkout (tests/e2e/test_tui.py saw it)."""
    from dh_cli.models import Session
    from dh_cli.resume.plan import resumed_headless

    launched = Session(id="s", harness=wrapper.name, argv="[]")
    assert resumed_headless(wrapper, launched, []) is False
    imported = Session(id="s", harness=wrapper.name)  # dh did not launch it: no arguments stored
    assert resumed_headless(wrapper, imported, []) is True


def test_flag_values_and_variadic_words_are_not_the_prompt(tmp_path):
    args = ["--model", "opus", "-p", "fix it", "--allowedTools", "Bash", "Edit", "--verbose"]
    plan = CLAUDE.plan_launch(args, str(tmp_path), tmp_path)
    assert plan.prompt == "fix it"
    resumed = CLAUDE.resume_args(args, SID, None, "go", True)
    assert resumed == ["--model", "opus", "-p", "--allowedTools", "Bash", "Edit", "--verbose",
                       f"--resume={SID}", "go"]


# ---------------------------------------------------------------- launch plans

def test_claude_plan_pins_a_new_session_id_and_path(tmp_path):
    info = meta("claude-code", "multiturn")
    args = [a for a in argvs("claude-code", "multiturn")[0] if a not in ("--session-id", SID)]
    before = list(args)
    plan = CLAUDE.plan_launch(args, info["cwd"], tmp_path)
    assert args == before and plan.argv == [*args, "--session-id", plan.native_id]
    assert str(uuid.UUID(plan.native_id)) == plan.native_id
    project = tmp_path / "projects" / info["project_key"]
    assert plan.native_path == project / f"{plan.native_id}.jsonl"
    assert project_slug(info["cwd"]) == info["project_key"]
    assert (plan.headless, plan.prompt, plan.resuming) == (True, "Turn one: run a command.", False)


@pytest.mark.parametrize("args, expected_id, resuming", [
    (["-p", "x", "--session-id", SID], SID, False),
    (["-p", "--resume", SID, "x"], SID, True),
    (["-r", SID], SID, True),
    (["-c", "-p", "x"], None, True),
    (["--continue"], None, True),
])
def test_claude_plan_keeps_the_users_session_choice(tmp_path, args, expected_id, resuming):
    plan = CLAUDE.plan_launch(args, str(tmp_path), tmp_path)
    assert (plan.argv, plan.native_id, plan.resuming) == (args, expected_id, resuming)


def test_claude_plan_names_a_fork_and_stays_clear_of_the_prompt(tmp_path):
    args = ["-p", "--resume", SID, "--fork-session", "x"]
    fork = CLAUDE.plan_launch(args, str(tmp_path), tmp_path)
    assert fork.argv[-2:] == ["--session-id", fork.native_id] and fork.native_id != SID
    assert not fork.resuming
    dashed = CLAUDE.plan_launch(["-p", "--", "-x is a prompt"], str(tmp_path), tmp_path)
    assert dashed.argv == ["-p", "--session-id", dashed.native_id, "--", "-x is a prompt"]
    assert dashed.prompt == "-x is a prompt"


def test_claude_plan_leaves_long_slugs_to_a_glob(tmp_path):
    plan = CLAUDE.plan_launch(["-p", "x"], "/" + "a" * 250, tmp_path)
    assert plan.native_id and plan.native_path is None


def test_pi_plan_names_a_new_file_in_pis_layout(tmp_path):
    info = meta("pi", "multiturn")
    args = argvs("pi", "multiturn")[0]
    before = list(args)
    plan = PI.plan_launch(args, info["cwd"], tmp_path)
    assert args == before and plan.argv == [*args, "--session", str(plan.native_path)]
    real = Path(info["session_file_rel"])
    assert plan.native_path.parent == tmp_path / real.parent
    assert real.parent.name == pi_session_dir_name(info["cwd"])
    assert PI_NAME.match(plan.native_path.name) and PI_NAME.match(real.name)
    assert (plan.native_id, plan.headless, plan.prompt) == (None, True, "Turn one: run a command.")


def test_pi_plan_honours_session_dir(tmp_path):
    plan = PI.plan_launch(["-p", "--session-dir", "sd", "x"], str(tmp_path), tmp_path / "home")
    assert plan.native_path.parent == tmp_path / "sd"


def test_pi_plan_keeps_the_users_session_choice(tmp_path):
    existing = tmp_path / "old.jsonl"
    existing.write_text("{}\n")
    cases = {("--session", str(existing)): (existing, True),
             ("--session", "new.jsonl"): (tmp_path / "new.jsonl", False),
             ("--session", "01a2264b"): (None, True), ("-c",): (None, True),
             ("-r",): (None, True), ("--no-session",): (None, False),
             ("--fork", str(existing)): (None, False)}
    for flags, (path, resuming) in cases.items():
        args = ["-p", *flags, "hi"]
        plan = PI.plan_launch(args, str(tmp_path), tmp_path / "home")
        assert (plan.argv, plan.native_path, plan.resuming) == (args, path, resuming), flags


@pytest.mark.parametrize("args, headless, expected_id, prompt, resuming", [
    ([*CODEX_EXEC, "Create the files."], True, None, "Create the files.", False),
    (["exec", "--json", "resume", "t1", "continue"], True, "t1", "continue", True),
    (["e", "resume", "--last", "continue"], True, None, "continue", True),
    (["-m", "o3", "fix it"], False, None, "fix it", False),
    (["--enable", "fast_mode", "--remote", "unix:///s", "fix it"], False, None, "fix it", False),
    (["resume", "t1"], False, "t1", None, True),
])
def test_codex_plan_passes_args_through(tmp_path, args, headless, expected_id, prompt, resuming):
    plan = CODEX.plan_launch(args, str(tmp_path), tmp_path)
    # the TUI runs its agent in its own process (no shared app-server daemon)
    assert plan.argv == (args if headless else ["-c", "features.daemon_auto_start=false", *args])
    assert plan.native_path is None
    assert (plan.headless, plan.native_id, plan.prompt, plan.resuming) == \
           (headless, expected_id, prompt, resuming)


@pytest.mark.parametrize("args", [["-c", "features.daemon_auto_start=true"],
                                  ["--enable", "daemon_auto_start", "resume", "t1"]])
def test_a_codex_tui_asked_for_its_daemon_keeps_it(tmp_path, args):
    assert CODEX.plan_launch(args, str(tmp_path), tmp_path).argv == args


@pytest.mark.parametrize("args, headless, expected_id, prompt, resuming", [
    (["run", "--format", "json", "--title", "t", "Create the files."], True, None,
     "Create the files.", False),
    (["run", "fix", "the", "tests"], True, None, "fix the tests", False),
    (["run", "-s", "ses_1", "continue"], True, "ses_1", "continue", True),
    (["run", "--session", "ses_1", "--fork", "x"], True, None, "x", False),
    (["run", "-c", "x"], True, None, "x", True),
    (["--prompt", "hi", "/proj"], False, None, "hi", False),
])
def test_opencode_plan_passes_args_through(tmp_path, args, headless, expected_id, prompt, resuming):
    plan = OPENCODE.plan_launch(args, str(tmp_path), tmp_path / "opencode.db")
    assert plan.argv == args and plan.native_path is None
    assert (plan.headless, plan.native_id, plan.prompt, plan.resuming) == \
           (headless, expected_id, prompt, resuming)


# ---------------------------------------------------------------- ids from stdout

@pytest.mark.parametrize("harness", sorted(WRAPPERS))
def test_ids_from_real_stdout(harness):
    wrapper = WRAPPERS[harness]
    for scenario in sorted(p.name for p in (FIXTURES / harness).iterdir() if p.is_dir()):
        for stdout in sorted((FIXTURES / harness / scenario).glob("run*.stdout.jsonl")):
            found = [wrapper.id_from_output(line) for line in stdout.read_bytes().splitlines()]
            assert {i for i in found if i} == {native_id(harness, scenario)}, stdout
            if harness != "opencode":  # only OpenCode repeats the id on every event
                assert found[0] and not any(found[1:]), stdout


@pytest.mark.parametrize("line", [b"", b"\n", b"not json", b"\xff\xfe\x00", b"[1, 2]",
                                  b'{"type":"thread.started","thread_id":5}',
                                  b'{"type":"session","id":null}', b'{"sessionID":""}',
                                  b'{"type":"system","subtype":"init"}', b'{"type":"init"'])
@pytest.mark.parametrize("harness", sorted(WRAPPERS))
def test_id_from_output_tolerates_garbage(harness, line):
    assert WRAPPERS[harness].id_from_output(line) is None


# ---------------------------------------------------------------- resume argv

@pytest.mark.parametrize("harness", sorted(WRAPPERS))
@pytest.mark.parametrize("scenario", ["killed-resumed", "multiturn"])
def test_resume_args_match_the_real_resume_argv(harness, scenario):
    wrapper, cwd = WRAPPERS[harness], meta(harness, scenario)["cwd"]
    first, *later = argvs(harness, scenario)
    for real in later:
        told = wrapper.plan_launch(real, cwd, Path("/nowhere"))  # the prompt and file it names
        path = str(told.native_path) if told.native_path else None
        ours = wrapper.resume_args(first, native_id(harness, scenario), path, told.prompt, True)
        again = wrapper.resume_args(real, native_id(harness, scenario), path, told.prompt, True)
        assert shape(again, wrapper) == shape(real, wrapper)  # resuming a resume: the same
        if harness == "opencode":  # the id as one word, `--session=<id>` (issue 14)
            assert ours == again == one_word(real, "--session")
        elif harness == "codex":
            assert ours == again == real
        elif harness == "claude-code":
            assert shape(ours, wrapper) == shape(real, wrapper)
        else:  # dh keeps the user's --provider/--model; Pi would read them from the file
            kept = [("--model", "mock-claude"), ("--provider", "rigmock")]
            assert shape(ours, wrapper) == (sorted(shape(real, wrapper)[0] + kept),
                                            shape(real, wrapper)[1])


def test_claude_resume_drops_every_session_choice():
    original = ["-p", "x", "--session-id", SID, "--model", "opus", "--fork-session", "-c",
                "--resume-session-at", "msg_1", "--verbose", "--resume=old"]
    assert CLAUDE.resume_args(original, "new", None, "go", True) == \
           ["-p", "--model", "opus", "--verbose", "--resume=new", "go"]
    assert CLAUDE.resume_args(["--model", "opus", "x"], "new", None, None, True) == \
           ["-p", "--model", "opus", "--resume=new"]
    assert CLAUDE.resume_args(["-p", "x"], "new", None, "-dashed", False) == \
           ["--resume=new", "--", "-dashed"]


def test_codex_resume_shapes():
    assert CODEX.resume_args(["-m", "o3", "fix it"], "t1", None, None, False) == \
           ["resume", "-m", "o3", "t1"]
    assert CODEX.resume_args(["-c", "k=v", "exec", "--json", "-i", "a.png", "fix"], "t1", None,
                             "go", True) == ["-c", "k=v", "exec", "--json", "resume", "t1", "go"]
    assert CODEX.resume_args(["exec", "--json", "resume", "--last", "x"], "t1", None, "go",
                             True) == ["exec", "--json", "resume", "t1", "go"]


def test_opencode_resume_shapes():
    original = ["--print-logs", "run", "--format", "json", "-f", "a.png", "--title", "t",
                "--command", "review", "--fork", "-s", "old", "-m", "mock/m", "x", "y"]
    assert OPENCODE.resume_args(original, "ses_1", None, "go", True) == \
           ["--print-logs", "run", "--format", "json", "-m", "mock/m", "--session=ses_1", "go"]
    assert OPENCODE.resume_args(["--prompt", "hi", "/proj", "-c"], "ses_1", None, "go", False) == \
           ["/proj", "--session=ses_1", "--prompt", "go"]


def test_pi_resume_shapes():
    original = ["--provider", "p", "-c", "--fork", "f.jsonl", "--no-session", "hi", "there"]
    assert PI.resume_args(original, "id", "/s/f.jsonl", "go", True) == \
           ["-p", "--provider", "p", "--session", "/s/f.jsonl", "go"]
    assert PI.resume_args(["-p", "hi"], "01a2264b", None, None, False) == ["--session", "01a2264b"]


# ---------------------------------------------------------------- repair records: Claude

CLAUDE_FILE = "claude-config/projects/*/*.jsonl"


def cut_before_first_result(lines: list[bytes]) -> tuple[list[bytes], dict]:
    """The lines up to the first tool_result row, and that row: a real dangling call."""
    at = next(i for i, line in enumerate(lines) if b'"tool_result"' in line)
    return lines[:at], json.loads(lines[at])


def test_claude_repair_row_stands_in_for_the_real_result_row():
    head, real = cut_before_first_result(fixture_lines("claude-code", "basic", CLAUDE_FILE))
    records = as_records(head)
    call, = CLAUDE.turn_state(records).dangling
    line, = CLAUDE.repair_lines(records, call, TEXT)
    row = json.loads(line)
    assert line.endswith(b"}\n") and b'": ' not in line  # compact, one line
    assert set(row) == set(real)
    same = ("parentUuid", "sourceToolAssistantUUID", "promptId", "isSidechain", "sessionId", "cwd",
            "version", "gitBranch", "userType", "entrypoint", "type")
    assert {k: row[k] for k in same} == {k: real[k] for k in same}
    assert row["message"] == {"role": "user", "content": [
        {"tool_use_id": call.id, "type": "tool_result", "content": TEXT, "is_error": True}]}
    assert row["toolUseResult"] == f"Error: {TEXT}" and ISO.match(row["timestamp"])
    assert row["uuid"] != real["uuid"] and uuid.UUID(row["uuid"])
    assert not dangling(CLAUDE, as_records(head + [line]))


def claude_parallel_calls() -> tuple[list[bytes], dict, dict]:
    """A real tool_use row plus a second tool_use row of the same message after it."""
    head, _ = cut_before_first_result(fixture_lines("claude-code", "basic", CLAUDE_FILE))
    first = json.loads(head[-1])
    second = json.loads(head[-1])
    second.update(parentUuid=first["uuid"], uuid=str(uuid.uuid4()))
    second["message"]["content"][0]["id"] = "toolu_second"
    return head + [json.dumps(second).encode() + b"\n"], first, second


def test_claude_repair_chains_parallel_calls_from_the_last_row():
    lines, first, second = claude_parallel_calls()
    assert dangling(CLAUDE, as_records(lines)) == ["toolu_rig_000", "toolu_second"]
    calls = CLAUDE.turn_state(as_records(lines)).dangling
    for call, source in zip(calls, (first, second)):
        line, = CLAUDE.repair_lines(as_records(lines), call, TEXT)
        row = json.loads(line)
        assert row["parentUuid"] == json.loads(lines[-1])["uuid"]
        assert row["sourceToolAssistantUUID"] == source["uuid"]
        lines.append(line)
    assert not dangling(CLAUDE, as_records(lines))


def test_claude_repair_leaves_a_call_the_conversation_dropped():
    head, _ = cut_before_first_result(fixture_lines("claude-code", "basic", CLAUDE_FILE))
    text_row, tool_row = json.loads(head[-2]), json.loads(head[-1])
    prompt = dict(tool_row, parentUuid=text_row["uuid"], uuid=str(uuid.uuid4()), type="user",
                  message={"role": "user", "content": "continue"})
    records = as_records(head + [json.dumps(prompt).encode() + b"\n"])
    call, = CLAUDE.turn_state(records).dangling
    assert CLAUDE.repair_lines(records, call, TEXT) == []


# ---------------------------------------------------------------- repair records: Pi

PI_FILE = "pi-agent/sessions/*/*.jsonl"


def test_pi_repair_entry_stands_in_for_the_real_result():
    lines = fixture_lines("pi", "killed", PI_FILE)
    real = json.loads(lines[-1])
    records = as_records(lines[:-1])
    call, = PI.turn_state(records).dangling
    line, = PI.repair_lines(records, call, TEXT)
    entry = json.loads(line)
    assert set(entry) == set(real) and set(entry["message"]) == set(real["message"])
    assert (entry["parentId"], entry["message"]["toolCallId"], entry["message"]["toolName"]) == \
           (real["parentId"], real["message"]["toolCallId"], real["message"]["toolName"])
    assert entry["message"]["content"] == [{"type": "text", "text": TEXT}]
    assert entry["message"]["isError"] is True and isinstance(entry["message"]["timestamp"], int)
    assert re.fullmatch(r"[0-9a-f]{8}", entry["id"]) and ISO.match(entry["timestamp"])
    assert b'": ' not in line and not dangling(PI, as_records(lines[:-1] + [line]))


def test_pi_repair_chains_several_calls_so_the_last_line_stays_the_leaf():
    lines = fixture_lines("pi", "killed", PI_FILE)[:-1]
    assistant = json.loads(lines[-1])
    extra = dict(assistant["message"]["content"][-1], id="toolu_second")
    assistant["message"]["content"].append(extra)
    lines[-1] = json.dumps(assistant).encode() + b"\n"
    parents = []
    for call in PI.turn_state(as_records(lines)).dangling:
        line, = PI.repair_lines(as_records(lines), call, TEXT)
        parents.append(json.loads(line)["parentId"])
        lines.append(line)
    assert parents == [assistant["id"], json.loads(lines[-2])["id"]]
    assert not dangling(PI, as_records(lines))


def test_pi_repair_leaves_a_call_a_later_prompt_follows():
    lines = fixture_lines("pi", "killed", PI_FILE)[:-1]
    assistant = json.loads(lines[-1])
    prompt = {"type": "message", "id": "abcdef01", "parentId": assistant["id"], "timestamp": "t",
              "message": {"role": "user", "content": [{"type": "text", "text": "next"}]}}
    records = as_records(lines + [json.dumps(prompt).encode() + b"\n"])
    call, = PI.turn_state(records).dangling
    assert PI.repair_lines(records, call, TEXT) == []


# ---------------------------------------------------------------- repair records: Codex

CODEX_FILE = "codex-home/sessions/*/*/*/*.jsonl"


def without_output(lines: list[bytes], kind: bytes, pick=max) -> tuple[list[bytes], dict]:
    """The rollout minus its last (or `pick`ed) output record of `kind`, and that record."""
    at = pick(i for i, line in enumerate(lines) if b'"type":"' + kind + b'"' in line)
    return lines[:at] + lines[at + 1:], json.loads(lines[at])


@pytest.mark.parametrize("scenario, kind, prefix", [
    ("basic", b"function_call_output", "fco_"),
    ("basic-apply-patch", b"custom_tool_call_output", "ctco_")])
def test_codex_repair_record_stands_in_for_the_real_output(scenario, kind, prefix):
    lines, real = without_output(fixture_lines("codex", scenario, CODEX_FILE), kind)
    records = as_records(lines)
    call, = CODEX.turn_state(records).dangling
    line, = CODEX.repair_lines(records, call, TEXT)
    rec = json.loads(line)
    assert set(rec) == set(real) and set(rec["payload"]) == set(real["payload"])
    assert rec["metadata"].keys() == real["metadata"].keys()
    objs = [json.loads(x) for x in lines]
    assert rec["ordinal"] == max(o["ordinal"] for o in objs) + 1
    assert rec["metadata"]["history_sequence"] == \
        max(o.get("metadata", {}).get("history_sequence", 0) for o in objs) + 1
    for key in ("type", "call_id"):
        assert rec["payload"][key] == real["payload"][key]
    for key in ("sampled_through_sequence", "fallback_token_limit_override", "client_authored"):
        assert rec["metadata"][key] == real["metadata"][key]
    turn = "internal_chat_message_metadata_passthrough"
    assert rec["payload"][turn]["turn_id"] == real["payload"][turn]["turn_id"]
    assert rec["payload"]["output"] == TEXT and rec["payload"]["id"].startswith(prefix)
    assert b'": ' not in line and not dangling(CODEX, as_records(lines + [line]))


def test_codex_repair_leaves_a_call_an_earlier_turn_left_behind():
    lines, _ = without_output(fixture_lines("codex", "multiturn", CODEX_FILE),
                              b"function_call_output", pick=min)
    records = as_records(lines)
    call, = CODEX.turn_state(records).dangling
    assert CODEX.repair_lines(records, call, TEXT) == []


# ---------------------------------------------------------------- repair: OpenCode export

def fixture_export(scenario: str) -> dict:
    return json.loads((FIXTURES / "opencode" / scenario / "export.json").read_text())


def tool_part(export: dict) -> dict:
    return next(p for m in export["messages"] for p in m["parts"] if p["type"] == "tool")


def test_repair_export_closes_only_an_open_tool_part():
    export = fixture_export("killed")
    assert repair_export(export, tool_part(export)["callID"], TEXT) == export  # finished: kept
    part = tool_part(export)
    start = part["state"]["time"]["start"]
    part["state"] = {"status": "running", "input": part["state"]["input"], "time": {"start": start}}
    before = json.dumps(export)
    fixed = repair_export(export, part["callID"], TEXT)
    assert json.dumps(export) == before  # pure: the input is not touched
    state = tool_part(fixed)["state"]
    assert state == {"status": "error", "input": part["state"]["input"], "error": TEXT,
                     "time": {"start": start, "end": state["time"]["end"]}}
    assert state["time"]["end"] >= start
    # no JSONL to append to: the OpenCode store closes the call in its `part` row instead
    from dh_cli.stores import store_of

    assert not store_of(OPENCODE).session_files


def test_a_part_closed_while_pending_gets_numbers_for_its_times(tmp_path):
    """OpenCode writes a tool part `pending`, with no times, before it knows the input; dh
    closing it wrote null times, which `opencode import` refuses (tests/e2e/
    test_whole_home_lost.py runs the real one)."""
    from dh_cli.wrappers.opencode_db import set_tool_error

    db = tmp_path / "opencode.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE part (id TEXT, session_id TEXT, data TEXT)")
        conn.execute("INSERT INTO part VALUES ('p1', 's1', ?)", [json.dumps(
            {"type": "tool", "tool": "write", "callID": "c1",
             "state": {"status": "pending", "input": {}, "raw": ""}})])
    assert set_tool_error(db, "s1", "c1", TEXT)
    with sqlite3.connect(db) as conn:
        state = json.loads(conn.execute("SELECT data FROM part").fetchone()[0])["state"]
    times = state["time"]
    assert state["status"] == "error" and state["error"] == TEXT
    assert all(isinstance(times[k], int) for k in ("start", "end")) and times["end"] >= times["start"]


def test_drop_empty_assistant_removes_only_the_trailing_killed_step():
    killed = fixture_export("killed")
    assert [p["type"] for p in killed["messages"][-1]["parts"]] == ["step-start"]
    dropped = drop_empty_assistant(killed)
    assert dropped["messages"] == killed["messages"][:-1] and dropped["info"] == killed["info"]
    assert len(killed["messages"]) == 3  # the input is left as it was
    for scenario in ("killed-resumed", "basic"):  # an empty step mid-session is history
        assert drop_empty_assistant(fixture_export(scenario)) == fixture_export(scenario)


# ---------------------------------------------------------------- end to end with the fakes

SCRIPT = {"replies": [{"text": "Running it.", "shell": "echo step0 >> steps.log"},
                      {"write": {"path": "a.txt", "content": "alpha\n"}},
                      {"read": {"path": "a.txt"}},
                      {"text": "All done."}]}


@pytest.fixture
def world(tmp_path):
    """Private homes, a project dir, the installed fakes and a fake model server."""
    server = FakeModelServer(SCRIPT).start()
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {k: v for k, v in os.environ.items()
           if "proxy" not in k.lower() and not k.startswith("DH_FAKE")}
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path), NO_PROXY="*", IS_SANDBOX="1",
               CLAUDE_CONFIG_DIR=str(tmp_path / ".claude"), ANTHROPIC_BASE_URL=server.url,
               ANTHROPIC_API_KEY="test-key", PI_CODING_AGENT_DIR=str(tmp_path / "pi-agent"),
               CODEX_HOME=str(tmp_path / ".codex"), MOCK_API_KEY="dummy", PWD=str(proj),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    write_configs(tmp_path, server.url)
    yield {"tmp": tmp_path, "proj": proj, "env": env, "server": server,
           "bin": install_fake_harnesses(tmp_path / "bin")}
    server.stop()


def write_configs(tmp: Path, url: str) -> None:
    (tmp / "pi-agent").mkdir()
    (tmp / "pi-agent" / "models.json").write_text(json.dumps({"providers": {"mock": {
        "baseUrl": url, "api": "anthropic-messages", "apiKey": "x",
        "models": [{"id": "mock-claude", "maxTokens": 8192}]}}}))
    (tmp / ".codex").mkdir()
    (tmp / ".codex" / "config.toml").write_text(
        'model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n'
        f'[model_providers.mock]\nname = "Mock"\nbase_url = "{url}/v1"\n'
        'env_key = "MOCK_API_KEY"\nwire_api = "responses"\n')
    (tmp / "config" / "opencode").mkdir(parents=True)
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                "options": {"baseURL": url + "/v1", "apiKey": "dummy"},
                "models": {"mock-model": {"name": "Mock", "tool_call": True,
                                          "limit": {"context": 128000, "output": 8192}}}}
    (tmp / "config" / "opencode" / "opencode.json").write_text(
        json.dumps({"model": "mock/mock-model", "provider": {"mock": provider}}))


def run(world, name: str, argv: list[str], crash: str | None = None) -> subprocess.CompletedProcess:
    env = dict(world["env"], **({"DH_FAKE_CRASH": crash} if crash else {}))
    return subprocess.run([str(world["bin"][name]), *argv], cwd=world["proj"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                          start_new_session=True)


def first_id(wrapper, stdout: bytes) -> str | None:
    return next(filter(None, map(wrapper.id_from_output, stdout.splitlines())), None)


CASES = {  # fake name, wrapper, user args, harness home, is_error as the model API carries it
    "claude": (CLAUDE, ["-p", "Create the files.", "--output-format", "stream-json", "--verbose",
                        "--dangerously-skip-permissions"], ".claude", True),
    "pi": (PI, ["-p", "--mode", "json", "--provider", "mock", "--model", "mock-claude",
                "Create the files."], "pi-agent", True),
    "codex": (CODEX, [*CODEX_EXEC, "Create the files."], ".codex", False),  # Responses: no flag
}


def native_file(world, plan, found_id: str) -> Path:
    if plan.native_path is not None:
        return plan.native_path
    return next((world["tmp"] / ".codex" / "sessions").glob(f"*/*/*/rollout-*-{found_id}.jsonl"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_repair_then_resume_sends_dhs_text_and_pays_nothing_twice(world, name):
    wrapper, args, home, is_error = CASES[name]
    plan = wrapper.plan_launch(args, str(world["proj"]), world["tmp"] / home)
    killed = run(world, name, plan.argv, crash="during-tool=1")
    assert killed.returncode == -signal.SIGKILL
    found = first_id(wrapper, killed.stdout)
    assert found and (plan.native_id in (None, found))
    path = native_file(world, plan, found)
    records = as_records(file_lines(path))
    call, = wrapper.turn_state(records).dangling
    with path.open("ab") as fh:
        fh.writelines(wrapper.repair_lines(records, call, TEXT))
    assert not wrapper.turn_state(as_records(file_lines(path))).dangling
    resume = wrapper.resume_args(plan.argv, plan.native_id or found,
                                 str(plan.native_path) if plan.native_path else None,
                                 "continue", plan.headless)
    resumed = run(world, name, resume)
    assert resumed.returncode == 0, resumed.stderr
    assert (call.id, TEXT, is_error) in world["server"].tool_results_in_last_request()
    assert world["server"].rebilled() == 0


def opencode_records(db: Path) -> list[Record]:
    """The session's rows as the mirror logs them: one JSON line per row, with its table."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    lines = [json.dumps({"table": table, **dict(row)}).encode() + b"\n"
             for table in ("session", "message", "part")
             for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid")]
    conn.close()
    return as_records(lines)


def test_opencode_repaired_export_imports_and_resumes_with_dhs_text(world):
    db = world["tmp"] / "data" / "opencode" / "opencode.db"
    plan = OPENCODE.plan_launch(["run", "--format", "json", "--title", "t", "Create the files."],
                                str(world["proj"]), db)
    killed = run(world, "opencode", plan.argv, crash="during-tool=1")
    assert killed.returncode == -signal.SIGKILL
    sid = first_id(OPENCODE, killed.stdout)
    call, = OPENCODE.turn_state(opencode_records(db)).dangling
    export = json.loads(run(world, "opencode", ["export", sid]).stdout)
    fixed = drop_empty_assistant(repair_export(export, call.id, TEXT))
    (world["tmp"] / "x.json").write_text(json.dumps(fixed))
    for suffix in ("", "-wal", "-shm"):  # import never overwrites rows: start from a fresh db
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    assert run(world, "opencode", ["import", str(world["tmp"] / "x.json")]).returncode == 0
    assert not OPENCODE.turn_state(opencode_records(db)).dangling
    resume = OPENCODE.resume_args(plan.argv, sid, None, "continue", plan.headless)
    assert resume == ["run", "--format", "json", f"--session={sid}", "continue"]
    resumed = run(world, "opencode", resume)
    assert resumed.returncode == 0, resumed.stderr
    assert (call.id, TEXT, False) in world["server"].tool_results_in_last_request()
    assert world["server"].rebilled() == 0
