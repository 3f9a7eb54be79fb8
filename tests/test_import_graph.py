"""dh_cli's modules import one another without a cycle, and its packages stand in one order
(README, "How it is built"): a package imports only leaf modules and the packages below it.
Every import counts, at module level and inside a function alike: a function-level import
hides a cycle from Python's loader, not from the reader who has to know both modules to change
either. The module-level check alone let 10 packages stand on one package-level loop, each step
of it a different module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "dh_cli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(node: ast.AST, package: str) -> list[str]:
    """The module names an import statement may name (`from a import b` may import a.b)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [target] + [f"{target}.{alias.name}" for alias in node.names]


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = (t for node in ast.walk(ast.parse(path.read_text())) for t in imported(node, package))
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_function_level_imports_and_the_checker_finds_a_cycle():
    graph = import_graph()
    # dh_cli/cli.py imports commands/status.py only inside root() (the bare `dh`)
    assert "dh_cli.cli" in graph and "dh_cli.commands.status" in graph["dh_cli.cli"]
    # dh_cli/worlds/local_records.py imports search.py only inside a function
    assert "dh_cli.worlds.search" in graph["dh_cli.worlds.local_records"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_dh_cli_has_no_import_cycle():
    found = cycles(import_graph())
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_every_relative_import_names_a_module_of_dh_cli():
    """A module moved to another package keeps working only if its relative imports moved with
    it; one inside a function fails only when that function runs (seen after the move of the
    log commands into commands/), so every one is checked here."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    missing = []
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and imported(node, package)[0] not in paths:
                missing.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {imported(node, package)[0]}")
    assert missing == []


# Bottom to top. A top-level module of dh_cli not named here is a leaf module (errors, models,
# paths, util, config, ...): it stands below every package and imports none.
ORDER = ("documents", "wrappers", "worlds", "workspace", "stores", "mirror", "supervisor", "resume",
         "team", "logviews", "serve", "demo", "doctor", "commands", "cli", "__main__", "_gen_docs")


def place(module: str) -> str:
    """The package (or top-level module named in ORDER) a module belongs to; "" for a leaf."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else ""


def upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    rank = {name: n for n, name in enumerate(ORDER, 1)} | {"": 0}
    return {(a, b) for a, targets in graph.items() for b in targets if rank[place(b)] > rank[place(a)]}


def test_the_order_checker_finds_an_upward_import_and_leaves_a_downward_one():
    graph = {"dh_cli.stores.jsonl": {"dh_cli.mirror.tailer", "dh_cli.wrappers.base", "dh_cli.util"},
             "dh_cli.util": {"dh_cli.worlds.locks"}, "dh_cli.cli": {"dh_cli.commands.run"}}
    assert upward(graph) == {("dh_cli.stores.jsonl", "dh_cli.mirror.tailer"),
                             ("dh_cli.util", "dh_cli.worlds.locks")}


def test_every_package_has_its_place_in_the_order():
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages - set(ORDER) == set(), "add the new package to ORDER (and to the README)"


def test_the_readme_states_the_order():
    readme = " ".join((PACKAGE.parent / "README.md").read_text().split())
    packages = [name for name in ORDER if (PACKAGE / name).is_dir()]
    assert " < ".join(f"`{name}/`" for name in packages) in readme


def test_no_package_imports_one_above_it():
    found = upward(import_graph())
    assert found == set(), "imports up the package order:\n" + "\n".join(f"{a} -> {b}" for a, b in sorted(found))


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which packages (or leaves, "") import which, a package's own modules left out."""
    packages: dict[str, set[str]] = {}
    for a, targets in graph.items():
        packages.setdefault(place(a), set()).update(place(b) for b in targets if place(b) != place(a))
    for targets in list(packages.values()):
        for b in targets:
            packages.setdefault(b, set())
    return packages


def test_the_package_graph_finds_a_loop_between_two_packages():
    graph = {"dh_cli.worlds.sync": {"dh_cli.workspace.store"}, "dh_cli.workspace.store": {"dh_cli.worlds.local"},
             "dh_cli.worlds.local": set()}
    assert cycles(package_graph(graph)) == [["workspace", "worlds"]]


def test_no_two_packages_import_each_other_in_a_loop():
    found = cycles(package_graph(import_graph()))
    assert found == [], "package cycles:\n" + "\n".join(" <-> ".join(c) for c in found)
