"""Inputs dh refuses with one `Error:` line before it does anything: a timeout that never
comes (inf, nan, negative, from a flag or the environment) and a relative DH_HOME, which
would name another log in every folder dh is started in."""

from __future__ import annotations

import os

import pytest

from .helpers.cli import dh, one_error


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e309", "Infinity", "-5"])
def test_a_stall_timeout_that_never_comes_is_refused(value):
    needle = "at least 0" if value == "-5" else "must be a finite number"
    one_error(dh("run", "pi", f"--stall-timeout={value}", "--", "-p", "hi"), 2, needle)


def test_a_stall_timeout_from_the_environment_is_checked_too():
    one_error(dh("run", "pi", "--", "-p", "hi", env={**os.environ, "DH_STALL_TIMEOUT": "inf"}),
              2, "must be a finite number")


@pytest.mark.parametrize("command", [["log", "list"], ["run", "pi", "--", "-p", "hi"], ["import", "pi", "--all"]])
def test_a_relative_dh_home_is_refused(tmp_path, command):
    done = dh(*command, env={**os.environ, "DH_HOME": "rel/dh"}, cwd=str(tmp_path))
    one_error(done, 2, "DH_HOME must be an absolute path")
    assert not (tmp_path / "rel").exists()  # nothing written where it pointed
