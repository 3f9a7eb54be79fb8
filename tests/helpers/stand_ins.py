"""Harness binaries that stand in for a real one to show what dh ran (a marker file, the argv
it got), and dh run in a clean environment (nothing inherited, an optional umask)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests import rig


def dh(*args, env, cwd=None, umask: int | None = None) -> subprocess.CompletedProcess:
    return rig.dh(*args, env=env, cwd=cwd, inherit=False,
                  preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def marker_harness(tmp_path: Path) -> Path:
    """A harness binary that only leaves a marker file: shows whether dh ran anything."""
    script = tmp_path / "harness-marker"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'launched'}\n")
    script.chmod(0o755)
    return script


def argv_harness(tmp_path: Path) -> Path:
    """A harness binary that writes the argv it got, one word a line, and exits 0."""
    script = tmp_path / "harness-argv"
    script.write_text(f"#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > {tmp_path / 'launched'}\n")
    script.chmod(0o755)
    return script
