"""The PostgreSQL world's URL: where it comes from (--url, the environment), and how it never
shows: every psycopg error becomes a WorldError of one sentence, the URL's password masked
(psycopg's own messages can quote the connection string). postgres.py re-exports these."""

from __future__ import annotations

import os
import re

import psycopg

from ..config import url_variables
from ..errors import ConfigError, WorldError
from .protocol import FENCED, fenced_error
from .urls import scrub

URL_VARIABLES = url_variables("postgres")


def resolve_url(url: str | None) -> str:
    """--url, else DH_POSTGRES_URL, else WORKFLOW_POSTGRES_URL (the Workflow SDK's name)."""
    for value in (url, *(os.environ.get(v) for v in URL_VARIABLES)):
        if value:
            return value
    raise ConfigError("no PostgreSQL URL given",
                      hint="pass --url, or set DH_POSTGRES_URL (or WORKFLOW_POSTGRES_URL)")


# errors -------------------------------------------------------------------------------------
def _reason(exc: BaseException, url: str) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    text = re.sub(r'^(connection failed: )?(connection to server (at|on) "[^"]*"'
                  r'( \([^)]*\))?(, port \d+)? failed: )?', "", text)
    text = re.sub(r"^(FATAL|ERROR):\s+", "", text)
    return scrub(re.sub(r"\s+", " ", text).rstrip("."), url)


def world_error(exc: BaseException, url: str, connecting: bool = False) -> WorldError:
    shown, reason = scrub(url, url), _reason(exc, url)
    state = getattr(exc, "sqlstate", None)
    if state in ("28P01", "28000") or "authentication failed" in reason or "pg_hba.conf" in reason:
        return WorldError(f"PostgreSQL at {shown} refused the login: {reason}",
                          hint="check the user and password in the URL")
    if connecting and isinstance(exc, psycopg.ProgrammingError):
        return WorldError(f"the PostgreSQL URL {shown} is not valid: {reason}",
                          hint="use postgresql://USER:PASSWORD@HOST:PORT/DATABASE")
    if connecting and isinstance(exc, psycopg.OperationalError):
        return WorldError(f"cannot connect to PostgreSQL at {shown}: {reason}",
                          hint="check that the server is running and the URL's host and port")
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return WorldError(f"lost the connection to PostgreSQL at {shown}: {reason}",
                          hint="run the command again once the server is back: it resumes where it stopped")
    if state == "42501":
        return WorldError(f"PostgreSQL at {shown} denied access: {reason}",
                          hint="the user needs CREATE on the database for dh's schema `dh`")
    if state == FENCED:  # the fence trigger's refusal (postgres_fencing.py)
        return fenced_error(WorldError(f"PostgreSQL error at {shown}: {reason}"))
    return WorldError(f"PostgreSQL error at {shown}: {reason}")
