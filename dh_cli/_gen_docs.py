"""Generate dh's man pages and shell completions from the Typer app itself.

    python -m dh_cli._gen_docs            # rewrite man/ and completions/
    python -m dh_cli._gen_docs --check    # exit 1, listing the stale files, if any differ

The man pages are built by walking `typer.main.get_command(app)` (Typer carries its own copy
of Click, so Click-based man-page tools cannot read it); the completion scripts come from
`dh --show-completion SHELL`. The output is deterministic (no dates, no machine paths), so
the checked-in files can be compared byte for byte: tests/test_docs.py fails when the CLI
changed and this was not run."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import typer

from . import config, errors

ROOT = Path(__file__).resolve().parent.parent
NO_DETECT = "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"
SHELLS = {"bash": "dh.bash", "zsh": "_dh", "fish": "dh.fish"}

# EXIT STATUS comes from the error classes (errors.py), ENVIRONMENT from the settings and the
# variables read beside them (config.py): documented where they are decided.
EXIT_CODES = errors.exit_codes()
ENVIRONMENT = config.environment()

FILES = [
    ("$DH_HOME/dh.db", "The log: every session, native record and dh event (SQLite, WAL, mode 0600, "
                       "folder 0700), with dh.db-wal and dh.db-shm beside it."),
    ("$DH_HOME/locks/", "One lock file per session being run, so two dh processes never drive "
                        "one session."),
    ("$DH_HOME/checkpoint.lock", "Taken in turn by the dh processes of the machine while one folds "
                                 "the WAL back into the log."),
    ("$XDG_CONFIG_HOME/dh/config.toml", "Settings; see CONFIGURATION."),
    ("~/.claude/projects/", "Claude Code transcripts (read; rebuilt on resume when missing)."),
    ("~/.codex/sessions/", "Codex rollouts (read; rebuilt on resume when missing)."),
    ("~/.local/share/opencode/opencode.db", "OpenCode's database (read; restored through "
                                            "`opencode import` on resume)."),
    ("~/.pi/agent/sessions/", "Pi sessions (read; rebuilt on resume when missing)."),
]

CONFIG_EXAMPLE = """world = "local"
postgres_url = "postgresql://dh@db.internal/dh"
stall_timeout = 300
tool_grace = 3
continue_prompt = "Continue from where you left off."

[restart]
max_restarts = 5
start_secs = 1
backoff_cap = 30

[replay]
Bash = "never"
Read = "safe\""""


# reading the app ----------------------------------------------------------------------------
@dataclass
class Doc:
    path: str  # "dh log show"
    command: object  # the Click command or group
    ctx: object

    @property
    def is_group(self) -> bool:
        return hasattr(self.command, "commands")


def walk(app) -> list[Doc]:
    """The root and every group and command under it, depth first, in registration order."""
    root = typer.main.get_command(app)
    ctx = root.make_context("dh", [], resilient_parsing=True)
    out = [Doc("dh", root, ctx)]
    _walk(root, ctx, "dh", out)
    return out


def _walk(group, ctx, prefix: str, out: list[Doc]) -> None:
    for name, command in group.commands.items():
        if command.hidden:
            continue
        sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
        doc = Doc(f"{prefix} {name}", command, sub)
        out.append(doc)
        if doc.is_group:
            _walk(command, sub, doc.path, out)


def split_help(text: str | None) -> tuple[str, list[str], list[str]]:
    """(summary, paragraphs, example lines) of a command's help."""
    import inspect

    text = inspect.cleandoc(text or "").partition("\f")[0]
    body, _, example = text.partition("Example:")
    paragraphs = [p.strip() for p in body.split("\n\n") if p.strip()]
    summary = paragraphs.pop(0) if paragraphs else ""
    lines = [line.strip() for line in example.splitlines() if line.strip()]
    return " ".join(summary.split()), [" ".join(p.split()) for p in paragraphs], lines


def usage(doc: Doc) -> str:
    pieces = doc.command.collect_usage_pieces(doc.ctx)
    if doc.is_group:
        pieces = [p for p in pieces if p != "COMMAND [ARGS]..."] + ["COMMAND [ARGS]..."]
    return " ".join([doc.path, *pieces])


def options(doc: Doc) -> list[tuple[str, str]]:
    records = (p.get_help_record(doc.ctx) for p in doc.command.get_params(doc.ctx) if not p.hidden)
    return [r for r in records if r]


