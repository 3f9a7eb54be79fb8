"""What dh shows or sends of a transcript (issue 14): credentials masked, terminal control
sequences neutralised. The local log keeps the harness's native bytes (its own data, 0600);
these functions are applied where the bytes leave it: `dh log show` (text, --json, --raw,
--follow), `dh log list`, `dh log export`, a world push, and every config value shown.

`mask` hides what looks like a credential: private key blocks, tokens with a known prefix
(sk-, ghp_, github_pat_, xox?-, AKIA, AIza, glpat-), JWTs, `Bearer …`, URL passwords, and the
value of a key named like a password, secret, token or API key. It is idempotent (masking a
masked text changes nothing), so a masked world and a raw log still compare equal after it.
`neutralise` turns C0/C1 control characters but newline and tab (ESC starts every terminal
sequence: titles, OSC 52 clipboard writes, hidden text) into visible `\\x..` text."""

from __future__ import annotations

import re

from .util import redact_url

MASK = "***"
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", re.S)
# a prefix starts a word, or follows a JSON escape (`\nsk-…` in a tool's output as stored)
_PREFIXED = re.compile(r"(?:\b|(?<=\\[nrtbf]))(sk-(?:ant-(?:api\d\d-)?|proj-|live-|test-)?|gh[pousr]_|github_pat_|xox[abposr]-"
                       r"|AKIA|ASIA|AIza|glpat-)(?=[A-Za-z0-9_\-]{12,})[A-Za-z0-9_\-]+")
_JWT = re.compile(r"(?:\b|(?<=\\[nrtbf]))eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}")
_BEARER = re.compile(r"\b(Bearer|Basic)\s+(?!\*\*\*)[A-Za-z0-9._~+/=-]{8,}", re.I)
# the name is matched from its keyword on (GITHUB_TOKEN from TOKEN): no backtracking over
# every word of a record, which made masking 100 us a line. A quote may carry any number of
# backslashes (JSON inside a JSON string: `{\"password\": \"…\"}` in a tool's output, deeper
# in a tool call's arguments); a quoted value is masked whole, to its closing quote, spaces
# and escapes (`\n`) included.
# An HTML page quotes the same JSON with entities (&quot;), which end a value as a quote does.
_ENTITY = r"(?:quot|apos|#0*3[49]|#x0*2[27]);"  # after its `&`
_QUOTE = r"(?:\\*[\"']|&" + _ENTITY + ")"
_NAMED = re.compile(
    r"(?P<name>(?:password|passwd|secret|tokens?|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|credential)[\w.-]*(?:" + _QUOTE + r")?\s*[:=]\s*(?P<quote>" + _QUOTE + r")?)"
    r"(?P<value>(?!\*\*\*)(?!\d+\b)(?!(?:null|true|false|none)\b)"
    r"(?(quote)(?:[^\"'\\\r\n&]|&(?!" + _ENTITY + r")|\\+(?![\\\"']))+|[^\s\"',;&<>\\]{3,}))", re.I)
_NAMED_LOWER = re.compile(_NAMED.pattern)  # on lower-cased text: no IGNORECASE, 4x faster
# Which families a text may hold, told by plain substrings of its lower-cased copy: a
# record with none of them skips the substitutions (a push masks every record it sends).
# Native bytes get one plain regex over their lower-cased copy first: 2.6 us a 130-byte line,
# where an IGNORECASE alternation with named groups took 15-17 us.
_KEYWORDS = {
    "pem": ("private key",),
    "prefixed": ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "akia", "asia",
                 "aiza", "glpat-"),
    "jwt": ("eyj",),
    "bearer": ("bearer", "basic"),
    "named": ("passw", "secret", "token", "api_key", "api-key", "apikey", "access", "private", "credential"),
    "url": ("://",),
}
# `input_tokens: 123`, in every usage record, is no secret, and most records hold one: a
# `tokens` name passes the prefilter only when a value that is no number or literal follows
# (`refresh_tokens=…`, `MY_TOKENS="…"`), the values _NAMED masks.
_TOKENS_VALUE = rb"tokens[\w.-]*(?:\\*[\"'])?\s*[:=]\s*(?:\\*[\"'])?(?![\d\s\[{\"'\\]|null|true|false|none)"
_ANY = re.compile(b"|".join(re.escape(k.encode()) for keys in _KEYWORDS.values() for k in keys)
                  .replace(b"token", b"token(?!s)|" + _TOKENS_VALUE))
