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


@pytest.mark.parametrize(("url", "kept"), [
    ("postgresql://dh@db:5432/dh?password=S3cret-pw&sslmode=require", "postgresql://dh@db:5432/dh?sslmode=require"),
    ("postgresql://dh:S3cret-pw@db/dh?sslpassword=S3cret-pw", "postgresql://dh@db/dh"),
    ("redis://db:6379/0?password=S3cret-pw", "redis://db:6379/0"),
    ("rediss://:S3cret-pw@db?auth_token=S3cret-pw&ssl_cert_reqs=none", "rediss://db?ssl_cert_reqs=none"),
    ("host=db password=S3cret-pw dbname=dh", "host=db dbname=dh"),
    ("postgresql://db/dh?sslmode=require", "postgresql://db/dh?sslmode=require"),
])
def test_a_world_url_is_kept_in_the_log_without_its_password(url, kept):
    """The URL a session replicated to is kept in the local log (session_worlds) for its
    return; a password in the URL's query, where PostgreSQL and Redis both read one, went
    with it."""
    from dh_cli.util import without_password

    assert without_password(url) == kept
