"""What keeps `dh serve` safe to leave running: an ASGI layer in front of every route.

- **Bind.** Loopback needs nothing more. Any other address needs a token (`--token`): dh
  refuses to start without one, because the page shows every prompt and tool output of the
  machine.
- **Host header.** A page on another site can point its own name at 127.0.0.1 (DNS
  rebinding) and read whatever that name serves; the browser sends that name as `Host`. Only
  the names this server was bound as (and the loopback names) are answered; others get 421.
- **Token.** Given once in the URL (`/?token=…`), it is exchanged for an HttpOnly,
  SameSite=Strict cookie and the URL without it; every request must then carry one of them.
- **Read-only.** GET and HEAD only: no route changes the log or starts anything.
- **Headers.** A Content-Security-Policy that allows scripts and styles from this server
  only (no inline script, no inline style element); style attributes stay allowed for the
  trace's time bars, whose widths the renderer writes as numbers (never a record's text).
  Nothing is framed, sniffed or sent as a referrer."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode

from ..errors import UsageError

COOKIE = "dh_serve_token"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline';"
       " img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self';"
       " frame-ancestors 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
           (b"cross-origin-opener-policy", b"same-origin"),
           (b"cross-origin-resource-policy", b"same-origin")]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)


def check_bind(host: str, token: str | None) -> None:
    """Refuse a bind past loopback without a token (a UsageError, one Error: line)."""
    if not is_loopback(host) and not token:
        raise UsageError(f"dh serve on {host} would show every session to the network without a token",
                         hint="add --token (a token is made and printed once), or bind 127.0.0.1")


@dataclass
class Guard:
    """The rules of one server: the names it answers to and its token (None on loopback)."""

    host: str
    port: int
    token: str | None = None
    names: set[str] = field(default_factory=set)

    def __post_init__(self):
        names = set(LOOPBACK_NAMES)
        if not is_loopback(self.host):
            names |= {self.host, socket.gethostname(), socket.getfqdn()}
            if self.host in ("0.0.0.0", "::"):
                names |= _addresses()
        self.names = {n.lower() for n in names}

    def host_allowed(self, header: str) -> bool:
        name, port = _split_host(header)
        return name in self.names and port in (None, self.port)

    def token_ok(self, given: str | None) -> bool:
        return self.token is None or (given is not None and hmac.compare_digest(given, self.token))


def _split_host(header: str) -> tuple[str, int | None]:
    header = header.strip().lower()
    if header.startswith("["):  # [::1]:8765
        name, _, rest = header[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    else:
        name, _, port = header.partition(":")
        port = port or None
    try:
        return name, int(port) if port is not None else None
    except ValueError:
        return "", None


def _addresses() -> set[str]:
    try:
        return {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return set()


class GuardMiddleware:
    """The rules above, as a pure ASGI layer (streams pass through untouched)."""

    def __init__(self, app, guard: Guard):
        self.app, self.guard = app, guard

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            return await _plain(send, *refusal)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if self.guard.token and "token" in query and self.guard.token_ok(query["token"]):
            return await _to_cookie(send, scope["path"], query, self.guard.token)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": list(message.get("headers", [])) + HEADERS}
            await send(message)

        return await self.app(scope, receive, with_headers)

    def _refusal(self, scope, headers: dict) -> tuple[int, str] | None:
        if not self.guard.host_allowed(headers.get("host", "")):
            return 421, "dh serve answers only to the names it was started on (Host header refused)"
        if scope["method"] not in ("GET", "HEAD"):
            return 405, "dh serve is read-only"
        if self.guard.token is None:
            return None
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.get("token") or _cookie(headers.get("cookie", "")) or _bearer(headers)
        return None if self.guard.token_ok(given) else (401, "a token is needed (the URL dh serve printed)")


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def _bearer(headers: dict) -> str | None:
    value = headers.get("authorization", "")
    return value[7:] if value.lower().startswith("bearer ") else None


async def _plain(send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")] + HEADERS})
    await send({"type": "http.response.body", "body": (text + "\n").encode()})


async def _to_cookie(send, path: str, query: dict, token: str) -> None:
    """The token from the URL into a cookie, and the same URL without it."""
    rest = urlencode({k: v for k, v in query.items() if k != "token"})
    path = "/" + path.lstrip("/")  # never `//elsewhere`: a location on this server only
    location = quote(path, safe="/:@!$&'()*+,;=-._~%") + ("?" + rest if rest else "")
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode("latin-1")),
                            (b"set-cookie", cookie.encode("latin-1"))] + HEADERS})
    await send({"type": "http.response.body", "body": b""})
