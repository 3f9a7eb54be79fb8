"""What every harness wrapper provides. Wrappers are pure: they read native records and say
how to launch, find, repair and resume a harness; they never spawn processes or touch SQL."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..pathrule import under
from ..models import Parsed, Record, ToolCall
from .decode import (MAX_DEPTH, first_record, load_json, regular_file, text_of,  # noqa: F401
                     too_deep)  # (re-exported: the wrappers' shared decoding)
from .identity import file_mark, pick_launched, same_dir
from .limits import Limit
from .record_row import checked, epoch_ms, search_text, to_record  # noqa: F401 - re-exported
from .relaunch import Relaunch  # noqa: F401 - part of the wrapper interface


@dataclass
class NativeSource:
    kind: str  # jsonl | file | opencode
    path: Path  # absolute, on this machine
    relpath: str  # relative to the harness home


@dataclass
class NativeSession:
    harness_session_id: str
    home: Path
    cwd: str | None
    sources: list[NativeSource] = field(default_factory=list)


@dataclass
class TurnState:
    complete: bool  # the last turn ended with a final answer
    dangling: list[ToolCall]  # tool calls with no result
    started: bool = True  # any conversation at all
    opener: str | None = None  # the native id of the record that opened the last turn


def last_opener(parsed: list[Parsed]) -> str | None:
    """The native id of the last record that opens a turn (a user prompt)."""
    return next((p.native_id or p.msg_id for p in reversed(parsed) if p.turn_start), None)


@dataclass
class LaunchPlan:
    """How dh starts a harness for the user's args (argv excludes the binary itself)."""

    argv: list[str]  # the user's args, untouched, plus what dh adds (e.g. --session-id)
    headless: bool
    native_id: str | None = None  # the harness's session id when known before launch
    native_path: Path | None = None  # the session file when known before launch
    prompt: str | None = None  # the user's prompt, kept so a relaunch can replay it
    resuming: bool = False  # the user's own args resume an existing native session


def split_args(args: list[str], value_flags: frozenset[str]) -> tuple[list[int], list[int]]:
    """Indexes of flag tokens (with their values) and of positional tokens in args.
    `--flag=value` is one token; a flag in value_flags consumes the next token; `--` ends flags."""
    flags, positionals, i = [], [], 0
    while i < len(args):
        token = args[i]
        if token == "--":
            positionals.extend(range(i + 1, len(args)))
            break
        if token.startswith("-") and token != "-":
            flags.append(i)
            if "=" not in token and token in value_flags and i + 1 < len(args):
                flags.append(i + 1)
                i += 1
        else:
            positionals.append(i)
        i += 1
    return flags, positionals


def native_id_from_path(path: Path) -> str:
    return path.stem


