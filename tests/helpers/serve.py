"""`dh serve` for the tests: the real CLI in a child process on a free port (`--port 0`, the
port read from the URL it prints), over a log built from the real fixtures, with a session
that carries hostile text and a credential, and one with a crash, a repair and a resume
journaled."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.fakes.many_sessions import FIXTURES, import_fixtures

ROOT = Path(__file__).resolve().parent.parent.parent
CLAUDE_BASIC = FIXTURES / "claude-code" / "basic" / "claude-config"
BASIC_ID = "e98ca76e-8174-4702-b909-8f88cbc9d24b"
HOSTILE_ID = "0d6f3c2a-5b1e-4c7d-8e9f-a1b2c3d4e5f6"
API_KEY = "sk-ant-api03-" + "Q" * 24 + "w7Zk" + "x" * 20
HOSTILE = ("<script>document.title='owned'</script> see [docs](javascript:alert(1)) "
           "</style><style>body{display:none}</style> <img src=x onerror=alert(2)> "
           f"ANTHROPIC_API_KEY={API_KEY} and the key {API_KEY}")
# what a supervised session that crashed once and was resumed leaves in the journal
CRASH_EVENTS = [
    ("launch", {"argv": ["claude", "-p", "Create the files."]}, 1, "intent"),
    ("exited", {"code": -9, "signal": 9, "stalled": False, "user_signal": None}, 1, "outcome"),
    ("state", {"from": "RUNNING", "to": "BACKOFF", "outcome": "crashed", "reason": "crashed"}, 1, "info"),
    ("resume", {"attempt": 2}, 2, "intent"),
    ("repaired", {"call_id": "toolu_01", "tool": "Bash", "class": "never"}, 2, "outcome"),
    ("resume_plan", {"mode": "resume", "argv": ["--resume", "x"], "kept": 3}, 2, "outcome"),
    ("launch", {"argv": ["claude", "--resume", "x"]}, 2, "intent"),
    ("exited", {"code": 0, "signal": None}, 2, "outcome"),
    ("state", {"from": "RUNNING", "to": "EXITED", "outcome": "finished"}, 2, "info"),
    ("takeover", {"from_host": "host-a", "from_epoch": 1, "host": "host-b", "epoch": 2,
                  "by": "dh worker"}, 3, "info"),
]


def hostile_home(tmp: Path) -> Path:
    """A copy of the basic Claude Code fixture whose prompt is HOSTILE (under another id)."""
    home = tmp / "hostile-claude"
    shutil.copytree(CLAUDE_BASIC, home)
    (path,) = home.glob(f"projects/*/{BASIC_ID}.jsonl")
    text = path.read_text().replace(BASIC_ID, HOSTILE_ID)
    text = text.replace('"content":"Create the files."', '"content":' + json.dumps(HOSTILE))
    path.with_name(f"{HOSTILE_ID}.jsonl").write_text(text)
    path.unlink()
    return home


def fixed_log(dh_home: Path, tmp: Path) -> dict[str, str]:
    """The fixtures imported, the hostile session, and a crash journaled on the basic Claude
    session; returns {"crashed": id, "hostile": id}."""
    from dh_cli.worlds.local import LocalWorld

    import_fixtures(dh_home)
    env = {**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "dh_cli", "import", "claude", "--all", "--home",
                    str(hostile_home(tmp))], env=env, check=True, stdout=subprocess.DEVNULL)
    world = LocalWorld(dh_home / "dh.db")
    crashed = world.find_session(BASIC_ID).id
    for type_, details, attempt, phase in CRASH_EVENTS:
        world.add_event(crashed, type_, details, attempt, phase)
    ids = {"crashed": crashed, "hostile": world.find_session(HOSTILE_ID).id}
    world.close()
    return ids


class Served:
    """`dh serve --port 0 ARGS` with `env`; `url` is the page it printed."""

    def __init__(self, env: dict, *args: str, cwd=None):
        self.proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "serve", "--port", "0", *args],
                                     env={**env, "PYTHONPATH": str(ROOT)}, cwd=cwd,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = _first_line(self.proc, 60)
        found = re.search(r"http://\S+", line)
        assert found, f"dh serve printed {line!r}; stderr: {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        self.url = found.group(0)  # with ?token=: a browser that opens it gets the cookie
        self.base = self.url.split("?")[0].rstrip("/")
        self.port = int(self.base.rsplit(":", 1)[1])
        self.token = self.url.split("token=")[1]
        self.headers = {"Authorization": f"Bearer {self.token}"}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return got[0] if got else ""


def in_process(dh_home: Path, world: str | None = None, url: str | None = None, **options):
    """The app of `dh serve` over dh_home's log in this process, behind its guard (as
    127.0.0.1:8765 with TOKEN): a Starlette TestClient that carries the token."""
    from starlette.testclient import TestClient

    from dh_cli.serve.app import Options, create_app
    from dh_cli.serve.guard import Guard

    guard = Guard("127.0.0.1", 8765, TOKEN)
    app = create_app(Options(dh_home / "dh.db", guard, world, url, **options))
    client = TestClient(app, base_url="http://127.0.0.1:8765", headers={"Authorization": f"Bearer {TOKEN}"})
    client.guard = guard
    return client


TOKEN = "t0ken-of-the-tests-" + "z" * 12


def serve_fixed_log(tmp_path_factory):
    """The module fixture of the serve tests: (Served, ids, DH_HOME) over fixed_log."""
    tmp = tmp_path_factory.mktemp("serve")
    dh_home = tmp / "dh-home"
    ids = fixed_log(dh_home, tmp)
    server = Served({**os.environ, "DH_HOME": str(dh_home), "XDG_CONFIG_HOME": str(tmp / "xdg")})
    yield server, ids, dh_home
    server.stop()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
