"""The Redis world (Valkey too: same protocol): the team world on a Redis server, through
redis-py. Same logical content as the PostgreSQL world, laid out as Redis structures
(redis_scripts.py lists the keys): a source's records are a sorted set of their keys, scored
by position (generation * 2^40 + offset: exact in a double for offsets below 1 TiB and 8192
generations), beside a hash of the rows, so reads from a position are ranges and every append
is idempotent on the natural key (HSETNX).

Every write to a session and every lease change is a Lua script, atomic on the server; the
fence is checked there, so a stale holder's write is refused by the server whatever the
client does. Run the server with AOF on (`appendonly yes`): without it a restart loses what
the last snapshot did not hold, leases included.

Every redis-py error leaves this module as a WorldError of one sentence, the URL's password
masked (urls.py)."""

from __future__ import annotations

import uuid
import threading
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator

import orjson
import redis

from ..config import url_variables
from ..errors import DamagedRow, SessionLocked, SessionNotFound, WorldError
from ..models import Event, Record, Session, Source
from ..worlds.base import CHUNK, Mark, Position, SessionMarks, group_marks
from ..worlds.local_places import check_ref
from ..worlds.rows import SESSION_COLUMNS, SOURCE_COLUMNS, decode_raw, stored_rows
from .redis_leases import RedisLeases, _text
from .protocol import FENCED, fenced_error, only_match
from .world_rows import (damaged, event_seqs, events_of, in_order, object_row, position, read_row,
                         session_of, snapshot_rows, source_of)
from .redis_scripts import SCRIPTS
from .urls import from_flag_or_env, scrub

URL_VARIABLES = url_variables("redis")
VERSION = 1  # the layout of redis_scripts.py's keys; a newer one is refused, as a newer schema
SPAN = 1 << 40  # positions: generation * SPAN + offset
BATCH = 1000  # records per append script: Redis runs one script at a time, keep each short
# How long a read waits for the server once it answered: a busy server (another client's
# script, a fork for its snapshot) may stay silent for seconds; longer is a lost connection.
# Not for the first reply: answers() reads that with the connect timeout.
OP_TIMEOUT_S = 30
LOCK_MS = 30_000  # a session lock lives this long unless its holder renews it (every third)


def _score(position: Position) -> int:
    return position[0] * SPAN + position[1]


def _key(generation: int, offset: int) -> bytes:
    return b"%d:%d" % (generation, offset)


def resolve_url(url: str | None) -> str:
    """--url, else DH_REDIS_URL; valkey:// is redis:// (the same protocol)."""
    found = from_flag_or_env(url, URL_VARIABLES, "Redis")
    for scheme, same in (("valkey://", "redis://"), ("valkeys://", "rediss://")):
        if found.startswith(scheme):
            return same + found[len(scheme):]
    return found


def answers(url: str, timeout: float) -> None:
    """PING on a connection of its own whose every read waits `timeout` (the connect
    timeout: 5 s for `dh run`, 10 s for the world commands), so a listener that accepts and
    never answers fails as fast as one that refuses. The client's own connection reads with
    OP_TIMEOUT_S, and redis-py sets that on the socket before its handshake."""
    probe = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        probe.ping()
    finally:
        probe.close()


