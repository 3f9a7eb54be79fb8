"""Help text in the CLI's own words. Typer labels each value with its Python type
(`<bool>` on a flag, `<list[str]>`, `<str>`, `<int range>`); dh's help and man pages name
values as command-line tools do: nothing for a flag, TEXT, N, PATH, and `...` for several."""

from __future__ import annotations

from typer import core

_WORDS = {"str": "TEXT", "int": "N", "float": "NUMBER", "path": "PATH", "file": "PATH",
          "directory": "PATH", "int range": "N", "float range": "NUMBER"}
_python_label = core._TyperParameter.display_type


def _display_type(self, ctx) -> str | None:
    if getattr(self, "is_flag", False) or getattr(self, "count", False):
        return None
    label = _python_label(self, ctx).strip("<>")
    if label.startswith("list[") and label.endswith("]"):
        return _WORDS.get(label[5:-1], label[5:-1].upper()) + "..."
    return _WORDS.get(label, label)


def install() -> None:
    """Use the CLI's words in every help screen and man page (called once by dh_cli.cli)."""
    core._TyperParameter.display_type = _display_type
