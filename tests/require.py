"""One setting decides whether a missing real part (PostgreSQL, Redis, a harness CLI, Chromium,
Phoenix, ccusage, datasette) skips its tests or fails them: `DH_TEST_REQUIRE_ALL=1`, which
`.ci/run` sets, or `CI=true` as CI services set it. A green CI run must have run every
real-part test; on a developer's machine without them the tests are skipped, each with the
reason."""

from __future__ import annotations

import os

import pytest


def required() -> bool:
    """True when a missing real part must fail its tests rather than skip them."""
    return any(os.environ.get(name, "").lower() in ("true", "1")
               for name in ("DH_TEST_REQUIRE_ALL", "CI"))


def skip_or_fail(reason: str) -> None:
    """Skip the calling test with the reason, or fail it when real parts are required."""
    if required():
        pytest.fail(reason)
    pytest.skip(reason)


def skip_if_missing(missing: bool, reason: str):
    """A skipif mark for a real part that may be absent here; when real parts are required the
    test runs anyway and fails where it needs the part."""
    return pytest.mark.skipif(missing and not required(), reason=reason)
