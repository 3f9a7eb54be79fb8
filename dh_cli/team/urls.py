"""A team world's URL: where it comes from (--url, the environment) and how its password
never shows, in any world's messages (a client library's own errors can quote the URL)."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from ..errors import ConfigError
from ..util import redact_url


def from_flag_or_env(url: str | None, variables: tuple[str, ...], what: str) -> str:
    """--url, else the first of `variables` that is set."""
    for value in (url, *(os.environ.get(v) for v in variables)):
        if value:
            return value
    raise ConfigError(f"no {what} URL given",
                      hint="pass --url, or set " + " or ".join(variables))


def scrub(text: str, url: str) -> str:
    """text without the URL's password, in URL, key=value or bare form."""
    text = redact_url(text)
    text = re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", text, flags=re.I)
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    for secret in {password, unquote(password or "")} - {None, ""}:
        if len(secret) >= 3:  # a one- or two-letter password would blank out ordinary words
            text = text.replace(secret, "***")
    return text