class RedisWorld(RedisLeases):
    name = "redis"
    url: str
    shown: str  # the URL with its password masked
    url_variable = URL_VARIABLES[0]
    resolve_url = staticmethod(resolve_url)

    def __init__(self, url: str | None = None, migrate: bool = True, connect_timeout: int = 10):
        self.url = resolve_url(url)
        self.shown = scrub(self.url, self.url)
        self._fence = ""  # "SESSION:EPOCH" this connection's writes carry (fence())
        with self._errors(connecting=True):
            answers(self.url, connect_timeout)
            self.client = redis.Redis.from_url(self.url, socket_connect_timeout=connect_timeout,
                                               socket_timeout=OP_TIMEOUT_S, socket_keepalive=True)
        self._scripts = {name: self.client.register_script(text) for name, text in SCRIPTS.items()}
        if migrate:
            self.migrate()

    # errors -------------------------------------------------------------------------------
    def _reason(self, exc: BaseException) -> str:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return scrub(lines[0] if lines else type(exc).__name__, self.url)

    @contextmanager
    def _errors(self, connecting: bool = False):
        try:
            yield
        except redis.RedisError as exc:
            raise self._world_error(exc, connecting) from None
        except ValueError as exc:  # from_url on a URL it cannot read
            if not connecting:
                raise
            raise WorldError(f"the Redis URL {self.shown} is not valid: {self._reason(exc)}",
                             hint="use redis://[:PASSWORD@]HOST:PORT[/DB]") from None

    def _world_error(self, exc: BaseException, connecting: bool) -> WorldError:
        reason = self._reason(exc)
        if reason.startswith(f"{FENCED} "):
            return fenced_error(WorldError(f"Redis at {self.shown} refused the write: {reason[len(FENCED) + 1:]}"))
        if isinstance(exc, redis.AuthenticationError) or "NOAUTH" in reason or "WRONGPASS" in reason:
            return WorldError(f"Redis at {self.shown} refused the login: {reason}",
                              hint="check the password in the URL")
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            if connecting:
                return WorldError(f"cannot connect to Redis at {self.shown}: {reason}",
                                  hint="check that the server is running and the URL's host and port")
            return WorldError(f"lost the connection to Redis at {self.shown}: {reason}",
                              hint="run the command again once the server is back: it resumes where it stopped")
        return WorldError(f"Redis error at {self.shown}: {reason}")

    def _script(self, name: str, *args):
        with self._errors():
            return self._scripts[name](args=list(args))

    def _call(self, method: str, *args):
        with self._errors():
            return getattr(self.client, method)(*args)

    def close(self) -> None:
        self.client.close()

    # schema and settings ------------------------------------------------------------------
    def migrate(self) -> None:
        self._call("set", "dh:version", VERSION, None, None, True)  # NX: only where unset
        found = int(self._call("get", "dh:version"))
        if found > VERSION:
            raise WorldError(f"the Redis world at {self.shown} was written by a newer dh "
                             f"(layout {found})", hint="upgrade dh on this machine")

    @property
    def masks_records(self) -> bool:
        return self._call("hget", "dh:settings", "records") != b"raw"

    def set_records_mode(self, mode: str) -> None:
        self._call("hset", "dh:settings", "records", mode)

    # sessions -----------------------------------------------------------------------------
    def put_session(self, session: Session) -> str | None:
        row = orjson.dumps([getattr(session, c) for c in SESSION_COLUMNS])
        done = self._script("PUT_SESSION", self._fence, session.id, session.updated_at, row)
        return _text(done) if done else None

    def _fatal_row(self, session_id: str) -> tuple[bytes | str, str]:
        """The session's row as a claim past the takeover budget writes it (redis_scripts
        CLAIM), with its updated_at; ('', '') when the world has no such session."""
        from ..util import now_iso

        value = self._call("hget", "dh:sessions", session_id)
        if value is None:
            return "", ""
        fatal = replace(session_of(value), state="fatal", updated_at=now_iso())
        return orjson.dumps([getattr(fatal, c) for c in SESSION_COLUMNS]), fatal.updated_at

    def get_session(self, session_id: str) -> Session:
        value = self._call("hget", "dh:sessions", session_id)
        if value is None:
            raise SessionNotFound(f"no session {session_id!r} in the Redis world")
        return session_of(value, session_id)

    def find_session(self, ref: str) -> Session:
        """A dh id, a unique prefix of one, or the harness's own session id."""
        check_ref(ref)
        every = self.sessions()
        matches = ([s for s in every if ref in (s.id, s.harness_session_id)]
                   or [s for s in every if s.id.startswith(ref)
                       or (s.harness_session_id or "").startswith(ref)])
        return only_match(matches, ref, "Redis", self.name)

    def sessions(self, harness: str | None = None) -> list[Session]:
        every = [s if isinstance(s, Session) else damaged(sid)
                 for sid, s in in_order(self._call("hgetall", "dh:sessions").items())]
        return [s for s in every if harness is None or s.harness == harness]

    # sources ------------------------------------------------------------------------------
    def get_source(self, session_id: str, relpath: str) -> Source | None:
        with self._errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.hget(f"dh:source_ids:{session_id}", relpath)
            pipe.hget(f"dh:sources:{session_id}", relpath)
            found, value = pipe.execute()
        return source_of(found, value, relpath) if found else None

    def put_source(self, source: Source, update: bool = False) -> Source:
        row = orjson.dumps([getattr(source, c) for c in SOURCE_COLUMNS[1:]])
        self._script("PUT_SOURCE", self._fence, source.session_id, source.relpath, row, int(update))
        return self.get_source(source.session_id, source.relpath)

    def sources(self, session_id: str) -> list[Source]:
        with self._errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(f"dh:source_ids:{session_id}")
            pipe.hgetall(f"dh:sources:{session_id}")
            ids, rows = pipe.execute()
        return sorted((source_of(ids[rel], rows.get(rel), _text(rel)) for rel in ids), key=lambda s: s.id)

    # records ------------------------------------------------------------------------------
    def append_rows(self, rows: list[tuple]) -> int:
        added = 0
        for start in range(0, len(rows), BATCH):
            part = rows[start:start + BATCH]
            for source_id in dict.fromkeys(r[0] for r in part):
                args = []
                for row in (r for r in part if r[0] == source_id):
                    args += [_key(row[1], row[2]), _score((row[1], row[2])),
                             orjson.dumps(list(row[4:])) + b"\n" + bytes(row[3])]
                added += self._script("APPEND_RECORDS", self._fence, source_id, *args)
        return added

    def append_records(self, source: Source, records: list[Record]) -> int:
        return self.append_rows(stored_rows(source, records))

    def read_rows(self, source: Source, after: Position | None = None,
                  upto: Position | None = None, as_source_id: int | None = None,
                  chunk: int = CHUNK) -> Iterator[list[tuple]]:
        """Stored rows of a source in order, `as_source_id` in their source_id column, read a
        page of keys at a time from the sorted set."""
        low = f"({_score(after)}" if after is not None else "-inf"
        high = _score(upto) if upto is not None else "+inf"
        sid = source.id if as_source_id is None else as_source_id
        while True:
            keys = self._call("zrangebyscore", f"dh:rk:{source.id}", low, high, 0, chunk, True)
            if not keys:
                return
            values = self._call("hmget", f"dh:rd:{source.id}", [k for k, _ in keys])
            yield [read_row(sid, k, v) for (k, _), v in zip(keys, values)]
            low = f"({int(keys[-1][1])}"

    def read_records(self, session_id: str, relpath: str, after: Position | None = None,
                     limit: int | None = None) -> list[Record]:
        source = self.get_source(session_id, relpath)
        if source is None:
            return []
        out = []
        for rows in self.read_rows(source, after, chunk=limit or CHUNK):
            out += [replace(Record(*row), raw=decode_raw(row[3], row[4])) for row in rows]
            if limit is not None:
                break
        return out

    def count_upto(self, source: Source, last: Position) -> int:
        return self._call("zcount", f"dh:rk:{source.id}", "-inf", _score(last))

    # events -------------------------------------------------------------------------------
    def append_events(self, events: list[Event]) -> int:
        added = 0
        for sid in dict.fromkeys(e.session_id for e in events):
            args = []
            for e in (e for e in events if e.session_id == sid):
                args += [e.seq, orjson.dumps([e.session_id, e.seq, e.at, e.attempt, e.type,
                                              e.phase, e.details], option=orjson.OPT_SORT_KEYS)]
            added += self._script("APPEND_EVENTS", self._fence, sid, *args)
        return added

    def events(self, session_id: str, after_seq: int = 0) -> list[Event]:
        return events_of(self._call("hvals", f"dh:events:{session_id}"), after_seq)

    # marks and locks ----------------------------------------------------------------------
    def marks(self, session_id: str | None = None) -> dict[str, SessionMarks]:
        if session_id is None:
            found = self._call("hgetall", "dh:sessions").items()
        else:
            value = self._call("hget", "dh:sessions", session_id)
            found = [(session_id, value)] if value else []
        out: dict[str, SessionMarks] = {}
        for sid, session in in_order(found):
            out.update(self._marks_of(sid, session))
        return out

    def _marks_of(self, sid: str, session: Session | DamagedRow) -> dict[str, SessionMarks]:
        """The session's marks; a damaged session's (its row, a source, a key) are its id and
        why alone, so a copy reaches it and fails it by name, not every session after it, and
        status shows it as damaged."""
        why = session if isinstance(session, DamagedRow) else None
        if why is None:
            try:
                return group_marks(self._mark_rows(session))
            except DamagedRow as exc:
                why = exc
        return {sid: SessionMarks(sid, "", "", damaged=str(why))}

    def _mark_rows(self, session: Session) -> list[tuple]:
        sources = self.sources(session.id)
        with self._errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.hkeys(f"dh:events:{session.id}")
            for source in sources:
                pipe.zcard(f"dh:rk:{source.id}")
                pipe.zrange(f"dh:rk:{source.id}", -1, -1)
            got = pipe.execute()
        last_seq = max(event_seqs(got[0]), default=None)
        head = (session.id, session.harness, session.updated_at)
        if not sources:
            return [(*head, None, None, None, None, last_seq)]
        out = []
        for n, source in enumerate(sources):
            count, tip = got[1 + 2 * n], got[2 + 2 * n]
            generation, offset = position(tip[0]) if tip else (None, None)
            out.append((*head, source.relpath, count, generation, offset, last_seq))
        return out

    def high_water(self, session_id: str) -> dict[str, Mark]:
        found = self.marks(session_id).get(session_id)
        return found.sources if found else {}

    def lock_session(self, session_id: str) -> "RedisSessionLock":
        """An exclusive, non-blocking lock on the session across every machine using this
        server (raises SessionLocked). It expires LOCK_MS after its holder stops renewing it,
        so it ends with the process that holds it, a little later than PostgreSQL's does."""
        return RedisSessionLock(self, session_id).acquire()

    # workspace objects and snapshots ----------------------------------------------------
    def ws_known(self, hashes: list[str]) -> set[str]:
        if not hashes:
            return set()
        found = self._call("hmget", "dh:ws_objects", hashes)
        return {h for h, v in zip(hashes, found) if v is not None}

    def ws_put(self, objects: list[tuple], snapshots: list[tuple]) -> int:
        with self._errors():
            pipe = self.client.pipeline(transaction=True)
            for digest, kind, size, codec, data in objects:
                pipe.hsetnx("dh:ws_objects", digest, orjson.dumps([kind, size, codec]) + b"\n" + bytes(data))
            for row in snapshots:
                pipe.hsetnx(f"dh:ws_snapshots:{row[0]}", row[1], orjson.dumps(list(row)))
            done = pipe.execute()
        return sum(done[:len(objects)])

    def ws_snapshot_rows(self, session_id: str, after_seq: int = 0) -> list[tuple]:
        return snapshot_rows(self._call("hvals", f"dh:ws_snapshots:{session_id}"), after_seq)

    def ws_object_rows(self, hashes: list[str]) -> list[tuple]:
        if not hashes:
            return []
        found = zip(hashes, self._call("hmget", "dh:ws_objects", hashes))
        return [object_row(digest, value) for digest, value in found if value is not None]


class RedisSessionLock:
    def __init__(self, world: RedisWorld, session_id: str):
        self.world, self.session_id = world, session_id
        self.key, self.token = f"dh:lock:{session_id}", uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> "RedisSessionLock":
        if not self.world._call("set", self.key, self.token, None, LOCK_MS, True):
            raise SessionLocked(f"session {self.session_id} is in use by another dh"
                                f" (locked in the Redis world at {self.world.shown})",
                                hint="wait for that dh to finish, or stop it")
        self._thread = threading.Thread(target=self._renew, name="dh-redis-lock", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(LOCK_MS / 3000):
            try:
                self.world._script("LOCK_RENEW", self.key, self.token, LOCK_MS)
            except WorldError:
                pass  # the server is away: the lock expires on its own

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            self.world._script("LOCK_RELEASE", self.key, self.token)

    def __enter__(self) -> "RedisSessionLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()