UUID_SHAPE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class Wrapper:
    name: str = ""
    aliases: tuple[str, ...] = ()
    binary: str = ""
    source_kind: str = "jsonl"
    # The shape of the harness's own session id: it goes on the harness's command line, and a
    # transcript or a world chose it, so anything else is refused before it reaches an argv.
    native_id_shape: re.Pattern = re.compile(r"(?!)")

    store: str = "jsonl"  # the native store that keeps its sessions (dh_cli/stores/)
    # how deep a session file sits below the home, and the folder name at the top of that
    # path (`dh import PATH` finds the home of a file from it); (0, "") when it does not tell
    layout_depth: tuple[int, str] = (0, "")
    # tools that only read (or only update a plan): a call cut by a crash is safe to run again
    # (wrappers/replay.py); lower case
    safe_tools: frozenset[str] = frozenset()

    def native_id_ok(self, native_id: str) -> bool:
        return bool(self.native_id_shape.fullmatch(native_id))

    def is_session_file(self, path: Path) -> bool:
        """Whether the file starts with a record this harness writes first (`dh import`
        refuses anything else: /etc/hostname, another harness's session). A file whose
        first line is not complete yet (a harness still writing it) cannot tell: it may."""
        first = first_record(path)
        return first is ... or (first is not None and self.first_record_ok(first))

    def first_record_ok(self, obj: dict) -> bool:
        return isinstance(obj.get("type"), str)

    tried_versions: tuple[str, str] = ("0.0.0", "0.0.0")  # releases dh was tried with (versions.py)
    packages: tuple[str, ...] = ()  # npm package names the binary may come from
    # seconds a headless harness may sit after its turn is complete in the log before dh ends
    # it (None: the harness always exits by itself)
    linger_after_turn: float | None = None
    # sources appear beside the main file while the harness runs (Claude's subagents and
    # tasks, in folders no watch covers): the live mirror looks for them every few seconds
    # even when no file event wakes it
    side_sources: bool = False

    # finding native state -----------------------------------------------------------------
    def home(self, env: dict | None = None) -> Path:
        raise NotImplementedError

    def discover(self, home: Path) -> list[NativeSession]:
        """Every session the harness keeps under home."""
        raise NotImplementedError

    def find(self, home: Path, ref: str) -> NativeSession | None:
        """A session by the harness's own id or by path."""
        target = Path(ref).resolve() if Path(ref).exists() else None  # resolved once, not per source
        for session in self.discover(home):
            if session.harness_session_id == ref or any(s.path == target for s in session.sources):
                return session
        return None

    def locate(self, home: Path, native_id: str | None, native_path: Path | None) -> NativeSession | None:
        """The native session dh is supervising, found cheaply (no full scan of the home):
        by its known path, else by id."""
        if native_path is not None and Path(native_path).exists():
            for session in self._sessions_at(home, Path(native_path)):
                return session
        return self.find(home, native_id) if native_id else None

    def _sessions_at(self, home: Path, path: Path) -> list[NativeSession]:
        rel = str(path.relative_to(home)) if path.is_relative_to(home) else path.name
        return [NativeSession(native_id_from_path(path), home, None, [NativeSource("jsonl", path, rel)])]

    def source_file(self, home: Path, relpath: str) -> Path:
        """The file of a source under the home, on this machine (relpath checked)."""
        return under(home, relpath)

    def moved_relpath(self, relpath: str, cwd: str) -> str:
        """The source's relpath for the session moved to `cwd` (`dh resume --cwd`): the same
        unless the harness files sessions by their working directory."""
        return relpath

    def cleanup_days(self, home: Path) -> int | None:
        """After how many days without a write the harness deletes a session file itself
        (None: it never does)."""
        return None

    def picker_hides(self, args: list[str]) -> str | None:
        """Why the harness's own session picker does not list a session started with these
        args although its file is there (None: it lists it)."""
        return None

    unhides_picker = False  # unhidden() can make the picker list a session it hides

    def unhidden(self, data: bytes):
        """The main native file's bytes changed so that the harness's own picker lists the
        session, and what changed (`.data`, `.line`, `.field`, `.old`, `.new`); None when
        nothing dh can change hides it. ValueError when that change cannot be made exactly."""
        return None

    def restore_relpath(self, home: Path, relpath: str, cwd: str | None) -> str:
        """Where `dh restore` puts a source back: the folder the harness uses now for the
        session's cwd, by default the one it wrote the source in."""
        return relpath

    def relist(self, home: Path, native_id: str | None, harness) -> dict | None:
        """After `dh restore` put the session's files back: have the harness list it again
        where its list is an index of its own (through its own commands; `harness()` gives
        (binary argv, environment)); what came of it, {"via", "listed"[, "why"]}, or None
        when the harness lists the files themselves."""
        return None

    def carries_cwd(self, obj: dict, path: tuple) -> bool:
        """Whether the string at `path` (keys and indexes; "<json>" enters a JSON text) in
        the record `obj` holds the session's cwd, to move with it (resume/cwd_rewrite.py)."""
        return False

    def watch_root(self, home: Path) -> Path:
        """The folder to watch when the session file is not known before launch."""
        return home / "sessions"

    def watch_folders(self, home: Path) -> list[Path]:
        """The existing folders to watch at launch, at or below watch_root: the ones a new
        session file is written into. Folders created below a watched one later are
        watched as they appear (mirror/live.py)."""
        return [self.watch_root(home)]

    # identity without the harness's stdout (see identity.py) ------------------------------------
    def recent_sessions(self, home: Path, cwd: str, since: float) -> list[NativeSession]:
        """Sessions for cwd whose state may have been written at or after `since` (epoch
        seconds), oldest first, found cheaply. The default scans the whole home."""
        return [s for s in self.discover(home) if same_dir(s.cwd, cwd)]

    def state_mark(self, session: NativeSession):
        """What changes when the harness writes to the session (its main file's mtime, size)."""
        return file_mark(session.sources[0].path) if session.sources else None

    def snapshot(self, home: Path, cwd: str) -> dict:
        """The sessions for cwd at launch: id -> state_mark."""
        try:
            return {s.harness_session_id: self.state_mark(s) for s in self.recent_sessions(home, cwd, 0.0)}
        except Exception:  # noqa: BLE001 - a damaged home: everything found later is new
            return {}

    def launched_session(self, home: Path, cwd: str, since: float, before: dict,
                         resuming: bool, claimed=lambda native_id: False) -> NativeSession | None:
        """The native session a harness launched at `since` in cwd is writing, for one that
        prints no id: new since launch (or, resuming one it picks itself, changed since)."""
        return pick_launched(self.recent_sessions(home, cwd, since), before, resuming,
                             self.state_mark, claimed)

    # reading records ----------------------------------------------------------------------
    def parse(self, raw: bytes) -> Parsed:
        obj, flags = load_json(raw)
        if not isinstance(obj, dict):
            return Parsed(kind="invalid", flags=flags or ["not_object"])
        parsed = self.parse_safe(obj)
        parsed.flags.extend(flags)
        return parsed

    def parse_safe(self, obj: dict) -> Parsed:
        """parse_obj for an object of any shape: a field of an unexpected type (a list where
        an id belongs, a string for a usage count) is flagged `bad_field` and left out, and
        an object the wrapper cannot read at all is kept as `invalid`, flagged `bad_shape`.
        The record's bytes are logged either way; the mirror never stops on them."""
        try:
            return checked(self.parse_obj(obj))
        except (TypeError, AttributeError, ValueError, KeyError, IndexError, RecursionError):
            return Parsed(kind="invalid", flags=["bad_shape"])

    def parse_obj(self, obj: dict) -> Parsed:
        raise NotImplementedError

    def conversation(self, records: list[Record]) -> list[Parsed]:
        """The parsed records that make up the main conversation, in order."""
        return [self.parse(r.raw) for r in records]

    def turn_state(self, records: list[Record]) -> TurnState:
        parsed = self.conversation(records)
        calls: dict[str, ToolCall] = {}
        answered: set[str] = set()
        for p in parsed:
            for call in p.tool_calls:
                calls.setdefault(call.id, call)
            answered.update(r.call_id for r in p.tool_results)
        dangling = [c for cid, c in calls.items() if cid not in answered]
        started = any(p.kind in ("user", "assistant", "tool_call") for p in parsed)
        return TurnState(self.is_complete(parsed) and not dangling, dangling, started,
                         last_opener(parsed))

    def is_complete(self, parsed: list[Parsed]) -> bool:
        raise NotImplementedError

    def limit_from(self, records: list[Record], now: float) -> Limit | None:
        """The provider's limit that ended the current turn (`records`, as the log has
        them), when the harness's own records say so and nothing came after it; `now`
        (epoch seconds) places a wall-clock reset time the harness printed. None: no
        limit, or a harness that waits a limit out by itself (see each wrapper)."""
        return None

    @staticmethod
    def last_rows(records: list[Record], kinds) -> dict | None:
        """The last record whose `type` is one of kinds, as an object (None if there is none)."""
        for record in reversed(records):
            obj, _ = load_json(record.raw)
            if isinstance(obj, dict) and obj.get("type") in kinds:
                return obj
        return None

    def subagent_calls(self, files: dict[str, bytes]) -> dict[str, str]:
        """Which tool call started each subagent source: {subagent relpath: call id}, read
        from the session's whole-file sources (relpath -> bytes). None by default."""
        return {}

    # launching and resuming (pure: argv in, argv out) --------------------------------------
    value_flags: frozenset[str] = frozenset()
    variadic_flags: frozenset[str] = frozenset()  # commander's `<values...>`: see parse_argv
    # the flags a session's argv may bring from another machine (travel.py): what shapes the
    # reply (model, output format, the headless switch), never what the harness may do
    travels: frozenset[str] = frozenset()
    command_words: frozenset[str] = frozenset()  # a first word that says how it runs (`exec`)
    # what the harness's flags let its model do without asking (grants.py): flag -> reader,
    # level -> the flags that grant it, and what it does with none (None: it asks)
    grant_table: dict = {}
    grant_flags: dict[str, tuple[str, ...]] = {}
    base_grant = None
    settings_level_flags: frozenset = frozenset()  # flags whose level wins: grants._sets_level
    settings_read_flags: frozenset = frozenset()  # flags whose grant settings_grant decides

    def settings_grant(self, env: dict, args: list[str], needed: bool = False) -> "Grant | None":
        """What the user's own settings of the harness, found from env and args as it finds
        them, let its model do (a value not known read as grants.granted reads a flag's);
        None: none that dh reads. A project's settings travel with its files: not read."""
        return None

    def is_headless(self, args: list[str]) -> bool:
        raise NotImplementedError

    def plan_launch(self, args: list[str], cwd: str, home: Path) -> LaunchPlan:
        raise NotImplementedError

    def id_from_output(self, line: bytes) -> str | None:
        """The harness's session id if this headless stdout line reveals it."""
        return None

    def resume_args(self, original: list[str], native_id: str, native_path: str | None,
                    prompt: str | None, headless: bool) -> list[str]:
        """Args that resume the session: the user's flags that still apply, the harness's
        own resume flags, and the continuation prompt (when given)."""
        raise NotImplementedError

    def interactive_resume(self, original: list[str], native_id: str, native_path: str | None,
                           prompt: str | None, records: list[Record], notes: bool = False) -> Relaunch:
        """The relaunch of a TUI killed mid-turn. `prompt` is dh's continuation prompt when
        the turn was cut (None when it was complete); `records` are the current turn's, as
        repaired; `notes` says the prompt carries word the model must get (a command or a
        file change no record holds), not only the continue text. By default the prompt
        rides in argv, the way each TUI takes a first message (a positional word, or a
        flag), so the turn goes on with no keystroke."""
        argv = self.resume_args(original, native_id, native_path, prompt, False)
        return Relaunch(argv, continues="prompt" if prompt else "none")

    def fork_args(self, original: list[str], native_id: str, native_path: str | None,
                  prompt: str | None, headless: bool) -> list[str] | None:
        """Args that start a NEW native session holding a copy of this one's conversation,
        by the harness's own means, this one left as it is (`dh resume S --world local` of a
        session that went on in a world: resume/fork.py). None: dh knows no such means for
        this harness, and refuses the fork."""
        return None

    def fork_copy(self, native_path: str | None, home: Path, cwd: str) -> Path | None:
        """For a harness whose own fork cannot be told where to write: the session's native
        file copied under a new id, the way the harness's fork writes it; the new file (dh
        then resumes it), or None when the harness forks through fork_args instead."""
        return None

    def restart_unstarted(self, original: list[str], native_id: str | None,
                          native_path: str | None) -> Relaunch | None:
        """The relaunch of a TUI killed before its native state held any conversation (no
        file yet, or only the harness's start-up rows). None: dh relaunches the original
        command as it was (the default)."""
        return None

    def with_note(self, args: list[str], note: str) -> list[str] | None:
        """args with dh's note after the first prompt they carry: the relaunch of a session
        whose harness recorded nothing yet sends that prompt again, and the model must hear
        what dh saw happen meanwhile. None: dh knows no place for it in this harness's args
        (or there is no prompt), and only the user is told."""
        return None

    # the harness's own processes ---------------------------------------------------------
    def harness_part(self, command: str, home: Path) -> bool:
        """True for a process of the harness itself that runs apart from it (own session,
        no tty), so dh never takes it for a tool command: dh ends it with the harness, after
        the tool commands it runs had their grace. None by default."""
        return False

    def tool_command(self, argv: list[str]) -> str:
        """A tool process's command as the user would name it, from its argv: the whole
        command line unless the harness wraps the user's command in set-up of its own."""
        return " ".join(argv)

    document_tools: frozenset[str] = frozenset()  # the tools whose calls document_edit reads

    def document_edit(self, call: ToolCall, result):
        """The document edit (dh_cli/documents) a tool call made, given its result; None for
        a call that edits none (see wrappers/documents.py)."""
        return None

    def write_documents(self, home: Path, native_id: str, document) -> list[str]:
        """Put documents back where the harness keeps them outside its session files (when
        missing); what was written. `document(kind)` replays one from the log (costly: call
        it only when something is missing). Most harnesses keep them in the session."""
        return []

    def repair_lines(self, records: list[Record], call: ToolCall, text: str) -> list[bytes]:
        """Native records that close a dangling tool call with `text` as an error result,
        in the harness's own format, for the JSONL store to append to the session file."""
        raise NotImplementedError
