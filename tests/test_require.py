"""The one setting that turns a missing real part from a skip into a failure (tests/require.py)."""

import os
import subprocess
import sys

import pytest

PROBE = '''
from tests.require import skip_if_missing, skip_or_fail

def test_part_needed_inside():
    skip_or_fail("the part is missing")

@skip_if_missing(True, "the part is missing")
def test_part_needed_by_mark():
    raise AssertionError("ran without the part")
'''


def _outcome(tmp_path, require: str) -> str:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "DH_TEST_REQUIRE_ALL")}
    if require:
        env["DH_TEST_REQUIRE_ALL"] = require
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
                          capture_output=True, text=True, env=env, cwd=os.getcwd(), timeout=120)
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("require, expected", [("", "2 skipped"), ("1", "2 failed")])
def test_a_missing_part_skips_here_and_fails_when_required(tmp_path, require, expected):
    assert expected in _outcome(tmp_path, require)


REDIS_PROBE = '''
from tests.helpers.redis_server import redis_url  # noqa: F401

def test_needs_redis(redis_url):
    pass
'''


@pytest.mark.parametrize("require, expected", [("", "1 skipped"), ("1", "1 error")])
def test_a_missing_redis_server_skips_here_and_fails_when_required(tmp_path, require, expected):
    probe = tmp_path / "test_redis_probe.py"
    probe.write_text(REDIS_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "DH_TEST_REQUIRE_ALL")}
    env.update(PATH=str(tmp_path), PYTHONPATH=os.getcwd())  # no redis-server on this PATH
    if require:
        env["DH_TEST_REQUIRE_ALL"] = require
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
                          capture_output=True, text=True, env=env, cwd=os.getcwd(), timeout=120)
    assert expected in done.stdout.strip().splitlines()[-1], done.stdout[-2000:]
