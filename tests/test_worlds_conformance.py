"""One suite, every world: the local SQLite log, PostgreSQL and Redis must behave the same
through the World interface (idempotent appends on natural keys, ordered reads from a
position, session listing, locking, high-water marks), and the team worlds the same through
TeamWorld (acquire, renew, expire, steal, fence a paused holder, claim exactly once under
two workers, replicate after an outage), each against a real server."""

import threading
import time
from dataclasses import replace

import pytest

from dh_cli.errors import SessionLocked, SessionNotFound, WorldError
from dh_cli.models import Event, Record, Session, Source
from dh_cli.worlds.base import Mark
from dh_cli.worlds.local import LZ4
from dh_cli.worlds.rows import PACK_MIN

from .helpers.team_worlds import TEAM_WORLDS, team, team_at  # noqa: F401  (team: a fixture)
from .helpers.team_worlds import pg_url, redis_url  # noqa: F401  (fixtures)


@pytest.fixture(params=["local", *TEAM_WORLDS])
def world(request, tmp_path):
    if request.param == "local":
        from dh_cli.worlds.local import LocalWorld

        made = LocalWorld(tmp_path / "world.db")
        yield made
        made.close()
        return
    with team_at(request.param) as under_test:
        made = under_test.open()
        yield made
        made.close()


def session(sid="1abc00000000aa", updated="2026-01-01T00:00:00.000Z", **values) -> Session:
    return Session(id=sid, harness=values.pop("harness", "claude-code"), cwd="/w",
                   created_at=values.pop("created", "2026-01-01T00:00:00.000Z"),
                   updated_at=updated, **values)


def source(world, sid="1abc00000000aa", relpath="projects/p/s.jsonl") -> Source:
    return world.put_source(Source(id=0, session_id=sid, kind="jsonl", relpath=relpath,
                                   path="/home/u/.claude/" + relpath))


def records(positions, big_every: int = 0) -> list[Record]:
    out = []
    for n, (generation, offset) in enumerate(positions):
        raw = b'{"n":%d,"pad":"%s"}\n' % (n, b"x" * (PACK_MIN if big_every and n % big_every == 0 else 10))
        out.append(Record(0, generation, offset, raw, kind="user", native_id=f"id-{n}",
                          tokens_in=n, ts=1_790_000_000_000 + n))
    return out


def test_put_session_is_idempotent_and_keeps_the_newest(world):
    assert world.put_session(session()) == "added"
    assert world.put_session(session()) is None
    assert world.put_session(session(updated="2026-01-02T00:00:00.000Z", state="crashed")) == "updated"
    assert world.put_session(session(updated="2025-12-31T00:00:00.000Z", state="old")) is None
    assert world.get_session("1abc00000000aa").state == "crashed"
    with pytest.raises(SessionNotFound):
        world.get_session("nope")


def test_sessions_are_listed_in_creation_order_and_found_by_prefix(world):
    world.put_session(session("1abc00000000bb", created="2026-01-02T00:00:00.000Z", harness="pi"))
    world.put_session(session("1abc00000000aa", harness_session_id="native-1"))
    assert [s.id for s in world.sessions()] == ["1abc00000000aa", "1abc00000000bb"]
    assert [s.id for s in world.sessions("pi")] == ["1abc00000000bb"]
    assert world.find_session("1abc00000000b").id == "1abc00000000bb"
    assert world.find_session("native-1").id == "1abc00000000aa"


def test_put_source_is_idempotent_and_updates_progress_only_when_asked(world):
    world.put_session(session())
    first = source(world)
    assert source(world).id == first.id
    assert [s.relpath for s in world.sources("1abc00000000aa")] == ["projects/p/s.jsonl"]
    moved = replace(first, generation=2, offset=99, head_hash="h", updated_at="2026-02-01")
    assert world.put_source(moved).offset == 0
    updated = world.put_source(moved, update=True)
    assert (updated.id, updated.generation, updated.offset, updated.head_hash) == (first.id, 2, 99, "h")


