"""Small helpers shared across layers: ids, clocks, hashing, atomic writes, redaction."""

import datetime as _dt
import hashlib
import os
import re
import secrets
import time
from pathlib import Path

_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_session_id() -> str:
    """A short, time-sortable id: 9 base32 chars of milliseconds, 5 random."""
    ms = int(time.time() * 1000)
    head = "".join(_CROCKFORD[(ms >> (5 * i)) & 31] for i in reversed(range(9)))
    tail = "".join(secrets.choice(_CROCKFORD) for _ in range(5))
    return head + tail


def short_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write to a temporary name in the same folder, fsync, rename: never a half file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.dh-tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_URL_PASSWORD = re.compile(r"(?P<pre>[a-z][a-z0-9+.-]*://[^/\s:@]*:)(?P<pw>[^@\s/]+)(?P<at>@)", re.I)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_url(text: str) -> str:
    """Hide the password part of any URL in text (postgres://u:pw@h → postgres://u:***@h)."""
    return _URL_PASSWORD.sub(lambda m: m["pre"] + "***" + m["at"], text)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: ("***" if is_secret_name(k) else redact_url(v)) for k, v in env.items()}
