"""One way to wait for something a test cannot be told about directly (another process's
write, a thread's progress): poll it. The timeout bounds a hang; it is never the property a
test asserts, so it is generous (a loaded CI machine is slow, not wrong)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], what: str, timeout: float = 60.0, step: float = 0.05,
               explain: Callable[[], str] = lambda: "") -> T:
    """Poll `condition()` until it returns something truthy, and return that; after `timeout`
    seconds an AssertionError names `what` (and whatever `explain()` adds)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} {explain()}".rstrip())
        time.sleep(step)
    return value