_ANY_TEXT = re.compile(_ANY.pattern.decode())  # the same test on text: most values hold no keyword
_FAMILIES = {
    "pem": lambda t: _PEM.sub(lambda m: f"-----BEGIN {m[1]}PRIVATE KEY-----{MASK}-----END {m[1]}PRIVATE KEY-----", t),
    "prefixed": lambda t: _PREFIXED.sub(lambda m: m[1] + MASK, t),
    "jwt": lambda t: _JWT.sub("eyJ" + MASK, t),
    "bearer": lambda t: _BEARER.sub(lambda m: f"{m[1]} {MASK}", t),
    "named": lambda t: _masked_names(t),
    "url": redact_url,
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _masked_names(text: str) -> str:
    """The values of secret-named keys masked. Matched on the lower-cased copy when it is
    as long as the text (the offsets then agree), on the text itself otherwise."""
    low = text.lower()
    if len(low) != len(text):
        return _NAMED.sub(lambda m: m["name"] + MASK, text)
    out, at = [], 0
    for m in _NAMED_LOWER.finditer(low):
        out += [text[at:m.start("value")], MASK]
        at = m.end("value")
    return "".join(out) + text[at:] if out else text


def mask(text: str) -> str:
    """text with anything that looks like a credential replaced by ***."""
    if not text:
        return text
    low = text.lower()
    if not _ANY_TEXT.search(low):  # 10,008 sessions listed: 2.5 s of masking without this
        return text
    for family, substitute in _FAMILIES.items():  # in this order: a PEM block before its words
        if any(key in low for key in _KEYWORDS[family]):
            text = substitute(text)
    return text


def may_hold_secret(data: bytes) -> bool:
    """False when mask_bytes would surely leave data as it is (one regex, no decoding)."""
    return bool(data) and _ANY.search(data.lower()) is not None


def mask_bytes(data: bytes) -> bytes:
    """mask for native bytes (UTF-8; any other byte passes through unchanged)."""
    if not data or not _ANY.search(data.lower()):
        return data
    return mask(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def neutralise(text: str) -> str:
    """Control characters (but newline and tab) as visible text: \\x1b, \\r, \\x9b…"""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def clean(value, show_secrets: bool = False, terminal: bool = False):
    """Every string inside value (dicts, lists, tuples) masked unless show_secrets, and
    neutralised when it goes to a terminal."""
    return _clean(value, show_secrets, terminal, {})


_PLAIN = frozenset({int, float, bool, type(None)})


def _clean(value, show_secrets: bool, terminal: bool, done: dict):
    """clean(), each distinct string filtered once (`done`): a list of 10,001 sessions holds
    the same harness, state, host and folder names thousands of times (cleaning it took
    0.11 s where filtering every string took 0.16 s)."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, str):
        if value not in done:
            shown = value if show_secrets else mask(value)
            done[value] = neutralise(shown) if terminal else shown
        return done[value]
    if isinstance(value, dict):
        return {key: item if type(item) in _PLAIN else _clean(item, show_secrets, terminal, done)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(item, show_secrets, terminal, done) for item in value]
    return value


def clean_view(view, show_secrets: bool = False, terminal: bool = False):
    """A SessionView (logviews/logview.py) with every text in it cleaned."""
    for name in ("session", "items", "events", "sources", "totals", "dangling"):
        setattr(view, name, clean(getattr(view, name), show_secrets, terminal))
    return view


def clean_bytes(data: bytes, show_secrets: bool = False, terminal: bool = False) -> bytes:
    """Native bytes as `--raw` or an export prints them."""
    data = data if show_secrets else mask_bytes(data)
    if terminal:
        data = neutralise(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    return data


REASON_CHARS, WORD_CHARS = 300, 60  # a world's key can be megabytes long


def one_line(text: str) -> str:
    """A world's words as one line to show: masked and its controls made visible before it is
    clipped (a cut must not leave half a credential that no longer looks like one); a long
    word (a name in the world) is cut in its middle, so what follows it still shows."""
    words = [w if len(w) <= WORD_CHARS else f"{w[:WORD_CHARS - 20]}…{w[-19:]}"
             for w in clean(text, False, True).split()]
    text = " ".join(words)
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1] + "…"


def config_value(value):
    """A config value as dh shows it: always masked (a libpq `password=…`, a URL password)."""
    return clean(value) if isinstance(value, (str, dict, list, tuple)) else value
