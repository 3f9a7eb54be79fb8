"""Write dh's man pages and shell completions (made by clidocs.py from the CLI itself) into
the repository's man/ and completions/.

    python -m dh_cli._gen_docs            # rewrite man/ and completions/
    python -m dh_cli._gen_docs --check    # exit 1, listing the stale files, if any differ

The output is deterministic, so the checked-in files can be compared byte for byte:
tests/test_docs.py fails when the CLI changed and this was not run."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .clidocs import SHELLS, completion, esc, man_pages, split_help, walk  # noqa: F401 (the docs' API)

ROOT = Path(__file__).resolve().parent.parent


# writing ------------------------------------------------------------------------------------
def render(app) -> dict[str, str]:
    """Every generated file, keyed by its path relative to the repository."""
    files = {f"man/{name}.1": text for name, text in man_pages(typer.main.get_command(app)).items()}
    for shell, name in SHELLS.items():
        files[f"completions/{name}"] = completion(shell)
    return files


def stale(files: dict[str, str], root: Path) -> list[str]:
    """Generated files that are missing or differ, and leftovers of removed groups."""
    out = []
    for rel, text in files.items():
        path = root / rel
        if not path.exists() or path.read_bytes() != text.encode("utf-8"):
            out.append(rel)
    return out + leftovers(files, root)


def leftovers(files: dict[str, str], root: Path) -> list[str]:
    found = [p.relative_to(root).as_posix() for p in (root / "man").glob("dh*.1")]
    return sorted(rel for rel in found if rel not in files)


def write(files: dict[str, str], root: Path) -> None:
    for rel in leftovers(files, root):
        (root / rel).unlink()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    from .cli import app

    argv = sys.argv[1:] if argv is None else argv
    files = render(app)
    if "--check" in argv:
        out_of_date = stale(files, ROOT)
        for rel in out_of_date:
            print(f"stale: {rel} (run `python -m dh_cli._gen_docs`)", file=sys.stderr)
        return 1 if out_of_date else 0
    write(files, ROOT)
    print(f"wrote {len(files)} files under {ROOT}/man and {ROOT}/completions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