def test_appending_records_is_idempotent_on_the_natural_key(world):
    world.put_session(session())
    src = source(world)
    batch = records([(0, n * 100) for n in range(10)], big_every=3)
    assert world.append_records(src, batch) == 10
    assert world.append_records(src, batch) == 0
    overlap = records([(0, n * 100) for n in range(5, 15)], big_every=3)
    assert world.append_records(src, overlap) == 5
    assert world.high_water("1abc00000000aa") == {src.relpath: Mark(15, (0, 1400))}


def test_reads_are_ordered_from_a_position_and_byte_exact(world):
    world.put_session(session())
    src = source(world)
    positions = [(1, 0), (0, 200), (1, 50), (0, 0), (0, 100)]  # appended out of order
    world.append_records(src, records(positions, big_every=2))
    got = world.read_records("1abc00000000aa", src.relpath)
    assert [(r.generation, r.offset) for r in got] == sorted(positions)
    expected = {p: r.raw for p, r in zip(positions, records(positions, big_every=2))}
    assert all(r.raw == expected[(r.generation, r.offset)] for r in got)
    after = world.read_records("1abc00000000aa", src.relpath, after=(0, 100))
    assert [(r.generation, r.offset) for r in after] == [(0, 200), (1, 0), (1, 50)]
    assert len(world.read_records("1abc00000000aa", src.relpath, after=(0, 0), limit=2)) == 2
    assert world.read_records("1abc00000000aa", "no/such/file") == []


def test_stored_rows_travel_as_stored(world):
    world.put_session(session())
    src = source(world)
    world.append_records(src, records([(0, 0), (0, 10)], big_every=2))
    (rows,) = list(world.read_rows(src, as_source_id=777))
    assert [r[0] for r in rows] == [777, 777]
    assert rows[0][4] == LZ4 and len(rows[0][3]) < 4000  # compressed on disk, passed on compressed
    assert rows[1][4] == 0 and rows[1][3].startswith(b'{"n":1')
    assert [r[2] for r in next(world.read_rows(src, upto=(0, 0)))] == [0]
    assert list(world.read_rows(src, after=(0, 10))) == []
    assert world.count_upto(src, (0, 5)) == 1


def test_appending_events_is_idempotent(world):
    world.put_session(session())
    events = [Event("1abc00000000aa", n, "2026-01-01T00:00:00.000Z", 1, "attempt_started",
                    "intent", {"n": n}) for n in (1, 2, 3)]
    assert world.append_events(events) == 3
    assert world.append_events(events[1:]) == 0
    assert [e.seq for e in world.events("1abc00000000aa", after_seq=1)] == [2, 3]
    assert world.events("1abc00000000aa")[0].details == {"n": 1}


def test_high_water_marks(world):
    world.put_session(session())
    world.put_session(session("1abc00000000bb", created="2026-01-02T00:00:00.000Z"))
    src = source(world)
    empty = source(world, relpath="projects/p/other.jsonl")
    world.append_records(src, records([(0, 0), (0, 500), (1, 20)]))
    world.append_events([Event("1abc00000000aa", 4, "t", None, "x", None, {})])
    marks = world.marks()
    assert list(marks) == ["1abc00000000aa", "1abc00000000bb"]
    assert marks["1abc00000000aa"].sources == {src.relpath: Mark(3, (1, 20)), empty.relpath: Mark(0, None)}
    assert marks["1abc00000000aa"].last_seq == 4
    assert marks["1abc00000000bb"].sources == {} and marks["1abc00000000bb"].last_seq == 0
    assert list(world.marks("1abc00000000bb")) == ["1abc00000000bb"]
    assert world.high_water("missing") == {}


def test_a_second_lock_on_a_session_is_refused(world):
    world.put_session(session())
    lock = world.lock_session("1abc00000000aa")
    try:
        with pytest.raises(SessionLocked):
            world.lock_session("1abc00000000aa")
        world.lock_session("1abc00000000bb").release()  # other sessions are free
    finally:
        lock.release()
    world.lock_session("1abc00000000aa").release()  # free again once released


# leases and fencing (issue 15): the team worlds ---------------------------------------------
SID = "1abc00000000aa"


