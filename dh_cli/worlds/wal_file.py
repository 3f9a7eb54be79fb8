"""The log's WAL file as SQLite lays it out (sqlite.org/fileformat.html, "WAL file format"),
read for one thing: where its last committed frame ends.

A write the full disk refused leaves its frames in the WAL after the last commit. SQLite
ignores them, but they keep their bytes until a checkpoint folds the WAL into the database
and cuts it, and that checkpoint needs room in the database file for the earlier commits it
folds in: room the refused write took. Cutting the WAL after its last commit frame gives that
room back without touching anything committed."""

from __future__ import annotations

import os

HEADER = 32  # the WAL header: magic, version, page size, checkpoint sequence, salts, checksum
FRAME_HEADER = 24  # page number, database size after a commit (0 otherwise), salts, checksum
MAGIC = (0x377F0682, 0x377F0683)


def committed_end(path: str) -> int | None:
    """Bytes of the WAL at `path` up to the end of its last commit frame of the current
    generation (frames whose salts match the header's); None when it is no WAL dh can read."""
    try:
        with open(path, "rb") as wal:
            head = wal.read(HEADER)
            if len(head) < HEADER or int.from_bytes(head[:4], "big") not in MAGIC:
                return None
            page = int.from_bytes(head[8:12], "big")
            salts, frame = head[16:24], FRAME_HEADER + page
            end, offset, size = HEADER, HEADER, os.fstat(wal.fileno()).st_size
            while offset + FRAME_HEADER <= size:
                wal.seek(offset)
                header = wal.read(FRAME_HEADER)
                if header[8:16] != salts:
                    break  # a frame of an earlier generation: nothing after it is current
                offset += frame
                if int.from_bytes(header[4:8], "big"):  # a commit frame
                    end = offset
            return end
    except OSError:
        return None


def cut_after_last_commit(path: str) -> bool:
    """Cut the WAL after its last commit frame (the caller holds the log's write lock, so no
    frame is being added meanwhile); True when bytes were given back."""
    end = committed_end(path)
    try:
        if end is None or os.path.getsize(path) <= end:
            return False
        os.truncate(path, end)
    except OSError:
        return False
    return True
