"""A restore from a snapshot older than the session's last recorded steps: which steps' files
it could not bring, what the user and the model are told (workspace/behind.py, the relaunch
plan), and nothing said when the snapshot holds every step or nothing was restored."""

from __future__ import annotations

import json

from dh_cli import events, wrappers
from dh_cli.mirror.session import SessionMirror
from dh_cli.resume.plan import _continue_prompt, _not_restored
from dh_cli.supervisor.spec import LaunchSpec, RunOptions
from dh_cli.workspace.behind import Step, not_restored, steps_behind
from dh_cli.workspace.snapshot import Snapshotter
from dh_cli.workspace.store import Snapshot
from dh_cli.worlds.local import LocalWorld


def row(id_: str, parent, message: dict) -> str:
    return json.dumps({"type": "message", "id": id_, "parentId": parent, "message": message}) + "\n"


def call(id_: str, parent: str, call_id: str, tool: str = "bash") -> str:
    return row(id_, parent, {"role": "assistant", "stopReason": "toolUse", "content": [
        {"type": "toolCall", "id": call_id, "name": tool, "arguments": {"command": "echo"}}]})


def result(id_: str, parent: str, call_id: str, tool: str = "bash") -> str:
    return row(id_, parent, {"role": "toolResult", "toolCallId": call_id, "toolName": tool,
                             "content": [{"type": "text", "text": "ok"}], "isError": False})


class Session:
    """A pi session in a real log: its records mirrored from a file, its folder snapshotted."""

    def __init__(self, tmp_path):
        self.world = LocalWorld(tmp_path / "dh.db")
        self.session = self.world.create_session("pi", home=str(tmp_path), harness_session_id="s1")
        self.file, self.cwd = tmp_path / "s1.jsonl", tmp_path / "proj"
        self.cwd.mkdir()
        self.world.add_source(self.session.id, "jsonl", self.file.name, str(self.file))
        self.mirror = SessionMirror(self.world, wrappers.get("pi"), self.session)
        self.snapper = Snapshotter(self.world, self.session.id, str(self.cwd))

    def log(self, *lines: str) -> None:
        with open(self.file, "a") as f:
            f.write("".join(lines))
        self.mirror.sync()

    def restored(self, seq: int) -> None:
        events.add(self.world, self.session.id, events.workspace(str(self.cwd), {
            "action": "restored", "snapshot": seq}))

    def behind(self) -> list[str]:
        return [s.call_id for s in not_restored(self.world, wrappers.get("pi"), self.session.id, {})]


def two_steps(tmp_path) -> Session:
    """A turn of two shell steps; snapshots: the start (1), after the first step (2)."""
    s = Session(tmp_path)
    s.snapper.take("start")
    s.log(row("u1", None, {"role": "user", "content": "go"}), call("a1", "u1", "call_a"),
          result("r1", "a1", "call_a"))
    (s.cwd / "steps.log").write_text("a\n")
    s.snapper.take("tool", 1, "call_a", always=True)
    s.log(call("a2", "r1", "call_b"), result("r2", "a2", "call_b"))  # no snapshot: A was killed
    (s.cwd / "steps.log").write_text("a\nb\n")
    return s


def test_a_restore_older_than_the_last_steps_names_each_step_it_could_not_bring(tmp_path):
    s = two_steps(tmp_path)
    s.restored(2)
    assert s.behind() == ["call_b"]
    s.restored(1)  # the start snapshot: neither step's files
    assert s.behind() == ["call_a", "call_b"]


def test_nothing_is_said_without_a_restore_or_once_the_relaunch_was_planned(tmp_path):
    s = two_steps(tmp_path)
    assert s.behind() == []  # the folder was not restored: the steps' files are in it
    s.snapper.take("tool", 1, "call_b", always=True)
    s.restored(3)
    assert s.behind() == []  # the snapshot holds the last step
    s.restored(1)
    events.add(s.world, s.session.id, events.resume_plan("resume"))
    assert s.behind() == []  # told with that relaunch, not again with the next


def test_a_read_only_step_needs_no_files(tmp_path):
    s = two_steps(tmp_path)
    s.log(call("a3", "r2", "call_c", "read"), result("r3", "a3", "call_c", "read"))
    s.restored(2)
    assert s.behind() == ["call_b"]


def snap(seq: int, reason: str, step: str | None = None, turn: int | None = None) -> Snapshot:
    return Snapshot("s", seq, "2026-12-06T00:00:00Z", turn, step, reason, "root")


