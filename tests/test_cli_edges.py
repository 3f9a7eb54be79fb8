"""The CLI's edges, run as real processes: colour only on a terminal and never with NO_COLOR,
errors as one `Error:` line with a hint and a documented exit code, tracebacks only with
DH_RAISE_ERRORS=1."""

import os
import re
import subprocess
import sys

import pexpect
from .rig import dh

COLOUR = re.compile(r"\x1b\[[0-9;]*?(?:3[0-7]|9[0-7]|38;[0-9;]+)m")  # SGR foreground colours


def on_a_terminal(*args, env=None) -> str:
    env = {k: v for k, v in {**os.environ, "TERM": "xterm-256color", **(env or {})}.items()
           if v is not None}
    child = pexpect.spawn(sys.executable, ["-m", "dh_cli", *args], env=env, encoding="utf-8",
                          timeout=60, dimensions=(40, 200))
    child.expect(pexpect.EOF)
    child.close()
    return child.before


def test_colour_on_a_terminal_but_not_with_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert COLOUR.search(on_a_terminal("doctor"))
    assert not COLOUR.search(on_a_terminal("doctor", env={"NO_COLOR": "1"}))


def test_no_escape_codes_when_piped(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    result = dh("doctor")
    assert result.stdout and "\x1b[" not in result.stdout + result.stderr


def test_an_error_is_one_line_with_a_hint_and_exit_code():
    result = dh("log", "show", "nope")
    assert result.returncode == 1
    assert result.stderr == "Error: no session matches 'nope' (hint: see `dh log list`)\n"


def test_a_usage_error_exits_2():
    assert dh("log", "show").returncode == 2
    assert dh("run", "cladue").returncode == 2


BOOM = ("import sys; from dh_cli import cli; cli.app.command('boom')(lambda: 1 / 0); "
        "sys.argv = ['dh', 'boom']; cli.main()")


def test_an_unexpected_error_is_one_line_unless_dh_raise_errors():
    quiet = subprocess.run([sys.executable, "-c", BOOM], capture_output=True, text=True,
                           env={**os.environ, "DH_RAISE_ERRORS": ""})
    assert quiet.returncode == 1
    assert quiet.stderr == ("Error: unexpected ZeroDivisionError: division by zero "
                            "(hint: set DH_RAISE_ERRORS=1 to see the traceback)\n")
    loud = subprocess.run([sys.executable, "-c", BOOM], capture_output=True, text=True,
                          env={**os.environ, "DH_RAISE_ERRORS": "1"})
    assert loud.returncode == 1
    assert "Traceback (most recent call last)" in loud.stderr and "ZeroDivisionError" in loud.stderr
