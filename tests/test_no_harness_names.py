"""Everything that differs between harnesses lives in dh_cli/wrappers/ and dh_cli/stores/:
no other module compares against a harness's name or alias (or keys a table by one), or
compares a `kind` with a harness's source kind. The words come from the wrapper registry, so
a new harness is covered as it is added. On the code before the NativeStore change (e2391cd)
it found 21: 19 comparisons and 2 tables (CARRIERS, LAYOUT_DEPTH)."""

from __future__ import annotations

import ast
from pathlib import Path

from dh_cli.wrappers import REGISTRY

ROOT = Path(__file__).resolve().parent.parent / "dh_cli"
ALLOWED = ("wrappers", "stores")


def harness_names() -> set[str]:
    return {word for w in REGISTRY.values() for word in (w.name, *w.aliases)}


def source_kinds() -> set[str]:
    """Compared only against a `kind`: "jsonl" is also an export format's name."""
    return {w.source_kind for w in REGISTRY.values()}


def harness_words() -> tuple[set[str], set[str]]:
    return harness_names(), source_kinds()


def _constants(node: ast.AST) -> list[str]:
    """The string constants a comparison operand is, or holds (a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _is_kind(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name.endswith("kind")


def _compared(node: ast.Compare, names: set[str], kinds: set[str]) -> list[str]:
    sides = (node.left, *node.comparators)
    found = [c for side in sides for c in _constants(side) if c in names]
    if any(_is_kind(side) for side in sides):
        found += [c for side in sides for c in _constants(side) if c in kinds]
    return found


def _named(node: ast.AST, words: tuple[set[str], set[str]]) -> str | None:
    """What in this node tests or tables a harness word, or None."""
    names, kinds = words
    if isinstance(node, ast.Compare):
        found = _compared(node, names, kinds)
        return f"compares with {found[0]!r}" if found else None
    if isinstance(node, ast.Dict):
        found = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in names]
        return f"a table keyed by {found[0]!r}" if found else None
    if isinstance(node, ast.MatchValue):
        found = _constants(node.value)
        return f"matches {found[0]!r}" if found and found[0] in names else None
    return None


def hits(root: Path, words: tuple[set[str], set[str]]) -> list[str]:
    """file:line what, for every harness-word test outside the allowed packages under root."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            what = _named(node, words)
            if what:
                out.append(f"{path.relative_to(root.parent)}:{node.lineno}: {what}")
    return out


def test_the_words_come_from_the_registry():
    assert {"claude-code", "claude", "codex", "opencode", "pi"} <= harness_names()
    assert {"jsonl", "opencode"} <= source_kinds()


def test_no_harness_name_or_source_kind_is_tested_outside_wrappers_and_stores():
    found = hits(ROOT, harness_words())
    assert found == [], "ask the wrapper or its store instead:\n" + "\n".join(found)


def test_the_check_finds_a_comparison_and_a_table(tmp_path):
    """The checker itself: each form it looks for is found, and the allowed packages skipped."""
    (tmp_path / "dh_cli" / "wrappers").mkdir(parents=True)
    (tmp_path / "dh_cli" / "a.py").write_text(
        'if source.kind == "opencode":\n    pass\n'
        'T = {"codex": 1}\n'
        'ok = harness in ("pi", "x")\n'
        'match name:\n    case "claude":\n        pass\n'
        'path = root / "opencode"\n'
        'if fmt == "jsonl" or source.kind != "jsonl":\n    pass\n')
    (tmp_path / "dh_cli" / "wrappers" / "w.py").write_text('x = name == "pi"\n')
    found = hits(tmp_path / "dh_cli", harness_words())
    assert [f.split(": ", 1)[0] for f in found] == ["dh_cli/a.py:1", "dh_cli/a.py:3", "dh_cli/a.py:4",
                                                     "dh_cli/a.py:6", "dh_cli/a.py:9"]


def test_every_wrapper_names_a_store_that_keeps_its_source_kind():
    from dh_cli.stores import store_for, store_of
    from dh_cli.models import Source

    for wrapper in REGISTRY.values():
        store = store_of(wrapper)
        assert wrapper.source_kind in store.kinds, wrapper.name
        assert store_for(Source(1, "s", wrapper.source_kind, "x")) is store
