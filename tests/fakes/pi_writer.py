"""A tiny Pi-format session writer, launched by dh as the `pi` binary (DH_PI_BIN) for load,
disk-full and security tests. It talks to no model: it appends records to the session file
dh chose (`--session PATH`) at a fixed rate and exits cleanly with a complete turn.

File: a Pi `session` header, the user prompt, `custom` entries numbered 0..N-1 (each with the
epoch time it was written, `t`, so a reader can measure mirror lag), then a final assistant
message with stopReason "stop". Run again on an existing file (dh's resume), it continues
from the last entry it finds there.

Knobs (environment): DH_WRITER_RATE records/s (200), DH_WRITER_RECORDS (1000),
DH_WRITER_PAD bytes of filler per record (100), DH_WRITER_KILL_AFTER=N SIGKILLs itself once
after N entries (the marker DH_WRITER_KILL_MARKER makes it once), DH_WRITER_TOOL_SECS=S
starts a child in its own process group that sleeps S seconds, with $GITHUB_TOKEN on its
command line (a tool command that outlives the harness), DH_WRITER_CPU_FILE=F appends the
CPU seconds the writer used to F when it ends. Unknown flags are ignored.
Standard library only; nothing here imports dh."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path


def iso() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def line(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def session_path(argv: list[str]) -> Path:
    for i, arg in enumerate(argv):
        if arg == "--session" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if arg.startswith("--session="):
            return Path(arg.split("=", 1)[1])
    sys.stderr.write("pi_writer: --session PATH is required\n")
    raise SystemExit(2)


def existing(path: Path) -> tuple[int, str | None, bool]:
    """(entries numbered so far, id of the last entry, turn done) of a file written before."""
    count, last, done = 0, None, False
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0, None, False
    for raw in data.splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            last = obj.get("id", last)
            done = obj.get("type") == "message" and obj["message"].get("stopReason") == "stop"
            if obj.get("type") == "custom":
                count = obj["data"]["n"] + 1
    return count, last, done


def main() -> int:
    argv = sys.argv[1:]
    if "--version" in argv:
        print("0.73.1")
        return 0
    path = session_path(argv)
    rate = float(os.environ.get("DH_WRITER_RATE", "200"))
    total = int(os.environ.get("DH_WRITER_RECORDS", "1000"))
    pad = "x" * int(os.environ.get("DH_WRITER_PAD", "100"))
    kill_after = int(os.environ.get("DH_WRITER_KILL_AFTER", "0"))
    marker = os.environ.get("DH_WRITER_KILL_MARKER")
    path.parent.mkdir(parents=True, exist_ok=True)
    start_n, parent, done = existing(path)
    if done:
        return 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    if parent is None:
        sid = str(uuid.uuid4())
        os.write(fd, line({"type": "session", "version": 3, "id": sid, "timestamp": iso(),
                           "cwd": os.getcwd()}))
        parent = "00000001"
        os.write(fd, line({"type": "message", "id": parent, "parentId": None, "timestamp": iso(),
                           "message": {"role": "user", "content": [{"type": "text", "text": "go"}],
                                       "timestamp": int(time.time() * 1000)}}))
    if os.environ.get("DH_WRITER_TOOL_SECS"):
        subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))",
                          os.environ["DH_WRITER_TOOL_SECS"], "--token",
                          os.environ.get("GITHUB_TOKEN", "")], start_new_session=True)
    began = time.monotonic()
    for n in range(start_n, total):
        due = began + (n - start_n) / rate
        if (wait := due - time.monotonic()) > 0:
            time.sleep(wait)
        entry = f"{n + 2:08x}"
        os.write(fd, line({"type": "custom", "customType": "load", "id": entry, "parentId": parent,
                           "timestamp": iso(), "data": {"n": n, "t": time.time(), "pad": pad}}))
        parent = entry
        if kill_after and n + 1 == kill_after and not (marker and os.path.exists(marker)):
            if marker:
                Path(marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
    os.write(fd, line({"type": "message", "id": f"{total + 2:08x}", "parentId": parent,
                       "timestamp": iso(), "message": {
                           "role": "assistant", "content": [{"type": "text", "text": "done"}],
                           "model": "mock", "responseId": f"r{total}", "stopReason": "stop",
                           "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0},
                           "timestamp": int(time.time() * 1000)}}))
    os.close(fd)
    _report_cpu()
    return 0


def _report_cpu() -> None:
    """Append this process's CPU seconds to DH_WRITER_CPU_FILE (for the load benchmark)."""
    target = os.environ.get("DH_WRITER_CPU_FILE")
    if target:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        with open(target, "a") as handle:
            handle.write(f"{usage.ru_utime + usage.ru_stime:.4f}\n")


if __name__ == "__main__":
    sys.exit(main())
