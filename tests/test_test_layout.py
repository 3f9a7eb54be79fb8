"""How the tests share code: helpers live in tests/helpers/ (and tests/rig.py, tests/pg.py,
tests/fakes/), and no test module imports another test module, at any level (a test module
changes for its own tests; a helper it lent out breaks another file's tests). The harnesses a
test runs come from the wrapper registry (tests/helpers/harnesses.py): a list of harness names
kept in a test module leaves a fifth harness silently untested."""

from __future__ import annotations

import ast
from pathlib import Path

from dh_cli import wrappers
from tests.helpers import harnesses

NAMES = {word for w in wrappers.REGISTRY.values() for word in (w.name, *w.aliases)}

TESTS = Path(__file__).resolve().parent

# The team-world branch rewrites these (test_live_worker imports test_live_world;
# test_takeover_real imports test_real_harnesses and test_workspace_e2e): it empties this set.
TEMPORARY_TEAM_FILES: set[str] = set()


def checked_modules() -> list[tuple[str, ast.Module]]:
    paths = {p.relative_to(TESTS).as_posix(): p for p in sorted(TESTS.rglob("test_*.py"))
             if "fixtures" not in p.parts}
    return [(name, ast.parse(path.read_text())) for name, path in paths.items()
            if name not in TEMPORARY_TEAM_FILES]


def imported_test_modules(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or "", *(f"{node.module or ''}.{a.name}" for a in node.names)] \
            if isinstance(node, ast.ImportFrom) else []
        found += [n for n in names if any(part.startswith("test_") for part in n.split("."))]
    return found


def harness_lists(tree: ast.Module) -> list[int]:
    """Lines of a list, tuple or set literal naming every harness (by name or alias), outside
    an assert (where it is an expected value, not the list a test runs over)."""
    every = set(harnesses.ALL)
    asserted = {id(n) for a in ast.walk(tree) if isinstance(a, ast.Assert) for n in ast.walk(a)}
    return [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.List, ast.Tuple, ast.Set))
            and id(node) not in asserted and every <= _harnesses_named(node.elts)]


def _harnesses_named(elements: list[ast.expr]) -> set[str]:
    return {wrappers.get(e.value).name for e in elements
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in NAMES}


def test_the_checks_find_an_import_of_a_test_module_and_a_harness_list():
    tree = ast.parse("from .test_bad_input import one_error\nimport tests.test_export\n"
                     "from tests.helpers.cli import one_error\nfrom . import test_x\n"
                     "def f():\n    from tests.e2e.test_real_harnesses import logged\n"
                     "CASES = [h for h in ('claude', 'codex', 'opencode', 'pi')]\n"
                     "TUI = ['pi', 'claude-code']\n"
                     "assert {'claude-code', 'codex', 'opencode', 'pi'} == seen\n")
    assert sorted(imported_test_modules(tree)) == [
        ".test_x", "test_bad_input", "test_bad_input.one_error", "tests.e2e.test_real_harnesses",
        "tests.e2e.test_real_harnesses.logged", "tests.test_export"]
    assert harness_lists(tree) == [7]


def test_no_test_module_imports_another():
    found = {name: hits for name, tree in checked_modules() if (hits := imported_test_modules(tree))}
    assert found == {}, "move what they share into tests/helpers/"


def test_no_test_module_keeps_its_own_harness_list():
    found = {name: lines for name, tree in checked_modules() if (lines := harness_lists(tree))}
    assert found == {}, "use tests/helpers/harnesses.py (ALL, JSONL) or the registry"
