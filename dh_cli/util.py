"""Small helpers shared across layers: ids, clocks, hashing, atomic writes, redaction."""

import datetime as _dt
import glob
import hashlib
import os
import re
import secrets
import time
from pathlib import Path

_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_time(ts):
    """A record's time as the log shows every time (ISO 8601 UTC to the millisecond, as
    Claude Code, Codex and Pi write theirs): OpenCode's epoch milliseconds converted, any
    other value as it is."""
    if not (isinstance(ts, int) or (isinstance(ts, str) and ts.isdigit())):
        return ts
    try:
        when = _dt.datetime.fromtimestamp(int(ts) / 1000, _dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return ts
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_session_id() -> str:
    """A short, time-sortable id: 9 base32 chars of milliseconds, 5 random."""
    ms = int(time.time() * 1000)
    head = "".join(_CROCKFORD[(ms >> (5 * i)) & 31] for i in reversed(range(9)))
    tail = "".join(secrets.choice(_CROCKFORD) for _ in range(5))
    return head + tail


def short_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write to a temporary name in the same folder, fsync, rename: never a half file.
    Folders it has to create are private (0700), and a temporary file left behind by a
    writer that was killed is removed first."""
    atomic_write_parts(path, [[data]], mode)


def atomic_write_parts(path: Path, batches, mode: int = 0o600) -> int:
    """atomic_write for data given as batches of byte strings (each at most IOV_MAX long),
    written with writev as they come: a 100 MB file is never one 100 MB string. Returns the
    number of bytes written."""
    private_dirs(path.parent)
    _remove_stale_tmp(path)
    tmp = path.with_name(f".{path.name}.dh-tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        size = 0
        for batch in batches:
            size += _write_all(fd, batch)
            del batch  # a batch may be one large record: let it go before the next is made
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    return size


def _write_all(fd: int, parts: list[bytes]) -> int:
    total = sum(len(p) for p in parts)
    written = os.writev(fd, parts) if parts else 0
    if written < total:  # a short write (a signal, a full pipe): finish it part by part
        rest = memoryview(b"".join(parts))[written:]
        while rest:
            rest = rest[os.write(fd, rest):]
    return total


def private_dirs(folder: Path) -> None:
    """mkdir -p where every folder created is 0700 (existing ones are left as they are)."""
    missing = []
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for item in reversed(missing):
        try:
            item.mkdir(mode=0o700)
        except FileExistsError:
            pass


def _remove_stale_tmp(path: Path) -> None:
    for old in path.parent.glob(f".{glob.escape(path.name)}.dh-tmp-*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _pid_alive(int(pid)):
            old.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_URL_PASSWORD = re.compile(r"(?P<pre>[a-z][a-z0-9+.-]*://[^/\s:@]*:)(?P<pw>[^@\s/]+)(?P<at>@)", re.I)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_url(text: str) -> str:
    """Hide the password part of any URL in text (postgres://u:pw@h → postgres://u:***@h)."""
    return _URL_PASSWORD.sub(lambda m: m["pre"] + "***" + m["at"], text)


LAST_EPOCH = 253402300799  # 9999-12-31 23:59:59 UTC: the last second datetime can show


def readable_epoch(value) -> float | None:
    """value when it is a time dh can show and wait for (epoch seconds, a finite number from
    1970 to 9999); None for anything else a harness or a world wrote (inf, -1e300, "soon"),
    which made time.localtime() raise in the middle of `dh run` and `dh log show`."""
    if type(value) not in (int, float) or not 0 < value <= LAST_EPOCH:  # also False for nan
        return None
    return float(value)


def without_password(url: str) -> str:
    """The URL (or libpq `key=value` string) with its password left out, to be kept where
    it may be read: libpq finds the password again in ~/.pgpass or $PGPASSWORD. A URL's
    password is in its user part or in a query parameter (`?password=…`, which both
    PostgreSQL and Redis read)."""
    if "://" not in url:
        return re.sub(r"\s*\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S*)", "", url).strip()
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _SECRET_PARAM.search(k)]
    if parts.password is None and len(query) == len(parse_qsl(parts.query, keep_blank_values=True)):
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.netloc.rpartition("@")[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}" if user else host, query=urlencode(query)))


_SECRET_PARAM = re.compile(r"pass|secret|token", re.I)  # password, sslpassword, auth_token…


_SECRET_FLAG = re.compile(r"(?P<flag>--?[\w.-]*(?:key|token|secret|password|passwd|credential|auth)[\w.-]*)"
                          r"(?P<sep>=|\s+)(?P<value>[^\s*]\S*)", re.I)
_SECRET_ASSIGN = re.compile(r"\b(?P<name>[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Z0-9_]*)"
                            r"=(?P<value>[^\s*]\S*)")


def redact_args(args: list[str]) -> list[str]:
    """An argv as dh stores or shows it: values of flags named like keys or tokens are
    hidden, and so are URL passwords."""
    out, hide_next = [], False
    for arg in args:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if arg.startswith("-") and is_secret_name(name):
            out.append(f"{name}=***" if eq else arg)
            hide_next = not eq
        else:
            out.append(redact_url(arg))
    return out


def secret_values(env=None) -> list[str]:
    """Values of the environment variables named like keys, tokens, secrets or passwords
    (long enough not to be a common word), longest first."""
    env = os.environ if env is None else env
    found = {value for name, value in env.items() if is_secret_name(name) and len(value) >= 8}
    return sorted(found, key=len, reverse=True)


def scrub(value, secrets: list[str] | None = None):
    """What dh writes to its log or prints about its own actions (argv, prompts, tool
    command lines), with secrets taken out: the value of any secret-named environment
    variable, values of secret-named flags and assignments, URL passwords."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "***")
        value = _SECRET_FLAG.sub(lambda m: f"{m['flag']}{m['sep']}***", value)
        value = _SECRET_ASSIGN.sub(lambda m: f"{m['name']}=***", value)
        return redact_url(value)
    if isinstance(value, dict):
        return {key: scrub(item, secrets) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(item, str) for item in value):
            value = redact_args(list(value))
        return [scrub(item, secrets) for item in value]
    return value

