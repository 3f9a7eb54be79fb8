"""Plain data passed between the library layers. Library functions return these, never
formatted text; the CLI decides how they look."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Session:
    id: str
    harness: str
    harness_session_id: str | None = None
    harness_version: str | None = None
    cwd: str | None = None
    home: str | None = None
    native_path: str | None = None
    project_key: str | None = None
    argv: str | None = None
    host: str | None = None
    state: str = "new"
    attempts: int = 0
    created_at: str = ""
    updated_at: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Source:
    id: int
    session_id: str
    kind: str  # "jsonl" | "file" | "opencode"
    relpath: str  # relative to the harness home: where a rebuild puts it
    path: str | None = None  # absolute path on the machine that mirrored it
    generation: int = 0
    offset: int = 0
    size: int = 0
    inode: int | None = None
    head_hash: str | None = None
    tail_hash: str | None = None
    pending: int = 0  # bytes of a torn last line waiting for its newline
    status: str = "live"  # live | deleted | unreadable
    updated_at: str = ""


@dataclass
class ToolCall:
    id: str
    name: str
    input: object = None


@dataclass
class ToolResult:
    call_id: str
    is_error: bool = False
    text: str = ""


@dataclass(slots=True)
class Parsed:
    """One native record read by a wrapper: its kind and the facts dh queries on."""

    kind: str = "other"  # user|assistant|tool_call|tool_result|meta|compaction|other|invalid
    native_id: str | None = None
    parent_id: str | None = None
    role: str | None = None
    model: str | None = None
    msg_id: str | None = None
    stop_reason: str | None = None
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    usage: dict | None = None  # tokens.KINDS -> count (tokens.counts())
    ts: str | None = None
    synthetic: bool = False  # written by a harness's own resume path, not a real turn
    turn_end: bool = False  # this record marks the end of a turn (e.g. Codex task_complete)
    turn_start: bool = False  # this record opens a turn (a user prompt, Codex task_started)
    flags: list[str] = field(default_factory=list)


@dataclass
class Record:
    source_id: int
    generation: int
    offset: int
    raw: bytes  # always the plain native bytes in memory; the world encodes them on disk
    codec: int | None = None
    kind: str | None = None
    native_id: str | None = None
    parent_id: str | None = None
    role: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    model: str | None = None
    msg_id: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cache_read: int | None = None
    tokens_cache_write: int | None = None
    ts: int | None = None  # epoch milliseconds
    flags: str | None = None
    status: str | None = None  # a tool result's outcome: "ok" or "error"
    turn_start: int | None = None  # 1 on the record that opens a turn (the wrapper says which)
    tokens_cache_write_1h: int | None = None  # tokens.py: the one vocabulary of token kinds
    tokens_reasoning: int | None = None
    tool_input: str | None = None  # the first tool call's input, as JSON
    tool_output: str | None = None  # the opening of the first tool result's text


@dataclass
class Event:
    session_id: str
    seq: int
    at: str
    attempt: int | None
    type: str
    phase: str | None
    details: dict
