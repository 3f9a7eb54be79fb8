"""Issue 14, finding 4: two machines both continued one session. The second push, the pulls
and `dh world status` see the copies diverged (same key, different bytes, or a record of one
spanning the other's key); both copies are kept as separate generations, never spliced, and a
third push or pull adds nothing more."""

from __future__ import annotations


import pytest

from dh_cli.models import Record, Session, Source
from dh_cli.worlds.local import LocalWorld
from dh_cli.team.sync import pull, push, status

from .pg import pg_url  # noqa: F401  (fixture)
from . import rig

pytestmark = pytest.mark.postgres
SID = "1m8shared00001"
RELPATH = f"sessions/--p--/x_{SID}.jsonl"
PREFIX = [b'{"type":"session","id":"s"}\n', b'{"type":"message","id":"u1","message":{"role":"user"}}\n']


def lines_at(lines: list[bytes], start: int = 0) -> list[Record]:
    out, offset = [], start
    for raw in lines:
        out.append(Record(0, 0, offset, raw))
        offset += len(raw)
    return out


def machine(path, tail: list[bytes]) -> LocalWorld:
    """A log holding the shared prefix, then this machine's own continuation."""
    world = LocalWorld(path)
    world.put_session(Session(id=SID, harness="pi", created_at="2026-01-01T00:00:00Z",
                              updated_at="2026-01-01T00:00:00Z"))
    source = world.put_source(Source(0, SID, "jsonl", RELPATH))
    world.append_records(source, lines_at(PREFIX + tail))
    return world


def generations(world) -> dict[int, bytes]:
    (source,) = world.sources(SID)
    out: dict[int, bytes] = {}
    for record in world.records(SID, source.id):
        out[record.generation] = out.get(record.generation, b"") + record.raw
    return out


A_TAIL = [b'{"type":"message","id":"a2","message":{"role":"assistant","content":"done on A"}}\n']
B_TAIL = [b'{"type":"message","id":"a2","message":{"role":"assistant","content":"B"}}\n',
          b'{"type":"message","id":"a3","message":{"role":"assistant","content":"more on B"}}\n']


def test_second_push_of_a_diverged_copy_keeps_both_and_says_so(tmp_path, pg_url):
    from dh_cli.team.postgres import PostgresWorld

    a, b = machine(tmp_path / "a.db", A_TAIL), machine(tmp_path / "b.db", B_TAIL)
    remote = PostgresWorld(pg_url)
    assert push(a, remote).records == 3
    assert [s.status for s in status(b, remote)] == ["diverged"]
    second = push(b, remote)
    assert second.sessions[0].diverged == [{"relpath": RELPATH, "generation": 1}]
    assert second.records == 4  # B's whole copy, as generation 1 of the world's source
    kept = generations(remote_as_local(remote, tmp_path))
    assert kept == {0: b"".join(PREFIX + A_TAIL), 1: b"".join(PREFIX + B_TAIL)}
    again = push(b, remote)
    assert again.records == 0 and again.sessions[0].diverged == [{"relpath": RELPATH, "generation": None}]
    remote.close()


def remote_as_local(remote, tmp_path) -> LocalWorld:
    copy = LocalWorld(tmp_path / f"copy-{len(list(tmp_path.iterdir()))}.db")
    pull(remote, copy)
    return copy


def test_pull_of_a_diverged_copy_never_splices(tmp_path, pg_url):
    """A's records pulled into B (whose records at the same offsets differ): B's own bytes
    stay exactly as they were, A's come as a generation of their own."""
    from dh_cli.team.postgres import PostgresWorld

    a, b = machine(tmp_path / "a.db", A_TAIL), machine(tmp_path / "b.db", B_TAIL)
    remote = PostgresWorld(pg_url)
    push(a, remote)
    pulled = pull(remote, b)
    assert generations(b) == {0: b"".join(PREFIX + B_TAIL), 1: b"".join(PREFIX + A_TAIL)}
    assert pulled.sessions[0].diverged == [{"relpath": RELPATH, "generation": 1}]
    assert pull(remote, b).records == 0
    remote.close()


def test_status_and_push_on_the_command_line_say_diverged(tmp_path, pg_url, monkeypatch):
    from dh_cli.team.postgres import PostgresWorld

    home_a, home_b = tmp_path / "A", tmp_path / "B"
    home_a.mkdir(), home_b.mkdir()
    machine(home_a / "dh.db", A_TAIL).close()
    machine(home_b / "dh.db", B_TAIL).close()
    PostgresWorld(pg_url).close()

    def dh(home, *args):
        return rig.dh(*args, env={"DH_HOME": str(home), "DH_POSTGRES_URL": pg_url})

    assert dh(home_a, "world", "push", "postgres").returncode == 0
    shown = dh(home_b, "world", "status", "postgres")
    assert shown.returncode == 0 and "diverged" in shown.stdout, shown.stdout + shown.stderr
    pushed = dh(home_b, "world", "push", "postgres")
    assert pushed.returncode == 0
    assert f"dh: session {SID} diverged ({RELPATH}): this machine's copy stored in the world as generation 1" \
        in pushed.stderr
