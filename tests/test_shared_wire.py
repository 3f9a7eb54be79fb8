"""The shared mirror's messages are one table (mirror/shared_wire.py TO_SERVER, TO_CLIENT),
built with `message()` and dispatched on by the table's names on both sides: no other module
spells a message as a dict with an "op", and each side handles every message sent to it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from dh_cli.mirror import shared_wire as wire

MIRROR = Path(wire.__file__).parent
NAMES = {value: name for name, value in vars(wire).items()
         if name.isupper() and isinstance(value, str) and value in wire.TO_SERVER | wire.TO_CLIENT}


def test_a_message_carries_exactly_the_fields_of_its_row():
    assert json.loads(wire.message(wire.PROGRESS, at=1.5)) == {"op": "progress", "at": 1.5}
    with pytest.raises(TypeError):
        wire.message(wire.PROGRESS)
    with pytest.raises(TypeError):
        wire.message(wire.RELEASE, committed={})
    with pytest.raises(KeyError):
        wire.message("hello")


def _spelled_out(path: Path) -> list[int]:
    """Lines with a dict literal keyed "op", or an op's name compared as a string."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        keys = node.keys if isinstance(node, ast.Dict) else []
        if any(isinstance(k, ast.Constant) and k.value == "op" for k in keys):
            found.append(node.lineno)
        elif isinstance(node, ast.Compare):
            sides = (node.left, *node.comparators)
            if any(isinstance(s, ast.Constant) and s.value in NAMES for s in sides):
                found.append(node.lineno)
    return found


def test_no_module_of_the_mirror_spells_a_message_itself():
    found = {p.name: lines for p in sorted(MIRROR.glob("*.py"))
             if p.name != "shared_wire.py" and (lines := _spelled_out(p))}
    assert found == {}


def _names_used(path: Path) -> set[str]:
    return {node.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "wire"}


@pytest.mark.parametrize("side, receives", [("shared_server.py", wire.TO_SERVER),
                                            ("shared_client.py", wire.TO_CLIENT)])
def test_each_side_handles_every_message_sent_to_it(side, receives):
    assert {NAMES[op] for op in receives} <= _names_used(MIRROR / side)
