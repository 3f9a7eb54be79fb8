"""Shared plumbing for the fake harness executables (claude, codex, pi, opencode).

The fakes behave like the real harness CLIs where dh can see it: native session
files, stdout streams, model traffic on loopback, and crashes.  This module holds
what they share:

* ``CrashPlan`` -- scripted self-inflicted crashes, read from ``DH_FAKE_CRASH``
  (comma-separated specs) and ``DH_FAKE_CRASH_ONCE`` (marker path: crash only
  while the marker is absent, create it just before crashing):

  ``at-start``          exit 1 at once with a message on stderr, writing nothing
  ``after-record=N``    SIGKILL self right after the N-th native record written
  ``mid-record=N``      write about half of the N-th record (no newline), SIGKILL
  ``during-tool=N``     SIGKILL self while the N-th tool command runs
  ``during-model=N``    SIGKILL self on the first streamed event of model call N
  ``hang-model=N``      sleep forever on the first streamed event of model call N
  ``linger-at-end=S``   sleep S seconds once the turn's last record is written, then exit
                        (a harness slow to exit after its turn: Codex's `exec` takes seconds)

* ``write_record`` -- append one native record line, honouring the plan.
* ``run_shell`` -- run a tool command in its own process group, like the real
  harnesses do, so a killed harness leaves its tool running as an orphan.
* ``stream_sse`` -- POST a JSON body and iterate the server-sent events.
* small helpers: ``write_file_tool``, ``read_file_tool``, ``uuid7``, ``now_iso``.

Standard library only; nothing here imports dh.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

CRASH_ENV = "DH_FAKE_CRASH"
CRASH_ONCE_ENV = "DH_FAKE_CRASH_ONCE"
KINDS = ("at-start", "after-record", "mid-record", "during-tool", "during-model", "hang-model",
         "linger-at-end")


class CrashPlan:
    """Counts records, tool spawns and model calls; crashes where the spec says."""

    def __init__(self, specs: dict[str, int] | None = None, once_marker: str | None = None):
        self.specs = dict(specs or {})
        self.once_marker = once_marker
        self.records = 0
        self.tools = 0
        self.models = 0

    @classmethod
    def from_env(cls, environ=None) -> "CrashPlan":
        env = os.environ if environ is None else environ
        return cls(parse_specs(env.get(CRASH_ENV, "")), env.get(CRASH_ONCE_ENV) or None)

    def armed(self, kind: str, count: int | None = None) -> bool:
        """True if `kind` is due now (at `count`) and the once-marker allows it."""
        if kind not in self.specs:
            return False
        if count is not None and self.specs[kind] != count:
            return False
        return not (self.once_marker and os.path.exists(self.once_marker))

    def _mark(self) -> None:
        if self.once_marker:
            Path(self.once_marker).touch()

    def kill_self(self) -> None:
        """Create the once-marker, then SIGKILL this process (no cleanup runs)."""
        self._mark()
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # never reached

    def check_start(self) -> None:
        if self.armed("at-start"):
            self._mark()
            sys.stderr.write("fake harness: crash requested at start (DH_FAKE_CRASH=at-start)\n")
            sys.stderr.flush()
            os._exit(1)

    def record_written(self) -> None:
        self.records += 1
        if self.armed("after-record", self.records):
            self.kill_self()

    def mid_record(self, n_next: int) -> bool:
        """True if record number `n_next` should be torn in half."""
        return self.armed("mid-record", n_next)

    def tool_started(self) -> None:
        self.tools += 1
        if self.armed("during-tool", self.tools):
            time.sleep(0.05)  # let the tool actually get going
            self.kill_self()

    def model_event(self) -> None:
        self.models += 1
        if self.armed("during-model", self.models):
            self.kill_self()
        if self.armed("hang-model", self.models):
            self._mark()
            while True:
                time.sleep(3600)


    def turn_ended(self) -> None:
        if self.armed("linger-at-end"):
            self._mark()
            time.sleep(self.specs["linger-at-end"])


def parse_specs(text: str) -> dict[str, int]:
    """Parse ``"during-tool=1,at-start"`` into ``{"during-tool": 1, "at-start": 0}``."""
    specs: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, num = part.partition("=")
        if kind not in KINDS:
            raise ValueError(f"unknown {CRASH_ENV} spec: {part!r}")
        specs[kind] = int(num) if num else 0
    return specs


def write_record(path, line_bytes: bytes, plan: CrashPlan | None, mode: int = 0o644) -> None:
    """Append one record line (ending in newline) and flush it; no fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    with os.fdopen(fd, "ab") as fh:
        if plan is not None and plan.mid_record(plan.records + 1):
            fh.write(line_bytes[: max(1, len(line_bytes) // 2)].rstrip(b"\n"))
            fh.flush()
            plan.kill_self()
        fh.write(line_bytes)
        fh.flush()
    if plan is not None:
        plan.record_written()


def json_line(obj) -> bytes:
    """Compact JSON + newline, as the real harnesses write their JSONL."""
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def run_shell(command: str, cwd, plan: CrashPlan | None, timeout: float | None = None):
    """Run `bash -c command` in a new session; return (exit_code, combined output)."""
    proc = subprocess.Popen(
        ["bash", "-c", command], cwd=str(cwd), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    if plan is not None:
        plan.tool_started()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return 124, out.decode(errors="replace") + "\n(timed out)"
    return proc.returncode, out.decode(errors="replace")


def _opener():
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def stream_sse(url: str, body: dict, headers: dict, plan: CrashPlan | None,
               response_headers: dict | None = None) -> Iterator[tuple[str | None, dict]]:
    """POST `body` as JSON to `url`; yield (event name or None, data dict) per SSE event.

    Handles ``event:``+``data:`` pairs and data-only streams ending in ``[DONE]``.
    If `response_headers` is given, it is filled with the response headers
    (lower-case names) before the first event is yielded.
    """
    data = json.dumps(body).encode()
    hdrs = {"content-type": "application/json", "accept": "text/event-stream", **headers}
    req = urllib.request.Request(url, data=data, headers=hdrs, method="POST")
    with _opener().open(req, timeout=600) as resp:
        if response_headers is not None:
            response_headers.update({k.lower(): v for k, v in resp.headers.items()})
        first = True
        for event, payload in _sse_events(resp):
            if payload == "[DONE]":
                return
            if first and plan is not None:
                plan.model_event()
            first = False
            yield event, json.loads(payload)


def _sse_events(resp) -> Iterator[tuple[str | None, str]]:
    event, lines = None, []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if lines:
                yield event, "\n".join(lines)
            event, lines = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            lines.append(line[5:].lstrip(" "))
    if lines:
        yield event, "\n".join(lines)


def resolve(path, cwd) -> Path:
    p = Path(os.path.expanduser(str(path)))
    return p if p.is_absolute() else Path(cwd) / p


def write_file_tool(path, content: str, cwd) -> dict:
    """Write `content` to `path` (relative to `cwd`); return {"path", "created", "bytes"}."""
    target = resolve(path, cwd)
    created = not target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    return {"path": str(target), "created": created, "bytes": len(content.encode())}


def read_file_tool(path, cwd) -> str:
    """Return the text of `path` (relative to `cwd`); raises OSError when unreadable."""
    return resolve(path, cwd).read_text(errors="replace")


def uuid7() -> str:
    """A random RFC 9562 UUIDv7 string (48-bit ms timestamp first)."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76 | ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62 | (rand & ((1 << 62) - 1))
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def now_iso() -> str:
    """UTC now as ``2026-11-29T07:42:11.626Z``."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def fail(message: str, code: int = 1):
    """Print `message` on stderr and exit with `code`."""
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
    raise SystemExit(code)
