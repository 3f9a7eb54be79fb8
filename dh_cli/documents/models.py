"""The document types (pydantic, so `--json` output and the wrappers' edits are validated)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["todos", "plan", "tasks"]
Op = Literal["replace", "create", "update"]


class Item(BaseModel):
    """One entry of a todo list, plan or task list, in the harness's own terms."""

    model_config = ConfigDict(extra="forbid")
    id: Optional[str] = None
    content: str  # Claude/OpenCode todo content, a Codex plan step, a Claude task subject
    status: str = "pending"
    active_form: Optional[str] = None
    priority: Optional[str] = None  # OpenCode
    description: Optional[str] = None  # Claude tasks
    blocks: list[str] = Field(default_factory=list)
    blocked_by: list[str] = Field(default_factory=list)


class Edit(BaseModel):
    """One change to a document, as a wrapper reads it from a tool call and its result."""

    model_config = ConfigDict(extra="forbid")
    kind: Kind
    op: Op
    tool: str
    call_id: str
    items: list[Item] = Field(default_factory=list)  # replace: the new list; create: the new item
    item_id: Optional[str] = None  # update: which item
    changes: dict = Field(default_factory=dict)  # update: field -> new value
    explanation: Optional[str] = None
    accepted: bool = True  # False: the harness refused the call (nothing changed)
    why: Optional[str] = None  # the harness's refusal


class RecordRef(BaseModel):
    """Where in the log the edit's result is: source, generation, byte offset."""

    source: str
    generation: int
    offset: int
    ts: Optional[int] = None


class HistoryEntry(BaseModel):
    edit: Edit
    record: RecordRef


class Document(BaseModel):
    kind: Kind
    items: list[Item] = Field(default_factory=list)
    explanation: Optional[str] = None
    history: list[HistoryEntry] = Field(default_factory=list)
