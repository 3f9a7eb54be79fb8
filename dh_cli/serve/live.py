"""`dh serve`'s server-sent events, read from the log alone (as `dh log show --follow` is):

- the list's stream says `changed` whenever the log's stamp moves (a session, a record or an
  event added, a session's row changed); the page then fetches its rows again;
- a session's stream sends each record committed after the cursor (`record`, a short masked
  summary) and each new journal event (`mark`: launch, exit, crash, repair, resume,
  takeover …), then `changed` so the page redraws its trace. Every message's id is the
  cursor after it, `RECORD.SEQ` (the log's record id, the session's event seq): a browser
  that lost the connection reconnects with `Last-Event-ID` and gets what it missed from the
  log, nothing twice. A catch-up reads BATCH records at a time (flat memory).

A stream ends by itself after `lifetime` seconds (the browser reconnects at once, from its
cursor), so a server never holds a connection that nobody reads."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import AsyncIterator

from anyio import sleep, to_thread

from . import reads

POLL = 0.5  # seconds between looks at the log when nothing is new
RETRY_MS = 1000  # what the browser waits before it reconnects


async def list_changes(log: Path, lifetime: float) -> AsyncIterator[dict]:
    world = await to_thread.run_sync(reads.open_log, log)
    try:
        last, ends = None, time.monotonic() + lifetime
        yield {"event": "hello", "data": "", "retry": RETRY_MS}
        while time.monotonic() < ends:
            stamp = await to_thread.run_sync(world.change_stamp)
            if last is not None and stamp != last:
                yield {"event": "changed", "data": json.dumps(list(stamp))}
            last = stamp
            await sleep(POLL * 2)
    finally:
        world.close()


async def session_news(log: Path, session_id: str, cursor: tuple[int, int],
                       lifetime: float) -> AsyncIterator[dict]:
    world = await to_thread.run_sync(reads.open_log, log)
    try:
        record, seq = cursor
        ends = time.monotonic() + lifetime
        yield {"event": "hello", "data": f"{record}.{seq}", "retry": RETRY_MS}
        while time.monotonic() < ends:
            records, events, read_to = await to_thread.run_sync(reads.news, world, session_id, record, seq)
            for found in records:
                yield {"event": "record", "id": f"{found['id']}.{seq}", "data": json.dumps(found)}
            record = read_to
            for event in events:
                seq = event["seq"]
                yield {"event": "mark", "id": f"{record}.{seq}", "data": json.dumps(event)}
            if records or events:
                yield {"event": "changed", "id": f"{record}.{seq}", "data": ""}
            if len(records) < reads.BATCH:
                await sleep(POLL)
    finally:
        world.close()
