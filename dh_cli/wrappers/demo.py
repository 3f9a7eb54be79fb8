"""DEMO ONLY: the wrapper of the demo harness. The demo harness writes Pi's session format
and takes Pi's flags (`-p`, `--session FILE`), so this is Pi's real wrapper — parsing, turn
state, repair lines, resume flags — under the demo's own name, home and binary. It is not
in the registry's list (`dh run`, `dh shim`, `dh doctor` never offer it); wrappers.get finds
it by name so that a log kept with `dh demo --keep` stays readable with `dh log show`."""

from __future__ import annotations

import os
from pathlib import Path

from .pi import PiWrapper

NAME = "dh-demo"
BINARY = "dh-demo-harness"
HOME_VAR = "DH_DEMO_HOME"  # the demo harness's home, always a temporary folder


class DemoWrapper(PiWrapper):
    name = NAME
    aliases = ()
    binary = BINARY

    def home(self, env: dict | None = None) -> Path:
        value = (os.environ if env is None else env).get(HOME_VAR)
        return Path(value) if value else Path(os.environ.get("TMPDIR", "/tmp")) / "dh-demo-home"
