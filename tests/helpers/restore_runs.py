"""Sessions for the `dh restore` tests over the fake harnesses: a rig with its fake model
server, a session run under dh with its main native file, a file's bytes and mtime."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.rig import SCRIPT, Rig


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SCRIPT).start()
    yield Rig(tmp_path, server)
    server.stop()


def run_session(rig, harness: str) -> tuple[dict, Path]:
    """A new session run under dh: its log row and its main native file."""
    assert rig.run(harness).returncode == 0
    world = rig.world()
    session = world.list_sessions()[-1]
    main = Path(world.mirrored_path(world.sources(session["id"])[0].id))
    world.close()
    return session, main


def stamp(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns
