"""Where Codex lists its threads: the wrapper's part of `dh restore`.

`codex resume`'s picker lists threads from the `threads` table of `state_5.sqlite`, not from
the rollouts. A rollout put back after Codex dropped its row (`codex delete`, a lost state
database) resumes by id (`exec resume` finds it by its file name and writes the row back),
but the picker leaves it out (seen with 0.171.0 in tmux). Codex's own app-server writes the
missing rows when it lists threads with a rescan of the rollouts (`thread/list` without
`useStateDbOnly`): dh asks it to, over its stdio JSON-RPC, rather than write the row itself.
The row has 46 columns in 0.171.0 that Codex derives from the rollout and migrates from one
release to the next; the rescan is the harness's own rule for what it lists."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import time
from pathlib import Path

from ..errors import NativeStateError

RELIST_TIMEOUT = 60.0  # the whole exchange; 0.08 s with two threads here
PAGE = 100
# every source kind (0.171.0's schema): the default is the interactive ones only, and a
# `codex exec` thread would be neither rescanned nor found
SOURCE_KINDS = ["cli", "vscode", "exec", "appServer", "subAgent", "subAgentReview",
                "subAgentCompact", "subAgentThreadSpawn", "subAgentOther", "unknown"]
VIA = "codex app-server thread/list"
UNNAMED = ("a name given to the thread (/rename) is not in its rollout and dh does not keep it:"
           " the picker shows the thread's first prompt")


class CodexSessionPlaces:
    """What Codex's picker lists, and how a restored thread gets listed again."""

    def picker_hides(self, args: list[str]) -> str | None:
        """`codex exec` writes `source: exec`, which the picker's default source filter
        leaves out; `codex resume ID` still resumes it (shared docs, harnesses.md §8)."""
        return "started by `codex exec`: `codex resume` lists only interactive sessions" \
            if self.is_headless(args) else None

    def relist(self, home: Path, native_id: str | None, harness) -> dict | None:
        binary, env = harness()
        return relist_thread(binary, {**env, "CODEX_HOME": str(home)}, home, native_id or "")


def relist_thread(binary: list[str], env: dict, home: Path, thread_id: str) -> dict:
    """Have Codex's app-server rescan the rollouts until it lists the thread; what came of it:
    {"via", "listed"[, "why"]}."""
    try:
        with AppServer([*binary, "app-server"], env, home) as server:
            server.call("initialize", {"clientInfo": {"name": "dh", "version": "1"}})
            server.notify("initialized")
            listed = _listed(server, thread_id)
    except NativeStateError as exc:
        return {"via": VIA, "listed": False, "why": str(exc)}
    if listed:  # a name lives in session_index.jsonl alone, which `codex delete` drops too
        return {"via": VIA, "listed": True, "left": UNNAMED}
    return {"via": VIA, "listed": False, "why": "Codex's app-server did not list the thread"}


def _listed(server: "AppServer", thread_id: str) -> bool:
    cursor = None
    while True:
        page = server.call("thread/list", {"sourceKinds": SOURCE_KINDS, "modelProviders": [],
                                           "useStateDbOnly": False, "limit": PAGE,
                                           "cursor": cursor})
        threads = page.get("data") if isinstance(page.get("data"), list) else []
        if any(isinstance(t, dict) and t.get("id") == thread_id for t in threads):
            return True
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            return False


class AppServer:
    """`codex app-server` on stdio: one JSON-RPC message a line each way."""

    def __init__(self, argv: list[str], env: dict, cwd: Path):
        self.deadline = time.monotonic() + RELIST_TIMEOUT
        self.errors = tempfile.TemporaryFile()
        self.buffer, self.next_id = b"", 1
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.errors)
        except OSError as exc:
            self.errors.close()
            raise NativeStateError(f"cannot start `codex app-server`: {exc.strerror}") from None

    def __enter__(self) -> "AppServer":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.proc.stdin.close()  # the server ends at the end of its input
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.errors.close()

    def notify(self, method: str) -> None:
        self._send({"method": method})

    def call(self, method: str, params: dict) -> dict:
        ident, self.next_id = self.next_id, self.next_id + 1
        self._send({"id": ident, "method": method, "params": params})
        while True:
            message = self._message()
            if message.get("id") != ident:
                continue  # a notification, or a request of the server's: not asked for
            if "error" in message:
                raise NativeStateError(f"`codex app-server` {method}: {message['error']}")
            result = message.get("result")
            return result if isinstance(result, dict) else {}

    def _send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise NativeStateError(f"`codex app-server` ended: {self._stderr()}") from None

    def _message(self) -> dict:
        while b"\n" not in self.buffer:
            self.buffer += self._read()
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return {}  # not JSON-RPC: skipped
        return message if isinstance(message, dict) else {}

    def _read(self) -> bytes:
        left = self.deadline - time.monotonic()
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            if left <= 0 or not selector.select(left):
                raise NativeStateError(f"`codex app-server` did not answer in {RELIST_TIMEOUT:.0f} s")
        data = os.read(self.proc.stdout.fileno(), 65536)
        if not data:
            raise NativeStateError(f"`codex app-server` ended: {self._stderr()}")
        return data

    def _stderr(self) -> str:
        self.errors.seek(0)
        lines = self.errors.read()[-4000:].decode(errors="replace").strip().splitlines()
        said = [line for line in lines if "rror" in line] or lines[-3:]  # not the backtrace
        return " ".join(said[:3]) or "no message"
