"""What a test asks of a failing dh command: one `Error:` line, no traceback."""

from __future__ import annotations


# helpers ------------------------------------------------------------------------------------
def one_error(result, code: int | None = None, needle: str = "") -> str:
    """The result is a failure reported as exactly one `Error:` line, without a traceback."""
    err = result.stderr if isinstance(result.stderr, str) else result.stderr.decode()
    assert result.returncode != 0, (result.returncode, err)
    if code is not None:
        assert result.returncode == code, (result.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err
    assert needle in lines[0], lines[0]
    return lines[0]


def dh(*args, env=None, cwd=None, wait=True):
    """tests/rig.py's dh with a timeout long enough for an import of many sessions."""
    from tests import rig

    return rig.dh(*args, env=env, cwd=cwd, wait=wait, timeout=300)
