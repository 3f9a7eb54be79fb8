"""Every team world in the registry (dh_cli/team/__init__.py, WORLDS) implements TeamWorld
(dh_cli/team/protocol.py) member by member, and each method with the protocol's parameters:
the same names, kinds and defaults in the same order. The code that drives a world (leases,
takeover, shipping, workers) calls it through the protocol, so a world whose parameter is
named or defaulted otherwise breaks a keyword call only when that path runs."""

from __future__ import annotations

import inspect

import pytest

from dh_cli import team
from dh_cli.team.protocol import TeamWorld
from dh_cli.worlds.base import World

PROTOCOL_PLUMBING = {"__init__"}  # the one dunder a world declares (open_world calls it)


def declared(protocol: type) -> dict[str, object]:
    """The members a protocol class declares itself and through the protocols it extends:
    methods, properties, staticmethods and annotated attributes (as None)."""
    members: dict[str, object] = {}
    for cls in reversed([c for c in protocol.__mro__ if c in (World, TeamWorld) or c is protocol]):
        members.update({name: None for name in vars(cls).get("__annotations__", {})})
        members.update({name: value for name, value in vars(cls).items()
                        if (not name.startswith("_") or name in PROTOCOL_PLUMBING)
                        and callable(value) or isinstance(value, (property, staticmethod))})
    return members


def shape(value) -> list[tuple]:
    """(name, kind, default) of each parameter, `self` included."""
    function = value.__func__ if isinstance(value, staticmethod) else value
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def differences(world: type, protocol: type = TeamWorld) -> list[str]:
    found = []
    for name, wanted in declared(protocol).items():
        if not hasattr(world, name) and name not in _annotations(world):
            found.append(f"{world.__name__} lacks {name}")
        elif isinstance(wanted, property) and not isinstance(inspect.getattr_static(world, name), property):
            found.append(f"{world.__name__}.{name} is not a property")
        elif isinstance(wanted, staticmethod) and not isinstance(inspect.getattr_static(world, name), staticmethod):
            found.append(f"{world.__name__}.{name} is not a staticmethod")
        elif callable(wanted) and not isinstance(wanted, property):
            have = inspect.getattr_static(world, name)
            if shape(have) != shape(wanted):
                found.append(f"{world.__name__}.{name}{inspect.signature(_function(have))} "
                             f"differs from the protocol's {inspect.signature(_function(wanted))}")
    return found


def _annotations(cls: type) -> set[str]:
    return {name for c in cls.__mro__ for name in vars(c).get("__annotations__", {})}


def _function(value):
    return value.__func__ if isinstance(value, staticmethod) else value


@pytest.mark.parametrize("name", team.names())
def test_every_registered_world_implements_the_team_protocol(name):
    assert differences(team.world_class(name)) == []


def test_the_protocol_holds_what_the_team_code_calls():
    members = declared(TeamWorld)
    assert {"resolve_url", "url_variable", "shown", "url", "masks_records", "lease_claim",
            "fence", "ws_put", "migrate", "__init__", "find_session", "lock_session"} <= set(members)


def test_a_renamed_parameter_a_changed_default_or_a_missing_member_is_found():
    world = team.world_class(team.names()[0])

    class Renamed(world):
        def lease_take(self, session_id, owner, ttl_s):  # holder renamed
            return None

    class Defaulted(world):
        def lease_renew(self, session_id, epoch, pid=0):  # the protocol's default is None
            return False

    class KeywordOnly(world):
        def fence(self, session_id, *, epoch):
            return None

    class NotStatic(world):
        def resolve_url(self, url):
            return url

    assert differences(Renamed) == [
        "Renamed.lease_take(self, session_id, owner, ttl_s) differs from the protocol's "
        "(self, session_id: 'str', holder: 'Holder', ttl_s: 'float') -> 'int | None'"]
    assert len(differences(Defaulted)) == 1 and "lease_renew" in differences(Defaulted)[0]
    assert len(differences(KeywordOnly)) == 1 and "fence" in differences(KeywordOnly)[0]
    assert differences(NotStatic) == ["NotStatic.resolve_url is not a staticmethod"]

    class Protocolish:
        name = "x"

    assert "Protocolish lacks lease_take" in differences(Protocolish)


def test_the_registry_the_settings_and_the_test_servers_name_the_same_worlds():
    """A team world is added in one place each (README, "Adding a team world"): the registry,
    the settings (its name as a `world`, its `<name>_url` and that URL's variables) and the
    table of test servers; a world missing from one of them is found here."""
    import dataclasses
    import typing

    from dh_cli import config
    from tests.helpers.team_worlds import SERVERS

    config._schema()  # resolves the names the settings' annotations use
    registered = set(team.names())
    choices = set(typing.get_args(typing.get_type_hints(config.Settings)["world"])) - {"local"}
    urls = {f.name.removesuffix("_url") for f in dataclasses.fields(config.Settings) if f.name.endswith("_url")}
    variables = {target.removesuffix("_url") for target in config.ENV_KEYS.values() if target.endswith("_url")}
    assert registered == choices == urls == variables == set(SERVERS)
    for name in registered:  # the variable a worker hands its child dh is one the settings read
        assert config.ENV_KEYS[team.world_class(name).url_variable] == f"{name}_url"
