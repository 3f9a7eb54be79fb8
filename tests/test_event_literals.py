"""dh's journal event types are written only through their constructors in dh_cli/events.py:
no other module passes an event type as a string to `add_event`, builds a (type, details)
pair for a source's commit from one, or compares an event's type with one. A type spelled
twice drifts (a reader that looks for "repaired" finds nothing once a writer says "repair")."""

from __future__ import annotations

import ast
from pathlib import Path

from dh_cli import events

ROOT = Path(__file__).resolve().parent.parent / "dh_cli"
OWN = ("events.py", "events_text.py")

TEMPORARY_TEAM_WING: set[str] = set()


def _literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and node.value in events.TYPES:
        return node.value
    return None


def _is_type_of_event(node: ast.AST) -> bool:
    """`e.type` or `e["type"]`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "type"
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
        and node.slice.value == "type"


def _written(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "add_event":
            kwargs = {k.arg: k.value for k in node.keywords}
            return _literal(node.args[1] if len(node.args) > 1 else kwargs.get("type"))
        if name == "Event" and node.args:
            return _literal(node.args[0])
    if isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[1], ast.Dict):
        return _literal(node.elts[0])
    if isinstance(node, ast.Compare):
        sides = (node.left, *node.comparators)
        if any(_is_type_of_event(side) for side in sides):
            return next((found for side in sides if (found := _literal(side))), None)
    return None


def literals(source: str) -> list[tuple[int, str]]:
    nodes = ast.walk(ast.parse(source))
    return sorted((node.lineno, found) for node in nodes if (found := _written(node)))


def test_the_check_finds_each_form_of_a_literal_event_type():
    source = '''
world.add_event(sid, "repaired", {"call_id": c}, phase="outcome")
world.add_event(sid, type="moved")
world.commit(source, [], [("source_back", {"path": p})])
launched = [e for e in world.events(sid) if e.type == "launched"]
repaired = {e["details"]["call_id"] for e in rows if e["type"] == "repaired"}
Event("stall", {"timeout": 3})
world.add_event(sid, events.REPAIRED, {})
world.commit(source, [], [events.source_back(p).pair()])
kind = {"run": 1}
'''
    assert literals(source) == [(2, "repaired"), (3, "moved"), (4, "source_back"), (5, "launched"),
                                (6, "repaired"), (7, "stall")]


def test_no_module_writes_an_event_type_as_a_string():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name in OWN or name in TEMPORARY_TEAM_WING:
            continue
        found += [f"{name}:{line} {type_!r}" for line, type_ in literals(path.read_text())]
    assert found == [], "use the constructor in dh_cli/events.py:\n" + "\n".join(found)


def test_the_temporary_team_wing_entries_still_hold_a_literal():
    """A file fixed on the team branch leaves this list, so that it only shrinks."""
    for name in TEMPORARY_TEAM_WING:
        assert literals((ROOT / name).read_text()), f"{name} writes no literal now: take it out"
