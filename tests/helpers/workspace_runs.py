"""The files a real Claude Code session writes over several tool calls (issue 16), and a
"machine" to run it on: its own homes with the real harness configs. Shared by the workspace
and takeover end-to-end tests (tests/e2e)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import UNSET, real_env, write_real_configs
from tests.fakes.model_server import FakeModelServer
from tests.rig import Rig

SECRET = b"secret-4242-do-not-store"
LARGE = 11_000_000  # over the 10 MiB default limit
SHELL = ("mkdir -p data && printf 'one\\n' > data/b.txt && "
         f"printf %s {__import__('base64').b64encode(SECRET).decode()} | base64 -d > .env && "
         f"yes Q | head -c {LARGE} > big.dat")
SCRIPT = {"replies": [
    {"text": "Writing the notes.", "write": {"path": "notes/a.txt", "content": "alpha\n"}},
    {"shell": SHELL},
    {"write": {"path": "notes/a.txt", "content": "alpha, edited\n"}},
    # a shell `cat`, not Read: Claude Code answers a Read of a file it wrote itself and that is
    # unchanged since with "Wasted call — file unchanged since your last Read"
    {"shell": "cat notes/a.txt", "delay_s": 60, "delay_times": 1},
    {"shell": "cat data/b.txt"},
    {"text": "All done."},
]}


def rig_on(tmp: Path, server: FakeModelServer, installed) -> Rig:
    tmp.mkdir()
    rig = Rig(tmp, server, bin_dir=tmp / "bin", extra_env=real_env(installed, tmp))
    for name in UNSET:
        rig.env.pop(name, None)
    write_real_configs(rig, installed)
    return rig