# roff ---------------------------------------------------------------------------------------
def esc(text: str) -> str:
    """Plain text as roff: backslashes and dashes escaped, no line starting a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.M)


def _bold_opts(term: str) -> str:
    """`-o, --output <path>` as bold names and an italic metavar."""
    names, metavar = [], []
    for token in term.split():
        if not metavar and (token.startswith("-") or not names):
            names.append(token.rstrip(","))
        else:
            metavar.append(token)
    bold = ", ".join(f"\\fB{esc(name)}\\fR" for name in names)
    return bold + (f" \\fI{esc(' '.join(metavar))}\\fR" if metavar else "")


def roff_command(doc: Doc, level: str = ".SS") -> list[str]:
    out = [f"{level} {esc(doc.path)}", f"\\fB{esc(usage(doc))}\\fR", *_prose(doc)]
    for term, help_ in options(doc):
        out += [".TP", _bold_opts(term), esc(" ".join(help_.split()))]
    return out


def roff_pairs(title: str, pairs: list[tuple[str, str]], bold: bool = True) -> list[str]:
    out = [f".SH {title}"]
    for term, text in pairs:
        out += [".TP", f"\\fB{esc(term)}\\fR" if bold else esc(term), esc(text)]
    return out


def _header(name: str, summary: str, version: str) -> list[str]:
    title = name.upper().replace(" ", "-")
    return [f'.TH {title} 1 "" "dh {version}" "User Commands"', ".SH NAME",
            f"{esc(name.replace(' ', '-'))} \\- {esc(summary)}"]


def _prose(doc: Doc) -> list[str]:
    """The help's paragraphs, then its Example: lines kept as they are (no filling)."""
    summary, paragraphs, example = split_help(doc.command.help)
    out = []
    for para in [summary, *paragraphs]:
        out += [".PP", esc(para)]
    if example:
        out += [".PP", "Example:", ".RS", ".nf", *[esc(line) for line in example], ".fi", ".RE"]
    return out


def _page_top(doc: Doc, version: str) -> list[str]:
    summary = split_help(doc.command.help)[0]
    return _header(doc.path, summary, version) + [
        ".SH SYNOPSIS", f"\\fB{esc(usage(doc))}\\fR", ".SH DESCRIPTION", *_prose(doc)[1:]]


def man_root(docs: list[Doc], version: str) -> str:
    root = docs[0]
    lines = _page_top(root, version) + [".SH OPTIONS"] + [x for term, help_ in options(root)
                                for x in (".TP", _bold_opts(term), esc(help_))]
    lines += [".SH COMMANDS"]
    for doc in docs[1:]:
        lines += roff_command(doc)
        if doc.is_group:
            lines += [".PP", f"See \\fB{esc(doc.path.replace(' ', '-'))}\\fR(1)."]
    lines += _common_sections(docs)
    return "\n".join(lines) + "\n"


def man_group(group: Doc, docs: list[Doc], version: str) -> str:
    lines = _page_top(group, version) + [".SH COMMANDS"]
    for doc in docs:
        if doc.path.startswith(group.path + " "):
            lines += roff_command(doc)
    lines += _exit_section() + [".SH SEE ALSO", "\\fBdh\\fR(1)"]
    return "\n".join(lines) + "\n"


def _exit_section() -> list[str]:
    return roff_pairs("EXIT STATUS", EXIT_CODES)


def _common_sections(docs: list[Doc]) -> list[str]:
    lines = _exit_section() + roff_pairs("ENVIRONMENT", ENVIRONMENT)
    lines += roff_pairs("FILES", FILES, bold=False)
    lines += [".SH CONFIGURATION", esc("$XDG_CONFIG_HOME/dh/config.toml holds defaults for "
              "dh run and dh resume. A setting comes from, lowest first: dh's default, the "
              "file, the environment, a command-line flag; dh config show prints each one "
              "with where it came from. For example:"), ".RS", ".nf",
              *[esc(x) for x in CONFIG_EXAMPLE.splitlines()], ".fi", ".RE"]
    groups = [d.path.replace(" ", "-") for d in docs if d.is_group and d.path != "dh"]
    lines += [".SH SEE ALSO", ", ".join(f"\\fB{esc(g)}\\fR(1)" for g in groups)]
    return lines


# completions --------------------------------------------------------------------------------
def completion(app, shell: str) -> str:
    """What `dh --show-completion SHELL` prints, without looking at the user's shell."""
    from typer.testing import CliRunner

    # Typer reads this while it builds the command (before CliRunner's env applies): with it,
    # --show-completion takes the shell as a value instead of detecting the user's.
    previous = os.environ.get(NO_DETECT)
    os.environ[NO_DETECT] = "1"
    try:
        result = CliRunner().invoke(app, ["--show-completion", shell], prog_name="dh")
    finally:
        os.environ.pop(NO_DETECT) if previous is None else os.environ.update({NO_DETECT: previous})
    if result.exit_code != 0 or not result.stdout.strip():
        raise RuntimeError(f"--show-completion {shell} failed: {result.output}")
    header = (f"# {shell} completion for dh, generated by `python -m dh_cli._gen_docs`.\n"
              f"# It asks dh itself for the candidates, so it follows every command dh has.\n")
    return header + result.stdout.rstrip("\n") + "\n"


# writing ------------------------------------------------------------------------------------
def man_pages(app) -> dict[str, str]:
    """Every man page by its name: dh, then dh-GROUP for each command group."""
    from . import __version__

    docs = walk(app)
    pages = {"dh": man_root(docs, __version__)}
    for doc in docs[1:]:
        if doc.is_group:
            pages[doc.path.replace(" ", "-")] = man_group(doc, docs, __version__)
    return pages


def render(app) -> dict[str, str]:
    """Every generated file, keyed by its path relative to the repository."""
    files = {f"man/{name}.1": text for name, text in man_pages(app).items()}
    for shell, name in SHELLS.items():
        files[f"completions/{name}"] = completion(app, shell)
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
