"""A Claude Code transcript holding a few huge tool results, and a child process that reports
how much its peak resident size grew (ru_maxrss) over one operation on it: what the memory
tests of the log's readers measure."""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from tests.fakes.transcripts import SESSION, turn_rows

ROOT = Path(__file__).resolve().parent.parent.parent
MB = 1 << 20


def write_huge_transcript(home: Path, line_mb: int, compressible: int, incompressible: int) -> Path:
    """Under home/projects/: one turn per huge tool result (its text twice in the line, as
    Claude Code writes `content` and `toolUseResult.stdout`, so a line of about `line_mb`),
    compressible build output first, then base64 of random bytes; a normal turn last."""
    path = home / "projects" / "-home-dev-project" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    rng, parent, half = random.Random(3), None, line_mb * MB // 2
    with open(path, "wb") as handle:
        for n, kind in enumerate(["text"] * compressible + ["random"] * incompressible):
            rows = turn_rows(rng, n * 10, parent)
            text = _huge_text(n, half) if kind == "text" else _random_text(half)
            rows[-1]["message"]["content"][0]["content"] = text
            rows[-1]["toolUseResult"]["stdout"] = text
            handle.writelines(json.dumps(row).encode() + b"\n" for row in rows)
            parent = rows[-1]["uuid"]
        handle.writelines(json.dumps(row).encode() + b"\n" for row in turn_rows(rng, 1000, parent))
    return path


def _huge_text(n: int, size: int) -> str:
    line = f"build step {n}: compiled module without warnings\n"
    return line * (size // (len(line) + 1))  # each newline is two bytes once escaped


def _random_text(size: int) -> str:
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()  # LZ4 cannot shrink it


IMPORT = """
import json, sys
from pathlib import Path
from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.worlds.local import LocalWorld
report = import_sessions(LocalWorld(), wrappers.get("claude"), Path(sys.argv[1]), all_=True)
print(json.dumps([item["id"] for item in report.sessions]))
"""


def imported(tmp_path: Path, home: Path) -> str:
    """Import the home into the log under tmp_path (in a child: the test's own memory stays
    small) and return the session's dh id."""
    (session_id,) = json.loads(run_child(tmp_path, IMPORT, str(home)))
    return session_id


def run_child(tmp_path: Path, script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DH_HOME": str(tmp_path / "dh")}
    out = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    return out.stdout


# VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's resident size at the fork
# (Linux keeps it across exec), which hid any growth below the test process's own size.
GROWTH = """
def _peak():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
"""


def grown_mb(tmp_path: Path, setup: str, work: str, *args: str) -> tuple[float, str]:
    """Run `setup` then `work` (Python source) in a child; how many MiB its peak resident size
    grew over `work`, and what `work` printed to stdout after a line `---`."""
    script = (GROWTH + setup + "\nimport sys\nbefore = _peak()\nprint('---')\n" + work
              + "\nsys.stdout.flush()\nprint('\\n+++', (_peak() - before) / 1024)\n")
    out = run_child(tmp_path, script, *args)
    body, _, grown = out.rpartition("\n+++ ")
    return float(grown), body.split("---\n", 1)[1]