def _holder(pid: int):
    from dh_cli.team.protocol import Holder

    return Holder("host-" + str(pid), "boot-x", pid)


def _lease(world, sid: str = SID):
    return world.leases(sid)[sid]


def _silent(world, sid: str = SID) -> None:
    """The holder went silent past its TTL (as if its machine died)."""
    world.lease_lapse(sid, _lease(world, sid).epoch)


def test_lease_acquire_renew_expire_and_steal(team):
    from dh_cli.team.takeover import holdings, steal
    from dh_cli.team.tenure import Tenure, acquire

    world = team.open()
    world.put_session(session(state="running"))
    assert acquire(world, SID, 15, _holder(1)) == 1
    assert acquire(world, SID, 15, _holder(1)) == 2  # its own holder takes it again
    with pytest.raises(SessionLocked, match="held in the world by dh on host-1"):
        acquire(world, SID, 15, _holder(2))
    assert holdings(world)[SID].state == "running on host-1"
    _silent(world)
    assert holdings(world)[SID].state == "orphaned"
    assert acquire(world, SID, 15, _holder(2)) == 3  # the epoch only grows
    assert _lease(world).prev_host == "host-1"
    time.sleep(1.2)  # the heartbeat ages; only a renewal makes it young again
    tenure = Tenure(team.name, team.url, SID, ttl_s=3, epoch=3).start()
    _until(lambda: _lease(world).age < 0.5)  # renewed every third of the TTL
    assert not tenure.lost
    assert steal(world, SID, 15) == 4
    _until(lambda: tenure.lost)
    assert "epoch 3 -> 4" in tenure.lost["reason"]
    tenure.stop()
    assert (_lease(world).epoch, _lease(world).released) == (4, False)  # not released by the loser


def test_the_server_refuses_a_stale_holders_writes(team):
    from dh_cli.team.protocol import is_fenced
    from dh_cli.team.tenure import acquire

    world, stale = team.open(), team.open()
    world.put_session(session(state="running"))
    src = source(world)
    assert acquire(world, SID, 15, _holder(1)) == 1
    stale.fence(SID, 1)
    assert stale.append_records(src, records([(0, 0)])) == 1
    _silent(world)
    assert acquire(world, SID, 15, _holder(2)) == 2  # taken over
    for write in (lambda: stale.append_records(src, records([(0, 100)])),
                  lambda: stale.append_events([Event(SID, 9, "t", None, "x", None, {})]),
                  lambda: stale.put_session(session(updated="2027-01-01T00:00:00.000Z")),
                  lambda: stale.put_source(src, update=True)):
        with pytest.raises(WorldError) as refused:
            write()
        assert is_fenced(refused.value)
    unfenced = team.open()  # a write that carries no epoch is refused as well while it is held
    with pytest.raises(WorldError, match="carries no epoch"):
        unfenced.append_records(src, records([(0, 100)]))
    world.fence(SID, 2)
    assert world.append_records(src, records([(0, 100)])) == 1  # the holder writes
    world.lease_release(SID, 2)
    with pytest.raises(WorldError):  # released: the old epoch is still refused
        stale.append_records(src, records([(0, 200)]))
    assert unfenced.append_records(src, records([(0, 200)])) == 1  # a plain push goes through
    assert [r.offset for r in world.read_records(SID, src.relpath)] == [0, 100, 200]


def test_a_paused_holder_is_fenced_once_its_session_is_claimed(team):
    from dh_cli.team.protocol import is_fenced
    from dh_cli.team.takeover import claim
    from dh_cli.team.tenure import acquire

    paused, world = team.open(), team.open()
    world.put_session(session(state="running"))
    src = source(world)
    epoch = acquire(paused, SID, 15, _holder(1))
    paused.fence(SID, epoch)
    assert paused.append_records(src, records([(0, 0)])) == 1
    _silent(world)  # paused past its TTL: no renewal came
    got = claim(world, 15)
    assert (got.session_id, got.from_host, got.epoch) == (SID, "host-1", epoch + 1)
    assert claim(world, 15) is None  # claimed once
    assert not paused.lease_renew(SID, epoch)  # it runs again: its renewal is refused
    with pytest.raises(WorldError) as refused:
        paused.append_records(src, records([(0, 100)]))
    assert is_fenced(refused.value)
    assert [r.offset for r in world.read_records(SID, src.relpath)] == [0]


