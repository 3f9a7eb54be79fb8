"""The harnesses the tests run, read from the wrapper registry: a harness added to dh is in
every parametrized test at once (failing loudly where it has no fixtures or no headless
arguments yet), never silently left out by a list a test keeps of its own."""

from __future__ import annotations

from dh_cli.wrappers import REGISTRY

ALL = sorted(REGISTRY)
# those whose native state is JSONL files (stores/jsonl.py), for tests of that store
JSONL = [name for name in ALL if REGISTRY[name].store == "jsonl"]