STEPS = [Step("a", "bash", 1), Step("b", "bash", 1), Step("c", "edit", 2)]


def test_a_snapshot_holds_the_step_it_names_and_every_step_before():
    snaps = [snap(1, "start"), snap(2, "tool", "a", 1), snap(3, "turn_end", None, 1),
             snap(4, "tool", "c", 2)]
    assert steps_behind(snaps, 1, STEPS) == STEPS
    assert steps_behind(snaps, 2, STEPS) == STEPS[1:]
    assert steps_behind(snaps, 3, STEPS) == STEPS[1:]  # a turn's end with no new step
    assert steps_behind(snaps, 4, STEPS) == []
    # a start snapshot taken in turn 2 (a session from before snapshots) holds turn 1's steps
    assert steps_behind([snap(1, "start", None, 2)], 1, STEPS) == STEPS[2:]


def test_the_user_and_the_model_are_told_which_steps_may_be_missing(tmp_path):
    s = two_steps(tmp_path)
    s.restored(1)
    said: list[str] = []
    opts = RunOptions(cwd=str(s.cwd), env={}, notice=said.append)
    behind = _not_restored(s.world, wrappers.get("pi"), s.session, opts)
    assert [step.call_id for step in behind] == ["call_a", "call_b"]
    assert len(said) == 1 and "before 2 recorded step(s)" in said[0], said
    assert "`bash` call call_a, `bash` call call_b" in said[0], said
    spec = LaunchSpec(("pi",), ("-p", "go"), {}, str(s.cwd), headless=True)
    text = _continue_prompt(opts, spec, [], cut=True, behind=behind)
    assert text.startswith(opts.continue_prompt)
    assert "`bash` call call_a, `bash` call call_b" in text
    assert "may be missing; check before relying on it" in text


def test_claude_takes_dh_note_after_its_first_message_and_others_give_no_place():
    claude = wrappers.get("claude-code")
    assert claude.with_note(["-p", "Do it.", "--allowedTools", "Bash", "Edit"], "N") == \
        ["-p", "--allowedTools", "Bash", "Edit", "--", "Do it.\n\nN"]
    assert claude.with_note(["--model", "x"], "N") is None  # no message: nowhere to say it
    assert wrappers.get("codex").with_note(["exec", "Do it."], "N") is None


def test_pi_takes_dh_note_at_the_end_of_its_first_message_or_in_its_system_prompt():
    pi = wrappers.get("pi")
    assert pi.with_note(["--model", "m", "@a.txt", "Do it.", "Then this."], "N") == \
        ["--model", "m", "@a.txt", "Do it.\n\nN", "Then this."]
    assert pi.with_note(["-p", "--", "-x first"], "N") == ["-p", "--", "-x first\n\nN"]
    # no message (a prompt typed into the TUI): the relaunched Pi's system prompt says it
    assert pi.with_note(["--model", "Do it."], "N") == ["--append-system-prompt", "N", "--model", "Do it."]
    assert pi.with_note(["@a.txt"], "N") == ["--append-system-prompt", "N", "@a.txt"]


def test_a_relaunch_with_no_record_tells_of_a_folder_changed_since_the_start(tmp_path):
    from dh_cli.resume.plan import RelaunchPlan, _told_of_changes

    s = Session(tmp_path)
    s.snapper.take("start")
    said: list[str] = []
    opts = RunOptions(cwd=str(s.cwd), env={}, notice=said.append)
    spec = LaunchSpec(("claude",), ("-p", "Run the step."), {}, str(s.cwd), headless=True)
    plan = RelaunchPlan("relaunch", s.session, spec.args)
    claude = wrappers.get("claude-code")
    assert _told_of_changes(s.world, claude, plan, spec, opts) == (plan, 0) and said == []
    (s.cwd / "steps.log").write_text("soak0\n")  # a step the harness ran before any record
    told, changed = _told_of_changes(s.world, claude, plan, spec, opts)
    assert changed == 1 and told.argv[:2] == ("-p", "--")
    assert told.argv[2].startswith("Run the step.\n\n[dh] The working folder changed")
    assert "steps.log created" in told.argv[2] and "steps.log created" in said[0]
    said.clear()
    same, _ = _told_of_changes(s.world, wrappers.get("codex"), plan, spec, opts)
    assert same == plan and "the model is not told; tell it yourself" in said[0]