def test_two_workers_claim_each_orphan_exactly_once(team):
    from dh_cli.team.takeover import claim
    from dh_cli.team.tenure import acquire

    world = team.open()
    ids = [f"1abc000000{n:04d}" for n in range(20)]
    for n, sid in enumerate(ids):
        world.put_session(session(sid, state="running"))
        acquire(world, sid, 15, _holder(100 + n))
        _silent(world, sid)
    start, claimed = threading.Barrier(2), {0: [], 1: []}

    def worker(n: int) -> None:
        mine = team.open()
        start.wait()
        while (got := claim(mine, 15)) is not None:
            claimed[n].append(got.session_id)
        mine.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claimed[0] + claimed[1]) == ids  # every orphan once, none twice
    assert {_lease(world, sid).epoch for sid in ids} == {2}


def test_a_refused_orphan_is_never_claimed(team):
    from dh_cli.team.takeover import claim, holdings
    from dh_cli.team.tenure import acquire

    world = team.open()
    world.put_session(session(state="running"))
    acquire(world, SID, 15, _holder(1))
    _silent(world)
    assert claim(world, 15, accept=lambda candidate: "no such folder here") is None
    assert claim(world, 15) is None
    assert holdings(world)[SID].state == "refused: no such folder here"


def test_replication_resumes_after_a_server_restart(tmp_path, team):
    from dh_cli.worlds.local import LocalWorld
    from dh_cli.team.shipper import Shipper

    local = LocalWorld(tmp_path / "dh.db")
    made = local.create_session("claude-code", cwd="/w", home="/h", state="running")
    src = local.put_source(Source(id=0, session_id=made.id, kind="jsonl", relpath="p/s.jsonl", path="/h/p/s.jsonl"))
    local.append_records(src, records([(0, n * 100) for n in range(10)]))
    notices = []
    world = team.open()  # the schema, as `dh run --world` makes it before shipping
    shipper = Shipper(tmp_path / "dh.db", team.name, team.url, made.id, lambda: 1,
                      notices.append).start()
    _until(lambda: _count(world, made.id) == 10)

    def meanwhile():
        local.append_records(src, records([(0, n * 100) for n in range(10, 30)]))
        _until(lambda: notices, 30)  # the shipper saw the server gone

    team.outage(meanwhile)
    world = team.open()
    _until(lambda: _count(world, made.id) == 30, 60)
    assert shipper.stop()
    assert len([n for n in notices if "world is behind" in n]) == 1, "\n".join(notices)
    assert len([n for n in notices if "caught up" in n]) == 1, notices
    assert [r.raw for r in world.read_records(made.id, "p/s.jsonl")] == [r.raw for r in local.records(made.id)]


def _count(world, sid: str) -> int:
    try:
        return len(world.read_records(sid, "p/s.jsonl"))
    except Exception:  # noqa: BLE001 - not there yet
        return -1


def _until(predicate, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_stopping_with_the_lease_never_held_waits_for_no_flush(tmp_path, monkeypatch):
    """A world down from the start: the lease was never held, nothing may be written, so
    stopping does not wait FLUSH_FOR (made an hour here) for a server to answer."""
    from dh_cli.team import shipper as module
    from dh_cli.worlds.local import LocalWorld

    monkeypatch.setattr(module, "FLUSH_FOR", 3600.0)
    local = LocalWorld(tmp_path / "dh.db")
    made = local.create_session("claude-code", cwd="/w", home="/h", state="running")
    shipper = module.Shipper(tmp_path / "dh.db", "redis", "redis://127.0.0.1:1", made.id,
                             lambda: None, lambda _: None).start()
    stopped: list = []
    stopper = threading.Thread(target=lambda: stopped.append(shipper.stop()), daemon=True)
    stopper.start()
    stopper.join(60)  # a hang, not a speed: the flush would wait an hour
    assert stopped == [False]  # the world has none of it: dh says so (live_world.detach)
