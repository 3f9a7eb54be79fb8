"""The OpenCode store: every session lives in one SQLite database shared by all sessions
(`opencode.db`), and dh logs each version of each row of the session as one record (see
wrappers/opencode_rows.py). A source's offsets count row versions, not bytes; the current
state is the latest version of each row. dh never writes the database wholesale: a lost session goes
back through `opencode import` (opencode_restore), and a cut tool call is closed in its
`part` row while no OpenCode runs (wrappers/opencode_db.py set_tool_error)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from ..pathrule import check_native_id
from ..models import Parsed, Record, Session, Source
from .files import RebuiltFile, safe_target, write_file
from ..wrappers.opencode_rows import row_key


class OpenCodeStore:
    name = "opencode"
    kinds = frozenset({"opencode"})
    session_files = False  # one database for all sessions: the home is that database
    offsets_are_bytes = False  # offsets count row versions

    # mirroring ---------------------------------------------------------------------------
    def tailer(self, world, wrapper, source: Source, native_id: str | None):
        from .opencode_tail import OpenCodeTailer

        return OpenCodeTailer(world, wrapper, source, native_id)

    def warm(self) -> None:
        from .opencode_tail import OpenCodeTailer  # noqa: F401

    def conversation(self, world, session_id: str, source: Source, wrapper,
                     clip: int | None = None) -> Iterator[Parsed]:
        """The latest version of each row: the store is small. Not clipped: a part's text
        is a JSON string inside the row's `data`, which a cut would break."""
        return iter(wrapper.conversation(list(world.records(session_id, source.id))))

    # turns -------------------------------------------------------------------------------
    def last_turn(self, world, session_id: str, source: Source,
                  clip: int | None = None) -> list[Record]:
        return list(world.records(session_id, source.id))

    def current_turn(self, world, session: Session, source: Source) -> list[Record]:
        """Rows are versions of a whole session, so they are all read."""
        return list(world.records(session.id, source.id))

    # repairing a cut tool call -----------------------------------------------------------
    def repair(self, world, wrapper, session: Session, source: Source, call, text: str,
               records: list[Record]) -> bool:
        from ..wrappers.opencode_db import set_tool_error

        return set_tool_error(Path(source.path), session.harness_session_id, call.id, text)  # confined

    # restoring and rebuilding ------------------------------------------------------------
    def restore(self, world, wrapper, session: Session, source: Source, harness) -> dict | None:
        """A session missing from the (confined) database — lost, or a new machine — goes
        back through `opencode import` of the export built from the log, run with
        `harness()` = (binary argv, environment). A session still there gets the log a
        killed OpenCode left checkpointed (settle_database)."""
        from .opencode_restore import restore_opencode, session_in_db, settle_database

        db = Path(source.path)
        if session_in_db(db, session.harness_session_id):
            settle_database(db)
            return None
        size = restore_opencode(world, session, source, *harness())
        return None if size is None else {"path": source.relpath, "bytes": size, "via": "opencode import"}

    def bring_back(self, world, wrapper, session: Session, source: Source, harness,
                   force: bool, dry_run: bool) -> dict:
        """Through OpenCode's own `opencode import`, as the resume path does; rows still
        there are never touched."""
        from .opencode_restore import restore_opencode, session_in_db

        if session_in_db(Path(source.path), session.harness_session_id):
            return {"path": source.relpath, "status": "present"}
        if dry_run:
            return {"path": source.relpath, "status": "would restore", "via": "opencode import"}
        size = restore_opencode(world, session, source, *harness())
        return {"path": source.relpath, "status": "restored" if size else "present",
                "bytes": size, "via": "opencode import"}

    def rebuild(self, world, wrapper, session: Session, source: Source, home: Path,
                to_dir: Path | None, force: bool) -> RebuiltFile:
        """The session as `opencode export` prints it, beside the database (or in to_dir)."""
        from .opencode_export import build_export

        root = Path(to_dir) if to_dir else home.parent
        target = export_path(root, session, wrapper)  # checked before anything is built
        export = build_export(list(world.records(session.id, source.id)), session.harness_session_id)
        return write_file(target, (json.dumps(export, indent=2, ensure_ascii=False) + "\n").encode(), force)

    # moving to another checkout ------------------------------------------------------------
    def rewritten(self, world, session: Session, source: Source, rewrite) -> tuple[list[Record], int]:
        """A new version of every row whose latest version `rewrite` changes, appended after
        the source's last version (its rows are versions, not lines)."""
        latest: dict[str, Record] = {}
        last = -1
        for record in world.records(session.id, source.id):
            last = max(last, record.offset)
            try:
                latest[row_key(json.loads(record.raw))] = record
            except (ValueError, AttributeError):
                continue
        out, offset = [], max(source.offset, last + 1)
        for record in latest.values():
            raw = rewrite(record.raw)
            if raw != record.raw:
                out.append(replace(record, offset=offset, raw=raw, codec=None))
                offset += 1
        return out, len(out)

    def advance(self, source: Source, records: list[Record]) -> None:
        source.offset = records[-1].offset + 1


def export_path(root: Path, session: Session, wrapper=None) -> Path:
    native_id = check_native_id(wrapper, session.harness_session_id) if wrapper else session.harness_session_id
    return safe_target(root, f"opencode-export-{native_id}.json")
