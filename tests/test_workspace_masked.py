"""A world that masks credentials in the records pushed to it masks them in workspace files
too (issue 30: a snapshot's `config.py` holding a key went to a masked world verbatim): the
file's masked copy is a new blob, the trees above it new trees, and a restore from the world
gives the masked file beside the untouched others. Proven on each team world (PostgreSQL and
Redis): what the world holds is searched in its own layout, every object decoded."""

from __future__ import annotations

import pytest

from dh_cli.workspace.objects import BLOB, FILE, TREE, TreeEntry, blob_hash, tree_bytes, tree_hash
from dh_cli.workspace.restore import pick, restore_into
from dh_cli.workspace.store import Snapshot, store_for
from dh_cli.worlds.local import LocalWorld
from dh_cli.team.sync import push

from .helpers.secrets_text import KEY
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)
from .workspace_stored import holds, world_bytes

SECRET = f"ANTHROPIC_API_KEY = '{KEY}'\n".encode()
PLAIN = b"print('hello')\n"


# An `.env` whose names no pattern of redact.py knows; stored only because this machine's
# `secret_patterns` was narrowed to nothing
ENV = b"DB_PASS=Zq8-unguessable-Wv3\n"


def snapshot_with_a_key(world) -> str:
    sid = world.create_session("pi", cwd="/nowhere", state="exited").id
    entries = [TreeEntry(".env", FILE, 0o600, blob_hash(ENV), len(ENV)),
               TreeEntry("config.py", FILE, 0o644, blob_hash(SECRET), len(SECRET)),
               TreeEntry("main.py", FILE, 0o644, blob_hash(PLAIN), len(PLAIN))]
    tree = tree_bytes(entries)
    store_for(world).put([(blob_hash(SECRET), BLOB, len(SECRET), 0, SECRET),
                          (blob_hash(PLAIN), BLOB, len(PLAIN), 0, PLAIN),
                          (blob_hash(ENV), BLOB, len(ENV), 0, ENV),
                          (tree_hash(tree), TREE, len(tree), 0, tree)],
                         [Snapshot(sid, 1, "2026-12-01T00:00:00Z", 1, "call-1", "tool", tree_hash(tree))])
    return sid


def test_a_masked_world_gets_masked_workspace_files(tmp_path, team: Team):
    local = LocalWorld()
    sid = snapshot_with_a_key(local)
    remote = team.open()
    try:
        assert remote.masks_records  # the default
        push(local, remote, [sid])
        stored = world_bytes(remote)
        assert holds(stored, PLAIN)  # the search reads the world's objects: the control
        assert not holds(stored, KEY.encode())
        assert not holds(stored, b"Zq8-unguessable-Wv3")  # a secret-named file is listed only
        done = restore_into(remote, pick(remote, sid), str(tmp_path / "t"))
    finally:
        remote.close()
    config = (tmp_path / "t" / "config.py").read_bytes()
    assert KEY.encode() not in config and b"***" in config
    assert (tmp_path / "t" / "main.py").read_bytes() == PLAIN
    assert not (tmp_path / "t" / ".env").exists() and (".env", "secret") in done.not_stored
    assert store_for(local).get(blob_hash(SECRET)) == SECRET  # the local copy stays native
