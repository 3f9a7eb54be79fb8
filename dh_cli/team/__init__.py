"""The team worlds: shared by every machine of a team, each holding sessions under leases
(protocol.py). One registry, as wrappers/ has one for harnesses: a world is one module with a
class implementing TeamWorld, plus its line here. The module is imported when a world is
opened, never before (psycopg, redis-py load only for a command that needs them)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:  # the protocol's module loads with a world, not with every command
    from .protocol import TeamWorld

# name -> "module:class" under this package
WORLDS = {
    "postgres": "postgres:PostgresWorld",
    "redis": "redis_world:RedisWorld",
}


def names() -> list[str]:
    return list(WORLDS)


def world_class(name: str) -> type[TeamWorld]:
    if name not in WORLDS:
        raise UsageError(f"unknown world {name!r}", hint=f"the team worlds are: {', '.join(WORLDS)}")
    module, cls = WORLDS[name].split(":")
    return getattr(import_module(f"{__name__}.{module}"), cls)


def configured_url(name: str, url: str | None = None) -> str | None:
    """--url, else the config's URL for that world (its file, or its variable)."""
    if url:
        return url
    from ..config import load  # the settings are checked too (DH_WORLD=mars is an error)

    return getattr(load().settings, f"{name}_url", None)


def open_world(name: str, url: str | None = None, migrate: bool = True,
               connect_timeout: int = 10) -> TeamWorld:
    """The team world `name` at `url` (else its configured URL), connected."""
    cls = world_class(name)
    return cls(configured_url(name, url), migrate=migrate, connect_timeout=connect_timeout)


def listed() -> str:
    """The team worlds' names, for help texts."""
    return ", ".join(WORLDS)


URL_HELP = ("URL of the --world (default: the config's <world>_url, else $DH_<WORLD>_URL;"
            " its password is never shown)")
