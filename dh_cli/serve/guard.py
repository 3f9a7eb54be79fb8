"""What keeps `dh serve` safe to leave running: an ASGI layer in front of every route.

- **Token, always.** Loopback too: every local user of the machine can reach 127.0.0.1, and
  the page shows every prompt and tool output of this user's sessions. The URL dh prints
  (on its own stdout, never on a command line) carries it; `--open` hands the browser a
  one-time code instead, through a 0600 file (server.py), so `ps` shows nothing usable.
- **Host header.** A page on another site can point its own name at 127.0.0.1 (DNS
  rebinding) and read whatever that name serves; the browser sends that name as `Host`. Only
  the names this server was bound as (and the loopback names) are answered; others get 421.
- **Cookie.** The token (`/?token=…`) or a one-time code (`/?code=…`, good once) is
  exchanged for an HttpOnly, SameSite=Strict cookie named after the port (cookies know no
  ports: a name per port keeps two servers apart) and the URL without it; every request must
  then carry the cookie or `Authorization: Bearer TOKEN`.
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


COOKIE = "dh_serve_token"  # + "_PORT"
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


@dataclass
class Guard:
    """The rules of one server: the names it answers to, its token and its unused one-time
    codes."""

    host: str
    port: int
    token: str
    names: set[str] = field(default_factory=set)
    codes: set[str] = field(default_factory=set)

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
        return given is not None and hmac.compare_digest(given, self.token)

    def one_time_code(self) -> str:
        code = new_token()
        self.codes.add(code)
        return code

    def use_code(self, given: str | None) -> bool:
        """True once for each code made (the code is spent)."""
        for code in list(self.codes):
            if given is not None and hmac.compare_digest(given, code):
                self.codes.discard(code)
                return True
        return False

    @property
    def cookie(self) -> str:
        return f"{COOKIE}_{self.port}"


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
        if self.guard.token_ok(query.get("token")) or self.guard.use_code(query.get("code")):
            return await _to_cookie(send, scope["path"], query, self.guard)

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
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "code" in query and query["code"] in self.guard.codes:
            return None  # spent in __call__
        given = query.get("token") or _cookie(headers.get("cookie", ""), self.guard.cookie) or _bearer(headers)
        return None if self.guard.token_ok(given) else (401, "a token is needed (the URL dh serve printed)")


def _cookie(header: str, wanted: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == wanted:
            return value
    return None


def _bearer(headers: dict) -> str | None:
    value = headers.get("authorization", "")
    return value[7:] if value.lower().startswith("bearer ") else None


async def _plain(send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")] + HEADERS})
    await send({"type": "http.response.body", "body": (text + "\n").encode()})


async def _to_cookie(send, path: str, query: dict, guard: Guard) -> None:
    """The token (or code) from the URL into a cookie, and the same URL without it."""
    rest = urlencode({k: v for k, v in query.items() if k not in ("token", "code")})
    path = "/" + path.lstrip("/")  # never `//elsewhere`: a location on this server only
    location = quote(path, safe="/:@!$&'()*+,;=-._~%") + ("?" + rest if rest else "")
    cookie = f"{guard.cookie}={guard.token}; HttpOnly; SameSite=Strict; Path=/"
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode("latin-1")),
                            (b"set-cookie", cookie.encode("latin-1"))] + HEADERS})
    await send({"type": "http.response.body", "body": b""})
